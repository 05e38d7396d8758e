"""The workspace's file index in SQLite (brandmind/workspace.py): the chunk memories of each
user's files, found by path, and the local stat cache ``workspace_stat``.

``workspace_stat`` is a local cache, not an op projection: what each indexed file looked
like when last indexed (size, mtime, sha256, chunk count), so a refresh can skip hashing
unchanged files.  It is not replicated and is emptied by ``bm rebuild`` (the next refresh
re-hashes once).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

SCHEMA = [
    # a local cache (not an op projection): what each indexed file looked like when last
    # indexed, so refresh can skip hashing unchanged files
    """CREATE TABLE workspace_stat(user_id TEXT NOT NULL, path TEXT NOT NULL, size INTEGER NOT NULL,
       mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL, chunks INTEGER NOT NULL,
       PRIMARY KEY(user_id, path))""",
    # the chunks of a user's files, found without scanning the user's memories
    "CREATE INDEX memories_files ON memories(user_id, json_extract(meta, '$.path')) "
    "WHERE json_extract(meta, '$.kind') = 'file'",
]
_FILES_SQL = ("SELECT id, op_id, json_extract(meta, '$.path'), json_extract(meta, '$.sha256') FROM memories "
              "WHERE user_id = ? AND json_extract(meta, '$.kind') = 'file'")


def file_chunks(sql: "SQLStore", user: str) -> list[tuple[str, str, str, str]]:
    """``(memory id, op id, path, sha256)`` of every chunk memory of ``user``'s files."""
    return [tuple(r) for r in sql.conn.execute(_FILES_SQL, (user,))]


def chunk_count(sql: "SQLStore", user: str, path: str) -> int:
    """How many chunk memories the file ``path`` of ``user`` has."""
    return len(sql.conn.execute(_FILES_SQL + " AND json_extract(meta, '$.path') = ?", (user, path)).fetchall())


def stat_cache(sql: "SQLStore", user: str) -> dict[str, tuple]:
    """path -> ``(size, mtime_ns, sha256, chunks)`` of ``user``'s cached file stats."""
    return {r[0]: tuple(r[1:]) for r in sql.conn.execute(
        "SELECT path, size, mtime_ns, sha256, chunks FROM workspace_stat WHERE user_id=?", (user,))}


def save_stats(sql: "SQLStore", user: str, stats: Iterable[tuple[str, tuple | None]]) -> None:
    """Store ``(path, (size, mtime_ns, sha256, chunks))`` pairs; a None row drops the path."""
    with sql.write():
        for path, row in stats:
            if row is None:
                sql.conn.execute("DELETE FROM workspace_stat WHERE user_id=? AND path=?", (user, path))
            else:
                sql.conn.execute("INSERT OR REPLACE INTO workspace_stat VALUES(?,?,?,?,?,?)", (user, path, *row))


def forget_stats(sql: "SQLStore", user: str) -> None:
    """Drop every cached file stat of ``user``."""
    with sql.write():
        sql.conn.execute("DELETE FROM workspace_stat WHERE user_id=?", (user,))
