"""`bm worker`: consume a broker's events into one bm store per user (sync/broker.py).

Each round a worker (1) says it is alive and keeps its share of the shard leases: with W
workers alive it holds ceil(shards / W), taking free or stale ones and giving extras up; (2)
takes the events of the shards it holds: first any a dead worker (or a failure of its own)
left pending there, claimed in order, then new ones; (3) stores each user's events, in order,
in that user's store, ``ROOT/<user_dirname(user)>``, an ordinary bm home (one ``ingest`` a
user and round: one op-log and one SQLite transaction, vectors made before it commits,
``--extract`` after), and (4) acks them once that committed.

* A poison event (not JSON, no user, a bad turn) goes to the dead-letter stream with its
  error and is acked; the user's later events go on.  An event whose store keeps failing
  (``max_attempts`` times) goes there too, with that error; until then it and the events
  after it in its shard wait (retried with backoff, one event at a time), so order is kept.
* An event delivered twice (a worker killed between commit and ack) is stored once: its turn
  has an id (its own, or the event's ``eid``), and ``ingest`` skips ids it has stored.
* A worker only opens the store of the user an event names; user ids map one to one to
  directory names that cannot leave ``ROOT`` (sync/broker.py ``user_dirname``).
"""
from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from brandmind.errors import BMError, InvalidInput

from .broker import GROUP, BrokerDown, Event, parse_event, published_ms, user_home

MAX_OPEN = 64      # user stores kept open (least recently used closed first)
MAX_ATTEMPTS = 5   # a store failing this often on one event: the event goes to the dead letters
TRIM_EVERY = 5.0   # seconds between trims of the streams this worker holds


def consumer_name() -> str:
    return f"{socket.gethostname()[:40]}-{os.getpid()}-{os.urandom(2).hex()}"


class Lags:
    """End-to-end lags (publish to commit, ms) as a mergeable log histogram (~5% buckets)."""

    BASE = 1.05

    def __init__(self, hist: dict | None = None) -> None:
        self.hist: dict[int, int] = {int(k): int(v) for k, v in (hist or {}).items()}

    def add(self, ms: float) -> None:
        b = int(math.log(max(ms, 0.0) + 1.0, self.BASE))
        self.hist[b] = self.hist.get(b, 0) + 1

    def merge(self, other: "Lags") -> None:
        for b, n in other.hist.items():
            self.hist[b] = self.hist.get(b, 0) + n

    @property
    def count(self) -> int:
        return sum(self.hist.values())

    def quantile(self, q: float) -> float | None:
        total = self.count
        if not total:
            return None
        seen = 0
        for b in sorted(self.hist):
            seen += self.hist[b]
            if seen >= q * total:
                return round(self.BASE ** (b + 0.5) - 1.0, 1)  # the bucket's middle
        return None  # pragma: no cover

    def summary(self) -> dict:
        return {"p50": self.quantile(0.5), "p95": self.quantile(0.95), "max": self.quantile(1.0), "n": self.count}


