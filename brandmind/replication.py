"""The library side of sync: receiving other replicas' ops into the op log, the version
vector, and applying ops to the SQLite projection in each replica's sequence order.

``brandmind.sync`` (remotes, planner, engine, daemon) is built on these; the library never
imports it.  The merge rules are written down in ``sync/rules.py``.

Receiving (:func:`receive`, ``LogTxn.receive``), in the caller's LMDB write transaction:

1. Idempotent by op id: an op already stored is a duplicate (False).  If the stored op has
   another HLC or kind, two devices write under one replica id: :class:`SyncConflict`.
   (The stored op may be a redaction of the incoming one: payloads are not compared.)
2. Skew cap: an op stamped more than ``max_skew_ms`` ahead of local time (it would otherwise
   win every LWW register and drag this device's clock along) is *held*: set aside in the
   ``sync`` database (``ho\0<replica>\0<seq>`` -> op), not applied, not lost, and without
   moving the local HLC; so are the later ops of the same replica (they come after it).
   :func:`receive_batch` releases held ops once they are within the window (every batch and
   sync round re-checks) or when the user accepts them (:func:`accept_held`, ``bm sync
   accept``).  Without a :class:`Held` (a lone ``LogTxn.receive``) such an op raises
   :class:`ClockSkew`.
3. Remove wins: an op carrying content of a user forgotten at a later HLC, or the
   ``memory.add`` of a forgotten memory, is stored redacted (as ``bm forget`` leaves the
   log), so a replica that was offline never brings the data back.  A received
   ``user.forget`` redacts the earlier ops of that user already here (as the local
   ``forget_user`` does); a received ``memory.forget`` redacts the memory's add.
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

from . import clock
from .errors import ClockSkew, InvalidInput, SyncConflict
from .oplog import _u64, dumps, loads, text_key
from .projection import apply_log_side, hlc_key

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory
    from .store import Store
    from .oplog import LogTxn, OpLog
    from .sqlstore import SQLStore


# what to do when two devices turn out to share a replica id (a copied store directory)
CLASH_HINT = ('this store was copied from another device: on the copy, save what it holds with `bm export`, then start it in a fresh BM_HOME (`bm init`, `bm sync key import KEYFILE`, `bm remote add ...`, `bm sync now`) and re-add anything only the copy had')


def split_id(op_id: str) -> tuple[str, int]:
    replica, _, seq = str(op_id).rpartition(":")
    return replica, int(seq)


def _key(replica: str, seq: int) -> bytes:
    return replica.encode() + b"\0" + _u64(seq)


# -- the version vector ------------------------------------------------------------------------
def init_version_vector(log: "OpLog", txn: Any) -> None:
    """Compute every replica's contiguous head from the ops stored (once, for old stores)."""
    sync = log.db["sync"]
    heads: dict[bytes, int] = {}
    broken: set[bytes] = set()
    for key in txn.cursor(db=log.db["ops"]).iternext(keys=True, values=False):
        replica, seq = key[:-9], int.from_bytes(key[-8:], "big")
        if replica in broken:
            continue
        if seq == heads.get(replica, 0) + 1:
            heads[replica] = seq
        else:
            broken.add(replica)
    for replica, head in heads.items():
        txn.put(b"vv\0" + replica, _u64(head), db=sync)
    txn.put(b"vv_ready", b"1", db=sync)


