"""The op log and the LMDB-side projections (beads, dedup keys, vector cache).

Every change to a store is first an *op* appended to this replica's own stream:
``{"id": "<replica>:<seq>", "hlc": [wall_ms, counter, replica], "kind": ..., "payload": {...}}``.
An op and everything LMDB derives from it (the bead it adds, the dedup key of
an ingested message) are written in ONE LMDB write transaction, so a crash leaves
either all of it or none of it.  Ops and beads are stored packed (deflated with a
preset dictionary; brandmind/logvalues.py); ``loads`` reads packed and plain alike.

Named databases in ``log.lmdb``:

``meta``       replica id, next sequence number, next arrival number, last HLC
``ops``        ``replica \\0 seq(8 BE)`` -> packed op JSON (one stream per replica; an op may
               be packed after the op before it in its stream: read it with
               ``logtxn.op_in``, never ``loads`` alone)
``order``      ``arrival(8 BE)`` -> ops key: the order ops reached this store;
               the SQLite projection remembers the last arrival it applied
``beads``      bead id -> ``BEAD_REF`` + the ops key of the bead.add op that carries the
               bead (one copy of a turn's text in LMDB; older stores: the packed bead
               JSON, still read; content over the threshold lives in blobs/)
``bead_time``  ``user \\0 ts(8 BE) \\0 bead id`` -> b"" (the per-user thread, in time order)
``bead_keys``  message key -> bead id (so re-ingesting a message stores nothing); and the
               marks a ``bead.forget`` leaves, ``kind user \\0 digest(16)`` -> the HLC key of
               that op (ingest.mark_key: a forgotten message key, not stored again, and a
               text an edit replaced, no edit again; dropped by the user's forget)
``vcache``     ``model \\0 sha256(text)[:16]`` -> float32 vector bytes: vectors on their way
               to the projection (a pulled or imported memory's, one embedded by
               ``Store.vector_for``) and those of texts that are not memories (skills,
               workspace files).  A writer that applies its own ops at once (ingest,
               remember, the backlog) hands the vectors to the projection directly and
               caches none: memories' vectors are kept in SQLite (and in the recall index
               made from it); ``bm rebuild`` takes them from the projection it replaces
               (brandmind/admin.py)
``sync``       what replication needs (brandmind/replication.py): ``vv\\0<replica>`` -> the
               contiguous head (u64) of each replica's stream (the version vector);
               ``fu\\0<user>`` / ``fm\\0<memory>`` / ``fn\\0<node>`` -> HLC key of the
               forget that removed them (remove wins for ops arriving later);
               ``fb\\0<bead>`` likewise for a forgotten bead (brandmind/logforget.py);
               ``ma\\0<memory>`` -> op id of a received memory.add; ``bo\\0<bead>`` -> the op
               id of a deleted bead's add (a bead forget arriving later redacts it; a stored
               bead's ref names its op; stores before 2026-11-29 keep ``bo`` for every bead
               and ``bh\\0<bead>`` -> its op's HLC key, still read); ``ho\\0<replica>\\0<seq>``
               -> an op held back for clock skew (brandmind/held.py)
``jobs``       this device's queue of work for later, written in the same transaction as
               what it is about (brandmind/backlog.py: extraction after an ingest accepted
               by the daemon): ``j\0<seq(8 BE)>`` -> job JSON, ``next`` and ``done`` counters.
               Not synced, not in snapshots

The write transaction (``LogTxn``) and the key builders are in brandmind/logtxn.py; with
this module, the only code that knows these keys.  The log is below the op rules: the
check every appended payload must pass is handed in (``OpLog(check=...)``, the Store
passes brandmind/opcheck.py's).
"""
from __future__ import annotations

import hashlib
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from . import clock
from .clock import new_id
from .errors import StoreCorrupt, StoreMissing
from .lmdbscrub import scrub as scrub_file
from .logvalues import plain
from .logtxn import (BEAD_REF, CLOCK_MARK, HELD, JOB, LogTxn, bead_in, dumps, held_in, held_key, loads, op_in, op_json, op_key,  # noqa: F401
                     text_key, u64, version_vector_in)

SCHEMA = 1
_DBS = ("meta", "ops", "order", "beads", "bead_time", "bead_keys", "vcache", "sync", "jobs")
_MAP_SIZE = 1 << 35  # 32 GiB of address space; the file grows only as data is written


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


Check = Callable[[str, dict], None]


