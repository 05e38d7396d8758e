"""The ``memories`` aggregate: the queries recall, facts and consolidation issue against
``memories``, its full-text index (``memories_fts``, ``memories_vocab``) and its vectors
(``memories_vec``, sqlite-vec), and the output shape of a memory row.

Small functions taking the ``SQLStore`` first; they read (the projection writes, see
projection.py and storage/projection.py), except :func:`rolled_back` (a transaction
that is always undone).
"""
from __future__ import annotations

import json
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..clock import iso, now_millis, parse_time

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
    }


def row(sql: "SQLStore", memory_id: str) -> dict | None:
    """The ``memories`` row of ``memory_id`` (every column), or None."""
    return next(sql.rows("SELECT * FROM memories WHERE id=?", (memory_id,)), None)


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


# -- "currently true" / "true as of" ------------------------------------------------------------
def current_sql(alias: str = "m", as_of: str | int | None = None, *, now: int | None = None) -> tuple[str, list]:
    """A WHERE fragment (and its args) keeping the memories true now, or true as of a date.

    Now: not retired by then and not ended (``valid_to`` in the future or unknown).  As of D (world
    time): ``valid_from <= D < valid_to`` (unknown ends are open), minus the memories retired
    as corrections (``retired_at`` set, ``valid_to`` NULL: they were never true).  System time
    is not filtered for --as-of: what bm learned later about D counts."""
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", alias):
        raise ValueError(f"bad table alias {alias!r}")
    a = alias
    if as_of is None:
        t = now if now is not None else now_millis()
        return (f"(({a}.retired_at IS NULL OR {a}.retired_at > ?) AND ({a}.valid_to IS NULL OR {a}.valid_to > ?))",
                [t, t])
    d = parse_time(as_of, field="as_of") if not isinstance(as_of, int) else as_of
    return (f"(({a}.valid_from IS NULL OR {a}.valid_from <= ?) AND ({a}.valid_to IS NULL OR {a}.valid_to > ?) "
            f"AND NOT ({a}.retired_at IS NOT NULL AND {a}.valid_to IS NULL))", [d, d])


# -- recall: candidates --------------------------------------------------------------------------
RANK_COLS = ("m.rowid, m.id, m.text, m.agent_id, m.importance, m.created_at, m.valid_from, "
             "m.thread, m.episode, m.speaker")


def data_version(sql: "SQLStore") -> int:
    """SQLite's ``data_version``: changes when another connection commits."""
    return sql.conn.execute("PRAGMA data_version").fetchone()[0]


def count(sql: "SQLStore") -> int:
    return sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0]


def vector_knn(sql: "SQLStore", q: bytes, n: int, where: str, args: list) -> list[tuple[int, float]]:
    """sqlite-vec's filtered KNN: ``(rowid, distance)``, nearest first (``where`` over the
    vec0 table's metadata columns)."""
    return sql.conn.execute(
        f"SELECT rowid, distance FROM memories_vec WHERE embedding MATCH ? AND k = ? AND {where}",
        [q, n, *args]).fetchall()


def vectors_after(sql: "SQLStore", rowid: int) -> list[tuple]:
    """``(rowid, embedding, user, agent or '', type, created_at)`` of every vector past ``rowid``.

    The filter columns come from ``memories`` (the same values the vec0 table keeps as
    metadata; agent NULL there is '' here): reading them out of vec0 row by row cost more
    than the vectors themselves (1.7 s -> ~0.8 s at 100,000 memories)."""
    return sql.conn.execute(
        "SELECT v.rowid, v.embedding, m.user_id, coalesce(m.agent_id, ''), m.type, m.created_at "
        "FROM memories_vec v JOIN memories m ON m.rowid = v.rowid WHERE v.rowid > ?", (rowid,)).fetchall()


def vectors_of(sql: "SQLStore", rowids: list[int], chunk: int = 0) -> list[tuple[int, bytes]]:
    """``(rowid, embedding)`` of those rowids that have a vector (``chunk``: at most that
    many rowids per query; 0: one query)."""
    out: list[tuple[int, bytes]] = []
    step = chunk or max(1, len(rowids))
    for i in range(0, len(rowids), step):
        part = rowids[i:i + step]
        out.extend(sql.conn.execute(
            f"SELECT rowid, embedding FROM memories_vec WHERE rowid IN ({_marks(part)})", part).fetchall())
    return out


def user_vectors(sql: "SQLStore", user: str) -> Iterator[tuple[int, bytes]]:
    """``(rowid, embedding)`` of every vector of ``user``."""
    return sql.conn.execute("SELECT rowid, embedding FROM memories_vec WHERE user_id = ?", (user,))


def query_tokenizer(sql: "SQLStore") -> tuple[Any, int]:
    """The FTS5 tokenizer of ``memories_fts`` (porter over unicode61) and its query flag."""
    import apsw

    return sql.conn.fts5_tokenizer("porter", ["unicode61"]), apsw.FTS5_TOKENIZE_QUERY


def doc_freq(sql: "SQLStore", terms: list[str]) -> dict[str, int]:
    """term -> the number of memories holding it (``memories_vocab``)."""
    if not terms:
        return {}
    return dict(sql.conn.execute(f"SELECT term, doc FROM memories_vocab WHERE term IN ({_marks(terms)})",
                                 terms).fetchall())