class Counters:
    """What every received op moves: the next arrival number, the last HLC seen and the
    replicas' contiguous heads.  A batch keeps them here and writes them once
    (:meth:`flush`, before its transaction commits) instead of reading and writing
    ``meta``/``sync`` for every op; a lone receive flushes at once."""

    __slots__ = ("arrival", "wall", "counter", "hlc_moved", "heads", "moved")

    def __init__(self, t: "LogTxn") -> None:
        self.arrival = t._meta_int(b"next_arrival")
        raw = t.txn.get(b"hlc", db=t.db["meta"])
        last = loads(raw) if raw else [0, 0]
        self.wall, self.counter = int(last[0]), int(last[1])
        self.hlc_moved = False
        self.heads: dict[str, int] = {}
        self.moved: set[str] = set()

    def head(self, t: "LogTxn", replica: str) -> int:
        head = self.heads.get(replica)
        if head is None:
            raw = t.txn.get(b"vv\0" + replica.encode(), db=t.db["sync"])
            head = self.heads[replica] = int.from_bytes(raw, "big") if raw else 0
        return head

    def advance(self, t: "LogTxn", replica: str, seq: int) -> None:
        """Op ``seq`` of ``replica`` was stored: move its head over every op now contiguous."""
        head = self.head(t, replica)
        if seq != head + 1:
            return
        ops = t.db["ops"]
        head = seq
        while t.txn.get(_key(replica, head + 1), db=ops) is not None:
            head += 1
        self.heads[replica] = head
        self.moved.add(replica)

    def see(self, hlc: list) -> None:
        """The receive rule of the HLC: local ops made later are stamped after this one."""
        if (int(hlc[0]), int(hlc[1])) > (self.wall, self.counter):
            self.wall, self.counter = int(hlc[0]), int(hlc[1])
            self.hlc_moved = True

    def flush(self, t: "LogTxn") -> None:
        meta, sync = t.db["meta"], t.db["sync"]
        t.txn.put(b"next_arrival", _u64(self.arrival), db=meta)
        if self.hlc_moved:
            t.txn.put(b"hlc", json.dumps([self.wall, self.counter, t.log.replica]).encode(), db=meta)
            self.hlc_moved = False
        for replica in self.moved:
            t.txn.put(b"vv\0" + replica.encode(), _u64(self.heads[replica]), db=sync)
        self.moved.clear()


# -- small LMDB indexes ------------------------------------------------------------------------------
def _get_str(t: "LogTxn", key: bytes) -> str | None:
    raw = t.txn.get(key, db=t.db["sync"])
    return bytes(raw).decode() if raw is not None else None


def _put_max(t: "LogTxn", key: bytes, hk: str) -> None:
    old = _get_str(t, key)
    if old is None or hk > old:
        t.txn.put(key, hk.encode(), db=t.db["sync"])


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


FORGETS = frozenset({"memory.forget", "bead.forget", "kg.node.remove", "user.forget"})


def receive(t: "LogTxn", op: dict, *, max_skew_ms: int, now_ms: int | None = None,
            counters: Counters | None = None, held: "Held | None" = None) -> bool | None:
    """See the module docstring.  Returns False for an op stored already, None for an op
    set aside in ``held`` (too far ahead, or after a held op of its replica).  ``counters``:
    a batch's (:func:`receive_batch`), flushed by it; without, they are written at once."""
    replica, seq = _check_shape(op)
    key = _key(replica, seq)
    raw = t.txn.get(key, db=t.db["ops"])
    if raw is not None:
        stored = loads(raw)
        if list(stored["hlc"]) != list(op["hlc"]) or stored["kind"] != op["kind"]:
            raise SyncConflict(
                f"two devices share replica id {replica}: op {op['id']} is {stored['kind']} at "
                f"{stored['hlc'][0]} here but {op['kind']} at {op['hlc'][0]} on the remote",
                hint=CLASH_HINT)
        return False
    now = now_ms if now_ms is not None else clock.now_millis()
    ahead = int(op["hlc"][0]) - now
    if held is not None and held.sets_aside(op, replica, seq, ahead > max_skew_ms):
        return None
    if ahead > max_skew_ms:
        raise ClockSkew(
            f"op {op['id']} from replica {replica} is stamped {ahead / 1000:.1f} s ahead of this "
            f"device's clock (more than the {max_skew_ms / 1000:g} s allowed by sync_max_skew_ms)",
            hint="fix the clock of the device that wrote it (or this one's: check NTP), or raise "
                 "the cap with `bm config set sync_max_skew_ms N`")
    lone = counters is None
    c = Counters(t) if lone else counters
    hk = hlc_key(op["hlc"])
    op = {"id": op["id"], "hlc": list(op["hlc"]), "kind": op["kind"], "payload": op["payload"]}
    op["payload"] = _remove_wins(t, op, hk)
    kind, p = op["kind"], op["payload"]
    t.txn.put(key, dumps(op), db=t.db["ops"])
    arrival = c.arrival
    c.arrival += 1
    t.txn.put(_u64(arrival), key, db=t.db["order"])
    if t.fresh is not None:
        t.fresh[key] = (arrival, op)
    c.advance(t, replica, seq)
    if replica == t.log.replica and seq >= t._meta_int(b"next_seq"):
        t.txn.put(b"next_seq", _u64(seq + 1), db=t.db["meta"])
    c.see(op["hlc"])
    if kind == "kg.node" and isinstance(p.get("user"), str):
        gone = _get_str(t, b"fu\0" + p["user"].encode())
        if gone is not None and hk < gone:  # a forgotten user's node arrived after the forget
            _forget_node(t, p["id"], gone)
    if not p.get("redacted") and "refused" not in p:  # (refused: brandmind/opcheck.py)
        if kind == "memory.add":
            t.txn.put(b"ma\0" + p["id"].encode(), op["id"].encode(), db=t.db["sync"])
        elif kind == "memory.forget":
            forget_memory_in_log(t, p["id"], hk)
        elif kind == "kg.node.remove":
            forget_nodes_in_log(t, {p["id"]}, hk)
        elif kind == "bead.forget":
            blob = forget_bead_in_log(t, p["id"], hk)
            if blob:
                t.dead_blobs.append(blob)
        elif kind == "user.forget":
            forget_user_in_log(t, op)
    apply_log_side(t, op, hk)
    if lone:
        c.flush(t)
    return True