class OpLog:
    """The op log of one store.  ``check(kind, payload)``: what ``LogTxn.append`` runs on
    every payload before storing it (brandmind/opcheck.py ``check``, passed in by the Store:
    the log is below the op rules and does not know them)."""

    def __init__(self, path: Path, *, create: bool = False, check: Check | None = None) -> None:
        self.path = path
        self.check = check
        if not (path / "data.mdb").exists():
            if not create:
                raise StoreMissing(f"no bm store at {path.parent}",
                                   hint="run `bm init` (or set BM_HOME to the store's directory)")
            path.mkdir(parents=True, exist_ok=True)
        self._open_env()
        with self.env.begin(write=True) as txn:
            meta = self.db["meta"]
            if txn.get(b"replica", db=meta) is None:
                txn.put(b"replica", new_id("r").encode(), db=meta)
                txn.put(b"schema", str(SCHEMA).encode(), db=meta)
                txn.put(b"next_seq", u64(1), db=meta)
                txn.put(b"next_arrival", u64(1), db=meta)
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
            txn.put(b"vv\0" + replica, u64(head), db=sync)
        txn.put(b"vv_ready", b"1", db=sync)

    def _open_env(self) -> None:
        import lmdb

        try:
            self.env = lmdb.open(str(self.path), map_size=_MAP_SIZE, max_dbs=len(_DBS) + 1,
                                 subdir=True, lock=True, max_readers=256)
        except lmdb.Error as exc:
            raise StoreCorrupt(f"cannot open the op log at {self.path}: {exc}",
                               hint="run `bm doctor`; restore the store from `bm export` or a sync remote") from None
        self.env.reader_check()  # clear reader slots of processes that were killed
        self.db = {name: self.env.open_db(name.encode()) for name in _DBS}

    def close(self) -> None:
        self.env.close()

    def release_pages(self) -> int:
        """Unmap this process's resident pages of the log file (Linux; elsewhere nothing).

        LMDB reads through a read-only shared map of ``data.mdb``: a bulk write whose keys land
        all over the file (dedup keys, the vector cache) faults in page after page (64 KB
        around each: the kernel's fault-around), so a 1M ingest showed the whole file (GBs) as
        its RSS.  MADV_DONTNEED on a shared read-only file map only drops the page-table
        entries: the pages stay in the page cache and fault back in, unchanged, when read again
        (safe under open read transactions).  Returns the bytes advised (bulk ingest calls it
        every few batches: brandmind/ingesting.py)."""
        import ctypes

        target = os.path.realpath(self.path / "data.mdb")
        try:
            with open("/proc/self/maps") as fh:
                spans = [line.split()[0] for line in fh
                         if line.rstrip("\n").endswith(target) and line.split()[1] == "r--s"]
            madvise = ctypes.CDLL(None, use_errno=True).madvise
        except (OSError, AttributeError):
            return 0
        done = 0
        for span in spans:
            lo, hi = (int(x, 16) for x in span.split("-"))
            if madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), 4) == 0:  # 4: MADV_DONTNEED
                done += hi - lo
        return done

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
        doomed = set(digests) - {bead["blob"] for bead in self.blob_beads()}
        for digest in doomed:
            BlobStore(self.path.parent / "blobs").remove(digest)

    def scrub(self) -> bool:
        """Zero what LMDB kept of deleted and redacted data (brandmind/lmdbscrub.py).  A
        first commit rolls LMDB's second meta page past the forget; while a reader in
        another process holds an older snapshot, nothing is zeroed and the ``scrub_pending``
        mark makes the next open (or forget) try again.  Returns whether it ran.

        The environment is closed and opened again first: LMDB keeps the page buffers of this
        process's commits for its next write transactions without zeroing them, and copies a
        page into one leaving the page's unused middle as the buffer had it, so a later commit
        wrote a forgotten op's old bytes back into the file (a daemon, an agent's long-lived
        Memory).  Buffers of a new environment start zeroed; nothing can hold a transaction
        here (a write just ended, and the store is used under one lock)."""
        self.env.close()
        self._open_env()
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
            if not cur.set_range(u64(arrival + 1)):
                return
            ops = self.db["ops"]
            for key, opkey in cur:
                n = int.from_bytes(key, "big")
                op = known.get(n)
                yield n, op if op is not None else op_in(txn, ops, opkey, txn.get(opkey, db=ops))

    def count(self, name: str) -> int:
        with self.read() as txn:
            return txn.stat(self.db[name])["entries"]

    def get_bead(self, bead_id: str) -> dict | None:
        with self.read() as txn:
            return bead_in(txn, self.db["ops"], txn.get(bead_id.encode(), db=self.db["beads"]))

    def get_beads(self, bead_ids: Iterable[str]) -> list[dict | None]:
        """The beads of ``bead_ids`` (None for one not stored), in one read."""
        with self.read() as txn:
            return [bead_in(txn, self.db["ops"], txn.get(b.encode(), db=self.db["beads"])) for b in bead_ids]

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
            ops = self.db["ops"]
            for _, raw in txn.cursor(db=self.db["beads"]):
                bead = bead_in(txn, ops, raw)
                if bead is not None:
                    yield bead

    def cached_vector(self, model: str, text: str) -> bytes | None:
        with self.read() as txn:
            return txn.get(text_key(model, text), db=self.db["vcache"])

    def uncached(self, model: str, texts: Iterable[str]) -> list[str]:
        """Those of ``texts`` whose vector (of ``model``) the cache lacks (one read)."""
        with self.read() as txn:
            vcache = self.db["vcache"]
            return [text for text in texts if txn.get(text_key(model, text), db=vcache) is None]

    def cached_vectors(self, model: str, texts: Iterable[str]) -> dict[str, bytes | None]:
        """text -> its cached vector (of ``model``) or None, for each of ``texts`` (one read)."""
        with self.read() as txn:
            vcache = self.db["vcache"]
            return {text: txn.get(text_key(model, text), db=vcache) for text in texts}

    def iter_ops(self) -> Iterator[dict]:
        for _, op in self.ops_after(0):
            yield op

    # -- the queue of work for later (LogTxn.queue_job, brandmind/backlog.py) ------------------
    def jobs(self, limit: int | None = None) -> list[tuple[int, dict]]:
        """The queued jobs, oldest first: ``(seq, job)``."""
        out: list[tuple[int, dict]] = []
        with self.read() as txn:
            cur = txn.cursor(db=self.db["jobs"])
            ok = cur.set_range(JOB)
            while ok and cur.key().startswith(JOB) and (limit is None or len(out) < limit):
                out.append((int.from_bytes(cur.key()[len(JOB):], "big"), loads(cur.value())))
                ok = cur.next()
        return out

    def job_counts(self) -> dict[str, int]:
        """``{"queued", "done", "total"}``: jobs waiting, acknowledged, ever queued."""
        with self.read() as txn:
            db = self.db["jobs"]
            nxt, done = txn.get(b"next", db=db), txn.get(b"done", db=db)
            queued = txn.stat(db)["entries"] - (nxt is not None) - (done is not None)
        return {"queued": queued, "done": int.from_bytes(done, "big") if done else 0,
                "total": int.from_bytes(nxt, "big") - 1 if nxt else 0}

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
            ok = cur.set_range(prefix + u64(expect))
            while ok and (limit is None or len(out) < limit):
                key = cur.key()
                if not key.startswith(prefix) or len(key) != len(prefix) + 8:
                    break
                if int.from_bytes(key[-8:], "big") != expect:
                    break
                out.append(op_in(txn, self.db["ops"], key, cur.value()))
                expect += 1
                ok = cur.next()
        return out

    def get_op(self, replica: str, seq: int) -> dict | None:
        with self.read() as txn:
            key = op_key(replica, seq)
            raw = txn.get(key, db=self.db["ops"])
            return op_in(txn, self.db["ops"], key, raw) if raw else None

    # -- ops held back for clock skew (brandmind/held.py) ----------------------------------
    def has_held(self) -> bool:
        with self.read() as txn:
            cur = txn.cursor(db=self.db["sync"])
            return cur.set_range(HELD) and cur.key().startswith(HELD)

    def held_ops(self, replica: str | None = None) -> list[dict]:
        """The held ops (of one replica), by replica and seq."""
        prefix = HELD + (replica.encode() + b"\0" if replica is not None else b"")
        with self.read() as txn:
            return [op for _, _, op in held_in(txn.cursor(db=self.db["sync"]), prefix)]

    def held_top(self, replica: str, after: int) -> int:
        """The highest seq S such that ops ``after + 1 .. S`` of ``replica`` are all held (or
        ``after``)."""
        top = after
        with self.read() as txn:
            cur = txn.cursor(db=self.db["sync"])
            ok = cur.set_range(held_key(replica, after + 1))
            while ok and cur.key() == held_key(replica, top + 1):
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
            ops = self.db["ops"]
            for _, raw in txn.cursor(db=self.db["beads"]):
                if raw[:1] == BEAD_REF:
                    key = bytes(raw[1:])
                    held = txn.get(key, db=ops)
                    text = op_json(txn, ops, key, held) if held is not None else b""
                else:
                    text = plain(raw)
                if b'"blob"' in text:  # most hold none: no JSON parse
                    bead = bead_in(txn, ops, raw)
                    if bead is not None and bead.get("blob"):
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
            vcache, jobs = env.open_db(b"vcache"), env.open_db(b"jobs")
            with env.begin(write=True) as txn:
                txn.drop(vcache, delete=False)
                txn.drop(jobs, delete=False)
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
                txn.put(b"next_seq", u64(1), db=meta)
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
            ok = cur.prev() if cur.set_range(prefix + u64(max(0, cutoff) + 1)) else cur.last()
            while ok and cur.key().startswith(prefix) and len(beads) < n:
                bead = bead_in(txn, self.db["ops"], txn.get(cur.key().rsplit(b"\0", 1)[1], db=self.db["beads"]))
                if bead is not None and (thread is None or bead.get("thread") == thread):
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


def _open_copy(path: Path) -> Any:
    """An LMDB env over a copy of a log (OpLog.snapshot_copy / adopt_copy)."""
    import lmdb

    return lmdb.open(str(path), max_dbs=32, subdir=True, map_size=_MAP_SIZE, lock=True)
