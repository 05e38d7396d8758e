"""A helper process that applies pulled ops to the SQLite projection while the sync round
goes on storing the next batches in the op log: a big pull uses both cores.

Storing an op (LMDB, ``replication.receive``) and applying it (SQLite rows, FTS5 and
sqlite-vec inserts, ``replication.catch_up``) are each about half of what a pull costs on
this side, and both are CPU work under one GIL; in two processes they overlap.  The
helper is an optimisation only, never needed for correctness:

* it runs the very ``catch_up`` every process runs (the daemon and the CLI already share a
  store this way): SQLite's write lock and the ``applied`` mark keep two of them from
  applying an op twice, and each replica's ops still go in sequence order;
* it never embeds: the round caches every pulled memory's vector in the op log before it
  commits the ops (``replication.receive_batch``); a missing vector stops the helper and
  the round applies the rest itself;
* when the round ends (or fails, or is killed: the helper sees its stdin close) the helper
  applies what is left and exits; the round then waits for it and runs its own catch-up,
  which finds nothing left, or everything the helper did not get to.

Protocol: the round writes a line to the helper's stdin after each committed batch; the
helper catches up once per line and once more at end of input.
"""
from __future__ import annotations

import subprocess
import sys
from typing import Any

from .handle import store_of

# a round expecting at least this many ops starts a helper (its imports alone take ~0.15 s)
MIN_OPS = 20_000
_WAIT_S = 600  # at most this long for the helper to finish (it is then stopped)


class Applier:
    """The round's side: start, ``poke`` after each stored batch, ``finish`` at the end."""

    def __init__(self, store: Any) -> None:
        store = store_of(store)  # a StoreHandle (sync/handle.py)
        sql = store.sql
        self.store = store
        self.failure: str | None = None  # why it stopped early, if it did (its last stderr line)
        args = [sys.executable, "-m", "brandmind.sync.applier", str(store.paths.lmdb_dir),
                str(store.paths.sqlite_file), sql.model, str(sql.dim)]
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except OSError as exc:  # no process to be had: the round applies everything itself
            self.proc, self.failure = None, f"could not start: {exc}"

    def poke(self) -> None:
        """New ops are stored: apply them."""
        if self.proc is None or self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write(b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):  # it stopped: the round applies the rest itself
            pass

    def finish(self) -> int | None:
        """Let it apply what is left and wait for it; its exit status (None: not run or stopped)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        try:  # (closes its stdin: end of input)
            _, err = proc.communicate(timeout=_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            self.failure = f"stopped after {_WAIT_S} s"
            return None
        finally:
            self.store.searcher.invalidate()
        if proc.returncode:
            lines = (err or b"").decode(errors="replace").strip().splitlines()
            self.failure = lines[-1] if lines else f"exit status {proc.returncode}"
        return proc.returncode


class _Missing(Exception):
    """A pulled memory's vector is not in the cache: leave the rest to the round."""


def main(argv: list[str]) -> int:
    """``python -m brandmind.sync.applier LMDB_DIR SQLITE_FILE MODEL DIM``"""
    from pathlib import Path

    from brandmind.bulk import gc_paused
    from brandmind.oplog import OpLog
    from brandmind.projection import apply_sql_side
    from brandmind.replication import catch_up
    from brandmind.sqlstore import SQLStore

    lmdb_dir, sqlite_file, model, dim = argv[0], argv[1], argv[2], int(argv[3])
    log = OpLog(Path(lmdb_dir))
    sql = SQLStore(Path(sqlite_file), model=model, dim=lambda: dim)
    size = 4 * dim

    def vector_for(text: str) -> bytes:
        raw = log.cached_vector(model, text)
        if raw is None or len(raw) != size:
            raise _Missing(text)
        return raw

    try:
        with gc_paused():
            while True:
                catch_up(log, sql, vector_for, apply=apply_sql_side)
                if not sys.stdin.buffer.readline():
                    catch_up(log, sql, vector_for, apply=apply_sql_side)
                    return 0
    except _Missing:
        print("a pulled memory's vector is not in the cache", file=sys.stderr)
        return 3
    finally:
        sql.close()
        log.close()


if __name__ == "__main__":  # pragma: no cover - run as a process by Applier
    sys.exit(main(sys.argv[1:]))
