"""The file of the recall index (storage/recallindex.py): a header, the arrays at
page-aligned offsets (capacity rows each, so appends fit until it is rewritten; unused
capacity is a hole in a sparse file), then the dictionaries as JSON.  Mapped copy-on-write:
a process's own changes never reach the file, which is only ever replaced whole (written
to a temporary name, synced, renamed).  Also the sign codes the first pass of a vector search
compares (storage/scan.py).
"""
from __future__ import annotations

import json
import mmap
import os
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..notices import tell
from . import kwindex

MAGIC = b"BMRIDX01"
VERSION = 7  # 7: ``asks``; 6: keyword postings (storage/kwindex.py) and ``ntok``; 5: ``thash`` and ``dated`` (4: ``vec`` int8 of the rotated vector (recallsql.quantise) with ``vscale``; 3: not rotated; 2: float32)
CODE_BITS = 2  # sign bits per dimension: the signs of the vector times ``rotation(dim)``
ALIGN = 4096
# the small columns: name -> dtype (code and vec are added with the store's dimension);
# ``vscale``: 1 / the norm of the row's int8 vector (its cosine with a unit query is
# ``vec . q * vscale``); ``thash``: recallsql.text_key of the text (recall shows one memory
# per key); ``dated``: whether the text says when something happened (timewords.says_when);
# ``ntok``: the text's tokens as FTS5 counts them (BM25's document length, storage/kwindex.py);
# ``asks``: the percentage of a turn's text that asks, 0 for other memories (questions.asked_share:
# recall's ``asks`` signal)
COLUMNS = {"rowid": "<i8", "alive": "u1", "has_vec": "u1", "user": "<i4", "agent": "<i4", "type": "<i4",
           "created": "<i8", "valid_from": "<i8", "valid_to": "<i8", "retired": "<i8", "importance": "<f8",
           "turn": "u1", "episode": "<i8", "speaker": "<i4", "prev": "<i8", "next": "<i8", "vscale": "<f4",
           "thash": "<u8", "dated": "u1", "ntok": "<u2", "asks": "u1"}


