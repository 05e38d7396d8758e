"""What a fact is and how two facts are judged: the vocabulary of predicates, the
normalised forms names and predicates are compared in, a new fact's validation
(:func:`coerce_fact`) and the arbiters that say whether a new fact duplicates, updates or
contradicts a known one (brandmind/facts.py documents the rules and uses them).  Pure: no
I/O (the LLM arbiter lives in brandmind/extract/llm.py)."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Protocol

from . import validate
from .clock import parse_time
from .errors import InvalidInput
from .extract import Fact
from .extract.llm import LLMArbiter
from .extract.predicates import normalize_predicate

# single-valued predicates: a new object replaces the old one
FUNCTIONAL = frozenset({"name", "lives_in", "works_at", "works_as", "is_married_to", "age", "diet", "birthday",
                        "born_on", "birth_year"})
# multi-valued ones named in the shared vocabulary (any other predicate is multi-valued too)
MULTI_VALUED = frozenset({"likes", "dislikes", "has", "friend_of", "visited", "attended", "plans",
                          "decided", "moved_to", "started", "partner_of", "child_of", "parent_of",
                          "sibling_of", "loves", "hates", "moved_from"})
ANTONYMS = {"likes": "dislikes", "dislikes": "likes", "loves": "hates", "hates": "loves"}
VERDICTS = ("duplicate", "update", "contradiction", "unrelated")
ACTIONS = ("added", "confirmed", "updated", "contradicted")
LINK_TYPES = ("extends", "contradicts", "supports", "example_of", "part_of", "relates_to", "answers",
              "caused_by", "temporal")
SIMILAR = 0.8  # cosine from which a free-text fact about the same subject is a candidate

_PREDICATE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_NEGATION = re.compile(r"\bno longer\b|\bnot\b[^.;]*\bany ?more\b|n't\b[^.;]*\bany ?more\b|"
                       r"\bnever again\b|\bstopped\b|\bquit\b", re.IGNORECASE)
_EDGE_PUNCT = " \t\r\n.,;:!?\"'`()[]{}"
_ARTICLE = re.compile(r"^(the|a|an) ")
FACT_KEYS = ("text", "subject", "predicate", "object", "type", "valid_from", "valid_to", "confidence",
             "subject_type", "object_type", "sources", "negated", "importance", "meta", "ts", "user",
             "agent")
_TEMPLATES = {"name": "{s}'s name is {o}", "age": "{s} is {o} years old",
              "is_married_to": "{s} is married to {o}", "works_as": "{s} works as {o}"}


@lru_cache(maxsize=1 << 16)
def norm(value: str | None) -> str:
    """The comparison form of a name or object: NFKC, case-folded, single spaces, no
    surrounding punctuation, no leading article ("The Lisbon office" ~ "lisbon office")."""
    if value is None:
        return ""
    s = " ".join(unicodedata.normalize("NFKC", str(value)).casefold().split()).strip(_EDGE_PUNCT)
    return _ARTICLE.sub("", s)


def predicate_name(value: Any) -> str:
    """A predicate as stored: snake_case ASCII ("Lives in" -> "lives_in")."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("a fact needs a predicate", hint='e.g. "predicate": "lives_in"')
    p = normalize_predicate(value)
    if not _PREDICATE.match(p):
        raise InvalidInput(f"invalid predicate {value!r}",
                           hint="a predicate is a snake_case verb of letters, digits and _, "
                                "e.g. lives_in, works_at, likes")
    return p


# -- the new fact ------------------------------------------------------------------------
@dataclass
class FactInput(Fact):
    """A validated fact on its way in: an extracted ``Fact`` plus the memory's importance."""
    importance: float = 0.5
    ts: int | None = None
    user: str | None = None
    agent: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _short(value: Any, what: str, limit: int) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and what == "object":
        value = str(value)  # "age": 31
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"a fact needs a non-empty {what}",
                           hint='e.g. {"subject": "Ann", "predicate": "lives_in", "object": "Lisbon"}')
    value = " ".join(validate.text(value, what=what).split())
    if len(value) > limit:
        raise InvalidInput(f"the {what} is {len(value)} characters, over {limit}",
                           hint=f"keep the {what} short; put the details in \"text\"")
    return value


