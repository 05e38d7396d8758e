#!/usr/bin/env python3
"""Keyword search alone (``SearchIndex.keyword_candidates``, issue 15) at 100,000 and 1,000,000 memories.

Stores are LoCoMo-like texts (``bench_speed.store_messages``: the dev turns, then each again
with a clause of another turn appended) of one user, built with the hash embedder (vectors do
not matter here) and kept under --dir; queries are the LoCoMo dev questions.  For each size,
in one run: the first query of a fresh index, then median / p95 of ``keyword_candidates(q, f,
200)`` over the questions (twice), beside keyword search as it was at 3abd3d5 (20,000-postings
cap, one query joining 800 hits, the second query) and the uncapped ranking (every word in at
most 10% of the memories, bm25 over all their postings), with the overlap of the top 10 / 200
with the uncapped one.  Wall time and CPU time of this thread (the machine has 2 shared cores).

    python scripts/bench_keyword.py --n 100000,1000000 --dir /tmp/kw   # builds the stores once (~1 h for 1M)
    python scripts/bench_keyword.py --n 100000 --queries 100
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import bench_speed  # scripts/: texts, LoCoMo questions, pct

POOL = 200


def build(home: Path, size: int) -> None:
    """A store of ``size`` LoCoMo-like memories with hash vectors (kept: a stamp names the size)."""
    stamp = home / "bench-keyword.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("size") == size:
        return
    from brandmind.memory import Memory

    import shutil
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    msgs = bench_speed.store_messages(bench_speed.locomo_turns(bench_speed.load_locomo()), size)
    t0 = time.perf_counter()
    with Memory(home, create=True) as mem:
        for i in range(0, len(msgs), 50_000):
            mem.ingest(msgs[i:i + 50_000])
            bench_speed.log(f"[build] {home.name}: {min(i + 50_000, size):,}/{size:,} "
                            f"in {time.perf_counter() - t0:.0f} s")
    stamp.write_text(json.dumps({"size": size, "seconds": time.perf_counter() - t0}))


def _unranked(index, match: str, f, n: int) -> list[tuple]:  # type: ignore[no-untyped-def]
    """Every hit of ``match`` passing ``f``, ranked by FTS5 bm25: the best ``n``."""
    where, args = f.sql("m")
    return index.sql.conn.execute(
        f"SELECT m.rowid, bm25(memories_fts) AS s FROM memories_fts JOIN memories m NOT INDEXED "
        f"ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ? AND {where} "
        f"ORDER BY s, m.rowid LIMIT ?", [match, *args, n]).fetchall()


def exact(index, query: str, f, n: int) -> list[tuple[int, float]]:  # type: ignore[no-untyped-def]
    """Every non-common query word ranked by FTS5 bm25 over all its postings (no cap), then the filters."""
    from brandmind.storage import keywords

    words = index.selective_words(query, cap=None)
    match = keywords.keyword_query(words)
    return [] if match is None else [(r[0], -float(r[1])) for r in _unranked(index, match, f, n)]


def before(index, query: str, f, n: int) -> list[tuple[int, float]]:  # type: ignore[no-untyped-def]
    """Keyword search as it was at 3abd3d5: the rarest words within 20,000 postings, one ranked
    query of 4 n hits joined with memories, and a second unrestricted query when fewer than n passed."""
    from brandmind.storage import keywords

    rare = index.selective_words(query, cap=20_000)
    match = keywords.keyword_query(rare)
    if match is None:
        return []
    where, args = f.sql("m")
    rows = index.sql.conn.execute(
        f"SELECT m.rowid, h.s FROM (SELECT rowid, bm25(memories_fts) AS s FROM memories_fts "
        f"WHERE memories_fts MATCH ? ORDER BY s, rowid LIMIT ?) AS h "
        f"JOIN memories m NOT INDEXED ON m.rowid = h.rowid WHERE {where} ORDER BY h.s, m.rowid LIMIT ?",
        [match, 4 * n, *args, n]).fetchall()
    if len(rows) < n:
        rows = _unranked(index, match, f, n)
    return [(r[0], -float(r[1])) for r in rows]


def timed(fn, queries: list[str], cpu: list[float] | None = None) -> tuple[list[float], list]:  # type: ignore[no-untyped-def]
    out, ms = [], []
    for q in queries:
        t0, c0 = time.perf_counter(), time.thread_time()
        out.append(fn(q))
        ms.append((time.perf_counter() - t0) * 1000)
        if cpu is not None:
            cpu.append((time.thread_time() - c0) * 1000)
    return ms, out


def overlap(a: list, b: list, k: int) -> float:
    want = {r for r, _ in b[:k]}
    return len({r for r, _ in a[:k]} & want) / len(want) if want else 1.0


def measure(home: Path, questions: list[str], n_ref: int) -> dict:
    from brandmind.memory import Memory
    from brandmind.storage.search import Filters

    with Memory(home) as mem:
        index = mem.store.searcher
        f = Filters(user=mem.store.user(None))
        size = index.recall_index().summary()["rows"]
        t0 = time.perf_counter()
        index.keyword_candidates("warm-up: what did they talk about?", f, POOL)
        first = (time.perf_counter() - t0) * 1000
        ref = questions[:n_ref]
        cpu: list[float] = []
        old_cpu: list[float] = []
        ms, got = timed(lambda q: index.keyword_candidates(q, f, POOL), questions, cpu)
        old_ms, old = timed(lambda q: before(index, q, f, POOL), ref, old_cpu)
        ex_ms, ex = timed(lambda q: exact(index, q, f, POOL), ref)
        ms2, _ = timed(lambda q: index.keyword_candidates(q, f, POOL), questions, cpu)  # after the others
    now = ms + ms2
    return {"memories": size, "queries": len(now), "first_ms": first,
            "median_ms": statistics.median(now), "p95_ms": bench_speed.pct(now, 95),
            "ref_queries": len(ref), "before_median_ms": statistics.median(old_ms),
            "before_p95_ms": bench_speed.pct(old_ms, 95), "exact_median_ms": statistics.median(ex_ms),
            "exact_p95_ms": bench_speed.pct(ex_ms, 95),
            "now_over_before": statistics.median(ms[:n_ref] + ms2[:n_ref]) / max(1e-9, statistics.median(old_ms)),
            "overlap10": statistics.mean(overlap(g, r, 10) for g, r in zip(got, ex)),
            "overlap200": statistics.mean(overlap(g, r, POOL) for g, r in zip(got, ex)),
            "before_overlap10": statistics.mean(overlap(g, r, 10) for g, r in zip(old, ex)),
            "before_overlap200": statistics.mean(overlap(g, r, POOL) for g, r in zip(old, ex)),
            "cpu_median_ms": statistics.median(cpu), "cpu_p95_ms": bench_speed.pct(cpu, 95),
            "before_cpu_median_ms": statistics.median(old_cpu), "before_cpu_p95_ms": bench_speed.pct(old_cpu, 95),
            "empty": sum(1 for g in got if not g)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="100000,1000000", help="store sizes, comma-separated")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/bm-bench-keyword"), help="where the stores are kept")
    ap.add_argument("--queries", type=int, default=0, help="at most this many questions (0: all)")
    ap.add_argument("--ref-queries", type=int, default=200, help="questions for the uncapped reference")
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args()
    os.environ["BM_EMBEDDER"] = "hash"
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    questions = bench_speed.locomo_questions(bench_speed.load_locomo())
    if args.queries:
        questions = questions[:args.queries]
    rows = []
    for size in (int(s) for s in args.n.split(",")):
        home = args.dir / f"store-{size}"
        build(home, size)
        if args.build_only:
            continue
        r = measure(home, questions, args.ref_queries)
        rows.append(r)
        print(json.dumps(r), file=sys.stderr)
    if rows:
        print(f"load: {os.getloadavg()[0]:.2f} (1 min average; {os.cpu_count()} CPUs)")
        print("| memories | questions | now: first / median / p95 ms (CPU median / p95) | before (3abd3d5): "
              "median / p95 ms (CPU) | now / before | uncapped: median / p95 ms | overlap@10, @200 with uncapped: "
              "now | before |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['memories']:,} | {r['queries']} | {r['first_ms']:.1f} / {r['median_ms']:.2f} / "
                  f"{r['p95_ms']:.2f} ({r['cpu_median_ms']:.2f} / {r['cpu_p95_ms']:.2f}) | "
                  f"{r['before_median_ms']:.2f} / {r['before_p95_ms']:.2f} "
                  f"({r['before_cpu_median_ms']:.2f} / {r['before_cpu_p95_ms']:.2f}) | "
                  f"{r['now_over_before']:.2f} | {r['exact_median_ms']:.1f} / {r['exact_p95_ms']:.1f} | "
                  f"{r['overlap10']:.3f}, {r['overlap200']:.3f} | "
                  f"{r['before_overlap10']:.3f}, {r['before_overlap200']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
