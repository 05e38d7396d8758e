"""A loopback stand-in for Zep's v4 API, for driving the real ``zep-cloud`` SDK in tests.

Zep itself cannot run here (the Community Edition is unsupported and Docker-only, the cloud
is off-network), so this server speaks the subset of ``/api/v4`` that ``brandmind.sync.zep``
calls, keeps users, threads, messages, nodes and edges in memory, and CHECKS every request
(a failed check answers 400 and is appended to ``violations``; tests assert it stays empty):

* method + path: a known route, else 404 and a violation;
* ``Authorization: Api-Key <key>``: what the SDK sends for the API key
  (``zep_cloud/core/client_wrapper.py``), equal to the configured key, else 401;
* ``Idempotency-Key`` on every non-GET request; a replay of a key returns the first answer
  without writing again; a key reused for a DIFFERENT request is a violation (422);
* the JSON body, validated with the SDK's own pydantic models (``EdgeInput``,
  ``AddMessage``, ``NodeInput``, ``EdgeListFilters``, ``NodeListFilters``,
  ``EdgeSearchFilters``, ``NodeSearchFilters``, ``GraphContentPolicyRequest``) inside
  request envelopes that forbid unknown keys, with no unknown keys inside the SDK models
  either (they allow extras; ``model_extra`` must be empty), plus what the API documents:
  1-100 edges per add, UPPER_SNAKE edge names, ISO-8601 times, message roles, at most 10
  scalar metadata keys, no client-set message uuid, node refs that exist, page sizes <= 100,
  comma-free ``in`` filter values;
* every response is checked against the SDK's response model before it is sent.

Every request is recorded in ``requests`` (method, path, query, headers, body, status,
replayed, fault).  Fault injection: ``fault(...)`` queues scripted faults for the next
matching request: a status before anything is done (429 with ``Retry-After``, 500, 503, 409),
``drop=True`` (commit, then close the connection without answering), ``delay=s`` (commit,
then answer after s seconds: a client timeout after the commit), ``drop_before=True``.

Zep's own extraction is simulated by ``add_extracted_edge`` (an edge without bm metadata)
and ``invalidate_edge`` (sets invalid_at / expired_at, as Zep does on a contradiction).
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid as uuidlib
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, urlsplit

ROLES = ("system", "assistant", "user", "function", "tool")
_FACT_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _is_iso(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


class Invalid(Exception):
    def __init__(self, status: int, message: str, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


@dataclass
class Request:
    method: str
    path: str
    query: dict
    headers: dict
    body: Any
    status: int = 0
    replayed: bool = False
    fault: str | None = None


@dataclass
class Fault:
    status: int | None = None
    retry_after: str | None = None
    drop: bool = False
    delay: float | None = None
    drop_before: bool = False
    method: str | None = None
    path: str | None = None  # a regex searched in the path

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (self.path is None or re.search(self.path, path) is not None)

    def describe(self) -> str:
        if self.status:
            return f"status {self.status}" + (f" retry-after {self.retry_after}" if self.retry_after else "")
        if self.drop:
            return "drop after commit"
        if self.delay:
            return f"delay {self.delay}s after commit"
        return "drop before"


def _models() -> dict[str, Any]:
    """Request envelopes around the SDK's own models (extra keys forbidden)."""
    from typing import Dict, List

    from pydantic import BaseModel, ConfigDict, Field
    from zep_cloud.types import (AddMessage, EdgeInput, EdgeListFilters, EdgeSearchFilters,
                                 GraphContentPolicyRequest, NodeInput, NodeListFilters, NodeSearchFilters)

    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")

    class CreateUser(Strict):
        content_policy: Optional[GraphContentPolicyRequest] = None
        disable_default_ontology: Optional[bool] = None
        email: Optional[str] = None
        first_name: Optional[str] = None
        last_name: Optional[str] = None
        metadata: Optional[Dict[str, Any]] = None
        time_zone: Optional[str] = None
        user_id: Optional[str] = Field(default=None, max_length=500)

    class Lookup(Strict):
        graph_id: Optional[str] = None
        thread_id: Optional[str] = None
        user_id: Optional[str] = None

    class ListUsers(Strict):
        search: Optional[str] = None

    class CreateThread(Strict):
        user_uuid: str

    class AddMessages(Strict):
        messages: List[AddMessage] = Field(min_length=1)
        ignore_roles: Optional[List[str]] = None
        return_context: Optional[bool] = None
        strict_ontology: Optional[bool] = None

    class AddEdges(Strict):
        edges: List[EdgeInput] = Field(min_length=1, max_length=100)
        deduplicate: Optional[bool] = None

    class ListEdges(Strict):
        filters: Optional[EdgeListFilters] = None

    class AddNodes(Strict):
        nodes: List[NodeInput] = Field(min_length=1)

    class ListNodes(Strict):
        filters: Optional[NodeListFilters] = None

    class SearchEdges(Strict):
        query: str = Field(min_length=1)
        bfs_origin_node_uuids: Optional[List[str]] = None
        center_node_uuid: Optional[str] = None
        filter_low_quality_results: Optional[bool] = None
        filters: Optional[EdgeSearchFilters] = None
        mmr_lambda: Optional[float] = None
        reranker: Optional[str] = None

    class SearchNodes(SearchEdges):
        filters: Optional[NodeSearchFilters] = None  # type: ignore[assignment]

    return {"CreateUser": CreateUser, "Lookup": Lookup, "ListUsers": ListUsers, "CreateThread": CreateThread,
            "AddMessages": AddMessages, "AddEdges": AddEdges, "ListEdges": ListEdges, "AddNodes": AddNodes,
            "ListNodes": ListNodes, "SearchEdges": SearchEdges, "SearchNodes": SearchNodes}


