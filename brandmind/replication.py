"""The library side of sync: receiving other replicas' ops into the op log, the version
vector, and applying ops to the SQLite projection in each replica's sequence order.

``brandmind.sync`` (remotes, planner, engine, daemon) is built on these; the library never
imports it.  The merge rules are written down, as pure functions, in brandmind/merge.py.

Receiving (:func:`receive`), in the caller's LMDB write transaction:

1. Idempotent by op id: an op already stored is a duplicate (False).  If the stored op has
   another HLC or kind, two devices write under one replica id: :class:`SyncConflict`.
   (The stored op may be a redaction of the incoming one: payloads are not compared.)
2. Skew cap: an op stamped more than ``max_skew_ms`` ahead of local time (it would otherwise
   win every LWW register and drag this device's clock along) is *held*: set aside in the
   log (brandmind/held.py), not applied, not lost, and without moving the local HLC; so are
   the later ops of the same replica (they come after it).  :func:`receive_batch` releases
   held ops once they are within the window (every batch and sync round re-checks) or when
   the user accepts them (:func:`accept_held`, ``bm sync accept``).  Without a ``Held`` (a
   lone receive) such an op raises :class:`ClockSkew`.
3. Remove wins: an op carrying content of a user forgotten at a later HLC, or the
   ``memory.add`` of a forgotten memory, is stored redacted (as ``bm forget`` leaves the
   log), so a replica that was offline never brings the data back.  A received
   ``user.forget`` redacts the earlier ops of that user already here (as the local
   ``forget_user`` does); a received ``memory.forget`` redacts the memory's add
   (brandmind/logforget.py).
4. The op gets the next arrival number, its LMDB projection (beads) is applied, the
   replica's contiguous head in the version vector advances, and the local HLC moves past
   the op's (receive rule), so local ops made afterwards are stamped after it.  Our own
   replica's ops (a restore) also move ``next_seq`` past them.

Applying (:func:`catch_up`): ops go to SQLite in arrival order, except that an op whose
predecessor of the same replica has not been applied yet is held back (``sync_held``) and
applied right after it.  ``bm rebuild`` runs the same function over the whole log, so a
rebuild gives exactly the incremental result.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Iterable

from . import clock, converge, logforget, merge
from .errors import ClockSkew, InvalidInput, SyncConflict
from .held import (ACCEPT_ALL_MS, CLASH_HINT, Held, has_held, held_ops, held_summary,  # noqa: F401
                   held_top, split_id)
from .opcheck import problem, quarantine, screen
from .ops import Kind, apply_log_side
from .projection import apply_sql_side
from .storage import converge as converge_rows
from .storage import syncstate

if TYPE_CHECKING:  # pragma: no cover
    from .oplog import LogTxn, OpLog
    from .sqlstore import SQLStore
    from .store import Store

# (CLASH_HINT, split_id and the held-op readers are re-exported: brandmind.sync imports them from here)


class Counters:
    """What every received op moves: the next arrival number, the last HLC seen and the
    replicas' contiguous heads.  A batch keeps them here and writes them once
    (:meth:`flush`, before its transaction commits) instead of reading and writing them
    for every op; a lone receive flushes at once."""

    __slots__ = ("arrival", "clock", "hlc_moved", "heads", "moved")

    def __init__(self, t: "LogTxn") -> None:
        self.arrival = t.next_arrival()
        self.clock = t.last_hlc()  # (wall ms, counter)
        self.hlc_moved = False
        self.heads: dict[str, int] = {}
        self.moved: set[str] = set()

    def head(self, t: "LogTxn", replica: str) -> int:
        head = self.heads.get(replica)
        if head is None:
            head = self.heads[replica] = t.head(replica)
        return head

    def advance(self, t: "LogTxn", replica: str, seq: int) -> None:
        """Op ``seq`` of ``replica`` was stored: move its head over every op now contiguous."""
        head = merge.contiguous_head(self.head(t, replica), seq, lambda n: t.has_op(replica, n))
        if head is not None:
            self.heads[replica] = head
            self.moved.add(replica)

    def see(self, hlc: list) -> None:
        """The receive rule of the HLC: local ops made later are stamped after this one."""
        after = merge.hlc_after(self.clock, hlc)
        if after is not None:
            self.clock = after
            self.hlc_moved = True

    def flush(self, t: "LogTxn") -> None:
        t.write_counters(self.arrival, self.clock if self.hlc_moved else None,
                         {replica: self.heads[replica] for replica in self.moved})
        self.hlc_moved = False
        self.moved.clear()


# -- receiving -------------------------------------------------------------------------------------------
def _check_shape(op: Any) -> tuple[str, int]:
    try:
        replica, seq = split_id(op["id"])
        hlc = op["hlc"]
        ok = (replica and seq >= 1 and isinstance(op["kind"], str) and isinstance(op["payload"], dict)
              and isinstance(hlc, list) and len(hlc) == 3 and int(hlc[0]) >= 0 and int(hlc[1]) >= 0)
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        shown = json.dumps(op, default=str)[:120] if isinstance(op, dict) else repr(op)[:120]
        raise InvalidInput(f"not a bm op: {shown}",
                           hint="the remote holds data bm did not write; check the remote's prefix")
    return replica, seq


def _clash(replica: str, stored: dict, op: dict) -> SyncConflict:
    return SyncConflict(
        f"two devices share replica id {replica}: op {op['id']} is {stored['kind']} at "
        f"{stored['hlc'][0]} here but {op['kind']} at {op['hlc'][0]} on the remote", hint=CLASH_HINT)


def _too_far(op: dict, replica: str, now: int, max_skew_ms: int) -> ClockSkew:
    ahead = int(op["hlc"][0]) - now
    return ClockSkew(
        f"op {op['id']} from replica {replica} is stamped {ahead / 1000:.1f} s ahead of this "
        f"device's clock (more than the {max_skew_ms / 1000:g} s allowed by sync_max_skew_ms)",
        hint="fix the clock of the device that wrote it (or this one's: check NTP), or raise "
             "the cap with `bm config set sync_max_skew_ms N`")


def receive(t: "LogTxn", op: dict, *, max_skew_ms: int, now_ms: int | None = None,
            counters: Counters | None = None, held: Held | None = None) -> bool | None:
    """Store an op of any replica that came from elsewhere (sync); see the module docstring.
    Returns False for an op stored already, None for an op set aside in ``held`` (too far
    ahead, or after a held op of its replica).  ``counters``: a batch's
    (:func:`receive_batch`), flushed by it; without, they are written at once."""
    replica, seq = _check_shape(op)
    stored = t.stored_op(replica, seq)
    if stored is not None:
        if not merge.same_op(stored, op):
            raise _clash(replica, stored, op)
        return False
    now = now_ms if now_ms is not None else clock.now_millis()
    too_far = merge.too_far_ahead(op["hlc"], now, max_skew_ms)
    if held is not None and held.sets_aside(op, replica, seq, too_far):
        return None
    if too_far:
        raise _too_far(op, replica, now, max_skew_ms)
    c = Counters(t) if counters is None else counters
    hk = merge.hlc_key(op["hlc"])
    op = {"id": op["id"], "hlc": list(op["hlc"]), "kind": op["kind"], "payload": op["payload"]}
    op["payload"] = logforget.remove_wins(t, op, hk)
    t.put_received(replica, seq, op, c.arrival)
    c.arrival += 1
    c.advance(t, replica, seq)
    if replica == t.log.replica and seq >= t.next_seq():
        t.set_next_seq(seq + 1)
    c.see(op["hlc"])
    logforget.forgets_received(t, op, hk)
    apply_log_side(t, op, hk)
    if counters is None:
        c.flush(t)
    return True


def _release(t: "LogTxn", held: Held, counters: Counters, *, now: int, max_skew_ms: int,
             accept: Callable[[str], bool] | None) -> list[dict]:
    """Receive the held ops that are now within the window (or that ``accept`` takes, for
    their replica), each replica's in seq order up to its first one still too far ahead."""
    out = []
    blocked: set[str] = set()
    for replica, seq, op in t.held():
        if replica in blocked:
            continue
        taken = accept is not None and accept(replica)
        if not taken and merge.too_far_ahead(op["hlc"], now, max_skew_ms):
            blocked.add(replica)
            continue
        t.unhold(replica, seq)
        if receive(t, op, max_skew_ms=ACCEPT_ALL_MS if taken else max_skew_ms, now_ms=now, counters=counters):
            out.append(op)
    held.first.clear()
    return out


