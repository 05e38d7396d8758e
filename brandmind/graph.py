"""The knowledge graph behind ``Memory.kg_*``, ``Memory.link``, ``Memory.history`` and
``Memory.neighbors``.

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

Walking neighbours (:func:`neighbors`): breadth first from a root (a node, by id or
name, or a memory id) for 1-3 hops, following edges and links in both directions and
mentions both ways, within the root's user; only current edges and memories (not
retired, not ended) unless ``include_retired``.  Every item is reached at its smallest
hop count; once more than ``limit`` items are known, no new ones are added and
``truncated`` is set.

:func:`history` follows a fact's versions (same subject and predicate, supersession,
``contradicts`` links) transitively.  The functions take the ``Memory`` as first
argument; ``Memory`` keeps thin methods with the public signatures.

Repair (``bm kg list / rm / merge``):

* :func:`add_node` returns the user's existing node with the same normalised name (and
  type; the default type ``entity`` matches a node of any type) instead of a twin;
  :func:`add_edge` creates the end nodes it cannot find by id or name.
* :func:`remove_node` appends ``kg.node.remove {id, user, ts}``: the node, its edges and
  its mentions go from the graph (the facts, i.e. memories, stay: ``bm forget`` removes
  those); the id is tombstoned, so edges and mentions of it that arrive later (sync)
  are dropped and a late add of it cannot bring it back (remove wins).
* :func:`merge_nodes` appends ``kg.node.merge {id, into, user, ts}``: the edges and
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
from . import validate
from .clock import iso, new_id, now_millis
from .errors import InvalidInput, NotFound, UsageError


# -- nodes and edges ------------------------------------------------------------------------
GENERIC_TYPE = "entity"  # a node of no particular type: matches a node of any type by name


def add_node(mem: Any, name: str, *, type: str | None = GENERIC_TYPE, user: str | None = None,
             labels: Iterable[str] = (), meta: dict | None = None) -> dict:
    """``Memory.kg_add_node``: the user's node with this (normalised) name and type if there
    is one (``created: False``; type ``entity`` or None matches any type when one node has
    the name), else a new node (op ``kg.node``, ``created: True``)."""
    u = mem.store.user(user)
    kind = validate.name(type or GENERIC_TYPE, what="node type")
    name = validate.text(name, what="node name", limit=512)
    labels, meta = list(labels), validate.meta(meta)
    mem.store.catch_up()
    same = _named(mem, u, name)
    exact = [r for r in same if r["type"] == kind]
    found = exact or (same if kind == GENERIC_TYPE and len(same) == 1 else [])
    if found:
        return {**mem.kg_node(found[0]["id"]), "created": False}
    payload = {"id": new_id("n"), "user": u, "type": kind, "name": name, "labels": labels,
               "meta": meta, "ts": now_millis()}
    with mem.log.write() as t:
        t.append("kg.node", payload)
    mem.store.catch_up()
    return {**mem.kg_node(payload["id"]), "created": True}


def _named(mem: Any, user: str, name: str) -> list[dict]:
    """The user's nodes whose normalised name is that of ``name``, oldest first."""
    F._ensure_norm_function(mem.sql)
    return list(mem.sql.rows("SELECT * FROM kg_nodes WHERE user_id=? AND bm_norm(name)=? ORDER BY created_at, id",
                             (user, F.norm(name))))


def get_node(mem: Any, ref: str, *, user: str | None = None) -> dict:
    """``Memory.kg_node``: a node by id or exact name, with its edges and memories."""
    rows = list(mem.sql.rows("SELECT * FROM kg_nodes WHERE id=?", (ref,)))
    if not rows:
        rows = list(mem.sql.rows("SELECT * FROM kg_nodes WHERE user_id=? AND name=? ORDER BY created_at",
                                 (mem.store.user(user), ref)))
    if not rows:
        rows = _named(mem, mem.store.user(user), ref)
    if not rows:
        into = merged_into(mem.sql, ref)
        raise NotFound(f"no graph node {ref!r}" + (f" (it was merged into {into})" if into else ""),
                       hint=f"use {into}" if into else "create one with `bm kg node NAME`; list them with `bm kg list`")
    if len(rows) > 1:
        raise UsageError(f"{len(rows)} nodes are named {ref!r}: " + ", ".join(f"{r['id']} ({r['type']})" for r in rows),
                         hint="refer to the node by its id, or merge them: `bm kg merge ID1 ID2`")
    node = _node_out(rows[0])
    nid = node["id"]
    node["edges"] = [_edge_out(e) for e in mem.sql.rows(
        "SELECT * FROM kg_edges WHERE src=? OR dst=? ORDER BY created_at, id", (nid, nid))]
    node["memories"] = [r["memory_id"] for r in mem.sql.rows(
        "SELECT memory_id FROM kg_mentions WHERE node_id=? ORDER BY memory_id", (nid,))]
    return node


