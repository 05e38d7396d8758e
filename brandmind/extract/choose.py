"""``get_extractor(config)``: the extractor the config key ``extractor`` names (rules or llm)."""
from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .base import Extractor
from .llm import LLMExtractor
from .rules import RulesExtractor


def get_extractor(config: Any = None, **overrides: Any) -> Extractor:
    """The extractor named by ``config.extractor`` ("rules", the default, or "llm").

    ``config`` is a :class:`brandmind.config.Config` (or None for the defaults);
    ``overrides`` go to the extractor's constructor (e.g. ``host=`` in tests).
    """
    kind = getattr(config, "extractor", "rules") if config is not None else "rules"
    if kind == "rules":
        return RulesExtractor(**overrides)
    if kind == "llm":
        options: dict[str, Any] = {}
        if config is not None:
            options = {"model": config.llm_model, "host": config.ollama_host,
                       "max_calls": config.llm_max_calls, "max_tokens": config.llm_max_tokens,
                       "provider": getattr(config, "llm_provider", "ollama"),
                       "base_url": getattr(config, "llm_base_url", None)}
        options.update(overrides)
        return LLMExtractor(**options)
    raise ConfigError(f"unknown extractor {kind!r}",
                      hint="use rules (offline, the default) or llm (Ollama or OpenAI-compatible chat, "
                           "llm_provider): `bm config set extractor rules`")
