"""The op log and the LMDB-side projections (beads, dedup keys, vector cache).

Every change to a store is first an *op* appended to this replica's own stream:
``{"id": "<replica>:<seq>", "hlc": [wall_ms, counter, replica], "kind": ..., "payload": {...}}``.
An op and everything LMDB derives from it (the bead it adds, the dedup key of
an ingested message, the vector cached for its text) are written in ONE LMDB
write transaction, so a crash leaves either all of it or none of it.

Named databases in ``log.lmdb``:

``meta``       replica id, next sequence number, next arrival number, last HLC
``ops``        ``replica \\0 seq(8 BE)`` -> op JSON (one stream per replica)
``order``      ``arrival(8 BE)`` -> ops key: the order ops reached this store;
               the SQLite projection remembers the last arrival it applied
``beads``      bead id -> bead JSON (content over the threshold lives in blobs/)
``bead_time``  ``user \\0 ts(8 BE) \\0 bead id`` -> b"" (the per-user thread, in time order)
``bead_keys``  message key -> bead id (so re-ingesting a message stores nothing)
``vcache``     ``model \\0 sha256(text)[:16]`` -> float32 vector bytes
``sync``       what replication needs (brandmind/replication.py): ``vv\\0<replica>`` -> the
               contiguous head (u64) of each replica's stream (the version vector);
               ``fu\\0<user>`` / ``fm\\0<memory>`` / ``fn\\0<node>`` -> HLC key of the
               forget that removed them (remove wins for ops arriving later);
               ``ma\\0<memory>`` -> op id of a received memory.add; ``bh\\0<bead>`` -> HLC
               key of the bead's op (a user forget removes only beads stamped before it)
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson

from . import clock
from .clock import CLOCK_HINT, HLC, new_id, skewed_by, span
from .errors import ClockSkew, StoreCorrupt, StoreMissing
from .lmdbscrub import scrub as scrub_file

SCHEMA = 1
_DBS = ("meta", "ops", "order", "beads", "bead_time", "bead_keys", "vcache", "sync")
CLOCK_MARK = b"clock_skew"  # meta: a sync round found this clock off (OpLog.mark_clock)
_MAP_SIZE = 1 << 35  # 32 GiB of address space; the file grows only as data is written


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def dumps(obj: Any) -> bytes:
    """Compact JSON with sorted keys (orjson: sync moves ops by the hundred thousand; what
    it cannot encode, e.g. an int beyond 64 bits, goes through the stdlib encoder)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


def loads(raw: bytes | str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)  # e.g. an int beyond 64 bits; real damage still raises here


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


