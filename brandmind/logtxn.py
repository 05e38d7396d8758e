"""One LMDB write transaction on the op log (``OpLog.write()``, brandmind/oplog.py): append
this replica's ops, store other replicas' (brandmind/replication.py), redact, and write the
LMDB projections (beads, dedup keys, vector cache), the forget marks of remove wins
(brandmind/logforget.py) and the ops held for clock skew (brandmind/held.py).

With brandmind/oplog.py, the only code that knows the LMDB key layout (the named databases
and their keys are listed in oplog's docstring); the key builders are here.
"""
from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Iterator

from .clock import CLOCK_HINT, HLC, hlc_key, skewed_by, span
from .errors import ClockSkew
from .ingest import FORGOTTEN_KEY, SUPERSEDED_KEY, forgotten_key, mark_key
from .logvalues import PACKED_AFTER, dumps, loads, pack, pack_after, plain  # noqa: F401  (oplog imports dumps/loads from here)

if TYPE_CHECKING:  # pragma: no cover
    from .oplog import OpLog

CLOCK_MARK = b"clock_skew"  # meta: a sync round found this clock off (OpLog.mark_clock)


def u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def version_vector_in(cur: Any) -> dict[str, int]:
    """The version vector kept in a ``sync`` database, read through a cursor on it."""
    out: dict[str, int] = {}
    ok = cur.set_range(b"vv\0")
    while ok and cur.key().startswith(b"vv\0"):
        head = int.from_bytes(cur.value(), "big")
        if head:
            out[cur.key()[3:].decode()] = head
        ok = cur.next()
    return out


def text_key(model: str, text: str) -> bytes:
    return model.encode() + b"\0" + hashlib.sha256(text.encode()).digest()[:16]


# sync db keys (see the module docstring): what a forget mark of each kind is kept under
MARKS = {"user": b"fu\0", "memory": b"fm\0", "node": b"fn\0", "bead": b"fb\0"}
HELD = b"ho\0"  # sync db: ho\0<replica>\0<seq u64> -> an op held back (brandmind/held.py)


JOB = b"j\0"  # jobs db: j\0<seq u64> -> a queued job (brandmind/backlog.py); "next", "done": counters


def job_key(seq: int) -> bytes:
    return JOB + u64(seq)


def op_key(replica: str, seq: int) -> bytes:
    return replica.encode() + b"\0" + u64(seq)


def _split(op_id: str) -> tuple[str, int]:
    """An op id ``replica:seq`` as (replica, seq)."""
    replica, seq = op_id.rsplit(":", 1)
    return replica, int(seq)


def held_key(replica: str, seq: int) -> bytes:
    return HELD + replica.encode() + b"\0" + u64(seq)


def held_in(cur: Any, prefix: bytes = HELD) -> list[tuple[str, int, dict]]:
    """(replica, seq, op) of the held ops under ``prefix``, through a cursor on the sync db."""
    out: list[tuple[str, int, dict]] = []
    if cur.set_range(prefix):
        for key, raw in cur:
            if not key.startswith(prefix):
                break
            key = bytes(key)
            out.append((key[len(HELD):-9].decode(), int.from_bytes(key[-8:], "big"), loads(raw)))
    return out


# beads db: a bead is kept as this marker + the key of the bead.add op that carries it (the
# op holds the whole bead; the second copy took 457 of the beads database's MB at 1,000,000
# turns, the refs take 100).  Values of older
# stores (packed or plain JSON, logvalues) stay readable; `bm rebuild` rewrites them as refs.
BEAD_REF = b"\x02"

AFTER = bytes((PACKED_AFTER,))


def before_key(key: bytes) -> bytes | None:
    """The ops key of the op before the one under ``key`` in its replica's stream (None: the first)."""
    seq = int.from_bytes(key[-8:], "big")
    return key[:-8] + u64(seq - 1) if seq > 1 else None


