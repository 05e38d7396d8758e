"""A deterministic fake embedder for unit tests: feature hashing, no model.

Each text becomes a bag of features -- its lower-cased word tokens (weight 1)
and the character trigrams of each word, padded with ``#`` (weight 0.5) -- and
every feature is hashed with blake2b (stable across processes and machines,
unlike Python's salted ``hash()``) to a bucket and a sign.  The vector is
L2-normalised float32, so texts sharing words score a higher cosine than texts
that share none.  It knows nothing of meaning and is never chosen unless named.
"""
from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Sequence

import numpy as np

from ..errors import InvalidInput
from .base import check_texts

_WORD = re.compile(r"\w+", re.UNICODE)
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


def _word_features(word: str) -> list[tuple[str, float]]:
    feats = [("w:" + word, _WORD_WEIGHT)]
    padded = f"#{word}#"
    for i in range(len(padded) - 2):
        feats.append(("c:" + padded[i : i + 3], _TRIGRAM_WEIGHT))
    return feats


@lru_cache(maxsize=65536)
def _word_buckets(word: str, dim: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """A word's buckets and signed weights, in feature order (words repeat across texts)."""
    idx, val = [], []
    for feat, weight in _word_features(word):
        i, sign = _bucket(feat, dim)
        idx.append(i)
        val.append(sign * weight)
    return tuple(idx), tuple(val)


class HashEmbedder:
    """Feature-hashing embedder of ``dim`` dimensions (name ``hash:<dim>``)."""

    def __init__(self, dim: int = 384) -> None:
        if not isinstance(dim, int) or dim < 8:
            raise InvalidInput(f"hash embedder dim must be an integer >= 8, not {dim!r}", hint="use e.g. dim=384")
        self.dim = dim
        self.name = f"hash:{dim}"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One bincount for the whole batch (row r's features land in bins r*dim..), each
        row's features added in feature order: the same float64 sums as one text alone."""
        texts = check_texts(texts)
        n, dim = len(texts), self.dim
        if not n:
            return np.empty((0, dim), dtype=np.float32)
        idx: list[int] = []
        val: list[float] = []
        counts: list[int] = []
        for text in texts:
            start = len(idx)
            for word in _WORD.findall(text.lower()):
                i, v = _word_buckets(word, dim)
                idx.extend(i)
                val.extend(v)
            if len(idx) == start:  # empty text still gets a unit vector
                i, sign = _bucket("empty:", dim)
                idx.append(i)
                val.append(sign)
            counts.append(len(idx) - start)
        bins = np.asarray(idx, dtype=np.int64) + np.repeat(np.arange(n, dtype=np.int64) * dim, counts)
        mat = np.bincount(bins, weights=val, minlength=n * dim).reshape(n, dim)
        norms = np.array([row.dot(row) for row in mat])  # what np.linalg.norm does for one row
        for r in np.flatnonzero(norms == 0.0):  # features cancelled out: the empty-text vector
            i, sign = _bucket("empty:", dim)
            mat[r] = 0.0
            mat[r, i], norms[r] = sign, 1.0
        return (mat / np.sqrt(norms)[:, None]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        if not isinstance(text, str):
            raise InvalidInput(f"a query must be text, not {type(text).__name__}", hint="pass a string")
        return self.embed_documents([text])[0]

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"
