"""The sync daemon: push this device's ops and pull the other devices' ops on a schedule.

The daemon only syncs (see ARCHITECTURE.md): CLI commands never go through it, and
everything it does is one :func:`brandmind.sync.engine.sync_once` call per remote, the
same call ``bm sync now`` makes.  The local op log is the durable queue: the daemon keeps
no queue of its own, so killing it at any point (kill -9 included) loses nothing; a push
whose watermark was not recorded is simply pushed again and the remote treats identical
ops as already there.

Schedule, per remote (config keys, whole seconds / ops):

* push every ``sync_push_interval`` s (60) or as soon as ``sync_push_after_ops`` (100) new
  local ops exist, pull every ``sync_pull_interval`` s (120); the first sync runs at start;
* a failed step is retried after a capped exponential backoff with full jitter
  (:func:`backoff_delay`: uniform in ``[0, min(sync_backoff_max, 5 s * 2^(n-1))]``, at
  least 1 s); a success resets it;
* the next tick is counted from when a step *ends*, on a clock that keeps counting while
  the machine sleeps (CLOCK_BOOTTIME where there is one): ticks missed while the daemon was
  busy or the machine was asleep are skipped, never run back to back (:class:`Schedule`,
  pure and tested with a fake clock).

Idle cost: the loop sleeps in ``select`` on a self-pipe with a timeout, waking every
:data:`POLL_SECONDS` to read one LMDB meta value (this replica's next sequence number)
and to stat the remotes file; no busy loop.

Stopping: SIGTERM (and SIGINT, e.g. Ctrl-C in the foreground) lets the step in progress
finish, then the daemon exits 0.  A step still running after :data:`STOP_GRACE` seconds is
abandoned (process exit; safe for the reasons above); a second signal abandons it at once.

One instance per store: an exclusive ``fcntl.flock`` on ``<data_dir>/daemon.lock``, which
also holds the pid.  Files in the state directory (``BM_HOME/state`` or
``$XDG_STATE_HOME/brandmind``): ``daemon.log`` (rotated by size), ``daemon.json`` (what
``bm daemon status`` and ``bm sync status`` show, read through :func:`state`) and
``daemon.stderr`` (the output of a detached daemon, e.g. its start-up error).
"""
from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import random
import select
import signal
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from brandmind.errors import BMError

LOCK_NAME = "daemon.lock"      # in the store's data directory
STATE_NAME = "daemon.json"     # in the state directory
LOG_NAME = "daemon.log"
STDERR_NAME = "daemon.stderr"
LOG_MAX_BYTES = 1_000_000      # daemon.log is rotated at this size ...
LOG_BACKUPS = 3                # ... keeping daemon.log.1 .. daemon.log.3
POLL_SECONDS = 2.0             # how often an idle daemon looks for new local ops
STOP_GRACE = 20.0              # a step still running this long after SIGTERM is abandoned
BACKOFF_BASE = 5.0             # first retry delay ceiling, doubled per failure
MIN_RETRY = 1.0                # never retry sooner than this
STATE_VERSION = 1

log = logging.getLogger("brandmind.sync.daemon")


class DaemonRunning(BMError):
    """Another daemon holds this store's lock."""


class DaemonError(BMError):
    """The daemon could not be started, stopped or installed."""


# ---------------------------------------------------------------------------- clock
def clock() -> float:
    """Seconds on a monotonic clock that keeps counting while the machine is suspended
    (CLOCK_BOOTTIME on Linux; plain monotonic elsewhere)."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        return time.clock_gettime(boottime)
    return time.monotonic()


def _iso(wall: float | None) -> str | None:
    if wall is None:
        return None
    return datetime.fromtimestamp(wall, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


# ---------------------------------------------------------------------------- pure schedule
def backoff_delay(failures: int, *, base: float = BACKOFF_BASE, cap: float = 900.0,
                  rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait after ``failures`` failures in a row: full jitter over a capped
    exponential ceiling, ``uniform(0, min(cap, base * 2**(failures-1)))``, at least
    :data:`MIN_RETRY` (and never above ``cap``).  0 when nothing failed."""
    if failures <= 0:
        return 0.0
    ceiling = min(cap, base * 2.0 ** min(failures - 1, 60))
    return min(max(cap, MIN_RETRY), max(MIN_RETRY, rand() * ceiling))


