"""Every op kind, its payload, and one rule object per kind: the only module that spells a kind.

An op is ``{"id": "<replica>:<seq>", "hlc": [wall ms, counter, replica], "kind", "payload"}``
(brandmind/oplog.py).  ``Kind`` names every kind (a ``str`` enum: ``Kind.MEMORY_ADD ==
"memory.add"``, so stored ops compare and look up as they are); the TypedDicts below give the
payload of each.  ``RULES[kind]`` is the kind's :class:`Rule`, whose hooks say

- ``check(payload)``: what the payload must hold before it may enter the log (InvalidInput
  otherwise; brandmind/opcheck.py runs it on every append, import and pull);
- ``apply(sql, op, hk, vector_for)``: how it lands in the SQLite projection (the write
  transaction is the caller's; ``hk`` is the op's ``clock.hlc_key``);
- ``apply_log(txn, op, hk)``: how it lands in the LMDB projections (beads and their keys);
- ``owner(op, user, nodes)``: whether it carries ``user``'s content (what forgetting the
  user redacts: brandmind/logforget.py ``forget_user_in_log``);
- ``redact(op)``: the payload it is replaced with when forgotten;
- ``export(store)``: the ``bm export`` records it owns (brandmind/exchange.py; lines in
  the order of this enum);
- ``import_(store, rec)``: the ``(kind, payload)`` ops that restore one record of
  ``Rule.record``, or None when the store has it already.

A hook may be an explicit no-op (``no_apply``, ``no_export`` ...).  The hooks that need higher
layers are bound by the module that implements them, each with one table (:func:`provide`):
``check`` by opcheck (and blockrules, personarules, skillrules for their kinds), ``apply`` by
projection, ``export``/``import_`` by exchange; ``owner``, ``redact`` and ``apply_log`` are here.
tests/test_ops_table.py fails while a kind lacks a hook.  To add an op kind: a ``Kind`` member
and its payload here, and its entry in each of those tables (the test names the one missing).

Op kinds and their payloads (merge rules: brandmind/merge.py and the apply functions):

``bead.add``      {bead}: one bead (see memory.py beads); LMDB side only
``memory.add``    {id, text, type, user, agent, importance, ts, valid_from, valid_to,
                   source, provenance, meta, subject?, predicate?, object?, recorded_at?, expires_at?};
                   ignored when the id is tombstoned; stamped before its user's latest forget,
                   it kills the id (remove wins).  Ops aimed at it that came first (retire,
                   confirm, merge) are replayed now.  recorded_at (system time): the op's HLC
                   wall ms unless the payload carries one (an import keeps the original)
``memory.retire`` {id, user, retired_at, valid_to|null, by|null, reason}: the fact stopped
                   being believed (brandmind/facts.py).  Merge: retired_at = min of all
                   retires (the reason, kept in meta.retired_reason, goes with the earliest;
                   ties: the smaller reason); valid_to = min(valid_to, given) when given;
                   superseded_by = min of the non-null ``by`` (ids sort by time: the first
                   replacement).  All min/set-once, so retires commute.  A memory not
                   here yet: waits in ``sync_pending``; a dead (forgotten) one: dropped
``memory.confirm`` {id, user, ts, provenance, count?}: a duplicate of the fact was stated
                   again (count: how many times, default 1; an import restores the total).
                   Merge: confirmations += count (ops apply once), provenance gets
                   the entries it does not hold yet (a set union, added entries ordered
                   by the HLC of the op that first brought them), updated_at =
                   max(updated_at, ts).  Not here yet: waits; dead: dropped
``memory.merge``  {into, ids, ts, user, provenance}: near-duplicates merged into their oldest
                   member (brandmind/consolidate.py, ``bm consolidate``).  Each of ``ids``
                   (other than ``into``) is retired by the memory.retire rule {retired_at: ts,
                   by: into, reason: "merged"} (min / set-once: commutes with other retires; an
                   absent id is skipped); ``into``, when present, gets the payload's provenance
                   (a set union in arrival order), confirmations += len(ids) (ops apply once),
                   updated_at = max(updated_at, ts).  It never reads the merged rows, so a
                   later forget of one changes nothing on replay.  No text in the payload
``memory.forget`` {id}: remove wins; the id is tombstoned, so a late add cannot resurrect it
``memory.pin``    {id, user, pinned}: never expired nor taken by ``forget --older-than`` (brandmind/
                   expiry.py).  Merge: LWW by HLC; not here yet: waits; dead: dropped
``bead.forget``   {id, user?, key?, was?}: a turn forgotten (``bm beads rm``, with a memory made
                   from it, or edited): LMDB only (logforget.forget_bead_in_log): the bead goes,
                   its add is redacted, a late add is stored redacted (remove wins); ``key``
                   (ingest.key_digest) / ``was`` (an edit's old text: ingest.text_digest) stay
                   in ``bead_keys``: the message, or that old text of it, is not stored again
``user.forget``   {user}: every memory, bead and graph node of the user stamped before it
                   goes (whenever it arrives), and their persona assignments; the user's
                   tombstone keeps the latest forget's HLC
``kg.node``       {id, user, type, name, labels, meta, ts}: stamped before its user's latest
                   forget (or redacted), the node id is dead with its edges and mentions
``kg.edge``       {id, src, dst, predicate, weight, evidence, meta, ts, valid_from?, valid_to?,
                   user?, recorded_at?}: src/dst are node ids (``n_``) or memory ids (``m_``: a
                   typed link between notes, weight = strength); recorded_at = the op's HLC
                   wall ms unless the payload carries one (an import keeps the original).
                   Insert-once by id; skipped when an end (memory or node) or its only
                   evidence is dead (remove wins); retires that came first are replayed
``kg.edge.retire`` {id, retired_at, valid_to|null}: retired_at = min, valid_to = min when
                   given (commutes); an edge not here yet: waits in ``sync_pending``
``kg.mention``    {node, memory}: a node is mentioned by (linked to) a memory; skipped when
                   the memory or the node is dead (a merged node's go to the node it became)
``kg.node.remove`` {id, user, ts}: ``bm kg rm``, or a node only forgotten facts named: the node,
                   its edges and mentions go; the id is tombstoned (remove wins); in the log
                   its add and those of its edges and mentions are redacted (logforget.py).
``kg.node.merge`` {id, into, user, ts}: ``bm kg merge``: the node's edges and mentions move
                   to ``into`` and it goes; later edges and mentions of it follow
                   (brandmind/graph.py)
``block.define``  {id, scope, user, agent, persona, label, description, limit, read_only,
                   explicit}: a core memory block (brandmind/blocks.py); id = hash of scope,
                   owner and label, so replicas defining the same block converge.  Merge: per
                   field of ``explicit``, LWW by HLC; fields nobody set keep the label's default
``block.update``  {id, scope, origin, seq, update, deps, user, agent}: one write to a block as a
                   base64 pycrdt update.  Merge: CRDT text, applied per origin strictly in ``seq``
                   order once the block's state vector covers ``deps`` (the writer's); others
                   wait in ``block_updates`` (pycrdt 0.14.13 diverges otherwise).  Over-limit
                   results are kept, flagged ``over_limit``.  Both kinds are ignored for a block
                   whose owner was forgotten at a later HLC; ``user.forget`` drops the user's
                   blocks and nulls their name on their persona-block updates (redact_block)
``skill.add``     {name, description, input_schema, examples, tags, version, body, source,
                   meta, ts}: the whole skill (brandmind/skills.py).  Merge: the visible skill
                   of a name is, among its adds stamped after its latest remove, the one with
                   the highest version, ties broken by the later HLC (a max over a total
                   order: commutes; dominated adds are dropped, order-independently)
``skill.remove``  {name, ts}: hides every add of the name stamped before it (latest remove
                   HLC = max); a later add revives the skill
``persona.define`` {handle, industry, role, description, typical_kpis, typical_motivations,
                   quintessential_queries, keywords, source, ts, created_at?}: a persona
                   (brandmind/personas.py).  Merge: LWW by HLC for the definition;
                   created_at = min over all defines
``persona.assign`` {user, handle, confidence, discovered_at, last_confirmed}: the user holds
                   the persona.  Merge per (user, handle): discovered_at = min, last_confirmed =
                   max, confidence = that of the assign with the highest HLC; skipped when the
                   user was forgotten at a later HLC
``persona.unassign`` {user, handle}: LWW against assign: the user holds the persona iff the
                   max assign HLC > the max unassign HLC (both kept as max: commutes)
``persona.doc``   {agent, doc: {id, name, version, description, goals, norms, traits, skills},
                   ts}: the agent's persona document; the highest (version, HLC) wins (writers
                   must raise the version; equal versions from two replicas: LWW by HLC)
(workspace files, brandmind/workspace.py, are indexed as ``memory.add`` ops with meta
 kind "file" and dropped with ``memory.forget``; no op kind of their own)

``memory.add`` payloads of forgotten memories are redacted in the log to ``{"id": ...,
"redacted": true}``, which applies as a kill of the id; so are the ``memory.add``, ``bead.add``
and ``kg.node`` payloads of a forgotten user (stamped before the ``user.forget``), and their
``memory.retire``, ``memory.confirm``, ``memory.merge``, ``kg.edge`` ops, and ``persona.assign``
/ ``persona.unassign`` ops (to ``{"redacted": true}``) (the ``owner`` and ``redact`` hooks).
Forgetting a memory also removes its mentions, its typed links and the graph edges whose
only evidence it is.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, NotRequired, TypedDict

from .clock import hlc_key

if TYPE_CHECKING:  # pragma: no cover
    from .oplog import LogTxn


class Kind(str, Enum):
    """Every op kind, in export order (brandmind/exchange.py writes records in this order)."""
    BEAD_ADD = "bead.add"
    BEAD_FORGET = "bead.forget"
    MEMORY_ADD = "memory.add"
    MEMORY_RETIRE = "memory.retire"
    MEMORY_CONFIRM = "memory.confirm"
    MEMORY_MERGE = "memory.merge"
    MEMORY_FORGET = "memory.forget"
    MEMORY_PIN = "memory.pin"
    USER_FORGET = "user.forget"
    KG_NODE = "kg.node"
    KG_EDGE = "kg.edge"
    KG_EDGE_RETIRE = "kg.edge.retire"
    KG_MENTION = "kg.mention"
    KG_NODE_REMOVE = "kg.node.remove"
    KG_NODE_MERGE = "kg.node.merge"
    SKILL_ADD = "skill.add"
    SKILL_REMOVE = "skill.remove"
    BLOCK_DEFINE = "block.define"
    BLOCK_UPDATE = "block.update"
    PERSONA_DEFINE = "persona.define"
    PERSONA_ASSIGN = "persona.assign"
    PERSONA_UNASSIGN = "persona.unassign"
    PERSONA_DOC = "persona.doc"

    def __str__(self) -> str:  # the stored spelling, also in f-strings and messages
        return self.value

    __format__ = str.__format__


# -- payloads ----------------------------------------------------------------------------------------
class BeadAdd(TypedDict):
    bead: dict  # {id, ts, user, role, speaker, thread, source, turn_id, importance, spans, meta,
    #              size, content | blob, key?, expires_at?}


class BeadForget(TypedDict):
    id: str
    user: NotRequired[str]
    key: NotRequired[str]
    was: NotRequired[str]


class MemoryAdd(TypedDict):
    id: str
    text: str
    type: str
    user: str
    agent: str | None
    importance: float
    ts: int
    valid_from: int | None
    valid_to: int | None
    source: str
    provenance: list
    meta: dict
    updated: NotRequired[int]
    subject: NotRequired[str]
    predicate: NotRequired[str]
    object: NotRequired[str]
    recorded_at: NotRequired[int]
    expires_at: NotRequired[int]  # --ttl: gone from recall then, and forgotten (brandmind/expiry.py)


class MemoryRetire(TypedDict):
    id: str
    user: NotRequired[str]
    retired_at: int
    valid_to: int | None
    by: str | None
    reason: str


class MemoryConfirm(TypedDict):
    id: str
    user: NotRequired[str]
    ts: int
    provenance: list
    count: NotRequired[int]


class MemoryMerge(TypedDict):
    into: str
    ids: list[str]
    ts: int
    user: NotRequired[str]
    provenance: list


class MemoryForget(TypedDict):
    id: str


class MemoryPin(TypedDict):
    id: str
    user: NotRequired[str]
    pinned: bool


class UserForget(TypedDict):
    user: str


class KgNode(TypedDict):
    id: str
    user: str
    type: str
    name: str
    labels: list[str]
    meta: dict
    ts: int


class KgEdge(TypedDict):
    id: str
    src: str
    dst: str
    predicate: str
    weight: float
    evidence: list[str]
    meta: dict
    ts: int
    valid_from: NotRequired[int]
    valid_to: NotRequired[int]
    recorded_at: NotRequired[int]
    user: NotRequired[str]


class KgEdgeRetire(TypedDict):
    id: str
    retired_at: int
    valid_to: int | None


class KgMention(TypedDict):
    node: str
    memory: str


class KgNodeRemove(TypedDict):
    id: str
    user: str
    ts: int


class KgNodeMerge(KgNodeRemove):
    into: str


class SkillAdd(TypedDict):
    name: str
    description: str
    input_schema: dict | None
    examples: list
    tags: list[str]
    version: str
    body: str
    source: str | None
    meta: dict | None
    ts: int


class SkillRemove(TypedDict):
    name: str
    ts: NotRequired[int]


class BlockDefine(TypedDict):
    id: str
    scope: str  # user | agent | persona
    user: str | None
    agent: str | None
    persona: str | None
    label: str
    description: str
    limit: int
    read_only: bool
    explicit: list[str]


class BlockUpdate(TypedDict):
    id: str
    scope: str
    origin: int
    seq: int
    update: str  # base64 pycrdt update
    deps: str | None  # base64 state vector
    user: str | None
    agent: str | None


class PersonaDefine(TypedDict):
    handle: str
    industry: str
    role: str
    description: str
    typical_kpis: list[str]
    typical_motivations: list[str]
    quintessential_queries: list[str]
    keywords: list[str]
    source: str
    ts: int
    created_at: NotRequired[int]


class PersonaAssign(TypedDict):
    user: str
    handle: str
    confidence: float
    discovered_at: int
    last_confirmed: int


class PersonaUnassign(TypedDict):
    user: str
    handle: str


class PersonaDoc(TypedDict):
    agent: str
    doc: dict  # {id, name, version, description, goals, norms, traits, skills}
    ts: int


class Redacted(TypedDict, total=False):
    """What a forgotten op's payload becomes (the ``redact`` hook): its keys and this mark."""
    redacted: bool
    id: str
    into: str
    node: str
    memory: str
    user: str | None


