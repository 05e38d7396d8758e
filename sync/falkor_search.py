"""Graphiti's hybrid search, spoken to FalkorDB directly: the read path of ``bm recall --remote``
for a graphiti remote, without importing graphiti-core, falkordb or redis (together 1-3 s of
imports on a cold CLI call, more than the 700 ms budget; this module needs ``socket`` only).

The same four Cypher queries graphiti-core 0.31 sends for the ``EDGE_HYBRID_SEARCH_RRF`` /
``NODE_HYBRID_SEARCH_RRF`` recipes on FalkorDB (``search_utils.edge_fulltext_search``,
``edge_similarity_search``, ``node_fulltext_search``, ``node_similarity_search``, each asked
for ``2 * limit`` candidates, cosine candidates above graphiti's ``DEFAULT_MIN_SCORE`` 0.6),
with the same fulltext query (``driver/falkordb/fulltext.py``: separators to spaces, graphiti's
stop words dropped, words OR-ed, the group as a tag filter) and the same filter (current facts:
``expired_at IS NULL``; the user's group), merged by graphiti's ``rrf`` (rank constant 1, ties
in first-seen order, fulltext list first).  Only the RETURN lists are narrower: the fields a
:class:`~brandmind.sync.mirror.RemoteHit` needs, not every property with its embedding.
``tests/test_remote_cold.py`` checks the top facts against graphiti-core's own search.

Protocol: RESP2 over one TCP socket (``AUTH``, then ``GRAPH.RO_QUERY`` pipelined: the four
queries go out in one write, the vector ones after the query is embedded).  ``RO_QUERY`` on a
graph that does not exist is an error ("empty key") and creates nothing: that user has no
graph, so no hits.  Parameters travel in the ``CYPHER name=value ...`` header as the falkordb
client writes them (strings double-quoted with ``\\`` and ``"`` escaped).
"""
from __future__ import annotations

import re
import socket
import time
from typing import Any, Callable, Sequence

# graphiti_core.driver.falkordb.STOPWORDS (0.31.2)
STOPWORDS = frozenset("a is the an and are as at be but by for if in into it no not of on or such that their "
                      "then there these they this to was will with".split())
_SEPARATORS = str.maketrans({c: " " for c in ",.<>{}[]\"':;!@#$%^&*()-+=~?|/\\`"})
MAX_QUERY_LENGTH = 128
MIN_SCORE = 0.6

_COSINE = "(2 - vec.cosineDistance({field}, vecf32($search_vector)))/2"
_EDGE_FIELDS = ("e.uuid AS uuid, e.fact AS fact, e.valid_at AS valid_at, e.invalid_at AS invalid_at, "
                "e.bm_id AS bm_id")
_NODE_FIELDS = "n.uuid AS uuid, n.name AS name, n.summary AS summary"
_CURRENT = " WHERE ((e.expired_at IS NULL)) AND e.group_id IN $group_ids "
EDGE_FULLTEXT = ("CALL db.idx.fulltext.queryRelationships('RELATES_TO', $query) YIELD relationship AS rel, score "
                 "WITH rel AS e, score, startNode(rel) AS n, endNode(rel) AS m WHERE n:Entity AND m:Entity "
                 "WITH e, score, n, m" + _CURRENT + "WITH e, score, n, m RETURN " + _EDGE_FIELDS +
                 " ORDER BY score DESC LIMIT $limit")
EDGE_COSINE = ("MATCH (n:Entity)-[e:RELATES_TO]->(m:Entity)" + _CURRENT + "WITH DISTINCT e, n, m, " +
               _COSINE.format(field="e.fact_embedding") + " AS score WHERE score > $min_score RETURN " +
               _EDGE_FIELDS + " ORDER BY score DESC LIMIT $limit")
NODE_FULLTEXT = ("CALL db.idx.fulltext.queryNodes('Entity', $query) YIELD node AS n, score "
                 "WHERE n.group_id IN $group_ids WITH n, score ORDER BY score DESC LIMIT $limit RETURN " + _NODE_FIELDS)
NODE_COSINE = ("MATCH (n:Entity) WHERE n.group_id IN $group_ids WITH n, " + _COSINE.format(field="n.name_embedding") +
               " AS score WHERE score > $min_score RETURN " + _NODE_FIELDS + " ORDER BY score DESC LIMIT $limit")


class RespError(Exception):
    """An error reply from the server (its text, e.g. ``WRONGPASS ...``)."""


def fulltext_query(query: str, group: str) -> str:
    """graphiti's FalkorDB fulltext query for ``query`` in ``group`` ('' when nothing is left)."""
    words = [w for w in query.translate(_SEPARATORS).split() if w.lower() not in STOPWORDS]
    if not words:
        return ""
    ored = " | ".join(words)
    if len(ored.split(" ")) + 1 >= MAX_QUERY_LENGTH:
        return ""
    escaped = re.sub(r"([^a-zA-Z0-9])", r"\\\1", group)
    return f'(@group_id:"{escaped}") ({ored})'


