#!/usr/bin/env python3
"""Speed of the graph views (`bm kg hubs`, `bm kg clusters`; brandmind/graphviews.py) on a
knowledge graph of --entities entities (default 10,000) and --facts facts (default 50,000).

The store is built once with the ops ``mem.facts.add_many`` writes (``facts.plan_fact``;
the hash embedder): each fact is a memory, an edge subject -predicate-> object with the
memory as its evidence, and two mentions.  The graph has --groups planted communities
(90% of the facts inside one, 10% between two at random) and skewed degrees (a few
entities in each community take most of its facts), so there are hubs to find.

Timed in one process, --runs times each (medians; the first call of each is a warm-up):

  hubs       ``mem.graph.hubs(limit=20)``
  clusters   ``mem.graph.clusters(limit=20)``
  floors     what any implementation must at least do, measured in the same run: reading the
             user's entity edges from SQLite (one plain SELECT: the floor of hubs), and
             Louvain alone on the same graph already in memory (networkx, seeded: the floor
             of clusters); the ratios say what the views cost above them.

Also printed: how well the clusters recover the planted communities (the share of entities
whose cluster's largest planted community is their own) and the load average (`uptime`).

    python scripts/bench_graph.py                        # 10k entities / 50k facts (builds ~minutes once)
    python scripts/bench_graph.py --entities 1000 --facts 5000 --runs 3     # quick
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

PREDICATES = ("knows", "likes", "uses", "visited", "mentioned", "reads", "supports", "follows")


def plan(entities: int, facts: int, groups: int, seed: int = 7) -> tuple[list[dict], dict[str, int]]:
    """The facts (unique triples) and each entity's planted community."""
    rng = random.Random(seed)
    names = [f"E{i:05d}" for i in range(entities)]
    group = {name: i % groups for i, name in enumerate(names)}
    members = [[n for n in names if group[n] == g] for g in range(groups)]
    weights = [[1.0 / (rank + 1) ** 0.8 for rank in range(len(m))] for m in members]  # skewed degrees
    seen, out = set(), []
    while len(out) < facts:
        g = rng.randrange(groups)
        s = rng.choices(members[g], weights[g])[0]
        h = g if rng.random() < 0.9 else rng.randrange(groups)
        o = rng.choices(members[h], weights[h])[0]
        p = rng.choice(PREDICATES)
        if s == o or (s, p, o) in seen:
            continue
        seen.add((s, p, o))
        out.append({"subject": s, "predicate": p, "object": o, "text": f"{s} {p} {o}", "subject_type": "entity",
                    "object_type": "entity",
                    "confidence": round(rng.uniform(0.5, 1.0), 2)})
    return out, group


def build(home: Path, facts: list[dict]) -> float:
    """Store the facts as ``mem.facts.add_many`` stores a new fact (``facts.plan_fact``: the
    memory, its nodes, its edge, its mentions), without reconciling each one against the
    others (the triples are unique, so the rules would add every one; reconciling 50,000
    one by one takes most of an hour on 2 cores)."""
    from brandmind.facts import Decision, coerce_fact, plan_fact
    from brandmind.memory import Memory
    from brandmind.ops import Kind

    t0 = time.perf_counter()
    with Memory(create=True) as mem:
        store, nodes = mem.store, {}
        for start in range(0, len(facts), 2000):
            items = [coerce_fact({**f, "user": "bench"}) for f in facts[start:start + 2000]]
            vectors = dict(zip([i.text for i in items], store.embed_docs([i.text for i in items])))
            now = int(time.time() * 1000)
            with store.write() as t:
                for item in items:
                    for kind, payload in plan_fact(item, Decision("added"), nodes=nodes, old_edges={}, now=now,
                                                   source="bench").ops:
                        t.append(kind, payload)
                        if kind == Kind.MEMORY_ADD:
                            t.cache_vector(store.sql.model, payload["text"], vectors[payload["text"]].tobytes())
            store.catch_up()
            print(f"  built {min(start + 2000, len(facts)):,} facts", file=sys.stderr, flush=True)
    return time.perf_counter() - t0


