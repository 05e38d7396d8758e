"""Client-side encryption of everything bm writes to a sync remote.

One 256-bit key per store (every device of the store holds the same key: `bm sync key
export` on one device, `bm sync key import FILE` on the next).  It is made on first use and
kept in ``<data_dir>/sync_keys.json`` (mode 0600) with any older or imported keys, so objects
written under an earlier key stay readable.

Sub-keys are derived with HKDF-SHA256 from the store key:

* ``enc``   AES-256-GCM-SIV (RFC 8452, nonce-misuse resistant) of the object body;
* ``nonce`` HMAC-SHA256 over (header, object name, plaintext) -> the 96-bit nonce.  The
  encryption is therefore *deterministic*: the same object name and bytes always give the same
  ciphertext (so re-uploading the same ops after a crash yields identical bytes, which the
  ``If-None-Match`` retry rule relies on), and different plaintext gets a different nonce
  (and even a repeated nonce only reveals equality under GCM-SIV);
* ``name``  HMAC-SHA256 for object names that would otherwise reveal content (blobs are
  content-addressed by a keyed hash, never by the plain SHA-256 of their bytes).

Object layout (all integers big-endian)::

    magic "bmS3" | version 1 | flags (bit 0: zlib) | key id (8 bytes) | nonce (12) | ciphertext+tag

The associated data is the first 14 header bytes plus the object's name relative to the
remote prefix, so an object cannot be swapped for another one under a different name.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from brandmind.clock import iso, now_millis
from brandmind.errors import BMError, InvalidInput

MAGIC = b"bmS3"
VERSION = 1
FLAG_ZLIB = 1
_HEADER = 4 + 1 + 1 + 8  # magic, version, flags, key id
_NONCE = 12
KEY_FILE = "sync_keys.json"
EXPORT_PREFIX = "bm-sync-key:1:"
_THREAD_LOCK = threading.RLock()
IMPORT_HINT = ("copy the key of the devices that sync with this remote: run `bm sync key export -o key.txt` "
               "on one of them, then `bm sync key import key.txt` here")


class SyncKeyError(BMError):
    """The store's sync key is missing, wrong, or an object cannot be decrypted with it."""


def _hkdf(key: bytes, info: bytes, length: int = 32) -> bytes:
    # HKDF-SHA256 (RFC 5869) with an all-zero salt, written out: two HMACs, no heavy import
    prk = hmac.new(b"\0" * 32, key, hashlib.sha256).digest()
    out, block, i = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([i]), hashlib.sha256).digest()
        out += block
        i += 1
    return out[:length]


@dataclass(frozen=True)
class SyncKey:
    """A store's sync key and the sub-keys derived from it."""

    secret: bytes

    def __post_init__(self) -> None:
        if len(self.secret) != 32:
            raise InvalidInput("a sync key is 32 bytes", hint="export it again with `bm sync key export`")

    @property
    def key_id(self) -> str:
        """16 hex digits naming the key (written into every object header)."""
        return _hkdf(self.secret, b"bm sync key id", 8).hex()

    @property
    def kid(self) -> bytes:
        return bytes.fromhex(self.key_id)

    @property
    def fingerprint(self) -> str:
        """A longer, human-comparable digest (the same on every device holding the key)."""
        h = _hkdf(self.secret, b"bm sync key fingerprint", 16).hex()
        return ":".join(h[i:i + 4] for i in range(0, 32, 4))

    def subkey(self, purpose: str) -> bytes:
        return _hkdf(self.secret, b"bm sync " + purpose.encode())

    def name_mac(self, text: str) -> str:
        """A keyed, stable name for content-addressed objects (hides the content's hash)."""
        return hmac.new(self.subkey("name"), text.encode(), hashlib.sha256).hexdigest()

    def export_text(self) -> str:
        return EXPORT_PREFIX + self.key_id + ":" + base64.urlsafe_b64encode(self.secret).decode().rstrip("=")

    @classmethod
    def from_export(cls, text: str) -> "SyncKey":
        text = "".join(text.split())  # tolerate wrapped lines, spaces, a final newline
        if not text.startswith(EXPORT_PREFIX):
            raise InvalidInput("this is not a bm sync key (it should start with 'bm-sync-key:1:')",
                               hint="give the file written by `bm sync key export` on another device")
        try:
            kid, b64 = text[len(EXPORT_PREFIX):].split(":", 1)
            secret = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4))
        except (ValueError, TypeError):
            raise InvalidInput("the sync key text is damaged",
                               hint="export it again with `bm sync key export` and copy the whole line") from None
        if len(secret) != 32:
            raise InvalidInput("the sync key text is damaged (wrong length)",
                               hint="export it again with `bm sync key export` and copy the whole line")
        key = cls(secret)
        if key.key_id != kid:
            raise InvalidInput(f"the sync key text is damaged (its check {kid!r} does not match)",
                               hint="export it again with `bm sync key export` and copy the whole line")
        return key


