"""The LLM extractor and arbiter through the real ``ollama`` client against the loopback
stand-in server (tests/ollama_server.py; no Ollama server can run here): structured output
read, bad answers skipped and counted, a failing server is one clean error that stores no
fact, cost caps respected and reported, dry runs that make no HTTP call."""
from __future__ import annotations

import json
import math
import re
import socket

import pytest

pytest.importorskip("ollama")

from brandmind.clock import iso, parse_time  # noqa: E402
from brandmind.errors import ExtractorUnavailable  # noqa: E402
from brandmind.extract import Turn  # noqa: E402
from brandmind.extract.llm import (FACTS_SCHEMA, MAX_OUTPUT_TOKENS, LLMArbiter, LLMExtractor,  # noqa: E402
                                   load_prompt)
from brandmind.extract.rules import RulesExtractor  # noqa: E402

from conftest import assert_error, open_memory  # noqa: E402

try:  # tests/ may or may not be a package
    from .ollama_server import FakeOllama
except ImportError:
    from ollama_server import FakeOllama  # type: ignore[no-redef]

_LINE = re.compile(r"^\[(\d+)\] (\d{4}-\d{2}-\d{2}|unknown date)[^,]*, (.+?): (.*)$")


def rules_model(body: dict) -> dict:
    """A deterministic stand-in 'model': reads the numbered turns of the prompt and answers
    what the offline rules find in each, in the schema the extractor asked for."""
    assert body["format"] == FACTS_SCHEMA and body["options"]["temperature"] == 0
    facts = []
    for line in body["messages"][1]["content"].splitlines()[1:]:
        m = _LINE.match(line)
        assert m, line
        n, day, speaker, text = m.groups()
        ts = parse_time(day) if day != "unknown date" else None
        for f in RulesExtractor().extract([Turn(text, speaker, ts)]):
            facts.append({"turn": int(n), "subject": f.subject, "predicate": f.predicate, "object": f.object,
                          "text": f.text, "type": f.type, "negated": f.negated, "confidence": 0.9,
                          "valid_from": iso(f.valid_from)[:10] if f.valid_from else None})
    return {"facts": facts}


@pytest.fixture
def server():
    with FakeOllama() as s:
        s.chat_responder = rules_model
        yield s


@pytest.fixture
def llm(server, store, monkeypatch):
    """A store whose extractor is the LLM one, talking to the fake server."""
    monkeypatch.setenv("BM_EXTRACTOR", "llm")
    monkeypatch.setenv("BM_OLLAMA_HOST", server.url)
    return server


def chat_lines(n: int, start: int = 0) -> str:
    """n ingest lines; every fifth one says where Ann lives now (turn i: city i)."""
    rows = []
    for i in range(start, start + n):
        text = f"I live in City{i}x now." if i % 5 == 0 else f"Just chatting, message {i}."
        rows.append({"id": str(i), "role": "user", "speaker": "Ann", "content": text,
                     "ts": f"2024-05-{1 + i % 28:02d}T10:00:00Z"})
    return "".join(json.dumps(r) + "\n" for r in rows)


def facts_of(mem, user="ann"):
    return list(mem.sql.rows("SELECT * FROM memories WHERE user_id=? AND subject IS NOT NULL ORDER BY rowid", (user,)))


