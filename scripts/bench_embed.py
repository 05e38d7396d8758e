#!/usr/bin/env python3
"""Benchmark the local embedder: cold start, query latency, throughput, fidelity.

    python scripts/bench_embed.py                 # fp32 and int8, 3 repeats
    python scripts/bench_embed.py --repeats 5 --batch-sizes 16,32,64
    python scripts/bench_embed.py --quick         # fewer texts, no retrieval check

Texts are real conversation turns from LoCoMo (shared/bench/locomo/locomo-dev.json,
~32 tokens each); questions from the same file are the queries.  Every number is
the median over repeats (best also shown for throughput).  The machine's load
average is printed: numbers taken while other work runs are slower.

Fidelity of an approximate variant is measured against fp32 on the same texts:
cosine of each text's two vectors (mean, 1st percentile, min), overlap of the
top-10 neighbour sets within the sample, whether a text gets the same vector
alone and inside a batch, and dense turn retrieval R@10 on LoCoMo questions
(categories 1-4), the task bm uses the vectors for.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from bmcmd import shared_dir  # noqa: E402

import numpy as np  # noqa: E402

from brandmind.embed.local import VARIANTS, LocalEmbedder  # noqa: E402


def find_locomo() -> Path | None:
    candidates = [os.environ.get("BM_LOCOMO", ""), str(shared_dir() / "bench" / "locomo" / "locomo-dev.json")]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    return None


def load_locomo(path: Path | None) -> tuple[list[str], list[dict]]:
    """(all turn texts, conversations) from LoCoMo; synthetic turns if it is missing."""
    if path is None:
        print("! LoCoMo not found (set BM_LOCOMO); using synthetic turns, no retrieval check")
        rng = np.random.default_rng(0)
        words = "the a I we you went saw made felt love painting kids weekend support group camping book friend".split()
        return [" ".join(rng.choice(words, size=int(rng.integers(4, 40)))) for _ in range(3000)], []
    data = json.loads(path.read_text())
    texts = []
    for sample in data:
        conv = sample["conversation"]
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
            texts.extend(t["text"] for t in conv[key])
    return texts, data


def loadavg() -> str:
    try:
        return "load average %.2f %.2f %.2f on %d cores" % (*os.getloadavg(), os.cpu_count() or 0)
    except OSError:  # pragma: no cover
        return "load average unknown"


def cold_start(cache_dir: Path, variant: str, repeats: int) -> tuple[float, float]:
    """Median seconds, in a fresh process with the cached model: (import -> first query vector, whole process)."""
    code = textwrap.dedent(
        f"""
        import time
        t0 = time.perf_counter()
        from brandmind.embed.local import LocalEmbedder
        v = LocalEmbedder(cache_dir={str(cache_dir)!r}, variant={variant!r}).embed_query("what did Caroline paint?")
        print(time.perf_counter() - t0)
        """
    )
    inner, outer = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        ).stdout
        outer.append(time.perf_counter() - t0)
        inner.append(float(out.strip().splitlines()[-1]))
    return statistics.median(inner), statistics.median(outer)


def query_latency(emb: LocalEmbedder, queries: list[str]) -> tuple[float, float]:
    for q in queries[:20]:
        emb.embed_query(q)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        emb.embed_query(q)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, float(np.percentile(times, 95)) * 1e3


def throughput(emb: LocalEmbedder, texts: list[str], repeats: int) -> tuple[float, float]:
    emb.embed_documents(texts[:64])  # warm up
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        emb.embed_documents(texts)
        rates.append(len(texts) / (time.perf_counter() - t0))
    return statistics.median(rates), max(rates)


def neighbour_overlap(a: np.ndarray, b: np.ndarray, k: int = 10) -> float:
    sa, sb = a @ a.T, b @ b.T
    np.fill_diagonal(sa, -np.inf)
    np.fill_diagonal(sb, -np.inf)
    ka, kb = np.argsort(-sa, axis=1)[:, :k], np.argsort(-sb, axis=1)[:, :k]
    return float(np.mean([len(set(x) & set(y)) / k for x, y in zip(ka, kb)]))


def retrieval_r10(emb: LocalEmbedder, data: list[dict]) -> float:
    """Dense cosine turn retrieval on LoCoMo, R@10 over categories 1-4 (in %)."""
    scores = []
    for sample in data:
        conv = sample["conversation"]
        keys = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        turns = [t for k in keys for t in conv[k]]
        ids = [t["dia_id"] for t in turns]
        docs = emb.embed_documents([f"{t['speaker']}: {t['text']}" for t in turns])
        idset = set(ids)
        for qa in sample["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            gold = set()
            for ev in qa.get("evidence", []):
                gold.update(x for x in re.findall(r"D\d+:\d+", ev) if x in idset)
            if not gold:
                continue
            sims = docs @ emb.embed_query(qa["question"])
            top = {ids[i] for i in np.argsort(-sims)[:10]}
            scores.append(len(gold & top) / len(gold))
    return 100.0 * float(np.mean(scores))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n", type=int, default=1000, help="turns for throughput and fidelity")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--batch-sizes", default="32", help="comma list; throughput is measured for each")
    ap.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "bm-embed-bench-cache"))
    ap.add_argument("--quick", action="store_true", help="300 turns, 1 repeat of cold start, no retrieval")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    n = 300 if args.quick else args.n
    cache = Path(args.cache_dir)

    texts_all, data = load_locomo(find_locomo())
    texts = texts_all[:n]
    queries = [qa["question"] for s in data for qa in s["qa"]][:200] or texts_all[-200:]
    print(f"{len(texts)} turns for throughput/fidelity, {len(queries)} queries; {loadavg()}")
    print(f"cache: {cache}  cpu_count={os.cpu_count()}  threads={args.threads or os.cpu_count()}")

    embedders: dict[str, LocalEmbedder] = {}
    for v in variants:  # build (or load) every variant first, so cold starts use the cache
        t0 = time.perf_counter()
        embedders[v] = LocalEmbedder(cache_dir=cache, variant=v, threads=args.threads)
        print(f"{v}: model ready in {time.perf_counter() - t0:.2f}s")
    toks = [len(x) for x in embedders[variants[0]]._encode(texts)]
    print(f"tokens per turn: mean {np.mean(toks):.1f}, median {np.median(toks):.0f}, max {max(toks)}")

    print("\n== speed ==")
    header = f"{'variant':8s} {'cold s (in-proc / process)':>27s} {'query ms p50/p95':>17s}"
    header += "".join(f" {'bs=' + str(b) + ' texts/s p50/best':>24s}" for b in batch_sizes)
    print(header)
    for v in variants:
        cold_in, cold_proc = cold_start(cache, v, 1 if args.quick else max(3, args.repeats))
        q50, q95 = query_latency(embedders[v], queries)
        row = f"{v:8s} {cold_in:>13.3f} / {cold_proc:<11.3f} {q50:>8.2f} / {q95:<6.2f}"
        for b in batch_sizes:
            e = LocalEmbedder(cache_dir=cache, variant=v, threads=args.threads, batch_size=b)
            med, best = throughput(e, texts, args.repeats)
            row += f" {med:>15.0f} / {best:<6.0f}"
        print(row, flush=True)
    print(loadavg())

    if "fp32" in embedders and len(variants) > 1:
        print("\n== fidelity against fp32 ==")
        ref = embedders["fp32"].embed_documents(texts)
        for v in variants:
            if v == "fp32":
                continue
            e = embedders[v]
            batched = e.embed_documents(texts)
            single = np.stack([e.embed_query(t) for t in texts])
            for tag, vec in (("batched", batched), ("one at a time", single)):
                cos = (vec * ref).sum(1)
                print(
                    f"{v} {tag:14s} cos to fp32: mean {cos.mean():.4f}  p1 {np.percentile(cos, 1):.4f}  "
                    f"min {cos.min():.4f};  top-10 neighbours shared {neighbour_overlap(ref, vec):.3f}"
                )
            same = (batched * single).sum(1)
            print(f"{v} same text alone vs in a batch: cos mean {same.mean():.4f} min {same.min():.4f}")
        if data and not args.quick:
            print("\n== LoCoMo dense turn retrieval, R@10 (categories 1-4) ==")
            for v in variants:
                print(f"{v}: {retrieval_r10(embedders[v], data):.1f}", flush=True)


if __name__ == "__main__":
    main()
