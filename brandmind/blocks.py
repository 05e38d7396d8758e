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
             :func:`core_blocks`).  With ``agent=``, a label names the block that agent
             sees: its own block of that label if it has one, else the user's; a block not
             written yet is the user's for ``human`` and ``user_persona_profile`` (facts
             about the user, shared by their agents) and the agent's for ``agent_persona``
             and custom labels.  ``define_block(..., agent=...)`` always defines the
             agent's own block
``persona``  owner = a persona handle: the shared ``<handle>_service_experience`` block
             (8,000 characters), attached to every user holding the persona; readable and
             writable by all of their agents.  A label ending in ``_service_experience``
             always names a persona block; ``persona=`` names one explicitly

Default labels, created on their first write: ``agent_persona`` (2,000 characters,
read-only to agents), ``human`` (3,000), ``user_persona_profile`` (5,000); any other label
is a custom block (2,000 unless ``limit`` says otherwise; :func:`define_block`).
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
Only a user holding the persona (``brandmind.personas.user_personas``) may write its
block.  Every write is scanned by ``brandmind.pii.scan`` with the writer's private terms
(``pii.private_terms_for``); hits in the text being added are refused with their spans
listed, or, with ``redact=True``, replaced by ``[REDACTED:<kind>]`` and reported.

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
(``_replica_client``) and counts ``seq`` on from the projection; if another process of the
same replica appended an update with that client id since this process read the block, the
write uses a fresh random client id instead (seq 1), so two processes never reuse the same
(client, clock) range.  Projection state lives in SQLite (migration ``0006_blocks``):
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
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from . import validate
from .clock import iso
from .errors import InvalidInput, NotFound, StoreCorrupt, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory
    from .sqlstore import SQLStore

SCOPES = ("user", "agent", "persona")
PERSONA_SUFFIX = "_service_experience"
PERSONA_LIMIT = 8_000
CUSTOM_LIMIT = 2_000
MAX_LIMIT = 100_000
MAX_DESCRIPTION = 2_000
ROOT = "text"  # the name of the Text in each block's pycrdt doc
FIELDS = ("description", "limit", "read_only")
DEFAULT_ORDER = ("agent_persona", "human", "user_persona_profile")
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

_LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,99}$")
_HANDLE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*$")
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")


# -- schema (sqlstore.MIGRATIONS "0006_blocks") -------------------------------------------------
def schema() -> list[str]:
    return [
        """CREATE TABLE blocks(
            id TEXT PRIMARY KEY,
            scope TEXT NOT NULL,            -- user | agent | persona
            user_id TEXT,                   -- owner (user and agent scopes)
            agent_id TEXT,                  -- agent scope
            persona TEXT,                   -- persona scope: the handle
            label TEXT NOT NULL,
            description TEXT NOT NULL,
            char_limit INTEGER NOT NULL,
            read_only INTEGER NOT NULL,
            created_hlc TEXT NOT NULL,      -- smallest HLC of its defines
            state BLOB NOT NULL,            -- the merged pycrdt doc (doc.get_update())
            value TEXT NOT NULL,            -- its text
            over_limit INTEGER NOT NULL,    -- length(value) > char_limit (after a merge)
            updated_at INTEGER,             -- wall ms of the applied update with the greatest HLC
            updated_by TEXT                 -- its writer
        )""",
        "CREATE INDEX blocks_owner ON blocks(user_id, agent_id)",
        "CREATE INDEX blocks_persona ON blocks(persona)",
        # every define op (folded per field, LWW by HLC)
        """CREATE TABLE block_defs(
            block_id TEXT NOT NULL, op_id TEXT NOT NULL, hlc TEXT NOT NULL, scope TEXT NOT NULL,
            user_id TEXT, payload TEXT NOT NULL, PRIMARY KEY(block_id, op_id))""",
        # every update op: applied = 1 when it is in the block's doc, 0 while it waits for
        # an earlier seq of its origin or for its deps
        """CREATE TABLE block_updates(
            block_id TEXT NOT NULL, origin INTEGER NOT NULL, seq INTEGER NOT NULL,
            op_id TEXT NOT NULL, hlc TEXT NOT NULL, scope TEXT NOT NULL, user_id TEXT,
            agent_id TEXT, data BLOB NOT NULL, deps BLOB NOT NULL, applied INTEGER NOT NULL,
            PRIMARY KEY(block_id, origin, seq))""",
        "CREATE INDEX block_updates_user ON block_updates(user_id, scope)",
        "CREATE INDEX block_defs_user ON block_defs(user_id, scope)",
    ]


# -- identity ------------------------------------------------------------------------------------
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


def block_id(scope: str, user: str | None, agent: str | None, persona: str | None, label: str) -> str:
    owner = persona if scope == "persona" else (f"{user}\0{agent}" if scope == "agent" else user)
    digest = hashlib.sha256(f"{scope}\0{owner}\0{label}".encode()).hexdigest()
    return "k_" + digest[:24]


