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

Storing (:class:`Facts`, ``mem.facts.add`` / ``mem.facts.add_many``): each fact is
reconciled (reads), planned (:func:`plan_fact`, pure: which ops, given the decision and
the known nodes and edges), then its ops are committed: ``memory.add`` (or ``memory.confirm``), the
subject and object nodes (``kg.node``, an existing node of the user with the same type and
normalised name is reused, else an untyped ``entity`` node of that name), the edge subject -predicate-> object (``kg.edge``), the
mentions, and for each replaced fact ``memory.retire``, ``kg.edge.retire`` and a
``contradicts`` link (brandmind/graph.py describes the graph).  ``mem.facts.history``
follows a fact's versions.  The SQL is in brandmind/storage/memories.py and storage/graph.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Sequence

from . import validate
from .clock import new_id, now_millis, parse_time
from .errors import BMError, InvalidInput, NotFound
from .extract.predicates import normalize_predicate
from .factrules import (ACTIONS, ANTONYMS, FACT_KEYS, FUNCTIONAL, LINK_TYPES, MULTI_VALUED, SIMILAR, VERDICTS,
                        Arbiter, FactInput, RuleArbiter, coerce_fact, default_arbiter, norm, predicate_name)
from .ops import Kind
from .projection import apply_sql_side
from .storage import graph as kg
from .storage import memories, recallsql
from .storage.memories import memory_out
from .storage.search import current_sql

# (re-exported: the vocabulary and validation of facts live in factrules.py, the SQL in storage/)
__all__ = ["Facts", "Decision", "Planned", "reconcile", "judge", "plan_fact", "plan_node", "get_memory",
           "ensure_norm", "spellings", "subject_facts", "current_sql", "memory_out",
           "ACTIONS", "ANTONYMS", "FACT_KEYS", "FUNCTIONAL", "LINK_TYPES", "MULTI_VALUED", "SIMILAR", "VERDICTS",
           "Arbiter", "FactInput", "RuleArbiter", "coerce_fact", "default_arbiter", "norm", "normalize_predicate",
           "predicate_name"]

# -- reconciliation ------------------------------------------------------------------------------
@dataclass
class Decision:
    """What to do with a new fact (applied by ``Facts.add_many``)."""
    action: str                                   # one of ACTIONS
    candidates: list[dict] = field(default_factory=list)
    verdicts: list[tuple[str, str]] = field(default_factory=list)
    confirm: str | None = None                    # duplicate: this fact is confirmed, no new row
    retire: list[tuple[str, str, int]] = field(default_factory=list)  # (old id, verdict, its valid_to)
    valid_from: int | None = None                 # the new fact's interval
    valid_to: int | None = None
    superseded_by: str | None = None              # the new fact is the older version of this one
    arbiter: str = "rules"


def ensure_norm(sql: Any) -> None:
    """``bm_norm(text)`` (:func:`norm`) and ``bm_predicate(text)`` (:func:`normalize_predicate`)
    in SQL, for the queries that compare normalised names."""
    memories.add_functions(sql, norm, normalize_predicate)


def get_memory(sql: Any, memory_id: str) -> dict:
    """A memory by id (``storage.memories.memory_out``); NotFound otherwise."""
    found = memories.row(sql, memory_id)
    if found is None:
        raise NotFound(f"no memory {memory_id!r}", hint="list ids with `bm memories list`")
    return memory_out(found)


def spellings(sql: Any, user: str, subject: str) -> list[str]:
    """The stored spellings of ``subject`` among the user's facts ("Ann", "ann", "ANN ")."""
    key = norm(subject)
    return [s for s in memories.subjects(sql, user) if norm(s) == key]


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
    if predicates is not None or object is not None or text is not None:
        ensure_norm(sql)
    rows = memories.facts_about(
        sql, user, names, agent, current=current,
        predicates=[normalize_predicate(p) for p in predicates] if predicates is not None else None,
        object_norm=norm(object) if object is not None else None,
        text_norm=norm(text) if text is not None else None)
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
    found = recallsql.vectors_of(sql, list(by_rowid), chunk=500)
    if not found:
        return []
    ids = [rowid for rowid, _ in found]
    m = np.vstack([np.frombuffer(blob, dtype=np.float32) for _, blob in found])
    sims = (m @ q) / (np.linalg.norm(m, axis=1) * q_norm + 1e-12)
    return [(by_rowid[rowid], float(sim)) for rowid, sim in zip(ids, sims) if sim >= SIMILAR]


