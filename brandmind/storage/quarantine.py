"""The ``quarantine`` table (migration 0012): ops of the log that are not applied, refused
when pulled or failing their check or their apply (brandmind/opcheck.py); ``bm doctor``
lists them."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

SCHEMA = ("CREATE TABLE quarantine(op_id TEXT PRIMARY KEY, kind TEXT, hlc TEXT, error TEXT NOT NULL)",)


def put(sql: "SQLStore", op_id: str, kind: str, hlc: str | None, error: str) -> None:
    sql.conn.execute("INSERT OR REPLACE INTO quarantine VALUES(?,?,?,?)", (op_id, kind, hlc, error))


def rows(sql: "SQLStore") -> list[dict]:
    """Oldest HLC first: {op_id, kind, hlc, error}."""
    return list(sql.rows("SELECT op_id, kind, hlc, error FROM quarantine ORDER BY hlc, op_id"))