def validate_label(label: Any) -> str:
    if not isinstance(label, str) or not _LABEL.match(label):
        raise InvalidInput(f"invalid block label {label!r}",
                           hint="a label is 1-100 letters, digits, '_' or '-', starting with a letter, "
                                "e.g. human, agent_persona, project_notes")
    return label


def validate_handle(handle: Any) -> str:
    if not isinstance(handle, str) or not _HANDLE.match(handle) or len(handle) > 80:
        raise InvalidInput(f"invalid persona handle {handle!r}",
                           hint="a handle is <industry>_<role> in lower case, e.g. qsr_real_estate")
    return handle


def persona_label(handle: str) -> str:
    return validate_handle(handle) + PERSONA_SUFFIX


USER_LABELS = ("human", "user_persona_profile")  # with agent=, created for the user, not the agent


def resolve(mem: "Memory", label: str, *, user: str | None = None, agent: str | None = None,
            persona: str | None = None, own: bool = False) -> Ref:
    """The block LABEL names for this user / agent / persona (see the module docstring).

    With ``agent``, the block that agent sees: its own block of that label if it has one,
    else the user's; one that does not exist yet is the user's for ``human`` and
    ``user_persona_profile``, the agent's for other labels.  ``own``: the agent's own block
    regardless (what :func:`define_block` with ``agent`` defines)."""
    label = validate_label(label)
    if persona is not None:
        persona = validate_handle(persona)
        if label.endswith(PERSONA_SUFFIX) and label != persona + PERSONA_SUFFIX:
            raise UsageError(f"block {label!r} is not the shared block of persona {persona!r}",
                             hint=f"the shared block of {persona} is {persona + PERSONA_SUFFIX}")
        return Ref("persona", None, None, persona, label)
    if label.endswith(PERSONA_SUFFIX):
        return Ref("persona", None, None, validate_handle(label[:-len(PERSONA_SUFFIX)]), label)
    user = mem.store.user(user)
    if agent is None:
        return Ref("user", user, None, None, label)
    mine = Ref("agent", user, validate.name(agent, what="agent"), None, label)
    if own:
        return mine
    theirs = Ref("user", user, None, None, label)
    mem.store.catch_up()
    found = {r[0] for r in mem.sql.conn.execute("SELECT id FROM blocks WHERE id IN (?, ?)", (mine.id, theirs.id))}
    if mine.id in found:
        return mine
    if theirs.id in found or label in USER_LABELS:
        return theirs
    return mine


def defaults_for(ref: Ref) -> dict | None:
    """The definition a known label starts with (None: a custom label)."""
    if ref.scope == "persona" and ref.label == ref.persona + PERSONA_SUFFIX:
        return {"limit": PERSONA_LIMIT, "read_only": False,
                "description": PERSONA_DESCRIPTION.format(handle=ref.persona)}
    if ref.scope != "persona" and ref.label in DEFAULTS:
        return dict(DEFAULTS[ref.label])
    return None


def _custom_defaults() -> dict:
    return {"limit": CUSTOM_LIMIT, "read_only": False, "description": ""}


def _check_limit_value(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"a block limit must be a whole number from 1 to {MAX_LIMIT:,}, got {limit!r}",
                           hint="e.g. --limit 3000")
    return limit


def _check_description(description: Any) -> str:
    if not isinstance(description, str):
        raise InvalidInput(f"a block description must be a string, got {type(description).__name__}",
                           hint='e.g. --description "What the agent knows about the project"')
    description = _block_text(description, what="description", allow_empty=True)
    if len(description) > MAX_DESCRIPTION:
        raise InvalidInput(f"the description is {len(description):,} characters, over {MAX_DESCRIPTION:,}",
                           hint="shorten it; the block's text is where content goes")
    return description


def _block_text(value: Any, *, what: str = "text", allow_empty: bool = False) -> str:
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


# -- pycrdt plumbing -----------------------------------------------------------------------------------
def _load(state: bytes | None, client_id: int | None = None) -> tuple[Any, Any]:
    from pycrdt import Doc, Text

    doc = Doc(client_id=client_id) if client_id is not None else Doc()
    text = doc.get(ROOT, type=Text)
    if state:
        doc.apply_update(state)
    return doc, text


def empty_state() -> bytes:
    doc, _ = _load(None)
    return doc.get_update()


def _read_uint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def decode_state_vector(data: bytes) -> dict[int, int]:
    """A lib0-encoded state vector (``doc.get_state()``): {client id: next clock}."""
    count, pos = _read_uint(data, 0)
    out: dict[int, int] = {}
    for _ in range(count):
        client, pos = _read_uint(data, pos)
        clock, pos = _read_uint(data, pos)
        out[client] = clock
    return out


