"""The candidate side of recall: the per-store search index (:class:`SearchIndex`) that
finds memories by vector (sqlite-vec KNN, then an in-memory matrix), by keyword (FTS5/BM25)
and by filter, with the caches that make repeated searches fast, and the filters
(:class:`Filters`) every candidate passes.  brandmind/recall.py ranks what it finds
(brandmind/scoring.py scores); the Store holds one index (``store.searcher``) and
invalidates it after each write.  The queries recall's ranking needs besides (neighbouring
turns, the newest and most important memories) are here too.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..clock import now_millis, parse_time

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore


def _marks(items: list) -> str:
    return ",".join("?" * len(items))

COMMON_SHARE = 0.1     # keyword search skips words found in more than this share of memories
COMMON_MIN_DOCS = 20   # ... once the store holds at least this many
MAX_POSTINGS = 20_000  # ... and keeps its rarest words within this many documents in all
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


# -- "currently true" / "true as of" ------------------------------------------------------------
def current_sql(alias: str = "m", as_of: str | int | None = None, *, now: int | None = None) -> tuple[str, list]:
    """A WHERE fragment (and its args) keeping the memories true now, or true as of a date.

    Now: not retired by then and not ended (``valid_to`` in the future or unknown).  As of D (world
    time): ``valid_from <= D < valid_to`` (unknown ends are open), minus the memories retired
    as corrections (``retired_at`` set, ``valid_to`` NULL: they were never true).  System time
    is not filtered for --as-of: what bm learned later about D counts."""
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", alias):
        raise ValueError(f"bad table alias {alias!r}")
    a = alias
    if as_of is None:
        t = now if now is not None else now_millis()
        return (f"(({a}.retired_at IS NULL OR {a}.retired_at > ?) AND ({a}.valid_to IS NULL OR {a}.valid_to > ?))",
                [t, t])
    d = parse_time(as_of, field="as_of") if not isinstance(as_of, int) else as_of
    return (f"(({a}.valid_from IS NULL OR {a}.valid_from <= ?) AND ({a}.valid_to IS NULL OR {a}.valid_to > ?) "
            f"AND NOT ({a}.retired_at IS NOT NULL AND {a}.valid_to IS NULL))", [d, d])


# -- recall: candidates --------------------------------------------------------------------------
RANK_COLS = ("m.rowid, m.id, m.text, m.agent_id, m.importance, m.created_at, m.valid_from, "
             "m.thread, m.episode, m.speaker")


def data_version(sql: "SQLStore") -> int:
    """SQLite's ``data_version``: changes when another connection commits."""
    return sql.conn.execute("PRAGMA data_version").fetchone()[0]


def count(sql: "SQLStore") -> int:
    return sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0]


def vector_knn(sql: "SQLStore", q: bytes, n: int, where: str, args: list) -> list[tuple[int, float]]:
    """sqlite-vec's filtered KNN: ``(rowid, distance)``, nearest first (``where`` over the
    vec0 table's metadata columns)."""
    return sql.conn.execute(
        f"SELECT rowid, distance FROM memories_vec WHERE embedding MATCH ? AND k = ? AND {where}",
        [q, n, *args]).fetchall()


def vectors_after(sql: "SQLStore", rowid: int) -> list[tuple]:
    """``(rowid, embedding, user, agent or '', type, created_at)`` of every vector past ``rowid``.

    The filter columns come from ``memories`` (the same values the vec0 table keeps as
    metadata; agent NULL there is '' here): reading them out of vec0 row by row cost more
    than the vectors themselves (1.7 s -> ~0.8 s at 100,000 memories)."""
    return sql.conn.execute(
        "SELECT v.rowid, v.embedding, m.user_id, coalesce(m.agent_id, ''), m.type, m.created_at "
        "FROM memories_vec v JOIN memories m ON m.rowid = v.rowid WHERE v.rowid > ?", (rowid,)).fetchall()


def late_vectors(sql: "SQLStore", seq: int) -> tuple[int, int, list[tuple]]:
    """Vectors made after their memory (brandmind/backlog.py) listed past ``seq`` in
    ``vec_late``: ``(lowest seq kept, highest seq, rows as vectors_after gives them)``."""
    lo, hi = sql.conn.execute("SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM vec_late").fetchone()
    if hi <= seq:
        return lo, hi, []
    rows = sql.conn.execute(
        "SELECT v.rowid, v.embedding, m.user_id, coalesce(m.agent_id, ''), m.type, m.created_at "
        "FROM (SELECT DISTINCT mem_rowid FROM vec_late WHERE seq > ?) l JOIN memories_vec v ON v.rowid = l.mem_rowid "
        "JOIN memories m ON m.rowid = v.rowid", (seq,)).fetchall()
    return lo, hi, rows


