"""Bi-temporal facts: reconciliation on write, and what "currently true" means.

A *fact* is a memory with a structured triple (``subject``, ``predicate``,
``object``) next to its text.  It carries world time (``valid_from``,
``valid_to``: when it was true) and system time (``recorded_at``: when bm
learned it; ``retired_at``: when bm stopped believing it).

Reconciliation (:func:`reconcile`) compares a new fact with the *current*
facts (``retired_at IS NULL``) of the same user and agent scope (an agent's
fact is compared with its own and the user's global facts) about the same
subject (case-, space- and punctuation-insensitive): for a functional predicate
every current value of it; for another predicate those with the same object and
the same predicate or its antonym (likes/dislikes); plus, for non-functional
predicates, the facts about the subject whose vectors are close (cosine >=
:data:`SIMILAR`; with the rules, which only ever call identical text a
duplicate, the facts with identical text instead, which is much cheaper).  An
:class:`Arbiter` says for each candidate ``duplicate``, ``update``,
``contradiction`` or ``unrelated``: the :class:`RuleArbiter` by default, the
Ollama one (``brandmind.extract.llm``, ``LLMArbiter``) when config
``extractor = "llm"``; if it fails (BMError), the rules decide.  Then, with
world time:

* duplicate: the old fact is confirmed (``memory.confirm``), no new row.  (If
  the new one closes an open interval, i.e. carries an earlier ``valid_to``,
  it is an update instead.)
* update / contradiction: the new fact is added and the old one retired
  (``memory.retire``: ``valid_to`` = the new fact's ``valid_from``, else its
  ``ts``; ``retired_at`` = now; ``superseded_by`` = the new id) with a
  ``contradicts`` link new -> old.  The new fact's ``valid_from`` is set to that
  same boundary when it had none, so the two intervals meet.  If the new fact
  starts *before* the old one (an older conversation ingested later), it is the
  older version instead: it is added already closed (``valid_to`` = the old
  one's start) and retired in favour of the existing fact, which stays current.
  Facts whose intervals do not overlap are left alone.
* unrelated: nothing is touched.  Nothing is ever deleted.

Rules (:class:`RuleArbiter`): same predicate and object -> duplicate (or a
contradiction when exactly one of the two is negated, "no longer ...");
functional predicate (:data:`FUNCTIONAL`), another object -> update; antonym
predicates with the same object -> contradiction; identical text -> duplicate;
anything else -> unrelated (rules never guess that two different statements
conflict: unrelated facts must never be retired).  A fact is negated when it
says so (``"negated": true``) or, failing that, when its text does ("no longer",
"not ... anymore", "stopped", "quit"); a negated fact gets no graph edge.

Storing (:func:`store_facts`, behind ``Memory.add_fact`` / ``Memory.add_facts``): each
fact is reconciled, then written as its ops: ``memory.add`` (or ``memory.confirm``), the
subject and object nodes (``kg.node``, an existing node of the user with the same type and
normalised name is reused, else an untyped ``entity`` node of that name), the edge subject -predicate-> object (``kg.edge``), the
mentions, and for each replaced fact ``memory.retire``, ``kg.edge.retire`` and a
``contradicts`` link (brandmind/graph.py describes the graph).
"""
from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any, Callable, Iterable, Protocol, Sequence

from . import validate
from .clock import new_id, now_millis, parse_time
from .errors import BMError, InvalidInput
from .extract import Fact
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
        try:
            from .extract.llm import LLMArbiter  # type: ignore[import-not-found]
        except ImportError:
            return RuleArbiter()
        if hasattr(LLMArbiter, "from_config"):
            return LLMArbiter.from_config(config)
        return LLMArbiter(config)
    return RuleArbiter()


# -- reconciliation ------------------------------------------------------------------------------
@dataclass
class Decision:
    """What to do with a new fact (applied by ``Memory.add_facts``)."""
    action: str                                   # one of ACTIONS
    candidates: list[dict] = field(default_factory=list)
    verdicts: list[tuple[str, str]] = field(default_factory=list)
    confirm: str | None = None                    # duplicate: this fact is confirmed, no new row
    retire: list[tuple[str, str, int]] = field(default_factory=list)  # (old id, verdict, its valid_to)
    valid_from: int | None = None                 # the new fact's interval
    valid_to: int | None = None
    superseded_by: str | None = None              # the new fact is the older version of this one
    arbiter: str = "rules"


