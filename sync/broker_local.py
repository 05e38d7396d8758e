"""The local broker: no server, a directory on this machine (sync/broker.py has the contract).

Why not the op log or the daemon's backlog (brandmind/backlog.py)?  Both live inside ONE store:
the backlog holds work on turns already stored there (their vectors, their extraction), in that
store's own LMDB.  A broker has to take a user's turns before any store is chosen (the agent
that publishes opens no store), route them to the user's store, and track each delivery per
consumer group so that a dead worker's events can be claimed.  And only oplog.py may touch LMDB
(tests/test_layers.py).  So this is a directory queue, the same contract as Redis Streams:

    DIR/broker.json                      {"shards": N}
    DIR/s<k>/lock                        flock: every change to shard k holds it
    DIR/s<k>/next                        the next sequence number
    DIR/s<k>/events/<seq>.json           an event's fields (written whole, fsynced, renamed)
    DIR/s<k>/groups/<group>/cursor       the last sequence number delivered to the group
    DIR/s<k>/groups/<group>/pending/<seq>  {"consumer", "at"}: delivered, not acked
    DIR/s<k>/lease                       {"consumer", "at"}: who reads shard k
    DIR/workers/<consumer>               a worker's heartbeat (its mtime)
    DIR/dead/<ms>-<seq>.json             dead letters

An event file goes when every group has acked it.  Publishing fsyncs the events and the
directory before it returns; cursors and pending marks are not fsynced: after a power cut a
group may read an event again, which the store's dedup makes harmless.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from .broker import Event, agree_shards, make_events, shard_of

POLL = 0.02  # seconds between looks at the shards while a read blocks


class LocalBroker:
    """See the module docstring."""

    def __init__(self, root: Path, *, shards: int | None = None, prefix: str = "bm") -> None:
        self.root = Path(root) / prefix
        self.root.mkdir(parents=True, exist_ok=True)
        meta = self.root / "broker.json"
        with self._locked(self.root / "lock"):
            stored = json.loads(meta.read_text())["shards"] if meta.exists() else None
            self.shards = agree_shards(stored, shards)
            if stored is None:
                _write(meta, json.dumps({"shards": self.shards}).encode(), sync=True)
        for k in range(self.shards):
            (self._shard(k) / "events").mkdir(parents=True, exist_ok=True)
        (self.root / "workers").mkdir(exist_ok=True)
        (self.root / "dead").mkdir(exist_ok=True)

    def __enter__(self) -> "LocalBroker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return f"local {self.root}"

    def _shard(self, k: int) -> Path:
        return self.root / f"s{k}"

    @contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        with open(path, "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _group(self, k: int, group: str) -> Path:
        g = self._shard(k) / "groups" / group
        if not g.exists():
            (g / "pending").mkdir(parents=True, exist_ok=True)
        return g

    # -- publishing ----------------------------------------------------------------------------------
    def publish(self, user: str, turns: Iterable[dict] | dict) -> list[str]:
        events = make_events(user, turns)
        if not events:
            return []
        k = shard_of(events[0]["user"], self.shards)
        shard = self._shard(k)
        with self._locked(shard / "lock"):
            seq = _int(shard / "next", 1)
            ids = []
            for fields in events:
                _write(shard / "events" / f"{seq:012d}.json", json.dumps(fields).encode(), sync=True)
                ids.append(str(seq))
                seq += 1
            _write(shard / "next", str(seq).encode(), sync=True)
            _fsync_dir(shard / "events")
        return ids

    # -- consuming -----------------------------------------------------------------------------------
    def _event(self, k: int, seq: int) -> Event | None:
        try:
            raw = (self._shard(k) / "events" / f"{seq:012d}.json").read_bytes()
        except FileNotFoundError:
            return None
        try:
            fields = json.loads(raw)
            fields = {str(a): str(b) for a, b in fields.items()} if isinstance(fields, dict) else {"raw": str(fields)}
        except ValueError:
            fields = {"raw": raw.decode("utf-8", "replace")}
        return Event(str(seq), k, fields)

    def _deliver(self, k: int, group: str, consumer: str, seqs: list[int]) -> list[Event]:
        pend = self._group(k, group) / "pending"
        mark = json.dumps({"consumer": consumer, "at": _ms()}).encode()
        out = []
        for seq in seqs:
            ev = self._event(k, seq)
            if ev is not None:
                _write(pend / f"{seq:012d}", mark)
                out.append(ev)
        return out

    def read(self, group: str, consumer: str, shards: list[int], count: int, block_ms: int) -> list[Event]:
        deadline = time.monotonic() + block_ms / 1000
        while True:
            out: list[Event] = []
            for k in shards:
                shard = self._shard(k)
                with self._locked(shard / "lock"):
                    g = self._group(k, group)
                    cursor, top = _int(g / "cursor", 0), _int(shard / "next", 1) - 1
                    if top <= cursor:
                        continue
                    last = min(top, cursor + count)
                    out += self._deliver(k, group, consumer, list(range(cursor + 1, last + 1)))
                    _write(g / "cursor", str(last).encode())
            if out or time.monotonic() >= deadline:
                return out
            time.sleep(POLL)

    def claim(self, group: str, consumer: str, shard: int, count: int, min_idle_ms: int = 0) -> list[Event]:
        with self._locked(self._shard(shard) / "lock"):
            pend = self._group(shard, group) / "pending"
            now, seqs = _ms(), []
            for name in sorted(os.listdir(pend)):
                mark = _json(pend / name)
                if now - int(mark.get("at", 0)) >= min_idle_ms:
                    seqs.append(int(name))
                if len(seqs) >= count:
                    break
            events = self._deliver(shard, group, consumer, seqs)
            for seq in set(seqs) - {int(e.id) for e in events}:  # its event file is gone: nothing to do
                (pend / f"{seq:012d}").unlink(missing_ok=True)
            return events

    def ack(self, group: str, events: list[Event]) -> None:
        by_shard: dict[int, list[int]] = {}
        for ev in events:
            by_shard.setdefault(ev.shard, []).append(int(ev.id))
        for k, seqs in by_shard.items():
            shard = self._shard(k)
            with self._locked(shard / "lock"):
                pend = self._group(k, group) / "pending"
                for seq in seqs:
                    (pend / f"{seq:012d}").unlink(missing_ok=True)
                self._drop_done(k, seqs)

    def _drop_done(self, k: int, seqs: list[int]) -> None:
        """Delete the event files every group has read and acked (under the shard's lock)."""
        groups = [self._shard(k) / "groups" / g for g in os.listdir(self._shard(k) / "groups")]
        for seq in seqs:
            name = f"{seq:012d}"
            if all(_int(g / "cursor", 0) >= seq and not (g / "pending" / name).exists() for g in groups):
                (self._shard(k) / "events" / f"{name}.json").unlink(missing_ok=True)

    def dead(self, group: str, event: Event, error: str, consumer: str) -> None:
        now = _ms()
        record = {"id": event.id, "shard": event.shard, "event": event.fields, "error": error,
                  "consumer": consumer, "at": now}
        _write(self.root / "dead" / f"{now:013d}-{event.shard:04d}-{int(event.id):012d}.json",
               json.dumps(record).encode(), sync=True)
        self.ack(group, [event])

    def dead_letters(self, count: int = 100) -> list[dict]:
        names = sorted(os.listdir(self.root / "dead"))[:count]
        return [_json(self.root / "dead" / n) for n in names]

    # -- coordination --------------------------------------------------------------------------------
    def lease(self, shard: int, consumer: str, idle_ms: int) -> bool:
        path = self._shard(shard) / "lease"
        with self._locked(self._shard(shard) / "lock"):
            cur = _json(path)
            now = _ms()
            if cur and cur.get("consumer") != consumer and now - int(cur.get("at", 0)) <= idle_ms:
                return False
            _write(path, json.dumps({"consumer": consumer, "at": now}).encode())
            return True

    def leases(self, shards: list[int], consumer: str, idle_ms: int) -> dict[int, bool]:
        return {k: self.lease(k, consumer, idle_ms) for k in shards}

    def release(self, shard: int, consumer: str) -> None:
        path = self._shard(shard) / "lease"
        with self._locked(self._shard(shard) / "lock"):
            if _json(path).get("consumer") == consumer:
                path.unlink(missing_ok=True)

    def heartbeat(self, consumer: str, idle_ms: int) -> int:
        workers = self.root / "workers"
        _write(workers / consumer, b"")
        now, alive = time.time(), 0
        for name in os.listdir(workers):
            try:
                if (now - (workers / name).stat().st_mtime) * 1000 <= idle_ms:
                    alive += 1
                else:
                    (workers / name).unlink(missing_ok=True)
            except FileNotFoundError:
                pass
        return alive

    def backlog(self, group: str) -> dict[int, dict]:
        out = {}
        for k in range(self.shards):
            shard = self._shard(k)
            with self._locked(shard / "lock"):
                g = self._group(k, group)
                waiting = max(0, _int(shard / "next", 1) - 1 - _int(g / "cursor", 0))
                out[k] = {"waiting": waiting, "pending": len(os.listdir(g / "pending"))}
        return out

    def trim(self, group: str, shards: list[int]) -> None:
        """Nothing to do: acking deletes what every group has done."""


def _ms() -> int:
    return int(time.time() * 1000)


def _int(path: Path, default: int) -> int:
    try:
        return int(path.read_text() or default)
    except (FileNotFoundError, ValueError):
        return default


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_bytes())
        return value if isinstance(value, dict) else {}
    except (FileNotFoundError, ValueError):
        return {}


def _write(path: Path, data: bytes, *, sync: bool = False) -> None:
    """Write a file whole: a temporary name, then a rename (fsynced first with ``sync``)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        if sync:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
