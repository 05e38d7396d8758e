"""Finding memories: vector candidates, keyword candidates, one fused ranking.

Vectors: the first search in a process asks sqlite-vec for a filtered KNN
(partitioned by user, metadata columns for agent, type and time), which needs
no warm-up.  A process that searches again (``recall --batch``, a long-lived
agent) loads the vectors once into a numpy matrix and scans it exactly, which
is 4x faster than the flat scan at 100,000 memories; the matrix follows this
process's own writes incrementally and reloads when another process commits.

Keywords: FTS5 with BM25 over the user's words, each quoted, so FTS syntax in a
query (``"``, ``*``, ``AND (``, ``NEAR``) is searched as text.  Keyword hits add
candidates, not only boosts.

Fusion: reciprocal-rank fusion of the two rankings (k=60), then sorted; each
result says which signal put it there and how strongly.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .sqlstore import SQLStore

RRF_K = 60
COMMON_SHARE = 0.2     # keyword search skips words found in more than this share of memories
COMMON_MIN_DOCS = 20   # ... once the store holds at least this many
# From this many vectors on, a search runs the keyword query in a second thread while
# this one scans the matrix (SQLite and numpy's einsum both release the GIL).
CONCURRENT_MIN_ROWS = 20_000
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves s t don
""".split())
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class Filters:
    user: str
    agent: str | None = None      # None: every scope of the user; else that agent + global
    types: tuple[str, ...] = ()
    since: int | None = None      # epoch ms, inclusive
    until: int | None = None      # epoch ms, exclusive

    def sql(self, alias: str = "m") -> tuple[str, list[Any]]:
        where, args = [f"{alias}.user_id = ?"], [self.user]
        if self.agent is not None:
            where.append(f"({alias}.agent_id = ? OR {alias}.agent_id IS NULL)")
            args.append(self.agent)
        if self.types:
            where.append(f"{alias}.type IN ({','.join('?' * len(self.types))})")
            args.extend(self.types)
        if self.since is not None:
            where.append(f"{alias}.created_at >= ?")
            args.append(self.since)
        if self.until is not None:
            where.append(f"{alias}.created_at < ?")
            args.append(self.until)
        return " AND ".join(where), args

    def vec_sql(self) -> tuple[str, list[Any]]:
        where, args = ["user_id = ?"], [self.user]
        if self.agent is not None:
            where.append("agent_id IN (?, '')")
            args.append(self.agent)
        if self.types:
            where.append(f"type IN ({','.join('?' * len(self.types))})")
            args.extend(self.types)
        if self.since is not None:
            where.append("created_at >= ?")
            args.append(self.since)
        if self.until is not None:
            where.append("created_at < ?")
            args.append(self.until)
        return " AND ".join(where), args


def query_words(text: str) -> list[str]:
    """The query's content words, lower-cased, deduplicated, in order (at most 32)."""
    words = [w.lower() for w in _WORD.findall(text)]
    content = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(content))[:32]


def keyword_query(text: str | list[str], op: str = "OR") -> str | None:
    """An FTS5 query joining the query's content words with ``op`` (OR: any word, AND:
    every word), each word quoted, so it is never FTS syntax."""
    words = query_words(text) if isinstance(text, str) else text
    if not words:
        return None
    return f" {op} ".join('"' + w.replace('"', '""') + '"' for w in words)