def _end(mem: Any, ref: str, user: str | None, created: list[dict]) -> dict:
    """A link's end: the node with that id or (normalised) name, else a new ``entity`` node
    named ``ref`` (not for what looks like a node id: a typo there is an error)."""
    try:
        return mem.kg_node(ref, user=user)
    except NotFound:
        if ref.startswith("n_") and " " not in ref:
            raise
    node = add_node(mem, ref, user=user)
    created.append({"id": node["id"], "name": node["name"], "type": node["type"]})
    return node


def add_edge(mem: Any, src: str, dst: str, predicate: str, *, weight: float = 1.0,
             evidence: Iterable[str] = (), meta: dict | None = None, user: str | None = None) -> dict:
    """``Memory.kg_link``: an edge between nodes (op ``kg.edge``), or a mention node ->
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
        mem.get(dst)
        a = _end(mem, src, user, created)
        with mem.log.write() as t:
            t.append("kg.mention", {"node": a["id"], "memory": dst})
        mem.store.catch_up()
        return {"node": a["id"], "memory": dst, "predicate": "mentions", "created": created}
    meta, evidence = validate.meta(meta), list(evidence)  # checked before any node is made
    a = _end(mem, src, user, created)
    b = _end(mem, dst, user, created)
    payload = {"id": new_id("e"), "src": a["id"], "dst": b["id"], "predicate": predicate, "weight": weight,
               "evidence": evidence, "meta": meta, "ts": now_millis()}
    with mem.log.write() as t:
        t.append("kg.edge", payload)
    mem.store.catch_up()
    return {**_edge_out(next(mem.sql.rows("SELECT * FROM kg_edges WHERE id=?", (payload["id"],)))),
            "created": created}


def find_node(mem: Any, ref: str, user: str | None) -> dict:
    """A graph node row by id, exact name or normalised name within the user's graph."""
    rows = list(mem.sql.rows("SELECT * FROM kg_nodes WHERE id=?", (ref,)))
    if not rows:
        u = mem.store.user(user)
        rows = list(mem.sql.rows("SELECT * FROM kg_nodes WHERE user_id=? AND name=? ORDER BY created_at, id",
                                 (u, ref)))
        if not rows:
            F._ensure_norm_function(mem.sql)
            rows = list(mem.sql.rows("SELECT * FROM kg_nodes WHERE user_id=? AND bm_norm(name)=? "
                                     "ORDER BY created_at, id", (u, F.norm(ref))))
    if not rows:
        into = merged_into(mem.sql, ref)
        raise NotFound(f"no graph node or memory {ref!r}" + (f" (it was merged into {into})" if into else ""),
                       hint="give a node id or name (`bm kg list`) or a memory id")
    if len(rows) > 1:
        raise UsageError(f"{len(rows)} nodes are named {ref!r}: " + ", ".join(f"{r['id']} ({r['type']})" for r in rows),
                         hint="refer to the node by its id, or merge them: `bm kg merge ID1 ID2`")
    return rows[0]


