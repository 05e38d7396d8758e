"""Embedders behind one narrow Protocol.

``local`` (the embedded default) runs all-MiniLM-L6-v2 offline with
onnxruntime; ``ollama`` talks to an Ollama server; ``openai`` to any
OpenAI-compatible ``/embeddings`` endpoint (``openai_compat.py``); ``hf`` to the
Hugging Face Inference API (``hfapi.py``); ``hash`` is a deterministic fake for
unit tests and is never chosen unless named.  A list of them in config
(``embedder = ["ollama", "local"]``) is a chain (``chain.py``): the first names the
store's model, the others serve only when the first is down and they measure as
the same model.
"""
from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from . import preload
from .base import Embedder, check_texts
from .chain import REFERENCE_FILE, EmbedderChain, Provider
from .hashing import HashEmbedder
from .hfapi import HFEmbedder
from .local import LocalEmbedder
from .ollama import OllamaEmbedder
from .openai_compat import OpenAIEmbedder

__all__ = ["Embedder", "check_texts", "get_embedder", "embedder_name", "embedder_from_config",
           "name_from_config", "preload_local", "EmbedderChain"]

KINDS = ("local", "ollama", "openai", "hf", "hash")
_HINT = "set embedder to one of: local, ollama, openai, hf, hash, or a chain (e.g. `bm config set embedder ollama,local`)"


def get_embedder(kind: str, **options: object) -> Embedder:
    """Build the embedder named by ``kind`` ("local", "ollama", "openai", "hf" or "hash")."""
    makers: dict[str, Any] = {"local": LocalEmbedder, "ollama": OllamaEmbedder, "openai": OpenAIEmbedder,
                              "hf": HFEmbedder, "hash": HashEmbedder}
    if kind not in makers:
        raise ConfigError(f"unknown embedder {kind!r}", hint=_HINT)
    return makers[kind](**options)


def embedder_name(kind: str, *, ollama_model: str = "nomic-embed-text", local_variant: str = "int8s",
                  openai_model: str = "text-embedding-3-small",
                  hf_model: str = "sentence-transformers/all-MiniLM-L6-v2") -> str:
    """The name an embedder records in a store, known without loading it."""
    local = "local:all-MiniLM-L6-v2" + ("" if local_variant == "fp32" else f":{local_variant}")
    names = {"local": local, "ollama": f"ollama:{ollama_model}", "hash": "hash:384",
             "openai": f"openai:{openai_model}", "hf": f"hf:{hf_model}"}
    if kind not in names:
        raise ConfigError(f"unknown embedder {kind!r}", hint=_HINT)
    return names[kind]


def _kinds(config: Any) -> list[str]:
    return [k.strip() for k in str(config.embedder).split(",") if k.strip()]


def _options(kind: str, config: Any) -> dict[str, Any]:
    if kind == "local":
        return {"cache_dir": config.paths.cache_dir, "variant": config.local_variant}
    if kind == "ollama":
        return {"model": config.ollama_model, "host": config.ollama_host}
    if kind == "openai":
        return {"model": config.openai_model, "base_url": config.openai_base_url}
    if kind == "hf":
        return {"model": config.hf_model, "base_url": config.hf_base_url}
    return {}


def _name(kind: str, config: Any) -> str:
    return embedder_name(kind, ollama_model=config.ollama_model, local_variant=config.local_variant,
                         openai_model=config.openai_model, hf_model=config.hf_model)


def name_from_config(config: Any) -> str:
    """The model a store with this config records: its (first) embedder's name."""
    kinds = _kinds(config)
    if not kinds:
        raise ConfigError("no embedder is configured", hint=_HINT)
    return _name(kinds[0], config)


def embedder_from_config(config: Any) -> Embedder:
    """The embedder the config key ``embedder`` names: one provider, or a chain of them whose
    reference vectors live in the store's data directory (see ``chain.py``)."""
    kinds = _kinds(config)
    if len(kinds) == 1:
        return get_embedder(kinds[0], **_options(kinds[0], config))
    providers = [Provider(kind, _name(kind, config), _maker(kind, config)) for kind in kinds]
    if not providers:
        raise ConfigError("no embedder is configured", hint=_HINT)
    return EmbedderChain(providers, config.paths.data_dir / REFERENCE_FILE)


def _maker(kind: str, config: Any) -> Any:
    return lambda: get_embedder(kind, **_options(kind, config))


def preload_local(config: Any) -> bool:
    """When the config's embedder is the local model alone, start making its session and
    tokenizer in threads (``preload.py``: the command line, for the commands that embed);
    whether it started."""
    return _kinds(config) == ["local"] and preload.start(**_options("local", config))
