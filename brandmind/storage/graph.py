"""The knowledge graph aggregate: the queries on ``kg_nodes``, ``kg_edges`` and
``kg_mentions`` (brandmind/graph.py says what they hold), and the SQL side of
``kg.node.merge`` (:func:`merged_into`, :func:`move_refs`).

Small functions taking the ``SQLStore`` first.  Those comparing normalised names use
``bm_norm``, which ``storage.memories.add_functions`` registers (``facts.ensure_norm``).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:  # pragma: no cover
    from ..sqlstore import SQLStore

MERGED = "merged:"  # tombstones key of a merged node: value "<hlc key>\x1f<into id>"


# -- nodes -------------------------------------------------------------------------------------
def node(sql: "SQLStore", node_id: str, user: str | None = None) -> dict | None:
    """The node ``node_id`` (of ``user``, when given), or None."""
    if user is None:
        return next(sql.rows("SELECT * FROM kg_nodes WHERE id=?", (node_id,)), None)
    return next(sql.rows("SELECT * FROM kg_nodes WHERE id=? AND user_id=?", (node_id, user)), None)


def nodes_named(sql: "SQLStore", user: str, name: str, *, by_id: bool = True) -> list[dict]:
    """The user's nodes named exactly ``name``, oldest first (then by id unless ``by_id=False``)."""
    order = "created_at, id" if by_id else "created_at"
    return list(sql.rows(f"SELECT * FROM kg_nodes WHERE user_id=? AND name=? ORDER BY {order}", (user, name)))


def nodes_normed(sql: "SQLStore", user: str, normed: str) -> list[dict]:
    """The user's nodes whose normalised name is ``normed``, oldest first (needs ``bm_norm``)."""
    return list(sql.rows("SELECT * FROM kg_nodes WHERE user_id=? AND bm_norm(name)=? ORDER BY created_at, id",
                         (user, normed)))


def node_keys(sql: "SQLStore", user: str) -> Iterator[tuple[str, str, str]]:
    """``(id, type, name)`` of every node of the user, newest first."""
    return sql.conn.execute(
        "SELECT id, type, name FROM kg_nodes WHERE user_id=? ORDER BY created_at DESC, id DESC", (user,))


def list_nodes(sql: "SQLStore", user: str, *, type: str | None = None, name_norm: str | None = None,
               limit: int = 100) -> list[dict]:
    """The user's nodes (of ``type``; whose normalised name contains ``name_norm``: needs
    ``bm_norm``) by name, each with ``edges`` and ``mentions`` counts."""
    where, args = ["n.user_id = ?"], [user]
    if type is not None:
        where.append("n.type = ?")
        args.append(type)
    if name_norm is not None:
        where.append("instr(bm_norm(n.name), ?) > 0")
        args.append(name_norm)
    return list(sql.rows(
        "SELECT n.*, (SELECT count(*) FROM kg_edges e WHERE e.src = n.id OR e.dst = n.id) AS edges, "
        "(SELECT count(*) FROM kg_mentions k WHERE k.node_id = n.id) AS mentions "
        f"FROM kg_nodes n WHERE {' AND '.join(where)} ORDER BY n.name COLLATE NOCASE, n.created_at, n.id LIMIT ?",
        (*args, limit)))


def ref_counts(sql: "SQLStore", node_id: str) -> tuple[int, int]:
    """(edges touching the node, its mentions)."""
    c = sql.conn
    edges = c.execute("SELECT count(*) FROM kg_edges WHERE src=? OR dst=?", (node_id, node_id)).fetchone()[0]
    mentions = c.execute("SELECT count(*) FROM kg_mentions WHERE node_id=?", (node_id,)).fetchone()[0]
    return edges, mentions


# -- edges and mentions ------------------------------------------------------------------------
def edge(sql: "SQLStore", edge_id: str) -> dict | None:
    return next(sql.rows("SELECT * FROM kg_edges WHERE id=?", (edge_id,)), None)


def edges_of(sql: "SQLStore", item: str) -> list[dict]:
    """Every edge from or to ``item``, oldest first."""
    return list(sql.rows("SELECT * FROM kg_edges WHERE src=? OR dst=? ORDER BY created_at, id", (item, item)))


