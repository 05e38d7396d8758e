"""The merge rules of bm sync, in the order they apply: pure functions over values (no SQL,
no I/O) that the apply step (projection, converge, replication, blockrules, personarules,
skillrules) calls; the SQL stays in the storage repositories (brandmind/storage/).  Each
function has a table test in tests/test_merge_rules.py.

Every replica appends only to its own op stream (``<replica>:<seq>``), so the log itself
never conflicts; the rules below decide what the projections show when ops of several
replicas meet.  Each rule is a function of the SET of ops (plus each replica's sequence
order), never of the order in which ops of different replicas arrive: applying the union
of ops in any interleaving that keeps each replica's own order gives the same state and
the same ``bm export``.  tests/test_sync_converge.py checks this with Hypothesis against an
oracle that applies the union in (HLC, op id) order, and shows that a wall-clock LWW and
out-of-order application of one origin's ops each break it.

0. Clocks.  Every op carries a hybrid logical clock ``(wall ms, counter, replica id)``
   (brandmind/clock.py ``HLC``); ``clock.hlc_key`` makes it a string that sorts like the
   tuple, so equal wall times are ordered by counter, then replica id: a total order.
   Receiving an op moves the local clock past it (:func:`hlc_after`, used by
   ``replication.receive``: HLC receive rule), so an edit made after seeing another's is
   stamped after it even if the local wall clock is behind.  An op stamped more than
   ``sync_max_skew_ms`` (config, default 5 minutes) ahead of local time is held
   (:func:`too_far_ahead`, ``held.Held``): set aside, not applied, and the local clock
   does not move; so are its replica's later ops.  A runaway clock would otherwise win
   every LWW register and drag every clock that saw it along.  Held ops are applied once
   within the window (re-checked by every batch and round) or when the user accepts them
   (``bm sync accept``: the clock then moves past them).  A round also compares the
   device's clock with the S3 server's ``Date`` and, beyond the window ahead, pushes none
   of its ops stamped past the server's time plus the window (``engine._clock_check``).

1. Sync state: a version vector per replica (replica -> highest contiguous seq held),
   ``OpLog.version_vector`` (kept in LMDB ``sync``/``vv``; :func:`contiguous_head`), not a
   vector clock on every op.  The planner (``sync/plan.py``) compares it with the remote's
   heads: push what the remote lacks, pull what we lack.  Ops are idempotent by id
   (``replication.receive``); the same id with another HLC or kind (:func:`same_op`)
   means two devices share a replica id: ``SyncConflict``.

2. Per-origin order: a replica's ops are applied in its seq order (:func:`in_order`).  An
   op whose predecessor has not arrived is stored (the log accepts it) but held back from
   the projection (``replication.catch_up``, table ``sync_held``) until the gap fills.
   ``bm rebuild`` runs the same function, so a rebuild equals the live projection.

3. Existence of memories, graph nodes and edges: an observed-remove set where add wins
   over a concurrent remove.  Each add makes a fresh id (``m_``/``n_``/``e_``), and
   ``memory.forget`` names the id it observed, so a forget removes exactly that element and
   a concurrent add (a new id) survives; re-adding "the same" memory is a new element,
   which a 2P-set could not do.  A row keeps the smallest HLC of its adds
   (:func:`earlier_add`).  Ops aimed at an element that has not arrived yet
   (``memory.retire`` / ``memory.confirm`` / ``memory.merge``, ``kg.edge.retire``) wait in
   ``sync_pending`` and are replayed when it arrives (``converge.aim`` / ``converge.replay``);
   edges and mentions of a removed memory or node are dropped whenever they arrive
   (:func:`edge_ends`, ``converge.edge_is_dead``, the ``kg.mention`` rule in projection.py).

4. ``bm forget`` / purge: remove wins.  ``memory.forget`` tombstones the id (a later add of
   it applies as nothing; a tombstone keeps the latest forget: :func:`latest`);
   ``user.forget`` at HLC H removes every memory, node, bead, block op and persona
   assignment of the user stamped before H (:func:`forgotten_before`), whichever arrives
   first (``applying.user_forget``, ``converge.kill_memory`` / ``kill_node``,
   ``personarules.forget_user``, the ``apply_log`` of ``user.forget`` in ops.py for beads,
   ``blockrules.forget_user``).  The log
   forgets too: a received forget redacts the ops it covers, and ops it covers that arrive
   later are stored redacted (brandmind/logforget.py ``forget_user_in_log``,
   ``forget_memory_in_log``, ``remove_wins``), so a replica that was offline never brings
   the data back, and every replica ends with the same redacted log.  Ops stamped after H
   (the user's new life) stay.

5. Scalar fields: last-writer-wins registers by HLC (rule 0's total order, not wall time:
   :func:`lww`): persona definitions (persona.define), persona documents (highest
   (version, HLC)), block definitions per field (:func:`block_definition`), skills (the
   highest (version, HLC) among adds after the latest remove), persona assignment (held
   iff the latest assign HLC > the latest unassign HLC).  Monotone fields merge by
   min/max instead: a fact's ``retired_at`` / ``valid_to`` (min), ``superseded_by`` (min
   id) (:func:`merge_retire`, :func:`merge_edge_retire`), ``updated_at`` (max),
   ``confirmations`` (a counter: each op adds once) (:func:`merge_confirm`), provenance (a
   set, ordered by the HLC of the op that first brought each entry:
   :func:`merge_provenance`).

6. Beads: an append-only union (one ``bead.add`` per bead id), each user's thread ordered
   by (time, bead id) (the ``bead_time`` keys of brandmind/oplog.py; bead ids sort by
   time); merging never rewrites a bead.  The ingest dedup key maps to the smallest bead id
   holding it (:func:`bead_key_wins`, ``projection.apply_log_side``).

7. Block text: pycrdt (Yrs) text updates, applied per origin strictly in sequence order and
   only once the block's state covers the writer's state vector
   (:func:`block_update_ready`; pycrdt diverges otherwise).  Merged text over the block's
   limit is kept and flagged, never truncated (brandmind/blocks.py).

The apply step and the planner (sync/plan.py) are functions of their inputs; the remotes
(sync/remote.py, sync/s3.py) own all I/O; the engine (sync/engine.py) sequences one round.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from .clock import hlc_key as hlc_key  # the total order every rule below compares by


# -- 0. clocks and last-writer-wins

def lww(a: tuple[str, Any] | None, b: tuple[str, Any] | None) -> tuple[str, Any] | None:
    """Last writer wins: of two ``(hlc key, value)`` registers, the one stamped later (None:
    no write).  Equal keys are one op, so either is it."""
    if a is None:
        return b
    if b is None:
        return a
    return b if b[0] > a[0] else a


def latest(old: str | None, new: str) -> str:
    """The greatest of two HLC keys (a tombstone or forget mark keeps the latest forget)."""
    return new if old is None or new > old else old


def hlc_after(last: tuple[int, int], hlc: list) -> tuple[int, int] | None:
    """The HLC receive rule: the local ``(wall, counter)`` after seeing ``hlc``, or None when
    the local clock is ahead already (it does not move)."""
    seen = (int(hlc[0]), int(hlc[1]))
    return seen if seen > tuple(last) else None


def too_far_ahead(hlc: list, now_ms: int, max_skew_ms: int) -> bool:
    """An op stamped more than ``max_skew_ms`` ahead of local time: held, not applied."""
    return int(hlc[0]) - now_ms > max_skew_ms


# -- 1./2. version vectors and per-origin order
def same_op(stored: dict, op: dict) -> bool:
    """Whether two ops with one id are the same op (payloads may differ by a redaction);
    False: two devices write under one replica id."""
    return list(stored["hlc"]) == list(op["hlc"]) and stored["kind"] == op["kind"]


def contiguous_head(head: int, seq: int, stored: Callable[[int], bool]) -> int | None:
    """A replica's contiguous head after op ``seq`` was stored (``stored(n)``: whether op n
    is here), or None when ``seq`` does not extend it."""
    if seq != head + 1:
        return None
    while stored(seq + 1):
        seq += 1
    return seq


def in_order(head: int, seq: int) -> str:
    """Where op ``seq`` of a replica whose applied head is ``head`` goes: ``"apply"`` (the
    next one), ``"hold"`` (a gap before it) or ``"done"`` (applied already)."""
    if seq == head + 1:
        return "apply"
    return "hold" if seq > head + 1 else "done"


# -- 3./4. existence: add wins over a concurrent remove; forgets remove what came before
def forgotten_before(op_hk: str, forget_hk: str | None) -> bool:
    """Whether an op stamped ``op_hk`` is covered by a forget stamped ``forget_hk`` (None:
    no forget): remove wins over everything stamped before it, whenever it arrives."""
    return forget_hk is not None and op_hk < forget_hk


def bead_forgotten(bead_hk: str | None, forget_hk: str) -> bool:
    """A ``user.forget`` at ``forget_hk`` removes a bead stamped before it; a bead whose op
    HLC is unknown (stored before the index existed) goes too."""
    return bead_hk is None or bead_hk < forget_hk


def earlier_add(row_hk: str | None, hk: str) -> bool:
    """Another add of an id that is here: whether ``hk`` becomes the row's HLC (a row keeps
    the smallest HLC of its adds; None: added before HLCs were kept, left alone)."""
    return row_hk is not None and hk < row_hk


def edge_ends(p: dict) -> list:
    """What an edge depends on: its two ends and its evidence when that is one memory (an
    edge whose only evidence is forgotten goes with it)."""
    ends = [p["src"], p["dst"]]
    evidence = p.get("evidence") or []
    if len(evidence) == 1 and isinstance(evidence[0], str):
        ends.append(evidence[0])
    return ends


def bead_key_wins(bead_id: str, known: str | None, known_here: bool) -> bool:
    """Whether the ingest dedup key now maps to ``bead_id``: the smallest bead id holding it
    (``known``: the bead it maps to, ``known_here``: whether that bead still exists)."""
    return known is None or bead_id < known or not known_here


# -- 5. monotone fields: min / max / counters / sets
def merge_retire(row: dict, p: dict) -> dict:
    """``memory.retire`` payload ``p`` onto ``row`` (``retired_at``, ``valid_to``,
    ``superseded_by``, ``meta`` as a dict): retired_at = min (the reason, in
    meta.retired_reason, goes with the earliest; ties: the smaller reason), valid_to = min
    when given, superseded_by = min of the non-null ``by``.  All min / set-once: commutes."""
    retired_at, valid_to, superseded_by = row["retired_at"], row["valid_to"], row["superseded_by"]
    meta = dict(row["meta"])
    new_at, reason = int(p["retired_at"]), p.get("reason") or ""
    if retired_at is None or (new_at, reason) < (retired_at, meta.get("retired_reason", "")):
        retired_at = new_at
        if reason:
            meta["retired_reason"] = reason
        else:
            meta.pop("retired_reason", None)
    if p.get("valid_to") is not None and (valid_to is None or int(p["valid_to"]) < valid_to):
        valid_to = int(p["valid_to"])
    if p.get("by") and (superseded_by is None or p["by"] < superseded_by):
        superseded_by = p["by"]
    return {"retired_at": retired_at, "valid_to": valid_to, "superseded_by": superseded_by, "meta": meta}


def merge_edge_retire(row: dict, p: dict) -> dict:
    """``kg.edge.retire`` onto an edge's ``retired_at`` / ``valid_to``: both min (valid_to
    only when given)."""
    at, valid_to = int(p["retired_at"]), p.get("valid_to")
    retired_at = at if row["retired_at"] is None else min(row["retired_at"], at)
    if valid_to is not None:
        valid_to = valid_to if row["valid_to"] is None else min(row["valid_to"], valid_to)
    else:
        valid_to = row["valid_to"]
    return {"retired_at": retired_at, "valid_to": valid_to}


def merge_confirm(row: dict, p: dict) -> dict:
    """``memory.confirm`` (and the kept memory of a ``memory.merge``) onto ``row``
    (``confirmations``, ``updated_at``): a counter (each op adds its ``count`` once, default
    1) and a max of times."""
    return {"confirmations": (row["confirmations"] or 0) + int(p.get("count", 1)),
            "updated_at": max(row["updated_at"], int(p["ts"]))}


def canon(entry: Any) -> str:
    """A provenance entry as the string it is compared (and kept) by."""
    return json.dumps(entry, ensure_ascii=False, sort_keys=True)


def merge_provenance(column: list, extras: dict[str, tuple[str, int]], entries: list,
                     hk: str) -> tuple[list, dict[str, tuple[str, int]]]:
    """Provenance as a set: ``column`` (the memory's list) holds its own entries first, then
    the added ones (``extras``: canon entry -> the (HLC, position) of the first op that
    brought it), ordered by that (HLC, position), whatever the arrival order.  Returns the
    new list and the extras that changed (an empty dict: nothing did)."""
    base = [e for e in column if canon(e) not in extras]
    in_base = {canon(e) for e in base}
    merged = dict(extras)
    changed: dict[str, tuple[str, int]] = {}
    for pos, entry in enumerate(entries):
        key = canon(entry)
        if key in in_base:
            continue
        if key not in merged or (hk, pos) < merged[key]:
            merged[key] = changed[key] = (hk, pos)
    if not changed:
        return column, {}
    return base + [json.loads(k) for k in sorted(merged, key=lambda k: (merged[k], k))], changed


def merge_parts(p: dict, ids: list[str]) -> list[tuple[str, str, dict]]:
    """A ``memory.merge`` as the parts it applies, ``(target, part, payload)``: each merged
    id is retired (retired_at = ts, by = into, reason "merged"), and ``into`` gains the
    merged ones' provenance, ``len(ids)`` confirmations and updated_at = max(ts)."""
    ts = int(p["ts"])
    parts = [(memory_id, "retire", {"id": memory_id, "retired_at": ts, "by": p["into"], "reason": "merged"})
             for memory_id in ids]
    if ids:
        parts.append((p["into"], "merge_into", {"id": p["into"], "count": len(ids), "ts": ts,
                                                "provenance": p.get("provenance") or []}))
    return parts


from .validate import SKILL_VERSION


# -- blocks
# Core memory blocks (brandmind/blocks.py, applied by brandmind/blockrules.py): a block's
# definition is merged per field (LWW by HLC); its text is a pycrdt doc, and an update is
# applied only when it is the next seq of its origin and the block's state covers its deps
# (pycrdt 0.14.13 diverges on one origin's updates out of order and loses updates whose
# dependencies are missing once its state is saved).
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


def covers(have: dict[int, int], need: dict[int, int]) -> bool:
    """Whether state vector ``have`` includes everything ``need`` names."""
    return all(have.get(client, 0) >= clock for client, clock in need.items())


def block_update_ready(origin: int, seq: int, deps: dict[int, int], high: dict[int, int],
                       have: dict[int, int]) -> bool:
    """Whether a waiting block update can be applied now: it is the next ``seq`` of its
    ``origin`` (``high``: origin -> greatest applied seq) and the block's state vector
    ``have`` covers the state vector ``deps`` it was built on."""
    return seq == high.get(origin, 0) + 1 and covers(have, deps)


def block_definition(defs: Iterable[dict], fields: Iterable[str]) -> dict:
    """A block's definition from its define payloads in ascending HLC order: per field,
    the value of the last define that lists it in ``explicit`` (LWW); a field nobody set
    explicitly keeps the value of the first define (the label's default)."""
    defs = list(defs)
    fields = tuple(fields)
    out = {f: defs[0][f] for f in fields}
    for p in defs:
        for f in p.get("explicit", []):
            if f in fields:
                out[f] = p[f]
    return out


# -- personas and skills
# Personas (brandmind/personas.py, applied by brandmind/personarules.py): a definition is
# last-writer-wins by HLC (created_at = min over all defines); a persona document is the one
# with the highest (version, HLC); a user holds a persona iff their latest assign's HLC is
# above their latest unassign's.  Skills (brandmind/skills.py, brandmind/skillrules.py): the
# visible skill of a name is, among its adds stamped after its latest remove, the one with
# the highest version, ties broken by the later HLC.  HLCs are compared as HLC keys
# (strings that sort like the HLC tuple).
def persona_define_wins(stored_hlc: str | None, hlc: str) -> bool:
    """Whether a ``persona.define`` at ``hlc`` replaces the stored definition (LWW by HLC)."""
    return stored_hlc is None or hlc > stored_hlc


def persona_doc_wins(stored: tuple[int, str] | None, version: int, hlc: str) -> bool:
    """Whether a ``persona.doc`` replaces the stored (version, HLC): highest pair wins."""
    return stored is None or (version, hlc) > stored


def persona_held(assign_hlc: str | None, unassign_hlc: str | None) -> bool:
    """A user holds a persona iff their latest assign is later than their latest unassign."""
    return assign_hlc is not None and (unassign_hlc is None or assign_hlc > unassign_hlc)


_NO_ASSIGNMENT = {"confidence": None, "discovered_at": None, "last_confirmed": None,
                  "assign_hlc": None, "unassign_hlc": None}


def persona_assign(row: dict | None, hlc: str, confidence: float, discovered_at: int,
                   last_confirmed: int) -> dict:
    """The (user, persona) row after a ``persona.assign``: confidence of the latest assign
    by HLC, discovered_at = min, last_confirmed = max, assign HLC = max."""
    row = dict(row or _NO_ASSIGNMENT)
    if row["assign_hlc"] is None or row["assign_hlc"] < hlc:
        row["confidence"] = confidence
    row["discovered_at"] = discovered_at if row["discovered_at"] is None else min(row["discovered_at"], discovered_at)
    row["last_confirmed"] = last_confirmed if row["last_confirmed"] is None else max(row["last_confirmed"],
                                                                                      last_confirmed)
    row["assign_hlc"] = max(row["assign_hlc"] or "", hlc)
    return row


def persona_unassign(row: dict | None, hlc: str) -> dict:
    """The (user, persona) row after a ``persona.unassign``: its unassign HLC = max."""
    row = dict(row or _NO_ASSIGNMENT)
    row["unassign_hlc"] = max(row["unassign_hlc"] or "", hlc)
    return row


def version_key(version: str) -> tuple:
    """A sort key of a skill version: numbers (missing ones 0), then a release above its
    pre-releases, whose dot-separated identifiers compare numerically when numeric (semver)."""
    m = SKILL_VERSION.match(version)
    if m is None:  # pragma: no cover - versions are checked before they are stored
        return ((0, 0, 0, 0), 0, ())
    nums = tuple(int(m.group(i) or 0) for i in range(1, 5))
    pre = m.group(5)
    if pre is None:
        return (nums, 1, ())
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (nums, 0, ids)


def skill_remove_wins(removed: str | None, hlc: str) -> bool:
    """Whether a ``skill.remove`` at ``hlc`` is the name's latest remove."""
    return removed is None or hlc > removed


def skill_add(adds: Iterable[tuple[str, tuple]], removed: str | None, hlc: str,
              vkey: tuple) -> tuple[bool, list[str]]:
    """A ``skill.add`` at ``hlc`` of version key ``vkey`` against the kept adds
    ``(hlc, version key)`` of its name and its latest remove: ``(keep it, the HLCs of the
    kept adds it makes unreachable)``.  An add is never visible when a remove is stamped
    after it, or an add of a higher-or-equal version is stamped after it; what is kept
    depends only on the set of ops, not their order."""
    adds = list(adds)
    if removed is not None and hlc <= removed:
        return False, []  # a later remove wins
    if any(v >= vkey and h > hlc for h, v in adds) or any(h == hlc for h, _ in adds):
        return False, []  # never visible (or applied already)
    return True, [h for h, v in adds if vkey >= v and hlc > h]


def skill_visible(adds: Iterable[tuple[str, tuple]]) -> str | None:
    """The HLC of the visible add among ``(hlc, version key)``: highest (version, HLC)."""
    best = max(((v, h) for h, v in adds), default=None)
    return best[1] if best is not None else None
