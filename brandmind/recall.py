"""Finding memories: candidates from every signal, one ranking of the pool, cut to k.

Candidates (over-fetched, ``POOL`` of each):

* vectors: the recall index (storage/recallindex.py, a memory-mapped file kept in step
  with SQLite): a Hamming pass over sign codes, then exact cosines of the nearest
  (an exact scan in small stores);
* keywords: BM25 over the recall index's postings (storage/kwindex.py: FTS5's tokens and
  its ``bm25``, in arrays) of the query's words; words found in over ``COMMON_SHARE`` of
  memories are skipped, the rarest within ``MAX_POSTINGS`` postings kept (storage/keywords.py);
  keyword hits add candidates, not only boosts;
* conversation structure: the turns just before and after each candidate turn in its
  thread and episode (a run of turns without a long pause, set at ingest);
* the knowledge graph: memories reached in 1-2 hops from the entities (and typed links)
  of the best candidates;
* recency and importance: the newest and the most important memories, when those
  signals have weight.

Every candidate then gets one score (weights from config, ``weight_*`` keys)::

    base    = vector * cosine + keyword * bm25 / best bm25 + speaker * [turn by the
              person the query names] + time * [in a time window the query names]
              + recency * 0.5 ** (age / half-life) + importance * (importance - 0.5)
              + graph bonus (graph * seed base * edge weights, halved for 2 hops)
    context = base + neighbor * max(base of the turns before and after)
    score   = context + episode * max(context in the same episode)
              + dated * [the query asks when, the text says when: among the best DATED_POOL]
              - asks * (the share of the text in questions) ** 2

(a memory outside any conversation is its own neighbour and episode, so facts and turns
compete on the same scale).  The pool is ranked, deduplicated by text, and only then cut
to k.  Each result carries the signals that put it there and their contributions.

Filters (user, agent scope, types, since/until, currently true or true as of a date) are
applied to every candidate, whichever signal brought it, as one mask over the recall
index's columns (``RecallIndex.mask``, the same conditions as ``Filters.sql``).  The pool is
scored as arrays (``scoring.Pool``), deduplicated by a key of each text and given the "when"
bonus from a flag of each text, both columns of the index: no text is read before the final k
(whose rows the caller reads).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import clock, scoring
from .scoring import Pool, Signals, Weights
from .storage import graph as kg
from .storage import search
from .storage.indexfile import distinct, outside
from .storage.recallindex import RecallIndex
from .timewords import asks_when
from .storage.search import STOPWORDS, Filters, SearchIndex, keyword_query, query_words

# (re-exported: the lookups and filters are in storage/search.py, the scorer in scoring.py)
__all__ = ["Searcher", "Query", "Filters", "SearchIndex", "Weights", "STOPWORDS", "keyword_query",
           "query_words", "searcher"]

POOL = 200             # candidates taken from each of the vector and keyword signals,
POOL_PER_K = 4         # or this many per memory asked for, when that is more
GRAPH_SEEDS = 10       # the best candidates whose graph neighbourhood is explored
GRAPH_HOPS = 2
NEIGHBOUR_SEEDS = 50   # the best candidates whose neighbouring turns join the pool (100: LoCoMo
                       # R@10 0.1 lower, REALTALK the same, ~0.3 ms slower; 30: 0.8 lower; 2026-11-29)
EXTRA_CANDIDATES = 20  # newest / most important memories added when those signals count


@dataclass
class Query:
    text: str
    vector: Any                # the query's vector, or what gives it: ``result()`` (query.recall
                               # embeds it in a thread while the keyword candidates are found)
    filters: Filters
    k: int
    weights: Weights = field(default_factory=Weights)
    windows: tuple = ()        # timewords.Window: time ranges the query names
    now: int = 0
    explain: bool = True       # each result's signals (what put it there); off for bm context
    speakers: tuple = ()       # the speakers the text names (query.recall looks them up once)


def vector_of(q: Query) -> np.ndarray:
    """The query's vector, waited for if it is still being embedded (its errors raised here)."""
    if hasattr(q.vector, "result"):
        q.vector = q.vector.result()
    return q.vector


