"""How block ops are made and applied: a block's identity (:class:`Ref`) and the
definition a label starts with, the limit rule of writes, the pycrdt codec of a block's
text and the projection of ``block.define`` / ``block.update`` into SQLite
(brandmind/storage/blocks.py).
What a block is, and the API: brandmind/blocks.py.  The pure decisions (per-field LWW of a
definition, when an update is ready) are in brandmind/merge.py.

Op kinds (see also brandmind/projection.py)
-------------------------------------------
``block.define`` {id, scope, user, agent, persona, label, description, limit, read_only,
                  explicit}: ``explicit`` lists the fields this op sets; the others carry the
                  label's defaults.  Merge: per field, the explicit value with the greatest
                  HLC wins (LWW); a field nobody set keeps its default.  Kept per op in
                  ``block_defs`` so a forget can fold them again.
``block.update`` {id, scope, origin, seq, update, deps, user, agent}: ``update`` is the
                  base64 pycrdt update, ``origin`` the pycrdt client id that made it and
                  ``seq`` its number among that origin's updates of this block, ``deps`` the
                  base64 state vector the writer built it on, ``user`` the owner (user and
                  agent scopes) or the writer (persona scope).  Merge: CRDT.  pycrdt 0.14.13
                  diverges when one origin's updates are applied out of order, and loses
                  updates whose dependencies are missing once its state is saved, so the
                  projection applies an update only when it is the next ``seq`` of its
                  origin AND the block's state vector covers its ``deps``; anything else
                  waits in ``block_updates`` (applied = 0) until the gap fills.  Which
                  updates are applied is thus a function of the set of ops, and so is the
                  text (CRDT convergence); the stored state bytes may differ by arrival order.

The writing process uses a pycrdt client id of its replica for the block
(:func:`replica_client`) and counts ``seq`` on from the projection; if another process of
the same replica appended an update with that client id since this process read the block,
the write uses a fresh random client id instead (seq 1), so two processes never reuse the
same (client, clock) range.  Projection state lives in SQLite (migration ``0006_blocks``):
``blocks`` (the merged doc state, the current text, the merged definition),
``block_defs`` and ``block_updates``.

Forgetting a user (``user.forget``)
----------------------------------
The user's own blocks (user and agent scopes) go: their define and update ops stamped
before the forget are redacted in the log and ignored if they arrive later, and the
projection drops them (a block with later ops is folded again from those).  Their edits of
shared persona blocks are NOT removed: they passed the PII guard when written, other users'
later edits are built on them, and a CRDT cannot drop an edit without breaking the history.
Instead the writer is anonymised: ``user``/``agent`` of those ops become null in the log and
in ``block_updates``.
"""
from __future__ import annotations

import base64
import difflib
import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from . import merge
from .errors import InvalidInput, StoreCorrupt
from .ops import Kind
from .storage import blocks as store
from .storage.blocks import PERSONA_SUFFIX, block_id, validate_handle

if TYPE_CHECKING:  # pragma: no cover
    from .sqlstore import SQLStore

ROOT = "text"  # the name of the Text in each block's pycrdt doc
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")
PERSONA_LIMIT = 8_000
CUSTOM_LIMIT = 2_000
DEFAULTS: dict[str, dict] = {
    "agent_persona": {"limit": 2_000, "read_only": True, "description":
                      "The agent's identity, capabilities and role. Read-only to agents."},
    "human": {"limit": 3_000, "read_only": False, "description":
              "Personal facts about the user: preferences, communication style, background, habits "
              "(not their professional role or industry: those go in user_persona_profile). "
              "Private to the user."},
    "user_persona_profile": {"limit": 5_000, "read_only": False, "description":
                             "The user's professional context: industry, role, typical KPIs and "
                             "analytical patterns. No POI names, addresses, proprietary insights or "
                             "personal information. Private to the user."},
}
PERSONA_DESCRIPTION = (
    "Gained experience and/or lessons learned from servicing or responding to queries typical or "
    "quintessential of users associated with the {handle} persona. This memory block is shared, and "
    "it is therefore VITAL that you not add any PII or sensitive or proprietary information about any "
    "specific user in here, e.g. POIs they're interested in, or particular and specific insights they "
    "found useful, but rather information that will help a future agent servicing a similar ask in a "
    "different instance for a different user.")