def _covers(have: dict[int, int], need: dict[int, int]) -> bool:
    return all(have.get(client, 0) >= clock for client, clock in need.items())


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


def encode_edit(state: bytes | None, old: str, new: str, client_id: int) -> tuple[bytes, bytes]:
    """The pycrdt update that turns the block doc ``state`` (whose text is ``old``) into one
    whose text is ``new``, made by ``client_id``; returns (update, deps = state vector before)."""
    doc, text = _load(state, client_id)
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


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _fresh_client() -> int:
    return (int.from_bytes(os.urandom(7), "big") >> 4) or 1


def _replica_client(replica: str, block: str, created: str) -> int:
    """This replica's pycrdt client id for a block (a new one after the block is re-created)."""
    digest = hashlib.sha256(f"{replica}\0{block}\0{created}".encode()).digest()
    return (int.from_bytes(digest[:7], "big") >> 4) or 1


# -- projection (called from projection.apply_sql_side) ----------------------------------------------
def _hlc_key(hlc: list) -> str:
    from .projection import hlc_key

    return hlc_key(hlc)


def _forgotten_at(sql: "SQLStore", user: str | None) -> str | None:
    if not user:
        return None
    row = sql.conn.execute("SELECT hlc FROM tombstones WHERE id=?", ("user:" + user,)).fetchone()
    return row[0] if row else None


def apply_op(sql: "SQLStore", op: dict) -> None:
    """``block.define`` / ``block.update`` into the SQLite projection (merge rules above)."""
    kind, p = op["kind"], op["payload"]
    hk = _hlc_key(op["hlc"])
    if p.get("scope") != "persona":
        forgotten = _forgotten_at(sql, p.get("user"))
        if forgotten is not None and hk < forgotten:
            return  # the owner was forgotten after this op was made
    c = sql.conn
    if kind == "block.define":
        c.execute("INSERT OR IGNORE INTO block_defs VALUES(?,?,?,?,?,?)",
                  (p["id"], op["id"], hk, p["scope"], p.get("user"),
                   json.dumps(p, ensure_ascii=False, sort_keys=True)))
        _fold(sql, p["id"])
    elif kind == "block.update":
        c.execute("INSERT OR IGNORE INTO block_updates VALUES(?,?,?,?,?,?,?,?,?,?,0)",
                  (p["id"], int(p["origin"]), int(p["seq"]), op["id"], hk, p["scope"], p.get("user"),
                   p.get("agent"), base64.b64decode(p["update"]), base64.b64decode(p.get("deps") or "AA=="),))
        _drain(sql, p["id"])


def _fold(sql: "SQLStore", bid: str) -> None:
    """The block's definition from its define ops (per-field LWW); creates the row."""
    c = sql.conn
    defs = [(hlc, json.loads(payload)) for hlc, payload in c.execute(
        "SELECT hlc, payload FROM block_defs WHERE block_id=? ORDER BY hlc, op_id", (bid,))]
    if not defs:  # all forgotten: later updates (if any) wait for a define again
        c.execute("DELETE FROM blocks WHERE id=?", (bid,))
        c.execute("UPDATE block_updates SET applied=0 WHERE block_id=?", (bid,))
        return
    first = defs[0][1]
    fields = {f: first[f] for f in FIELDS}
    for _, p in defs:  # ascending HLC: the last explicit value wins
        for f in p.get("explicit", []):
            if f in FIELDS:
                fields[f] = p[f]
    row = c.execute("SELECT value FROM blocks WHERE id=?", (bid,)).fetchone()
    if row is None:
        c.execute("INSERT INTO blocks VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,NULL)",
                  (bid, first["scope"], first.get("user"), first.get("agent"), first.get("persona"),
                   first["label"], fields["description"], int(fields["limit"]), int(bool(fields["read_only"])),
                   defs[0][0], empty_state(), "", 0))
        _drain(sql, bid)
    else:
        c.execute("UPDATE blocks SET description=?, char_limit=?, read_only=?, created_hlc=?, "
                  "over_limit = (length(value) > ?) WHERE id=?",
                  (fields["description"], int(fields["limit"]), int(bool(fields["read_only"])), defs[0][0],
                   int(fields["limit"]), bid))