class BrokerWorker:
    """See the module docstring.  ``broker``: a sync.broker.MessageBroker; ``root``: the
    directory of the users' stores; ``claim_idle``: seconds without a lease renewal after
    which a worker is taken for dead (its shards and pending events are taken over)."""

    def __init__(self, broker: Any, root: str | os.PathLike[str], *, group: str = GROUP, name: str | None = None,
                 batch: int = 256, block_ms: int = 1000, claim_idle: float = 30.0, extract: bool = False,
                 max_open: int = MAX_OPEN, max_attempts: int = MAX_ATTEMPTS,
                 log: Callable[[str], None] | None = None) -> None:
        self.broker = broker
        self.root = Path(root).resolve()
        self.group = group
        self.name = name or consumer_name()
        self.batch = batch
        self.idle_ms = max(1, int(claim_idle * 1000))
        self.block_ms = max(1, min(block_ms, self.idle_ms // 4))
        self.extract = extract
        self.max_open = max_open
        self.max_attempts = max_attempts
        self.log = log or (lambda message: None)
        self.held: set[int] = set()
        self.recovering: set[int] = set()   # shards whose pending events come before new ones
        self.suspect: set[str] = set()      # users whose last store attempt failed: one event at a time
        self.attempts: dict[tuple[int, str], int] = {}
        self.stores: OrderedDict[str, Any] = OrderedDict()
        self.embedder: Any = None
        self.lags = Lags()
        self.stats = {"consumer": self.name, "events": 0, "stored": 0, "duplicates": 0, "dead": 0, "claimed": 0,
                      "rounds": 0, "failures": 0, "broker_down": 0, "last_error": None}
        self.users: set[str] = set()
        self._renewed = 0.0
        self._trimmed = 0.0

    # -- the loop ------------------------------------------------------------------------------------
    def run(self, *, drain: bool = False, stop: threading.Event | None = None,
            asked: threading.Event | None = None, answer: Callable[[dict], None] | None = None) -> dict:
        """Consume until ``stop`` is set, or with ``drain`` until no event is waiting or pending
        on any shard; returns the report (``stats`` with the lags and the time taken).  Each
        time ``asked`` is set (between rounds), ``answer(report so far)``."""
        stop = stop or threading.Event()
        started = time.monotonic()
        pause = 0.0
        try:
            while not stop.is_set():
                if asked is not None and asked.is_set() and answer is not None:
                    asked.clear()
                    answer(self.report(time.monotonic() - started))
                if pause:
                    stop.wait(pause)
                try:
                    worked = self.round()
                    pause = 0.0
                except BrokerDown as exc:
                    self.stats["broker_down"] += 1
                    self._note(f"broker unreachable, retrying: {exc.message}")
                    self.recovering |= self.held
                    pause = min(5.0, max(0.5, 2 * pause))
                    continue
                if not worked and drain and self.drained():
                    break
                if worked is None:  # a store failed: back off before trying again
                    pause = min(5.0, max(0.1, 2 * pause))
        finally:
            self.shutdown()
        return self.report(time.monotonic() - started)

    def round(self) -> bool | None:
        """One round: True if events were handled, False if none came, None if a store failed."""
        self.stats["rounds"] += 1
        self.coordinate(force=not self.held)
        events = self.recover()
        if events is None:  # about ``batch`` events a round, whatever the shards held (a round is
            shards = sorted(self.held - self.recovering)  # short: leases rebalance between rounds)
            events = self.broker.read(self.group, self.name, shards, max(1, self.batch // max(1, len(shards))),
                                      self.block_ms)
        if not events:
            self._trim()
            return False
        self.stats["events"] += len(events)
        return self.handle(events)

    def drained(self) -> bool:
        return all(not s["waiting"] and not s["pending"] for s in self.broker.backlog(self.group).values())

    def shutdown(self) -> None:
        """Give the leases up and close the stores (after the round under way)."""
        for k in sorted(self.held):
            try:
                self.broker.release(k, self.name)
            except BMError:
                pass
        self.held.clear()
        while self.stores:
            _, mem = self.stores.popitem(last=False)
            mem.close()

    def report(self, seconds: float) -> dict:
        return {**self.stats, "broker_retries": getattr(self.broker, "retried", 0), "users": len(self.users), "seconds": round(seconds, 3),
                "lag_ms": self.lags.summary(), "lag_hist": dict(sorted(self.lags.hist.items()))}

    # -- leases ----------------------------------------------------------------------------------------
    def coordinate(self, force: bool = False, rebalance: bool = True) -> None:
        """Heartbeat, renew the leases held, then (between rounds: ``rebalance``) take or give
        up shards to hold a fair share."""
        now = time.monotonic()
        if not force and (now - self._renewed) * 1000 < min(self.idle_ms / 4, 1000):  # a joining worker
            return  # gets its share within a second
        alive = max(1, self.broker.heartbeat(self.name, self.idle_ms))
        target = math.ceil(self.broker.shards / alive)
        kept = self.broker.leases(sorted(self.held), self.name, self.idle_ms)
        for k, ok in kept.items():
            if not ok:
                self._note(f"lost the lease of shard {k} (not renewed within the claim idle time)")
                self.held.discard(k)
                self.recovering.discard(k)
        self._renewed = now
        if not rebalance:  # in the middle of a round: the events in hand are of the shards held
            return
        for k in sorted(self.held - self.recovering, reverse=True)[:max(0, len(self.held) - target)]:
            self.broker.release(k, self.name)
            self.held.discard(k)
        start = int.from_bytes(self.name.encode()[-4:], "big") % self.broker.shards
        for i in range(self.broker.shards):
            if len(self.held) >= target:
                break
            k = (start + i) % self.broker.shards
            if k not in self.held and self.broker.lease(k, self.name, self.idle_ms):
                self.held.add(k)
                self.recovering.add(k)  # what its last holder left pending comes first

    def holds(self, shard: int) -> bool:
        """Renew the leases if due (a long round), then whether ``shard`` is still ours."""
        self.coordinate(rebalance=False)
        return shard in self.held

    def recover(self) -> list[Event] | None:
        """The pending events of the first shard being recovered (None: no shard is)."""
        for k in sorted(self.recovering):
            events = self.broker.claim(self.group, self.name, k, self.batch, 0)
            if events:
                self.stats["claimed"] += len(events)
                return events
            self.recovering.discard(k)
        return None

    def _trim(self) -> None:
        if time.monotonic() - self._trimmed >= TRIM_EVERY and self.held:
            self.broker.trim(self.group, sorted(self.held))
            self._trimmed = time.monotonic()

    # -- storing -----------------------------------------------------------------------------------
    def handle(self, events: list[Event]) -> bool | None:
        """Store the events by user, in order; ack what committed.  None if a store failed."""
        by_user: OrderedDict[str, list[tuple[Event, dict]]] = OrderedDict()
        for ev in events:
            try:
                user, turn = parse_event(ev)
            except InvalidInput as exc:
                self._dead(ev, exc.message)
                continue
            by_user.setdefault(user, []).append((ev, turn))
        done: list[Event] = []
        failed = False
        for user, items in by_user.items():
            items = [(ev, turn) for ev, turn in items if self.holds(ev.shard)]  # a lost shard is another's now
            if not items:
                continue
            stored, ok = self._store_user(user, items)
            done += stored
            failed = failed or not ok
        self.broker.ack(self.group, done)
        return None if failed else True

    def _store_user(self, user: str, items: list[tuple[Event, dict]]) -> tuple[list[Event], bool]:
        """Store one user's events; (the events committed, False if one failed)."""
        chunks = [[it] for it in items] if user in self.suspect else [items]
        committed: list[Event] = []
        for chunk in chunks:
            try:
                report = self._ingest(user, [turn for _, turn in chunk])
            except Exception as exc:  # the store failed: this and the user's later events wait
                if self._failed(user, chunk, exc):
                    continue  # dead-lettered after max_attempts: the user's next events go on
                return committed, False
            self._done(report, [ev for ev, _ in chunk])
            committed += [ev for ev, _ in chunk]
        self.suspect.discard(user)
        return committed, True

    def _ingest(self, user: str, turns: list[dict]) -> dict:
        mem = self._open(user)
        return mem.ingest(turns, user=user, extract=self.extract)

    def _done(self, report: dict, events: list[Event]) -> None:
        now = time.time() * 1000
        self.stats["stored"] += report["ingested"]
        self.stats["duplicates"] += report["duplicates"]
        for ev in events:
            self.attempts.pop((ev.shard, ev.id), None)
            sent = published_ms(ev)
            if sent is not None:
                self.lags.add(now - sent)

    def _failed(self, user: str, chunk: list[tuple[Event, dict]], exc: Exception) -> bool:
        """Count a failed attempt; True if the (single) event was dead-lettered for it."""
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        self.stats["failures"] += 1
        self.stats["last_error"] = message
        self.suspect.add(user)
        for ev, _ in chunk:
            self.recovering.add(ev.shard)
        stale = self.stores.pop(user, None)  # reopened on the next attempt
        if stale is not None:
            try:
                stale.close()
            except Exception:  # noqa: BLE001 - a store that failed may fail to close too
                pass
        if len(chunk) != 1:
            self._note(f"storing {len(chunk)} event(s) of user {user!r} failed ({message}); retrying one at a time")
            return False
        ev = chunk[0][0]
        n = self.attempts[(ev.shard, ev.id)] = self.attempts.get((ev.shard, ev.id), 0) + 1
        if n < self.max_attempts:
            self._note(f"storing event {ev.id} of user {user!r} failed ({message}); attempt {n} of {self.max_attempts}")
            return False
        self.attempts.pop((ev.shard, ev.id), None)
        self._dead(ev, f"failed {n} times: {message}")
        return True

    def _dead(self, ev: Event, error: str) -> None:
        self.broker.dead(self.group, ev, error, self.name)
        self.stats["dead"] += 1
        self._note(f"event {ev.id} of shard {ev.shard} to the dead letters: {error}")

    def _open(self, user: str) -> Any:
        """The user's store (opened, or made: an ordinary bm home whose default user is this one)."""
        mem = self.stores.get(user)
        if mem is not None:
            self.stores.move_to_end(user)
            return mem
        from brandmind.config import Config, write_config_value
        from brandmind.memory import Memory

        home = user_home(self.root, user)
        config = Config.load(home)
        if not config.paths.config_file.exists():  # a new store: `BM_HOME=<it> bm recall` needs no -u
            home.mkdir(parents=True, exist_ok=True)
            write_config_value(config.paths, "user", user)
            write_config_value(config.paths, "embedder", config.embedder)
            config = Config.load(home)
        mem = Memory(home, config=config, embedder=self.embedder, create=True)
        if self.embedder is None:
            self.embedder = mem.embedder  # one model for every store of this worker
        self.stores[user] = mem
        self.users.add(user)
        while len(self.stores) > self.max_open:
            _, old = self.stores.popitem(last=False)
            old.close()
        return mem

    def _note(self, message: str) -> None:
        self.log(f"worker {self.name}: {message}")
