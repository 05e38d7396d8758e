"""The queries ``brandmind/extract/run.py`` needs: which turns have had their facts extracted."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore


def beads_with_facts(sql: "SQLStore", user: str) -> set[str]:
    """Bead ids that a stored memory other than a raw turn cites (their facts were extracted)."""
    rows = sql.conn.execute(
        "SELECT DISTINCT json_extract(p.value, '$.bead') FROM memories m, json_each(m.provenance) p "
        "WHERE m.user_id = ? AND m.source != 'ingest' AND json_type(p.value) = 'object'", (user,)).fetchall()
    return {r[0] for r in rows if isinstance(r[0], str)}