PAYLOADS: dict[Kind, type] = {
    Kind.BEAD_ADD: BeadAdd, Kind.BEAD_FORGET: BeadForget, Kind.MEMORY_ADD: MemoryAdd,
    Kind.MEMORY_RETIRE: MemoryRetire, Kind.MEMORY_CONFIRM: MemoryConfirm, Kind.MEMORY_MERGE: MemoryMerge,
    Kind.MEMORY_FORGET: MemoryForget, Kind.MEMORY_PIN: MemoryPin, Kind.USER_FORGET: UserForget,
    Kind.KG_NODE: KgNode,
    Kind.KG_EDGE: KgEdge, Kind.KG_EDGE_RETIRE: KgEdgeRetire, Kind.KG_MENTION: KgMention,
    Kind.KG_NODE_REMOVE: KgNodeRemove, Kind.KG_NODE_MERGE: KgNodeMerge, Kind.SKILL_ADD: SkillAdd,
    Kind.SKILL_REMOVE: SkillRemove, Kind.BLOCK_DEFINE: BlockDefine, Kind.BLOCK_UPDATE: BlockUpdate,
    Kind.PERSONA_DEFINE: PersonaDefine, Kind.PERSONA_ASSIGN: PersonaAssign,
    Kind.PERSONA_UNASSIGN: PersonaUnassign, Kind.PERSONA_DOC: PersonaDoc,
}