def _drain(sql: "SQLStore", bid: str) -> None:
    """Apply every waiting update of the block that is now ready: the next seq of its origin,
    with its deps covered; repeat until none is.  Then store the state and the text."""
    c = sql.conn
    row = c.execute("SELECT state FROM blocks WHERE id=?", (bid,)).fetchone()
    if row is None:
        return  # not defined (yet): updates wait
    waiting = list(c.execute("SELECT origin, seq, data, deps FROM block_updates "
                             "WHERE block_id=? AND applied=0 ORDER BY origin, seq", (bid,)))
    if not waiting:
        return
    doc, text = _load(row[0])
    have = decode_state_vector(doc.get_state())
    high = dict(c.execute("SELECT origin, max(seq) FROM block_updates WHERE block_id=? AND applied=1 "
                          "GROUP BY origin", (bid,)).fetchall())
    applied = []
    progress = True
    while progress and waiting:
        progress = False
        rest = []
        for origin, seq, data, deps in waiting:
            if seq == high.get(origin, 0) + 1 and _covers(have, decode_state_vector(deps)):
                doc.apply_update(data)
                have = decode_state_vector(doc.get_state())
                high[origin] = seq
                applied.append((origin, seq))
                progress = True
            else:
                rest.append((origin, seq, data, deps))
        waiting = rest
    if not applied:
        return
    c.executemany("UPDATE block_updates SET applied=1 WHERE block_id=? AND origin=? AND seq=?",
                  [(bid, o, s) for o, s in applied])
    _store(sql, bid, doc.get_update(), str(text))


def _store(sql: "SQLStore", bid: str, state: bytes, value: str) -> None:
    c = sql.conn
    last = c.execute("SELECT hlc, user_id FROM block_updates WHERE block_id=? AND applied=1 "
                     "ORDER BY hlc DESC, op_id DESC LIMIT 1", (bid,)).fetchone()
    updated_at = int(last[0].split(".", 1)[0]) if last else None
    c.execute("UPDATE blocks SET state=?, value=?, over_limit = (? > char_limit), updated_at=?, updated_by=? "
              "WHERE id=?", (state, value, len(value), updated_at, last[1] if last else None, bid))


def _refold_updates(sql: "SQLStore", bid: str) -> None:
    """Rebuild a block's doc from the updates it still has (after some were forgotten)."""
    c = sql.conn
    if c.execute("SELECT 1 FROM blocks WHERE id=?", (bid,)).fetchone() is None:
        return
    c.execute("UPDATE block_updates SET applied=0 WHERE block_id=?", (bid,))
    _store(sql, bid, empty_state(), "")
    _drain(sql, bid)


def forget_user(sql: "SQLStore", user: str, hk: str) -> None:
    """``user.forget`` at HLC ``hk``: drop the user's own blocks' ops stamped before it and
    fold what is left; anonymise their earlier edits of persona blocks."""
    c = sql.conn
    owned = sorted({r[0] for r in c.execute(
        "SELECT block_id FROM block_defs WHERE user_id=? AND scope != 'persona' AND hlc < ? "
        "UNION SELECT block_id FROM block_updates WHERE user_id=? AND scope != 'persona' AND hlc < ?",
        (user, hk, user, hk))})
    c.execute("DELETE FROM block_defs WHERE user_id=? AND scope != 'persona' AND hlc < ?", (user, hk))
    c.execute("DELETE FROM block_updates WHERE user_id=? AND scope != 'persona' AND hlc < ?", (user, hk))
    for bid in owned:
        _fold(sql, bid)
        _refold_updates(sql, bid)
    shared = sorted({r[0] for r in c.execute(
        "SELECT block_id FROM block_updates WHERE user_id=? AND scope = 'persona' AND hlc < ?", (user, hk))})
    c.execute("UPDATE block_updates SET user_id=NULL, agent_id=NULL WHERE user_id=? AND scope='persona' AND hlc < ?",
              (user, hk))
    for bid in shared:
        row = c.execute("SELECT state, value FROM blocks WHERE id=?", (bid,)).fetchone()
        if row:
            _store(sql, bid, row[0], row[1])


# -- forgetting in the log (memory.forget_user) --------------------------------------------------------
def owned_by(op: dict, user: str) -> bool:
    """Whether a block op carries ``user``'s content or name (forget redacts it)."""
    return op["kind"] in ("block.define", "block.update") and op["payload"].get("user") == user


def redacted(op: dict) -> dict:
    """The payload a forgotten user's block op is replaced with: nothing for their own
    blocks; their shared-block edits stay (others built on them) without their name."""
    p = op["payload"]
    if op["kind"] == "block.update" and p.get("scope") == "persona":
        return {**p, "user": None, "agent": None}
    return {"id": p["id"], "redacted": True}


# -- reads ---------------------------------------------------------------------------------------------
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


def _row(mem: "Memory", bid: str) -> dict | None:
    rows = list(mem.sql.rows("SELECT * FROM blocks WHERE id=?", (bid,)))
    return rows[0] if rows else None


def get_block(mem: "Memory", label: str, *, user: str | None = None, agent: str | None = None,
              persona: str | None = None) -> dict:
    """One block.  A default label nobody has written yet reads as empty, with its defaults."""
    ref = resolve(mem, label, user=user, agent=agent, persona=persona)
    row = _row(mem, ref.id)
    if row is not None:
        return _out(row)
    d = defaults_for(ref)
    if d is None:
        raise NotFound(f"no block {ref.label!r} for {ref.where()}",
                       hint=f"create it with `bm block set {ref.label} TEXT{ref.flags()}` "
                            "(`bm block list` shows the blocks there are)")
    return _virtual(ref, d)


