"""Order independence of the SQLite projection (called from the apply hooks, brandmind/applying.py).

Sync delivers ops of different replicas in any interleaving (each replica's own ops in
their sequence order: ``replication.catch_up`` holds back an op until its predecessor is
applied).  Applying any such arrival order must give the same projection.  The pieces
that make the op kinds commute live here:

* **Waiting ops** (``sync_pending``): ``memory.retire`` / ``memory.confirm`` /
  ``memory.merge`` aimed at a memory, and ``kg.edge.retire`` aimed at an edge, that has
  not arrived yet wait here and are replayed (in (HLC, op id) order; their rules commute
  anyway) when the ``memory.add`` / ``kg.edge`` arrives.  Aimed at something dead: dropped.
* **Dead ids** (``tombstones``, remove wins): a memory is dead once a ``memory.forget``
  of it, or one of its ``memory.add`` ops stamped before its user's latest
  ``user.forget``, or a redacted ``memory.add`` (redacted = forgotten) has arrived;
  likewise a graph node (``kg.node`` stamped before its user's forget, or redacted).
  Killing an id removes its row, its mentions and the edges that touch it or whose only
  evidence it is, and its waiting ops; edges and mentions arriving later for a dead id are
  skipped.  Every condition is monotone in the set of ops, so the order does not matter.
  A row remembers the smallest HLC of its adds (``memories.hlc``, ``kg_nodes.hlc``), so a
  ``user.forget`` at H kills exactly the rows with an add stamped before H.
* **Provenance** added by confirms and merges (``sync_prov``): the memory's own entries
  first, then every added entry once, ordered by the (HLC, position) of the first op that
  brought it, instead of arrival order.  One replica appends in HLC order, so a store
  that never syncs sees the same lists as before.
* **Persona assignments** (``sync_persona_ops``): each assign / unassign op is kept, so a
  ``user.forget`` at H drops exactly the ops stamped before H and folds the rest again
  (assignments made after the forget survive whatever the arrival order):
  brandmind/personarules.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import merge
from .storage import converge as rows

if TYPE_CHECKING:  # pragma: no cover
    from .sqlstore import SQLStore


# -- dead ids --------------------------------------------------------------------------------
def tombstone(sql: "SQLStore", key: str, hk: str) -> None:
    """Record ``key`` as removed at HLC key ``hk`` (the greatest one stays: commutes)."""
    old = rows.tombstone_hlc(sql, key)
    new = merge.latest(old, hk)
    if new != old:
        rows.put_tombstone(sql, key, new)


def dead(sql: "SQLStore", key: str) -> bool:
    return rows.is_dead(sql, key)


def forgotten_at(sql: "SQLStore", user: str | None) -> str | None:
    """HLC key of the user's latest ``user.forget`` (None: never forgotten)."""
    if not user:
        return None
    return rows.tombstone_hlc(sql, "user:" + user)


def kill_memory(sql: "SQLStore", memory_id: str, hk: str = "") -> None:
    """Remove wins: the memory, its mentions, links and sole-evidence edges, its waiting ops."""
    sql.delete_memory(memory_id)
    tombstone(sql, memory_id, hk)
    rows.drop_pending(sql, memory_id)
    rows.drop_added_provenance(sql, memory_id)


def kill_node(sql: "SQLStore", node_id: str) -> None:
    rows.delete_node(sql, node_id)
    tombstone(sql, node_id, "")


def edge_is_dead(sql: "SQLStore", p: dict) -> bool:
    """An edge touching a dead memory or node, or whose only evidence is a dead memory."""
    return any(dead(sql, end) for end in merge.edge_ends(p))


# -- waiting ops -------------------------------------------------------------------------------
def aim(sql: "SQLStore", op: dict, target: str, part: str, payload: dict, apply: Any, *,
        table: str = "memories", hk: str | None = None) -> None:
    """Apply ``payload`` (one ``part`` of ``op``) to ``target`` now if it is there, drop it if
    the target is dead, else keep it waiting until the target arrives.  ``hk``: the op's
    HLC key, when the caller has it."""
    hk = hk or merge.hlc_key(op["hlc"])
    if rows.target_here(sql, table, target):
        apply(sql, part, payload, hk)
        return
    if dead(sql, target):
        return
    sql.no_pending = False
    rows.pend(sql, target, op["id"], part, hk, op["payload"].get("user"), payload)


def replay(sql: "SQLStore", target: str, apply: Any) -> None:
    """The target arrived: apply what waited for it."""
    if sql.no_pending:
        return  # catch_up saw the table empty in this write transaction, and nothing was aimed since
    for part, payload, hk in rows.take_pending(sql, target):
        apply(sql, part, payload, hk)


def nothing_waits(sql: "SQLStore") -> bool:
    """Whether no op waits for its target (``replay`` may then skip its lookup)."""
    return not rows.any_pending(sql)


# -- provenance ----------------------------------------------------------------------------------
def add_provenance(sql: "SQLStore", memory_id: str, entries: list, hk: str) -> None:
    """Union ``entries`` into the memory's provenance; added entries are ordered by the
    (HLC, position) of the first op that brought them, whatever the arrival order
    (``merge.merge_provenance``)."""
    if not entries:
        return
    column = rows.provenance(sql, memory_id)
    if column is None:
        return
    column, changed = merge.merge_provenance(column, rows.added_provenance(sql, memory_id), entries, hk)
    if changed:
        rows.put_added_provenance(sql, memory_id, changed)
        rows.set_provenance(sql, memory_id, column)