def timed(fn, runs: int) -> tuple[float, object]:
    out = fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entities", type=int, default=10_000)
    ap.add_argument("--facts", type=int, default=50_000)
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cache-dir", default="/tmp/bm-bench-graph", help="where the store is kept between runs")
    ap.add_argument("--rebuild", action="store_true")
    args = ap.parse_args()

    facts, planted = plan(args.entities, args.facts, args.groups)
    home = Path(args.cache_dir) / f"e{args.entities}-f{args.facts}-g{args.groups}"
    os.environ["BM_HOME"], os.environ["BM_EMBEDDER"] = str(home), "hash"
    built = None
    if args.rebuild or not (home / "done").exists():
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        built = build(home, facts)
        (home / "done").write_text("ok")

    import networkx as nx

    from brandmind.memory import Memory

    with Memory() as mem:
        sql = mem.store.sql
        nodes = sql.conn.execute("SELECT count(*) FROM kg_nodes WHERE user_id='bench'").fetchone()[0]
        edges = sql.conn.execute("SELECT count(*) FROM kg_edges").fetchone()[0]
        hubs_s, hubs = timed(lambda: mem.graph.hubs(user="bench", limit=20), args.runs)
        clusters_s, clusters = timed(lambda: mem.graph.clusters(user="bench", limit=20), args.runs)

        def scan():  # the floor of hubs: read every entity edge of the user once
            return sql.conn.execute("SELECT e.src, e.dst, e.weight FROM kg_edges e CROSS JOIN kg_nodes s "
                                    "ON s.id = e.src WHERE s.user_id = 'bench'").fetchall()
        scan_s, rows = timed(scan, args.runs)
        g = nx.Graph()
        for src, dst, w in sorted(rows):
            if src != dst:
                g.add_edge(src, dst, weight=g.get_edge_data(src, dst, {"weight": 0})["weight"] + w)
        louvain_s, _ = timed(lambda: nx.community.louvain_communities(g, weight="weight", seed=0), args.runs)
        # how well the clusters found recover the planted communities
        every = mem.graph.clusters(user="bench", limit=10_000, min_size=1, top=1_000_000)
    agree = total = 0
    for c in every:
        own = [planted[e["name"]] for e in c["entities"]]
        top = max(set(own), key=own.count)
        agree += own.count(top)
        total += len(own)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    report = {
        "command": " ".join([sys.executable, *sys.argv]), "entities": nodes, "edges": edges,
        "build_s": round(built, 1) if built is not None else None, "runs": args.runs,
        "hubs_ms": round(hubs_s * 1000, 1), "edge_scan_floor_ms": round(scan_s * 1000, 1),
        "hubs_over_floor": round(hubs_s / scan_s, 2),
        "clusters_ms": round(clusters_s * 1000, 1), "louvain_floor_ms": round(louvain_s * 1000, 1),
        "clusters_over_floor": round(clusters_s / louvain_s, 2),
        "clusters_found": len(every), "largest": every[0]["size"] if every else 0,
        "planted_recovered": round(agree / total, 3) if total else None,
        "top_hub": {k: hubs[0][k] for k in ("name", "degree", "weight")} if hubs else None,
        "uptime": uptime,
    }
    print(f"| graph | hubs p50 | edge-scan floor | ratio | clusters p50 | Louvain floor | ratio | recovered |\n"
          f"|---|---|---|---|---|---|---|---|\n"
          f"| {nodes:,} entities / {edges:,} edges | {report['hubs_ms']} ms | {report['edge_scan_floor_ms']} ms | "
          f"{report['hubs_over_floor']}x | {report['clusters_ms']} ms | {report['louvain_floor_ms']} ms | "
          f"{report['clusters_over_floor']}x | {report['planted_recovered']} |")
    print(uptime)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