# -- repair: list, remove, merge --------------------------------------------------------------
def list_nodes(mem: Any, *, user: str | None = None, type: str | None = None, name: str | None = None,
               limit: int = 100) -> list[dict]:
    """The user's nodes (of ``type``; whose normalised name contains ``name``), by name, each
    with how many edges and mentions it has."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UsageError(f"limit must be a positive whole number, got {limit!r}", hint="e.g. --limit 50")
    where, args = ["n.user_id = ?"], [mem.store.user(user)]
    if type is not None:
        where.append("n.type = ?")
        args.append(validate.name(type, what="node type"))
    if name is not None:
        F._ensure_norm_function(mem.sql)
        where.append("instr(bm_norm(n.name), ?) > 0")
        args.append(F.norm(name))
    rows = mem.sql.rows(
        "SELECT n.*, (SELECT count(*) FROM kg_edges e WHERE e.src = n.id OR e.dst = n.id) AS edges, "
        "(SELECT count(*) FROM kg_mentions k WHERE k.node_id = n.id) AS mentions "
        f"FROM kg_nodes n WHERE {' AND '.join(where)} ORDER BY n.name COLLATE NOCASE, n.created_at, n.id LIMIT ?",
        (*args, limit))
    return [{**_node_out(r), "edges": r["edges"], "mentions": r["mentions"]} for r in rows]


def remove_node(mem: Any, ref: str, *, user: str | None = None) -> dict:
    """``bm kg rm``: the node goes with its edges and mentions (op ``kg.node.remove``)."""
    mem.store.catch_up()
    row = find_node(mem, ref, user)
    c = mem.sql.conn
    edges = c.execute("SELECT count(*) FROM kg_edges WHERE src=? OR dst=?", (row["id"], row["id"])).fetchone()[0]
    mentions = c.execute("SELECT count(*) FROM kg_mentions WHERE node_id=?", (row["id"],)).fetchone()[0]
    from .projection import hlc_key
    from .replication import forget_nodes_in_log

    with mem.log.write() as t:
        op = t.append("kg.node.remove", {"id": row["id"], "user": row["user_id"], "ts": now_millis()})
        forget_nodes_in_log(t, {row["id"]}, hlc_key(op["hlc"]))  # its name leaves the log too
    mem.store.catch_up()
    return {"removed": row["id"], "name": row["name"], "type": row["type"], "user": row["user_id"],
            "edges": edges, "mentions": mentions}


def merge_nodes(mem: Any, ref: str, into_ref: str, *, user: str | None = None) -> dict:
    """``bm kg merge A B``: A's edges and mentions move to B and A goes (op ``kg.node.merge``)."""
    mem.store.catch_up()
    a, b = find_node(mem, ref, user), find_node(mem, into_ref, user)
    if a["id"] == b["id"]:
        raise UsageError(f"{ref!r} and {into_ref!r} are the same node ({a['id']})",
                         hint="give two different nodes: `bm kg merge FROM INTO`")
    if a["user_id"] != b["user_id"]:
        raise InvalidInput(f"{a['id']} and {b['id']} belong to different users ({a['user_id']}, {b['user_id']})",
                           hint="merge nodes of one user")
    c = mem.sql.conn
    edges = c.execute("SELECT count(*) FROM kg_edges WHERE src=? OR dst=?", (a["id"], a["id"])).fetchone()[0]
    mentions = c.execute("SELECT count(*) FROM kg_mentions WHERE node_id=?", (a["id"],)).fetchone()[0]
    with mem.log.write() as t:
        t.append("kg.node.merge", {"id": a["id"], "into": b["id"], "user": a["user_id"], "ts": now_millis()})
    mem.store.catch_up()
    return {"merged": a["id"], "into": b["id"], "name": b["name"], "edges_moved": edges,
            "mentions_moved": mentions, "node": mem.kg_node(b["id"])}


# -- the projection of kg.node.remove / kg.node.merge (called by projection.apply_sql_side) ------
MERGED = "merged:"  # tombstones key of a merged node: value "<hlc key>\x1f<into id>"


def merged_into(sql: Any, node_id: str, *, hops: int = 16) -> str | None:
    """Where a merged node's edges go now (following merges), or None if it was not merged."""
    target, here = None, node_id
    for _ in range(hops):
        row = sql.conn.execute("SELECT hlc FROM tombstones WHERE id=?", (MERGED + here,)).fetchone()
        if row is None or "\x1f" not in row[0]:
            break
        here = target = row[0].split("\x1f", 1)[1]
        if here == node_id:
            break
    return target


def apply_remove(sql: Any, p: dict) -> None:
    from . import converge

    converge.kill_node(sql, p["id"])


def apply_merge(sql: Any, p: dict, hk: str) -> None:
    from . import converge

    src, into = p["id"], p["into"]
    if src == into:
        return
    converge.tombstone(sql, MERGED + src, f"{hk}\x1f{into}")  # the greatest (latest) merge wins
    target = merged_into(sql, src)
    c = sql.conn
    if target and target != src and not converge.dead(sql, target):
        c.execute("UPDATE kg_edges SET src=? WHERE src=?", (target, src))
        c.execute("UPDATE kg_edges SET dst=? WHERE dst=?", (target, src))
        c.execute("INSERT OR IGNORE INTO kg_mentions SELECT ?, memory_id FROM kg_mentions WHERE node_id=?",
                  (target, src))
    converge.kill_node(sql, src)  # what did not move (its target was removed) goes with it


def redirect_edge(sql: Any, p: dict) -> dict | None:
    """A ``kg.edge`` payload touching a dead node: its ends moved along merges, or None when
    it stays dead (removed node, forgotten memory)."""
    from . import converge

    q = dict(p)
    for key in ("src", "dst"):
        if isinstance(q.get(key), str):
            q[key] = merged_into(sql, q[key]) or q[key]
    if q == p or converge.edge_is_dead(sql, q):
        return None
    return q


