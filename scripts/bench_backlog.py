#!/usr/bin/env python3
"""Measures of the backlog (brandmind/backlog.py, sync/worker.py), reusable by
scripts/bench_service.py:

  accept   messages/s a store accepts while it defers vectors (``Memory.ingest`` in requests of
           ``--batch`` messages, as the daemon's request threads run it)     target >= 3,000
  singles  the same, one message per request (bound by the op log's fsync per commit)
  drain    vectors/s the worker makes with the configured embedder (the model's full speed)
  lag      vector lag (accepted -> vector stored) under a steady stream of ``--rate``
           messages/minute, with the worker running                           target p95 <= 5 s

    python scripts/bench_backlog.py                       # accept + singles (hash embedder)
    python scripts/bench_backlog.py --only drain,lag --embedder local --seconds 60

Each result is one JSON line with the load average (the machine is shared: say how busy it was).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def messages(n: int, start: int = 0, threads: int = 7) -> list[str]:
    """``n`` JSONL chat messages of a few threads, distinct texts."""
    return [json.dumps({"id": f"m{i}", "role": "user" if i % 2 else "assistant", "thread": f"t{i % threads}",
                        "ts": 1_700_000_000_000 + 1000 * i,
                        "content": f"message {i}: about the trip to Lisbon and hotel booking {i * 7 % 1000}"})
            for i in range(start, start + n)]


def open_store(home: Path, embedder: str) -> Any:
    os.environ["BM_HOME"] = str(home)
    os.environ["BM_EMBEDDER"] = embedder
    from brandmind.memory import Memory

    mem = Memory(create=True)
    mem.remember("warm up", user="ann")  # the model loaded, the files created
    return mem


def accept(home: Path, n: int = 5000, batch: int = 500, embedder: str = "hash") -> dict:
    """Messages/s accepted while deferring vectors, in requests of ``batch`` messages."""
    mem = open_store(home, embedder)
    lines = messages(n)
    t0 = time.perf_counter()
    with mem.store.deferring_vectors():
        for i in range(0, n, batch):
            mem.ingest(lines[i:i + batch], user="ann")
    took = time.perf_counter() - t0
    mem.close()
    return {"bench": "accept", "messages": n, "batch": batch, "seconds": round(took, 3),
            "per_s": round(n / took), "load": os.getloadavg()}


def drain(home: Path, n: int = 2000, embedder: str = "local", batch: int = 128) -> dict:
    """Vectors/s the worker makes for ``n`` waiting memories."""
    from brandmind.sync.worker import Worker

    mem = open_store(home, embedder)
    with mem.store.deferring_vectors():
        mem.ingest(messages(n), user="ann")
    lock = threading.RLock()
    worker = Worker(lambda: mem.store, lock, batch=batch)
    worker.start()
    t0 = time.perf_counter()
    worker.wake()
    worker.drain(None)
    took = time.perf_counter() - t0
    worker.stop()
    mem.close()
    return {"bench": "drain", "vectors": n, "batch": batch, "embedder": embedder, "seconds": round(took, 3),
            "per_s": round(n / took), "load": os.getloadavg()}


def lag(home: Path, rate: float = 1000, seconds: float = 30, embedder: str = "local") -> dict:
    """Accepted -> vector stored, per message, under ``rate`` messages/minute for ``seconds``."""
    from brandmind.storage.memories import pending_batch
    from brandmind.sync.worker import Worker

    mem = open_store(home, embedder)
    lock = threading.RLock()
    worker = Worker(lambda: mem.store, lock)
    worker.start()
    accepted: dict[int, float] = {}
    lags: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set() or accepted:
            with lock:
                waiting = {r for r, _ in pending_batch(mem.sql, 1 << 30)}
            now = time.perf_counter()
            for rowid in [r for r in list(accepted) if r not in waiting]:
                lags.append(now - accepted.pop(rowid))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    gap, n, t0 = 60.0 / rate, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        with lock, mem.store.deferring_vectors():
            start = time.perf_counter()  # the request arrives
            mem.ingest(messages(1, start=n), user="ann")
            rowid = mem.sql.conn.execute("SELECT max(rowid) FROM memories").fetchone()[0]
            accepted[rowid] = start  # before the worker can take it (it needs the lock)
        worker.wake()
        n += 1
        time.sleep(max(0.0, t0 + n * gap - time.perf_counter()))
    stop.set()
    watcher.join()
    worker.stop()
    mem.close()
    lags.sort()
    return {"bench": "lag", "rate_per_min": rate, "messages": n, "embedder": embedder,
            "p50_s": round(statistics.median(lags), 3), "p95_s": round(lags[int(0.95 * (len(lags) - 1))], 3),
            "max_s": round(lags[-1], 3), "load": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="accept,singles", help="comma-separated: accept,singles,drain,lag")
    ap.add_argument("--embedder", default=None, help="hash for accept/singles, local for drain/lag by default")
    ap.add_argument("-n", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--rate", type=float, default=1000, help="lag: messages per minute")
    ap.add_argument("--seconds", type=float, default=30, help="lag: how long the stream runs")
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temp dir on the disk)")
    args = ap.parse_args(argv)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    root = Path(tempfile.mkdtemp(prefix="bm-bench-backlog-", dir=args.dir))
    try:
        for i, name in enumerate(args.only.split(",")):
            home = root / f"{i}-{name}"
            if name == "accept":
                out = accept(home, args.n, args.batch, args.embedder or "hash")
            elif name == "singles":
                out = accept(home, min(args.n, 1000), 1, args.embedder or "hash")
                out["bench"] = "singles"
            elif name == "drain":
                out = drain(home, min(args.n, 2000), args.embedder or "local")
            elif name == "lag":
                out = lag(home, args.rate, args.seconds, args.embedder or "local")
            else:
                ap.error(f"unknown bench {name!r}")
            print(json.dumps(out), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