class Searcher:
    """Ranks the pool of candidates for a query: the lookups (and their caches) are the
    store's ``SearchIndex`` (brandmind/storage/search.py) over its recall index
    (brandmind/storage/recallindex.py: the vectors and the columns ranking needs, as arrays),
    the scores brandmind/scoring.py; this class gathers the structural candidates
    (neighbouring turns, the graph, the newest and most important memories) and runs the
    stages in order.  No text is read: the caller reads the rows of the final k."""

    def __init__(self, index: SearchIndex) -> None:
        self.index = index
        self.sql = index.sql

    # -- the pool ------------------------------------------------------------------------------
    def _add(self, p: Pool, ri: RecallIndex, pos: np.ndarray, q: np.ndarray, *, cos: np.ndarray | None = None,
             vec_rank: np.ndarray | None = None, bm25: np.ndarray | None = None,
             kw_rank: np.ndarray | None = None) -> int:
        """Add the memories at positions ``pos`` (new to the pool) with their columns (their
        cosines to ``q`` unless given)."""
        c, n = ri.cols, len(pos)
        cos = ri.cosines(pos, q) if cos is None else cos
        return p.add(rowid=c["rowid"][pos], cos=cos, bm25=np.full(n, np.nan) if bm25 is None else bm25,
                     vec_rank=np.zeros(n) if vec_rank is None else vec_rank,
                     kw_rank=np.zeros(n) if kw_rank is None else kw_rank, speaker=c["speaker"][pos],
                     created=c["created"][pos], valid_from=c["valid_from"][pos], importance=c["importance"][pos],
                     turn=c["turn"][pos] == 1, episode=c["episode"][pos], thash=c["thash"][pos],
                     dated=c["dated"][pos] == 1, asks=c["asks"][pos] / 100.0)

    def _pool(self, q: Query, ri: RecallIndex, m: np.ndarray) -> tuple[Pool, np.ndarray, Signals]:
        """The first candidates (vector, keyword, newest / most important); returns the
        pool, the position of each entry, and what base scores need."""
        f, w = q.filters, q.weights
        n = max(POOL, POOL_PER_K * q.k)

        # the keyword candidates while the query is still being embedded (in a thread of its
        # own: onnxruntime lets go of the GIL), then the vector ones
        kpos, kscore = ri.keywords(q.text, m, n)  # every one passes ``m``
        extra = ri.extremes(m, EXTRA_CANDIDATES, newest=bool(w.recency), important=bool(w.importance))
        vpos, vcos = ri.nearest(vector_of(q), m, n)
        # one entry per memory, in one pass: the vector hits, the keyword hits not among them,
        # then the newest / most important not among either (with their cosines)
        have = dict(zip(vpos.tolist(), range(len(vpos))))
        at = np.array([have.get(x, -1) for x in kpos.tolist()], np.int64)
        old = at >= 0
        extra = outside(extra, np.concatenate([vpos, kpos]))
        rest = np.concatenate([kpos[~old], extra]).astype(np.int64)
        pos = np.concatenate([vpos, rest]).astype(np.int64)
        nv, nk, total = len(vpos), int((~old).sum()), len(pos)
        bm25, vec_rank, kw_rank = np.full(total, np.nan), np.zeros(total, np.int64), np.zeros(total, np.int64)
        krank = np.arange(1, len(kpos) + 1)
        vec_rank[:nv] = np.arange(1, nv + 1)
        bm25[at[old]], kw_rank[at[old]] = kscore[old], krank[old]
        bm25[nv:nv + nk], kw_rank[nv:nv + nk] = kscore[~old], krank[~old]
        p = Pool.of(**{k: [] for k in scoring.FIELDS})
        if total:
            self._add(p, ri, pos, q.vector, cos=np.concatenate([vcos, ri.cosines(rest, q.vector)]),
                      vec_rank=vec_rank, bm25=bm25, kw_rank=kw_rank)
        speakers = list(q.speakers) if w.speaker and len(p) else []
        code = ri.codes["speaker"].get(speakers[0]) if len(speakers) == 1 else None
        return p, pos, Signals(w, best_bm=float(kscore.max()) if len(kscore) else 0.0, speaker=code,
                               speaker_name=speakers[0] if code is not None else "",
                               windows=q.windows, now=q.now, asks_when=asks_when(q.text))

    # -- structural candidates ----------------------------------------------------------------
    def _neighbours(self, p: Pool, pos: np.ndarray, ri: RecallIndex, m: np.ndarray, s: Signals,
                    q: np.ndarray) -> np.ndarray:
        """Link the best candidate turns to the turns before and after them in their
        episode, adding those turns to the pool; returns the positions of the pool's entries."""
        seeds = scoring.best(p, NEIGHBOUR_SEEDS)
        seeds = seeds[p.cols["turn"][seeds]]
        seeds = seeds[np.argsort(p.cols["rowid"][seeds])]  # the turns among the best, in rowid order
        if not len(seeds):
            return pos
        c = ri.cols
        around = ri.positions(np.concatenate([c["prev"][pos[seeds]], c["next"][pos[seeds]]]))
        fresh = distinct(around[(around >= 0)])
        fresh = outside(fresh[m[fresh]], pos)
        if len(fresh):
            start = self._add(p, ri, fresh, q)
            pos = np.concatenate([pos, fresh])
            scoring.base_scores(p, s, start)
        # each turn around a seed as its pool entry (-1: not in the pool, or another episode:
        # the turn just before or after in the thread is a neighbour only within the episode)
        order = np.argsort(pos, kind="stable")
        ordered = pos[order]
        at = np.minimum(np.searchsorted(ordered, around), len(pos) - 1)
        idx = np.where((around >= 0) & (ordered[at] == around), order[at], -1)
        episode = p.cols["episode"]
        twice = np.concatenate([seeds, seeds])
        links = np.where((idx >= 0) & (episode[np.maximum(idx, 0)] == episode[twice]), idx, -1)
        before, after = links[:len(seeds)], links[len(seeds):]
        p.prev[seeds], p.next[seeds] = before, after
        # adjacency goes both ways: the turn after a seed has the seed before it (a seed's own
        # links, set above, already say so)
        back = before >= 0
        free = p.next[before[back]] < 0
        p.next[before[back][free]] = seeds[back][free]
        fwd = after >= 0
        free = p.prev[after[fwd]] < 0
        p.prev[after[fwd][free]] = seeds[fwd][free]
        return pos

    def _graph(self, seeds: list[tuple[str, float]], w: Weights) -> dict[str, tuple[float, dict]]:
        """Memories near the seeds (memory id, base score) in the graph: memory id ->
        (bonus, how it was reached).

        From a seed memory: the entities it mentions, then up to GRAPH_HOPS edges (typed
        node edges, typed links between memories; current ones, `contradicts` excluded),
        then the memories mentioning the entities reached.  A path's strength is the
        product of its edge weights, times 1 / log2(2 + memories mentioning the entity)
        for the entity it ends at (a hub such as the user says little), halved per hop."""
        found: dict[str, tuple[float, dict]] = {}
        degree: dict[str, int] = {}

        def mentions(node: str) -> list[str]:
            ids = kg.memories_of(self.sql, node, limit=200)
            degree[node] = len(ids)
            return ids

        for start, base in seeds:
            if base <= 0:
                continue

            def record(mid: str, strength: float, hops: int, via: str) -> None:
                if mid == start:
                    return
                bonus = scoring.graph_bonus(w, base, strength, hops)
                if bonus > found.get(mid, (0.0, {}))[0]:
                    found[mid] = (bonus, {"from": start, "via": via, "hops": hops})

            frontier: dict[str, float] = {start: 1.0}
            for node in kg.nodes_of(self.sql, start, ordered=False):
                frontier[node] = 1.0
                for mid in mentions(node):
                    record(mid, 1.0 / math.log2(2 + degree[node]), 0, node)
            seen = set(frontier)
            for hop in range(1, GRAPH_HOPS + 1):
                reached: dict[str, tuple[float, str]] = {}
                for item, strength in frontier.items():
                    for a, b, weight, pred in kg.live_edges_near(self.sql, item):
                        other = b if a == item else a
                        s = strength * max(0.0, min(1.0, float(weight)))
                        if other not in seen and s > reached.get(other, (0.0, ""))[0]:
                            reached[other] = (s, pred)
                for other, (s, pred) in reached.items():
                    if other.startswith("m_"):
                        record(other, s, hop, pred)
                    else:
                        for mid in mentions(other):
                            record(mid, s / math.log2(2 + degree[other]), hop, f"{pred} {other}")
                seen.update(reached)
                frontier = {k: v[0] for k, v in reached.items()}
                if not frontier:
                    break
        return found

    def _add_graph(self, p: Pool, pos: np.ndarray, ri: RecallIndex, m: np.ndarray, s: Signals,
                   q: np.ndarray) -> np.ndarray:
        """The graph stage: memories near the best candidates join the pool, and every
        reached memory in it gets its bonus."""
        seeds = scoring.best(p, GRAPH_SEEDS)
        ids = search.ids_of(self.sql, p.cols["rowid"][seeds].tolist())
        reached = self._graph([(ids[r], float(b)) for r, b in zip(p.cols["rowid"][seeds].tolist(), p.base[seeds])
                               if r in ids], s.weights)
        if not reached:
            return pos
        rowid_of = search.rowids_of(self.sql, list(reached))
        at = ri.positions([rowid_of[mid] for mid in reached if mid in rowid_of])
        at = at[at >= 0]
        fresh = outside(at[m[at]], pos)
        if len(fresh):
            start = self._add(p, ri, fresh, q)
            pos = np.concatenate([pos, fresh])
            scoring.base_scores(p, s, start)
        where = dict(zip(p.cols["rowid"].tolist(), range(len(p))))
        scoring.add_graph(p, {where[rowid_of[mid]]: hit for mid, hit in reached.items()
                              if mid in rowid_of and rowid_of[mid] in where})
        return pos

    def search(self, q: Query) -> list[dict]:
        """The best ``q.k`` memories: ``[{"rowid", "score", "signals"}]``, best first."""
        ri = self.index.recall_index()
        m = ri.mask(q.filters)
        p, pos, signals = self._pool(q, ri, m)
        if not len(p):
            return []
        scoring.base_scores(p, signals)
        if q.weights.graph and not self.index.graph_empty():
            pos = self._add_graph(p, pos, ri, m, signals, q.vector)
        # the turns around the best candidate turns join the pool (their own base scores)
        self._neighbours(p, pos, ri, m, signals, q.vector)
        if q.weights.access:  # how often recall returned each one (device-local counts)
            hits, last = self.index.access(p.cols["rowid"].tolist())
            scoring.add_access(p, scoring.access_bonus(q.weights, hits, last, clock.now_millis()))
        return scoring.rank(p, signals, q.k, explain=q.explain)


def searcher(store: object) -> Searcher:
    """The ranking over a Store's search index (``store.searcher``)."""
    return Searcher(store.searcher)  # type: ignore[attr-defined]