def keyword_hits(sql: "SQLStore", match: str, where: str, args: list, n: int) -> list[tuple[int, float]]:
    """The best ``n`` FTS5 hits of ``match`` that pass ``where`` (alias ``m``): ``(rowid, bm25)``,
    best (lowest) first.

    The keyword hits are ranked first and only the best ``4 n`` of them joined with memories
    for the filters: a common word can match a third of the store, and joining every hit was
    most of the cost.  If fewer than n of those pass the filters (other users' memories),
    every hit is ranked.  Both orders are total (score, rowid), so the answer is the same."""
    pool = 4 * n
    rows = sql.conn.execute(
        f"SELECT m.rowid, h.s FROM (SELECT rowid, bm25(memories_fts) AS s FROM memories_fts "
        f"WHERE memories_fts MATCH ? ORDER BY s, rowid LIMIT ?) AS h "
        f"JOIN memories m NOT INDEXED ON m.rowid = h.rowid WHERE {where} ORDER BY h.s, m.rowid LIMIT ?",
        [match, pool, *args, n]).fetchall()
    if len(rows) < n:
        rows = sql.conn.execute(
            f"SELECT m.rowid, bm25(memories_fts) AS s FROM memories_fts JOIN memories m NOT INDEXED "
            f"ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ? AND {where} "
            f"ORDER BY s, m.rowid LIMIT ?", [match, *args, n]).fetchall()
    return rows


def matching(sql: "SQLStore", match: str, where: str, args: list, limit: int) -> list[dict]:
    """Every column of the memories matching the FTS5 query ``match`` and ``where`` (alias
    ``m``), oldest first."""
    return list(sql.rows(
        f"SELECT m.* FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND {where} ORDER BY m.created_at LIMIT ?", (match, *args, limit)))


def rank_rows(sql: "SQLStore", rowids: list[int], where: str, args: list) -> dict[int, dict]:
    """rowid -> the columns ranking needs (:data:`RANK_COLS`), for the rowids passing ``where``."""
    out: dict[int, dict] = {}
    for i in range(0, len(rowids), 900):
        chunk = rowids[i:i + 900]
        # NOT INDEXED: look the rows up by rowid; otherwise SQLite may walk a user index
        # (every row of the user) to apply `user_id = ?` (10 ms instead of 1 at 100,000)
        for r in sql.rows(f"SELECT {RANK_COLS} FROM memories m NOT INDEXED WHERE m.rowid IN "
                          f"({_marks(chunk)}) AND {where}", (*chunk, *args)):
            out[r["rowid"]] = r
    return out


def thread_neighbours(sql: "SQLStore", rowids: list[int]) -> dict[int, tuple[int | None, int | None]]:
    """rowid -> (the turn before it, the turn after it) in its user's thread."""
    pairs: dict[int, tuple[int | None, int | None]] = {}
    for i in range(0, len(rowids), 400):
        chunk = rowids[i:i + 400]
        rows = sql.conn.execute(
            "SELECT m.rowid, "
            "(SELECT p.rowid FROM memories p WHERE p.user_id = m.user_id AND p.thread = m.thread "
            " AND (p.created_at, p.rowid) < (m.created_at, m.rowid) "
            " ORDER BY p.created_at DESC, p.rowid DESC LIMIT 1), "
            "(SELECT n.rowid FROM memories n WHERE n.user_id = m.user_id AND n.thread = m.thread "
            " AND (n.created_at, n.rowid) > (m.created_at, m.rowid) "
            " ORDER BY n.created_at, n.rowid LIMIT 1) "
            f"FROM memories m WHERE m.rowid IN ({_marks(chunk)})", chunk).fetchall()
        pairs.update({r[0]: (r[1], r[2]) for r in rows})
    return pairs


def newest(sql: "SQLStore", where: str, args: list, n: int) -> list[int]:
    """rowids of the ``n`` newest memories passing ``where`` (alias ``m``)."""
    return [r[0] for r in sql.conn.execute(
        f"SELECT m.rowid FROM memories m WHERE {where} ORDER BY m.created_at DESC LIMIT ?", [*args, n])]


def most_important(sql: "SQLStore", where: str, args: list, n: int) -> list[int]:
    """rowids of the ``n`` most important memories (above 0.5) passing ``where`` (alias ``m``)."""
    return [r[0] for r in sql.conn.execute(
        f"SELECT m.rowid FROM memories m WHERE {where} AND m.importance > 0.5 "
        f"ORDER BY m.importance DESC LIMIT ?", [*args, n])]


def speakers(sql: "SQLStore", user: str) -> list[str]:
    """The speakers of the user's conversations."""
    return [r[0] for r in sql.conn.execute(
        "SELECT DISTINCT speaker FROM memories WHERE user_id = ? AND speaker IS NOT NULL", (user,))]


def rowids_of(sql: "SQLStore", ids: list[str]) -> list[int]:
    """The rowids of the memories ``ids`` that exist."""
    return [r["rowid"] for r in sql.rows(f"SELECT rowid FROM memories WHERE id IN ({_marks(ids)})", ids)]


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