@dataclass
class VectorMatrix:
    """All vectors of the store in memory, with the columns filters need."""

    rowids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    users: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    agents: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    types: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    created: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    max_rowid: int = 0
    # user -> boolean row mask; comparing 100,000 Python strings costs ~2 ms a query
    _user_masks: dict = field(default_factory=dict, repr=False)

    def extend(self, sql: SQLStore, dim: int) -> None:
        # The filter columns come from `memories` (the same values the vec0 table keeps as
        # metadata; agent NULL there is '' here): reading them out of vec0 row by row
        # cost more than the vectors themselves (1.7 s -> ~0.8 s at 100,000 memories).
        rows = sql.conn.execute(
            "SELECT v.rowid, v.embedding, m.user_id, coalesce(m.agent_id, ''), m.type, m.created_at "
            "FROM memories_vec v JOIN memories m ON m.rowid = v.rowid WHERE v.rowid > ?",
            (self.max_rowid,)).fetchall()
        if not rows:
            return
        rowids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        if len(rows) > 1 and not bool(np.all(rowids[1:] > rowids[:-1])):
            # vec0 returns each user partition in turn: keep the matrix in rowid order
            order = np.argsort(rowids, kind="stable")
            rows = [rows[i] for i in order]
            rowids = rowids[order]
        vecs = np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(len(rows), dim)
        self.rowids = np.concatenate([self.rowids, rowids])
        self.vectors = vecs.copy() if self.vectors.size == 0 else np.vstack([self.vectors, vecs])
        self.users = np.concatenate([self.users, np.array([r[2] for r in rows], object)])
        self.agents = np.concatenate([self.agents, np.array([r[3] for r in rows], object)])
        self.types = np.concatenate([self.types, np.array([r[4] for r in rows], object)])
        self.created = np.concatenate([self.created, np.array([r[5] for r in rows], np.int64)])
        self.max_rowid = int(rowids.max())
        self._user_masks.clear()

    def _user_mask(self, user: str) -> np.ndarray:
        mask = self._user_masks.get(user)
        if mask is None:
            if len(self._user_masks) >= 64:
                self._user_masks.clear()
            mask = self._user_masks[user] = self.users == user
        return mask

    def search(self, q: np.ndarray, f: Filters, n: int) -> list[tuple[int, float]]:
        if not len(self.rowids):
            return []
        mask = self._user_mask(f.user).copy()
        if f.agent is not None:
            mask &= (self.agents == f.agent) | (self.agents == "")
        if f.types:
            mask &= np.isin(self.types, list(f.types))
        if f.since is not None:
            mask &= self.created >= f.since
        if f.until is not None:
            mask &= self.created < f.until
        idx = np.flatnonzero(mask)
        if not len(idx):
            return []
        # einsum, not `@`: BLAS would start its own threads, which fight onnxruntime's
        # (still spinning right after embedding the query) for the cores - 2-3x slower
        # on 2 cores.  A small subset is gathered first; a large one is scanned whole
        # and then picked, which is cheaper than copying most of the matrix.
        if len(idx) == len(mask):
            sims = np.einsum("ij,j->i", self.vectors, q)
        elif 4 * len(idx) < len(mask):
            sims = np.einsum("ij,j->i", self.vectors[idx], q)
        else:
            sims = np.einsum("ij,j->i", self.vectors, q)[idx]
        n = min(n, len(idx))
        top = np.argpartition(-sims, n - 1)[:n]
        top = np.sort(top)  # matrix order is rowid order: equal scores rank by rowid
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(int(self.rowids[idx[i]]), float(sims[i])) for i in top]