def _owner(op: dict) -> str | None:
    p = op["payload"]
    if op["kind"] == "bead.add":
        bead = p.get("bead")
        return bead.get("user") if isinstance(bead, dict) else None
    user = p.get("user")
    return user if isinstance(user, str) else None


def _remove_wins(t: "LogTxn", op: dict, hk: str) -> dict:
    """The payload to store: redacted when its memory or user was forgotten after it."""
    kind, p = op["kind"], op["payload"]
    if p.get("redacted"):
        return p
    if kind == "memory.add" and isinstance(p.get("id"), str) and _get_str(t, b"fm\0" + p["id"].encode()):
        return {"id": p["id"], "redacted": True}
    if kind == "bead.add" and isinstance(p.get("bead"), dict) and isinstance(p["bead"].get("id"), str) \
            and _get_str(t, b"fb\0" + p["bead"]["id"].encode()):
        return {"id": p["bead"]["id"], "redacted": True}
    user = _owner(op)
    if user is not None:
        gone = _get_str(t, b"fu\0" + user.encode())
        if gone is not None and hk < gone:
            from .memory import _owned_by, _redacted

            if _owned_by(op, user):
                return _redacted(op)
    if kind in ("kg.edge", "kg.mention", "kg.node"):
        ends = {"kg.edge": (p.get("src"), p.get("dst")), "kg.mention": (p.get("node"),),
                "kg.node": (p.get("id"),)}[kind]
        for end in ends:
            if isinstance(end, str):
                gone = _get_str(t, b"fn\0" + end.encode())
                if gone is not None and hk < gone:
                    from .memory import _redacted

                    return _redacted(op)
    return p


def forget_memory_in_log(t: "LogTxn", memory_id: str, hk: str, add_op: str | None = None) -> None:
    """A ``memory.forget``: later adds of the id are stored redacted; the add here is redacted."""
    _put_max(t, b"fm\0" + memory_id.encode(), hk)
    add_op = add_op or _get_str(t, b"ma\0" + memory_id.encode())
    if add_op:
        t.redact(add_op, {"id": memory_id, "redacted": True})


