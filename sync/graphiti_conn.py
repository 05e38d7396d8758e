"""The connection under a Graphiti mirror (sync/graphiti.py): the falkordb asyncio client on
a private event loop, graphiti's FalkorDriver per graph, retries within a deadline, the
direct RESP connections of the search (sync/falkor_search.py), error classification, and
graphiti's client objects made without any network (bm's embedder; no LLM).
"""
from __future__ import annotations

import os
import random
import threading
import time
from typing import Any, Callable, Sequence

from brandmind.errors import BMError, ConfigError

from .remote import RemoteDown

TRIES = 4
BACKOFF = 0.1        # first retry after up to 0.1 s (full jitter), doubling...
BACKOFF_MAX = 1.0    # ...up to 1 s


def graphiti_env() -> None:
    """Before anything of graphiti is imported: no telemetry, and graphiti's error logs (which
    print whole queries with their parameters) never reach a terminal through Python's
    last-resort handler (an application that configures logging still gets them)."""
    import logging

    os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
    log = logging.getLogger("graphiti_core")
    if not any(isinstance(h, logging.NullHandler) for h in log.handlers):
        log.addHandler(logging.NullHandler())


class Loop:
    """One private asyncio loop in a daemon thread."""

    def __init__(self, name: str) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=f"bm-graphiti-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import asyncio

        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Any, timeout: float) -> Any:
        import asyncio
        import concurrent.futures

        if threading.current_thread() is self.thread:
            coro.close()
            raise BMError("GraphitiSink was called from its own event loop", hint="this is a bug in bm")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise asyncio.TimeoutError() from None

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class GraphitiConnection:
    """The connection of one graphiti remote (see the module docstring); ``GraphitiSink``
    adds what is read and written."""

    def __init__(self, name: str, *, host: str, port: int, username: str | None, password_env: str | None,
                 timeout: float, connect_timeout: float, tries: int) -> None:
        self.name = name
        self.host, self.port = host, port
        self.username, self.password_env = username, password_env
        self.timeout, self.connect_timeout = float(timeout), float(connect_timeout)
        self.tries = max(1, int(tries))
        self._lock = threading.Lock()
        self._loop: Loop | None = None
        self._client: Any = None
        self._drivers: dict[str, Any] = {}
        self._indexed: set[str] = set()
        self._idle: list[Any] = []     # direct search connections (sync/falkor_search.py)

    @property
    def where(self) -> str:
        return f"graphiti remote {self.name!r} (FalkorDB at {self.host}:{self.port})"

    # -- plumbing --------------------------------------------------------------------------------
    def _password(self) -> str | None:
        if not self.password_env:
            return None
        value = os.environ.get(self.password_env)
        if value is None:
            raise ConfigError(f"{self.where}: the environment variable {self.password_env} is not set",
                              hint=f"export {self.password_env}=<the FalkorDB password>")
        return value

    def _connect(self) -> Any:
        """The falkordb asyncio client (made once; its constructor probes the server)."""
        with self._lock:
            if self._client is None:
                graphiti_env()
                from falkordb.asyncio import FalkorDB

                if self._loop is None:
                    self._loop = Loop(self.name)
                self._client = FalkorDB(host=self.host, port=self.port, username=self.username,
                                        password=self._password(), socket_timeout=self.timeout,
                                        socket_connect_timeout=self.connect_timeout)
            return self._client

    def _driver(self, graph: str) -> Any:
        """graphiti's FalkorDriver bound to one graph (called on the sink's loop).  Made inside
        a running loop, FalkorDriver schedules index creation for its graph: that task is
        cancelled before it runs (reading must not create a graph); _ensure_indices builds the
        indices of graphs we write."""
        graphiti_env()
        from graphiti_core.driver.falkordb_driver import FalkorDriver

        client = self._connect()
        with self._lock:
            driver = self._drivers.get(graph)
            if driver is None:
                driver = self._drivers[graph] = FalkorDriver(falkor_db=client, database=graph)
                task = getattr(driver, "_init_task", None)
                if task is not None:
                    task.cancel()
                    driver._init_task = None
            return driver

    async def _ensure_indices(self, driver: Any, graph: str) -> None:
        """Build the indices of a graph we write (``driver`` is ``self._driver(graph)``)."""
        if graph not in self._indexed:
            await driver.build_indices_and_constraints()
            self._indexed.add(graph)

    def _call(self, what: str, make: Callable[[], Any], *, deadline: float | None = None) -> Any:
        """Run the coroutine ``make()`` builds on the sink's loop, retrying transient errors,
        all tries within ``deadline`` (default: ``timeout`` from now)."""
        import asyncio

        import redis.exceptions as rx

        delay = BACKOFF
        last: BaseException | None = None
        if deadline is None:
            deadline = time.monotonic() + self.timeout  # all tries together
        for attempt in range(self.tries):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                self._connect()
                assert self._loop is not None
                return self._loop.run(make(), remaining)
            except BMError:
                raise
            except rx.AuthenticationError as exc:
                raise self._auth_error(exc) from None
            except (rx.ConnectionError, rx.TimeoutError, asyncio.TimeoutError, TimeoutError, OSError) as exc:
                last = exc
            except rx.ResponseError as exc:
                error = self._reply_error(what, str(exc))
                if isinstance(error, BMError):
                    raise error from None
                last = exc
            except Exception as exc:  # graphiti / pydantic / anything else: one clean error, no traceback
                raise BMError(f"{self.where}: {what} failed ({type(exc).__name__}: {exc})",
                              hint="check the server's log; `bm remote test` checks the connection") from None
            if attempt + 1 < self.tries:
                pause = min(random.uniform(0, delay), max(0.0, deadline - time.monotonic()))
                time.sleep(pause)
                delay = min(delay * 2, BACKOFF_MAX)
        kind = "timed out" if isinstance(last, (asyncio.TimeoutError, TimeoutError, rx.TimeoutError)) or last is None \
            else f"failed ({type(last).__name__}: {last})"
        raise RemoteDown(f"{self.where}: {what} {kind}",
                         hint="is the server running and reachable? the next sync retries (nothing is lost)")

    def _auth_error(self, exc: BaseException) -> ConfigError:
        if self.password_env:
            hint = f"check the password in ${self.password_env}" + (f" and the user {self.username!r}"
                                                                     if self.username else "")
        else:
            hint = "this server needs a password: set password_env to the NAME of a variable holding it"
        return ConfigError(f"{self.where} refused the credentials ({exc})", hint=hint)

    async def _exists(self, graph: str) -> bool:
        """Whether the graph exists (a read through GRAPH.QUERY would create it, empty)."""
        return bool(await self._connect().connection.exists(graph))

    def close(self) -> None:
        """Close the connection and end the sink's loop (the sink can be used again after)."""
        with self._lock:
            client, loop = self._client, self._loop
            self._client, self._loop = None, None
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        with self._lock:
            self._drivers.clear()
            self._indexed.clear()
        if loop is not None:
            if client is not None:
                try:
                    loop.run(client.aclose(), 5)
                except Exception:  # noqa: BLE001 - closing a broken connection is not an error
                    pass
            loop.close()

    def __enter__(self) -> "GraphitiConnection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


    # -- GraphSink ---------------------------------------------------------------------------------
    def ping(self) -> None:
        """One harmless round trip (GRAPH.LIST, on the direct connection the search uses, so
        ``bm remote test`` times the server, not the falkordb client's import); RemoteDown /
        ConfigError when it fails."""
        deadline = time.monotonic() + self.timeout
        self._direct("ping", deadline, lambda conn: conn.command("GRAPH.LIST", deadline=deadline))


    def _direct(self, what: str, deadline: float, run: Callable[[Any], Any]) -> Any:
        """``run(conn)`` on a direct RESP connection (sync/falkor_search.py), kept for the next
        call when it ends cleanly; connection errors and timeouts retried within ``deadline``
        (reads only), then RemoteDown; error replies classified as :meth:`_call` does."""
        from .falkor_search import Conn, RespError

        delay, last = BACKOFF, None
        for attempt in range(self.tries):
            if deadline - time.monotonic() <= 0:
                break
            conn = None
            try:
                with self._lock:
                    conn = self._idle.pop() if self._idle else None
                if conn is None:
                    conn = Conn(self.host, self.port, min(self.connect_timeout, deadline - time.monotonic()))
                    password = self._password()
                    if password is not None:
                        auth = (self.username, password) if self.username else (password,)
                        conn.command("AUTH", *auth, deadline=deadline)
                result = run(conn)
                with self._lock:
                    self._idle.append(conn)
                return result
            except RespError as exc:
                if conn is not None:
                    conn.close()
                last = self._reply_error(what, str(exc))
                if isinstance(last, BMError):
                    raise last from None
            except BMError:
                if conn is not None:
                    conn.close()
                raise
            except (OSError, TimeoutError, ConnectionError) as exc:  # socket.timeout is an OSError
                if conn is not None:
                    conn.close()
                last = exc
            if attempt + 1 < self.tries:
                time.sleep(min(random.uniform(0, delay), max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, BACKOFF_MAX)
        kind = "timed out" if isinstance(last, TimeoutError) or last is None else f"failed ({type(last).__name__}: {last})"
        raise RemoteDown(f"{self.where}: {what} {kind}",
                         hint="is the server running and reachable? the next sync retries (nothing is lost)")

    def _reply_error(self, what: str, text: str) -> Exception:
        """An error reply as the error to raise (BMError) or to retry (RuntimeError)."""
        if text.startswith(("NOAUTH", "WRONGPASS")) or "invalid username-password" in text:
            return self._auth_error(RuntimeError(text))
        if text.startswith(("LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN")):
            return RuntimeError(text)
        if "unknown command" in text.lower() and "graph." in text.lower():
            return ConfigError(f"{self.where} is a Redis server without the FalkorDB module",
                               hint="point the remote at a FalkorDB server (redis-server "
                                    "--loadmodule falkordb.so)")
        return BMError(f"{self.where}: {what} failed: {text}",
                       hint="check the server's log; `bm remote test` checks the connection")


# -- graphiti's client objects, without any network ------------------------------------------------------
def bm_embedder(embed: Callable[[str], Sequence[float]]) -> Any:
    graphiti_env()
    from graphiti_core.embedder.client import EmbedderClient

    class BMEmbedder(EmbedderClient):
        """graphiti's embedder interface over bm's embed callable (local, no network)."""

        async def create(self, input_data: Any) -> list[float]:
            text = input_data[0] if isinstance(input_data, list) else input_data
            return [float(x) for x in embed(str(text))]

        async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
            return [[float(x) for x in embed(t)] for t in input_data_list]

    return BMEmbedder()



def graphiti_clients(driver: Any, embed: Callable[[str], Sequence[float]]) -> Any:
    """GraphitiClients for ``search``: bm's embedder; an LLM and a cross-encoder that refuse
    (the RRF recipes used here never call them; nothing may reach OpenAI)."""
    graphiti_env()
    from graphiti_core.cross_encoder.client import CrossEncoderClient
    from graphiti_core.graphiti_types import GraphitiClients
    from graphiti_core.llm_client.client import LLMClient
    from graphiti_core.tracer import NoOpTracer

    class NoLLM(LLMClient):
        async def _generate_response(self, *args: Any, **kwargs: Any) -> dict:
            raise BMError("graphiti asked for an LLM", hint="bm writes and searches graphiti without one: a bug")

    class NoCrossEncoder(CrossEncoderClient):
        async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
            raise BMError("graphiti asked for a cross-encoder", hint="bm searches graphiti with RRF: a bug")

    return GraphitiClients(driver=driver, llm_client=NoLLM(None), embedder=bm_embedder(embed),
                           cross_encoder=NoCrossEncoder(), tracer=NoOpTracer())