def op_json(txn: Any, ops_db: Any, key: bytes | memoryview, raw: bytes | memoryview) -> bytes:
    """The JSON bytes of the op stored under ``key`` as ``raw`` (a ``PACKED_AFTER`` value is
    read with the op before it, which never is one itself: logvalues).  Damage raises ValueError."""
    if raw[:1] != AFTER:
        return plain(raw)
    k = before_key(bytes(key))
    prev = txn.get(k, db=ops_db) if k is not None else None
    return plain(raw, plain(prev) if prev is not None and prev[:1] != AFTER else None)


def op_in(txn: Any, ops_db: Any, key: bytes | memoryview, raw: bytes | memoryview) -> dict:
    """The op stored under ``key`` as ``raw`` (:func:`op_json`)."""
    return loads(op_json(txn, ops_db, key, raw))


def bead_in(txn: Any, ops_db: Any, raw: bytes | memoryview | None) -> dict | None:
    """The bead a ``beads`` value holds: the value itself (a store from before refs) or the
    bead of the op a ``BEAD_REF`` names (None when that op is gone or no longer carries it,
    e.g. redacted: a bead is never read from anywhere else)."""
    if raw is None:
        return None
    if raw[:1] != BEAD_REF:
        return loads(raw)
    key = bytes(raw[1:])
    op_raw = txn.get(key, db=ops_db)
    payload = op_in(txn, ops_db, key, op_raw).get("payload") if op_raw is not None else None
    bead = payload.get("bead") if isinstance(payload, dict) else None
    return bead if isinstance(bead, dict) else None


def bead_time_key(bead: dict) -> bytes:
    return bead["user"].encode() + b"\0" + u64(max(0, int(bead["ts"]))) + b"\0" + bead["id"].encode()


