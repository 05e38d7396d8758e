"""What `bm daemon run` keeps warm besides the sync loop: the socket server and the worker.

The sync loop (``sync/daemon.py``) owns the open store and reopens it when `bm rebuild` or
`bm config set` changed it; the server (``cli/serve.py``) runs commands on it and the
worker (``sync/worker.py``) makes the vectors and extractions that accepted writes left
for later.  All three take the loop's ``guard`` lock while they use the store.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable


class Resident:
    """The resident store as the server sees it (see the module docstring)."""

    def __init__(self, daemon: Any, worker: Any = None) -> None:
        self.daemon = daemon
        self.lock = daemon.guard
        self.worker = worker
        self._memory: Any = None

    @property
    def store(self) -> Any:
        return self.daemon.mem

    def memory(self) -> Any:
        """A Memory over the resident store (made again when the loop reopened the store)."""
        from brandmind.memory import Memory

        if self._memory is None or self._memory.store is not self.store:
            self._memory = Memory.over(self.store)
        return self._memory

    def refresh(self) -> None:
        self.daemon.maybe_reopen()

    def deferring(self, defer: bool) -> Any:
        """Writes in this block leave their vectors to the worker (when it runs)."""
        if defer and self.worker is not None:
            return self.store.deferring_vectors()
        return nullcontext()

    def wrote(self) -> None:
        if self.worker is not None:
            self.worker.wake()

    def status(self) -> dict | None:
        return self.worker.status() if self.worker is not None else None


def start_services(daemon: Any) -> Callable[[], None]:
    """Start the worker and the socket server for ``daemon``'s store; returns their stop."""
    from .serve import Server

    try:  # TEMP until sync/worker.py lands
        from brandmind.sync.worker import Worker
        worker = Worker(lambda: daemon.mem, daemon.guard)
    except ImportError:
        worker = None
    resident = Resident(daemon, worker)
    if worker is not None:
        worker.start()
    server = Server(resident, daemon.mem.config.paths.state_dir).start()

    def stop() -> None:
        server.stop()
        worker.stop()

    return stop
