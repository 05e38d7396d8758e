"""The rows the apply hooks write (brandmind/applying.py): a memory's HLC and its retire and
confirm merges, graph nodes, edges and mentions as ops add them, and the pending ops of a
forgotten user.  Small functions taking the ``SQLStore`` first."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore


# -- memories --------------------------------------------------------------------------------------
def memory_hlc(sql: "SQLStore", memory_id: str) -> tuple[bool, str | None]:
    """(whether the memory is here, the HLC key of its add)."""
    row = sql.conn.execute("SELECT hlc FROM memories WHERE id=?", (memory_id,)).fetchone()
    return (row is not None, row[0] if row is not None else None)


def set_memory_hlc(sql: "SQLStore", memory_id: str, hk: str) -> None:
    sql.conn.execute("UPDATE memories SET hlc=? WHERE id=?", (hk, memory_id))


def retire_state(sql: "SQLStore", memory_id: str) -> tuple | None:
    """(retired_at, valid_to, superseded_by, meta JSON) of a memory, None if absent."""
    return sql.conn.execute("SELECT retired_at, valid_to, superseded_by, meta FROM memories WHERE id=?",
                            (memory_id,)).fetchone()


def set_retire_state(sql: "SQLStore", memory_id: str, retired_at: int | None, valid_to: int | None,
                     superseded_by: str | None, meta: dict) -> None:
    sql.conn.execute("UPDATE memories SET retired_at=?, valid_to=?, superseded_by=?, meta=? WHERE id=?",
                     (retired_at, valid_to, superseded_by, json.dumps(meta, ensure_ascii=False, sort_keys=True),
                      memory_id))


def confirm_state(sql: "SQLStore", memory_id: str) -> dict | None:
    """``{confirmations, updated_at}`` of a memory, None if absent."""
    row = sql.conn.execute("SELECT confirmations, updated_at FROM memories WHERE id=?", (memory_id,)).fetchone()
    return {"confirmations": row[0], "updated_at": row[1]} if row is not None else None


def set_confirm_state(sql: "SQLStore", memory_id: str, *, confirmations: int, updated_at: int) -> None:
    sql.conn.execute("UPDATE memories SET confirmations=?, updated_at=? WHERE id=?",
                     (confirmations, updated_at, memory_id))


def drop_pending_of_user(sql: "SQLStore", user: str, hk: str) -> None:
    """Ops of ``user`` stamped before ``hk`` waiting for their target (``sync_pending``) go."""
    sql.conn.execute("DELETE FROM sync_pending WHERE user_id=? AND hlc < ?", (user, hk))


# -- graph -----------------------------------------------------------------------------------------
def user_node_ids(sql: "SQLStore", user: str, before: str) -> list[str]:
    """The user's nodes added before the HLC key ``before`` (or before HLCs were kept)."""
    return [r[0] for r in sql.conn.execute(
        "SELECT id FROM kg_nodes WHERE user_id=? AND (hlc IS NULL OR hlc < ?)", (user, before))]


def node_hlc(sql: "SQLStore", node_id: str) -> tuple[bool, str | None]:
    """(whether the node is here, the HLC key of its add)."""
    row = sql.conn.execute("SELECT hlc FROM kg_nodes WHERE id=?", (node_id,)).fetchone()
    return (row is not None, row[0] if row is not None else None)


def set_node_hlc(sql: "SQLStore", node_id: str, hk: str) -> None:
    sql.conn.execute("UPDATE kg_nodes SET hlc=? WHERE id=?", (hk, node_id))


def insert_node(sql: "SQLStore", p: dict, hk: str) -> None:
    sql.conn.execute("INSERT INTO kg_nodes(id, user_id, type, name, labels, meta, created_at, hlc) "
                     "VALUES(?,?,?,?,?,?,?,?)",
                     (p["id"], p["user"], p["type"], p["name"], json.dumps(p.get("labels", [])),
                      json.dumps(p.get("meta", {}), sort_keys=True), p["ts"], hk))


def insert_edge(sql: "SQLStore", p: dict, predicate: str, recorded_at: int) -> None:
    """Insert-once by id."""
    sql.conn.execute("INSERT OR IGNORE INTO kg_edges(id, src, dst, predicate, weight, evidence, meta, "
                     "created_at, valid_from, valid_to, recorded_at) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                     (p["id"], p["src"], p["dst"], predicate, float(p.get("weight", 1.0)),
                      json.dumps(p.get("evidence", [])), json.dumps(p.get("meta", {}), sort_keys=True),
                      p["ts"], p.get("valid_from"), p.get("valid_to"), recorded_at))


def edge_retire_state(sql: "SQLStore", edge_id: str) -> dict | None:
    """``{retired_at, valid_to}`` of an edge, None if absent."""
    row = sql.conn.execute("SELECT retired_at, valid_to FROM kg_edges WHERE id=?", (edge_id,)).fetchone()
    return {"retired_at": row[0], "valid_to": row[1]} if row is not None else None


def set_edge_retire_state(sql: "SQLStore", edge_id: str, *, retired_at: int | None, valid_to: int | None) -> None:
    sql.conn.execute("UPDATE kg_edges SET retired_at=?, valid_to=? WHERE id=?", (retired_at, valid_to, edge_id))


def insert_mention(sql: "SQLStore", node_id: str, memory_id: str) -> None:
    sql.conn.execute("INSERT OR IGNORE INTO kg_mentions VALUES(?,?)", (node_id, memory_id))
