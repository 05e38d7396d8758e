"""The SQLite side of a store snapshot (``brandmind/sync/snapshot.py``): a consistent,
compact copy of the projection.  The op log side is ``OpLog.snapshot_copy`` /
``OpLog.adopt_copy`` (brandmind/oplog.py)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

_FTS5 = re.compile(r"USING\s+fts5\s*\(", re.IGNORECASE)


def compact_copy(sql: "SQLStore", dest: Path) -> None:
    """A consistent, compact copy of the index at ``dest`` (VACUUM INTO: one read
    transaction), in which the full-text indexes are merged so the tokens of deleted
    (forgotten) rows are gone too (FTS5 keeps them in its segments until a merge), then
    vacuumed again: no free pages."""
    import apsw

    sql.conn.execute("VACUUM INTO ?", (str(dest),))
    out = apsw.Connection(str(dest))
    try:
        fts = [name for name, text in out.execute("SELECT name, sql FROM sqlite_schema WHERE type='table'")
               if text and _FTS5.search(text)]
        if fts:
            with out:
                for name in fts:
                    out.execute(f'INSERT INTO "{name}"("{name}") VALUES(\'optimize\')')
            out.execute("VACUUM")
    finally:
        out.close()
