"""Fact extraction and reconciliation through a chat model: Ollama, or any OpenAI-compatible endpoint.

:class:`LLMExtractor` sends the turns in chunks (``chunk_turns`` turns a call,
20 by default) to ``ollama.Client(host).chat(model, messages, format=<JSON
schema>, options={"temperature": 0, "num_predict": max_output_tokens})`` with
the system prompt ``prompts/extract_v1.md`` and reads ``{"facts": [...]}``
back.  An answer that is not JSON or breaks the schema skips its chunk
(counted in ``last_report["bad_chunks"]``); a single malformed fact is skipped
(``bad_facts``).  A server that cannot be reached, answers with an HTTP error
or lacks the model raises :class:`~brandmind.errors.ExtractorUnavailable`
naming the fix (``ollama serve``, ``ollama pull``, or ``bm config set
extractor rules``).

Cost caps (config ``llm_max_calls``, ``llm_max_tokens``; per ingest, remember
or extract): before each call the extractor checks that one more call and its
estimated tokens fit in what is left; if not it stops calling and reports
``{"calls", "tokens", "capped": True, "skipped_turns": n}`` in
``last_report``.  The facts of the chunks already read are kept.

Token estimate (no network, no tokenizer): a call costs
``ceil(len(system prompt + user message) / 4)`` input tokens (about four
characters a token for English) plus ``max_output_tokens`` (1024, also sent as
``num_predict``, so it is an upper bound of the answer).  The tokens counted
against the cap after a call are the server's ``prompt_eval_count +
eval_count`` when it reports them, else the estimate.

:class:`LLMArbiter` implements the reconciliation Arbiter of
``brandmind.facts`` with ``prompts/reconcile_v1.md``; it raises
``ExtractorUnavailable`` on any failure (server down, bad JSON, cap reached),
which makes ``facts.reconcile`` fall back to the rules.  Arbiter calls count
against the same :class:`Budget` as the extractor when they share one.

The prompt version (file stem, e.g. ``extract_v1``) is ``prompt_version``; each
extracted fact carries ``meta = {"extractor": "llm", "model", "prompt_version"}``.

Providers (config ``llm_provider``): ``ollama`` (the above, at ``ollama_host``; name
``llm:<model>``) or ``openai``: any OpenAI-compatible chat endpoint at ``llm_base_url``
(OpenRouter by default) through ``extract/openai_chat.py``, with the same prompts, schema,
caps and dry runs (name ``llm:openai:<model>``).  ``last_report["read"]`` lists the beads
of the turns whose chunk got a readable answer: what extraction state records as done.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from typing import Any

from ..clock import parse_time
from ..errors import ExtractorUnavailable, InvalidInput
from .base import Fact, Turn, attributable, empty_report, person_turns
from .openai_chat import OpenAIChat
from .predicates import normalize_predicate

__all__ = ["LLMExtractor", "LLMArbiter", "Budget", "load_prompt", "FACTS_SCHEMA", "VERDICTS_SCHEMA",
           "EXTRACT_PROMPT", "RECONCILE_PROMPT", "estimate_tokens", "llm_name", "PROVIDERS"]

PROVIDERS = ("ollama", "openai")

DEFAULT_MODEL = "llama3.1:8b"
EXTRACT_PROMPT = "extract_v1"
RECONCILE_PROMPT = "reconcile_v1"
CHARS_PER_TOKEN = 4
MAX_OUTPUT_TOKENS = 1024
MAX_TURN_CHARS = 4000  # a longer turn is cut in the prompt (the whole text stays in its bead)
_TYPES = ("fact", "preference", "decision", "insight", "question", "concept")
_VERDICTS = ("duplicate", "update", "contradiction", "unrelated")
_PREDICATE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "turn": {"type": "integer"},
                    "subject": {"type": "string"},
                    "predicate": {"type": "string"},
                    "object": {"type": "string"},
                    "text": {"type": "string"},
                    "type": {"type": "string", "enum": list(_TYPES)},
                    "negated": {"type": "boolean"},
                    "valid_from": {"type": ["string", "null"]},
                    "confidence": {"type": "number"},
                },
                "required": ["turn", "subject", "predicate", "object", "text"],
            },
        }
    },
    "required": ["facts"],
}

VERDICTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "verdict": {"type": "string", "enum": list(_VERDICTS)}},
                "required": ["id", "verdict"],
            },
        }
    },
    "required": ["verdicts"],
}


def load_prompt(version: str) -> str:
    """The text of ``prompts/<version>.md`` (shipped with the package)."""
    try:
        return resources.files(__package__).joinpath("prompts", f"{version}.md").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError) as exc:
        raise ExtractorUnavailable(f"prompt file {version}.md is missing from the installation",
                                   hint="reinstall brandmind, or set extractor = rules") from exc


def estimate_tokens(*texts: str) -> int:
    """Input tokens of a prompt by the documented rule: characters / 4, rounded up."""
    return math.ceil(sum(len(t) for t in texts) / CHARS_PER_TOKEN)


@dataclass
class Budget:
    """LLM calls and tokens spent and allowed in one run (shared by extractor and arbiter)."""

    max_calls: int = 100
    max_tokens: int = 200000
    calls: int = 0
    tokens: int = 0
    capped: bool = False

    def fits(self, tokens: int) -> bool:
        return self.calls + 1 <= self.max_calls and self.tokens + tokens <= self.max_tokens

    def spend(self, tokens: int) -> None:
        self.calls += 1
        self.tokens += tokens


def _iso_day(ms: int | None) -> str:
    if ms is None:
        return "unknown date"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d (%A)")


class _OllamaChat:
    """The shared plumbing: a lazily made ``ollama.Client`` and one JSON-schema chat call."""

    def __init__(self, model: str, host: str | None, timeout: float, budget: Budget) -> None:
        if not model or not isinstance(model, str):
            raise InvalidInput("the LLM model name is empty", hint=f"e.g. `bm config set llm_model {DEFAULT_MODEL}`")
        self.model = model
        self.host = host
        self.timeout = timeout
        self.budget = budget
        self._client: Any = None

    def _hint(self) -> str:
        where = f" at {self.host}" if self.host else ""
        return (f"start the Ollama server{where} with `ollama serve` and `ollama pull {self.model}`, "
                "or use the offline extractor: `bm config set extractor rules`")

    def _get_client(self) -> Any:
        if self._client is None:
            try:
                import ollama
            except ImportError as exc:
                raise ExtractorUnavailable(
                    "the `ollama` Python package is not installed",
                    hint="pip install 'brandmind[ollama]', or `bm config set extractor rules`") from exc
            self._client = ollama.Client(host=self.host, timeout=self.timeout)
        return self._client

    def chat(self, system: str, user: str, schema: dict[str, Any], estimate: int) -> tuple[str | None, int]:
        """One call: ``(content, tokens used)``; content None when the answer was unreadable.
        Raises ExtractorUnavailable when the server cannot answer at all."""
        client = self._get_client()
        import httpx
        import ollama

        try:
            response = client.chat(
                model=self.model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                format=schema, stream=False,
                options={"temperature": 0, "num_predict": MAX_OUTPUT_TOKENS})
        except ollama.ResponseError as exc:
            if exc.status_code == 404:
                raise ExtractorUnavailable(
                    f"Ollama has no model {self.model!r}: {exc.error}",
                    hint=f"pull it with `ollama pull {self.model}`, set llm_model, "
                         "or `bm config set extractor rules`") from exc
            raise ExtractorUnavailable(f"Ollama refused the chat request (HTTP {exc.status_code}): {exc.error}",
                                       hint=self._hint()) from exc
        except (ConnectionError, httpx.HTTPError, OSError) as exc:
            raise ExtractorUnavailable(f"cannot reach Ollama: {exc or type(exc).__name__}", hint=self._hint()) from exc
        except Exception:  # noqa: BLE001 - an unreadable HTTP answer (not JSON, wrong shape)
            self.budget.spend(estimate)
            return None, estimate
        used = estimate
        prompt_n, eval_n = getattr(response, "prompt_eval_count", None), getattr(response, "eval_count", None)
        if isinstance(prompt_n, int) and isinstance(eval_n, int) and prompt_n >= 0 and eval_n >= 0:
            used = prompt_n + eval_n
        self.budget.spend(used)
        message = getattr(response, "message", None)
        content = getattr(message, "content", None) if message is not None else None
        return (content if isinstance(content, str) else None), used


def llm_name(provider: str, model: str) -> str:
    """The extractor's name: ``llm:<model>`` (Ollama) or ``llm:openai:<model>``."""
    return f"llm:{model}" if provider == "ollama" else f"llm:{provider}:{model}"


