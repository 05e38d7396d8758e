"""The ``memories`` aggregate: the queries facts, the graph and consolidation issue against
``memories`` and its vectors, and the output shape of a memory row (recall's lookups, the
full-text index and the filters are in storage/search.py).

Small functions taking the ``SQLStore`` first; they read (the projection writes, see
projection.py and storage/projection.py), except :func:`rolled_back` (a transaction
that is always undone).
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..clock import iso
from ..logvalues import loads as json_column
from .recallsql import dequantised, quantised, vectors_of

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore


def _marks(items: list) -> str:
    return ",".join("?" * len(items))


# -- output shape ---------------------------------------------------------------------------
def memory_out(row: dict) -> dict:
    """A ``memories`` row as the library returns a memory (recall, get, list, history)."""
    agent = row["agent_id"]
    return {
        "id": row["id"], "text": row["text"], "type": row["type"], "user": row["user_id"],
        "agent": agent, "scope": f"agent:{agent}" if agent else "global",
        "importance": row["importance"], "ts": iso(row["created_at"]),
        "updated": iso(row["updated_at"]), "valid_from": iso(row["valid_from"]),
        "valid_to": iso(row["valid_to"]), "source": row["source"],
        "provenance": json.loads(row["provenance"]), "meta": json.loads(row["meta"]),
        # bi-temporal facts (brandmind/facts.py)
        "recorded_at": iso(row.get("recorded_at")), "retired_at": iso(row.get("retired_at")),
        "subject": row.get("subject"), "predicate": row.get("predicate"), "object": row.get("object"),
        "superseded_by": row.get("superseded_by"), "confirmations": row.get("confirmations") or 0,
        # forgetting on a schedule (brandmind/expiry.py)
        "expires_at": iso(row.get("expires_at")), "pinned": bool(row.get("pinned")),
    }


def row(sql: "SQLStore", memory_id: str) -> dict | None:
    """The ``memories`` row of ``memory_id`` (every column), or None."""
    return next(sql.rows("SELECT * FROM memories WHERE id=?", (memory_id,)), None)


def listed(sql: "SQLStore", *, user: str | None, agent: str | None, type: str | None,
           limit: int, offset: int) -> list[dict]:
    """Memories newest first, of one user (or every user when None), agent and type."""
    where, args = ["1"], []
    for column, value in (("user_id", user), ("agent_id", agent), ("type", type)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    return list(sql.rows(f"SELECT * FROM memories WHERE {' AND '.join(where)} "
                         "ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?", (*args, limit, offset)))


def last_turn_before(sql: "SQLStore", user: str, thread: str, ts: int) -> tuple[int, str | None] | None:
    """``(created_at, episode)`` of the newest memory of ``user``'s ``thread`` at or before ``ts``."""
    row = sql.conn.execute(
        "SELECT created_at, episode FROM memories WHERE user_id = ? AND thread = ? AND created_at <= ? "
        "ORDER BY created_at DESC, rowid DESC LIMIT 1", (user, thread, ts)).fetchone()
    return (row[0], row[1]) if row else None


def briefs_by_rowid(sql: "SQLStore", rowids: list[int]) -> dict[int, dict]:
    """rowid -> the few fields a context block shows of a memory (id, text, type, scope, ts,
    meta, provenance), for the rowids that exist: read and converted for ~125 memories a
    block, so only these columns (``memory_out`` gives every field)."""
    if not rowids:
        return {}
    out = {}
    for rowid, mid, text, type_, agent, created, meta, prov in sql.conn.execute(
            f"SELECT rowid, id, text, type, agent_id, created_at, meta, provenance FROM memories "
            f"WHERE rowid IN ({_marks(rowids)})", tuple(rowids)):
        out[rowid] = {"id": mid, "text": text, "type": type_, "scope": f"agent:{agent}" if agent else "global",
                      "ts": iso(created), "meta": json_column(meta), "provenance": json_column(prov)}
    return out


def rows_by_rowid(sql: "SQLStore", rowids: list[int]) -> dict[int, dict]:
    """rowid -> full row, for the rowids that exist."""
    if not rowids:
        return {}
    return {r["rowid"]: r for r in sql.rows(
        f"SELECT * FROM memories WHERE rowid IN ({_marks(rowids)})", tuple(rowids))}


def current_row(sql: "SQLStore", memory_id: str, user: str, now: int | None) -> dict | None:
    """The memory of ``user`` (every column) if it exists and, unless ``now`` is None, is
    current at ``now`` (not retired, not ended)."""
    cur = "" if now is None else " AND retired_at IS NULL AND (valid_to IS NULL OR valid_to > :now)"
    return next(sql.rows(f"SELECT * FROM memories WHERE id=:id AND user_id=:u{cur}",
                         {"id": memory_id, "u": user, "now": now}), None)