def forget_bead_in_log(t: "LogTxn", bead_id: str, hk: str) -> str | None:
    """A ``bead.forget``: the bead leaves the LMDB projections, the op that added it is
    redacted, and an add of it arriving later is stored redacted (remove wins).  Returns
    the digest of the bead's blob, for the caller to delete once no bead holds it."""
    _put_max(t, b"fb\0" + bead_id.encode(), hk)
    bead = t.get_bead(bead_id)
    if bead is not None:
        t.forget_bead(bead)
    add_op = _get_str(t, b"bo\0" + bead_id.encode())
    if add_op is None:  # a bead stored before the op index existed: look for its add
        add_op = next((op_id for op_id, o in t.iter_ops() if o["kind"] == "bead.add"
                       and not o["payload"].get("redacted") and o["payload"]["bead"].get("id") == bead_id), None)
    if add_op is not None:
        t.redact(add_op, {"id": bead_id, "redacted": True})
    return bead.get("blob") if bead else None


def forget_nodes_in_log(t: "LogTxn", node_ids: set[str], hk: str) -> None:
    """``kg.node.remove`` (bm kg rm, or a node a forget left unnamed): the nodes' adds are
    redacted (their names leave the log), and so are their edges and mentions stamped
    before ``hk``, here now or arriving later (remove wins)."""
    from .memory import _redacted

    for node in node_ids:
        _put_max(t, b"fn\0" + node.encode(), hk)
    for op_id, o in list(t.iter_ops()):
        p = o["payload"]
        if p.get("redacted") or hlc_key(o["hlc"]) >= hk:
            continue
        if o["kind"] == "kg.node" and p.get("id") in node_ids:
            t.redact(op_id, _redacted(o))
        elif o["kind"] in ("kg.edge", "kg.mention") and node_ids.intersection(
                (p.get("node"),) if o["kind"] == "kg.mention" else (p.get("src"), p.get("dst"))):
            t.redact(op_id, _redacted(o))


def forget_user_in_log(t: "LogTxn", op: dict) -> int:
    """A ``user.forget``: redact every earlier op carrying the user's content (memories,
    beads, graph nodes and the edges and mentions of those, their persona assignments,
    their blocks), and remember the forget for ops of theirs that arrive later.
    Returns how many ops were redacted."""
    from .memory import _owned_by, _redacted

    user = op["payload"]["user"]
    forgotten_at = hlc_key(op["hlc"])
    _put_max(t, b"fu\0" + user.encode(), forgotten_at)
    earlier = [o for _, o in t.iter_ops() if hlc_key(o["hlc"]) < forgotten_at]
    # the user's nodes made before the forget (also those redacted by an earlier forget)
    nodes = {o["payload"]["id"] for o in earlier if o["kind"] == "kg.node" and o["payload"].get("user") == user}
    for node in nodes:
        _put_max(t, b"fn\0" + node.encode(), forgotten_at)
    n = 0
    for old in earlier:
        if _owned_by(old, user, nodes):  # (False for what is redacted already)
            t.redact(old["id"], _redacted(old))
            n += 1
    return n


def _forget_node(t: "LogTxn", node_id: str, forgotten_at: str) -> None:
    """A node of a forgotten user that arrived after the forget: the edges and mentions of it
    stamped before the forget are redacted too (as if it had been here at the forget).  Ops
    arriving later are checked against ``fn`` at once; the ones here already are found by one
    scan of the log per batch (:func:`flush_late_nodes`)."""
    _put_max(t, b"fn\0" + node_id.encode(), forgotten_at)
    late = t.__dict__.setdefault("_late_nodes", {})
    late[node_id] = max(late.get(node_id, ""), forgotten_at)
    if not t.__dict__.get("_batch"):
        flush_late_nodes(t)


def flush_late_nodes(t: "LogTxn") -> None:
    from .memory import _redacted

    late = t.__dict__.pop("_late_nodes", None)
    if not late:
        return
    for _, o in t.iter_ops():
        p = o["payload"]
        if p.get("redacted") or o["kind"] not in ("kg.mention", "kg.edge"):
            continue
        ends = (p.get("node"),) if o["kind"] == "kg.mention" else (p.get("src"), p.get("dst"))
        hk = hlc_key(o["hlc"])
        if any(isinstance(end, str) and end in late and hk < late[end] for end in ends):
            t.redact(o["id"], _redacted(o))


