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
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from . import scoring
from .scoring import Candidate, Signals, Weights
from .storage import graph as kg
from .storage import memories
from .storage.memories import current_sql

if TYPE_CHECKING:  # pragma: no cover
    from .sqlstore import SQLStore

RRF_K = 60
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
    # user -> boolean row mask; comparing 100,000 Python strings costs ~2 ms a query
    _user_masks: dict = field(default_factory=dict, repr=False)

    def extend(self, sql: SQLStore, dim: int) -> None:
        rows = memories.vectors_after(sql, self.max_rowid)
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
    """Candidates from every signal ranked as one pool; one per open store.  This class
    does the I/O (storage.memories, storage.graph); brandmind/scoring.py scores."""

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
    def _vector_candidates(self, q: np.ndarray, f: Filters, n: int) -> list[tuple[int, float]]:
        self._searches += 1
        version = memories.data_version(self.sql)
        if self.matrix is not None and (self._stale or version != self._data_version):
            # this or another connection committed: new rows are appended; removed or
            # replaced vectors (a forget, a reindex) bump the generation and need a reload
            if self.sql.generation() == self._generation:
                self._stale = True
            else:
                self.matrix = None
        if self.matrix is None and self._searches == 1:
            where, args = f.vec_sql()
            rows = memories.vector_knn(self.sql, q.astype(np.float32).tobytes(), n, where, args)
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

    def _cosines(self, rowids: list[int], q: np.ndarray) -> dict[int, float]:
        """Cosines of candidates another signal brought (their vectors by rowid)."""
        if not rowids:
            return {}
        if self.matrix is not None and not self._stale:
            out = self.matrix.cosines(rowids, q)
            rowids = [r for r in rowids if r not in out]
        else:
            out = {}
        if rowids:
            for rowid, blob in memories.vectors_of(self.sql, rowids):
                out[rowid] = float(np.frombuffer(blob, np.float32) @ q)
        return out

    # -- keyword candidates ------------------------------------------------------
    def _selective_words(self, query: str) -> list[str]:
        """The query's words minus those in more than COMMON_SHARE of all memories.

        Such a word (a speaker's name prefixed to every turn, a topic the whole store is
        about) weighs next to nothing in BM25, yet makes FTS5 score a large share of the
        store: dropping it keeps keyword search fast and its candidates specific.  The
        vector signal still sees the whole query."""
        words = query_words(query)
        if not words:
            return []
        total = self._memory_count()
        if total < COMMON_MIN_DOCS:
            return words
        if self._tokenizer is None:
            self._tokenizer = memories.query_tokenizer(self.sql)
        tokenize, flags = self._tokenizer
        stems = {w: [t[2] for t in tokenize(w.encode(), flags, None)] for w in words}
        df = memories.doc_freq(self.sql, sorted({t for ts in stems.values() for t in ts}))
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

    def _memory_count(self) -> int:
        version = memories.data_version(self.sql)
        if self._total is None or self._total[0] != version:
            self._total = (version, memories.count(self.sql))
        return self._total[1]

    def _keyword_candidates(self, query: str, f: Filters, n: int) -> list[tuple[int, float]]:
        match = keyword_query(self._selective_words(query))
        if match is None:
            return []
        where, args = f.sql("m")
        return [(r[0], -float(r[1])) for r in memories.keyword_hits(self.sql, match, where, args, n)]

    def _matrix_ready(self) -> bool:
        """Whether the vector search is a scan of an up-to-date matrix (no SQL needed)."""
        if self.matrix is None or self._stale or len(self.matrix.rowids) < CONCURRENT_MIN_ROWS:
            return False
        return memories.data_version(self.sql) == self._data_version

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

    # -- rows, structure, graph --------------------------------------------------
    def _rows(self, rowids: Any, f: Filters) -> dict[int, dict]:
        """The candidates that pass every filter, with the columns ranking needs."""
        rowids = list(rowids)
        if not rowids:
            return {}
        where, args = f.sql("m")
        return memories.rank_rows(self.sql, rowids, where, args)

    def _neighbours(self, cands: dict[int, Candidate], seeds: list[Candidate], f: Filters) -> list[Candidate]:
        """Link each seed turn to the turns before and after it in its episode, adding
        those turns to the pool; returns the candidates added."""
        turns = [c.rowid for c in seeds if c.prev is None and c.next is None]
        if not turns:
            return []
        pairs = memories.thread_neighbours(self.sql, turns)
        wanted = {x for p in pairs.values() for x in p if x is not None and x not in cands}
        added = [Candidate(rowid, row) for rowid, row in self._rows(wanted, f).items()]
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
            out.update(memories.newest(self.sql, where, args, EXTRA_CANDIDATES))
        if w.importance:
            out.update(memories.most_important(self.sql, where, args, EXTRA_CANDIDATES))
        return out

    def _speakers_named(self, text: str, user: str) -> list[str]:
        """The speakers of the user's conversations that the query names (whole words)."""
        version = memories.data_version(self.sql)
        cached = self._speakers.get(user)
        if cached is None or cached[0] != version:
            names = memories.speakers(self.sql, user)
            if len(self._speakers) > 64:
                self._speakers.clear()
            cached = self._speakers[user] = (version, names)
        low = text.lower()
        return [s for s in cached[1] if re.search(r"(?<!\w)" + re.escape(s.lower()) + r"(?!\w)", low)]

    # -- the pool, scored by brandmind/scoring.py --------------------------------------
    def _pool(self, q: Query) -> tuple[dict[int, Candidate], Signals]:
        """The first candidates (vector, keyword, newest / most important) and what their
        base scores need."""
        f, w = q.filters, q.weights
        n = max(POOL, 4 * q.k)
        if self._matrix_ready():
            vec, kw = self._both_concurrently(q.text, q.vector, f, n)
        else:
            vec = self._vector_candidates(q.vector, f, n)
            kw = self._keyword_candidates(q.text, f, n)
        cos, bm = dict(vec), dict(kw)
        extra = self._recent_and_important(f, w)
        rows = self._rows(set(cos) | set(bm) | extra, f)
        cands = {r: Candidate(r, row, cos.get(r), bm.get(r)) for r, row in rows.items()}
        if not cands:
            return cands, Signals(w)
        speakers = self._speakers_named(q.text, f.user) if w.speaker else []
        return cands, Signals(w, vec_rank={r: i for i, (r, _) in enumerate(vec, 1)},
                              kw_rank={r: i for i, (r, _) in enumerate(kw, 1)},
                              best_bm=max(bm.values(), default=0.0),
                              speaker=speakers[0] if len(speakers) == 1 else None,
                              windows=q.windows, now=q.now)

    def _score(self, cands: dict[int, Candidate], items: list[Candidate], s: Signals, q: np.ndarray) -> None:
        """Base scores of ``items`` (the cosines other signals did not bring read first)."""
        for rowid, value in self._cosines([c.rowid for c in items if c.cos is None], q).items():
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
                fresh = [r for r in memories.rowids_of(self.sql, list(reached)) if r not in cands]
                added = [Candidate(r, row) for r, row in self._rows(fresh, f).items()]
                for c in added:
                    cands[c.rowid] = c
                self._score(cands, added, signals, q.vector)
                scoring.add_graph(cands, reached)
        # the turns around the best candidate turns join the pool (their own base scores)
        best = scoring.best(cands.values(), NEIGHBOUR_SEEDS)
        added = self._neighbours(cands, [c for c in best if c.row["thread"] is not None], f)
        self._score(cands, added, signals, q.vector)
        return scoring.rank(cands, w, q.k)
