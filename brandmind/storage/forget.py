"""The queries ``bm forget`` needs: what a memory came from, what came from a turn, which
graph nodes a fact names and which of them nothing else holds (brandmind/forgetting.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore


def _marks(items: Iterable[object]) -> str:
    return ",".join("?" * len(list(items)))


def memory_rows(sql: "SQLStore", ids: list[str]) -> list[dict]:
    """``id, op_id, text, provenance`` of the memories ``ids`` that exist."""
    if not ids:
        return []
    return list(sql.rows(f"SELECT id, op_id, text, provenance FROM memories WHERE id IN ({_marks(ids)})",
                         tuple(ids)))


def memories_from_beads(sql: "SQLStore", beads: list[str]) -> list[str]:
    """Ids of the memories whose provenance names one of ``beads``."""
    if not beads:
        return []
    return [r[0] for r in sql.conn.execute(
        f"SELECT DISTINCT m.id FROM memories m, json_each(m.provenance) p "
        f"WHERE json_extract(p.value, '$.bead') IN ({_marks(beads)})", beads)]


def nodes_named_by(sql: "SQLStore", ids: list[str]) -> set[str]:
    """The graph nodes the facts ``ids`` name: the ends of the edges they are the evidence
    of (a node merely linked to a memory is not named by it)."""
    if not ids:
        return set()
    rows = sql.conn.execute(
        f"SELECT e.src, e.dst FROM kg_edges e, json_each(e.evidence) j WHERE j.value IN ({_marks(ids)})", ids)
    return {end for row in rows for end in row if end.startswith("n_")}


def orphan_nodes(sql: "SQLStore", nodes: Iterable[str]) -> dict[str, str]:
    """Those of ``nodes`` no mention or edge holds any more: node id -> its user."""
    nodes = tuple(nodes)
    if not nodes:
        return {}
    return {r[0]: r[1] for r in sql.conn.execute(
        f"SELECT id, user_id FROM kg_nodes n WHERE id IN ({_marks(nodes)}) "
        "AND NOT EXISTS (SELECT 1 FROM kg_mentions WHERE node_id=n.id) "
        "AND NOT EXISTS (SELECT 1 FROM kg_edges WHERE src=n.id OR dst=n.id)", nodes)}


def match_memories(sql: "SQLStore", fts: str, where: str, args: tuple, limit: int) -> list[dict]:
    """Memories matching the FTS5 query ``fts`` and the filter ``where`` (alias ``m``), oldest first."""
    return list(sql.rows(
        f"SELECT m.* FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND {where} ORDER BY m.created_at LIMIT ?", (fts, *args, limit)))