class Searcher:
    """Vector and keyword candidates fused into one ranking; one per open store."""

    def __init__(self, sql: SQLStore) -> None:
        self.sql = sql
        self.matrix: VectorMatrix | None = None
        self._data_version = None
        self._total: tuple[int, int] | None = None  # (data_version, number of memories)
        self._tokenizer: Any = None
        self._generation = -1
        self._searches = 0
        self._stale = False

    def invalidate(self) -> None:
        """Called after this process wrote: the next vector search brings the matrix up to date."""
        self._total = None
        self._stale = True

    def _vector_candidates(self, q: np.ndarray, f: Filters, n: int) -> list[tuple[int, float]]:
        self._searches += 1
        version = self.sql.conn.execute("PRAGMA data_version").fetchone()[0]
        if self.matrix is not None and (self._stale or version != self._data_version):
            # this or another connection committed: new rows are appended; removed or
            # replaced vectors (a forget, a reindex) bump the generation and need a reload
            if self.sql.generation() == self._generation:
                self._stale = True
            else:
                self.matrix = None
        if self.matrix is None and self._searches == 1:
            where, args = f.vec_sql()
            rows = self.sql.conn.execute(
                f"SELECT rowid, distance FROM memories_vec WHERE embedding MATCH ? AND k = ? AND {where}",
                [q.astype(np.float32).tobytes(), n, *args]).fetchall()
            # equal distances come back in storage order: rank them by rowid, so a
            # rebuilt store (same rowid order, other layout) answers the same
            return sorted(((r[0], 1.0 - r[1]) for r in rows), key=lambda x: (-x[1], x[0]))
        if self.matrix is None:
            self.matrix = VectorMatrix()
            self._generation = self.sql.generation()
            self._stale = True
        if self._stale:
            self.matrix.extend(self.sql, self.sql.dim)
            self._stale = False
        self._data_version = version
        return self.matrix.search(q, f, n)

    def _selective_words(self, query: str) -> list[str]:
        """The query's words minus those in more than COMMON_SHARE of all memories.

        Such a word (a speaker's name prefixed to every turn, a topic the whole store is
        about) weighs next to nothing in BM25, yet makes FTS5 score a large share of the
        store: dropping it keeps keyword search fast and its candidates specific.  The
        vector signal still sees the whole query."""
        words = query_words(query)
        if not words:
            return []
        c = self.sql.conn
        version = c.execute("PRAGMA data_version").fetchone()[0]
        if self._total is None or self._total[0] != version:
            self._total = (version, c.execute("SELECT count(*) FROM memories").fetchone()[0])
        total = self._total[1]
        if total < COMMON_MIN_DOCS:
            return words
        if self._tokenizer is None:
            import apsw

            self._tokenizer = (c.fts5_tokenizer("porter", ["unicode61"]), apsw.FTS5_TOKENIZE_QUERY)
        tokenize, flags = self._tokenizer
        stems = {w: [t[2] for t in tokenize(w.encode(), flags, None)] for w in words}
        terms = sorted({t for ts in stems.values() for t in ts})
        df = dict(c.execute(f"SELECT term, doc FROM memories_vocab WHERE term IN ({','.join('?' * len(terms))})",
                            terms).fetchall()) if terms else {}
        limit = COMMON_SHARE * total
        return [w for w in words if not stems[w] or min(df.get(t, 0) for t in stems[w]) <= limit]

    def _keyword_candidates(self, query: str, f: Filters, n: int) -> list[tuple[int, float]]:
        match = keyword_query(self._selective_words(query))
        if match is None:
            return []
        where, args = f.sql("m")
        # Rank the keyword hits first and join only the best `pool` of them with
        # memories for the filters: a common word (a speaker's name) can match a third
        # of the store, and joining every hit was most of the cost.  If fewer than n of
        # those pass the filters (other users' memories), rank every hit as before.
        # Both orders are total (score, rowid), so the answer is the same.
        pool = 4 * n
        rows = self.sql.conn.execute(
            f"SELECT m.rowid, h.s FROM (SELECT rowid, bm25(memories_fts) AS s FROM memories_fts "
            f"WHERE memories_fts MATCH ? ORDER BY s, rowid LIMIT ?) AS h "
            f"JOIN memories m ON m.rowid = h.rowid WHERE {where} ORDER BY h.s, m.rowid LIMIT ?",
            [match, pool, *args, n]).fetchall()
        if len(rows) < n:
            rows = self.sql.conn.execute(
                f"SELECT m.rowid, bm25(memories_fts) AS s FROM memories_fts JOIN memories m "
                f"ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ? AND {where} "
                f"ORDER BY s, m.rowid LIMIT ?", [match, *args, n]).fetchall()
        return [(r[0], -float(r[1])) for r in rows]

    def _matrix_ready(self) -> bool:
        """Whether the vector search is a scan of an up-to-date matrix (no SQL needed)."""
        if self.matrix is None or self._stale or len(self.matrix.rowids) < CONCURRENT_MIN_ROWS:
            return False
        return self.sql.conn.execute("PRAGMA data_version").fetchone()[0] == self._data_version

    def _both_concurrently(self, query: str, q: np.ndarray, f: Filters, n: int) -> tuple[list, list]:
        """Keyword query in a helper thread, matrix scan here: ~max instead of sum of the two.
        The helper thread is the only user of the connection meanwhile."""
        box: dict[str, Any] = {}

        def keyword() -> None:
            try:
                box["kw"] = self._keyword_candidates(query, f, n)
            except BaseException as exc:  # re-raised in the caller's thread
                box["error"] = exc

        worker = threading.Thread(target=keyword, name="bm-keyword", daemon=True)
        worker.start()
        try:
            self._searches += 1
            vec = self.matrix.search(q, f, n)  # type: ignore[union-attr]
        finally:
            try:
                worker.join()
            except KeyboardInterrupt:
                worker.join()  # the query takes milliseconds: let it finish before closing
                raise
        if "error" in box:
            raise box["error"]
        return vec, box["kw"]

    def search(self, query: str, qvec: np.ndarray, f: Filters, k: int) -> list[dict]:
        pool = max(50, 4 * k)
        if self._matrix_ready():
            vec, kw = self._both_concurrently(query, qvec, f, pool)
        else:
            vec = self._vector_candidates(qvec, f, pool)
            kw = self._keyword_candidates(query, f, pool)
        fused: dict[int, dict] = {}
        for name, ranked in (("vector", vec), ("keyword", kw)):
            for rank, (rowid, raw) in enumerate(ranked, 1):
                entry = fused.setdefault(rowid, {"score": 0.0, "signals": {}})
                part = 1.0 / (RRF_K + rank)
                entry["score"] += part
                entry["signals"][name] = {"rank": rank, "raw": round(raw, 4), "rrf": round(part, 5)}
        best = sorted(fused.items(), key=lambda kv: (-kv[1]["score"], kv[0]))[:k]
        return [{"rowid": rowid, **entry} for rowid, entry in best]
