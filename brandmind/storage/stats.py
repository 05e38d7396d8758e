"""Counts and whole-index reads for ``bm stats``, ``bm doctor``, ``bm reindex`` (brandmind/admin.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

TABLES = ("memories", "kg_nodes", "kg_edges", "quarantine")


def count(sql: "SQLStore", table: str) -> int:
    if table not in TABLES:
        raise ValueError(f"not a counted table: {table}")
    return sql.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def memories_by_type(sql: "SQLStore", user: str | None) -> dict[str, int]:
    where, args = ("WHERE user_id=?", (user,)) if user else ("", ())
    return dict(sql.conn.execute(f"SELECT type, count(*) FROM memories {where} GROUP BY type", args).fetchall())


def has_memories(sql: "SQLStore", user: str) -> bool:
    return sql.conn.execute("SELECT 1 FROM memories WHERE user_id = ? LIMIT 1", (user,)).fetchone() is not None


def memories_by_user(sql: "SQLStore") -> dict[str, int]:
    return dict(sql.conn.execute("SELECT user_id, count(*) FROM memories GROUP BY user_id").fetchall())


def graph_counts(sql: "SQLStore", user: str | None) -> tuple[int, int]:
    """(nodes, edges) of ``user`` (an edge counts for the user of its source), or of everyone."""
    c = sql.conn
    if not user:
        return count(sql, "kg_nodes"), count(sql, "kg_edges")
    nodes = c.execute("SELECT count(*) FROM kg_nodes WHERE user_id=?", (user,)).fetchone()[0]
    edges = c.execute("SELECT count(*) FROM kg_edges e JOIN kg_nodes n ON n.id = e.src WHERE n.user_id=?",
                      (user,)).fetchone()[0]
    return nodes, edges


def memory_texts(sql: "SQLStore") -> list[dict]:
    """Every memory's rowid, text and vector keys, in rowid order (what a re-embedding needs)."""
    return list(sql.rows("SELECT rowid, text, user_id, agent_id, type, created_at FROM memories ORDER BY rowid"))


def vec_version(sql: "SQLStore") -> str:
    return sql.conn.execute("SELECT vec_version()").fetchone()[0]