@dataclass
class Schedule:
    """When one remote is due for a push and a pull (pure: the caller passes the clock).

    ``due`` says what to do now; ``done`` records how a step went.  Intervals run from the
    END of the step that satisfied them, so however long a step took or the machine slept,
    the next tick is one interval later: missed ticks are skipped, not replayed."""

    push_interval: float
    pull_interval: float
    push_after_ops: int
    backoff_cap: float = 900.0
    backoff_base: float = BACKOFF_BASE
    next_push: float = 0.0
    next_pull: float = 0.0
    retry_at: float = 0.0
    failures: int = 0

    @classmethod
    def starting(cls, now: float, *, push_interval: float, pull_interval: float, push_after_ops: int,
                 backoff_cap: float = 900.0, backoff_base: float = BACKOFF_BASE) -> "Schedule":
        """A schedule whose first push and pull are due at ``now`` (a sync at start)."""
        return cls(push_interval, pull_interval, push_after_ops, backoff_cap, backoff_base,
                   next_push=now, next_pull=now)

    def due(self, now: float, new_ops: int) -> tuple[bool, bool]:
        """(push?, pull?) at ``now`` with ``new_ops`` local ops since the last push."""
        if now < self.retry_at:
            return False, False
        push = now >= self.next_push or new_ops >= self.push_after_ops
        pull = now >= self.next_pull
        return push, pull

    def done(self, now: float, *, pushed: bool, pulled: bool, ok: bool,
             rand: Callable[[], float] = random.random) -> None:
        """Record a step that ended at ``now``.  A failed step leaves its work due and
        blocks every step of this remote until the backoff delay has passed."""
        if ok:
            self.failures = 0
            self.retry_at = 0.0
            if pushed:
                self.next_push = now + self.push_interval
            if pulled:
                self.next_pull = now + self.pull_interval
        else:
            self.failures += 1
            self.retry_at = now + backoff_delay(self.failures, base=self.backoff_base,
                                                cap=self.backoff_cap, rand=rand)

    def wake_at(self) -> float:
        """The earliest time a step can become due by the clock alone."""
        return max(min(self.next_push, self.next_pull), self.retry_at)

    def backing_off(self, now: float) -> bool:
        return now < self.retry_at


# ---------------------------------------------------------------------------- files
def lock_path(paths: Any) -> Path:
    return Path(paths.data_dir) / LOCK_NAME


def state_path(paths: Any) -> Path:
    return Path(paths.state_dir) / STATE_NAME


def log_path(paths: Any) -> Path:
    return Path(paths.state_dir) / LOG_NAME


def stderr_path(paths: Any) -> Path:
    return Path(paths.state_dir) / STDERR_NAME


def _paths_of(obj: Any) -> Any:
    """A ``Paths`` from a Memory, a Config or a Paths (None: the configured store)."""
    if obj is None:
        from brandmind.config import resolve_paths

        return resolve_paths()
    if hasattr(obj, "state_dir"):
        return obj
    if hasattr(obj, "paths"):
        return obj.paths
    if hasattr(obj, "config"):
        return obj.config.paths
    raise TypeError(f"not a store, config or paths: {obj!r}")


