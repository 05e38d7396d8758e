"""Keyword candidates of recall: FTS5/BM25 (``memories_fts``, porter over unicode61) over the
query's words, at a cost that stays bounded as the store grows.

A ranked FTS5 query costs ~3 us of CPU for every row it scores (``bm25()``: a docsize
lookup and the phrase instances), while walking a doclist unranked costs ~0.1 us a posting.
So:

* words found in over ``COMMON_SHARE`` of the memories are skipped (a speaker's name prefixed
  to every turn weighs next to nothing in BM25); the vector signal still sees them; of the
  rest, the rarest within ``MAX_POSTINGS`` postings are kept;
* the rarest of the kept words within ``CANDIDATE_POSTINGS`` (always at least one) choose the
  candidates: only memories holding one of them are scored; when even the rarest word is in
  more than ``NEWEST_RANKED`` memories (a question whose every word is common: "how does
  Ann feel about her family?" at 1M memories, "family" in 65,000), only the newest
  ``NEWEST_RANKED`` of those (by rowid: the most recently stored) are ranked (FTS5 walks a
  doclist newest first and stops: ~5 ms, where ranking 65,000 took ~160 ms); the vector
  signal still searches every memory, and such a word adds little to BM25 (its IDF is low).
  Measured (2026-11-29, 200 LoCoMo questions): recall's top 10 with the window against without,
  overlap 0.997 at 100,000 real-model memories, 0.890 at bench_speed's 1,000,000 hash-vector
  ones (whose vectors say little, so keywords weigh more); a window of 2,000 changed 0.974 /
  0.760 of them.  The keyword stage's p95 at 1M: ~40 -> ~24 ms;
* those are ranked by the BM25 of *every* kept word: a second query scores the candidates
  that hold one of the other words too (``rare AND other``: FTS5 walks the other words'
  doclists but scores only the rows that match).  A memory holding only other words is
  missed: the trade of the cap (scripts/bench_keyword.py measures the overlap with the
  uncapped top 10);
* the filters are checked on the best hits only, ``n`` at a time; every candidate is ranked
  only when the filters dropped hits and more candidates exist.

N is read again after each write; document frequencies are cached until N moves by 1%.  Scores are FTS5's ``bm25``
(lower is better); ties rank by rowid.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

COMMON_SHARE = 0.1           # keyword search skips words found in more than this share of memories
COMMON_MIN_DOCS = 20         # ... once the store holds at least this many
MAX_POSTINGS = 20_000        # ... and keeps its rarest words within this many postings in all
CANDIDATE_POSTINGS = 2_000   # of those, the rarest within this many choose the candidates
NEWEST_RANKED = 5_000        # candidate words in more memories than this: only the newest this many are ranked
DF_STALE_SHARE = 0.01        # document frequencies are read again once N moved by this share
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
# rowids -> those passing the filters (e.g. from filter columns in memory: ~5 us a row less
# than looking each memory up in SQLite)
Check = Callable[[list[int]], "set[int]"]


def _marks(items: list) -> str:
    return ",".join("?" * len(items))


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


def split_words(words: list[str], freq: dict[str, int], total: int, cap: int | None = None,
                candidates: int | None = None) -> tuple[list[str], list[str]]:
    """``(rare, other)``: the words kept, split, each in query order.  Kept: those in at
    most ``COMMON_SHARE`` of ``total`` memories (every word below ``COMMON_MIN_DOCS``), then
    the rarest within ``cap`` postings in all; rare: the rarest of those within
    ``candidates`` postings.  A cap never empties a list it is given words for (the rarest
    word stays); None: no cap.  ``freq``: word -> its postings."""
    if total < COMMON_MIN_DOCS:
        kept = list(words)
    else:
        kept = [w for w in words if freq.get(w, 0) <= COMMON_SHARE * total]
    kept = _rarest(kept, freq, cap)
    rare = _rarest(kept, freq, candidates)
    return rare, [w for w in kept if w not in rare]


def _rarest(words: list[str], freq: dict[str, int], cap: int | None) -> list[str]:
    """The rarest ``words`` within ``cap`` postings in all (at least one), in their order."""
    if cap is None:
        return words
    budget, keep = 0, set()
    for w in sorted(words, key=lambda w: (freq.get(w, 0), w)):
        if keep and budget + freq.get(w, 0) > cap:
            break
        budget += freq.get(w, 0)
        keep.add(w)
    return [w for w in words if w in keep]


def indexed_rows(sql: "SQLStore") -> int:
    """The memories in ``memories_fts`` (BM25's N), read from FTS5's averages record (its
    first varint): O(1), where ``count(*)`` walks a million-row index for ~10 ms."""
    row = sql.conn.execute("SELECT block FROM memories_fts_data WHERE id = 1").fetchone()
    if not row or not row[0]:
        return 0
    value, blob = 0, row[0]
    for k, byte in enumerate(blob[:9]):  # SQLite varint: 7 bits a byte, big-endian; the 9th byte 8 bits
        if k == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            break
    return value


def ranked(sql: "SQLStore", rare: list[str], other: list[str], limit: int | None,
           newest: int | None = None) -> list[tuple[int, float]]:
    """The memories holding a ``rare`` word, ranked by the BM25 of every word (``rare`` and
    ``other``): ``(rowid, bm25)``, best (lowest) first, ties by rowid; at most ``limit``;
    with ``newest``, of the newest ``newest`` memories holding a ``rare`` word only.

    Two queries: the ``rare`` words alone (the best ``limit``), and ``rare AND other``, whose
    rows hold an other word too and so score better than in the first.  A memory missing from
    the first's ``limit`` but in the top ``limit`` overall is in the second.  (One SQL
    statement merging the two with UNION ALL and GROUP BY took ~5x their time.)"""
    first = keyword_query(rare)
    lowest = 0  # the rowids ranked start here
    if newest is not None:
        rows = sql.conn.execute(
            "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY rowid DESC LIMIT ?", [first, newest]).fetchall()
        if len(rows) == newest:
            lowest = rows[-1][0]
        rows.sort(key=lambda h: (h[1], h[0]))
        rows = rows if limit is None else rows[:limit]
    else:
        tail, args = ("LIMIT ?", [limit]) if limit is not None else ("", [])
        rows = sql.conn.execute(
            f"SELECT rowid, bm25(memories_fts) AS s FROM memories_fts WHERE memories_fts MATCH ? "
            f"ORDER BY s, rowid {tail}", [first, *args]).fetchall()
    if not other:
        return rows
    score = dict(rows)
    score.update(sql.conn.execute(
        "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? AND rowid >= ?",
        [f"({first}) AND ({keyword_query(other)})", lowest]).fetchall())
    best = sorted(score.items(), key=lambda h: (h[1], h[0]))
    return best if limit is None else best[:limit]


def passing(sql: "SQLStore", hits: list[tuple[int, float]], where: str, args: list, n: int,
            check: Check | None = None) -> list[tuple[int, float]]:
    """The first ``n`` of ``hits`` (in order) whose memory passes ``where`` (alias ``m``),
    looked up by rowid (or those ``check`` keeps): the first ``n`` hits, then 4x as many
    each round while too few passed (with one user, the first lookup is the only one)."""
    out: list[tuple[int, float]] = []
    i, step = 0, max(n, 1)
    while len(out) < n and i < len(hits):
        chunk = hits[i:i + step]
        ids = [h[0] for h in chunk]
        # NOT INDEXED: by rowid; a user index would walk every row of the user
        ok = check(ids) if check is not None else {r[0] for r in sql.conn.execute(
            f"SELECT m.rowid FROM memories m NOT INDEXED WHERE m.rowid IN ({_marks(ids)}) AND {where}",
            [*ids, *args])}
        out.extend(h for h in chunk if h[0] in ok)
        i, step = i + len(chunk), min(4 * step, 30_000)
    return out[:n]


def keyword_hits(sql: "SQLStore", rare: list[str], other: list[str], where: str, args: list,
                 n: int, check: Check | None = None, newest: int | None = None) -> list[tuple[int, float]]:
    """The best ``n`` keyword hits passing ``where`` (alias ``m``): ``(rowid, bm25)``, best first
    (with ``newest``: among the newest ``newest`` memories holding a ``rare`` word, see :func:`ranked`).

    The best ``4 n`` candidates are ranked and checked; only if the filters left fewer than
    ``n`` and there were more candidates (other users' memories) is every candidate ranked
    and checked (every one: ``newest`` is dropped too).  Both orders are total (score,
    rowid): the answer is the same."""
    if not rare or n <= 0:
        return []
    pool = 4 * n
    hits = ranked(sql, rare, other, pool, newest)
    out = passing(sql, hits, where, args, n, check)
    if len(out) < n and len(hits) == pool:
        out = passing(sql, ranked(sql, rare, other, None), where, args, n, check)
    return out


class KeywordSearch:
    """Keyword search over one store's connection.  The query tokenizer is kept, and the
    document frequencies and N read since the last write (``memories_vocab`` walks each
    term's doclist: ~6 ms for a word in 10% of a million memories)."""

    def __init__(self, sql: "SQLStore") -> None:
        self.sql = sql
        self._tokenizer: Any = None
        self._seen: tuple[int, int] | None = None  # (data_version, this connection's changes)
        self._total = 0
        self._df: dict[str, int] = {}
        self._df_total = -(1 << 40)  # N when the frequencies in _df were read

    def _fresh(self) -> None:
        """Read N again when any connection wrote since; forget the cached document
        frequencies once N moved by more than ``DF_STALE_SHARE`` since they were read: they only
        choose which words search (a stale one costs a little time, never a hit), and an
        agent that writes every turn would otherwise pay them on every query."""
        conn = self.sql.conn
        seen = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes())
        if seen != self._seen:
            self._seen, self._total = seen, indexed_rows(self.sql)
            if abs(self._total - self._df_total) > DF_STALE_SHARE * self._df_total:
                self._df, self._df_total = {}, self._total

    def total(self) -> int:
        """The memories the keyword index holds."""
        self._fresh()
        return self._total

    def frequencies(self, words: list[str]) -> dict[str, int]:
        """word -> the memories holding its most frequent stem (0: none, or no stem)."""
        self._fresh()
        if self._tokenizer is None:
            self._tokenizer = query_tokenizer(self.sql)
        tokenize, flags = self._tokenizer
        stems = {w: [t[2] for t in tokenize(w.encode(), flags, None)] for w in words}
        want = sorted({t for ts in stems.values() for t in ts} - self._df.keys())
        if want:
            if len(self._df) > 50_000:
                self._df.clear()
            self._df.update(dict.fromkeys(want, 0))
            self._df.update(doc_freq(self.sql, want))
        return {w: max((self._df[t] for t in stems[w]), default=0) for w in words}

    def words(self, query: str, cap: int | None = -1, candidates: int | None = -1) -> tuple[list[str], list[str]]:
        """``(rare, other)`` words of the query (:func:`split_words`; -1: ``MAX_POSTINGS``,
        ``CANDIDATE_POSTINGS``)."""
        return self._split(query, cap, candidates)[:2]

    def _split(self, query: str, cap: int | None = -1,
               candidates: int | None = -1) -> tuple[list[str], list[str], dict[str, int]]:
        """``words`` and the postings of each word ({} below ``COMMON_MIN_DOCS`` memories)."""
        words = query_words(query)
        if not words:
            return [], [], {}
        total = self.total()
        freq = self.frequencies(words) if total >= COMMON_MIN_DOCS else {}
        rare, other = split_words(words, freq, total, MAX_POSTINGS if cap == -1 else cap,
                                  CANDIDATE_POSTINGS if candidates == -1 else candidates)
        return rare, other, freq

    def candidates(self, query: str, where: str, args: list, n: int,
                   check: Check | None = None) -> list[tuple[int, float]]:
        """The best ``n`` keyword candidates passing ``where`` (or ``check``, which answers
        the same from memory): ``(rowid, -bm25)``, best first."""
        rare, other, freq = self._split(query)
        postings = sum(freq.get(w, 0) for w in rare)
        window = max(NEWEST_RANKED, 4 * n)  # at least keyword_hits' pool: a full window fills it
        newest = window if postings > window else None
        return [(r[0], -float(r[1])) for r in keyword_hits(self.sql, rare, other, where, args, n, check, newest)]
