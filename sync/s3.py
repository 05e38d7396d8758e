"""``S3Remote``: the op log replicated through any S3-compatible bucket (boto3).

Layout under ``<prefix>/`` (every object encrypted on the client, see crypto.py)::

    ops/<replica>/<first seq:012>-<last seq:012>.seg   immutable segments of one replica's ops
    heads.json                                         replica -> highest contiguous seq (CAS)
    blobs/<keyed hash of the sha256>                   bead contents over the blob threshold
    snapshots/<replica>-<vv hash>.snap, snapshots/index.json   (see snapshot.py)
    compact.json                                       compaction's base snapshot and floor (CAS;
                                                       compact.py): ops at or below a replica's
                                                       floor are read from the base, not segments

Rules:

* Each replica writes only its own segments, with ``If-None-Match: *``.  A 412 means the
  name exists: it is fetched and compared op by op.  The same ops (same id, HLC and kind;
  a payload that is a redaction of the other counts as the same) mean "already pushed" (a
  retry after a timeout the server had committed, or a re-push after a crash before the
  watermark was saved); different ops mean two devices share a replica id, and sync stops
  with :class:`brandmind.errors.SyncConflict`.
* A segment holds at most ``SEGMENT_OPS`` ops (a format constant: readers rely on it to
  find the segment holding a given seq with one listing) and about ``SEGMENT_BYTES``.
* ``heads.json`` is shared and updated with ``If-Match`` compare-and-swap (re-read, merge
  per-replica max, retry on 412/409).  ``heads()`` trusts it as a floor for the other
  devices' streams and lists the segments past it, so a crash between a segment upload and
  the head update loses nothing; this device's own stream is counted from the compaction
  floor instead, so segments a remote lost (restored from an old backup, emptied) are
  pushed again from the local log.
* Blobs are uploaded before the segment that names them; pulled ops' blobs are fetched into
  the local blob store before the ops are returned.
* Before the first push or pull, the op this device and the remote both hold at the highest
  common seq of this device's own replica is compared: a mismatch means a copied store.
"""
from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from typing import Any

from brandmind.errors import InvalidInput, SyncConflict
from brandmind.oplog import loads
from brandmind.replication import CLASH_HINT

from .config import RemoteConfig
from brandmind.crypto import Keyring
from .handle import store_of
from .s3client import Precondition, RemoteError, RemoteUnavailable, S3Objects, make_client
from .s3format import (COMPACT, HEADS, floor_of, REPLICA_RE, SEG_RE, SEGMENT_BYTES, SEGMENT_OPS, Segment, blob_digests, chunks,
                       coverage, is_redaction, merge_heads, op_replica, op_seq, same_op, seg_name)

__all__ = ["HEADS", "SEGMENT_BYTES", "SEGMENT_OPS", "RemoteError", "RemoteUnavailable", "S3Remote", "Segment",
           "is_redaction", "make_client", "open_remote", "op_replica", "op_seq", "same_op", "seg_name"]