def _candidates(sql: Any, fact: FactInput, user: str, agent: str | None,
                embed: Callable[[str], Sequence[float]] | None, rules_only: bool) -> list[dict]:
    """The current facts a new fact is judged against (see the module docstring)."""
    related = [p for p in (fact.predicate, ANTONYMS.get(fact.predicate)) if p]
    candidates, others = [], []
    obj = norm(fact.object)
    # the rules only ever match the same text among the other facts: no need to rank them all
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
    return candidates


def judge(decision: Decision, fact: FactInput, ts: int, verdicts: list[tuple[str, str]]) -> list[tuple[int, str]]:
    """Apply the arbiter's verdicts to ``decision`` (pure; see the module docstring for the
    rules with world time).  Returns ``(start, id)`` of the current facts the new one is an
    older version of (empty: it is not)."""
    by_id = {c["id"]: c for c in decision.candidates}
    new_start = fact.valid_from if fact.valid_from is not None else ts
    duplicates, replaced, newer = [], [], []
    for cid, verdict in verdicts:
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
        return []
    if replaced:
        decision.retire = replaced
        decision.action = "updated" if any(v == "update" for _, v, _ in replaced) else "contradicted"
        if decision.valid_from is None and any(vt == new_start for _, _, vt in replaced):
            decision.valid_from = new_start  # the old interval ends where the new one begins
    return newer


def reconcile(sql: Any, fact: Any, user: str, agent: str | None,
              embed: Callable[[str], Sequence[float]] | None, *, arbiter: Arbiter | None = None,
              now: int | None = None) -> Decision:
    """Decide what a new fact does to the user's current facts (reads only; see the module
    docstring).  ``embed`` maps the fact's text to its vector (None: no vector candidates)."""
    fact = coerce_fact(fact)
    now = now if now is not None else now_millis()
    ts = fact.ts if fact.ts is not None else now
    arbiter = arbiter or RuleArbiter()
    candidates = _candidates(sql, fact, user, agent, embed, type(arbiter) is RuleArbiter)
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
    ids = {c["id"] for c in candidates}
    decision.verdicts = [(cid, verdict) for cid, verdict in verdicts if cid in ids and verdict in VERDICTS]
    newer = judge(decision, fact, ts, decision.verdicts)
    if newer:
        start, cid = min(newer)
        new_start = fact.valid_from if fact.valid_from is not None else ts
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


# -- storing facts: a pure plan per fact, then its ops committed ----------------------------------
@dataclass
class Planned:
    """The ops of one fact and what ``Facts.add`` reports about it."""
    ops: list[tuple[str, dict]]
    result: dict


def plan_node(nodes: dict[tuple[str, str], str], ops: list, u: str, name: str, type_: str, now: int) -> str:
    """The id of the user's node for ``name``: a known one (``nodes``: (type, normalised
    name) -> id; an untyped ``entity`` node of that name will do), else a new one (its
    ``kg.node`` op appended to ``ops``, its key added to ``nodes``)."""
    key = (type_, norm(name))
    if key not in nodes and ("entity", key[1]) in nodes:
        key = ("entity", key[1])  # an untyped node of that name (`bm kg link Ann ...`) is the one
    if key not in nodes and type_ == "entity":
        if ("*", "") not in nodes:  # ("*", name) -> the first node of that name, indexed once
            for (_, n), i in list(nodes.items()):
                nodes.setdefault(("*", n), i)
            nodes[("*", "")] = ""
        if nodes.get(("*", key[1])):  # an untyped name ("Eve knows Tom") is the typed node of that name
            return nodes[("*", key[1])]
    if key not in nodes:
        nodes[key] = new_id("n")
        nodes.setdefault(("*", key[1]), nodes[key])
        ops.append((Kind.KG_NODE, {"id": nodes[key], "user": u, "type": type_, "name": name,
                                "labels": [], "meta": {}, "ts": now}))
    return nodes[key]


def _contradicts(u: str, src: str, dst: str, verdict: str, now: int) -> tuple[str, dict]:
    return (Kind.KG_EDGE, {"id": new_id("e"), "src": src, "dst": dst, "predicate": "contradicts",
                        "weight": 1.0, "evidence": [], "meta": {"verdict": verdict}, "ts": now, "user": u})


