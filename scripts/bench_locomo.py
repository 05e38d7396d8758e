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
rankings.  Categories 1-4 are the headline; each category is reported.  Below the
scorer's table: session-level any@5 / any@10 (a question scores 1 when a session of one
of its evidence turns is among the sessions of its top-5 / top-10 results), the easier
measure other systems publish, to set next to turn R@k; ``--json-out FILE`` writes both.

    python scripts/bench_locomo.py                 # embedded defaults (all-MiniLM-L6-v2)
    python scripts/bench_locomo.py --data OTHER.json --keep /tmp/bm-locomo --json-out scores.json

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
from bmcmd import find_bm, shared_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LOCOMO = shared_dir() / "bench" / "locomo"
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


def build_store(bm: str, root: Path, sample: dict) -> tuple[Path, int, float]:
    """The store of one conversation under ``root``: ``bm init`` and ``bm ingest`` of its
    turns, or the one already there when its ingest input is unchanged (``ingested.sha``).
    Returns its home, the number of turns and the seconds ingest took (0 when reused)."""
    lines = "".join(json.dumps(m) + "\n" for m in messages(sample))
    digest = hashlib.sha256(lines.encode()).hexdigest()[:16]
    home = root / sample["sample_id"]
    stamp = home / "ingested.sha"
    seconds = 0.0
    if not (stamp.exists() and stamp.read_text() == digest):
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        run(bm, home, "init")
        t0 = time.perf_counter()
        run(bm, home, "ingest", "-", "--user", USER, stdin=lines)
        seconds = time.perf_counter() - t0
        stamp.write_text(digest)
    return home, lines.count("\n"), seconds


def dia_ids(results: list[dict]) -> list[str]:
    """The dia_ids in the results' provenance, deduplicated, in rank order."""
    ids: list[str] = []
    for item in results:
        for prov in item.get("provenance", []):
            dia = (prov.get("meta") or {}).get("dia_id")
            if dia and dia not in ids:
                ids.append(dia)
    return ids


def result_sessions(results: list[dict]) -> list[set[str]]:
    """Each result's sessions ("D3" of "D3:5"), from the dia_ids in its provenance."""
    return [{dia.split(":")[0] for dia in dia_ids([item])} for item in results]


def session_any(data: list[dict], sessions: dict, locomo: Path, ks: tuple[int, ...] = (5, 10)) -> dict:
    """Session-level any@k per category and for 1-4 (x100): a question scores 1 when a session
    of one of its evidence turns is among the sessions of its top-k results (the easier
    measure other systems publish).  Questions without a valid evidence id are left out, as
    the scorer does."""
    sys.path.insert(0, str(locomo))
    from locomo_stats import normalize_evidence
    per_cat: dict[str, list[list[float]]] = {}
    for sample in data:
        conv = sample["conversation"]
        known = {t["dia_id"] for k, v in conv.items() if re.fullmatch(r"session_\d+", k) for t in v}
        for qi, q in enumerate(sample["qa"]):
            gold = {g.split(":")[0] for g in normalize_evidence(q.get("evidence", []))[0] if g in known}
            got = sessions.get(sample["sample_id"], {}).get(str(qi))
            if not gold or got is None:
                continue
            row = [1.0 if gold & set().union(*got[:k]) else 0.0 for k in ks]
            per_cat.setdefault(str(q["category"]), []).append(row)
    per_cat["1-4"] = [r for c in ("1", "2", "3", "4") for r in per_cat.get(c, [])]
    return {cat: {"n": len(rows), **{f"sess_any@{k}": 100.0 * sum(r[i] for r in rows) / max(1, len(rows))
                                     for i, k in enumerate(ks)}}
            for cat, rows in per_cat.items()}


