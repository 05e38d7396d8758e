"""The providers: OpenAI-compatible and Hugging Face Inference embeddings, the embedder chain
that falls back without mixing models, the OpenAI-compatible chat LLM, and extraction state.

No OpenAI, OpenRouter, vLLM, LM Studio, llama.cpp or Hugging Face service can run here, so
one loopback server (tests/openai_server.py, shared by the module) speaks their HTTP APIs to
the real ``openai`` client and httpx.
"""
from __future__ import annotations

import json
import re
import socket

import numpy as np
import pytest

from brandmind.embed import embedder_from_config, name_from_config
from brandmind.embed.chain import PROBES, REFERENCE_FILE, EmbedderChain
from brandmind.embed.hfapi import HFEmbedder
from brandmind.embed.openai_compat import OpenAIEmbedder
from brandmind.errors import EmbedderUnavailable, ExtractorUnavailable
from brandmind.extract import Turn
from brandmind.extract.llm import FACTS_SCHEMA, MAX_OUTPUT_TOKENS, LLMArbiter, LLMExtractor
from brandmind.extract.openai_chat import json_text
from brandmind.extract.rules import RulesExtractor

from conftest import assert_error, open_memory, run_bm

try:  # tests/ may or may not be a package
    from .ollama_server import fake_vector
    from .openai_server import FakeProviders
except ImportError:
    from ollama_server import fake_vector  # type: ignore[no-redef]
    from openai_server import FakeProviders  # type: ignore[no-redef]


@pytest.fixture(scope="module")
def shared_server():
    with FakeProviders() as s:
        yield s


