"""A message broker between agents and the workers that store their turns (issue 18).

Agents publish each turn with its user id (``publish``); workers read them in consumer groups
(``read``), acknowledge what they committed (``ack``), take over what a dead worker left
pending (``claim``) and set aside what cannot be stored (``dead``, a dead-letter stream).
Two implementations of :class:`MessageBroker`:

* :class:`~brandmind.sync.broker_redis.RedisBroker` (``redis://HOST:PORT``, Valkey the same):
  Redis Streams, XADD / XREADGROUP / XACK / XAUTOCLAIM;
* :class:`~brandmind.sync.broker_local.LocalBroker` (``file:///DIR`` or a plain path): no
  server, a directory on this machine (one file an event, ``flock`` per shard).

**Order per user.** A user's events always go to the same one of ``shards`` streams (a stable
hash of the user id, :func:`shard_of`), and a shard is read by one worker at a time: the one
holding its *lease* (``lease``/``release``).  A worker that has not renewed a lease for
``idle_ms`` (``bm worker --claim-idle``) is taken for dead: the next worker takes the lease,
then first claims and finishes the events the dead one left pending (they come before any
event it has not read), then reads on.  The number of shards is fixed when the broker is first
used (it decides where a user's events go) and stored with it.

**An event** on the stream is a flat map of strings: ``user``, ``turn`` (the message as JSON,
the format of ``bm ingest``), ``eid`` (an id the publisher gives it: a turn without its own
``id`` is stored under this one, so an event delivered twice is stored once) and ``ts`` (when
it was published, epoch ms: the turn's time unless it has its own ``ts``).  Anything else
someone XADDs is a poison event for :func:`parse_event`.

    from brandmind.sync.broker import open_broker
    with open_broker("redis://127.0.0.1:6379") as broker:       # an agent, after each turn
        broker.publish("ann", [{"role": "user", "content": "I moved to Lisbon"}])
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Protocol

from brandmind.clock import new_id, now_millis
from brandmind.errors import BMError, InvalidInput, UsageError
from brandmind.ingest import message_from_obj

SHARDS = 16             # shard streams, when a broker is first used without --shards
GROUP = "bm-workers"    # the consumer group `bm worker` reads in
PREFIX = "bm"           # the broker's keys / directories: bm:turns:{k}, bm:dead, ...
MAX_USER_BYTES = 64     # a user id's UTF-8 length: its directory name stays under 255 bytes
SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_@")
HINT_TURN = 'each line is {"role": "user", "content": "..."} with optional id, speaker, ts, thread, meta'


class BrokerDown(BMError):
    """The broker cannot be reached (Redis down or restarting) within the time allowed."""


@dataclass
class Event:
    """One event as a worker gets it: the broker's own ``id`` (a stream entry id, or a local
    sequence number), its ``shard``, and its raw ``fields`` (strings; a poison event's too)."""

    id: str
    shard: int
    fields: dict[str, str] = field(default_factory=dict)


class MessageBroker(Protocol):
    """What a broker offers publishers and workers; see the module docstring."""

    shards: int

    def publish(self, user: str, turns: Iterable[dict] | dict) -> list[str]:
        """Validate the turns (all or none: InvalidInput names the first bad one), then append
        them in order to the user's shard; returns their event ids."""

    def read(self, group: str, consumer: str, shards: list[int], count: int, block_ms: int) -> list[Event]:
        """Up to ``count`` new events of each shard, in order, delivered to ``consumer`` (pending
        until acked); waits up to ``block_ms`` when there are none."""

    def claim(self, group: str, consumer: str, shard: int, count: int, min_idle_ms: int = 0) -> list[Event]:
        """The shard's oldest pending events (of any consumer) idle at least ``min_idle_ms``,
        now delivered to ``consumer``, in order."""

    def ack(self, group: str, events: list[Event]) -> None:
        """The events are done: no longer pending (and gone once every group has them)."""

    def dead(self, group: str, event: Event, error: str, consumer: str) -> None:
        """Put the event on the dead-letter stream with its error, and ack it (one step)."""

    def dead_letters(self, count: int = 100) -> list[dict]:
        """The dead letters, oldest first: ``{"id", "shard", "event", "error", "consumer", "at"}``."""

    def lease(self, shard: int, consumer: str, idle_ms: int) -> bool:
        """Take or renew the shard's lease: True if ``consumer`` holds it now (it was free,
        already its own, or not renewed by its holder for ``idle_ms``)."""

    def release(self, shard: int, consumer: str) -> None:
        """Give the shard's lease up (if ``consumer`` holds it)."""

    def heartbeat(self, consumer: str, idle_ms: int) -> int:
        """Say this worker is alive; returns how many workers are (seen within ``idle_ms``)."""

    def backlog(self, group: str) -> dict[int, dict]:
        """Per shard: ``{"waiting": events not yet delivered, "pending": delivered, not acked}``."""

    def trim(self, group: str, shards: list[int]) -> None:
        """Drop the events every group has acknowledged (bounded memory)."""

    def close(self) -> None: ...


# -- opening one -----------------------------------------------------------------------------------
def open_broker(url: str, *, shards: int | None = None, prefix: str = PREFIX, retry_for: float = 30.0) -> Any:
    """The broker at ``url``: ``redis://``, ``rediss://``, ``unix://``, ``valkey://`` (Redis
    Streams) or ``file:///DIR`` / a path (the local directory broker).  ``shards``: the number
    of shard streams when the broker is new; if it already has another number, a UsageError.
    ``retry_for``: seconds a Redis call is retried while Redis cannot be reached (then
    BrokerDown)."""
    if shards is not None and not 1 <= shards <= 1024:
        raise UsageError(f"--shards must be from 1 to 1024, got {shards}", hint="e.g. --shards 16")
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in ("redis", "rediss", "unix", "valkey", "valkeys"):
        from .broker_redis import RedisBroker

        return RedisBroker(url, shards=shards, prefix=prefix, retry_for=retry_for)
    if scheme in ("", "file"):
        from .broker_local import LocalBroker

        path = url[len("file://"):] if scheme == "file" else url
        if not path:
            raise UsageError("the broker URL names no directory", hint="e.g. --broker file:///var/lib/bm-queue")
        return LocalBroker(Path(path).expanduser(), shards=shards, prefix=prefix)
    raise UsageError(f"unknown broker URL {url!r}",
                     hint="use redis://HOST:PORT (Redis or Valkey) or file:///DIR (a local directory queue)")


def agree_shards(stored: int | None, wanted: int | None) -> int:
    """The broker's shard count: the stored one; a different ``wanted`` is an error."""
    if stored is not None and wanted is not None and stored != wanted:
        raise UsageError(f"this broker has {stored} shards, not {wanted}",
                         hint="omit --shards (the count is fixed when the broker is first used: it decides "
                              "where each user's events go)")
    return stored if stored is not None else (wanted or SHARDS)


def shard_of(user: str, shards: int) -> int:
    """The shard of a user's events: the first 8 bytes of BLAKE2b of the UTF-8 id, modulo
    ``shards`` (the same in every process and language)."""
    digest = hashlib.blake2b(user.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


# -- users and their directories ---------------------------------------------------------------------
def check_user(user: Any) -> str:
    """A user id a broker accepts: a bm name (1-128 printable characters, no surrounding space)
    of at most 64 UTF-8 bytes."""
    from brandmind import validate

    user = validate.name(user, what="user")
    if len(user.encode("utf-8")) > MAX_USER_BYTES:
        raise InvalidInput(f"user id is {len(user.encode('utf-8'))} bytes, over {MAX_USER_BYTES}",
                           hint="use a shorter user id (e.g. an account number or a hash of it)")
    return user


def user_dirname(user: str) -> str:
    """The directory name of a user's store, one to one and safe on any file system: lower-case
    ASCII letters, digits, ``-``, ``_`` and ``@`` stay; every other byte (upper case too: macOS
    and Windows fold case) and a dot become ``%XX`` (``Ann`` -> ``%41nn``, ``../x`` ->
    ``%2E%2E%2Fx``).  So no id can name ``.``, ``..``, a path or another user's directory."""
    user = check_user(user)
    return "".join(ch if ch in SAFE else "".join(f"%{b:02X}" for b in ch.encode("utf-8")) for ch in user)


def user_home(root: Path, user: str) -> Path:
    """``root/<user_dirname(user)>``, checked to be directly inside ``root``."""
    root = Path(root).resolve()
    home = root / user_dirname(user)
    if home.parent != root:  # pragma: no cover - user_dirname cannot produce a separator
        raise InvalidInput(f"user id {user!r} does not map into {root}", hint="use a plain user id")
    return home


# -- events ------------------------------------------------------------------------------------------
def make_events(user: str, turns: Iterable[dict] | dict) -> list[dict[str, str]]:
    """The stream fields of each turn (validated as ``bm ingest`` reads a line; InvalidInput
    names the first bad one, before anything is published)."""
    user = check_user(user)
    if isinstance(turns, dict):
        turns = [turns]
    out = []
    for n, turn in enumerate(turns, 1):
        message_from_obj(turn, f"turn {n}")
        ms = _LAST_MS[user] = max(now_millis(), _LAST_MS.get(user, 0) + 1)
        out.append({"user": user, "turn": json.dumps(turn, ensure_ascii=False, separators=(",", ":")),
                    "eid": new_id("ev", ms), "ts": str(ms)})
    if len(_LAST_MS) > 10_000:  # a long-lived publisher of many users: forget the oldest half
        for key in list(_LAST_MS)[:5_000]:
            del _LAST_MS[key]
    return out


# the last publish time given to each user's turn in this process: a turn without its own ts is
# stored at its publish time, and bm orders a user's turns by time, so two turns published in one
# millisecond get consecutive ones (a publisher faster than one turn a millisecond per user moves
# its turns that many milliseconds ahead)
_LAST_MS: dict[str, int] = {}


def parse_event(event: Event) -> tuple[str, dict]:
    """(user, the message dict to ingest) of an event; InvalidInput for a poison event
    (not JSON, no user, a bad turn).  A turn without ``id`` gets the event's ``eid``; without
    ``ts``, the time it was published."""
    f = event.fields
    if "user" not in f:
        raise InvalidInput("event has no user", hint="publish with a user id (bm publish -u USER)")
    user = check_user(f["user"])
    raw = f.get("turn")
    if raw is None:
        raise InvalidInput("event has no turn", hint=HINT_TURN)
    try:
        turn = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InvalidInput(f"turn is not valid JSON ({getattr(exc, 'msg', 'too deep')})", hint=HINT_TURN) from None
    if isinstance(turn, dict):
        turn = dict(turn)
        if turn.get("id") is None and f.get("eid"):
            turn["id"] = f["eid"]
        if turn.get("ts") is None and (f.get("ts") or "").isdigit():
            turn["ts"] = int(f["ts"])
    message_from_obj(turn, "turn")
    return user, turn


def published_ms(event: Event) -> int | None:
    ts = event.fields.get("ts") or ""
    return int(ts) if ts.isdigit() else None


def decode_fields(raw: dict) -> dict[str, str]:
    """A stream entry's fields as strings (bytes that are not UTF-8 are replaced: such an event
    is poison anyway and keeps what can be shown of it)."""
    out = {}
    for key, value in raw.items():
        k = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        out[k] = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return out
