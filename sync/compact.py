"""Compaction of an S3 remote (``bm sync compact``; the daemon every ``sync_compact_interval``
seconds): a device folds the op segments it holds into a snapshot of its state (snapshot.py)
and deletes them, so the text of what was forgotten stops existing on the remote (the
snapshot's log holds forgotten ops redacted, its SQLite copy is vacuumed, snapshot.py).

``compact.json`` (encrypted, changed only by compare-and-swap)::

    {"format": 1, "base": "snapshots/<replica>-<vv hash>.snap", "floor": {replica: seq},
     "vv": {replica: seq}, "last": {replica: [hlc, kind]}, "at": iso, "by": replica,
     "generation": n}

``floor[r]``: ops 1..floor[r] of replica r may be gone from ``ops/<r>/``; they are in the
base's log (the base's version vector covers the floor: the invariant).  ``last[r]``: the
HLC and kind of op floor[r], so a device can still check that op is its own (s3.py's
replica clash check) without downloading the base.

Safety with other devices (the order is the argument):

1. The compacting device must hold every op the current floor covers (else it has not
   caught up: ``bm sync now`` first, which reads them from the base) and makes its snapshot
   from its own log: version vector V.
2. The snapshot's parts and manifest are written, then compact.json is swapped to name it
   the base with floor V, and only if the floor there is still covered by V (another device
   compacting at the same time with more ops wins; this one deletes its snapshot and stops).
3. Only then segments go, and only those whose every op is at or below V: ops another
   device pushes meanwhile are past V and stay.  A segment straddling V stays whole.
4. Older snapshots go (they may hold forgotten text) but never the base: ``register``
   skips it, and a snapshot is only in the index after it was named base, so no device
   prunes a base it has not seen named; objects of a snapshot no index names (an upload
   cut short) go once older than ``BLOB_GRACE_S`` (another device may be uploading it).
5. Blobs no live bead names (not the store's, not a bead in a segment left) go, if older
   than ``BLOB_GRACE_S`` by the server's clock: a device uploads a blob before the segment
   naming it, so a fresh blob may belong to a push under way.

A device whose ops of some replica end below the floor (offline since before the last
compaction) pulls those ops from the base's log (``S3Remote.pull`` -> :class:`BaseLog`):
the same ops, redacted as the compacting device had them, so nothing forgotten comes back.
"""
from __future__ import annotations

import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from brandmind.errors import BMError

from . import snapshot
from .handle import store_of
from .s3format import COMPACT, blob_digests, floor_of

BLOB_GRACE_S = 3600   # a blob younger than this (server time) may belong to a push under way
FORMAT = 1


class CompactError(BMError):
    """Compaction cannot run now (this device is behind, or another device compacted first)."""


def record(remote: Any) -> dict:
    """compact.json ({} when the remote was never compacted)."""
    doc, _ = remote.read_doc(COMPACT)
    return doc or {}


def compact(store: Any, remote: Any, *, blob_grace_s: float = BLOB_GRACE_S) -> dict:
    """Fold the remote's segments this device holds into a new base snapshot (the module
    docstring); returns ``{"compacted", "base"?, "floor"?, "segments_deleted",
    "snapshots_deleted", "blobs_deleted", "seconds"}``.  Sync first: the snapshot holds what
    this device has.  ``store``: a StoreHandle (a Memory gives its ``.store``)."""
    store = store_of(store)
    t0 = time.perf_counter()
    before = record(remote)
    vv = store.log.version_vector()
    _covers(vv, floor_of(before), "the remote's last compaction")
    foldable = _segments(remote, vv)
    out: dict[str, Any] = {"compacted": False, "segments_deleted": 0, "snapshots_deleted": 0, "blobs_deleted": 0}
    if not any(foldable.values()) and before.get("base"):
        out["reason"] = "nothing to fold: no segment is wholly held here past the last compaction"
        out["seconds"] = round(time.perf_counter() - t0, 3)
        return out
    entry, _ = snapshot.upload(store, remote)
    base_blobs = entry.pop("blobs")
    # this device's ops not pushed yet are folded too: the blobs their beads name go up first
    own = store.log.replica
    remote.push_blobs(store.log.ops_of(own, int(remote.heads().get(own, 0))))
    snap_vv = {r: int(n) for r, n in entry["vv"].items()}
    last = {r: [op["hlc"], op["kind"]] for r, n in snap_vv.items() if (op := store.log.get_op(r, n))}
    prev: list[str] = []

    def swap(cur: dict | None) -> dict:
        cur = cur or {}
        _covers(snap_vv, floor_of(cur), "a compaction another device made meanwhile")
        prev[:] = [cur["base"]] if cur.get("base") else []
        return {"format": FORMAT, "base": entry["name"], "floor": dict(sorted(snap_vv.items())),
                "vv": dict(sorted(snap_vv.items())), "last": last, "at": entry["created"],
                "by": store.log.replica, "generation": int(cur.get("generation", 0)) + 1}

    try:
        remote.cas(COMPACT, swap)
    except CompactError:
        if entry["name"] not in prev:
            _drop_snapshot(remote, entry["name"])
        raise
    out["snapshots_deleted"] = snapshot.register(remote, entry, keep=1)
    out.update(compacted=True, base=entry["name"], floor=snap_vv, ops=entry["ops"], bytes=entry["bytes"])
    for replica, segs in _segments(remote, snap_vv).items():  # listed again: after the commit
        for seg in segs:
            remote.delete(seg.key)
            out["segments_deleted"] += 1
    out["snapshots_deleted"] += _drop_others(remote, entry["name"], prev, blob_grace_s)
    out["blobs_deleted"] = _drop_blobs(store, remote, snap_vv, base_blobs, blob_grace_s)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def _covers(vv: dict[str, int], floor: dict[str, int], what: str) -> None:
    behind = {r: n for r, n in floor.items() if int(vv.get(r, 0)) < n}
    if behind:
        r, n = sorted(behind.items())[0]
        raise CompactError(f"this device holds ops of replica {r} only up to {int(vv.get(r, 0))}, but {what} "
                           f"folded them up to {n}",
                           hint="run `bm sync now` first (it fetches them), then compact again")


