"""Running an extractor over stored turns and storing what it finds (used by ``Memory``).

``extract_turns(store, turns, ...)`` runs the configured extractor (config
``extractor``) over the turns, then stores the facts with ``Facts(store).add_many``
(reconciliation, graph), each fact stamped with the time of the turn it came
from, its source bead ids, and ``meta = {"extractor", "prompt_version"?}``.
Facts go in only after the extractor has read every turn, so a failure of the
extractor (e.g. the Ollama server going away mid-way) stores no fact at all.

The report::

    {"extractor": "rules" | "llm:<model>", "turns": n, "found": facts extracted,
     "facts": {"added", "confirmed", "updated", "contradicted"},
     "llm": {"calls", "tokens", "capped"}, "skipped_turns": n, "bad_chunks": n, "bad_facts": n}

With the llm extractor, reconciliation is arbitrated by ``LLMArbiter`` sharing
the extractor's :class:`~brandmind.extract.llm.Budget`, so ``llm`` counts both
and the caps hold for the whole run.  ``dry_run`` stores nothing and calls no
LLM: it reports the estimate (``llm.calls``, ``llm.tokens``, ``capped``,
``skipped_turns``) and, for the rules, the facts they would extract
(``would_extract``; reconciliation is not simulated).

Which turns of an ingest are read: the messages stored by it, plus the
messages it found already stored that no fact cites yet (so ``bm ingest FILE
--extract`` after a plain ingest, or after a failed extraction, extracts them) and
that the configured extractor has not read yet.  Extraction state: once the facts of
a run are stored, every turn the extractor read (for the LLM, each turn of a chunk
that got a readable answer; not the turns a cap left unread nor those of an
unreadable answer) is recorded with the extractor's key (``state_key``:
``rules``, ``llm:<model>/<prompt version>``, ``llm:openai:<model>/<prompt
version>``; ``storage/extract.py``).  A re-run skips those turns even when they gave
no fact; another model or prompt version has another key, so switching reads the
fact-less turns again (the turns with facts are skipped whatever the extractor).
Who a fact is about (``extract.attributable``, for both extractors): a person's turn
(role ``user``, ``human``, or none given) yields what they say about themselves or
others.  An agent's turn (role ``assistant``, ``system``, ``tool``, any other) without a
speaker name is not read at all: its "I" is the agent, and "I work for Acme Travel" from
it must never become a fact about the user.  An agent turn with a speaker name (a named
participant, e.g. the second speaker of a two-person chat) yields only facts about that
speaker; its claims about the user or anyone else are dropped.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from .. import validate
from ..clock import now_millis, parse_time
from ..errors import BMError, InvalidInput
from ..facts import Facts
from ..ingest import forgotten, known_bead, message_key, read_messages, same_text, superseded
from ..storage.extract import beads_extracted_by, beads_with_facts, mark_extracted
from . import Fact, Turn, person_turns
from .choose import get_extractor
from .llm import LLMArbiter

if TYPE_CHECKING:  # pragma: no cover
    from ..store import Store

ACTIONS = ("added", "confirmed", "updated", "contradicted")


def as_turns(value: Any, *, user: str, ts: int | None = None) -> list[Turn]:
    """Turns from a text, a Turn, a ``{"text"|"content", "speaker"?, "ts"?, "bead"?}`` dict,
    or a list of those.  ``ts`` is the default time of turns that carry none."""
    items = [value] if isinstance(value, (str, bytes, Turn, dict)) else list(value)
    out = []
    for n, item in enumerate(items, 1):
        if isinstance(item, Turn):
            out.append(item if item.user == user else Turn(item.text, item.speaker, item.ts, item.bead, user,
                                                           item.role))
            continue
        if isinstance(item, (str, bytes)):
            out.append(Turn(validate.text(item), None, ts, None, user))
            continue
        if not isinstance(item, dict):
            raise InvalidInput(f"turn {n} must be a text or an object, got {type(item).__name__}",
                               hint='e.g. {"text": "I moved to Lisbon", "speaker": "Ann", "ts": "2024-05-01"}')
        text = item.get("text", item.get("content"))
        speaker = item.get("speaker")
        role = item.get("role")
        out.append(Turn(validate.text(text, what=f"turn {n} text"),
                        validate.name(speaker, what="speaker") if speaker is not None else None,
                        parse_time(item.get("ts"), field="ts") if item.get("ts") is not None else ts,
                        item.get("bead"), user,
                        validate.name(role, what="role") if role is not None else None))
    return out


def state_key(extractor: Any) -> str:
    """What extraction state records a turn as read by: the extractor's name and prompt version."""
    version = getattr(extractor, "prompt_version", None)
    return f"{extractor.name}/{version}" if version else str(extractor.name)


def _empty_report(extractor: Any, turns: list[Turn]) -> dict:
    return {"extractor": extractor.name, "turns": len(turns), "found": 0,
            "facts": {a: 0 for a in ACTIONS}, "llm": {"calls": 0, "tokens": 0, "capped": False},
            "skipped_turns": 0, "bad_chunks": 0, "bad_facts": 0}