def coerce_fact(obj: Any, *, max_chars: int = 16000) -> FactInput:
    """A FactInput from a dict (JSON), a ``brandmind.extract.Fact`` or a FactInput;
    InvalidInput naming the field otherwise.  Times are ISO 8601 or epoch s/ms."""
    if isinstance(obj, FactInput):
        return obj
    if isinstance(obj, dict):
        unknown = sorted(set(obj) - set(FACT_KEYS))
        if unknown:
            raise InvalidInput(f"unknown fact field(s): {', '.join(map(str, unknown))}",
                               hint="a fact has: " + ", ".join(FACT_KEYS))
        get = obj.get
    elif hasattr(obj, "subject") and hasattr(obj, "predicate"):
        def get(key: str, default: Any = None) -> Any:
            return getattr(obj, key, default)
    else:
        raise InvalidInput(f"a fact must be a JSON object, got {type(obj).__name__}",
                           hint='e.g. {"subject": "Ann", "predicate": "lives_in", "object": "Lisbon"}')
    subject = _short(get("subject"), "subject", 256)
    predicate = predicate_name(get("predicate"))
    obj_ = _short(get("object"), "object", 1000)
    valid_from = parse_time(get("valid_from"), field="valid_from")
    valid_to = parse_time(get("valid_to"), field="valid_to")
    if valid_from is not None and valid_to is not None and valid_to <= valid_from:
        raise InvalidInput("valid_to must be after valid_from",
                           hint='e.g. "valid_from": "2020-01-01", "valid_to": "2024-05-01"')
    negated = get("negated")
    if negated is not None and not isinstance(negated, bool):
        raise InvalidInput(f"negated must be true or false, got {negated!r}", hint='e.g. "negated": true')
    text = get("text")
    if text is None or (isinstance(text, str) and not text.strip()):
        text = _sentence(subject, predicate, obj_, bool(negated))
    text = validate.text(text, limit=max_chars)
    if negated is None:  # "stopped"/"quit" may be the predicate itself ("Ann quit smoking")
        found = _NEGATION.search(text)
        negated = bool(found) and not set(found.group(0).casefold().split()) & set(predicate.split("_"))
    confidence = get("confidence")
    confidence = 0.8 if confidence is None else _unit(confidence, "confidence")
    importance = get("importance")
    importance = 0.5 if importance is None else validate.importance(importance)
    sources = get("sources") or []
    if isinstance(sources, str) or not all(isinstance(s, str) and s for s in sources):
        raise InvalidInput("sources must be a list of bead ids", hint='e.g. "sources": ["b_01h..."]')
    user, agent = get("user"), get("agent")
    return FactInput(
        text=text, subject=subject, predicate=predicate, object=obj_,
        type=validate.memory_type(get("type") or "fact"), valid_from=valid_from, valid_to=valid_to,
        confidence=confidence,
        subject_type=validate.name(get("subject_type") or "person", what="subject_type"),
        object_type=validate.name(get("object_type") or "entity", what="object_type"),
        sources=list(dict.fromkeys(sources)), negated=negated, importance=importance,
        meta=validate.meta(get("meta")), ts=parse_time(get("ts"), field="ts"),
        user=validate.name(user, what="user") if user is not None else None,
        agent=validate.name(agent, what="agent") if agent is not None else None)


def _unit(value: Any, what: str) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        number = float("nan")
    if not 0.0 <= number <= 1.0:
        raise InvalidInput(f"{what} must be a number from 0 to 1, got {value!r}", hint=f'e.g. "{what}": 0.8')
    return number


def _sentence(subject: str, predicate: str, obj: str, negated: bool) -> str:
    if negated:
        return f"{subject} no longer {predicate.replace('_', ' ')} {obj}"
    template = _TEMPLATES.get(predicate, "{s} {p} {o}")
    return template.format(s=subject, p=predicate.replace("_", " "), o=obj)


# -- arbiters --------------------------------------------------------------------------------
class Arbiter(Protocol):
    """Judges a new fact against candidate facts.

    ``new_fact`` is a dict with the fields of :class:`FactInput` (text, subject, predicate,
    object, negated, valid_from, valid_to, ts, ...); each candidate is a dict with ``id, text,
    subject, predicate, object, negated, valid_from, valid_to, ts, recorded_at, similarity``
    (cosine to the new fact, or None when it matched on subject and predicate).  Returns
    ``(candidate id, verdict)`` pairs, verdict one of :data:`VERDICTS`; candidates left out
    are unrelated."""

    def decide(self, new_fact: dict, candidates: list[dict]) -> list[tuple[str, str]]: ...


class RuleArbiter:
    """The offline default: only exact, explainable conflicts (see the module docstring)."""

    name = "rules"

    def decide(self, new_fact: dict, candidates: list[dict]) -> list[tuple[str, str]]:
        p, neg = new_fact["predicate"], bool(new_fact.get("negated"))
        obj, text = norm(new_fact["object"]), norm(new_fact["text"])
        out = []
        for c in candidates:
            same_obj = norm(c.get("object")) == obj
            c_neg = bool(c.get("negated"))
            if c.get("predicate") == p:
                if same_obj:
                    verdict = "duplicate" if c_neg == neg else "contradiction"
                elif p in FUNCTIONAL and not neg and not c_neg:
                    verdict = "update"
                else:
                    verdict = "unrelated"
            elif ANTONYMS.get(p) == c.get("predicate") and same_obj and not neg and not c_neg:
                verdict = "contradiction"
            elif norm(c.get("text")) == text:
                verdict = "duplicate"
            else:
                verdict = "unrelated"
            out.append((c["id"], verdict))
        return out


def default_arbiter(config: Any) -> Arbiter:
    """The LLM arbiter when config ``extractor = "llm"`` and it is installed, else the rules."""
    if getattr(config, "extractor", None) == "llm":
        return LLMArbiter.from_config(config)
    return RuleArbiter()
