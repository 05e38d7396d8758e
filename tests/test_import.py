"""`bm import --from chatgpt|claude|mem0|basic-memory` (brandmind/importers.py): each format
through the CLI and the library, on hand-made exports of each tool's real shape
(tests/data/imports/): what is stored, its time, speaker and provenance, recall finding it, a
re-import storing nothing, and bad files refused whole."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from conftest import assert_error, open_memory, run_bm

DATA = Path(__file__).parent / "data" / "imports"
CHATGPT = DATA / "chatgpt_conversations.json"
CLAUDE = DATA / "claude_conversations.json"
MEM0 = DATA / "mem0_get_all.json"
GRAPH = DATA / "basic_memory.jsonl"
PORTO = "chatgpt:6554a1b0-1111-4c2e-9d3a-0a1b2c3d4e5f"


def export_zip(tmp_path: Path, name: str, members: dict[str, bytes]) -> Path:
    """An export archive as the tools ship it (conversations.json beside other files)."""
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


def ops() -> int:
    with open_memory() as mem:
        return mem.log.count("ops")


# -- ChatGPT ------------------------------------------------------------------------------------------
def test_chatgpt_zip_through_the_cli_keeps_the_visible_branch_times_and_provenance(bm, tmp_path):
    zipped = export_zip(tmp_path, "export.zip", {"user.json": b"{}", "chat.html": b"<html></html>",
                                                 "conversations.json": CHATGPT.read_bytes()})
    dry = bm("import", "--from", "chatgpt", zipped, "-u", "ann", "--dry-run")
    assert dry.code == 0 and dry.json()["new"] == {"turns": 8} and dry.json()["dry_run"], dry
    res = bm("import", "--from", "chatgpt", zipped, "-u", "ann")
    assert res.code == 0, res
    report = res.json()
    # 2 conversations; on the branch shown: 8 turns (one said in voice mode), and skipped a hidden system message, hidden custom
    # instructions, a code call to a tool and the tool's answer; the branch the user switched away
    # from (a later edit: "Lisbon instead?") is not there at all
    assert report["found"] == {"conversations": 2, "messages": 12} and report["skipped"] == 4, report
    assert report["new"] == {"turns": 8} and report["duplicates"] == 0, report
    beads = bm("beads", "tail", "-u", "ann", "-n", "50", "--thread", PORTO).json()
    assert [b["turn_id"] for b in beads] == ["m-u1", "m-a1", "m-u2", "m-a2", "m-u3"], beads
    first, reply, image = beads[0], beads[1], beads[4]
    assert first["ts"] == "2023-11-14T22:13:20.500Z" and first["role"] == "user" and first["speaker"] is None
    assert reply["speaker"] == "ChatGPT" and reply["role"] == "assistant"
    assert reply["meta"]["imported"] == {"from": "chatgpt", "conversation": PORTO.split(":", 1)[1],
                                         "title": "Porto trip", "message": "m-a1", "model": "gpt-4o"}
    assert image["content"] == "Here is the map I saved, is this area safe?"  # the image part left out
    voice = bm("beads", "tail", "-u", "ann", "-n", "1").json()[0]  # the newest turn, said in voice mode
    assert voice["content"] == "Also her favourite flowers are peonies." and voice["ts"] == "2024-04-05T19:35:20.000Z", voice
    everything = json.dumps(bm("beads", "tail", "-u", "ann", "-n", "50").json())
    assert "Lisbon" not in everything and "short answers" not in everything
    found = bm("recall", "quiet hotel near the river budget", "-u", "ann", "-k", "3").json()
    assert found[0]["text"].startswith("I also need a quiet hotel") and found[0]["ts"] == "2023-11-14T22:16:40.000Z", found
    assert found[0]["provenance"][0]["meta"]["imported"]["message"] == "m-u2", found[0]
    # again, and the conversations.json itself (the same ids): nothing new
    before = ops()
    again = bm("import", "--from", "chatgpt", zipped, "-u", "ann").json()
    assert again["new"] == {"turns": 0} and again["duplicates"] == 8, again
    with open_memory() as mem:
        plain = mem.import_from("chatgpt", CHATGPT, user="ann")
    assert plain["new"] == {"turns": 0} and plain["duplicates"] == 8 and ops() == before, plain


# -- Claude -------------------------------------------------------------------------------------------
def test_claude_through_the_library_and_the_cli(bm, store, tmp_path):
    with open_memory() as mem:
        report = mem.import_from("claude", CLAUDE, user="bo")
        assert report["found"] == {"conversations": 2, "messages": 5} and report["skipped"] == 1, report
        assert report["new"] == {"turns": 4}, report
        turns = mem.beads_tail(10, user="bo", thread="claude:0b6f1c2e-3333-4d5e-9f00-aabbccddeeff")
        assert [(t["role"], t["speaker"], t["ts"]) for t in turns] == [
            ("user", None, "2024-02-11T09:15:02.500Z"), ("assistant", "Claude", "2024-02-11T09:15:20.000Z")]
        # the text blocks of the reply; its thinking and tool use left out
        assert turns[1]["content"] == ("It is hungry, not dead: feed it twice a day at a 1:1:1 ratio.\n\n"
                                       "Keep it at about 24 degrees.")
        assert turns[1]["meta"]["imported"]["title"] == "Sourdough starter"
        hit = mem.recall("Berlin marathon goal time", user="bo", k=1)[0]
        assert hit["text"].startswith("I run the Berlin marathon") and hit["ts"].startswith("2024-05-20T18:00"), hit
        before = mem.log.count("ops")
    zipped = export_zip(tmp_path, "data-2024-06-01.zip", {"data-2024-06-01/users.json": b"[]",
                                                        "data-2024-06-01/conversations.json": CLAUDE.read_bytes()})
    again = bm("import", "--from", "claude", zipped, "-u", "bo")
    assert again.code == 0 and again.json()["new"] == {"turns": 0} and again.json()["duplicates"] == 4, again
    assert ops() == before
    dry = bm("import", "--from", "claude", CLAUDE, "-u", "bo", "--dry-run", "--extract").json()
    assert dry["extract"]["turns"] == 4 and dry["extract"]["extractor"] == "rules" and "llm" in dry, dry
    assert ops() == before


# -- Mem0 ---------------------------------------------------------------------------------------------
def test_mem0_in_a_real_process_then_each_shape_of_get_all_again(tmp_path):
    res = run_bm("import", "--from", "mem0", MEM0, "-u", "alex")
    assert res.code == 0, res
    assert res.json()["new"]["memories"] == 3 and res.json()["found"] == {"memories": 3}, res
    with open_memory() as mem:
        hit = mem.recall("peanuts allergy", user="alex", k=1)[0]
        assert hit["text"] == "Is allergic to peanuts" and hit["type"] == "fact", hit
        assert hit["ts"] == "2024-03-02T18:11:12.345Z", hit  # created_at, -08:00, kept
        assert hit["meta"]["imported"] == {"from": "mem0", "id": "1a75e827-7eca-45ea-8c5c-cfd43299f061",
                                           "user_id": "alex", "hash": "7873cd0e5a29c513253d9fad038e758b",
                                           "categories": ["health"], "metadata": {"source": "onboarding"}}
        seat = mem.recall("window seat flights", user="alex", k=1)[0]  # an agent's memory: the user's, too
        assert seat["agent"] is None and seat["meta"]["imported"]["agent_id"] == "travel-agent", seat
        before = mem.log.count("ops")
        items = json.loads(MEM0.read_text())["results"]
        for shape in (items, {"count": 3, "next": None, "previous": None, "results": items}):
            path = tmp_path / "dump.json"
            path.write_text(json.dumps(shape))
            again = mem.import_from("mem0", path, user="alex")
            assert again["new"]["memories"] == 0 and again["duplicates"] == 3, again
        assert mem.log.count("ops") == before


# -- Basic Memory / the MCP memory server -------------------------------------------------------------
def test_basic_memory_graph_through_the_library_and_the_cli(bm, store):
    with open_memory() as mem:
        graz = mem.graph.add_node("Graz", type="city", user="pia")  # the user's node of that name is reused
        report = mem.import_from("basic-memory", GRAPH, user="pia")
        assert report["found"] == {"entities": 3, "observations": 4, "relations": 3}, report
        # 4 observations + 3 relations; Priya and Northwind new; 3 edges; mentions 4 + 2 a relation
        assert report["new"] == {"memories": 7, "nodes": 2, "edges": 3, "mentions": 10}, report
        priya = mem.graph.node("Priya_Raman", user="pia")
        assert priya["type"] == "person"
        assert {(e["predicate"], e["dst"]) for e in priya["edges"] if e["src"] == priya["id"]} == {
            ("works_at", mem.graph.node("Northwind Labs", user="pia")["id"]), ("lives_in", graz["id"])}
        hit = mem.recall("which languages does Priya speak", user="pia", k=1)[0]
        assert hit["text"] == "Priya_Raman: Speaks fluent Tamil and German", hit
        assert hit["id"] in [m["id"] if isinstance(m, dict) else m for m in priya["memories"]], priya
        fact = [m for m in mem.list_memories(user="pia", limit=50) if m.get("predicate") == "works_at"]
        assert fact and (fact[0]["subject"], fact[0]["object"]) == ("Priya_Raman", "Northwind Labs"), fact
        before = mem.log.count("ops")
    again = bm("import", "--from", "basic-memory", GRAPH, "-u", "pia")
    assert again.code == 0 and again.json()["new"] == {"memories": 0, "nodes": 0, "edges": 0, "mentions": 0}, again
    assert again.json()["duplicates"] == 20 and ops() == before, again


# -- bad input: one line, the right exit code, nothing stored ---------------------------------------
def test_bad_files_are_refused_whole(bm, bm_home, tmp_path, monkeypatch):
    truncated = tmp_path / "conversations.json"
    truncated.write_bytes(CHATGPT.read_bytes()[:3000])
    no_conv = export_zip(tmp_path, "export.zip", {"user.json": b"{}", "chat.html": b"<html></html>"})
    broken = tmp_path / "memory.jsonl"
    lines = GRAPH.read_text().splitlines()
    broken.write_text("\n".join(lines[:3] + ['{"type":"relation","from":"Graz"'] + lines[3:]))
    no_text = tmp_path / "mem0.json"
    no_text.write_text(json.dumps({"results": [{"id": "a", "memory": "Likes tea"}, {"id": "b", "memory": "  "}]}))
    bm_dump = tmp_path / "backup.jsonl"
    bm_dump.write_text('{"format":"bm-export/1","kind":"header"}\n{"kind":"memory","id":"m_1","text":"x"}\n')
    cases = [
        (("--from", "chatgpt", CLAUDE), 1, ("look like a ChatGPT export", "--from claude")),
        (("--from", "claude", CHATGPT), 1, ("look like a Claude export", "--from chatgpt")),
        (("--from", "mem0", GRAPH), 1, ("look like a Mem0 export", "--from basic-memory")),
        (("--from", "basic-memory", MEM0), 1, ("look like a Basic Memory", "--from mem0")),
        (("--from", "chatgpt", truncated), 1, ("not valid JSON", "line")),
        (("--from", "chatgpt", no_conv), 1, ("no conversations.json",)),
        (("--from", "mem0", no_conv), 1, ("zip archive",)),
        (("--from", "basic-memory", broken), 1, ("line 4", "not valid JSON")),
        (("--from", "mem0", no_text), 1, ("memory 2", "memory is empty")),
        (("--from", "mem0", bm_dump), 1, ("`bm export` file", "without --from")),
        (("--from", "chatgpt", tmp_path / "missing.json"), 1, ("no such file",)),
        (("--from", "openai", CHATGPT), 2, ("--from", "unknown export kind", "chatgpt, claude")),
        (("--from", "mem0", MEM0, "--extract"), 2, ("--extract",)),
        ((bm_dump, "-u", "ann"), 2, ("go with --from",)),
    ]
    for args, code, words in cases:
        assert_error(bm("import", *args), code, *words)
        assert not (bm_home / "data").exists(), args  # nothing stored, not even an empty store
    assert bm("import", "--from", "mem0", MEM0, "-u", "alex").code == 0
    before = ops()
    for args, code, words in cases[:10]:  # into a store that has data: it is left as it was
        assert_error(bm("import", *args, "-u", "alex"), code, *words)
    monkeypatch.setenv("BM_MAX_MEMORY_CHARS", "30")  # "Priya_Raman: Speaks fluent Tamil and German"
    assert_error(bm("import", "--from", "basic-memory", GRAPH, "-u", "alex"), 1,
                 "entity Priya_Raman", "over the memory limit of 30", "max_memory_chars")
    assert ops() == before


@pytest.mark.parametrize("kind", ["chatgpt", "mem0"])
def test_stdin_is_read_as_the_file(bm, kind):
    data = (CHATGPT if kind == "chatgpt" else MEM0).read_bytes()
    res = bm("import", "--from", kind, "-", "-u", "cy", "--dry-run", input=data)
    assert res.code == 0 and res.json()["new"] == ({"turns": 8} if kind == "chatgpt" else
                                                   {"memories": 3, "nodes": 0, "edges": 0, "mentions": 0}), res


def test_without_current_node_the_newest_branch_is_read():
    """An export without ``current_node`` (older ones; a single conversation saved by hand): the
    last child at each step from the root, i.e. the latest edit."""
    from brandmind.importers import read_export

    conv = json.loads(CHATGPT.read_text())[0]
    del conv["current_node"]
    export = read_export("chatgpt", json.dumps(conv).encode())  # one conversation, not a list: read too
    assert [m["id"] for m in export.messages] == ["m-u1", "m-a1", "m-u2-alt", "m-a2-alt"], export.messages
    assert export.messages[2]["content"] == "What about Lisbon instead?" and export.skipped == 2


def _positions(doc, path=()):
    """Every place in a JSON document: (path to it)."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield path + (key,)
        yield from _positions(value, path + (key,))


def test_any_damage_to_an_export_is_an_error_with_a_hint_never_a_crash():
    """Each fixture with any one of its values swapped for another JSON type: it reads, or it
    is one BMError (the CLI's one `Error:` line, with a hint), never another exception."""
    from brandmind.errors import BMError
    from brandmind.importers import read_export

    kinds = {"chatgpt": CHATGPT, "claude": CLAUDE, "mem0": MEM0, "basic-memory": GRAPH}
    refused = tried = 0
    for kind, path in kinds.items():
        text = path.read_text()
        original = [json.loads(line) for line in text.splitlines()] if kind == "basic-memory" else json.loads(text)
        for where in list(_positions(original)):
            for other in (None, {"a": None}):  # where an object, a list or a text belongs
                doc = json.loads(json.dumps(original))
                holder = doc
                for key in where[:-1]:
                    holder = holder[key]
                holder[where[-1]] = other
                data = ("\n".join(json.dumps(d) for d in doc) if kind == "basic-memory" else json.dumps(doc)).encode()
                tried += 1
                try:
                    read_export(kind, data)
                except BMError as exc:
                    assert exc.hint, exc.message
                    refused += 1
    assert tried > 500 and refused > 100, (tried, refused)  # the damage was seen, not only read past
