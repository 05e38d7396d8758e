"""``GraphitiSink``: a self-hosted Graphiti graph on FalkorDB as a bm mirror remote (a
:class:`~brandmind.sync.mirror.GraphSink`, wrapped by ``MirrorRemote``).

What it writes, all through graphiti-core's own save path (``add_nodes_and_edges_bulk``:
the ``EntityNode`` / ``EntityEdge`` / ``EpisodicNode`` save queries) with PRECOMPUTED
embeddings, so no LLM is ever needed: ``add_episode`` (which extracts with an LLM) is never
called, and the graphiti "clients" this module hands to graphiti are local stand-ins (the
embedder calls bm's own ``embed`` callable; the LLM and the cross-encoder raise if anything
asks for them).  Nothing but the configured FalkorDB is contacted; graphiti's telemetry is
switched off (``GRAPHITI_TELEMETRY_ENABLED=false``) before graphiti is imported.

Layout (FalkorDB: ``group_id`` selects a separate graph, one per bm user)::

    graph <database>_<user>          one bm user (the group_id; see group_id())
      (:Entity {uuid, name, name_embedding, bm_made: true})   subject / object of a fact
      -[:RELATES_TO {uuid, name, fact, fact_embedding, valid_at, invalid_at, created_at,
                     expired_at, bm_id, bm_user}]->          one bm memory or kg edge
      (:Episodic {uuid, name: <bead id>, content: "<role or name>: <text>"})   one bead
    graph <database>_sync_state      (:BmHead {replica, seq}): how far each replica's ops
                                     were mirrored (get_heads / put_heads, which
                                     MirrorRemote uses when a sink has them)

* Users to graphs: a user id made only of ``[A-Za-z0-9-]`` (at most 64) is used as it is
  (``bm_ann``); any other id (underscores, dots, spaces, unicode, longer) becomes a slug of
  it plus 16 hex digits of its SHA-256 (``bm_ann-lee_1f2e...``).  The two forms cannot meet
  (only the second has a second ``_``), nor can ``<database>_sync_state`` meet either.
* Ids: node uuids are uuid5 of (group, the node name case-folded, spaces collapsed), edge
  uuids uuid5 of (group, bm id), episode uuids uuid5 of (group, bead id): pushing again
  upserts (graphiti's save queries MERGE on the uuid) and never duplicates.  A fact whose
  subject or object changed is moved (the old relationship is deleted first).
* Bi-temporal fields map one to one: world time ``valid_at`` / ``invalid_at``, system time
  ``created_at`` / ``expired_at``.  ``keeps_history = True``: a retired fact stays, with
  ``expired_at`` (and ``invalid_at`` when bm has one) set; a forgotten one is deleted, and
  so is a node bm made that no relationship uses any more (no name outlives a forget).
  A forgotten turn's episode is deleted (``delete_messages``, by its uuid).
* ``list_facts`` lists every RELATES_TO of the user's graph; ``local_id`` is the edge's
  ``bm_id`` attribute, ``None`` for facts graphiti (or anyone else) made.
* ``search`` runs graphiti's hybrid search (BM25 fulltext + cosine similarity, RRF
  reranked: the ``EDGE_HYBRID_SEARCH_RRF`` / ``NODE_HYBRID_SEARCH_RRF`` recipes) on the
  user's graph with the query embedded by bm's ``embed``; only current facts
  (``expired_at`` unset); nodes only when they have a summary (bm's own nodes are bare
  names: their facts are the edges).  ``timeout`` bounds the whole call.  It sends
  graphiti's own queries over a plain socket (sync/falkor_search.py, its connection kept
  for the next call) instead of importing graphiti-core, falkordb and redis, which take
  longer to import than a cold ``bm recall --remote`` may wait; ``search_graphiti`` is the
  same search through graphiti-core (the reference tests/test_remote_cold.py compares).
  Writes (the push) stay on graphiti-core's save path.
* Async: graphiti and the falkordb client are asyncio; each sink runs ONE private event loop
  in a daemon thread for its whole life and every public method submits a coroutine to it
  and waits (``asyncio.run_coroutine_threadsafe``).  This keeps one connection pool (an
  asyncio redis pool is bound to the loop that made it: ``asyncio.run`` per call would have
  to reconnect every time), works when the caller itself runs an event loop, and makes
  ``future.result(timeout)`` a hard bound.  ``close()`` ends the loop.
* Errors: connection errors, timeouts and "loading" answers are retried (capped exponential
  backoff with full jitter, a few tries within a bounded time; every write is an upsert,
  so a retry after a lost answer is harmless), then :class:`RemoteDown`.  Refused
  credentials are a ConfigError naming the password variable; other errors a BMError.
* Secrets: the password is read from the environment variable NAMED by ``password_env``
  at connect time; it is never stored.  ``key`` arguments (idempotency keys) are accepted
  for the GraphSink protocol and not needed here: every write is an idempotent upsert.
"""
from __future__ import annotations

