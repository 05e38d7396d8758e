"""The feature-hashing fake embedder."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from brandmind.embed import Embedder, get_embedder
from brandmind.embed.hashing import HashEmbedder
from brandmind.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[1]


def test_name_dim_and_protocol():
    e = HashEmbedder()
    assert e.name == "hash:384" and e.dim == 384
    assert isinstance(e, Embedder)
    small = get_embedder("hash", dim=64)
    assert isinstance(small, HashEmbedder) and small.name == "hash:64"
    assert small.embed_query("hello").shape == (64,)


def test_unit_norm_float32_shapes():
    e = HashEmbedder(dim=128)
    m = e.embed_documents(["one two", "three", "", "Ünïcode wörds ok"])
    assert m.shape == (4, 128) and m.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-6)
    q = e.embed_query("")
    assert q.dtype == np.float32 and abs(float(np.linalg.norm(q)) - 1.0) < 1e-6
    assert e.embed_documents([]).shape == (0, 128)


def test_deterministic_and_query_equals_document():
    a, b = HashEmbedder(), HashEmbedder()
    text = "Caroline went to the LGBTQ support group"
    np.testing.assert_array_equal(a.embed_query(text), b.embed_documents([text])[0])


def test_stable_across_processes():
    """blake2b, not Python's salted hash(): another interpreter gives the same vector."""
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "from brandmind.embed.hashing import HashEmbedder\n"
        "print(','.join(repr(float(x)) for x in HashEmbedder(32).embed_query('stable hashing please')))" % str(ROOT)
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed}
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert len(outs) == 1
    here = HashEmbedder(32).embed_query("stable hashing please")
    np.testing.assert_allclose(np.array([float(x) for x in outs.pop().split(",")]), here, rtol=0, atol=1e-7)


def test_shared_words_are_more_similar():
    e = HashEmbedder()
    base = e.embed_query("Melanie painted a sunrise by the lake")
    near = e.embed_query("the sunrise Melanie painted")
    far = e.embed_query("quarterly tax filing deadline")
    assert float(base @ near) > float(base @ far) + 0.2
    assert float(base @ e.embed_query("MELANIE Painted A Sunrise By The Lake")) == pytest.approx(1.0, abs=1e-6)


def test_different_texts_differ():
    e = HashEmbedder()
    m = e.embed_documents([f"note number {i} about topic {i * 7}" for i in range(50)])
    sims = m @ m.T
    np.fill_diagonal(sims, 0)
    assert sims.max() < 0.999


def test_invalid_input():
    e = HashEmbedder()
    with pytest.raises(InvalidInput) as err:
        e.embed_documents("not a list")  # type: ignore[arg-type]
    assert err.value.hint
    with pytest.raises(InvalidInput):
        e.embed_documents(["ok", None])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        e.embed_query(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        HashEmbedder(dim=0)
