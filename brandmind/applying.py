"""The ``apply`` hook of each op kind (brandmind/ops.py): how it lands in the SQLite projection.

Each hook takes ``(sql, op, hk, vector_for)``: the write transaction is the caller's
(``projection.apply_sql_side``), ``hk`` the op's HLC key.  Every rule gives the same
projection for any arrival order that keeps each replica's own order (brandmind/converge.py
has the pieces: tombstones, ops waiting for their target, provenance order; the merge rules
of each kind are in the ops.py docstring and brandmind/merge.py).  The rows: brandmind/storage.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from . import blockrules, converge, merge, personarules, skillrules
from .extract.predicates import normalize_predicate
from .ops import Kind, provide
from .storage import expiry as expiry_rows
from .storage import graph as graph_rows
from .storage import projection as rows

if TYPE_CHECKING:  # pragma: no cover
    from .sqlstore import SQLStore

VectorFor = Callable[[str], "bytes | None"]  # None: the vector is made later (vec_pending)


def no_apply(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """The kind has no SQLite projection (beads live in LMDB: ``apply_log``)."""


def forget_redacted(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """A redacted add is a forgotten one: the id is dead (remove wins)."""
    kind, p = op["kind"], op["payload"]
    if kind == Kind.MEMORY_ADD and p.get("id"):
        converge.kill_memory(sql, p["id"])
    elif kind == Kind.KG_NODE and p.get("id"):
        converge.kill_node(sql, p["id"])


# -- memories ----------------------------------------------------------------------------------------
def _settled(sql: "SQLStore", p: dict, hk: str, kill: Callable[..., Any],
             read_hlc: Callable[..., Any], write_hlc: Callable[..., Any]) -> bool:
    """Whether the add of element ``p["id"]`` (a memory or a graph node) is decided without
    inserting it: the id is tombstoned; or the add is stamped before its user's latest forget
    (the id is killed); or the element exists (another add of the id keeps the earliest HLC)."""
    if converge.dead(sql, p["id"]):
        return True
    if merge.forgotten_before(hk, converge.forgotten_at(sql, p["user"])):  # stamped before its user was forgotten
        kill(sql, p["id"])
        return True
    here, known = read_hlc(sql, p["id"])
    if here and merge.earlier_add(known, hk):
        write_hlc(sql, p["id"], hk)
    return bool(here)


def memory_add(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """Ignored when the id is tombstoned; stamped before its user's latest forget, it kills
    the id.  Another add of the id (an import on two replicas) keeps the earliest HLC.  Ops
    aimed at it that came first are replayed."""
    p = op["payload"]
    if _settled(sql, p, hk, converge.kill_memory, rows.memory_hlc, rows.set_memory_hlc):
        return
    if p.get("predicate") is not None:  # one spelling ("lives in" = lives_in), also for old ops
        p = {**p, "predicate": normalize_predicate(p["predicate"])}
    sql.insert_memory({**p, "op_id": op["id"], "hlc": hk,
                       "recorded_at": p.get("recorded_at") or int(op["hlc"][0])}, vector_for(p["text"]))
    converge.replay(sql, p["id"], apply_to_memory)


def memory_retire(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    p = op["payload"]
    converge.aim(sql, op, p["id"], "retire", p, apply_to_memory, hk=hk)


def memory_confirm(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    p = op["payload"]
    converge.aim(sql, op, p["id"], "confirm", p, apply_to_memory, hk=hk)


def merged_ids(p: dict) -> list[str]:
    """The ids a ``memory.merge`` payload retires: ``ids`` without ``into``, each once."""
    return [i for i in dict.fromkeys(p.get("ids") or []) if i != p["into"]]


def memory_merge(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """Each merged id is retired by the memory.retire rule; ``into`` gains their provenance
    and one confirmation each.  Never reads the merged rows."""
    p = op["payload"]
    for target, part, payload in merge.merge_parts(p, merged_ids(p)):
        converge.aim(sql, op, target, part, payload, apply_to_memory, hk=hk)


def memory_forget(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    converge.kill_memory(sql, op["payload"]["id"], hk)


def memory_pin(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """``bm pin`` / ``unpin``: LWW by HLC; waits for a memory not here yet, dropped for a dead one."""
    p = op["payload"]
    converge.aim(sql, op, p["id"], "pin", {"id": p["id"], "pinned": p["pinned"]}, apply_to_memory, hk=hk)


def pin_memory(sql: "SQLStore", p: dict, hk: str) -> None:
    state = expiry_rows.pin_state(sql, p["id"])
    if state is not None and merge.lww(state if state[0] else None, (hk, p["pinned"])) == (hk, p["pinned"]):
        expiry_rows.set_pin_state(sql, p["id"], hk, bool(p["pinned"]))


def user_forget(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """Every memory and node of the user stamped before the forget goes, their waiting ops,
    their own blocks and their persona assignments; the tombstone keeps the latest forget."""
    user = op["payload"]["user"]
    converge.tombstone(sql, "user:" + user, hk)
    for memory_id in sql.memory_ids("user_id=? AND (hlc IS NULL OR hlc < ?)", (user, hk)):
        converge.kill_memory(sql, memory_id)
    rows.drop_pending_of_user(sql, user, hk)
    for node in rows.user_node_ids(sql, user, hk):
        converge.kill_node(sql, node)
    blockrules.forget_user(sql, user, hk)
    personarules.forget_user(sql, user, hk)


def apply_to_memory(sql: "SQLStore", part: str, p: dict, hk: str) -> None:
    """One part of an op aimed at a memory that is there (brandmind/converge.py replays
    parts that arrived before it)."""
    if part == "retire":
        retire_memory(sql, p)
    elif part == "confirm":
        confirm_memory(sql, p, hk)
    elif part == "merge_into":  # memory.merge: the kept memory gains the merged ones' provenance
        confirm_memory(sql, {**p, "count": int(p["count"])}, hk)
    elif part == "pin":
        pin_memory(sql, p, hk)


def retire_memory(sql: "SQLStore", p: dict) -> None:
    """``memory.retire``: min/set-once merges, so retires from several replicas commute."""
    row = rows.retire_state(sql, p["id"])
    if row is None:
        return
    retired_at, valid_to, superseded_by, meta_json = row
    new = merge.merge_retire({"retired_at": retired_at, "valid_to": valid_to, "superseded_by": superseded_by,
                              "meta": json.loads(meta_json)}, p)
    rows.set_retire_state(sql, p["id"], new["retired_at"], new["valid_to"], new["superseded_by"], new["meta"])


def confirm_memory(sql: "SQLStore", p: dict, hk: str) -> None:
    """``memory.confirm`` (and the kept memory of a ``memory.merge``): a counter, a set union
    of provenance entries (ordered by the HLC of the op that brought them: converge.py),
    a max of times."""
    row = rows.confirm_state(sql, p["id"])
    if row is not None:
        rows.set_confirm_state(sql, p["id"], **merge.merge_confirm(row, p))
    converge.add_provenance(sql, p["id"], list(p.get("provenance") or []), hk)


# -- graph -------------------------------------------------------------------------------------------
def kg_node(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """Stamped before its user's latest forget, the node id is dead; another add of the id
    keeps the earliest HLC."""
    p = op["payload"]
    if not _settled(sql, p, hk, converge.kill_node, rows.node_hlc, rows.set_node_hlc):
        rows.insert_node(sql, p, hk)


def kg_edge(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """Insert-once by id; an end merged into another node: the edge follows; skipped when an
    end or its only evidence is dead.  Retires that came first are replayed."""
    p = op["payload"]
    if converge.edge_is_dead(sql, p):
        p = redirect_edge(sql, p)
        if p is None:
            return
    rows.insert_edge(sql, p, normalize_predicate(p["predicate"]), p.get("recorded_at") or int(op["hlc"][0]))
    converge.replay(sql, p["id"], apply_to_edge)


def kg_edge_retire(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    p = op["payload"]
    converge.aim(sql, op, p["id"], "edge_retire", p, apply_to_edge, table="kg_edges", hk=hk)


def apply_to_edge(sql: "SQLStore", part: str, p: dict, hk: str) -> None:
    row = rows.edge_retire_state(sql, p["id"])
    if row is not None:
        rows.set_edge_retire_state(sql, p["id"], **merge.merge_edge_retire(row, p))


def kg_mention(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """Skipped when the memory or the node is dead (a merged node's go to the node it became)."""
    p = op["payload"]
    node = p["node"]
    if converge.dead(sql, node):
        node = redirect_node(sql, node)
    if node is None or converge.dead(sql, p["memory"]):
        return
    rows.insert_mention(sql, node, p["memory"])


def kg_node_remove(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """``bm kg rm``: the node, its edges and mentions go; the id is tombstoned."""
    converge.kill_node(sql, op["payload"]["id"])


def kg_node_merge(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    """``bm kg merge``: the node's edges and mentions move to ``into`` (following merges; the
    greatest, latest merge wins) and it goes."""
    p = op["payload"]
    src, into = p["id"], p["into"]
    if src == into:
        return
    converge.tombstone(sql, graph_rows.MERGED + src, f"{hk}\x1f{into}")
    target = graph_rows.merged_into(sql, src)
    if target and target != src and not converge.dead(sql, target):
        graph_rows.move_refs(sql, src, target)
    converge.kill_node(sql, src)  # what did not move (its target was removed) goes with it


def redirect_edge(sql: "SQLStore", p: dict) -> dict | None:
    """A ``kg.edge`` payload touching a dead node: its ends moved along merges, or None when
    it stays dead (removed node, forgotten memory)."""
    q = dict(p)
    for key in ("src", "dst"):
        if isinstance(q.get(key), str):
            q[key] = graph_rows.merged_into(sql, q[key]) or q[key]
    if q == p or converge.edge_is_dead(sql, q):
        return None
    return q


def redirect_node(sql: "SQLStore", node_id: str) -> str | None:
    """The live node a dead node's mentions go to (it was merged), or None."""
    target = graph_rows.merged_into(sql, node_id)
    return target if target and not converge.dead(sql, target) else None


# -- blocks, skills, personas (their rules modules) --------------------------------------------------
def block_op(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    blockrules.apply_op(sql, op, hk, forgotten_at=converge.forgotten_at)


def skill_op(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    skillrules.apply_op(sql, op)


def persona_op(sql: "SQLStore", op: dict, hk: str, vector_for: VectorFor) -> None:
    personarules.apply(sql, op)


provide("apply", {
    Kind.BEAD_ADD: no_apply, Kind.BEAD_FORGET: no_apply,
    Kind.MEMORY_ADD: memory_add, Kind.MEMORY_RETIRE: memory_retire, Kind.MEMORY_CONFIRM: memory_confirm,
    Kind.MEMORY_MERGE: memory_merge, Kind.MEMORY_FORGET: memory_forget, Kind.USER_FORGET: user_forget,
    Kind.MEMORY_PIN: memory_pin,
    Kind.KG_NODE: kg_node, Kind.KG_EDGE: kg_edge, Kind.KG_EDGE_RETIRE: kg_edge_retire,
    Kind.KG_MENTION: kg_mention, Kind.KG_NODE_REMOVE: kg_node_remove, Kind.KG_NODE_MERGE: kg_node_merge,
    Kind.SKILL_ADD: skill_op, Kind.SKILL_REMOVE: skill_op,
    Kind.BLOCK_DEFINE: block_op, Kind.BLOCK_UPDATE: block_op,
    Kind.PERSONA_DEFINE: persona_op, Kind.PERSONA_ASSIGN: persona_op,
    Kind.PERSONA_UNASSIGN: persona_op, Kind.PERSONA_DOC: persona_op,
})