def _ensure_norm_function(sql: Any) -> None:
    """``bm_norm(text)`` in SQL (the connection's own function; nothing stored uses it)."""
    if not getattr(sql, "_bm_norm", False):
        sql.conn.create_scalar_function("bm_norm", norm, 1, deterministic=True)
        sql.conn.create_scalar_function("bm_predicate", normalize_predicate, 1, deterministic=True)
        sql._bm_norm = True


def spellings(sql: Any, user: str, subject: str) -> list[str]:
    """The stored spellings of ``subject`` among the user's facts ("Ann", "ann", "ANN ")."""
    key = norm(subject)
    return [s for (s,) in sql.conn.execute(
        "SELECT DISTINCT subject FROM memories WHERE user_id = ? AND subject IS NOT NULL", (user,))
        if norm(s) == key]


def subject_facts(sql: Any, user: str, subject: str, agent: str | None = None, *,
                  current: bool = True, predicates: Sequence[str] | None = None,
                  object: str | None = None, text: str | None = None) -> list[dict]:
    """The facts of ``user`` about ``subject`` (normalised match; current ones only unless
    ``current=False``), in the agent's scope (its own and the user's global facts; global
    only when ``agent`` is None), oldest first; only those with one of ``predicates``, that
    (normalised) ``object`` and that (normalised) ``text`` when given."""
    names = spellings(sql, user, subject)
    if not names:
        return []
    where = [f"subject IN ({','.join('?' * len(names))})"]
    args: list[Any] = [user, *names]
    if current:
        where.append("retired_at IS NULL")
    if agent is None:
        where.append("agent_id IS NULL")
    else:
        where.append("(agent_id IS NULL OR agent_id = ?)")
        args.append(agent)
    if predicates is not None:  # compared normalised: rows projected before predicates were
        _ensure_norm_function(sql)
        where.append(f"bm_predicate(predicate) IN ({','.join('?' * len(predicates))})")
        args.extend(normalize_predicate(p) for p in predicates)
    for column, value in (("object", object), ("text", text)):
        if value is not None:
            _ensure_norm_function(sql)
            where.append(f"bm_norm({column}) = ?")
            args.append(norm(value))
    rows = sql.rows(
        "SELECT rowid, id, text, subject, predicate, object, valid_from, valid_to, created_at AS ts, "
        "recorded_at, retired_at, coalesce(json_extract(meta, '$.negated'), 0) AS negated "
        f"FROM memories WHERE user_id = ? AND {' AND '.join(where)} ORDER BY recorded_at, id", tuple(args))
    return [{**r, "negated": bool(r["negated"]), "predicate": normalize_predicate(r["predicate"])} for r in rows]


def _retired_versions(sql: Any, user: str, fact: FactInput, agent: str | None) -> list[dict]:
    """Retired, once-true (valid_to set) facts of the same subject and functional predicate
    with another object: the earlier versions of the fact."""
    if fact.predicate not in FUNCTIONAL:
        return []
    return [r for r in subject_facts(sql, user, fact.subject, agent, current=False)
            if r["retired_at"] is not None and r["valid_to"] is not None and r["predicate"] == fact.predicate
            and norm(r["object"]) != norm(fact.object)]


def _similar(sql: Any, rows: list[dict], vec: Sequence[float]) -> list[tuple[dict, float]]:
    """The rows whose stored vectors have a cosine >= SIMILAR with ``vec``."""
    import numpy as np

    q = np.asarray(vec, dtype=np.float32)
    q_norm = float(np.linalg.norm(q))
    if not rows or not q_norm:
        return []
    by_rowid = {r["rowid"]: r for r in rows}
    ids, mats = [], []
    keys = list(by_rowid)
    for i in range(0, len(keys), 500):
        chunk = keys[i:i + 500]
        for rowid, blob in sql.conn.execute(
                f"SELECT rowid, embedding FROM memories_vec WHERE rowid IN ({','.join('?' * len(chunk))})", chunk):
            ids.append(rowid)
            mats.append(np.frombuffer(blob, dtype=np.float32))
    if not ids:
        return []
    m = np.vstack(mats)
    sims = (m @ q) / (np.linalg.norm(m, axis=1) * q_norm + 1e-12)
    return [(by_rowid[rowid], float(sim)) for rowid, sim in zip(ids, sims) if sim >= SIMILAR]