def _no_extras(obj: Any, where: str = "body") -> None:
    """SDK models allow unknown keys; the real API rejects them: none may be present."""
    from pydantic import BaseModel

    if isinstance(obj, BaseModel):
        extra = getattr(obj, "model_extra", None) or {}
        if extra:
            raise Invalid(400, f"{where}: unknown field(s) {sorted(extra)}")
        for name in type(obj).model_fields:
            _no_extras(getattr(obj, name), f"{where}.{name}")
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            _no_extras(item, f"{where}[{i}]")


class ZepServer:
    """See the module docstring.  ``start()`` binds 127.0.0.1 on a free port."""

    def __init__(self, api_key: str = "zep-test-key") -> None:
        self.api_key = api_key
        self.lock = threading.RLock()
        self.requests: list[Request] = []
        self.violations: list[str] = []
        self.faults: deque[Fault] = deque()
        self.idem: dict[str, tuple[str, int, Any]] = {}
        self.users: dict[str, dict] = {}       # uuid -> User
        self.threads: dict[str, dict] = {}     # uuid -> Thread
        self.messages: dict[str, list[dict]] = {}
        self.nodes: dict[str, dict[str, dict]] = {}   # graph uuid -> node uuid -> Node
        self.edges: dict[str, dict[str, dict]] = {}   # graph uuid -> edge uuid -> Edge
        self.writes = 0
        self.models = _models()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> "ZepServer":
        server = self

        class Handler(_Handler):
            zep = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "ZepServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v4"

    # -- test helpers --------------------------------------------------------------------------------------
    def fault(self, status: int | None = None, *, retry_after: str | int | None = None, drop: bool = False,
              delay: float | None = None, drop_before: bool = False, method: str | None = None,
              path: str | None = None, times: int = 1) -> None:
        for _ in range(times):
            self.faults.append(Fault(status=status, retry_after=str(retry_after) if retry_after is not None else None,
                                     drop=drop, delay=delay, drop_before=drop_before, method=method, path=path))

    def user_by_id(self, user_id: str) -> dict | None:
        with self.lock:
            return next((u for u in self.users.values() if u.get("user_id") == user_id), None)

    def graph_of(self, user_id: str) -> str | None:
        u = self.user_by_id(user_id)
        return u["uuid"] if u else None

    def edges_of(self, user_id: str) -> list[dict]:
        g = self.graph_of(user_id)
        with self.lock:
            return [self._edge_out(g, e) for e in self.edges.get(g, {}).values()] if g else []

    def nodes_of(self, user_id: str) -> list[dict]:
        g = self.graph_of(user_id)
        with self.lock:
            return list(self.nodes.get(g, {}).values()) if g else []

    def messages_of(self, user_id: str) -> list[dict]:
        g = self.graph_of(user_id)
        with self.lock:
            out = []
            for t in self.threads.values():
                if t["user_uuid"] == g:
                    out.extend(self.messages.get(t["uuid"], []))
            return out

    def add_extracted_edge(self, user_id: str, fact: str, name: str, source: str, target: str, *,
                           valid_at: str | None = None, created_at: str | None = None) -> str:
        """An edge Zep made on its own (its extraction): no bm metadata."""
        g = self.graph_of(user_id)
        assert g, f"no Zep user {user_id}"
        with self.lock:
            s = self._new_node(g, source, {})
            t = self._new_node(g, target, {})
            e = self._new_edge(g, {"fact": fact, "fact_name": name, "valid_at": valid_at}, s, t)
            if created_at:
                e["created_at"] = created_at
            return e["uuid"]

    def invalidate_edge(self, edge_uuid: str, invalid_at: str | None = None, expired_at: str | None = None) -> None:
        with self.lock:
            for graph in self.edges.values():
                if edge_uuid in graph:
                    graph[edge_uuid]["invalid_at"] = invalid_at or now_iso()
                    graph[edge_uuid]["expired_at"] = expired_at or now_iso()
                    return
        raise KeyError(edge_uuid)

    def count(self, method: str, pattern: str, *, replayed: bool | None = None, status: int | None = None) -> int:
        return sum(1 for r in self.requests if r.method == method and re.search(pattern, r.path)
                   and (replayed is None or r.replayed == replayed) and (status is None or r.status == status))

    # -- state changes (hold the lock) -------------------------------------------------------------------------
    def _new_node(self, graph: str, name: str, attributes: dict, label: str | None = None,
                  summary: str | None = None) -> dict:
        node = {"uuid": str(uuidlib.uuid4()), "name": name, "attributes": attributes or {}, "labels": [label or "Entity"],
                "summary": summary or "", "created_at": now_iso(), "graph_uuid": graph, "episode_uuids": [],
                "episode_uuids_truncated": False}
        self.nodes.setdefault(graph, {})[node["uuid"]] = node
        return node

    def _new_edge(self, graph: str, e: dict, src: dict, dst: dict) -> dict:
        edge = {"uuid": str(uuidlib.uuid4()), "fact": e["fact"], "name": e["fact_name"],
                "attributes": e.get("attributes") or {}, "metadata": e.get("metadata") or {},
                "created_at": now_iso(), "valid_at": e.get("valid_at"), "invalid_at": e.get("invalid_at"),
                "expired_at": e.get("expired_at"), "source_node_uuid": src["uuid"], "target_node_uuid": dst["uuid"],
                "graph_uuid": graph, "episode_uuids": [str(uuidlib.uuid4())], "scope": "entity"}
        self.edges.setdefault(graph, {})[edge["uuid"]] = edge
        return edge

    def _edge_out(self, graph: str, edge: dict) -> dict:
        nodes = self.nodes.get(graph, {})
        out = {k: v for k, v in edge.items() if k != "metadata"}
        src, dst = nodes.get(edge["source_node_uuid"]), nodes.get(edge["target_node_uuid"])
        if src:
            out["source_node_name"] = src["name"]
        if dst:
            out["target_node_name"] = dst["name"]
        owner = self.users.get(graph) or next((u for u in self.users.values() if u["graph_uuid"] == graph), None)
        if owner:
            out["user_uuid"] = owner["uuid"]
        return out

    def _graph(self, ref: str) -> str:
        """A user graph by the user's uuid or the graph uuid (the API takes both)."""
        if ref in self.users:
            return ref
        for u in self.users.values():
            if u["graph_uuid"] == ref:
                return u["uuid"]
        raise Invalid(404, f"graph {ref} not found", "not_found")

    # -- request handling --------------------------------------------------------------------------------------
    def routes(self) -> list[tuple[str, str, Callable[..., tuple[int, Any]], str | None, str | None]]:
        """(method, path regex, handler, request model, response model)."""
        return [
            ("GET", r"^/api/v4/project$", self.h_project, None, "Project"),
            ("POST", r"^/api/v4/users$", self.h_create_user, "CreateUser", "User"),
            ("POST", r"^/api/v4/users/lookup$", self.h_lookup_user, "Lookup", "User"),
            ("POST", r"^/api/v4/users/list$", self.h_list_users, "ListUsers", "UserPage"),
            ("DELETE", r"^/api/v4/users/(?P<user>[^/]+)$", self.h_delete_user, None, "UserDeleteResult"),
            ("GET", r"^/api/v4/threads$", self.h_list_threads, None, "ThreadPage"),
            ("POST", r"^/api/v4/threads$", self.h_create_thread, "CreateThread", "Thread"),
            ("POST", r"^/api/v4/threads/(?P<thread>[^/]+)/messages$", self.h_add_messages, "AddMessages",
             "AddMessagesResult"),
            ("POST", r"^/api/v4/graphs/(?P<graph>[^/]+)/edges$", self.h_add_edges, "AddEdges", "AddEdgesResult"),
            ("POST", r"^/api/v4/graphs/(?P<graph>[^/]+)/edges/list$", self.h_list_edges, "ListEdges", "EdgePage"),
            ("DELETE", r"^/api/v4/graphs/(?P<graph>[^/]+)/edges/(?P<edge>[^/]+)$", self.h_delete_edge, None,
             "AsyncResult"),
            ("POST", r"^/api/v4/graphs/(?P<graph>[^/]+)/nodes$", self.h_add_nodes, "AddNodes", "AddNodesResult"),
            ("POST", r"^/api/v4/graphs/(?P<graph>[^/]+)/nodes/list$", self.h_list_nodes, "ListNodes", "NodePage"),
            ("POST", r"^/api/v4/graphs/(?P<graph>[^/]+)/search/edges$", self.h_search_edges, "SearchEdges",
             "EdgePage"),
            ("POST", r"^/api/v4/graphs/(?P<graph>[^/]+)/search/nodes$", self.h_search_nodes, "SearchNodes",
             "NodePage"),
        ]

    def handle(self, req: Request) -> tuple[int, Any, dict, Fault | None]:
        """(status, JSON body, extra headers, fault to apply after committing)."""
        with self.lock:
            fault = next((f for f in self.faults if f.matches(req.method, req.path)), None)
            if fault is not None:
                self.faults.remove(fault)
                req.fault = fault.describe()
        if fault is not None and (fault.status or fault.drop_before):
            if fault.drop_before:
                return 0, None, {}, fault
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            return fault.status, _error(fault.status, "injected"), headers, None
        try:
            route = self._route(req)
            self._check_headers(req)
        except Invalid as exc:
            self.violations.append(f"{req.method} {req.path}: {exc.message}")
            return exc.status, _error(exc.status, exc.message, exc.code), {}, None
        key = req.headers.get("idempotency-key")
        fingerprint = json.dumps([req.method, req.path, req.query, req.body], sort_keys=True)
        with self.lock:
            if key and key in self.idem:
                first, status, body = self.idem[key]
                if first != fingerprint:
                    msg = f"Idempotency-Key {key} reused for a different request"
                    self.violations.append(f"{req.method} {req.path}: {msg}")
                    return 422, _error(422, msg, "idempotency_key_reused"), {}, None
                req.replayed = True
                return status, body, {}, fault
            try:
                status, body = self._dispatch(req, route)
            except Invalid as exc:
                if exc.status in (400, 422):
                    self.violations.append(f"{req.method} {req.path}: {exc.message}")
                status, body = exc.status, _error(exc.status, exc.message, exc.code)
            if key and req.method != "GET" and status < 500:
                self.idem[key] = (fingerprint, status, body)
        return status, body, {}, fault

    def _route(self, req: Request) -> tuple:
        for method, pattern, fn, model, response in self.routes():
            m = re.match(pattern, req.path)
            if m and method == req.method:
                return fn, m.groupdict(), model, response
        raise Invalid(404, f"unknown route {req.method} {req.path}", "not_found")

    def _check_headers(self, req: Request) -> None:
        auth = req.headers.get("authorization")
        if auth is None:
            raise Invalid(401, "no Authorization header (Api-Key)", "unauthorized")
        if auth != f"Api-Key {self.api_key}":
            raise Invalid(401, "wrong API key", "unauthorized")
        if req.method != "GET" and not req.headers.get("idempotency-key"):
            raise Invalid(400, "a write without an Idempotency-Key header")
        if req.body is not None and not req.headers.get("content-type", "").startswith("application/json"):
            raise Invalid(400, "a JSON body without content-type application/json")
        size = req.query.get("page_size")
        if size is not None and (not size.isdigit() or not 1 <= int(size) <= 100):
            raise Invalid(400, f"page_size {size} out of 1..100")

    def _dispatch(self, req: Request, route: tuple) -> tuple[int, Any]:
        from pydantic import ValidationError

        fn, params, model, response = route
        parsed = None
        if model is not None:
            if not isinstance(req.body, dict):
                raise Invalid(400, "a JSON object body is required")
            try:
                parsed = self.models[model].model_validate(req.body)
            except ValidationError as exc:
                raise Invalid(400, f"body does not match {model}: {exc.errors()[:3]}") from None
            _no_extras(parsed)
        elif req.body not in (None, {}):
            raise Invalid(400, "this route takes no body")
        status, body = fn(req, parsed, **params)
        if 200 <= status < 300 and response is not None:
            import zep_cloud.types as types

            try:
                getattr(types, response).model_validate(body)
            except ValidationError as exc:  # the stand-in's own bug: fail loudly
                self.violations.append(f"server answer does not match {response}: {exc}")
        if 200 <= status < 300 and req.method != "GET" and not req.path.endswith(("/list", "/lookup")) \
                and "/search/" not in req.path:
            self.writes += 1
        return status, body

    # -- handlers (hold the lock) -------------------------------------------------------------------------------
    def h_project(self, req: Request, body: Any) -> tuple[int, Any]:
        return 200, {"uuid": "p-test", "name": "bm tests", "created_at": now_iso()}

    def h_create_user(self, req: Request, body: Any) -> tuple[int, Any]:
        if body.user_id and any(u.get("user_id") == body.user_id for u in self.users.values()):
            raise Invalid(409, f"user {body.user_id} exists", "conflict")
        _check_metadata(body.metadata, "user metadata")
        uid = str(uuidlib.uuid4())
        user = {"uuid": uid, "user_id": body.user_id, "graph_uuid": str(uuidlib.uuid4()),
                "metadata": body.metadata or {}, "created_at": now_iso()}
        self.users[uid] = user
        return 201, user

    def h_lookup_user(self, req: Request, body: Any) -> tuple[int, Any]:
        given = [v for v in (body.user_id, body.thread_id, body.graph_id) if v is not None]
        if len(given) != 1:
            raise Invalid(400, "lookup takes exactly one of user_id, thread_id, graph_id")
        if body.user_id is None:
            raise Invalid(400, "only user_id lookups are expected from bm")
        user = next((u for u in self.users.values() if u.get("user_id") == body.user_id), None)
        if user is None:
            raise Invalid(404, f"user {body.user_id} not found", "not_found")
        return 200, user

    def h_list_users(self, req: Request, body: Any) -> tuple[int, Any]:
        items = sorted(self.users.values(), key=lambda u: u["uuid"])
        return 200, _page(items, req.query)

    def h_delete_user(self, req: Request, body: Any, user: str) -> tuple[int, Any]:
        if user not in self.users:
            raise Invalid(404, f"user {user} not found", "not_found")
        del self.users[user]
        self.edges.pop(user, None)
        self.nodes.pop(user, None)
        for t in [t for t in self.threads.values() if t["user_uuid"] == user]:
            del self.threads[t["uuid"]]
            self.messages.pop(t["uuid"], None)
        return 202, {"task": {"uuid": str(uuidlib.uuid4()), "status": "succeeded", "type": "user_delete"}}

    def h_list_threads(self, req: Request, body: Any) -> tuple[int, Any]:
        owner = req.query.get("user_uuid")
        if owner is not None and owner not in self.users:
            raise Invalid(404, f"user {owner} not found", "not_found")
        if req.query.get("order_by") not in (None, "created_at", "updated_at", "uuid"):
            raise Invalid(400, "bad order_by")
        items = [t for t in self.threads.values() if owner is None or t["user_uuid"] == owner]
        items.sort(key=lambda t: (t["created_at"], t["uuid"]), reverse=req.query.get("order", "desc") == "desc")
        return 200, _page(items, req.query)

    def h_create_thread(self, req: Request, body: Any) -> tuple[int, Any]:
        if body.user_uuid not in self.users:
            raise Invalid(404, f"user {body.user_uuid} not found", "not_found")
        tid = str(uuidlib.uuid4())
        thread = {"uuid": tid, "user_uuid": body.user_uuid, "graph_uuid": self.users[body.user_uuid]["graph_uuid"],
                  "created_at": now_iso(), "updated_at": now_iso()}
        self.threads[tid] = thread
        return 201, thread

    def h_add_messages(self, req: Request, body: Any, thread: str) -> tuple[int, Any]:
        if thread not in self.threads:
            raise Invalid(404, f"thread {thread} not found", "not_found")
        out = []
        for i, m in enumerate(body.messages):
            if m.uuid_ is not None:
                raise Invalid(400, f"messages[{i}].uuid must be left unset")
            if m.role not in ROLES:
                raise Invalid(400, f"messages[{i}].role {m.role!r} is not one of {ROLES}")
            if not m.content:
                raise Invalid(400, f"messages[{i}].content is empty")
            if not _is_iso(m.reference_time):
                raise Invalid(400, f"messages[{i}].reference_time is not ISO-8601")
            _check_metadata(m.metadata, f"messages[{i}].metadata")
            msg = {"uuid": str(uuidlib.uuid4()), "content": m.content, "role": m.role, "name": m.name,
                   "metadata": m.metadata or {}, "reference_time": m.reference_time or now_iso(),
                   "created_at": now_iso(), "thread_uuid": thread, "processed": False}
            self.messages.setdefault(thread, []).append(msg)
            out.append(msg)
        return 202, {"messages": out, "task": {"uuid": str(uuidlib.uuid4()), "status": "pending"}}

    def h_add_edges(self, req: Request, body: Any, graph: str) -> tuple[int, Any]:
        g = self._graph(graph)
        if body.deduplicate:
            raise Invalid(400, "bm never asks Zep to deduplicate (it adds an LLM call per edge)")
        nodes = self.nodes.setdefault(g, {})
        for i, e in enumerate(body.edges):  # validate all before writing any
            if not _FACT_NAME.match(e.fact_name):
                raise Invalid(400, f"edges[{i}].fact_name {e.fact_name!r} is not UPPER_SNAKE")
            if not e.fact.strip():
                raise Invalid(400, f"edges[{i}].fact is empty")
            for f in ("valid_at", "invalid_at", "expired_at"):
                if not _is_iso(getattr(e, f)):
                    raise Invalid(400, f"edges[{i}].{f} is not ISO-8601")
            for end in (e.source_node, e.target_node):
                if end.uuid_ is None and not end.name:
                    raise Invalid(400, f"edges[{i}]: a node ref needs a uuid or a name")
                if end.uuid_ is not None and end.uuid_ not in nodes:
                    raise Invalid(400, f"edges[{i}]: node {end.uuid_} is not in graph {graph}")
            _check_metadata(e.metadata, f"edges[{i}].metadata")
        out = []
        for e in body.edges:
            ends = []
            for end in (e.source_node, e.target_node):
                ends.append(nodes[end.uuid_] if end.uuid_ else self._new_node(g, end.name, end.attributes or {}))
            edge = self._new_edge(g, e.model_dump(by_alias=True, exclude_none=True), ends[0], ends[1])
            out.append({"uuid": edge["uuid"], "fact": edge["fact"], "fact_name": edge["name"],
                        "attributes": edge["attributes"], "metadata": edge["metadata"],
                        "valid_at": edge["valid_at"], "invalid_at": edge["invalid_at"],
                        "expired_at": edge["expired_at"], "source_node_uuid": ends[0]["uuid"],
                        "target_node_uuid": ends[1]["uuid"]})
        return 202, {"edges": out, "task": {"uuid": str(uuidlib.uuid4()), "status": "pending"}}

    def h_list_edges(self, req: Request, body: Any, graph: str) -> tuple[int, Any]:
        g = self._graph(graph)
        items = [self._edge_out(g, e) for e in self.edges.get(g, {}).values()]
        items = _filtered(items, body.filters)
        items.sort(key=lambda e: e["uuid"], reverse=req.query.get("order", "desc") == "desc")
        return 200, _page(items, req.query)

    def h_delete_edge(self, req: Request, body: Any, graph: str, edge: str) -> tuple[int, Any]:
        g = self._graph(graph)
        if edge not in self.edges.get(g, {}):
            raise Invalid(404, f"edge {edge} not found", "not_found")
        del self.edges[g][edge]
        return 202, {"task": {"uuid": str(uuidlib.uuid4()), "status": "succeeded"}}

    def h_add_nodes(self, req: Request, body: Any, graph: str) -> tuple[int, Any]:
        g = self._graph(graph)
        out = []
        for i, n in enumerate(body.nodes):
            if not n.name.strip():
                raise Invalid(400, f"nodes[{i}].name is empty")
            node = self._new_node(g, n.name, n.attributes or {}, n.label, n.summary)
            out.append({"uuid": node["uuid"], "name": node["name"], "attributes": node["attributes"],
                        "created_at": node["created_at"]})
        return 202, {"nodes": out, "task": {"uuid": str(uuidlib.uuid4()), "status": "pending"}}

    def h_list_nodes(self, req: Request, body: Any, graph: str) -> tuple[int, Any]:
        g = self._graph(graph)
        items = _filtered(list(self.nodes.get(g, {}).values()), body.filters)
        items.sort(key=lambda n: n["uuid"], reverse=req.query.get("order", "desc") == "desc")
        return 200, _page(items, req.query)

    def h_search_edges(self, req: Request, body: Any, graph: str) -> tuple[int, Any]:
        g = self._graph(graph)
        hits = []
        for e in self.edges.get(g, {}).values():
            score = _score(body.query, f"{e['fact']} {e['name']}")
            if score > 0:
                hits.append({**self._edge_out(g, e), "score": score})
        hits.sort(key=lambda h: (-h["score"], h["uuid"]))
        return 200, {"items": hits[:int(req.query.get("page_size") or 10)]}

    def h_search_nodes(self, req: Request, body: Any, graph: str) -> tuple[int, Any]:
        g = self._graph(graph)
        hits = []
        for n in self.nodes.get(g, {}).values():
            score = _score(body.query, f"{n['name']} {n.get('summary') or ''}")
            if score > 0:
                hits.append({**n, "score": score})
        hits.sort(key=lambda h: (-h["score"], h["uuid"]))
        return 200, {"items": hits[:int(req.query.get("page_size") or 10)]}


