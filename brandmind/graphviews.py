"""Graph views: the most connected entities (:func:`hubs`) and communities of entities
(:func:`clusters`) in a user's knowledge graph, at a moment in world time.  ``mem.graph.hubs``
and ``mem.graph.clusters`` (brandmind/graph.py) call them; `bm kg hubs` / `bm kg clusters`.

What counts: the user's **entity edges** (``kg_edges`` between two nodes: one per fact, or a
`bm kg link`) that are current at the moment asked about, by the rule recall uses
(``storage.search.current_sql``): now (default) not retired and not ended; ``at`` a date, true
in world time then (``valid_from <= at < valid_to``, corrections excluded; as with `bm recall
--as-of`, what bm learned later about that date counts).  An edge whose evidence is only
memories that are not current then does not count either, so a retired, ended or forgotten
fact takes its edge with it (its own edge is retired with it too; this also covers a memory
retired or ended some other way).

* **degree**: how many such edges touch the entity (parallel edges each count; a self-loop
  once); **neighbors**: how many distinct other entities they reach; **weight**: the sum of
  their weights (a fact's edge weighs its confidence, 0.8 by default; `bm kg link -w`, 1 by
  default); **memories**: how many current memories mention the entity.
* **clusters**: Louvain communities (networkx ``louvain_communities``, resolution 1, seed 0:
  the same graph gives the same clusters) over the entities, tied by their current edges
  (a pair's tie weighs the sum of its edges' weights) and by the current typed links between
  current memories (``supports``, ``extends``, ...; ``contradicts`` is no tie), each of
  which ties every entity the one memory mentions to every entity the other mentions, by
  the link's strength.  Ties of weight 0 or less are left out.  Each cluster lists its
  entities by **internal degree** (its edges to other members), and its **memories**: the
  current memories that are evidence of its internal edges (the facts that link its
  entities), those about its best-connected members first.
"""
from __future__ import annotations

import json
from functools import partial
from typing import Any, Iterator

from .clock import iso, now_millis, parse_time
from .errors import InvalidInput, UsageError
from .storage import graph as kg
from .storage.search import current_sql

__all__ = ["hubs", "clusters", "check_by", "BY", "SEED"]

BY = ("degree", "weight")
SEED = 0  # Louvain's random order, fixed: the same graph gives the same clusters


def check_by(value: Any) -> str:
    """What hubs are ranked by: ``degree`` or ``weight`` (InvalidInput otherwise)."""
    if value not in BY:
        raise InvalidInput(f"cannot rank hubs by {value!r}", hint="use degree or weight")
    return value