def vectors_of(sql: "SQLStore", rowids: list[int], chunk: int = 0) -> list[tuple[int, bytes]]:
    """``(rowid, embedding)`` of those rowids that have a vector (``chunk``: at most that
    many rowids per query; 0: one query)."""
    out: list[tuple[int, bytes]] = []
    step = chunk or max(1, len(rowids))
    for i in range(0, len(rowids), step):
        part = rowids[i:i + step]
        out.extend(sql.conn.execute(
            f"SELECT rowid, embedding FROM memories_vec WHERE rowid IN ({_marks(part)})", part).fetchall())
    return out


def query_tokenizer(sql: "SQLStore") -> tuple[Any, int]:
    """The FTS5 tokenizer of ``memories_fts`` (porter over unicode61) and its query flag."""
    import apsw

    return sql.conn.fts5_tokenizer("porter", ["unicode61"]), apsw.FTS5_TOKENIZE_QUERY


def doc_freq(sql: "SQLStore", terms: list[str]) -> dict[str, int]:
    """term -> the number of memories holding it (``memories_vocab``)."""
    if not terms:
        return {}
    return dict(sql.conn.execute(f"SELECT term, doc FROM memories_vocab WHERE term IN ({_marks(terms)})",
                                 terms).fetchall())


def keyword_hits(sql: "SQLStore", match: str, where: str, args: list, n: int) -> list[tuple[int, float]]:
    """The best ``n`` FTS5 hits of ``match`` that pass ``where`` (alias ``m``): ``(rowid, bm25)``,
    best (lowest) first.

    The keyword hits are ranked first and only the best ``4 n`` of them joined with memories
    for the filters: a common word can match a third of the store, and joining every hit was
    most of the cost.  If fewer than n of those pass the filters (other users' memories),
    every hit is ranked.  Both orders are total (score, rowid), so the answer is the same."""
    pool = 4 * n
    rows = sql.conn.execute(
        f"SELECT m.rowid, h.s FROM (SELECT rowid, bm25(memories_fts) AS s FROM memories_fts "
        f"WHERE memories_fts MATCH ? ORDER BY s, rowid LIMIT ?) AS h "
        f"JOIN memories m NOT INDEXED ON m.rowid = h.rowid WHERE {where} ORDER BY h.s, m.rowid LIMIT ?",
        [match, pool, *args, n]).fetchall()
    if len(rows) < n:
        rows = sql.conn.execute(
            f"SELECT m.rowid, bm25(memories_fts) AS s FROM memories_fts JOIN memories m NOT INDEXED "
            f"ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ? AND {where} "
            f"ORDER BY s, m.rowid LIMIT ?", [match, *args, n]).fetchall()
    return rows


def rank_rows(sql: "SQLStore", rowids: list[int], where: str, args: list) -> dict[int, dict]:
    """rowid -> the columns ranking needs (:data:`RANK_COLS`), for the rowids passing ``where``."""
    out: dict[int, dict] = {}
    for i in range(0, len(rowids), 900):
        chunk = rowids[i:i + 900]
        # NOT INDEXED: look the rows up by rowid; otherwise SQLite may walk a user index
        # (every row of the user) to apply `user_id = ?` (10 ms instead of 1 at 100,000)
        for r in sql.rows(f"SELECT {RANK_COLS} FROM memories m NOT INDEXED WHERE m.rowid IN "
                          f"({_marks(chunk)}) AND {where}", (*chunk, *args)):
            out[r["rowid"]] = r
    return out