@pytest.fixture
def server(shared_server, monkeypatch):
    shared_server.reset()
    for var in ("OPENAI_API_KEY", "BM_OPENAI_API_KEY", "HF_TOKEN", "BM_HF_TOKEN", "BM_LLM_API_KEY",
                "OPENROUTER_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return shared_server


def dead_url() -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def other_model(text: str, dim: int) -> list[float]:
    """Another model of the same size: unrelated vectors for the same text."""
    return fake_vector("other model: " + text, dim)


# -- the two embedders --------------------------------------------------------------------------------
def test_openai_embedder_sends_the_key_batches_and_normalises(server, monkeypatch):
    server.api_key = "sk-test"
    monkeypatch.setenv("BM_OPENAI_API_KEY", "sk-test")
    e = OpenAIEmbedder(base_url=server.url, batch_size=2)
    texts = ["Ann moved to Lisbon.", "Bob paints.", "Cleo sails."]
    m = e.embed_documents(texts)
    assert e.name == "openai:text-embedding-3-small" and e.dim == 384 and m.shape == (3, 384)
    assert [len(b["input"]) for b in server.bodies("embeddings")] == [2, 1]
    for i, t in enumerate(texts):
        np.testing.assert_allclose(m[i], unit(fake_vector(t, 384)), atol=1e-6)
    q = e.embed_query("who paints?")
    np.testing.assert_allclose(q, unit(fake_vector("who paints?", 384)), atol=1e-6)
    assert {h["authorization"] for _, _, h in server.calls} == {"Bearer sk-test"}


def test_openai_embedder_failures_are_one_clear_error(server):
    server.api_key = "sk-right"
    with pytest.raises(EmbedderUnavailable) as err:
        OpenAIEmbedder(base_url=server.url, api_key="sk-wrong").embed_query("x")
    assert "401" in err.value.message and "BM_OPENAI_API_KEY" in err.value.hint
    with pytest.raises(EmbedderUnavailable) as err:
        OpenAIEmbedder(model="no-such-model", base_url=server.url, api_key="sk-right").embed_query("x")
    assert "no model 'no-such-model'" in err.value.message and "openai_model" in err.value.hint
    with pytest.raises(EmbedderUnavailable) as err:
        OpenAIEmbedder(base_url=dead_url(), max_retries=0).embed_query("x")
    assert "cannot reach" in err.value.message and "embedder = local" in err.value.hint


def test_hf_embedder_posts_feature_extraction_with_the_token(server, monkeypatch):
    server.api_key = "hf_test"
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    e = HFEmbedder(base_url=server.hf_url)
    m = e.embed_documents(["Ann moved to Lisbon.", "Bob paints."])
    np.testing.assert_allclose(m[1], unit(fake_vector("Bob paints.", 384)), atol=1e-6)
    assert e.name == "hf:sentence-transformers/all-MiniLM-L6-v2" and e.dim == 384
    [(route, body, headers)] = server.calls
    assert body == {"inputs": ["Ann moved to Lisbon.", "Bob paints."]} and headers["authorization"] == "Bearer hf_test"
    server.hf_token_level = True
    with pytest.raises(EmbedderUnavailable, match="token-level"):
        e.embed_query("a b")
    server.hf_token_level, server.hf_loading = False, True
    with pytest.raises(EmbedderUnavailable, match="loading"):
        e.embed_query("a")


# -- the chain ------------------------------------------------------------------------------------------
def test_the_embedder_setting_is_one_provider_or_a_chain(tmp_path, monkeypatch):
    from brandmind.config import Config, coerce
    from brandmind.errors import ConfigError

    monkeypatch.delenv("BM_EMBEDDER")
    (tmp_path / "config.toml").write_text('embedder = ["ollama", "local"]\n')
    assert Config.load(tmp_path).embedder == "ollama,local"
    monkeypatch.setenv("BM_EMBEDDER", " openai , hf ")
    assert Config.load(tmp_path).embedder == "openai,hf"
    assert coerce("embedder", "local") == "local"
    for bad in ("ollama,ollama", "ollama,nope", "", ["local", 3]):
        with pytest.raises(ConfigError) as err:
            coerce("embedder", bad)
        assert "bm config set embedder ollama,local" in err.value.hint
    with pytest.raises(ConfigError, match="llm_provider"):
        coerce("llm_provider", "anthropic")


def use_chain(monkeypatch, server, chain: str) -> None:
    monkeypatch.setenv("BM_EMBEDDER", chain)
    monkeypatch.setenv("BM_OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("BM_HF_BASE_URL", server.hf_url)


def stored_vectors(mem) -> dict[str, np.ndarray]:
    rows = mem.sql.conn.execute("SELECT m.text, v.embedding FROM memories m JOIN memories_vec v "
                                "ON v.rowid = m.rowid").fetchall()
    return {text: np.frombuffer(blob, dtype=np.int8) for text, blob in rows}  # int8, as SQLite keeps them


def test_chain_falls_back_to_a_provider_of_the_same_model(server, bm_home, monkeypatch):
    use_chain(monkeypatch, server, "openai,hf")
    from brandmind.memory import Memory

    with Memory(create=True) as mem:
        assert mem.embedder_name == "openai:text-embedding-3-small"
        mem.remember("Ann moved to Lisbon in May", user="ann")
        chain = mem.embedder
        assert isinstance(chain, EmbedderChain) and chain.served_by == "openai:text-embedding-3-small"
        # the store's model answered: its probe vectors are kept beside the store, once
        ref = json.loads((bm_home / "data" / REFERENCE_FILE).read_text())
        assert ref["model"] == "openai:text-embedding-3-small" and ref["probes"] == list(PROBES)
        probe_requests = [b for b in server.bodies("embeddings") if b["input"] == list(PROBES)]
        assert len(probe_requests) == 1
        server.fail_status["embeddings"] = 503  # the primary goes down
        mem.remember("Bob paints seascapes", user="ann")
        assert chain.served_by == "hf:sentence-transformers/all-MiniLM-L6-v2"
        hits = mem.recall("who paints?", user="ann")
        assert hits and chain.served_by.startswith("hf:")
    assert server.bodies("hf")[0]["inputs"] == list(PROBES)  # checked before its first use
    # what the fallback stored is what the store's model would have made
    with Memory() as mem:
        vecs = stored_vectors(mem)
    from brandmind.storage.recallsql import quantise

    want = quantise(unit(fake_vector("Bob paints seascapes", 384)))[0]
    np.testing.assert_array_equal(vecs["Bob paints seascapes"], want)


def test_chain_never_mixes_models_and_says_which_provider_it_could_not_reach(server, bm_home, monkeypatch):
    server.hf_vector = other_model  # the HF route serves another 384-d model
    use_chain(monkeypatch, server, "openai,hf")
    from brandmind.memory import Memory

    with Memory(create=True) as mem:
        mem.remember("Ann moved to Lisbon in May", user="ann")
        server.fail_status["embeddings"] = 503
        with pytest.raises(EmbedderUnavailable) as err:
            mem.remember("Bob paints seascapes", user="ann")
        message = err.value.message
        assert message.startswith("cannot reach openai, the embedder of this store (openai:text-embedding-3-small)")
        assert "503" in message and "does not make openai:text-embedding-3-small's vectors" in message
        assert "bm config set embedder hf" in err.value.hint and "bm reindex" in err.value.hint
        with pytest.raises(EmbedderUnavailable):
            mem.recall("who paints?", user="ann")
        assert len(server.bodies("hf")) == 1  # the verdict is kept: the probe is not re-sent
    with Memory() as mem:
        assert list(stored_vectors(mem)) == ["Ann moved to Lisbon in May"]
        assert mem.sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 1


def test_a_fallback_of_another_size_or_without_a_reference_is_refused(server, monkeypatch, tmp_path):
    from brandmind.config import Config

    server.hf_models = {"sentence-transformers/all-MiniLM-L6-v2": 768}
    use_chain(monkeypatch, server, "openai,hf")
    config = Config.load(tmp_path)
    chain = embedder_from_config(config)
    assert name_from_config(config) == chain.name == "openai:text-embedding-3-small"
    server.fail_status["embeddings"] = 500
    with pytest.raises(EmbedderUnavailable, match="no reference vectors"):  # the model never answered here
        chain.embed_query("x")
    del server.fail_status["embeddings"]
    chain.providers[0].down_until = 0
    chain.embed_query("x")  # records the reference
    server.fail_status["embeddings"] = 500
    chain.providers[0].down_until = 0
    with pytest.raises(EmbedderUnavailable, match="makes 768-d vectors"):
        chain.embed_query("x")


def test_an_unreachable_provider_is_one_error_line_from_the_cli(server, bm_home, bm, monkeypatch):
    use_chain(monkeypatch, server, "openai,hash")
    assert bm("init").code == 0 and bm("remember", "Ann moved to Lisbon").code == 0
    # the store's provider is down and the fallback is another model: one line, in a real process
    res = run_bm("recall", "where does Ann live?", env={"BM_OPENAI_BASE_URL": dead_url()})
    assert_error(res, 1, "cannot reach openai", "cannot reach the embeddings endpoint", "hash (hash:384)",
                 "does not make", "openai_base_url")
    # a store made by one model refuses another configured alone, naming both (and the fix)
    monkeypatch.setenv("BM_EMBEDDER", "hash")
    assert_error(bm("recall", "Ann"), 1, "openai:text-embedding-3-small", "hash:384", "bm reindex")


# -- the OpenAI-compatible chat LLM ------------------------------------------------------------------------
_LINE = re.compile(r"^\[(\d+)\] [^,]*, (.+?): (.*)$")


def rules_model(body: dict) -> dict:
    """A deterministic stand-in 'model': what the offline rules find in each numbered turn
    (asked to arbitrate, it gives no verdict, so the rules decide)."""
    if body.get("response_format", {}).get("json_schema", {}).get("name") == "verdicts":
        return {"verdicts": []}
    facts = []
    for line in body["messages"][1]["content"].splitlines()[1:]:
        n, speaker, text = _LINE.match(line).groups()
        for f in RulesExtractor().extract([Turn(text, speaker)]):
            facts.append({"turn": int(n), "subject": f.subject, "predicate": f.predicate, "object": f.object,
                          "text": f.text})
    return {"facts": facts}


def test_openai_chat_extractor_asks_for_the_schema_and_reads_the_facts(server, monkeypatch):
    server.api_key = "or-key"
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-key")
    server.chat_responder = rules_model
    ext = LLMExtractor(model="openai/gpt-4o-mini", provider="openai", base_url=server.url)
    turns = [Turn("Just chatting.", "Ann", bead="b_0"), Turn("I live in Lisbon.", "Ann", bead="b_1")]
    [fact] = ext.extract(turns)
    assert (fact.predicate, fact.object, fact.sources) == ("lives_in", "Lisbon", ["b_1"])
    assert ext.name == "llm:openai:openai/gpt-4o-mini" and ext.last_report["read"] == ["b_0", "b_1"]
    [body] = server.bodies("chat")
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "facts", "schema": FACTS_SCHEMA}}
    assert body["temperature"] == 0 and body["max_tokens"] == MAX_OUTPUT_TOKENS
    assert body["model"] == "openai/gpt-4o-mini" and body["messages"][0]["role"] == "system"
    usage = sum(len(m["content"]) for m in body["messages"]) // 4 + len(json.dumps(rules_model(body))) // 4
    assert ext.last_report["tokens"] == usage and ext.last_report["calls"] == 1


