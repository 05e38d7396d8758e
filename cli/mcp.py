"""bm mcp [--http] | mcp install|uninstall CLIENT | tools export: bm for agents (cli/tools.py).

The server itself (cli/mcpserver.py) needs the ``mcp`` SDK and is imported only when
`bm mcp` serves; `bm tools export` and `bm mcp install` need neither the SDK nor the store.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Optional

import typer

from .common import name_check, option
from .output import emit_json, info, wants_json

TOKEN_FILE = "mcp-token"

mcp_app = typer.Typer(
    help="""Serve bm's memory tools to MCP clients (Claude Code, Claude Desktop, Cursor, Codex ...).

\b
Examples:
  bm mcp                                  # stdio: what a client starts
  bm mcp --http --port 8765               # streamable HTTP on 127.0.0.1, bearer token
  bm mcp install claude-code              # add bm to Claude Code's config""",
    invoke_without_command=True)
tools_app = typer.Typer(help="bm's agent tools (the MCP tool set) for agents that call functions directly.",
                        no_args_is_help=True)

ClientArg = Annotated[str, typer.Argument(help="claude-code, claude-desktop or cursor.")]
ConfigOpt = Annotated[Optional[str], typer.Option("--config", help="The client's config file (default: where the client keeps it).")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print what would be written; change nothing.")]


@mcp_app.callback()
def mcp_serve(
    ctx: typer.Context,
    user: Annotated[Optional[str], option("--user", "-u", help="The user of tool calls that name none (default: config `user`).",
                                          check=name_check("user"))] = None,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP on 127.0.0.1 (at /mcp) instead of stdio.")] = False,
    port: Annotated[int, typer.Option("--port", help="With --http: the port (0: any free one, printed on stderr).")] = 8765,
    token: Annotated[Optional[str], typer.Option("--token", help="With --http: the bearer token clients must send "
                                                 "(default: BM_MCP_TOKEN, else one kept in the state dir).")] = None,
) -> None:
    """Serve bm's memory tools over MCP: stdio (what a client starts), or --http.

    \b
    Examples:
      bm mcp --user ann
      BM_MCP_TOKEN=s3cret-at-least-16-chars bm mcp --http --port 8765
    """
    if ctx.invoked_subcommand is not None:
        return
    if not 0 <= port <= 65535:
        from brandmind.errors import UsageError

        raise UsageError(f"--port must be from 0 to 65535, got {port}", hint="e.g. --port 8765")
    from . import mcpserver  # the SDK: only when serving

    mcpserver.quiet_sdk_logging()
    if http:
        mcpserver.serve_http(http_token(token), port, user=user)
    else:
        mcpserver.serve_stdio(user)


def http_token(given: Optional[str]) -> str:
    """--token, else BM_MCP_TOKEN, else the token kept in ``<state_dir>/mcp-token`` (made on
    first use, mode 0600, and printed on stderr then)."""
    from brandmind.errors import UsageError

    token = given if given is not None else os.environ.get("BM_MCP_TOKEN")
    if token is not None:
        if len(token.strip()) < 16 or token != token.strip():
            raise UsageError("the MCP token is too short (16 characters at least, no surrounding spaces)",
                             hint="e.g. --token \"$(openssl rand -hex 24)\", or omit it for a generated one")
        return token
    from brandmind.config import Config

    path = Config.load().paths.state_dir / TOKEN_FILE
    if path.exists():
        token = path.read_text(encoding="utf-8").strip()
        if len(token) >= 16:
            info(f"bm mcp: bearer token from {path}")
            return token
    import secrets

    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    os.chmod(path, 0o600)
    info(f"bm mcp: new bearer token (kept in {path}): {token}")
    return token


def _report(result: dict, as_json: bool) -> None:
    if wants_json(as_json):
        emit_json(result)
        return
    verb = {"added": "added", "updated": "updated", "unchanged": "already had", "removed": "removed",
            "absent": "found no"}[result["action"]]
    dry = " (dry run: nothing written)" if result["dry_run"] and result["action"] in ("added", "updated", "removed") else ""
    print(f"{verb} MCP server {result['server']!r} in {result['path']}{dry}")
    if result["entry"] is not None:
        print(json.dumps({"mcpServers": {result["server"]: result["entry"]}}, indent=2))


@mcp_app.command("install")
def mcp_install(client: ClientArg, config: ConfigOpt = None, dry_run: DryRunOpt = False,
                user: Annotated[Optional[str], option("--user", "-u", help="Serve as this user by default (`bm mcp --user USER`).",
                                                      check=name_check("user"))] = None,
                as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False) -> None:
    """Add bm to an MCP client's config (keeping the rest of the file); prints what it wrote where.

    The entry runs this `bm` (absolute path) as `bm mcp`, with BM_HOME when it is set.
    Restart the client to pick it up.

    \b
    Examples:
      bm mcp install claude-code --user ann
      bm --home ~/work-memory mcp install cursor --dry-run
      bm mcp install claude-desktop --config ./claude_desktop_config.json
    """
    from . import mcpinstall

    _report(mcpinstall.install(_client(client), path=config, dry_run=dry_run, user=user), as_json)


@mcp_app.command("uninstall")
def mcp_uninstall(client: ClientArg, config: ConfigOpt = None, dry_run: DryRunOpt = False,
                  as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False) -> None:
    """Remove bm from an MCP client's config (the rest of the file stays).

    \b
    Example:
      bm mcp uninstall claude-code
    """
    from . import mcpinstall

    _report(mcpinstall.uninstall(_client(client), path=config, dry_run=dry_run), as_json)


def _client(name: str) -> str:
    from . import mcpinstall

    if name not in mcpinstall.CLIENTS:
        from brandmind.errors import UsageError

        raise UsageError(f"unknown MCP client {name!r}", hint="use one of: " + ", ".join(mcpinstall.CLIENTS))
    return name


@tools_app.command("export")
def tools_export(
    fmt: Annotated[str, typer.Option("--format", "-f", help="openai (function tools), anthropic (tool use) or mcp (MCP Tool objects with annotations).")] = "mcp",
) -> None:
    """Print the JSON schemas of bm's agent tools (the same set `bm mcp` serves).

    \b
    Examples:
      bm tools export --format openai > bm-tools.json
      bm tools export --format anthropic | jq '.[].name'
    """
    from . import tools

    json.dump(tools.export(fmt), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
