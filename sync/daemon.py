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
* after a pull with an S3 remote, the remote is compacted (sync/compact.py) once
  ``sync_compact_interval`` s (86400; 0: never) have passed since any device last did;
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

This module is the loop (:class:`Daemon`, :func:`run`); ``schedule.py`` decides when a step
is due, ``daemonctl.py`` holds the lock, the state file and start / stop (its names are
re-exported here).
"""
from __future__ import annotations

import json
import logging
import os
import select
import signal
import sys
import threading
import time
from os import _exit as hard_exit  # documented stdlib API: end the process now, from any thread
from pathlib import Path
from typing import Any, Callable

from brandmind.errors import BMError

from .daemonctl import (LOCK_NAME, LOG_NAME, STATE_NAME, STDERR_NAME, STOP_GRACE, DaemonError, DaemonRunning,
                        StoreLock, iso_wall, lock_path, log_path, paths_of, read_json, running_pid, start, state,
                        state_path, stderr_path, stop, summary, write_json)
from .handle import store_of
from .schedule import BACKOFF_BASE, MIN_RETRY, Schedule, backoff_delay, clock

__all__ = ["BACKOFF_BASE", "LOCK_NAME", "LOG_NAME", "MIN_RETRY", "POLL_SECONDS", "STATE_NAME", "STDERR_NAME",
           "STOP_GRACE", "ConfiguredRemotes", "Daemon", "DaemonError", "DaemonRunning", "Schedule", "StoreLock",
           "backoff_delay", "clock", "lock_path", "log_path", "read_json", "run", "running_pid", "setup_logging",
           "start", "state", "state_path", "stderr_path", "stop", "summary"]

LOG_MAX_BYTES = 1_000_000      # daemon.log is rotated at this size ...
LOG_BACKUPS = 3                # ... keeping daemon.log.1 .. daemon.log.3
POLL_SECONDS = 2.0             # how often an idle daemon looks for new local ops
STATE_VERSION = 1

log = logging.getLogger("brandmind.sync.daemon")


# ---------------------------------------------------------------------------- logging
def setup_logging(paths: Any, *, to_stderr: bool, level: int = logging.INFO) -> logging.Logger:
    """daemon.log in the state directory, rotated by size; also stderr in the foreground."""
    from logging.handlers import RotatingFileHandler

    paths = paths_of(paths)
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
    return store_of(mem).log.own_seq()


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
    """An empty store starts from the remote's newest snapshot, by the rule `bm sync now`
    follows (sync/bootstrap.py).  If that fails, the sync replays every op instead."""
    from .bootstrap import maybe_bootstrap

    try:
        done = maybe_bootstrap(store_of(mem), remote, pull=True)
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
                 reopen: Callable[[], Any] | None = None, guard: Any = None) -> None:
        cfg = mem.config
        self.mem = mem
        self.reopen = reopen  # opens the store again (None: never)
        self.paths = cfg.paths
        self.open_error: str | None = None
        # held while this loop uses the store: the socket server and the worker take it too
        self.guard = guard if guard is not None else threading.RLock()
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
        self.next_compact: dict[str, float] = {}  # per remote: when to look at compact.json again
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
                hard_exit(0)

    # -- state ------------------------------------------------------------------
    def _sched(self, name: str, now: float) -> Schedule:
        if name not in self.schedules:
            self.schedules[name] = Schedule.starting(now, **self.intervals)
        return self.schedules[name]

    def write_state(self, status: str) -> None:
        now, wall = self.clock(), time.time()

        def at(t: float | None) -> str | None:
            return None if t is None else iso_wall(wall + max(0.0, t - now))

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
                "started_at": iso_wall(self._started_wall), "started_wall": self._started_wall,
                "updated_at": iso_wall(wall), "steps": self.steps,
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
            write_json(self.state_file, data)
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
            with self.guard:  # a step is short next to the intervals; commands wait for it
                if pull and not self._fake_sync:
                    _bootstrap_if_empty(self.mem, remote)
                report = self._sync_once()(store_of(self.mem), remote, push=push, pull=pull) or {}
            errors = [_error_text(e) for e in (report.get("errors") or [])]
            if pull and not errors and not self._fake_sync:  # a device up to date compacts
                self.maybe_compact(remote)
        except BMError as exc:
            errors = [_short(exc)]
        except Exception as exc:  # a remote's bug or an I/O error: log it, back off, go on
            log.exception("unexpected error in a sync step with %s", name)
            errors = [_short(exc)]
        now = self.clock()
        ok = not errors
        sched.done(now, pushed=push, pulled=pull, ok=ok)
        self.steps += 1
        wall = iso_wall(time.time())
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

    def maybe_compact(self, remote: Any) -> dict | None:
        """After a pull: compact an S3 remote (sync/compact.py) when
        ``sync_compact_interval`` seconds have passed since the last compaction by any
        device (compact.json's time); between checks of the remote, this device's own clock
        (``self.clock``) says when to look again.  A failure is logged, retried next interval."""
        from .compact import compact, due
        from .remote import ObjectRemote

        interval = int(getattr(self.mem.config, "sync_compact_interval", 0) or 0)
        name = getattr(remote, "name", None) or repr(remote)
        now = self.clock()
        if interval <= 0 or not isinstance(remote, ObjectRemote) or now < self.next_compact.get(name, now):
            return None
        try:
            with self.guard:
                wait = due(remote, interval)
                if wait > 0:
                    self.next_compact[name] = now + wait
                    return None
                done = compact(store_of(self.mem), remote)
        except BMError as exc:
            log.warning("could not compact %s (%s); trying again in %d s", name, _short(exc), interval)
            self.next_compact[name] = now + interval
            return None
        self.next_compact[name] = now + interval
        log.info("compacted %s: %s", name, json.dumps(done, default=str)[:500])
        return done

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

    def maybe_reopen(self) -> None:
        """Open the store again if `bm rebuild` replaced its index or `bm config set` changed
        its config (two stats).  Call it holding ``guard``.  If it cannot be opened (say a
        broken config.toml), ``mem`` is None and ``open_error`` says why until the files
        change again: the daemon keeps running, commands run in their own processes (which
        report the error) and nothing syncs."""
        if self.reopen is None:
            return
        sig = store_signature(self.paths)
        if sig == self._store_sig and (self.mem is not None or self.open_error):
            return
        self._store_sig = sig
        if self.mem is not None:
            log.info("the store's index or config changed (bm rebuild, bm config set?): reopening the store")
            self.mem.close()
            self.mem = None
        try:
            self.mem = self.reopen()
        except BMError as exc:
            self.open_error = _short(exc)
            log.error("cannot open the store (%s); waiting until its files change", self.open_error)
            return
        self.open_error = None
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
        with self.guard:
            self.maybe_reopen()
        if self.mem is None:
            return self.poll
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
        poll: float = POLL_SECONDS, grace: float = STOP_GRACE,
        services: Callable[["Daemon"], Callable[[], None]] | None = None) -> int:
    """Run the daemon for a store (a home directory, or None for the configured one) in
    this process until SIGTERM/SIGINT; returns the exit code.

    Takes the store lock first (:class:`DaemonRunning` if another daemon has it), then
    opens the store.  ``remotes``: an object with ``current()`` or a list of remotes
    (default: the configured remotes, read again when remotes.toml changes: with none the
    loop only watches, and syncing starts when one is added).  ``services(daemon)`` starts
    what else the process does (the socket server and the worker, ``cli/daemon.py``) and
    returns the function that stops it."""
    from brandmind.config import Config
    from brandmind.errors import StoreMissing
    from brandmind.store import Store

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
        mem = Store(cfg)
        daemon = None
        stop_services: Callable[[], None] | None = None
        try:
            if isinstance(remotes, (list, tuple)):
                fixed = list(remotes)
                remotes = type("FixedRemotes", (), {"current": lambda self: fixed})()
            source = remotes if remotes is not None else ConfiguredRemotes(mem)
            source.current()  # a broken remotes file stops the start, with its error
            daemon = Daemon(mem, remotes=source, sync=sync, poll=poll, grace=grace,
                            reopen=lambda: Store(load()))
            daemon.install_signal_handlers()
            if services is not None:
                stop_services = services(daemon)
            return daemon.run()
        finally:
            if stop_services is not None:
                stop_services()
            current = daemon.mem if daemon is not None else mem
            if current is not None:
                with daemon.guard if daemon is not None else threading.RLock():
                    current.close()
    finally:
        lock.release()
