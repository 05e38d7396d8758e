"""Recall's scorer: pure functions from candidates (their rows and raw signal values) and
the weights to one ranked, deduplicated list.  No I/O: brandmind/recall.py gathers the
candidates (``Searcher``) and calls these; the formula is in recall.py's docstring::

    base    = vector * cosine + keyword * bm25 / best bm25 + speaker + time
              + recency * 0.5 ** (age / half-life) + importance * (importance - 0.5)
              + graph bonus (graph * seed base * path strength * 0.5 ** hops)
    context = base + neighbor * max(base of the turns before and after)
    score   = context + episode * max(context in the same episode)

To add a recall signal: a weight in :class:`Weights` (config ``weight_<name>``), its
contribution in :func:`base_score` (or a stage after it, like the graph bonus), the
candidates it brings in ``Searcher`` (recall.py), and a row in tests/test_recall_scorer.py.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Weights:
    """How much each signal counts (config keys ``weight_<name>``); see the module doc."""

    vector: float = 1.0
    keyword: float = 0.4
    speaker: float = 0.25
    neighbor: float = 0.3
    episode: float = 0.5
    graph: float = 0.3
    time: float = 0.3
    recency: float = 0.0
    importance: float = 0.1
    half_life_days: float = 30.0

    @classmethod
    def from_config(cls, config: Any) -> "Weights":
        values = {f: getattr(config, f"weight_{f}") for f in
                  ("vector", "keyword", "speaker", "neighbor", "episode", "graph", "time", "recency", "importance")
                  if hasattr(config, f"weight_{f}")}
        if hasattr(config, "recency_half_life_days"):
            values["half_life_days"] = config.recency_half_life_days
        return cls(**values)


@dataclass
class Candidate:
    """One memory in the pool: its row (``storage.search.RANK_COLS``), raw signal values,
    its neighbouring turns in the pool and the scores computed from them."""

    rowid: int
    row: dict
    cos: float | None = None
    bm25: float | None = None
    graph: dict | None = None
    prev: int | None = None
    next: int | None = None
    base: float = 0.0
    context: float = 0.0
    score: float = 0.0
    signals: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Signals:
    """What a candidate's base score needs besides the candidate: the weights, the ranks
    of the vector and keyword hits, the best BM25, the one speaker the query names (or
    None), the time windows it names and the moment asked about."""

    weights: Weights
    vec_rank: dict = field(default_factory=dict)
    kw_rank: dict = field(default_factory=dict)
    best_bm: float = 0.0
    speaker: str | None = None
    windows: tuple = ()
    now: int = 0


def base_score(c: Candidate, s: Signals) -> None:
    """Set ``c.base`` and ``c.signals``: (contribution, details) per signal (rounded only
    for the results shown)."""
    w = s.weights
    parts: dict[str, tuple[float, dict]] = {
        "vector": (w.vector * (c.cos or 0.0), {"cosine": c.cos or 0.0, "rank": s.vec_rank.get(c.rowid)})}
    if c.bm25 is not None and s.best_bm > 0:
        parts["keyword"] = (w.keyword * c.bm25 / s.best_bm, {"bm25": c.bm25, "rank": s.kw_rank[c.rowid]})
    if s.speaker is not None and c.row["speaker"] == s.speaker and w.speaker:
        parts["speaker"] = (w.speaker, {"speaker": s.speaker})
    t = c.row["valid_from"] if c.row["valid_from"] is not None else c.row["created_at"]
    for win in s.windows:
        if win.start <= t < win.end and w.time:
            parts["time"] = (w.time, {"phrase": win.phrase})
            break
    if w.recency:
        age_days = max(0, s.now - c.row["created_at"]) / 86_400_000
        parts["recency"] = (w.recency * 0.5 ** (age_days / w.half_life_days), {"age_days": age_days})
    if w.importance and c.row["importance"] != 0.5:
        parts["importance"] = (w.importance * (c.row["importance"] - 0.5), {"importance": c.row["importance"]})
    c.base, c.signals = sum(v for v, _ in parts.values()), parts


def best(cands: Any, n: int) -> list[Candidate]:
    """The ``n`` candidates of highest base score (ties: lower rowid first)."""
    return sorted(cands, key=lambda c: (-c.base, c.rowid))[:n]


def graph_bonus(w: Weights, seed_base: float, strength: float, hops: int) -> float:
    """What a memory reached from a seed in the graph gains: the graph weight times the
    seed's base score times the path's strength, halved per hop."""
    return w.graph * seed_base * strength * 0.5 ** hops


def add_graph(cands: dict[int, Candidate], reached: dict[str, tuple[float, dict]]) -> None:
    """Add each reached memory's bonus (memory id -> (bonus, how)) to its base score."""
    by_id = {c.row["id"]: c for c in cands.values()}
    for mid, (bonus, via) in reached.items():
        c = by_id.get(mid)
        if c is not None:
            c.base += bonus
            c.signals["graph"] = (bonus, via)


def _episode_key(c: Candidate) -> tuple:
    return (c.row["thread"], c.row["episode"]) if c.row["thread"] is not None else ("", c.rowid)


def rank(cands: dict[int, Candidate], w: Weights, k: int) -> list[dict]:
    """The pool (base scores set, ``prev``/``next`` linked) ranked: context and episode
    scores, best first (ties: lower rowid), deduplicated by text (case and spacing
    ignored), cut to ``k``: ``[{"rowid", "score", "signals"}]``."""
    items = list(cands.values())
    for c in items:
        near = [cands[x].base for x in (c.prev, c.next) if x is not None]
        if c.row["thread"] is None:
            near = [c.base]  # outside a conversation a memory is its own context
        part = w.neighbor * max(near) if near else 0.0
        c.context = c.base + part
        if part:
            c.signals["neighbor"] = (part, {})
    best_in: dict[tuple, float] = {}
    for c in items:
        key = _episode_key(c)
        best_in[key] = max(best_in.get(key, -math.inf), c.context)
    for c in items:
        part = w.episode * best_in[_episode_key(c)]
        c.score = c.context + part
        if part:
            c.signals["episode"] = (part, {})
    ranked = sorted(items, key=lambda c: (-c.score, c.rowid))
    out, texts = [], set()
    for c in ranked:
        norm = _SPACE.sub(" ", c.row["text"].strip().lower())
        if norm in texts:
            continue
        texts.add(norm)
        out.append({"rowid": c.rowid, "score": c.score, "signals": shown(c.signals)})
        if len(out) >= k:
            break
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
