"""Recall's scorer: pure functions from the candidate pool (arrays of their columns and raw
signal values, :class:`Pool`) and the weights to one ranked, deduplicated list, computed for
the whole pool at once.  No I/O (what deduplication and the "when" bonus need of the texts are
columns: ``thash``, ``dated``):
brandmind/recall.py gathers the candidates (``Searcher``) and calls these; the formula is in
recall.py's docstring::

    base    = vector * cosine + keyword * bm25 / best bm25 + speaker + time
              + recency * 0.5 ** (age / half-life) + importance * (importance - 0.5)
              + graph bonus (graph * seed base * path strength * 0.5 ** hops)
    context = base + neighbor * max(base of the turns before and after)
    score   = context + episode * max(context in the same episode)
              + dated * [the query asks when, the text says when: among the best DATED_POOL]
              - asks * asked ** 2 (the share of the text in questions: questions.py)

To add a recall signal: a weight in :class:`Weights` (config ``weight_<name>``), its
contribution in :func:`base_scores` (or a stage after it, like the graph bonus), the
candidates it brings in ``Searcher`` (recall.py), and a row in tests/test_recall_scorer.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


DAY_MS = 86_400_000
NO_TIME = np.iinfo(np.int64).min  # valid_from unknown
# a time window also takes what was said within this long after it ends: the events of a day
# are told that evening or the next day ("last night we ..."), so their turns are dated after it
TOLD_AFTER = DAY_MS
DATED_POOL = 30  # a "when" question: the best entries checked for a statement of when


@dataclass(frozen=True)
class Weights:
    """How much each signal counts (config keys ``weight_<name>``); see the module doc."""

    vector: float = 1.0
    keyword: float = 0.4
    speaker: float = 0.5
    neighbor: float = 0.3
    episode: float = 0.5
    graph: float = 0.3
    time: float = 0.3
    dated: float = 0.1
    recency: float = 0.0
    importance: float = 0.1
    asks: float = 0.7
    access: float = 0.0  # how often and how lately recall returned it (off by default: add_access)
    half_life_days: float = 30.0

    @classmethod
    def from_config(cls, config: Any) -> "Weights":
        values = {f: getattr(config, f"weight_{f}") for f in
                  ("vector", "keyword", "speaker", "neighbor", "episode", "graph", "time", "recency", "importance",
                   "dated", "asks", "access")
                  if hasattr(config, f"weight_{f}")}
        if hasattr(config, "recency_half_life_days"):
            values["half_life_days"] = config.recency_half_life_days
        return cls(**values)


@dataclass(frozen=True)
class Signals:
    """What the base scores need besides the pool: the weights, the best BM25 of the
    keyword hits, the one speaker the query names (its code in the pool's ``speaker``
    column and its name; None: none named), the time windows it names and the moment asked about."""

    weights: Weights
    best_bm: float = 0.0
    speaker: int | None = None
    speaker_name: str = ""
    windows: tuple = ()
    now: int = 0
    asks_when: bool = False


# the columns of a pool, in order: name -> dtype
FIELDS = {"rowid": np.int64, "cos": np.float64, "bm25": np.float64, "vec_rank": np.int64, "kw_rank": np.int64,
          "speaker": np.int64, "created": np.int64, "valid_from": np.int64, "importance": np.float64,
          "turn": bool, "episode": np.int64, "thash": np.uint64, "dated": bool,
          "asks": np.float64}
BASE = ("vector", "keyword", "speaker", "time", "recency", "importance")


@dataclass
class Pool:
    """The candidates, one entry each, as arrays (``FIELDS``: ``bm25`` NaN for a memory
    keyword search did not find, ranks 0 for a signal that did not bring it, ``valid_from``
    NO_TIME when unknown, ``turn`` and ``episode`` its place in a conversation), and what
    scoring sets: ``base`` and each base signal's contribution (``parts``: values, and where
    it applies), the graph bonus and how it was reached, the linked turns before and after
    (pool indices, -1), and the time window each one falls in."""

    cols: dict[str, np.ndarray]
    base: np.ndarray = field(default_factory=lambda: np.zeros(0))
    parts: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    graph: np.ndarray = field(default_factory=lambda: np.zeros(0))
    via: dict[int, dict] = field(default_factory=dict)
    prev: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    next: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    window: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @classmethod
    def of(cls, **cols: Any) -> "Pool":
        p = cls({name: np.zeros(0, dt) for name, dt in FIELDS.items()})
        p.add(**cols)
        return p

    def __len__(self) -> int:
        return len(self.cols["rowid"])

    def add(self, **cols: Any) -> int:
        """Append candidates (every field, as sequences of one length); returns the index of the first."""
        start, n = len(self), len(cols["rowid"])
        for name, dt in FIELDS.items():
            self.cols[name] = np.concatenate([self.cols[name], np.asarray(cols[name], dt).reshape(n)])
        self.base = np.concatenate([self.base, np.zeros(n)])
        self.graph = np.concatenate([self.graph, np.zeros(n)])
        for arr in ("prev", "next", "window"):
            setattr(self, arr, np.concatenate([getattr(self, arr), np.full(n, -1, np.int64)]))
        for name, (vals, on) in self.parts.items():
            self.parts[name] = (np.concatenate([vals, np.zeros(n)]), np.concatenate([on, np.zeros(n, bool)]))
        return start


def base_scores(p: Pool, s: Signals, start: int = 0) -> None:
    """Set ``p.base`` and ``p.parts`` of the entries from ``start`` on."""
    w, c, sl = s.weights, p.cols, slice(start, None)
    n = len(p) - start
    cos, bm = c["cos"][sl], c["bm25"][sl]
    vals: dict[str, tuple[np.ndarray, np.ndarray]] = {"vector": (w.vector * cos, np.ones(n, bool))}
    hit = ~np.isnan(bm) & (s.best_bm > 0)
    vals["keyword"] = (np.where(hit, w.keyword * np.nan_to_num(bm) / (s.best_bm or 1.0), 0.0), hit)
    on = (c["speaker"][sl] == s.speaker) if s.speaker is not None and w.speaker else np.zeros(n, bool)
    vals["speaker"] = (np.where(on, w.speaker, 0.0), on)
    t = np.where(c["valid_from"][sl] != NO_TIME, c["valid_from"][sl], c["created"][sl])
    window = p.window[sl]
    for i, win in enumerate(s.windows):
        window[(window < 0) & (win.start <= t) & (t < win.end + TOLD_AFTER)] = i
    on = (window >= 0) & bool(w.time)
    vals["time"] = (np.where(on, w.time, 0.0), on)
    if w.recency:
        age = np.maximum(0, s.now - c["created"][sl]) / DAY_MS
        vals["recency"] = (w.recency * 0.5 ** (age / w.half_life_days), np.ones(n, bool))
    imp = c["importance"][sl]
    on = (imp != 0.5) & bool(w.importance)
    vals["importance"] = (np.where(on, w.importance * (imp - 0.5), 0.0), on)
    total = np.zeros(n)
    for name, (v, on) in vals.items():
        total += np.where(on, v, 0.0)
        if name not in p.parts:
            p.parts[name] = (np.zeros(len(p)), np.zeros(len(p), bool))
        p.parts[name][0][sl], p.parts[name][1][sl] = v, on
    p.base[sl] = total


def access_bonus(w: Weights, hits: np.ndarray, last: np.ndarray, now: int) -> np.ndarray:
    """The ``access`` signal (``weight_access``, 0 by default): how often recall returned a
    memory, each return fading with the recency half-life since the last one (reinforcement:
    strength = hits * 0.5 ** (days since last / half-life)), saturating: w * s / (1 + s)."""
    days = np.maximum(0, now - last) / DAY_MS
    strength = hits * 0.5 ** (days / w.half_life_days)
    return w.access * strength / (1.0 + strength)


def add_access(p: Pool, bonus: np.ndarray) -> None:
    """Add each entry's access bonus (:func:`access_bonus`, in pool order) to its base score."""
    p.base += bonus
    p.parts["access"] = (bonus, bonus > 0)


