"""Explicit memory: each user's workspace of files (`bm fs`), indexed for recall.

Layout (created on first use of ``bm fs``)::

    /.profile/   the user's bio and preferences      indexed, memories of type ``fact``
    /notes/      the user's notes                    indexed, memories of type ``concept``
    /drafts/     work-in-progress deliverables       not indexed
    /system/     configs                             not indexed

Every path lives in one of these four areas: ``/notes/a.md``, ``notes/a.md`` and
``/notes/./x/../a.md`` are the same file; ``..`` above the root, a path outside the four
areas (``/etc/passwd``), a NUL byte, and any path that resolves (through a symlink)
outside the workspace root are refused with an ``Error:`` line.  A host path inside the
root (``$DATA/workspace/ann/notes/a.md``) is taken as the workspace path it names.

Storage sits behind :class:`Backend` (read_bytes, write_bytes (atomic), append, delete,
move, list, stat with size, mtime and sha256, mkdir), so the agent code never sees where
files live.  :class:`LocalBackend` keeps one workspace per user in
``<data_dir>/workspace/<user>/`` (the user id with characters outside ``[A-Za-z0-9._@+-]``
and a leading dot %-escaped); an S3 backend comes with the sync issue.

Indexing: a UTF-8 file under /.profile or /notes (up to 1 MiB, any extension) is cut into
chunks of about 800 characters at headings and paragraphs (a long section is continued
with its heading and ~120 characters of overlap), each stored as a memory of the user
(agent: none, source ``workspace``, ts = the file's mtime) with meta ``{"kind": "file",
"path", "chunk", "chunks", "sha256"}`` and provenance ``[{"path", "chunk"}]``, so
``bm recall`` finds notes with their file.  Every ``bm fs write|append|rm|mv`` forgets the
file's old chunks (``memory.forget``, their text redacted from the log) and adds the new
ones in one op-log transaction.  Files changed on disk behind bm's back are picked up by
:func:`refresh` (``bm fs index``; meant to run at the start of recall): it compares size
and mtime with a local stat cache (table ``workspace_stat``, not replicated and emptied
by ``bm rebuild``, after which it re-hashes once) and re-indexes a file only when its
sha256 differs from the indexed one; with nothing changed it costs well under 2 ms for a
workspace of 50 files.  Writers take a file lock (``<data_dir>/workspace/.lock``), so two
processes never index the same change twice.

``bm forget --user U`` removes U's workspace directory (the chunk memories go with U's
other memories).  ``bm export`` carries every workspace file as ``{"kind": "file",
"user", "path", "sha256", "text" | "base64"}`` (base64 for content that is not UTF-8);
``bm import`` writes a file only where none exists, without re-indexing: the exported
chunk memories come back as memories, and their sha256 matches the file.
"""
from __future__ import annotations

import base64
import fnmatch
import hashlib
import os
import re
import shutil
import stat as stat_mod
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Protocol

from .errors import InvalidInput, NotFound, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory

AREAS = (".profile", "notes", "drafts", "system")
INDEXED = {".profile": "fact", "notes": "concept"}   # area -> memory type of its chunks
CHUNK_CHARS = 800
CHUNK_OVERLAP = 120
INDEX_MAX_BYTES = 1 << 20
TMP_PREFIX = ".bm-tmp-"
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@+")
_AREA_HINT = "paths start with /.profile, /notes, /drafts or /system, e.g. /notes/ideas.md"

SCHEMA = [
    # a local cache (not an op projection): what each indexed file looked like when last
    # indexed, so refresh can skip hashing unchanged files
    """CREATE TABLE workspace_stat(user_id TEXT NOT NULL, path TEXT NOT NULL, size INTEGER NOT NULL,
       mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL, chunks INTEGER NOT NULL,
       PRIMARY KEY(user_id, path))""",
    # the chunks of a user's files, found without scanning the user's memories
    "CREATE INDEX memories_files ON memories(user_id, json_extract(meta, '$.path')) "
    "WHERE json_extract(meta, '$.kind') = 'file'",
]
_FILES_SQL = ("SELECT id, op_id, json_extract(meta, '$.path'), json_extract(meta, '$.sha256') FROM memories "
              "WHERE user_id = ? AND json_extract(meta, '$.kind') = 'file'")