class LogTxn:
    """One LMDB write transaction: append ops and write their LMDB projections."""

    def __init__(self, log: OpLog, txn: Any) -> None:
        self.log = log
        self.txn = txn
        self.db = log.db
        # ops key -> (arrival, op as stored) of the ops received in this transaction, when
        # its caller asks (replication.receive_batch: the projection then needs no read back)
        self.fresh: dict[bytes, tuple[int, dict]] | None = None
        # this transaction redacted or deleted text: the file is scrubbed after commit
        self.scrub = False
        self.dead_blobs: list[str] = []  # blobs of forgotten beads: deleted after commit
        # a batch (replication.receive_batch) redacts the late nodes' edges and mentions with
        # one scan of the log at its end instead of one per node (logforget.flush_late_nodes)
        self.batch = False
        self.late_nodes: dict[str, str] = {}  # node id -> HLC key of the forget that removed it

    def _put_end(self, key: bytes, value: bytes, db: Any) -> None:
        """Put, appending when ``key`` sorts after every key of ``db`` (ops of this replica,
        arrival numbers, bead ids: time-ordered): an append fills pages to the end instead
        of splitting them (ops 8% smaller on a 20,000-memory store)."""
        cur = self.txn.cursor(db=db)
        self.txn.put(key, value, db=db, append=not cur.last() or bytes(cur.key()) < key)

    def _meta_int(self, key: bytes) -> int:
        return int.from_bytes(self.txn.get(key, db=self.db["meta"]), "big")

    def _refuse_while_skewed(self) -> None:
        """ClockSkew while the last sync round found this device's clock off by more than the
        window and it has not been set since (clock.skewed_by): an op stamped now would be
        refused, or win every last-writer-wins register, on the other devices."""
        raw = self.txn.get(CLOCK_MARK, db=self.db["meta"])
        offset = skewed_by(loads(raw)) if raw else None
        if offset is not None:
            side = "ahead of" if offset > 0 else "behind"
            raise ClockSkew(f"this device's clock is {span(offset)} {side} the sync server's, so bm "
                            "stamps no new changes until it is set right (nothing was stored)",
                            hint=CLOCK_HINT)

    def append(self, kind: str, payload: dict, *, now_ms: int | None = None) -> dict:
        """Append an op of this replica; returns it (with its id and HLC).  The payload is
        checked first (``OpLog.check``: brandmind/opcheck.py): InvalidInput, and nothing of it
        is stored."""
        if self.log.check is not None:
            self.log.check(kind, payload)
        meta = self.db["meta"]
        if now_ms is None:
            self._refuse_while_skewed()
        replica = self.log.replica
        seq = self._meta_int(b"next_seq")
        raw = self.txn.get(b"hlc", db=meta)
        last = HLC.decode(loads(raw)) if raw else HLC(0, 0, replica)
        hlc = HLC(last.wall_ms, last.counter, replica).tick(now_ms)
        op = {"id": f"{replica}:{seq}", "hlc": hlc.encode(), "kind": kind, "payload": payload}
        key = replica.encode() + b"\0" + u64(seq)
        self._put_end(key, self._pack_op(key, op), self.db["ops"])
        arrival = self._meta_int(b"next_arrival")
        self._put_end(u64(arrival), key, self.db["order"])
        self.txn.put(b"next_seq", u64(seq + 1), db=meta)
        self.txn.put(b"next_arrival", u64(arrival + 1), db=meta)
        self.txn.put(b"hlc", json.dumps(hlc.encode()).encode(), db=meta)
        self.txn.put(b"vv\0" + replica.encode(), u64(seq), db=self.db["sync"])
        return op

    # -- receiving ops of other replicas (brandmind/replication.py) --------------------------
    def next_arrival(self) -> int:
        return self._meta_int(b"next_arrival")

    def next_seq(self) -> int:
        return self._meta_int(b"next_seq")

    def set_next_seq(self, seq: int) -> None:
        self.txn.put(b"next_seq", u64(seq), db=self.db["meta"])

    def last_hlc(self) -> tuple[int, int]:
        """The (wall ms, counter) of this replica's clock as last stored."""
        raw = self.txn.get(b"hlc", db=self.db["meta"])
        last = loads(raw) if raw else [0, 0]
        return int(last[0]), int(last[1])

    def head(self, replica: str) -> int:
        """``replica``'s contiguous head in the version vector (0: none)."""
        raw = self.txn.get(b"vv\0" + replica.encode(), db=self.db["sync"])
        return int.from_bytes(raw, "big") if raw else 0

    def has_op(self, replica: str, seq: int) -> bool:
        return self.txn.get(op_key(replica, seq), db=self.db["ops"]) is not None

    def stored_op(self, replica: str, seq: int) -> dict | None:
        key = op_key(replica, seq)
        raw = self.txn.get(key, db=self.db["ops"])
        return op_in(self.txn, self.db["ops"], key, raw) if raw is not None else None

    def _pack_op(self, key: bytes, op: dict) -> bytes:
        """The stored form of the op going under ``key``: packed after the op before it in its
        replica's stream when that is here and not itself packed so (logvalues.PACKED_AFTER)."""
        k = before_key(key)
        prev = self.txn.get(k, db=self.db["ops"]) if k is not None else None
        if prev is None or prev[:1] == AFTER:
            return pack(op)
        return pack_after(op, plain(prev))

    def put_received(self, replica: str, seq: int, op: dict, arrival: int) -> None:
        """Store a received op under arrival number ``arrival`` (kept in ``fresh`` when the
        caller asked for it)."""
        key = op_key(replica, seq)
        self._put_end(key, self._pack_op(key, op), self.db["ops"])
        self._put_end(u64(arrival), key, self.db["order"])
        if self.fresh is not None:
            self.fresh[key] = (arrival, op)

    def write_counters(self, arrival: int, hlc: tuple[int, int] | None, heads: dict[str, int]) -> None:
        """What received ops moved: the next arrival number, this replica's clock (None: it
        did not move) and replicas' contiguous heads."""
        self.txn.put(b"next_arrival", u64(arrival), db=self.db["meta"])
        if hlc is not None:
            self.txn.put(b"hlc", json.dumps([hlc[0], hlc[1], self.log.replica]).encode(), db=self.db["meta"])
        for replica, head in heads.items():
            self.txn.put(b"vv\0" + replica.encode(), u64(head), db=self.db["sync"])

    # -- remove wins: forget marks, and the add ops a forget redacts (brandmind/logforget.py) --
    def forget_mark(self, what: str, name: str) -> str | None:
        """HLC key of the latest forget of a ``user`` / ``memory`` / ``node`` / ``bead``."""
        raw = self.txn.get(MARKS[what] + name.encode(), db=self.db["sync"])
        return bytes(raw).decode() if raw is not None else None

    def set_forget_mark(self, what: str, name: str, hk: str) -> None:
        self.txn.put(MARKS[what] + name.encode(), hk.encode(), db=self.db["sync"])

    def note_memory_add(self, memory_id: str, op_id: str) -> None:
        """The op id of a received memory's add (a memory.forget arriving later redacts it)."""
        self.txn.put(b"ma\0" + memory_id.encode(), op_id.encode(), db=self.db["sync"])

    def memory_add_op(self, memory_id: str) -> str | None:
        raw = self.txn.get(b"ma\0" + memory_id.encode(), db=self.db["sync"])
        return bytes(raw).decode() if raw is not None else None

    def bead_add_op(self, bead_id: str) -> str | None:
        """The id of a bead's add op: from its ref while it is stored (a bead stored whole by an
        older version, or one deleted since, has a ``bo`` entry: :meth:`delete_bead`)."""
        raw = self.txn.get(b"bo\0" + bead_id.encode(), db=self.db["sync"])
        if raw is not None:
            return bytes(raw).decode()
        ref = self.txn.get(bead_id.encode(), db=self.db["beads"])
        if ref is None or ref[:1] != BEAD_REF:
            return None
        key = bytes(ref[1:])
        return f"{key[:-9].decode()}:{int.from_bytes(key[-8:], 'big')}"

    # -- ops held back for clock skew (brandmind/held.py) ----------------------------------
    def first_held(self, replica: str) -> int | None:
        """The lowest held seq of ``replica`` (None: none held)."""
        prefix = HELD + replica.encode() + b"\0"
        cur = self.txn.cursor(db=self.db["sync"])
        key = cur.key() if cur.set_range(prefix) else b""
        ok = key.startswith(prefix) and len(key) == len(prefix) + 8
        return int.from_bytes(key[-8:], "big") if ok else None

    def held_op(self, replica: str, seq: int) -> dict | None:
        raw = self.txn.get(held_key(replica, seq), db=self.db["sync"])
        return loads(raw) if raw is not None else None

    def hold(self, replica: str, seq: int, op: dict) -> None:
        self.txn.put(held_key(replica, seq), pack(op), db=self.db["sync"])

    def unhold(self, replica: str, seq: int) -> None:
        self.txn.delete(held_key(replica, seq), db=self.db["sync"])

    def held(self) -> list[tuple[str, int, dict]]:
        """Every held op as ``(replica, seq, op)``, by replica and seq."""
        return held_in(self.txn.cursor(db=self.db["sync"]))

    def redact(self, op_id: str, payload: dict) -> None:
        """Replace the payload of an earlier op (used by forget, so text does not linger in the log)."""
        replica, seq = _split(op_id)
        key = op_key(replica, seq)
        ops = self.db["ops"]
        raw = self.txn.get(key, db=ops)
        if raw is None:
            return
        op = op_in(self.txn, ops, key, raw)
        after = op_key(replica, seq + 1)
        raw_after = self.txn.get(after, db=ops)
        if raw_after is not None and raw_after[:1] == AFTER:  # read with this op: made whole first
            self.txn.put(after, pack(op_in(self.txn, ops, after, raw_after)), db=ops)
        self.scrub = True
        op["payload"] = payload
        self.txn.put(key, pack(op), db=ops)
        if self.fresh is not None and key in self.fresh:
            self.fresh[key] = (self.fresh[key][0], op)

    def iter_ops(self) -> Iterator[tuple[str, dict]]:
        """Every op in the log (all replicas' streams) as seen by this transaction: (op id, op)."""
        ops = self.db["ops"]
        for key, raw in self.txn.cursor(db=ops):
            op = op_in(self.txn, ops, key, raw)
            yield op["id"], op

    def ops_after(self, arrival: int) -> Iterator[dict]:
        """Ops that reached the log after ``arrival``, as seen by this transaction."""
        cur = self.txn.cursor(db=self.db["order"])
        if not cur.set_range(u64(arrival + 1)):
            return
        ops = self.db["ops"]
        for _, key in cur:
            raw = self.txn.get(key, db=ops)
            if raw is not None:
                yield op_in(self.txn, ops, key, raw)

    # -- LMDB projections -----------------------------------------------------
    def put_bead(self, bead: dict, op_id: str) -> None:
        """``bead`` as the op ``op_id`` (stored before this) carries it: kept as a ref."""
        self._put_end(bead["id"].encode(), BEAD_REF + op_key(*_split(op_id)), self.db["beads"])
        self.txn.put(bead_time_key(bead), b"", db=self.db["bead_time"])

    def forget_bead(self, bead: dict) -> None:
        """Delete a bead and have its text scrubbed (its blob is removed by the caller)."""
        self.scrub = True
        self.delete_bead(bead)

    def delete_bead(self, bead: dict) -> None:
        """The bead leaves the projections; the id of its add op is kept (``bo``) for a
        forget of it arriving later (its ref, which named the op, goes)."""
        op_id = self.bead_add_op(bead["id"])
        if op_id is not None:
            self.note_bead_op(bead["id"], op_id)
        self.txn.delete(bead["id"].encode(), db=self.db["beads"])
        self.txn.delete(bead_time_key(bead), db=self.db["bead_time"])
        if bead.get("key"):
            self.txn.delete(bead["key"].encode(), db=self.db["bead_keys"])

    def get_bead(self, bead_id: str) -> dict | None:
        return bead_in(self.txn, self.db["ops"], self.txn.get(bead_id.encode(), db=self.db["beads"]))

    def bead_for_key(self, key: str) -> str | None:
        raw = self.txn.get(key.encode(), db=self.db["bead_keys"])
        return raw.decode() if raw else None

    def set_bead_key(self, key: str, bead_id: str) -> None:
        self.txn.put(key.encode(), bead_id.encode(), db=self.db["bead_keys"])

    def keep_marks(self, user: str | None, key: str | None, was: str | None, hk: str) -> None:
        """Keep ``user``'s forgotten message key and superseded text (digests: ingest.mark_key)
        as of the ``bead.forget`` stamped ``hk`` (a later mark of the same stays: a mark only
        grows); none once the user was forgotten after it (remove wins)."""
        gone = self.forget_mark("user", user) if user else None
        if not user or (gone is not None and hk < gone):
            return
        for kind, digest in ((FORGOTTEN_KEY, key), (SUPERSEDED_KEY, was)):
            if digest:
                entry = mark_key(kind, user, digest)
                old = self.txn.get(entry, db=self.db["bead_keys"])
                if old is None or bytes(old).decode() < hk:
                    self.txn.put(entry, hk.encode(), db=self.db["bead_keys"])

    def drop_marks(self, user: str, hk: str) -> None:
        """Forgetting ``user``: their marks left by ops stamped before ``hk`` go."""
        db = self.db["bead_keys"]
        for kind in (FORGOTTEN_KEY, SUPERSEDED_KEY):
            prefix = mark_key(kind, user, "")
            cur = self.txn.cursor(db=db)
            stale = []
            if cur.set_range(prefix):
                for key, value in cur:
                    if not bytes(key).startswith(prefix):
                        break
                    if bytes(value).decode() < hk:
                        stale.append(bytes(key))
            for key in stale:
                self.txn.delete(key, db=db)

    def key_forgotten(self, key: str) -> bool:
        return self.txn.get(forgotten_key(key), db=self.db["bead_keys"]) is not None

    def note_bead_op(self, bead_id: str, op_id: str) -> None:
        """Keep the id of a deleted bead's add op (a bead.forget arriving later redacts it)."""
        self.txn.put(b"bo\0" + bead_id.encode(), op_id.encode(), db=self.db["sync"])

    def bead_hlc(self, bead_id: str) -> str | None:
        """The HLC key of a bead's add op: read from the op (stores before 2026-11-29 also
        kept it as ``bh\0<bead>``, still read: ~115 MB at 1,000,000 beads)."""
        raw = self.txn.get(b"bh\0" + bead_id.encode(), db=self.db["sync"])
        if raw is not None:
            return bytes(raw).decode()
        op_id = self.bead_add_op(bead_id)
        op = self.stored_op(*_split(op_id)) if op_id else None
        return hlc_key(op["hlc"]) if op is not None else None

    def cache_vector(self, model: str, text: str, vector: bytes) -> None:
        self.txn.put(text_key(model, text), vector, db=self.db["vcache"])

    def cached_vector(self, model: str, text: str) -> bytes | None:
        return self.txn.get(text_key(model, text), db=self.db["vcache"])

    def drop_vectors(self, text: str) -> None:
        """Remove the cached vectors of a forgotten text (of every model)."""
        digest = hashlib.sha256(text.encode()).digest()[:16]
        cur = self.txn.cursor(db=self.db["vcache"])
        doomed = [key for key in cur.iternext(keys=True, values=False) if key.endswith(b"\0" + digest)]
        for key in doomed:
            self.txn.delete(key, db=self.db["vcache"])

    # -- this device's queue of work for later (brandmind/backlog.py; never synced) ----------
    def queue_job(self, job: dict) -> int:
        """Queue ``job`` in this transaction (with the writes it is about); returns its number."""
        jobs = self.db["jobs"]
        raw = self.txn.get(b"next", db=jobs)
        seq = int.from_bytes(raw, "big") if raw else 1
        self.txn.put(job_key(seq), dumps(job), db=jobs)
        self.txn.put(b"next", u64(seq + 1), db=jobs)
        return seq

    def get_job(self, seq: int) -> dict | None:
        raw = self.txn.get(job_key(seq), db=self.db["jobs"])
        return loads(raw) if raw is not None else None

    def update_job(self, seq: int, job: dict) -> None:
        """Store the job's progress (only while it is queued)."""
        if self.txn.get(job_key(seq), db=self.db["jobs"]) is not None:
            self.txn.put(job_key(seq), dumps(job), db=self.db["jobs"])

    def ack_job(self, seq: int) -> bool:
        """The job is done: it leaves the queue in this transaction (with its work); False
        if it was not queued (acknowledged already)."""
        jobs = self.db["jobs"]
        if not self.txn.delete(job_key(seq), db=jobs):
            return False
        raw = self.txn.get(b"done", db=jobs)
        self.txn.put(b"done", u64((int.from_bytes(raw, "big") if raw else 0) + 1), db=jobs)
        return True

    def user_bead_ids(self, user: str) -> list[str]:
        prefix = user.encode() + b"\0"
        cur = self.txn.cursor(db=self.db["bead_time"])
        out = []
        ok = cur.set_range(prefix)
        while ok and cur.key().startswith(prefix):
            out.append(cur.key().rsplit(b"\0", 1)[1].decode())
            ok = cur.next()
        return out

    def clear(self, *names: str) -> None:
        for name in names:
            self.txn.drop(self.db[name], delete=False)