def _write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class StoreLock:
    """The one-daemon-per-store lock: ``flock(LOCK_EX)`` on ``<data_dir>/daemon.lock``,
    which then holds the owner's pid.  Released when the process ends, however it ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, attempts: int = 8) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        for attempt in range(attempts):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                # a `bm daemon status` may be probing the lock for a moment: retry briefly
                time.sleep(0.05 * (attempt + 1))
        else:
            pid = _read_pid(fd)
            os.close(fd)
            raise DaemonRunning(
                f"a bm daemon is already running for this store (pid {pid if pid else 'unknown'})",
                hint="`bm daemon status` shows it; `bm daemon stop` stops it")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            finally:
                os.close(self.fd)  # closing the last descriptor drops the flock
                self.fd = None


def _read_pid(fd: int) -> int | None:
    for _ in range(20):  # the owner writes its pid right after taking the lock
        raw = os.pread(fd, 32, 0).strip()
        if raw.isdigit():
            return int(raw)
        time.sleep(0.025)
    return None


def running_pid(paths: Any = None) -> int | None:
    """The pid of the daemon holding this store's lock, or None when none runs.
    (-1 when the lock is held but the pid could not be read.)"""
    path = lock_path(_paths_of(paths))
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            pid = _read_pid(fd)
            return pid if pid else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def state(store: Any = None) -> dict:
    """What the daemon of this store is doing (for `bm daemon status` and `bm sync status`).

    ``store`` is a Memory, Config or Paths (default: the configured store).  Always has
    ``running`` (bool) and ``pid``; when a daemon ran here before, also ``status``,
    ``started_at``, ``uptime_s`` (running only), ``last_push``, ``last_pull``,
    ``last_success_at``, ``last_error``, ``next_push_at``, ``next_pull_at``,
    ``retry_at``, ``remotes`` (per remote) and ``log``.  Never raises for a missing or
    unreadable state file."""
    paths = _paths_of(store)
    pid = running_pid(paths)
    data = _read_json(state_path(paths)) or {}
    out: dict[str, Any] = {"running": pid is not None, "pid": pid}
    if data:
        out.update({k: v for k, v in data.items() if k not in ("running", "pid", "version")})
        if pid is None:
            if data.get("status") == "running":
                out["status"] = "dead"  # it did not get to say goodbye (kill -9, crash, reboot)
            out["last_pid"] = data.get("pid")
            for key in ("next_push_at", "next_pull_at", "retry_at", "next_tick_at"):
                out[key] = None
        elif pid != data.get("pid"):
            out["status"] = "starting"
        if pid is not None and data.get("started_wall"):
            out["uptime_s"] = round(max(0.0, time.time() - float(data["started_wall"])), 1)
    out.pop("started_wall", None)
    out["log"] = str(log_path(paths))
    return out


def summary(store: Any = None) -> dict:
    """The short form of :func:`state` for `bm sync status`: running, pid, uptime, last
    push / pull / error and the next ticks (None where unknown)."""
    st = state(store)
    keys = ("running", "pid", "status", "uptime_s", "last_push", "last_pull", "last_success_at", "last_error",
            "next_tick_at", "next_push_at", "next_pull_at", "retry_at")
    return {k: st.get(k) for k in keys}


# ---------------------------------------------------------------------------- logging
def setup_logging(paths: Any, *, to_stderr: bool, level: int = logging.INFO) -> logging.Logger:
    """daemon.log in the state directory, rotated by size; also stderr in the foreground."""
    from logging.handlers import RotatingFileHandler

    paths = _paths_of(paths)
    Path(paths.state_dir).mkdir(parents=True, exist_ok=True)
    fmt = logging.Formatter("%(asctime)s %(levelname)s [%(process)d] %(message)s")
    logger = logging.getLogger("brandmind")
    for h in list(logger.handlers):
        if getattr(h, "_bm_daemon", False):
            logger.removeHandler(h)
            h.close()
    handlers: list[logging.Handler] = [RotatingFileHandler(log_path(paths), maxBytes=LOG_MAX_BYTES,
                                                           backupCount=LOG_BACKUPS, encoding="utf-8")]
    if to_stderr:
        handlers.append(logging.StreamHandler(sys.stderr))
    for h in handlers:
        h.setFormatter(fmt)
        h._bm_daemon = True  # type: ignore[attr-defined]
        logger.addHandler(h)
    logger.setLevel(level)
    return log


# ---------------------------------------------------------------------------- remotes
class ConfiguredRemotes:
    """The remotes configured for the store (``bm remote add``, ``remotes.toml``), opened
    again only when that file changes (one stat per poll)."""

    def __init__(self, mem: Any) -> None:
        self.mem = mem
        self._sig: Any = object()
        self._remotes: list[Any] = []
        self._loaded = False

    def reopened(self, mem: Any) -> None:
        """The daemon reopened the store: open the remotes again on it."""
        self.mem = mem
        self._sig = object()

    def _signature(self) -> Any:
        from .config import remotes_path

        try:
            st = os.stat(remotes_path(self.mem.config.paths.data_dir))
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def current(self) -> list[Any]:
        sig = self._signature()
        if sig != self._sig:
            first = not self._loaded
            try:
                self._remotes = open_configured_remotes(self.mem)
            except BMError as exc:
                if first:
                    raise  # at start: the daemon refuses to run with a broken remotes file
                log.error("cannot use the changed remotes file (%s); syncing with the remotes it had before",
                          _short(exc))
            self._sig = sig
            self._loaded = True
        return self._remotes


def open_configured_remotes(mem: Any) -> list[Any]:
    """A Remote for every entry of the store's remotes.toml (S3, Zep, Graphiti)."""
    from .remotes import open_all

    return open_all(mem)