def print_session_any(any_k: dict) -> None:
    print("session level (a question scores 1 if a session of its evidence is among its top-k results' sessions):")
    print(f"{'cat':<4} {'n':>5} {'sess_any@5':>12} {'sess_any@10':>12}")
    for cat in ("4", "1", "2", "3", "5", "1-4"):
        if cat in any_k:
            row = any_k[cat]
            print(f"{cat:<4} {row['n']:>5} {row['sess_any@5']:>12.1f} {row['sess_any@10']:>12.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="folder with the scorer")
    ap.add_argument("--data", type=Path, default=None, help="LoCoMo JSON (default: the dev split)")
    ap.add_argument("--keep", type=Path, default=None, help="keep (and reuse) stores in this folder")
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None, help="write the rankings JSON here")
    ap.add_argument("--only", default="", help="comma-separated sample ids")
    ap.add_argument("--json-out", type=Path, default=None,
                    help="write the scores (the scorer's, plus session any@5/@10) as JSON here")
    args = ap.parse_args()
    data_file = args.data or args.locomo / "locomo-dev.json"
    data = json.loads(data_file.read_text())
    if args.only:
        keep = set(args.only.split(","))
        data = [s for s in data if s["sample_id"] in keep]
        missing = keep - {s["sample_id"] for s in data}
        if missing:
            raise SystemExit(f"bench_locomo: no sample {', '.join(sorted(missing))} in {data_file}")
    bm = find_bm("bench_locomo")
    root = args.keep or Path(tempfile.mkdtemp(prefix="bm-locomo-"))
    rankings: dict[str, dict[str, list[str]]] = {}
    sessions: dict[str, dict[str, list[set[str]]]] = {}  # per question: each result's sessions
    ingest_s = recall_s = 0.0
    n_turns = n_questions = 0
    try:
        for sample in data:
            sid = sample["sample_id"]
            home, turns, seconds = build_store(bm, root, sample)
            ingest_s += seconds
            n_turns += turns
            now = question_time(sample)
            queries = "".join(json.dumps({"id": qi, "query": q["question"], "k": args.k, "now": now}) + "\n"
                              for qi, q in enumerate(sample["qa"]))
            t0 = time.perf_counter()
            out = run(bm, home, "recall", "--batch", "-", "--user", USER, stdin=queries)
            recall_s += time.perf_counter() - t0
            ranked: dict[str, list[str]] = {}
            for line in out.splitlines():
                res = json.loads(line)
                ranked[str(res["id"])] = dia_ids(res.get("results", []))[:args.k]
                sessions.setdefault(sid, {})[str(res["id"])] = result_sessions(res.get("results", []))
            rankings[sid] = ranked
            n_questions += len(sample["qa"])
            print(f"{sid}: {turns} turns, {len(sample['qa'])} questions", file=sys.stderr)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    out_file = args.out or Path(tempfile.gettempdir()) / "bm-locomo-rankings.json"
    out_file.write_text(json.dumps(rankings))
    print(f"ingest {n_turns} turns in {ingest_s:.1f} s; {n_questions} questions in {recall_s:.1f} s "
          f"({1000 * recall_s / max(1, n_questions):.1f} ms/question incl. process start)")
    score = [sys.executable, str(args.locomo / "locomo_retrieval_eval.py"), "--rankings", str(out_file),
             "--ks", "1,5,10,25,50"]
    if args.only:  # the scorer scores every sample of its data: give it just these
        subset = out_file.with_name(out_file.stem + "-data.json")
        subset.write_text(json.dumps(data))
        score += ["--data", str(subset)]
    elif args.data:
        score += ["--data", str(data_file)]
    if args.json_out:
        score += ["--json-out", str(args.json_out)]
    subprocess.run(score, check=True)
    any_k = session_any(data, sessions, args.locomo)
    print_session_any(any_k)
    if args.json_out:
        scored = json.loads(args.json_out.read_text())
        for cat, row in any_k.items():
            scored.setdefault(cat, {}).update({k: v for k, v in row.items() if k != "n"})
        args.json_out.write_text(json.dumps(scored, indent=1))


if __name__ == "__main__":
    main()
