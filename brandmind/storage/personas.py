"""The persona tables: definitions, who holds which persona, the agents' persona documents,
and the persona ops kept for a later ``user.forget`` (brandmind/personarules.py applies the
ops, brandmind/personas.py reads through here).

A user holds a persona iff their row's ``assign_hlc`` is above its ``unassign_hlc``
(:data:`HELD`, the SQL twin of ``merge.persona_held``)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

SCHEMA = [
    """CREATE TABLE personas(
        handle TEXT PRIMARY KEY, industry TEXT NOT NULL, role TEXT NOT NULL,
        description TEXT NOT NULL, typical_kpis TEXT NOT NULL, typical_motivations TEXT NOT NULL,
        quintessential_queries TEXT NOT NULL, keywords TEXT NOT NULL, source TEXT NOT NULL,
        created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, hlc TEXT NOT NULL)""",
    # one row per (user, persona) ever assigned or unassigned; held iff assign_hlc > unassign_hlc
    """CREATE TABLE persona_users(
        user_id TEXT NOT NULL, handle TEXT NOT NULL, confidence REAL, discovered_at INTEGER,
        last_confirmed INTEGER, assign_hlc TEXT, unassign_hlc TEXT, PRIMARY KEY(user_id, handle))""",
    "CREATE INDEX persona_users_handle ON persona_users(handle)",
    """CREATE TABLE persona_docs(
        agent TEXT PRIMARY KEY, doc TEXT NOT NULL, version INTEGER NOT NULL, updated_at INTEGER NOT NULL,
        hlc TEXT NOT NULL)""",
]

HELD = "assign_hlc IS NOT NULL AND (unassign_hlc IS NULL OR assign_hlc > unassign_hlc)"
ASSIGNMENT = ("confidence", "discovered_at", "last_confirmed", "assign_hlc", "unassign_hlc")


# -- definitions ------------------------------------------------------------------------------
def definition(sql: "SQLStore", handle: str) -> dict | None:
    """The stored definition row of ``handle`` (list fields as JSON text), or None."""
    rows = list(sql.rows("SELECT * FROM personas WHERE handle=?", (handle,)))
    return rows[0] if rows else None


def definitions(sql: "SQLStore") -> list[dict]:
    """Every stored definition row, by handle."""
    return list(sql.rows("SELECT * FROM personas ORDER BY handle"))


def handles(sql: "SQLStore") -> set[str]:
    """The handles of the stored definitions."""
    return {r[0] for r in sql.conn.execute("SELECT handle FROM personas")}


def stamp(sql: "SQLStore", handle: str) -> tuple[str, int] | None:
    """``(hlc, created_at)`` of the stored definition of ``handle``, or None."""
    row = sql.conn.execute("SELECT hlc, created_at FROM personas WHERE handle=?", (handle,)).fetchone()
    return (row[0], row[1]) if row is not None else None


def set_created_at(sql: "SQLStore", handle: str, created_at: int) -> None:
    sql.conn.execute("UPDATE personas SET created_at=? WHERE handle=?", (created_at, handle))


def put_definition(sql: "SQLStore", p: dict, list_fields: tuple[str, ...], *, source: str,
                   created_at: int, updated_at: int, hlc: str) -> None:
    """Store (or replace) the definition ``p`` (its list fields as JSON)."""
    values = (p["handle"], p["industry"], p["role"], p["description"],
              *(json.dumps(p.get(k) or [], ensure_ascii=False) for k in list_fields),
              source, created_at, updated_at, hlc)
    sql.conn.execute("INSERT OR REPLACE INTO personas VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", values)


# -- assignments ------------------------------------------------------------------------------
def assignment(sql: "SQLStore", user: str, handle: str) -> dict | None:
    """The (user, persona) row: confidence, discovered_at, last_confirmed, assign_hlc,
    unassign_hlc; None if never assigned nor unassigned."""
    row = sql.conn.execute(f"SELECT {', '.join(ASSIGNMENT)} FROM persona_users WHERE user_id=? AND handle=?",
                           (user, handle)).fetchone()
    return dict(zip(ASSIGNMENT, row)) if row is not None else None


def put_assignment(sql: "SQLStore", user: str, handle: str, row: dict) -> None:
    sql.conn.execute(f"INSERT OR REPLACE INTO persona_users(user_id, handle, {', '.join(ASSIGNMENT)}) "
                     "VALUES(?,?,?,?,?,?,?)", (user, handle, *(row[k] for k in ASSIGNMENT)))


def delete_user(sql: "SQLStore", user: str) -> None:
    """Every assignment row of ``user`` goes."""
    sql.conn.execute("DELETE FROM persona_users WHERE user_id=?", (user,))


def held_counts(sql: "SQLStore") -> dict[str, int]:
    """handle -> how many users hold it."""
    return dict(sql.conn.execute(f"SELECT handle, count(*) FROM persona_users WHERE {HELD} GROUP BY handle"))


def held_count(sql: "SQLStore", handle: str) -> int:
    return sql.conn.execute(f"SELECT count(*) FROM persona_users WHERE handle=? AND {HELD}",
                            (handle,)).fetchone()[0]


def held_by(sql: "SQLStore", user: str) -> list[dict]:
    """The rows of the personas ``user`` holds, highest confidence first, then by handle."""
    return list(sql.rows(f"SELECT * FROM persona_users WHERE user_id=? AND {HELD} "
                         "ORDER BY confidence DESC, handle", (user,)))


def held_handles(sql: "SQLStore", user: str) -> list[str]:
    """The handles ``user`` holds, in :func:`held_by` order (blocks attaches their shared blocks)."""
    return [r["handle"] for r in held_by(sql, user)]


def holders(sql: "SQLStore", handle: str) -> list[str]:
    """The users holding ``handle``, by name."""
    return [r[0] for r in sql.conn.execute(
        f"SELECT user_id FROM persona_users WHERE handle=? AND {HELD} ORDER BY user_id", (handle,))]


def holds(sql: "SQLStore", user: str, handle: str) -> bool:
    return sql.conn.execute(f"SELECT 1 FROM persona_users WHERE user_id=? AND handle=? AND {HELD}",
                            (user, handle)).fetchone() is not None


def all_held(sql: "SQLStore") -> Iterator[dict]:
    """Every held assignment row, by user then handle."""
    return iter(sql.rows(f"SELECT * FROM persona_users WHERE {HELD} ORDER BY user_id, handle"))


# -- persona documents ---------------------------------------------------------------------------
def doc_stamp(sql: "SQLStore", agent: str) -> tuple[int, str] | None:
    """``(version, hlc)`` of the agent's stored document, or None."""
    row = sql.conn.execute("SELECT version, hlc FROM persona_docs WHERE agent=?", (agent,)).fetchone()
    return (row[0], row[1]) if row is not None else None


