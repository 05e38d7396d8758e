"""Embedders behind one narrow Protocol.

``local`` (the embedded default) runs all-MiniLM-L6-v2 offline with
onnxruntime; ``ollama`` talks to an Ollama server; ``hash`` is a deterministic
fake for unit tests and is never chosen unless named.
"""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


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
    from ..errors import InvalidInput

    if isinstance(texts, str):
        raise InvalidInput("embed_documents takes a list of texts, not one string", hint="wrap it: [text]")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidInput(f"text {i} is {type(t).__name__}, not a string", hint="pass only strings")
    return texts


def get_embedder(kind: str, **options: object) -> Embedder:
    """Build the embedder named by ``kind`` ("local", "ollama" or "hash")."""
    from ..errors import ConfigError

    if kind == "local":
        from .local import LocalEmbedder

        return LocalEmbedder(**options)  # type: ignore[arg-type]
    if kind == "ollama":
        from .ollama import OllamaEmbedder

        return OllamaEmbedder(**options)  # type: ignore[arg-type]
    if kind == "hash":
        from .hashing import HashEmbedder

        return HashEmbedder(**options)  # type: ignore[arg-type]
    raise ConfigError(
        f"unknown embedder {kind!r}",
        hint="set embedder to one of: local, ollama, hash (e.g. `bm config set embedder local`)",
    )


def embedder_name(kind: str, *, ollama_model: str = "nomic-embed-text", local_variant: str = "int8s") -> str:
    """The name an embedder records in a store, known without loading it."""
    from ..errors import ConfigError

    local = "local:all-MiniLM-L6-v2" + ("" if local_variant == "fp32" else f":{local_variant}")
    names = {"local": local, "ollama": f"ollama:{ollama_model}", "hash": "hash:384"}
    if kind not in names:
        raise ConfigError(
            f"unknown embedder {kind!r}",
            hint="set embedder to one of: local, ollama, hash (e.g. `bm config set embedder local`)",
        )
    return names[kind]