class S3Remote(S3Objects):
    """A sync remote in an S3 bucket.  ``store`` (a StoreHandle, sync/handle.py) enables blobs
    and the replica-clash check; without it the remote moves ops only."""

    accepts_pushes_for_others = False

    def __init__(self, cfg: RemoteConfig, keyring: Keyring, *, store: Any = None, client: Any = None,
                 segment_ops: int = SEGMENT_OPS, segment_bytes: int = SEGMENT_BYTES) -> None:
        if segment_ops > SEGMENT_OPS:
            raise InvalidInput(f"segments hold at most {SEGMENT_OPS} ops", hint="use a smaller segment_ops")
        super().__init__(cfg, keyring, client=client)
        self.store = store_of(store) if store is not None else None
        self.segment_ops = segment_ops
        self.segment_bytes = segment_bytes
        self._heads: dict[str, int] | None = None      # from the last heads(), raised by pushes
        self._listing: dict[str, list[Segment]] = {}    # replica -> segments seen past some seq
        self._segcache: OrderedDict[str, list[dict]] = OrderedDict()
        self._verified = 0       # own-replica seq known to match the remote (see _check_clash)
        self._checking = False
        self.compacted: dict = {}  # compact.json as of the last heads() (compact.py)
        self._base: Any = None     # compaction's base snapshot, opened when a pull needs it

    # -- segments ---------------------------------------------------------------------------------
    def _list_replicas(self) -> list[str]:
        out = []
        for item in self.list_objects("ops/", delimiter="/"):
            if "Prefix" in item:
                rep = self.rel_of(item["Prefix"])[len("ops/"):].rstrip("/")
                if REPLICA_RE.match(rep):
                    out.append(rep)
        return out

    def _list_segments(self, replica: str, from_seq: int) -> list[Segment]:
        """Segments of ``replica`` that may hold ops with seq >= from_seq, by first seq.
        One listing: a segment holding ``from_seq`` starts at most SEGMENT_OPS-1 before it."""
        lo = max(0, from_seq - SEGMENT_OPS)
        segs = []
        for item in self.list_objects(f"ops/{replica}/", start_after_rel=f"ops/{replica}/{lo:012d}"):
            name = self.rel_of(item["Key"]).rsplit("/", 1)[-1]
            m = SEG_RE.match(name)
            if m:
                first, last = int(m.group(1)), int(m.group(2))
                if last >= from_seq and first <= last:
                    segs.append(Segment(first, last, self.rel_of(item["Key"])))
        segs.sort(key=lambda s: (s.first, -s.last))
        return segs


    def _read_segment(self, seg: Segment, replica: str) -> list[dict]:
        with self._lock:
            cached = self._segcache.get(seg.key)
            if cached is not None:
                self._segcache.move_to_end(seg.key)
                return cached
        got = self.get(seg.key)
        if got is None:
            raise RemoteUnavailable(f"{self.where(seg.key)} was listed but cannot be read",
                                    hint="sync again; if it persists, check the bucket (lifecycle rules?)")
        doc = loads(self.keyring.open(seg.key, got[0], where=self.where(seg.key)))
        ops = doc["ops"]
        if (doc.get("replica") != replica or not ops or op_seq(ops[0]) != seg.first
                or op_seq(ops[-1]) != seg.last or len(ops) != seg.last - seg.first + 1
                or any(op_replica(o) != replica for o in ops)):
            raise RemoteError(f"{self.where(seg.key)} does not hold the ops its name says",
                              hint="the remote is damaged; delete that object and sync again from every device")
        with self._lock:
            self._segcache[seg.key] = ops
            while len(self._segcache) > 6:
                self._segcache.popitem(last=False)
        return ops

    def segments(self, replica: str, from_seq: int = 1) -> list[Segment]:
        """The segments of ``replica`` that may hold ops with seq >= ``from_seq`` (compact.py)."""
        return self._list_segments(replica, from_seq)

    def read_segment(self, seg: Segment, replica: str) -> list[dict]:
        return self._read_segment(seg, replica)

    def replicas(self) -> list[str]:
        return self._list_replicas()

    @property
    def base(self) -> Any:
        """Compaction's base snapshot, downloaded once (``compact.BaseLog``: ``ops_of``)."""
        from .compact import BaseLog

        name = self.compacted.get("base")
        if self._base is None or self._base.name != name:
            if self._base is not None:
                self._base.close()
            self._base = BaseLog(self, name, self.store)
        return self._base

    def close(self) -> None:
        if self._base is not None:
            self._base.close()
            self._base = None

    # -- the Remote protocol ------------------------------------------------------------------------
    def heads(self) -> dict[str, int]:
        """replica -> highest contiguous seq stored remotely (heads.json, extended by a listing)."""
        doc, _ = self.read_doc(HEADS)
        told = {r: int(n) for r, n in ((doc or {}).get("heads") or {}).items() if REPLICA_RE.match(r)}
        comp, _ = self.read_doc(COMPACT)
        self.compacted = comp or {}
        folded = floor_of(self.compacted)
        # this device's own stream is counted from the compaction floor, not from heads.json:
        # segments the remote lost (a bucket restored or emptied) are then pushed again
        own = self.store.log.replica if self.store is not None else None
        floor = {r: folded.get(r, 0) if r == own else max(folded.get(r, 0), told.get(r, 0))
                 for r in set(told) | set(folded)}
        replicas = set(floor) | set(self._list_replicas())
        heads: dict[str, int] = {}
        listings: dict[str, list[Segment]] = {}

        def one(rep: str) -> tuple[str, list[Segment]]:
            return rep, self._list_segments(rep, floor.get(rep, 0) + 1)

        for rep, segs in self.map(one, sorted(replicas)):
            listings[rep] = segs
            cov = coverage(floor.get(rep, 0), segs)
            if cov > 0:
                heads[rep] = cov
        self._heads = dict(heads)
        self._listing = listings
        self._check_clash()
        return heads

    def push(self, replica: str, ops: list[dict]) -> int:
        """Store ``ops`` (one replica's, contiguous) as immutable segments; returns the new head."""
        if not REPLICA_RE.match(replica):
            raise InvalidInput(f"bad replica id {replica!r}", hint="replica ids are letters, digits, _ and -")
        ops = list(ops)
        if not ops:
            return self._head_of(replica)
        seqs = [op_seq(o) for o in ops]
        if any(op_replica(o) != replica for o in ops) or seqs != list(range(seqs[0], seqs[0] + len(ops))):
            raise InvalidInput(f"push needs contiguous ops of replica {replica}",
                               hint="this is a bug in the sync planner; report it")
        self._check_clash()
        head = self._head_of(replica)
        if seqs[0] > head + 1:
            raise InvalidInput(f"cannot push ops {seqs[0]}.. of {replica}: the remote holds only up to {head}",
                               hint="this is a bug in the sync planner; report it")
        skip = max(0, min(len(ops), head - seqs[0] + 1))  # the overlap is already there
        ops, seqs = ops[skip:], seqs[skip:]
        if not ops:
            return head
        self._push_blobs(ops)
        pieces = list(chunks(replica, ops, self.segment_ops, self.segment_bytes))

        def put(item: tuple[list[dict], bytes]) -> Segment:
            chunk, plain = item
            first, last = op_seq(chunk[0]), op_seq(chunk[-1])
            rel = seg_name(replica, first, last)
            body = self.keyring.seal(rel, plain)
            for attempt in range(4):
                try:
                    self.put(rel, body, IfNoneMatch="*")
                    break
                except Precondition as exc:
                    if exc.status == 409 and attempt < 3:  # a concurrent conditional write: retry
                        time.sleep(0.05 * 2 ** attempt)
                        continue
                    self._verify_existing(Segment(first, last, rel), replica, chunk)
                    self.stats["already_pushed"] += 1
                    break
            return Segment(first, last, rel)

        mine = list(self.map(put, pieces))
        new_head = seqs[-1]
        self._check_overlaps(replica, mine, dict(zip(seqs, ops)))
        self.cas(HEADS, lambda doc: merge_heads(doc, {replica: new_head}))
        if self._heads is not None:
            self._heads[replica] = max(self._heads.get(replica, 0), new_head)
        if self.store is not None and replica == self.store.log.replica:
            self._verified = new_head  # we just wrote (or matched) it
        return new_head

    def pull(self, replica: str, after: int, limit: int | None = None) -> list[dict]:
        """``replica``'s ops with seq > after, in seq order, up to the first gap (and ``limit``)."""
        if not REPLICA_RE.match(replica):
            raise InvalidInput(f"bad replica id {replica!r}", hint="replica ids are letters, digits, _ and -")
        self._check_clash()
        want = after + 1
        folded = floor_of(self.compacted).get(replica, 0)
        if want <= folded:  # compacted away: in the base snapshot's log (compact.py)
            n = folded - after if limit is None else min(limit, folded - after)
            out = self._at_floor(replica, folded) if want == folded else None
            if out is None:
                out = self.base.ops_of(replica, after, n)
            self.pull_blobs(out)
            if len(out) == folded - after and (limit is None or len(out) < limit):
                out += self._pull_segments(replica, folded, None if limit is None else limit - len(out))
            return out
        return self._pull_segments(replica, after, limit)

    def _at_floor(self, replica: str, folded: int) -> list[dict] | None:
        """The op at the compaction floor when this device holds it (the engine's first pull
        starts one op early to compare it): checked against compact.json's fingerprint of
        it instead of downloading the base for one op.  None: not held here."""
        mine = self.store.log.get_op(replica, folded) if self.store is not None else None
        last = (self.compacted.get("last") or {}).get(replica)
        if mine is None or not last:
            return None
        if [list(mine["hlc"]), mine["kind"]] != [list(last[0]), last[1]]:
            raise SyncConflict(f"remote {self.name!r} holds a different op {mine['id']} than this device "
                               f"(two devices share replica id {replica})", hint=CLASH_HINT)
        return [mine]

    def _pull_segments(self, replica: str, after: int, limit: int | None) -> list[dict]:
        want = after + 1
        segs = [s for s in self._listing.get(replica, []) if s.last >= want]
        if not segs or segs[0].first > want:
            segs = self._list_segments(replica, want)
        out: list[dict] = []
        cur = after
        plan: list[Segment] = []
        for s in segs:  # the segments that continue the run, in order
            if s.first > cur + 1:
                break
            if s.last > cur:
                plan.append(s)
                cur = s.last
                if limit is not None and cur - after >= limit:
                    break
        # fetch in parallel, keep order
        full = False
        for ops in self.map(lambda s: self._read_segment(s, replica), plan):
            for op in ops:
                seq = op_seq(op)
                if seq <= after + len(out):
                    continue  # an overlap of two segments
                if seq != after + len(out) + 1 or (limit is not None and len(out) >= limit):
                    full = True
                    break
                out.append(op)
            if full:
                break
        if out:
            self._check_pulled(replica, segs, plan, out)
        self.pull_blobs(out)
        return out

    def _check_pulled(self, replica: str, segs: list[Segment], plan: list[Segment], out: list[dict]) -> None:
        """Two segments over the same seqs only exist after two devices wrote under one
        replica id at the same time: if they differ, nobody may pick one silently."""
        lo, hi = op_seq(out[0]), op_seq(out[-1])
        others = [s for s in segs if s not in plan and s.first <= hi and s.last >= lo]
        if not others:
            return
        mine = {op_seq(o): o for o in out}
        for s in others:
            for op in self._read_segment(s, replica):
                have = mine.get(op_seq(op))
                if have is not None and not same_op(have, op):
                    names = ", ".join(self.where(x.key) for x in [*plan, *others]
                                      if x.first <= op_seq(op) <= x.last)
                    raise SyncConflict(f"remote {self.name!r} holds two different ops {op['id']} "
                                       f"(two devices share replica id {replica}): {names}",
                                       hint=CLASH_HINT + "; on the device that wrote the wrong one, "
                                            "delete its segment from the bucket")

    # -- helpers ---------------------------------------------------------------------------------------
    def _head_of(self, replica: str) -> int:
        if self._heads is None:
            self.heads()
        assert self._heads is not None
        return self._heads.get(replica, 0)

    def _verify_existing(self, seg: Segment, replica: str, chunk: list[dict]) -> None:
        """A segment of that name exists (412): the same ops are fine, others are a clash."""
        with self._lock:
            self._segcache.pop(seg.key, None)
        theirs = self._read_segment(seg, replica)
        if len(theirs) != len(chunk) or not all(same_op(a, b) for a, b in zip(theirs, chunk)):
            bad = next((b["id"] for a, b in zip(theirs, chunk) if not same_op(a, b)), chunk[0]["id"])
            raise SyncConflict(f"remote {self.name!r} already holds a different op {bad} in "
                               f"{self.where(seg.key)}: two devices share replica id {replica}",
                               hint=CLASH_HINT)

    def _check_overlaps(self, replica: str, mine: list[Segment], ops: dict[int, dict]) -> None:
        """After writing: another device with the same replica id may have written other
        segments over the same seqs at the same time (different boundaries, so no 412)."""
        names = {s.key for s in mine}
        lo, hi = mine[0].first, mine[-1].last
        for s in self._list_segments(replica, lo):
            if s.key in names or s.first > hi:
                continue
            theirs = self._read_segment(s, replica)
            for op in theirs:
                own = ops.get(op_seq(op))
                if own is not None and not same_op(op, own):
                    raise SyncConflict(f"remote {self.name!r} holds a different op {op['id']} in "
                                       f"{self.where(s.key)}: two devices share replica id {replica}",
                                       hint=CLASH_HINT)

    def _check_clash(self) -> None:
        """This device's op at the highest seq both it and the remote hold of its own replica
        must be the remote's op (else two devices write under one replica id, e.g. a copied
        store directory).  Checked whenever that seq moves (segments are cached: cheap)."""
        if self._checking or self.store is None:
            return
        self._checking = True
        try:
            if self._heads is None:
                self.heads()
            own = self.store.log.replica
            remote_head = (self._heads or {}).get(own, 0)
            local = self.store.log.version_vector().get(own, 0)
            at = min(remote_head, local)
            if at >= 1 and at != self._verified:
                mine = self.store.log.ops_of(own, at - 1, 1)
                last = (self.compacted.get("last") or {}).get(own)
                if at == floor_of(self.compacted).get(own) and last:  # its segment is gone
                    theirs = [{**mine[0], "hlc": last[0], "kind": last[1]}] if mine else []
                else:
                    theirs = self.pull(own, at - 1, 1)
                if theirs and mine and not same_op(theirs[0], mine[0]):
                    raise SyncConflict(f"remote {self.name!r} holds a different op {mine[0]['id']} than "
                                       f"this device: two devices share replica id {own}", hint=CLASH_HINT)
                self._verified = at
        finally:
            self._checking = False

    # -- blobs -------------------------------------------------------------------------------------------
    def blob_name(self, digest: str) -> str:
        return "blobs/" + self.keyring.active().name_mac("blob:" + digest)

    def push_blobs(self, ops: list[dict]) -> None:
        """Upload the blobs the beads of ``ops`` name (compaction: ops it folds unpushed)."""
        self._push_blobs(ops)

    def _push_blobs(self, ops: list[dict]) -> None:
        if self.store is None:
            return

        def one(digest: str) -> None:
            rel = self.blob_name(digest)
            try:
                self.call(f"check {rel}", self.client.head_object, Key=self.key(rel))
                return
            except KeyError:
                pass
            body = self.keyring.seal(rel, self.store.blobs.get(digest))
            try:
                self.put(rel, body, IfNoneMatch="*")
            except Precondition:
                pass  # content-addressed: whoever wrote it wrote the same bytes

        list(self.map(one, blob_digests(ops)))

    def pull_blobs(self, ops: list[dict]) -> None:
        if self.store is None:
            return
        root = self.store.paths.blob_dir
        missing = [d for d in blob_digests(ops) if not (root / d[:2] / d).exists()]

        def one(digest: str) -> None:
            rel = self.blob_name(digest)
            got = self.get(rel)
            if got is None:
                raise RemoteError(f"blob {rel} named by a pulled bead is missing from remote {self.name!r}",
                                  hint="sync the device that wrote the bead again (it re-uploads its blobs)")
            data = self.keyring.open(rel, got[0], where=self.where(rel))
            if hashlib.sha256(data).hexdigest() != digest:
                raise RemoteError(f"blob {self.where(rel)} does not match its hash",
                                  hint="the remote is damaged; sync the device that wrote it again")
            self.store.blobs.put(data)

        list(self.map(one, missing))

    # -- maintenance ----------------------------------------------------------------------------------
    def probe(self, *, check_key: bool = True) -> dict[str, Any]:
        """`bm remote test`: a round trip (put/get/delete of an encrypted probe object) and
        the conditional writes sync relies on (If-None-Match: *, If-Match); ``probe`` in
        sync/remotes.py times it (``latency_ms``).  ``check_key``: read heads.json with this
        store's key (False: the store has none; say whether the remote holds data)."""
        import os as _os

        rel = f"probe/{_os.getpid()}-{_os.urandom(6).hex()}"
        body = self.keyring.seal(rel, b"bm probe")
        result: dict[str, Any] = {"remote": self.name, "url": self.cfg.url(),
                                  "endpoint_url": self.cfg.endpoint_url}
        etag = self.put(rel, body, IfNoneMatch="*")
        try:
            got = self.get(rel)
            result["round_trip"] = got is not None and self.keyring.open(rel, got[0]) == b"bm probe"
            try:
                self.put(rel, body, IfNoneMatch="*")
                result["if_none_match"] = False
            except Precondition:
                result["if_none_match"] = True
            try:
                self.put(rel, body, IfMatch='"0000000000000000000000000000000a"')
                result["if_match"] = False
            except Precondition:
                try:
                    self.put(rel, body, IfMatch=etag)
                    result["if_match"] = True
                except Precondition:
                    result["if_match"] = False
        finally:
            self.call(f"delete {rel}", self.client.delete_object, Key=self.key(rel))
        result["deleted"] = self.get(rel) is None
        if check_key:
            doc, _ = self.read_doc(HEADS)  # raises the wrong-key error when it is not ours
            result["replicas"] = len((doc or {}).get("heads") or {})
            result["key_id"] = self.keyring.active().key_id
        else:  # no key here: only whether other devices sync through it already
            result["has_data"] = self.get(HEADS) is not None or bool(self._list_replicas())
        result["ok"] = all(result.get(k) for k in ("round_trip", "if_none_match", "if_match", "deleted"))
        return result


def open_remote(store: Any, cfg: RemoteConfig, *, client: Any = None) -> S3Remote:
    """The S3Remote of a configured remote for an open store (its keyring under the data dir)."""
    return S3Remote(cfg, Keyring(store.paths.data_dir), store=store, client=client)

