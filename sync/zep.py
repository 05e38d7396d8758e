"""``ZepSink``: Zep (the maintained ``zep-cloud`` 4.x SDK, API v4) as a mirror remote's graph sink
(see mirror.py for what is pushed and harvested, and when).

``zep-python`` 2.x is the SDK of Zep's deprecated Community Edition (``/api/v2``, no graph
API); it is not used.  The SDK is imported on first use only (``bm --help`` stays fast).

Mapping:

* a bm user ``U`` is the Zep user with ``user_id = "bm-" + U`` (deterministic; created on the
  first write, a 409 means it exists and it is looked up); its graph is the user graph,
  addressed by the Zep user's uuid;
* a fact (memory or graph edge) is one edge added with ``graph.edge.add`` (batches of 1-100,
  ``deduplicate=false``) between nodes that bm creates once per (user, normalised name)
  with ``graph.node.add`` and finds again through the node attribute ``bm_node`` (a hash of
  the normalised name), so one name is one node; the edge carries ``attributes={"bm_id":
  local_id}`` (read back by list and search) and ``metadata={"bm_id": local_id}`` (on the
  episode Zep makes for it).  Before adding, the user's edges are looked up by ``bm_id``
  (``graph.edge.list`` with a property filter): an id already there is not added again, so
  a re-send (a crash before the local records were written, a second device mirroring the
  same project) never duplicates;
* beads are messages of one thread per user (``thread.create`` once, found again with
  ``thread.list``), ``thread.add_messages`` in batches of 30 with ``metadata={"bm_id": ...}``;
* deletions: ``graph.edge.delete`` per edge, ``user.delete`` for a forgotten user (404 =
  already gone = fine);
* list (harvest): ``graph.edge.list`` of the user graph, paged (100 a page);
* search: ``graph.search_edges`` and ``graph.search_nodes`` at once (two threads), each with
  the time left of the caller's budget as its timeout.

Every write carries an ``Idempotency-Key`` derived from the key MirrorRemote passes (itself
from the op ids) and the ids in that request, so a retried request is the same request;
a request whose body changed gets another key.  The SDK's own retries are off
(``max_retries=0``); this module retries transient failures itself: 408, 429 (waiting what
``Retry-After`` asks, up to the time left), 5xx, timeouts and connection errors, with
capped exponential backoff and jitter, at most ``tries`` times within ``deadline``
seconds, then raises :class:`~brandmind.sync.remote.RemoteDown`.  Other 4xx answers are
BMErrors with a hint (401/403: the API key).

Looked-up uuids (users, threads, nodes) are cached in memory and, with ``cache_path``, in a
small JSON file; a 404 on a cached user drops the cache of that user and tries once more.
The API key is read from the environment variable named by ``api_key_env`` at first use,
never stored.

Limits (what Zep's API leaves open): a forgotten turn stays in the user's thread (the v4 API
deletes a whole thread or user, and ``thread.message.update`` changes only a message's
metadata, not its text): there is no ``delete_messages``, and the sync round's report carries
a note saying how many forgotten turns Zep may still hold.  Messages cannot be looked up by
``bm_id``, so a message
re-sent after the local heads were lost is deduplicated only by Zep's Idempotency-Key memory
(same beads in the same batch -> same key); Zep deletes users asynchronously, so a user
re-created right after ``user.forget`` may briefly meet the old one (409, then lookup); edges
Zep indexes asynchronously may be missed by the ``bm_id`` look-up of a device that pushes
them at the same moment.  The ``bm_id`` / ``bm_node`` property filters are checked against
the stand-in server only; the live test (``ZEP_API_KEY`` set) exercises the real service.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable

from brandmind.errors import BMError, ConfigError

from .graphsink import GraphFact, GraphMessage, RemoteFact, RemoteHit, idem_key
from .remote import RemoteDown

DEFAULT_BASE_URL = "https://api.getzep.com/api/v4"
DEFAULT_KEY_ENV = "ZEP_API_KEY"
EDGE_BATCH = 100      # graph.edge.add takes 1..100 edges
NODE_BATCH = 100
MESSAGE_BATCH = 30
FILTER_CHUNK = 100    # ids per property filter
PAGE = 100            # list page size (the API's maximum)
ROLES = ("system", "assistant", "user", "function", "tool")
RETRY_STATUSES = (408, 429)


class _Answer(Exception):
    """An HTTP status the caller handles itself (404 absent, 409 exists)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _chunks(items: list, n: int) -> Iterable[list]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def node_key(name: str) -> str:
    """The ``bm_node`` attribute of the node for a name: a hash of its normalised form (no
    commas, as Zep's "in" filters require)."""
    from brandmind.facts import norm

    return "n" + hashlib.sha256(norm(name).encode("utf-8")).hexdigest()[:24]