class Keyring:
    """The keys of one store: ``<data_dir>/sync_keys.json`` (0600); one of them is active."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / KEY_FILE
        self._keys: dict[str, SyncKey] = {}
        self._meta: dict[str, dict] = {}
        self.active_id: str | None = None
        self._loaded: tuple[int, int] | None = None
        self._load()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size

    def _fresh(self) -> None:
        """Re-read the file when another process changed it (e.g. `bm sync key import`
        while the daemon runs, so it does not go on writing with the old key)."""
        if self._stamp() != self._loaded:
            self._load()

    def _load(self) -> None:
        self._loaded = self._stamp()
        if self._loaded is None:
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            for kid, entry in data["keys"].items():
                key = SyncKey(base64.urlsafe_b64decode(entry["key"] + "=" * (-len(entry["key"]) % 4)))
                if key.key_id != kid:
                    raise ValueError(f"key {kid} does not match its id")
                self._keys[kid] = key
                self._meta[kid] = {k: v for k, v in entry.items() if k != "key"}
            self.active_id = data.get("active")
            if self.active_id is not None and self.active_id not in self._keys:
                raise ValueError("the active key is missing")
        except (OSError, ValueError, KeyError, TypeError, AttributeError, BMError) as exc:
            raise SyncKeyError(f"cannot read the sync keys in {self.path}: {exc}",
                               hint="restore the file from a backup, or `bm sync key import FILE` "
                                    "with a key exported from another device") from None

    def _save(self) -> None:

        data = {"format": 1, "active": self.active_id,
                "keys": {kid: {"key": base64.urlsafe_b64encode(k.secret).decode().rstrip("="),
                               **self._meta.get(kid, {"added": iso(now_millis())})}
                         for kid, k in self._keys.items()}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, self.path)
        self._loaded = self._stamp()

    @classmethod
    def throwaway(cls, data_dir: Path) -> "Keyring":
        """A keyring whose only key is random and never saved: `bm remote test` on a store
        without a key checks the remote with it (and makes no key the store would keep)."""
        ring = cls(data_dir)
        key = SyncKey(os.urandom(32))
        ring._keys, ring._meta, ring.active_id = {key.key_id: key}, {}, key.key_id
        ring._fresh = lambda: None  # type: ignore[method-assign]  # never the file's keys
        ring._save = lambda: None  # type: ignore[method-assign]
        return ring

    # -- keys -----------------------------------------------------------------
    def has_key(self) -> bool:
        return self.active_id is not None

    def active(self, *, create: bool = True) -> SyncKey:
        """The key new objects are written with (made and saved on first use)."""
        self._fresh()
        if self.active_id is None:
            if not create:
                raise SyncKeyError("this store has no sync key yet",
                                   hint="`bm sync key import FILE` to join other devices, "
                                        "or run `bm sync now` to make one")
            with self._locked():  # two threads or processes must not each make a key
                self._load()
                if self.active_id is None:

                    key = SyncKey(os.urandom(32))
                    self._keys[key.key_id] = key
                    self._meta[key.key_id] = {"added": iso(now_millis()), "source": "generated"}
                    self.active_id = key.key_id
                    self._save()
        return self._keys[self.active_id]

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """This keyring's thread lock and an exclusive flock on ``sync_keys.lock``."""
        import fcntl

        with _THREAD_LOCK:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def get(self, kid: str) -> SyncKey | None:
        return self._keys.get(kid)

    def import_key(self, text: str) -> tuple[SyncKey, bool]:
        """Add a key exported on another device and make it the active one.
        Returns (key, whether anything changed)."""

        key = SyncKey.from_export(text)
        with self._locked():
            self._load()
            changed = key.key_id not in self._keys or self.active_id != key.key_id
            if key.key_id not in self._keys:
                self._keys[key.key_id] = key
                self._meta[key.key_id] = {"added": iso(now_millis()), "source": "imported"}
            self.active_id = key.key_id
            if changed:
                self._save()
        return key, changed

    def rotate(self) -> SyncKey:
        """Make a new random key the active one (`bm sync key rotate`, sync/rotate.py); the
        older keys stay, so what they sealed stays readable here until it is re-sealed."""
        with self._locked():
            self._load()
            key = SyncKey(os.urandom(32))
            self._keys[key.key_id] = key
            self._meta[key.key_id] = {"added": iso(now_millis()), "source": "rotated",
                                      **({"replaces": self.active_id} if self.active_id else {})}
            self.active_id = key.key_id
            self._save()
        return key

    def describe(self) -> dict[str, Any]:
        """Key ids and fingerprints (never the key itself)."""
        active = self._keys[self.active_id] if self.active_id else None
        return {
            "key_id": active.key_id if active else None,
            "fingerprint": active.fingerprint if active else None,
            "file": str(self.path),
            "keys": [{"key_id": kid, "fingerprint": k.fingerprint, "active": kid == self.active_id,
                      **self._meta.get(kid, {})} for kid, k in self._keys.items()],
        }

    # -- objects ----------------------------------------------------------------
    def seal(self, name: str, data: bytes, *, compress: bool = True) -> bytes:
        """Encrypt ``data`` stored under ``name`` (relative to the remote prefix)."""
        return seal(self.active(), name, data, compress=compress)

    def open(self, name: str, blob: bytes, *, where: str | None = None) -> bytes:
        """Decrypt an object read from ``name``; ``where`` names it in errors."""
        where = where or name
        kid = header_key_id(blob, where)
        key = self._keys.get(kid)
        if key is None:
            self._fresh()
            key = self._keys.get(kid)
        if key is None:
            mine = f"this store has {self.active_id}" if self.active_id else "this store has no key yet"
            raise SyncKeyError(f"this store's sync key cannot decrypt {where} "
                               f"(it is encrypted with key {kid}; {mine}; if another device rotated "
                               "the key with `bm sync key rotate`, import the new one)", hint=IMPORT_HINT)
        return open_sealed(key, name, blob, where)


