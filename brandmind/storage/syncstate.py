"""How far the SQLite projection has applied each replica's ops (``replication.catch_up``):
``sync_heads`` (replica -> highest seq applied; their ops apply in seq order), ``sync_held``
(ops that arrived before an earlier op of their replica: applied once the gap fills), the
``applied`` arrival watermark in ``meta``, and the savepoint one op is applied in when a
bad op must not stop the rest.  The tables' schema: brandmind/storage/converge.py."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore


def heads(sql: "SQLStore") -> dict[str, int] | None:
    """replica -> highest seq applied; None for an index built before sync (no heads kept)."""
    if sql.get_meta("sync_heads") is None:
        return None
    return dict(sql.conn.execute("SELECT replica, seq FROM sync_heads").fetchall())


def reset_heads(sql: "SQLStore", heads: dict[str, int]) -> None:
    """Start keeping heads, from ``heads``."""
    c = sql.conn
    c.execute("DELETE FROM sync_heads")
    c.executemany("INSERT INTO sync_heads VALUES(?,?)", list(heads.items()))
    sql.set_meta("sync_heads", "1")


def save_heads(sql: "SQLStore", heads: dict[str, int]) -> None:
    sql.conn.executemany("INSERT OR REPLACE INTO sync_heads VALUES(?,?)", sorted(heads.items()))


def held(sql: "SQLStore") -> set[tuple[str, int]]:
    """(replica, seq) of the ops held back until their predecessor is applied."""
    return {(r, s) for r, s in sql.conn.execute("SELECT replica, seq FROM sync_held")}


def hold(sql: "SQLStore", replica: str, seq: int) -> None:
    sql.conn.execute("INSERT OR IGNORE INTO sync_held VALUES(?,?)", (replica, seq))


def release(sql: "SQLStore", replica: str, seq: int) -> None:
    sql.conn.execute("DELETE FROM sync_held WHERE replica=? AND seq=?", (replica, seq))


def set_applied(sql: "SQLStore", arrival: int) -> None:
    sql.set_meta("applied", str(arrival))


@contextmanager
def savepoint(sql: "SQLStore") -> Iterator[None]:
    """Apply one op in a savepoint: what it wrote is undone if it raises."""
    c = sql.conn
    c.execute("SAVEPOINT bm_op")
    try:
        yield
    except BaseException:
        c.execute("ROLLBACK TO bm_op")
        c.execute("RELEASE bm_op")
        raise
    c.execute("RELEASE bm_op")
