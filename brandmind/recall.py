"""Finding memories: candidates from every signal, one ranking of the pool, cut to k.

Candidates (over-fetched, ``POOL`` of each):

* vectors: the first search in a process asks sqlite-vec for a filtered KNN (partitioned
  by user, metadata columns for agent, type and time), which needs no warm-up; a process
  that searches again loads the vectors once into a numpy matrix and scans it exactly
  (4x faster than the flat scan at 100,000 memories), following its own writes
  incrementally and reloading when another process removes or replaces vectors;
* keywords: FTS5/BM25 over the query's words, each quoted (FTS syntax in a query is
  searched as text); words found in over ``COMMON_SHARE`` of memories are skipped;
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

(a memory outside any conversation is its own neighbour and episode, so facts and turns
compete on the same scale).  The pool is ranked, deduplicated by text, and only then cut
to k.  Each result carries the signals that put it there and their contributions.

Filters (user, agent scope, types, since/until, currently true or true as of a date) are
applied in SQL to every candidate, whichever signal brought it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import scoring
from .scoring import Candidate, Signals, Weights
from .storage import graph as kg
from .storage import search
from .storage.search import STOPWORDS, Filters, SearchIndex, keyword_query, query_words

# (re-exported: the lookups and filters are in storage/search.py, the scorer in scoring.py)
__all__ = ["Searcher", "Query", "Filters", "SearchIndex", "Weights", "STOPWORDS", "keyword_query",
           "query_words", "searcher"]

POOL = 200             # candidates taken from each of the vector and keyword signals
GRAPH_SEEDS = 10       # the best candidates whose graph neighbourhood is explored
GRAPH_HOPS = 2
NEIGHBOUR_SEEDS = 100  # the best candidates whose neighbouring turns join the pool
EXTRA_CANDIDATES = 20  # newest / most important memories added when those signals count


@dataclass
class Query:
    text: str
    vector: np.ndarray
    filters: Filters
    k: int
    weights: Weights = field(default_factory=Weights)
    windows: tuple = ()        # timewords.Window: time ranges the query names
    now: int = 0


class Searcher:
    """Ranks the pool of candidates for a query: the lookups (and their caches) are the
    store's ``SearchIndex`` (brandmind/storage/search.py), the scores brandmind/scoring.py;
    this class gathers the structural candidates (neighbouring turns, the graph, the
    newest and most important memories) and runs the stages in order."""

    def __init__(self, index: SearchIndex) -> None:
        self.index = index
        self.sql = index.sql

    # -- structural candidates ----------------------------------------------------------------
    def _neighbours(self, cands: dict[int, Candidate], seeds: list[Candidate], f: Filters) -> list[Candidate]:
        """Link each seed turn to the turns before and after it in its episode, adding
        those turns to the pool; returns the candidates added."""
        turns = [c.rowid for c in seeds if c.prev is None and c.next is None]
        if not turns:
            return []
        pairs = search.thread_neighbours(self.sql, turns)
        wanted = {x for p in pairs.values() for x in p if x is not None and x not in cands}
        added = [Candidate(rowid, row) for rowid, row in self.index.rows(wanted, f).items()]
        for c in added:
            cands[c.rowid] = c
        # the turn just before or after in the thread is a neighbour only within the episode
        # (checked here: in SQL, looking for the nearest turn of the same episode would walk
        # the whole thread from an episode's first or last turn)
        pairs = {r: tuple(x if x in cands and cands[x].row["episode"] == cands[r].row["episode"] else None
                          for x in pn) for r, pn in pairs.items()}
        for rowid, (prev, nxt) in pairs.items():
            c = cands[rowid]
            c.prev = prev if prev in cands else None
            c.next = nxt if nxt in cands else None
            # adjacency goes both ways: the turn after a seed has the seed before it
            if c.prev is not None and cands[c.prev].next is None:
                cands[c.prev].next = rowid
            if c.next is not None and cands[c.next].prev is None:
                cands[c.next].prev = rowid
        return added

    def _graph(self, seeds: list[Candidate], w: Weights) -> dict[str, tuple[float, dict]]:
        """Memories near the seeds in the graph: memory id -> (bonus, how it was reached).

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

        for seed in seeds:
            if seed.base <= 0:
                continue
            start = seed.row["id"]

            def record(mid: str, strength: float, hops: int, via: str) -> None:
                if mid == start:
                    return
                bonus = scoring.graph_bonus(w, seed.base, strength, hops)
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

    def _recent_and_important(self, f: Filters, w: Weights) -> set[int]:
        """When recency or importance count, the newest and the most important memories
        are candidates too (a signal adds candidates, not only boosts)."""
        out: set[int] = set()
        where, args = f.sql("m")
        if w.recency:
            out.update(search.newest(self.sql, where, args, EXTRA_CANDIDATES))
        if w.importance:
            out.update(search.most_important(self.sql, where, args, EXTRA_CANDIDATES))
        return out

    # -- the pool, scored by brandmind/scoring.py --------------------------------------
    def _pool(self, q: Query) -> tuple[dict[int, Candidate], Signals]:
        """The first candidates (vector, keyword, newest / most important) and what their
        base scores need."""
        f, w = q.filters, q.weights
        n = max(POOL, 4 * q.k)
        vec = self.index.vector_candidates(q.vector, f, n)
        kw = self.index.keyword_candidates(q.text, f, n)
        cos, bm = dict(vec), dict(kw)
        extra = self._recent_and_important(f, w)
        rows = self.index.rows(set(cos) | set(bm) | extra, f)
        cands = {r: Candidate(r, row, cos.get(r), bm.get(r)) for r, row in rows.items()}
        if not cands:
            return cands, Signals(w)
        speakers = self.index.speakers_named(q.text, f.user) if w.speaker else []
        return cands, Signals(w, vec_rank={r: i for i, (r, _) in enumerate(vec, 1)},
                              kw_rank={r: i for i, (r, _) in enumerate(kw, 1)},
                              best_bm=max(bm.values(), default=0.0),
                              speaker=speakers[0] if len(speakers) == 1 else None,
                              windows=q.windows, now=q.now)

    def _score(self, cands: dict[int, Candidate], items: list[Candidate], s: Signals, q: np.ndarray) -> None:
        """Base scores of ``items`` (the cosines other signals did not bring read first)."""
        for rowid, value in self.index.cosines([c.rowid for c in items if c.cos is None], q).items():
            cands[rowid].cos = value
        for c in items:
            scoring.base_score(c, s)

    def search(self, q: Query) -> list[dict]:
        """The best ``q.k`` memories: ``[{"rowid", "score", "signals"}]``, best first."""
        f, w = q.filters, q.weights
        cands, signals = self._pool(q)
        if not cands:
            return []
        self._score(cands, list(cands.values()), signals, q.vector)
        if w.graph:
            reached = self._graph(scoring.best(cands.values(), GRAPH_SEEDS), w)
            if reached:
                fresh = [r for r in search.rowids_of(self.sql, list(reached)) if r not in cands]
                added = [Candidate(r, row) for r, row in self.index.rows(fresh, f).items()]
                for c in added:
                    cands[c.rowid] = c
                self._score(cands, added, signals, q.vector)
                scoring.add_graph(cands, reached)
        # the turns around the best candidate turns join the pool (their own base scores)
        best = scoring.best(cands.values(), NEIGHBOUR_SEEDS)
        added = self._neighbours(cands, [c for c in best if c.row["thread"] is not None], f)
        self._score(cands, added, signals, q.vector)
        return scoring.rank(cands, w, q.k)


def searcher(store: object) -> Searcher:
    """The ranking over a Store's search index (``store.searcher``)."""
    return Searcher(store.searcher)  # type: ignore[attr-defined]
