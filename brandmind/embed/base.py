"""What every embedder shares: the narrow Protocol and the check of its input.

The embedders (``hashing``, ``local``, ``ollama``) import from here, and
``brandmind.embed`` re-exports these names, so the package and its modules never
import each other in a circle.
"""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from ..errors import InvalidInput

__all__ = ["Embedder", "check_texts"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed size."""

    name: str  # recorded in the store, e.g. "local:all-MiniLM-L6-v2"
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for texts being stored, shape (len(texts), dim), float32, unit norm."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Vector for a search query, shape (dim,), float32, unit norm."""
        ...


def check_texts(texts: Sequence[str]) -> list[str]:
    """The argument of ``embed_documents`` as a list of strings, or InvalidInput."""
    if isinstance(texts, str):
        raise InvalidInput("embed_documents takes a list of texts, not one string", hint="wrap it: [text]")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidInput(f"text {i} is {type(t).__name__}, not a string", hint="pass only strings")
    return texts
