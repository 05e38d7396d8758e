#!/usr/bin/env python3
"""Speed benchmark of bm with the `local` embedder (issue 2, "Speed"; issue 15, recall at scale).

Measures, on this machine:

  help      `bm --help` wall time, fresh process each time            target <= 0.3 s (median)
  cold      `bm recall "..." --json` wall time from a fresh process
            on a 10,000-memory store, ~10 different questions         target <= 0.5 s (median)
  recall    in-process recall at each store size of --n (default 100,000), in a FRESH process
            per size:                                                 targets (issue 15):
              first query: open the store + one recall (loads the model)        1M: <= 1 s
              p50 / p95 of `Memory.recall` over --recall-queries (>= 200) DISTINCT
              LoCoMo questions (never repeated: a query cache would flatter repeats)
                                                                      100k: p95 <= 10 ms; 1M: <= 50 ms
              the EXACT-SCAN FLOOR, same process, same questions, each timed right after
              its recall: embed the query + einsum over every ORIGINAL float32 document
              vector + argpartition top k; the ratio recall p95 / floor p95 is printed
                                                                      100k: <= 1.0x
              recall@10 of `store.searcher.vector_candidates(qvec, filters, 10)` (whatever
              first pass it uses, on the int8 vectors the store keeps) against the exact
              top 10 of the original float32 vectors                  >= 0.99
              (and, reported beside it, ann-benchmarks' k-nn recall: a candidate counts
              when its exact cosine is within 1e-3 of the 10th exact one)
              (the store keeps its vectors as int8, so the float32 ones are kept beside it
              at build time: <store>.f32.npy and <store>.rowids.npy in --cache-dir, in
              rowid order; the hash embedder's are recomputed from the texts if missing)
              disk: du of BM_HOME split into the op log (LMDB, and by named database), SQLite
              (and by table group, from dbstat), blobs, other files    1M: <= 2 GB
              peak RSS of the build process (recorded at build time, private vs mapped
              files)                                                  1M: <= 1.5 GB
  ingest    `bm ingest FILE` throughput on >= 5,000 real conversation
            turns (LoCoMo), real CLI subprocess, wall clock           target >= 800 msg/s (median)
  memory    peak RSS of the ingest and the cold recall processes      reported

Stores for `cold` and `recall` are built once with the Memory batch API (`Memory.ingest`,
messages streamed from a generator, LoCoMo-derived distinct texts) and cached under
--cache-dir, so re-runs skip the build; build time and peak RSS are printed.

Stores of at least --hash-docs-from memories (default 1,000,000) embed their DOCUMENTS with
the hash embedder (1M turns through the real model would take about an hour on 2 cores).
Their QUERIES still pay the real model, exactly like this: the store is opened with
`HashDocsRealQueries` as its embedder, whose `embed_query` runs the real local model on the
question (loaded on the first query, as with a local store) and then returns the question's
hash vector (the documents' space).  So `Memory.recall`, the first query and the floor all
include the real model's query-embedding time, and search hash vectors.

Output: a markdown table (with the load average), then one JSON summary line (also written
with --json-out).

    python scripts/bench_speed.py                 # full run (the first one builds the stores: minutes)
    python scripts/bench_speed.py --quick         # smoke run, small sizes (< 1 minute)
    python scripts/bench_speed.py --only recall --n 10000,100000,1000000 --cache-dir /tmp/i15bench
    python scripts/bench_speed.py --only help,cold
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from itertools import islice
from pathlib import Path
from typing import Iterator

import bmcmd  # scripts/bmcmd.py: this folder is on sys.path when a script runs

REPO = Path(__file__).resolve().parent.parent
LOCOMO = bmcmd.shared_dir() / "bench" / "locomo" / "locomo-dev.json"  # ../shared/ or $BM_SHARED_DIR
TEXTS_VERSION = 1  # bump when the generated store texts change (invalidates cached stores)
SECTIONS = ("help", "cold", "recall", "ingest", "text")


# ----------------------------------------------------------------------------- helpers
def find_bm() -> str:
    return bmcmd.find_bm("bench")


def clean_env(home: Path | None = None) -> dict:
    """The environment of a measured `bm`: no BM_* settings but the model cache, and bytecode
    written as a user's Python writes it (PYTHONDONTWRITEBYTECODE, set on some dev machines,
    would have every run of an edited checkout compile its changed modules again: ~30 ms)."""
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("BM_") or k == "BM_CACHE_DIR") and k != "PYTHONDONTWRITEBYTECODE"}
    if home is not None:
        env["BM_HOME"] = str(home)
    return env


def run_measured(cmd: list[str], env: dict, *, stdin_path: Path | None = None) -> dict:
    """Run cmd to completion; wall time, exit code, stdout, stderr and the child's own max RSS."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        try:
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, env=env, stdin=stdin, stdout=out, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
        finally:
            if stdin_path:
                stdin.close()
        proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
        out.seek(0)
        err.seek(0)
        return {"wall": wall, "rc": proc.returncode, "stdout": out.read().decode("utf-8", "replace"),
                "stderr": err.read().decode("utf-8", "replace"),
                "maxrss_mb": usage.ru_maxrss / 1024,  # Linux: KiB
                "cpu": usage.ru_utime + usage.ru_stime}


def check(res: dict, what: str) -> None:
    if res["rc"] != 0:
        sys.stderr.write(res["stderr"])
        raise SystemExit(f"bench: {what} failed with exit {res['rc']}")


def pct(values: list[float], q: float) -> float:
    """q-th percentile (0-100), linear interpolation."""
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def stats(values: list[float]) -> dict:
    return {"n": len(values), "median": statistics.median(values), "p95": pct(values, 95),
            "min": min(values), "max": max(values)}


def cpu_busy(seconds: float = 1.0) -> float | None:
    """Fraction of all CPUs busy over ``seconds`` (from /proc/stat); None where unknown."""
    def snap() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as fh:
                f = [int(x) for x in fh.readline().split()[1:]]
        except OSError:
            return None
        idle = f[3] + (f[4] if len(f) > 4 else 0)
        return sum(f), idle

    a = snap()
    time.sleep(seconds)
    b = snap()
    if not a or not b or b[0] == a[0]:
        return None
    return 1.0 - (b[1] - a[1]) / (b[0] - a[0])


def wait_quiet(limit: float, section: str, max_busy: float = 0.15) -> float | None:
    """Wait (up to ``limit`` s) until other processes leave the CPUs alone; returns the busy share seen."""
    deadline = time.monotonic() + limit
    busy = cpu_busy()
    while busy is not None and busy > max_busy and time.monotonic() < deadline:
        log(f"[{section}] machine busy ({busy:.0%} of CPUs used by other processes); waiting ...")
        time.sleep(4)
        busy = cpu_busy()
    if busy is not None and busy > max_busy:
        log(f"[{section}] WARNING: {busy:.0%} of the CPUs are busy with other work; numbers will be pessimistic")
    return busy


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- data
def load_locomo() -> list[dict]:
    if not LOCOMO.is_file():
        raise SystemExit(f"bench: {LOCOMO} not found (LoCoMo dev set)")
    return json.loads(LOCOMO.read_text(encoding="utf-8"))