def redirect_node(sql: Any, node_id: str) -> str | None:
    """The live node a dead node's mentions go to (it was merged), or None."""
    from . import converge

    target = merged_into(sql, node_id)
    return target if target and not converge.dead(sql, target) else None


# -- links between memories, versions of a fact -----------------------------------------------
def link(mem: Any, src_id: str, dst_id: str, type: str, strength: float = 0.5) -> dict:
    """``Memory.link``: a typed link between two memories of one user (op ``kg.edge``)."""
    if type not in F.LINK_TYPES:
        raise InvalidInput(f"unknown link type {type!r}", hint="use one of: " + ", ".join(F.LINK_TYPES))
    try:
        value = float(strength) if not isinstance(strength, bool) else float("nan")
    except (TypeError, ValueError):
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise InvalidInput(f"strength must be a number from 0 to 1, got {strength!r}",
                           hint="e.g. --strength 0.8")
    a, b = mem.get(src_id), mem.get(dst_id)
    if src_id == dst_id:
        raise InvalidInput("a memory cannot be linked to itself", hint="give two different memory ids")
    if a["user"] != b["user"]:
        raise InvalidInput(f"{src_id} and {dst_id} belong to different users",
                           hint="links join memories of one user")
    payload = {"id": new_id("e"), "src": src_id, "dst": dst_id, "predicate": type, "weight": value,
               "evidence": [], "meta": {}, "ts": now_millis(), "user": a["user"]}
    with mem.log.write() as t:
        t.append("kg.edge", payload)
    mem.store.catch_up()
    return _link_out(next(mem.sql.rows("SELECT * FROM kg_edges WHERE id=?", (payload["id"],))))


def history(mem: Any, memory_id: str) -> list[dict]:
    """``Memory.history``: the versions of a fact, oldest first, each with status and reason."""
    from .memory import _memory_out

    mem.get(memory_id)
    F._ensure_norm_function(mem.sql)
    rows: dict[str, dict] = {}
    todo = [memory_id]
    while todo:
        mid = todo.pop()
        if mid in rows:
            continue
        found = list(mem.sql.rows("SELECT * FROM memories WHERE id=?", (mid,)))
        if not found:
            continue
        row = rows[mid] = found[0]
        related = [r[0] for r in mem.sql.conn.execute(
            "SELECT id FROM memories WHERE superseded_by=? AND user_id=?", (mid, row["user_id"]))]
        related += [r[0] for r in mem.sql.conn.execute(
            "SELECT CASE WHEN src=? THEN dst ELSE src END FROM kg_edges "
            "WHERE predicate='contradicts' AND (src=? OR dst=?)", (mid, mid, mid))]
        if row["superseded_by"]:
            related.append(row["superseded_by"])
        if row["subject"] is not None:
            pred = F.normalize_predicate(row["predicate"])
            if pred in F.FUNCTIONAL:
                same = ("bm_predicate(predicate) = ?", (pred,))
            else:
                preds = [p for p in (pred, F.ANTONYMS.get(pred)) if p]
                same = (f"bm_predicate(predicate) IN ({','.join('?' * len(preds))}) AND bm_norm(object) = ?",
                        (*preds, F.norm(row["object"])))
            related += [r[0] for r in mem.sql.conn.execute(
                f"SELECT id FROM memories WHERE user_id=? AND subject IS NOT NULL AND bm_norm(subject)=? "
                f"AND {same[0]}", (row["user_id"], F.norm(row["subject"]), *same[1]))]
        todo.extend(r for r in related if r and r.startswith("m_") and r not in rows)
    owner = rows[memory_id]["user_id"]
    now = now_millis()
    out = []
    for row in sorted((r for r in rows.values() if r["user_id"] == owner),
                      key=lambda r: (r["valid_from"] if r["valid_from"] is not None else r["created_at"],
                                     r["recorded_at"] or 0, r["id"])):
        item = _memory_out(row)
        item["status"] = ("retired" if row["retired_at"] is not None else
                          "ended" if row["valid_to"] is not None and row["valid_to"] <= now else "current")
        item["reason"] = item["meta"].get("retired_reason")
        out.append(item)
    return out