def _retire_ops(item: FactInput, d: Decision, mid: str, edge_id: str | None, old_edges: dict[str, list[str]],
                now: int) -> tuple[list[tuple[str, dict]], list[str]]:
    """The ops retiring what the new fact ``mid`` replaces (or ``mid`` itself, when it is an
    older version of a current fact), and the ids retired."""
    u, ops, retired = item.user, [], []
    for old, verdict, valid_to in d.retire:
        ops.append((Kind.MEMORY_RETIRE, {"id": old, "user": u, "retired_at": now,
                                      "valid_to": valid_to, "by": mid, "reason": verdict}))
        ops += [(Kind.KG_EDGE_RETIRE, {"id": edge, "retired_at": now, "valid_to": valid_to})
                for edge in old_edges.get(old, [])]
        ops.append(_contradicts(u, mid, old, verdict, now))
        retired.append(old)
    if d.superseded_by:  # the new fact is an older version of a current one
        ops.append((Kind.MEMORY_RETIRE, {"id": mid, "user": u, "retired_at": now, "valid_to": d.valid_to,
                                      "by": d.superseded_by, "reason": "older version"}))
        if edge_id:
            ops.append((Kind.KG_EDGE_RETIRE, {"id": edge_id, "retired_at": now, "valid_to": d.valid_to}))
        ops.append(_contradicts(u, d.superseded_by, mid, "older version", now))
        retired.append(mid)
    return ops, retired


def plan_fact(item: FactInput, d: Decision, *, nodes: dict[tuple[str, str], str],
              old_edges: dict[str, list[str]], now: int, source: str) -> Planned:
    """The ops storing one reconciled fact (no I/O): ``memory.confirm``, or ``memory.add``
    with its nodes (``nodes``: the user's, see :func:`plan_node`), edge and mentions, and
    the retirements of ``d`` (``old_edges``: replaced fact id -> its current edges)."""
    u = item.user
    item_ts = item.ts if item.ts is not None else now
    provenance = [{"bead": b} for b in item.sources]
    result = {"action": d.action, "retired": [], "arbiter": d.arbiter,
              "verdicts": [{"id": cid, "verdict": v} for cid, v in d.verdicts]}
    if d.action == "confirmed":
        result["id"] = d.confirm
        return Planned([(Kind.MEMORY_CONFIRM, {"id": d.confirm, "user": u, "ts": item_ts,
                                            "provenance": provenance})], result)
    mid = new_id("m")
    meta = {**item.meta, "confidence": item.confidence}
    if item.negated:
        meta["negated"] = True
    ops: list[tuple[str, dict]] = [(Kind.MEMORY_ADD, {
        "id": mid, "text": item.text, "type": item.type, "user": u, "agent": item.agent,
        "importance": item.importance, "meta": meta, "source": source,
        "provenance": provenance, "valid_from": d.valid_from, "valid_to": d.valid_to,
        "ts": item_ts, "subject": item.subject, "predicate": item.predicate, "object": item.object})]
    s_node = plan_node(nodes, ops, u, item.subject, item.subject_type, now)
    o_node = plan_node(nodes, ops, u, item.object, item.object_type, now)
    edge_id = None
    if not item.negated:  # "no longer likes X" is no edge likes X
        edge_id = new_id("e")
        ops.append((Kind.KG_EDGE, {
            "id": edge_id, "src": s_node, "dst": o_node, "predicate": item.predicate,
            "weight": item.confidence, "evidence": [mid], "meta": {}, "ts": now,
            "valid_from": d.valid_from, "valid_to": d.valid_to, "user": u}))
    ops += [(Kind.KG_MENTION, {"node": node, "memory": mid}) for node in dict.fromkeys((s_node, o_node))]
    retire, result["retired"] = _retire_ops(item, d, mid, edge_id, old_edges, now)
    result["id"] = mid
    return Planned(ops + retire, result)