import hashlib
import re
import time
import uuid as uuidlib
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

from brandmind.errors import ConfigError, InvalidInput

from .graphiti_conn import TRIES, GraphitiConnection, bm_embedder, graphiti_clients, graphiti_env

KIND = "graphiti"
STATE_GRAPH_SUFFIX = "sync_state"
_PLAIN_USER = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_DATABASE = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_NS = uuidlib.UUID("6f1c9a53-2b7e-5d0a-9c41-8e3f6a2b7d15")  # bm's namespace for graphiti uuids
_NAME_CACHE = 4096    # node-name embeddings kept per sink



def group_id(user: str, database: str = "bm") -> str:
    """The graphiti group (= FalkorDB graph name) of a bm user: ``<database>_<user>`` when the
    user id is made of ``[A-Za-z0-9-]`` (at most 64), else ``<database>_<slug>_<16 hex of
    sha256(user)>`` (graphiti allows only ``[A-Za-z0-9_-]`` in a group id)."""
    if not isinstance(user, str) or not user:
        raise InvalidInput(f"invalid user {user!r}", hint="a user is a non-empty string")
    if _PLAIN_USER.match(user):
        return f"{database}_{user}"
    slug = re.sub(r"[^A-Za-z0-9-]+", "-", user).strip("-")[:40] or "u"
    return f"{database}_{slug}_{hashlib.sha256(user.encode('utf-8')).hexdigest()[:16]}"


def node_uuid(group: str, name: str) -> str:
    key = " ".join(name.split()).casefold()
    return str(uuidlib.uuid5(_NS, f"{group}\x00node\x00{key}"))


def edge_uuid(group: str, local_id: str) -> str:
    return str(uuidlib.uuid5(_NS, f"{group}\x00edge\x00{local_id}"))


def episode_uuid(group: str, local_id: str) -> str:
    return str(uuidlib.uuid5(_NS, f"{group}\x00episode\x00{local_id}"))


def _to_dt(value: str | None) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value
    else:
        try:
            dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(f"not an ISO-8601 time: {value!r}", hint="use e.g. 2025-01-31T12:00:00Z") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def _iso(value: Any) -> str | None:
    """A stored time (ISO string or datetime) as bm writes them: UTC, milliseconds, ``Z``."""
    if value is None or value == "":
        return None
    try:
        dt = _to_dt(value if isinstance(value, (str, datetime)) else str(value))
    except InvalidInput:
        return str(value)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z") if dt else None