def rrf(lists: Sequence[Sequence[str]]) -> list[tuple[str, float]]:
    """graphiti's reciprocal-rank fusion (rank constant 1): (uuid, score), best first."""
    scores: dict[str, float] = {}
    for ranked in lists:
        for i, key in enumerate(ranked):
            scores[key] = scores.get(key, 0.0) + 1.0 / (i + 1)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def _value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def with_params(cypher: str, params: dict[str, Any]) -> str:
    """``CYPHER k=v ... <cypher>``: FalkorDB's parameter header."""
    return "CYPHER " + " ".join(f"{k}={_value(v)}" for k, v in params.items()) + " " + cypher


class Conn:
    """One RESP2 connection.  Any network error or timeout leaves it unusable (``broken``):
    a reply that arrives late would belong to the wrong request."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=max(0.001, timeout))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")
        self.broken = False

    def send(self, *commands: Sequence[str], deadline: float) -> None:
        out = []
        for args in commands:
            out.append(b"*%d\r\n" % len(args))
            for a in args:
                b = a.encode("utf-8")
                out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self._io(lambda: self.sock.sendall(b"".join(out)), deadline)

    def read(self, deadline: float) -> Any:
        """The next reply; an error reply is returned as a RespError (not raised), so a
        pipeline's remaining replies are still read."""
        return self._io(self._reply, deadline)

    def command(self, *args: str, deadline: float) -> Any:
        self.send(args, deadline=deadline)
        reply = self.read(deadline)
        if isinstance(reply, RespError):
            raise reply
        return reply

    def _io(self, fn: Callable[[], Any], deadline: float) -> Any:
        left = deadline - time.monotonic()
        if left <= 0:
            self.broken = True
            raise TimeoutError("no time left")
        try:
            self.sock.settimeout(left)
            return fn()
        except BaseException:
            self.broken = True
            raise

    def _reply(self) -> Any:
        line = self.file.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("the server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode("utf-8", "replace")
        if kind == b"-":
            return RespError(rest.decode("utf-8", "replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2].decode("utf-8", "replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ConnectionError(f"not a RESP reply: {line[:40]!r}")

    def close(self) -> None:
        self.broken = True
        for part in (self.file, self.sock):
            try:
                part.close()
            except OSError:
                pass


def _rows(reply: Any) -> list[dict[str, Any]]:
    """A verbose GRAPH.QUERY reply ``[header, rows, stats]`` as dicts (scalars only)."""
    if isinstance(reply, RespError):
        raise reply
    if not isinstance(reply, list) or len(reply) < 2:
        raise RespError(f"unexpected reply to GRAPH.RO_QUERY: {str(reply)[:80]}")
    header = [h if isinstance(h, str) else h[-1] for h in reply[0]]
    return [dict(zip(header, row)) for row in reply[1]]


def _missing_graph(reply: Any) -> bool:
    return isinstance(reply, RespError) and "empty key" in str(reply)


def hybrid_search(conn: Conn, group: str, query: str, vector: Callable[[], Sequence[float]], limit: int,
                  deadline: float) -> tuple[list[tuple[dict, float]], list[tuple[dict, float]]]:
    """(edges, nodes) of ``group``, each ``(row, rrf score)`` best first, at most ``limit``
    of each (rows: uuid, fact, valid_at, invalid_at, bm_id / uuid, name, summary).  ``vector()``
    embeds the query; it is called after the fulltext queries are on their way."""
    ft = fulltext_query(query, group)
    base = {"limit": 2 * limit, "group_ids": [group]}
    out = []
    if ft:
        out = [("GRAPH.RO_QUERY", group, with_params(q, {"query": ft, **base})) for q in (EDGE_FULLTEXT, NODE_FULLTEXT)]
        conn.send(*out, deadline=deadline)
    vec = [float(x) for x in vector()]
    cos = {"search_vector": vec, "min_score": MIN_SCORE, **base}
    conn.send(*[("GRAPH.RO_QUERY", group, with_params(q, cos)) for q in (EDGE_COSINE, NODE_COSINE)], deadline=deadline)
    replies = [conn.read(deadline) for _ in range(len(out) + 2)]
    if any(_missing_graph(r) for r in replies):
        return [], []
    lists = [_rows(r) for r in replies]
    edge_lists = [lists[0], lists[2]] if ft else [lists[0]]
    node_lists = [lists[1], lists[3]] if ft else [lists[1]]

    def fuse(ranked: list[list[dict]]) -> list[tuple[dict, float]]:
        by_uuid = {row["uuid"]: row for rows in ranked for row in rows}
        return [(by_uuid[u], s) for u, s in rrf([[row["uuid"] for row in rows] for rows in ranked])][:limit]

    return fuse(edge_lists), fuse(node_lists)
