"""Explicit memory: each user's workspace of files (`bm fs`), indexed for recall.

Layout (created on first use of ``bm fs``)::

    /.profile/   the user's bio and preferences      indexed, memories of type ``fact``
    /notes/      the user's notes                    indexed, memories of type ``concept``
    /drafts/     work-in-progress deliverables       not indexed
    /system/     configs                             not indexed

The module is in three parts, lowest first: ``workspace_files`` (paths and the
:class:`Backend` of where files live: path rules, symlinks, the local directory),
``workspace_index`` (chunking, :func:`refresh`, :func:`reindex`; SQL in
``storage/workspace.py``) and this one (:class:`Workspace`, the API over a ``Store``;
forgetting, export and import).

Every path lives in one of these four areas: ``/notes/a.md``, ``notes/a.md`` and
``/notes/./x/../a.md`` are the same file; ``..`` above the root, a path outside the four
areas (``/etc/passwd``), a NUL byte, and any path that resolves (through a symlink)
outside the workspace root are refused with an ``Error:`` line.  A host path inside the
root (``$DATA/workspace/ann/notes/a.md``) is taken as the workspace path it names.

Storage sits behind :class:`Backend` (read_bytes, write_bytes (atomic), append, delete,
move, list, stat with size, mtime and sha256, mkdir), so the agent code never sees where
files live.  :class:`LocalBackend` keeps one workspace per user in
``<data_dir>/workspace/<user>/`` (the user id with characters outside ``[A-Za-z0-9._@+-]``
and a leading dot %-escaped); with config ``workspace = "s3://BUCKET/PREFIX"`` each user's
files are encrypted objects under ``PREFIX/<user>/`` instead (brandmind/workspace_s3.py).

Indexing: a UTF-8 file under /.profile or /notes (up to 1 MiB, any extension) is cut into
chunks of about 800 characters at headings and paragraphs (a long section is continued
with its heading and ~120 characters of overlap), each stored as a memory of the user
(agent: none, source ``workspace``, ts = the file's mtime) with meta ``{"kind": "file",
"path", "chunk", "chunks", "sha256"}`` and provenance ``[{"path", "chunk"}]``, so
``bm recall`` finds notes with their file.  Every ``bm fs write|append|rm|mv`` forgets the
file's old chunks (``memory.forget``, their text redacted from the log) and adds the new
ones in one op-log transaction.

Refresh is explicit: files changed on disk behind bm's back are picked up by
:func:`refresh` (``Workspace.refresh()``, ``bm fs index``), which runs only when asked.
``Memory.recall`` and ``Memory.context`` only read: they never re-index, so a read never
appends ops (nor triggers a scrub of the log).  The CLI's ``bm recall`` and ``bm context``
(one process per call) run the refresh of the user's workspace explicitly before they
read, so a note edited on disk is found by the next ``bm recall``; a long-lived Python
caller calls ``mem.workspace(user).refresh()`` when it wants the same.  The refresh
compares size and mtime with a local stat cache (table ``workspace_stat``, not replicated
and emptied by ``bm rebuild``, after which it re-hashes once) and re-indexes a file only
when its sha256 differs from the indexed one; with nothing changed it writes nothing and
costs well under 2 ms for a workspace of 50 files.  Writers take a file lock
(``<data_dir>/workspace/.lock``), so two processes never index the same change twice.

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
import shutil
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from . import validate
from .clock import iso
from .errors import InvalidInput, NotFound, UsageError
from .storage import workspace as repo
from .workspace_files import (AREAS, INDEXED, Backend, Entry, LocalBackend, Stat, area,
                              dir_name, file_path, indexed_type, normalize, workspace_root)
from .workspace_index import (CHUNK_CHARS, CHUNK_OVERLAP, INDEX_MAX_BYTES, cached_stats, chunk_text,
                              empty_report, indexed_files, lock, refresh, reindex)
from .workspace_bucket import WorkspaceUnavailable
from .workspace_s3 import S3Backend, backend_for, workspace_users

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

__all__ = ["AREAS", "INDEXED", "CHUNK_CHARS", "CHUNK_OVERLAP", "INDEX_MAX_BYTES", "Backend", "Entry",
           "LocalBackend", "Stat", "Workspace", "area", "backend_for", "chunk_text", "dir_name",
           "export_records", "forget_user_files", "import_record", "indexed_type", "normalize",
           "refresh", "reindex", "workspace_root", "write_imported"]


# -- the workspace ------------------------------------------------------------------------------
class Workspace:
    """One user's workspace over a backend (the local directory by default), on a Store."""

    def __init__(self, store: "Store", user: str | None = None, backend: Backend | None = None) -> None:
        self.store = store
        self.user = store.user(user)
        self.root = workspace_root(store.paths.data_dir, self.user)
        self.backend: Backend = backend or backend_for(store, self.user)

    def path(self, path: Any) -> str:
        return normalize(path, root=self.root)

    def ensure_layout(self) -> None:
        for a in AREAS:
            self.backend.mkdir("/" + a)

    def _reindex(self, paths: Iterable[str]) -> dict:
        paths = [p for p in paths if indexed_type(p) is not None]
        if not paths:
            return empty_report()
        return reindex(self.store, self.user, paths, backend=self.backend)

    @staticmethod
    def _entry(e: Entry) -> dict:
        return {"path": e.path, "name": e.path.rsplit("/", 1)[-1], "type": e.kind, "size": e.size,
                "modified": iso(e.mtime_ns // 1_000_000) if e.mtime_ns else None}

    def ls(self, path: Any = "/") -> list[dict]:
        self.ensure_layout()
        return [self._entry(e) for e in self.backend.list(self.path(path))]

    def cat(self, path: Any) -> bytes:
        self.ensure_layout()
        return self.backend.read_bytes(file_path(self.path(path)))

    def _written(self, path: str) -> dict:
        st = self.backend.stat(path)
        report = self._reindex([path])
        chunks = repo.chunk_count(self.store.sql, self.user, path)
        return {"path": path, "size": st.size if st else 0, "sha256": st.sha256 if st else None,
                "indexed": indexed_type(path) is not None, "chunks": chunks,
                "reindexed": bool(report["indexed"] or report["removed"])}

    def write(self, path: Any, data: bytes | str) -> dict:
        """Create or replace a file (atomically); re-indexes it.  Returns ``{"path", "size",
        "sha256", "indexed", "chunks", "reindexed"}``."""
        path = file_path(self.path(path))
        self.ensure_layout()
        self.backend.write_bytes(path, data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)
        return self._written(path)

    def append(self, path: Any, data: bytes | str) -> dict:
        path = file_path(self.path(path))
        self.ensure_layout()
        self.backend.append(path, data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)
        return self._written(path)

    def _files_under(self, path: str) -> list[str]:
        """Files at or under ``path``: on disk, and those the index still knows."""
        known = set(indexed_files(self.store, self.user)) | set(cached_stats(self.store, self.user))
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
        src, dst = file_path(self.path(src), "source"), self.path(dst)
        self.ensure_layout()
        s = self.backend.stat(src, digest=False)
        if s is None:
            raise NotFound(f"no file {src} in the workspace", hint="list files with `bm fs ls`")
        d = self.backend.stat(dst, digest=False)
        if d is not None and d.is_dir:
            dst = f"{dst.rstrip('/')}/{src.rsplit('/', 1)[-1]}"
            d = self.backend.stat(dst, digest=False)
        file_path(dst, "destination")
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
        """Re-index what changed on disk (``full``: re-hash every file; on S3 also remove the
        objects a crashed write left, ``"swept"``); ``bm fs index``."""
        self.ensure_layout()
        report = refresh(self.store, self.user, full=full) or empty_report()
        if full and isinstance(self.backend, S3Backend):
            report["swept"] = self.backend.sweep()
        return report

    def refresh(self) -> dict | None:
        """Re-index the notes and profile files changed on disk since they were indexed;
        None when nothing changed (then nothing is written, nor any folder made).  The
        explicit step a caller runs before recall to see edits made behind bm's back.
        A workspace on S3 that cannot be reached is not refreshed (recall works offline)."""
        try:
            return refresh(self.store, self.user)
        except WorkspaceUnavailable:
            return None


# -- forgetting, export / import -----------------------------------------------------------------
def forget_user_files(store: "Store", user: str) -> int:
    """Remove ``user``'s workspace directory and stat cache; returns how many files it held.
    (Their chunk memories go with the user's other memories.)  Links are removed, never followed."""
    root = workspace_root(store.paths.data_dir, user)
    n = 0
    with lock(store):
        if root.is_dir() and not root.is_symlink():
            n = sum(1 for e in LocalBackend(root).list("/", recursive=True) if e.kind == "file")
            shutil.rmtree(root)
        backend = backend_for(store, user)
        if isinstance(backend, S3Backend):
            n += backend.destroy()
        repo.forget_stats(store.sql, user)
    return n


def export_records(store: "Store") -> Iterator[dict]:
    """``{"kind": "file", "user", "path", "sha256", "text"|"base64"}`` for every workspace
    file, by user then path (links out of a workspace are skipped)."""
    for user, backend in workspace_users(store):
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


def import_record(store: "Store", rec: dict) -> tuple[Backend, str, bytes] | None:
    """A checked file record of an export: (backend, path, content) to write, or None when
    the user's workspace already has a file there."""
    user = validate.name(rec["user"], what="user")
    path = file_path(normalize(rec["path"]))
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
    backend = backend_for(store, user)
    if backend.stat(path, digest=False) is not None:
        return None
    return backend, path, data


def write_imported(items: Iterable[tuple[Backend, str, bytes]]) -> None:
    for backend, path, data in items:
        backend.write_bytes(path, data)