class BlobStore:
    """Content-addressed files: ``blobs/ab/<sha256>``; written before the op that names them."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    def put(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{digest}.{os.getpid()}.tmp")
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        return digest

    def get(self, digest: str) -> bytes:
        try:
            data = self._path(digest).read_bytes()
        except FileNotFoundError:
            raise StoreCorrupt(f"blob {digest} is missing from {self.root}",
                               hint="restore the blobs/ directory from a backup or sync; run `bm doctor`") from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise StoreCorrupt(f"blob {digest} is corrupt", hint="run `bm doctor`")
        return data

    def remove(self, digest: str) -> None:
        """Delete a blob, first overwriting its bytes (a forgotten turn leaves no copy)."""
        path = self._path(digest)
        try:
            with open(path, "r+b") as fh:
                size = os.fstat(fh.fileno()).st_size
                fh.write(b"\0" * size)
                fh.flush()
                os.fsync(fh.fileno())
        except FileNotFoundError:
            return
        path.unlink(missing_ok=True)

    def digests(self) -> Iterator[str]:
        if self.root.exists():
            for sub in self.root.iterdir():
                if sub.is_dir():
                    for f in sub.iterdir():
                        if not f.name.startswith("."):
                            yield f.name


# sync db keys (see the module docstring): what a forget mark of each kind is kept under
_MARKS = {"user": b"fu\0", "memory": b"fm\0", "node": b"fn\0", "bead": b"fb\0"}
_HELD = b"ho\0"  # sync db: ho\0<replica>\0<seq u64> -> an op held back (brandmind/held.py)


def _op_key(replica: str, seq: int) -> bytes:
    return replica.encode() + b"\0" + _u64(seq)


def _held_key(replica: str, seq: int) -> bytes:
    return _HELD + replica.encode() + b"\0" + _u64(seq)


def _held_in(cur: Any, prefix: bytes = _HELD) -> list[tuple[str, int, dict]]:
    """(replica, seq, op) of the held ops under ``prefix``, through a cursor on the sync db."""
    out: list[tuple[str, int, dict]] = []
    if cur.set_range(prefix):
        for key, raw in cur:
            if not key.startswith(prefix):
                break
            key = bytes(key)
            out.append((key[len(_HELD):-9].decode(), int.from_bytes(key[-8:], "big"), loads(raw)))
    return out


Check = Callable[[str, dict], None]


class OpLog:
    """The op log of one store.  ``check(kind, payload)``: what ``LogTxn.append`` runs on
    every payload before storing it (brandmind/opcheck.py ``check``, passed in by the Store:
    the log is below the op rules and does not know them)."""

    def __init__(self, path: Path, *, create: bool = False, check: Check | None = None) -> None:
        import lmdb

        self.path = path
        self.check = check
        if not (path / "data.mdb").exists():
            if not create:
                raise StoreMissing(f"no bm store at {path.parent}",
                                   hint="run `bm init` (or set BM_HOME to the store's directory)")
            path.mkdir(parents=True, exist_ok=True)
        try:
            self.env = lmdb.open(str(path), map_size=_MAP_SIZE, max_dbs=len(_DBS) + 1,
                                 subdir=True, lock=True, max_readers=256)
        except lmdb.Error as exc:
            raise StoreCorrupt(f"cannot open the op log at {path}: {exc}",
                               hint="run `bm doctor`; restore the store from `bm export` or a sync remote") from None
        self.env.reader_check()  # clear reader slots of processes that were killed
        self.db = {name: self.env.open_db(name.encode()) for name in _DBS}
        with self.env.begin(write=True) as txn:
            meta = self.db["meta"]
            if txn.get(b"replica", db=meta) is None:
                txn.put(b"replica", new_id("r").encode(), db=meta)
                txn.put(b"schema", str(SCHEMA).encode(), db=meta)
                txn.put(b"next_seq", _u64(1), db=meta)
                txn.put(b"next_arrival", _u64(1), db=meta)
            if txn.get(b"checked_from", db=meta) is None:
                # ops arriving from here on are checked before they are stored; those before
                # were written by an older bm: the catch-up checks them (brandmind/opcheck.py)
                txn.put(b"checked_from", txn.get(b"next_arrival", db=meta), db=meta)
            self.checked_from = int.from_bytes(txn.get(b"checked_from", db=meta), "big")
            schema = int(txn.get(b"schema", db=meta))
        if schema > SCHEMA:
            raise StoreCorrupt(f"store schema {schema} is newer than this bm understands ({SCHEMA})",
                               hint="upgrade bm (pip install -U brandmind)")
        with self.env.begin() as txn:
            self.replica = txn.get(b"replica", db=self.db["meta"]).decode()
            pending = txn.get(b"scrub_pending", db=self.db["meta"]) is not None
            vv_ready = txn.get(b"vv_ready", db=self.db["sync"]) is not None
        if not vv_ready:  # a store from before sync: compute the version vector once
            with self.env.begin(write=True) as txn:
                self._init_version_vector(txn)
        if pending:  # a forget's scrub had to wait for another process's reader
            self.scrub()

    def _init_version_vector(self, txn: Any) -> None:
        """Compute every replica's contiguous head from the ops stored (once, for old stores)."""
        sync = self.db["sync"]
        heads: dict[bytes, int] = {}
        broken: set[bytes] = set()
        for key in txn.cursor(db=self.db["ops"]).iternext(keys=True, values=False):
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

    def close(self) -> None:
        self.env.close()

    # -- transactions -------------------------------------------------------
    @contextmanager
    def write(self) -> Iterator["LogTxn"]:
        txn = self.env.begin(write=True)
        t = LogTxn(self, txn)
        try:
            yield t
        except BaseException:
            txn.abort()
            raise
        else:
            txn.commit()
        if t.scrub:  # text redacted or deleted by this transaction: its dead copies go too
            self.scrub()
        if t.dead_blobs:
            self.drop_blobs(t.dead_blobs)

    def mark_clock(self, offset_ms: int | None) -> None:
        """Record what a sync round found of this device's clock against the server's
        (``offset_ms`` beyond the window; None: within it, the mark goes)."""
        with self.env.begin(write=True) as txn:
            if offset_ms is None:
                txn.delete(CLOCK_MARK, db=self.db["meta"])
            else:
                mark = {"offset_ms": int(offset_ms), "wall_ms": clock.now_millis(), "mono_ms": time.monotonic() * 1000}
                txn.put(CLOCK_MARK, dumps(mark), db=self.db["meta"])

    def drop_blobs(self, digests: Iterable[str]) -> None:
        """Delete the blob files of forgotten beads that no bead here holds any more."""
        doomed = set(digests)
        with self.read() as txn:
            for _, raw in txn.cursor(db=self.db["beads"]):
                if b'"blob"' in raw:
                    doomed.discard(loads(raw).get("blob"))
        for digest in doomed:
            BlobStore(self.path.parent / "blobs").remove(digest)

    def scrub(self) -> bool:
        """Zero what LMDB kept of deleted and redacted data (brandmind/lmdbscrub.py).  A
        first commit rolls LMDB's second meta page past the forget; while a reader in
        another process holds an older snapshot, nothing is zeroed and the ``scrub_pending``
        mark makes the next open (or forget) try again.  Returns whether it ran."""
        with self.env.begin(write=True) as txn:
            txn.put(b"scrub_pending", b"1", db=self.db["meta"])
        if not scrub_file(self.env, self.path / "data.mdb"):
            return False
        with self.env.begin(write=True) as txn:
            txn.delete(b"scrub_pending", db=self.db["meta"])
        return True

    @contextmanager
    def read(self) -> Iterator[Any]:
        with self.env.begin(buffers=False) as txn:
            yield txn

    # -- reading ------------------------------------------------------------
    def last_arrival(self) -> int:
        with self.read() as txn:
            return int.from_bytes(txn.get(b"next_arrival", db=self.db["meta"]), "big") - 1

    def ops_after(self, arrival: int, known: dict[int, dict] | None = None) -> Iterator[tuple[int, dict]]:
        """Ops in arrival order with an arrival number above ``arrival`` (those in
        ``known``, arrival -> op, are taken from there instead of being read)."""
        known = known or {}
        with self.read() as txn:
            cur = txn.cursor(db=self.db["order"])
            if not cur.set_range(_u64(arrival + 1)):
                return
            ops = self.db["ops"]
            for key, opkey in cur:
                n = int.from_bytes(key, "big")
                op = known.get(n)
                yield n, op if op is not None else loads(txn.get(opkey, db=ops))

    def count(self, name: str) -> int:
        with self.read() as txn:
            return txn.stat(self.db[name])["entries"]

    def get_bead(self, bead_id: str) -> dict | None:
        with self.read() as txn:
            raw = txn.get(bead_id.encode(), db=self.db["beads"])
        return loads(raw) if raw else None

    def bead_ids(self, user: str, n: int | None = None, *, reverse: bool = True) -> list[str]:
        """Bead ids of ``user``'s thread, newest first (or oldest first), at most n."""
        prefix = user.encode() + b"\0"
        out: list[str] = []
        with self.read() as txn:
            cur = txn.cursor(db=self.db["bead_time"])
            if reverse:
                end = user.encode() + b"\x01"
                if cur.set_range(end):
                    ok = cur.prev()
                else:
                    ok = cur.last()
                while ok and cur.key().startswith(prefix):
                    out.append(cur.key().rsplit(b"\0", 1)[1].decode())
                    if n is not None and len(out) >= n:
                        break
                    ok = cur.prev()
            else:
                ok = cur.set_range(prefix)
                while ok and cur.key().startswith(prefix):
                    out.append(cur.key().rsplit(b"\0", 1)[1].decode())
                    if n is not None and len(out) >= n:
                        break
                    ok = cur.next()
        return out

    def bead_users(self) -> list[str]:
        users: list[str] = []
        with self.read() as txn:
            cur = txn.cursor(db=self.db["bead_time"])
            ok = cur.first()
            while ok:
                user = cur.key().split(b"\0", 1)[0]
                users.append(user.decode())
                ok = cur.set_range(user + b"\x01")
        return users

    def bead_counts(self) -> dict[str, int]:
        """How many beads each user's thread holds: ``{user: n}``."""
        out: dict[str, int] = {}
        with self.read() as txn:  # bead_time keys: user \0 ts \0 bead id
            for key in txn.cursor(db=self.db["bead_time"]).iternext(values=False):
                user = bytes(key).split(b"\0", 1)[0].decode("utf-8", "replace")
                out[user] = out.get(user, 0) + 1
        return out

    def iter_beads(self) -> Iterator[dict]:
        """Every stored bead (in bead id order)."""
        with self.read() as txn:
            for _, raw in txn.cursor(db=self.db["beads"]):
                yield loads(raw)

    def cached_vector(self, model: str, text: str) -> bytes | None:
        with self.read() as txn:
            return txn.get(text_key(model, text), db=self.db["vcache"])

    def uncached(self, model: str, texts: Iterable[str]) -> list[str]:
        """Those of ``texts`` whose vector (of ``model``) the cache lacks (one read)."""
        with self.read() as txn:
            vcache = self.db["vcache"]
            return [text for text in texts if txn.get(text_key(model, text), db=vcache) is None]

    def iter_ops(self) -> Iterator[dict]:
        for _, op in self.ops_after(0):
            yield op

    # -- replication (brandmind/replication.py, brandmind.sync) ---------------------------
    def version_vector(self) -> dict[str, int]:
        """replica -> highest seq S such that ops 1..S of that replica are all stored here."""
        with self.read() as txn:
            return version_vector_in(txn.cursor(db=self.db["sync"]))

    def ops_of(self, replica: str, after: int, limit: int | None = None) -> list[dict]:
        """``replica``'s stored ops with seq > ``after`` in seq order, stopping at the first gap."""
        out: list[dict] = []
        prefix = replica.encode() + b"\0"
        expect = after + 1
        with self.read() as txn:
            cur = txn.cursor(db=self.db["ops"])
            ok = cur.set_range(prefix + _u64(expect))
            while ok and (limit is None or len(out) < limit):
                key = cur.key()
                if not key.startswith(prefix) or len(key) != len(prefix) + 8:
                    break
                if int.from_bytes(key[-8:], "big") != expect:
                    break
                out.append(loads(cur.value()))
                expect += 1
                ok = cur.next()
        return out

    def get_op(self, replica: str, seq: int) -> dict | None:
        with self.read() as txn:
            raw = txn.get(_op_key(replica, seq), db=self.db["ops"])
        return loads(raw) if raw else None

    # -- ops held back for clock skew (brandmind/held.py) ----------------------------------
    def has_held(self) -> bool:
        with self.read() as txn:
            cur = txn.cursor(db=self.db["sync"])
            return cur.set_range(_HELD) and cur.key().startswith(_HELD)

    def held_ops(self, replica: str | None = None) -> list[dict]:
        """The held ops (of one replica), by replica and seq."""
        prefix = _HELD + (replica.encode() + b"\0" if replica is not None else b"")
        with self.read() as txn:
            return [op for _, _, op in _held_in(txn.cursor(db=self.db["sync"]), prefix)]

    def held_top(self, replica: str, after: int) -> int:
        """The highest seq S such that ops ``after + 1 .. S`` of ``replica`` are all held (or
        ``after``)."""
        top = after
        with self.read() as txn:
            cur = txn.cursor(db=self.db["sync"])
            ok = cur.set_range(_held_key(replica, after + 1))
            while ok and cur.key() == _held_key(replica, top + 1):
                top += 1
                ok = cur.next()
        return top

    # -- snapshots and the sync daemon (brandmind/sync/snapshot.py, sync/daemon.py) -------
    def own_seq(self) -> int:
        """This replica's last sequence number: one meta read (cheap enough to poll)."""
        with self.read() as txn:
            raw = txn.get(b"next_seq", db=self.db["meta"])
        return int.from_bytes(raw, "big") - 1 if raw else 0

    def blob_beads(self) -> list[dict]:
        """The beads whose content lives in a blob file."""
        out = []
        with self.read() as txn:
            for _, raw in txn.cursor(db=self.db["beads"]):
                if b'"blob"' in raw:
                    bead = json.loads(raw)
                    if bead.get("blob"):
                        out.append(bead)
        return out

    def snapshot_copy(self, dest: Path) -> dict[str, int]:
        """A compacted copy of this log in the new directory ``dest``, without what is this
        device's own business, not state (the vector cache: the projection has the
        vectors; a device with another model embeds anew); returns the copy's version vector."""
        import shutil

        full = dest.with_name(dest.name + ".full")
        full.mkdir()
        self.env.copy(str(full), compact=True)
        env = _open_copy(full)
        try:
            vcache = env.open_db(b"vcache")
            with env.begin(write=True) as txn:
                txn.drop(vcache, delete=False)
            dest.mkdir()
            env.copy(str(dest), compact=True)  # without the pages dropped above
        finally:
            env.close()
        shutil.rmtree(full)
        env = _open_copy(dest)
        try:
            sync = env.open_db(b"sync")
            with env.begin(db=sync) as txn:
                return version_vector_in(txn.cursor())
        finally:
            env.close()

    def adopt_copy(self, path: Path) -> bool:
        """Make the log copy at ``path`` (another device's snapshot) this device's: its
        replica id, next seq 1, and its HLC when the copy has none.  False, and nothing
        written, when the copy already holds ops of this device's replica."""
        own = self.replica.encode()
        with self.read() as txn:
            hlc_raw = txn.get(b"hlc", db=self.db["meta"])
        env = _open_copy(path)
        try:
            meta = env.open_db(b"meta")
            sync = env.open_db(b"sync")
            with env.begin(write=True) as txn:
                if txn.get(b"vv\0" + own, db=sync) is not None:
                    return False
                txn.put(b"replica", own, db=meta)
                txn.put(b"next_seq", _u64(1), db=meta)
                if hlc_raw is not None and txn.get(b"hlc", db=meta) is None:
                    txn.put(b"hlc", hlc_raw, db=meta)
            return True
        finally:
            env.close()

    # -- beads by time, ingest's dedup keys (brandmind/beads.py, brandmind/extract/run.py) ------
    def beads_before(self, user: str, cutoff: int, n: int, thread: str | None = None) -> list[dict]:
        """The last ``n`` beads of ``user`` (in ``thread`` if given) stamped at or before
        ``cutoff`` (epoch ms), newest first."""
        beads: list[dict] = []
        prefix = user.encode() + b"\0"
        with self.read() as txn:
            cur = txn.cursor(db=self.db["bead_time"])
            ok = cur.prev() if cur.set_range(prefix + _u64(max(0, cutoff) + 1)) else cur.last()
            while ok and cur.key().startswith(prefix) and len(beads) < n:
                raw = txn.get(cur.key().rsplit(b"\0", 1)[1], db=self.db["beads"])
                if raw:
                    bead = loads(raw)
                    if thread is None or bead.get("thread") == thread:
                        beads.append(bead)
                ok = cur.prev()
        return beads

    @contextmanager
    def bead_keys(self) -> Iterator[Any]:
        """A reader of ingest's dedup keys (``bead_keys``: key -> bead id) over one read
        snapshot: ``with log.bead_keys() as get: get(key)`` (``ingest.known_bead``)."""
        with self.read() as txn:
            db = self.db["bead_keys"]
            yield lambda key: txn.get(key, db=db)


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
        key = replica.encode() + b"\0" + _u64(seq)
        self.txn.put(key, dumps(op), db=self.db["ops"])
        arrival = self._meta_int(b"next_arrival")
        self.txn.put(_u64(arrival), key, db=self.db["order"])
        self.txn.put(b"next_seq", _u64(seq + 1), db=meta)
        self.txn.put(b"next_arrival", _u64(arrival + 1), db=meta)
        self.txn.put(b"hlc", json.dumps(hlc.encode()).encode(), db=meta)
        self.txn.put(b"vv\0" + replica.encode(), _u64(seq), db=self.db["sync"])
        return op

    # -- receiving ops of other replicas (brandmind/replication.py) --------------------------
    def next_arrival(self) -> int:
        return self._meta_int(b"next_arrival")

    def next_seq(self) -> int:
        return self._meta_int(b"next_seq")

    def set_next_seq(self, seq: int) -> None:
        self.txn.put(b"next_seq", _u64(seq), db=self.db["meta"])

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
        return self.txn.get(_op_key(replica, seq), db=self.db["ops"]) is not None

    def stored_op(self, replica: str, seq: int) -> dict | None:
        raw = self.txn.get(_op_key(replica, seq), db=self.db["ops"])
        return loads(raw) if raw is not None else None

    def put_received(self, replica: str, seq: int, op: dict, arrival: int) -> None:
        """Store a received op under arrival number ``arrival`` (kept in ``fresh`` when the
        caller asked for it)."""
        key = _op_key(replica, seq)
        self.txn.put(key, dumps(op), db=self.db["ops"])
        self.txn.put(_u64(arrival), key, db=self.db["order"])
        if self.fresh is not None:
            self.fresh[key] = (arrival, op)

    def write_counters(self, arrival: int, hlc: tuple[int, int] | None, heads: dict[str, int]) -> None:
        """What received ops moved: the next arrival number, this replica's clock (None: it
        did not move) and replicas' contiguous heads."""
        self.txn.put(b"next_arrival", _u64(arrival), db=self.db["meta"])
        if hlc is not None:
            self.txn.put(b"hlc", json.dumps([hlc[0], hlc[1], self.log.replica]).encode(), db=self.db["meta"])
        for replica, head in heads.items():
            self.txn.put(b"vv\0" + replica.encode(), _u64(head), db=self.db["sync"])

    # -- remove wins: forget marks, and the add ops a forget redacts (brandmind/logforget.py) --
    def forget_mark(self, what: str, name: str) -> str | None:
        """HLC key of the latest forget of a ``user`` / ``memory`` / ``node`` / ``bead``."""
        raw = self.txn.get(_MARKS[what] + name.encode(), db=self.db["sync"])
        return bytes(raw).decode() if raw is not None else None

    def set_forget_mark(self, what: str, name: str, hk: str) -> None:
        self.txn.put(_MARKS[what] + name.encode(), hk.encode(), db=self.db["sync"])

    def note_memory_add(self, memory_id: str, op_id: str) -> None:
        """The op id of a received memory's add (a memory.forget arriving later redacts it)."""
        self.txn.put(b"ma\0" + memory_id.encode(), op_id.encode(), db=self.db["sync"])

    def memory_add_op(self, memory_id: str) -> str | None:
        raw = self.txn.get(b"ma\0" + memory_id.encode(), db=self.db["sync"])
        return bytes(raw).decode() if raw is not None else None

    def bead_add_op(self, bead_id: str) -> str | None:
        raw = self.txn.get(b"bo\0" + bead_id.encode(), db=self.db["sync"])
        return bytes(raw).decode() if raw is not None else None

    # -- ops held back for clock skew (brandmind/held.py) ----------------------------------
    def first_held(self, replica: str) -> int | None:
        """The lowest held seq of ``replica`` (None: none held)."""
        prefix = _HELD + replica.encode() + b"\0"
        cur = self.txn.cursor(db=self.db["sync"])
        key = cur.key() if cur.set_range(prefix) else b""
        ok = key.startswith(prefix) and len(key) == len(prefix) + 8
        return int.from_bytes(key[-8:], "big") if ok else None

    def held_op(self, replica: str, seq: int) -> dict | None:
        raw = self.txn.get(_held_key(replica, seq), db=self.db["sync"])
        return loads(raw) if raw is not None else None

    def hold(self, replica: str, seq: int, op: dict) -> None:
        self.txn.put(_held_key(replica, seq), dumps(op), db=self.db["sync"])

    def unhold(self, replica: str, seq: int) -> None:
        self.txn.delete(_held_key(replica, seq), db=self.db["sync"])

    def held(self) -> list[tuple[str, int, dict]]:
        """Every held op as ``(replica, seq, op)``, by replica and seq."""
        return _held_in(self.txn.cursor(db=self.db["sync"]))

    def redact(self, op_id: str, payload: dict) -> None:
        """Replace the payload of an earlier op (used by forget, so text does not linger in the log)."""
        replica, seq = op_id.rsplit(":", 1)
        key = _op_key(replica, int(seq))
        raw = self.txn.get(key, db=self.db["ops"])
        if raw is None:
            return
        op = loads(raw)
        self.scrub = True
        op["payload"] = payload
        self.txn.put(key, dumps(op), db=self.db["ops"])
        if self.fresh is not None and key in self.fresh:
            self.fresh[key] = (self.fresh[key][0], op)

    def iter_ops(self) -> Iterator[tuple[str, dict]]:
        """Every op in the log (all replicas' streams) as seen by this transaction: (op id, op)."""
        for _, raw in self.txn.cursor(db=self.db["ops"]):
            op = loads(raw)
            yield op["id"], op

    def ops_after(self, arrival: int) -> Iterator[dict]:
        """Ops that reached the log after ``arrival``, as seen by this transaction."""
        cur = self.txn.cursor(db=self.db["order"])
        if not cur.set_range(_u64(arrival + 1)):
            return
        for _, key in cur:
            raw = self.txn.get(key, db=self.db["ops"])
            if raw is not None:
                yield loads(raw)

    # -- LMDB projections -----------------------------------------------------
    def put_bead(self, bead: dict) -> None:
        self.txn.put(bead["id"].encode(), dumps(bead), db=self.db["beads"])
        self.txn.put(_bead_time_key(bead), b"", db=self.db["bead_time"])

    def forget_bead(self, bead: dict) -> None:
        """Delete a bead and have its text scrubbed (its blob is removed by the caller)."""
        self.scrub = True
        self.delete_bead(bead)

    def delete_bead(self, bead: dict) -> None:
        self.txn.delete(bead["id"].encode(), db=self.db["beads"])
        self.txn.delete(_bead_time_key(bead), db=self.db["bead_time"])
        if bead.get("key"):
            self.txn.delete(bead["key"].encode(), db=self.db["bead_keys"])

    def get_bead(self, bead_id: str) -> dict | None:
        raw = self.txn.get(bead_id.encode(), db=self.db["beads"])
        return loads(raw) if raw else None

    def bead_for_key(self, key: str) -> str | None:
        raw = self.txn.get(key.encode(), db=self.db["bead_keys"])
        return raw.decode() if raw else None

    def set_bead_key(self, key: str, bead_id: str) -> None:
        self.txn.put(key.encode(), bead_id.encode(), db=self.db["bead_keys"])

    def note_bead_hlc(self, bead_id: str, hk: str, op_id: str) -> None:
        """The HLC key of a bead's op (a user.forget removes only beads stamped before it)
        and the op's id (a bead.forget redacts it)."""
        self.txn.put(b"bh\0" + bead_id.encode(), hk.encode(), db=self.db["sync"])
        self.txn.put(b"bo\0" + bead_id.encode(), op_id.encode(), db=self.db["sync"])

    def bead_hlc(self, bead_id: str) -> str | None:
        raw = self.txn.get(b"bh\0" + bead_id.encode(), db=self.db["sync"])
        return bytes(raw).decode() if raw is not None else None

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


def _bead_time_key(bead: dict) -> bytes:
    return bead["user"].encode() + b"\0" + _u64(max(0, int(bead["ts"]))) + b"\0" + bead["id"].encode()


def _open_copy(path: Path) -> Any:
    """An LMDB env over a copy of a log (OpLog.snapshot_copy / adopt_copy)."""
    import lmdb

    return lmdb.open(str(path), max_dbs=32, subdir=True, map_size=_MAP_SIZE, lock=True)
