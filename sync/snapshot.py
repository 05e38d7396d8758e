"""Snapshots on an S3 remote: a new device starts from one instead of replaying every op.

A snapshot is the store's *state*, not an export: a consistent copy of the op log (LMDB:
every replica's ops, the version vector, the forget markers, the beads) and of its SQLite
projection (memories, vectors, keywords, graph, blocks with their CRDT state, pending ops),
so the device that installs it merges later ops exactly as if it had replayed them (an
export would lose the CRDT state, the HLCs of LWW registers and the tombstones).

Layout under ``<prefix>/snapshots/`` (everything encrypted, see crypto.py)::

    <maker replica>-<vv hash>.snap        manifest: version vector, model, parts (+ SHA-256)
    <maker replica>-<vv hash>.snap.<i>    the parts of a tar of log.lmdb + memory.sqlite
    index.json                            the snapshots, newest last (If-Match CAS); the
                                          KEEP newest are kept, older ones deleted (never
                                          compaction's base: compact.py)

``create(store, remote)`` (``bm sync snapshot``): SQLite is copied first (online backup), then
LMDB (``env.copy``, compacted): the projection may lag the log, never lead it, and the
catch-up on the next open applies the difference.  Parts are written before the manifest,
the manifest before the index, so a reader never sees a half-written snapshot.

``bootstrap(store, remote)`` (``bm sync now --bootstrap``, automatic when the store is empty;
whether to is decided in one place, ``bootstrap.py``, for the CLI and the daemon):
picks the snapshot covering the most ops, downloads and verifies it, closes the store,
swaps the two files in (the device keeps its own replica id: the log's ``meta`` is
rewritten), reopens it, fetches the blobs its beads name, and re-embeds when this device
uses another model.  The normal sync then pulls the ops after the snapshot's version vector.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from brandmind.errors import BMError, UsageError
from brandmind.oplog import dumps
from brandmind.ops import Kind
from brandmind.storage.snapshot import compact_copy

from .handle import store_of

INDEX = "snapshots/index.json"
COMPACT = "compact.json"       # compaction's record (compact.py): its base is never pruned here
PART_BYTES = 32 << 20
KEEP = 2
FORMAT = 1


class SnapshotError(BMError):
    """A snapshot could not be made, read or installed."""


def vv_hash(vv: dict[str, int]) -> str:
    return hashlib.sha256(json.dumps(vv, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _iso_now() -> str:
    from brandmind.clock import iso, now_millis

    return iso(now_millis())


# -- making one --------------------------------------------------------------------------------------
def create(store: Any, remote: Any, *, part_bytes: int = PART_BYTES, keep: int = KEEP) -> dict:
    """Make a snapshot of this store's state on ``remote`` (an ObjectRemote: S3); returns its
    entry.  ``store``: a StoreHandle (a Memory gives its ``.store``)."""
    t0 = time.perf_counter()
    entry, parts = upload(store, remote, part_bytes=part_bytes)
    entry.pop("blobs")
    register(remote, entry, keep)
    return {**entry, "parts": parts, "seconds": round(time.perf_counter() - t0, 3)}


def upload(store: Any, remote: Any, *, part_bytes: int = PART_BYTES) -> tuple[dict, int]:
    """Write a snapshot's parts, then its manifest, but not into the index (``register``):
    compaction (compact.py) names it its base first.  Returns (entry, number of parts);
    ``entry["blobs"]`` (not stored in the index) lists the blobs the snapshot's beads name."""
    store = store_of(store)
    work = Path(tempfile.mkdtemp(prefix=".snapshot-", dir=Path(store.paths.data_dir)))
    try:
        tar_path, vv = _pack(store, work)
        size = tar_path.stat().st_size
        name = f"snapshots/{store.log.replica}-{vv_hash(vv)}.snap"
        parts = _upload_parts(remote, tar_path, name, part_bytes)
        entry = {"name": name, "replica": store.log.replica, "vv": vv, "ops": sum(vv.values()),
                 "bytes": size, "model": store.sql.model, "dim": store.sql.dim, "created": _iso_now()}
        manifest = {"format": FORMAT, **entry, "parts": parts}
        remote.put(name, remote.keyring.seal(name, dumps(manifest)))
        return {**entry, "blobs": _blob_digests(work / "log.lmdb")}, len(parts)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _pack(store: Any, work: Path) -> tuple[Path, dict[str, int]]:
    """SQLite first (online backup), then LMDB: the projection may lag the log, never lead
    it.  Returns the tar of both and the version vector of the copied log."""
    compact_copy(store.sql, work / "memory.sqlite")
    vv = store.log.snapshot_copy(work / "log.lmdb")
    if not vv:
        raise UsageError("this store has no ops yet: nothing to snapshot",
                         hint="snapshots help new devices of a store with history; sync first")
    tar_path = work / "snap.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(work / "log.lmdb" / "data.mdb", arcname="log.lmdb/data.mdb")
        tar.add(work / "memory.sqlite", arcname="memory.sqlite")
    return tar_path, vv