# -- ops held back: stamped too far ahead of this device's clock -------------------------------------
HELD = b"ho\0"  # sync db: ho\0<replica>\0<seq u64> -> the op, as received
ACCEPT_ALL_MS = 1 << 62  # the skew cap of an accepted op: none


def _held_key(replica: str, seq: int) -> bytes:
    return HELD + replica.encode() + b"\0" + _u64(seq)


class Held:
    """The held ops as one receive transaction sees them.  An op is set aside when it is
    stamped too far ahead, or when an earlier op of its replica is held (a replica's ops
    apply in seq order; its HLC never goes back, so the later ones are as far ahead).
    Setting an op aside stores it and nothing else: no arrival, no version vector, no HLC."""

    def __init__(self, t: "LogTxn") -> None:
        self.t = t
        self.first: dict[str, int | None] = {}  # replica -> its lowest held seq (None: none)
        self.count = 0  # ops this transaction set aside (held before or not)

    def first_held(self, replica: str) -> int | None:
        if replica not in self.first:
            prefix = HELD + replica.encode() + b"\0"
            cur = self.t.txn.cursor(db=self.t.db["sync"])
            key = cur.key() if cur.set_range(prefix) else b""
            ok = key.startswith(prefix) and len(key) == len(prefix) + 8
            self.first[replica] = int.from_bytes(key[-8:], "big") if ok else None
        return self.first[replica]

    def sets_aside(self, op: dict, replica: str, seq: int, too_far: bool) -> bool:
        first = self.first_held(replica)
        if not too_far and (first is None or seq < first):
            return False
        key, sync = _held_key(replica, seq), self.t.db["sync"]
        raw = self.t.txn.get(key, db=sync)
        if raw is not None:
            stored = loads(raw)
            if list(stored["hlc"]) != list(op["hlc"]) or stored["kind"] != op["kind"]:
                raise SyncConflict(f"two devices share replica id {replica}: op {op['id']} is "
                                   f"{stored['kind']} at {stored['hlc'][0]} here (held) but {op['kind']} "
                                   f"at {op['hlc'][0]} on the remote", hint=CLASH_HINT)
        else:
            self.t.txn.put(key, dumps({"id": op["id"], "hlc": list(op["hlc"]), "kind": op["kind"],
                                       "payload": op["payload"]}), db=sync)
        if first is None or seq < first:
            self.first[replica] = seq
        self.count += 1
        return True


def _release(t: "LogTxn", held: Held, counters: Counters, *, now: int, max_skew_ms: int,
             accept: Callable[[str], bool] | None) -> list[dict]:
    """Receive the held ops that are now within the window (or that ``accept`` takes, for
    their replica), each replica's in seq order up to its first one still too far ahead."""
    sync = t.db["sync"]
    out = []
    blocked: set[str] = set()
    for key, op in _held_in(t.txn.cursor(db=sync)):
        replica, _seq = split_id(op["id"])
        if replica in blocked:
            continue
        taken = accept is not None and accept(replica)
        if not taken and int(op["hlc"][0]) - now > max_skew_ms:
            blocked.add(replica)
            continue
        t.txn.delete(key, db=sync)
        if receive(t, op, max_skew_ms=ACCEPT_ALL_MS if taken else max_skew_ms, now_ms=now, counters=counters):
            out.append(op)
    held.first.clear()
    return out


def _held_in(cur: Any, prefix: bytes = HELD) -> list[tuple[bytes, dict]]:
    """(key, op) of the held ops under ``prefix``, read through a cursor on the sync db."""
    out: list[tuple[bytes, dict]] = []
    if cur.set_range(prefix):
        for key, raw in cur:
            if not key.startswith(prefix):
                break
            out.append((bytes(key), loads(raw)))
    return out


def has_held(log: "OpLog") -> bool:
    with log.read() as txn:
        cur = txn.cursor(db=log.db["sync"])
        return cur.set_range(HELD) and cur.key().startswith(HELD)


def held_ops(log: "OpLog", replica: str | None = None) -> list[dict]:
    """The held ops (of one replica), by replica and seq."""
    prefix = HELD + (replica.encode() + b"\0" if replica is not None else b"")
    with log.read() as txn:
        return [op for _, op in _held_in(txn.cursor(db=log.db["sync"]), prefix)]