def get_block_text(mem: "Memory", *, user: str, agent: str | None, label: str) -> str | None:
    """The text of a user's block (agent=None), or of the block ``agent`` sees (its own of
    that label, else the user's); None when there is none."""
    c = mem.sql.conn
    if agent is not None:
        row = c.execute("SELECT value FROM blocks WHERE id=?",
                        (block_id("agent", user, agent, None, label),)).fetchone()
        if row:
            return row[0]
    row = c.execute("SELECT value FROM blocks WHERE id=?", (block_id("user", user, None, None, label),)).fetchone()
    return row[0] if row else None


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


def core_blocks(mem: "Memory", *, user: str, agent: str | None = None) -> list[dict]:
    """The user's blocks and, with ``agent``, that agent's blocks for the user (an agent block
    replaces a user block of the same label), each {"label", "value", "limit",
    "description", "read_only", "scope"}; default labels first, then by label."""
    user = mem.store.user(user)
    rows = list(mem.sql.rows("SELECT * FROM blocks WHERE scope='user' AND user_id=?", (user,)))
    by_label = {r["label"]: r for r in rows}
    if agent is not None:
        for r in mem.sql.rows("SELECT * FROM blocks WHERE scope='agent' AND user_id=? AND agent_id=?",
                              (user, agent)):
            by_label[r["label"]] = r
    return [_brief(_out(by_label[label])) for label in sorted(by_label, key=_order)]


def _user_handles(mem: "Memory", user: str) -> list[str]:
    import importlib.util

    if importlib.util.find_spec("brandmind.personas") is None:  # pragma: no cover - not built yet
        return []
    from .personas import user_personas

    return [p["handle"] for p in user_personas(mem, user)]


def shared_blocks(mem: "Memory", *, user: str) -> list[dict]:
    """The shared blocks of every persona ``user`` holds (``personas.user_personas``), in
    that order, each as in :func:`core_blocks` plus "persona"."""
    user = mem.store.user(user)
    out = []
    for handle in _user_handles(mem, user):
        row = _row(mem, block_id("persona", None, None, handle, handle + PERSONA_SUFFIX))
        if row is not None:
            out.append(_brief(_out(row)))
    return out


def list_blocks(mem: "Memory", *, user: str | None = None, agent: str | None = None) -> list[dict]:
    """The user's blocks, their agents' blocks (only ``agent``'s when given) and the shared
    blocks of the personas they hold."""
    user = mem.store.user(user)
    if agent is None:
        rows = mem.sql.rows("SELECT * FROM blocks WHERE user_id=? AND scope IN ('user', 'agent')", (user,))
    else:
        rows = mem.sql.rows("SELECT * FROM blocks WHERE user_id=? AND (scope='user' OR "
                            "(scope='agent' AND agent_id=?))", (user, validate.name(agent, what="agent")))
    own = sorted((_out(r) for r in rows), key=lambda b: (b["agent"] or "", *_order(b["label"])))
    shared = []
    for handle in _user_handles(mem, user):
        row = _row(mem, block_id("persona", None, None, handle, handle + PERSONA_SUFFIX))
        if row is not None:
            shared.append(_out(row))
    return own + shared


# -- writes ----------------------------------------------------------------------------------------------
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

    def client(self, replica: str) -> int | None:
        return _replica_client(replica, self.ref.id, self.row["created_hlc"]) if self.row else None


def snapshot(mem: "Memory", ref: Ref) -> Snapshot:
    """The block and the projection's position, read in one SQLite transaction."""
    mem.store.catch_up()
    c = mem.sql.conn
    c.execute("BEGIN")
    try:
        applied = mem.sql.applied()
        row = _row(mem, ref.id)
        seq = 0
        if row is not None:
            client = _replica_client(mem.log.replica, ref.id, row["created_hlc"])
            seq = c.execute("SELECT coalesce(max(seq), 0) FROM block_updates WHERE block_id=? AND origin=?",
                            (ref.id, client)).fetchone()[0]
    finally:
        c.execute("COMMIT")
    return Snapshot(ref, row, applied, seq)


def _definition(snap: Snapshot) -> dict:
    row = snap.row
    if row is not None:
        return {"limit": row["char_limit"], "read_only": bool(row["read_only"]),
                "description": row["description"]}
    return defaults_for(snap.ref) or _custom_defaults()


def _limit_error(ref: Ref, new_len: int, old_len: int, limit: int) -> InvalidInput:
    over = new_len - limit
    msg = f"block {ref.label!r} would be {new_len:,} characters, {over:,} over its limit of {limit:,}"
    if old_len > limit:
        msg += f" (it is already {old_len - limit:,} over after merging concurrent edits: trim it first)"
    flags = ref.flags()
    return InvalidInput(msg, hint=f"shorten the text, trim the block with `bm block replace {ref.label} OLD NEW{flags}` "
                                  f"or `bm block set {ref.label} -{flags}`, or raise its limit with "
                                  f"`bm block define {ref.label} --limit N{flags}`")