REFUSED = "refused"  # the payload key of a pulled op that failed its check (brandmind/opcheck.py)

# kinds that forget something: replication handles them first in a batch
FORGETS = frozenset({Kind.MEMORY_FORGET, Kind.BEAD_FORGET, Kind.KG_NODE_REMOVE, Kind.USER_FORGET})


# -- the rule objects --------------------------------------------------------------------------------
Check = Callable[[dict], None]
Apply = Callable[[Any, dict, str, Callable[[str], bytes]], None]  # (sql, op, hk, vector_for)
ApplyLog = Callable[["LogTxn", dict, str], None]
Owner = Callable[[dict, str, "set[str] | frozenset[str]"], bool]
Redact = Callable[[dict], dict]
Export = Callable[[Any], Iterator[dict]]  # (store) -> records
Import = Callable[[Any, dict], "list[tuple[Kind, dict]] | None"]  # (store, record) -> ops


@dataclass
class Rule:
    """How one op kind is checked, applied, owned, redacted, exported and imported."""
    kind: Kind
    payload: type
    record: str | None  # the export record kind its import_ hook reads (None: it has none)
    owner: Owner
    redact: Redact
    apply_log: ApplyLog
    check: Check | None = None  # bound by the module implementing it (provide)
    apply: Apply | None = None
    export: Export | None = None
    import_: Import | None = None