def accept_held(store: "Store", replica: str | None = None, *, apply: bool = True) -> int:
    """Receive the held ops (of one replica) whatever their stamps: the local HLC moves past
    them (so this device's next ops are stamped as far ahead).  Returns how many."""
    got = receive_batch(store, [], apply=apply, accept=(lambda r: True) if replica is None else (lambda r: r == replica))
    return got.get("released", 0)


def receive_batch(store: "Store", ops: Iterable[dict], *, now_ms: int | None = None, apply: bool = True,
                  accept: Callable[[str], bool] | None = None) -> dict:
    """``Store.receive_ops``: store the ops (one LMDB transaction: all or nothing), then
    bring the SQLite projection up to date (which embeds pulled memories locally).

    Held ops that are now within the window (or that ``accept`` takes) are received first;
    ops too far ahead are held (step 2 of the module docstring).  Returns ``{"received",
    "duplicates"}`` plus ``"held"`` (ops set aside) and ``"released"`` when not zero.

    The projection is handed the ops as this transaction stored them and the vectors just
    made, so neither is read back from LMDB (the vectors go into the log's cache only when
    the applying is left for later, ``apply=False``).  (Another process may redact one of them
    before the projection runs: its forget is a later op, which removes it again.)"""
    ops = [screen(op) for op in ops]  # an invalid op is stored refused (brandmind/opcheck.py)
    received = duplicates = 0
    if not ops and accept is None and not has_held(store.log):
        return {"received": 0, "duplicates": 0}
    max_skew = int(store.config.sync_max_skew_ms)
    now = now_ms if now_ms is not None else clock.now_millis()
    vectors = _embed_ahead(store, ops)
    with store.log.write() as t:
        t.batch = True  # one scan of the log for late nodes of forgotten users, at the end
        t.fresh = {}
        counters = Counters(t)
        for text, vec in vectors.items() if not apply else ():  # applied below: handed over, not cached
            t.cache_vector(store.sql.model, text, vec)
        held = Held(t)
        released = _release(t, held, counters, now=now, max_skew_ms=max_skew, accept=accept)
        for op in released:
            _forgotten_here(store, t, op)
        for op in ops:
            got = receive(t, op, max_skew_ms=max_skew, now_ms=now, counters=counters, held=held)
            if got is None:
                continue
            if not got:
                duplicates += 1
                continue
            received += 1
            _forgotten_here(store, t, op)
        logforget.flush_late_nodes(t)
        counters.flush(t)
        fresh = dict(t.fresh.values())
    if (received or released) and apply:
        store.catch_up(fresh=fresh, vectors=vectors)
    out = {"received": received, "duplicates": duplicates}
    if held.count:
        out["held"] = held.count
    if released:
        out["released"] = len(released)
    return out


