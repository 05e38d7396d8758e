"""`bm mcp` end to end with the official SDK's own client: over stdio (the server a
subprocess, as a client starts it) and over streamable HTTP (bearer token): every tool,
bad arguments as error results, users kept apart, forget, resources, the daemon path."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from conftest import BM_CMD

from brandmind.cli import tools

TOKEN = "test-token-0123456789abcdef"


@asynccontextmanager
async def stdio_session(*args: str):
    params = StdioServerParameters(command=BM_CMD[0], args=[*BM_CMD[1:], "mcp", *args], env=dict(os.environ))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def run(fn, *args):
    """Run ``fn(session)`` in a session with a fresh `bm mcp` over stdio."""
    async def main():
        async with stdio_session(*args) as session:
            return await fn(session)
    return anyio.run(main)


async def call(session, name: str, args: dict) -> dict:
    res = await session.call_tool(name, args)
    assert not res.is_error, (name, args, res.content[0].text)
    data = json.loads(res.content[0].text)
    assert res.structured_content == data
    return data


async def error(session, name: str, args) -> str:
    res = await session.call_tool(name, args)
    assert res.is_error, (name, args, res)
    (text,) = [c.text for c in res.content]
    assert "\n" not in text and "Traceback" not in text and "(hint: " in text, text
    return text


# -- stdio ----------------------------------------------------------------------------------------
def test_the_tools_listed_are_the_exported_ones_with_their_annotations():
    async def check(s):
        return (await s.list_tools()).tools, s.initialize_result
    listed, init = run(check)
    assert init.server_info.name == "bm" and "remember" in (init.instructions or "")
    assert [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed] == tools.export("mcp")
    forget = next(t for t in listed if t.name == "forget")
    assert forget.annotations.destructive_hint and not forget.annotations.read_only_hint
    assert next(t for t in listed if t.name == "recall").annotations.read_only_hint


def test_every_tool_over_stdio(store):
    async def session(s):
        ann = await call(s, "remember", {"text": "Ann moved to Lisbon in May 2024", "user": "ann", "type": "fact"})
        brief = await call(s, "remember", {"text": "Ann's gate code today is 5521", "user": "ann", "ttl": "12h"})
        assert brief["expires_at"] > brief["ts"]
        kept = await call(s, "remember", {"text": "Ann is allergic to peanuts", "user": "ann", "pin": True})
        assert "expires_at" not in kept and (await call(s, "get", {"id": kept["id"]}))["pinned"] is True
        note = await call(s, "create_note", {"text": "Ann takes the 28 tram to work", "user": "ann"})
        found = await call(s, "recall", {"query": "Lisbon", "user": "ann", "k": 5})
        assert found["results"][0] == {"id": ann["id"], "snippet": "Ann moved to Lisbon in May 2024",
                                       "score": found["results"][0]["score"], "type": "fact", "ts": ann["ts"]}
        assert [r["id"] for r in (await call(s, "recall_memory", {"query": "Lisbon", "user": "ann"}))["results"]] \
            == [r["id"] for r in (await call(s, "recall", {"query": "Lisbon", "user": "ann"}))["results"]]
        full = await call(s, "get", {"id": ann["id"]})
        assert full["text"] == "Ann moved to Lisbon in May 2024" and full["user"] == "ann"
        ctx = await call(s, "context", {"query": "where does Ann live", "user": "ann", "budget": 500})
        assert "Lisbon" in ctx["text"] and 0 < ctx["tokens"] <= 500 and ann["id"] in ctx["memory_ids"]
        assert (await call(s, "block_set", {"label": "human", "text": "Prefers tables.", "user": "ann"}))["value"] \
            == "Prefers tables."
        await call(s, "block_append", {"label": "human", "text": "Based in Lisbon.", "user": "ann"})
        assert (await call(s, "block_get", {"label": "human", "user": "ann"}))["value"] \
            == "Prefers tables.\nBased in Lisbon.\n"
        assert [b["label"] for b in (await call(s, "block_list", {"user": "ann"}))["blocks"]] == ["human"]
        edge = await call(s, "kg_link", {"src": "Ann", "predicate": "lives in", "dst": "Lisbon", "user": "ann"})
        assert edge["predicate"] == "lives_in"
        around = await call(s, "kg_neighbors", {"ref": "Ann", "user": "ann"})
        assert [n["name"] for n in around["nodes"]] == ["Lisbon"] and "_user" not in around["root"]
        hubs = await call(s, "kg_hubs", {"user": "ann", "by": "weight", "limit": 1})
        assert [(h["name"], h["degree"]) for h in hubs["hubs"]] == [("Ann", 1)]  # graph views
        groups = await call(s, "kg_clusters", {"user": "ann", "min_size": 2, "top": 1})
        assert [(c["size"], c["entities"][0]["name"]) for c in groups["clusters"]] == [(2, "Ann")]
        assert "cannot read at 'someday'" in await error(s, "kg_hubs", {"user": "ann", "at": "someday"})
        link = await call(s, "create_link", {"src": note["id"], "dst": ann["id"], "type": "supports", "strength": 0.8})
        assert (link["src"], link["dst"], link["predicate"], link["weight"]) == (note["id"], ann["id"], "supports", 0.8)
        linked = await call(s, "get_linked_notes", {"id": ann["id"]})
        assert [n["id"] for n in linked["notes"]] == [note["id"]]
        assert await call(s, "skill_match", {"query": "plan a trip"}) == {"skills": []}
        assert await call(s, "forget", {"id": note["id"]}) == {"forgotten": [note["id"]], "beads": []}
    run(session)


def test_skill_match_finds_a_stored_skill(bm):
    assert bm("skill", "add", "trip-planning", "--description", "Plan a trip: flights, hotels, an itinerary").code == 0

    async def session(s):
        return await call(s, "skill_match", {"query": "plan a trip to Kyoto", "k": 1})
    assert [m["name"] for m in run(session)["skills"]] == ["trip-planning"]


def test_bad_arguments_are_error_results_and_the_server_goes_on(store):
    async def session(s):
        out = [await error(s, "recall", {}), await error(s, "recall", {"query": 42}),
               await error(s, "recall", {"query": "x", "k": 0}), await error(s, "recall", {"query": "x", "kk": 3}),
               await error(s, "remember", {"text": "x", "type": "gossip"}), await error(s, "recal", {"query": "x"}),
               await error(s, "get", {"id": "m_nope"}), await error(s, "forget", {"id": "m_nope"}),
               await error(s, "remember", {"text": "   "}), await error(s, "kg_neighbors", {"ref": "Nobody"}),
               await error(s, "block_set", {"label": "bad label!", "text": "x"}),
               await error(s, "remember", {"text": "x", "user": " padded "}),
               await error(s, "remember", {"text": "x", "ttl": "3x"})]
        ok = await call(s, "remember", {"text": "still serving", "user": "ann"})
        return out, ok
    out, ok = run(session)
    assert out[0] == "recall: missing required argument query (hint: call recall(query: string, user?: string, " \
                     "agent?: string, k?: integer))"
    assert out[1].startswith("recall: query must be a string, got a number")
    assert "k must be from 1 to 1,000, got 0" in out[2] and "unknown argument kk" in out[3]
    assert "not one of the choices" in out[4] and "did you mean recall?" in out[5]
    assert out[6].startswith("no memory 'm_nope'") and out[7].startswith("no memory 'm_nope'")
    assert "text is empty" in out[8] and "Nobody" in out[9] and "invalid user" in out[11]
    assert "must be a duration" in out[12], out[12]
    assert ok["id"].startswith("m_")


def test_two_users_are_kept_apart(store):
    async def session(s):
        await call(s, "remember", {"text": "My locker code is 4711", "user": "ann"})
        await call(s, "remember", {"text": "Bob's locker is the blue one", "user": "bob"})
        ann = await call(s, "recall", {"query": "locker code", "user": "ann", "k": 10})
        bob = await call(s, "recall", {"query": "locker code", "user": "bob", "k": 10})
        bob_ctx = await call(s, "context", {"query": "locker code", "user": "bob"})
        await call(s, "block_set", {"label": "human", "text": "Ann only", "user": "ann"})
        bob_block = await call(s, "block_get", {"label": "human", "user": "bob"})
        return ann, bob, bob_ctx, bob_block
    ann, bob, bob_ctx, bob_block = run(session)
    assert [r["snippet"] for r in ann["results"]] == ["My locker code is 4711"]
    assert [r["snippet"] for r in bob["results"]] == ["Bob's locker is the blue one"]
    assert "4711" not in bob_ctx["text"] and bob_block["value"] == ""


def test_a_forget_removes_the_text_from_later_recall_and_context(store):
    async def session(s):
        secret = await call(s, "remember", {"text": "Ann's bank PIN is 9931", "user": "ann"})
        await call(s, "remember", {"text": "Ann banks with Millennium", "user": "ann"})
        before = await call(s, "context", {"query": "Ann bank PIN", "user": "ann"})
        await call(s, "forget", {"id": secret["id"]})
        after = await call(s, "recall", {"query": "Ann bank PIN", "user": "ann"})
        ctx = await call(s, "context", {"query": "Ann bank PIN", "user": "ann"})
        gone = await error(s, "get", {"id": secret["id"]})
        return before, after, ctx, gone
    before, after, ctx, gone = run(session)
    assert "9931" in before["text"]
    assert [r["snippet"] for r in after["results"]] == ["Ann banks with Millennium"]
    assert "9931" not in ctx["text"] and "Millennium" in ctx["text"] and "no memory" in gone


def test_forget_by_match_takes_it_out_of_the_block_too(store):
    """An agent asked to forget something it wrote into core memory: one call, nothing left to
    come back in the next context."""
    async def session(s):
        await call(s, "block_append", {"label": "human", "text": "Likes tea. Her bank PIN is 9931.", "user": "ann"})
        await call(s, "remember", {"text": "Ann's bank PIN is 9931", "user": "ann"})
        done = await call(s, "forget", {"match": "PIN 9931", "user": "ann"})
        ctx = await call(s, "context", {"query": "Ann bank PIN", "user": "ann"})
        both = await error(s, "forget", {"match": "PIN", "id": "m_x"})
        neither = await error(s, "forget", {"user": "ann"})
        return done, ctx, both, neither
    done, ctx, both, neither = run(session)
    assert len(done["forgotten"]) == 1 and done["blocks"] == [{"label": "human", "agent": None, "sentences": 1}]
    assert "9931" not in ctx["text"] and "Likes tea." in ctx["text"]
    assert "exactly one of id and match" in both and "exactly one of id and match" in neither


def test_core_blocks_are_resources(store):
    async def session(s):
        await call(s, "block_set", {"label": "human", "text": "Prefers tea.", "user": "ann"})
        listed = (await s.list_resources()).resources
        templates = (await s.list_resource_templates()).resource_templates
        read = (await s.read_resource("bm://blocks/ann/human")).contents
        with pytest.raises(MCPError, match="unknown resource"):
            await s.read_resource("bm://blocks/ann")
        with pytest.raises(MCPError, match="no block 'nosuch'"):
            await s.read_resource("bm://blocks/ann/nosuch")
        return listed, templates, read
    listed, templates, read = run(session, "--user", "ann")
    assert [str(r.uri) for r in listed] == ["bm://blocks/ann/human"]
    assert [t.uri_template for t in templates] == ["bm://blocks/{user}/{label}"]
    assert [(c.text, c.mime_type) for c in read] == [("Prefers tea.", "text/plain")]


def test_the_user_option_is_the_default_user_of_calls(store):
    async def session(s):
        await call(s, "remember", {"text": "Ann likes figs"})
        return await call(s, "recall", {"query": "figs", "user": "default"})
    assert run(session, "--user", "ann")["results"] == []
    from conftest import open_memory

    with open_memory() as mem:
        assert [m["text"] for m in mem.list_memories(user="ann")] == ["Ann likes figs"]


@pytest.mark.real_embedder
@pytest.mark.slow
def test_recall_with_the_real_model_finds_by_meaning(store):
    async def session(s):
        await call(s, "remember", {"text": "Ann relocated to Lisbon last spring", "user": "ann"})
        await call(s, "remember", {"text": "Ann's favourite dish is bacalhau", "user": "ann"})
        return await call(s, "recall", {"query": "Which city does Ann live in now?", "user": "ann", "k": 1})
    assert [r["snippet"] for r in run(session)["results"]] == ["Ann relocated to Lisbon last spring"]


def test_calls_go_to_the_daemon_when_one_serves_the_store(store):
    daemon = subprocess.Popen([*BM_CMD, "daemon", "run"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sock = Path(os.environ["BM_HOME"]) / "state" / "bm.sock"
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert daemon.poll() is None and time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.1)

        async def session(s):
            res = await s.call_tool("remember", {"text": "Ann likes figs", "user": "ann"})
            bad = await s.call_tool("recall", {"query": "figs", "k": -1})
            found = await s.call_tool("recall", {"query": "figs", "user": "ann"})
            return res, bad, found
        res, bad, found = run(session)
    finally:
        daemon.terminate()
        daemon.wait(30)
    assert not res.is_error and res.meta == {"bm/served_by": "daemon"}
    assert bad.is_error and "k must be from 1" in bad.content[0].text
    assert found.meta == {"bm/served_by": "daemon"}
    assert json.loads(found.content[0].text)["results"][0]["snippet"] == "Ann likes figs"


# -- streamable HTTP ------------------------------------------------------------------------------
@pytest.fixture
def http_server(store):
    """`bm mcp --http --port 0` with a known token: yields its URL."""
    proc = subprocess.Popen([*BM_CMD, "mcp", "--http", "--port", "0", "--token", TOKEN],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        found = re.search(r"serving (http://127\.0\.0\.1:\d+/mcp)", line)
        assert found, (line, proc.poll())
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stderr.close()


def http_run(url: str, fn, token: str = TOKEN):
    async def main():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await fn(session)
    return anyio.run(main)


def test_http_refuses_a_missing_or_wrong_token(http_server):
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": f"Basic {TOKEN}"},
                    {"Authorization": f"Bearer {TOKEN}x"}):
        res = httpx2.post(http_server, json=hello, headers={**accept, **headers}, timeout=30)
        assert res.status_code == 401, (headers, res.status_code, res.text)
    assert httpx2.post(http_server, json=hello, headers={**accept, "Authorization": f"Bearer {TOKEN}"},
                       timeout=30).status_code == 200


def test_every_tool_over_http(http_server):
    async def session(s):
        names = [t.name for t in (await s.list_tools()).tools]
        ann = await call(s, "remember", {"text": "Ann moved to Lisbon", "user": "ann"})
        await call(s, "remember", {"text": "Bob moved to Porto", "user": "bob"})
        found = await call(s, "recall", {"query": "moved", "user": "ann"})
        bad = await error(s, "recall", {"query": ["moved"]})
        await call(s, "forget", {"id": ann["id"]})
        after = await call(s, "context", {"query": "moved", "user": "ann"})
        return names, found, bad, after
    names, found, bad, after = http_run(http_server, session)
    assert names == [t.name for t in tools.TOOLS]
    assert [r["snippet"] for r in found["results"]] == ["Ann moved to Lisbon"]
    assert "query must be a string, got an array" in bad
    assert "Lisbon" not in after["text"] and "Porto" not in after["text"]


def test_http_without_a_token_makes_one_and_keeps_it_private(store):
    proc = subprocess.Popen([*BM_CMD, "mcp", "--http", "--port", "0"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        first, second = proc.stderr.readline(), proc.stderr.readline()
        path = Path(os.environ["BM_HOME"]) / "state" / "mcp-token"
        token = path.read_text().strip()
        assert token in first and str(path) in first and len(token) >= 32
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        url = re.search(r"(http://\S+/mcp)", second).group(1)

        async def session(s):
            return len((await s.list_tools()).tools)
        assert http_run(url, session, token=token) == len(tools.TOOLS)
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stderr.close()


def test_http_refuses_a_short_token_and_a_busy_port(bm, store):
    from conftest import assert_error, run_bm

    assert_error(run_bm("mcp", "--http", "--token", "short"), 2, "too short")
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_error(run_bm("mcp", "--http", "--port", port, "--token", TOKEN), 2, f"cannot listen on 127.0.0.1:{port}")


@pytest.mark.parametrize("missing", ["mcp", "anyio"])
def test_without_the_sdk_bm_mcp_names_the_extra(tmp_path, missing):
    """`bm mcp` where the SDK (or one of its dependencies) does not import: one error line
    naming `brandmind[mcp]`; install and export need no SDK."""
    from conftest import assert_error, run_bm

    shim = tmp_path / "shim" / missing
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(f'raise ModuleNotFoundError("No module named {missing!r}", name={missing!r})\n')
    env = {"PYTHONPATH": str(shim.parent)}
    line = assert_error(run_bm("mcp", env=env), 1, missing)
    assert "pip install 'brandmind[mcp]'" in line
    assert run_bm("tools", "export", "--format", "openai", env=env).code == 0
    assert run_bm("mcp", "install", "cursor", "--config", tmp_path / "mcp.json", env=env).code == 0
