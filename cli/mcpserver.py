"""bm's MCP server, on the official ``mcp`` SDK (the ``mcp`` extra): `bm mcp` (stdio) and
`bm mcp --http` (streamable HTTP on 127.0.0.1 behind a bearer token).

The tools are those of cli/tools.py, listed with their JSON Schemas and annotations as
declared there; the resources are the core memory blocks (``bm://blocks/{user}/{label}``).
Each call goes to the daemon when one serves the store (``client.call_tool``, so the model
and the vectors stay warm there), else to a Memory this process opens on its first call
and keeps (writes embed inline).  A bad call is an error result (``isError`` with the one
line ``message (hint: …)``): the server goes on.

Built on the SDK's low-level ``Server`` rather than ``MCPServer`` (ex-FastMCP), which
derives each schema from a Python signature: bm declares the schemas once, in cli/tools.py,
and the same declarations serve `bm tools export` and the daemon.  Only `bm mcp` imports
this module (it needs the SDK); the rest of the CLI never does.
"""
from __future__ import annotations

import hmac
import json
import logging
import os
import sys
import threading
from typing import Any
from urllib.parse import quote, unquote

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server

from brandmind.errors import BMError, InvalidInput, UsageError

from . import tools

log = logging.getLogger("bm.mcp")
BLOCKS_URI = "bm://blocks/{user}/{label}"
SERVED_BY = "bm/served_by"  # a result's _meta: "daemon" or "local" (this process's own store)
INSTRUCTIONS = ("bm is the user's long-term memory. Before answering, call context (or recall) with what "
                "you are about to do; store durable facts, preferences and decisions with remember; use "
                "forget when the user asks you to. Pass the same user id every time.")


class Backend:
    """Where tool calls run: the daemon serving the store, or a Memory opened here once."""

    def __init__(self, user: str | None = None) -> None:
        self.user = user  # the user of calls that name none (`bm mcp --user`)
        self._mem: Any = None
        self._lock = threading.Lock()

    def call(self, name: str, args: Any) -> Any:
        return self.run(name, args)[0]

    def run(self, name: str, args: Any) -> tuple[Any, str]:
        """The tool's result, and where it ran: "daemon" or "local"."""
        tool = tools.find(name)
        args = tools.check(tool, args)  # refused here, before any socket or store is touched
        if self.user is not None and "user" in tool.params and "user" not in args:
            args["user"] = self.user
        result = self._daemon(name, args)
        if result is not _NO_DAEMON:
            return result, "daemon"
        with self._lock:
            return tools.call(self.memory(), name, args), "local"

    def _daemon(self, name: str, args: dict) -> Any:
        try:
            from . import client
        except ImportError:  # pragma: no cover - a checkout without the service client
            return _NO_DAEMON
        try:
            return client.call_tool(name, args)
        except client.NoDaemon:
            return _NO_DAEMON

    def memory(self) -> Any:
        """The store, opened on first use (and created then, as the first write would)."""
        if self._mem is None:
            from brandmind.memory import Memory

            self._mem = Memory(create=True)
        return self._mem

    def close(self) -> None:
        with self._lock:
            if self._mem is not None:
                self._mem.close()
                self._mem = None


_NO_DAEMON = object()


def error_text(exc: BaseException) -> str:
    """The one line a failed call returns: ``message (hint: …)``, as the CLI prints it."""
    if isinstance(exc, BMError):
        return exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
    return f"internal error in bm: {type(exc).__name__}: {exc} (hint: see the server's stderr; report it if it persists)"


def _mcp_tool(tool: tools.Tool) -> types.Tool:
    spec = tool.schema("mcp")
    return types.Tool(name=spec["name"], title=spec["title"], description=spec["description"],
                      input_schema=spec["inputSchema"], annotations=types.ToolAnnotations(**{
                          "title": tool.title, "read_only_hint": tool.read_only,
                          "destructive_hint": tool.destructive, "idempotent_hint": tool.idempotent,
                          "open_world_hint": False}))


def block_uri(user: str, label: str) -> str:
    return BLOCKS_URI.format(user=quote(user, safe=""), label=quote(label, safe=""))


