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
* A read sent again after a dropped connection (Redis killed mid-reply) may have lost a reply
  whose events Redis had delivered: they are pending for this worker, and the worker then
  claims its held shards' pending events, in order, before reading new ones.
* A worker only opens the store of the user an event names; user ids map one to one to
  directory names that cannot leave ``ROOT`` (sync/broker.py ``user_dirname``).
* With ``sync`` (``bm worker --sync s3://...``, sync/broker_sync.py) a store is synced with S3
  when opened (a new machine starts it from S3 first), pushed at most every ``sync.every``
  seconds after commits (and at drain / exit), and its events are acked only once pushed.
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

from .broker import GROUP, BrokerDown, Event, parse_event, published_ms, shard_of, user_home
from .broker_sync import SyncUnavailable

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
                 max_open: int = MAX_OPEN, max_attempts: int = MAX_ATTEMPTS, sync: Any = None,
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
        self.stats = {"consumer": self.name, "events": 0, "stored": 0, "duplicates": 0, "edited": 0, "forgotten": 0, "dead": 0, "claimed": 0,
                      "rounds": 0, "failures": 0, "broker_down": 0, "last_error": None}
        self.users: set[str] = set()
        self.sync = sync                    # a sync.broker_sync.FleetSync, or None
        self.remotes: dict[str, Any] = {}   # user -> the open S3 remote of their store
        self.unpushed: dict[str, dict[tuple[int, str], Event]] = {}  # committed, acked once pushed
        self.pushed_at: dict[str, float] = {}
        if sync is not None:
            self.stats.update(pushes=0, restored=0, compactions=0, sync_failures=0)
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
                if not worked and drain and self._finished():
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
            retried = getattr(self.broker, "retried", 0)
            events = self.broker.read(self.group, self.name, shards, max(1, self.batch // max(1, len(shards))),
                                      self.block_ms)
            if getattr(self.broker, "retried", 0) != retried:
                # the connection dropped during the read and it was sent again: the lost reply's
                # events are pending for us, older than these; all are claimed next, in order
                self.recovering.update(shards)
                return True
        if not events:
            self.flush()
            self._trim()
            return False
        self.stats["events"] += len(events)
        worked = self.handle(events)
        self.flush()
        return worked

    def _finished(self) -> bool:
        """--drain: every store pushed (--sync) and nothing waiting or pending."""
        try:
            return self.flush(force=True) and self.drained()
        except BrokerDown as exc:
            self._note(f"broker unreachable, retrying: {exc.message}")
            return False

    def drained(self) -> bool:
        return all(not s["waiting"] and not s["pending"] for s in self.broker.backlog(self.group).values())

    def shutdown(self) -> None:
        """Push what is unpushed, give the leases up and close the stores (after the round
        under way)."""
        try:
            self.flush(force=True)
        except BMError as exc:  # Redis down: the events stay pending, the next worker takes them
            self._note(f"could not ack the pushed events: {exc.message}")
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
                self._let_go(k)
        self._renewed = now
        if not rebalance:  # in the middle of a round: the events in hand are of the shards held
            return
        for k in sorted(self.held - self.recovering, reverse=True)[:max(0, len(self.held) - target)]:
            self._let_go(k)  # with --sync: pushed and acked while still held
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
                if len(events) < self.batch:  # all of them: new events next (a failure marks it again)
                    self.recovering.discard(k)
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
        held = {key: user for user, waiting in self.unpushed.items() for key in waiting}
        again: set[str] = set()
        for ev in events:
            if (ev.shard, ev.id) in held:  # claimed again (a broker outage, a failed store): committed,
                again.add(held[(ev.shard, ev.id)])  # it waits for its push: pushed (and acked) now
                continue
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
            if self.sync is None:
                done += stored
            elif stored:
                self.unpushed.setdefault(user, {}).update({(ev.shard, ev.id): ev for ev in stored})
            failed = failed or not ok
        self.broker.ack(self.group, done)
        for user in again:
            failed = not self._push(user) or failed
        return None if failed else True

    def _store_user(self, user: str, items: list[tuple[Event, dict]]) -> tuple[list[Event], bool]:
        """Store one user's events; (the events committed, False if one failed)."""
        chunks = [[it] for it in items] if user in self.suspect else [items]
        committed: list[Event] = []
        for chunk in chunks:
            try:
                report = self._ingest(user, [turn for _, turn in chunk])
            except SyncUnavailable as exc:  # S3: not the event's fault, never dead-lettered
                self._sync_failed(exc, chunk)
                return committed, False
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
        self.stats["edited"] += report.get("edited", 0)  # (counted in stored too)
        self.stats["forgotten"] += report.get("forgotten", 0)  # re-sent after their turn was forgotten
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
        self.remotes.pop(user, None)
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
        if self.sync is not None:
            try:  # restored from S3 (a new machine) or brought up to date before anything is stored
                self.remotes[user], done = self.sync.attach(mem, home.name)
            except BaseException:
                mem.close()
                raise
            self.pushed_at[user] = time.monotonic()
            if done.get("bootstrap") or done.get("pulled"):
                self.stats["restored"] += 1
                self._note(f"store of {user!r} synced from S3 before use: {done}")
        self.stores[user] = mem
        self.users.add(user)
        self._evict()
        return mem

    def _evict(self) -> None:
        """Close the least recently used stores beyond ``max_open`` (one with events waiting
        for their push is pushed first, and stays open if that fails)."""
        for user in list(self.stores):
            if len(self.stores) <= self.max_open:
                return
            if user in self.unpushed and not self._push(user):
                continue
            self._close(user)

    def _close(self, user: str) -> None:
        self.remotes.pop(user, None)
        mem = self.stores.pop(user, None)
        if mem is not None:
            mem.close()

    # -- S3 sync (--sync) ------------------------------------------------------------------------------
    def flush(self, force: bool = False) -> bool:
        """Push the stores whose events wait for it (those last pushed ``sync.every`` seconds
        ago or more; all with ``force``) and ack their events; True if none waits any more."""
        if self.sync is None:
            return True
        now = time.monotonic()
        for user in list(self.unpushed):
            if force or now - self.pushed_at.get(user, 0.0) >= self.sync.every:
                self._push(user)
        return not self.unpushed

    def _push(self, user: str) -> bool:
        """Push the user's store, then ack its events of shards still held (another holder
        claims the rest and finds them stored); False if the push failed (they wait)."""
        self.pushed_at[user] = time.monotonic()
        try:
            mem = self.stores.get(user) or self._open(user)  # reopening syncs (pushes) it too
            self.sync.sync(mem, self.remotes[user], pull=False)
        except Exception as exc:  # noqa: BLE001 - S3 down, or the store failed to reopen
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self.stats["sync_failures"] += 1
            self.stats["last_error"] = message
            self._note(f"push of {user!r} failed, its events stay pending: {message}")
            return False
        self.stats["pushes"] += 1
        done = self.sync.maybe_compact(mem, self.remotes[user], user_home(self.root, user).name)
        if done is not None:
            self.stats["compactions"] += 1 if done.get("compacted") else 0
            self._note(f"compacted the remote of {user!r}: {done}")
        events = self.unpushed.pop(user, {})
        self.broker.ack(self.group, [ev for ev in events.values() if ev.shard in self.held])
        return True

    def _let_go(self, shard: int) -> None:
        """A shard's lease is given up (still held: its users' events are acked after the
        push) or was lost (they are left to its new holder): with --sync, those users' stores
        are pushed and closed, so they are synced again if the shard comes back (another
        worker may have written them meanwhile)."""
        if self.sync is None:
            return
        for user in [u for u in self.stores if shard_of(u, self.broker.shards) == shard]:
            if user in self.unpushed:
                self._push(user)
                self.unpushed.pop(user, None)
            self._close(user)

    def _sync_failed(self, exc: SyncUnavailable, chunk: list[tuple[Event, dict]]) -> None:
        self.stats["sync_failures"] += 1
        self.stats["last_error"] = exc.message
        for ev, _ in chunk:
            self.recovering.add(ev.shard)  # claimed again, in order, once S3 answers
        self._note(f"{exc.message}; the user's events wait")

    def _note(self, message: str) -> None:
        self.log(f"worker {self.name}: {message}")
