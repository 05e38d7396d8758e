"""Keyword postings of the recall index (storage/recallindex.py): recall's BM25 over arrays,
so a keyword search costs what the postings of its words cost, not ~3 us of SQLite per row
scored (FTS5's ``bm25()``).

The postings are those of ``memories_fts`` (the same tokenizer: porter over unicode61, asked
through SQLite): for every stem, the positions (rows of the index) whose text holds it and
how often.  In the index file they follow the dictionaries: the stems' 64-bit keys
(:func:`term_key`, sorted: a stem is looked up by binary search, and no word is stored as
text), where each stem's postings start, then the positions and their counts.  A row's token
count (BM25's document length) is the index column ``ntok``.

Kept in step with the index's rows: a row indexed after the file was written adds its
postings to a delta in this process; a row whose text changed voids its postings in the file
(and the delta); a forgotten row is dead in the index's ``alive`` column, and the file itself
forgets it too (:func:`scrub`: its counts are zeroed, and the key of a stem no other row
holds is overwritten).  Writing the file folds the delta in.

The score is FTS5's ``bm25`` with its constants (k1 1.2, b 0.75; IDF ``log((N - df + 0.5) /
(df + 0.5))``, at least 1e-6), N and the average length over the live rows, ``df`` the live
rows holding the stem: the same numbers as SQLite's (tests/test_kwindex.py compares them).
"""
from __future__ import annotations

import hashlib
from collections import Counter
from itertools import chain
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from . import keywords
from .keywords import COMMON_MIN_DOCS, keep_words, query_words

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

K1, B = 1.2, 0.75
MAX_TF = 65535


