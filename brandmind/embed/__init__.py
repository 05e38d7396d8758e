"""Embedders behind one narrow Protocol.

``local`` (the embedded default) runs all-MiniLM-L6-v2 offline with
onnxruntime; ``ollama`` talks to an Ollama server; ``hash`` is a deterministic
fake for unit tests and is never chosen unless named.
"""
from __future__ import annotations

from ..errors import ConfigError
from .base import Embedder, check_texts
from .hashing import HashEmbedder
from .local import LocalEmbedder
from .ollama import OllamaEmbedder

__all__ = ["Embedder", "check_texts", "get_embedder", "embedder_name"]


def get_embedder(kind: str, **options: object) -> Embedder:
    """Build the embedder named by ``kind`` ("local", "ollama" or "hash")."""
    if kind == "local":
        return LocalEmbedder(**options)  # type: ignore[arg-type]
    if kind == "ollama":
        return OllamaEmbedder(**options)  # type: ignore[arg-type]
    if kind == "hash":
        return HashEmbedder(**options)  # type: ignore[arg-type]
    raise ConfigError(
        f"unknown embedder {kind!r}",
        hint="set embedder to one of: local, ollama, hash (e.g. `bm config set embedder local`)",
    )


def embedder_name(kind: str, *, ollama_model: str = "nomic-embed-text", local_variant: str = "int8s") -> str:
    """The name an embedder records in a store, known without loading it."""
    local = "local:all-MiniLM-L6-v2" + ("" if local_variant == "fp32" else f":{local_variant}")
    names = {"local": local, "ollama": f"ollama:{ollama_model}", "hash": "hash:384"}
    if kind not in names:
        raise ConfigError(
            f"unknown embedder {kind!r}",
            hint="set embedder to one of: local, ollama, hash (e.g. `bm config set embedder local`)",
        )
    return names[kind]
