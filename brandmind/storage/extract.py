"""The queries ``brandmind/extract/run.py`` needs: which turns have had their facts extracted.

Two answers: a turn that a stored fact cites (``beads_with_facts``), and a turn an extractor
has read, with or without finding anything (``extract_state``, migration 0015: bead id,
user, the extractor's key such as ``llm:llama3.1:8b/extract_v1``, when).  The second is
device-local (not in the op log; kept by ``bm rebuild``, ``sqlstore.DEVICE_LOCAL_TABLES``): it
records what this device already spent LLM calls on, so a re-run does not send it again.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

SCHEMA = [
    "CREATE TABLE extract_state(bead_id TEXT NOT NULL, user_id TEXT NOT NULL, extractor TEXT NOT NULL, "
    "at INTEGER NOT NULL, PRIMARY KEY(bead_id, extractor))",
    "CREATE INDEX extract_state_user ON extract_state(user_id, extractor)",
]


def beads_with_facts(sql: "SQLStore", user: str) -> set[str]:
    """Bead ids that a stored memory other than a raw turn cites (their facts were extracted)."""
    rows = sql.conn.execute(
        "SELECT DISTINCT json_extract(p.value, '$.bead') FROM memories m, json_each(m.provenance) p "
        "WHERE m.user_id = ? AND m.source != 'ingest' AND json_type(p.value) = 'object'", (user,)).fetchall()
    return {r[0] for r in rows if isinstance(r[0], str)}


def beads_extracted_by(sql: "SQLStore", user: str, extractor: str) -> set[str]:
    """Bead ids of ``user`` that ``extractor`` (its key) has already read."""
    rows = sql.conn.execute("SELECT bead_id FROM extract_state WHERE user_id = ? AND extractor = ?",
                            (user, extractor)).fetchall()
    return {r[0] for r in rows}


def mark_extracted(sql: "SQLStore", user: str, extractor: str, bead_ids: Iterable[str], at: int) -> int:
    """Record that ``extractor`` read these beads; returns how many rows were written."""
    rows = [(b, user, extractor, at) for b in dict.fromkeys(bead_ids) if isinstance(b, str) and b]
    if rows:
        with sql.write():
            sql.conn.executemany("INSERT OR REPLACE INTO extract_state(bead_id, user_id, extractor, at) "
                                 "VALUES(?, ?, ?, ?)", rows)
    return len(rows)