HOOKS = ("check", "apply", "apply_log", "owner", "redact", "export", "import_")


def provide(hook: str, table: Mapping[Kind, Callable[..., Any]]) -> None:
    """Bind ``hook`` of each kind in ``table``: called once, at import, by the module that
    implements the hook (the hooks that need a higher layer than this one)."""
    if hook not in HOOKS:
        raise ValueError(f"no hook {hook!r}")
    for kind, fn in table.items():
        setattr(RULES[Kind(kind)], hook, fn)


def missing() -> list[str]:
    """``kind.hook`` of every hook not bound (empty once every module of the library that
    provides hooks is imported)."""
    names = [f.name for f in fields(Rule) if f.name in HOOKS]
    return [f"{kind.value}.{name}" for kind in Kind for name in names if getattr(RULES.get(kind), name, None) is None]


def rule(kind: str) -> Rule | None:
    """The rule of ``kind``; None for a kind this version does not know (stored, not applied)."""
    return RULES.get(kind)  # type: ignore[call-overload]  # (a str enum: a stored str finds it)


# -- owner: whose content an op carries -------------------------------------------------------------
def owned_by(op: dict, user: str, nodes: set[str] | frozenset[str] = frozenset()) -> bool:
    """Whether an op carries content of ``user`` (what forgetting the user redacts):
    their beads, memories and graph nodes, edges and mentions of those ``nodes``, their
    blocks and persona assignments.  False for what is redacted or refused already."""
    p = op["payload"]
    if p.get("redacted") or REFUSED in p:
        return False
    r = rule(op["kind"])
    return r is not None and r.owner(op, user, nodes)


