"""The skill tables: the add ops that may still become visible, the latest remove of each
name, and the visible skills (brandmind/skillrules.py applies the ops, brandmind/skills.py
reads through here)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

SCHEMA = [
    # the add ops that may still become visible (see brandmind/merge.py), per name
    """CREATE TABLE skill_adds(name TEXT NOT NULL, hlc TEXT NOT NULL, payload TEXT NOT NULL,
       op_id TEXT NOT NULL, PRIMARY KEY(name, hlc))""",
    # the latest remove of each name (HLC key)
    "CREATE TABLE skill_removes(name TEXT PRIMARY KEY, hlc TEXT NOT NULL)",
    # the visible skills
    """CREATE TABLE skills(rowid INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
       description TEXT NOT NULL, input_schema TEXT, examples TEXT NOT NULL, tags TEXT NOT NULL,
       version TEXT NOT NULL, body TEXT NOT NULL, source TEXT, meta TEXT NOT NULL,
       content_hash TEXT NOT NULL, updated_at INTEGER NOT NULL, hlc TEXT NOT NULL)""",
]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# -- removes and adds ------------------------------------------------------------------------------
def removed_at(sql: "SQLStore", name: str) -> str | None:
    """HLC key of the latest remove of ``name`` (None: never removed)."""
    row = sql.conn.execute("SELECT hlc FROM skill_removes WHERE name=?", (name,)).fetchone()
    return row[0] if row else None


def set_removed(sql: "SQLStore", name: str, hlc: str) -> None:
    """``name``'s latest remove is at ``hlc``; the adds stamped before it go."""
    sql.conn.execute("INSERT OR REPLACE INTO skill_removes VALUES(?,?)", (name, hlc))
    sql.conn.execute("DELETE FROM skill_adds WHERE name=? AND hlc < ?", (name, hlc))


def adds(sql: "SQLStore", name: str) -> list[tuple[str, dict]]:
    """The kept add ops of ``name``: ``(hlc, payload)``."""
    return [(r[0], json.loads(r[1]))
            for r in sql.conn.execute("SELECT hlc, payload FROM skill_adds WHERE name=?", (name,))]


def drop_add(sql: "SQLStore", name: str, hlc: str) -> None:
    sql.conn.execute("DELETE FROM skill_adds WHERE name=? AND hlc=?", (name, hlc))


def put_add(sql: "SQLStore", name: str, hlc: str, payload: dict, op_id: str) -> None:
    sql.conn.execute("INSERT INTO skill_adds VALUES(?,?,?,?)", (name, hlc, _dumps(payload), op_id))


# -- visible skills -----------------------------------------------------------------------------
def visible_stamp(sql: "SQLStore", name: str) -> tuple[int, str] | None:
    """``(rowid, hlc)`` of the visible skill ``name``, or None."""
    row = sql.conn.execute("SELECT rowid, hlc FROM skills WHERE name=?", (name,)).fetchone()
    return (row[0], row[1]) if row is not None else None


def drop_visible(sql: "SQLStore", rowid: int) -> None:
    sql.conn.execute("DELETE FROM skills WHERE rowid=?", (rowid,))


def put_visible(sql: "SQLStore", p: dict, *, content_hash: str, hlc: str) -> None:
    """Store add payload ``p`` as the visible skill of its name (JSON fields as text)."""
    schema = _dumps(p["input_schema"]) if p.get("input_schema") is not None else None
    sql.conn.execute(
        "INSERT INTO skills(name, description, input_schema, examples, tags, version, body, source, "
        "meta, content_hash, updated_at, hlc) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
        (p["name"], p["description"], schema, _dumps(p.get("examples", [])), _dumps(p.get("tags", [])),
         p["version"], p.get("body", ""), p.get("source"), _dumps(p.get("meta", {})), content_hash,
         int(p["ts"]), hlc))


def row(sql: "SQLStore", name: str) -> dict | None:
    """The visible skill ``name`` (JSON fields as text), or None."""
    rows = list(sql.rows("SELECT * FROM skills WHERE name=?", (name,)))
    return rows[0] if rows else None


def rows(sql: "SQLStore") -> list[dict]:
    """Every visible skill, by name."""
    return list(sql.rows("SELECT * FROM skills ORDER BY name"))


def tokenizer(sql: "SQLStore") -> Any:
    """SQLite's FTS5 porter tokenizer (what recall's keyword index stems with)."""
    return sql.conn.fts5_tokenizer("porter", ["unicode61"])