def parse_block_uri(uri: str) -> tuple[str, str]:
    prefix = "bm://blocks/"
    parts = uri[len(prefix):].split("/") if uri.startswith(prefix) else []
    if len(parts) != 2 or not all(parts):
        raise InvalidInput(f"unknown resource {uri!r}", hint=f"bm's resources are {BLOCKS_URI}")
    return unquote(parts[0]), unquote(parts[1])


def build(backend: Backend) -> Server:
    """The MCP server: bm's tools and its core blocks as resources, over ``backend``."""
    from brandmind import __version__

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_mcp_tool(t) for t in tools.TOOLS])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            result, where = await anyio.to_thread.run_sync(backend.run, params.name, params.arguments)
        except Exception as exc:  # a bad call is the caller's error result, never the server's end
            if not isinstance(exc, BMError):
                log.exception("tool %r failed", params.name)
            return types.CallToolResult(content=[types.TextContent(text=error_text(exc))], is_error=True)
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(text=text)],
                                    structured_content=result if isinstance(result, dict) else None,
                                    _meta={SERVED_BY: where})

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        found = await anyio.to_thread.run_sync(backend.call, "block_list", {})
        return types.ListResourcesResult(resources=[
            types.Resource(uri=block_uri(b["user"] or "", b["label"]), name=f"{b['user']}/{b['label']}",
                           title=f"{b['label']} ({b['user']})", description=b.get("description") or None,
                           mime_type="text/plain")
            for b in found["blocks"] if b.get("user") and b.get("scope") == "user"])

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            uri_template=BLOCKS_URI, name="core memory block", mime_type="text/plain",
            description="A user's core memory block by label (human, agent_persona, user_persona_profile, ...)")])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        def read() -> dict:
            user, label = parse_block_uri(str(params.uri))
            return backend.call("block_get", {"label": label, "user": user})

        try:
            block = await anyio.to_thread.run_sync(read)
        except BMError as exc:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=types.INVALID_PARAMS, message=error_text(exc)) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=str(params.uri), text=block["value"], mime_type="text/plain")])

    return Server("bm", version=__version__, title="bm memory", instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource)


# -- transports ----------------------------------------------------------------------------------
def serve_stdio(user: str | None = None) -> None:
    """Serve one client over stdin/stdout until it closes them."""
    backend = Backend(user)
    server = build(backend)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        backend.close()


class _Token:
    """The SDK's TokenVerifier for one shared secret (compared in constant time)."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self.token.encode()):
            return AccessToken(token=token, client_id="bm", scopes=[])
        return None


def http_app(server: Server, token: str, port: int) -> Any:
    """The streamable-HTTP ASGI app at /mcp, refusing requests without ``Bearer <token>``
    (and, against DNS rebinding, any Host or Origin that is not this machine)."""
    base = f"http://127.0.0.1:{port}"
    return server.streamable_http_app(host="127.0.0.1", token_verifier=_Token(token),
                                      auth=AuthSettings(issuer_url=base, resource_server_url=None))


def serve_http(token: str, port: int = 0, host: str = "127.0.0.1", user: str | None = None) -> None:
    """Serve MCP over streamable HTTP on ``host:port`` (0: a free port) until interrupted;
    prints ``bm mcp: serving http://HOST:PORT/mcp`` on stderr once it listens."""
    import socket

    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1"):
        raise UsageError(f"bm mcp --http serves this machine only, not {host!r}",
                         hint="put a TLS reverse proxy in front of it to reach it from elsewhere")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                         hint="choose another --port, or 0 for any free one") from None
    sock.listen(128)  # before saying so: a client that connects at once waits in the backlog
    port = sock.getsockname()[1]
    backend = Backend(user)
    app = http_app(build(backend), token, port)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    sys.stderr.write(f"bm mcp: serving http://{host}:{port}/mcp (Authorization: Bearer <token>)\n")
    sys.stderr.flush()
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        backend.close()
        sock.close()


def quiet_sdk_logging() -> None:
    """The SDK logs each request at INFO; bm's stderr gets warnings and errors only."""
    level = os.environ.get("BM_MCP_LOG", "WARNING").upper()
    logging.basicConfig(level=getattr(logging, level, logging.WARNING), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