def _check_growth(ref: Ref, new: str, old: str, limit: int) -> None:
    """The limit rule of every write: within the limit, or no longer than before (an
    over-limit merge result can be trimmed step by step, never grown)."""
    if len(new) > limit and len(new) > len(old):
        raise _limit_error(ref, len(new), len(old), limit)


def _inserted_ranges(old: str, new: str) -> list[tuple[int, int]]:
    """Spans of ``new`` that ``old`` did not have."""
    out, shift = [], 0
    for start, end, repl in diff_ops(old, new):
        pos = start + shift
        if repl:
            out.append((pos, pos + len(repl)))
        shift += len(repl) - (end - start)
    return out


def _pii_guard(mem: "Memory", ref: Ref, old: str, new: str, writer: str, redact: bool) -> tuple[str, list[dict]]:
    from . import pii

    ranges = _inserted_ranges(old, new)
    if not ranges:
        return new, []
    hits = [h for h in pii.scan(new, private_terms=pii.private_terms_for(mem, writer))
            if any(h.start < e and h.end > s for s, e in ranges)]
    if not hits:
        return new, []
    if not redact:
        raise InvalidInput(f"refused: the write to shared block {ref.label!r} contains PII: {pii.describe(hits)}",
                           hint="remove it, or pass --redact (API: redact=True) to store it as [REDACTED:<kind>]")
    return pii.redact(new, hits), [{"kind": h.kind, "text": h.text, "start": h.start, "end": h.end}
                                   for h in hits]


def _check_writer(mem: "Memory", snap: Snapshot, *, writer: str, by_agent: bool) -> None:
    ref = snap.ref
    if by_agent and _definition(snap)["read_only"]:
        raise InvalidInput(f"block {ref.label!r} is read-only to agents",
                           hint="the user can change it: `bm block set "
                                f"{ref.label} TEXT{ref.flags()}` (API: by_agent=False)")
    if ref.scope == "persona" and ref.persona not in _user_handles(mem, writer):
        raise InvalidInput(f"user {writer!r} does not hold persona {ref.persona!r}, so cannot write its shared block",
                           hint=f"assign the persona first: `bm persona assign {ref.persona} --user {writer}`")


def _define_payload(ref: Ref, fields: dict, explicit: Iterable[str]) -> dict:
    return {"id": ref.id, "scope": ref.scope, "user": ref.user, "agent": ref.agent, "persona": ref.persona,
            "label": ref.label, "description": fields["description"], "limit": int(fields["limit"]),
            "read_only": bool(fields["read_only"]), "explicit": sorted(explicit)}


def _ops_since(t: Any, arrival: int) -> Iterator[dict]:
    """Ops that reached the log after ``arrival``, read inside the write transaction ``t``."""
    cur = t.txn.cursor(db=t.db["order"])
    if not cur.set_range((arrival + 1).to_bytes(8, "big")):
        return
    for _, key in cur:
        raw = t.txn.get(key, db=t.db["ops"])
        if raw is not None:
            yield json.loads(raw)


def commit(mem: "Memory", snap: Snapshot, new: str | None, *, writer: str | None,
           agent: str | None = None, define: dict | None = None) -> None:
    """Append the ops of one write: a define when the block does not exist yet (or ``define``
    sets fields explicitly), and one update turning ``snap.value`` into ``new`` (None: no
    text change).  The update is built on the snapshot's state (see the module docstring for
    the client id)."""
    ref = snap.ref
    explicit = dict(define or {})
    need_define = snap.row is None or bool(explicit)
    fields = {**(defaults_for(ref) or _custom_defaults()), **explicit}
    text_change = new is not None and new != snap.value
    if not need_define and not text_change:
        return
    replica = mem.log.replica
    with mem.log.write() as t:
        since = [op for op in _ops_since(t, snap.applied)
                 if op["kind"] in ("block.define", "block.update") and op["payload"].get("id") == ref.id]
        if need_define and (explicit or not any(op["kind"] == "block.define" for op in since)):
            t.append("block.define", _define_payload(ref, fields, explicit))
        if text_change:
            client = snap.client(replica)
            if client is not None and not any(op["kind"] == "block.update" and op["payload"].get("origin") == client
                                              for op in since):
                seq = snap.seq + 1
            else:  # a new block, or another process of this replica wrote with that client meanwhile
                client, seq = _fresh_client(), 1
            update, deps = encode_edit(snap.state, snap.value, new, client)
            t.append("block.update", {"id": ref.id, "scope": ref.scope, "origin": client, "seq": seq,
                                      "update": _b64(update), "deps": _b64(deps), "user": writer,
                                      "agent": agent})
    mem.store.catch_up()