# ---------------------------------------------------------------------------- the loop
def _own_seq(mem: Any) -> int:
    """This replica's last sequence number: one LMDB read (cheap enough to poll)."""
    log_ = mem.log
    with log_.read() as txn:
        raw = txn.get(b"next_seq", db=log_.db["meta"])
    return int.from_bytes(raw, "big") - 1 if raw else 0


def store_signature(paths: Any) -> tuple:
    """What makes the daemon reopen the store: the SQLite index file replaced (`bm rebuild`)
    or the config file changed (`bm config set`).  Two stats."""
    out = []
    for path in (paths.sqlite_file, paths.config_file):
        try:
            st = os.stat(path)
            out.append((st.st_ino, st.st_mtime_ns, st.st_size) if path == paths.config_file else st.st_ino)
        except FileNotFoundError:
            out.append(None)
    return tuple(out)


def _error_text(err: Any) -> str:
    """One line for an error of a sync report (engine: {"stage", "message", "hint", ...})."""
    if isinstance(err, dict):
        text = str(err.get("message") or err.get("error") or err)
        if err.get("replica"):
            text = f"{err.get('stage', 'sync')} {err['replica']}: {text}"
        elif err.get("stage"):
            text = f"{err['stage']}: {text}"
        if err.get("hint"):
            text += f" (hint: {err['hint']})"
        return text
    return str(err)


def _short(exc: BaseException) -> str:
    if isinstance(exc, BMError):
        return exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def _bootstrap_if_empty(mem: Any, remote: Any) -> None:
    """An empty store starts from the remote's newest snapshot, as `bm sync now` does
    (S3 remotes: sync/snapshot.py).  If that fails, the sync replays every op instead."""
    if mem.log.version_vector():
        return
    try:
        from . import s3, snapshot
    except ImportError:  # pragma: no cover - a bm without snapshots
        return
    if not isinstance(remote, s3.S3Remote):
        return
    try:
        done = snapshot.bootstrap(mem, remote, forced=False)
    except BMError as exc:
        log.warning("could not start from a snapshot of %s (%s); replaying every op instead",
                    remote.name, _short(exc))
        return
    if done:
        log.info("started from a snapshot of %s: %s", remote.name, json.dumps(done, default=str)[:500])


def _intervals(cfg: Any) -> dict:
    return dict(push_interval=float(cfg.sync_push_interval), pull_interval=float(cfg.sync_pull_interval),
                push_after_ops=int(cfg.sync_push_after_ops), backoff_cap=float(cfg.sync_backoff_max))


