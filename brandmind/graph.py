"""The knowledge graph: ``mem.graph`` (:class:`Graph` over a Store).

What it holds (SQLite projections of the ``kg.*`` ops, see projection.py):

* **nodes** (``kg_nodes``, op ``kg.node``): named entities of one user, with a type
  (person, place, tool, ...), labels and meta; ids ``n_...``.
* **typed edges** (``kg_edges``, op ``kg.edge``): ``src -predicate-> dst`` with a weight
  and evidence (memory ids).  Edges are bi-temporal: world time ``valid_from`` /
  ``valid_to`` (when the relation held) and system time ``recorded_at`` / ``retired_at``
  (when bm learned it and stopped believing it, op ``kg.edge.retire``); the fact store
  (brandmind/facts.py) writes one edge per fact, subject -predicate-> object.
* **mentions** (``kg_mentions``, op ``kg.mention``): node <-> memory, "this memory is
  about this node".
* **typed links between memories**: ``kg_edges`` rows whose ends are memory ids
  (``m_...``), predicate one of ``facts.LINK_TYPES`` (extends, contradicts, supports, ...)
  and ``weight`` = strength from 0 to 1.  Reconciliation links a new fact to the one it
  replaced with ``contradicts`` (new -> old).

Walking neighbours (:meth:`Graph.neighbors`): breadth first from a root (a node, by id or
name, or a memory id) for 1-3 hops, following edges and links in both directions and
mentions both ways, within the root's user; only current edges and memories (not
retired, not ended) unless ``include_retired``.  Every item is reached at its smallest
hop count; once more than ``limit`` items are known, no new ones are added and
``truncated`` is set.

Views (:meth:`Graph.hubs`, :meth:`Graph.clusters`; brandmind/graphviews.py): the most connected
entities and communities of entities, over the edges current now or true at a date.

``mem.facts.history`` (brandmind/facts.py) follows a fact's versions.  The SQL is in
brandmind/storage/graph.py; how the ``kg.*`` ops land in SQLite, in brandmind/applying.py.

Repair (``bm kg list / rm / merge``):

* :meth:`Graph.add_node` returns the user's existing node with the same normalised name (and
  type; the default type ``entity`` matches a node of any type) instead of a twin;
  :meth:`Graph.add_edge` creates the end nodes it cannot find by id or name.
* :meth:`Graph.remove_node` appends ``kg.node.remove {id, user, ts}``: the node, its edges and
  its mentions go from the graph (the facts, i.e. memories, stay: ``bm forget`` removes
  those); the id is tombstoned, so edges and mentions of it that arrive later (sync)
  are dropped and a late add of it cannot bring it back (remove wins).
* :meth:`Graph.merge_nodes` appends ``kg.node.merge {id, into, user, ts}``: the edges and
  mentions of node ``id`` move to ``into`` and ``id`` goes.  The move is remembered
  (tombstone ``merged:<id>`` = ``<hlc>\x1f<into>``, the greatest HLC wins), so an edge or
  mention of ``id`` that arrives later (another device, a rebuild) lands on ``into``
  (following merges in a chain; dropped if the end node was removed).  Both commute with
  every other op except one case: two devices merging the same node into two different
  nodes before they sync keep the edges where each merge put them.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable

from . import facts as F
from . import graphviews, validate
from .clock import hlc_key, iso, new_id, now_millis
from .errors import InvalidInput, NotFound, UsageError
from .logforget import forget_nodes_in_log
from .ops import Kind
from .storage import graph as kg
from .storage import memories
from .storage.graph import merged_into

__all__ = ["Graph", "GENERIC_TYPE", "merged_into", "node_out", "edge_out", "link_out"]

GENERIC_TYPE = "entity"  # a node of no particular type: matches a node of any type by name


class Graph:
    """The knowledge graph over a Store (``mem.graph``); see the module docstring."""

    def __init__(self, store: Any) -> None:
        self.store = store

    @property
    def sql(self) -> Any:
        return self.store.sql

    def _append(self, kind: str, payload: dict) -> dict:
        with self.store.write() as t:
            op = t.append(kind, payload)
        self.store.catch_up()
        return op

    # -- nodes and edges --------------------------------------------------------------------
    def add_node(self, name: str, *, type: str | None = GENERIC_TYPE, user: str | None = None,
                 labels: Iterable[str] = (), meta: dict | None = None) -> dict:
        """The user's node with this (normalised) name and type if there is one (``created:
        False``; type ``entity`` or None matches any type when one node has the name), else a
        new node (op ``kg.node``, ``created: True``)."""
        u = self.store.user(user)
        kind = validate.name(type or GENERIC_TYPE, what="node type")
        name = validate.text(name, what="node name", limit=512)
        labels, meta = list(labels), validate.meta(meta)
        self.store.catch_up()
        same = self._named(u, name)
        exact = [r for r in same if r["type"] == kind]
        found = exact or (same if kind == GENERIC_TYPE and len(same) == 1 else [])
        if found:
            return {**self.node(found[0]["id"]), "created": False}
        payload = {"id": new_id("n"), "user": u, "type": kind, "name": name, "labels": labels,
                   "meta": meta, "ts": now_millis()}
        self._append(Kind.KG_NODE, payload)
        return {**self.node(payload["id"]), "created": True}

    def _named(self, user: str, name: str) -> list[dict]:
        """The user's nodes whose normalised name is that of ``name``, oldest first."""
        F.ensure_norm(self.sql)
        return kg.nodes_normed(self.sql, user, F.norm(name))

    def node(self, ref: str, *, user: str | None = None) -> dict:
        """A node by id, or by exact name within the user's graph, with its edges and memories."""
        found = kg.node(self.sql, ref)
        rows = [found] if found else kg.nodes_named(self.sql, self.store.user(user), ref, by_id=False)
        if not rows:
            rows = self._named(self.store.user(user), ref)
        if not rows:
            into = merged_into(self.sql, ref)
            raise NotFound(f"no graph node {ref!r}" + (f" (it was merged into {into})" if into else ""),
                           hint=f"use {into}" if into else "create one with `bm kg node NAME`; list them with `bm kg list`")
        _one(rows, ref)
        node = node_out(rows[0])
        node["edges"] = [edge_out(e) for e in kg.edges_of(self.sql, node["id"])]
        node["memories"] = kg.memories_of(self.sql, node["id"])
        return node

    def _end(self, ref: str, user: str | None, created: list[dict]) -> dict:
        """A link's end: the node with that id or (normalised) name, else a new ``entity`` node
        named ``ref`` (not for what looks like a node id: a typo there is an error)."""
        try:
            return self.node(ref, user=user)
        except NotFound:
            if ref.startswith("n_") and " " not in ref:
                raise
        node = self.add_node(ref, user=user)
        created.append({"id": node["id"], "name": node["name"], "type": node["type"]})
        return node

    def add_edge(self, src: str, dst: str, predicate: str, *, weight: float = 1.0,
                 evidence: Iterable[str] = (), meta: dict | None = None, user: str | None = None) -> dict:
        """An edge ``src -predicate-> dst`` between nodes (op ``kg.edge``), or a mention node ->
        memory (op ``kg.mention``).  An end given by a name no node has is created (type
        ``entity``) and listed under ``created``; the predicate is normalised ("lives in" ->
        ``lives_in``)."""
        predicate = F.predicate_name(predicate)
        try:
            weight = float(weight)
        except (TypeError, ValueError):
            weight = float("nan")
        if not math.isfinite(weight):  # NaN would be stored as NULL and the edge silently lost
            raise InvalidInput(f"weight must be a finite number, got {weight!r}", hint="e.g. --weight 0.8")
        created: list[dict] = []
        if dst.startswith("m_") and predicate == "mentions":
            F.get_memory(self.sql, dst)
            a = self._end(src, user, created)
            self._append(Kind.KG_MENTION, {"node": a["id"], "memory": dst})
            return {"node": a["id"], "memory": dst, "predicate": "mentions", "created": created}
        meta, evidence = validate.meta(meta), list(evidence)  # checked before any node is made
        a = self._end(src, user, created)
        b = self._end(dst, user, created)
        payload = {"id": new_id("e"), "src": a["id"], "dst": b["id"], "predicate": predicate, "weight": weight,
                   "evidence": evidence, "meta": meta, "ts": now_millis()}
        self._append(Kind.KG_EDGE, payload)
        return {**edge_out(kg.edge(self.sql, payload["id"])), "created": created}

    def find_node(self, ref: str, user: str | None = None) -> dict:
        """A graph node row by id, exact name or normalised name within the user's graph."""
        found = kg.node(self.sql, ref)
        rows = [found] if found else []
        if not rows:
            u = self.store.user(user)
            rows = kg.nodes_named(self.sql, u, ref) or self._named(u, ref)
        if not rows:
            into = merged_into(self.sql, ref)
            raise NotFound(f"no graph node or memory {ref!r}" + (f" (it was merged into {into})" if into else ""),
                           hint="give a node id or name (`bm kg list`) or a memory id")
        _one(rows, ref)
        return rows[0]

    # -- repair: list, remove, merge ----------------------------------------------------------
    def list_nodes(self, *, user: str | None = None, type: str | None = None, name: str | None = None,
                   limit: int = 100) -> list[dict]:
        """The user's nodes (of ``type``; whose normalised name contains ``name``), by name, each
        with how many edges and mentions it has."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"limit must be a positive whole number, got {limit!r}", hint="e.g. --limit 50")
        u = self.store.user(user)
        kind = validate.name(type, what="node type") if type is not None else None
        if name is not None:
            F.ensure_norm(self.sql)
        rows = kg.list_nodes(self.sql, u, type=kind, name_norm=F.norm(name) if name is not None else None,
                             limit=limit)
        return [{**node_out(r), "edges": r["edges"], "mentions": r["mentions"]} for r in rows]

    def remove_node(self, ref: str, *, user: str | None = None) -> dict:
        """``bm kg rm``: the node goes with its edges and mentions (op ``kg.node.remove``)."""
        self.store.catch_up()
        row = self.find_node(ref, user)
        edges, mentions = kg.ref_counts(self.sql, row["id"])
        with self.store.write() as t:
            op = t.append(Kind.KG_NODE_REMOVE, {"id": row["id"], "user": row["user_id"], "ts": now_millis()})
            forget_nodes_in_log(t, {row["id"]}, hlc_key(op["hlc"]))  # its name leaves the log too
        self.store.catch_up()
        return {"removed": row["id"], "name": row["name"], "type": row["type"], "user": row["user_id"],
                "edges": edges, "mentions": mentions}

    def merge_nodes(self, ref: str, into_ref: str, *, user: str | None = None) -> dict:
        """``bm kg merge A B``: A's edges and mentions move to B and A goes (op ``kg.node.merge``)."""
        self.store.catch_up()
        a, b = self.find_node(ref, user), self.find_node(into_ref, user)
        if a["id"] == b["id"]:
            raise UsageError(f"{ref!r} and {into_ref!r} are the same node ({a['id']})",
                             hint="give two different nodes: `bm kg merge FROM INTO`")
        if a["user_id"] != b["user_id"]:
            raise InvalidInput(f"{a['id']} and {b['id']} belong to different users ({a['user_id']}, {b['user_id']})",
                               hint="merge nodes of one user")
        edges, mentions = kg.ref_counts(self.sql, a["id"])
        self._append(Kind.KG_NODE_MERGE, {"id": a["id"], "into": b["id"], "user": a["user_id"], "ts": now_millis()})
        return {"merged": a["id"], "into": b["id"], "name": b["name"], "edges_moved": edges,
                "mentions_moved": mentions, "node": self.node(b["id"])}

    # -- links between memories ------------------------------------------------------------------
    def link(self, src_id: str, dst_id: str, type: str, strength: float = 0.5) -> dict:
        """A typed link between two memories of one user (``facts.LINK_TYPES``: extends,
        contradicts, supports, ...) with a strength from 0 to 1: a kg_edges row between
        memory ids (op ``kg.edge``)."""
        if type not in F.LINK_TYPES:
            raise InvalidInput(f"unknown link type {type!r}", hint="use one of: " + ", ".join(F.LINK_TYPES))
        try:
            value = float(strength) if not isinstance(strength, bool) else float("nan")
        except (TypeError, ValueError):
            value = float("nan")
        if not 0.0 <= value <= 1.0:
            raise InvalidInput(f"strength must be a number from 0 to 1, got {strength!r}",
                               hint="e.g. --strength 0.8")
        a, b = F.get_memory(self.sql, src_id), F.get_memory(self.sql, dst_id)
        if src_id == dst_id:
            raise InvalidInput("a memory cannot be linked to itself", hint="give two different memory ids")
        if a["user"] != b["user"]:
            raise InvalidInput(f"{src_id} and {dst_id} belong to different users",
                               hint="links join memories of one user")
        payload = {"id": new_id("e"), "src": src_id, "dst": dst_id, "predicate": type, "weight": value,
                   "evidence": [], "meta": {}, "ts": now_millis(), "user": a["user"]}
        self._append(Kind.KG_EDGE, payload)
        return link_out(kg.edge(self.sql, payload["id"]))

    # -- neighbours ------------------------------------------------------------------------------
    def neighbors(self, ref: str, radius: int = 1, *, user: str | None = None,
                  include_retired: bool = False, limit: int = 500) -> dict:
        """What lies within ``radius`` hops (1-3) of a graph node (id or name) or a memory
        (id), over graph edges and typed links in both directions and node <-> memory
        mentions, within the root's user.  Only current edges and memories (not retired,
        not ended) unless ``include_retired``.  Returns ``{"root", "radius", "nodes":
        [{id, kind: node|memory, name|text, type, hops}], "edges": [...], "truncated"}``."""
        if isinstance(radius, bool) or not isinstance(radius, int) or not 1 <= radius <= 3:
            raise UsageError(f"radius must be 1, 2 or 3, got {radius!r}", hint="e.g. --radius 2")
        if ref.startswith("m_"):
            root_row = memories.row(self.sql, ref)
            if root_row is None:
                raise NotFound(f"no memory {ref!r}", hint="list ids with `bm memories list`")
            root = _hop_memory(root_row, 0)
        else:
            root = _hop_node(self.find_node(ref, user), 0)
        walk = _Walk(self.sql, root, None if include_retired else now_millis(), limit)
        frontier = [root["id"]]
        for hop in range(1, radius + 1):
            frontier = walk.step(frontier, hop)
        nodes = sorted((v for k, v in walk.seen.items() if k != root["id"]),
                       key=lambda v: (v["hops"], v["kind"], v["id"]))
        return {"root": root, "radius": radius, "nodes": nodes,
                "edges": sorted(walk.edges.values(), key=lambda e: (e["src"], e["dst"], e["predicate"], e.get("id") or "")),
                "truncated": walk.truncated}

    # -- views: hubs and clusters (brandmind/graphviews.py) ----------------------------------------
    def hubs(self, *, user: str | None = None, at: str | int | None = None, limit: int = 20,
             by: str = "degree") -> list[dict]:
        """The user's most connected entities (degree, neighbors, weight, memories), best first,
        over the edges current now or true ``at`` a date (brandmind/graphviews.py)."""
        return graphviews.hubs(self.store, user=user, at=at, limit=limit, by=by)

    def clusters(self, *, user: str | None = None, at: str | int | None = None, limit: int = 20,
                 min_size: int = 2, top: int = 5) -> list[dict]:
        """Communities of the user's entities (Louvain, seeded), largest first, each with its
        ``top`` best-connected entities and member memories (brandmind/graphviews.py)."""
        return graphviews.clusters(self.store, user=user, at=at, limit=limit, min_size=min_size, top=top)