def reconcile(sql: Any, fact: Any, user: str, agent: str | None,
              embed: Callable[[str], Sequence[float]] | None, *, arbiter: Arbiter | None = None,
              now: int | None = None) -> Decision:
    """Decide what a new fact does to the user's current facts (reads only; see the module
    docstring).  ``embed`` maps the fact's text to its vector (None: no vector candidates)."""
    fact = coerce_fact(fact)
    now = now if now is not None else now_millis()
    ts = fact.ts if fact.ts is not None else now
    arbiter = arbiter or RuleArbiter()
    related = [p for p in (fact.predicate, ANTONYMS.get(fact.predicate)) if p]
    candidates = []
    others = []
    obj = norm(fact.object)
    # the rules only ever match the same text among the other facts: no need to rank them all
    rules_only = type(arbiter) is RuleArbiter
    rows = subject_facts(sql, user, fact.subject, agent, predicates=related if rules_only else None,
                         object=fact.object if rules_only and fact.predicate not in FUNCTIONAL else None)
    if rules_only:
        seen = {r["id"] for r in rows}
        rows += [r for r in subject_facts(sql, user, fact.subject, agent, text=fact.text) if r["id"] not in seen]
    for row in rows:
        row["similarity"] = None
        # a single-valued predicate: every current value; a multi-valued one: the same value
        # (the others are candidates only when their vectors are close)
        if row["predicate"] in related and (fact.predicate in FUNCTIONAL or norm(row["object"]) == obj):
            candidates.append(row)
        elif rules_only and norm(row["text"]) == norm(fact.text):
            candidates.append(row)
        else:
            others.append(row)
    if others and embed is not None and fact.predicate not in FUNCTIONAL and not rules_only:
        for row, sim in _similar(sql, others, embed(fact.text)):
            row["similarity"] = round(sim, 4)
            candidates.append(row)
    for row in candidates:
        row.pop("rowid", None)
        row.pop("retired_at", None)
    new = fact.as_dict()
    new["ts"] = ts
    decision = Decision(action="added", candidates=candidates, valid_from=fact.valid_from,
                        valid_to=fact.valid_to, arbiter=getattr(arbiter, "name", type(arbiter).__name__))
    if not candidates:
        return decision
    try:
        verdicts = list(arbiter.decide(new, [dict(c) for c in candidates]))
    except BMError as exc:  # an unreachable LLM must not lose the fact: the rules decide
        verdicts = RuleArbiter().decide(new, [dict(c) for c in candidates])
        decision.arbiter = f"rules ({decision.arbiter} failed: {exc.message})"
    by_id = {c["id"]: c for c in candidates}
    clean = []
    for cid, verdict in verdicts:
        if cid in by_id and verdict in VERDICTS:
            clean.append((cid, verdict))
    decision.verdicts = clean
    new_start = fact.valid_from if fact.valid_from is not None else ts
    duplicates, replaced, newer = [], [], []
    for cid, verdict in clean:
        c = by_id[cid]
        old_start = c["valid_from"] if c["valid_from"] is not None else c["ts"]
        if verdict == "unrelated":
            continue
        if fact.valid_to is not None and fact.valid_to <= old_start:
            continue  # the new fact ended before the old one began: both stand
        if c["valid_to"] is not None and c["valid_to"] <= new_start:
            continue  # the old fact had ended before the new one began
        if verdict == "duplicate":
            if fact.valid_to is not None and (c["valid_to"] is None or fact.valid_to < c["valid_to"]):
                replaced.append((cid, "update", fact.valid_to))  # the new statement closes it
            else:
                duplicates.append(cid)
        elif new_start < old_start:
            newer.append((old_start, cid))  # the new fact is the older version
        else:
            replaced.append((cid, verdict, new_start))
    if duplicates:
        decision.action, decision.confirm = "confirmed", duplicates[0]
        return decision
    if replaced:
        decision.retire = replaced
        decision.action = "updated" if any(v == "update" for _, v, _ in replaced) else "contradicted"
        if decision.valid_from is None and any(vt == new_start for _, _, vt in replaced):
            decision.valid_from = new_start  # the old interval ends where the new one begins
    if newer:
        start, cid = min(newer)
        # it ends where the next known version begins, which may be a retired one
        # (Berlin 2010, learned after Lisbon 2024 was replaced by Porto 2025, ends in 2024)
        for row in _retired_versions(sql, user, fact, agent):
            row_start = row["valid_from"] if row["valid_from"] is not None else row["ts"]
            if new_start < row_start < start:
                start, cid = row_start, row["id"]
        decision.superseded_by = cid
        if decision.valid_to is None or decision.valid_to > start:
            decision.valid_to = start
    return decision