def term_key(term: str) -> int:
    """A stem's 64-bit key (its postings are found by it)."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")


def tokenizer(sql: "SQLStore", query: bool = False) -> Callable[[str], list[str]]:
    """text -> its stems, as ``memories_fts`` indexes (documents) or searches (queries) it."""
    import apsw

    tok = sql.conn.fts5_tokenizer("porter", ["unicode61"])
    flag = apsw.FTS5_TOKENIZE_QUERY if query else apsw.FTS5_TOKENIZE_DOCUMENT

    def stems(text: str) -> list[str]:
        return tok(text.encode("utf-8", "surrogatepass"), flag, None, include_offsets=False, include_colocated=False)

    return stems


# -- arrays ------------------------------------------------------------------------------------
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # keys u8[T], start i8[T+1], pos i4[P], tf u2[P]
FIELDS = (("keys", "<u8"), ("start", "<i8"), ("pos", "<i4"), ("tf", "<u2"))  # the arrays, as the index file stores them


def empty() -> Arrays:
    return tuple(np.zeros(1 if name == "start" else 0, dt) for name, dt in FIELDS)  # type: ignore[return-value]


def pack(keys: np.ndarray, ids: np.ndarray, pos: np.ndarray, tf: np.ndarray) -> Arrays:
    """Postings ``(keys[ids], position, count)`` -> the arrays: grouped by key (``keys``: sorted,
    unique; ``ids``: uint32 indices into it), in their given order within a key (a stable
    radix sort: a million memories' 33 million postings take ~1 GB at most)."""
    order = np.argsort(ids, kind="stable")
    start = np.zeros(len(keys) + 1, np.int64)
    np.cumsum(np.bincount(ids, minlength=len(keys)), out=start[1:])
    return keys.astype(np.uint64), start, pos[order].astype(np.int32), tf[order].astype(np.uint16)


class Builder:
    """Postings gathered row by row in position order (a build from SQLite), packed at the end."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.ids: list[np.ndarray] = []
        self.pos: list[np.ndarray] = []
        self.tf: list[np.ndarray] = []

    def add(self, positions: Any, docs: list[list[str]]) -> None:
        """The stems of the rows at ``positions`` (increasing, past those added before)."""
        vocab = self.vocab
        flat = list(chain.from_iterable(docs))
        for t in set(flat).difference(vocab):
            vocab[t] = len(vocab)
        ids = np.fromiter(map(vocab.__getitem__, flat), np.int64, len(flat))
        pos = np.repeat(np.asarray(positions, np.int64), [len(doc) for doc in docs])
        # one posting per (row, stem), counted: sorted by row, then stem
        uniq, tf = np.unique((pos << 32) | ids, return_counts=True)
        self.ids.append((uniq & 0xFFFFFFFF).astype(np.uint32))
        self.pos.append((uniq >> 32).astype(np.int32))
        self.tf.append(np.minimum(tf, MAX_TF).astype(np.uint16))

    def arrays(self) -> Arrays:
        if not self.vocab:
            return empty()
        keys = np.fromiter((term_key(t) for t in self.vocab), np.uint64, len(self.vocab))
        rank = np.empty(len(keys), np.uint32)
        rank[np.argsort(keys)] = np.arange(len(keys), dtype=np.uint32)
        ids = rank[np.concatenate(self.ids)]
        self.ids = []
        pos, self.pos = np.concatenate(self.pos), []
        tf, self.tf = np.concatenate(self.tf), []
        return pack(np.sort(keys), ids, pos, tf)


class Postings:
    """One index's postings in a process: the file's arrays and the delta since (see the
    module doc).  Positions are rows of the index."""

    def __init__(self, arrays: Arrays, rows: int) -> None:
        self.keys, self.start, self.pos, self.tf = arrays
        self.rows = rows                              # the file's rows (positions below it have postings there)
        self.extra: dict[int, dict[int, int]] = {}    # key -> {position: count}, rows since the file
        self.terms_of: dict[int, list[int]] = {}      # position -> its keys in ``extra``
        self.void: set[int] = set()                   # positions whose postings in the file no longer hold
        self.added: dict[int, int] = {}               # key -> postings in ``extra`` of rows past the file

    def _slot(self, key: int) -> int:
        i = int(np.searchsorted(self.keys, np.uint64(key)))
        return i if i < len(self.keys) and int(self.keys[i]) == key else -1

    def put(self, positions: Any, docs: list[list[str]]) -> None:
        """Rows (re)indexed at ``positions`` (their stems): their postings replace any they had."""
        for p, stems in zip(np.asarray(positions).tolist(), docs):
            doc = Counter(stems)
            self.drop(p)
            if p < self.rows:
                self.void.add(p)
            keys = [term_key(t) for t in doc]
            for key, c in zip(keys, doc.values()):
                self.extra.setdefault(key, {})[p] = min(c, MAX_TF)
                if p >= self.rows:
                    self.added[key] = self.added.get(key, 0) + 1
            self.terms_of[p] = keys

    def drop(self, p: int) -> None:
        """Forget the delta's postings of position ``p``."""
        for key in self.terms_of.pop(p, ()):
            hits = self.extra.get(key)
            if hits is not None and hits.pop(p, None) is not None:
                if not hits:
                    del self.extra[key]
                if p >= self.rows:
                    self.added[key] -= 1

    def snapshot(self) -> "Postings":
        """A copy whose delta later changes here do not reach (what a file is written from)."""
        other = Postings((self.keys, self.start, self.pos, self.tf), self.rows)
        other.extra = {k: dict(v) for k, v in self.extra.items()}
        other.void = set(self.void)
        other.added = dict(self.added)
        return other

    def count(self, term: str) -> int:
        """Postings of a stem, dead rows included, a changed row once (what chooses the words:
        cheap)."""
        key = term_key(term)
        i = self._slot(key)
        base = int(self.start[i + 1] - self.start[i]) if i >= 0 else 0
        return base + self.added.get(key, 0)

    def lookup(self, term: str, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The live rows holding a stem and its count in each, in position order."""
        key = term_key(term)
        i = self._slot(key)
        if i >= 0:
            a, b = int(self.start[i]), int(self.start[i + 1])
            pos, tf = self.pos[a:b], self.tf[a:b]
            ok = (tf > 0) & (alive[pos] == 1)
            if self.void:
                ok &= ~np.isin(pos, np.fromiter(self.void, np.int64, len(self.void)))
            pos, tf = pos[ok], tf[ok]
        else:
            pos, tf = np.zeros(0, np.int32), np.zeros(0, np.uint16)
        more = self.extra.get(key)
        if more:
            p2 = np.fromiter(more.keys(), np.int64, len(more))
            t2 = np.fromiter(more.values(), np.int64, len(more))
            ok = alive[p2] == 1
            pos = np.concatenate([pos.astype(np.int64), p2[ok]])
            tf = np.concatenate([tf.astype(np.int64), t2[ok]])
            order = np.argsort(pos, kind="stable")
            pos, tf = pos[order], tf[order]
        return pos.astype(np.int64), tf.astype(np.float64)

    def export(self, remap: np.ndarray) -> Arrays:
        """Every live posting with its position mapped by ``remap`` (old -> new, -1: dropped):
        the arrays of a new file (within a stem, the file's rows first)."""
        keys = np.union1d(self.keys, np.fromiter(self.extra, np.uint64, len(self.extra)))
        of = np.searchsorted(keys, self.keys).astype(np.uint32)  # a scrubbed duplicate: no live posting
        new = remap[self.pos] if len(self.pos) else np.zeros(0, np.int32)
        keep = (self.tf > 0) & (new >= 0)
        if self.void:
            keep &= ~np.isin(self.pos, np.fromiter(self.void, np.int64, len(self.void)))
        ids = [np.repeat(of, np.diff(self.start))[keep]]
        newpos, tf = [new[keep]], [self.tf[keep]]
        del new, keep
        for key, hits in self.extra.items():
            p = np.fromiter(hits.keys(), np.int64, len(hits))
            ok = remap[p] >= 0
            ids.append(np.full(int(ok.sum()), np.searchsorted(keys, np.uint64(key)), np.uint32))
            newpos.append(remap[p[ok]])
            tf.append(np.fromiter(hits.values(), np.int64, len(hits))[ok].astype(np.uint16))
        return pack(keys, np.concatenate(ids), np.concatenate(newpos), np.concatenate(tf))


def lengths(alive: np.ndarray, ntok: np.ndarray) -> tuple[int, float]:
    """(N, the live rows; their average token count): BM25's."""
    live = alive == 1
    count = int(live.sum())
    return count, float(ntok[live].sum(dtype=np.int64)) / count if count else 0.0


def bm25(postings: Postings, terms: list[str], alive: np.ndarray, ntok: np.ndarray, n_rows: int,
         avg_len: float) -> tuple[np.ndarray, np.ndarray]:
    """(positions, score) of the live rows holding any of ``terms``, in position order;
    score: minus FTS5's ``bm25`` (higher is better)."""
    parts_pos, parts_score = [], []
    found = {t: postings.lookup(t, alive) for t in dict.fromkeys(terms)}
    # a stem once per query word that makes it ("cook" and "cooking": twice), as FTS5 scores the
    # query's phrases (in their order: the same sums)
    for term in terms:
        pos, tf = found[term]
        if not len(pos):
            continue
        df = len(pos)
        idf = np.log((n_rows - df + 0.5) / (df + 0.5))
        idf = idf if idf > 0 else 1e-6
        norm = (1 - B) + B * ntok[pos] / avg_len if avg_len > 0 else np.ones(len(pos))
        parts_pos.append(pos)
        parts_score.append(idf * (tf * (K1 + 1)) / (tf + K1 * norm))
    if not parts_pos:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    if len(parts_pos) == 1:
        return parts_pos[0], parts_score[0]
    pos = np.concatenate(parts_pos)
    uniq, inv = np.unique(pos, return_inverse=True)
    return uniq, np.bincount(inv, weights=np.concatenate(parts_score), minlength=len(uniq))


def scrub(keys: np.ndarray, start: np.ndarray, pos: np.ndarray, tf: np.ndarray, gone: np.ndarray) -> None:
    """In a file's arrays: zero the counts of the rows at positions ``gone`` (forgotten), and
    overwrite the key of every stem no live posting holds any more with the key before it
    (the order stays sorted; a lookup finds the first of equal keys, the real one)."""
    if not len(gone) or not len(pos):
        return
    hit = np.flatnonzero(np.isin(pos, gone))
    if not len(hit):
        return
    tf[hit] = 0
    for t in np.unique(np.searchsorted(start, hit, side="right") - 1).tolist():
        a, b = int(start[t]), int(start[t + 1])
        if not tf[a:b].any():
            keys[t] = keys[t - 1] if t > 0 else 0


def kept_words(postings: Postings, stems: Callable[[str], list[str]], query: str, rows: int, total: int,
               cap: int | None) -> tuple[list[str], dict[str, list[str]]]:
    """The query's words that search (keywords.query_words: content words; those in over
    ``COMMON_SHARE`` of the memories skipped, then the rarest within ``cap`` postings kept:
    keywords.keep_words; every word in a store of fewer than ``COMMON_MIN_DOCS`` live memories),
    and each word's stems.  ``rows``: the index's rows, dead ones included, as in the counts."""
    words = query_words(query)
    of = {w: stems(w) for w in words}
    if total < COMMON_MIN_DOCS:
        return words, of
    freq = {w: max((postings.count(t) for t in of[w]), default=0) for w in words}
    return keep_words(words, freq, rows, cap), of


def search(postings: Postings, stems: Callable[[str], list[str]], query: str, alive: np.ndarray,
           ntok: np.ndarray, m: np.ndarray, n: int, stats: tuple[int, int, float]) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` best keyword hits passing ``m``: (positions, score), best first, ties by
    position (rowid order).  Every memory holding a kept word (:func:`kept_words`, within
    ``MAX_POSTINGS``) is scored on all of them.  ``stats``: the index's rows (dead ones
    included), N and the average length of the live rows (BM25's)."""
    rows, total, avg_len = stats
    if n <= 0 or not total:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    kept, of = kept_words(postings, stems, query, rows, total, keywords.MAX_POSTINGS)
    pos, score = bm25(postings, [t for w in kept for t in of[w]], alive, ntok, total, avg_len)
    ok = m[pos]
    pos, score = pos[ok], score[ok]
    if len(pos) > n:
        top = np.argpartition(-score, n - 1)[:n]
        pos, score = pos[top], score[top]
    order = np.lexsort((pos, -score))
    return pos[order], score[order]