# -- paths --------------------------------------------------------------------------------------
def dir_name(user: str) -> str:
    """The directory name of a user's workspace (reversible with urllib's unquote)."""
    out = "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
                  for c in user)
    return "%2E" + out[1:] if out.startswith(".") else out


def workspace_root(data_dir: Path, user: str) -> Path:
    return Path(data_dir) / "workspace" / dir_name(user)


def backend_for(mem: "Memory", user: str) -> "Backend":
    """The backend of a user's workspace: the one place that picks where files live
    (the local directory today; an S3 prefix once the sync issue brings the client)."""
    return LocalBackend(workspace_root(mem.paths.data_dir, user))


def normalize(path: Any, *, root: Path | None = None) -> str:
    """A workspace path (``/notes/a.md``; ``/`` for the root): see the module doc."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str) or not path:
        raise InvalidInput(f"invalid workspace path {path!r}", hint=_AREA_HINT)
    if "\x00" in path:
        raise InvalidInput(f"path {path!r} contains a NUL byte", hint="remove the NUL character from the path")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"path {path!r} is not valid UTF-8", hint="use a UTF-8 path") from None
    original = path
    if root is not None and path.startswith(os.sep):
        for base in dict.fromkeys((str(root), os.path.realpath(root))):
            if path == base or path.startswith(base + os.sep):
                path = "/" + path[len(base):].lstrip("/")
                break
    parts: list[str] = []
    for comp in path.split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if not parts:
                raise InvalidInput(f"path {original!r} escapes the workspace ('..' above its root)",
                                   hint=_AREA_HINT)
            parts.pop()
            continue
        if len(comp.encode("utf-8")) > 255:
            raise InvalidInput(f"a name in path {original!r} is longer than 255 bytes", hint="use a shorter name")
        parts.append(comp)
    if parts and parts[0] not in AREAS:
        raise InvalidInput(f"path {original!r} is outside the workspace", hint=_AREA_HINT)
    return "/" + "/".join(parts)


def area(path: str) -> str | None:
    parts = path.strip("/").split("/")
    return parts[0] if parts and parts[0] else None


def indexed_type(path: str) -> str | None:
    """The memory type of a file's chunks, or None when its area is not indexed."""
    return INDEXED.get(area(path) or "")


def _file_path(path: str, what: str = "path") -> str:
    """A path naming something inside an area (not the root, not an area itself)."""
    if path.count("/") < 2:
        raise InvalidInput(f"{what} {path} is a workspace folder, not a file",
                           hint="name a file inside it, e.g. /notes/ideas.md")
    return path


# -- backend ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    path: str          # workspace path
    kind: str          # file | dir | link-outside (a symlink resolving outside the root: never followed)
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Stat:
    size: int
    mtime_ns: int
    sha256: str | None  # None for a directory, or when not asked for
    is_dir: bool


class Backend(Protocol):
    """Where a workspace's files live.  Paths are normalised workspace paths (``/notes/a.md``)."""

    def read_bytes(self, path: str) -> bytes: ...
    def write_bytes(self, path: str, data: bytes) -> None: ...      # atomic: old or new, never half
    def append(self, path: str, data: bytes) -> None: ...
    def delete(self, path: str, *, recursive: bool = False) -> None: ...
    def move(self, src: str, dst: str) -> None: ...
    def list(self, path: str, *, recursive: bool = False) -> list[Entry]: ...
    def stat(self, path: str, *, digest: bool = True) -> Stat | None: ...   # None: nothing there
    def mkdir(self, path: str) -> None: ...


