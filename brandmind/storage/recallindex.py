"""The recall index: every memory's vector and the columns recall filters and ranks on, as
arrays in one memory-mapped file (``recall.idx`` beside ``memory.sqlite``), so a search
neither loads vectors nor fetches rows before it has its final k.

What it holds, one row per memory in rowid order (deleted rows stay, ``alive`` 0, until the
file is rewritten):

* ``code``: the signs of the vector times the file's random rotation (``rot``, 2 bits a
  dimension: storage/indexfile.py ``rotation``), column-major (one uint64 column per 64
  bits): the first pass of a vector search is a Hamming scan, ~10x cheaper per row than a
  float32 dot product; the nearest codes are then rescored with ``vec``;
* ``vec``: the int8 vector as SQLite keeps it (one scale per vector: storage/recallsql.py
  ``quantise``: of the vector times a fixed rotation) and ``vscale``, 1 / its norm, so a
  row's cosine with a unit query is ``vec . rotate(q) * vscale`` (read only for the rows
  rescored);
* the filter and ranking columns: user, agent, type (codes into small dictionaries),
  created_at, valid_from / valid_to / retired_at (bi-temporal validity), importance,
  whether the memory is a conversation turn, its episode (a 64-bit key) and speaker, and
  its neighbouring turns in the thread (``prev`` / ``next`` rowids, computed when the row
  is indexed);
* what ranking would otherwise read texts for, computed when the row is indexed: ``thash``,
  a 64-bit key of the text (case and spacing ignored: recall shows one memory per text),
  ``dated`` (it says when something happened: a "when" question's bonus), ``asks`` (a turn's
  percentage in questions: questions.py) and the keyword postings (kwindex.py, ``ntok``).

Kept in step with SQLite (itself a projection of the op log): rows past the highest live
rowid are new; every update or delete of a memory, and every vector that arrives later
(``vec_pending`` rows deleted by brandmind/backlog.py), is listed by SQLite triggers in
``mem_changes``; a process reads both in one read transaction and applies them to its
arrays (the mapping is copy-on-write: the file itself never changes).  The file is
rewritten whole (a new file, then an atomic rename; readers keep the old inode) when a
process that caught up more than ``STALE_ROWS`` rows beyond it closes (or the daemon's
worker is idle; never in a search), when its capacity runs out, and by ``bm rebuild``.  Keyed by
the SQLite file's inode and ``meta.recall_epoch`` (new with new vectors); rebuilt from SQLite.
"""
from __future__ import annotations

import os
from contextlib import nullcontext
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import clock
from ..clock import now_millis
from .expiry import expired_rowids
from . import kwindex
from .indexfile import COLUMNS, IndexFile, distinct, remove_abandoned, rotation, say_building, scrub, signs
from .scan import MASKED, hamming, hamming_at, smallest
from .recallsql import (ReadSnapshot, all_rows, all_vectors, changed_rowids, epoch, episode_key, last_change,
                        memory_total, neighbours_of, rotate, rows_after, rows_of, stored_vectors_of, text_key,
                        turn_order)
from ..questions import asked_share
from ..timewords import says_when

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

HI = np.iinfo(np.int64).max   # NULL valid_to / retired_at (never ends)
LO = np.iinfo(np.int64).min   # NULL valid_from (always began)
EXACT_MAX = 16384             # up to this many rows a vector search scans exactly (cheaper)
RESCORE_SHARE = 250           # rows per exactly rescored candidate (within 1,000-4,000)
FIRST_BITS = 0.5              # share of the code bits the first pass compares on every row
FIRST_KEEP = 4                # x rescore: rows the first pass keeps for the pass on all the bits
STALE_ROWS = 2048             # rows caught up beyond the file before it is rewritten (or 1%)

DICTS = ("user", "agent", "type", "speaker")


def _capacity(rows: int) -> int:
    return int(rows * 1.25) + 1024  # rows appended before the file must grow


