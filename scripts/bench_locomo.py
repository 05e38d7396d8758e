#!/usr/bin/env python3
"""LoCoMo retrieval through bm's public interface only.

For each conversation of the development split (../shared/bench/locomo/):

1. a fresh store (``BM_HOME``), ``bm init``;
2. ``bm ingest`` of its turns: speaker, text (plus ``[shares <caption>]`` when the turn
   shares an image, as the LoCoMo baselines index it), ``ts`` = the session's date and
   time plus the turn's position in seconds, ``dia_id`` in ``meta``;
3. ``bm recall --batch`` of its questions with k = 50 and ``now`` = the day after the
   last session (questions are asked once the conversation is over);
4. each result mapped to the dia_ids in its provenance (a memory made from several
   turns counts as several), deduplicated, in rank order;

then the split's own scorer (``locomo_retrieval_eval.py --rankings``) scores the
rankings.  Categories 1-4 are the headline; each category is reported.

    python scripts/bench_locomo.py                 # embedded defaults (all-MiniLM-L6-v2)
    python scripts/bench_locomo.py --data OTHER.json --keep /tmp/bm-locomo

``--keep DIR`` keeps the stores and reuses one whose ingest input is unchanged (for
working on recall only).  Nothing here knows the questions' wording or answers.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bmcmd import find_bm  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LOCOMO = ROOT.parent / "shared" / "bench" / "locomo"
USER = "locomo"


def session_time(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def messages(sample: dict) -> list[dict]:
    conv = sample["conversation"]
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    out = []
    for n in numbers:
        start = session_time(conv[f"session_{n}_date_time"])
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = turn.get("text", "")
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            out.append({
                "id": turn["dia_id"], "role": "user", "speaker": turn["speaker"], "content": text,
                "ts": (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "thread": "main", "meta": {"dia_id": turn["dia_id"], "session": n},
            })
    return out


def question_time(sample: dict) -> str:
    conv = sample["conversation"]
    last = max(session_time(conv[k]) for k in conv if re.fullmatch(r"session_\d+_date_time", k))
    return (last + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(bm: str, home: Path, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "BM_HOME": str(home)}
    env.pop("BM_EMBEDDER", None)
    proc = subprocess.run([bm, *args], input=stdin, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"bench_locomo: `bm {' '.join(args[:2])}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="folder with the scorer")
    ap.add_argument("--data", type=Path, default=None, help="LoCoMo JSON (default: the dev split)")
    ap.add_argument("--keep", type=Path, default=None, help="keep (and reuse) stores in this folder")
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None, help="write the rankings JSON here")
    ap.add_argument("--only", default="", help="comma-separated sample ids")
    args = ap.parse_args()
    data_file = args.data or args.locomo / "locomo-dev.json"
    data = json.loads(data_file.read_text())
    if args.only:
        keep = set(args.only.split(","))
        data = [s for s in data if s["sample_id"] in keep]
    bm = find_bm("bench_locomo")
    root = args.keep or Path(tempfile.mkdtemp(prefix="bm-locomo-"))
    rankings: dict[str, dict[str, list[str]]] = {}
    ingest_s = recall_s = 0.0
    n_turns = n_questions = 0
    try:
        for sample in data:
            sid = sample["sample_id"]
            lines = "".join(json.dumps(m) + "\n" for m in messages(sample))
            digest = hashlib.sha256(lines.encode()).hexdigest()[:16]
            home = root / sid
            stamp = home / "ingested.sha"
            if not (stamp.exists() and stamp.read_text() == digest):
                shutil.rmtree(home, ignore_errors=True)
                home.mkdir(parents=True)
                run(bm, home, "init")
                t0 = time.perf_counter()
                run(bm, home, "ingest", "-", "--user", USER, stdin=lines)
                ingest_s += time.perf_counter() - t0
                stamp.write_text(digest)
            n_turns += lines.count("\n")
            now = question_time(sample)
            queries = "".join(json.dumps({"id": qi, "query": q["question"], "k": args.k, "now": now}) + "\n"
                              for qi, q in enumerate(sample["qa"]))
            t0 = time.perf_counter()
            out = run(bm, home, "recall", "--batch", "-", "--user", USER, stdin=queries)
            recall_s += time.perf_counter() - t0
            ranked: dict[str, list[str]] = {}
            for line in out.splitlines():
                res = json.loads(line)
                ids: list[str] = []
                for item in res.get("results", []):
                    for prov in item.get("provenance", []):
                        dia = (prov.get("meta") or {}).get("dia_id")
                        if dia and dia not in ids:
                            ids.append(dia)
                ranked[str(res["id"])] = ids[:args.k]
            rankings[sid] = ranked
            n_questions += len(sample["qa"])
            print(f"{sid}: {lines.count(chr(10))} turns, {len(sample['qa'])} questions", file=sys.stderr)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    out_file = args.out or Path(tempfile.gettempdir()) / "bm-locomo-rankings.json"
    out_file.write_text(json.dumps(rankings))
    print(f"ingest {n_turns} turns in {ingest_s:.1f} s; {n_questions} questions in {recall_s:.1f} s "
          f"({1000 * recall_s / max(1, n_questions):.1f} ms/question incl. process start)")
    score = [sys.executable, str(args.locomo / "locomo_retrieval_eval.py"), "--rankings", str(out_file),
             "--ks", "1,5,10,25,50"]
    if args.data:
        score += ["--data", str(data_file)]
    subprocess.run(score, check=True)


if __name__ == "__main__":
    main()
