#!/usr/bin/env python3
"""Quick start: the main job of bm on the embedded defaults, offline.

Runs the real `bm` CLI as subprocesses against a fresh store:

    bm init
    bm ingest scripts/sample_conversation.jsonl --extract    (turns + facts, rule-based)
    bm recall "<question>" -k 3 --json      (a few questions about Ann, one with time words)
    bm remember --fact '{...lives_in Porto...}'              (an update retires the old fact)
    bm recall "Where does Ann live?" --type fact [--as-of 2024-06-01]
    bm context "<task>" --budget 250                         (the block an agent prompts with)
    bm beads tail -n 5 --json

and prints each command, a compact answer (top texts with scores) and how long
each step took.  Exits non-zero if a step fails or an expected answer is not in
the top 3.

    python scripts/demo.py                 # store in ./.bm-demo (wiped first)
    python scripts/demo.py --home DIR      # somewhere else
    python scripts/demo.py --tmp           # a temporary directory, removed afterwards
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bmcmd  # scripts/bmcmd.py: this folder is on sys.path when a script runs

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "scripts" / "sample_conversation.jsonl"

# (question, a phrase the right memory contains) - each answer is stated once, plainly
QUESTIONS = [
    ("Where does Ann live?", "I live in Lisbon"),
    ("What is the name of Ann's cat?", "Miso is my cat"),
    ("What kind of food does Ann love?", "I love Thai food"),
    ("When does Ann fly to Kyoto?", "from April 15 to April 24"),
    ("What did Ann buy instead of a car?", "I'm selling the Clio and buying an e-bike"),
    # time words are read relative to --now: "last Friday" of 2024-03-25 is 2024-03-22
    ("What did the vet say last Friday?", "kidney values are stable"),
]
QUESTION_NOW = "2024-03-25T09:00:00Z"


def find_bm() -> str:
    return bmcmd.find_bm("demo")


class Step:
    def __init__(self, bm: str, env: dict) -> None:
        self.bm = bm
        self.env = env
        self.timings: list[tuple[str, float]] = []

    def run(self, *args: str) -> str:
        shown = " ".join(["bm", *(a if a.replace("-", "").replace("_", "").replace(".", "").replace("/", "").isalnum()
                                  else json.dumps(a) for a in args)])
        print(f"\n$ {shown}")
        t0 = time.perf_counter()
        proc = subprocess.run([self.bm, *args], env=self.env, cwd=REPO, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        self.timings.append((shown, dt))
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            print(f"  FAILED (exit {proc.returncode}) after {dt:.2f} s")
            raise SystemExit(1)
        print(f"  ({dt:.2f} s)")
        return proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--home", default=str(REPO / ".bm-demo"), help="store directory (wiped first; default ./.bm-demo)")
    where.add_argument("--tmp", action="store_true", help="use a temporary directory and remove it afterwards")
    args = ap.parse_args()

    bm = find_bm()
    tmp = tempfile.mkdtemp(prefix="bm-demo-") if args.tmp else None
    home = Path(tmp or args.home).resolve()
    if home.exists() and not tmp:
        if (home / "data").exists() or not any(home.iterdir()):
            # keep the built embedding model (cache/) between runs, start from an empty store
            shutil.rmtree(home / "data", ignore_errors=True)
            (home / "config.toml").unlink(missing_ok=True)
        else:
            sys.exit(f"demo: {home} exists and is not a bm demo store; pass --home or --tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BM_")}
    env["BM_HOME"] = str(home)
    print(f"bm:    {bm}")
    print(f"store: {home}  (BM_HOME; delete it when done)" if not tmp else f"store: {home}  (temporary)")

    step = Step(bm, env)
    failures: list[str] = []
    try:
        step.run("init", "--json")
        report = json.loads(step.run("ingest", str(SAMPLE.relative_to(REPO)), "--extract", "--json"))
        print(f"  ingested {report['ingested']} messages ({report['duplicates']} already known); "
              f"facts: {report['facts']}")
        n_lines = sum(1 for line in SAMPLE.open(encoding="utf-8") if line.strip())
        if report["ingested"] + report["duplicates"] != n_lines:
            failures.append(f"ingest stored {report['ingested']} of {n_lines} messages")

        for question, expected in QUESTIONS:
            results = json.loads(step.run("recall", question, "-k", "3", "--now", QUESTION_NOW, "--json"))
            hit = None
            for rank, r in enumerate(results, 1):
                mark = " "
                if hit is None and expected.lower() in r["text"].lower():
                    hit, mark = rank, "*"
                text = r["text"] if len(r["text"]) <= 110 else r["text"][:107] + "..."
                session = (r.get("provenance") or [{}])[0].get("meta", {}).get("session")
                print(f"  {mark}{rank}. {r['score']:.4f}  {text}" + (f"  [session {session}]" if session else ""))
            if hit is None:
                failures.append(f"{question!r}: no top-3 result contains {expected!r}")
                print(f"  MISSING: expected a memory containing {expected!r}")
            else:
                print(f"  ok: answer at rank {hit}")

        # facts over time: a new value of a single-valued predicate retires the old one
        out = json.loads(step.run("remember", "--fact", json.dumps(
            {"subject": "Ann", "predicate": "lives_in", "object": "Porto", "valid_from": "2024-09-01"}), "--json"))
        print(f"  {out['action']}: {out['id']}, retired {out.get('retired')}")
        for extra, expected in (([], "Porto"), (["--as-of", "2024-06-01"], "Lisbon")):
            facts = json.loads(step.run("recall", "Where does Ann live?", "--type", "fact", "-k", "1", *extra, "--json"))
            top = facts[0]["text"] if facts else "(nothing)"
            print(f"  {top}  (valid {facts[0]['valid_from'] if facts else '-'} .. {facts[0]['valid_to'] if facts else '-'})")
            if expected not in top:
                failures.append(f"fact recall {extra or 'now'}: expected {expected!r}, got {top!r}")

        block = json.loads(step.run("context", "Suggest a dinner place for Ann and Marco", "--budget", "250", "--json"))
        print("  " + block["text"].replace("\n", "\n  "))
        print(f"  -> {block['tokens']} of {block['budget']} tokens ({block['tokenizer']})")
        if not 0 < block["tokens"] <= 250:
            failures.append(f"context used {block['tokens']} tokens of a 250 budget")

        beads = json.loads(step.run("beads", "tail", "-n", "5", "--json"))
        for b in beads:
            content = b["content"] if len(b["content"]) <= 90 else b["content"][:87] + "..."
            print(f"  {b['ts'][:16]}  {b.get('speaker') or b['role']:>9}: {content}")
        if len(beads) != 5:
            failures.append(f"beads tail -n 5 returned {len(beads)} beads")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    print("\nstep timings (wall, each a fresh `bm` process):")
    for shown, dt in step.timings:
        print(f"  {dt:6.2f} s  {shown}")
    print(f"  {sum(dt for _, dt in step.timings):6.2f} s  total")
    if failures:
        print("\nFAILED:")
        for f in failures:
            print(f"  - {f}")
        return 1
    print(f"\nall {len(QUESTIONS)} answers found in the top 3.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
