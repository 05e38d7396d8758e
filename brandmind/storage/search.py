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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..clock import now_millis, parse_time
from .recallindex import RecallIndex

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore


def _marks(items: list) -> str:
    return ",".join("?" * len(items))

COMMON_SHARE = 0.1     # keyword search skips words found in more than this share of memories
COMMON_MIN_DOCS = 20   # ... once the store holds at least this many
MAX_POSTINGS = 20_000  # ... and keeps its rarest words within this many documents in all
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
def data_version(sql: "SQLStore") -> int:
    """SQLite's ``data_version``: changes when another connection commits."""
    return sql.conn.execute("PRAGMA data_version").fetchone()[0]


def count(sql: "SQLStore") -> int:
    return sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0]


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


def speakers(sql: "SQLStore", user: str) -> list[str]:
    """The speakers of the user's conversations."""
    return [r[0] for r in sql.conn.execute(
        "SELECT DISTINCT speaker FROM memories WHERE user_id = ? AND speaker IS NOT NULL", (user,))]


def rowids_of(sql: "SQLStore", ids: list[str]) -> dict[str, int]:
    """memory id -> rowid, of the memories ``ids`` that exist."""
    out: dict[str, int] = {}
    for i in range(0, len(ids), 900):
        part = ids[i:i + 900]
        out.update(sql.conn.execute(f"SELECT id, rowid FROM memories WHERE id IN ({_marks(part)})", part).fetchall())
    return out


def ids_of(sql: "SQLStore", rowids: list[int]) -> dict[int, str]:
    """rowid -> memory id, of the rowids that exist."""
    return dict(sql.conn.execute(f"SELECT rowid, id FROM memories WHERE rowid IN ({_marks(rowids)})", rowids).fetchall())


def texts_of(sql: "SQLStore", rowids: list[int]) -> dict[int, str]:
    """rowid -> text, of the rowids that exist."""
    return dict(sql.conn.execute(f"SELECT rowid, text FROM memories WHERE rowid IN ({_marks(rowids)})",
                                 rowids).fetchall())


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


class SearchIndex:
    """Candidates of every lookup signal, with their caches; one per open store."""

    def __init__(self, sql: SQLStore) -> None:
        self.sql = sql
        self.index: RecallIndex | None = None
        self._data_version: int | None = None
        self._total: tuple[int, int] | None = None  # (data_version, number of memories)
        self._speakers: dict[str, tuple[int, list[str]]] = {}
        self._tokenizer: Any = None
        self._stale = True

    def invalidate(self) -> None:
        """Called after this process wrote: the next search brings the index up to date."""
        self._total = None
        self._stale = True

    def close(self) -> None:
        """Write the recall index file if this process caught up well beyond it."""
        if self.index is not None:
            self.index.close()

    # -- vector candidates -------------------------------------------------------
    def recall_index(self) -> RecallIndex:
        """The store's recall index (storage/recallindex.py), up to date with SQLite."""
        version = data_version(self.sql)
        if self.index is None:
            self.index = RecallIndex(self.sql, self.sql.path.with_name("recall.idx"))
            self._stale = True
        if self._stale or version != self._data_version:
            self.index.refresh()
            self._data_version, self._stale = version, False
        return self.index

    def vector_candidates(self, q: np.ndarray, f: Filters, n: int) -> list[tuple[int, float]]:
        """The ``n`` memories passing ``f`` nearest to ``q``: ``(rowid, cosine)``, best first."""
        index = self.recall_index()
        pos, sims = index.nearest(q, index.mask(f), n)
        return list(zip(index.cols["rowid"][pos].tolist(), sims.tolist()))

    def cosines(self, rowids: list[int], q: np.ndarray) -> dict[int, float]:
        """Cosines of candidates another signal brought (0 for those without a vector yet)."""
        if not rowids:
            return {}
        index = self.recall_index()
        pos = index.positions(rowids)
        ok = pos >= 0
        sims = index.cosines(pos[ok], q)
        return dict(zip(np.asarray(rowids)[ok].tolist(), sims.tolist()))

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