# -- neighbours ---------------------------------------------------------------------------------
def neighbors(mem: Any, ref: str, radius: int = 1, *, user: str | None = None,
              include_retired: bool = False, limit: int = 500) -> dict:
    """``Memory.neighbors``: what lies within ``radius`` hops of a node or memory."""
    if isinstance(radius, bool) or not isinstance(radius, int) or not 1 <= radius <= 3:
        raise UsageError(f"radius must be 1, 2 or 3, got {radius!r}", hint="e.g. --radius 2")
    now = now_millis()
    c = mem.sql.conn
    if ref.startswith("m_"):
        root_row = next(mem.sql.rows("SELECT * FROM memories WHERE id=?", (ref,)), None)
        if root_row is None:
            raise NotFound(f"no memory {ref!r}", hint="list ids with `bm memories list`")
        root = _hop_memory(root_row, 0)
    else:
        root = _hop_node(find_node(mem, ref, user), 0)
    owner = root.pop("_user")
    cur = "" if include_retired else " AND retired_at IS NULL AND (valid_to IS NULL OR valid_to > :now)"
    seen: dict[str, dict] = {root["id"]: root}
    edges: dict[tuple, dict] = {}
    truncated = False

    def visit(other: str, hop: int) -> dict | None:
        if other in seen:
            return seen[other]
        if other.startswith("m_"):
            row = next(mem.sql.rows(f"SELECT * FROM memories WHERE id=:id AND user_id=:u{cur}",
                                    {"id": other, "u": owner, "now": now}), None)
            item = _hop_memory(row, hop) if row else None
        else:
            row = next(mem.sql.rows("SELECT * FROM kg_nodes WHERE id=? AND user_id=?", (other, owner)), None)
            item = _hop_node(row, hop) if row else None
        if item is not None:
            item.pop("_user")
            seen[other] = item
        return item

    frontier = [root["id"]]
    for hop in range(1, radius + 1):
        nxt = []
        for here in frontier:
            links = [(e["src"] if e["dst"] == here else e["dst"], _link_out(e)) for e in mem.sql.rows(
                f"SELECT * FROM kg_edges WHERE (src=:id OR dst=:id){cur} ORDER BY id", {"id": here, "now": now})]
            if here.startswith("m_"):
                pairs = c.execute("SELECT node_id FROM kg_mentions WHERE memory_id=? ORDER BY node_id", (here,))
                links += [(n, {"src": n, "dst": here, "predicate": "mentions"}) for (n,) in pairs]
            else:
                pairs = c.execute("SELECT memory_id FROM kg_mentions WHERE node_id=? ORDER BY memory_id", (here,))
                links += [(m, {"src": here, "dst": m, "predicate": "mentions"}) for (m,) in pairs]
            for other, edge in links:
                if other not in seen and len(seen) > limit:
                    truncated = True
                    continue
                known = other in seen
                if visit(other, hop) is None:
                    continue
                edges[(edge.get("id"), edge["src"], edge["dst"], edge["predicate"])] = edge
                if not known:
                    nxt.append(other)
        frontier = nxt
    nodes = sorted((v for k, v in seen.items() if k != root["id"]),
                   key=lambda v: (v["hops"], v["kind"], v["id"]))
    return {"root": root, "radius": radius, "nodes": nodes,
            "edges": sorted(edges.values(), key=lambda e: (e["src"], e["dst"], e["predicate"], e.get("id") or "")),
            "truncated": truncated}


# -- output shapes ------------------------------------------------------------------------------
def _node_out(row: dict) -> dict:
    return {"id": row["id"], "user": row["user_id"], "type": row["type"], "name": row["name"],
            "labels": json.loads(row["labels"]), "meta": json.loads(row["meta"]),
            "created": iso(row["created_at"])}


def _edge_out(row: dict) -> dict:
    return {"id": row["id"], "src": row["src"], "dst": row["dst"], "predicate": row["predicate"],
            "weight": row["weight"], "evidence": json.loads(row["evidence"]),
            "meta": json.loads(row["meta"]), "created": iso(row["created_at"])}


def _link_out(row: dict) -> dict:
    """An edge or typed link with its world and system times."""
    return {**_edge_out(row), "valid_from": iso(row.get("valid_from")), "valid_to": iso(row.get("valid_to")),
            "recorded_at": iso(row.get("recorded_at")), "retired_at": iso(row.get("retired_at"))}


def _hop_node(row: dict, hops: int) -> dict:
    return {"id": row["id"], "kind": "node", "name": row["name"], "type": row["type"], "hops": hops,
            "_user": row["user_id"]}


def _hop_memory(row: dict, hops: int) -> dict:
    return {"id": row["id"], "kind": "memory", "text": row["text"], "type": row["type"], "hops": hops,
            "retired_at": iso(row.get("retired_at")), "_user": row["user_id"]}
