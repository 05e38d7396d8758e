"""The workspace's index for recall (brandmind/workspace.py): chunking, refresh, reindex.

A UTF-8 file under /.profile or /notes (up to 1 MiB, any extension) is cut into chunks of
about 800 characters at headings and paragraphs (a long section is continued with its
heading and ~120 characters of overlap), each stored as a memory of the user (agent: none,
source ``workspace``, ts = the file's mtime) with meta ``{"kind": "file", "path", "chunk",
"chunks", "sha256"}`` and provenance ``[{"path", "chunk"}]``.  :func:`reindex` brings the
chunks of some paths in line with the files in one op-log transaction (the old chunks
forgotten, their text redacted from the log; the new ones added).

:func:`refresh` picks up files changed on disk behind bm's back: it compares size and
mtime with a local stat cache (``workspace_stat``, brandmind/storage/workspace.py) and
re-indexes a file only when its sha256 differs from the indexed one; with nothing changed
it writes nothing and costs well under 2 ms for a workspace of 50 files.  It runs only when
asked (``bm fs index``, ``Workspace.refresh``, and the CLI's ``bm recall`` / ``bm context``
before they read): ``Memory.recall`` never writes.  Writers take a file lock
(``<data_dir>/workspace/.lock``), so two processes never index the same change twice.
"""
from __future__ import annotations

import hashlib
import re
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from .clock import new_id
from .errors import InvalidInput
from .ops import Kind
from .storage import workspace as repo
from .workspace_files import INDEXED, Backend, indexed_type
from .workspace_s3 import backend_for

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

CHUNK_CHARS = 800
CHUNK_OVERLAP = 120
INDEX_MAX_BYTES = 1 << 20


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


def file_chunks(data: bytes) -> list[str]:
    """The chunks of an indexable file: UTF-8 text without NUL, up to INDEX_MAX_BYTES."""
    if len(data) > INDEX_MAX_BYTES or b"\x00" in data:
        return []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return []
    return chunk_text(text)


# -- index ------------------------------------------------------------------------------------
def empty_report() -> dict:
    return {"indexed": [], "removed": [], "unchanged": [], "chunks": 0, "forgotten": 0}


@contextmanager
def lock(store: "Store") -> Iterator[None]:
    """The workspace writers' file lock (``<data_dir>/workspace/.lock``)."""
    import fcntl

    base = Path(store.paths.data_dir) / "workspace"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def indexed_files(store: "Store", user: str) -> dict[str, dict]:
    """path -> {"ids": [(memory id, op id)], "shas": {sha256}} of the user's file chunks."""
    out: dict[str, dict] = {}
    for mid, op_id, path, sha in repo.file_chunks(store.sql, user):
        entry = out.setdefault(path, {"ids": [], "shas": set()})
        entry["ids"].append((mid, op_id))
        entry["shas"].add(sha)
    return out


def cached_stats(store: "Store", user: str) -> dict[str, tuple]:
    """path -> (size, mtime_ns, sha256, chunks) as the user's files were last indexed."""
    return repo.stat_cache(store.sql, user)


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


def refresh(store: "Store", user: str | None = None, *, full: bool = False) -> dict | None:
    """Re-index the files of ``user``'s workspace changed since they were indexed (on disk,
    behind bm's back), forget the chunks of files gone; None when nothing changed (the
    cheap path: a directory scan and two indexed queries, nothing written).  ``full``:
    re-hash every file.  Runs only when called (see the module docstring)."""
    user = store.user(user)
    disk = _scan(backend_for(store, user))
    cache = cached_stats(store, user)
    indexed = indexed_files(store, user)
    # chunks pulled from another device (sync) index a file that lives on that device: its
    # absence here is not a deletion (only chunks this replica indexed are checked against disk)
    ours = {p for p, e in indexed.items()
            if any(str(op).rpartition(":")[0] == store.log.replica for _, op in e["ids"])}
    if full:
        todo = set(disk) | set(cache) | ours
    else:
        todo = {p for p, st in disk.items()
                if (c := cache.get(p)) is None or (c[0], c[1]) != st
                or (p in indexed and indexed[p]["shas"] != {c[2]})}
        todo |= (set(cache) | ours) - set(disk)
    if not todo:
        return None
    return reindex(store, user, todo)