def edges_around(sql: "SQLStore", item: str, now: int | None) -> list[dict]:
    """The edges from or to ``item`` by id; unless ``now`` is None only those current at
    ``now`` (not retired, not ended)."""
    cur = "" if now is None else " AND retired_at IS NULL AND (valid_to IS NULL OR valid_to > :now)"
    return list(sql.rows(f"SELECT * FROM kg_edges WHERE (src=:id OR dst=:id){cur} ORDER BY id",
                         {"id": item, "now": now}))


def live_edges_near(sql: "SQLStore", item: str, limit: int = 100) -> Iterator[tuple[str, str, float, str]]:
    """``(src, dst, weight, predicate)`` of up to ``limit`` unretired edges from or to
    ``item``, ``contradicts`` links left out (recall's graph signal)."""
    return sql.conn.execute(
        "SELECT src, dst, weight, predicate FROM kg_edges WHERE (src = ? OR dst = ?) "
        "AND retired_at IS NULL AND predicate != 'contradicts' LIMIT ?", (item, item, limit))


def live_edges_with_evidence(sql: "SQLStore", evidence: list) -> list[str]:
    """Ids of the unretired edges whose evidence is exactly ``evidence``."""
    return [e for (e,) in sql.conn.execute("SELECT id FROM kg_edges WHERE evidence=? AND retired_at IS NULL",
                                           (json.dumps(evidence),)).fetchall()]


def contradicting(sql: "SQLStore", memory_id: str) -> list[str]:
    """The other ends of the ``contradicts`` links of a memory (either direction)."""
    return [r[0] for r in sql.conn.execute(
        "SELECT CASE WHEN src=? THEN dst ELSE src END FROM kg_edges "
        "WHERE predicate='contradicts' AND (src=? OR dst=?)", (memory_id, memory_id, memory_id))]


def memories_of(sql: "SQLStore", node_id: str, limit: int | None = None) -> list[str]:
    """The memories mentioning a node: by id, or (``limit``) up to that many in table order."""
    if limit is None:
        return [r[0] for r in sql.conn.execute(
            "SELECT memory_id FROM kg_mentions WHERE node_id=? ORDER BY memory_id", (node_id,))]
    return [r[0] for r in sql.conn.execute(
        "SELECT memory_id FROM kg_mentions WHERE node_id = ? LIMIT ?", (node_id, limit))]


def nodes_of(sql: "SQLStore", memory_id: str, *, ordered: bool = True) -> list[str]:
    """The nodes a memory mentions (by id, or in table order)."""
    order = " ORDER BY node_id" if ordered else ""
    return [r[0] for r in sql.conn.execute(f"SELECT node_id FROM kg_mentions WHERE memory_id=?{order}",
                                           (memory_id,)).fetchall()]


# -- merges (the SQL side of kg.node.merge) -----------------------------------------------------
def merged_into(sql: "SQLStore", node_id: str, *, hops: int = 16) -> str | None:
    """Where a merged node's edges go now (following merges), or None if it was not merged."""
    target, here = None, node_id
    for _ in range(hops):
        found = sql.conn.execute("SELECT hlc FROM tombstones WHERE id=?", (MERGED + here,)).fetchone()
        if found is None or "\x1f" not in found[0]:
            break
        here = target = found[0].split("\x1f", 1)[1]
        if here == node_id:
            break
    return target


def move_refs(sql: "SQLStore", src: str, target: str) -> None:
    """The edges and mentions of node ``src`` go to ``target``."""
    c = sql.conn
    c.execute("UPDATE kg_edges SET src=? WHERE src=?", (target, src))
    c.execute("UPDATE kg_edges SET dst=? WHERE dst=?", (target, src))
    c.execute("INSERT OR IGNORE INTO kg_mentions SELECT ?, memory_id FROM kg_mentions WHERE node_id=?",
              (target, src))


def is_empty(sql: "SQLStore") -> bool:
    """Whether the graph holds no mention and no edge (recall then skips its graph stage)."""
    return (sql.conn.execute("SELECT 1 FROM kg_mentions LIMIT 1").fetchone() is None
            and sql.conn.execute("SELECT 1 FROM kg_edges LIMIT 1").fetchone() is None)