# -- the extractor on its own ---------------------------------------------------------------------
def test_structured_output_is_read_into_facts_with_their_sources(server):
    turns = [Turn(f"Just chatting {i}.", "Ann", parse_time("2024-05-15"), f"b_{i}") for i in range(25)]
    turns[22] = Turn("I went to a concert yesterday.", "Ann", parse_time("2024-05-15"), "b_22")
    ext = LLMExtractor(host=server.url)
    [fact] = ext.extract(turns)
    assert (fact.predicate, fact.object, fact.sources) == ("attended", "concert", ["b_22"])  # chunk 2, turn 2
    assert iso(fact.valid_from)[:10] == "2024-05-14" and fact.confidence == 0.9
    assert fact.meta == {"extractor": "llm", "model": "llama3.1:8b", "prompt_version": "extract_v1"}
    assert ext.last_report["calls"] == 2 and ext.last_report["bad_chunks"] == 0
    # what was sent: the versioned prompt, the JSON schema, temperature 0, the turns with dates
    body = server.chat_requests[0]
    assert body["messages"][0]["content"] == load_prompt("extract_v1") and body["stream"] is False
    assert body["options"] == {"temperature": 0, "num_predict": MAX_OUTPUT_TOKENS}
    assert "[0] 2024-05-15 (Wednesday), Ann: Just chatting 0." in body["messages"][1]["content"]
    assert len(server.chat_requests) == 2
    # tokens counted from the server's counts
    assert ext.last_report["tokens"] == sum(
        sum(len(m["content"]) for m in b["messages"]) // 4 for b in server.chat_requests) + sum(
        len(json.dumps(rules_model(b))) // 4 for b in server.chat_requests)


def test_bad_answers_skip_their_chunk_or_fact_and_are_counted(server):
    answers = iter(["this is not JSON {", {"facts": "nope"},
                    {"facts": [{"turn": 0, "subject": "Ann", "predicate": "lives_in", "object": "Lisbon",
                                "text": "Ann lives in Lisbon"},
                               {"turn": 99, "subject": "Ann", "predicate": "x", "object": "y", "text": "t"},
                               {"turn": 1, "subject": "", "predicate": "x", "object": "y", "text": "t"},
                               {"turn": 1, "subject": "Ann", "predicate": "Works At!", "object": "y", "text": "t"},
                               "not an object",
                               {"turn": 1, "subject": "Ann", "predicate": "Works at", "object": "Acme",
                                "text": "Ann works at Acme", "valid_from": "someday", "type": "bogus"}]}])
    server.chat_responder = lambda body: next(answers)
    ext = LLMExtractor(host=server.url, chunk_turns=2)
    facts = ext.extract([Turn(f"turn {i}", "Ann", bead=f"b_{i}") for i in range(6)])
    assert [(f.predicate, f.object, f.sources, f.valid_from, f.type) for f in facts] == [
        ("lives_in", "Lisbon", ["b_4"], None, "fact"), ("works_at", "Acme", ["b_5"], None, "fact")]
    assert ext.last_report["bad_chunks"] == 2 and ext.last_report["bad_facts"] == 4
    assert ext.last_report["calls"] == 3


def test_caps_stop_the_calls_and_are_reported(server):
    turns = [Turn(f"turn {i}", "Ann") for i in range(45)]  # 3 chunks of 20
    ext = LLMExtractor(host=server.url, max_calls=1)
    ext.extract(turns)
    assert ext.last_report["calls"] == 1 and ext.last_report["capped"] is True
    assert ext.last_report["skipped_turns"] == 25 and len(server.chat_requests) == 1
    # a token cap below one call's estimate: no call at all
    ext = LLMExtractor(host=server.url, max_tokens=MAX_OUTPUT_TOKENS)
    assert ext.extract(turns) == [] and ext.last_report == {**ext.last_report, "calls": 0, "capped": True,
                                                             "skipped_turns": 45}
    assert len(server.chat_requests) == 1


def test_estimate_follows_the_documented_rule_without_any_network():
    ext = LLMExtractor(host="http://127.0.0.1:9")  # nothing listens there: no call is made
    turns = [Turn("I live in Lisbon.", "Ann", parse_time("2024-05-15")) for _ in range(30)]
    est = ext.estimate(turns)
    prompt = load_prompt("extract_v1")
    expected = sum(math.ceil((len(prompt) + len(ext.user_message(list(enumerate(turns))[i:i + 20]))) / 4)
                   + MAX_OUTPUT_TOKENS for i in (0, 20))
    assert est == {"calls": 2, "tokens": expected, "capped": False, "skipped_turns": 0}
    capped = LLMExtractor(host="http://127.0.0.1:9", max_calls=1).estimate(turns)
    assert capped["calls"] == 1 and capped["capped"] and capped["skipped_turns"] == 10


def test_a_server_that_fails_raises_a_clear_error(server):
    server.chat_fail_status = 500
    with pytest.raises(ExtractorUnavailable) as err:
        LLMExtractor(host=server.url).extract([Turn("I live in Lisbon.", "Ann")])
    assert "500" in err.value.message and "ollama serve" in err.value.hint and "extractor rules" in err.value.hint
    server.chat_fail_status = None
    with pytest.raises(ExtractorUnavailable) as err:
        LLMExtractor(model="nope:1b", host=server.url).extract([Turn("x", "Ann")])
    assert "ollama pull nope:1b" in err.value.hint


def test_prompts_are_versioned_files_in_the_package():
    from importlib import resources

    names = {p.name for p in resources.files("brandmind.extract").joinpath("prompts").iterdir()}
    assert {"extract_v1.md", "reconcile_v1.md"} <= names
    assert LLMExtractor.prompt_version == "extract_v1" and LLMArbiter.prompt_version == "reconcile_v1"
    assert "JSON" in load_prompt("reconcile_v1")


# -- through the store and the CLI -------------------------------------------------------------------
def test_ingest_extract_stores_the_llm_facts_with_the_prompt_version(llm, bm, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(chat_lines(3))
    res = bm("ingest", path, "--user", "ann", "--extract", "--json")
    assert res.code == 0, res
    report = res.json()
    assert report["facts"]["added"] == 1 and report["llm"]["calls"] == 1 and not report["llm"]["capped"]
    assert report["llm"]["tokens"] > 0 and report["extract"]["extractor"] == "llm:llama3.1:8b"
    with open_memory() as mem:
        [fact] = facts_of(mem)
        meta = json.loads(fact["meta"])
        assert meta["prompt_version"] == "extract_v1" and meta["extractor"] == "llm:llama3.1:8b"
        assert meta["model"] == "llama3.1:8b"
        bead = json.loads(fact["provenance"])[0]["bead"]
        assert mem.get_bead(bead)["content"] == "I live in City0x now."


def test_dry_run_makes_no_http_call(llm, bm, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(chat_lines(45))
    res = bm("ingest", path, "--user", "ann", "--extract", "--dry-run", "--json")
    assert res.code == 0, res
    report = res.json()
    assert report["llm"]["calls"] == 3 and report["llm"]["tokens"] > 3 * MAX_OUTPUT_TOKENS
    assert report["would_ingest"] == 45 and "would_extract" not in report["extract"]
    assert llm.requests == [] and llm.chat_requests == []
    with open_memory() as mem:
        assert mem.admin.stats()["counts"]["memories"] == 0


def test_caps_through_the_cli(llm, bm, tmp_path, monkeypatch):
    monkeypatch.setenv("BM_LLM_MAX_CALLS", "2")
    path = tmp_path / "chat.jsonl"
    path.write_text(chat_lines(45))
    dry = bm("ingest", path, "--user", "ann", "--extract", "--dry-run", "--json").json()
    assert dry["llm"]["calls"] == 2 and dry["llm"]["capped"] and dry["extract"]["skipped_turns"] == 5
    report = bm("ingest", path, "--user", "ann", "--extract", "--json").json()
    assert report["llm"]["calls"] == 2 and report["llm"]["capped"] is True
    assert report["extract"]["skipped_turns"] == 5 and len(llm.chat_requests) == 2
    # the facts of the chunks read were stored (turns 0..39: 8 of them say where Ann lives)
    assert sum(report["facts"].values()) == 8


def test_a_500_midway_is_one_error_line_and_stores_no_fact(llm, bm, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(chat_lines(45))
    llm.chat_fail_status, llm.chat_fail_after = 500, 1  # the first chunk is read, the second fails
    res = bm("ingest", path, "--user", "ann", "--extract")
    line = assert_error(res, 1, "500", "45 message(s) were stored", "no facts")
    assert "ollama serve" in line and "extractor rules" in line and "re-run" in line
    with open_memory() as mem:
        assert facts_of(mem) == []  # the first chunk's facts were not half-stored
        assert mem.admin.stats()["counts"]["beads"] == 45
    # once the server is back, the same command extracts the stored turns
    llm.chat_fail_status = None
    report = bm("ingest", path, "--user", "ann", "--extract", "--json").json()
    assert report["ingested"] == 0 and report["duplicates"] == 45
    assert report["facts"]["added"] >= 1 and report["llm"]["calls"] >= 3


def test_no_server_at_all_is_a_clean_error(store, bm, monkeypatch):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    monkeypatch.setenv("BM_EXTRACTOR", "llm")
    monkeypatch.setenv("BM_OLLAMA_HOST", f"http://127.0.0.1:{port}")
    line = assert_error(bm("remember", "I live in Lisbon.", "--user", "ann", "--extract"), 1, "Ollama",
                        "was stored, but no facts were extracted")
    assert "ollama serve" in line
    with open_memory() as mem:
        assert facts_of(mem) == [] and mem.admin.stats()["counts"]["memories"] == 1


# -- the arbiter --------------------------------------------------------------------------------------
def test_the_llm_arbiter_decides_and_a_failing_one_falls_back_to_the_rules(llm, bm):
    def model(body):
        if "verdicts" in body["format"]["properties"]:
            sent = json.loads(body["messages"][1]["content"].split("\n", 1)[1])
            ids = body["format"]["properties"]["verdicts"]["items"]["properties"]["id"]["enum"]
            assert [c["id"] for c in sent["candidates"]] == ids
            return answer(ids)
        return rules_model(body)

    llm.chat_responder = model
    answer = lambda ids: {"verdicts": [{"id": i, "verdict": "unrelated"} for i in ids]}  # noqa: E731
    assert bm("remember", "I live in Lisbon.", "--user", "ann", "--extract").code == 0
    out = bm("remember", "I live in Porto.", "--user", "ann", "--extract", "--json").json()
    # the model said "unrelated", overriding the rules' "update": both stay current
    assert out["facts"]["added"] == 1 and out["llm"]["calls"] == 2  # one extraction, one arbitration
    with open_memory() as mem:
        assert [r["object"] for r in facts_of(mem) if r["retired_at"] is None] == ["Lisbon", "Porto"]
    # an arbiter answer that cannot be read: the rules decide (update), nothing crashes
    answer = lambda ids: "{broken"  # noqa: E731
    out = bm("remember", "I live in Faro.", "--user", "ann", "--extract", "--json").json()
    assert out["facts"]["updated"] == 1
    with open_memory() as mem:
        assert [r["object"] for r in facts_of(mem) if r["retired_at"] is None] == ["Faro"]


def test_arbiter_unit(server):
    server.chat_responder = server.default_chat_responder
    server.chat_verdicts = [{"id": "m_1", "verdict": "contradiction"}, {"id": "m_x", "verdict": "update"}]
    arb = LLMArbiter(host=server.url)
    new = {"text": "Ann no longer likes sushi", "subject": "Ann", "predicate": "likes", "object": "sushi",
           "negated": True, "valid_from": parse_time("2024-05-01")}
    cands = [{"id": "m_1", "text": "Ann likes sushi", "subject": "Ann", "predicate": "likes", "object": "sushi"},
             {"id": "m_2", "text": "Ann likes jazz", "subject": "Ann", "predicate": "likes", "object": "jazz"}]
    assert arb.decide(new, cands) == [("m_1", "contradiction"), ("m_2", "unrelated")]
    sent = server.chat_requests[-1]
    assert sent["messages"][0]["content"] == load_prompt("reconcile_v1")
    assert '"valid_from": "2024-05-01"' in sent["messages"][1]["content"]
    server.chat_fail_status = 500
    with pytest.raises(ExtractorUnavailable):
        arb.decide(new, cands)
    server.chat_fail_status = None
    arb = LLMArbiter(host=server.url, max_calls=1)
    arb.decide(new, cands)
    with pytest.raises(ExtractorUnavailable, match="cap"):
        arb.decide(new, cands)