class _Walk:
    """A breadth-first walk from a root within its user's graph: every item at its smallest
    hop count; past ``limit`` known items no new one is added (``truncated``).  ``now``
    None: retired and ended edges and memories too."""

    def __init__(self, sql: Any, root: dict, now: int | None, limit: int) -> None:
        self.sql, self.now, self.limit = sql, now, limit
        self.owner = root.pop("_user")
        self.seen: dict[str, dict] = {root["id"]: root}
        self.edges: dict[tuple, dict] = {}
        self.truncated = False

    def visit(self, other: str, hop: int) -> dict | None:
        if other in self.seen:
            return self.seen[other]
        if other.startswith("m_"):
            row = memories.current_row(self.sql, other, self.owner, self.now)
            item = _hop_memory(row, hop) if row else None
        else:
            row = kg.node(self.sql, other, self.owner)
            item = _hop_node(row, hop) if row else None
        if item is not None:
            item.pop("_user")
            self.seen[other] = item
        return item

    def links(self, here: str) -> list[tuple[str, dict]]:
        """(the other end, the edge as shown) of every edge, link and mention of ``here``."""
        links = [(e["src"] if e["dst"] == here else e["dst"], link_out(e))
                 for e in kg.edges_around(self.sql, here, self.now)]
        if here.startswith("m_"):
            links += [(n, {"src": n, "dst": here, "predicate": "mentions"}) for n in kg.nodes_of(self.sql, here)]
        else:
            links += [(m, {"src": here, "dst": m, "predicate": "mentions"}) for m in kg.memories_of(self.sql, here)]
        return links

    def step(self, frontier: list[str], hop: int) -> list[str]:
        """Visit what is one hop from ``frontier``; returns the items first reached."""
        nxt = []
        for here in frontier:
            for other, edge in self.links(here):
                if other not in self.seen and len(self.seen) > self.limit:
                    self.truncated = True
                    continue
                known = other in self.seen
                if self.visit(other, hop) is None:
                    continue
                self.edges[(edge.get("id"), edge["src"], edge["dst"], edge["predicate"])] = edge
                if not known:
                    nxt.append(other)
        return nxt