# -- identity and definitions: what a block.define op carries ----------------------------------
@dataclass(frozen=True)
class Ref:
    scope: str
    user: str | None
    agent: str | None
    persona: str | None
    label: str

    @property
    def id(self) -> str:
        return block_id(self.scope, self.user, self.agent, self.persona, self.label)

    def where(self) -> str:
        """For messages: whose block this is."""
        if self.scope == "persona":
            return f"persona {self.persona!r}"
        if self.scope == "agent":
            return f"user {self.user!r}, agent {self.agent!r}"
        return f"user {self.user!r}"

    def flags(self) -> str:
        """The CLI options that name this block (for hints)."""
        if self.scope == "persona":
            return "" if self.label == f"{self.persona}{PERSONA_SUFFIX}" else f" --persona {self.persona}"
        out = f" --user {self.user}"
        return out + (f" --agent {self.agent}" if self.agent else "")


def persona_label(handle: str) -> str:
    return validate_handle(handle) + PERSONA_SUFFIX


def defaults_for(ref: Ref) -> dict | None:
    """The definition a known label starts with (None: a custom label)."""
    if ref.scope == "persona" and ref.label == ref.persona + PERSONA_SUFFIX:
        return {"limit": PERSONA_LIMIT, "read_only": False,
                "description": PERSONA_DESCRIPTION.format(handle=ref.persona)}
    if ref.scope != "persona" and ref.label in DEFAULTS:
        return dict(DEFAULTS[ref.label])
    return None


def custom_defaults() -> dict:
    return {"limit": CUSTOM_LIMIT, "read_only": False, "description": ""}


def define_payload(ref: Ref, fields: dict, explicit: Iterable[str]) -> dict:
    """The payload of a ``block.define`` op (``explicit``: the fields it sets)."""
    return {"id": ref.id, "scope": ref.scope, "user": ref.user, "agent": ref.agent, "persona": ref.persona,
            "label": ref.label, "description": fields["description"], "limit": int(fields["limit"]),
            "read_only": bool(fields["read_only"]), "explicit": sorted(explicit)}


def persona_block_op(handle: str) -> tuple[str, dict]:
    """The ``block.define`` op (kind, payload) that attaches a persona's shared block, for a
    caller appending it in its own transaction (defining twice is harmless)."""
    ref = Ref("persona", None, None, handle, persona_label(handle))
    return Kind.BLOCK_DEFINE, define_payload(ref, defaults_for(ref) or {}, [])


# -- the limit rule of writes ---------------------------------------------------------------------
def limit_error(ref: Ref, new_len: int, old_len: int, limit: int) -> InvalidInput:
    over = new_len - limit
    msg = f"block {ref.label!r} would be {new_len:,} characters, {over:,} over its limit of {limit:,}"
    if old_len > limit:
        msg += f" (it is already {old_len - limit:,} over after merging concurrent edits: trim it first)"
    flags = ref.flags()
    return InvalidInput(msg, hint=f"shorten the text, trim the block with `bm block replace {ref.label} OLD NEW{flags}` "
                                  f"or `bm block set {ref.label} -{flags}`, or raise its limit with "
                                  f"`bm block define {ref.label} --limit N{flags}`")


def check_growth(ref: Ref, new: str, old: str, limit: int) -> None:
    """The limit rule of every write: within the limit, or no longer than before (an
    over-limit merge result can be trimmed step by step, never grown)."""
    if len(new) > limit and len(new) > len(old):
        raise limit_error(ref, len(new), len(old), limit)