def _make_chat(provider: str, model: str, host: str | None, base_url: str | None, timeout: float,
               budget: Budget) -> Any:
    if provider == "ollama":
        return _OllamaChat(model, host, timeout, budget)
    if provider == "openai":
        return OpenAIChat(model, base_url, budget, timeout=timeout, max_output_tokens=MAX_OUTPUT_TOKENS)
    raise InvalidInput(f"unknown llm_provider {provider!r}", hint="use ollama or openai: `bm config set llm_provider openai`")


class LLMExtractor:
    """Facts through a chat model with structured output (see the module docstring)."""

    prompt_version = EXTRACT_PROMPT

    def __init__(self, model: str = DEFAULT_MODEL, host: str | None = None, *, max_calls: int = 100,
                 max_tokens: int = 200000, chunk_turns: int = 20, timeout: float = 120,
                 budget: Budget | None = None, provider: str = "ollama", base_url: str | None = None) -> None:
        for key, value in (("max_calls", max_calls), ("max_tokens", max_tokens), ("chunk_turns", chunk_turns)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"{key} must be a positive whole number, got {value!r}",
                                   hint=f"e.g. `bm config set llm_{key} 100`" if key != "chunk_turns" else "e.g. 20")
        self.budget = budget or Budget(max_calls=max_calls, max_tokens=max_tokens)
        self._chat = _make_chat(provider, model, host, base_url, timeout, self.budget)
        self.model = model
        self.name = llm_name(provider, model)
        self.chunk_turns = chunk_turns
        self.system_prompt = load_prompt(EXTRACT_PROMPT)
        self.last_report: dict[str, Any] = empty_report()

    # -- prompts
    def _chunks(self, turns: list[Turn]) -> list[list[tuple[int, Turn]]]:
        indexed = list(enumerate(person_turns(turns)))  # an unnamed agent turn is not sent
        return [indexed[i:i + self.chunk_turns] for i in range(0, len(indexed), self.chunk_turns)]

    def user_message(self, chunk: list[tuple[int, Turn]]) -> str:
        lines = ["Turns:"]
        for n, (_, turn) in enumerate(chunk):
            speaker = turn.speaker or turn.user
            text = turn.text if len(turn.text) <= MAX_TURN_CHARS else turn.text[:MAX_TURN_CHARS] + " [...]"
            text = " ".join(text.split())
            lines.append(f"[{n}] {_iso_day(turn.ts)}, {speaker}: {text}")
        return "\n".join(lines)

    def _estimate_call(self, chunk: list[tuple[int, Turn]]) -> int:
        return estimate_tokens(self.system_prompt, self.user_message(chunk)) + MAX_OUTPUT_TOKENS

    # -- the Protocol
    def estimate(self, turns: list[Turn]) -> dict[str, Any]:
        """What ``extract(turns)`` would spend under the caps, without any network:
        ``{"calls", "tokens", "capped", "skipped_turns"}``."""
        calls = tokens = 0
        skipped = 0
        capped = False
        left_calls = self.budget.max_calls - self.budget.calls
        left_tokens = self.budget.max_tokens - self.budget.tokens
        for chunk in self._chunks(turns):
            cost = self._estimate_call(chunk)
            if capped or calls + 1 > left_calls or tokens + cost > left_tokens:
                capped = True
                skipped += len(chunk)
                continue
            calls += 1
            tokens += cost
        return {"calls": calls, "tokens": tokens, "capped": capped, "skipped_turns": skipped}

    def extract(self, turns: list[Turn]) -> list[Fact]:
        report = empty_report()
        start_calls, start_tokens = self.budget.calls, self.budget.tokens
        facts: list[Fact] = []
        read: list[str] = []  # beads of the turns whose chunk got a readable answer
        chunks = self._chunks(turns)
        for n, chunk in enumerate(chunks):
            user = self.user_message(chunk)
            cost = estimate_tokens(self.system_prompt, user) + MAX_OUTPUT_TOKENS
            if not self.budget.fits(cost):
                self.budget.capped = True
                report["capped"] = True
                report["skipped_turns"] = sum(len(c) for c in chunks[n:])
                break
            content, _ = self._chat.chat(self.system_prompt, user, FACTS_SCHEMA, cost)
            parsed = _parse_facts(content, chunk, self)
            if parsed is None:
                report["bad_chunks"] += 1
                continue
            got, bad = parsed
            read.extend(turn.bead for _, turn in chunk if turn.bead)
            facts.extend(got)
            report["bad_facts"] += bad
        report["calls"] = self.budget.calls - start_calls
        report["tokens"] = self.budget.tokens - start_tokens
        report["read"] = read
        self.last_report = report
        return facts