def test_an_endpoint_without_structured_output_gets_json_mode_and_a_fenced_answer_is_read(server):
    server.refuse_formats = {"json_schema"}
    server.chat_responder = lambda body: "Sure! ```json\n" + json.dumps(rules_model(body)) + "\n```"
    ext = LLMExtractor(model="m", provider="openai", base_url=server.url, chunk_turns=1)
    facts = ext.extract([Turn("I live in Porto.", "Ann", bead="b_0"), Turn("I live in Faro.", "Ann", bead="b_1")])
    assert [f.object for f in facts] == ["Porto", "Faro"]
    kinds = [b.get("response_format", {}).get("type") for b in server.bodies("chat")]
    assert kinds == ["json_schema", "json_object", "json_object"]  # the refused mode is not asked again
    assert json_text("no json here") is None and json_text('{"a": 1}') == '{"a": 1}'


def test_openai_chat_arbiter_and_failures(server):
    server.chat_responder = lambda body: {"verdicts": [{"id": "m_1", "verdict": "update"}]}
    arb = LLMArbiter(model="m", provider="openai", base_url=server.url)
    cands = [{"id": "m_1", "text": "Ann lives in Lisbon"}, {"id": "m_2", "text": "Ann likes jazz"}]
    assert arb.decide({"text": "Ann lives in Porto"}, cands) == [("m_1", "update"), ("m_2", "unrelated")]
    schema = server.bodies("chat")[0]["response_format"]["json_schema"]
    assert schema["name"] == "verdicts" and schema["schema"]["properties"]["verdicts"]["items"]["properties"]["id"][
        "enum"] == ["m_1", "m_2"]
    server.fail_status["chat"] = 500
    with pytest.raises(ExtractorUnavailable, match="HTTP 500"):
        arb.decide({"text": "Ann lives in Porto"}, cands)
    with pytest.raises(ExtractorUnavailable) as err:
        LLMExtractor(model="m", provider="openai", base_url=dead_url()).extract([Turn("I live in Porto.", "Ann")])
    assert "cannot reach" in err.value.message and "extractor rules" in err.value.hint