def best(p: Pool, n: int, among: np.ndarray | None = None) -> np.ndarray:
    """Indices of the ``n`` entries of highest base score (ties: lower rowid), best first."""
    idx = np.arange(len(p)) if among is None else among
    order = np.lexsort((p.cols["rowid"][idx], -p.base[idx]))
    return idx[order[:n]]


def graph_bonus(w: Weights, seed_base: float, strength: float, hops: int) -> float:
    """What a memory reached from a seed in the graph gains: the graph weight times the
    seed's base score times the path's strength, halved per hop."""
    return w.graph * seed_base * strength * 0.5 ** hops


def add_graph(p: Pool, reached: dict[int, tuple[float, dict]]) -> None:
    """Add each reached entry's bonus (pool index -> (bonus, how)) to its base score."""
    for i, (bonus, via) in reached.items():
        p.base[i] += bonus
        p.graph[i] = bonus
        p.via[i] = via


def rank(p: Pool, s: Signals, k: int, explain: bool = True) -> list[dict]:
    """The pool (base scores set, ``prev``/``next`` linked) ranked: context and episode
    scores, best first (ties: lower rowid), one entry per text (``thash``: case and spacing
    ignored), cut to ``k``: ``[{"rowid", "score", "signals"}]`` (``signals`` only when
    ``explain``)."""
    w, c = s.weights, p.cols
    if not len(p):
        return []
    base = p.base
    linked = np.stack([p.prev, p.next])
    near = np.where(linked >= 0, base[np.maximum(linked, 0)], -np.inf).max(axis=0)
    near = np.where(c["turn"], near, base)  # outside a conversation a memory is its own context
    neighbor = np.where(np.isfinite(near), w.neighbor * near, 0.0)
    context = base + neighbor
    keys = np.where(c["turn"], c["episode"], -c["rowid"] - 1)
    _, group = np.unique(keys, return_inverse=True)
    best_in = np.full(group.max() + 1, -np.inf)
    np.maximum.at(best_in, group, context)
    episode = w.episode * best_in[group]
    score = context + episode
    dated = said_when(p, score, s, k)
    asks = asked(p, w)
    score = score + dated + asks
    order = np.lexsort((c["rowid"], -score))
    _, first = np.unique(c["thash"][order], return_index=True)  # the best entry of each text
    out: list[dict] = []
    for j in order[np.sort(first)[:k]].tolist():
        hit: dict = {"rowid": int(c["rowid"][j]), "score": float(score[j])}
        if explain:
            hit["signals"] = shown(_signals(p, s, j, float(neighbor[j]), float(episode[j]), float(dated[j]),
                                            float(asks[j])))
        out.append(hit)
    return out