# -- graph views: hubs and clusters (brandmind/graphviews.py) -----------------------------------
# ``cur(alias)`` gives the WHERE fragment (with ``?`` args) keeping the rows of that alias current
# at the moment asked about (``storage.search.current_sql``, bound by the caller).
def live_entity_edges(sql: "SQLStore", user: str, cur: Callable[[str], tuple[str, list]]) -> Iterator[tuple]:
    """``(src, dst, weight, evidence)`` (evidence as stored: a JSON list of ids) of the user's
    entity edges current at the moment asked about (``cur``).

    The edges are read in table order and their ends looked up (CROSS JOIN): on a graph of
    50,000 edges, reaching them through the user's nodes instead took twice as long (random
    reads; scripts/bench_graph.py)."""
    e_cur, e_args = cur("e")
    return sql.conn.execute(
        "SELECT e.src, e.dst, e.weight, e.evidence FROM kg_edges e CROSS JOIN kg_nodes s ON s.id = e.src "
        f"CROSS JOIN kg_nodes d ON d.id = e.dst WHERE s.user_id = ? AND d.user_id = ? AND {e_cur}",
        (user, user, *e_args))


def stale_memories(sql: "SQLStore", user: str, cur: Callable[[str], tuple[str, list]]) -> set[str]:
    """Ids of the user's memories that are not current at the moment asked about (``cur``)."""
    m_cur, m_args = cur("m")
    return {r[0] for r in sql.conn.execute(f"SELECT m.id FROM memories m WHERE m.user_id = ? AND NOT {m_cur}",
                                           (user, *m_args))}


def memories_among(sql: "SQLStore", ids: list[str]) -> set[str]:
    """Which of ``ids`` are memories."""
    out: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        out.update(r[0] for r in sql.conn.execute(
            f"SELECT id FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk))
    return out


def link_ties(sql: "SQLStore", user: str, cur: Callable[[str], tuple[str, list]]) -> Iterator[tuple]:
    """``(entity, entity, strength)`` for each current typed link between two current memories
    of the user (``contradicts`` left out) and each pair of entities those two memories
    mention (one from each end, two different entities)."""
    parts = [cur(alias) for alias in ("l", "a", "b")]
    where = " AND ".join(frag for frag, _ in parts)
    return sql.conn.execute(
        "SELECT ka.node_id, kb.node_id, l.weight FROM kg_edges l JOIN memories a ON a.id = l.src "
        "JOIN memories b ON b.id = l.dst JOIN kg_mentions ka ON ka.memory_id = a.id "
        "JOIN kg_mentions kb ON kb.memory_id = b.id WHERE l.predicate != 'contradicts' AND a.user_id = ? "
        f"AND b.user_id = ? AND ka.node_id != kb.node_id AND {where} ORDER BY l.id, ka.node_id, kb.node_id",
        (user, user, *[a for _, args in parts for a in args]))


def mention_counts(sql: "SQLStore", node_ids: list[str], cur: Callable[[str], tuple[str, list]]) -> dict[str, int]:
    """node id -> how many current memories mention it."""
    m_cur, m_args = cur("m")
    out: dict[str, int] = {}
    for start in range(0, len(node_ids), 500):
        chunk = node_ids[start:start + 500]
        out.update(sql.conn.execute(
            f"SELECT k.node_id, count(*) FROM kg_mentions k JOIN memories m ON m.id = k.memory_id "
            f"WHERE k.node_id IN ({','.join('?' * len(chunk))}) AND {m_cur} GROUP BY k.node_id",
            (*chunk, *m_args)).fetchall())
    return out


def nodes_by_id(sql: "SQLStore", node_ids: list[str]) -> dict[str, dict]:
    """id -> ``{id, type, name}`` of those nodes."""
    out: dict[str, dict] = {}
    for start in range(0, len(node_ids), 500):
        chunk = node_ids[start:start + 500]
        for row in sql.rows(f"SELECT id, type, name FROM kg_nodes WHERE id IN ({','.join('?' * len(chunk))})",
                            tuple(chunk)):
            out[row["id"]] = row
    return out


def memory_briefs(sql: "SQLStore", memory_ids: list[str]) -> dict[str, dict]:
    """id -> ``{id, text, type, created_at}`` of those memories."""
    out: dict[str, dict] = {}
    for start in range(0, len(memory_ids), 500):
        chunk = memory_ids[start:start + 500]
        for row in sql.rows("SELECT id, text, type, created_at FROM memories "
                            f"WHERE id IN ({','.join('?' * len(chunk))})", tuple(chunk)):
            out[row["id"]] = row
    return out