# -- facts --------------------------------------------------------------------------------------
def add_functions(sql: "SQLStore", norm: Callable[[Any], str], predicate: Callable[[Any], str]) -> None:
    """``bm_norm(text)`` and ``bm_predicate(text)`` in SQL (the connection's own functions;
    nothing stored uses them), registered once per connection."""
    if not getattr(sql, "_bm_norm", False):
        sql.conn.create_scalar_function("bm_norm", norm, 1, deterministic=True)
        sql.conn.create_scalar_function("bm_predicate", predicate, 1, deterministic=True)
        sql._bm_norm = True


def subjects(sql: "SQLStore", user: str) -> list[str]:
    """Every distinct subject of the user's facts."""
    return [s for (s,) in sql.conn.execute(
        "SELECT DISTINCT subject FROM memories WHERE user_id = ? AND subject IS NOT NULL", (user,))]


def facts_about(sql: "SQLStore", user: str, names: list[str], agent: str | None, *, current: bool,
                predicates: list[str] | None = None, object_norm: str | None = None,
                text_norm: str | None = None) -> list[dict]:
    """The user's facts whose subject is one of ``names``, in the agent's scope (its own and
    the global facts; global only when ``agent`` is None), oldest first (by recorded_at, id);
    current ones only if ``current``; with a normalised predicate in ``predicates``, a
    normalised object / text equal to ``object_norm`` / ``text_norm`` when given (these need
    :func:`add_functions`).  Columns: ``rowid, id, text, subject, predicate, object,
    valid_from, valid_to, ts, recorded_at, retired_at, negated``."""
    where = [f"subject IN ({_marks(names)})"]
    args: list[Any] = [user, *names]
    if current:
        where.append("retired_at IS NULL")
    if agent is None:
        where.append("agent_id IS NULL")
    else:
        where.append("(agent_id IS NULL OR agent_id = ?)")
        args.append(agent)
    if predicates is not None:  # compared normalised: rows projected before predicates were
        where.append(f"bm_predicate(predicate) IN ({_marks(predicates)})")
        args.extend(predicates)
    for column, value in (("object", object_norm), ("text", text_norm)):
        if value is not None:
            where.append(f"bm_norm({column}) = ?")
            args.append(value)
    return list(sql.rows(
        "SELECT rowid, id, text, subject, predicate, object, valid_from, valid_to, created_at AS ts, "
        "recorded_at, retired_at, coalesce(json_extract(meta, '$.negated'), 0) AS negated "
        f"FROM memories WHERE user_id = ? AND {' AND '.join(where)} ORDER BY recorded_at, id", tuple(args)))


def superseded_ids(sql: "SQLStore", memory_id: str, user: str) -> list[str]:
    """The user's memories superseded by ``memory_id``."""
    return [r[0] for r in sql.conn.execute(
        "SELECT id FROM memories WHERE superseded_by=? AND user_id=?", (memory_id, user))]


def same_fact_ids(sql: "SQLStore", user: str, subject_norm: str, predicates: list[str],
                  object_norm: str | None) -> list[str]:
    """The user's facts with that normalised subject, a normalised predicate in
    ``predicates`` and (unless ``object_norm`` is None) that normalised object (these need
    :func:`add_functions`)."""
    same = f"bm_predicate(predicate) IN ({_marks(predicates)})"
    args: tuple = tuple(predicates)
    if object_norm is not None:
        same += " AND bm_norm(object) = ?"
        args += (object_norm,)
    return [r[0] for r in sql.conn.execute(
        f"SELECT id FROM memories WHERE user_id=? AND subject IS NOT NULL AND bm_norm(subject)=? "
        f"AND {same}", (user, subject_norm, *args))]


@contextmanager
def rolled_back(sql: "SQLStore", active: bool = True) -> Iterator[None]:
    """A write transaction that is always rolled back (``active=False``: none at all)."""
    c = sql.conn
    if active:
        c.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        if active and c.in_transaction:
            c.execute("ROLLBACK")


# -- consolidation ------------------------------------------------------------------------------
def current_of_user(sql: "SQLStore", user: str, now: int) -> list[dict]:
    """``rowid, id, text, type, agent ('' if global), created_at, meta`` of the user's current
    memories (not retired, not ended at ``now``), oldest first (created_at, id)."""
    return list(sql.rows(
        "SELECT rowid, id, text, type, coalesce(agent_id, '') AS agent, created_at, meta FROM memories "
        "WHERE user_id = ? AND retired_at IS NULL AND (valid_to IS NULL OR valid_to > ?) "
        "ORDER BY created_at, id", (user, now)))