def _layout(cap: int, dim: int) -> tuple[list[tuple[str, str, tuple, int]], int]:
    """(name, dtype, shape, offset) of every array in a file of capacity ``cap``, and its size."""
    words = (CODE_BITS * dim + 63) // 64
    specs = [(name, dt, (cap,)) for name, dt in COLUMNS.items()]
    specs += [("code", "<u8", (words, cap)), ("vec", "i1", (cap, dim)), ("rot", "<f4", (dim, CODE_BITS * dim))]
    out, pos = [], ALIGN
    for name, dt, shape in specs:
        out.append((name, dt, shape, pos))
        size = int(np.dtype(dt).itemsize * int(np.prod(shape)))
        pos += -(-size // ALIGN) * ALIGN
    return out, pos


def _views(buf: Any, cap: int, dim: int) -> dict[str, np.ndarray]:
    specs, _ = _layout(cap, dim)
    return {name: np.frombuffer(buf, dt, int(np.prod(shape)), off).reshape(shape)
            for name, dt, shape, off in specs}


def _kw_layout(header: dict) -> tuple[list[tuple[str, str, int, int]], int]:
    """(name, dtype, length, offset) of the keyword postings after the dictionaries, and the end."""
    terms, postings = (int(x) for x in header.get("kw", (0, 0)))
    pos = _layout(int(header["capacity"]), int(header["dim"]))[1] + int(header.get("dicts_bytes", 0))
    out = []
    for (name, dt), count in zip(kwindex.FIELDS, (terms, terms + 1, postings, postings)):
        pos = -(-pos // 8) * 8
        out.append((name, dt, count, pos))
        pos += np.dtype(dt).itemsize * count
    return out, pos


def _kw_views(buf: Any, header: dict) -> tuple:
    """The keyword postings ``(keys, start, pos, tf)`` of a file's buffer, as views."""
    return tuple(np.frombuffer(buf, dt, n, off) for _, dt, n, off in _kw_layout(header)[0])


def _header(buf: Any) -> dict:
    if bytes(buf[:8]) != MAGIC:
        raise ValueError("not a recall index")
    size = int.from_bytes(bytes(buf[8:16]), "little")
    if size > ALIGN - 16:
        raise ValueError("bad header")
    return json.loads(bytes(buf[16:16 + size]))


@lru_cache(maxsize=4)
def rotation(dim: int) -> np.ndarray:
    """``CODE_BITS`` random orthogonal ``dim`` x ``dim`` blocks side by side: the sign codes
    are of the vector rotated (SimHash), so every bit depends on every dimension and the
    Hamming distance tracks the angle whatever the embedder (the raw signs of a sparse
    vector, such as the hash embedder's, say little).  A new file stores its own."""
    rng = np.random.default_rng(20_261_125 + dim)
    blocks = [np.linalg.qr(rng.standard_normal((dim, dim)))[0] for _ in range(CODE_BITS)]
    return np.concatenate(blocks, axis=1).astype(np.float32)


def signs(vectors: np.ndarray, rot: np.ndarray) -> np.ndarray:
    """Sign codes of ``vectors`` (rows) as uint64 words, one column per vector: (words, rows)."""
    v = np.atleast_2d(vectors) @ rot
    words = (v.shape[1] + 63) // 64
    bits = np.packbits(v > 0, axis=1)
    pad = words * 8 - bits.shape[1]
    if pad:
        bits = np.concatenate([bits, np.zeros((len(bits), pad), np.uint8)], axis=1)
    return np.ascontiguousarray(bits).view("<u8").T


class IndexFile:
    """One index file mapped copy-on-write (``path`` None: anonymous memory)."""

    def __init__(self, buf: Any, header: dict) -> None:
        self.buf, self.header = buf, header
        self.shared = False  # a writable shared mapping of a new file (``create``)
        self.cap, self.dim = int(header["capacity"]), int(header["dim"])
        self.cols = _views(buf, self.cap, self.dim)
        self.kw: tuple | None = None  # the keyword postings (storage/kwindex.py), once written

    def postings(self) -> tuple | None:
        """The keyword postings ``(keys, start, pos, tf)`` (views of a file's, copy-on-write)."""
        if self.kw is None and "kw" in self.header:
            self.kw = _kw_views(self.buf, self.header)
        return self.kw

    @classmethod
    def open(cls, path: Path) -> "IndexFile":
        with open(path, "rb") as fh:
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
        header = _header(buf)
        if header.get("version") != VERSION or "kw" not in header or len(buf) < _kw_layout(header)[1]:
            raise ValueError("unreadable recall index")
        return cls(buf, header)

    @classmethod
    def create(cls, path: Path | None, cap: int, dim: int) -> tuple["IndexFile", Any]:
        """A new, empty, writable index of capacity ``cap``; with ``path``, a file there
        (returned open: ``finish`` writes the header and renames it into place)."""
        size = _layout(cap, dim)[1]
        fh = None
        if path is not None:
            fh = open(path, "w+b")
            fh.truncate(size)  # sparse: unused capacity takes no disk
            buf = mmap.mmap(fh.fileno(), size)
        else:
            buf = mmap.mmap(-1, size)
        f = cls(buf, {"version": VERSION, "capacity": cap, "dim": dim})
        f.shared = fh is not None
        return f, fh

    def release(self) -> None:
        """While a new file is written: drop this process's mapping of the pages written so
        far (they stay in the page cache, to be written out), so writing a 1M-memory index
        does not hold the whole file as resident memory."""
        if self.shared and hasattr(mmap, "MADV_DONTNEED"):  # dirty pages stay dirty in the page cache
            self.buf.madvise(mmap.MADV_DONTNEED)

    def finish(self, fh: Any, header: dict, final: Path | None, kw: tuple) -> None:
        """Write the header (and, in a file, the dictionaries and the keyword postings ``kw``
        after the arrays), sync, and rename the file into place."""
        header = {**header, "version": VERSION, "capacity": self.cap, "dim": self.dim}
        tail = json.dumps(header.pop("dicts", {}), separators=(",", ":")).encode()
        header["dicts_bytes"] = len(tail)
        header["kw"] = [len(kw[0]), len(kw[2])]
        raw = json.dumps(header, separators=(",", ":")).encode()
        if len(raw) > ALIGN - 16:
            raise ValueError("recall index header too large")
        self.buf[:16 + len(raw)] = MAGIC + len(raw).to_bytes(8, "little") + raw
        self.header = header
        if fh is not None:
            self.buf.flush()
            fh.seek(_layout(self.cap, self.dim)[1])
            fh.write(tail)
            for (_, dt, _, off), arr in zip(_kw_layout(header)[0], kw):
                fh.seek(off)
                fh.write(np.ascontiguousarray(arr, dt).data)
            fh.flush()
            os.fsync(fh.fileno())
            # from now on this process's changes stay its own (copy-on-write), like a reader's
            self.buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
            self.cols = _views(self.buf, self.cap, self.dim)
            self.shared = False
            self.kw = None  # read from the new mapping
            if final is not None:
                os.replace(fh.name, final)
            fh.close()
        else:
            self.kw = tuple(kw)

    def dicts(self) -> dict[str, list]:
        """The dictionaries stored after the arrays (a file's; empty for memory)."""
        start = _layout(self.cap, self.dim)[1]
        size = int(self.header.get("dicts_bytes", 0))
        return json.loads(bytes(self.buf[start:start + size])) if size else {}



def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` (sorted, each value once) without what that call imports on first
    use in numpy 2.4 (numpy.ma, ~25 ms of a cold `bm recall`)."""
    v = np.sort(np.asarray(values).ravel())
    if len(v) < 2:
        return v
    return v[np.concatenate(([True], v[1:] != v[:-1]))]


def outside(values: np.ndarray, taken: np.ndarray) -> np.ndarray:
    """``np.setdiff1d(values, taken)``: the distinct ``values`` not in ``taken``, sorted (by
    binary search: ``np.isin`` too imports numpy.ma on first use)."""
    v = distinct(values)
    t = np.sort(np.asarray(taken).ravel())
    if not len(t) or not len(v):
        return v
    at = np.minimum(np.searchsorted(t, v), len(t) - 1)
    return v[t[at] != v]


def scrub(path: Path, rowids: list[int]) -> int:
    """Overwrite with zeros, in the index file at ``path`` itself, the vectors and sign codes
    of ``rowids`` (forgotten memories) and mark them deleted; returns how many were there.
    Other processes' copy-on-write mappings see the zeros too, in the pages they have not
    changed themselves (they find the rows deleted when they catch up anyway)."""
    try:
        fh = open(path, "r+b")
    except OSError:
        return 0
    with fh:
        buf = mmap.mmap(fh.fileno(), 0)
        try:
            header = _header(buf)
            cols = _views(buf, int(header["capacity"]), int(header["dim"]))
            have = cols["rowid"][:int(header["count"])]
            want = np.asarray(sorted(rowids), np.int64)
            pos = np.minimum(np.searchsorted(have, want), max(len(have) - 1, 0))
            pos = pos[have[pos] == want] if len(have) else pos[:0]
            for name in ("vec", "vscale", "alive", "has_vec", "thash", "dated", "ntok", "asks"):
                cols[name][pos] = 0
            cols["code"][:, pos] = 0
            if "kw" in header:  # its keyword postings, and the key of a stem only it held
                kwindex.scrub(*_kw_views(buf, header), pos)
            buf.flush()
            del cols, have
            return len(pos)
        except (ValueError, KeyError, TypeError):
            return 0
        finally:
            try:
                buf.close()
            except BufferError:
                pass


def scrub_names(path: Path) -> None:
    """Overwrite with zeros, in the file itself, the dictionaries of an index file (user,
    agent and speaker names: after a user is forgotten; the caller then writes a new file)."""
    try:
        with open(path, "r+b") as fh:
            head = fh.read(ALIGN)
            header = _header(head)
            fh.seek(_layout(int(header["capacity"]), int(header["dim"]))[1])
            fh.write(b"\0" * int(header.get("dicts_bytes", 0)))
            fh.flush()
            os.fsync(fh.fileno())
    except (OSError, ValueError, KeyError, TypeError):
        pass


ANNOUNCE_ROWS = 50_000  # from this many memories, making a file anew is announced on a terminal


def say_building(path: Path | None, rows: int) -> None:
    """On a terminal, say what the pause is when a large store's index file is made anew (its
    first search after an upgrade that changed the file's format, or after ``bm rebuild``:
    ~9 s at 100,000 memories, ~2 min at 1,000,000); never into a pipe or a log."""
    if path is not None and rows >= ANNOUNCE_ROWS:
        tell(f"bm: building the recall index of {rows:,} memories (once; about {max(1, rows // 9000)} s) in {path} ...")


def remove_abandoned(path: Path) -> None:
    """Delete half-written index files of processes that died writing them (an hour old)."""
    cutoff = time.time() - 3600
    for tmp in path.parent.glob(f".{path.name}.*"):
        try:
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink()
        except OSError:
            pass