class Daemon:
    """The sync loop for one open store.  ``remotes`` is an object with ``current() ->
    list[Remote]`` (default: the configured remotes); ``sync`` the step function
    (default: ``engine.sync_once``); ``clock`` a monotonic clock in seconds."""

    def __init__(self, mem: Any, *, remotes: Any = None, sync: Callable[..., dict] | None = None,
                 clock: Callable[[], float] = clock, poll: float = POLL_SECONDS,
                 grace: float = STOP_GRACE, state_file: Path | None = None,
                 reopen: Callable[[], Any] | None = None) -> None:
        cfg = mem.config
        self.mem = mem
        self.reopen = reopen  # opens the store again (None: never)
        self._store_sig = store_signature(cfg.paths)
        self.remotes = remotes if remotes is not None else ConfiguredRemotes(mem)
        self._sync = sync
        self._fake_sync = sync is not None  # a test's step function: no snapshot bootstrap
        self.clock = clock
        self.poll = poll
        self.grace = grace
        self.state_file = state_file or state_path(cfg.paths)
        self.intervals = _intervals(cfg)
        self.schedules: dict[str, Schedule] = {}
        self.baseline: dict[str, int] = {}       # own seq when the last good push started
        self.remote_state: dict[str, dict] = {}  # per remote: last push/pull/error
        self.stopping = False
        self.abandoned = False
        self.steps = 0
        self._signals = 0
        self._started_wall = time.time()
        self._wake_r, self._wake_w = os.pipe()
        self._dog_r, self._dog_w = os.pipe()
        for fd in (self._wake_r, self._wake_w, self._dog_w):
            os.set_blocking(fd, False)

    # -- signals --------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        dog = threading.Thread(target=self._watchdog, name="bm-daemon-stop-watchdog", daemon=True)
        dog.start()

    def _on_signal(self, signum: int, frame: Any) -> None:
        # only async-signal-safe work here: flags and pipe writes (no logging, no locks)
        self._signals += 1
        self.stopping = True
        self._signal_name = signal.Signals(signum).name
        for fd in (self._wake_w, self._dog_w):
            try:
                os.write(fd, b"x")
            except OSError:
                pass

    def _watchdog(self) -> None:
        """Bounds the stop: once a signal came, the loop has ``grace`` seconds (or until a
        second signal) to finish its step; then the process exits, abandoning the step."""
        seen = 0
        deadline: float | None = None
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._dog_r], [], [], timeout)
            if ready:
                seen += len(os.read(self._dog_r, 64))
                if deadline is None:
                    deadline = time.monotonic() + self.grace
                if seen < 2:
                    continue
            elif deadline is None or time.monotonic() < deadline:
                continue
            self.abandoned = True
            try:
                log.warning("stopping without finishing the current step (%s); the op log keeps "
                            "every op not yet pushed", "second signal" if seen >= 2 else
                            f"still busy after {self.grace:g} s")
                self.write_state("stopped")
                logging.shutdown()
            finally:
                os._exit(0)

    # -- state ------------------------------------------------------------------
    def _sched(self, name: str, now: float) -> Schedule:
        if name not in self.schedules:
            self.schedules[name] = Schedule.starting(now, **self.intervals)
        return self.schedules[name]

    def write_state(self, status: str) -> None:
        now, wall = self.clock(), time.time()

        def at(t: float | None) -> str | None:
            return None if t is None else _iso(wall + max(0.0, t - now))

        remotes = {}
        for name, sched in self.schedules.items():
            info = dict(self.remote_state.get(name, {}))
            info.update(failures=sched.failures, next_push_at=at(sched.next_push),
                        next_pull_at=at(sched.next_pull),
                        retry_at=at(sched.retry_at) if sched.backing_off(now) else None)
            remotes[name] = info

        def latest(key: str) -> Any:
            items = [r[key] for r in remotes.values() if r.get(key)]
            return max(items, key=lambda x: x["at"] if isinstance(x, dict) else x) if items else None

        def earliest(key: str) -> Any:
            items = [r[key] for r in remotes.values() if r.get(key)]
            return min(items) if items else None

        data = {"version": STATE_VERSION, "pid": os.getpid(), "status": status,
                "store": str(self.mem.config.paths.data_dir), "replica": self.mem.log.replica,
                "started_at": _iso(self._started_wall), "started_wall": self._started_wall,
                "updated_at": _iso(wall), "steps": self.steps,
                "intervals": {k: v for k, v in self.intervals.items()},
                "last_push": latest("last_push"), "last_pull": latest("last_pull"),
                "last_success_at": latest("last_success_at"), "last_error": latest("last_error"),
                "next_push_at": earliest("next_push_at") if status == "running" else None,
                "next_pull_at": earliest("next_pull_at") if status == "running" else None,
                "retry_at": earliest("retry_at") if status == "running" else None,
                "remotes": remotes}
        ticks = [v for v in (data["next_push_at"], data["next_pull_at"]) if v]
        # the next step by the clock (a push can come sooner: after sync_push_after_ops new ops)
        data["next_tick_at"] = max(min(ticks), data["retry_at"] or "") if ticks else None
        try:
            _write_json(self.state_file, data)
        except OSError as exc:  # a full disk must not stop the sync
            log.warning("cannot write %s: %s", self.state_file, exc)

    # -- one step ---------------------------------------------------------------
    def _sync_once(self) -> Callable[..., dict]:
        if self._sync is None:
            from .engine import sync_once

            self._sync = sync_once
        return self._sync

    def step(self, remote: Any, push: bool, pull: bool, seq: int) -> bool:
        """One sync_once call; updates the schedule and the state.  True when it worked."""
        name = getattr(remote, "name", None) or repr(remote)
        sched = self.schedules[name]
        info = self.remote_state.setdefault(name, {})
        t0 = self.clock()
        errors: list[str] = []
        report: dict = {}
        try:
            if pull and not self._fake_sync:
                _bootstrap_if_empty(self.mem, remote)
            report = self._sync_once()(self.mem, remote, push=push, pull=pull) or {}
            errors = [_error_text(e) for e in (report.get("errors") or [])]
        except BMError as exc:
            errors = [_short(exc)]
        except Exception as exc:  # a remote's bug or an I/O error: log it, back off, go on
            log.exception("unexpected error in a sync step with %s", name)
            errors = [_short(exc)]
        now = self.clock()
        ok = not errors
        sched.done(now, pushed=push, pulled=pull, ok=ok)
        self.steps += 1
        wall = _iso(time.time())
        took = round(now - t0, 3)
        pushed = sum((report.get("pushed") or {}).values())
        pulled = sum((report.get("pulled") or {}).values())
        if ok:
            info["last_success_at"] = wall
            if push:
                self.baseline[name] = seq
                info["last_push"] = {"at": wall, "ops": pushed, "seconds": took}
            if pull:
                info["last_pull"] = {"at": wall, "ops": pulled, "seconds": took}
            what = "+".join(w for w, on in (("push", push), ("pull", pull)) if on)
            level = logging.INFO if pushed or pulled else logging.DEBUG
            log.log(level, "%s %s: pushed %d, pulled %d ops in %.2f s", what, name, pushed, pulled, took)
        else:
            info["last_error"] = {"at": wall, "message": "; ".join(errors)[:2000]}
            log.error("sync with %s failed (%d in a row; next try in %.0f s): %s", name, sched.failures,
                      max(0.0, sched.retry_at - now), "; ".join(errors))
        return ok

    # -- the loop ---------------------------------------------------------------
    def _sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        try:
            ready, _, _ = select.select([self._wake_r], [], [], seconds)
        except InterruptedError:  # pragma: no cover - PEP 475 retries select
            return
        if ready:
            try:
                os.read(self._wake_r, 64)
            except BlockingIOError:
                pass

    def _maybe_reopen(self) -> None:
        if self.reopen is None:
            return
        sig = store_signature(self.mem.config.paths)
        if sig == self._store_sig:
            return
        log.info("the store's index or config changed (bm rebuild, bm config set?): reopening the store")
        self.mem.close()
        try:
            self.mem = self.reopen()
        except BaseException:  # e.g. a config the store cannot open with: exit with its error
            self.mem = None
            raise
        self._store_sig = store_signature(self.mem.config.paths)
        self.intervals = _intervals(self.mem.config)
        now = self.clock()
        for sched in self.schedules.values():
            for key, value in self.intervals.items():
                setattr(sched, key, value)
            # shorter intervals apply from now on; longer ones from the next tick
            sched.next_push = min(sched.next_push, now + sched.push_interval)
            sched.next_pull = min(sched.next_pull, now + sched.pull_interval)
        if hasattr(self.remotes, "reopened"):
            self.remotes.reopened(self.mem)

    def run_once(self) -> float:
        """Run every due step; returns how long to sleep before the next look."""
        self._maybe_reopen()
        remotes = self.remotes.current()
        names = {getattr(r, "name", None) or repr(r) for r in remotes}
        for gone in set(self.schedules) - names:
            del self.schedules[gone]
        now = self.clock()
        seq = _own_seq(self.mem)
        ran = False
        for remote in remotes:
            if self.stopping:
                break
            name = getattr(remote, "name", None) or repr(remote)
            sched = self._sched(name, now)
            base = self.baseline.get(name)  # None until a first push worked (due at start anyway)
            new_ops = seq - base if base is not None else 0
            push, pull = sched.due(now, new_ops)
            if push or pull:
                self.step(remote, push, pull, seq)
                ran = True
                now = self.clock()
                seq = _own_seq(self.mem)
        if ran:
            self.write_state("running")
        if not self.schedules:
            return self.poll
        wake = min(s.wake_at() for s in self.schedules.values())
        return max(0.0, min(self.poll, wake - self.clock()))

    def run(self) -> int:
        """Loop until a signal asks to stop; returns the exit code (0)."""
        remotes = self.remotes.current()
        log.info("bm daemon started (pid %d) for %s, replica %s; remotes: %s; push every %gs or "
                 "%d ops, pull every %gs", os.getpid(), self.mem.config.paths.data_dir, self.mem.log.replica,
                 ", ".join(getattr(r, "name", "?") for r in remotes) or "none",
                 self.intervals["push_interval"], self.intervals["push_after_ops"],
                 self.intervals["pull_interval"])
        self.write_state("running")
        while not self.stopping:
            timeout = self.run_once()
            if self.stopping:
                break
            self._sleep(timeout)
        log.info("%s received: stopped after %d steps", getattr(self, "_signal_name", "stop"), self.steps)
        self.write_state("stopped")
        return 0