def write(mem: "Memory", label: str, change: Callable[[str], str], *, user: str | None = None,
          agent: str | None = None, persona: str | None = None, redact: bool = False,
          by_agent: bool | None = None, define: dict | None = None) -> dict:
    """One write: ``change(current text) -> new text``, checked (read-only, persona holder,
    PII, limit) and committed; returns the block (plus ``redacted`` when the guard redacted)."""
    ref = resolve(mem, label, user=user, agent=agent, persona=persona)
    writer = mem.store.user(user)
    agent = validate.name(agent, what="agent") if agent is not None else None
    by_agent = agent is not None if by_agent is None else bool(by_agent)
    define = _checked_define(define or {})
    snap = snapshot(mem, ref)
    _check_writer(mem, snap, writer=writer, by_agent=by_agent)
    old = snap.value
    new = _block_text(change(old), allow_empty=True)
    found: list[dict] = []
    if ref.scope == "persona":
        new, found = _pii_guard(mem, ref, old, new, writer, redact)
    limit = define.get("limit", _definition(snap)["limit"])
    _check_growth(ref, new, old, limit)
    if "limit" in define and len(new) > limit:
        raise _limit_error(ref, len(new), len(old), limit)
    commit(mem, snap, new, writer=writer if ref.scope == "persona" else ref.user, agent=agent, define=define)
    out = _out(_row(mem, ref.id))
    if found:
        out["redacted"] = found
    return out


def _checked_define(define: dict) -> dict:
    out = {}
    if define.get("limit") is not None:
        out["limit"] = _check_limit_value(define["limit"])
    if define.get("description") is not None:
        out["description"] = _check_description(define["description"])
    if define.get("read_only") is not None:
        if not isinstance(define["read_only"], bool):
            raise InvalidInput(f"read_only must be true or false, got {define['read_only']!r}",
                               hint="e.g. --read-only")
        out["read_only"] = define["read_only"]
    return out


def set_block(mem: "Memory", label: str, value: str | bytes, **kw: Any) -> dict:
    value = _block_text(value, allow_empty=True)
    return write(mem, label, lambda old: value, **kw)


def append_block(mem: "Memory", label: str, text: str | bytes, **kw: Any) -> dict:
    """Add ``text`` as a line at the end (Letta's core_memory_append).  Every appended line
    ends with a newline (and starts on a new line), so concurrent appends, which the CRDT
    may put in either order at the same place, never run into one line."""
    text = _block_text(text)

    def change(old: str) -> str:
        return old + ("\n" if old and not old.endswith("\n") else "") + text + ("" if text.endswith("\n") else "\n")

    return write(mem, label, change, **kw)


def replace_block(mem: "Memory", label: str, old: str | bytes, new: str | bytes, **kw: Any) -> dict:
    """Replace every occurrence of ``old`` with ``new`` (Letta's core_memory_replace);
    ``old`` must occur.  The result has ``replaced``: how many occurrences."""
    old = _block_text(old, what="OLD")
    new = _block_text(new, what="NEW", allow_empty=True)
    count = 0

    def change(current: str) -> str:
        nonlocal count
        count = current.count(old)
        if not count:
            raise InvalidInput(f"{old!r} does not occur in block {label!r}",
                               hint=f"`bm block show {label}` prints its text; OLD must match exactly")
        return current.replace(old, new)

    out = write(mem, label, change, **kw)
    out["replaced"] = count
    return out


def define_block(mem: "Memory", label: str, *, limit: int | None = None, description: str | None = None,
                 read_only: bool | None = None, user: str | None = None, agent: str | None = None,
                 persona: str | None = None, by_agent: bool | None = None) -> dict:
    """Create a block, or change its limit, description or read-only flag (LWW per field).
    A limit below the current length is refused."""
    define = _checked_define({"limit": limit, "description": description, "read_only": read_only})
    ref = resolve(mem, label, user=user, agent=agent, persona=persona, own=True)
    agent_v = validate.name(agent, what="agent") if agent is not None else None
    by_agent = agent_v is not None if by_agent is None else bool(by_agent)
    snap = snapshot(mem, ref)
    _check_writer(mem, snap, writer=mem.store.user(user), by_agent=by_agent)
    if "limit" in define and len(snap.value) > define["limit"]:
        n, lim = len(snap.value), define["limit"]
        raise InvalidInput(f"block {ref.label!r} is {n:,} characters, {n - lim:,} over the new limit of {lim:,}",
                           hint=f"trim it first (`bm block replace {ref.label} OLD NEW`), or choose a limit of at least {n:,}")
    commit(mem, snap, None, writer=None, define=define)
    return _out(_row(mem, ref.id))


