"""Fact extraction: atomic facts from conversation turns, behind one Protocol.

Two extractors:

* ``rules`` (:class:`~brandmind.extract.rules.RulesExtractor`, the embedded
  default): offline regular-expression rules for the common personal-memory
  patterns; no network, thousands of turns a second, precision over recall.
* ``llm`` (:class:`~brandmind.extract.llm.LLMExtractor`): an Ollama or OpenAI-compatible chat model
  with structured JSON output, prompts kept as versioned files in
  ``brandmind/extract/prompts/``, with per-run call and token caps.

``extract.choose.get_extractor(config)`` builds the one named by the config key ``extractor``
(a module of its own, so that what needs only the shapes does not compile the rules).
The shared shapes (Fact, Turn, ...) live in ``extract/base.py``; ``bm --help`` imports none of this.
"""
from __future__ import annotations

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

__all__ = ["Fact", "Turn", "Extractor", "empty_report", "is_agent_turn", "person_turns",
           "attributable", "PERSON_ROLES"]
