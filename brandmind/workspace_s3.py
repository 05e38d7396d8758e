"""The workspace on S3: each user's files as encrypted objects under ``s3://BUCKET/PREFIX/{tenant}/``.

Chosen in config: ``bm config set workspace s3://my-bucket/bm`` (``local``, the default, keeps
files in ``<data_dir>/workspace``), with ``workspace_endpoint_url`` for an S3-compatible server,
``workspace_region`` and ``workspace_profile`` (a profile of ~/.aws/config); credentials come from
the usual boto3 chain (environment, profile, SSO, instance role), never from config.toml.
:func:`backend_for` gives each user this backend or :class:`LocalBackend`; the tenant is the
user's directory name (:func:`dir_name`), so a bucket policy can grant each tenant its prefix.

Layout under ``PREFIX/{tenant}/``::

    manifest     the listing: each file's path, object id, size, mtime and sha256, and the
                 folders (one JSON document, sealed)
    o/<32 hex>   one version of one file's content (sealed); the id is 128 random bits, new
                 for every write

No object name comes from a path or from content: the server sees the tenant, how many
objects there are, their sizes (compressed, encrypted) and times; not the file names, not the
folders, not which writes were edits of one file.  Every body is sealed as sync seals its
objects (brandmind/crypto.py: AES-256-GCM-SIV under the store's sync key; the object's name
relative to PREFIX is associated data, so no object can pass for another, nor one tenant's
manifest for another's).  Every device that opens the workspace needs the store's key
(`bm sync key export` on one, `bm sync key import FILE` on the next); :func:`reseal_workspaces`
seals everything again under the active key after `bm sync key rotate`.  (Random ids rather
than a keyed MAC of each path: a MAC per path would still show which writes edit one file, and
a move would have to copy the content.)

Consistency: the manifest is the one source of truth, changed only by compare-and-swap (PUT
If-Match its ETag, If-None-Match * for the first; on 412/409 it is read again and the change
made again).  A write uploads a new object, swaps the manifest to name it, then deletes the old
object: readers see the old file or the new one, never half.  A crash can leave an object no
manifest names (:meth:`S3Backend.sweep`, run by ``bm fs index --full``, removes those older
than an hour; nothing but ``manifest`` and ``o/<32 hex>`` names is ever deleted, so a prefix
shared with other data loses none of it).  A move changes only the manifest (the content object
keeps its name), whole folders included.  An append reads the file, uploads old + new and swaps
only if the file is still the version it read (else starts again), so appends from several
devices all land.  This process trusts the manifest it has for a second after it last read or
wrote it; after that a conditional GET (304 when unchanged) checks it.  A PUT whose answer was
lost is recognised on the retry: the manifest's ETag is the MD5 of the body this process sent.

Path rules are the workspace's (:func:`normalize`: ``..`` above the root, NUL, the four
areas; a backend call with a path that is not normalised is refused); S3 has no symlinks.  The
four areas always exist.  Recall indexes these files as it indexes the local directory
(workspace_index.py; sizes, mtimes and sha256 come from the manifest).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar
from urllib.parse import unquote

from .crypto import Keyring, header_key_id
from .errors import BMError, InvalidInput, NotFound
from .workspace_bucket import Bucket, Changed, Location, NotModified, WorkspaceStorageError, WorkspaceUnavailable
from .workspace_files import AREAS, Backend, Entry, LocalBackend, Stat, dir_name, normalize, workspace_root

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

MANIFEST = "manifest"
OBJECTS = "o/"
FORMAT = 1
CAS_TRIES = 12
FRESH_S = 1.0
SWEEP_GRACE_S = 3600
_AREA_DIRS = frozenset("/" + a for a in AREAS)
_ANY = object()
_OURS = re.compile(r"manifest|o/[0-9a-f]{32}")
T = TypeVar("T")


class _Moved(Exception):
    """An append found its file replaced between its read and its swap."""


def _parents(path: str) -> list[str]:
    """The folders above ``path`` that are neither the root nor an area, top first."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(2, len(parts))]