def doc(sql: "SQLStore", agent: str) -> tuple[dict, int, int] | None:
    """``(document, version, updated_at)`` of the agent, or None."""
    row = sql.conn.execute("SELECT doc, version, updated_at FROM persona_docs WHERE agent=?", (agent,)).fetchone()
    return (json.loads(row[0]), row[1], row[2]) if row is not None else None


def put_doc(sql: "SQLStore", agent: str, doc: dict, *, updated_at: int, hlc: str) -> None:
    sql.conn.execute("INSERT OR REPLACE INTO persona_docs VALUES(?,?,?,?,?)",
                     (agent, json.dumps(doc, ensure_ascii=False, sort_keys=True), int(doc["version"]),
                      updated_at, hlc))


def doc_agents(sql: "SQLStore") -> list[str]:
    return [r[0] for r in sql.conn.execute("SELECT agent FROM persona_docs ORDER BY agent")]


# -- ops kept for user.forget (sync_persona_ops; its schema is in storage/converge.py) -------------
def keep_op(sql: "SQLStore", op: dict, hlc: str) -> None:
    """Keep an applied persona.assign / persona.unassign op."""
    sql.conn.execute("INSERT OR IGNORE INTO sync_persona_ops VALUES(?,?,?,?)",
                     (op["id"], op["payload"]["user"], hlc, json.dumps(op, ensure_ascii=False, sort_keys=True)))


def drop_ops_before(sql: "SQLStore", user: str, hlc: str) -> None:
    sql.conn.execute("DELETE FROM sync_persona_ops WHERE user_id=? AND hlc < ?", (user, hlc))


def kept_ops(sql: "SQLStore", user: str) -> list[dict]:
    """The kept ops of ``user`` in (HLC, op id) order."""
    return [json.loads(r[0]) for r in sql.conn.execute(
        "SELECT op FROM sync_persona_ops WHERE user_id=? ORDER BY hlc, op_id", (user,))]