def extract_turns(store: "Store", turns: list[Turn], *, user: str, agent: str | None = None,
                  dry_run: bool = False, meta: dict | None = None) -> dict:
    """Extract facts from ``turns`` and store them (see the module docstring)."""
    extractor = get_extractor(store.config)
    if dry_run:
        turns = person_turns(turns)
        report = _empty_report(extractor, turns)
        report["dry_run"] = True
        estimate = extractor.estimate(turns)
        report["llm"] = {"calls": estimate["calls"], "tokens": estimate["tokens"],
                         "capped": bool(estimate.get("capped", False))}
        report["skipped_turns"] = int(estimate.get("skipped_turns", 0))
        if extractor.name == "rules":
            found = extractor.extract(turns)
            report["found"] = len(found)
            report["would_extract"] = [_public(f) for f in found]
        return report
    items, report = extract_facts(store, turns, meta=meta, extractor=extractor)
    return store_facts(store, items, report, user=user, agent=agent, extractor=extractor)


def extract_facts(store: "Store", turns: list[Turn], *, meta: dict | None = None,
                  extractor: Any = None) -> tuple[list[dict], dict]:
    """The first half of :func:`extract_turns`: run the extractor over ``turns``, storing
    nothing; returns the facts (dicts ``Facts.add_many`` takes, in turn order) and the report
    so far.  The extractor reads no store: a caller may run it without holding a lock."""
    extractor = extractor or get_extractor(store.config)
    turns = person_turns(turns)  # an agent turn without a speaker name says nothing of a person
    report = _empty_report(extractor, turns)
    if not turns:
        return [], report
    facts = extractor.extract(turns)  # raises before anything is stored
    cost = getattr(extractor, "last_report", {}) or {}
    for key in ("skipped_turns", "bad_chunks", "bad_facts"):
        report[key] = int(cost.get(key, 0))
    read = cost.get("read")  # the LLM's: the turns of the chunks it got an answer for; else all
    report["_read"] = [b for b in (read if isinstance(read, list) else [t.bead for t in turns]) if b]
    report["found"] = len(facts)
    return _fact_dicts(facts, turns, extractor, meta), report


def store_facts(store: "Store", items: list[dict], report: dict, *, user: str, agent: str | None,
                extractor: Any = None, on_commit: Any = None) -> dict:
    """The second half of :func:`extract_turns`: store the facts with reconciliation
    (``Facts.add_many``; ``on_commit(txn, n)`` runs in the op-log transaction that stores
    the first ``n`` of them) and count what each became in ``report``."""
    extractor = extractor or get_extractor(store.config)
    is_llm = extractor.name != "rules"
    read = report.pop("_read", None) or []
    if items:
        arbiter = None
        if is_llm:
            arbiter = LLMArbiter.from_config(store.config, budget=extractor.budget)  # type: ignore[attr-defined]
        results = Facts(store).add_many(items, user=user, agent=agent, arbiter=arbiter, source="extract",
                                        on_commit=on_commit)
        for result in results:
            if result["action"] in report["facts"]:
                report["facts"][result["action"]] += 1
    mark_extracted(store.sql, user, state_key(extractor), read, now_millis())  # after the facts: a failure resends
    if is_llm:
        budget = extractor.budget  # type: ignore[attr-defined]
        report["llm"] = {"calls": budget.calls, "tokens": budget.tokens,
                         "capped": bool(budget.capped or report["skipped_turns"])}
    return report


def _public(fact: Fact) -> dict:
    out = fact.to_dict()
    out.pop("meta", None)
    return out


def _fact_dicts(facts: list[Fact], turns: list[Turn], extractor: Any, meta: dict | None) -> list[dict]:
    """Facts in turn order, each with the time of its turn and its provenance meta."""
    where = {t.bead: (i, t.ts) for i, t in enumerate(turns) if t.bead}
    default_ts = next((t.ts for t in turns if t.ts is not None), None)
    order = []
    for n, fact in enumerate(facts):
        pos, ts = where.get(fact.sources[0], (len(turns), default_ts)) if fact.sources else (len(turns), default_ts)
        order.append((pos, n, fact, ts))
    order.sort(key=lambda x: (x[0], x[1]))
    out = []
    for _, _, fact, ts in order:
        item = fact.to_dict()
        item["meta"] = {**(meta or {}), **(fact.meta or {}), "extractor": extractor.name}
        version = getattr(extractor, "prompt_version", None)
        if version:
            item["meta"]["prompt_version"] = version
        if ts is not None:
            item["ts"] = ts
        out.append(item)
    return out


# -- ingest ----------------------------------------------------------------------------------
def _turn_of(bead: dict, content: str, user: str) -> Turn | None:
    turn = Turn(content, bead.get("speaker") or None, bead.get("ts"), bead.get("id"), user,
                bead.get("role") or None)
    return turn if person_turns([turn]) else None