# -- "currently true" / "true as of" ------------------------------------------------------------
def current_sql(alias: str = "m", as_of: str | int | None = None, *, now: int | None = None) -> tuple[str, list]:
    """A WHERE fragment (and its args) keeping the memories true now, or true as of a date.

    Now: not retired by then and not ended (``valid_to`` in the future or unknown).  As of D (world
    time): ``valid_from <= D < valid_to`` (unknown ends are open), minus the memories retired
    as corrections (``retired_at`` set, ``valid_to`` NULL: they were never true).  System time
    is not filtered for --as-of: what bm learned later about D counts."""
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", alias):
        raise ValueError(f"bad table alias {alias!r}")
    a = alias
    if as_of is None:
        t = now if now is not None else now_millis()
        return (f"(({a}.retired_at IS NULL OR {a}.retired_at > ?) AND ({a}.valid_to IS NULL OR {a}.valid_to > ?))",
                [t, t])
    d = parse_time(as_of, field="as_of") if not isinstance(as_of, int) else as_of
    return (f"(({a}.valid_from IS NULL OR {a}.valid_from <= ?) AND ({a}.valid_to IS NULL OR {a}.valid_to > ?) "
            f"AND NOT ({a}.retired_at IS NOT NULL AND {a}.valid_to IS NULL))", [d, d])