def _blob_digests(log_dir: Path) -> list[str]:
    from brandmind.oplog import OpLog

    log = OpLog(log_dir)
    try:
        return [b["blob"] for b in log.blob_beads()]
    finally:
        log.close()


def _upload_parts(remote: Any, tar_path: Path, name: str, part_bytes: int) -> list[dict]:
    n_parts = max(1, -(-tar_path.stat().st_size // part_bytes))

    def put_part(i: int) -> dict:
        with open(tar_path, "rb") as fh:
            fh.seek(i * part_bytes)
            chunk = fh.read(part_bytes)
        rel = f"{name}.{i}"
        body = remote.keyring.seal(rel, chunk)
        remote.put(rel, body)
        return {"name": rel, "sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)}

    return list(remote.map(put_part, list(range(n_parts))))


def register(remote: Any, entry: dict, keep: int = KEEP) -> int:
    """Add ``entry`` to the index (CAS), keeping the ``keep`` newest; delete the others,
    except compaction's base (compact.py: the ops its segments no longer hold are in it)."""
    dropped: list[dict] = []

    def merge(doc: dict | None) -> dict:
        items = [s for s in (doc or {}).get("snapshots", []) if s.get("name") != entry["name"]] + [entry]
        items.sort(key=lambda s: (s.get("ops", 0), s.get("created", "")))
        dropped[:] = items[:-keep] if keep > 0 else []
        return {"format": FORMAT, "snapshots": items[-keep:] if keep > 0 else items}

    remote.cas(INDEX, merge)
    if not dropped:
        return 0
    # read after the index changed: a snapshot becomes a base before it enters the index
    base, _ = remote.read_doc(COMPACT)
    gone = 0
    for old in dropped:  # best effort: a reader that still holds the old index fails cleanly
        if old["name"] == (base or {}).get("base"):
            continue
        try:
            _delete_snapshot(remote, old["name"])
            gone += 1
        except BMError:
            pass
    return gone


def _delete_snapshot(remote: Any, name: str) -> None:
    doc, _ = remote.read_doc(name)
    for part in (doc or {}).get("parts", []):
        remote.delete(part["name"])
    remote.delete(name)


def snapshots(remote: Any) -> list[dict]:
    doc, _ = remote.read_doc(INDEX)
    return list((doc or {}).get("snapshots", []))


# -- starting from one ---------------------------------------------------------------------------------
def is_empty(store: Any) -> bool:
    """No op at all in the log: the store a snapshot may be installed into."""
    return store_of(store).log.count("ops") == 0


def bootstrap(store: Any, remote: Any, *, forced: bool = False) -> dict | None:
    """Install the remote's best snapshot into this EMPTY store (reopened in place).
    Returns what was installed, or None when there is no snapshot (then the normal sync
    replays every op) or, unless ``forced``, when the store is not empty.  A snapshot made
    with another embedding model than this device's is re-embedded (``Admin.reindex``).
    ``store``: a StoreHandle (a Memory gives its ``.store``)."""
    store = store_of(store)
    if not is_empty(store):
        if forced:
            raise UsageError("--bootstrap starts an empty store from a snapshot; this store has ops already",
                             hint="run `bm sync now` without --bootstrap (it pulls only what is missing)")
        return None
    best = _best(remote)
    if best is None:
        return None
    t0 = time.perf_counter()
    manifest, _ = remote.read_doc(best["name"])
    if manifest is None or manifest.get("format") != FORMAT:
        raise SnapshotError(f"snapshot {remote.where(best['name'])} is missing or of an unknown format",
                            hint="sync without it: `bm sync now` replays every op")
    work = Path(tempfile.mkdtemp(prefix=".bootstrap-", dir=Path(store.paths.data_dir)))
    try:
        new = _download(remote, best["name"], manifest, work)
        return _install(store, remote, new, work, manifest, t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _best(remote: Any) -> dict | None:
    """The snapshot to start from: the one covering the most ops, but compaction's base
    (compact.py) unless another covers all it does: ops older than the base may be nowhere
    else, and a device starting from the base reads none of it twice."""
    items = snapshots(remote)
    best = max(items, key=lambda s: (s.get("ops", 0), s.get("created", ""))) if items else None
    doc, _ = remote.read_doc(COMPACT)
    if doc and doc.get("base"):
        base_vv = {r: int(n) for r, n in (doc.get("vv") or {}).items()}
        vv = (best or {}).get("vv") or {}
        if best is None or any(int(vv.get(r, 0)) < n for r, n in base_vv.items()):
            return {"name": doc["base"], "vv": base_vv}
    return best


def fetch(remote: Any, name: str, work: Path) -> Path:
    """Download and verify snapshot ``name`` into the directory ``work``; returns the
    directory holding its ``log.lmdb`` and ``memory.sqlite`` (compaction's base is read so)."""
    manifest, _ = remote.read_doc(name)
    if manifest is None or manifest.get("format") != FORMAT:
        raise SnapshotError(f"snapshot {remote.where(name)} is missing or of an unknown format",
                            hint="sync again: a newer compaction may have replaced it")
    return _download(remote, name, manifest, work)


def _download(remote: Any, name: str, manifest: dict, work: Path) -> Path:
    """Fetch, verify and unpack the snapshot's parts; returns the directory of its files."""
    def get_part(part: dict) -> bytes:
        got = remote.get(part["name"])
        if got is None or hashlib.sha256(got[0]).hexdigest() != part["sha256"]:
            raise SnapshotError(f"part {remote.where(part['name'])} of the snapshot is missing or changed",
                                hint="make a new one on a synced device (`bm sync snapshot`), "
                                     "or `bm sync now` without --bootstrap")
        return remote.keyring.open(part["name"], got[0], where=remote.where(part["name"]))

    tar_path = work / "snap.tar"
    with open(tar_path, "wb") as fh:
        for chunk in remote.map(get_part, manifest["parts"]):
            fh.write(chunk)
    new = work / "new"
    with tarfile.open(tar_path) as tar:
        names = set(tar.getnames()) - {"log.lmdb"}
        if names != {"log.lmdb/data.mdb", "memory.sqlite"}:
            raise SnapshotError(f"snapshot {name} holds unexpected files: {sorted(names)}",
                                hint="sync without it: `bm sync now` replays every op")
        tar.extractall(new, filter="data")
    tar_path.unlink()
    return new


def _install(store: Any, remote: Any, new: Path, work: Path, manifest: dict, t0: float) -> dict:
    # the device keeps its own identity: rewrite the copied log's meta
    if not store.log.adopt_copy(new / "log.lmdb"):
        raise SnapshotError("the snapshot already holds this device's replica id",
                            hint="run `bm sync now` without --bootstrap")
    _swap_files(store, new, work)
    reembedded = 0
    if store.sql.model != store.embedder_name or store.sql.dim != int(store.embedder.dim):
        from brandmind.admin import Admin

        reembedded = Admin(store).reindex()["memories"]
    remote.pull_blobs([{"kind": Kind.BEAD_ADD, "payload": {"bead": bead}} for bead in store.log.blob_beads()])
    return {"snapshot": manifest["name"], "ops": manifest["ops"], "version_vector": manifest["vv"],
            "bytes": manifest["bytes"], "reembedded": reembedded,
            "seconds": round(time.perf_counter() - t0, 3)}


def _swap_files(store: Any, new: Path, work: Path) -> None:
    """Close the store, move its files aside for the snapshot's, reopen it (on a failure the
    empty store is put back as it was)."""
    paths = store.paths
    store.close()
    old = work / "old"
    old.mkdir()
    moved: list[tuple[Path, Path]] = []
    try:
        for p in [paths.lmdb_dir, paths.sqlite_file, *(Path(str(paths.sqlite_file) + s) for s in ("-wal", "-shm"))]:
            if p.exists():
                os.replace(p, old / p.name)
                moved.append((old / p.name, p))
        os.replace(new / "log.lmdb", paths.lmdb_dir)
        os.replace(new / "memory.sqlite", paths.sqlite_file)
    except BaseException:
        for src, dst in moved:  # put the empty store back as it was
            if dst.exists() and dst.is_dir():
                shutil.rmtree(dst)
            elif dst.exists():
                dst.unlink()
            os.replace(src, dst)
        store.reopen()
        raise
    store.reopen(check_model=False)
