"""The shapes every extractor shares: a Turn in, Facts out, and who may be quoted.

``brandmind.extract`` re-exports these names; the extractors (``rules``, ``llm``) import
them from here, so the package and its modules never import each other in a circle.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Fact", "Turn", "Extractor", "empty_report", "is_agent_turn", "person_turns", "attributable",
           "PERSON_ROLES"]

# roles whose turns are a person speaking; any other role (assistant, system, tool, ...) is the agent
PERSON_ROLES = frozenset({"user", "human", "person"})


@dataclass
class Fact:
    """One atomic fact: ``subject -predicate-> object`` with its sentence and sources.

    ``text`` is a clean stand-alone sentence ("Ann lives in Lisbon"); ``sources``
    are the ids of the beads (or memories) it was read from.  ``negated`` marks a
    statement that something is no longer (or not) so ("I no longer live in
    Lisbon": lives_in Lisbon, negated), which reconciliation treats as a
    contradiction of the positive fact.  ``meta`` carries extra provenance (e.g.
    the extractor and its prompt version) for the caller to store.
    """

    text: str
    subject: str
    predicate: str
    object: str
    type: str = "fact"
    valid_from: int | None = None
    valid_to: int | None = None
    confidence: float = 0.8
    subject_type: str = "person"
    object_type: str = "entity"
    sources: list[str] = field(default_factory=list)
    negated: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Turn:
    """One conversation turn to extract from.

    ``speaker`` is who says "I" in it (None: the ``user`` does); ``ts`` is when it
    was said (epoch ms), the reference for "yesterday" or "last week"; ``bead``
    is the id of the stored bead it came from (None when it was never stored);
    ``role`` is the message's role (None or one of :data:`PERSON_ROLES`: a person
    speaks; assistant, system, tool...: the agent does, see :func:`attributable`).
    """

    text: str
    speaker: str | None = None
    ts: int | None = None
    bead: str | None = None
    user: str = "default"
    role: str | None = None


def is_agent_turn(turn: Turn) -> bool:
    """Whether the agent (role assistant, system, tool, ...) said the turn, not a person."""
    return turn.role is not None and turn.role.strip().casefold() not in PERSON_ROLES


def person_turns(turns: list[Turn]) -> list[Turn]:
    """The turns an extractor reads: an agent turn without a speaker name is left out (its
    "I" is the agent, and nothing it says is what a person said)."""
    return [t for t in turns if not is_agent_turn(t) or (t.speaker or "").strip()]


def attributable(fact: "Fact", turn: Turn) -> bool:
    """Whether ``fact``, read from ``turn``, may be stored.  A person's turn: anything they
    say about themselves or others.  An agent's turn (it has a speaker name, else it is
    not read at all): only what it says about itself (subject = the speaker), never a
    claim about the user or anyone else (a recap, a guess or a persona line)."""
    if not is_agent_turn(turn):
        return True
    speaker = " ".join((turn.speaker or "").casefold().split())
    return bool(speaker) and " ".join(fact.subject.casefold().split()) == speaker


@runtime_checkable
class Extractor(Protocol):
    """Turns conversation turns into atomic facts."""

    name: str  # "rules" or "llm:<model>"

    def extract(self, turns: list[Turn]) -> list[Fact]:
        """The facts in ``turns``, in turn order; the run's cost is in ``last_report``."""
        ...

    def estimate(self, turns: list[Turn]) -> dict[str, int]:
        """``{"calls", "tokens"}`` that ``extract(turns)`` would use, without any network."""
        ...


def empty_report() -> dict[str, Any]:
    """The cost report of a run that made no LLM calls."""
    return {"calls": 0, "tokens": 0, "capped": False, "skipped_turns": 0, "bad_chunks": 0, "bad_facts": 0}
