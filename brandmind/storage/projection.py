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


def add_confirmations(sql: "SQLStore", memory_id: str, count: int, ts: int) -> None:
    sql.conn.execute("UPDATE memories SET confirmations = confirmations + ?, updated_at = max(updated_at, ?) "
                     "WHERE id=?", (count, ts, memory_id))


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


def retire_edge(sql: "SQLStore", edge_id: str, retired_at: int, valid_to: int | None) -> None:
    """retired_at = min, valid_to = min when given."""
    sql.conn.execute("UPDATE kg_edges SET retired_at = min(coalesce(retired_at, :r), :r), "
                     "valid_to = CASE WHEN :v IS NULL THEN valid_to ELSE min(coalesce(valid_to, :v), :v) END "
                     "WHERE id = :id", {"r": retired_at, "v": valid_to, "id": edge_id})


def insert_mention(sql: "SQLStore", node_id: str, memory_id: str) -> None:
    sql.conn.execute("INSERT OR IGNORE INTO kg_mentions VALUES(?,?)", (node_id, memory_id))