def seal(key: SyncKey, name: str, data: bytes, *, compress: bool = True) -> bytes:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

    flags = 0
    if compress:
        data = zlib.compress(data, 1)
        flags |= FLAG_ZLIB
    header = MAGIC + bytes([VERSION, flags]) + key.kid
    aad = header + b"\0" + name.encode()
    nonce = hmac.new(key.subkey("nonce"), aad + b"\0" + data, hashlib.sha256).digest()[:_NONCE]
    return header + nonce + AESGCMSIV(key.subkey("enc")).encrypt(nonce, data, aad)


def header_key_id(blob: bytes, where: str) -> str:
    if len(blob) < _HEADER + _NONCE + 16 or blob[:4] != MAGIC:
        raise SyncKeyError(f"{where} is not a bm sync object (or it is truncated)",
                           hint="check the remote's bucket and prefix (`bm remote list`); "
                                "do not store other files under the prefix")
    if blob[4] != VERSION:
        raise SyncKeyError(f"{where} has object format {blob[4]}, which this bm cannot read",
                           hint="upgrade bm on this device (pip install -U brandmind)")
    return blob[6:_HEADER].hex()


def open_sealed(key: SyncKey, name: str, blob: bytes, where: str) -> bytes:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

    header, nonce, body = blob[:_HEADER], blob[_HEADER:_HEADER + _NONCE], blob[_HEADER + _NONCE:]
    aad = header + b"\0" + name.encode()
    try:
        data = AESGCMSIV(key.subkey("enc")).decrypt(nonce, body, aad)
    except InvalidTag:
        raise SyncKeyError(f"this store's sync key cannot decrypt {where}: the object is damaged, "
                           "was tampered with, or was moved from another name",
                           hint="check the remote (`bm remote test`); if other devices read it fine, "
                                + IMPORT_HINT) from None
    if header[5] & FLAG_ZLIB:
        data = zlib.decompress(data)
    return data
