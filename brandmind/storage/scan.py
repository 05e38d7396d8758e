"""The first pass of a vector search: Hamming distances between a query's sign code and the
recall index's (storage/indexfile.py ``signs``: column-major uint64 words, ``code[w, row]``),
and the selection of the nearest codes.

In C (brandmind/storage/popcount.c, built by ``pip install`` where a compiler is found: one
pass over memory per group of words and a histogram for the selection, ~3x less time at
100,000 rows), else in numpy; the two give the same results (tests/test_scan.py).  ``FAST``
says which is in use.
"""
from __future__ import annotations

import numpy as np

try:
    from . import popcount as _scan
except ImportError:  # built without a C compiler: numpy does the same
    _scan = None

FAST = _scan is not None
MASKED = np.iinfo(np.uint16).max  # the distance a caller gives the rows it leaves out
HAMMING_CHUNK = 32768  # rows per numpy pass of ``hamming``: its temporaries stay in the CPU cache


def hamming(code: np.ndarray, qcode: np.ndarray, w0: int, w1: int, n: int) -> np.ndarray:
    """Hamming distances (uint16) between the words ``[w0, w1)`` of ``qcode`` and of each of the
    first ``n`` codes.  (numpy: a chunk of rows at a time: at 1,000,000 rows 21 -> 14 ms for half
    the words, against one pass per word over every row, whose 8 MB temporaries left the cache
    between its three ufuncs.)"""
    dist = np.empty(n, np.uint16)
    if _scan is not None and code.flags.c_contiguous:
        _scan.hamming(code, code.shape[1], w0, w1, np.ascontiguousarray(qcode, np.uint64), n, dist)
        return dist
    step = max(1, min(n, HAMMING_CHUNK))
    tmp = np.empty(step, np.uint64)
    bits = np.empty(step, np.uint8)
    for a in range(0, n, step):
        b = min(n, a + step)
        d, t, c = dist[a:b], tmp[:b - a], bits[:b - a]
        d[:] = 0
        for w in range(w0, w1):
            np.bitwise_xor(code[w, a:b], qcode[w], out=t)
            np.bitwise_count(t, out=c)
            d += c
    return dist


def hamming_at(code: np.ndarray, qcode: np.ndarray, w0: int, w1: int, rows: np.ndarray,
               dist: np.ndarray) -> np.ndarray:
    """``dist`` plus the Hamming distances between the words ``[w0, w1)`` of ``qcode`` and of the
    codes at ``rows`` (the second pass, on the rows the first kept)."""
    rows = np.ascontiguousarray(rows, np.int64)
    out = np.array(dist, np.uint16)
    if _scan is not None and code.flags.c_contiguous:
        _scan.hamming_add_at(code, code.shape[1], w0, w1, np.ascontiguousarray(qcode, np.uint64), rows, out)
        return out
    # (np.take: 3.3 ms for 16,000 columns of 1M, where code[w0:w1, rows] took 5.0)
    return out + hamming(np.take(code[w0:w1], rows, axis=1), qcode[w0:w1], 0, w1 - w0, len(rows))


def smallest(dist: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` smallest distances (ties: the lower position), in position order."""
    dist = np.ascontiguousarray(dist, np.uint16)
    k = min(k, len(dist))
    if k <= 0:
        return np.zeros(0, np.int64)
    if _scan is not None:
        out = np.empty(k, np.int64)
        _scan.smallest(dist, k, out)
        return out
    # a threshold from a sample narrows the rows (no partition of all of them), then exactly:
    # every row below the k-th smallest distance t, and the first rows at t
    n = len(dist)
    step = max(1, n // 16384)
    sample = dist[::step]
    want = min(len(sample) - 1, int(len(sample) * k / n * 1.5) + 1)
    idx = np.flatnonzero(dist <= np.partition(sample, want)[want])
    if len(idx) < k:  # the sample was unlucky
        idx = np.arange(n)
    d = dist[idx]
    t = np.partition(d, k - 1)[k - 1]
    below = d < t
    at = np.flatnonzero(d == t)[:k - int(below.sum())]
    keep = below
    keep[at] = True
    return idx[keep]