def thread_neighbours(sql: "SQLStore", rowids: list[int]) -> dict[int, tuple[int | None, int | None]]:
    """rowid -> (the turn before it, the turn after it) in its user's thread."""
    pairs: dict[int, tuple[int | None, int | None]] = {}
    for i in range(0, len(rowids), 400):
        chunk = rowids[i:i + 400]
        rows = sql.conn.execute(
            "SELECT m.rowid, "
            "(SELECT p.rowid FROM memories p WHERE p.user_id = m.user_id AND p.thread = m.thread "
            " AND (p.created_at, p.rowid) < (m.created_at, m.rowid) "
            " ORDER BY p.created_at DESC, p.rowid DESC LIMIT 1), "
            "(SELECT n.rowid FROM memories n WHERE n.user_id = m.user_id AND n.thread = m.thread "
            " AND (n.created_at, n.rowid) > (m.created_at, m.rowid) "
            " ORDER BY n.created_at, n.rowid LIMIT 1) "
            f"FROM memories m WHERE m.rowid IN ({_marks(chunk)})", chunk).fetchall()
        pairs.update({r[0]: (r[1], r[2]) for r in rows})
    return pairs


def newest(sql: "SQLStore", where: str, args: list, n: int) -> list[int]:
    """rowids of the ``n`` newest memories passing ``where`` (alias ``m``)."""
    return [r[0] for r in sql.conn.execute(
        f"SELECT m.rowid FROM memories m WHERE {where} ORDER BY m.created_at DESC LIMIT ?", [*args, n])]


def most_important(sql: "SQLStore", where: str, args: list, n: int) -> list[int]:
    """rowids of the ``n`` most important memories (above 0.5) passing ``where`` (alias ``m``)."""
    return [r[0] for r in sql.conn.execute(
        f"SELECT m.rowid FROM memories m WHERE {where} AND m.importance > 0.5 "
        f"ORDER BY m.importance DESC LIMIT ?", [*args, n])]


def speakers(sql: "SQLStore", user: str) -> list[str]:
    """The speakers of the user's conversations."""
    return [r[0] for r in sql.conn.execute(
        "SELECT DISTINCT speaker FROM memories WHERE user_id = ? AND speaker IS NOT NULL", (user,))]


def rowids_of(sql: "SQLStore", ids: list[str]) -> list[int]:
    """The rowids of the memories ``ids`` that exist."""
    return [r["rowid"] for r in sql.rows(f"SELECT rowid FROM memories WHERE id IN ({_marks(ids)})", ids)]