class LocalBackend:
    """A directory on the local disk; every path is checked to resolve inside it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _real_root(self) -> str:
        return os.path.realpath(self.root)

    def host(self, path: str) -> Path:
        """The host path of a workspace path, refusing any that resolves outside the root."""
        rel = path.strip("/")
        host = self.root / rel if rel else self.root
        real, root = os.path.realpath(host), self._real_root()
        if real != root and not real.startswith(root + os.sep):
            raise InvalidInput(f"path {path} resolves outside the workspace (through a symlink, to {real})",
                               hint="bm follows no symlink out of the workspace; remove or re-point the link")
        return host

    def read_bytes(self, path: str) -> bytes:
        host = self.host(path)
        if host.is_dir():
            raise InvalidInput(f"{path} is a folder", hint=f"list it with `bm fs ls {path}`")
        try:
            return host.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no file {path} in the workspace", hint="list files with `bm fs ls` or `bm fs find`") from None

    def _parent(self, path: str) -> Path:
        host = self.host(path)
        if host.is_dir():
            raise InvalidInput(f"{path} is a folder", hint="name a file, e.g. /notes/ideas.md")
        parent = host.parent
        if parent.exists() and not parent.is_dir():
            raise InvalidInput(f"{path}: {os.path.dirname(path)} is a file, not a folder", hint="pick another path")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise InvalidInput(f"{path}: a part of it is a file, not a folder", hint="pick another path") from None
        return host

    def write_bytes(self, path: str, data: bytes) -> None:
        host = self._parent(path)
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=host.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, host)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def append(self, path: str, data: bytes) -> None:
        host = self._parent(path)
        with open(host, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def delete(self, path: str, *, recursive: bool = False) -> None:
        host = self.host(path)
        if host.is_symlink() or not host.is_dir():
            try:
                host.unlink()
            except FileNotFoundError:
                raise NotFound(f"no file {path} in the workspace", hint="list files with `bm fs ls`") from None
            return
        if not recursive:
            raise InvalidInput(f"{path} is a folder", hint=f"add -r to remove it and everything in it: bm fs rm -r {path}")
        shutil.rmtree(host)

    def move(self, src: str, dst: str) -> None:
        s = self.host(src)
        if not s.exists() and not s.is_symlink():
            raise NotFound(f"no file {src} in the workspace", hint="list files with `bm fs ls`")
        os.replace(s, self._parent(dst))

    def mkdir(self, path: str) -> None:
        host = self.host(path)
        if host.exists() and not host.is_dir():
            raise InvalidInput(f"{path} is a file, not a folder", hint="move the file away first")
        host.mkdir(parents=True, exist_ok=True)

    def stat(self, path: str, *, digest: bool = True) -> Stat | None:
        host = self.host(path)
        try:
            st = host.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat_mod.S_ISDIR(st.st_mode):
            return Stat(0, st.st_mtime_ns, None, True)
        sha = hashlib.sha256(host.read_bytes()).hexdigest() if digest else None
        return Stat(st.st_size, st.st_mtime_ns, sha, False)

    def list(self, path: str, *, recursive: bool = False) -> list[Entry]:
        host = self.host(path)
        if not host.is_dir():
            st = self.stat(path, digest=False)
            if st is None:
                raise NotFound(f"nothing at {path} in the workspace", hint="list files with `bm fs ls`")
            return [Entry(path, "file", st.size, st.mtime_ns)]
        out: list[Entry] = []
        self._walk(host, path.rstrip("/"), self._real_root(), recursive, out)
        return out

    @staticmethod
    def _walk(host: Path, prefix: str, root: str, recursive: bool, out: list[Entry]) -> None:
        try:
            entries = sorted(os.scandir(host), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return
        for e in entries:
            if e.name.startswith(TMP_PREFIX):
                continue
            wpath = f"{prefix}/{e.name}"
            link = e.is_symlink()
            if link:
                real = os.path.realpath(e.path)
                if real != root and not real.startswith(root + os.sep):
                    out.append(Entry(wpath, "link-outside", 0, 0))
                    continue
            try:
                st = e.stat()
            except OSError:  # a dangling link
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                out.append(Entry(wpath, "dir", 0, st.st_mtime_ns))
                if recursive and not link:  # a link inside the root is listed, never walked (no loops)
                    LocalBackend._walk(Path(e.path), wpath, root, recursive, out)
            elif stat_mod.S_ISREG(st.st_mode):
                out.append(Entry(wpath, "file", st.st_size, st.st_mtime_ns))


# -- chunking -----------------------------------------------------------------------------------
_HEADING = re.compile(r"^#{1,6}\s+\S")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def chunk_text(text: str, size: int = CHUNK_CHARS, overlap: int = CHUNK_OVERLAP) -> list[str]:
    """Chunks of about ``size`` characters, cut at headings and paragraphs (a heading
    starts a new chunk once the current one is half full; a section continued in a new
    chunk repeats its heading and the last ~``overlap`` characters)."""
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    para: list[str] = []
    fence = False

    def flush_para() -> None:
        if para and any(line.strip() for line in para):
            sections[-1][1].append("\n".join(para).strip("\n"))
        para.clear()

    for line in text.replace("\r\n", "\n").split("\n"):
        if _FENCE.match(line):
            fence = not fence
        if not fence and _HEADING.match(line):
            flush_para()
            sections.append((line.strip(), []))
        elif not fence and not line.strip():
            flush_para()
        else:
            para.append(line.rstrip())
    flush_para()
    pieces: list[tuple[str, bool, str | None]] = []  # (text, starts a section, its heading)
    for heading, paras in sections:
        if heading is None and not paras:
            continue
        first = True
        for p in paras or [""]:
            for piece in _split_long(p, size):
                text_ = f"{heading}\n{piece}".strip("\n") if first and heading else piece
                pieces.append((text_, first, heading))
                first = False
    chunks: list[str] = []
    cur: list[str] = []
    for piece, starts, heading in pieces:
        length = sum(len(x) + 2 for x in cur)
        if cur and (length + len(piece) > size or (starts and length >= size // 2)):
            chunks.append("\n\n".join(cur).strip())
            cur = []
            if not starts:
                tail = _tail(chunks[-1], overlap)
                cur = [x for x in (heading, tail) if x]
        cur.append(piece)
    if cur and "\n\n".join(cur).strip():
        chunks.append("\n\n".join(cur).strip())
    return [c for c in chunks if c.strip()]


def _split_long(p: str, size: int) -> list[str]:
    if len(p) <= size:
        return [p]
    out, cur = [], ""
    for sentence in _SENTENCE.split(p):
        while len(sentence) > size:  # no sentence ends: cut at a space near the limit
            cut = sentence.rfind(" ", size // 2, size)
            cut = cut if cut > 0 else size
            if cur:
                out.append(cur)
                cur = ""
            out.append(sentence[:cut].rstrip())
            sentence = sentence[cut:].lstrip()
        if cur and len(cur) + 1 + len(sentence) > size:
            out.append(cur)
            cur = sentence
        else:
            cur = f"{cur} {sentence}" if cur else sentence
    if cur:
        out.append(cur)
    return out


def _tail(text: str, overlap: int) -> str:
    if overlap <= 0 or len(text) <= overlap:
        return ""
    tail = text[-overlap:]
    space = tail.find(" ")
    return tail[space + 1:].strip() if 0 <= space < len(tail) - 1 else tail.strip()


# -- index ------------------------------------------------------------------------------------
@contextmanager
def _lock(mem: "Memory") -> Iterator[None]:
    import fcntl

    base = Path(mem.paths.data_dir) / "workspace"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _indexed(mem: "Memory", user: str) -> dict[str, dict]:
    """path -> {"ids": [(memory id, op id)], "shas": {sha256}} of the user's file chunks."""
    out: dict[str, dict] = {}
    for mid, op_id, path, sha in mem.sql.conn.execute(_FILES_SQL, (user,)):
        entry = out.setdefault(path, {"ids": [], "shas": set()})
        entry["ids"].append((mid, op_id))
        entry["shas"].add(sha)
    return out