def run(store: Any = None, *, remotes: Any = None, to_stderr: bool = True, sync: Any = None,
        poll: float = POLL_SECONDS, grace: float = STOP_GRACE) -> int:
    """Run the daemon for a store (a home directory, or None for the configured one) in
    this process until SIGTERM/SIGINT; returns the exit code.

    Takes the store lock first (:class:`DaemonRunning` if another daemon has it), then
    opens the store.  ``remotes``: an object with ``current()`` or a list of remotes
    (default: the configured remotes; none configured is an error)."""
    from brandmind.config import Config
    from brandmind.errors import StoreMissing
    from brandmind.memory import Memory

    def load() -> Any:
        return Config.load(store) if not hasattr(store, "paths") else store

    cfg = load()
    paths = cfg.paths
    if not (paths.lmdb_dir / "data.mdb").exists():
        raise StoreMissing(f"no bm store at {paths.data_dir}",
                           hint="run `bm init` first (or point BM_HOME at an existing store)")
    lock = StoreLock(lock_path(paths))
    lock.acquire()
    try:
        setup_logging(paths, to_stderr=to_stderr)
        mem = Memory(config=cfg)
        daemon = None
        try:
            if isinstance(remotes, (list, tuple)):
                fixed = list(remotes)
                remotes = type("FixedRemotes", (), {"current": lambda self: fixed})()
            source = remotes if remotes is not None else ConfiguredRemotes(mem)
            if not source.current():
                raise DaemonError("no sync remote is configured for this store",
                                  hint="add one first: `bm remote add s3 --bucket BUCKET`")
            daemon = Daemon(mem, remotes=source, sync=sync, poll=poll, grace=grace,
                            reopen=lambda: Memory(config=load()))
            daemon.install_signal_handlers()
            return daemon.run()
        finally:
            current = daemon.mem if daemon is not None else mem
            if current is not None:
                current.close()
    finally:
        lock.release()