class GraphitiSink(GraphitiConnection):
    """A Graphiti graph on FalkorDB as a mirror remote (see the module docstring).

    ``embed(text) -> list[float]`` embeds node names, facts pushed without an embedding and
    search queries (bm passes its own embedder: the remote's vectors are bm's vectors).
    ``database`` names this mirror's namespace on the server: every graph it touches is
    ``<database>_...`` (two bm stores sharing one FalkorDB use two names)."""

    kind = KIND
    keeps_history = True      # a retired fact stays, with expired_at / invalid_at set
    wants_embeddings = True   # MirrorRemote hands over the store's own vectors

    def __init__(self, name: str, embed: Callable[[str], Sequence[float]], *, host: str = "127.0.0.1",
                 port: int = 6379, username: str | None = None, password_env: str | None = None,
                 database: str = "bm", timeout: float = 30.0, connect_timeout: float = 5.0,
                 tries: int = TRIES) -> None:
        import importlib.util

        missing = [m for m in ("graphiti_core", "falkordb") if importlib.util.find_spec(m) is None]
        if missing:
            raise ConfigError(f"graphiti remote {name!r} needs {' and '.join(missing)}, which is not installed",
                              hint="pip install 'brandmind[graphiti]'")
        if not isinstance(database, str) or not _DATABASE.match(database):
            raise ConfigError(f"graphiti remote {name!r}: invalid database name {database!r}",
                              hint="use 1-64 letters, digits or '-' (it prefixes every graph name)")
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError(f"graphiti remote {name!r}: invalid port {port!r}", hint="a TCP port, e.g. 6379")
        super().__init__(name, host=host, port=port, username=username, password_env=password_env,
                         timeout=timeout, connect_timeout=connect_timeout, tries=tries)
        self.database = database
        self._embed = embed
        self._names: dict[str, list[float]] = {}

    # -- naming -------------------------------------------------------------------------------
    def group_id(self, user: str) -> str:
        return group_id(user, self.database)

    @property
    def state_graph(self) -> str:
        return f"{self.database}_{STATE_GRAPH_SUFFIX}"

    def _name_vector(self, name: str) -> list[float]:
        key = " ".join(name.split())
        vec = self._names.get(key)
        if vec is None:
            vec = [float(x) for x in self._embed(key)]
            if len(self._names) >= _NAME_CACHE:
                self._names.clear()
            self._names[key] = vec
        return vec

    # -- GraphSink (ping: graphiti_conn.py) ------------------------------------------------------
    def put_facts(self, facts: list, key: str = "") -> dict[str, str]:
        """Upsert facts (grouped per user graph); returns local_id -> edge uuid."""
        out: dict[str, str] = {}
        by_group: dict[str, list] = {}
        for f in facts:
            by_group.setdefault(self.group_id(f.user), []).append(f)
        for group, batch in by_group.items():
            nodes: dict[str, Any] = {}
            edges: list[Any] = []
            for f in batch:
                e_uuid = edge_uuid(group, f.local_id)
                src = self._node(group, f.source or f.user, f.created_at, nodes)
                dst = self._node(group, f.target or f.user, f.created_at, nodes)
                edges.append(self._edge(group, e_uuid, f, src, dst))
                out[f.local_id] = e_uuid
            self._prepare(group)
            self._call(f"writing {len(edges)} fact(s) for {group}",
                       lambda g=group, n=list(nodes.values()), e=edges: self._write(g, n, e, []))
        return out

    def _node(self, group: str, name: str, created_at: str | None, acc: dict) -> str:
        from graphiti_core.nodes import EntityNode

        name = " ".join(str(name).split()) or "?"
        n_uuid = node_uuid(group, name)
        if n_uuid not in acc:
            acc[n_uuid] = EntityNode(uuid=n_uuid, name=name, group_id=group, labels=[],
                                     name_embedding=self._name_vector(name),
                                     created_at=_to_dt(created_at) or datetime(1970, 1, 1, tzinfo=timezone.utc),
                                     attributes={"bm_made": True})
        return n_uuid

    def _edge(self, group: str, e_uuid: str, f: Any, src: str, dst: str) -> Any:
        from graphiti_core.edges import EntityEdge

        created = _to_dt(f.created_at) or _to_dt(f.valid_at) or datetime.now(timezone.utc)
        emb = f.embedding if f.embedding is not None else self._embed(f.text)
        return EntityEdge(uuid=e_uuid, group_id=group, source_node_uuid=src, target_node_uuid=dst,
                          created_at=created, name=f.name or "RELATES_TO", fact=f.text,
                          fact_embedding=[float(x) for x in emb], episodes=[],
                          valid_at=_to_dt(f.valid_at), invalid_at=_to_dt(f.invalid_at),
                          expired_at=_to_dt(f.expired_at),
                          attributes={"bm_id": f.local_id, "bm_user": f.user})

    def _prepare(self, group: str) -> None:
        """Build a graph's indices once, as a call with its own deadline: graphiti's index
        queries, one by one, so a busy server's setup does not eat the first write's deadline."""
        if group not in self._indexed:
            async def build() -> None:
                await self._ensure_indices(self._driver(group), group)
            self._call(f"building the indices of {group}", build)

    async def _write(self, group: str, nodes: list, edges: list, episodes: list) -> None:
        from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk

        driver = self._driver(group)
        await self._ensure_indices(driver, group)  # built by _prepare already; a no-op then
        if edges:
            # a fact whose subject or object changed: drop the old relationship (MERGE would add one)
            await driver.execute_query(
                "UNWIND $moves AS m MATCH (a:Entity)-[e:RELATES_TO {uuid: m.uuid}]->(b:Entity) "
                "WHERE a.uuid <> m.src OR b.uuid <> m.dst DELETE e",
                moves=[{"uuid": e.uuid, "src": e.source_node_uuid, "dst": e.target_node_uuid} for e in edges])
        await add_nodes_and_edges_bulk(driver, episodes, [], nodes, edges, bm_embedder(self._embed))
        if edges:
            await self._collect_orphans(driver)

    @staticmethod
    async def _collect_orphans(driver: Any) -> None:
        await driver.execute_query("MATCH (n:Entity) WHERE n.bm_made = true AND NOT (n)--() DELETE n")

    def put_messages(self, messages: list, key: str = "") -> None:
        """Upsert beads as graphiti episodes (source ``message``), one per bead."""
        from graphiti_core.nodes import EpisodeType, EpisodicNode

        by_group: dict[str, list] = {}
        for m in messages:
            group = self.group_id(m.user)
            at = _to_dt(m.created_at) or datetime.now(timezone.utc)
            by_group.setdefault(group, []).append(EpisodicNode(
                uuid=episode_uuid(group, m.local_id), name=m.local_id, group_id=group, labels=[],
                source=EpisodeType.message, source_description="bm bead",
                content=f"{m.name or m.role}: {m.content}", valid_at=at, created_at=at, entity_edges=[]))
        for group, episodes in by_group.items():
            self._prepare(group)
            self._call(f"writing {len(episodes)} message(s) for {group}",
                       lambda g=group, e=episodes: self._write(g, [], [], e))

    def delete_facts(self, user: str, remote_uuids: list[str], key: str = "") -> None:
        """Delete facts (edges) or messages (episodes) by uuid; absent ones are fine."""
        uuids = [str(u) for u in remote_uuids]
        if not uuids:
            return
        group = self.group_id(user)

        async def run() -> None:
            from graphiti_core.edges import EntityEdge

            if not await self._exists(group):
                return
            driver = self._driver(group)
            await EntityEdge.delete_by_uuids(driver, uuids)
            await driver.execute_query("MATCH (n:Episodic) WHERE n.uuid IN $uuids DETACH DELETE n", uuids=uuids)
            await self._collect_orphans(driver)

        self._call(f"deleting {len(uuids)} fact(s) of {group}", run)

    def delete_messages(self, user: str, local_ids: list[str], key: str = "") -> None:
        """Delete the episodes of forgotten beads (uuid5 of group and bead id, as
        put_messages made them); absent ones (never pushed, already deleted) are fine."""
        group = self.group_id(user)
        uuids = [episode_uuid(group, str(i)) for i in local_ids]
        if not uuids:
            return

        async def run() -> None:
            if not await self._exists(group):
                return
            await self._driver(group).execute_query(
                "MATCH (n:Episodic) WHERE n.uuid IN $uuids DETACH DELETE n", uuids=uuids)

        self._call(f"deleting {len(uuids)} message(s) of {group}", run)

    def delete_user(self, user: str, key: str = "") -> None:
        """Delete the user's whole graph (absent = fine)."""
        group = self.group_id(user)

        async def run() -> None:
            if await self._exists(group):
                await self._connect().select_graph(group).delete()
            self._indexed.discard(group)

        self._call(f"deleting {group}", run)

    def list_facts(self, user: str) -> list:
        """Every fact (RELATES_TO) of the user's graph, retired ones included."""
        from .graphsink import RemoteFact

        group = self.group_id(user)

        async def run() -> list:
            if not await self._exists(group):
                return []
            records, _, _ = await self._driver(group).execute_query(
                "MATCH (n:Entity)-[e:RELATES_TO]->(m:Entity) RETURN e.uuid AS uuid, e.fact AS fact, "
                "e.name AS name, n.name AS source, m.name AS target, e.valid_at AS valid_at, "
                "e.invalid_at AS invalid_at, e.created_at AS created_at, e.expired_at AS expired_at, "
                "e.bm_id AS bm_id ORDER BY e.uuid")
            return records

        rows = self._call(f"listing the facts of {group}", run)
        return [RemoteFact(uuid=r["uuid"], user=user, text=r["fact"] or "", name=r["name"] or "RELATES_TO",
                           source=r["source"] or "", target=r["target"] or "", valid_at=_iso(r["valid_at"]),
                           invalid_at=_iso(r["invalid_at"]), created_at=_iso(r["created_at"]),
                           expired_at=_iso(r["expired_at"]), local_id=r["bm_id"] or None)
                for r in rows]

    def search(self, user: str, query: str, limit: int = 10, timeout: float = 0.7) -> list:
        """graphiti's hybrid search (BM25 + cosine, RRF) over the user's current facts and
        summarised nodes; at most ``limit`` hits, best first; RemoteDown after ``timeout``.
        Spoken to FalkorDB directly (sync/falkor_search.py: no graphiti-core, falkordb or redis
        import, so a cold ``bm recall --remote`` fits its budget); the same queries and fusion
        as :meth:`search_graphiti`."""
        from . import falkor_search as fs
        from .graphsink import RemoteHit

        deadline = time.monotonic() + float(timeout)
        if not query or not query.strip() or limit <= 0:
            return []
        group = self.group_id(user)
        edges, nodes = self._direct(f"searching {group}", deadline, lambda conn: fs.hybrid_search(
            conn, group, query, lambda: self._embed(query), limit, deadline))
        hits = [RemoteHit(uuid=e["uuid"], text=e["fact"] or "", score=s, kind="edge", valid_at=_iso(e["valid_at"]),
                          invalid_at=_iso(e["invalid_at"]), local_id=e["bm_id"] or None) for e, s in edges]
        hits += [RemoteHit(uuid=n["uuid"], text=f"{n['name']}: {n['summary']}", score=s, kind="node",
                           valid_at=None, invalid_at=None, local_id=None)
                 for n, s in nodes if (n["summary"] or "").strip()]
        hits.sort(key=lambda h: -h.score)
        return hits[:limit]


    def search_graphiti(self, user: str, query: str, limit: int = 10, timeout: float = 0.7) -> list:
        """The same search as :meth:`search`, through graphiti-core's own ``search`` (the
        reference the direct search is checked against; a warm process only: importing
        graphiti-core takes longer than the recall budget)."""
        from .graphsink import RemoteHit

        deadline = time.monotonic() + float(timeout)
        if not query or not query.strip() or limit <= 0:
            return []
        group = self.group_id(user)
        vector = [float(x) for x in self._embed(query)]

        async def run() -> Any:
            import asyncio

            graphiti_env()
            from graphiti_core.search.search import search
            from graphiti_core.search.search_config import (EdgeReranker, EdgeSearchConfig, EdgeSearchMethod,
                                                            NodeReranker, NodeSearchConfig, NodeSearchMethod,
                                                            SearchConfig)
            from graphiti_core.search.search_filters import ComparisonOperator, DateFilter, SearchFilters

            if not await self._exists(group):
                return None
            driver = self._driver(group)
            config = SearchConfig(
                edge_config=EdgeSearchConfig(search_methods=[EdgeSearchMethod.bm25, EdgeSearchMethod.cosine_similarity],
                                             reranker=EdgeReranker.rrf),
                node_config=NodeSearchConfig(search_methods=[NodeSearchMethod.bm25, NodeSearchMethod.cosine_similarity],
                                             reranker=NodeReranker.rrf),
                limit=limit)
            current = SearchFilters(expired_at=[[DateFilter(comparison_operator=ComparisonOperator.is_null)]])
            coro = search(graphiti_clients(driver, self._embed), query, [group], config, current,
                          query_vector=vector, driver=driver)
            return await asyncio.wait_for(coro, max(0.001, deadline - time.monotonic()))

        res = self._call(f"searching {group}", run, deadline=deadline)
        if res is None:
            return []
        hits = [RemoteHit(uuid=e.uuid, text=e.fact, score=float(s), kind="edge", valid_at=_iso(e.valid_at),
                          invalid_at=_iso(e.invalid_at), local_id=(e.attributes or {}).get("bm_id"))
                for e, s in zip(res.edges, res.edge_reranker_scores or [0.0] * len(res.edges))]
        hits += [RemoteHit(uuid=n.uuid, text=f"{n.name}: {n.summary}", score=float(s), kind="node",
                           valid_at=None, invalid_at=None, local_id=None)
                 for n, s in zip(res.nodes, res.node_reranker_scores or [0.0] * len(res.nodes))
                 if (n.summary or "").strip()]
        hits.sort(key=lambda h: -h.score)
        return hits[:limit]

    # -- heads (optional MirrorRemote hooks: the mirror's version vector lives in the remote) ------
    def load_heads(self) -> dict[str, int]:
        """replica -> highest seq mirrored (graph ``<database>_sync_state``; {} when none)."""
        async def run() -> list:
            if not await self._exists(self.state_graph):
                return []
            records, _, _ = await self._driver(self.state_graph).execute_query(
                "MATCH (h:BmHead) RETURN h.replica AS replica, h.seq AS seq")
            return records

        return {r["replica"]: int(r["seq"]) for r in self._call("reading the mirror heads", run)
                if r["replica"] and r["seq"] is not None}

    def save_heads(self, heads: dict[str, int]) -> None:
        """Merge ``heads`` into the stored ones, per replica the max (a head never goes back, and
        two devices saving at once cannot undo each other: one query, applied atomically)."""
        rows = [{"replica": str(r), "seq": int(s)} for r, s in sorted(heads.items()) if int(s) > 0]
        if not rows:
            return

        async def run() -> None:
            driver = self._driver(self.state_graph)
            await driver.execute_query(
                "UNWIND $rows AS r MERGE (h:BmHead {replica: r.replica}) "
                "SET h.seq = CASE WHEN h.seq IS NULL OR h.seq < r.seq THEN r.seq ELSE h.seq END",
                rows=rows)

        self._call("saving the mirror heads", run)

    # the names MirrorRemote looks for
    get_heads = load_heads
    put_heads = save_heads