# -- through the CLI: the same caps and dry runs, and extraction state -----------------------------------------
def chat_lines(n: int) -> str:
    rows = [{"id": str(i), "role": "user", "speaker": "Ann", "ts": f"2024-05-{1 + i % 28:02d}T10:00:00Z",
             "content": f"I live in City{i}x now." if i % 5 == 0 else f"Just chatting, message {i}."}
            for i in range(n)]
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def openai_llm(server, store, monkeypatch):
    monkeypatch.setenv("BM_EXTRACTOR", "llm")
    monkeypatch.setenv("BM_LLM_PROVIDER", "openai")
    monkeypatch.setenv("BM_LLM_BASE_URL", server.url)
    monkeypatch.setenv("BM_LLM_MODEL", "openai/gpt-4o-mini")
    server.chat_responder = rules_model
    return server


def extraction_calls(server) -> list[dict]:
    return [b for b in server.bodies("chat") if b["response_format"]["json_schema"]["name"] == "facts"]


def sent_turns(server) -> list[str]:
    return [line for b in extraction_calls(server) for line in b["messages"][1]["content"].splitlines()[1:]]


def test_dry_run_and_caps_hold_for_the_openai_chat(openai_llm, bm, tmp_path, monkeypatch):
    path = tmp_path / "chat.jsonl"
    path.write_text(chat_lines(45))
    dry = bm("ingest", path, "--user", "ann", "--extract", "--dry-run", "--json").json()
    assert dry["llm"]["calls"] == 3 and dry["extract"]["extractor"] == "llm:openai:openai/gpt-4o-mini"
    assert openai_llm.calls == []
    monkeypatch.setenv("BM_LLM_MAX_CALLS", "2")
    report = bm("ingest", path, "--user", "ann", "--extract", "--json").json()
    assert report["llm"]["capped"] and report["extract"]["skipped_turns"] == 5
    assert len(openai_llm.bodies("chat")) == report["llm"]["calls"] == 2  # the arbiter's calls count too
    assert sum(report["facts"].values()) == 8
    # the turns the cap left unread are not marked read: the next run sends those, and only those
    report = bm("ingest", path, "--user", "ann", "--extract", "--json").json()
    assert len(extraction_calls(openai_llm)) == 3 and not report["llm"]["capped"]
    assert [t.split(": ", 1)[1] for t in sent_turns(openai_llm)[40:]] == [
        "I live in City40x now.", *(f"Just chatting, message {i}." for i in range(41, 45))]