def _count(value: Any, what: str, *, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UsageError(f"{what} must be a whole number of at least {least}, got {value!r}",
                         hint=f"e.g. --{what.replace('_', '-')} {max(least, 10) if what == 'limit' else least + 1}")
    return value


def _moment(at: str | int | None) -> Any:
    """``cur(alias)``: the WHERE fragment (and args) keeping the rows of that table alias
    current at ``at`` (None: now), by recall's rule (``storage.search.current_sql``)."""
    when = parse_time(at, field="at") if at is not None else None
    return partial(current_sql, as_of=when, now=now_millis())


def _evidence(raw: str) -> tuple[str, ...] | list[str]:
    """The ids of an edge's stored evidence (``["m_..."]`` read without the JSON parser: a
    tenth of the time on 50,000 edges)."""
    if raw == "[]":
        return ()
    if raw.startswith('["') and raw.endswith('"]') and '"' not in raw[2:-2] and "\\" not in raw:
        return (raw[2:-2],)  # one id, as a fact's edge has
    return json.loads(raw)


def live_edges(sql: Any, user: str, cur: Any) -> Iterator[tuple[str, str, float, Any]]:
    """``(src, dst, weight, evidence ids)`` of the user's current entity edges, less those whose
    evidence is all memories that are no longer current (a fact's edge goes with its fact);
    the ids are those of the evidence less the memories no longer current."""
    stale = kg.stale_memories(sql, user, cur)
    for src, dst, weight, raw in kg.live_entity_edges(sql, user, cur):
        ids = _evidence(raw)
        if ids and stale:
            ids = [i for i in ids if i not in stale]
            if not ids:
                continue
        yield src, dst, weight, ids


def hubs(store: Any, *, user: str | None = None, at: str | int | None = None, limit: int = 20,
         by: str = "degree") -> list[dict]:
    """The user's most connected entities, best first: ``{id, name, type, degree, neighbors,
    weight, memories}`` (the module docstring says what each counts), ranked by ``by``
    (``degree``, then weight; or ``weight``, then degree), then name."""
    limit, by = _count(limit, "limit"), check_by(by)
    u = store.user(user)
    cur = _moment(at)
    store.catch_up()
    degree: dict[str, int] = {}
    weight: dict[str, float] = {}
    near: dict[str, set[str]] = {}
    for src, dst, w, _ids in live_edges(store.sql, u, cur):
        for here, other in ((src, dst), (dst, src)) if src != dst else ((src, src),):
            degree[here] = degree.get(here, 0) + 1
            weight[here] = weight.get(here, 0.0) + w
            if other != here:
                near.setdefault(here, set()).add(other)
    if not degree:
        return []
    names = kg.nodes_by_id(store.sql, list(degree))
    def rank(n: str) -> tuple:
        first, second = (degree[n], weight[n]) if by == "degree" else (weight[n], degree[n])
        return (-first, -second, names[n]["name"].casefold(), n)

    best = sorted(degree, key=rank)[:limit]
    mentions = kg.mention_counts(store.sql, best, cur)
    return [{"id": n, "name": names[n]["name"], "type": names[n]["type"], "degree": degree[n],
             "neighbors": len(near.get(n, ())), "weight": round(weight[n], 6), "memories": mentions.get(n, 0)}
            for n in best]


class _Ties:
    """The weighted, undirected entity graph Louvain runs on, with each pair's edges."""

    def __init__(self) -> None:
        self.weight: dict[tuple[str, str], float] = {}
        self.edges: list[tuple[str, str, float, list[str]]] = []  # (src, dst, weight, current memories)

    def tie(self, a: str, b: str, w: float) -> None:
        if a != b and w > 0:
            key = (a, b) if a < b else (b, a)
            self.weight[key] = self.weight.get(key, 0.0) + w

    def load(self, sql: Any, user: str, cur: Any) -> None:
        for src, dst, weight, ids in live_edges(sql, user, cur):
            self.edges.append((src, dst, weight, ids))
            self.tie(src, dst, weight)
        for a, b, strength in kg.link_ties(sql, user, cur):
            self.tie(a, b, strength)

    def communities(self) -> list[set[str]]:
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(sorted({n for pair in self.weight for n in pair}))
        g.add_weighted_edges_from((a, b, w) for (a, b), w in sorted(self.weight.items()))
        if g.number_of_edges() == 0:
            return []
        return nx.community.louvain_communities(g, weight="weight", resolution=1.0, seed=SEED)


def clusters(store: Any, *, user: str | None = None, at: str | int | None = None, limit: int = 20,
             min_size: int = 2, top: int = 5) -> list[dict]:
    """Communities of the user's entities (see the module docstring), largest first: ``{cluster
    (1, 2, ... in this order), size, edges, weight, entities: [{id, name, type, degree}],
    memories: [{id, text, type, ts}], memory_count}`` with the ``top`` best-connected entities
    and memories; at most ``limit`` clusters of at least ``min_size`` entities."""
    limit, min_size, top = _count(limit, "limit"), _count(min_size, "min_size"), _count(top, "top")
    u = store.user(user)
    cur = _moment(at)
    store.catch_up()
    ties = _Ties()
    ties.load(store.sql, u, cur)
    groups = [c for c in ties.communities() if len(c) >= min_size]
    member = {n: i for i, group in enumerate(groups) for n in group}
    stats = [{"edges": 0, "weight": 0.0, "degree": {}, "memories": {}} for _ in groups]
    inside = [(member[src], src, dst, weight, mems) for src, dst, weight, mems in ties.edges
              if src in member and member.get(dst) == member[src]]
    for i, src, dst, weight, _mems in inside:
        s = stats[i]
        s["edges"] += 1
        s["weight"] += weight
        for n in {src, dst}:
            s["degree"][n] = s["degree"].get(n, 0) + 1
    real = kg.memories_among(store.sql, sorted({m for *_, mems in inside for m in mems}))  # not beads
    for i, src, dst, _weight, mems in inside:  # a memory ranks by the members its fact links
        s = stats[i]
        reach = s["degree"][src] + s["degree"][dst]
        for m in mems:
            if m not in real:
                continue
            s["memories"][m] = max(s["memories"].get(m, 0), reach)
    return _shape(store.sql, groups, stats, limit, top)


def _shape(sql: Any, groups: list[set[str]], stats: list[dict], limit: int, top: int) -> list[dict]:
    """The clusters as returned: ordered, cut to ``limit``, each with its top entities and memories."""
    names = kg.nodes_by_id(sql, sorted({n for g in groups for n in g}))

    def rank(n: str, s: dict) -> tuple:
        return (-s["degree"].get(n, 0), names[n]["name"].casefold(), n)

    order = sorted(range(len(groups)), key=lambda i: (-len(groups[i]), -stats[i]["weight"],
                                                      min(rank(n, stats[i]) for n in groups[i])))
    out, picked = [], []
    for i in order[:limit]:
        s = stats[i]
        best = sorted(groups[i], key=lambda n: rank(n, s))
        mems = sorted(s["memories"], key=lambda m: (-s["memories"][m], m))
        out.append({"cluster": len(out) + 1, "size": len(groups[i]), "edges": s["edges"],
                    "weight": round(s["weight"], 6),
                    "entities": [{"id": n, "name": names[n]["name"], "type": names[n]["type"],
                                  "degree": s["degree"].get(n, 0)} for n in best[:top]],
                    "memories": mems[:top], "memory_count": len(mems)})
        picked += mems[:top]
    briefs = kg.memory_briefs(sql, picked)
    for c in out:
        c["memories"] = [{"id": m, "text": briefs[m]["text"], "type": briefs[m]["type"],
                          "ts": iso(briefs[m]["created_at"])} for m in c["memories"] if m in briefs]
    return out