def said_when(p: Pool, score: np.ndarray, s: Signals, k: int) -> np.ndarray:
    """The ``dated`` bonus of each entry: when the query asks when something happened, the
    best ``max(DATED_POOL, 2 k)`` entries whose text says when (``dated``: timewords.says_when,
    the answer to a "when" is a turn that dates what it tells) gain ``weight_dated``."""
    out = np.zeros(len(p))
    if not s.asks_when or not s.weights.dated:
        return out
    top = np.lexsort((p.cols["rowid"], -score))[:max(DATED_POOL, 2 * k)]
    out[top[p.cols["dated"][top]]] = s.weights.dated
    return out


def asked(p: Pool, w: Weights) -> np.ndarray:
    """The ``asks`` signal of each entry (a penalty): minus ``weight_asks`` times the square of
    the share of its text in questions.  A turn that asks holds the topic of a question about
    it, not the answer (the reply does), so it is lowered in the final score only: its base
    still lifts its neighbours and its episode.  The square spares a turn that tells and then
    asks back ("I study at UCLA! Do you?", 30% asked)."""
    return -w.asks * p.cols["asks"] ** 2 if w.asks else np.zeros(len(p))


def _signals(p: Pool, s: Signals, i: int, neighbor: float, episode: float,
             dated: float = 0.0, asks: float = 0.0) -> dict[str, tuple[float, dict]]:
    """Entry ``i``'s contribution and details per signal (as recall results show them)."""
    c = p.cols
    detail = {"vector": lambda: {"cosine": float(c["cos"][i]), "rank": int(c["vec_rank"][i]) or None},
              "keyword": lambda: {"bm25": float(c["bm25"][i]), "rank": int(c["kw_rank"][i])},
              "speaker": lambda: {"speaker": s.speaker_name},
              "time": lambda: {"phrase": s.windows[int(p.window[i])].phrase},
              "recency": lambda: {"age_days": max(0, s.now - int(c["created"][i])) / DAY_MS},
              "importance": lambda: {"importance": float(c["importance"][i])}}
    out = {name: (float(p.parts[name][0][i]), detail[name]()) for name in BASE
           if name in p.parts and p.parts[name][1][i]}
    if "access" in p.parts and p.parts["access"][1][i]:
        out["access"] = (float(p.parts["access"][0][i]), {})
    if i in p.via:
        out["graph"] = (float(p.graph[i]), p.via[i])
    if neighbor:
        out["neighbor"] = (neighbor, {})
    if episode:
        out["episode"] = (episode, {})
    if dated:
        out["dated"] = (dated, {})
    if asks:
        out["asks"] = (asks, {"asked": float(c["asks"][i])})
    return out


def shown(parts: dict[str, tuple[float, dict]]) -> dict[str, dict]:
    """Signals as results carry them: each one's contribution and details, rounded."""
    out = {}
    for name, (value, detail) in parts.items():
        show = {"score": round(value, 4)}
        for key, x in detail.items():
            show[key] = round(x, 1 if key == "age_days" else 4) if isinstance(x, float) else x
        out[name] = show
    return out
