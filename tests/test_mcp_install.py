"""`bm mcp install|uninstall CLIENT`: bm's entry merged into a client's JSON config, the
rest of the file kept, idempotent, a broken file refused and left alone; the entry written
starts a working server."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import assert_error

from brandmind.cli import mcpinstall

OTHER = {"numStartups": 12, "projects": {"/src/x": {"allowedTools": ["Bash"]}},
         "mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]}}}


@pytest.mark.parametrize("client", mcpinstall.CLIENTS)
def test_install_keeps_the_rest_and_is_idempotent_and_uninstall_removes_it(bm, tmp_path, client):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(OTHER))
    cfg.chmod(0o640)
    res = bm("mcp", "install", client, "--config", cfg, "--json")
    assert res.code == 0, res
    report = res.json()
    assert report["action"] == "added" and report["path"] == str(cfg) and not report["dry_run"]
    data = json.loads(cfg.read_text())
    entry = data["mcpServers"]["bm"]
    assert entry == report["entry"] and entry["args"][-1] == "mcp"
    assert Path(entry["command"]).is_absolute() and os.access(entry["command"], os.X_OK)
    assert entry["env"] == {"BM_HOME": str(Path(os.environ["BM_HOME"]).resolve())}
    assert entry.get("type") == ("stdio" if client == "claude-code" else None)
    assert {k: v for k, v in data.items() if k != "mcpServers"} == {k: v for k, v in OTHER.items() if k != "mcpServers"}
    assert data["mcpServers"]["github"] == OTHER["mcpServers"]["github"]
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o640
    written = cfg.read_bytes()
    again = bm("mcp", "install", client, "--config", cfg, "--json")
    assert again.json()["action"] == "unchanged" and cfg.read_bytes() == written
    gone = bm("mcp", "uninstall", client, "--config", cfg, "--json")
    assert gone.json()["action"] == "removed"
    assert json.loads(cfg.read_text()) == {**OTHER, "mcpServers": OTHER["mcpServers"]}
    assert bm("mcp", "uninstall", client, "--config", cfg, "--json").json()["action"] == "absent"


def test_install_prints_what_it_wrote_and_where(bm, tmp_path, monkeypatch):
    cfg = tmp_path / "new" / "mcp.json"
    piped = bm("mcp", "install", "cursor", "--config", cfg, "--dry-run")  # JSON when piped, as every command
    assert piped.json()["path"] == str(cfg) and piped.json()["entry"]["args"][-1] == "mcp", piped
    from brandmind.cli import mcp as mcp_cmd

    monkeypatch.setattr(mcp_cmd, "wants_json", lambda as_json: as_json)  # as on a terminal
    res = bm("mcp", "install", "cursor", "--config", cfg, "--user", "ann")
    assert res.code == 0, res
    first, rest = res.out.split("\n", 1)
    assert first == f"added MCP server 'bm' in {cfg}"
    shown = json.loads(rest)
    assert shown == {"mcpServers": {"bm": json.loads(cfg.read_text())["mcpServers"]["bm"]}}
    assert shown["mcpServers"]["bm"]["args"][-3:] == ["mcp", "--user", "ann"]
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600


def test_a_dry_run_writes_nothing(bm, tmp_path):
    cfg = tmp_path / "claude.json"
    res = bm("mcp", "install", "claude-code", "--config", cfg, "--dry-run", "--json")
    assert res.code == 0 and res.json()["action"] == "added" and res.json()["dry_run"], res
    assert not cfg.exists()
    cfg.write_text(json.dumps(OTHER))
    bm("mcp", "install", "claude-code", "--config", cfg)
    before = cfg.read_bytes()
    assert bm("mcp", "uninstall", "claude-code", "--config", cfg, "--dry-run", "--json").json()["action"] == "removed"
    assert cfg.read_bytes() == before


@pytest.mark.parametrize("text,words", [("{\"mcpServers\": {", "not valid JSON"), ("[1, 2]", "JSON list, not an object"),
                                        ('{"mcpServers": []}', "mcpServers is not a JSON object")])
def test_a_broken_config_is_an_error_and_left_alone(bm, tmp_path, text, words):
    cfg = tmp_path / "claude_desktop_config.json"
    cfg.write_text(text)
    for verb in ("install", "uninstall"):
        line = assert_error(bm("mcp", verb, "claude-desktop", "--config", cfg), 1, words, "left it unchanged")
        assert str(cfg) in line
    assert cfg.read_text() == text


def test_an_unknown_client_is_a_usage_error(bm, tmp_path):
    assert_error(bm("mcp", "install", "vscode", "--config", tmp_path / "x.json"), 2, "unknown MCP client 'vscode'",
                 "claude-code, claude-desktop, cursor")


def test_where_each_client_keeps_its_config(tmp_path):
    home = tmp_path
    assert mcpinstall.config_path("claude-code", home=home) == home / ".claude.json"
    assert mcpinstall.config_path("cursor", home=home) == home / ".cursor" / "mcp.json"
    desk = "claude_desktop_config.json"
    assert mcpinstall.config_path("claude-desktop", home=home, platform="darwin") == \
        home / "Library" / "Application Support" / "Claude" / desk
    assert mcpinstall.config_path("claude-desktop", home=home, platform="linux", env={}) == home / ".config" / "Claude" / desk
    assert mcpinstall.config_path("claude-desktop", home=home, platform="win32", env={"APPDATA": str(tmp_path / "AD")}) == \
        tmp_path / "AD" / "Claude" / desk


def test_the_installed_entry_starts_a_working_server(bm, tmp_path, store):
    cfg = tmp_path / "mcp.json"
    assert bm("mcp", "install", "cursor", "--config", cfg).code == 0
    entry = json.loads(cfg.read_text())["mcpServers"]["bm"]
    env = {k: v for k, v in os.environ.items() if k != "BM_HOME"} | entry["env"]

    async def main():
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    res = await session.call_tool("remember", {"text": "installed and working", "user": "ann"})
                    return res.is_error
    assert anyio.run(main) is False
    from conftest import open_memory

    with open_memory() as mem:
        assert [m["text"] for m in mem.list_memories(user="ann")] == ["installed and working"]