def owned_by_nobody(op: dict, user: str, nodes: set[str] | frozenset[str]) -> bool:
    """The kind never carries a user's content (forgets, skills, personas, documents)."""
    return False


def owned_by_payload_user(op: dict, user: str, nodes: set[str] | frozenset[str]) -> bool:
    return op["payload"].get("user") == user


def owned_by_bead_user(op: dict, user: str, nodes: set[str] | frozenset[str]) -> bool:
    bead = op["payload"].get("bead")
    return isinstance(bead, dict) and bead.get("user") == user


def owned_edge(op: dict, user: str, nodes: set[str] | frozenset[str]) -> bool:
    p = op["payload"]
    return p.get("user") == user or p.get("src") in nodes or p.get("dst") in nodes


def owned_mention(op: dict, user: str, nodes: set[str] | frozenset[str]) -> bool:
    return op["payload"].get("node") in nodes


# -- redact: what a forgotten op's payload becomes --------------------------------------------------
def redacted(op: dict) -> dict:
    """The payload a forgotten op is replaced with in the log (its rule's ``redact``)."""
    r = rule(op["kind"])
    return r.redact(op) if r is not None else redact_to_id(op)


def redact_to_id(op: dict) -> dict:
    return {"id": op["payload"]["id"], "redacted": True}


def redact_to_mark(op: dict) -> dict:
    """Nothing is kept (which personas a user held)."""
    return {"redacted": True}


def redact_bead(op: dict) -> dict:
    return {"id": op["payload"]["bead"]["id"], "redacted": True}


def redact_mention(op: dict) -> dict:
    p = op["payload"]
    return {"node": p["node"], "memory": p["memory"], "redacted": True}


def redact_merge(op: dict) -> dict:
    return {"into": op["payload"]["into"], "redacted": True}


def redact_node(op: dict) -> dict:
    """The owner stays (named by the user.forget op anyway): a replica that gets it late
    knows whose it was."""
    p = op["payload"]
    return {"id": p["id"], "user": p.get("user"), "redacted": True}


def redact_block(op: dict) -> dict:
    """A forgotten user's block op: nothing for their own blocks; their shared-block edits
    stay (others built on them) without their name."""
    p = op["payload"]
    if op["kind"] == Kind.BLOCK_UPDATE and p.get("scope") == "persona":
        return {**p, "user": None, "agent": None}
    return {"id": p["id"], "redacted": True}


def redact_unchanged(op: dict) -> dict:
    """The kind carries no one's content (never owned): kept as it is."""
    return op["payload"]


