"""The resident daemon's worker: makes the vectors and runs the extractions its requests left
for later (brandmind/backlog.py has the steps and what makes them safe to kill).

One thread sleeps until ``wake()`` (called after each accepted write) or ``IDLE`` seconds,
then embeds the waiting memories in batches of ``batch`` at the model's full speed (the
embedder runs outside the store lock, so requests go on meanwhile), then runs the queued
extraction jobs, oldest first.  A failing step backs off (doubling, up to ``max_backoff``)
and is reported by ``status()``; its work stays queued.

    worker = Worker(lambda: mem.store, lock)   # the daemon's store and its lock
    worker.start(); ...; worker.wake(); ...; worker.drain(30); worker.stop()
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

IDLE = 1.0


class Worker:
    """See the module docstring.  ``get_store``: the store (asked under the lock each step);
    ``lock``: the lock every request takes before touching it."""

    def __init__(self, get_store: Callable[[], Any], lock: Any, *, batch: int = 128,
                 idle: float = IDLE, max_backoff: float = 60.0) -> None:
        self.get_store = get_store
        self.lock = lock
        self.batch = batch
        self.idle = idle
        self.max_backoff = max_backoff
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()  # set while the worker found nothing to do
        self._thread: threading.Thread | None = None
        self._stats = {"accepted": 0, "embedded": 0, "batches": 0, "jobs_done": 0, "jobs_failed": 0,
                       "index_saved": 0, "failures": 0, "last_error": None, "last_error_at": None, "backoff": 0.0,
                       "busy": None}
        self._mu = threading.Lock()  # guards _stats

    # -- control -----------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="bm-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the step under way (its work commits or is redone later)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wake(self) -> None:
        """A write was accepted: look for work now."""
        with self._mu:
            self._stats["accepted"] += 1
        self._idle.clear()
        self._wake.set()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until nothing runnable is left (True) or ``timeout`` seconds pass (False)."""
        from brandmind import backlog

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.lock:
                store = self.get_store()
                left = backlog.pending(store) or backlog.next_job(store) is not None
            if not left:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self._idle.clear()
            self._wake.set()
            self._idle.wait(0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic())))

    def status(self) -> dict:
        """The worker's counters and the store's backlog: ``{"running", "accepted", "embedded",
        "batches", "jobs_done", "jobs_failed", "failures", "last_error", "backoff", "busy",
        "vectors_pending", "jobs_queued", "jobs_failing", ...}``."""
        from brandmind import backlog

        with self._mu:
            out = dict(self._stats)
        out["running"] = self._thread is not None and self._thread.is_alive()
        with self.lock:
            store = self.get_store()
            for key, value in backlog.status(store).items():
                if key == "last_error":
                    out["last_error"] = out["last_error"] or value
                else:
                    out[key] = value
        return out

    # -- the thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            if backoff:  # after a failure: wakes (accepted writes) do not cut the pause short
                self._stop.wait(backoff)
            else:
                self._wake.wait(self.idle)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                while not self._stop.is_set() and self._step():
                    pass
                self._housekeep()
                self._save_index()
                backoff = 0.0
                self._idle.set()
            except Exception as exc:  # reported and retried later: the work stays queued
                backoff = min(self.max_backoff, max(1.0, 2 * backoff))
                self._failed(exc, backoff)
            finally:
                self._set("busy", None)

    def _housekeep(self) -> None:
        """Forget what expired (--ttl) and write recall's access counts (brandmind/expiry.py)."""
        from brandmind import expiry

        self._set("busy", "expiry")
        forgotten = expiry.housekeeping(self.get_store, self.lock)
        if forgotten:
            with self._mu:
                self._stats["expired"] = self._stats.get("expired", 0) + forgotten

    def _save_index(self) -> None:
        """Nothing left to do: write the recall index file if the daemon is well ahead of it."""
        from brandmind import backlog

        self._set("busy", "index")
        if backlog.save_index(self.get_store, self.lock):
            with self._mu:
                self._stats["index_saved"] += 1

    def _step(self) -> bool:
        """One unit of work (a batch of vectors, else one job); False when there was none."""
        from brandmind import backlog

        self._set("busy", "vectors")
        taken, filled = backlog.vector_step(self.get_store, self.lock, self.batch)
        if taken:
            with self._mu:
                self._stats["embedded"] += filled
                self._stats["batches"] += 1
            return True
        self._set("busy", "extract")
        try:
            report = backlog.job_step(self.get_store, self.lock)
        except Exception:
            with self._mu:
                self._stats["jobs_failed"] += 1
            raise
        if report is None:
            return False
        with self._mu:
            self._stats["jobs_done"] += 1
        return True

    def _failed(self, exc: BaseException, backoff: float) -> None:
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        with self._mu:
            self._stats.update(failures=self._stats["failures"] + 1, last_error=message,
                               last_error_at=time.time(), backoff=backoff)

    def _set(self, key: str, value: Any) -> None:
        with self._mu:
            self._stats[key] = value
