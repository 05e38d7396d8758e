"""Structured facts without any LLM: `bm remember --fact JSON` and `bm facts add FILE`.

A fact is one JSON object: {"subject", "predicate", "object"} plus optionally "text",
"type", "valid_from", "valid_to" (ISO 8601), "confidence", "subject_type", "object_type",
"sources" (bead ids), "negated", "importance", "meta", and per fact "ts", "user", "agent".
Each is reconciled with the user's current facts (brandmind/facts.py): a duplicate
confirms the old fact, an update or contradiction retires it, unrelated facts are left alone.
"""
from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer

from .common import AgentOpt, JsonOpt, UserOpt, open_input, store_for_writing
from .output import info, wants_json

facts_app = typer.Typer(help="Structured facts (subject, predicate, object) with reconciliation.",
                        no_args_is_help=True)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not allowed")


def parse_fact_json(raw: str | bytes, where: str = "the fact") -> dict:
    """One JSON object, or InvalidInput saying what is wrong with it."""
    from brandmind import validate
    from brandmind.errors import InvalidInput

    text = validate.utf8(raw, what=where)
    try:
        obj = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise InvalidInput(f"{where} is not valid JSON ({exc})",
                           hint='e.g. {"subject": "Ann", "predicate": "lives_in", "object": "Lisbon"}') from None
    except RecursionError:  # e.g. 200,000 nested brackets
        raise validate.too_deep(where, 'e.g. {"subject": "Ann", "predicate": "lives_in", "object": "Lisbon"}') from None
    if not isinstance(obj, dict):
        raise InvalidInput(f"{where} must be a JSON object, got {type(obj).__name__}",
                           hint="one fact per object; use `bm facts add FILE.jsonl` for many")
    return obj


def remember_fact(raw: str | bytes, *, type: str, user: Optional[str], agent: Optional[str],
                  importance: float, meta: dict, ts: Optional[str], as_json: bool) -> None:
    """`bm remember --fact`: TEXT (or stdin with -) is one JSON fact."""
    obj = parse_fact_json(raw)
    if type != "fact":
        obj.setdefault("type", type)
    if importance != 0.5:
        obj.setdefault("importance", importance)
    if meta:
        if obj.get("meta") is not None and not isinstance(obj["meta"], dict):
            from brandmind.errors import InvalidInput

            raise InvalidInput("meta must be a JSON object", hint='e.g. "meta": {"source": "slack"}')
        obj["meta"] = {**meta, **(obj.get("meta") or {})}
    with store_for_writing() as mem:
        result = mem.facts.add(obj, user=user, agent=agent, ts=ts)
    if wants_json(as_json):
        print(json.dumps({"id": result["id"], "action": result["action"], "retired": result["retired"]}))
    else:
        line = f"{result['action']} {result['id']}"
        if result["retired"]:
            line += " (retired " + ", ".join(result["retired"]) + ")"
        print(line)


@facts_app.command("add")
def facts_add(
    path: Annotated[str, typer.Argument(help="JSONL file of facts (one JSON object a line), or - for stdin.")],
    user: UserOpt = None,
    agent: AgentOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add structured facts with reconciliation; reports what each did.

    Every line is checked first: a bad line stores nothing.

    \b
    Example:
      echo '{"subject": "Ann", "predicate": "lives_in", "object": "Porto", "valid_from": "2025-01-01"}' | bm facts add - --user ann
    """
    from brandmind.errors import InvalidInput

    facts: list[tuple[int, dict[str, Any]]] = []
    with open_input(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            obj = parse_fact_json(line, where=f"line {lineno}")
            facts.append((lineno, obj))
    if not facts:
        raise InvalidInput("no facts in the input", hint="give one JSON fact a line")
    with store_for_writing() as mem:
        from brandmind.facts import coerce_fact

        for lineno, obj in facts:  # every line is valid before anything is stored
            try:
                coerce_fact(obj, max_chars=mem.config.max_memory_chars)
            except InvalidInput as exc:
                raise InvalidInput(f"line {lineno}: {exc.message}",
                                   hint=(exc.hint or "") + "; nothing was stored") from None
        results = mem.facts.add_many([obj for _, obj in facts], user=user, agent=agent)
    report: dict[str, Any] = {"facts": len(results), "added": 0, "confirmed": 0, "updated": 0, "contradicted": 0}
    for r in results:
        report[r["action"]] += 1
    report["retired"] = sorted({i for r in results for i in r["retired"]})
    if wants_json(as_json):
        print(json.dumps({**report, "results": [{"id": r["id"], "action": r["action"], "retired": r["retired"]}
                                                for r in results]}))
    else:
        info(f"{report['facts']} fact(s): {report['added']} added, {report['confirmed']} confirmed, "
             f"{report['updated']} updated, {report['contradicted']} contradicted; "
             f"{len(report['retired'])} retired")