def _parse_facts(content: str | None, chunk: list[tuple[int, Turn]],
                 extractor: LLMExtractor) -> tuple[list[Fact], int] | None:
    """The facts of one answer, or None when the answer is not ``{"facts": [...]}`` JSON."""
    if content is None:
        return None
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("facts"), list):
        return None
    out: list[Fact] = []
    bad = 0
    for item in data["facts"]:
        try:
            out.append(_fact_from(item, chunk, extractor, parse_time))
        except _NotAttributable:
            continue  # an agent's claim about someone else: not a fact to keep (not a bad answer)
        except (ValueError, TypeError, KeyError, InvalidInput):
            bad += 1
    return out, bad


class _NotAttributable(Exception):
    """A fact read from an agent's turn about someone other than its speaker."""


def _text_field(item: dict, key: str, limit: int) -> str:
    value = item[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key == "object":
        value = str(value)
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise ValueError(key)
    value = " ".join(value.split())
    if len(value) > limit:
        raise ValueError(key)
    return value


def _fact_from(item: Any, chunk: list[tuple[int, Turn]], extractor: LLMExtractor, parse_time: Any) -> Fact:
    if not isinstance(item, dict):
        raise ValueError("not an object")
    n = item["turn"]
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < len(chunk):
        raise ValueError("turn")
    turn = chunk[n][1]
    subject = _text_field(item, "subject", 256)
    if not attributable(Fact("", subject, "", ""), turn):
        raise _NotAttributable(subject)
    obj = _text_field(item, "object", 500)
    text = _text_field(item, "text", 1000)
    predicate = normalize_predicate(_text_field(item, "predicate", 64))
    if not _PREDICATE.match(predicate):
        raise ValueError("predicate")
    kind = item.get("type") or "fact"
    if kind not in _TYPES:
        kind = "fact"
    negated = item.get("negated", False)
    if negated is None:
        negated = False
    if not isinstance(negated, bool):
        raise ValueError("negated")
    valid_from = None
    raw = item.get("valid_from")
    if isinstance(raw, str) and raw.strip():
        try:
            valid_from = parse_time(raw.strip(), field="valid_from")
        except InvalidInput:
            valid_from = None  # an unreadable date loses the date, not the fact
    confidence = item.get("confidence", 0.7)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not math.isfinite(confidence):
        confidence = 0.7
    confidence = min(1.0, max(0.0, float(confidence)))
    return Fact(text=text, subject=subject, predicate=predicate, object=obj, type=kind,
                valid_from=valid_from, confidence=confidence, sources=[turn.bead] if turn.bead else [],
                negated=negated,
                meta={"extractor": "llm", "model": extractor.model, "prompt_version": extractor.prompt_version})


class LLMArbiter:
    """The reconciliation Arbiter (``brandmind.facts``) through a chat model (Ollama or OpenAI-compatible).

    ``decide(new_fact, candidates)`` returns ``[(candidate id, verdict)]``; on any failure
    (server down, unreadable or incomplete answer, cap reached) it raises
    ExtractorUnavailable, on which ``facts.reconcile`` lets the rules decide."""

    prompt_version = RECONCILE_PROMPT

    def __init__(self, model: str = DEFAULT_MODEL, host: str | None = None, *, timeout: float = 60,
                 budget: Budget | None = None, max_calls: int = 100, max_tokens: int = 200000,
                 provider: str = "ollama", base_url: str | None = None) -> None:
        self.budget = budget or Budget(max_calls=max_calls, max_tokens=max_tokens)
        self._chat = _make_chat(provider, model, host, base_url, timeout, self.budget)
        self.model = model
        self.name = llm_name(provider, model)
        self.system_prompt = load_prompt(RECONCILE_PROMPT)

    @classmethod
    def from_config(cls, config: Any, budget: Budget | None = None) -> "LLMArbiter":
        return cls(model=config.llm_model, host=config.ollama_host, budget=budget,
                   max_calls=config.llm_max_calls, max_tokens=config.llm_max_tokens,
                   provider=getattr(config, "llm_provider", "ollama"), base_url=getattr(config, "llm_base_url", None))

    def decide(self, new_fact: dict, candidates: list[dict]) -> list[tuple[str, str]]:
        if not candidates:
            return []
        keys = ("id", "text", "subject", "predicate", "object", "negated", "valid_from", "valid_to")
        payload = {
            "new": {k: new_fact.get(k) for k in keys if k != "id"},
            "candidates": [{k: c.get(k) for k in keys} for c in candidates],
        }
        for item in (payload["new"], *payload["candidates"]):
            for key in ("valid_from", "valid_to"):
                if isinstance(item.get(key), int):
                    item[key] = datetime.fromtimestamp(item[key] / 1000, tz=timezone.utc).strftime("%Y-%m-%d")
        user = "NEW and CANDIDATES:\n" + json.dumps(payload, ensure_ascii=False)
        cost = estimate_tokens(self.system_prompt, user) + MAX_OUTPUT_TOKENS
        if not self.budget.fits(cost):
            self.budget.capped = True
            raise ExtractorUnavailable("the LLM call cap of this run is reached",
                                       hint="raise llm_max_calls / llm_max_tokens; the rules decided")
        ids = [str(c["id"]) for c in candidates]
        schema = json.loads(json.dumps(VERDICTS_SCHEMA))
        schema["properties"]["verdicts"]["items"]["properties"]["id"]["enum"] = ids
        content, _ = self._chat.chat(self.system_prompt, user, schema, cost)
        try:
            data = json.loads(content) if content is not None else None
        except (json.JSONDecodeError, TypeError, ValueError):
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("verdicts"), list):
            raise ExtractorUnavailable("the LLM arbiter gave no readable verdicts",
                                       hint="the rules decided; try another llm_model")
        out: dict[str, str] = {}
        for v in data["verdicts"]:
            if isinstance(v, dict) and v.get("id") in ids and v.get("verdict") in _VERDICTS:
                out.setdefault(v["id"], v["verdict"])
        if not out:
            raise ExtractorUnavailable("the LLM arbiter gave no verdict for any candidate",
                                       hint="the rules decided; try another llm_model")
        # a candidate it left out is unrelated (never retired on a guess)
        return [(cid, out.get(cid, "unrelated")) for cid in ids]
