"""The rows that make the SQLite projection order-independent (brandmind/converge.py decides,
with the pure rules of brandmind/merge.py; these functions only read and write):

- ``tombstones``: dead ids (remove wins) and users forgotten as of an HLC (``user:<name>``);
- ``sync_pending``: ops waiting for the memory or edge they are aimed at;
- ``sync_prov``: the first (HLC, position) of each provenance entry confirms and merges added;
- ``sync_persona_ops``: persona assign / unassign ops kept for a later ``user.forget``
  (brandmind/storage/personas.py reads and writes them);
- ``sync_heads`` / ``sync_held``: the per-replica apply order (brandmind/storage/syncstate.py).

Their schema (migration ``0009_sync`` of sqlstore) is :data:`SCHEMA`.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

SCHEMA = [
    # ops waiting for the memory (or edge) they are aimed at
    """CREATE TABLE sync_pending(target TEXT NOT NULL, op_id TEXT NOT NULL, part TEXT NOT NULL,
       hlc TEXT NOT NULL, user_id TEXT, payload TEXT NOT NULL, PRIMARY KEY(target, op_id, part))""",
    "CREATE INDEX sync_pending_user ON sync_pending(user_id, hlc)",
    # provenance entries added to a memory by confirms and merges: the first (hlc, pos) of each
    """CREATE TABLE sync_prov(memory_id TEXT NOT NULL, entry TEXT NOT NULL, hlc TEXT NOT NULL,
       pos INTEGER NOT NULL, PRIMARY KEY(memory_id, entry))""",
    # persona.assign / persona.unassign ops, replayed after a user.forget
    """CREATE TABLE sync_persona_ops(op_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, hlc TEXT NOT NULL,
       op TEXT NOT NULL)""",
    "CREATE INDEX sync_persona_ops_user ON sync_persona_ops(user_id, hlc)",
    # per replica: the highest seq applied to this projection (its ops apply in seq order)
    "CREATE TABLE sync_heads(replica TEXT PRIMARY KEY, seq INTEGER NOT NULL)",
    # ops that arrived before an earlier op of their replica: applied once the gap fills
    "CREATE TABLE sync_held(replica TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY(replica, seq))",
    # the smallest HLC of a row's add ops (NULL: added before this migration)
    "ALTER TABLE memories ADD COLUMN hlc TEXT",
    "ALTER TABLE kg_nodes ADD COLUMN hlc TEXT",
]

_TARGETS = {"memories": "SELECT 1 FROM memories WHERE id=?", "kg_edges": "SELECT 1 FROM kg_edges WHERE id=?"}


# -- tombstones ------------------------------------------------------------------------------------
def tombstone_hlc(sql: "SQLStore", key: str) -> str | None:
    """The HLC key kept for ``key`` (None: not dead)."""
    row = sql.conn.execute("SELECT hlc FROM tombstones WHERE id=?", (key,)).fetchone()
    return row[0] if row else None


def is_dead(sql: "SQLStore", key: str) -> bool:
    return sql.conn.execute("SELECT 1 FROM tombstones WHERE id=?", (key,)).fetchone() is not None


def put_tombstone(sql: "SQLStore", key: str, hk: str) -> None:
    sql.conn.execute("INSERT OR REPLACE INTO tombstones VALUES(?,?)", (key, hk))


# -- ops waiting for their target --------------------------------------------------------------------
def target_here(sql: "SQLStore", table: str, target: str) -> bool:
    """Whether the row ``target`` is in ``table`` (``memories`` or ``kg_edges``)."""
    return sql.conn.execute(_TARGETS[table], (target,)).fetchone() is not None


def any_pending(sql: "SQLStore") -> bool:
    return sql.conn.execute("SELECT 1 FROM sync_pending LIMIT 1").fetchone() is not None


def pend(sql: "SQLStore", target: str, op_id: str, part: str, hk: str, user: str | None, payload: dict) -> None:
    sql.conn.execute("INSERT OR IGNORE INTO sync_pending VALUES(?,?,?,?,?,?)",
                     (target, op_id, part, hk, user, json.dumps(payload, ensure_ascii=False, sort_keys=True)))


def take_pending(sql: "SQLStore", target: str) -> list[tuple[str, dict, str]]:
    """``(part, payload, hk)`` of the ops waiting for ``target``, in (HLC, op id, part)
    order; they stop waiting."""
    rows = sql.conn.execute("SELECT part, payload, hlc FROM sync_pending WHERE target=? "
                            "ORDER BY hlc, op_id, part", (target,)).fetchall()
    if rows:
        drop_pending(sql, target)
    return [(part, json.loads(payload), hk) for part, payload, hk in rows]


def drop_pending(sql: "SQLStore", target: str) -> None:
    sql.conn.execute("DELETE FROM sync_pending WHERE target=?", (target,))


# -- provenance ----------------------------------------------------------------------------------------
def provenance(sql: "SQLStore", memory_id: str) -> list | None:
    """The memory's provenance list (None: no such memory)."""
    row = sql.conn.execute("SELECT provenance FROM memories WHERE id=?", (memory_id,)).fetchone()
    return json.loads(row[0]) if row is not None else None


def set_provenance(sql: "SQLStore", memory_id: str, column: list) -> None:
    sql.conn.execute("UPDATE memories SET provenance=? WHERE id=?",
                     (json.dumps(column, ensure_ascii=False), memory_id))


def added_provenance(sql: "SQLStore", memory_id: str) -> dict[str, tuple[str, int]]:
    """canon entry -> (HLC key, position) of the op that first added it (``sync_prov``)."""
    return {entry: (hk, pos) for entry, hk, pos in sql.conn.execute(
        "SELECT entry, hlc, pos FROM sync_prov WHERE memory_id=?", (memory_id,))}


def put_added_provenance(sql: "SQLStore", memory_id: str, entries: dict[str, tuple[str, int]]) -> None:
    sql.conn.executemany("INSERT OR REPLACE INTO sync_prov VALUES(?,?,?,?)",
                         [(memory_id, key, hk, pos) for key, (hk, pos) in entries.items()])


def drop_added_provenance(sql: "SQLStore", memory_id: str) -> None:
    sql.conn.execute("DELETE FROM sync_prov WHERE memory_id=?", (memory_id,))


# -- graph nodes ------------------------------------------------------------------------------------------
def delete_node(sql: "SQLStore", node_id: str) -> None:
    """A node, its edges and its mentions."""
    c = sql.conn
    c.execute("DELETE FROM kg_edges WHERE src=? OR dst=?", (node_id, node_id))
    c.execute("DELETE FROM kg_mentions WHERE node_id=?", (node_id,))
    c.execute("DELETE FROM kg_nodes WHERE id=?", (node_id,))


# -- memories ---------------------------------------------------------------------------------------------
def memory_op_id(sql: "SQLStore", memory_id: str) -> str | None:
    """The id of the op that added a memory here (None: not here)."""
    row = sql.conn.execute("SELECT op_id FROM memories WHERE id=?", (memory_id,)).fetchone()
    return row[0] if row is not None else None