# -- the pycrdt codec -------------------------------------------------------------------------------
def load(state: bytes | None, client_id: int | None = None) -> tuple[Any, Any]:
    """A pycrdt doc from ``state`` (None: empty) and its text."""
    from pycrdt import Doc, Text

    doc = Doc(client_id=client_id) if client_id is not None else Doc()
    text = doc.get(ROOT, type=Text)
    if state:
        doc.apply_update(state)
    return doc, text


def empty_state() -> bytes:
    doc, _ = load(None)
    return doc.get_update()


def diff_ops(old: str, new: str) -> list[tuple[int, int, str]]:
    """``old`` -> ``new`` as (start, end, replacement) character spans of ``old``, in order,
    from a word-level diff (common prefix and suffix first)."""
    if old == new:
        return []
    p = 0
    limit = min(len(old), len(new))
    while p < limit and old[p] == new[p]:
        p += 1
    s = 0
    while s < limit - p and old[len(old) - 1 - s] == new[len(new) - 1 - s]:
        s += 1
    a, b = old[p:len(old) - s], new[p:len(new) - s]
    if not a or not b:
        return [(p, p + len(a), b)]
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    oa, ob = [0], [0]
    for tok in ta:
        oa.append(oa[-1] + len(tok))
    for tok in tb:
        ob.append(ob[-1] + len(tok))
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append((p + oa[i1], p + oa[i2], b[ob[j1]:ob[j2]]))
    return out


def inserted_ranges(old: str, new: str) -> list[tuple[int, int]]:
    """Spans of ``new`` that ``old`` did not have."""
    out, shift = [], 0
    for start, end, repl in diff_ops(old, new):
        pos = start + shift
        if repl:
            out.append((pos, pos + len(repl)))
        shift += len(repl) - (end - start)
    return out


def encode_edit(state: bytes | None, old: str, new: str, client_id: int) -> tuple[bytes, bytes]:
    """The pycrdt update that turns the block doc ``state`` (whose text is ``old``) into one
    whose text is ``new``, made by ``client_id``; returns (update, deps = state vector before)."""
    doc, text = load(state, client_id)
    if str(text) != old:
        raise StoreCorrupt("a block's stored text does not match its stored CRDT state",
                           hint="run `bm rebuild`")
    before = doc.get_state()
    ops = diff_ops(old, new)
    with doc.transaction():
        for start, end, repl in reversed(ops):
            # pycrdt 0.14 Text positions are UTF-8 byte offsets
            b_start = len(old[:start].encode("utf-8"))
            b_end = b_start + len(old[start:end].encode("utf-8"))
            if b_end > b_start:
                del text[b_start:b_end]
            if repl:
                text.insert(b_start, repl)
    if str(text) != new:  # pragma: no cover - a pycrdt indexing change would land here
        raise StoreCorrupt("the block edit did not apply cleanly to its CRDT text",
                           hint="report this bug; the block was not changed")
    return doc.get_update(before), before


def merged_text(state: bytes, update: bytes) -> str:
    """The text of the doc ``state`` with ``update`` applied."""
    doc, text = load(state)
    doc.apply_update(update)
    return str(text)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def fresh_client() -> int:
    return (int.from_bytes(os.urandom(7), "big") >> 4) or 1


def replica_client(replica: str, block: str, created: str) -> int:
    """This replica's pycrdt client id for a block (a new one after the block is re-created)."""
    digest = hashlib.sha256(f"{replica}\0{block}\0{created}".encode()).digest()
    return (int.from_bytes(digest[:7], "big") >> 4) or 1