@dataclass
class Filters:
    user: str
    agent: str | None = None      # with scope None: None = every scope of the user, else that agent + global
    types: tuple[str, ...] = ()
    since: int | None = None      # epoch ms, inclusive
    until: int | None = None      # epoch ms, exclusive
    scope: str | None = None      # "agent": only the agent's own memories; "global": only the user's global ones
    now: int | None = None        # what "currently true" is relative to (default: the clock)
    as_of: int | None = None      # world time: what was true then, instead of what is true now
    everything: bool = False      # retired and ended memories too (what `forget --match` sees)

    def sql(self, alias: str = "m") -> tuple[str, list[Any]]:
        where, args = [f"{alias}.user_id = ?"], [self.user]
        if self.scope == "global":
            where.append(f"{alias}.agent_id IS NULL")
        elif self.scope == "agent":
            where.append(f"{alias}.agent_id = ?")
            args.append(self.agent)
        elif self.agent is not None:
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
        if not self.everything:
            frag, fargs = current_sql(alias, self.as_of, now=self.now)
            where.append(frag)
            args.extend(fargs)
        return " AND ".join(where), args

    def vec_sql(self) -> tuple[str, list[Any]]:
        """The part of the filters sqlite-vec can apply inside its KNN scan."""
        where, args = ["user_id = ?"], [self.user]
        if self.scope == "global":
            where.append("agent_id = ''")
        elif self.scope == "agent":
            where.append("agent_id = ?")
            args.append(self.agent)
        elif self.agent is not None:
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
    late_seq: int = -1  # the last ``vec_late`` entry read (-1: none yet)
    # user -> boolean row mask; comparing 100,000 Python strings costs ~2 ms a query
    _user_masks: dict = field(default_factory=dict, repr=False)

    def extend(self, sql: SQLStore, dim: int) -> bool:
        """Add the vectors stored since: past ``max_rowid``, and those made late below it
        (``vec_late``).  False: late entries this matrix has not read were pruned (reload)."""
        fresh = self.late_seq < 0  # a new matrix reads every vector below: only the mark matters
        lo, hi, late = late_vectors(sql, 1 << 62 if fresh else self.late_seq)
        if not fresh and lo > self.late_seq + 1:
            return False
        rows = vectors_after(sql, self.max_rowid)
        if late:
            want = np.fromiter((r[0] for r in late), np.int64, len(late))
            if len(self.rowids):
                pos = np.searchsorted(self.rowids, want).clip(0, len(self.rowids) - 1)
                want = want[self.rowids[pos] != want]
            keep = set(want.tolist()) - {r[0] for r in rows}
            rows += [r for r in late if r[0] in keep]
        self.late_seq = hi
        if rows:
            self._add(rows, dim)
        return True

    def _add(self, rows: list[tuple], dim: int) -> None:
        rowids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        if len(rows) > 1 and not bool(np.all(rowids[1:] > rowids[:-1])):
            # vec0 returns each user partition in turn: keep the matrix in rowid order
            order = np.argsort(rowids, kind="stable")
            rows = [rows[i] for i in order]
            rowids = rowids[order]
        vecs = np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(len(rows), dim)
        cols = {"rowids": rowids, "vectors": vecs, "users": np.array([r[2] for r in rows], object),
                "agents": np.array([r[3] for r in rows], object), "types": np.array([r[4] for r in rows], object),
                "created": np.array([r[5] for r in rows], np.int64)}
        if len(self.rowids) and rowids[0] < self.rowids[-1]:  # late vectors: each to its rowid's place
            pos = np.searchsorted(self.rowids, rowids)
            for name, values in cols.items():
                setattr(self, name, np.insert(getattr(self, name), pos, values, axis=0))
        elif self.vectors.size == 0:
            self.rowids, self.vectors = rowids, vecs.copy()
            for name in ("users", "agents", "types", "created"):
                setattr(self, name, cols[name])
        else:
            for name, values in cols.items():
                setattr(self, name, np.concatenate([getattr(self, name), values]))
        self.max_rowid = int(self.rowids[-1])
        self._user_masks.clear()

    def cosines(self, rowids: list[int], q: np.ndarray) -> dict[int, float]:
        """Cosines of the given rows (those in the matrix)."""
        if not rowids or not len(self.rowids):
            return {}
        want = np.asarray(rowids, np.int64)
        pos = np.searchsorted(self.rowids, want)
        pos = np.minimum(pos, len(self.rowids) - 1)
        ok = self.rowids[pos] == want
        sims = np.einsum("ij,j->i", self.vectors[pos[ok]], q)
        return {int(r): float(x) for r, x in zip(want[ok], sims)}

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
        if f.scope == "global":
            mask &= self.agents == ""
        elif f.scope == "agent":
            mask &= self.agents == f.agent
        elif f.agent is not None:
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


