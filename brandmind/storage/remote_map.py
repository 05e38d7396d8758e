"""``remote_map``: which remote id each local memory / kg edge has on each mirror remote
(Zep, Graphiti; ``brandmind/sync/mirror.py``).  A device-local table (migration 0010): not
in the op log, kept across ``bm rebuild`` (``sqlstore.DEVICE_LOCAL_TABLES``).

Also the reads a mirror's translation makes of the projection (the memory or edge an op
touched, as it is now; the users this store knows), so the sync package issues no SQL.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

SCHEMA = [
    "CREATE TABLE remote_map(remote TEXT NOT NULL, local_id TEXT NOT NULL, remote_id TEXT NOT NULL, "
    "user_id TEXT, PRIMARY KEY(remote, local_id))",
    "CREATE INDEX remote_map_remote_id ON remote_map(remote, remote_id)",
    "CREATE INDEX remote_map_user ON remote_map(remote, user_id)",
]


# -- the map ------------------------------------------------------------------------------------------
def remote_id(sql: "SQLStore", remote: str, local_id: str) -> str | None:
    row = sql.conn.execute("SELECT remote_id FROM remote_map WHERE remote=? AND local_id=?",
                           (remote, local_id)).fetchone()
    return row[0] if row else None


def remote_entry(sql: "SQLStore", remote: str, local_id: str) -> tuple[str, str | None] | None:
    """(remote id, user) of a mapped local id, or None."""
    row = sql.conn.execute("SELECT remote_id, user_id FROM remote_map WHERE remote=? AND local_id=?",
                           (remote, local_id)).fetchone()
    return (row[0], row[1]) if row is not None else None


def local_id(sql: "SQLStore", remote: str, remote_id: str) -> str | None:
    row = sql.conn.execute("SELECT local_id FROM remote_map WHERE remote=? AND remote_id=?",
                           (remote, remote_id)).fetchone()
    return row[0] if row else None


def mapping(sql: "SQLStore", remote: str) -> dict[str, str]:
    """local id -> remote id of every row of ``remote``."""
    return dict(sql.conn.execute("SELECT local_id, remote_id FROM remote_map WHERE remote=?",
                                 (remote,)).fetchall())


def put(sql: "SQLStore", remote: str, rows: Iterable[tuple[str, str, str]]) -> None:
    """Record (local id, remote id, user) rows (replacing what a local id had)."""
    rows = list(rows)
    if rows:
        with sql.write():
            sql.conn.executemany(
                "INSERT OR REPLACE INTO remote_map(remote, local_id, remote_id, user_id) VALUES(?,?,?,?)",
                [(remote, local, rid, user) for local, rid, user in rows])


def remove(sql: "SQLStore", remote: str, local_ids: Iterable[str]) -> None:
    ids = list(local_ids)
    if ids:
        with sql.write():
            sql.conn.executemany("DELETE FROM remote_map WHERE remote=? AND local_id=?", [(remote, i) for i in ids])


def remove_user(sql: "SQLStore", remote: str, user: str) -> None:
    with sql.write():
        sql.conn.execute("DELETE FROM remote_map WHERE remote=? AND user_id=?", (remote, user))


# -- what a mirror reads of the projection -------------------------------------------------------------
def users(sql: "SQLStore", remote: str) -> list[str]:
    """Every user with memories or graph nodes here, or with rows mapped on ``remote``."""
    c = sql.conn
    found = {r[0] for r in c.execute("SELECT DISTINCT user_id FROM memories")}
    found |= {r[0] for r in c.execute("SELECT DISTINCT user_id FROM kg_nodes")}
    found |= {r[0] for r in c.execute("SELECT DISTINCT user_id FROM remote_map WHERE remote=? "
                                      "AND user_id IS NOT NULL", (remote,))}
    return sorted(u for u in found if u)


def memory_row(sql: "SQLStore", memory_id: str) -> dict | None:
    """The memory's row as it is now (None: gone, e.g. forgotten)."""
    rows = list(sql.rows("SELECT * FROM memories WHERE id=?", (memory_id,)))
    return rows[0] if rows else None


def memory_state(sql: "SQLStore", memory_id: str) -> tuple[bool, int | None]:
    """(whether the memory exists here, its retired_at)."""
    row = sql.conn.execute("SELECT retired_at FROM memories WHERE id=?", (memory_id,)).fetchone()
    return (row is not None, row[0] if row is not None else None)


def is_structured_memory(sql: "SQLStore", memory_id: str) -> bool:
    """Whether ``memory_id`` is a memory with a subject (a structured fact)."""
    return sql.conn.execute("SELECT 1 FROM memories WHERE id=? AND subject IS NOT NULL",
                            (memory_id,)).fetchone() is not None


def edge_row(sql: "SQLStore", edge_id: str) -> dict | None:
    """The kg edge as it is now, with its ends' names and user (None: gone)."""
    rows = list(sql.rows(
        "SELECT e.*, s.name AS src_name, s.user_id AS user_id, d.name AS dst_name FROM kg_edges e "
        "JOIN kg_nodes s ON s.id = e.src JOIN kg_nodes d ON d.id = e.dst WHERE e.id=?", (edge_id,)))
    return rows[0] if rows else None
