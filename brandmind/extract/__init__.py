"""Fact extraction: atomic facts from conversation turns, behind one Protocol.

Two extractors:

* ``rules`` (:class:`~brandmind.extract.rules.RulesExtractor`, the embedded
  default): offline regular-expression rules for the common personal-memory
  patterns; no network, thousands of turns a second, precision over recall.
* ``llm`` (:class:`~brandmind.extract.llm.LLMExtractor`): an Ollama chat model
  with structured JSON output, prompts kept as versioned files in
  ``brandmind/extract/prompts/``, with per-run call and token caps.

``get_extractor(config)`` builds the one named by the config key ``extractor``.
The shared shapes (Fact, Turn, ...) live in ``extract/base.py``; ``bm --help`` imports none of this.
"""
from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .base import (
    PERSON_ROLES,
    Extractor,
    Fact,
    Turn,
    attributable,
    empty_report,
    is_agent_turn,
    person_turns,
)
from .llm import LLMExtractor
from .rules import RulesExtractor

__all__ = ["Fact", "Turn", "Extractor", "get_extractor", "empty_report", "is_agent_turn", "person_turns",
           "attributable", "PERSON_ROLES"]


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
                       "max_calls": config.llm_max_calls, "max_tokens": config.llm_max_tokens}
        options.update(overrides)
        return LLMExtractor(**options)
    raise ConfigError(f"unknown extractor {kind!r}",
                      hint="use rules (offline, the default) or llm (Ollama chat): `bm config set extractor rules`")
