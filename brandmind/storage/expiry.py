"""The rows of forgetting on a schedule (brandmind/expiry.py): when a memory expires
(``memories.expires_at``, from its ``memory.add``), whether it is pinned (``pinned``, with the
HLC key of the ``memory.pin`` op that set it: an LWW register), the memories a sweep or
``bm forget --older-than`` takes, and the device-local access counts recall may rank on
(``memory_access``: never in the op log; kept by ``bm rebuild``, sqlstore.DEVICE_LOCAL_TABLES).

Small functions taking the ``SQLStore`` first; migration 0015 (sqlstore.py) runs ``SCHEMA``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

SCHEMA = (
    "ALTER TABLE memories ADD COLUMN expires_at INTEGER",   # epoch ms; NULL: never
    "ALTER TABLE memories ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE memories ADD COLUMN pin_hlc TEXT",        # the memory.pin op that set ``pinned``
    "CREATE INDEX memories_expiry ON memories(expires_at) WHERE expires_at IS NOT NULL",
    "CREATE TABLE memory_access(id TEXT PRIMARY KEY, hits INTEGER NOT NULL, last_ms INTEGER NOT NULL)",
)

# a memory recall must not return: expired at ``?`` and not pinned
EXPIRED = "({a}.expires_at IS NOT NULL AND {a}.expires_at <= ? AND {a}.pinned = 0)"


def _marks(items: list) -> str:
    return ",".join("?" * len(items))


def live_sql(alias: str, now: int) -> tuple[str, list]:
    """A WHERE fragment keeping what has not expired at ``now`` (pinned memories never do)."""
    return f"NOT {EXPIRED.format(a=alias)}", [now]


def expired_rowids(sql: "SQLStore", now: int) -> list[int]:
    """Rowids of the memories expired at ``now`` and not forgotten yet (few: a sweep forgets them)."""
    return [r[0] for r in sql.conn.execute(
        f"SELECT rowid FROM memories m WHERE {EXPIRED.format(a='m')}", (now,))]


def has_expired(sql: "SQLStore", now: int) -> bool:
    return sql.conn.execute(f"SELECT 1 FROM memories m WHERE {EXPIRED.format(a='m')} LIMIT 1",
                            (now,)).fetchone() is not None


def expired_ids(sql: "SQLStore", now: int, limit: int) -> list[str]:
    """Ids of the memories expired at ``now``, soonest expired first."""
    return [r[0] for r in sql.conn.execute(
        f"SELECT id FROM memories m WHERE {EXPIRED.format(a='m')} ORDER BY expires_at, id LIMIT ?", (now, limit))]


def older_than_ids(sql: "SQLStore", user: str, before: int, limit: int) -> list[str]:
    """Ids of ``user``'s memories dated before ``before`` (created_at) that are not pinned, oldest first."""
    return [r[0] for r in sql.conn.execute(
        "SELECT id FROM memories WHERE user_id = ? AND created_at < ? AND pinned = 0 "
        "ORDER BY created_at, id LIMIT ?", (user, before, limit))]


def pinned_among(sql: "SQLStore", ids: Iterable[str]) -> set[str]:
    """Those of ``ids`` that are pinned."""
    ids = list(ids)
    out: set[str] = set()
    for i in range(0, len(ids), 900):
        part = ids[i:i + 900]
        out.update(r[0] for r in sql.conn.execute(
            f"SELECT id FROM memories WHERE pinned = 1 AND id IN ({_marks(part)})", part))
    return out


def pin_state(sql: "SQLStore", memory_id: str) -> tuple[str | None, bool] | None:
    """``(HLC key of the pin op that set it, pinned)`` of a memory, None if absent."""
    row = sql.conn.execute("SELECT pin_hlc, pinned FROM memories WHERE id = ?", (memory_id,)).fetchone()
    return None if row is None else (row[0], bool(row[1]))


def set_pin_state(sql: "SQLStore", memory_id: str, hk: str, pinned: bool) -> None:
    sql.conn.execute("UPDATE memories SET pin_hlc = ?, pinned = ? WHERE id = ?", (hk, int(pinned), memory_id))


# -- access counts (device-local; recall's optional ``weight_access`` signal) ------------------------
def add_access(sql: "SQLStore", counts: dict[str, tuple[int, int]]) -> None:
    """Add ``id -> (hits, last ms)`` to the counts, in the caller's write transaction; ids
    no longer in ``memories`` (forgotten meanwhile) are skipped."""
    sql.conn.executemany(
        "INSERT INTO memory_access(id, hits, last_ms) SELECT ?1, ?2, ?3 WHERE EXISTS "
        "(SELECT 1 FROM memories WHERE id = ?1) ON CONFLICT(id) DO UPDATE SET hits = hits + excluded.hits, "
        "last_ms = max(last_ms, excluded.last_ms)", [(i, n, t) for i, (n, t) in counts.items()])


def access_of(sql: "SQLStore", rowids: list[int]) -> dict[int, tuple[str, int, int]]:
    """rowid -> ``(id, hits, last ms)`` of the memories ``rowids`` (hits 0 when never counted)."""
    out: dict[int, tuple[str, int, int]] = {}
    for i in range(0, len(rowids), 900):
        part = rowids[i:i + 900]
        for rowid, mid, hits, last in sql.conn.execute(
                f"SELECT m.rowid, m.id, coalesce(a.hits, 0), coalesce(a.last_ms, 0) FROM memories m "
                f"LEFT JOIN memory_access a ON a.id = m.id WHERE m.rowid IN ({_marks(part)})", part):
            out[rowid] = (mid, hits, last)
    return out


def drop_access(sql: "SQLStore", memory_id: str) -> None:
    """A forgotten memory's count goes with it."""
    sql.conn.execute("DELETE FROM memory_access WHERE id = ?", (memory_id,))