class SearchIndex:
    """Candidates of every lookup signal, with their caches; one per open store."""

    def __init__(self, sql: SQLStore) -> None:
        self.sql = sql
        self.matrix: VectorMatrix | None = None
        self._data_version = None
        self._total: tuple[int, int] | None = None  # (data_version, number of memories)
        self._speakers: dict[str, tuple[int, list[str]]] = {}
        self._tokenizer: Any = None
        self._generation = -1
        self._searches = 0
        self._stale = False

    def invalidate(self) -> None:
        """Called after this process wrote: the next vector search brings the matrix up to date."""
        self._total = None
        self._stale = True

    # -- vector candidates -------------------------------------------------------
    def vector_candidates(self, q: np.ndarray, f: Filters, n: int) -> list[tuple[int, float]]:
        self._searches += 1
        version = data_version(self.sql)
        if self.matrix is not None and (self._stale or version != self._data_version):
            # this or another connection committed: new rows are appended; removed or
            # replaced vectors (a forget, a reindex) bump the generation and need a reload
            if self.sql.generation() == self._generation:
                self._stale = True
            else:
                self.matrix = None
        if self.matrix is None and self._searches == 1:
            where, args = f.vec_sql()
            rows = vector_knn(self.sql, q.astype(np.float32).tobytes(), n, where, args)
            # equal distances come back in storage order: rank them by rowid, so a
            # rebuilt store (same rowid order, other layout) answers the same
            return sorted(((r[0], 1.0 - r[1]) for r in rows), key=lambda x: (-x[1], x[0]))
        if self.matrix is None:
            self.matrix = VectorMatrix()
            self._generation = self.sql.generation()
            self._stale = True
        if self._stale:
            if not self.matrix.extend(self.sql, self.sql.dim):
                self.matrix = VectorMatrix()
                self.matrix.extend(self.sql, self.sql.dim)
            self._stale = False
        self._data_version = version
        return self.matrix.search(q, f, n)

    def cosines(self, rowids: list[int], q: np.ndarray) -> dict[int, float]:
        """Cosines of candidates another signal brought (their vectors by rowid)."""
        if not rowids:
            return {}
        if self.matrix is not None and not self._stale:
            out = self.matrix.cosines(rowids, q)
            rowids = [r for r in rowids if r not in out]
        else:
            out = {}
        if rowids:
            for rowid, blob in vectors_of(self.sql, rowids):
                out[rowid] = float(np.frombuffer(blob, np.float32) @ q)
        return out

    # -- keyword candidates ------------------------------------------------------
    def selective_words(self, query: str) -> list[str]:
        """The query's words minus those in more than COMMON_SHARE of all 

        Such a word (a speaker's name prefixed to every turn, a topic the whole store is
        about) weighs next to nothing in BM25, yet makes FTS5 score a large share of the
        store: dropping it keeps keyword search fast and its candidates specific.  The
        vector signal still sees the whole query."""
        words = query_words(query)
        if not words:
            return []
        total = self.memory_count()
        if total < COMMON_MIN_DOCS:
            return words
        if self._tokenizer is None:
            self._tokenizer = query_tokenizer(self.sql)
        tokenize, flags = self._tokenizer
        stems = {w: [t[2] for t in tokenize(w.encode(), flags, None)] for w in words}
        df = doc_freq(self.sql, sorted({t for ts in stems.values() for t in ts}))
        limit = COMMON_SHARE * total
        freq = {w: max((df.get(t, 0) for t in stems[w]), default=0) for w in words}
        kept = [w for w in words if not stems[w] or min(df.get(t, 0) for t in stems[w]) <= limit]
        # FTS5 scores every posting of every word: past MAX_POSTINGS, the most frequent of
        # the kept words (the least informative to BM25) go, so a query's cost stays bounded
        budget, keep = 0, set()
        for w in sorted(kept, key=lambda w: (freq[w], w)):
            if keep and budget + freq[w] > MAX_POSTINGS:
                break
            budget += freq[w]
            keep.add(w)
        return [w for w in kept if w in keep]

    def memory_count(self) -> int:
        version = data_version(self.sql)
        if self._total is None or self._total[0] != version:
            self._total = (version, count(self.sql))
        return self._total[1]

    def keyword_candidates(self, query: str, f: Filters, n: int) -> list[tuple[int, float]]:
        match = keyword_query(self.selective_words(query))
        if match is None:
            return []
        where, args = f.sql("m")
        return [(r[0], -float(r[1])) for r in keyword_hits(self.sql, match, where, args, n)]

    def matrix_ready(self) -> bool:
        """Whether the vector search is a scan of an up-to-date matrix (no SQL needed)."""
        if self.matrix is None or self._stale or len(self.matrix.rowids) < CONCURRENT_MIN_ROWS:
            return False
        return data_version(self.sql) == self._data_version

    def both_concurrently(self, query: str, q: np.ndarray, f: Filters, n: int) -> tuple[list, list]:
        """Keyword query in a helper thread, matrix scan here: ~max instead of sum of the two.
        The helper thread is the only user of the connection meanwhile."""
        box: dict[str, Any] = {}

        def keyword() -> None:
            try:
                box["kw"] = self.keyword_candidates(query, f, n)
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

    def rows(self, rowids: Any, f: Filters) -> dict[int, dict]:
        """The candidates that pass every filter, with the columns ranking needs."""
        rowids = list(rowids)
        if not rowids:
            return {}
        where, args = f.sql("m")
        return rank_rows(self.sql, rowids, where, args)

    def speakers_named(self, text: str, user: str) -> list[str]:
        """The speakers of the user's conversations that the query names (whole words)."""
        version = data_version(self.sql)
        cached = self._speakers.get(user)
        if cached is None or cached[0] != version:
            names = speakers(self.sql, user)
            if len(self._speakers) > 64:
                self._speakers.clear()
            cached = self._speakers[user] = (version, names)
        low = text.lower()
        return [s for s in cached[1] if re.search(r"(?<!\w)" + re.escape(s.lower()) + r"(?!\w)", low)]