def _error(status: int, message: str, code: str = "error") -> dict:
    return {"error": {"code": code, "message": message, "request_id": str(uuidlib.uuid4())}}


def _check_metadata(meta: Any, where: str) -> None:
    if meta is None:
        return
    if len(meta) > 10:
        raise Invalid(400, f"{where}: at most 10 keys")
    for k, v in meta.items():
        items = v if isinstance(v, list) else [v]
        if not all(isinstance(x, (str, int, float, bool)) for x in items):
            raise Invalid(400, f"{where}.{k}: values must be strings, numbers, booleans or arrays of those")


def _page(items: list, query: dict) -> dict:
    size = int(query.get("page_size") or 50)
    start = int(query.get("cursor") or 0)
    chunk = items[start:start + size]
    out: dict = {"items": chunk}
    if start + size < len(items):
        out["next_cursor"] = str(start + size)
    return out


def _prop(item: dict, name: str) -> Any:
    if name in (item.get("attributes") or {}):
        return item["attributes"][name]
    return item.get(name)


def _filtered(items: list[dict], filters: Any) -> list[dict]:
    if filters is None:
        return items
    data = filters.model_dump(exclude_none=True)
    unsupported = set(data) - {"property_filters"}
    if unsupported:
        raise Invalid(400, f"filters {sorted(unsupported)} are not implemented by the stand-in", "unsupported_filter")
    for pf in filters.property_filters or []:
        op, name, value = pf.operator, pf.property_name, pf.value
        if not name or op not in ("eq", "ne", "in", "is_null", "is_not_null"):
            raise Invalid(400, f"property filter {op!r} on {name!r} is not supported")
        if op == "in":
            if not isinstance(value, list) or not value:
                raise Invalid(400, "an 'in' property filter needs a non-empty array")
            for v in value:
                if isinstance(v, str) and (not v or "," in v or v != v.strip()):
                    raise Invalid(400, f"'in' filter member {v!r}: non-empty, no comma, no surrounding space")
            items = [i for i in items if _prop(i, name) in value]
        elif op == "eq":
            items = [i for i in items if _prop(i, name) == value]
        elif op == "ne":
            items = [i for i in items if _prop(i, name) != value]
        elif op == "is_null":
            items = [i for i in items if _prop(i, name) is None]
        else:
            items = [i for i in items if _prop(i, name) is not None]
    return items


def _score(query: str, text: str) -> float:
    q = set(re.findall(r"\w+", query.casefold()))
    t = set(re.findall(r"\w+", text.casefold()))
    return round(len(q & t) / len(q), 4) if q else 0.0


class _Handler(BaseHTTPRequestHandler):
    zep: ZepServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        zep = self.zep
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        body: Any = None
        req = Request(self.command, parts.path, query, headers, None)
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                zep.violations.append(f"{self.command} {parts.path}: body is not JSON")
                body = {"__not_json__": raw.decode("utf-8", "replace")}
        req.body = body
        with zep.lock:
            zep.requests.append(req)
        status, payload, extra, fault = zep.handle(req)
        req.status = status
        if fault is not None and (fault.drop or fault.drop_before):
            req.status = 0
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        data = json.dumps(payload).encode("utf-8") if payload is not None else b""
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _serve
