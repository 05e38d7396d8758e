"""The files of a workspace (brandmind/workspace.py): its paths and where they live.

Every path lives in one of four areas (``/.profile``, ``/notes``, ``/drafts``, ``/system``):
``/notes/a.md``, ``notes/a.md`` and ``/notes/./x/../a.md`` are the same file; ``..`` above
the root, a path outside the four areas (``/etc/passwd``), a NUL byte, and any path that
resolves (through a symlink) outside the workspace root are refused with an ``Error:``
line.  A host path inside the root (``$DATA/workspace/ann/notes/a.md``) is taken as the
workspace path it names.

Storage sits behind :class:`Backend` (read_bytes, write_bytes (atomic), append, delete,
move, list, stat with size, mtime and sha256, mkdir), so the agent code never sees where
files live.  :class:`LocalBackend` keeps one workspace per user in
``<data_dir>/workspace/<user>/`` (the user id with characters outside ``[A-Za-z0-9._@+-]``
and a leading dot %-escaped); ``S3Backend`` (workspace_s3.py, which also has ``backend_for``,
the choice between them) keeps it on S3.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat as stat_mod
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .errors import InvalidInput, NotFound

AREAS = (".profile", "notes", "drafts", "system")
INDEXED = {".profile": "fact", "notes": "concept"}   # area -> memory type of its chunks
TMP_PREFIX = ".bm-tmp-"
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@+")
_AREA_HINT = "paths start with /.profile, /notes, /drafts or /system, e.g. /notes/ideas.md"

# -- paths --------------------------------------------------------------------------------------
def dir_name(user: str) -> str:
    """The directory name of a user's workspace (reversible with urllib's unquote)."""
    out = "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
                  for c in user)
    return "%2E" + out[1:] if out.startswith(".") else out


def workspace_root(data_dir: Path, user: str) -> Path:
    return Path(data_dir) / "workspace" / dir_name(user)


def normalize(path: Any, *, root: Path | None = None) -> str:
    """A workspace path (``/notes/a.md``; ``/`` for the root): see the module doc."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str) or not path:
        raise InvalidInput(f"invalid workspace path {path!r}", hint=_AREA_HINT)
    if "\x00" in path:
        raise InvalidInput(f"path {path!r} contains a NUL byte", hint="remove the NUL character from the path")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"path {path!r} is not valid UTF-8", hint="use a UTF-8 path") from None
    original = path
    if root is not None and path.startswith(os.sep):
        for base in dict.fromkeys((str(root), os.path.realpath(root))):
            if path == base or path.startswith(base + os.sep):
                path = "/" + path[len(base):].lstrip("/")
                break
    parts: list[str] = []
    for comp in path.split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if not parts:
                raise InvalidInput(f"path {original!r} escapes the workspace ('..' above its root)",
                                   hint=_AREA_HINT)
            parts.pop()
            continue
        if len(comp.encode("utf-8")) > 255:
            raise InvalidInput(f"a name in path {original!r} is longer than 255 bytes", hint="use a shorter name")
        parts.append(comp)
    if parts and parts[0] not in AREAS:
        raise InvalidInput(f"path {original!r} is outside the workspace", hint=_AREA_HINT)
    return "/" + "/".join(parts)


def area(path: str) -> str | None:
    parts = path.strip("/").split("/")
    return parts[0] if parts and parts[0] else None


def indexed_type(path: str) -> str | None:
    """The memory type of a file's chunks, or None when its area is not indexed."""
    return INDEXED.get(area(path) or "")


def file_path(path: str, what: str = "path") -> str:
    """A path naming something inside an area (not the root, not an area itself)."""
    if path.count("/") < 2:
        raise InvalidInput(f"{what} {path} is a workspace folder, not a file",
                           hint="name a file inside it, e.g. /notes/ideas.md")
    return path


# -- backend ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    path: str          # workspace path
    kind: str          # file | dir | link-outside (a symlink resolving outside the root: never followed)
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Stat:
    size: int
    mtime_ns: int
    sha256: str | None  # None for a directory, or when not asked for
    is_dir: bool


class Backend(Protocol):
    """Where a workspace's files live.  Paths are normalised workspace paths (``/notes/a.md``)."""

    def read_bytes(self, path: str) -> bytes: ...
    def write_bytes(self, path: str, data: bytes) -> None: ...      # atomic: old or new, never half
    def append(self, path: str, data: bytes) -> None: ...
    def delete(self, path: str, *, recursive: bool = False) -> None: ...
    def move(self, src: str, dst: str) -> None: ...
    def list(self, path: str, *, recursive: bool = False) -> list[Entry]: ...
    def stat(self, path: str, *, digest: bool = True) -> Stat | None: ...   # None: nothing there
    def mkdir(self, path: str) -> None: ...