def stored_turns(store: "Store", bead_ids: Iterable[str], user: str, *, fresh: set[str]) -> list[Turn]:
    """The stored beads as turns, in order: every ``fresh`` one, and the others only when no
    fact cites them yet (``storage.extract.beads_with_facts``) and the configured extractor
    has not read them (extraction state, see the module docstring)."""
    bead_ids = list(bead_ids)
    done: set[str] = set()
    if set(bead_ids) - fresh:
        key = state_key(get_extractor(store.config))
        done = beads_with_facts(store.sql, user) | beads_extracted_by(store.sql, user, key)
    out = []
    for bead_id in dict.fromkeys(bead_ids):
        if bead_id not in fresh and bead_id in done:
            continue
        bead = store.log.get_bead(bead_id)
        if bead is None or bead.get("user") != user:
            continue
        content = bead.get("content")
        if content is None and bead.get("blob"):
            content = store.blobs.get(bead["blob"]).decode("utf-8", "replace")
        turn = _turn_of(bead, content or "", user)
        if turn is not None and turn.text.strip():
            out.append(turn)
    return out


def extract_after_ingest(store: "Store", report: dict, *, user: str, agent: str | None) -> None:
    """Extract from the turns an ingest stored or found; merges ``facts`` and ``llm`` (and the
    rest of the extraction report under ``extract``) into the ingest ``report``."""
    beads = report.pop("_beads", [])
    fresh = set(report.pop("_fresh", []))
    turns = stored_turns(store, beads, user, fresh=fresh)
    try:
        result = extract_turns(store, turns, user=user, agent=agent)
    except BMError as exc:
        exc.message += (f" — {report['ingested']} message(s) were stored, but no facts were extracted")
        exc.hint = ((exc.hint + "; then " if exc.hint else "") +
                    "re-run the same command with --extract: stored messages are not stored twice, "
                    "and the facts of those without any are extracted")
        raise
    report["facts"] = result.pop("facts")
    report["llm"] = result.pop("llm")
    report["extract"] = result


def dry_run_ingest(store: "Store", lines: Iterable[Any], *, user: str, skip_bad: bool, extract: bool) -> dict:
    """What ``ingest(lines, extract=...)`` would do, storing nothing and calling no LLM."""
    report: dict[str, Any] = {"dry_run": True, "lines": 0, "would_ingest": 0, "duplicates": 0, "bad": []}
    turns: list[Turn] = []
    known: list[str] = []
    edits: list[tuple[str, dict]] = []
    seen: set[str] = set()
    def refuse(exc: InvalidInput) -> None:
        exc.message += " — dry run: nothing was stored"
        exc.hint = "fix the line, or pass --skip-bad"

    msgs = list(read_messages(lines, report, skip_bad=skip_bad, on_bad=refuse))
    last = {message_key(user, m): i for i, m in enumerate(msgs) if m.get("id") is not None}
    with store.log.bead_keys() as get:
        for i, msg in enumerate(msgs):
            key = message_key(user, msg)
            stored = known_bead(get, user, msg)
            if key is not None and last.get(key, i) != i:  # a later line has its id: it is the message
                report["duplicates"] += 1
                continue
            if key is not None and not stored and key not in seen and forgotten(get, user, msg):
                report["forgotten"] = report.get("forgotten", 0) + 1
                seen.add(key)
                continue
            if key is not None and stored and key not in seen and msg.get("id") is not None \
                    and not superseded(get, key, msg["content"]):
                edits.append((stored, msg))  # an edit if its text changed: compared below
            elif key is not None and (key in seen or stored):
                report["duplicates"] += 1
                if stored:
                    known.append(stored)
                continue
            seen.add(key)
            if stored:
                continue
            report["would_ingest"] += 1
            if extract:
                ts = msg["ts"] if msg["ts"] is not None else now_millis()
                turn = _turn_of({"speaker": msg["speaker"], "role": msg["role"], "ts": ts}, msg["content"], user)
                if turn is not None:
                    turns.append(turn)
    for (stored, msg), old in zip(edits, store.log.get_beads(s for s, _ in edits)):  # (not in the keys' read)
        if old is None or same_text(old, msg["content"]):
            report["duplicates"] += 1
            known.append(stored)
        else:
            report["edited"] = report.get("edited", 0) + 1
            report["would_ingest"] += 1
            if extract:  # the edit's turn would be extracted anew (at the old turn's time)
                turn = _turn_of({"speaker": msg["speaker"], "role": msg["role"],
                                 "ts": msg["ts"] if msg["ts"] is not None else old["ts"]}, msg["content"], user)
                if turn is not None:
                    turns.append(turn)
    if extract:
        turns = stored_turns(store, known, user, fresh=set()) + turns
        result = extract_turns(store, turns, user=user, dry_run=True)
        report["llm"] = result.pop("llm")
        report["extract"] = result
    return report