# -- the public API: mem.facts -----------------------------------------------------------------
class Facts:
    """Bi-temporal facts over a Store (``mem.facts``): add them with reconciliation, follow
    a fact's versions.  See the module docstring."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def add(self, fact: Any, *, user: str | None = None, agent: str | None = None,
            ts: str | int | None = None, sources: Iterable[str] = (), arbiter: Any = None,
            source: str = "fact") -> dict:
        """Store one structured fact ``{subject, predicate, object, ...}`` (a dict, a
        ``brandmind.extract.Fact`` or a ``facts.FactInput``), reconciled with the user's
        current facts (rules in brandmind/facts.py), and its graph: subject and object nodes
        (an existing node of the user with the same normalised name and type is reused), the
        edge subject -predicate-> object with the fact's validity and the memory as evidence,
        and the mentions node <-> memory.

        Returns ``{"action": "added"|"confirmed"|"updated"|"contradicted", "id", "memory",
        "retired": [ids], "verdicts": [{"id", "verdict"}], "arbiter"}``; on ``confirmed``,
        ``memory`` is the existing fact (no new row).  ``user``/``agent``/``ts`` apply when
        the fact does not carry its own; ``sources`` are bead ids added to its provenance."""
        return self.add_many([fact], user=user, agent=agent, ts=ts, sources=sources,
                             arbiter=arbiter, source=source)[0]

    def add_many(self, facts: Iterable[Any], *, user: str | None = None, agent: str | None = None,
                 ts: str | int | None = None, sources: Iterable[str] = (), arbiter: Any = None,
                 source: str = "fact", chunk: int = 256, on_commit: Any = None) -> list[dict]:
        """:meth:`add` for many facts, in order: a later fact is reconciled with the earlier
        ones.  Every fact is validated before anything is stored; with the rules, each chunk
        of ``chunk`` facts is one op-log transaction (all or nothing; another arbiter, e.g. an
        LLM, takes the facts one at a time, holding no lock while it thinks).

        Within a chunk each fact's ops are applied to the index at once, inside one
        transaction that is rolled back after the chunk, so a fact is reconciled with the
        earlier ones of its chunk; the index is then brought up to date from the log.
        ``on_commit(txn, n)``: called in the op-log transaction that stores the first ``n``
        facts (brandmind/backlog.py records a job's progress with its work)."""
        items = self._validate(list(facts), user, agent, ts, sources)
        if not items:
            return []
        arbiter = arbiter if arbiter is not None else default_arbiter(self.store.config)
        now = now_millis()
        vectors = self._vectors(items)
        ensure_norm(self.store.sql)
        self.store.catch_up()
        nodes: dict[str, dict[tuple[str, str], str]] = {}  # user -> (type, norm name) -> node id
        results: list[dict] = []
        size = chunk if type(arbiter) is RuleArbiter else 1
        for start in range(0, len(items), size):
            ops = self._plan_chunk(items[start:start + size], arbiter, vectors, nodes, results, now, source)
            self._commit(ops, vectors, on_commit, min(start + size, len(items)))
        for result in results:
            result["memory"] = get_memory(self.store.sql, result["id"])
        return results

    def _validate(self, facts: list, user: str | None, agent: str | None, ts: str | int | None,
                  sources: Iterable[str]) -> list[FactInput]:
        default_ts = parse_time(ts, field="ts")
        extra = [validate.name(s, what="source bead id") for s in sources]
        items = []
        for n, raw in enumerate(facts, 1):
            try:
                item = coerce_fact(raw, max_chars=self.store.config.max_memory_chars)
            except InvalidInput as exc:
                if len(facts) > 1:
                    exc.message = f"fact {n}: {exc.message}"
                raise
            items.append(replace(
                item, user=self.store.user(item.user if item.user is not None else user),
                agent=item.agent if item.agent is not None else (
                    validate.name(agent, what="agent") if agent is not None else None),
                ts=item.ts if item.ts is not None else default_ts,
                sources=list(dict.fromkeys([*item.sources, *extra]))))
        return items

    def _vectors(self, items: list[FactInput]) -> dict[str, bytes]:
        """text -> vector of every fact: from the log's cache, the rest embedded at once."""
        store = self.store
        vectors: dict[str, bytes] = {}
        missing = []
        for item in items:
            if item.text not in vectors:
                raw_vec = store.log.cached_vector(store.sql.model, item.text)
                if raw_vec is not None and len(raw_vec) == 4 * store.sql.dim:
                    vectors[item.text] = raw_vec
                else:
                    vectors[item.text] = b""
                    missing.append(item.text)
        if missing:
            for text, vec in zip(missing, store.embed_docs(missing)):
                vectors[text] = vec.tobytes()
        return vectors

    def _plan_chunk(self, batch: list[FactInput], arbiter: Any, vectors: dict[str, bytes],
                    nodes: dict, results: list[dict], now: int, source: str) -> list[tuple[str, dict]]:
        """Reconcile and plan each fact of a chunk (each applied to the index speculatively,
        undone after the chunk); returns the chunk's ops, appends each fact's result."""
        import numpy as np

        sql = self.store.sql
        ops: list[tuple[str, dict]] = []
        speculative = len(batch) > 1
        with memories.rolled_back(sql, speculative):
            for item in batch:
                vec = np.frombuffer(vectors[item.text], dtype=np.float32)
                d = reconcile(sql, item, item.user, item.agent, lambda _text, v=vec: v, arbiter=arbiter, now=now)
                if d.action != "confirmed" and item.user not in nodes:  # the user's nodes, read once
                    nodes[item.user] = {(t, norm(name)): i for i, t, name in kg.node_keys(sql, item.user)}
                old_edges = {old: kg.live_edges_with_evidence(sql, [old]) for old, _, _ in d.retire}
                planned = plan_fact(item, d, nodes=nodes.get(item.user, {}), old_edges=old_edges, now=now,
                                    source=source)
                if speculative:
                    for n, (kind, payload) in enumerate(planned.ops, len(ops)):
                        apply_sql_side(sql, {"id": f"pending:{n}", "hlc": [now, n, "pending"],
                                             "kind": kind, "payload": payload}, lambda text: vectors[text])
                ops += planned.ops
                results.append(planned.result)
        return ops

    def _commit(self, ops: list[tuple[str, dict]], vectors: dict[str, bytes], on_commit: Any = None,
                done: int = 0) -> None:
        """Append the ops (one op-log transaction, the new facts' vectors cached) and apply them."""
        model = self.store.sql.model
        with self.store.write() as t:
            for kind, payload in ops:
                if kind == Kind.MEMORY_ADD:
                    _inherit_expiry(self.store.sql, t, payload)
                t.append(kind, payload)
                if kind == Kind.MEMORY_ADD:
                    t.cache_vector(model, payload["text"], vectors[payload["text"]])
            if on_commit is not None:
                on_commit(t, done)
        self.store.catch_up()

    def history(self, memory_id: str) -> list[dict]:
        """The versions of a fact, oldest first (by world time, then system time): the
        user's facts with the same subject and predicate (for multi-valued predicates:
        also the same object, or the antonym predicate with it), those it superseded or was
        superseded by, and those linked to it by ``contradicts``, followed transitively.
        Each is a memory (valid_from/valid_to, recorded_at/retired_at, confirmations,
        superseded_by) plus ``status`` (current | ended | retired) and ``reason``."""
        sql = self.store.sql
        get_memory(sql, memory_id)
        ensure_norm(sql)
        rows = _versions(sql, memory_id)
        owner = rows[memory_id]["user_id"]
        now = now_millis()
        out = []
        for row in sorted((r for r in rows.values() if r["user_id"] == owner),
                          key=lambda r: (r["valid_from"] if r["valid_from"] is not None else r["created_at"],
                                         r["recorded_at"] or 0, r["id"])):
            item = memory_out(row)
            item["status"] = ("retired" if row["retired_at"] is not None else
                              "ended" if row["valid_to"] is not None and row["valid_to"] <= now else "current")
            item["reason"] = item["meta"].get("retired_reason")
            out.append(item)
        return out


def _inherit_expiry(sql: Any, t: Any, payload: dict) -> None:
    """A fact made from a turn (or a memory) that expires (--ttl, brandmind/expiry.py)
    expires with it: the soonest expiry of its source beads and source memory."""
    beads = [p["bead"] for p in payload["provenance"] if isinstance(p, dict) and isinstance(p.get("bead"), str)]
    found = [b.get("expires_at") for b in map(t.get_bead, beads) if b]
    source = payload["meta"].get("source_memory")
    row = memories.row(sql, source) if isinstance(source, str) else None
    found += [row.get("expires_at")] if row else []
    found = [x for x in found if isinstance(x, int)]
    if found:
        payload["expires_at"] = min(found)


def _versions(sql: Any, memory_id: str) -> dict[str, dict]:
    """The rows of every version of a fact reachable from ``memory_id`` (see ``Facts.history``)."""
    rows: dict[str, dict] = {}
    todo = [memory_id]
    while todo:
        mid = todo.pop()
        if mid in rows:
            continue
        row = memories.row(sql, mid)
        if row is None:
            continue
        rows[mid] = row
        todo.extend(r for r in _related(sql, mid, row) if r and r.startswith("m_") and r not in rows)
    return rows


def _related(sql: Any, mid: str, row: dict) -> list[str]:
    """The facts one step from a version: it superseded them or they it, a ``contradicts``
    link, or the same subject and predicate (and object, unless the predicate is functional)."""
    related = memories.superseded_ids(sql, mid, row["user_id"])
    related += kg.contradicting(sql, mid)
    if row["superseded_by"]:
        related.append(row["superseded_by"])
    if row["subject"] is not None:
        pred = normalize_predicate(row["predicate"])
        if pred in FUNCTIONAL:
            related += memories.same_fact_ids(sql, row["user_id"], norm(row["subject"]), [pred], None)
        else:
            preds = [p for p in (pred, ANTONYMS.get(pred)) if p]
            related += memories.same_fact_ids(sql, row["user_id"], norm(row["subject"]), preds,
                                              norm(row["object"]))
    return related