# ---------------------------------------------------------------------------- start / stop
def start(store: Any = None, *, timeout: float = 30.0, argv: list[str] | None = None) -> dict:
    """Start ``bm daemon run`` as a detached background process (new session, stdin from
    /dev/null, output to ``daemon.stderr``) and return once it runs: {"pid", "log"}.
    A daemon that fails to start raises its own error here."""
    import subprocess

    from brandmind.config import resolve_paths
    from brandmind.errors import StoreMissing

    paths = _paths_of(store) if store is not None else resolve_paths()
    if not (paths.lmdb_dir / "data.mdb").exists():
        raise StoreMissing(f"no bm store at {paths.data_dir}",
                           hint="run `bm init` first (or point BM_HOME at an existing store)")
    pid = running_pid(paths)
    if pid is not None:
        raise DaemonRunning(f"a bm daemon is already running for this store (pid {pid})",
                            hint="`bm daemon status` shows it; `bm daemon stop` stops it")
    Path(paths.state_dir).mkdir(parents=True, exist_ok=True)
    err_file = stderr_path(paths)
    env = dict(os.environ)
    if env.get("BM_HOME"):
        env["BM_HOME"] = str(Path(env["BM_HOME"]).expanduser().resolve())
    cmd = argv or [sys.executable, "-m", "brandmind.cli.app", "daemon", "run", "--detached"]
    with open(err_file, "wb") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env,
                                start_new_session=True, close_fds=True, cwd="/")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise _child_error(err_file, code)
        data = _read_json(state_path(paths)) or {}
        if data.get("pid") == proc.pid and data.get("status") == "running":
            proc.returncode = 0  # detached on purpose: no "still running" warning on exit
            return {"pid": proc.pid, "log": str(log_path(paths)), "started": True}
        time.sleep(0.05)
    raise DaemonError(f"the daemon (pid {proc.pid}) did not report running within {timeout:g} s",
                      hint=f"see {err_file} and {log_path(paths)}; `bm daemon stop` stops it")


