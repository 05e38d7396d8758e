"""How each op kind lands in the projections.  Replaying the log through these
functions in arrival order rebuilds a store exactly (``bm rebuild``).

Op kinds and their payloads:

``bead.add``      {bead}: one bead (see beads.py); LMDB side only
``memory.add``    {id, text, type, user, agent, importance, ts, valid_from, valid_to,
                   source, provenance, meta}; ignored when the id is tombstoned,
                   or when its user was forgotten at a later HLC
``memory.forget`` {id}: remove wins; the id is tombstoned, so a late add cannot resurrect it
``user.forget``   {user}: every memory, bead and graph node of the user goes
``kg.node``       {id, user, type, name, labels, meta, ts}
``kg.edge``       {id, src, dst, predicate, weight, evidence, meta, ts}
``kg.mention``    {node, memory}: a node is mentioned by (linked to) a memory

``memory.add`` payloads of forgotten memories are redacted in the log to
``{"id": ..., "redacted": true}``, which applies as nothing; so are the
``memory.add``, ``bead.add`` and ``kg.node`` payloads of a forgotten user
(those stamped before the ``user.forget``).
"""
from __future__ import annotations

import json
from typing import Callable

from .oplog import LogTxn
from .sqlstore import SQLStore

VectorFor = Callable[[str], bytes]


def hlc_key(hlc: list) -> str:
    """A string that sorts like the HLC tuple (wall ms, counter, replica)."""
    return f"{int(hlc[0]):015d}.{int(hlc[1]):08d}.{hlc[2]}"


def apply_log_side(txn: LogTxn, op: dict) -> None:
    """The LMDB projections of one op (beads and their dedup keys)."""
    kind, p = op["kind"], op["payload"]
    if p.get("redacted"):
        return
    if kind == "bead.add":
        bead = p["bead"]
        txn.put_bead(bead)
        if bead.get("key"):
            txn.set_bead_key(bead["key"], bead["id"])
    elif kind == "user.forget":
        for bead_id in txn.user_bead_ids(p["user"]):
            bead = txn.get_bead(bead_id)
            if bead:
                txn.delete_bead(bead)


def apply_sql_side(sql: SQLStore, op: dict, vector_for: VectorFor) -> None:
    """The SQLite projections of one op; the caller holds the write transaction."""
    kind, p = op["kind"], op["payload"]
    if p.get("redacted"):
        return
    c = sql.conn
    if kind == "memory.add":
        if p.get("redacted") or _tombstoned(sql, p["id"], p["user"], op["hlc"]):
            return
        if c.execute("SELECT 1 FROM memories WHERE id=?", (p["id"],)).fetchone():
            return  # applying twice is a no-op
        sql.insert_memory({**p, "op_id": op["id"]}, vector_for(p["text"]))
    elif kind == "memory.forget":
        sql.delete_memory(p["id"])
        c.execute("INSERT OR REPLACE INTO tombstones VALUES(?,?)", (p["id"], hlc_key(op["hlc"])))
    elif kind == "user.forget":
        user = p["user"]
        for memory_id in sql.memory_ids("user_id=?", (user,)):
            sql.delete_memory(memory_id)
        nodes = [r[0] for r in c.execute("SELECT id FROM kg_nodes WHERE user_id=?", (user,))]
        for node in nodes:
            _delete_node(sql, node)
        c.execute("INSERT OR REPLACE INTO tombstones VALUES(?,?)", ("user:" + user, hlc_key(op["hlc"])))
    elif kind == "kg.node":
        c.execute("INSERT OR IGNORE INTO kg_nodes VALUES(?,?,?,?,?,?,?)",
                  (p["id"], p["user"], p["type"], p["name"], json.dumps(p.get("labels", [])),
                   json.dumps(p.get("meta", {}), sort_keys=True), p["ts"]))
    elif kind == "kg.edge":
        c.execute("INSERT OR IGNORE INTO kg_edges VALUES(?,?,?,?,?,?,?,?)",
                  (p["id"], p["src"], p["dst"], p["predicate"], float(p.get("weight", 1.0)),
                   json.dumps(p.get("evidence", [])), json.dumps(p.get("meta", {}), sort_keys=True),
                   p["ts"]))
    elif kind == "kg.mention":
        c.execute("INSERT OR IGNORE INTO kg_mentions VALUES(?,?)", (p["node"], p["memory"]))


def _tombstoned(sql: SQLStore, memory_id: str, user: str, hlc: list) -> bool:
    rows = dict(sql.conn.execute("SELECT id, hlc FROM tombstones WHERE id IN (?, ?)",
                                 (memory_id, "user:" + user)).fetchall())
    if memory_id in rows:
        return True
    forgotten_at = rows.get("user:" + user)
    return forgotten_at is not None and hlc_key(hlc) < forgotten_at


def _delete_node(sql: SQLStore, node_id: str) -> None:
    c = sql.conn
    c.execute("DELETE FROM kg_edges WHERE src=? OR dst=?", (node_id, node_id))
    c.execute("DELETE FROM kg_mentions WHERE node_id=?", (node_id,))
    c.execute("DELETE FROM kg_nodes WHERE id=?", (node_id,))