class LocalBackend:
    """A directory on the local disk; every path is checked to resolve inside it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _real_root(self) -> str:
        return os.path.realpath(self.root)

    def host(self, path: str) -> Path:
        """The host path of a workspace path, refusing any that resolves outside the root."""
        rel = path.strip("/")
        host = self.root / rel if rel else self.root
        real, root = os.path.realpath(host), self._real_root()
        if real != root and not real.startswith(root + os.sep):
            raise InvalidInput(f"path {path} resolves outside the workspace (through a symlink, to {real})",
                               hint="bm follows no symlink out of the workspace; remove or re-point the link")
        return host

    def read_bytes(self, path: str) -> bytes:
        host = self.host(path)
        if host.is_dir():
            raise InvalidInput(f"{path} is a folder", hint=f"list it with `bm fs ls {path}`")
        try:
            return host.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no file {path} in the workspace", hint="list files with `bm fs ls` or `bm fs find`") from None

    def _parent(self, path: str) -> Path:
        host = self.host(path)
        if host.is_dir():
            raise InvalidInput(f"{path} is a folder", hint="name a file, e.g. /notes/ideas.md")
        parent = host.parent
        if parent.exists() and not parent.is_dir():
            raise InvalidInput(f"{path}: {os.path.dirname(path)} is a file, not a folder", hint="pick another path")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise InvalidInput(f"{path}: a part of it is a file, not a folder", hint="pick another path") from None
        return host

    def write_bytes(self, path: str, data: bytes) -> None:
        host = self._parent(path)
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=host.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, host)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def append(self, path: str, data: bytes) -> None:
        host = self._parent(path)
        with open(host, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def delete(self, path: str, *, recursive: bool = False) -> None:
        host = self.host(path)
        if host.is_symlink() or not host.is_dir():
            try:
                host.unlink()
            except FileNotFoundError:
                raise NotFound(f"no file {path} in the workspace", hint="list files with `bm fs ls`") from None
            return
        if not recursive:
            raise InvalidInput(f"{path} is a folder", hint=f"add -r to remove it and everything in it: bm fs rm -r {path}")
        shutil.rmtree(host)

    def move(self, src: str, dst: str) -> None:
        s = self.host(src)
        if not s.exists() and not s.is_symlink():
            raise NotFound(f"no file {src} in the workspace", hint="list files with `bm fs ls`")
        os.replace(s, self._parent(dst))

    def mkdir(self, path: str) -> None:
        host = self.host(path)
        if host.exists() and not host.is_dir():
            raise InvalidInput(f"{path} is a file, not a folder", hint="move the file away first")
        host.mkdir(parents=True, exist_ok=True)

    def stat(self, path: str, *, digest: bool = True) -> Stat | None:
        host = self.host(path)
        try:
            st = host.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat_mod.S_ISDIR(st.st_mode):
            return Stat(0, st.st_mtime_ns, None, True)
        sha = hashlib.sha256(host.read_bytes()).hexdigest() if digest else None
        return Stat(st.st_size, st.st_mtime_ns, sha, False)

    def list(self, path: str, *, recursive: bool = False) -> list[Entry]:
        host = self.host(path)
        if not host.is_dir():
            st = self.stat(path, digest=False)
            if st is None:
                raise NotFound(f"nothing at {path} in the workspace", hint="list files with `bm fs ls`")
            return [Entry(path, "file", st.size, st.mtime_ns)]
        out: list[Entry] = []
        self._walk(host, path.rstrip("/"), self._real_root(), recursive, out)
        return out

    @staticmethod
    def _walk(host: Path, prefix: str, root: str, recursive: bool, out: list[Entry]) -> None:
        try:
            entries = sorted(os.scandir(host), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return
        for e in entries:
            if e.name.startswith(TMP_PREFIX):
                continue
            wpath = f"{prefix}/{e.name}"
            link = e.is_symlink()
            if link:
                real = os.path.realpath(e.path)
                if real != root and not real.startswith(root + os.sep):
                    out.append(Entry(wpath, "link-outside", 0, 0))
                    continue
            try:
                st = e.stat()
            except OSError:  # a dangling link
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                out.append(Entry(wpath, "dir", 0, st.st_mtime_ns))
                if recursive and not link:  # a link inside the root is listed, never walked (no loops)
                    LocalBackend._walk(Path(e.path), wpath, root, recursive, out)
            elif stat_mod.S_ISREG(st.st_mode):
                out.append(Entry(wpath, "file", st.st_size, st.st_mtime_ns))