def _under(path: str, base: str) -> bool:
    return base == "/" or path == base or path.startswith(base + "/")


class S3Backend:
    """One tenant's workspace on S3 (see the module docstring); implements :class:`Backend`."""

    def __init__(self, loc: Location, tenant: str, keyring: Keyring, *, bucket: Bucket | None = None) -> None:
        self.loc = loc
        self.tenant = tenant
        self.keyring = keyring
        self.bucket = bucket or Bucket(loc)
        self._doc: dict | None = None
        self._etag: str | None = None
        self._seen = 0.0

    def rel(self, name: str) -> str:
        return f"{self.tenant}/{name}"

    @property
    def url(self) -> str:
        return self.loc.url(self.tenant + "/")

    @staticmethod
    def _path(path: str) -> str:
        norm = normalize(path)
        if norm != path:
            raise InvalidInput(f"workspace path {path!r} is not normalised (it is {norm})", hint="use " + norm)
        return norm

    # -- the manifest ---------------------------------------------------------------------------
    def _load(self, *, fresh: bool) -> tuple[dict, str | None]:
        if self._doc is not None and not fresh and time.monotonic() - self._seen < FRESH_S:
            return self._doc, self._etag
        name = self.rel(MANIFEST)
        try:
            got = self.bucket.get(name, **({"IfNoneMatch": self._etag} if self._doc is not None and self._etag else {}))
        except NotModified:
            self._seen = time.monotonic()
            return self._doc or {"files": {}, "dirs": {}}, self._etag
        doc: dict = {"files": {}, "dirs": {}}
        etag = None
        if got is not None:
            body, etag = got
            try:
                raw = json.loads(self.keyring.open(name, body, where=self.loc.url(name)))
                if raw.get("format") != FORMAT:
                    raise ValueError(f"format {raw.get('format')!r}")
                doc = {"files": {p: list(e) for p, e in raw["files"].items()}, "dirs": dict(raw["dirs"])}
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise WorkspaceStorageError(f"the workspace manifest {self.loc.url(name)} cannot be read ({exc})",
                                            hint="upgrade bm if another device wrote it with a newer one; "
                                                 "otherwise restore the object from a backup") from None
        self._doc, self._etag, self._seen = doc, etag, time.monotonic()
        return doc, etag

    def _update(self, change: Callable[[dict], T], *, force: bool = False) -> T:
        """Apply ``change`` (which edits a copy of the manifest and may raise) by compare-and-swap
        (``force``: write the manifest even when nothing changed, sealed anew)."""
        name = self.rel(MANIFEST)
        for attempt in range(CAS_TRIES):
            doc, etag = self._load(fresh=True)
            new = {"files": dict(doc["files"]), "dirs": dict(doc["dirs"])}
            result = change(new)
            if new == doc and not force:
                return result
            plain = json.dumps({"format": FORMAT, **new}, separators=(",", ":"), ensure_ascii=False).encode()
            body = self.keyring.seal(name, plain)
            try:
                got = self.bucket.put(name, body, **({"IfMatch": etag} if etag else {"IfNoneMatch": "*"}))
            except Changed:
                self._load(fresh=True)
                if self._etag and self._etag.strip('"') == hashlib.md5(body).hexdigest():
                    return result  # our PUT landed; only its answer was lost
                time.sleep(min(1.0, 0.02 * 2 ** attempt) * random.random())
                continue
            self._doc, self._etag, self._seen = new, got or None, time.monotonic()
            if not got:
                self._doc = None  # no ETag from the server: read it again next time
            return result
        raise WorkspaceUnavailable(f"the workspace manifest at {self.url} kept changing under {CAS_TRIES} attempts",
                                   hint="many writers at once; try again in a moment")

    @staticmethod
    def _is_dir(doc: dict, path: str) -> bool:
        return path == "/" or path in _AREA_DIRS or path in doc["dirs"]

    def _check_target(self, doc: dict, path: str) -> None:
        """``path`` can hold a file: it is no folder and no folder above it is a file."""
        if self._is_dir(doc, path):
            raise InvalidInput(f"{path} is a folder", hint="name a file, e.g. /notes/ideas.md")
        for parent in _parents(path):
            if parent in doc["files"]:
                raise InvalidInput(f"{path}: {parent} is a file, not a folder", hint="pick another path")

    # -- objects ----------------------------------------------------------------------------------
    def _read_object(self, path: str, entry: list) -> bytes | None:
        name = self.rel(OBJECTS + entry[0])
        got = self.bucket.get(name)
        if got is None:
            return None
        data = self.keyring.open(name, got[0], where=f"{self.loc.url(name)} ({path})")
        if hashlib.sha256(data).hexdigest() != entry[3]:
            raise WorkspaceStorageError(f"the content of {path} at {self.loc.url(name)} does not match its sha256",
                                        hint="the object was damaged; write the file again")
        return data

    def _drop(self, oids: list[str]) -> None:
        """Delete objects no longer named by the manifest (best effort: sweep() finds the rest)."""
        named = {e[0] for e in (self._doc or {"files": {}})["files"].values()}
        gone = [self.rel(OBJECTS + o) for o in oids if o and o not in named]
        if gone:
            try:
                self.bucket.delete(gone)
            except BMError:
                pass

    def _replace(self, path: str, data: bytes, expect: Any = _ANY) -> None:
        """Upload ``data`` as a new object, swap the manifest to it, drop the old one."""
        oid = os.urandom(16).hex()
        sha = hashlib.sha256(data).hexdigest()
        name = self.rel(OBJECTS + oid)
        self.bucket.put(name, self.keyring.seal(name, data))
        replaced: list[str] = []

        def change(doc: dict) -> None:
            cur = doc["files"].get(path)
            if cur and cur[0] == oid:
                return  # an earlier try's swap landed (its answer was lost)
            self._check_target(doc, path)
            if expect is not _ANY and (cur[0] if cur else None) != expect:
                raise _Moved()
            now = time.time_ns()
            for parent in _parents(path):
                doc["dirs"].setdefault(parent, now)
            doc["files"][path] = [oid, len(data), now, sha]
            replaced[:] = [cur[0]] if cur else []

        try:
            self._update(change)
        except WorkspaceUnavailable:
            raise  # the swap may have landed: the object stays (sweep() removes it if not)
        except BaseException:
            self._drop([oid])  # unless the manifest just read names it
            raise
        self._drop(replaced)

    # -- Backend ----------------------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        path = self._path(path)
        for fresh in (False, True):  # an object replaced since the manifest was read: read it again
            doc, _ = self._load(fresh=fresh)
            if self._is_dir(doc, path):
                raise InvalidInput(f"{path} is a folder", hint=f"list it with `bm fs ls {path}`")
            entry = doc["files"].get(path)
            if entry is None:
                raise NotFound(f"no file {path} in the workspace", hint="list files with `bm fs ls` or `bm fs find`")
            data = self._read_object(path, entry)
            if data is not None:
                return data
        raise WorkspaceStorageError(f"the content of {path} is missing from {self.url}",
                                    hint="the object was deleted behind bm's back; write the file again")

    def write_bytes(self, path: str, data: bytes) -> None:
        path = self._path(path)
        self._check_target(self._load(fresh=False)[0], path)  # refused before anything is uploaded
        self._replace(path, bytes(data))

    def append(self, path: str, data: bytes) -> None:
        path = self._path(path)
        for _ in range(CAS_TRIES):
            doc, _ = self._load(fresh=True)
            self._check_target(doc, path)
            entry = doc["files"].get(path)
            old = self._read_object(path, entry) if entry else b""
            if old is None:
                continue  # replaced in between: read the new version
            try:
                self._replace(path, old + bytes(data), expect=entry[0] if entry else None)
                return
            except _Moved:
                continue
        raise WorkspaceUnavailable(f"{path} kept changing under {CAS_TRIES} attempts to append to it",
                                   hint="many writers at once; try again in a moment")

    def delete(self, path: str, *, recursive: bool = False) -> None:
        path = self._path(path)

        def change(doc: dict) -> list[str]:
            files, dirs = doc["files"], doc["dirs"]
            if path in files:
                return [files.pop(path)[0]]
            if not self._is_dir(doc, path):
                raise NotFound(f"no file {path} in the workspace", hint="list files with `bm fs ls`")
            if not recursive:
                raise InvalidInput(f"{path} is a folder",
                                   hint=f"add -r to remove it and everything in it: bm fs rm -r {path}")
            gone = [files.pop(p)[0] for p in [p for p in files if _under(p, path)]]
            for d in [d for d in dirs if _under(d, path)]:
                del dirs[d]
            return gone

        self._drop(self._update(change))

    def move(self, src: str, dst: str) -> None:
        src, dst = self._path(src), self._path(dst)

        def change(doc: dict) -> list[str]:
            files, dirs = doc["files"], doc["dirs"]
            if src not in files and not self._is_dir(doc, src):
                raise NotFound(f"no file {src} in the workspace", hint="list files with `bm fs ls`")
            if src == dst:
                return []
            self._check_target(doc, dst)
            if src in files:
                replaced = files.pop(dst, None)
                files[dst] = files.pop(src)
            else:
                if src == "/" or src in _AREA_DIRS:
                    raise InvalidInput(f"{src} is a workspace area; it cannot move", hint="move what is inside it")
                if _under(dst, src) or dst in files:
                    raise InvalidInput(f"cannot move {src} to {dst}", hint="pick a destination outside it that does not exist")
                replaced = None
                for p in [p for p in files if _under(p, src)]:
                    files[dst + p[len(src):]] = files.pop(p)
                for d in [d for d in dirs if _under(d, src)]:
                    dirs[dst + d[len(src):]] = dirs.pop(d)
            now = time.time_ns()
            for parent in _parents(dst):
                dirs.setdefault(parent, now)
            return [replaced[0]] if replaced else []

        self._drop(self._update(change))

    def mkdir(self, path: str) -> None:
        path = self._path(path)
        if path == "/" or path in _AREA_DIRS or self._is_dir(self._load(fresh=False)[0], path):
            return  # the root and the four areas always exist: no request for them

        def change(doc: dict) -> None:
            for p in (*_parents(path), path):
                if p in doc["files"]:
                    raise InvalidInput(f"{path}: {p} is a file, not a folder", hint="move the file away first")
            now = time.time_ns()
            for p in (*_parents(path), path):
                doc["dirs"].setdefault(p, now)

        self._update(change)

    def stat(self, path: str, *, digest: bool = True) -> Stat | None:
        path = self._path(path)
        doc, _ = self._load(fresh=False)
        entry = doc["files"].get(path)
        if entry is not None:
            return Stat(entry[1], entry[2], entry[3] if digest else None, False)
        if self._is_dir(doc, path):
            return Stat(0, doc["dirs"].get(path, 0), None, True)
        return None

    def list(self, path: str, *, recursive: bool = False) -> list[Entry]:
        path = self._path(path)
        doc, _ = self._load(fresh=False)
        entry = doc["files"].get(path)
        if entry is not None:
            return [Entry(path, "file", entry[1], entry[2])]
        if not self._is_dir(doc, path):
            raise NotFound(f"nothing at {path} in the workspace", hint="list files with `bm fs ls`")
        children: dict[str, list[Entry]] = {}
        for d in _AREA_DIRS | set(doc["dirs"]):
            children.setdefault(d.rsplit("/", 1)[0] or "/", []).append(Entry(d, "dir", 0, doc["dirs"].get(d, 0)))
        for p, e in doc["files"].items():
            children.setdefault(p.rsplit("/", 1)[0] or "/", []).append(Entry(p, "file", e[1], e[2]))
        out: list[Entry] = []

        def walk(base: str) -> None:
            for e in sorted(children.get(base, []), key=lambda e: e.path.rsplit("/", 1)[1]):
                out.append(e)
                if recursive and e.kind == "dir":
                    walk(e.path)

        walk(path)
        return out

    # -- beyond the Backend protocol ------------------------------------------------------------
    def _ours(self, rel: str) -> bool:
        """A name this backend makes (its manifest, a content object): nothing else under the
        tenant is ever deleted (e.g. a sync remote's objects, should they share the prefix)."""
        return _OURS.fullmatch(rel.removeprefix(self.tenant + "/")) is not None

    def sweep(self, *, grace_s: float = SWEEP_GRACE_S) -> int:
        """Delete content objects no manifest names that are older than ``grace_s`` (left by
        a crash between an upload and its swap); returns how many."""
        doc, _ = self._load(fresh=True)
        named = {e[0] for e in doc["files"].values()}
        cutoff = datetime.now(timezone.utc).timestamp() - grace_s
        stray = [o["Key"] for o in self.bucket.list(self.rel(OBJECTS)) if self._ours(o["Key"])
                 and o["Key"].rsplit("/", 1)[1] not in named and o["LastModified"].timestamp() < cutoff]
        self.bucket.delete(stray)
        return len(stray)

    def reseal(self) -> int:
        """Seal again under the store's active key every object sealed under an older one (after
        `bm sync key rotate`, so devices holding only the new key read the workspace), the
        manifest last; returns how many objects were re-sealed.  Safe to run again."""
        active = self.keyring.active(create=False).key_id
        doc, _ = self._load(fresh=True)
        n = 0
        for entry in doc["files"].values():
            name = self.rel(OBJECTS + entry[0])
            got = self.bucket.get(name)
            if got is None or header_key_id(got[0], name) == active:
                continue
            data = self.keyring.open(name, got[0], where=self.loc.url(name))
            try:  # (If-Match: an object replaced meanwhile is not brought back)
                self.bucket.put(name, self.keyring.seal(name, data), IfMatch=got[1])
                n += 1
            except (Changed, KeyError):
                continue
        self._update(lambda doc: None, force=True)
        return n

    def destroy(self) -> int:
        """Delete every object of this tenant (`bm forget --wipe-user`); returns how many files it held."""
        doc, _ = self._load(fresh=True)
        self.bucket.delete([o["Key"] for o in self.bucket.list(self.tenant + "/") if self._ours(o["Key"])])
        self._doc, self._etag = None, None
        return len(doc["files"])


