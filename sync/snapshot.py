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
                                          KEEP newest are kept, older ones deleted

``create(mem, remote)`` (``bm sync snapshot``): SQLite is copied first (online backup), then
LMDB (``env.copy``, compacted): the projection may lag the log, never lead it, and the
catch-up on the next open applies the difference.  Parts are written before the manifest,
the manifest before the index, so a reader never sees a half-written snapshot.

``bootstrap(mem, remote)`` (``bm sync now --bootstrap``, automatic when the store is empty):
picks the snapshot covering the most ops, downloads and verifies it, closes the store,
swaps the two files in (the device keeps its own replica id: the log's ``meta`` is
rewritten), reopens it, fetches the blobs its beads name, and re-embeds when this device
uses another model.  The normal sync then pulls the ops after the snapshot's version vector.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from brandmind.errors import BMError, UsageError
from brandmind.oplog import dumps, version_vector_in
from brandmind.ops import Kind

INDEX = "snapshots/index.json"
PART_BYTES = 32 << 20
KEEP = 2
FORMAT = 1


class SnapshotError(BMError):
    """A snapshot could not be made, read or installed."""


def vv_hash(vv: dict[str, int]) -> str:
    return hashlib.sha256(json.dumps(vv, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


# -- making one --------------------------------------------------------------------------------------
def _backup_sqlite(conn: Any, dest: Path) -> None:
    """A consistent, compact copy (VACUUM INTO: one read transaction), in which the full-text
    indexes are merged so the tokens of deleted (forgotten) rows are gone too (FTS5 keeps
    them in its segments until a merge), then vacuumed again: no free pages."""
    import apsw

    conn.execute("VACUUM INTO ?", (str(dest),))
    out = apsw.Connection(str(dest))
    try:
        fts = [name for name, sql in out.execute("SELECT name, sql FROM sqlite_schema WHERE type='table'")
               if sql and re.search(r"USING\s+fts5\s*\(", sql, re.IGNORECASE)]
        if fts:
            with out:
                for name in fts:
                    out.execute(f'INSERT INTO "{name}"("{name}") VALUES(\'optimize\')')
            out.execute("VACUUM")
    finally:
        out.close()


def _lmdb_open(path: Path) -> Any:
    import lmdb

    return lmdb.open(str(path), max_dbs=32, subdir=True, map_size=1 << 35, lock=True)


def _copy_vv(path: Path) -> dict[str, int]:
    env = _lmdb_open(path)
    try:
        sync = env.open_db(b"sync")
        with env.begin(db=sync) as txn:
            return version_vector_in(txn.cursor())
    finally:
        env.close()


def _drop_local(path: Path) -> None:
    """What is this device's own business, not state: the vector cache (the projection has
    the vectors; a device with another model embeds anew)."""
    env = _lmdb_open(path)
    try:
        vcache = env.open_db(b"vcache")
        with env.begin(write=True) as txn:
            txn.drop(vcache, delete=False)
    finally:
        env.close()


def create(mem: Any, remote: Any, *, part_bytes: int = PART_BYTES, keep: int = KEEP) -> dict:
    """Make a snapshot of this store's state on ``remote`` (an S3Remote); returns its entry."""
    t0 = time.perf_counter()
    data_dir = Path(mem.paths.data_dir)
    work = Path(tempfile.mkdtemp(prefix=".snapshot-", dir=data_dir))
    try:
        _backup_sqlite(mem.sql.conn, work / "memory.sqlite")
        (work / "full.lmdb").mkdir()
        mem.log.env.copy(str(work / "full.lmdb"), compact=True)
        _drop_local(work / "full.lmdb")
        (work / "log.lmdb").mkdir()
        env = _lmdb_open(work / "full.lmdb")
        try:
            env.copy(str(work / "log.lmdb"), compact=True)  # without the pages dropped above
        finally:
            env.close()
        shutil.rmtree(work / "full.lmdb")
        vv = _copy_vv(work / "log.lmdb")
        if not vv:
            raise UsageError("this store has no ops yet: nothing to snapshot",
                             hint="snapshots help new devices of a store with history; sync first")
        tar_path = work / "snap.tar"
        with tarfile.open(tar_path, "w") as tar:
            tar.add(work / "log.lmdb" / "data.mdb", arcname="log.lmdb/data.mdb")
            tar.add(work / "memory.sqlite", arcname="memory.sqlite")
        size = tar_path.stat().st_size
        name = f"snapshots/{mem.log.replica}-{vv_hash(vv)}.snap"
        n_parts = max(1, -(-size // part_bytes))

        def put_part(i: int) -> dict:
            with open(tar_path, "rb") as fh:
                fh.seek(i * part_bytes)
                chunk = fh.read(part_bytes)
            rel = f"{name}.{i}"
            body = remote.keyring.seal(rel, chunk)
            remote._put(rel, body)
            return {"name": rel, "sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)}

        parts = list(remote._map(put_part, list(range(n_parts))))
        entry = {"name": name, "replica": mem.log.replica, "vv": vv, "ops": sum(vv.values()),
                 "bytes": size, "model": mem.sql.model, "dim": mem.sql.dim,
                 "created": _iso_now()}
        manifest = {"format": FORMAT, **entry, "parts": parts}
        remote._put(name, remote.keyring.seal(name, dumps(manifest)))
        dropped: list[dict] = []

        def merge(doc: dict | None) -> dict:
            items = [s for s in (doc or {}).get("snapshots", []) if s.get("name") != name] + [entry]
            items.sort(key=lambda s: (s.get("ops", 0), s.get("created", "")))
            dropped[:] = items[:-keep] if keep > 0 else []
            return {"format": FORMAT, "snapshots": items[-keep:] if keep > 0 else items}

        remote._cas(INDEX, merge)
        for old in dropped:  # best effort: a reader that still holds the old index fails cleanly
            try:
                _delete_snapshot(remote, old["name"])
            except BMError:
                pass
        return {**entry, "parts": n_parts, "seconds": round(time.perf_counter() - t0, 3)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _delete_snapshot(remote: Any, name: str) -> None:
    doc, _ = remote._read_doc(name)
    for part in (doc or {}).get("parts", []):
        remote._call(f"delete {part['name']}", remote.client.delete_object, Key=remote.key(part["name"]))
    remote._call(f"delete {name}", remote.client.delete_object, Key=remote.key(name))


def snapshots(remote: Any) -> list[dict]:
    doc, _ = remote._read_doc(INDEX)
    return list((doc or {}).get("snapshots", []))


# -- starting from one ---------------------------------------------------------------------------------
def _iso_now() -> str:
    from brandmind.clock import iso, now_millis

    return iso(now_millis())


def _is_empty(mem: Any) -> bool:
    return mem.log.count("ops") == 0


def bootstrap(mem: Any, remote: Any, *, forced: bool = False) -> dict | None:
    """Install the remote's best snapshot into this EMPTY store (``mem`` is reopened in
    place).  Returns what was installed, or None when there is no snapshot (then the normal
    sync replays every op) or, unless ``forced``, when the store is not empty."""
    if not _is_empty(mem):
        if forced:
            raise UsageError("--bootstrap starts an empty store from a snapshot; this store has ops already",
                             hint="run `bm sync now` without --bootstrap (it pulls only what is missing)")
        return None
    items = snapshots(remote)
    if not items:
        return None
    best = max(items, key=lambda s: (s.get("ops", 0), s.get("created", "")))
    t0 = time.perf_counter()
    manifest, _ = remote._read_doc(best["name"])
    if manifest is None or manifest.get("format") != FORMAT:
        raise SnapshotError(f"snapshot {remote.where(best['name'])} is missing or of an unknown format",
                            hint="sync without it: `bm sync now` replays every op")
    data_dir = Path(mem.paths.data_dir)
    work = Path(tempfile.mkdtemp(prefix=".bootstrap-", dir=data_dir))
    try:
        def get_part(part: dict) -> bytes:
            got = remote._get(part["name"])
            if got is None or hashlib.sha256(got[0]).hexdigest() != part["sha256"]:
                raise SnapshotError(f"part {remote.where(part['name'])} of the snapshot is missing or changed",
                                    hint="make a new one on a synced device (`bm sync snapshot`), "
                                         "or `bm sync now` without --bootstrap")
            return remote.keyring.open(part["name"], got[0], where=remote.where(part["name"]))

        tar_path = work / "snap.tar"
        with open(tar_path, "wb") as fh:
            for chunk in remote._map(get_part, manifest["parts"]):
                fh.write(chunk)
        new = work / "new"
        with tarfile.open(tar_path) as tar:
            names = set(tar.getnames()) - {"log.lmdb"}
            if names != {"log.lmdb/data.mdb", "memory.sqlite"}:
                raise SnapshotError(f"snapshot {best['name']} holds unexpected files: {sorted(names)}",
                                    hint="sync without it: `bm sync now` replays every op")
            tar.extractall(new, filter="data")
        tar_path.unlink()
        return _install(mem, remote, new, work, manifest, t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _install(mem: Any, remote: Any, new: Path, work: Path, manifest: dict, t0: float) -> dict:
    own = mem.log.replica
    hlc_raw = None
    with mem.log.read() as txn:
        hlc_raw = txn.get(b"hlc", db=mem.log.db["meta"])
    # the device keeps its own identity: rewrite the copied log's meta
    env = _lmdb_open(new / "log.lmdb")
    try:
        meta = env.open_db(b"meta")
        sync = env.open_db(b"sync")
        with env.begin(write=True) as txn:
            txn.put(b"replica", own.encode(), db=meta)
            txn.put(b"next_seq", (1).to_bytes(8, "big"), db=meta)
            if txn.get(b"vv\0" + own.encode(), db=sync) is not None:
                raise SnapshotError("the snapshot already holds this device's replica id",
                                    hint="run `bm sync now` without --bootstrap")
            if hlc_raw is not None and txn.get(b"hlc", db=meta) is None:
                txn.put(b"hlc", hlc_raw, db=meta)
    finally:
        env.close()
    paths = mem.paths
    mem.close()
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
        mem.store.reopen()
        raise
    mem.store.reopen(check_model=False)
    reembedded = 0
    if mem.sql.model != mem.embedder_name or mem.sql.dim != int(mem.embedder.dim):
        reembedded = mem.admin.reindex()["memories"]
    _fetch_blobs(mem, remote)
    return {"snapshot": manifest["name"], "ops": manifest["ops"], "version_vector": manifest["vv"],
            "bytes": manifest["bytes"], "reembedded": reembedded,
            "seconds": round(time.perf_counter() - t0, 3)}


def _fetch_blobs(mem: Any, remote: Any) -> None:
    beads = []
    with mem.log.read() as txn:
        for _, raw in txn.cursor(db=mem.log.db["beads"]):
            if b'"blob"' in raw:
                bead = json.loads(raw)
                if bead.get("blob"):
                    beads.append({"kind": Kind.BEAD_ADD, "payload": {"bead": bead}})
    remote._pull_blobs(beads)