def user_vectors(sql: "SQLStore", user: str) -> Iterator[tuple[int, bytes]]:
    """``(rowid, float32 unit vector bytes)`` of every vector of ``user`` (stored as int8:
    storage/recallsql.py ``dequantised``)."""
    for rowid, raw in sql.conn.execute("SELECT rowid, embedding FROM memories_vec WHERE user_id = ?", (user,)):
        yield rowid, dequantised(raw)


# -- the vectors a rebuild takes from the projection it replaces (brandmind/admin.py) -------------
def rows_by_text(sql: "SQLStore") -> dict[int, int]:
    """``hash(text) -> rowid`` of the memories that have a vector (the first of equal texts);
    what a damaged file still yields (a rebuild embeds the rest)."""
    import apsw

    out: dict[int, int] = {}
    try:
        for rowid, text in sql.conn.execute("SELECT rowid, text FROM memories WHERE rowid NOT IN "
                                            "(SELECT rowid FROM vec_pending) ORDER BY rowid"):
            out.setdefault(hash(text), rowid)
    except apsw.Error:
        pass
    return out


def vector_of_text(sql: "SQLStore", rowid: int, text: str) -> bytes | None:
    """The vector of memory ``rowid`` if its text is ``text`` (None: another text, none, or
    a damaged file)."""
    import apsw

    try:
        row = sql.conn.execute("SELECT text FROM memories WHERE rowid = ?", (rowid,)).fetchone()
        if row is None or row[0] != text:
            return None
        got = vectors_of(sql, [rowid])
    except apsw.Error:
        return None
    return bytes(got[0][1]) if got and len(got[0][1]) == 4 * sql.dim else None


# -- vectors made later (brandmind/backlog.py) ---------------------------------------------------
# the vector parameter is int8 bytes (``quantised(float32 bytes)``: storage/recallsql.py)
VEC_INSERT = ("INSERT INTO memories_vec(rowid, user_id, embedding, agent_id, type, created_at) "
              "VALUES(?,?,vec_int8(?),?,?,?)")

# A memory stored while vectors are deferred (``Store.deferring_vectors``) has its row and its
# keywords at once and a ``vec_pending`` row until the backlog embeds it (deleting that row
# lists the memory in ``mem_changes``, which the recall index reads: storage/recallindex.py).
# ``vec_late`` is no longer used (dropped by migration 0014).
PENDING_SCHEMA = (
    "CREATE TABLE vec_pending(rowid INTEGER PRIMARY KEY)",
    "CREATE TABLE vec_late(seq INTEGER PRIMARY KEY AUTOINCREMENT, mem_rowid INTEGER NOT NULL)",
)


def pending_count(sql: "SQLStore") -> int:
    return sql.conn.execute("SELECT count(*) FROM vec_pending").fetchone()[0]


def has_pending(sql: "SQLStore") -> bool:
    """Whether any memory waits for its vector."""
    return sql.conn.execute("SELECT 1 FROM vec_pending LIMIT 1").fetchone() is not None


def pending_batch(sql: "SQLStore", n: int) -> list[tuple[int, str]]:
    """``(rowid, text)`` of the first ``n`` memories waiting for a vector, in rowid order."""
    return sql.conn.execute(
        "SELECT p.rowid, m.text FROM vec_pending p JOIN memories m ON m.rowid = p.rowid "
        "ORDER BY p.rowid LIMIT ?", (n,)).fetchall()


def pending_where(sql: "SQLStore", where: str, args: list) -> int:
    """How many memories passing ``where`` (alias ``m``) wait for a vector."""
    # CROSS JOIN: SQLite keeps vec_pending (a backlog, small) as the outer loop, instead of
    # walking the user's index over every memory (~8 ms at 100,000)
    return sql.conn.execute(f"SELECT count(*) FROM vec_pending p CROSS JOIN memories m ON m.rowid = p.rowid "
                            f"WHERE {where}", args).fetchone()[0]


def fill_vectors(sql: "SQLStore", items: list[tuple[int, str, bytes]]) -> list[int]:
    """Give the waiting memories their vectors (``(rowid, text, vector)``), in the caller's
    write transaction: only rows still waiting with the same text (a forget or a rebuild
    in between wins); each one's ``vec_pending`` row goes in the same transaction (which
    lists the memory in ``mem_changes`` for the recall index).  Returns the rowids filled."""
    c = sql.conn
    done = []
    for rowid, text, vec in items:
        row = c.execute("SELECT m.text, m.user_id, m.agent_id, m.type, m.created_at FROM vec_pending p "
                        "JOIN memories m ON m.rowid = p.rowid WHERE p.rowid = ?", (rowid,)).fetchone()
        if row is None or row[0] != text:
            continue
        c.execute(VEC_INSERT, (rowid, row[1], quantised(vec), row[2] or "", row[3], row[4]))
        c.execute("DELETE FROM vec_pending WHERE rowid = ?", (rowid,))
        done.append(rowid)
    return done