def _child_error(err_file: Path, code: int) -> BMError:
    try:
        lines = [line for line in err_file.read_text(encoding="utf-8", errors="replace").splitlines()
                 if line.strip()]
    except OSError:
        lines = []
    for line in reversed(lines):
        if line.startswith("Error: "):
            text = line[len("Error: "):]
            message, sep, hint = text.partition(" (hint: ")
            if message.startswith("a bm daemon is already running"):
                return DaemonRunning(message, hint.rstrip(")") if sep else None)
            return DaemonError(message, hint.rstrip(")") if sep else f"see {err_file}")
    tail = lines[-1] if lines else "no output"
    return DaemonError(f"the daemon exited with code {code} while starting: {tail}",
                       hint=f"see {err_file}")


def stop(store: Any = None, *, timeout: float = STOP_GRACE + 10) -> dict:
    """SIGTERM the store's daemon and wait until it has let go of the lock.
    {"stopped": bool, "pid": pid or None}; not running is not an error."""
    paths = _paths_of(store)
    pid = running_pid(paths)
    if pid is None:
        return {"stopped": False, "pid": None, "running": False}
    if pid < 0:
        raise DaemonError("the daemon's lock is held but its pid is unreadable",
                          hint=f"find it with `fuser {lock_path(paths)}` and stop it with kill")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running_pid(paths) != pid:
            return {"stopped": True, "pid": pid, "running": False}
        time.sleep(0.05)
    raise DaemonError(f"the daemon (pid {pid}) did not stop within {timeout:g} s",
                      hint=f"`kill -9 {pid}` is safe: the op log keeps every op it had not pushed")
