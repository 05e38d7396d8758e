"""What `bm daemon run` keeps warm besides the sync loop: the socket server and the worker.

The sync loop (``sync/daemon.py``) owns the open store and reopens it when `bm rebuild` or
`bm config set` changed it; the server (``cli/serve.py``) runs commands on it and the
worker (``sync/worker.py``) makes the vectors and extractions that accepted writes left
for later.  All three take the loop's ``guard`` lock while they use the store.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable


LMDB_MAGIC = 0xBEEFC0DE  # MDB_meta.mm_magic, right after the first page's 16-byte header


class Resident:
    """The resident store as the server sees it (see the module docstring)."""

    def __init__(self, daemon: Any, worker: Any = None) -> None:
        self.daemon = daemon
        self.lock = daemon.guard
        self.worker = worker
        self._memory: Any = None
        self._seq: int | None = daemon.mem.log.own_seq() if daemon.mem is not None else None

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
        """Reopen the store if `bm rebuild` / `bm config set` changed it; RunLocally when its
        index file no longer looks like SQLite (damaged under the open store: the client
        opens it afresh and gets the error that names `bm doctor` and `bm rebuild`)."""
        from .common import RunLocally

        self.daemon.maybe_reopen()
        if self.store is None:
            raise RunLocally(f"the daemon cannot open the store: {self.daemon.open_error}")
        paths = self.store.paths
        try:
            with open(paths.sqlite_file, "rb") as fh:
                index = fh.read(16)
            with open(paths.lmdb_dir / "data.mdb", "rb") as fh:
                log = fh.read(20)
        except OSError as exc:
            raise RunLocally(f"cannot read the store's files: {exc}") from None
        if index != b"SQLite format 3\x00":
            raise RunLocally("the memory index is not an SQLite file any more")
        if len(log) < 20 or int.from_bytes(log[16:20], "little") != LMDB_MAGIC:
            raise RunLocally("the op log's file is not an LMDB file any more")

    def deferring(self, defer: bool) -> Any:
        """Writes in this block leave their vectors to the worker (when it runs)."""
        if defer and self.worker is not None:
            return self.store.deferring_vectors()
        return nullcontext()

    def wrote(self) -> None:
        """After a request: wake the worker if the op log grew (this or another process)."""
        store = self.store
        if self.worker is None or store is None:
            return
        seq = store.log.own_seq()
        if seq != self._seq:
            self._seq = seq
            self.worker.wake()

    def status(self) -> dict | None:
        return self.worker.status() if self.worker is not None else None


def start_services(daemon: Any) -> Callable[[], None]:
    """Start the worker and the socket server for ``daemon``'s store; returns their stop."""
    from brandmind.sync.worker import Worker

    from .serve import Server

    from . import queue

    worker = Worker(lambda: daemon.mem, daemon.guard)
    resident = Resident(daemon, worker)
    worker.start()
    queue.WORKER = worker  # `bm queue` run by the server shows the worker's counters
    server = Server(resident, daemon.mem.config.paths.state_dir).start()

    def stop() -> None:
        server.stop()
        worker.stop()

    return stop