def _forgotten_here(store: "Store", t: "LogTxn", op: dict) -> None:
    """A received ``memory.forget`` of a memory added here (not received): found through the index."""
    p = op["payload"]
    if op["kind"] == Kind.MEMORY_FORGET and isinstance(p.get("id"), str) and not p.get("redacted"):
        op_id = converge_rows.memory_op_id(store.sql, p["id"])
        if op_id is not None:
            t.redact(op_id, {"id": p["id"], "redacted": True})


def _embed_ahead(store: "Store", ops: list[dict], batch: int = 256) -> dict[str, bytes]:
    """The vectors (this device's model) of pulled memories' texts that the vector cache
    lacks, made in batches before any lock is taken: text -> float32 bytes."""
    model = store.sql.model
    texts = list(dict.fromkeys(
        op["payload"]["text"] for op in ops
        if isinstance(op, dict) and op.get("kind") == Kind.MEMORY_ADD and isinstance(op.get("payload"), dict)
        and isinstance(op["payload"].get("text"), str) and not op["payload"].get("redacted")))
    texts = store.log.uncached(model, texts)
    out: dict[str, bytes] = {}
    for i in range(0, len(texts), batch):
        chunk = texts[i:i + batch]
        for text, vec in zip(chunk, store.embed_docs(chunk)):
            out[text] = vec.tobytes()
    return out


# -- applying in per-replica order -------------------------------------------------------------------
def _heads(log: "OpLog", sql: "SQLStore", start: int) -> dict[str, int]:
    heads = syncstate.heads(sql)
    if heads is None:
        # an index built before sync: everything up to ``start`` was applied, in order
        heads = {}
        if start:
            for arrival, op in log.ops_after(0):
                if arrival > start:
                    break
                replica, seq = split_id(op["id"])
                heads[replica] = max(heads.get(replica, 0), seq)
        syncstate.reset_heads(sql, heads)
    return heads


