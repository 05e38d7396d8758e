"""Core memory blocks (Letta-style): labelled text with a character limit, a description
and a read-only flag, kept as CRDT text (pycrdt ``Text``, one ``Doc`` per block) so that
two agents or processes editing a block at the same time both keep their edits.

Blocks and scopes
-----------------
A block is identified by (scope, owner, label); its id is ``"k_" + sha256(scope, owner,
label)[:24]``, so two replicas defining the same block get the same id and converge.

``user``     owner = a user: the user's own blocks, private to them
``agent``    owner = a user and one of their agents: that agent's blocks for that user
             (an agent-scoped block hides a user-scoped block of the same label in
             :meth:`Blocks.core`).  With ``agent=``, a label names the block that agent
             sees: its own block of that label if it has one, else the user's; a block not
             written yet is the user's for ``human`` and ``user_persona_profile`` (facts
             about the user, shared by their agents) and the agent's for ``agent_persona``
             and custom labels.  ``Blocks.define(..., agent=...)`` always defines the
             agent's own block
``persona``  owner = a persona handle: the shared ``<handle>_service_experience`` block
             (8,000 characters), attached to every user holding the persona; readable and
             writable by all of their agents.  A label ending in ``_service_experience``
             always names a persona block; ``persona=`` names one explicitly

Default labels, created on their first write: ``agent_persona`` (2,000 characters,
read-only to agents), ``human`` (3,000), ``user_persona_profile`` (5,000); any other label
is a custom block (2,000 unless ``limit`` says otherwise; :meth:`Blocks.define`).
Read-only means: writes made by an agent (``agent=`` given, unless ``by_agent=False``)
are refused; the user (the CLI) can still set the block.

Writes
------
Every write (set, append, replace, edit) is computed on the block's current text as this
process sees it, applied to a pycrdt doc loaded from that state, and appended as ONE
``block.update`` op carrying the pycrdt update (``doc.get_update(state_before)``).  Two
processes writing at once therefore produce concurrent CRDT edits, which merge: nobody
gets a conflict (Letta answers HTTP 409 there).  ``set`` and ``edit`` apply a word-level
diff, so a concurrent edit elsewhere in the block survives them.

Character limit, on every path
------------------------------
* A write (CLI, API, import) that would make a block longer than its limit is refused with
  how far over it would be; nothing is written.  Lowering a limit below the current length
  is refused too.
* Merge rule: when concurrent edits (two processes or replicas, each within the limit on
  its own) merge into a text over the limit, the merged text is KEPT as it is, never
  truncated: the block is marked ``over_limit`` (with ``over_by``) in ``bm block show`` /
  ``bm block list`` and fails ``bm doctor``, and every later write that would make it
  longer still is refused until someone trims it below the limit (writes that shorten it,
  or keep its length, are accepted).  The flag is a function of the merged text and the
  merged limit, so every replica reports the same.

Shared persona blocks and the PII guard
---------------------------------------
Only a user holding the persona (``Personas.held``; read here through ``storage.personas``)
may write its block.  Every write is scanned by ``brandmind.pii.scan`` with the writer's private terms
(``private_terms``, given to :class:`Blocks`: Memory passes ``privacy.gather_private_terms``;
without it only the built-in patterns are scanned for); hits in the text being added are refused with their spans
listed, or, with ``redact=True``, replaced by ``[REDACTED:<kind>]`` and reported.


The op kinds, their merge rules, the CRDT codec and what forgetting a user does to blocks:
brandmind/blockrules.py.  The tables and their queries: brandmind/storage/blocks.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

from . import blockrules, pii, validate
from .clock import iso
from .errors import InvalidInput, NotFound, UsageError
from .ops import Kind
from .storage import blocks as rows
from .storage import personas as persona_rows
from .blockrules import (CUSTOM_LIMIT, DEFAULTS, PERSONA_DESCRIPTION, PERSONA_LIMIT, Ref, check_growth,
                         custom_defaults, defaults_for, define_payload, limit_error, persona_block_op,
                         persona_label)
from .storage.blocks import FIELDS, MAX_LIMIT, PERSONA_SUFFIX, SCOPES, block_id, validate_handle, validate_label

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

__all__ = ["Blocks", "Ref", "Snapshot", "SCOPES", "FIELDS", "MAX_LIMIT", "PERSONA_SUFFIX", "PERSONA_LIMIT",
           "CUSTOM_LIMIT", "DEFAULTS", "PERSONA_DESCRIPTION", "block_id", "validate_label", "validate_handle",
           "check_limit", "check_description", "block_text", "persona_label", "persona_block_op",
           "defaults_for", "custom_defaults", "define_payload", "check_growth"]

MAX_DESCRIPTION = 2_000
DEFAULT_ORDER = ("agent_persona", "human", "user_persona_profile")
USER_LABELS = ("human", "user_persona_profile")  # with agent=, created for the user, not the agent
EXPORT_FIELDS = ("id", "scope", "user", "agent", "persona", "label", "description", "limit", "read_only", "value")


# -- checks of input -----------------------------------------------------------------------------------
def check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"a block limit must be a whole number from 1 to {MAX_LIMIT:,}, got {limit!r}",
                           hint="e.g. --limit 3000")
    return limit


def check_description(description: Any) -> str:
    if not isinstance(description, str):
        raise InvalidInput(f"a block description must be a string, got {type(description).__name__}",
                           hint='e.g. --description "What the agent knows about the project"')
    description = block_text(description, what="description", allow_empty=True)
    if len(description) > MAX_DESCRIPTION:
        raise InvalidInput(f"the description is {len(description):,} characters, over {MAX_DESCRIPTION:,}",
                           hint="shorten it; the block's text is where content goes")
    return description


def block_text(value: Any, *, what: str = "text", allow_empty: bool = False) -> str:
    """Block text: UTF-8, no NUL, no lone surrogates; blank only when ``allow_empty``."""
    if isinstance(value, bytes):
        value = validate.utf8(value, what=what)
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}",
                           hint=f"pass the {what} as a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} is not valid UTF-8 (character {exc.start})",
                           hint="convert it first, e.g. `iconv -f latin1 -t utf-8`") from None
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character", hint="strip NUL bytes from the input")
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{what} is empty", hint=f"give some non-blank {what}")
    return value


def checked_define(define: dict) -> dict:
    """The fields a write sets explicitly (None: not set), checked."""
    out = {}
    if define.get("limit") is not None:
        out["limit"] = check_limit(define["limit"])
    if define.get("description") is not None:
        out["description"] = check_description(define["description"])
    if define.get("read_only") is not None:
        if not isinstance(define["read_only"], bool):
            raise InvalidInput(f"read_only must be true or false, got {define['read_only']!r}",
                               hint="e.g. --read-only")
        out["read_only"] = define["read_only"]
    return out


# -- the records a read returns ------------------------------------------------------------------
def _out(row: dict) -> dict:
    value, limit = row["value"], row["char_limit"]
    return {
        "id": row["id"], "label": row["label"], "scope": row["scope"], "user": row["user_id"],
        "agent": row["agent_id"], "persona": row["persona"], "value": value, "chars": len(value),
        "limit": limit, "description": row["description"], "read_only": bool(row["read_only"]),
        "over_limit": bool(row["over_limit"]), "over_by": max(0, len(value) - limit),
        "updated": iso(row["updated_at"]), "updated_by": row["updated_by"], "exists": True,
    }


def _virtual(ref: Ref, d: dict) -> dict:
    return {"id": ref.id, "label": ref.label, "scope": ref.scope, "user": ref.user, "agent": ref.agent,
            "persona": ref.persona, "value": "", "chars": 0, "limit": d["limit"],
            "description": d["description"], "read_only": d["read_only"], "over_limit": False,
            "over_by": 0, "updated": None, "updated_by": None, "exists": False}


def _order(label: str) -> tuple:
    return (DEFAULT_ORDER.index(label) if label in DEFAULT_ORDER else len(DEFAULT_ORDER), label)


def _brief(block: dict) -> dict:
    out = {k: block[k] for k in ("label", "value", "limit", "description", "read_only", "scope")}
    if block["scope"] == "agent":
        out["agent"] = block["agent"]
    if block["scope"] == "persona":
        out["persona"] = block["persona"]
    if block["over_limit"]:
        out["over_limit"] = True
    return out


@dataclass
class Snapshot:
    """A block as one process saw it: what a write is computed on."""
    ref: Ref
    row: dict | None
    applied: int          # the op-log arrival the projection had applied at that moment
    seq: int              # the last seq of this replica's client for the block

    @property
    def value(self) -> str:
        return self.row["value"] if self.row else ""

    @property
    def state(self) -> bytes | None:
        return self.row["state"] if self.row else None

    @property
    def definition(self) -> dict:
        """Its limit, read-only flag and description (the label's defaults when it is new)."""
        row = self.row
        if row is not None:
            return {"limit": row["char_limit"], "read_only": bool(row["read_only"]),
                    "description": row["description"]}
        return defaults_for(self.ref) or custom_defaults()

    def client(self, replica: str) -> int | None:
        return blockrules.replica_client(replica, self.ref.id, self.row["created_hlc"]) if self.row else None


class Blocks:
    """The core memory blocks of one store (``mem.blocks``); see the module docstring.

    ``private_terms(user)``: the names and places of ``user``'s private content, for the PII
    guard of shared persona blocks (Memory passes ``privacy.gather_private_terms``); without it the
    guard scans for the built-in kinds only."""

    def __init__(self, store: "Store", *, private_terms: Callable[[str], Any] | None = None) -> None:
        self.store = store
        self.private_terms = private_terms

    @property
    def sql(self) -> Any:
        return self.store.sql

    # -- naming a block ------------------------------------------------------------------------
    def resolve(self, label: str, *, user: str | None = None, agent: str | None = None,
                persona: str | None = None, own: bool = False) -> Ref:
        """The block LABEL names for this user / agent / persona (see the module docstring).

        With ``agent``, the block that agent sees: its own block of that label if it has one,
        else the user's; one that does not exist yet is the user's for ``human`` and
        ``user_persona_profile``, the agent's for other labels.  ``own``: the agent's own block
        regardless (what :meth:`define` with ``agent`` defines)."""
        label = validate_label(label)
        if persona is not None:
            persona = validate_handle(persona)
            if label.endswith(PERSONA_SUFFIX) and label != persona + PERSONA_SUFFIX:
                raise UsageError(f"block {label!r} is not the shared block of persona {persona!r}",
                                 hint=f"the shared block of {persona} is {persona + PERSONA_SUFFIX}")
            return Ref("persona", None, None, persona, label)
        if label.endswith(PERSONA_SUFFIX):
            return Ref("persona", None, None, validate_handle(label[:-len(PERSONA_SUFFIX)]), label)
        user = self.store.user(user)
        if agent is None:
            return Ref("user", user, None, None, label)
        mine = Ref("agent", user, validate.name(agent, what="agent"), None, label)
        if own:
            return mine
        theirs = Ref("user", user, None, None, label)
        self.store.catch_up()
        found = rows.existing(self.sql, (mine.id, theirs.id))
        if mine.id in found:
            return mine
        if theirs.id in found or label in USER_LABELS:
            return theirs
        return mine

    # -- reads ---------------------------------------------------------------------------------
    def get(self, label: str, *, user: str | None = None, agent: str | None = None,
            persona: str | None = None) -> dict:
        """One block.  A default label nobody has written yet reads as empty, with its defaults."""
        ref = self.resolve(label, user=user, agent=agent, persona=persona)
        row = rows.row(self.sql, ref.id)
        if row is not None:
            return _out(row)
        d = defaults_for(ref)
        if d is None:
            raise NotFound(f"no block {ref.label!r} for {ref.where()}",
                           hint=f"create it with `bm block set {ref.label} TEXT{ref.flags()}` "
                                "(`bm block list` shows the blocks there are)")
        return _virtual(ref, d)

    def text(self, *, user: str, agent: str | None, label: str) -> str | None:
        """The text of a user's block (agent=None), or of the block ``agent`` sees (its own of
        that label, else the user's); None when there is none."""
        if agent is not None:
            found = rows.value(self.sql, block_id("agent", user, agent, None, label))
            if found:
                return found
        return rows.value(self.sql, block_id("user", user, None, None, label))

    def core(self, *, user: str | None = None, agent: str | None = None) -> list[dict]:
        """The user's blocks and, with ``agent``, that agent's blocks for the user (an agent block
        replaces a user block of the same label), each {"label", "value", "limit",
        "description", "read_only", "scope"}; default labels first, then by label."""
        user = self.store.user(user)
        by_label = {r["label"]: r for r in rows.user_rows(self.sql, user)}
        if agent is not None:
            for r in rows.agent_rows(self.sql, user, agent):
                by_label[r["label"]] = r
        return [_brief(_out(by_label[label])) for label in sorted(by_label, key=_order)]

    def _shared_rows(self, user: str) -> list[dict]:
        """The shared blocks of the personas ``user`` holds, in ``Personas.held`` order."""
        out = []
        for handle in persona_rows.held_handles(self.sql, user):
            row = rows.row(self.sql, block_id("persona", None, None, handle, handle + PERSONA_SUFFIX))
            if row is not None:
                out.append(row)
        return out

    def shared(self, *, user: str | None = None) -> list[dict]:
        """The shared blocks of every persona ``user`` holds (``Personas.held``), in
        that order, each as in :meth:`core` plus "persona"."""
        return [_brief(_out(row)) for row in self._shared_rows(self.store.user(user))]

    def list(self, *, user: str | None = None, agent: str | None = None) -> list[dict]:
        """The user's blocks, their agents' blocks (only ``agent``'s when given) and the shared
        blocks of the personas they hold."""
        user = self.store.user(user)
        agent = validate.name(agent, what="agent") if agent is not None else None
        own = sorted((_out(r) for r in rows.owned_rows(self.sql, user, agent)),
                     key=lambda b: (b["agent"] or "", *_order(b["label"])))
        return own + [_out(row) for row in self._shared_rows(user)]

    def has_persona_block(self, handle: str) -> bool:
        return rows.exists(self.sql, block_id("persona", None, None, handle, persona_label(handle)))

    # -- writes --------------------------------------------------------------------------------
    def snapshot(self, ref: Ref) -> Snapshot:
        """The block and the projection's position, read in one SQLite transaction."""
        self.store.catch_up()
        sql = self.sql
        with rows.read_txn(sql):
            applied = sql.applied()
            row = rows.row(sql, ref.id)
            seq = 0
            if row is not None:
                client = blockrules.replica_client(self.store.log.replica, ref.id, row["created_hlc"])
                seq = rows.last_seq(sql, ref.id, client)
        return Snapshot(ref, row, applied, seq)

    def _check_writer(self, snap: Snapshot, *, writer: str, by_agent: bool) -> None:
        ref = snap.ref
        if by_agent and snap.definition["read_only"]:
            raise InvalidInput(f"block {ref.label!r} is read-only to agents",
                               hint="the user can change it: `bm block set "
                                    f"{ref.label} TEXT{ref.flags()}` (API: by_agent=False)")
        if ref.scope == "persona" and not persona_rows.holds(self.sql, writer, ref.persona):
            raise InvalidInput(f"user {writer!r} does not hold persona {ref.persona!r}, so cannot write its "
                               "shared block",
                               hint=f"assign the persona first: `bm persona assign {ref.persona} --user {writer}`")

    def _pii_guard(self, ref: Ref, old: str, new: str, writer: str, redact: bool) -> tuple[str, list[dict]]:
        ranges = blockrules.inserted_ranges(old, new)
        if not ranges:
            return new, []
        terms = self.private_terms(writer) if self.private_terms is not None else ()
        hits = [h for h in pii.scan(new, private_terms=terms)
                if any(h.start < e and h.end > s for s, e in ranges)]
        if not hits:
            return new, []
        if not redact:
            raise InvalidInput(f"refused: the write to shared block {ref.label!r} contains PII: {pii.describe(hits)}",
                               hint="remove it, or pass --redact (API: redact=True) to store it as [REDACTED:<kind>]")
        return pii.redact(new, hits), [{"kind": h.kind, "text": h.text, "start": h.start, "end": h.end}
                                       for h in hits]

    def commit(self, snap: Snapshot, new: str | None, *, writer: str | None, agent: str | None = None,
               define: dict | None = None) -> None:
        """Append the ops of one write: a define when the block does not exist yet (or ``define``
        sets fields explicitly), and one update turning ``snap.value`` into ``new`` (None: no
        text change).  The update is built on the snapshot's state (see brandmind/blockrules.py
        for the client id)."""
        ref = snap.ref
        explicit = dict(define or {})
        need_define = snap.row is None or bool(explicit)
        fields = {**(defaults_for(ref) or custom_defaults()), **explicit}
        text_change = new is not None and new != snap.value
        if not need_define and not text_change:
            return
        replica = self.store.log.replica
        with self.store.write() as t:
            since = [op for op in t.ops_after(snap.applied)
                     if op["kind"] in (Kind.BLOCK_DEFINE, Kind.BLOCK_UPDATE) and op["payload"].get("id") == ref.id]
            if need_define and (explicit or not any(op["kind"] == Kind.BLOCK_DEFINE for op in since)):
                t.append(Kind.BLOCK_DEFINE, define_payload(ref, fields, explicit))
            if text_change:
                client = snap.client(replica)
                if client is not None and not any(op["kind"] == Kind.BLOCK_UPDATE and
                                                  op["payload"].get("origin") == client for op in since):
                    seq = snap.seq + 1
                else:  # a new block, or another process of this replica wrote with that client meanwhile
                    client, seq = blockrules.fresh_client(), 1
                update, deps = blockrules.encode_edit(snap.state, snap.value, new, client)
                t.append(Kind.BLOCK_UPDATE, {"id": ref.id, "scope": ref.scope, "origin": client, "seq": seq,
                                          "update": blockrules.b64(update), "deps": blockrules.b64(deps),
                                          "user": writer, "agent": agent})
        self.store.catch_up()

    def _written(self, ref: Ref, found: list[dict]) -> dict:
        out = _out(rows.row(self.sql, ref.id))
        if found:
            out["redacted"] = found
        return out

    def write(self, label: str, change: Callable[[str], str], *, user: str | None = None,
              agent: str | None = None, persona: str | None = None, redact: bool = False,
              by_agent: bool | None = None, define: dict | None = None) -> dict:
        """One write: ``change(current text) -> new text``, checked (read-only, persona holder,
        PII, limit) and committed; returns the block (plus ``redacted`` when the guard redacted)."""
        ref = self.resolve(label, user=user, agent=agent, persona=persona)
        writer = self.store.user(user)
        agent = validate.name(agent, what="agent") if agent is not None else None
        by_agent = agent is not None if by_agent is None else bool(by_agent)
        define = checked_define(define or {})
        snap = self.snapshot(ref)
        self._check_writer(snap, writer=writer, by_agent=by_agent)
        old = snap.value
        new = block_text(change(old), allow_empty=True)
        found: list[dict] = []
        if ref.scope == "persona":
            new, found = self._pii_guard(ref, old, new, writer, redact)
        limit = define.get("limit", snap.definition["limit"])
        check_growth(ref, new, old, limit)
        if "limit" in define and len(new) > limit:
            raise limit_error(ref, len(new), len(old), limit)
        self.commit(snap, new, writer=writer if ref.scope == "persona" else ref.user, agent=agent, define=define)
        return self._written(ref, found)

    def set(self, label: str, value: str | bytes, *, user: str | None = None, agent: str | None = None,
            persona: str | None = None, limit: int | None = None, description: str | None = None,
            read_only: bool | None = None, redact: bool = False, by_agent: bool | None = None) -> dict:
        """Replace a block's text (as a diff, so concurrent edits elsewhere survive); creates
        the block.  ``by_agent`` (default: ``agent`` given): read-only blocks refuse it.
        Over the limit: InvalidInput, nothing written.  Persona blocks: PII guard (``redact``)."""
        value = block_text(value, allow_empty=True)
        return self.write(label, lambda old: value, user=user, agent=agent, persona=persona, redact=redact,
                          by_agent=by_agent, define={"limit": limit, "description": description,
                                                     "read_only": read_only})

    def append(self, label: str, text: str | bytes, **kw: Any) -> dict:
        """Add ``text`` as a line at the end (Letta's core_memory_append).  Every appended line
        ends with a newline (and starts on a new line), so concurrent appends, which the CRDT
        may put in either order at the same place, never run into one line.  Keywords: user,
        agent, persona, redact, by_agent (as :meth:`set`)."""
        text = block_text(text)

        def change(old: str) -> str:
            return old + ("\n" if old and not old.endswith("\n") else "") + text + ("" if text.endswith("\n") else "\n")

        return self.write(label, change, **kw)

    def replace(self, label: str, old: str | bytes, new: str | bytes, **kw: Any) -> dict:
        """Replace every occurrence of ``old`` with ``new`` (Letta's core_memory_replace);
        ``old`` must occur.  The result has ``replaced``: how many occurrences.  Keywords as
        :meth:`append`."""
        old = block_text(old, what="OLD")
        new = block_text(new, what="NEW", allow_empty=True)
        count = 0

        def change(current: str) -> str:
            nonlocal count
            count = current.count(old)
            if not count:
                raise InvalidInput(f"{old!r} does not occur in block {label!r}",
                                   hint=f"`bm block show {label}` prints its text; OLD must match exactly")
            return current.replace(old, new)

        out = self.write(label, change, **kw)
        out["replaced"] = count
        return out

    def define(self, label: str, *, limit: int | None = None, description: str | None = None,
               read_only: bool | None = None, user: str | None = None, agent: str | None = None,
               persona: str | None = None, by_agent: bool | None = None) -> dict:
        """Create a block, or change its limit, description or read-only flag (LWW per field).
        A limit below the current length is refused."""
        define = checked_define({"limit": limit, "description": description, "read_only": read_only})
        ref = self.resolve(label, user=user, agent=agent, persona=persona, own=True)
        agent_v = validate.name(agent, what="agent") if agent is not None else None
        by_agent = agent_v is not None if by_agent is None else bool(by_agent)
        snap = self.snapshot(ref)
        self._check_writer(snap, writer=self.store.user(user), by_agent=by_agent)
        if "limit" in define and len(snap.value) > define["limit"]:
            n, lim = len(snap.value), define["limit"]
            raise InvalidInput(f"block {ref.label!r} is {n:,} characters, {n - lim:,} over the new limit of {lim:,}",
                               hint=f"trim it first (`bm block replace {ref.label} OLD NEW`), "
                                    f"or choose a limit of at least {n:,}")
        self.commit(snap, None, writer=None, define=define)
        return _out(rows.row(self.sql, ref.id))

    def ensure_persona_block(self, handle: str) -> dict:
        """The shared block ``<handle>_service_experience`` (8,000 characters), defined if missing.
        Call it outside an op-log write transaction (or append :func:`persona_block_op` in yours)."""
        ref = Ref("persona", None, None, handle, persona_label(handle))
        snap = self.snapshot(ref)
        if snap.row is None:
            self.commit(snap, None, writer=None)
        return _out(rows.row(self.sql, ref.id))

    # -- edit (the CLI's `bm block edit`: the diff against the text the editor started from) --------
    def edit_begin(self, label: str, *, user: str | None = None, agent: str | None = None,
                   persona: str | None = None) -> Snapshot:
        ref = self.resolve(label, user=user, agent=agent, persona=persona)
        snap = self.snapshot(ref)
        if snap.row is None and defaults_for(ref) is None:
            self.get(label, user=user, agent=agent, persona=persona)  # raises NotFound
        return snap

    def edit_commit(self, snap: Snapshot, new: str | bytes, *, user: str | None = None,
                    agent: str | None = None, redact: bool = False, by_agent: bool | None = None) -> dict:
        """Apply ``snap.value -> new`` as one update built on the snapshot's state, so edits made
        by others while the editor was open are merged, not overwritten."""
        ref = snap.ref
        writer = self.store.user(user)
        agent = validate.name(agent, what="agent") if agent is not None else None
        by_agent = agent is not None if by_agent is None else bool(by_agent)
        new = block_text(new, allow_empty=True)
        now = self.snapshot(ref)
        self._check_writer(now, writer=writer, by_agent=by_agent)
        found: list[dict] = []
        if ref.scope == "persona":
            new, found = self._pii_guard(ref, snap.value, new, writer, redact)
        if snap.row is not None and now.row is not None and now.row["state"] != snap.row["state"]:
            # others wrote meanwhile: the limit applies to what the merge will give
            update, _ = blockrules.encode_edit(snap.state, snap.value, new, blockrules.fresh_client())
            merged = blockrules.merged_text(now.state, update)
        else:
            merged = new
        check_growth(ref, merged, now.value, now.definition["limit"])
        self.commit(snap, new, writer=writer if ref.scope == "persona" else ref.user, agent=agent)
        return self._written(ref, found)

    # -- export / import --------------------------------------------------------------------------
    def export_records(self) -> Iterator[dict]:
        """One record per block (its definition and text; not its CRDT history), by id."""
        for row in rows.all_rows(self.sql):
            b = _out(row)
            yield {k: b[k] for k in EXPORT_FIELDS}

    def import_ops(self, rec: dict) -> list[tuple[str, dict]] | None:
        """The ops that restore one exported block; None when the store has it already.
        The limit is checked like any write: an over-limit block is refused."""
        ref = _import_ref(rec)
        if rows.exists(self.sql, ref.id):
            return None
        define = checked_define({"limit": rec["limit"], "description": rec["description"],
                                 "read_only": rec["read_only"]})
        value = block_text(rec["value"], what="value", allow_empty=True)
        if len(value) > define["limit"]:
            n, lim = len(value), define["limit"]
            raise InvalidInput(f"block {ref.label!r} of {ref.where()} would be {n:,} characters, {n - lim:,} over "
                               f"its limit of {lim:,}",
                               hint='shorten its "value" or raise its "limit" in the file; '
                                    "nothing from this batch was imported")
        ops: list[tuple[str, dict]] = [(Kind.BLOCK_DEFINE, define_payload(ref, define, FIELDS))]
        if value:
            client = blockrules.fresh_client()
            update, deps = blockrules.encode_edit(None, "", value, client)
            ops.append((Kind.BLOCK_UPDATE, {"id": ref.id, "scope": ref.scope, "origin": client, "seq": 1,
                                         "update": blockrules.b64(update), "deps": blockrules.b64(deps),
                                         "user": ref.user, "agent": None}))
        return ops

    # -- doctor -----------------------------------------------------------------------------------
    def doctor_check(self) -> tuple[str, bool, str, str]:
        """``bm doctor``'s line on blocks: over their limit after a merge, updates waiting."""
        over = rows.over_limit(self.sql)
        n, waiting = rows.counts(self.sql)
        detail = f"{n} block(s)"
        if over:
            detail += "; over their limit after merging concurrent edits: " + ", ".join(
                f"{label!r} of {owner} ({by:,} over)" for label, owner, by in over[:5])
        if waiting:
            detail += f"; {waiting} update(s) waiting for earlier ones (an incomplete sync?)"
        label = over[0][0] if over else "LABEL"
        return ("blocks", not over, detail,
                f"trim it below its limit with `bm block replace {label} OLD NEW` or `bm block edit {label}`, "
                f"or raise it with `bm block define {label} --limit N`")


def _import_ref(rec: dict) -> Ref:
    """The block an exported record names, checked."""
    scope = rec.get("scope")
    if scope not in SCOPES:
        raise InvalidInput(f"block scope must be one of {', '.join(SCOPES)}, got {scope!r}",
                           hint="is this a `bm export` file?")
    label = validate_label(rec["label"])
    if scope == "persona":
        ref = Ref("persona", None, None, validate_handle(rec["persona"]), label)
    else:
        user = validate.name(rec["user"], what="user")
        agent = validate.name(rec["agent"], what="agent") if scope == "agent" else None
        ref = Ref(scope, user, agent, None, label)
    if rec.get("id") is not None and rec["id"] != ref.id:
        raise InvalidInput(f"block id {rec['id']!r} does not match its scope, owner and label",
                           hint="is this a `bm export` file? block ids are derived, not chosen")
    return ref
