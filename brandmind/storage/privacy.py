"""What a user keeps private, read for the PII guard of shared blocks (brandmind/privacy.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore


def private_blocks(sql: "SQLStore", user: str) -> list[tuple[str, str, str]]:
    """``(scope, label, value)`` of the user's non-empty blocks in the user and agent scopes
    (never a shared persona block), oldest first."""
    return [tuple(r) for r in sql.conn.execute(
        "SELECT scope, label, value FROM blocks WHERE user_id = ? AND scope IN ('user', 'agent') "
        "AND value != '' ORDER BY id", (user,))]


def newest_memories(sql: "SQLStore", user: str, limit: int) -> list[tuple[str, str | None]]:
    """``(text, subject)`` of the user's newest ``limit`` memories."""
    return [tuple(r) for r in sql.conn.execute(
        "SELECT text, subject FROM memories WHERE user_id = ? ORDER BY created_at DESC LIMIT ?", (user, limit))]


def node_names(sql: "SQLStore", user: str) -> list[tuple[str, str]]:
    """``(name, type)`` of the user's graph nodes."""
    return [tuple(r) for r in sql.conn.execute("SELECT name, type FROM kg_nodes WHERE user_id = ?", (user,))]


def fact_objects(sql: "SQLStore", user: str) -> list[str]:
    """The distinct objects of the user's facts."""
    return [obj for (obj,) in sql.conn.execute(
        "SELECT DISTINCT object FROM memories WHERE user_id = ? AND object IS NOT NULL", (user,))]