# -- apply_log: the LMDB projections (beads and their dedup keys) -----------------------------------
def apply_bead_add(txn: "LogTxn", op: dict, hk: str) -> None:
    """A message key maps to the smallest bead id holding it; the bead is kept as a ref to its
    op (whose id and HLC a ``bead.forget`` or ``user.forget`` arriving later reads)."""
    bead = op["payload"]["bead"]
    txn.put_bead(bead, op["id"])
    if bead.get("key"):
        known = txn.bead_for_key(bead["key"])
        if known is None or bead["id"] < known or txn.get_bead(known) is None:
            txn.set_bead_key(bead["key"], bead["id"])


def apply_user_forget_log(txn: "LogTxn", op: dict, hk: str) -> None:
    """The user's beads and marks (LogTxn.keep_marks) stamped before the forget go (order-free)."""
    txn.drop_marks(op["payload"]["user"], hk)
    for bead_id in txn.user_bead_ids(op["payload"]["user"]):
        bead = txn.get_bead(bead_id)
        known = txn.bead_hlc(bead_id)
        if bead and (known is None or known < hk):
            txn.delete_bead(bead)


def apply_bead_forget_log(txn: "LogTxn", op: dict, hk: str) -> None:
    """Its user's forgotten key, or an edit's old text, kept in bead_keys."""
    txn.keep_marks(op["payload"].get("user"), op["payload"].get("key"), op["payload"].get("was"), hk)


def no_log_side(txn: "LogTxn", op: dict, hk: str) -> None:
    """The kind has no LMDB projection."""


def apply_log_side(txn: "LogTxn", op: dict, hk: str | None = None) -> None:
    """The LMDB projections of one op (its rule's ``apply_log``).  ``hk``: the op's
    ``clock.hlc_key``, when the caller has it."""
    p = op["payload"]
    r = rule(op["kind"])
    if r is None or p.get("redacted") or REFUSED in p:
        return
    r.apply_log(txn, op, hk or hlc_key(op["hlc"]))


# -- the table ---------------------------------------------------------------------------------------
def _rule(kind: Kind, record: str | None, owner: Owner, redact: Redact, apply_log: ApplyLog = no_log_side) -> Rule:
    return Rule(kind, PAYLOADS[kind], record, owner, redact, apply_log)


_user, _never = owned_by_payload_user, owned_by_nobody
RULES: dict[Kind, Rule] = {r.kind: r for r in (
    _rule(Kind.BEAD_ADD, "bead", owned_by_bead_user, redact_bead, apply_bead_add),
    _rule(Kind.BEAD_FORGET, None, _never, redact_unchanged, apply_bead_forget_log),
    _rule(Kind.MEMORY_ADD, "memory", _user, redact_to_id),
    _rule(Kind.MEMORY_RETIRE, None, _user, redact_to_id),
    _rule(Kind.MEMORY_CONFIRM, None, _user, redact_to_id),
    _rule(Kind.MEMORY_MERGE, None, _user, redact_merge),
    _rule(Kind.MEMORY_FORGET, None, _never, redact_unchanged),
    _rule(Kind.MEMORY_PIN, None, _user, redact_to_id),
    _rule(Kind.USER_FORGET, None, _never, redact_unchanged, apply_user_forget_log),
    _rule(Kind.KG_NODE, "node", _user, redact_node),
    _rule(Kind.KG_EDGE, "edge", owned_edge, redact_to_id),
    _rule(Kind.KG_EDGE_RETIRE, None, _never, redact_to_id),
    _rule(Kind.KG_MENTION, "mention", owned_mention, redact_mention),
    _rule(Kind.KG_NODE_REMOVE, None, _user, redact_to_id),
    _rule(Kind.KG_NODE_MERGE, None, _user, redact_to_id),
    _rule(Kind.SKILL_ADD, "skill", _never, redact_unchanged),
    _rule(Kind.SKILL_REMOVE, None, _never, redact_unchanged),
    _rule(Kind.BLOCK_DEFINE, "block", _user, redact_block),
    _rule(Kind.BLOCK_UPDATE, None, _user, redact_block),
    _rule(Kind.PERSONA_DEFINE, "persona", _never, redact_unchanged),
    _rule(Kind.PERSONA_ASSIGN, "persona_user", _user, redact_to_mark),
    _rule(Kind.PERSONA_UNASSIGN, None, _user, redact_to_mark),
    _rule(Kind.PERSONA_DOC, "persona_doc", _never, redact_unchanged),
)}
