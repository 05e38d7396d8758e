"""`bm mcp install|uninstall CLIENT`: bm's server entry in an MCP client's JSON config.

The entry goes under ``mcpServers.bm`` (Claude Code: user scope in ``~/.claude.json``;
Claude Desktop: ``claude_desktop_config.json`` in its config folder; Cursor:
``~/.cursor/mcp.json``), everything else in the file is kept as it was, and the file is
replaced atomically with its mode kept.  A file that is not a JSON object is an error and
left alone.  Standard library only.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from brandmind.errors import InvalidInput, UsageError

CLIENTS = ("claude-code", "claude-desktop", "cursor")
SERVER_NAME = "bm"


def config_path(client: str, *, home: Path | None = None, platform: str | None = None,
                env: Any = None) -> Path:
    """Where ``client`` keeps its MCP servers on this machine."""
    home = home or Path.home()
    platform = platform or sys.platform
    env = os.environ if env is None else env
    if client == "claude-code":
        return home / ".claude.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "claude-desktop":
        if platform == "darwin":
            return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if platform.startswith("win"):
            base = Path(env["APPDATA"]) if env.get("APPDATA") else home / "AppData" / "Roaming"
            return base / "Claude" / "claude_desktop_config.json"
        base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
        return base / "Claude" / "claude_desktop_config.json"
    raise UsageError(f"unknown MCP client {client!r}", hint="use one of: " + ", ".join(CLIENTS))


def bm_command() -> list[str]:
    """The absolute command that starts `bm mcp`: the `bm` script beside this Python (its
    venv), else the one on PATH, else this Python running the CLI module."""
    exe = Path(sys.executable)
    for name in ("bm", "bm.exe"):
        beside = exe.parent / name
        if beside.is_file() and os.access(beside, os.X_OK):
            return [str(beside.absolute()), "mcp"]
    found = shutil.which("bm")
    if found:
        return [str(Path(found).resolve()), "mcp"]
    return [str(exe.absolute()), "-m", "brandmind.cli.app", "mcp"]


def server_entry(client: str, user: str | None = None) -> dict:
    """bm's entry in the client's ``mcpServers``: the command, its args, BM_HOME when set."""
    command, *args = bm_command()
    if user is not None:
        args += ["--user", user]
    entry: dict = {"command": command, "args": args}
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    home = os.environ.get("BM_HOME")
    if home:
        entry["env"] = {"BM_HOME": str(Path(home).expanduser().resolve())}
    return entry


def read_config(path: Path) -> dict:
    """The client's config as a dict ({} when the file is missing or empty); a file that is
    not a JSON object is an InvalidInput and is never overwritten."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text (byte {exc.start})",
                           hint="fix or move the file away; bm left it unchanged") from None
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
                           hint="fix the file (or move it away) and run the command again; bm left it unchanged") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} holds a JSON {type(data).__name__}, not an object",
                           hint="an MCP client config is a JSON object; bm left it unchanged")
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InvalidInput(f"{path}: mcpServers is not a JSON object",
                           hint="fix the file (mcpServers maps names to servers); bm left it unchanged")
    return data


def write_config(path: Path, data: dict) -> None:
    """Replace ``path`` with ``data`` atomically, keeping its mode (0600 for a new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".bm-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(client: str, *, path: str | None = None, dry_run: bool = False, name: str = SERVER_NAME,
            user: str | None = None) -> dict:
    """Add (or update) bm's entry in ``client``'s config; returns what was done where:
    ``{"client", "path", "server", "entry", "action": added|updated|unchanged, "dry_run"}``."""
    where = Path(path).expanduser() if path else config_path(client)
    data = read_config(where)
    entry = server_entry(client, user)
    servers = data.get("mcpServers") or {}
    old = servers.get(name)
    action = "unchanged" if old == entry else "updated" if old is not None else "added"
    if action != "unchanged" and not dry_run:
        data["mcpServers"] = {**servers, name: entry}
        write_config(where, data)
    return {"client": client, "path": str(where), "server": name, "entry": entry, "action": action,
            "dry_run": dry_run}


def uninstall(client: str, *, path: str | None = None, dry_run: bool = False, name: str = SERVER_NAME) -> dict:
    """Remove bm's entry from ``client``'s config (the rest stays); ``action`` is removed or absent."""
    where = Path(path).expanduser() if path else config_path(client)
    data = read_config(where)
    servers = data.get("mcpServers") or {}
    if name not in servers:
        return {"client": client, "path": str(where), "server": name, "entry": None, "action": "absent",
                "dry_run": dry_run}
    entry = servers[name]
    if not dry_run:
        data["mcpServers"] = {k: v for k, v in servers.items() if k != name}
        write_config(where, data)
    return {"client": client, "path": str(where), "server": name, "entry": entry, "action": "removed",
            "dry_run": dry_run}