# -- the index in a process ----------------------------------------------------------------------
class RecallIndex:
    """The arrays of one store's index in this process (see the module doc).  ``refresh()``
    before each search; positions (not rowids) index the arrays, rowids are ``rowid[pos]``."""

    def __init__(self, sql: "SQLStore", path: Path | None) -> None:
        self.sql, self.path = sql, path
        self.file: IndexFile | None = None
        self.n = self.seq = 0
        self.values: dict[str, list] = {d: [] for d in DICTS}
        self.codes: dict[str, dict] = {d: {} for d in DICTS}
        self.behind = 0       # rows applied since the file was written
        self.version = 0      # bumped by every change applied (the caches below key on it)
        self._timed: tuple[int, np.ndarray] | None = None
        self._important: tuple[int, np.ndarray] | None = None
        self._mask: tuple[tuple, np.ndarray] | None = None
        self._saving: list[int] | None = None  # while ``save`` writes: the rowids forgotten meanwhile
        self._last_query: tuple[bytes, np.ndarray] = (b"", np.zeros(0, np.float32))  # (_rotated)
        self.kw = kwindex.Postings(kwindex.empty(), 0)  # keyword postings (storage/kwindex.py)
        self._stems: Any = None  # (the FTS5 tokenizer of documents, of queries)
        self._kw_stats: tuple[int, int, float] | None = None  # (version, N, average length)
        try:
            st = os.stat(sql.path)
            self.key: dict = {"inode": st.st_ino, "dev": st.st_dev, "epoch": epoch(sql), "dim": sql.dim}
        except OSError:
            self.key = {"inode": None, "epoch": epoch(sql), "dim": sql.dim}

    @property
    def cols(self) -> dict[str, np.ndarray]:
        return self.file.cols  # type: ignore[union-attr]

    # -- keeping in step ------------------------------------------------------------------
    def refresh(self) -> None:
        """Bring the arrays up to date with SQLite, loading (or building) the file first."""
        if self.file is None:
            self._load()
        if not self._catch_up():
            self.build()

    def _stale_rows(self) -> int:
        return max(STALE_ROWS, self.n // 100)

    def _load(self) -> None:
        if self.path is not None and self.path.exists():
            try:
                f = IndexFile.open(self.path)
                if f.header.get("key") == self.key:
                    self._adopt(f, f.dicts(), int(f.header["count"]), int(f.header["seq"]))
                    return
            except (OSError, ValueError, KeyError, TypeError):
                pass  # unreadable or another database's: built anew
        self.build()

    def _adopt(self, f: IndexFile, dicts: dict, n: int, seq: int) -> None:
        self.file, self.n, self.seq = f, n, seq
        self.kw = kwindex.Postings(f.postings() or kwindex.empty(), n)
        self.values = {d: list(dicts.get(d, [])) for d in DICTS}
        self.codes = {d: {v: i for i, v in enumerate(self.values[d])} for d in DICTS}
        self.behind = 0
        self.version += 1

    def _code(self, name: str, value: str) -> int:
        codes = self.codes[name]
        code = codes.get(value)
        if code is None:
            code = codes[value] = len(codes)
            self.values[name].append(value)
        return code

    def _new_file(self, cap: int) -> tuple[IndexFile, Any]:
        if self.path is not None:
            remove_abandoned(self.path)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{os.urandom(4).hex()}")
            try:
                return IndexFile.create(tmp, cap, self.sql.dim)
            except OSError:
                pass  # a read-only store: the index lives in this process only
        return IndexFile.create(None, cap, self.sql.dim)

    def _header(self, n: int, seq: int) -> dict:
        return {"key": dict(self.key), "count": n, "seq": seq, "dicts": {d: list(v) for d, v in self.values.items()}}

    def _publish(self, f: IndexFile, fh: Any, header: dict, kw: kwindex.Arrays) -> bool:
        """Finish a new file and rename it into place; whether a file was written (not when
        the index lives in memory only, or the disk refused)."""
        try:
            f.finish(fh, header, self.path, kw)
            return fh is not None
        except OSError:
            if fh is not None:
                fh.close()
                Path(fh.name).unlink(missing_ok=True)
            f.kw = tuple(kw)  # the process keeps them in memory
            return False

    def _finish(self, f: IndexFile, fh: Any, n: int, seq: int, kw: kwindex.Arrays) -> None:
        self._publish(f, fh, self._header(n, seq), kw)
        self.file, self.n, self.seq, self.behind = f, n, seq, 0
        self.kw = kwindex.Postings(f.postings() or kwindex.empty(), n)
        self.version += 1

    def _tokens(self) -> Any:
        self._stems = self._stems or (kwindex.tokenizer(self.sql), kwindex.tokenizer(self.sql, query=True))
        return self._stems

    def build(self) -> None:
        """Index every memory anew from SQLite (and write the file)."""
        sql = self.sql
        self.values = {d: [] for d in DICTS}
        self.codes = {d: {} for d in DICTS}
        self._code("agent", "")
        with ReadSnapshot(sql):
            self.key["epoch"] = epoch(sql)
            total = memory_total(sql)
            say_building(self.path, total)
            seq = last_change(sql)[1]
            f, fh = self._new_file(_capacity(total))
            cols, n = f.cols, 0
            cols["rot"][:] = rotation(sql.dim)
            cur = all_rows(sql)
            postings = kwindex.Builder()
            while True:
                rows = list(islice(cur, 65536))
                if not rows:
                    break
                at = np.arange(n, n + len(rows))
                postings.add(at, self._put(cols, at, rows))
                n += len(rows)
            rowids = cols["rowid"][:n]
            batch: list[tuple[int, bytes]] = []
            for item in all_vectors(sql):
                batch.append(item)
                if len(batch) >= 16384:
                    self._put_vectors(cols, rowids, batch)
                    batch = []
                    f.release()
            self._put_vectors(cols, rowids, batch)
            self._link_all(cols, rowids, turn_order(sql))
        self._finish(f, fh, n, seq, postings.arrays())

    def persist(self) -> None:
        """Write the arrays as they are now to a new file (live rows only) and map it."""
        keep = np.flatnonzero(self.cols["alive"][:self.n])
        f, fh, m, kw = self._write(self.cols, keep, self.kw)
        self._finish(f, fh, m, self.seq, kw)

    def _write(self, old: dict, keep: np.ndarray,
               postings: kwindex.Postings) -> tuple[IndexFile, Any, int, kwindex.Arrays]:
        """A new file holding the rows ``keep`` of the arrays ``old`` (header not written),
        and the keyword postings of those rows."""
        f, fh = self._new_file(_capacity(len(keep)))
        m = len(keep)
        remap = np.full(max(self.n, int(keep[-1]) + 1 if m else 0), -1, np.int32)
        remap[keep] = np.arange(m, dtype=np.int32)
        for i in range(0, m, 65536):
            part, dst = keep[i:i + 65536], slice(i, min(i + 65536, m))
            for name in COLUMNS:
                f.cols[name][dst] = old[name][part]
            f.cols["code"][:, dst] = old["code"][:, part]
            f.cols["vec"][dst] = old["vec"][part]
            f.release()
        f.cols["rot"][:] = old["rot"]
        return f, fh, m, postings.export(remap)

    def save(self, lock: Any = None) -> bool:
        """Write the file if this process caught up well beyond it (never in a search: at 1M
        memories it takes seconds; the daemon's worker calls this when idle, other processes
        when they close).  With ``lock`` (the daemon's store lock), it is held only while the
        rows to write are chosen and after the file is in place: rows changed meanwhile are
        in ``mem_changes`` past the file's seq (a reader applies them again), rows forgotten
        meanwhile are scrubbed from the new file.  This process keeps its own arrays."""
        lock = lock if lock is not None else nullcontext()
        with lock:
            if self.file is None or self.behind <= self._stale_rows() or self._saving is not None:
                return False
            cols, behind = self.cols, self.behind
            keep = np.flatnonzero(cols["alive"][:self.n])
            header = self._header(len(keep), self.seq)
            postings = self.kw.snapshot()
            self._saving = []
        written = False
        try:
            f, fh, _, kw = self._write(cols, keep, postings)
            written = self._publish(f, fh, header, kw)
        except OSError:
            pass  # no room for a new file: the old one stays
        finally:
            with lock:
                gone, self._saving = self._saving, None
                if written:
                    self.behind = max(0, self.behind - behind)
                    if gone and self.path is not None:
                        scrub(self.path, gone)
        return written

    def _put(self, cols: dict, pos: np.ndarray, rows: list[tuple]) -> list:
        """Set the small columns of ``rows`` (ROW_SQL's) at ``pos``; no vector yet.  Returns
        each text's stems (its keyword postings)."""
        r = list(zip(*rows))
        code = self._code
        cols["rowid"][pos] = r[0]
        cols["alive"][pos] = 1
        cols["has_vec"][pos] = 0
        cols["user"][pos] = [code("user", v) for v in r[1]]
        cols["agent"][pos] = [code("agent", v) for v in r[2]]
        cols["type"][pos] = [code("type", v) for v in r[3]]
        cols["created"][pos] = r[4]
        cols["valid_from"][pos] = [LO if v is None else v for v in r[5]]
        cols["valid_to"][pos] = [HI if v is None else v for v in r[6]]
        cols["retired"][pos] = [HI if v is None else v for v in r[7]]
        cols["importance"][pos] = r[8]
        cols["turn"][pos] = [t is not None for t in r[9]]
        cols["episode"][pos] = [episode_key(u, t, e) for u, t, e in zip(r[1], r[9], r[10])]
        cols["speaker"][pos] = [-1 if v is None else code("speaker", v) for v in r[11]]
        cols["thash"][pos] = [text_key(t) for t in r[12]]
        cols["dated"][pos] = [says_when(t) for t in r[12]]
        cols["asks"][pos] = [round(100 * asked_share(t, s)) if th is not None else 0 for t, s, th in zip(r[12], r[11], r[9])]
        cols["prev"][pos] = -1
        cols["next"][pos] = -1
        stems = self._tokens()[0]
        docs = [stems(t) for t in r[12]]
        cols["ntok"][pos] = [min(len(d), kwindex.MAX_TF) for d in docs]
        return docs

    @staticmethod
    def _put_vectors(cols: dict, rowids: np.ndarray, items: list[tuple[int, bytes]]) -> None:
        """Set the vectors ``(rowid, int8 bytes as SQLite keeps them)``, their scales and codes."""
        if not items:
            return
        want = np.fromiter((r for r, _ in items), np.int64, len(items))
        pos = np.searchsorted(rowids, want)
        ok = (pos < len(rowids)) & (rowids[np.minimum(pos, len(rowids) - 1)] == want)
        dim = cols["vec"].shape[1]
        vecs = np.frombuffer(b"".join(b for _, b in items), np.int8).reshape(len(items), dim)[ok]
        pos = pos[ok]
        wide = vecs.astype(np.float32)
        norm = np.linalg.norm(wide, axis=1)
        cols["vec"][pos] = vecs
        cols["vscale"][pos] = np.divide(1.0, norm, out=np.zeros_like(norm), where=norm > 0)
        cols["code"][:, pos] = signs(wide, cols["rot"])
        cols["has_vec"][pos] = 1

    @staticmethod
    def _link_all(cols: dict, rowids: np.ndarray, order: Any) -> None:
        """prev / next of every turn from ``turn_order`` (consecutive turns of one thread)."""
        last: tuple | None = None
        prev_rowid = -1
        while True:
            rows = list(islice(order, 65536))
            if not rows:
                break
            r = np.fromiter((x[0] for x in rows), np.int64, len(rows))
            threads = [(x[1], x[2]) for x in rows]
            same = np.fromiter((a == b for a, b in zip([last] + threads[:-1], threads)), bool, len(rows))
            before = np.concatenate([[prev_rowid], r[:-1]])
            prev = np.where(same, before, -1)
            pos = np.searchsorted(rowids, r)
            cols["prev"][pos] = prev
            linked = prev >= 0
            cols["next"][np.searchsorted(rowids, prev[linked])] = r[linked]
            last, prev_rowid = threads[-1], int(r[-1])

    # -- changes since -------------------------------------------------------------------
    def _top(self) -> int:
        """The highest live rowid indexed (rows past it are new)."""
        alive, rowid = self.cols["alive"], self.cols["rowid"]
        i = self.n - 1
        while i >= 0 and not alive[i]:
            i -= 1
        return int(rowid[i]) if i >= 0 else 0

    def _catch_up(self) -> bool:
        """Apply what SQLite changed since; False: this index cannot follow (rebuild it)."""
        sql = self.sql
        with ReadSnapshot(sql):
            if epoch(sql) != self.key["epoch"]:
                return False
            lo, hi = last_change(sql)
            if hi < self.seq or (hi > self.seq and lo > self.seq + 1):
                return False  # another database's changes, or pruned past this index
            new = rows_after(sql, self._top())
            changed = changed_rowids(sql, self.seq) if hi > self.seq else []
            if not new and not changed:
                return True
            seen = {r[0] for r in new}
            changed = [r for r in changed if r not in seen]
            rows = new + rows_of(sql, changed)
            present = [r[0] for r in rows]
            vectors = stored_vectors_of(sql, present)
            links = neighbours_of(sql, present)
        gone = set(changed) - set(present)
        return self._apply(rows, vectors, links, changed, gone, hi)

    def positions(self, rowids: Any, *, live: bool = True) -> np.ndarray:
        """Positions of ``rowids`` (-1: not indexed, or deleted unless ``live`` is False)."""
        want = np.asarray(rowids, np.int64)
        if not self.n or not len(want):
            return np.full(len(want), -1, np.int64)
        rid = self.cols["rowid"][:self.n]
        pos = np.minimum(np.searchsorted(rid, want), self.n - 1)
        ok = rid[pos] == want
        if live:
            ok &= self.cols["alive"][pos] == 1
        return np.where(ok, pos, -1)

    def _unlink(self, pos: int) -> None:
        cols = self.cols
        p, nx = int(cols["prev"][pos]), int(cols["next"][pos])
        if p >= 0:
            (pp,) = self.positions([p])
            if pp >= 0 and cols["next"][pp] == cols["rowid"][pos]:
                cols["next"][pp] = nx
        if nx >= 0:
            (pn,) = self.positions([nx])
            if pn >= 0 and cols["prev"][pn] == cols["rowid"][pos]:
                cols["prev"][pn] = p
        cols["prev"][pos] = cols["next"][pos] = -1

    def _apply(self, rows: list[tuple], vectors: list, links: list, changed: list[int], gone: set[int],
               seq: int) -> bool:
        for pos in self.positions(changed):
            if pos >= 0:
                self._unlink(int(pos))
        old = self.positions(sorted(gone))
        old = old[old >= 0]
        for name in ("alive", "vec", "vscale", "thash", "dated", "ntok", "asks"):
            self.cols[name][old] = 0
        self.cols["code"][:, old] = 0
        for p in old.tolist():
            self.kw.drop(p)
        if gone and self.path is not None:
            scrub(self.path, sorted(gone))  # a forgotten memory's vector leaves the file too
            if self._saving is not None:
                self._saving.extend(gone)  # and the file being written (``save``)
        rows = sorted(rows)
        # a deleted row's place is taken again by its rowid (SQLite reuses the top rowid)
        have = self.positions([r[0] for r in rows], live=False)
        fresh = [r for r, p in zip(rows, have) if p < 0]
        if fresh and self.n and fresh[0][0] <= int(self.cols["rowid"][self.n - 1]):
            return False  # a rowid below the indexed ones (cannot happen in rowid order)
        if self.n + len(fresh) > self.file.cap:  # type: ignore[union-attr]
            self.persist()  # compacts; room for 25% more
            if self.n + len(fresh) > self.file.cap:  # type: ignore[union-attr]
                return False
            have = self.positions([r[0] for r in rows], live=False)
        cols = self.cols
        in_place = [(r, p) for r, p in zip(rows, have) if p >= 0]
        if in_place:
            at = np.array([p for _, p in in_place])
            self.kw.put(at, self._put(cols, at, [r for r, _ in in_place]))
        if fresh:
            at = np.arange(self.n, self.n + len(fresh))
            self.kw.put(at, self._put(cols, at, fresh))
            self.n += len(fresh)
        rid = cols["rowid"][:self.n]
        self._put_vectors(cols, rid, vectors)
        for rowid, prev, nxt in links:
            (pos,) = self.positions([rowid])
            cols["prev"][pos] = -1 if prev is None else prev
            cols["next"][pos] = -1 if nxt is None else nxt
            for other, col in ((prev, "next"), (nxt, "prev")):
                if other is not None:
                    (po,) = self.positions([other])
                    if po >= 0:
                        cols[col][po] = rowid
        self.seq = seq
        self.behind += len(rows) + len(gone)
        self.version += 1
        return True

    def summary(self) -> dict:
        """What ``bm doctor`` checks: live rows, rows with a vector, rows caught up past the file."""
        cols, n = self.cols, self.n
        live = cols["alive"][:n] == 1
        return {"rows": int(live.sum()), "vectors": int((live & (cols["has_vec"][:n] == 1)).sum()),
                "behind": self.behind}

    # -- searching -------------------------------------------------------------------------
    def mask(self, f: Any) -> np.ndarray:
        """Which positions pass the filters ``f`` (a storage.search.Filters).  The part that
        does not depend on the clock is cached until the index changes (an agent asks about
        the same user, turn after turn)."""
        n, cols = self.n, self.cols
        key = (self.version, f.user, f.agent, f.scope, tuple(f.types), f.since, f.until, f.as_of, f.everything)
        if self._mask is None or self._mask[0] != key:
            self._mask = (key, self._static_mask(f))
        m = self._mask[1].copy()
        if not f.everything and n:  # expired (--ttl), not forgotten yet: never returned (real clock)
            gone = self.positions(expired_rowids(self.sql, clock.now_millis()))
            m[gone[gone >= 0]] = False
        if f.everything or f.as_of is not None or not n:
            return m
        t = f.now if f.now is not None else now_millis()
        timed = self._timed_positions()
        if len(timed):
            m[timed] &= (cols["retired"][timed] > t) & (cols["valid_to"][timed] > t)
        return m

    def _static_mask(self, f: Any) -> np.ndarray:
        n, cols = self.n, self.cols
        user = self.codes["user"].get(f.user)
        if user is None or not n:
            return np.zeros(n, bool)
        m = (cols["user"][:n] == user) & (cols["alive"][:n] == 1)
        agents = cols["agent"][:n]
        agent = self.codes["agent"].get(f.agent, -2) if f.agent is not None else -2
        if f.scope == "global":
            m &= agents == self.codes["agent"][""]
        elif f.scope == "agent":
            m &= agents == agent
        elif f.agent is not None:
            m &= (agents == agent) | (agents == self.codes["agent"][""])
        if f.types:
            m &= np.isin(cols["type"][:n], [self.codes["type"].get(t, -2) for t in f.types])
        if f.since is not None:
            m &= cols["created"][:n] >= f.since
        if f.until is not None:
            m &= cols["created"][:n] < f.until
        if f.everything:
            return m
        if f.as_of is not None:
            d = f.as_of
            vto, ret = cols["valid_to"][:n], cols["retired"][:n]
            return m & (cols["valid_from"][:n] <= d) & (vto > d) & ~((ret != HI) & (vto == HI))
        return m

    def extremes(self, m: np.ndarray, k: int, *, newest: bool, important: bool) -> np.ndarray:
        """Positions passing ``m`` among the ``k`` newest and the ``k`` most important
        (importance above 0.5) memories, as asked."""
        cols, out = self.cols, [np.zeros(0, np.int64)]
        if newest:
            idx = np.flatnonzero(m)
            if len(idx) > k:
                idx = idx[np.argpartition(-cols["created"][idx], k - 1)[:k]]
            out.append(idx)
        if important:
            if self._important is None or self._important[0] != self.version:
                self._important = (self.version, np.flatnonzero(cols["importance"][:self.n] > 0.5))
            idx = self._important[1]
            idx = idx[m[idx]]
            if len(idx) > k:
                idx = idx[np.argpartition(-cols["importance"][idx], k - 1)[:k]]
            out.append(idx)
        return distinct(np.concatenate(out))

    def _kw(self) -> tuple[int, int, float]:
        """(rows, dead ones included; N, the live rows; their average token count)."""
        if self._kw_stats is None or self._kw_stats[0] != self.version:
            self._kw_stats = (self.version, *kwindex.lengths(self.cols["alive"][:self.n], self.cols["ntok"][:self.n]))
        return self.n, self._kw_stats[1], self._kw_stats[2]

    def keywords(self, query: str, m: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` best keyword hits passing ``m``: (positions, minus FTS5's bm25), best
        first (storage/kwindex.py ``search``)."""
        return kwindex.search(self.kw, self._tokens()[1], query, self.cols["alive"], self.cols["ntok"], m, n,
                              self._kw())

    def keyword_words(self, query: str, cap: int | None) -> list[str]:
        """The query's words a keyword search uses (``cap``: the postings budget; None: no cap)."""
        rows, total, _ = self._kw()
        return kwindex.kept_words(self.kw, self._tokens()[1], query, rows, total, cap)[0]

    def _timed_positions(self) -> np.ndarray:
        """Positions of the memories that end or were retired (the rest are true now)."""
        if self._timed is None or self._timed[0] != self.version:
            cols, n = self.cols, self.n
            self._timed = (self.version, np.flatnonzero((cols["retired"][:n] != HI) | (cols["valid_to"][:n] != HI)))
        return self._timed[1]

    def nearest(self, q: np.ndarray, m: np.ndarray, k: int, rescore: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` positions passing ``m`` nearest to ``q`` (cosine, best first; ties: lower
        rowid) and their cosines.  Past ``EXACT_MAX`` rows, a first pass on the sign codes:
        the Hamming distance on the first ``FIRST_BITS`` of the bits over every row, on all the bits
        for the nearest ``FIRST_KEEP`` x ``rescore`` of those, then the ``rescore`` nearest
        codes are scored on the int8 vectors (by default 1,000, or one in ``RESCORE_SHARE`` rows
        up to 4,000: recall@10 against an exact float32 scan measured by scripts/bench_speed.py)."""
        cols, n = self.cols, self.n
        ok = m & (cols["has_vec"][:n] == 1)
        count = int(np.count_nonzero(ok))
        if not count:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if rescore is None:
            rescore = max(1000, min(4000, count // RESCORE_SHARE))
        rescore = max(rescore, k)
        if count > max(EXACT_MAX, 2 * rescore):
            qcode = signs(self._rotated(q), cols["rot"])[:, 0]
            code = cols["code"]
            half = max(1, int(code.shape[0] * FIRST_BITS))
            dist = hamming(code, qcode, 0, half, n)
            if count < n:
                dist[~ok] = MASKED
            first = smallest(dist, min(count, FIRST_KEEP * rescore))
            dist = hamming_at(code, qcode, half, code.shape[0], first, dist[first])
            idx = first[smallest(dist, rescore)]
            sims = self._sims(idx, q)
        elif count == n:
            idx = np.arange(n)
            sims = self._sims(slice(0, n), q)  # every row: a slice reads them without a copy
        else:
            idx = np.flatnonzero(ok)
            sims = self._sims(idx, q)
        k = min(k, len(idx))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.lexsort((idx[top], -sims[top]))]
        return idx[top], sims[top]

    def cosines(self, pos: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Cosines of the rows at ``pos`` (0 for those without a vector yet)."""
        if not len(pos):
            return np.zeros(0, np.float32)
        return np.where(self.cols["has_vec"][pos] == 1, self._sims(pos, q), 0.0).astype(np.float32)

    def _sims(self, pos: Any, q: np.ndarray) -> np.ndarray:
        """Cosines of the int8 rows at ``pos`` (positions or a slice) with the unit query ``q``
        (einsum upcasts the int8 rows as it goes: as cheap per row as a float32 einsum).  The
        rows are of the rotated vectors, as SQLite keeps them (recallsql.quantise): so is the query."""
        return np.einsum("ij,j->i", self.cols["vec"][pos], self._rotated(q)) * self.cols["vscale"][pos]

    def _rotated(self, q: np.ndarray) -> np.ndarray:
        """``q`` times the stored vectors' rotation (the last query's kept: a search asks often)."""
        q = np.asarray(q, np.float32)
        key = q.tobytes()
        if self._last_query[0] != key:
            self._last_query = (key, rotate(q)[0])
        return self._last_query[1]