def _one(rows: list[dict], ref: str) -> None:
    """UsageError when more than one node goes by ``ref``."""
    if len(rows) > 1:
        raise UsageError(f"{len(rows)} nodes are named {ref!r}: " + ", ".join(f"{r['id']} ({r['type']})" for r in rows),
                         hint="refer to the node by its id, or merge them: `bm kg merge ID1 ID2`")


# -- output shapes ------------------------------------------------------------------------------
def node_out(row: dict) -> dict:
    return {"id": row["id"], "user": row["user_id"], "type": row["type"], "name": row["name"],
            "labels": json.loads(row["labels"]), "meta": json.loads(row["meta"]),
            "created": iso(row["created_at"])}


def edge_out(row: dict) -> dict:
    return {"id": row["id"], "src": row["src"], "dst": row["dst"], "predicate": row["predicate"],
            "weight": row["weight"], "evidence": json.loads(row["evidence"]),
            "meta": json.loads(row["meta"]), "created": iso(row["created_at"])}


def link_out(row: dict) -> dict:
    """An edge or typed link with its world and system times."""
    return {**edge_out(row), "valid_from": iso(row.get("valid_from")), "valid_to": iso(row.get("valid_to")),
            "recorded_at": iso(row.get("recorded_at")), "retired_at": iso(row.get("retired_at"))}


def _hop_node(row: dict, hops: int) -> dict:
    return {"id": row["id"], "kind": "node", "name": row["name"], "type": row["type"], "hops": hops,
            "_user": row["user_id"]}


def _hop_memory(row: dict, hops: int) -> dict:
    return {"id": row["id"], "kind": "memory", "text": row["text"], "type": row["type"], "hops": hops,
            "retired_at": iso(row.get("retired_at")), "_user": row["user_id"]}