# -- storing facts (Memory.add_fact / Memory.add_facts) -------------------------------------------
def store_facts(mem: Any, facts: Iterable[Any], *, user: str | None = None, agent: str | None = None,
                ts: str | int | None = None, sources: Iterable[str] = (), arbiter: Any = None,
                source: str = "fact", chunk: int = 256) -> list[dict]:
    """``Memory.add_facts``: validate every fact, reconcile each with the current facts and
    the earlier ones of the batch, and append its ops; with the rules, ``chunk`` facts make
    one op-log transaction (another arbiter takes them one at a time)."""
    import numpy as np

    from .projection import apply_sql_side

    items = []
    facts = list(facts)
    default_ts = parse_time(ts, field="ts")
    extra = [validate.name(s, what="source bead id") for s in sources]
    for n, raw in enumerate(facts, 1):
        try:
            item = coerce_fact(raw, max_chars=mem.config.max_memory_chars)
        except InvalidInput as exc:
            if len(facts) > 1:
                exc.message = f"fact {n}: {exc.message}"
            raise
        items.append(replace(
            item, user=mem.store.user(item.user if item.user is not None else user),
            agent=item.agent if item.agent is not None else (
                validate.name(agent, what="agent") if agent is not None else None),
            ts=item.ts if item.ts is not None else default_ts,
            sources=list(dict.fromkeys([*item.sources, *extra]))))
    if not items:
        return []
    arbiter = arbiter if arbiter is not None else default_arbiter(mem.config)
    now = now_millis()
    vectors: dict[str, bytes] = {}
    missing = []
    for item in items:
        if item.text not in vectors:
            raw_vec = mem.log.cached_vector(mem.sql.model, item.text)
            if raw_vec is not None and len(raw_vec) == 4 * mem.sql.dim:
                vectors[item.text] = raw_vec
            else:
                vectors[item.text] = b""
                missing.append(item.text)
    if missing:
        for text, vec in zip(missing, mem.store.embed_docs(missing)):
            vectors[text] = vec.tobytes()
    _ensure_norm_function(mem.sql)
    mem.store.catch_up()
    ops: list[tuple[str, dict]] = []
    node_ids: dict[str, dict[tuple[str, str], str]] = {}  # user -> (type, norm name) -> node id
    results: list[dict] = []
    c = mem.sql.conn

    def node_for(u: str, name: str, type_: str) -> str:
        if u not in node_ids:  # the user's nodes, read once per batch
            node_ids[u] = {}
            for node_id, node_type, node_name in mem.sql.conn.execute(
                    "SELECT id, type, name FROM kg_nodes WHERE user_id=? ORDER BY created_at DESC, id DESC", (u,)):
                node_ids[u][(node_type, norm(node_name))] = node_id  # the oldest wins
        key = (type_, norm(name))
        if key not in node_ids[u] and ("entity", key[1]) in node_ids[u]:
            key = ("entity", key[1])  # an untyped node of that name (`bm kg link Ann ...`) is the one
        if key not in node_ids[u]:
            node_ids[u][key] = new_id("n")
            ops.append(("kg.node", {"id": node_ids[u][key], "user": u, "type": type_, "name": name,
                                    "labels": [], "meta": {}, "ts": now}))
        return node_ids[u][key]

    def link(u: str, src: str, dst: str, verdict: str) -> None:
        ops.append(("kg.edge", {"id": new_id("e"), "src": src, "dst": dst, "predicate": "contradicts",
                                "weight": 1.0, "evidence": [], "meta": {"verdict": verdict},
                                "ts": now, "user": u}))

    def plan(item: Any) -> dict:
        """Reconcile one fact and append its ops; returns its result."""
        u = item.user
        vec = np.frombuffer(vectors[item.text], dtype=np.float32)
        d = reconcile(mem.sql, item, u, item.agent, lambda _text, v=vec: v, arbiter=arbiter, now=now)
        item_ts = item.ts if item.ts is not None else now
        provenance = [{"bead": b} for b in item.sources]
        result = {"action": d.action, "retired": [], "arbiter": d.arbiter,
                  "verdicts": [{"id": cid, "verdict": v} for cid, v in d.verdicts]}
        if d.action == "confirmed":
            ops.append(("memory.confirm", {"id": d.confirm, "user": u, "ts": item_ts,
                                           "provenance": provenance}))
            result["id"] = d.confirm
        else:
            mid = new_id("m")
            meta = {**item.meta, "confidence": item.confidence}
            if item.negated:
                meta["negated"] = True
            ops.append(("memory.add", {
                "id": mid, "text": item.text, "type": item.type, "user": u, "agent": item.agent,
                "importance": item.importance, "meta": meta, "source": source,
                "provenance": provenance, "valid_from": d.valid_from, "valid_to": d.valid_to,
                "ts": item_ts, "subject": item.subject, "predicate": item.predicate,
                "object": item.object}))
            s_node = node_for(u, item.subject, item.subject_type)
            o_node = node_for(u, item.object, item.object_type)
            edge_id = None
            if not item.negated:  # "no longer likes X" is no edge likes X
                edge_id = new_id("e")
                ops.append(("kg.edge", {
                    "id": edge_id, "src": s_node, "dst": o_node, "predicate": item.predicate,
                    "weight": item.confidence, "evidence": [mid], "meta": {}, "ts": now,
                    "valid_from": d.valid_from, "valid_to": d.valid_to, "user": u}))
            for node in dict.fromkeys((s_node, o_node)):
                ops.append(("kg.mention", {"node": node, "memory": mid}))
            for old, verdict, valid_to in d.retire:
                ops.append(("memory.retire", {"id": old, "user": u, "retired_at": now,
                                              "valid_to": valid_to, "by": mid, "reason": verdict}))
                for (edge,) in c.execute("SELECT id FROM kg_edges WHERE evidence=? AND retired_at IS NULL",
                                         (json.dumps([old]),)).fetchall():
                    ops.append(("kg.edge.retire", {"id": edge, "retired_at": now, "valid_to": valid_to}))
                link(u, mid, old, verdict)
                result["retired"].append(old)
            if d.superseded_by:  # the new fact is an older version of a current one
                ops.append(("memory.retire", {"id": mid, "user": u, "retired_at": now,
                                              "valid_to": d.valid_to, "by": d.superseded_by,
                                              "reason": "older version"}))
                if edge_id:
                    ops.append(("kg.edge.retire", {"id": edge_id, "retired_at": now,
                                                   "valid_to": d.valid_to}))
                link(u, d.superseded_by, mid, "older version")
                result["retired"].append(mid)
            result["id"] = mid
        return result

    # With the rules, facts go in chunks: each fact's ops are applied to the index at once,
    # inside one transaction that is rolled back after the chunk, so a fact is reconciled
    # with the earlier ones of its chunk; the chunk is one op-log transaction, and the
    # index is then brought up to date from the log as always.  Another arbiter (an LLM:
    # slow) takes the facts one at a time, holding no lock while it thinks.
    size = chunk if type(arbiter) is RuleArbiter else 1
    for chunk_start in range(0, len(items), size):
        batch = items[chunk_start:chunk_start + size]
        ops.clear()
        speculative = len(batch) > 1
        if speculative:
            c.execute("BEGIN IMMEDIATE")
        try:
            for item in batch:
                first = len(ops)
                results.append(plan(item))
                if speculative:
                    for n, (kind, payload) in enumerate(ops[first:], first):
                        apply_sql_side(mem.sql, {"id": f"pending:{n}", "hlc": [now, n, "pending"],
                                                 "kind": kind, "payload": payload}, lambda text: vectors[text])
        finally:
            if speculative and c.in_transaction:
                c.execute("ROLLBACK")
        with mem.log.write() as t:
            for kind, payload in ops:
                t.append(kind, payload)
                if kind == "memory.add":
                    t.cache_vector(mem.sql.model, payload["text"], vectors[payload["text"]])
        mem.store.catch_up()
    for result in results:
        result["memory"] = mem.get(result["id"])
    return results
