"""OllamaEmbedder against a loopback server that speaks the Ollama API."""
from __future__ import annotations

import socket
import time

import numpy as np
import pytest

pytest.importorskip("ollama")

from brandmind.embed import Embedder, get_embedder  # noqa: E402
from brandmind.embed.ollama import OllamaEmbedder, uses_nomic_prefixes  # noqa: E402
from brandmind.errors import EmbedderUnavailable, InvalidInput, ModelMismatch  # noqa: E402

try:  # tests/ may or may not be a package
    from .ollama_server import FakeOllama, fake_vector
except ImportError:
    from ollama_server import FakeOllama, fake_vector  # type: ignore[no-redef]


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return (v / np.linalg.norm(v)).astype(np.float32)


@pytest.fixture
def server():
    with FakeOllama(models={"nomic-embed-text:latest": 768, "mxbai-embed-large": 1024}) as s:
        yield s


def test_name_protocol_and_factory(server):
    e = get_embedder("ollama", host=server.url)
    assert isinstance(e, OllamaEmbedder) and isinstance(e, Embedder)
    assert e.name == "ollama:nomic-embed-text"


def test_nomic_prefixes_are_sent(server):
    e = OllamaEmbedder(host=server.url)
    docs = e.embed_documents(["Caroline joined a support group.", "Melanie paints."])
    q = e.embed_query("who paints?")
    assert server.inputs == [
        "search_document: Caroline joined a support group.",
        "search_document: Melanie paints.",
        "search_query: who paints?",
    ]
    # the vectors are what the server computed for the prefixed text, normalised
    np.testing.assert_allclose(docs[1], unit(fake_vector("search_document: Melanie paints.", 768)), atol=1e-6)
    np.testing.assert_allclose(q, unit(fake_vector("search_query: who paints?", 768)), atol=1e-6)
    assert docs.dtype == np.float32 and q.dtype == np.float32


def test_other_models_get_no_prefix(server):
    e = OllamaEmbedder(model="mxbai-embed-large", host=server.url)
    e.embed_documents(["plain"])
    e.embed_query("also plain")
    assert server.inputs == ["plain", "also plain"]
    assert e.name == "ollama:mxbai-embed-large" and e.dim == 1024


@pytest.mark.parametrize(
    "model,expected",
    [
        ("nomic-embed-text", True),
        ("nomic-embed-text:v1.5", True),
        ("library/nomic-embed-text-v2-moe", True),
        ("mxbai-embed-large", False),
        ("all-minilm", False),
    ],
)
def test_prefix_rule(model, expected):
    assert uses_nomic_prefixes(model) is expected


def test_dim_learned_and_vectors_normalised(server):
    e = OllamaEmbedder(host=server.url)
    m = e.embed_documents([f"text {i}" for i in range(5)])
    assert e.dim == 768 and m.shape == (5, 768)
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert len(server.inputs) == 5  # reading dim after a call costs no request


def test_dim_property_probes_when_unknown(server):
    e = OllamaEmbedder(host=server.url)
    assert e.dim == 768
    assert len(server.requests) == 1


def test_declared_dim_is_checked(server):
    e = OllamaEmbedder(host=server.url, dim=384)
    assert e.dim == 384
    with pytest.raises(ModelMismatch) as err:
        e.embed_query("x")
    assert "768" in str(err.value) and err.value.hint


def test_batches_preserve_order(server):
    e = OllamaEmbedder(host=server.url, batch_size=2)
    texts = [f"item {i}" for i in range(5)]
    m = e.embed_documents(texts)
    embed_requests = [r for r in server.requests if "input" in r]
    assert [len(r["input"]) for r in embed_requests] == [2, 2, 1]
    for i, t in enumerate(texts):
        np.testing.assert_allclose(m[i], unit(fake_vector("search_document: " + t, 768)), atol=1e-6)


def test_empty_inputs(server):
    e = OllamaEmbedder(host=server.url)
    assert e.embed_documents([]).shape[0] == 0
    assert server.requests == []  # no network for nothing
    v = e.embed_query("")
    assert server.inputs == ["search_query: "] and abs(float(np.linalg.norm(v)) - 1) < 1e-5


def test_model_not_found(server):
    e = OllamaEmbedder(model="nomic-embed-text:v9", host=server.url)
    with pytest.raises(EmbedderUnavailable) as err:
        e.embed_query("x")
    assert "not found" in str(err.value)
    assert "ollama pull nomic-embed-text:v9" in err.value.hint


def test_server_down():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    e = OllamaEmbedder(host=f"http://127.0.0.1:{port}", timeout=5)
    with pytest.raises(EmbedderUnavailable) as err:
        e.embed_documents(["x"])
    assert "ollama serve" in err.value.hint and "embedder = local" in err.value.hint


def test_http_error(server):
    server.fail_status = 500
    with pytest.raises(EmbedderUnavailable) as err:
        OllamaEmbedder(host=server.url).embed_query("x")
    assert "500" in str(err.value) and err.value.hint


def test_wrong_vector_count(server):
    server.bad_count = True
    with pytest.raises(EmbedderUnavailable):
        OllamaEmbedder(host=server.url).embed_documents(["a", "b"])


def test_timeout(server):
    server.delay = 2.0
    e = OllamaEmbedder(host=server.url, timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(EmbedderUnavailable) as err:
        e.embed_query("slow")
    assert time.monotonic() - t0 < 1.9
    assert "ollama serve" in err.value.hint


def test_invalid_input(server):
    e = OllamaEmbedder(host=server.url)
    with pytest.raises(InvalidInput):
        e.embed_documents("one string")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        e.embed_documents(["ok", 5])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        OllamaEmbedder(model="")
    assert server.requests == []
