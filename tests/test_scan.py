"""The first pass of a vector search (brandmind/storage/scan.py): the C extension and numpy
give the same distances and the same selection, and both equal a plain popcount and a sort."""
from __future__ import annotations

import os

import numpy as np
import pytest

from brandmind.storage import scan


@pytest.fixture(params=["c", "numpy"])
def impl(request, monkeypatch):
    if request.param == "c":
        if scan._scan is None:
            pytest.fail("brandmind.storage.popcount was not built (pip install -e . builds it with the C compiler)")
    else:
        monkeypatch.setattr(scan, "_scan", None)
        monkeypatch.setattr(scan, "HAMMING_CHUNK", 8)  # chunk boundaries at small sizes
    return request.param


def test_the_c_extension_is_built_in_ci():
    """CI installs with a compiler: the fast path must be the one its tests run."""
    if os.environ.get("CI"):
        assert scan.FAST


def popcounts(code, q, w0, w1, rows):
    return [sum(bin(int(code[w, i]) ^ int(q[w])).count("1") for w in range(w0, w1)) for i in rows]


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 30, 4100])
@pytest.mark.parametrize("words", [(0, 3), (1, 3), (0, 1), (2, 2)])
def test_hamming_equals_a_popcount_of_the_words_asked_for(impl, n, words):
    rng = np.random.default_rng(n)
    code = rng.integers(0, 2**63, size=(3, n + 5), dtype=np.uint64)  # capacity past n: ignored
    q = rng.integers(0, 2**63, size=3, dtype=np.uint64)
    assert scan.hamming(code, q, *words, n).tolist() == popcounts(code, q, *words, range(n))


@pytest.mark.parametrize("seed", range(4))
def test_hamming_at_adds_the_distances_of_the_rows_given(impl, seed):
    rng = np.random.default_rng(seed)
    code = rng.integers(0, 2**63, size=(4, 50), dtype=np.uint64)
    q = rng.integers(0, 2**63, size=4, dtype=np.uint64)
    rows = rng.choice(50, 17, replace=False)
    start = rng.integers(0, 200, 17).astype(np.uint16)
    got = scan.hamming_at(code, q, 2, 4, rows, start)
    assert got.tolist() == [int(s) + d for s, d in zip(start, popcounts(code, q, 2, 4, rows))]


@pytest.mark.parametrize("seed", range(12))
def test_smallest_is_the_k_smallest_with_ties_to_the_lower_position(impl, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    spread = int(rng.choice([3, 50, 400]))  # many ties, some, few
    dist = rng.integers(0, spread, n).astype(np.uint16)
    dist[rng.random(n) < 0.2] = scan.MASKED  # rows a filter left out
    k = int(rng.integers(1, n + 1))
    want = sorted(np.argsort(dist, kind="stable")[:k].tolist())
    assert scan.smallest(dist, k).tolist() == want


def test_smallest_reaches_into_the_masked_rows_only_when_it_must(impl):
    dist = np.array([scan.MASKED, 5, scan.MASKED, 2, scan.MASKED], np.uint16)
    assert scan.smallest(dist, 2).tolist() == [1, 3]
    assert scan.smallest(dist, 3).tolist() == [0, 1, 3]
    assert scan.smallest(dist, 9).tolist() == [0, 1, 2, 3, 4]


def test_the_c_functions_refuse_what_is_outside_their_buffers():
    if scan._scan is None:
        pytest.skip("no C extension here (not CI): nothing to check")
    code = np.zeros((2, 10), np.uint64)
    q = np.zeros(2, np.uint64)
    out = np.zeros(10, np.uint16)
    with pytest.raises(ValueError):
        scan._scan.hamming(code, 10, 0, 3, q, 10, out)  # a third word
    with pytest.raises(ValueError):
        scan._scan.hamming(code, 10, 0, 2, q, 11, out)  # an eleventh row
    with pytest.raises(ValueError):
        scan._scan.hamming(code, 10, 0, 2, q, 10, np.zeros(5, np.uint16))  # out too short
    with pytest.raises(IndexError):
        scan._scan.hamming_add_at(code, 10, 0, 2, q, np.array([3, 10], np.int64), out)
    with pytest.raises(ValueError):
        scan._scan.smallest(out, 11, np.zeros(11, np.int64))
    with pytest.raises(ValueError):
        scan._scan.smallest(out, 0, np.zeros(1, np.int64))
    with pytest.raises(ValueError):
        scan._scan.smallest(out, 3, np.zeros(2, np.int64))