def held_summary(log: "OpLog", now_ms: int | None = None) -> list[dict]:
    """Per replica: how many of its ops are held, their seqs and how far ahead of this
    device's clock they are stamped (``ahead_ms``: the furthest; ``due_in_ms``: until the
    first one is within the window is up to the caller: it knows the window)."""
    now = now_ms if now_ms is not None else clock.now_millis()
    out: dict[str, dict] = {}
    for op in held_ops(log):
        replica, seq = split_id(op["id"])
        wall = int(op["hlc"][0])
        g = out.get(replica)
        if g is None:
            g = out[replica] = {"replica": replica, "ops": 0, "first_seq": seq, "last_seq": seq,
                                "first_ahead_ms": wall - now, "ahead_ms": wall - now}
        g["ops"] += 1
        g["first_seq"], g["last_seq"] = min(g["first_seq"], seq), max(g["last_seq"], seq)
        g["first_ahead_ms"] = min(g["first_ahead_ms"], wall - now)
        g["ahead_ms"] = max(g["ahead_ms"], wall - now)
    for g in out.values():
        g["ahead"] = clock.span(g["ahead_ms"])
        g["stamped_up_to"] = clock.iso(now + g["ahead_ms"])
    return list(out.values())


def held_top(log: "OpLog", replica: str, after: int) -> int:
    """The highest seq S such that ops ``after + 1 .. S`` of ``replica`` are all held (or
    ``after``): a pull goes on from there instead of fetching the held ones again."""
    prefix = HELD + replica.encode() + b"\0"
    top = after
    with log.read() as txn:
        cur = txn.cursor(db=log.db["sync"])
        ok = cur.set_range(prefix + _u64(after + 1))
        while ok and cur.key() == prefix + _u64(top + 1):
            top += 1
            ok = cur.next()
    return top


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
    made, so neither is read back from LMDB.  (Another process may redact one of them
    before the projection runs: its forget is a later op, which removes it again.)"""
    from .opcheck import screen

    ops = [screen(op) for op in ops]  # an invalid op is stored refused (brandmind/opcheck.py)
    received = duplicates = 0
    if not ops and accept is None and not has_held(store.log):
        return {"received": 0, "duplicates": 0}
    max_skew = int(store.config.sync_max_skew_ms)
    now = now_ms if now_ms is not None else clock.now_millis()
    vectors = _embed_ahead(store, ops)
    with store.log.write() as t:
        t._batch = True  # one scan of the log for late nodes of forgotten users, at the end
        t.fresh = {}
        counters = Counters(t)
        for text, vec in vectors.items():
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
        flush_late_nodes(t)
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
    if op["kind"] == "memory.forget" and isinstance(p.get("id"), str) and not p.get("redacted"):
        row = store.sql.conn.execute("SELECT op_id FROM memories WHERE id=?", (p["id"],)).fetchone()
        if row is not None:
            t.redact(row[0], {"id": p["id"], "redacted": True})


def _embed_ahead(store: "Store", ops: list[dict], batch: int = 256) -> dict[str, bytes]:
    """The vectors (this device's model) of pulled memories' texts that the vector cache
    lacks, made in batches before any lock is taken: text -> float32 bytes."""
    model = store.sql.model
    texts = list(dict.fromkeys(
        op["payload"]["text"] for op in ops
        if isinstance(op, dict) and op.get("kind") == "memory.add" and isinstance(op.get("payload"), dict)
        and isinstance(op["payload"].get("text"), str) and not op["payload"].get("redacted")))
    with store.log.read() as txn:
        vcache = store.log.db["vcache"]
        texts = [text for text in texts if txn.get(text_key(model, text), db=vcache) is None]
    out: dict[str, bytes] = {}
    for i in range(0, len(texts), batch):
        chunk = texts[i:i + batch]
        for text, vec in zip(chunk, store.embed_docs(chunk)):
            out[text] = vec.tobytes()
    return out


# -- applying in per-replica order -------------------------------------------------------------------
def _heads(log: "OpLog", sql: "SQLStore", start: int) -> dict[str, int]:
    c = sql.conn
    if sql.get_meta("sync_heads") is None:
        # an index built before sync: everything up to ``start`` was applied, in order
        heads: dict[str, int] = {}
        if start:
            for arrival, op in log.ops_after(0):
                if arrival > start:
                    break
                replica, seq = split_id(op["id"])
                heads[replica] = max(heads.get(replica, 0), seq)
        c.execute("DELETE FROM sync_heads")
        c.executemany("INSERT INTO sync_heads VALUES(?,?)", list(heads.items()))
        sql.set_meta("sync_heads", "1")
        return heads
    return dict(c.execute("SELECT replica, seq FROM sync_heads").fetchall())


def catch_up(log: "OpLog", sql: "SQLStore", vector_for: Callable[[str], bytes],
             progress: Callable[[int, int], None] | None = None, *,
             apply: Callable[..., None] | None = None, fresh: dict[int, dict] | None = None) -> int:
    """Apply to ``sql`` every op it has not seen, in arrival order, each replica's ops in
    seq order (held back until the gap fills); returns how many arrivals were processed.
    ``fresh``: arrival -> op of ops the caller just stored (not read back from LMDB).

    An op whose apply fails on its data (a log written by an older bm) never stops the
    store: the batch is rolled back and applied again with each op in a savepoint, and the
    failing op is quarantined with its error (brandmind/opcheck.py) and counted as applied."""
    if apply is None:
        from .projection import apply_sql_side as apply
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
        from .opcheck import quarantine

        c = sql.conn
        c.execute("SAVEPOINT bm_op")
        try:
            apply(sql, op, vector_for)
        except errors as exc:
            c.execute("ROLLBACK TO bm_op")
            c.execute("RELEASE bm_op")
            detail = exc.message if isinstance(exc, InvalidInput) else str(exc)
            quarantine(sql, op, f"apply failed: {type(exc).__name__}: {detail}")
        else:
            c.execute("RELEASE bm_op")

    return run


def _checking(apply: Callable[..., None], checked_from: int) -> Callable[..., None]:
    """``apply`` that first checks the ops stored before ops were checked on entry (arrival
    below ``checked_from``: a log written by an older bm), quarantining the invalid ones."""
    from .opcheck import problem, quarantine

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
    c = sql.conn
    n = 0
    with sql.write():
        start = sql.applied()
        total = log.last_arrival() - start
        if total >= 1000:
            sql.bulk()
        heads = _heads(log, sql, start)
        held = {(r, s) for r, s in c.execute("SELECT replica, seq FROM sync_held")}
        changed: set[str] = set()
        last = start
        # nothing waits (the common case): converge.replay skips its per-add lookup until
        # converge.aim parks an op; only trusted under this write lock
        sql.no_pending = c.execute("SELECT 1 FROM sync_pending LIMIT 1").fetchone() is None
        try:
            for arrival, op in log.ops_after(start, known=fresh):
                replica, seq = split_id(op["id"])
                head = heads.get(replica, 0)
                if seq == head + 1:
                    apply(sql, op, vector_for, arrival)
                    head = seq
                    while (replica, head + 1) in held:
                        nxt = log.get_op(replica, head + 1)
                        if nxt is None:
                            break
                        apply(sql, nxt, vector_for)
                        held.discard((replica, head + 1))
                        c.execute("DELETE FROM sync_held WHERE replica=? AND seq=?", (replica, head + 1))
                        head += 1
                    heads[replica] = head
                    changed.add(replica)
                elif seq > head + 1 and (replica, seq) not in held:
                    held.add((replica, seq))
                    c.execute("INSERT OR IGNORE INTO sync_held VALUES(?,?)", (replica, seq))
                last = arrival
                n += 1
                if progress and n % 500 == 0:
                    progress(n, total)
        finally:
            sql.no_pending = False
        c.executemany("INSERT OR REPLACE INTO sync_heads VALUES(?,?)", [(r, heads[r]) for r in sorted(changed)])
        sql.set_meta("applied", str(last))
    return n