class _Plan:
    """What a reindex does: memories to forget and add, stat rows to store, the report."""

    def __init__(self) -> None:
        self.report: dict[str, Any] = empty_report()
        self.forget: list[tuple[str, str]] = []   # (memory id, op id)
        self.adds: list[dict] = []                # memory.add payloads
        self.stats: dict[str, tuple | None] = {}  # path -> stat cache row (None: drop it)


def reindex(store: "Store", user: str, paths: Iterable[str], *, backend: Backend | None = None) -> dict:
    """Bring the chunks of ``paths`` in line with the files: unchanged content (by sha256)
    keeps its chunks; changed files get new chunks for old; gone or unindexable ones lose
    theirs.  One op-log transaction.  Returns ``{"indexed", "removed", "unchanged": [paths],
    "chunks": new chunks, "forgotten": old chunks forgotten}``."""
    backend = backend or backend_for(store, user)
    plan = _Plan()
    with lock(store):
        store.catch_up()
        indexed = indexed_files(store, user)
        cache = cached_stats(store, user)
        for path in sorted(set(paths)):
            _plan_path(plan, backend, user, path, indexed.get(path), cache.get(path))
        plan.report["forgotten"] = len(plan.forget)
        if plan.forget or plan.adds:
            _commit(store, plan)
        repo.save_stats(store.sql, user, plan.stats.items())
    return plan.report


def _plan_path(plan: _Plan, backend: Backend, user: str, path: str, old: dict | None,
               cached: tuple | None) -> None:
    """Add what re-indexing one path takes to ``plan`` (``old``: its indexed chunks,
    ``cached``: its stat cache row)."""
    report = plan.report
    st = None
    if indexed_type(path) is not None:
        try:
            st = backend.stat(path, digest=False)
        except InvalidInput:  # resolves outside the root now: treat as gone
            st = None
    if st is None or st.is_dir:
        if old:
            plan.forget.extend(old["ids"])
            report["removed"].append(path)
        plan.stats[path] = None
        return
    data = backend.read_bytes(path)
    sha = hashlib.sha256(data).hexdigest()
    if (old and old["shas"] == {sha}) or (not old and cached and cached[2] == sha):
        # unchanged (a file whose chunks were all forgotten one by one stays so)
        plan.stats[path] = (st.size, st.mtime_ns, sha, len(old["ids"]) if old else cached[3])
        report["unchanged"].append(path)
        return
    if old:
        plan.forget.extend(old["ids"])
    chunks = file_chunks(data)
    ts = st.mtime_ns // 1_000_000
    for i, text in enumerate(chunks):
        plan.adds.append({
            "id": new_id("m", ts), "text": text, "type": indexed_type(path), "user": user,
            "agent": None, "importance": 0.5, "ts": ts, "valid_from": None, "valid_to": None,
            "source": "workspace",
            "meta": {"kind": "file", "path": path, "chunk": i, "chunks": len(chunks), "sha256": sha},
            "provenance": [{"path": path, "chunk": i}],
        })
    plan.stats[path] = (st.size, st.mtime_ns, sha, len(chunks))
    report["indexed" if chunks else ("removed" if old else "unchanged")].append(path)
    report["chunks"] += len(chunks)


def _commit(store: "Store", plan: _Plan) -> None:
    """The plan's forgets (their adds redacted in the log) and adds, in one log
    transaction, with the vectors of new texts cached; then applied."""
    model = store.sql.model
    texts = [a["text"] for a in plan.adds]
    missing = [t for t in dict.fromkeys(texts) if store.log.cached_vector(model, t) is None]
    vecs = store.embed_docs(missing) if missing else []
    with store.write() as t:
        for mid, op_id in plan.forget:
            t.append(Kind.MEMORY_FORGET, {"id": mid})
            t.redact(op_id, {"id": mid, "redacted": True})
        for payload in plan.adds:
            t.append(Kind.MEMORY_ADD, payload)
        for text, vec in zip(missing, vecs):
            t.cache_vector(model, text, vec.tobytes())
    store.catch_up()
