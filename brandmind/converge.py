"""Order independence of the SQLite projection (called from brandmind/projection.py).

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
  (assignments made after the forget survive whatever the arrival order).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .sqlstore import SQLStore

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


# -- dead ids --------------------------------------------------------------------------------
def tombstone(sql: "SQLStore", key: str, hk: str) -> None:
    """Record ``key`` as removed at HLC key ``hk`` (the greatest one stays: commutes)."""
    sql.conn.execute("INSERT INTO tombstones VALUES(?,?) ON CONFLICT(id) DO UPDATE SET "
                     "hlc = max(hlc, excluded.hlc)", (key, hk))


def dead(sql: "SQLStore", key: str) -> bool:
    return sql.conn.execute("SELECT 1 FROM tombstones WHERE id=?", (key,)).fetchone() is not None


def forgotten_at(sql: "SQLStore", user: str | None) -> str | None:
    """HLC key of the user's latest ``user.forget`` (None: never forgotten)."""
    if not user:
        return None
    row = sql.conn.execute("SELECT hlc FROM tombstones WHERE id=?", ("user:" + user,)).fetchone()
    return row[0] if row else None


def kill_memory(sql: "SQLStore", memory_id: str, hk: str = "") -> None:
    """Remove wins: the memory, its mentions, links and sole-evidence edges, its waiting ops."""
    sql.delete_memory(memory_id)
    tombstone(sql, memory_id, hk)
    c = sql.conn
    c.execute("DELETE FROM sync_pending WHERE target=?", (memory_id,))
    c.execute("DELETE FROM sync_prov WHERE memory_id=?", (memory_id,))


def kill_node(sql: "SQLStore", node_id: str) -> None:
    c = sql.conn
    c.execute("DELETE FROM kg_edges WHERE src=? OR dst=?", (node_id, node_id))
    c.execute("DELETE FROM kg_mentions WHERE node_id=?", (node_id,))
    c.execute("DELETE FROM kg_nodes WHERE id=?", (node_id,))
    tombstone(sql, node_id, "")


def edge_is_dead(sql: "SQLStore", p: dict) -> bool:
    """An edge touching a dead memory or node, or whose only evidence is a dead memory."""
    ends = [p["src"], p["dst"]]
    evidence = p.get("evidence") or []
    if len(evidence) == 1 and isinstance(evidence[0], str):
        ends.append(evidence[0])
    return any(dead(sql, end) for end in ends)


# -- waiting ops -------------------------------------------------------------------------------
def aim(sql: "SQLStore", op: dict, target: str, part: str, payload: dict, apply: Any, *,
        table: str = "memories") -> None:
    """Apply ``payload`` (one ``part`` of ``op``) to ``target`` now if it is there, drop it if
    the target is dead, else keep it waiting until the target arrives."""
    from .projection import hlc_key

    c = sql.conn
    if c.execute(f"SELECT 1 FROM {table} WHERE id=?", (target,)).fetchone():
        apply(sql, part, payload, hlc_key(op["hlc"]))
        return
    if dead(sql, target):
        return
    sql.no_pending = False
    c.execute("INSERT OR IGNORE INTO sync_pending VALUES(?,?,?,?,?,?)",
              (target, op["id"], part, hlc_key(op["hlc"]), op["payload"].get("user"),
               json.dumps(payload, ensure_ascii=False, sort_keys=True)))


def replay(sql: "SQLStore", target: str, apply: Any) -> None:
    """The target arrived: apply what waited for it."""
    if sql.no_pending:
        return  # catch_up saw the table empty in this write transaction, and nothing was aimed since
    c = sql.conn
    rows = c.execute("SELECT part, payload, hlc FROM sync_pending WHERE target=? ORDER BY hlc, op_id, part",
                     (target,)).fetchall()
    if not rows:
        return
    c.execute("DELETE FROM sync_pending WHERE target=?", (target,))
    for part, payload, hk in rows:
        apply(sql, part, json.loads(payload), hk)


# -- provenance ----------------------------------------------------------------------------------
def _canon(entry: Any) -> str:
    return json.dumps(entry, ensure_ascii=False, sort_keys=True)


def add_provenance(sql: "SQLStore", memory_id: str, entries: list, hk: str) -> None:
    """Union ``entries`` into the memory's provenance; added entries are ordered by the
    (HLC, position) of the first op that brought them, whatever the arrival order."""
    if not entries:
        return
    c = sql.conn
    row = c.execute("SELECT provenance FROM memories WHERE id=?", (memory_id,)).fetchone()
    if row is None:
        return
    column = json.loads(row[0])
    extras = {entry: (h, pos) for entry, h, pos in
              c.execute("SELECT entry, hlc, pos FROM sync_prov WHERE memory_id=?", (memory_id,))}
    base = [e for e in column if _canon(e) not in extras]
    in_base = {_canon(e) for e in base}
    changed = False
    for pos, entry in enumerate(entries):
        key = _canon(entry)
        if key in in_base:
            continue
        if key not in extras or (hk, pos) < extras[key]:
            extras[key] = (hk, pos)
            c.execute("INSERT OR REPLACE INTO sync_prov VALUES(?,?,?,?)", (memory_id, key, hk, pos))
            changed = True
    if changed:
        column = base + [json.loads(k) for k in sorted(extras, key=lambda k: (extras[k], k))]
        c.execute("UPDATE memories SET provenance=? WHERE id=?",
                  (json.dumps(column, ensure_ascii=False), memory_id))


# -- persona assignments ---------------------------------------------------------------------------
def note_persona_op(sql: "SQLStore", op: dict) -> None:
    """Keep an applied persona.assign / persona.unassign op for a later user.forget."""
    from .projection import hlc_key

    sql.conn.execute("INSERT OR IGNORE INTO sync_persona_ops VALUES(?,?,?,?)",
                     (op["id"], op["payload"]["user"], hlc_key(op["hlc"]),
                      json.dumps(op, ensure_ascii=False, sort_keys=True)))


def forget_persona_user(sql: "SQLStore", user: str, hk: str) -> None:
    """``user.forget`` at ``hk``: the user's assignments are folded again from their ops
    stamped after it (usually none)."""
    from . import personas

    c = sql.conn
    c.execute("DELETE FROM sync_persona_ops WHERE user_id=? AND hlc < ?", (user, hk))
    personas.forget_user_sql(sql, user)
    rest = [json.loads(r[0]) for r in c.execute(
        "SELECT op FROM sync_persona_ops WHERE user_id=? ORDER BY hlc, op_id", (user,))]
    for op in rest:
        personas.apply_op(sql, op)
