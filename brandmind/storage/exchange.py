"""The queries of ``bm export`` / ``bm import`` (brandmind/exchange.py): every memory, graph
node, edge and mention in export order, and whether a record's row is here already."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore


def memory_rows(sql: "SQLStore") -> Iterator[dict]:
    """Every ``memories`` row (every column), by id."""
    return sql.rows("SELECT * FROM memories ORDER BY id")


def node_rows(sql: "SQLStore") -> Iterator[dict]:
    return sql.rows("SELECT * FROM kg_nodes ORDER BY id")


def edge_rows(sql: "SQLStore") -> Iterator[dict]:
    return sql.rows("SELECT * FROM kg_edges ORDER BY id")


def mention_rows(sql: "SQLStore") -> Iterator[dict]:
    return sql.rows("SELECT * FROM kg_mentions ORDER BY node_id, memory_id")


def _has(sql: "SQLStore", query: str, args: tuple) -> bool:
    return sql.conn.execute(query, args).fetchone() is not None


def has_memory(sql: "SQLStore", memory_id: str) -> bool:
    return _has(sql, "SELECT 1 FROM memories WHERE id=?", (memory_id,))


def has_node(sql: "SQLStore", node_id: str) -> bool:
    return _has(sql, "SELECT 1 FROM kg_nodes WHERE id=?", (node_id,))


def has_edge(sql: "SQLStore", edge_id: str) -> bool:
    return _has(sql, "SELECT 1 FROM kg_edges WHERE id=?", (edge_id,))


def has_mention(sql: "SQLStore", node_id: str, memory_id: str) -> bool:
    return _has(sql, "SELECT 1 FROM kg_mentions WHERE node_id=? AND memory_id=?", (node_id, memory_id))
