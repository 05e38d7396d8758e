"""Shared by scripts/bench_service.py: a store's shell (`bm` subprocesses in one BM_HOME, with
or without its daemon), timings, and a read-only look at which memories have their vector.

Everything here calls `bm` as a user's script would: a new process per command, output
captured, wall clock around the whole process (interpreter start included).
"""
from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import bmcmd  # scripts/bmcmd.py: this folder is on sys.path when a script runs
from bench_speed import pct  # q-th percentile, linear interpolation (the one every bench uses)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load() -> float:
    return round(os.getloadavg()[0], 2)


def ms(values: list[float]) -> dict:
    """Median, p95, min and max of wall times (seconds in, milliseconds out)."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "median": round(statistics.median(values) * 1000, 1),
            "p95": round(pct(values, 95) * 1000, 1), "min": round(min(values) * 1000, 1),
            "max": round(max(values) * 1000, 1)}


def interpreter(script: str) -> str:
    """The Python a console script runs on (its ``#!`` line), else this one."""
    try:
        with open(script, "rb") as fh:
            first = fh.readline().decode("utf-8", "replace").strip()
    except OSError:
        return sys.executable
    path = first[2:].strip().split()[0] if first.startswith("#!") and first[2:].strip() else ""
    return path if path and os.path.isfile(path) else sys.executable


class Shell:
    """`bm` commands against one store (``home``), as a shell script runs them.  The environment
    is the caller's without any ``BM_*`` variable (so the real default embedder), plus
    ``BM_HOME`` and ``extra``."""

    BM: str | None = None  # --bm: another installation's `bm` (e.g. a wheel in a fresh venv)

    def __init__(self, home: Path, extra: dict | None = None) -> None:
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.bm = self.BM or bmcmd.find_bm("bench")
        self.python = interpreter(self.bm)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("BM_") or k == "BM_CACHE_DIR"}
        self.env.update({"BM_HOME": str(self.home), "GRAPHITI_TELEMETRY_ENABLED": "false", **(extra or {})})
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.daemon_up = False

    def run(self, *args: str, input: bytes | None = None, env: dict | None = None, check: bool = True,
            timeout: float = 600) -> dict:
        """``bm ARGS``: wall seconds, exit code, stdout, stderr."""
        return self.timed([self.bm, *args], input=input, env=env, check=check, timeout=timeout)

    def cold(self, *args: str, **kw: Any) -> dict:
        """``BM_NO_DAEMON=1 bm ARGS``: the command in its own process, as without a daemon."""
        return self.run(*args, env={"BM_NO_DAEMON": "1"}, **kw)

    def timed(self, cmd: list[str], *, input: bytes | None = None, env: dict | None = None, check: bool = True,
              timeout: float = 600) -> dict:
        full = {**self.env, **(env or {})}
        t0 = time.perf_counter()
        p = subprocess.run(cmd, input=input, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=None if input is not None else subprocess.DEVNULL, timeout=timeout)
        wall = time.perf_counter() - t0
        out = {"wall": wall, "rc": p.returncode, "stdout": p.stdout.decode("utf-8", "replace"),
               "stderr": p.stderr.decode("utf-8", "replace"), "t0": t0, "t1": t0 + wall}
        if check and p.returncode != 0:
            raise SystemExit(f"bench: {' '.join(cmd[:4])} ... failed with exit {p.returncode}: "
                             f"{out['stderr'].strip()[-800:]}")
        return out

    def floor(self) -> float:
        """``python -c pass`` (the interpreter `bm` runs on): its own start, the floor of any `bm` command."""
        return self.timed([self.python, "-c", "pass"])["wall"]

    def json(self, *args: str, **kw: Any) -> Any:
        return json.loads(self.run(*args, **kw)["stdout"])

    # -- the daemon --------------------------------------------------------------------------------
    def start(self) -> None:
        """``bm init`` (if needed) and ``bm daemon start``; waits until it answers a forwarded command."""
        if not (self.home / "data").exists():
            self.cold("init", "--json")
        self.run("daemon", "start", "--json")
        self.daemon_up = True
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (self.queue() or {}).get("running"):  # the worker's counters: the daemon answered
                return
            time.sleep(0.2)
        raise SystemExit(f"bench: the daemon of {self.home} did not answer within 120 s")

    def stop(self) -> None:
        if self.daemon_up:
            self.run("daemon", "stop", "--json", check=False)
            self.daemon_up = False

    def queue(self) -> dict:
        return self.json("queue", "--json")

    def drained(self, total: int, poll: float = 1.0, limit: float = 3600,
                progress: Callable[[dict], None] | None = None) -> list[tuple[float, int]]:
        """Poll `bm queue --json` until ``total`` memories exist and none waits for its vector;
        returns the (time, vectors made) samples."""
        samples, deadline = [], time.monotonic() + limit
        while True:
            q = self.queue()
            samples.append((time.perf_counter(), int(q.get("vectors", 0))))
            if progress:
                progress(q)
            if q.get("memories", 0) >= total and not q.get("vectors_pending"):
                return samples
            if q.get("last_error"):
                raise SystemExit(f"bench: the worker failed: {q['last_error']}")
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: the backlog did not drain within {limit:.0f} s: {q}")
            time.sleep(poll)


class VectorWatch:
    """Which memories have their vector, read from the store's SQLite file READ-ONLY (another
    connection; the daemon keeps writing): a memory is vectorised once its row exists and its
    ``vec_pending`` row is gone (the worker writes the vector and deletes that row in one
    transaction, so this is the moment the vector is there for recall).  A thread polls every
    ``every`` seconds and records, per text marker found by ``key(text)``, the first poll that
    saw it vectorised: an over-estimate of the lag by at most one poll interval."""

    def __init__(self, sqlite_file: Path, key: Callable[[str], str | None], every: float = 0.02) -> None:
        self.conn = sqlite3.connect(f"file:{sqlite_file}?mode=ro", uri=True, check_same_thread=False)
        self.base = self.conn.execute("SELECT coalesce(max(rowid), 0) FROM memories").fetchone()[0]
        self.key, self.every = key, every
        self.seen: dict[str, float] = {}
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "VectorWatch":
        self._thread.start()
        return self

    def _run(self) -> None:
        sql = ("SELECT m.rowid, m.text FROM memories m WHERE m.rowid > ? AND NOT EXISTS "
               "(SELECT 1 FROM vec_pending p WHERE p.rowid = m.rowid) ORDER BY m.rowid")
        while not self._stop.is_set():
            try:
                rows = self.conn.execute(sql, (self.base,)).fetchall()
            except sqlite3.OperationalError:  # busy during a checkpoint: the next poll sees it
                rows = []
            now = time.perf_counter()
            self.polls += 1
            for _, text in rows:
                k = self.key(text)
                if k is not None and k not in self.seen:
                    self.seen[k] = now
            time.sleep(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.conn.close()