def test_a_re_run_sends_nothing_already_extracted_and_a_new_model_re_reads(openai_llm, bm, tmp_path, monkeypatch):
    path = tmp_path / "chat.jsonl"
    path.write_text(chat_lines(30))
    assert bm("ingest", path, "--user", "ann").code == 0  # stored first, extracted later
    first = bm("ingest", path, "--user", "ann", "--extract", "--json").json()
    assert first["duplicates"] == 30 and len(extraction_calls(openai_llm)) == 2 and len(sent_turns(openai_llm)) == 30
    assert first["facts"]["added"] >= 1
    # 24 of the 30 turns gave no fact; before extraction state they were all sent again
    before = len(openai_llm.calls)
    dry = bm("ingest", path, "--user", "ann", "--extract", "--dry-run", "--json").json()
    assert dry["llm"]["calls"] == 0 and dry["extract"]["turns"] == 0  # the estimate knows it too
    again = bm("ingest", path, "--user", "ann", "--extract", "--json").json()
    assert again["llm"]["calls"] == 0 and len(openai_llm.calls) == before and again["extract"]["turns"] == 0
    with open_memory() as mem:  # state survives a rebuild (device-local, carried over)
        mem.admin.rebuild()
    assert bm("ingest", path, "--user", "ann", "--extract", "--json").json()["llm"]["calls"] == 0
    assert len(openai_llm.calls) == before
    # another model reads the fact-less turns again, and only those
    monkeypatch.setenv("BM_LLM_MODEL", "mistralai/mistral-small")
    bm("ingest", path, "--user", "ann", "--extract", "--json").json()
    resent = sent_turns(openai_llm)[30:]
    assert len(extraction_calls(openai_llm)) == 4 and len(resent) == 24
    assert not any("I live in" in t for t in resent)

