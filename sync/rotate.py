"""Key rotation (``bm sync key rotate``): everything an S3 remote keeps is re-sealed under a
new store key, on this device (the server only ever sees sealed bytes, crypto.py).

Order: the shared documents first (``heads.json``, ``compact.json``, the snapshot index), so
a device holding only the old key stops at its next round (it cannot read ``heads.json``:
one ``Error:`` line naming ``bm sync key import``); then every other object.  Segments and
documents are rewritten in place with ``If-Match`` (a concurrent change is re-read, never
overwritten); a snapshot's parts before its manifest (which names their new hashes); a blob
gets a new name too (blob names are a keyed hash: crypto.py), written before the old one is
deleted.  The listing is then walked again until no object under another key is left (a
device that had not yet seen the new ``heads.json`` may have pushed a segment meanwhile);
compaction and later rotations re-seal any that still slips through.

The devices that import the new key (``bm sync key export`` here, ``bm sync key import``
there) keep syncing; their older keys stay in their keyrings, so nothing becomes unreadable
to them half-way.
"""
from __future__ import annotations

import hashlib
from typing import Any

from brandmind.crypto import header_key_id

from .handle import store_of
from .s3client import CAS_TRIES, Precondition
from .s3format import COMPACT, HEADS
from .snapshot import INDEX

SWEEPS = 4


def rotate(store: Any, remote: Any) -> dict:
    """Make a new key this store's and re-seal the remote under it; returns ``{"key_id",
    "replaces", "fingerprint", "resealed", "renamed_blobs", "snapshots", "sweeps"}``."""
    store_of(store)
    ring = remote.keyring
    remote.heads()  # this device reads the remote with its key: else the error, before any change
    old = ring.active().key_id
    key = ring.rotate()
    out = {"key_id": key.key_id, "replaces": old, "fingerprint": key.fingerprint, **reseal(remote)}
    return out


def rotate_all(store: Any, remotes: list) -> list[dict]:
    """Rotate the store's key over its S3 remotes (the first makes the key, the others are
    re-sealed under it) and its workspace on S3 (``brandmind.workspace_s3``, sealed with the same
    key); one entry per remote, then ``{"remote": None, ...}`` for the workspace when it is on S3."""
    from brandmind.crypto import Keyring
    from brandmind.workspace_s3 import reseal_workspaces, s3_workspace

    out = [{"remote": r.name, **rotate(store, r)} for r in remotes[:1]]
    if not out:
        key = Keyring(store_of(store).paths.data_dir).rotate()
        out = [{"remote": None, "key_id": key.key_id, "resealed": 0, "renamed_blobs": 0}]
    for r in remotes[1:]:
        out.append({"remote": r.name, "key_id": out[0]["key_id"], **reseal(r)})
    if s3_workspace(store):
        files = reseal_workspaces(store)
        if out[0]["remote"] is None:
            out[0]["resealed"] = files
        else:
            out.append({"remote": None, "key_id": out[0]["key_id"], "resealed": files, "renamed_blobs": 0})
    return out


def reseal(remote: Any) -> dict:
    """Re-seal every object of the remote not under the keyring's active key (the module
    docstring); safe to run again after an interruption."""
    kid = remote.keyring.active().key_id
    stats = {"resealed": 0, "renamed_blobs": 0, "snapshots": 0, "sweeps": 0}
    seen: dict[str, str] = {}  # rel -> the etag it had when found under the active key
    for rel in (HEADS, COMPACT, INDEX):
        _reseal(remote, rel, kid, stats, seen)
    for _ in range(SWEEPS):
        stats["sweeps"] += 1
        todo = [(remote.rel_of(i["Key"]), i.get("ETag", "")) for i in remote.list_objects("")]
        todo = [(rel, etag) for rel, etag in todo if seen.get(rel) != etag and not rel.startswith("probe/")]
        if not todo:
            break
        manifests = {rel for rel, _ in todo if rel.startswith("snapshots/") and rel.endswith(".snap")}
        for rel, _ in todo:
            if rel in manifests:
                _reseal_snapshot(remote, rel, kid, stats, seen)
            elif rel.startswith("blobs/"):
                _reseal_blob(remote, rel, kid, stats, seen)
            elif ".snap." in rel and rel.split(".snap.", 1)[0] + ".snap" in manifests:
                continue  # with its manifest
            else:
                _reseal(remote, rel, kid, stats, seen)
    return stats


def _reseal(remote: Any, rel: str, kid: str, stats: dict, seen: dict) -> bytes | None:
    """Re-seal one object in place (If-Match: a concurrent write wins, and is re-read);
    returns its sealed body under the active key (None: gone)."""
    for _ in range(CAS_TRIES):
        got = remote.get(rel)
        if got is None:
            return None
        body, etag = got
        if header_key_id(body, remote.where(rel)) == kid:
            seen[rel] = etag
            return body
        new = remote.keyring.seal(rel, remote.keyring.open(rel, body, where=remote.where(rel)))
        try:
            seen[rel] = remote.put(rel, new, IfMatch=etag)
        except Precondition:
            continue
        stats["resealed"] += 1
        return new
    raise Precondition(412)


def _reseal_snapshot(remote: Any, name: str, kid: str, stats: dict, seen: dict) -> None:
    """A snapshot's parts, then its manifest with their new hashes."""
    manifest, etag = remote.read_doc(name)
    if manifest is None:
        return
    changed = False
    for part in manifest.get("parts", []):
        body = _reseal(remote, part["name"], kid, stats, seen)
        if body is not None and hashlib.sha256(body).hexdigest() != part["sha256"]:
            part.update(sha256=hashlib.sha256(body).hexdigest(), bytes=len(body))
            changed = True
    got = remote.get(name)
    if got is None:
        return
    if changed or header_key_id(got[0], remote.where(name)) != kid:
        from brandmind.oplog import dumps

        try:
            seen[name] = remote.put(name, remote.keyring.seal(name, dumps(manifest)), IfMatch=got[1])
        except Precondition:
            return  # rewritten meanwhile: the next sweep looks again
        stats["resealed"] += 1
        stats["snapshots"] += 1
    else:
        seen[name] = got[1]


def _reseal_blob(remote: Any, rel: str, kid: str, stats: dict, seen: dict) -> None:
    """A blob under its name for the active key (a keyed hash of its content)."""
    got = remote.get(rel)
    if got is None:
        return
    if header_key_id(got[0], remote.where(rel)) == kid:
        seen[rel] = got[1]
        return
    data = remote.keyring.open(rel, got[0], where=remote.where(rel))
    new_rel = remote.blob_name(hashlib.sha256(data).hexdigest())
    try:
        seen[new_rel] = remote.put(new_rel, remote.keyring.seal(new_rel, data), IfNoneMatch="*")
    except Precondition:
        pass  # content-addressed: already there
    if new_rel != rel:
        remote.delete(rel)
    stats["renamed_blobs"] += 1
