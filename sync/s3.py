"""``S3Remote``: the op log replicated through any S3-compatible bucket (boto3).

Layout under ``<prefix>/`` (every object encrypted on the client, see crypto.py)::

    ops/<replica>/<first seq:012>-<last seq:012>.seg   immutable segments of one replica's ops
    heads.json                                         replica -> highest contiguous seq (CAS)
    blobs/<keyed hash of the sha256>                   bead contents over the blob threshold
    snapshots/<replica>-<vv hash>.snap, snapshots/index.json   (see snapshot.py)

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
  per-replica max, retry on 412/409).  ``heads()`` trusts it as a floor and lists the
  segments past it, so a crash between a segment upload and the head update loses nothing.
* Blobs are uploaded before the segment that names them; pulled ops' blobs are fetched into
  the local blob store before the ops are returned.
* Before the first push or pull, the op this device and the remote both hold at the highest
  common seq of this device's own replica is compared: a mismatch means a copied store.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from brandmind.clock import CLOCK_HINT, now_millis, span
from brandmind.errors import BMError, ClockSkew, ConfigError, InvalidInput, SyncConflict
from brandmind.oplog import dumps, loads
from brandmind.ops import Kind
from brandmind.replication import CLASH_HINT

from .config import RemoteConfig
from .crypto import Keyring
from .remote import RemoteDown

SEGMENT_OPS = 5000            # format constant: no segment holds more ops than this
SEGMENT_BYTES = 8 << 20       # about this much JSON per segment (one op may exceed it)
HEADS = "heads.json"
_SEG = re.compile(r"^(\d{12})-(\d{12})\.seg$")
_REPLICA = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_CAS_TRIES = 12
_WORKERS = 4


class RemoteError(BMError):
    """The remote refused or failed a request (after botocore's own retries)."""


class RemoteUnavailable(RemoteError, RemoteDown):
    """The remote cannot be reached right now (network, timeouts, 5xx): try again later."""


class _Precondition(Exception):
    """412 (or 409 on a conditional write): the condition did not hold."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass(frozen=True)
class Segment:
    first: int
    last: int
    key: str  # relative to the prefix


def seg_name(replica: str, first: int, last: int) -> str:
    return f"ops/{replica}/{first:012d}-{last:012d}.seg"


def op_seq(op: dict) -> int:
    return int(op["id"].rsplit(":", 1)[1])


def op_replica(op: dict) -> str:
    return op["id"].rsplit(":", 1)[0]


def is_redaction(a: dict, b: dict) -> bool:
    """Whether payload ``a`` is ``b`` with content removed (marked ``redacted``, or some
    fields nulled: a forgotten user's edits of a shared block keep everything but the name)."""
    if a.get("redacted"):
        return True
    return all(k in b and (a[k] == b[k] or a[k] is None) for k in a)


def same_op(a: dict, b: dict) -> bool:
    """The same op, allowing one side to be a redaction of the other (a forget after the push)."""
    if a["id"] != b["id"] or list(a["hlc"]) != list(b["hlc"]) or a["kind"] != b["kind"]:
        return False
    pa, pb = a.get("payload") or {}, b.get("payload") or {}
    return pa == pb or is_redaction(pa, pb) or is_redaction(pb, pa)


def make_client(cfg: RemoteConfig) -> Any:
    """A boto3 S3 client for the remote: credentials from the remote's config, else its
    profile, else the usual chain; path-style addressing for custom endpoints."""
    import boto3
    import botocore.exceptions
    from botocore.config import Config

    try:
        session = boto3.session.Session(profile_name=cfg.profile) if cfg.profile else boto3.session.Session()
    except botocore.exceptions.ProfileNotFound:
        raise ConfigError(f"remote {cfg.name!r}: AWS profile {cfg.profile!r} is not configured",
                          hint="add it to ~/.aws/config (`aws configure --profile NAME`) or "
                               f"`bm remote add s3 {cfg.name} --replace` without --profile") from None
    style = cfg.addressing_style or ("path" if cfg.endpoint_url else "auto")
    options: dict[str, Any] = dict(
        s3={"addressing_style": style},
        retries={"mode": "standard", "max_attempts": 5},
        connect_timeout=5, read_timeout=60, tcp_keepalive=True,
        max_pool_connections=16, user_agent_extra="brandmind-sync",
    )
    if cfg.endpoint_url:  # S3-compatible servers differ in their support of the newer checksums
        options.update(request_checksum_calculation="when_required",
                       response_checksum_validation="when_required")
    region = cfg.region or session.region_name or ("us-east-1" if cfg.endpoint_url else None)
    creds: dict[str, Any] = {}
    if cfg.access_key_id and cfg.secret_access_key:
        creds = {"aws_access_key_id": cfg.access_key_id, "aws_secret_access_key": cfg.secret_access_key}
    return session.client("s3", endpoint_url=cfg.endpoint_url, region_name=region,
                          config=Config(**options), **creds)


class S3Remote:
    """A sync remote in an S3 bucket.  ``store`` (a ``brandmind.Memory``) enables blobs and the
    replica-clash check; without it the remote moves ops only."""

    accepts_pushes_for_others = False

    def __init__(self, cfg: RemoteConfig, keyring: Keyring, *, store: Any = None, client: Any = None,
                 segment_ops: int = SEGMENT_OPS, segment_bytes: int = SEGMENT_BYTES) -> None:
        if segment_ops > SEGMENT_OPS:
            raise InvalidInput(f"segments hold at most {SEGMENT_OPS} ops", hint="use a smaller segment_ops")
        self.name = cfg.name
        self.cfg = cfg
        self.keyring = keyring
        self.store = store
        self.segment_ops = segment_ops
        self.segment_bytes = segment_bytes
        self._client = client
        self._lock = threading.Lock()
        self._heads: dict[str, int] | None = None      # from the last heads(), raised by pushes
        self._listing: dict[str, list[Segment]] = {}    # replica -> segments seen past some seq
        self._segcache: OrderedDict[str, list[dict]] = OrderedDict()
        self._verified = 0       # own-replica seq known to match the remote (see _check_clash)
        self._checking = False
        self.stats = {"requests": 0, "bytes_up": 0, "bytes_down": 0, "already_pushed": 0}
        self.clock_sample: tuple[int, int] | None = None  # (this clock - the server's, round trip) ms

    # -- plumbing -------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client(self.cfg)
        return self._client

    def key(self, rel: str) -> str:
        return f"{self.cfg.prefix}/{rel}" if self.cfg.prefix else rel

    def where(self, rel: str) -> str:
        return f"s3://{self.cfg.bucket}/{self.key(rel)}"

    def _call(self, what: str, fn: Callable[..., Any], **kw: Any) -> Any:
        """One S3 request (botocore retries transient failures itself); errors become BMErrors."""
        import botocore.exceptions as bx

        self.stats["requests"] += 1
        t0 = now_millis()
        try:
            resp = fn(Bucket=self.cfg.bucket, **kw)
            self._saw_date(resp, t0)
            return resp
        except bx.ClientError as exc:
            self._saw_date(exc.response, t0)
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "RequestTimeTooSkewed":
                off = self.clock_offset_ms()
                how = (f"{span(off)} {'ahead of' if off > 0 else 'behind'}" if off is not None
                       else "too far from")
                raise ClockSkew(f"remote {self.name!r} refused to {what}: this device's clock is {how} "
                                "the S3 server's (RequestTimeTooSkewed)", hint=CLOCK_HINT) from None
            if status == 412 or code == "PreconditionFailed":
                raise _Precondition(412) from None
            if status == 409 and code in ("ConditionalRequestConflict", "OperationAborted"):
                raise _Precondition(409) from None
            if code in ("NoSuchKey", "404", "NotFound"):
                raise KeyError(kw.get("Key")) from None
            if code == "NoSuchBucket":
                raise RemoteError(f"remote {self.name!r}: bucket {self.cfg.bucket!r} does not exist",
                                  hint="create it (e.g. `aws s3 mb s3://BUCKET`) or fix it with "
                                       f"`bm remote add s3 {self.name} --replace --bucket B`") from None
            if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403",
                        "InvalidToken", "ExpiredToken", "AllAccessDisabled"):
                raise RemoteError(f"remote {self.name!r}: access denied when trying to {what} ({code})",
                                  hint="check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                                       "--profile, or the remote's access_key_id) and the bucket policy") from None
            if status is not None and status >= 500:
                raise RemoteUnavailable(f"remote {self.name!r} failed to {what}: HTTP {status} {code}",
                                        hint="a server-side problem; nothing is lost (the local op log "
                                             "keeps every op): sync again later") from None
            raise RemoteError(f"remote {self.name!r} refused to {what}: {code or status} "
                              f"{err.get('Message', '')}".rstrip(),
                              hint="check the remote with `bm remote test`") from None
        except bx.NoCredentialsError:
            raise RemoteError(f"remote {self.name!r}: no AWS credentials found",
                              hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or use "
                                   f"`bm remote add s3 {self.name} --replace --profile NAME ...`") from None
        except (bx.EndpointConnectionError, bx.ConnectionClosedError, bx.ReadTimeoutError,
                bx.ConnectTimeoutError, bx.ConnectionError, bx.HTTPClientError) as exc:
            raise RemoteUnavailable(f"cannot reach remote {self.name!r} ({self.cfg.endpoint_url or 'AWS S3'}) "
                                    f"to {what}: {exc}",
                                    hint="check the network and the endpoint URL; nothing is lost "
                                         "(the local op log keeps every op): sync again later") from None

    def _saw_date(self, resp: Any, t0: int) -> None:
        """Compare this device's clock with the server's ``Date`` header (1 s resolution:
        the server's time is taken as the middle of that second, ours as the middle of the
        request)."""
        from email.utils import parsedate_to_datetime

        headers = (resp or {}).get("ResponseMetadata", {}).get("HTTPHeaders") or {}
        date = headers.get("date")
        if not date:
            return
        try:
            server = int(parsedate_to_datetime(date).timestamp() * 1000) + 500
        except (TypeError, ValueError, IndexError, OverflowError):
            return
        t1 = now_millis()
        self.clock_sample = ((t0 + t1) // 2 - server, t1 - t0)

    def clock_offset_ms(self) -> int | None:
        """How far this device's clock is ahead of the server's (negative: behind), from the
        last answer, or None before any answer."""
        return self.clock_sample[0] if self.clock_sample else None

    def _get(self, rel: str) -> tuple[bytes, str] | None:
        """(body, etag) of an object, or None when it does not exist."""
        import botocore.exceptions as bx

        try:
            resp = self._call(f"read {rel}", self.client.get_object, Key=self.key(rel))
        except KeyError:
            return None
        try:
            body = resp["Body"].read()
        except (bx.BotoCoreError, OSError) as exc:
            raise RemoteUnavailable(f"reading {self.where(rel)} was cut off: {exc}",
                                    hint="sync again; nothing is lost") from None
        self.stats["bytes_down"] += len(body)
        return body, resp.get("ETag", "")

    def _put(self, rel: str, body: bytes, **cond: str) -> str:
        """PUT with a condition (IfNoneMatch='*' or IfMatch=etag); raises _Precondition."""
        resp = self._call(f"write {rel}", self.client.put_object, Key=self.key(rel), Body=body, **cond)
        self.stats["bytes_up"] += len(body)
        return resp.get("ETag", "")

    def _list(self, prefix_rel: str, *, start_after_rel: str | None = None,
              delimiter: str | None = None) -> Iterator[dict]:
        kw: dict[str, Any] = {"Prefix": self.key(prefix_rel)}
        if start_after_rel is not None:
            kw["StartAfter"] = self.key(start_after_rel)
        if delimiter:
            kw["Delimiter"] = delimiter
        token = None
        while True:
            if token:
                kw["ContinuationToken"] = token
            resp = self._call(f"list {prefix_rel}", self.client.list_objects_v2, **kw)
            yield from resp.get("Contents", [])
            for cp in resp.get("CommonPrefixes", []):
                yield {"Prefix": cp["Prefix"]}
            if not resp.get("IsTruncated"):
                return
            token = resp.get("NextContinuationToken")

    def _rel(self, full: str) -> str:
        p = self.cfg.prefix
        return full[len(p) + 1:] if p and full.startswith(p + "/") else full

    # -- encrypted documents ------------------------------------------------------------------
    def _read_doc(self, rel: str) -> tuple[dict | None, str | None]:
        got = self._get(rel)
        if got is None:
            return None, None
        body, etag = got
        try:
            return json.loads(self.keyring.open(rel, body, where=self.where(rel))), etag
        except ValueError:
            raise RemoteError(f"{self.where(rel)} is not valid JSON after decryption",
                              hint="the object is damaged; delete it and sync again") from None

    def _cas(self, rel: str, merge: Callable[[dict | None], dict]) -> dict:
        """Compare-and-swap a shared document: read, merge, write If-Match (or If-None-Match
        when absent); on 412/409 re-read and merge again."""
        for attempt in range(_CAS_TRIES):
            doc, etag = self._read_doc(rel)
            new = merge(doc)
            if doc is not None and new == doc:
                return doc
            body = self.keyring.seal(rel, dumps(new))
            try:
                self._put(rel, body, **({"IfMatch": etag} if etag else {"IfNoneMatch": "*"}))
                return new
            except _Precondition:
                time.sleep(min(1.0, 0.02 * 2 ** attempt) * random.random())
        raise RemoteUnavailable(f"{self.where(rel)} kept changing under {_CAS_TRIES} attempts to update it",
                                hint="many devices are syncing at once; sync again in a moment")

    # -- segments ---------------------------------------------------------------------------------
    def _list_replicas(self) -> list[str]:
        out = []
        for item in self._list("ops/", delimiter="/"):
            if "Prefix" in item:
                rep = self._rel(item["Prefix"])[len("ops/"):].rstrip("/")
                if _REPLICA.match(rep):
                    out.append(rep)
        return out

    def _list_segments(self, replica: str, from_seq: int) -> list[Segment]:
        """Segments of ``replica`` that may hold ops with seq >= from_seq, by first seq.
        One listing: a segment holding ``from_seq`` starts at most SEGMENT_OPS-1 before it."""
        lo = max(0, from_seq - SEGMENT_OPS)
        segs = []
        for item in self._list(f"ops/{replica}/", start_after_rel=f"ops/{replica}/{lo:012d}"):
            name = self._rel(item["Key"]).rsplit("/", 1)[-1]
            m = _SEG.match(name)
            if m:
                first, last = int(m.group(1)), int(m.group(2))
                if last >= from_seq and first <= last:
                    segs.append(Segment(first, last, self._rel(item["Key"])))
        segs.sort(key=lambda s: (s.first, -s.last))
        return segs

    @staticmethod
    def _coverage(floor: int, segs: Iterable[Segment]) -> int:
        cov = floor
        for s in sorted(segs, key=lambda s: s.first):
            if s.first > cov + 1:
                break
            cov = max(cov, s.last)
        return cov

    def _read_segment(self, seg: Segment, replica: str) -> list[dict]:
        with self._lock:
            cached = self._segcache.get(seg.key)
            if cached is not None:
                self._segcache.move_to_end(seg.key)
                return cached
        got = self._get(seg.key)
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

    # -- the Remote protocol ------------------------------------------------------------------------
    def heads(self) -> dict[str, int]:
        """replica -> highest contiguous seq stored remotely (heads.json, extended by a listing)."""
        doc, _ = self._read_doc(HEADS)
        floor = {r: int(n) for r, n in ((doc or {}).get("heads") or {}).items() if _REPLICA.match(r)}
        replicas = set(floor) | set(self._list_replicas())
        heads: dict[str, int] = {}
        listings: dict[str, list[Segment]] = {}

        def one(rep: str) -> tuple[str, list[Segment]]:
            return rep, self._list_segments(rep, floor.get(rep, 0) + 1)

        for rep, segs in self._map(one, sorted(replicas)):
            listings[rep] = segs
            cov = self._coverage(floor.get(rep, 0), segs)
            if cov > 0:
                heads[rep] = cov
        self._heads = dict(heads)
        self._listing = listings
        self._check_clash()
        return heads

    def push(self, replica: str, ops: list[dict]) -> int:
        """Store ``ops`` (one replica's, contiguous) as immutable segments; returns the new head."""
        if not _REPLICA.match(replica):
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
        chunks = list(self._chunks(replica, ops))

        def put(item: tuple[list[dict], bytes]) -> Segment:
            chunk, plain = item
            first, last = op_seq(chunk[0]), op_seq(chunk[-1])
            rel = seg_name(replica, first, last)
            body = self.keyring.seal(rel, plain)
            for attempt in range(4):
                try:
                    self._put(rel, body, IfNoneMatch="*")
                    break
                except _Precondition as exc:
                    if exc.status == 409 and attempt < 3:  # a concurrent conditional write: retry
                        time.sleep(0.05 * 2 ** attempt)
                        continue
                    self._verify_existing(Segment(first, last, rel), replica, chunk)
                    self.stats["already_pushed"] += 1
                    break
            return Segment(first, last, rel)

        mine = list(self._map(put, chunks))
        new_head = seqs[-1]
        self._check_overlaps(replica, mine, dict(zip(seqs, ops)))
        self._cas(HEADS, lambda doc: _merge_heads(doc, {replica: new_head}))
        if self._heads is not None:
            self._heads[replica] = max(self._heads.get(replica, 0), new_head)
        if self.store is not None and replica == self.store.log.replica:
            self._verified = new_head  # we just wrote (or matched) it
        return new_head

    def pull(self, replica: str, after: int, limit: int | None = None) -> list[dict]:
        """``replica``'s ops with seq > after, in seq order, up to the first gap (and ``limit``)."""
        if not _REPLICA.match(replica):
            raise InvalidInput(f"bad replica id {replica!r}", hint="replica ids are letters, digits, _ and -")
        self._check_clash()
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
        for ops in self._map(lambda s: self._read_segment(s, replica), plan):
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
        self._pull_blobs(out)
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
    def _map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Any]:
        """``map`` over a few threads (boto3 clients are thread-safe), results in order."""
        items = list(items)
        if len(items) <= 1:
            yield from map(fn, items)
            return
        self.client  # make it once, before the threads
        with ThreadPoolExecutor(max_workers=min(_WORKERS, len(items))) as pool:
            yield from pool.map(fn, items)

    def _head_of(self, replica: str) -> int:
        if self._heads is None:
            self.heads()
        assert self._heads is not None
        return self._heads.get(replica, 0)

    def _chunks(self, replica: str, ops: list[dict]) -> Iterator[tuple[list[dict], bytes]]:
        """Segments of at most ``segment_ops`` ops, split in halves while the JSON is over
        ``segment_bytes`` (one op alone may be bigger); each with its canonical JSON."""
        def split(chunk: list[dict]) -> Iterator[tuple[list[dict], bytes]]:
            plain = dumps({"format": 1, "replica": replica, "ops": chunk})
            if len(plain) > self.segment_bytes and len(chunk) > 1:
                half = len(chunk) // 2
                yield from split(chunk[:half])
                yield from split(chunk[half:])
            else:
                yield chunk, plain

        for i in range(0, len(ops), self.segment_ops):
            yield from split(ops[i:i + self.segment_ops])

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
                theirs = self.pull(own, at - 1, 1)
                mine = self.store.log.ops_of(own, at - 1, 1)
                if theirs and mine and not same_op(theirs[0], mine[0]):
                    raise SyncConflict(f"remote {self.name!r} holds a different op {mine[0]['id']} than "
                                       f"this device: two devices share replica id {own}", hint=CLASH_HINT)
                self._verified = at
        finally:
            self._checking = False

    # -- blobs -------------------------------------------------------------------------------------------
    def blob_name(self, digest: str) -> str:
        return "blobs/" + self.keyring.active().name_mac("blob:" + digest)

    @staticmethod
    def _blob_digests(ops: Iterable[dict]) -> list[str]:
        out = []
        for op in ops:
            p = op.get("payload") or {}
            if op.get("kind") == Kind.BEAD_ADD and not p.get("redacted"):
                digest = (p.get("bead") or {}).get("blob")
                if digest:
                    out.append(digest)
        return list(dict.fromkeys(out))

    def _push_blobs(self, ops: list[dict]) -> None:
        if self.store is None:
            return

        def one(digest: str) -> None:
            rel = self.blob_name(digest)
            try:
                self._call(f"check {rel}", self.client.head_object, Key=self.key(rel))
                return
            except KeyError:
                pass
            body = self.keyring.seal(rel, self.store.blobs.get(digest))
            try:
                self._put(rel, body, IfNoneMatch="*")
            except _Precondition:
                pass  # content-addressed: whoever wrote it wrote the same bytes

        list(self._map(one, self._blob_digests(ops)))

    def _pull_blobs(self, ops: list[dict]) -> None:
        if self.store is None:
            return
        root = self.store.paths.blob_dir
        missing = [d for d in self._blob_digests(ops) if not (root / d[:2] / d).exists()]

        def one(digest: str) -> None:
            rel = self.blob_name(digest)
            got = self._get(rel)
            if got is None:
                raise RemoteError(f"blob {rel} named by a pulled bead is missing from remote {self.name!r}",
                                  hint="sync the device that wrote the bead again (it re-uploads its blobs)")
            data = self.keyring.open(rel, got[0], where=self.where(rel))
            if hashlib.sha256(data).hexdigest() != digest:
                raise RemoteError(f"blob {self.where(rel)} does not match its hash",
                                  hint="the remote is damaged; sync the device that wrote it again")
            self.store.blobs.put(data)

        list(self._map(one, missing))

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
        etag = self._put(rel, body, IfNoneMatch="*")
        try:
            got = self._get(rel)
            result["round_trip"] = got is not None and self.keyring.open(rel, got[0]) == b"bm probe"
            try:
                self._put(rel, body, IfNoneMatch="*")
                result["if_none_match"] = False
            except _Precondition:
                result["if_none_match"] = True
            try:
                self._put(rel, body, IfMatch='"0000000000000000000000000000000a"')
                result["if_match"] = False
            except _Precondition:
                try:
                    self._put(rel, body, IfMatch=etag)
                    result["if_match"] = True
                except _Precondition:
                    result["if_match"] = False
        finally:
            self._call(f"delete {rel}", self.client.delete_object, Key=self.key(rel))
        result["deleted"] = self._get(rel) is None
        if check_key:
            doc, _ = self._read_doc(HEADS)  # raises the wrong-key error when it is not ours
            result["replicas"] = len((doc or {}).get("heads") or {})
            result["key_id"] = self.keyring.active().key_id
        else:  # no key here: only whether other devices sync through it already
            result["has_data"] = self._get(HEADS) is not None or bool(self._list_replicas())
        result["ok"] = all(result.get(k) for k in ("round_trip", "if_none_match", "if_match", "deleted"))
        return result


def _merge_heads(doc: dict | None, new: dict[str, int]) -> dict:
    heads = dict((doc or {}).get("heads") or {})
    for rep, n in new.items():
        heads[rep] = max(int(heads.get(rep, 0)), int(n))
    out = dict(doc or {})
    out["format"] = 1
    out["heads"] = dict(sorted(heads.items()))
    return out


def open_remote(store: Any, cfg: RemoteConfig, *, client: Any = None) -> S3Remote:
    """The S3Remote of a configured remote for an open store (its keyring under the data dir)."""
    return S3Remote(cfg, Keyring(store.paths.data_dir), store=store, client=client)