# -- the projection (called from projection.apply_sql_side) ----------------------------------------------
def apply_op(sql: "SQLStore", op: dict, hk: str, *,
             forgotten_at: Callable[["SQLStore", str | None], str | None]) -> None:
    """``block.define`` / ``block.update`` into the SQLite projection (merge rules above);
    ``hk``: the op's HLC key, ``forgotten_at(sql, user)``: the HLC key of the user's last
    ``user.forget`` (None: never forgotten)."""
    kind, p = op["kind"], op["payload"]
    if p.get("scope") != "persona":
        if merge.forgotten_before(hk, forgotten_at(sql, p.get("user"))):
            return  # the owner was forgotten after this op was made
    if kind == Kind.BLOCK_DEFINE:
        store.add_define(sql, p["id"], op["id"], hk, p["scope"], p.get("user"),
                         json.dumps(p, ensure_ascii=False, sort_keys=True))
        fold(sql, p["id"])
    elif kind == Kind.BLOCK_UPDATE:
        store.add_update(sql, p["id"], int(p["origin"]), int(p["seq"]), op["id"], hk, p["scope"], p.get("user"),
                         p.get("agent"), base64.b64decode(p["update"]), base64.b64decode(p.get("deps") or "AA=="))
        drain(sql, p["id"])


def fold(sql: "SQLStore", bid: str) -> None:
    """The block's definition from its define ops (per-field LWW); creates the row."""
    defs = [(hlc, json.loads(payload)) for hlc, payload in store.defines(sql, bid)]
    if not defs:  # all forgotten: later updates (if any) wait for a define again
        store.drop(sql, bid)
        return
    fields = merge.block_definition((p for _, p in defs), store.FIELDS)
    if not store.exists(sql, bid):
        store.create(sql, bid, defs[0][1], fields, defs[0][0], empty_state())
        drain(sql, bid)
    else:
        store.redefine(sql, bid, fields, defs[0][0])


def drain(sql: "SQLStore", bid: str) -> None:
    """Apply every waiting update of the block that is now ready: the next seq of its origin,
    with its deps covered; repeat until none is.  Then store the state and the text."""
    found = store.state(sql, bid)
    if found is None:
        return  # not defined (yet): updates wait
    waiting = store.waiting(sql, bid)
    if not waiting:
        return
    doc, text = load(found[0])
    have = merge.decode_state_vector(doc.get_state())
    high = store.applied_seqs(sql, bid)
    applied = []
    progress = True
    while progress and waiting:
        progress = False
        rest = []
        for origin, seq, data, deps in waiting:
            if merge.block_update_ready(origin, seq, merge.decode_state_vector(deps), high, have):
                doc.apply_update(data)
                have = merge.decode_state_vector(doc.get_state())
                high[origin] = seq
                applied.append((origin, seq))
                progress = True
            else:
                rest.append((origin, seq, data, deps))
        waiting = rest
    if not applied:
        return
    store.mark_applied(sql, bid, applied)
    store_doc(sql, bid, doc.get_update(), str(text))


def store_doc(sql: "SQLStore", bid: str, state: bytes, value: str) -> None:
    """Store the block's doc and text, stamped with its latest applied update."""
    last = store.last_applied(sql, bid)
    updated_at = int(last[0].split(".", 1)[0]) if last else None
    store.set_state(sql, bid, state, value, updated_at, last[1] if last else None)


def refold_updates(sql: "SQLStore", bid: str) -> None:
    """Rebuild a block's doc from the updates it still has (after some were forgotten)."""
    if not store.exists(sql, bid):
        return
    store.unapply(sql, bid)
    store_doc(sql, bid, empty_state(), "")
    drain(sql, bid)


def forget_user(sql: "SQLStore", user: str, hk: str) -> None:
    """``user.forget`` at HLC ``hk``: drop the user's own blocks' ops stamped before it and
    fold what is left; anonymise their earlier edits of persona blocks."""
    for bid in store.drop_owned_before(sql, user, hk):
        fold(sql, bid)
        refold_updates(sql, bid)
    for bid in store.anonymise_before(sql, user, hk):
        found = store.state(sql, bid)
        if found:
            store_doc(sql, bid, found[0], found[1])