def _segments(remote: Any, upto: dict[str, int]) -> dict[str, list]:
    """Per replica, the segments whose every op is at or below ``upto`` (listed from the
    first seq: whatever an interrupted compaction left goes too)."""
    out: dict[str, list] = {}
    for replica in remote.replicas():
        top = int(upto.get(replica, 0))
        out[replica] = [s for s in remote.segments(replica, 1) if s.last <= top] if top else []
    return out


def _drop_snapshot(remote: Any, name: str) -> None:
    try:
        doc, _ = remote.read_doc(name)
        for part in (doc or {}).get("parts", []):
            remote.delete(part["name"])
        remote.delete(name)
    except BMError:
        pass  # best effort: the next compaction lists what is left


def _drop_others(remote: Any, base: str, prev: list[str], grace_s: float) -> int:
    """Snapshots other than the base (older states may hold what was forgotten since): the
    previous base, and what no index names (an upload cut short) once older than the grace
    (a snapshot under way is not in the index yet).  ``register`` dropped the indexed ones."""
    gone = 0
    for name in prev:
        if name != base and record(remote).get("base") != name:  # (another device's, meanwhile)
            _drop_snapshot(remote, name)
            gone += 1
    keep = {s["name"] for s in snapshot.snapshots(remote)} | {base, record(remote).get("base")}
    oldest = _server_now(remote) - grace_s
    stems = set()
    for item in remote.list_objects("snapshots/"):
        rel = remote.rel_of(item["Key"])
        stem = rel.split(".snap", 1)[0] + ".snap"
        if ".snap" not in rel or stem in keep or not _older(item, oldest):
            continue
        remote.delete(rel)
        stems.add(stem)
    return gone + len(stems)


def _server_now(remote: Any) -> float:
    """The server's time in seconds (this clock corrected by the last answer's Date)."""
    from brandmind.clock import now_millis

    return (now_millis() - (remote.clock_offset_ms() or 0)) / 1000


def _older(item: dict, when: float) -> bool:
    modified = item.get("LastModified")
    return modified is None or modified.timestamp() <= when


def _drop_blobs(store: Any, remote: Any, floor: dict[str, int], base_blobs: list[str], grace_s: float) -> int:
    """Blobs no live bead names: not the base's, not this store's now, not one in a segment
    left past the floor."""
    keep = {remote.blob_name(d) for d in base_blobs} | {remote.blob_name(b["blob"]) for b in store.log.blob_beads()}
    for replica in remote.replicas():
        for seg in remote.segments(replica, int(floor.get(replica, 0)) + 1):
            keep.update(remote.blob_name(d) for d in blob_digests(remote.read_segment(seg, replica)))
    oldest = _server_now(remote) - grace_s
    gone = 0
    for item in remote.list_objects("blobs/"):
        rel = remote.rel_of(item["Key"])
        if rel not in keep and _older(item, oldest):
            remote.delete(rel)
            gone += 1
    return gone


class BaseLog:
    """Compaction's base snapshot, downloaded into a temporary directory (under the store's
    data directory when there is one) and opened read-only: ``ops_of`` like the op log's."""

    def __init__(self, remote: Any, name: str | None, store: Any = None) -> None:
        from brandmind.oplog import OpLog

        self.name = name
        if not name:
            raise CompactError(f"remote {remote.name!r} records a compaction floor but no base snapshot",
                               hint="the remote is damaged; compact again from a synced device")
        parent = Path(store.paths.data_dir) if store is not None else None
        self.work = Path(tempfile.mkdtemp(prefix=".base-", dir=parent))
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.work), True)
        try:
            files = snapshot.fetch(remote, name, self.work)
            self.log = OpLog(files / "log.lmdb")
        except BaseException:
            self._cleanup()
            raise
        self._closer = weakref.finalize(self, self.log.close)

    def ops_of(self, replica: str, after: int, limit: int | None = None) -> list[dict]:
        return self.log.ops_of(replica, after, limit)

    def close(self) -> None:
        self._closer()
        self._cleanup()


def due(remote: Any, interval_s: int, now_ms: int | None = None) -> float:
    """Seconds until the next compaction is due by compact.json's ``at`` (0: now); the daemon
    asks before compacting, so devices share one compaction per interval."""
    from brandmind.clock import now_millis, parse_time

    if interval_s <= 0:
        return float("inf")
    at = record(remote).get("at")
    if not at:
        return 0.0
    now = now_millis() if now_ms is None else now_ms
    return max(0.0, (int(parse_time(at)) + interval_s * 1000 - now) / 1000)