def _cache(mem: "Memory", user: str) -> dict[str, tuple]:
    return {r[0]: tuple(r[1:]) for r in mem.sql.conn.execute(
        "SELECT path, size, mtime_ns, sha256, chunks FROM workspace_stat WHERE user_id=?", (user,))}


def _scan(backend: Backend) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every regular file of the indexed areas that is safe to read."""
    out: dict[str, tuple[int, int]] = {}
    for a in INDEXED:
        try:
            st = backend.stat("/" + a, digest=False)
            if st is None or not st.is_dir:
                continue
            entries = backend.list("/" + a, recursive=True)
        except InvalidInput:  # the area itself is a link out of the root
            continue
        for e in entries:
            if e.kind == "file":
                out[e.path] = (e.size, e.mtime_ns)
    return out


def refresh(mem: "Memory", user: str | None = None, *, full: bool = False) -> dict | None:
    """Re-index the files of ``user``'s workspace changed since they were indexed (on disk,
    behind bm's back), forget the chunks of files gone; None when nothing changed (the
    cheap path: a directory scan and two indexed queries).  ``full``: re-hash every file."""
    user = mem.store.user(user)
    disk = _scan(backend_for(mem, user))
    cache = _cache(mem, user)
    indexed = _indexed(mem, user)
    # chunks pulled from another device (sync) index a file that lives on that device: its
    # absence here is not a deletion (only chunks this replica indexed are checked against disk)
    ours = {p for p, e in indexed.items() if any(str(op).rpartition(":")[0] == mem.log.replica for _, op in e["ids"])}
    if full:
        todo = set(disk) | set(cache) | ours
    else:
        todo = {p for p, st in disk.items()
                if (c := cache.get(p)) is None or (c[0], c[1]) != st
                or (p in indexed and indexed[p]["shas"] != {c[2]})}
        todo |= (set(cache) | ours) - set(disk)
    if not todo:
        return None
    return reindex(mem, user, todo)


def reindex(mem: "Memory", user: str, paths: Iterable[str], *, backend: Backend | None = None) -> dict:
    """Bring the chunks of ``paths`` in line with the files: unchanged content (by sha256)
    keeps its chunks; changed files get new chunks for old; gone or unindexable ones lose
    theirs.  One op-log transaction.  Returns ``{"indexed", "removed", "unchanged": [paths],
    "chunks": new chunks, "forgotten": old chunks forgotten}``."""
    from .clock import new_id

    backend = backend or backend_for(mem, user)
    report: dict[str, Any] = {"indexed": [], "removed": [], "unchanged": [], "chunks": 0, "forgotten": 0}
    with _lock(mem):
        mem.store.catch_up()
        indexed = _indexed(mem, user)
        cache = _cache(mem, user)
        forget: list[tuple[str, str]] = []
        adds: list[dict] = []
        stats: dict[str, tuple | None] = {}
        for path in sorted(set(paths)):
            st = None
            if indexed_type(path) is not None:
                try:
                    st = backend.stat(path, digest=False)
                except InvalidInput:  # resolves outside the root now: treat as gone
                    st = None
            old = indexed.get(path)
            if st is None or st.is_dir:
                if old:
                    forget.extend(old["ids"])
                    report["removed"].append(path)
                stats[path] = None
                continue
            data = backend.read_bytes(path)
            sha = hashlib.sha256(data).hexdigest()
            cached = cache.get(path)
            if (old and old["shas"] == {sha}) or (not old and cached and cached[2] == sha):
                # unchanged (a file whose chunks were all forgotten one by one stays so)
                stats[path] = (st.size, st.mtime_ns, sha, len(old["ids"]) if old else cached[3])
                report["unchanged"].append(path)
                continue
            if old:
                forget.extend(old["ids"])
            chunks = _file_chunks(data)
            ts = st.mtime_ns // 1_000_000
            for i, text in enumerate(chunks):
                adds.append({
                    "id": new_id("m", ts), "text": text, "type": indexed_type(path), "user": user,
                    "agent": None, "importance": 0.5, "ts": ts, "valid_from": None, "valid_to": None,
                    "source": "workspace",
                    "meta": {"kind": "file", "path": path, "chunk": i, "chunks": len(chunks), "sha256": sha},
                    "provenance": [{"path": path, "chunk": i}],
                })
            stats[path] = (st.size, st.mtime_ns, sha, len(chunks))
            report["indexed" if chunks else ("removed" if old else "unchanged")].append(path)
            report["chunks"] += len(chunks)
        report["forgotten"] = len(forget)
        if forget or adds:
            texts = [a["text"] for a in adds]
            missing = [t for t in dict.fromkeys(texts) if mem.log.cached_vector(mem.sql.model, t) is None]
            vecs = mem.store.embed_docs(missing) if missing else []
            with mem.log.write() as t:
                for mid, op_id in forget:
                    t.append("memory.forget", {"id": mid})
                    t.redact(op_id, {"id": mid, "redacted": True})
                for payload in adds:
                    t.append("memory.add", payload)
                for text, vec in zip(missing, vecs):
                    t.cache_vector(mem.sql.model, text, vec.tobytes())
            mem.store.catch_up()
        with mem.sql.write():
            for path, row in stats.items():
                if row is None:
                    mem.sql.conn.execute("DELETE FROM workspace_stat WHERE user_id=? AND path=?", (user, path))
                else:
                    mem.sql.conn.execute("INSERT OR REPLACE INTO workspace_stat VALUES(?,?,?,?,?,?)",
                                         (user, path, *row))
    return report


def _file_chunks(data: bytes) -> list[str]:
    """The chunks of an indexable file: UTF-8 text without NUL, up to INDEX_MAX_BYTES."""
    if len(data) > INDEX_MAX_BYTES or b"\x00" in data:
        return []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return []
    return chunk_text(text)


# -- the workspace ------------------------------------------------------------------------------
class Workspace:
    """One user's workspace over a backend (the local directory by default)."""

    def __init__(self, mem: "Memory", user: str | None = None, backend: Backend | None = None) -> None:
        self.mem = mem
        self.user = mem.store.user(user)
        self.root = workspace_root(mem.paths.data_dir, self.user)
        self.backend: Backend = backend or backend_for(mem, self.user)

    def path(self, path: Any) -> str:
        return normalize(path, root=self.root)

    def ensure_layout(self) -> None:
        for a in AREAS:
            self.backend.mkdir("/" + a)

    def _reindex(self, paths: Iterable[str]) -> dict:
        paths = [p for p in paths if indexed_type(p) is not None]
        if not paths:
            return {"indexed": [], "removed": [], "unchanged": [], "chunks": 0, "forgotten": 0}
        return reindex(self.mem, self.user, paths, backend=self.backend)

    @staticmethod
    def _entry(e: Entry) -> dict:
        from .clock import iso

        return {"path": e.path, "name": e.path.rsplit("/", 1)[-1], "type": e.kind, "size": e.size,
                "modified": iso(e.mtime_ns // 1_000_000) if e.mtime_ns else None}

    def ls(self, path: Any = "/") -> list[dict]:
        self.ensure_layout()
        return [self._entry(e) for e in self.backend.list(self.path(path))]

    def cat(self, path: Any) -> bytes:
        self.ensure_layout()
        return self.backend.read_bytes(_file_path(self.path(path)))

    def _written(self, path: str) -> dict:
        st = self.backend.stat(path)
        report = self._reindex([path])
        chunks = len(self.mem.sql.conn.execute(
            _FILES_SQL + " AND json_extract(meta, '$.path') = ?", (self.user, path)).fetchall())
        return {"path": path, "size": st.size if st else 0, "sha256": st.sha256 if st else None,
                "indexed": indexed_type(path) is not None, "chunks": chunks,
                "reindexed": bool(report["indexed"] or report["removed"])}

    def write(self, path: Any, data: bytes | str) -> dict:
        """Create or replace a file (atomically); re-indexes it.  Returns ``{"path", "size",
        "sha256", "indexed", "chunks", "reindexed"}``."""
        path = _file_path(self.path(path))
        self.ensure_layout()
        self.backend.write_bytes(path, data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)
        return self._written(path)

    def append(self, path: Any, data: bytes | str) -> dict:
        path = _file_path(self.path(path))
        self.ensure_layout()
        self.backend.append(path, data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)
        return self._written(path)

    def _files_under(self, path: str) -> list[str]:
        """Files at or under ``path``: on disk, and those the index still knows."""
        known = set(_indexed(self.mem, self.user)) | set(_cache(self.mem, self.user))
        found = {p for p in known if p == path or p.startswith(path.rstrip("/") + "/")}
        st = self.backend.stat(path, digest=False)
        if st is not None and st.is_dir:
            found |= {e.path for e in self.backend.list(path, recursive=True) if e.kind == "file"}
        elif st is not None:
            found.add(path)
        return sorted(found)

    def rm(self, path: Any, *, recursive: bool = False) -> dict:
        """Remove a file (a folder with ``recursive``); its chunks are forgotten."""
        path = self.path(path)
        if path == "/":
            raise InvalidInput("refusing to remove the whole workspace",
                               hint="remove what is inside, e.g. bm fs rm -r /drafts/old; "
                                    "`bm forget --user U` removes a user's workspace")
        self.ensure_layout()
        st = self.backend.stat(path, digest=False)
        if st is None:
            raise NotFound(f"no file {path} in the workspace", hint="list files with `bm fs ls`")
        if st.is_dir and not recursive:
            raise InvalidInput(f"{path} is a folder", hint=f"add -r to remove it and everything in it: bm fs rm -r {path}")
        files = self._files_under(path)
        self.backend.delete(path, recursive=recursive)
        if path.count("/") == 1:  # an area: emptied, kept
            self.ensure_layout()
        report = self._reindex(files)
        return {"removed": path, "files": files, "forgotten_chunks": report["forgotten"]}

    def mv(self, src: Any, dst: Any, *, force: bool = False) -> dict:
        """Move or rename a file or folder; the chunks follow (forgotten at the old path,
        made at the new one).  An existing file at ``dst`` is replaced only with ``force``."""
        src, dst = _file_path(self.path(src), "source"), self.path(dst)
        self.ensure_layout()
        s = self.backend.stat(src, digest=False)
        if s is None:
            raise NotFound(f"no file {src} in the workspace", hint="list files with `bm fs ls`")
        d = self.backend.stat(dst, digest=False)
        if d is not None and d.is_dir:
            dst = f"{dst.rstrip('/')}/{src.rsplit('/', 1)[-1]}"
            d = self.backend.stat(dst, digest=False)
        _file_path(dst, "destination")
        if dst == src:
            raise UsageError(f"{src} is already there", hint="give another destination")
        if s.is_dir and dst.startswith(src + "/"):
            raise InvalidInput(f"cannot move {src} into itself ({dst})", hint="pick a destination outside it")
        if d is not None:
            if d.is_dir or s.is_dir:
                raise InvalidInput(f"{dst} already exists", hint="remove it first, or pick another destination")
            if not force:
                raise InvalidInput(f"{dst} already exists", hint="add --force to replace it")
        before = self._files_under(src)
        self.backend.move(src, dst)
        after = self._files_under(dst)
        self._reindex(set(before) | set(after))
        return {"from": src, "to": dst, "files": after}

    def find(self, pattern: str = "*", *, grep: str | None = None, path: Any = "/") -> list[dict]:
        """Files whose name or path matches the glob ``pattern`` (case-insensitive; ``*``
        does not stop at ``/`` in a path); with ``grep``, the lines of those UTF-8 files
        holding that text (case-insensitive), as ``{"path", "line", "text"}``."""
        self.ensure_layout()
        if "\x00" in pattern:
            raise InvalidInput("the pattern contains a NUL byte", hint="remove it")
        base = self.path(path)
        pat = pattern.lower()
        out: list[dict] = []
        needle = grep.lower() if grep else None
        if grep is not None and not grep:
            raise InvalidInput("--grep needs some text", hint='e.g. bm fs find --grep "Lisbon"')
        for e in self.backend.list(base, recursive=True):
            if e.kind != "file" or area(e.path) not in AREAS or e.path.count("/") < 2:
                continue
            name = e.path.rsplit("/", 1)[-1].lower()
            if not (fnmatch.fnmatchcase(name, pat) or fnmatch.fnmatchcase(e.path.lower(), pat)
                    or fnmatch.fnmatchcase(e.path.lower(), "/" + pat.lstrip("/"))):
                continue
            if needle is None:
                out.append(self._entry(e))
                continue
            try:
                text = self.backend.read_bytes(e.path).decode("utf-8")
            except (UnicodeDecodeError, InvalidInput, NotFound):
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if needle in line.lower():
                    out.append({"path": e.path, "line": n, "text": line[:300]})
        return out

    def index(self, *, full: bool = False) -> dict:
        """Re-index what changed on disk (``full``: re-hash every file)."""
        self.ensure_layout()
        return refresh(self.mem, self.user, full=full) or {"indexed": [], "removed": [], "unchanged": [],
                                                           "chunks": 0, "forgotten": 0}


# -- forgetting, export / import -----------------------------------------------------------------
def forget_user_files(mem: "Memory", user: str) -> int:
    """Remove ``user``'s workspace directory and stat cache; returns how many files it held.
    (Their chunk memories go with the user's other memories.)  Links are removed, never followed."""
    root = workspace_root(mem.paths.data_dir, user)
    n = 0
    with _lock(mem):
        if root.is_dir() and not root.is_symlink():
            n = sum(1 for e in LocalBackend(root).list("/", recursive=True) if e.kind == "file")
            shutil.rmtree(root)
        with mem.sql.write():
            mem.sql.conn.execute("DELETE FROM workspace_stat WHERE user_id=?", (user,))
    return n


def _users(mem: "Memory") -> list[tuple[str, Path]]:
    from urllib.parse import unquote

    base = Path(mem.paths.data_dir) / "workspace"
    if not base.is_dir():
        return []
    out = []
    for d in base.iterdir():
        if d.name.startswith(".") or not d.is_dir() or d.is_symlink():
            continue
        out.append((unquote(d.name), d))
    return sorted(out)


def export_records(mem: "Memory") -> Iterator[dict]:
    """``{"kind": "file", "user", "path", "sha256", "text"|"base64"}`` for every workspace
    file, by user then path (links out of a workspace are skipped)."""
    for user, root in _users(mem):
        backend = LocalBackend(root)
        for e in sorted(backend.list("/", recursive=True), key=lambda e: e.path):
            if e.kind != "file" or area(e.path) not in AREAS or e.path.count("/") < 2:
                continue  # (a stray file at the root is no workspace path)
            data = backend.read_bytes(e.path)
            rec: dict[str, Any] = {"kind": "file", "user": user, "path": e.path,
                                   "sha256": hashlib.sha256(data).hexdigest()}
            try:
                rec["text"] = data.decode("utf-8")
            except UnicodeDecodeError:
                rec["base64"] = base64.b64encode(data).decode("ascii")
            yield rec


def import_record(mem: "Memory", rec: dict) -> tuple[LocalBackend, str, bytes] | None:
    """A checked file record of an export: (backend, path, content) to write, or None when
    the user's workspace already has a file there."""
    from . import validate

    user = validate.name(rec["user"], what="user")
    root = workspace_root(mem.paths.data_dir, user)
    path = _file_path(normalize(rec["path"]))
    if "text" in rec:
        data = validate.utf8(rec["text"]).encode("utf-8") if isinstance(rec["text"], (str, bytes)) else None
    else:
        try:
            data = base64.b64decode(rec["base64"], validate=True)
        except (ValueError, TypeError):
            data = None
    if data is None:
        raise InvalidInput(f"file record {path}: bad content", hint='a file record has "text" or "base64"')
    if rec.get("sha256") is not None and rec["sha256"] != hashlib.sha256(data).hexdigest():
        raise InvalidInput(f"file record {path}: content does not match its sha256", hint="is the export file damaged?")
    backend = LocalBackend(root)
    if backend.stat(path, digest=False) is not None:
        return None
    return backend, path, data


def write_imported(items: Iterable[tuple[LocalBackend, str, bytes]]) -> None:
    for backend, path, data in items:
        backend.write_bytes(path, data)