def catch_up(log: "OpLog", sql: "SQLStore", vector_for: Callable[[str], bytes],
             progress: Callable[[int, int], None] | None = None, *,
             apply: Callable[..., None] | None = None, fresh: dict[int, dict] | None = None) -> int:
    """Apply to ``sql`` every op it has not seen, in arrival order, each replica's ops in
    seq order (held back until the gap fills); returns how many arrivals were processed.
    ``fresh``: arrival -> op of ops the caller just stored (not read back from LMDB).

    An op whose apply fails on its data (a log written by an older bm) never stops the
    store: the batch is rolled back and applied again with each op in a savepoint, and the
    failing op is quarantined with its error (brandmind/opcheck.py) and counted as applied."""
    apply = apply or apply_sql_side
    try:
        return _catch_up(log, sql, vector_for, progress, apply=apply, fresh=fresh, guard=False)
    except _data_errors():
        return _catch_up(log, sql, vector_for, progress, apply=apply, fresh=fresh, guard=True)


def _data_errors() -> tuple[type[BaseException], ...]:
    """What a bad op's data makes an apply raise (never I/O, locking or a missing embedder)."""
    import apsw

    return (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError,
            RecursionError, InvalidInput, apsw.ConstraintError, apsw.MismatchError, apsw.SQLError,
            apsw.TooBigError, apsw.RangeError)


def _guarded(apply: Callable[..., None]) -> Callable[..., None]:
    errors = _data_errors()

    def run(sql: "SQLStore", op: dict, vector_for: Callable[[str], bytes]) -> None:
        try:
            with syncstate.savepoint(sql):
                apply(sql, op, vector_for)
        except errors as exc:
            detail = exc.message if isinstance(exc, InvalidInput) else str(exc)
            quarantine(sql, op, f"apply failed: {type(exc).__name__}: {detail}")

    return run


def _checking(apply: Callable[..., None], checked_from: int) -> Callable[..., None]:
    """``apply`` that first checks the ops stored before ops were checked on entry (arrival
    below ``checked_from``: a log written by an older bm), quarantining the invalid ones."""
    def run(sql: "SQLStore", op: dict, vector_for: Callable[[str], bytes], arrival: int | None = None) -> None:
        if checked_from > 1 and (arrival is None or arrival < checked_from):
            why = problem(op)
            if why is not None:
                quarantine(sql, op, why)
                return
        apply(sql, op, vector_for)

    return run


def _catch_up(log: "OpLog", sql: "SQLStore", vector_for: Callable[[str], bytes],
              progress: Callable[[int, int], None] | None, *, apply: Callable[..., None],
              fresh: dict[int, dict] | None, guard: bool) -> int:
    if guard:
        apply = _guarded(apply)
    apply = _checking(apply, log.checked_from)
    n = 0
    with sql.write():
        start = sql.applied()
        total = log.last_arrival() - start
        if total >= 1000:
            sql.bulk()
        heads = _heads(log, sql, start)
        held = syncstate.held(sql)
        changed: set[str] = set()
        last = start
        # nothing waits (the common case): converge.replay skips its per-add lookup until
        # converge.aim parks an op; only trusted under this write lock
        sql.no_pending = converge.nothing_waits(sql)
        try:
            for arrival, op in log.ops_after(start, known=fresh):
                replica, seq = split_id(op["id"])
                step = merge.in_order(heads.get(replica, 0), seq)
                if step == "apply":
                    apply(sql, op, vector_for, arrival)
                    heads[replica] = _apply_held(log, sql, apply, vector_for, held, replica, seq)
                    changed.add(replica)
                elif step == "hold" and (replica, seq) not in held:
                    held.add((replica, seq))
                    syncstate.hold(sql, replica, seq)
                last = arrival
                n += 1
                if progress and n % 500 == 0:
                    progress(n, total)
        finally:
            sql.no_pending = False
        syncstate.save_heads(sql, {r: heads[r] for r in changed})
        syncstate.set_applied(sql, last)
    return n


def _apply_held(log: "OpLog", sql: "SQLStore", apply: Callable[..., None], vector_for: Callable[[str], bytes],
                held: set[tuple[str, int]], replica: str, head: int) -> int:
    """Op ``head`` of ``replica`` was applied: apply the ops held back behind it that follow
    on in seq order; returns the new head."""
    while (replica, head + 1) in held:
        nxt = log.get_op(replica, head + 1)
        if nxt is None:
            break
        apply(sql, nxt, vector_for)
        held.discard((replica, head + 1))
        syncstate.release(sql, replica, head + 1)
        head += 1
    return head