def _session_time(text: str) -> datetime:
    # e.g. "1:56 pm on 8 May, 2023"
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
    except ValueError:
        return datetime(2023, 1, 1, tzinfo=timezone.utc)


def locomo_turns(data: list[dict]) -> list[dict]:
    """Every LoCoMo turn as an ingest message (sample order, session order, turn order)."""
    out = []
    for sample in data:
        conv = sample["conversation"]
        sid = sample.get("sample_id", "conv")
        speakers = {conv.get("speaker_a"): "user", conv.get("speaker_b"): "assistant"}
        sessions = sorted((int(k.split("_")[1]) for k in conv
                           if k.startswith("session_") and k.count("_") == 1 and isinstance(conv[k], list)))
        for n in sessions:
            start = _session_time(conv.get(f"session_{n}_date_time", ""))
            for i, turn in enumerate(conv[f"session_{n}"]):
                text = (turn.get("text") or "").strip()
                if not text:
                    continue
                out.append({
                    "id": f"{sid}-{turn['dia_id']}", "role": speakers.get(turn["speaker"], "user"),
                    "speaker": turn["speaker"], "content": text,
                    "ts": (start + timedelta(seconds=30 * i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "thread": sid, "meta": {"session": n, "dia_id": turn["dia_id"], "sample": sid},
                })
    return out


def locomo_questions(data: list[dict]) -> list[str]:
    qs = []
    for sample in data:
        for qa in sample.get("qa", []):
            q = (qa.get("question") or "").strip()
            if q and q not in qs:
                qs.append(q)
    return qs


def ingest_messages(turns: list[dict], count: int) -> list[dict]:
    """``count`` messages: the LoCoMo turns, replicated with distinct ids/threads as needed."""
    out = []
    rep = 0
    while len(out) < count:
        for t in turns:
            if len(out) >= count:
                break
            m = dict(t)
            if rep:
                m["id"] = f"{t['id']}-r{rep}"
                m["thread"] = f"{t['thread']}-r{rep}"
                m["meta"] = {**t["meta"], "replica": rep}
            out.append(m)
        rep += 1
    return out


def iter_store_messages(turns: list[dict], count: int) -> Iterator[dict]:
    """``count`` messages with DISTINCT texts that read like conversation turns, one at a time
    (a 1M list of dicts alone held ~0.8 GB of the build's RAM).

    The first pass is the LoCoMo turns as they are; later passes append a clause
    taken from another turn (a different one each pass), so every text - and
    its embedding - differs.  Texts seen are remembered by an 8-byte digest.
    """
    rng = random.Random(1234)
    clauses = []
    for t in turns:
        first = t["content"].replace("\n", " ").split(". ")[0].strip().rstrip(".!?")
        if 12 <= len(first) <= 120:
            clauses.append(first[0].lower() + first[1:])
    joiners = ["Also,", "By the way,", "Oh and", "Anyway,", "Plus,", "Funny thing:", "Side note:", "And"]
    seen: set[int] = set()

    def digest(text: str) -> int:
        return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")

    n_turns = len(turns)
    for i in range(count):
        t = turns[i % n_turns]
        rep = i // n_turns
        text = t["content"]
        if rep:
            text = f"{text} {rng.choice(joiners)} {rng.choice(clauses)}."
        if digest(text) in seen:
            text = f"{text} ({rep}.{i})"
        seen.add(digest(text))
        yield {"id": f"s{i}", "role": t["role"], "speaker": t["speaker"], "content": text,
               "ts": t["ts"], "thread": f"{t['thread']}-p{rep}", "meta": {**t["meta"], "pass": rep}}


def store_messages(turns: list[dict], count: int) -> list[dict]:
    """``iter_store_messages`` as a list."""
    return list(iter_store_messages(turns, count))


def write_jsonl(path: Path, msgs: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for m in msgs:
            fh.write(json.dumps(m, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------- stores
def store_model_name() -> tuple[str, str | None]:
    """(the model name a new store records with the default config, the local variant)."""
    from brandmind.config import DEFAULTS
    from brandmind.embed import embedder_name

    variant = DEFAULTS.get("local_variant")
    name = embedder_name("local", local_variant=variant) if variant else embedder_name("local")
    return name, variant


def embedder_fingerprint() -> dict:
    """What the cached stores' vectors depend on."""
    fp: dict = {"texts": TEXTS_VERSION}
    try:
        from brandmind.embed import local

        name, variant = store_model_name()
        fp.update(model=name, variant=variant or getattr(local, "DEFAULT_VARIANT", None),
                  build=getattr(local, "BUILD_VERSION", None))
    except Exception as exc:  # noqa: BLE001
        fp["embedder_error"] = repr(exc)
    return fp


def shared_model_cache(cache_dir: Path) -> Path:
    path = cache_dir / "model-cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def new_home(path: Path, cache_dir: Path) -> Path:
    """An empty BM_HOME; the built ONNX model is shared through BM_CACHE_DIR, so it is built once."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    os.environ["BM_CACHE_DIR"] = str(shared_model_cache(cache_dir))
    return path


def _memory_count(mem) -> int:  # type: ignore[no-untyped-def]
    return mem.sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0]


class HashDocsRealQueries:
    """The embedder of a store whose DOCUMENTS are embedded with the hash embedder (1M turns
    through the real model would take an hour on 2 cores) while every QUERY still pays the real
    model: ``embed_query`` runs the local model on the question (loading it on the first query,
    as a local store does) and returns the hash vector of the question, the one that lives in the
    documents' space.  So recall, the floor and the first query all include the real model's
    query-embedding time; what they search is hash vectors (random-like directions: a harder case
    for a quantised first pass than MiniLM's clustered ones)."""

    def __init__(self, cache_dir: Path) -> None:
        from brandmind.embed import HashEmbedder

        self.hash = HashEmbedder(384)
        self.name, self.dim = self.hash.name, self.hash.dim
        self.cache_dir = cache_dir
        self.real = None

    def embed_documents(self, texts: list[str]):  # type: ignore[no-untyped-def]
        return self.hash.embed_documents(texts)

    def embed_query(self, text: str):  # type: ignore[no-untyped-def]
        if self.real is None:
            from brandmind.embed.local import LocalEmbedder

            _, variant = store_model_name()
            self.real = LocalEmbedder(cache_dir=shared_model_cache(self.cache_dir),
                                      **({"variant": variant} if variant else {}))
        self.real.embed_query(text)  # the real model's cost; its vector is not the documents' space
        return self.hash.embed_query(text)


class RssSampler:
    """Peak RSS of this process, split into private memory (RssAnon) and mapped files (RssFile:
    LMDB reads through a memory map), sampled every 0.2 s from /proc/self/status (Linux)."""

    def __init__(self) -> None:
        import threading

        self.peak = {"rss": 0, "anon": 0, "file": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def now() -> dict:
        keys = {"VmRSS:": "rss", "RssAnon:": "anon", "RssFile:": "file"}
        out = {}
        try:
            with open("/proc/self/status") as fh:
                for line in fh:
                    parts = line.split()
                    if parts and parts[0] in keys:
                        out[keys[parts[0]]] = int(parts[1]) / 1024
        except OSError:
            pass
        return out

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for key, value in self.now().items():
                self.peak[key] = max(self.peak[key], value)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def doc_model(docs: str) -> str:
    """The model name a store built with ``docs`` ("local" or "hash") records."""
    return store_model_name()[0] if docs == "local" else "hash:384"


def warm_store(home: Path, docs: str) -> float:
    """One recall in THIS (the build) process: whatever a store builds on its first search
    (an index file, a catch-up after an upgrade) is built here, not in the measured process."""
    from brandmind.embed import HashEmbedder
    from brandmind.memory import Memory

    t0 = time.perf_counter()
    with Memory(home, embedder=HashEmbedder(384) if docs == "hash" else None) as mem:
        mem.recall("warm-up: what did they talk about?", k=1)
    return time.perf_counter() - t0


def build_store(cache_dir: Path, size: int, turns: list[dict], rebuild: bool,
                docs: str = "local", warm: bool = True) -> tuple[Path, dict]:
    """A store of ``size`` memories (cached); returns (home, build info).  ``docs``: "local"
    (the real model) or "hash" (HashDocsRealQueries); ``warm``: one recall first (warm_store;
    never in the process that then measures a first query)."""
    import resource

    from brandmind.embed import HashEmbedder
    from brandmind.memory import Memory

    want = {"size": size, **(embedder_fingerprint() if docs == "local" else
                             {"texts": TEXTS_VERSION, "model": doc_model("hash")})}
    # one directory per model, so switching the model variant back and forth reuses builds
    slug = "".join(ch if ch.isalnum() else "-" for ch in str(want.get("model", "unknown")).lower())
    home = cache_dir / f"store-{size}-{slug}"
    stamp = home / "bench-store.json"
    if not rebuild and stamp.is_file():
        info = json.loads(stamp.read_text())
        must = ("size", "texts", "model")  # a store of another model would be refused anyway
        if all(info.get(k) == want[k] for k in must):
            log(f"[store] reusing {home} ({size:,} memories, built in {info['build_seconds']:.0f} s)"
                + (f"; warm-up recall {warm_store(home, docs):.1f} s" if warm else ""))
            drift = {k: (info.get(k), want[k]) for k in want if k not in must and info.get(k) != want[k]}
            if drift:  # e.g. the default model variant changed since: latency is unaffected
                log(f"[store]   note: its vectors were made with {drift} (stored, now); pass --rebuild to redo")
            return home, {**info, "cached": True, "drift": drift}
        log(f"[store] {home} was built with {info}; rebuilding")
    new_home(home, cache_dir)
    log(f"[store] building {home}: {size:,} memories via Memory.ingest ({want['model']} document vectors) ...")
    t0 = time.perf_counter()
    last = [t0]

    def progress(report: dict) -> None:
        now = time.perf_counter()
        if now - last[0] > 15:
            done = report["ingested"] + report["duplicates"]
            rss = RssSampler.now()
            log(f"[store]   {done:,}/{size:,}  {done / (now - t0):.0f} memories/s  RSS {rss.get('rss', 0):.0f} MB "
                f"(anon {rss.get('anon', 0):.0f}, mapped files {rss.get('file', 0):.0f})")
            last[0] = now

    embedder = HashEmbedder(384) if docs == "hash" else RecordingEmbedder(home)
    with RssSampler() as rss, Memory(home, create=True, embedder=embedder) as mem:
        report = mem.ingest(iter_store_messages(turns, size), progress=progress)  # streamed, not a list
        n = _memory_count(mem)
    if isinstance(embedder, RecordingEmbedder):
        embedder.close()
    took = time.perf_counter() - t0
    if n != size:
        raise SystemExit(f"bench: built store has {n} memories, expected {size} ({report})")
    info = {**want, "docs": docs, "build_seconds": took, "memories_per_s": size / took,
            "build_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "build_peak_anon_mb": rss.peak["anon"], "build_peak_file_mb": rss.peak["file"],
            "built": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    save_vectors(home, docs)  # after the peak RSS is taken: what the floor scans
    stamp.write_text(json.dumps(info))
    if warm:
        info["warm_up_s"] = warm_store(home, docs)
    log(f"[store] built {size:,} memories in {took:.1f} s ({size / took:.0f}/s), peak RSS "
        f"{info['build_peak_rss_mb']:.0f} MB (anon {rss.peak['anon']:.0f}, mapped files {rss.peak['file']:.0f})")
    return home, {**info, "cached": False}


# ----------------------------------------------------------------------------- benchmarks
def bench_help(bm: str, repeats: int) -> dict:
    env = clean_env(Path(tempfile.gettempdir()) / "bm-bench-help-home")
    run_measured([bm, "--help"], env)  # warm the page cache
    walls, rss = [], []
    for _ in range(repeats):
        res = run_measured([bm, "--help"], env)
        check(res, "bm --help")
        walls.append(res["wall"])
        rss.append(res["maxrss_mb"])
    return {"wall_s": stats(walls), "maxrss_mb": max(rss)}


# The floor of a cold recall: the least a fresh Python process pays to answer with this
# model, whatever it does with the vector: the interpreter `bm` runs on, numpy, onnxruntime
# and tokenizers, the cached model and tokenizer loaded as bm loads them (the same session
# options), one question embedded, the vector printed, and an exit without teardown (as bm's).
FLOOR_SCRIPT = """import os, sys
from brandmind.config import cache_dir
from brandmind.embed.local import LocalEmbedder
v = LocalEmbedder(cache_dir=cache_dir()).embed_query(sys.argv[1])
sys.stdout.write(str(len(v)) + chr(10)); sys.stdout.flush(); os._exit(0)
"""


def interpreter_of(bm: str) -> str:
    """The Python that runs the ``bm`` script (its shebang), so the floor starts the same one."""
    first = Path(shutil.which(bm) or bm).read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") and "python" in first else sys.executable


def bench_cold(bm: str, home: Path, questions: list[str], n: int) -> dict:
    env = clean_env(home)
    qs = questions[:n]
    check(run_measured([bm, "recall", "warm-up question", "--json"], env), "bm recall (warm-up)")
    floor_cmd = [interpreter_of(bm), "-c", FLOOR_SCRIPT]
    check(run_measured(floor_cmd + ["warm-up question"], env), "cold floor (warm-up)")
    walls, rss, cpu, floors, sample = [], [], [], [], None
    for q in qs:  # bm and the floor interleaved: the same minute's load for both
        res = run_measured([bm, "recall", q, "--json"], env)
        check(res, f"bm recall {q!r}")
        results = json.loads(res["stdout"])
        if not results:
            raise SystemExit(f"bench: bm recall {q!r} returned nothing")
        sample = sample or {"query": q, "top": results[0]["text"][:100]}
        walls.append(res["wall"])
        rss.append(res["maxrss_mb"])
        cpu.append(res["cpu"])
        res = run_measured(floor_cmd + [q], env)
        check(res, f"cold floor {q!r}")
        floors.append(res["wall"])
    # what an agent loop runs before each turn: `bm context` from a cold process
    ctx = []
    for q in qs:
        res = run_measured([bm, "context", q, "--budget", "2000"], env)
        check(res, f"bm context {q!r}")
        if not res["stdout"].strip():
            raise SystemExit(f"bench: bm context {q!r} returned an empty block")
        ctx.append(res["wall"])
    return {"wall_s": stats(walls), "cpu_s_median": statistics.median(cpu), "maxrss_mb": max(rss),
            "queries": len(qs), "sample": sample, "context_wall_s": stats(ctx), "floor_wall_s": stats(floors),
            "over_floor": statistics.median(w / f for w, f in zip(walls, floors))}


def vector_files(home: Path) -> tuple[Path, Path]:
    """The original float32 document vectors of a cached store and their rowids (beside it:
    the store keeps int8 vectors, so these cannot be read back from it)."""
    return home.with_name(home.name + ".f32.npy"), home.with_name(home.name + ".rowids.npy")


class RecordingEmbedder:
    """The real model for a store's documents, writing every vector it returns (and an 8-byte
    digest of its text) to files beside the store, for ``save_vectors`` to order by rowid."""

    def __init__(self, home: Path) -> None:
        from brandmind.embed.local import LocalEmbedder

        name, variant = store_model_name()
        self.inner = LocalEmbedder(cache_dir=shared_model_cache(home.parent), **({"variant": variant} if variant else {}))
        self.name, self.dim = self.inner.name, self.inner.dim
        if self.name != name:
            raise SystemExit(f"bench: the local embedder is {self.name}, a new store would record {name}")
        self.vec_fh = open(home.with_name(home.name + ".f32.part"), "wb")
        self.dig_fh = open(home.with_name(home.name + ".digests.part"), "wb")

    def embed_documents(self, texts: list[str]):  # type: ignore[no-untyped-def]
        import numpy as np

        vecs = np.asarray(self.inner.embed_documents(texts), np.float32)
        self.vec_fh.write(vecs.tobytes())
        self.dig_fh.write(np.asarray([_digest(t) for t in texts], np.uint64).tobytes())
        return vecs

    def embed_query(self, text: str):  # type: ignore[no-untyped-def]
        return self.inner.embed_query(text)

    def close(self) -> None:
        self.vec_fh.close()
        self.dig_fh.close()


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def save_vectors(home: Path, docs: str, batch: int = 65536) -> None:
    """Write ``vector_files(home)``: every memory's original float32 vector in rowid order,
    from what ``RecordingEmbedder`` wrote (docs "local") or recomputed (docs "hash")."""
    import numpy as np

    from brandmind.embed import HashEmbedder
    from brandmind.memory import Memory

    vec_path, rowid_path = vector_files(home)
    part = home.with_name(home.name + ".f32.part")
    digests = got = order = None
    if docs == "local":
        digests = np.fromfile(home.with_name(home.name + ".digests.part"), np.uint64)
        got = np.memmap(part, np.float32, "r", shape=(len(digests), 384))
        order = np.argsort(digests, kind="stable")
        digests = digests[order]
    with Memory(home, embedder=HashEmbedder(384) if docs == "hash" else None) as mem:
        conn = mem.sql.conn
        n = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        dim = mem.sql.dim
        out = np.lib.format.open_memmap(vec_path.with_suffix(".tmp.npy"), "w+", np.float32, (n, dim))
        rowids = np.empty(n, np.int64)
        cur, i, hashed = conn.execute("SELECT rowid, text FROM memories ORDER BY rowid"), 0, HashEmbedder(dim)
        while rows := list(islice(cur, batch)):
            rowids[i:i + len(rows)] = [r for r, _ in rows]
            texts = [t for _, t in rows]
            if docs == "hash":
                out[i:i + len(rows)] = hashed.embed_documents(texts)
            else:
                want = np.asarray([_digest(t) for t in texts], np.uint64)
                at = np.minimum(np.searchsorted(digests, want), len(digests) - 1)
                if not (digests[at] == want).all():
                    raise SystemExit("bench: a stored text was not embedded by the recording embedder")
                out[i:i + len(rows)] = got[order[at]]
            i += len(rows)
        out.flush()
        del out
    np.save(rowid_path, rowids)
    os.replace(vec_path.with_suffix(".tmp.npy"), vec_path)
    for tmp in (part, home.with_name(home.name + ".digests.part")):
        tmp.unlink(missing_ok=True)


def ensure_vectors(home: Path, docs: str) -> None:
    """``vector_files(home)`` exist (recomputed for a hash-docs store built before they were kept)."""
    if not vector_files(home)[0].is_file():
        if docs != "hash":
            raise SystemExit(f"bench: {vector_files(home)[0]} is missing (the store keeps int8 vectors "
                             "only): pass --rebuild to build the store again")
        log(f"[store] recomputing the float32 document vectors of {home} for the floor ...")
        save_vectors(home, docs)


def load_vectors(home: Path):  # type: ignore[no-untyped-def]
    """(rowids, float32 matrix) of every memory's ORIGINAL document vector (``vector_files``),
    loaded once for the exact-scan floor."""
    import numpy as np

    vec_path, rowid_path = vector_files(home)
    return np.load(rowid_path), np.load(vec_path)


def exact_top(mat, q, k: int):  # type: ignore[no-untyped-def]
    """The floor: cosines of the query with every vector (einsum), the top k (argpartition)."""
    import numpy as np

    scores = np.einsum("ij,j->i", mat, q)
    top = np.argpartition(-scores, k)[:k] if len(scores) > k else np.arange(len(scores))
    return top[np.argsort(-scores[top], kind="stable")]


ANN_EPSILON = 1e-3  # ann-benchmarks' k-nn recall: a result counts within this of the k-th exact distance


def vector_recall_at(mem, rowids, mat, qvecs: list, k: int = 10) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """recall@k of bm's vector candidates (``store.searcher.vector_candidates``: whatever first
    pass it uses) against the exact top k of the same query vectors (all memories are current
    and the default user's, so the exact scan needs no filter): the share of the exact top k
    found, and ann-benchmarks' k-nn recall, the share of the candidates whose exact cosine is
    within ``ANN_EPSILON`` of the k-th exact one (a near tie the int8 vectors order the other
    way counts as found)."""
    import numpy as np

    from brandmind.query import filters

    f = filters(mem.store, user=None, agent=None, types=(), since=None, until=None, now=None, as_of=None)
    at = {int(r): i for i, r in enumerate(rowids)}
    found = near = 0
    for q in qvecs:
        top = exact_top(mat, q, k)
        kth = float(mat[top[-1]] @ q)
        got = [int(r) for r, _ in mem.store.searcher.vector_candidates(q, f, k)[:k]]
        found += len({int(r) for r in rowids[top]} & set(got))
        cos = mat[np.array([at[r] for r in got], np.int64)] @ q if got else np.zeros(0)
        near += int((cos >= kth - ANN_EPSILON).sum())
    n = k * len(qvecs)
    return (found / n, near / n) if qvecs else (float("nan"), float("nan"))


# long: one measurement in order (open, first query, floor load, timed loop, recall@10)
def bench_scale(home: Path, docs: str, cache_dir: Path, questions: list[str], n: int, k: int) -> dict:
    """In-process recall on one store, in a FRESH process: the first query (open + recall,
    which loads the model), then ``n`` DISTINCT questions, each timed as ``Memory.recall``
    and, right after, as the exact-scan floor (embed the query + einsum + argpartition over
    the original float32 vectors loaded once); then recall@10 of the vector candidates vs exact."""
    import numpy as np

    from brandmind.memory import Memory

    if len(questions) < n + 1:
        raise SystemExit(f"bench: {n} distinct questions wanted, LoCoMo dev has {len(questions) - 1} besides the first")
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    mem = Memory(home, **({"embedder": HashDocsRealQueries(cache_dir)} if docs == "hash" else {}))
    open_s = time.perf_counter() - t0
    try:
        count = _memory_count(mem)
        t1 = time.perf_counter()
        if not mem.recall(questions[0], k=k):
            raise SystemExit(f"bench: recall {questions[0]!r} returned nothing")
        first = time.perf_counter() - t1
        t1 = time.perf_counter()
        rowids, mat = load_vectors(home)
        floor_load = time.perf_counter() - t1
        emb = mem.store.embedder
        lat, floor, embed, qvecs = [], [], [], []
        for q in questions[1:n + 1]:
            t1 = time.perf_counter()
            if not mem.recall(q, k=k):
                raise SystemExit(f"bench: recall {q!r} returned nothing")
            t2 = time.perf_counter()
            v = np.asarray(emb.embed_query(q), dtype=np.float32)
            t3 = time.perf_counter()
            exact_top(mat, v, k)
            t4 = time.perf_counter()
            lat.append((t2 - t1) * 1000)
            floor.append((t4 - t2) * 1000)
            embed.append((t3 - t2) * 1000)
            qvecs.append(v)
        ctx = []  # what an agent asks each turn: the block for the prompt (recall k grows with the budget)
        for q in questions[1:n + 1]:
            t1 = time.perf_counter()
            mem.context(q, budget=CONTEXT_BUDGET)
            ctx.append((time.perf_counter() - t1) * 1000)
        rss_after = _rss_mb()
        vec_recall, vec_recall_near = vector_recall_at(mem, rowids, mat, qvecs, 10)
        disk_sql = sqlite_tables(mem)
    finally:
        mem.close()
    return {"memories": count, "docs": docs, "queries": len(lat), "k": k, "open_ms": open_s * 1000,
            "first_query_ms": first * 1000, "first_total_ms": (open_s + first) * 1000, "second_query_ms": lat[0],
            "latency_ms": stats(lat), "floor_ms": stats(floor), "embed_query_ms": stats(embed),
            "context_ms": stats(ctx), "context_budget": CONTEXT_BUDGET,
            "p95_ratio": pct(lat, 95) / pct(floor, 95), "p50_ratio": statistics.median(lat) / statistics.median(floor),
            "floor_load_s": floor_load, "vector_recall_at_10": vec_recall,
            "vector_recall_at_10_within_1e-3": vec_recall_near,
            "process_rss_mb": rss_after, "rss_before_mb": rss0, "disk": {**disk_usage(home), "sqlite_tables": disk_sql},
            **(bench_loop(home, docs, cache_dir, questions[1:LOOP_TURNS + 1], k) if count <= LOOP_MAX else {})}


LOOP_TURNS, LOOP_MAX = 60, 100_000  # the agent-loop part: turns, and the largest store it copies


def bench_loop(home: Path, docs: str, cache_dir: Path, questions: list[str], k: int) -> dict:
    """An agent's turns, as a live loop runs them: write the user's message (``Memory.ingest``
    of one turn), then recall for it, each timed; on a copy of the store (the cached one stays
    as built), in this process after the main part (the model loaded, the caches warm)."""
    from brandmind.memory import Memory

    copy = cache_dir / f"loop-{home.name}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(home, copy)
    write, read = [], []
    try:
        with Memory(copy, **({"embedder": HashDocsRealQueries(cache_dir)} if docs == "hash" else {})) as mem:
            mem.recall(questions[0], k=k)
            for i, q in enumerate(questions):
                t0 = time.perf_counter()
                mem.ingest([{"role": "user", "speaker": "bench-user", "content": q, "thread": "bench-loop"}])
                t1 = time.perf_counter()
                if not mem.recall(q, k=k):
                    raise SystemExit(f"bench: recall {q!r} returned nothing in the loop")
                write.append((t1 - t0) * 1000)
                read.append((time.perf_counter() - t1) * 1000)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return {"loop_ingest_ms": stats(write), "loop_recall_ms": stats(read)}


def disk_usage(home: Path) -> dict:
    """Bytes on disk (allocated blocks, as du) under BM_HOME: the op log (LMDB), the SQLite
    index (with its WAL), blobs, and every other file by name; LMDB's named databases."""
    out: dict = {"lmdb": 0, "sqlite": 0, "blobs": 0, "other": {}}
    for path in home.rglob("*"):
        if not path.is_file():
            continue
        used = path.stat().st_blocks * 512
        rel = path.relative_to(home)
        if "log.lmdb" in rel.parts:
            out["lmdb"] += used
        elif rel.name.startswith("memory.sqlite"):
            out["sqlite"] += used
        elif "blobs" in rel.parts:
            out["blobs"] += used
        else:
            out["other"][str(rel)] = used
    out["total"] = out["lmdb"] + out["sqlite"] + out["blobs"] + sum(out["other"].values())
    out["lmdb_dbs"] = lmdb_databases(home / "data" / "log.lmdb")
    return out


def lmdb_databases(path: Path) -> dict:
    """Bytes of pages of each named database of the op log (read-only, no lock: the store is
    closed), and the pages allocated to none (free, reused by later writes)."""
    try:
        import lmdb
    except ImportError:
        return {}
    if not (path / "data.mdb").is_file():
        return {}
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=64, subdir=True)
    try:
        psize = env.stat()["psize"]
        out, used = {}, 0
        with env.begin() as txn:
            for name, _ in txn.cursor():
                s = txn.stat(env.open_db(name, txn=txn))
                pages = s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"]
                out[name.decode()] = {"entries": s["entries"], "bytes": pages * psize}
                used += pages
        out["(free or meta)"] = {"entries": 0, "bytes": (env.info()["last_pgno"] + 1 - used) * psize}
        return out
    finally:
        env.close()


def sqlite_tables(mem) -> dict:  # type: ignore[no-untyped-def]
    """Bytes per table and index of the SQLite file (the dbstat table), grouped: the vec0
    tables (sqlite-vec), FTS5, the memories rows, their indexes, the rest."""
    try:
        rows = mem.sql.conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    except Exception as exc:  # noqa: BLE001  (a SQLite built without dbstat)
        return {"error": repr(exc)}
    groups = {"sqlite-vec (memories_vec*)": 0, "FTS5 (memories_fts*)": 0, "memories rows": 0,
              "indexes": 0, "other tables": 0}
    for name, size in rows:
        if name.startswith("memories_vec"):
            groups["sqlite-vec (memories_vec*)"] += size
        elif name.startswith("memories_fts"):
            groups["FTS5 (memories_fts*)"] += size
        elif name == "memories":
            groups["memories rows"] += size
        elif name.startswith(("sqlite_autoindex", "memories_", "idx")):
            groups["indexes"] += size
        else:
            groups["other tables"] += size
    return groups


def bench_ingest(bm: str, cache_dir: Path, turns: list[dict], count: int, repeats: int,
                 embedder: str | None = None) -> dict:
    msgs = ingest_messages(turns, count)
    work = cache_dir / "ingest"
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"locomo-{count}.jsonl"
    write_jsonl(path, msgs)
    runs = []
    for r in range(repeats):
        home = new_home(work / "home", cache_dir)
        env = clean_env(home)
        if embedder:
            env["BM_EMBEDDER"] = embedder
        check(run_measured([bm, "init", "--json"], env), "bm init")
        res = run_measured([bm, "ingest", str(path), "--json"], env)
        check(res, "bm ingest")
        report = json.loads(res["stdout"])
        if report["ingested"] != count:
            raise SystemExit(f"bench: ingest stored {report['ingested']} of {count}: {report}")
        runs.append({"wall_s": res["wall"], "msg_per_s": count / res["wall"], "maxrss_mb": res["maxrss_mb"],
                     "cpu_s": res["cpu"]})
        log(f"[ingest] run {r + 1}/{repeats}: {count:,} messages in {res['wall']:.2f} s = "
            f"{count / res['wall']:.0f} msg/s, max RSS {res['maxrss_mb']:.0f} MB")
    shutil.rmtree(work / "home", ignore_errors=True)
    rates = [x["msg_per_s"] for x in runs]
    return {"messages": count, "unique_turns": min(count, len(turns)), "repeats": repeats,
            "msg_per_s": {"median": statistics.median(rates), "min": min(rates), "max": max(rates)},
            "wall_s_median": statistics.median(x["wall_s"] for x in runs),
            "cpu_s_median": statistics.median(x["cpu_s"] for x in runs),
            "maxrss_mb": max(x["maxrss_mb"] for x in runs), "runs": runs, "file": str(path)}


def bench_text(turns: list[dict], repeats: int = 3) -> dict:
    """The per-turn text passes, in process: the PII guard of shared blocks (pii.scan with a
    few private terms) and the rules extractor, over LoCoMo turns; medians of ``repeats``."""
    from brandmind import pii
    from brandmind.extract import Turn
    from brandmind.extract.rules import RulesExtractor

    texts = [t["content"] for t in turns]
    terms = ["Caroline", "Melanie", "Boston", "Grupo Pereira"]
    from brandmind.tokens import WordPieceCounter

    counter = WordPieceCounter()
    counter.count_many(texts[:2])  # loads tokenizer.json (once)
    scan, extract, tokens = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        counter.count_many(texts)
        tokens.append(len(texts) / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        for text in texts:
            pii.scan(text, private_terms=terms)
        scan.append(len(texts) / (time.perf_counter() - t0))
        batch = [Turn(text, speaker="Ann", ts=1_700_000_000_000) for text in texts]
        t0 = time.perf_counter()
        RulesExtractor().extract(batch)
        extract.append(len(batch) / (time.perf_counter() - t0))
    return {"turns": len(texts), "pii_scan_per_s": stats(scan), "extract_per_s": stats(extract),
            "token_count_per_s": stats(tokens)}


def _rss_mb() -> float:
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------- worker processes
# Store building and the in-process recall run in a child process, so this (parent) process
# never loads numpy/onnxruntime: a child forked from a big parent would report the parent's
# RSS as its own peak (Linux carries ru_maxrss across fork/exec).
def worker(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--_worker", *args],
                          stdout=subprocess.PIPE, text=True, env=clean_env())
    if proc.returncode != 0:
        raise SystemExit(f"bench: worker {args[0]} failed with exit {proc.returncode}")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("BENCH-RESULT "):
            return json.loads(line[len("BENCH-RESULT "):])
    raise SystemExit(f"bench: worker {args[0]} printed no result")


def worker_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench_speed.py --_worker")
    ap.add_argument("mode", choices=["model", "build", "recall"])
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--size", type=int)
    ap.add_argument("--docs", choices=["local", "hash"], default="local")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("-k", type=int, default=10)
    a = ap.parse_args(argv)
    cache_dir = Path(a.cache_dir)
    if a.mode == "model":
        from brandmind.embed import local as local_mod
        from brandmind.embed.local import LocalEmbedder

        name, variant = store_model_name()
        t0 = time.perf_counter()
        emb = LocalEmbedder(cache_dir=shared_model_cache(cache_dir), **({"variant": variant} if variant else {}))
        out = {"seconds": time.perf_counter() - t0,
               "embedder": f"local ({name}, variant {getattr(emb, 'variant', '?')}, "
                           f"{getattr(emb, 'threads', '?')} threads)",
               "local_py_sha256": hashlib.sha256(Path(local_mod.__file__).read_bytes()).hexdigest()[:12]}
    else:
        data = load_locomo()
        turns = locomo_turns(data)
        home, info = build_store(cache_dir, a.size, turns, a.rebuild, a.docs, warm=a.mode == "build")
        out = {**info, "home": str(home)}
        if a.mode == "recall":
            ensure_vectors(home, a.docs)
            questions = locomo_questions(data)
            random.Random(7).shuffle(questions)
            out = {**bench_scale(home, a.docs, cache_dir, questions, a.queries, a.k), "store": info}
    print("BENCH-RESULT " + json.dumps(out, default=float), flush=True)
    return 0


# ----------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description="bm speed benchmark (local embedder)",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: stores of 500 / 1,500 memories, 400 ingested messages, fewer repeats, no waiting")
    ap.add_argument("--cache-dir", default="/tmp/bm-bench", help="where built stores are kept (default /tmp/bm-bench)")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the cached stores")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--help-repeats", type=int)
    ap.add_argument("--cold-size", type=int, help="memories in the cold-recall store (default 10,000)")
    ap.add_argument("--cold-queries", type=int, help="cold recall processes (default 10)")
    ap.add_argument("--n", help="comma-separated store sizes of the in-process recall section, e.g. "
                               "10000,100000,1000000 (default 100000; --quick 1500)")
    ap.add_argument("--recall-size", type=int, help="one store size for the recall section (same as --n SIZE)")
    ap.add_argument("--hash-docs-from", type=int, default=1_000_000,
                    help="stores of at least this many memories embed their DOCUMENTS with the hash embedder "
                         "(queries still pay the real model: see HashDocsRealQueries; default 1,000,000)")
    ap.add_argument("--recall-queries", type=int, help="in-process recall questions (default 200)")
    ap.add_argument("--ingest-messages", type=int, help="messages per ingest run (default 5,520 = 2 x LoCoMo dev)")
    ap.add_argument("--ingest-repeats", type=int, help="ingest runs (default 3)")
    ap.add_argument("-k", type=int, default=10, help="results per in-process recall (default 10, as the CLI)")
    ap.add_argument("--json-out", help="also write the JSON summary to this file")
    ap.add_argument("--wait-idle", type=float,
                    help="before each section, wait up to this many seconds for other CPU load to go away "
                         "(default 120, 0 with --quick; the busy share seen is reported)")
    args = ap.parse_args()

    q = args.quick
    if args.wait_idle is None:
        args.wait_idle = 0 if q else 120
    sizes = {
        "help_repeats": args.help_repeats or (5 if q else 10),
        "cold_size": args.cold_size or (500 if q else 10_000),
        "cold_queries": args.cold_queries or (3 if q else 10),
        "recall_sizes": [int(x.replace("_", "")) for x in args.n.split(",") if x.strip()] if args.n else
                        [args.recall_size or (1_500 if q else 100_000)],
        "recall_queries": args.recall_queries or (50 if q else 200),
        "ingest_messages": args.ingest_messages or (400 if q else 5_520),
        "ingest_repeats": args.ingest_repeats or (1 if q else 3),
    }
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in only if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {bad}; choose from {SECTIONS}")
    cache_dir = Path(args.cache_dir).resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    bm = find_bm()

    data = load_locomo()
    turns = locomo_turns(data)
    questions = locomo_questions(data)
    random.Random(7).shuffle(questions)

    model = worker(["model", "--cache-dir", str(cache_dir)])
    env_info = {
        "python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
        "bm": bm, "embedder": model["embedder"], "local_py_sha256": model["local_py_sha256"],
        "cache_dir": str(cache_dir), "quick": q, **sizes,
    }
    log(f"[bench] {json.dumps(env_info)}")
    log(f"[bench] model ready in {model['seconds']:.2f} s")

    results: dict = {"env": env_info}
    wall0 = time.perf_counter()
    busy: dict = {}
    results["cpu_busy_before"] = busy
    if "help" in only:
        busy["help"] = wait_quiet(args.wait_idle, "help")
        log("[help] ...")
        results["help"] = bench_help(bm, sizes["help_repeats"])
    if "cold" in only:
        info = worker(["build", "--cache-dir", str(cache_dir), "--size", str(sizes["cold_size"])]
                      + (["--rebuild"] if args.rebuild else []))
        home = Path(info["home"])
        busy["cold"] = wait_quiet(args.wait_idle, "cold")
        log(f"[cold] {sizes['cold_queries']} fresh `bm recall` processes on {sizes['cold_size']:,} memories ...")
        results["cold"] = {**bench_cold(bm, home, questions, sizes["cold_queries"]), "store": info}
    if "recall" in only:
        results["recall"] = {}
        for size in sizes["recall_sizes"]:
            docs = "hash" if size >= args.hash_docs_from else "local"
            common = ["--cache-dir", str(cache_dir), "--size", str(size), "--docs", docs]
            info = worker(["build", *common] + (["--rebuild"] if args.rebuild else []))
            busy[f"recall {size:,}"] = wait_quiet(args.wait_idle, "recall")
            load = os.getloadavg()
            log(f"[recall] {sizes['recall_queries']} distinct questions on {size:,} memories ({docs} document "
                f"vectors), fresh process; load average {load[0]:.2f} ...")
            res = worker(["recall", *common, "--queries", str(sizes["recall_queries"]), "-k", str(args.k)])
            results["recall"][str(size)] = {**res, "store": info, "loadavg_before": load, "loadavg_after": os.getloadavg()}
    if "ingest" in only:
        busy["ingest"] = wait_quiet(args.wait_idle, "ingest")
        log(f"[ingest] `bm ingest` of {sizes['ingest_messages']:,} LoCoMo turns x {sizes['ingest_repeats']} ...")
        results["ingest"] = bench_ingest(bm, cache_dir, turns, sizes["ingest_messages"], sizes["ingest_repeats"])
        # the same ingest with the hash embedder: what the store does with the model's cost taken out
        results["ingest_no_model"] = bench_ingest(bm, cache_dir, turns, sizes["ingest_messages"],
                                                  sizes["ingest_repeats"], embedder="hash")
    if "text" in only:
        busy["text"] = wait_quiet(args.wait_idle, "text")
        log(f"[text] PII guard and rules extractor over {len(turns):,} LoCoMo turns ...")
        results["text"] = bench_text(turns, 1 if q else 3)
    results["bench_seconds"] = time.perf_counter() - wall0
    after = worker(["model", "--cache-dir", str(cache_dir)])
    if after["local_py_sha256"] != model["local_py_sha256"] or after["embedder"] != model["embedder"]:
        log(f"[bench] WARNING: the embedder changed during the run ({model['embedder']} -> {after['embedder']}); re-run")
        results["embedder_changed_during_run"] = after

    rows = report_rows(results, sizes)
    results["targets"] = {r[0]: {"value": r[1], "target": r[2], "meets": r[3]} for r in rows if r[3] is not None}
    print_table(rows, env_info, busy)
    line = json.dumps(results, default=float)
    print("\n```json\n" + line + "\n```")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2, default=float) + "\n")
    return 0


def report_rows(r: dict, sizes: dict) -> list[tuple]:
    """(metric, value, target, meets or None)"""
    rows: list[tuple] = []
    if "help" in r:
        h = r["help"]["wall_s"]
        rows.append((f"`bm --help` wall, median of {h['n']}", f"{h['median']:.3f} s (p95 {h['p95']:.3f} s)",
                     "<= 0.3 s", h["median"] <= 0.3))
    if "cold" in r:
        c = r["cold"]["wall_s"]
        rows.append((f"cold `bm recall --json`, {r['cold']['store']['size']:,} memories, median of {c['n']} queries",
                     f"{c['median']:.3f} s (p95 {c['p95']:.3f} s, max {c['max']:.3f} s)", "<= 0.5 s",
                     c["median"] <= 0.5))
        if "floor_wall_s" in r["cold"]:
            f = r["cold"]["floor_wall_s"]
            rows.append(("cold floor: a fresh Python that loads the same model and embeds the question, interleaved",
                         f"{f['median']:.3f} s (p95 {f['p95']:.3f} s); bm / floor {r['cold']['over_floor']:.2f}x "
                         f"(+{(c['median'] - f['median']) * 1000:.0f} ms)", "reported", None))
        rows.append(("peak RSS, cold recall process", f"{r['cold']['maxrss_mb']:.0f} MB", "reported", None))
        if "context_wall_s" in r["cold"]:
            c = r["cold"]["context_wall_s"]
            rows.append((f"cold `bm context --budget 2000`, same store and questions, median of {c['n']}",
                         f"{c['median']:.3f} s (p95 {c['p95']:.3f} s)", "reported", None))
    for size, rc in r.get("recall", {}).items():
        rows.extend(recall_rows(int(size), rc))
    if "ingest" in r:
        i = r["ingest"]
        rows.append((f"`bm ingest` {i['messages']:,} LoCoMo turns ({i['unique_turns']:,} distinct, replicated "
                     f"with new ids), wall clock, median of {i['repeats']}",
                     f"{i['msg_per_s']['median']:.0f} msg/s ({i['wall_s_median']:.2f} s; "
                     f"min {i['msg_per_s']['min']:.0f}, max {i['msg_per_s']['max']:.0f})",
                     ">= 800 msg/s", i["msg_per_s"]["median"] >= 800))
        rows.append(("peak RSS, ingest process", f"{i['maxrss_mb']:.0f} MB", "reported", None))
    if "ingest_no_model" in r:
        i = r["ingest_no_model"]
        rows.append(("  same ingest with the hash embedder (storage path alone, no model)",
                     f"{i['msg_per_s']['median']:.0f} msg/s ({i['wall_s_median']:.2f} s)", "", None))
    if "text" in r:
        t = r["text"]
        rows.append((f"PII guard (pii.scan), {t['turns']:,} LoCoMo turns, median",
                     f"{t['pii_scan_per_s']['median']:,.0f} turns/s", ">= 2,000 turns/s",
                     t["pii_scan_per_s"]["median"] >= 2000))
        rows.append(("rules extractor, same turns, median", f"{t['extract_per_s']['median']:,.0f} turns/s",
                     ">= 1,000 turns/s", t["extract_per_s"]["median"] >= 1000))
        rows.append(("token counting for `bm context` budgets (WordPiece), same turns, median",
                     f"{t['token_count_per_s']['median']:,.0f} turns/s", ">= 6,700 turns/s (200 in 30 ms)",
                     t["token_count_per_s"]["median"] >= 6700))
    return rows


# (p95 target ms, floor ratio target, first query target s) by store size: issue 15's targets
RECALL_TARGETS = {100_000: (10.0, 1.0, None), 1_000_000: (50.0, None, 1.0)}
DISK_TARGET_GB, BUILD_RSS_TARGET_MB = {1_000_000: 2.0}, {1_000_000: 1536}
CONTEXT_BUDGET, CONTEXT_TARGETS = 2000, {100_000: 25.0}  # issue 16: `bm context` p95 at 100,000 memories


def recall_rows(size: int, rc: dict) -> list[tuple]:
    """The table rows of one store size of the recall section."""
    p95_t, ratio_t, first_t = RECALL_TARGETS.get(size, (None, None, None))
    lat, fl, st, d = rc["latency_ms"], rc["floor_ms"], rc["store"], rc["disk"]
    docs = "hash document vectors, real-model queries" if rc["docs"] == "hash" else "real-model vectors"
    la = rc.get("loadavg_before", [float("nan")])[0]
    rows: list[tuple] = [
        (f"**{size:,}** ({docs}): `Memory.recall`, {lat['n']} distinct questions after the first (load {la:.2f})",
         f"p50 {lat['median']:.1f} ms, p95 {lat['p95']:.1f} ms (max {lat['max']:.0f} ms)",
         f"p95 <= {p95_t:.0f} ms" if p95_t else "", lat["p95"] <= p95_t if p95_t else None),
        (f"  {size:,}: exact-scan floor (embed query + einsum over all vectors + argpartition top k), same questions",
         f"p50 {fl['median']:.1f} ms, p95 {fl['p95']:.1f} ms (query embedding p50 {rc['embed_query_ms']['median']:.1f} ms)",
         "", None),
        (f"  {size:,}: recall / floor", f"p95 {rc['p95_ratio']:.2f}x, p50 {rc['p50_ratio']:.2f}x",
         f"p95 <= {ratio_t:.1f}x" if ratio_t else "", rc["p95_ratio"] <= ratio_t if ratio_t else None),
        (f"  {size:,}: `Memory.context` at {rc['context_budget']:,} tokens, same questions",
         f"p50 {rc['context_ms']['median']:.1f} ms, p95 {rc['context_ms']['p95']:.1f} ms",
         f"p95 <= {CONTEXT_TARGETS[size]:.0f} ms" if size in CONTEXT_TARGETS else "",
         rc["context_ms"]["p95"] <= CONTEXT_TARGETS[size] if size in CONTEXT_TARGETS else None),
        *([(f"  {size:,}: an agent turn, {rc['loop_recall_ms']['n']} in a row on a copy: `Memory.ingest` of the "
            f"message, then `Memory.recall` for it", f"recall p50 {rc['loop_recall_ms']['median']:.1f} ms, p95 "
            f"{rc['loop_recall_ms']['p95']:.1f} ms; ingest p50 {rc['loop_ingest_ms']['median']:.1f} ms", "", None)]
          if "loop_recall_ms" in rc else []),
        (f"  {size:,}: recall@10 of `vector_candidates` vs the exact scan", f"{rc['vector_recall_at_10']:.3f}", ">= 0.99",
         rc["vector_recall_at_10"] >= 0.99),
        (f"  {size:,}: the same, counting a near tie (ann-benchmarks' k-nn recall: exact cosine within "
         f"{ANN_EPSILON:g} of the 10th)", f"{rc.get('vector_recall_at_10_within_1e-3', float('nan')):.3f}", "", None),
        (f"  {size:,}: first query in a fresh process (open + recall, loads the model) / second query",
         f"{rc['first_total_ms'] / 1000:.2f} s (open {rc['open_ms']:.0f} ms) / {rc['second_query_ms']:.0f} ms",
         f"<= {first_t:.0f} s" if first_t else "", rc["first_total_ms"] <= first_t * 1000 if first_t else None),
        (f"  {size:,}: disk (du of BM_HOME): op log LMDB / SQLite / blobs / other files",
         f"{d['total'] / 2**30:.2f} GB: {d['lmdb'] / 2**20:,.0f} / {d['sqlite'] / 2**20:,.0f} / "
         f"{d['blobs'] / 2**20:,.0f} / " + (", ".join(f"{Path(k).name} {v / 2**20:,.0f}" for k, v in d["other"].items()
                                                      if v >= 2**20) or "0") + " MB",
         f"<= {DISK_TARGET_GB[size]:.0f} GB" if size in DISK_TARGET_GB else "",
         d["total"] <= DISK_TARGET_GB[size] * 2**30 if size in DISK_TARGET_GB else None),
        ("    LMDB by database", ", ".join(f"{k} {v['bytes'] / 2**20:,.0f}" for k, v in
                                          sorted(d["lmdb_dbs"].items(), key=lambda x: -x[1]["bytes"])) + " MB", "", None),
        ("    SQLite by table", ", ".join(f"{k} {v / 2**20:,.0f}" for k, v in d["sqlite_tables"].items()
                                          if isinstance(v, int)) + " MB", "", None),
    ]
    if "build_peak_rss_mb" in st:
        target = BUILD_RSS_TARGET_MB.get(size)
        rows.append((f"  {size:,}: build peak RSS ({st['memories_per_s']:.0f} memories/s)",
                     f"{st['build_peak_rss_mb']:,.0f} MB (private {st['build_peak_anon_mb']:,.0f}, "
                     f"mapped files {st['build_peak_file_mb']:,.0f})",
                     f"<= {target / 1024:.1f} GB" if target else "", st["build_peak_rss_mb"] <= target if target else None))
    rows.append((f"  {size:,}: RSS of the recall process (with the floor's own float32 copy)", f"{rc['process_rss_mb']:,.0f} MB", "", None))
    return rows


def print_table(rows: list[tuple], env: dict, busy: dict) -> None:
    print(f"\n## bm speed ({env['cpus']} CPUs, Python {env['python']}, embedder {env['embedder']}"
          + (", QUICK sizes" if env["quick"] else "") + ")\n")
    load = os.getloadavg()
    print(f"Load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 shared cores: trust the ratios)\n")
    print("| metric | value | target | meets |")
    print("|---|---|---|---|")
    for metric, value, target, meets in rows:
        mark = "" if meets is None else ("yes" if meets else "**NO**")
        print(f"| {metric} | {value} | {target} | {mark} |")
    seen = {k: v for k, v in busy.items() if v is not None}
    if seen:
        print("\nCPU share busy with OTHER processes just before each section: "
              + ", ".join(f"{k} {v:.0%}" for k, v in seen.items())
              + ("  (a loaded machine: numbers are pessimistic)" if max(seen.values()) > 0.15 else ""))
    met = [r for r in rows if r[3] is not None]
    print(f"\n{sum(1 for r in met if r[3])} of {len(met)} targets met"
          + ("" if all(r[3] for r in met) else ": missed " + "; ".join(r[0] for r in met if not r[3])))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--_worker":
        sys.exit(worker_main(sys.argv[2:]))
    sys.exit(main())