def _retry_after(headers: Any) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header: a number or an HTTP date."""
    if not headers:
        return None
    low = {str(k).lower(): v for k, v in dict(headers).items()}
    if low.get("retry-after-ms"):
        try:
            return max(0.0, float(low["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = low.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        import email.utils

        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


class ZepSink:
    """Zep as a :class:`~brandmind.sync.mirror.GraphSink` (module docstring)."""

    kind = "zep"
    keeps_history = False   # retired facts are deleted from Zep

    def __init__(self, name: str = "zep", *, api_key_env: str = DEFAULT_KEY_ENV, base_url: str | None = None,
                 timeout: float = 10.0, tries: int = 5, backoff: float = 0.5, backoff_max: float = 8.0,
                 deadline: float = 60.0, cache_path: str | os.PathLike[str] | None = None,
                 user_prefix: str = "bm-", sleep: Callable[[float], None] | None = None) -> None:
        self.name = name
        self.api_key_env = api_key_env
        self.base_url = _api_root(base_url)
        self.timeout = float(timeout)
        self.tries = max(1, int(tries))
        self.backoff = float(backoff)
        self.backoff_max = float(backoff_max)
        self.deadline = float(deadline)
        self.user_prefix = user_prefix
        self.sleep = sleep or time.sleep
        self.cache_path = Path(cache_path) if cache_path else None
        self._client: Any = None
        self._http: Any = None  # the httpx.Client the SDK client uses (made with it)
        self._lock = threading.Lock()
        self._users: dict[str, str] = {}
        self._threads: dict[str, str] = {}
        self._nodes: dict[str, dict[str, str]] = {}
        self._load_cache()
        self.requests = 0   # calls made through the SDK (tests, `bm remote test`)

    # -- setup ---------------------------------------------------------------------------------------------
    def zep_user_id(self, user: str) -> str:
        return f"{self.user_prefix}{user}"

    @property
    def client(self) -> Any:
        if self._client is None:
            key = os.environ.get(self.api_key_env, "").strip()
            if not key:
                raise ConfigError(f"the Zep API key is not set: environment variable {self.api_key_env} is empty",
                                  hint=f"export {self.api_key_env}=<your Zep project API key> "
                                       "(bm keeps only the variable's name, never the key)")
            import httpx
            from zep_cloud.client import Zep

            # our own HTTP client (what the SDK would make: same timeout, redirects followed),
            # so close() can close it through a public handle
            self._http = httpx.Client(timeout=self.timeout, follow_redirects=True)
            self._client = Zep(api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0,
                               httpx_client=self._http)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            try:
                if self._http is not None:
                    self._http.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
            self._client = None
            self._http = None

    def _load_cache(self) -> None:
        if self.cache_path is None:
            return
        try:
            data = json.loads(self.cache_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("base_url") == self.base_url:
            self._users = dict(data.get("users") or {})
            self._threads = dict(data.get("threads") or {})
            self._nodes = {u: dict(v) for u, v in (data.get("nodes") or {}).items()}

    def _save_cache(self) -> None:
        if self.cache_path is None:
            return
        tmp = self.cache_path.with_name(f".{self.cache_path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps({"base_url": self.base_url, "users": self._users, "threads": self._threads,
                                       "nodes": self._nodes}, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.cache_path)
        except OSError:
            pass  # only a cache

    def _drop(self, user: str) -> None:
        self._users.pop(user, None)
        self._threads.pop(user, None)
        self._nodes.pop(user, None)
        self._save_cache()

    # -- one request, with retries --------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[..., Any], *args: Any, ok: Iterable[int] = (),
              budget: float | None = None, tries: int | None = None, **kwargs: Any) -> Any:
        from zep_cloud.core.api_error import ApiError
        import httpx

        ok = set(ok)
        limit = self.deadline if budget is None else budget
        end = time.monotonic() + limit
        tries = tries or self.tries
        last = ""
        for attempt in range(tries):
            left = end - time.monotonic()
            if left <= 0:
                break
            options = {"timeout": min(self.timeout, left) if budget is not None else self.timeout,
                       "max_retries": 0}
            wait: float | None = None
            try:
                self.requests += 1
                return fn(*args, request_options=options, **kwargs)
            except ApiError as exc:
                status = int(exc.status_code or 0)
                if status in ok:
                    raise _Answer(status) from None
                if status in RETRY_STATUSES or status >= 500 or status == 0:
                    last = f"HTTP {status}" + (f" {_message(exc)}" if _message(exc) else "")
                    wait = _retry_after(exc.headers) if status in (429, 503) else None
                    if wait is not None and wait > end - time.monotonic():
                        raise RemoteDown(f"Zep remote {self.name!r}: {what}: rate limited, Zep asks to wait "
                                         f"{wait:.0f} s", hint="transient: the next sync retries (nothing is lost)") from None
                else:
                    raise _client_error(self, what, status, exc) from None
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            except BMError:
                raise
            except Exception as exc:  # noqa: BLE001 - a response the SDK could not parse
                from zep_cloud.core.parse_error import ParsingError

                if isinstance(exc, ParsingError):
                    raise BMError(f"Zep remote {self.name!r}: {what}: an answer bm cannot read ({exc})",
                                  hint="is base_url a Zep API v4 server (…/api/v4)?") from None
                raise
            if attempt + 1 >= tries:
                break
            if wait is None:
                wait = min(self.backoff_max, self.backoff * (2 ** attempt)) * random.uniform(0.5, 1.0)
            wait = min(wait, max(0.0, end - time.monotonic()))
            if wait > 0:
                self.sleep(wait)
        raise RemoteDown(f"Zep remote {self.name!r}: {what} failed ({last or 'out of time'}) after "
                         f"{min(tries, attempt + 1)} tries",
                         hint="transient: the next sync retries (nothing is lost); "
                              f"`bm remote test {self.name}` checks the connection")

    # -- users, threads, nodes ------------------------------------------------------------------------------
    def _user_uuid(self, user: str, *, create: bool, key: str = "", budget: float | None = None) -> str | None:
        cached = self._users.get(user)
        if cached:
            return cached
        zid = self.zep_user_id(user)
        uuid = None
        if create:
            try:
                made = self._call("create user", self.client.user.create, user_id=zid,
                                  metadata={"bm_user": user}, idempotency_key=idem_key(key, "user", zid), ok={409})
                uuid = made.uuid_
            except _Answer:
                uuid = None  # 409: it exists
        if uuid is None:
            try:
                found = self._call("look up user", self.client.user.lookup, user_id=zid, ok={404}, budget=budget,
                                   tries=2 if budget is not None else None)
            except _Answer:
                return None
            uuid = found.uuid_
        if uuid:
            self._users[user] = uuid
            self._save_cache()
        return uuid

    def _thread(self, user: str, graph: str, key: str) -> str:
        cached = self._threads.get(user)
        if cached:
            return cached
        page = self._call("list threads", self.client.thread.list, page_size=1, order_by="created_at",
                          order="asc", user_uuid=graph, ok={404})
        uuid = page.items[0].uuid_ if page.items else None
        if uuid is None:
            try:
                made = self._call("create thread", self.client.thread.create, user_uuid=graph,
                                  idempotency_key=idem_key("thread", graph), ok={404, 409})
                uuid = made.uuid_
            except _Answer as exc:
                if exc.status != 409:
                    raise
                again = self._call("list threads", self.client.thread.list, page_size=1, order_by="created_at",
                                   order="asc", user_uuid=graph)
                uuid = again.items[0].uuid_ if again.items else None
        if not uuid:
            raise BMError(f"Zep remote {self.name!r}: no thread for user {user!r}",
                          hint="the Zep API answered without a thread id; check base_url points at Zep API v4")
        self._threads[user] = uuid
        self._save_cache()
        return uuid

    def _node_uuids(self, user: str, graph: str, names: list[str], key: str) -> dict[str, str]:
        from zep_cloud.types import NodeInput, NodeListFilters, PropertyFilter

        cache = self._nodes.setdefault(user, {})
        wanted: dict[str, str] = {}
        for name in names:
            wanted.setdefault(node_key(name), name)
        missing = [k for k in wanted if k not in cache]
        for chunk in _chunks(missing, FILTER_CHUNK):
            filters = NodeListFilters(property_filters=[PropertyFilter(property_name="bm_node", operator="in",
                                                                       value=chunk)])
            for node in self._pages("list nodes", self.client.graph.node.list, graph, filters=filters, ok={404}):
                k = (node.attributes or {}).get("bm_node")
                if k and node.uuid_:
                    cache.setdefault(k, node.uuid_)
        still = [k for k in missing if k not in cache]
        for chunk in _chunks(still, NODE_BATCH):
            res = self._call("add nodes", self.client.graph.node.add, graph,
                             nodes=[NodeInput(name=wanted[k], attributes={"bm_node": k}) for k in chunk],
                             idempotency_key=idem_key(key, "nodes", graph, *chunk), ok={404})
            for k, added in zip(chunk, res.nodes or []):
                if added.uuid_:
                    cache[k] = added.uuid_
        if missing:
            self._save_cache()
        return {k: cache[k] for k in wanted if k in cache}

    def _pages(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Iterable[Any]:
        cursor = None
        seen: set[str] = set()
        while True:
            page = self._call(what, fn, *args, page_size=PAGE, cursor=cursor, **kwargs)
            yield from page.items or []
            cursor = getattr(page.response, "next_cursor", None)
            if not cursor or cursor in seen or not page.items:
                return
            seen.add(cursor)

    def _existing(self, graph: str, local_ids: list[str]) -> dict[str, str]:
        """bm_id -> edge uuid of the user's edges carrying one of ``local_ids``."""
        from zep_cloud.types import EdgeListFilters, PropertyFilter

        out: dict[str, str] = {}
        for chunk in _chunks(local_ids, FILTER_CHUNK):
            filters = EdgeListFilters(property_filters=[PropertyFilter(property_name="bm_id", operator="in",
                                                                       value=chunk)])
            for edge in self._pages("list edges", self.client.graph.edge.list, graph, filters=filters, ok={404}):
                bm_id = (edge.attributes or {}).get("bm_id")
                if bm_id in chunk and edge.uuid_:
                    out.setdefault(bm_id, edge.uuid_)
        return out

    def _per_user(self, user: str, work: Callable[[], Any]) -> Any:
        """Run ``work``; a 404 on a cached user (deleted elsewhere) drops the cache, once."""
        for attempt in range(2):
            try:
                return work()
            except _Answer as exc:
                if exc.status == 404 and attempt == 0:
                    self._drop(user)
                    continue
                raise BMError(f"Zep remote {self.name!r}: HTTP {exc.status} for user {user!r}",
                              hint="the user or thread was removed on Zep while bm wrote to it; sync again") from None
        return None

    # -- the GraphSink protocol -----------------------------------------------------------------------------
    def ping(self) -> None:
        self._call("ping", self.client.project.get, tries=2, budget=min(self.deadline, 2 * self.timeout))

    def put_facts(self, facts: list[GraphFact], key: str) -> dict[str, str]:
        by_user: dict[str, dict[str, GraphFact]] = {}
        for fact in facts:
            by_user.setdefault(fact.user, {})[fact.local_id] = fact
        out: dict[str, str] = {}
        for user, items in by_user.items():
            out.update(self._per_user(user, lambda u=user, i=list(items.values()): self._put_user_facts(u, i, key)))
        return out

    def _put_user_facts(self, user: str, facts: list[GraphFact], key: str) -> dict[str, str]:
        from zep_cloud.types import EdgeInput, EdgeNodeRef

        graph = self._user_uuid(user, create=True, key=key)
        if not graph:
            raise BMError(f"Zep remote {self.name!r}: user {self.zep_user_id(user)!r} has no uuid",
                          hint="check base_url points at Zep API v4")
        done = self._existing(graph, [f.local_id for f in facts])
        todo = [f for f in facts if f.local_id not in done]
        if not todo:
            return done
        nodes = self._node_uuids(user, graph, [n for f in todo for n in (f.source, f.target)], key)

        def ref(name: str) -> Any:
            uuid = nodes.get(node_key(name))
            return EdgeNodeRef(uuid=uuid) if uuid else EdgeNodeRef(name=name)

        for chunk in _chunks(todo, EDGE_BATCH):
            edges = [EdgeInput(fact=f.text, fact_name=f.name, source_node=ref(f.source), target_node=ref(f.target),
                               attributes={"bm_id": f.local_id}, metadata={"bm_id": f.local_id},
                               **_set(valid_at=f.valid_at, invalid_at=f.invalid_at, expired_at=f.expired_at))
                     for f in chunk]
            res = self._call("add edges", self.client.graph.edge.add, graph, edges=edges, deduplicate=False,
                             idempotency_key=idem_key(key, "edges", graph, *(f.local_id for f in chunk)), ok={404})
            for f, added in zip(chunk, res.edges or []):
                if added.uuid_:
                    done[f.local_id] = added.uuid_
        return done

    def put_messages(self, messages: list[GraphMessage], key: str) -> None:
        by_user: dict[str, list[GraphMessage]] = {}
        for m in messages:
            by_user.setdefault(m.user, []).append(m)
        for user, items in by_user.items():
            self._per_user(user, lambda u=user, i=items: self._put_user_messages(u, i, key))

    def _put_user_messages(self, user: str, messages: list[GraphMessage], key: str) -> None:
        from zep_cloud.types import AddMessage

        graph = self._user_uuid(user, create=True, key=key)
        thread = self._thread(user, graph, key)
        for chunk in _chunks(messages, MESSAGE_BATCH):
            body = [AddMessage(content=m.content, role=m.role if m.role in ROLES else "user",
                               metadata={"bm_id": m.local_id},
                               **_set(name=m.name or (None if m.role in ROLES else m.role),
                                      reference_time=m.created_at or None))
                    for m in chunk]
            self._call("add messages", self.client.thread.add_messages, thread, messages=body,
                       idempotency_key=idem_key(key, "messages", thread, *(m.local_id for m in chunk)), ok={404})

    def delete_facts(self, user: str, remote_uuids: list[str], key: str) -> None:
        if not remote_uuids:
            return
        graph = self._user_uuid(user, create=False)
        if graph is None:
            return  # no such user on Zep: nothing to delete
        for uuid in dict.fromkeys(remote_uuids):
            try:
                self._call("delete edge", self.client.graph.edge.delete, graph, uuid,
                           idempotency_key=idem_key(key, "edge", uuid), ok={404})
            except _Answer:
                pass  # already gone

    def delete_user(self, user: str, key: str) -> None:
        self._users.pop(user, None)  # look it up afresh: another device may have made it again
        graph = self._user_uuid(user, create=False)
        if graph is not None:
            try:
                self._call("delete user", self.client.user.delete, graph,
                           idempotency_key=idem_key(key, "user", graph), ok={404})
            except _Answer:
                pass
        self._drop(user)

    def list_facts(self, user: str) -> list[RemoteFact]:
        graph = self._user_uuid(user, create=False)
        if graph is None:
            return []
        out = []
        try:
            edges = list(self._pages("list edges", self.client.graph.edge.list, graph))
        except _Answer:
            return []
        for e in edges:
            if not e.uuid_:
                continue
            out.append(RemoteFact(
                uuid=e.uuid_, user=user, text=e.fact or "", name=e.name or "RELATES_TO",
                source=e.source_node_name or "", target=e.target_node_name or "", valid_at=e.valid_at,
                invalid_at=e.invalid_at, created_at=e.created_at, expired_at=e.expired_at,
                local_id=(e.attributes or {}).get("bm_id")))
        return out

    def search(self, user: str, query: str, limit: int, timeout: float) -> list[RemoteHit]:
        start = time.monotonic()

        def left() -> float:
            return timeout - (time.monotonic() - start)

        graph = self._user_uuid(user, create=False, budget=timeout)
        if graph is None:
            return []
        size = max(1, min(int(limit), 50))

        def edges() -> list[RemoteHit]:
            page = self._call("search edges", self.client.graph.search_edges, graph, query=query, page_size=size,
                              budget=max(0.01, left()), tries=2)
            return [RemoteHit(uuid=e.uuid_ or "", text=e.fact or "", score=float(e.score or 0.0), kind="edge",
                              valid_at=e.valid_at, invalid_at=e.invalid_at,
                              local_id=(e.attributes or {}).get("bm_id")) for e in page.items or []]

        def nodes() -> list[RemoteHit]:
            page = self._call("search nodes", self.client.graph.search_nodes, graph, query=query, page_size=size,
                              budget=max(0.01, left()), tries=2)
            return [RemoteHit(uuid=n.uuid_ or "", text=f"{n.name}: {n.summary}" if n.summary else (n.name or ""),
                              score=float(n.score or 0.0), kind="node", valid_at=None, invalid_at=None,
                              local_id=None) for n in page.items or []]

        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(edges), pool.submit(nodes)]
            results, errors = [], []
            for fut in futures:
                try:
                    results.extend(fut.result())
                except (BMError, _Answer) as exc:
                    errors.append(exc)
        if errors and not results and len(errors) == len(futures):
            first = errors[0]
            if isinstance(first, BMError):
                raise first
            return []
        results.sort(key=lambda h: -h.score)
        return results[:limit]


def _set(**fields: Any) -> dict[str, Any]:
    """The fields that have a value (the API gets no explicit nulls)."""
    return {k: v for k, v in fields.items() if v is not None}


def _api_root(base_url: str | None) -> str:
    url = (base_url or DEFAULT_BASE_URL).rstrip("/")
    if not url.endswith("/api/v4"):
        url += "/api/v4"
    return url


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err.get("code") or "")
        return str(body.get("message") or "")
    err = getattr(body, "error", None)
    if err is not None:
        return str(getattr(err, "message", "") or "")
    return str(body or "")[:200]


def _client_error(sink: ZepSink, what: str, status: int, exc: Any) -> BMError:
    detail = _message(exc)
    msg = f"Zep remote {sink.name!r}: {what} refused (HTTP {status}{': ' + detail if detail else ''})"
    if status in (401, 403):
        return ConfigError(msg, hint=f"check that {sink.api_key_env} holds a valid API key of the Zep project")
    if status == 404:
        return BMError(msg, hint="check base_url points at Zep API v4 (…/api/v4)")
    if status == 413:
        return BMError(msg, hint="a memory or message is too large for Zep; shorten it or forget it")
    return BMError(msg, hint="this request does not fit Zep's API: report it with the message above")