def ensure_persona_block(mem: "Memory", handle: str) -> dict:
    """The shared block ``<handle>_service_experience`` (8,000 characters), defined if missing.
    Call it outside an op-log write transaction (or append :func:`persona_block_op` in yours)."""
    label = persona_label(handle)
    ref = Ref("persona", None, None, handle, label)
    snap = snapshot(mem, ref)
    if snap.row is None:
        commit(mem, snap, None, writer=None)
    return _out(_row(mem, ref.id))


def persona_block_op(handle: str) -> tuple[str, dict]:
    """The ``block.define`` op (kind, payload) that attaches a persona's shared block, for a
    caller appending it in its own transaction (defining twice is harmless)."""
    ref = Ref("persona", None, None, handle, persona_label(handle))
    return "block.define", _define_payload(ref, defaults_for(ref) or {}, [])


# -- edit (the CLI's `bm block edit`: the diff against the text the editor started from) ------------
def edit_begin(mem: "Memory", label: str, *, user: str | None = None, agent: str | None = None,
               persona: str | None = None) -> Snapshot:
    ref = resolve(mem, label, user=user, agent=agent, persona=persona)
    snap = snapshot(mem, ref)
    if snap.row is None and defaults_for(ref) is None:
        get_block(mem, label, user=user, agent=agent, persona=persona)  # raises NotFound
    return snap


def edit_commit(mem: "Memory", snap: Snapshot, new: str | bytes, *, user: str | None = None,
                agent: str | None = None, redact: bool = False, by_agent: bool | None = None) -> dict:
    """Apply ``snap.value -> new`` as one update built on the snapshot's state, so edits made
    by others while the editor was open are merged, not overwritten."""
    ref = snap.ref
    writer = mem.store.user(user)
    agent = validate.name(agent, what="agent") if agent is not None else None
    by_agent = agent is not None if by_agent is None else bool(by_agent)
    new = _block_text(new, allow_empty=True)
    now = snapshot(mem, ref)
    _check_writer(mem, now, writer=writer, by_agent=by_agent)
    found: list[dict] = []
    if ref.scope == "persona":
        new, found = _pii_guard(mem, ref, snap.value, new, writer, redact)
    if snap.row is not None and now.row is not None and now.row["state"] != snap.row["state"]:
        # others wrote meanwhile: the limit applies to what the merge will give
        update, _ = encode_edit(snap.state, snap.value, new, _fresh_client())
        doc, text = _load(now.state)
        doc.apply_update(update)
        merged = str(text)
    else:
        merged = new
    _check_growth(ref, merged, now.value, _definition(now)["limit"])
    commit(mem, snap, new, writer=writer if ref.scope == "persona" else ref.user, agent=agent)
    out = _out(_row(mem, ref.id))
    if found:
        out["redacted"] = found
    return out


# -- export / import --------------------------------------------------------------------------------------
EXPORT_FIELDS = ("id", "scope", "user", "agent", "persona", "label", "description", "limit", "read_only", "value")


def export_records(mem: "Memory") -> Iterator[dict]:
    """One record per block (its definition and text; not its CRDT history), by id."""
    for row in mem.sql.rows("SELECT * FROM blocks ORDER BY id"):
        b = _out(row)
        yield {k: b[k] for k in EXPORT_FIELDS}


def import_ops(mem: "Memory", rec: dict) -> list[tuple[str, dict]] | None:
    """The ops that restore one exported block; None when the store has it already.
    The limit is checked like any write: an over-limit block is refused."""
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
    if mem.sql.conn.execute("SELECT 1 FROM blocks WHERE id=?", (ref.id,)).fetchone():
        return None
    define = _checked_define({"limit": rec["limit"], "description": rec["description"],
                              "read_only": rec["read_only"]})
    value = _block_text(rec["value"], what="value", allow_empty=True)
    if len(value) > define["limit"]:
        n, lim = len(value), define["limit"]
        raise InvalidInput(f"block {label!r} of {ref.where()} would be {n:,} characters, {n - lim:,} over "
                           f"its limit of {lim:,}",
                           hint='shorten its "value" or raise its "limit" in the file; '
                                "nothing from this batch was imported")
    ops: list[tuple[str, dict]] = [("block.define", _define_payload(ref, define, FIELDS))]
    if value:
        client = _fresh_client()
        update, deps = encode_edit(None, "", value, client)
        ops.append(("block.update", {"id": ref.id, "scope": scope, "origin": client, "seq": 1,
                                     "update": _b64(update), "deps": _b64(deps),
                                     "user": ref.user, "agent": None}))
    return ops


# -- doctor ---------------------------------------------------------------------------------------------------
def doctor_check(mem: "Memory") -> tuple[str, bool, str, str]:
    c = mem.sql.conn
    over = list(c.execute("SELECT label, coalesce(user_id, persona), length(value) - char_limit FROM blocks "
                          "WHERE over_limit ORDER BY label"))
    waiting = c.execute("SELECT count(*) FROM block_updates WHERE applied=0").fetchone()[0]
    n = c.execute("SELECT count(*) FROM blocks").fetchone()[0]
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