def backend_for(store: "Store", user: str) -> Backend:
    """The backend of a user's workspace: the one place that picks where files live (the
    local directory, or the S3 location of config ``workspace``)."""
    loc = Location.of(store.config)
    if loc is None:
        return LocalBackend(workspace_root(store.paths.data_dir, user))
    return S3Backend(loc, dir_name(user), Keyring(store.paths.data_dir))


def workspace_users(store: "Store") -> list[tuple[str, Backend]]:
    """(user, backend) of every user with a workspace where the store keeps them, by user."""
    loc = Location.of(store.config)
    if loc is not None:
        bucket = Bucket(loc)
        tenants = [p["Prefix"].rstrip("/") for p in bucket.list("", delimiter="/") if "Prefix" in p]
        keyring = Keyring(store.paths.data_dir)
        return sorted((unquote(t), S3Backend(loc, t, keyring, bucket=bucket)) for t in tenants if t)
    base = Path(store.paths.data_dir) / "workspace"
    if not base.is_dir():
        return []
    return sorted((unquote(d.name), LocalBackend(d)) for d in base.iterdir()
                  if not d.name.startswith(".") and d.is_dir() and not d.is_symlink())


def s3_workspace(store: "Store") -> bool:
    """Whether the store keeps its workspaces on S3 (``workspace = "s3://..."``)."""
    return Location.of(store.config) is not None


def reseal_workspaces(store: "Store") -> int:
    """Seal every user's workspace on S3 again under the active key (what `bm sync key rotate`
    should call after re-sealing the remote); returns how many objects; 0 for a local workspace."""
    return sum(b.reseal() for _, b in workspace_users(store) if isinstance(b, S3Backend))
