#!/usr/bin/env python3
"""Evidence in context: how much of a question's evidence the block an agent receives carries.

For each conversation of a development split (LoCoMo dev and REALTALK dev by default, from
../shared/bench/; ``--data`` picks one or names another file in the LoCoMo layout):

1. the store is built as scripts/bench_locomo.py builds it (its ``build_store``: ``bm init``,
   ``bm ingest`` of the turns through the CLI; ``--keep DIR`` keeps and reuses the stores);
2. for each question of categories 1-4 with a valid evidence id, ``Memory.context(question,
   budget=B, now=the day after the last session)`` in-process (``bm context`` has no batch
   mode; the library call is what it runs), for B in 500, 1,000, 2,000 and 4,000 tokens;
3. the same budgets filled by two things an agent does without bm, counted with the same
   token counter (brandmind/tokens.py) and rendered one turn per line as ``Speaker: text``:
   - *last turns*: the newest turns up to the question time, taken newest first while the
     next one fits (a contiguous recent window, as an agent keeping its last messages);
   - *RRF packing*: all turns ranked by reciprocal-rank fusion (k = 60) of BM25 (the
     scorer's own, ``locomo_retrieval_eval.BM25`` over ``speaker: text [shares caption]``)
     and dense cosine (bm's embedder, all-MiniLM-L6-v2 int8, over the same text), packed
     greedily in rank order: a turn that does not fit is skipped and later ones may go in.

The measure: for each question, the share of its evidence turns whose text is inside the
block's text; then the mean over questions (macro), per category and for 1-4 (the headline).
A turn's text is what was ingested (its text, plus `` [shares <caption>]`` when it shares an
image), whitespace-normalised on both sides (line breaks and the block's continuation indent
count as one space).  It counts when the whole text occurs with no letter or digit glued to
either end; the speaker is not required (a block may show several turns of one speaker under
one name).  A turn the block cut to fit (``…``) does not count: only the full text does.  A
very short evidence text ("Yeah": 3 of 801 REALTALK evidence turns) can be matched by another
turn saying the same; that favours every system alike.

Also reported, for bm's block: the tokens it used, how they split between recalled memories
and the recent conversation, where the evidence found was (memories / recent), and the share
of evidence that recall's top 30 (what the block is built from) holds but the block left out.

    python scripts/bench_context.py                       # both dev sets
    python scripts/bench_context.py --data realtalk --keep /tmp/bm-ctx --json out.json
    python scripts/bench_context.py --json - > out.json   # JSON only, on stdout
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_locomo import DEFAULT_LOCOMO, USER, build_store, dia_ids, messages, question_time
from bmcmd import find_bm, shared_dir

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REALTALK = shared_dir() / "bench" / "realtalk"
DATASETS = {"locomo": DEFAULT_LOCOMO / "locomo-dev.json", "realtalk": DEFAULT_REALTALK / "realtalk-dev.json"}
BUDGETS = (500, 1000, 2000, 4000)
CATEGORIES = (1, 2, 3, 4)
RRF_K = 60
SYSTEMS = ("bm", "rrf", "last")
LABELS = {"bm": "bm", "rrf": "RRF packing", "last": "last turns"}
WORD = re.compile(r"\w")


# -- the measure ------------------------------------------------------------------------
def norm(text: str) -> str:
    """Whitespace runs (line breaks, indents) as one space."""
    return " ".join(text.split())


def contains(block: str, text: str) -> bool:
    """Whether normalised ``text`` occurs whole in normalised ``block``: no word character
    glued to either end of it ("Yeah" is not inside "Yeahh")."""
    if not text:
        return False
    start = block.find(text)
    while start >= 0:
        end = start + len(text)
        left_ok = start == 0 or not (WORD.match(block[start - 1]) and WORD.match(text[0]))
        right_ok = end == len(block) or not (WORD.match(block[end]) and WORD.match(text[-1]))
        if left_ok and right_ok:
            return True
        start = block.find(text, start + 1)
    return False


def evidence_share(block: str, texts: list[str]) -> float:
    """The share of ``texts`` (normalised evidence texts) inside ``block`` (raw block text)."""
    flat = norm(block)
    return sum(contains(flat, t) for t in texts) / len(texts)


# -- the data -----------------------------------------------------------------------------
def turns_of(sample: dict) -> list[dict]:
    """The turns as ingested: id, ts, and the line ``Speaker: text`` the baselines show."""
    return [{"id": m["id"], "ts": m["ts"], "text": m["content"], "line": f"{m['speaker']}: {m['content']}"}
            for m in messages(sample)]


def questions(sample: dict, known: set[str]) -> list[dict]:
    """Questions of categories 1-4 with at least one valid evidence id (as the scorer keeps them)."""
    from locomo_stats import normalize_evidence
    out = []
    for qi, q in enumerate(sample["qa"]):
        gold = [g for g in normalize_evidence(q.get("evidence", []))[0] if g in known]
        if q.get("category") in CATEGORIES and gold:
            out.append({"qi": qi, "question": q["question"], "category": q["category"], "gold": gold})
    return out


# -- the baselines ------------------------------------------------------------------------
def pack(lines: list[str], counts: list[int], order: list[int], budget: int, counter, *,
         contiguous: bool = False) -> tuple[str, int]:
    """Lines taken in ``order`` while they fit ``budget`` tokens (one per line, joined by line
    breaks; the counter is additive over whitespace, so a line costs its own count).  A line
    that does not fit is skipped, or ends the packing when ``contiguous``.  Returns the text
    and its exact token count."""
    chosen, used = [], 0
    for i in order:
        if used + counts[i] <= budget:
            chosen.append(i)
            used += counts[i]
        elif contiguous:
            break
    text = "\n".join(lines[i] for i in chosen)
    tokens = counter.count(text) if text else 0
    while tokens > budget:  # a guarantee should a counter stop being additive
        chosen.pop()
        text = "\n".join(lines[i] for i in chosen)
        tokens = counter.count(text) if text else 0
    return text, tokens


class TurnRanker:
    """BM25 (the scorer's) and dense cosine (bm's embedder) over one conversation's turns,
    fused by reciprocal rank."""

    def __init__(self, lines: list[str], embedder) -> None:
        import numpy as np
        from locomo_retrieval_eval import BM25, tokenize
        self.tokenize = tokenize
        self.bm25 = BM25([tokenize(line) for line in lines])
        vecs = np.asarray(embedder.embed_documents(lines), dtype=np.float32)
        self.vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        self.embedder = embedder

    def rrf(self, query: str) -> list[int]:
        import numpy as np
        n = len(self.vecs)
        keyword = self.bm25.scores(self.tokenize(query))
        q = np.asarray(self.embedder.embed_query(query), dtype=np.float32).ravel()
        dense = (self.vecs @ (q / max(float(np.linalg.norm(q)), 1e-12))).tolist()
        fused = [0.0] * n
        for scores in (keyword, dense):
            for rank, i in enumerate(sorted(range(n), key=lambda j: (-scores[j], j))):
                fused[i] += 1.0 / (RRF_K + rank + 1)
        return sorted(range(n), key=lambda j: (-fused[j], j))


# -- bm ---------------------------------------------------------------------------------------
def sections_of(text: str) -> dict[str, str]:
    """The text block's sections by header (``## Relevant memories`` -> "memories", ...).
    A block's content never holds a blank line (continuation lines are indented), so blank
    lines separate sections."""
    names = {"## Core memory": "core", "## Shared experience (persona)": "shared",
             "## Relevant memories": "memories", "## Recent conversation": "recent"}
    out = {}
    for part in text.split("\n\n") if text else []:
        header, _, body = part.partition("\n")
        out[names.get(header, header)] = body
    return out


def bm_row(mem, question: str, now: str, budget: int, texts: list[str], recalled: set[int],
           counter) -> dict:
    """bm's block for one question and budget, measured."""
    block = mem.context(question, budget=budget, user=USER, now=now)
    parts = sections_of(block["text"])
    flat = {name: norm(body) for name, body in parts.items()}
    inside = [contains(norm(block["text"]), t) for t in texts]
    return {
        "bm": sum(inside) / len(texts), "bm_tokens": block["tokens"],
        "bm_memory_tokens": counter.count(parts["memories"]) if "memories" in parts else 0,
        "bm_recent_tokens": counter.count(parts["recent"]) if "recent" in parts else 0,
        "bm_n_memories": len(block["sections"].get("memories", [])),
        "bm_n_recent": len(block["sections"].get("recent", [])),
        "bm_in_memories": sum(contains(flat.get("memories", ""), t) for t in texts) / len(texts),
        "bm_in_recent": sum(contains(flat.get("recent", ""), t) for t in texts) / len(texts),
        "bm_recalled_left_out": sum(1 for i, ok in enumerate(inside) if i in recalled and not ok) / len(texts),
        "bm_n_truncated": len(block.get("truncated") or []),
    }


# -- one conversation -------------------------------------------------------------------------
def evaluate(mem, sample: dict, budgets: tuple[int, ...], counter) -> list[dict]:
    """One record per question: its category and, per budget, each system's share and bm's
    accounting."""
    from brandmind.context import RECALL_K
    now = question_time(sample)
    turns = [t for t in turns_of(sample) if t["ts"] <= now]
    lines = [t["line"] for t in turns]
    counts = counter.count_many(lines)
    by_id = {t["id"]: t for t in turns}
    ranker = TurnRanker(lines, mem.store.embedder)
    newest_first = list(range(len(turns) - 1, -1, -1))
    last = {b: pack(lines, counts, newest_first, b, counter, contiguous=True) for b in budgets}
    records = []
    for q in questions(sample, set(by_id)):
        texts = [norm(by_id[g]["text"]) for g in q["gold"]]
        top = set(dia_ids(mem.recall(q["question"], k=RECALL_K, user=USER, now=now)))
        recalled = {i for i, g in enumerate(q["gold"]) if g in top}
        order = ranker.rrf(q["question"])
        rows = {}
        for b in budgets:
            rrf_text, rrf_tokens = pack(lines, counts, order, b, counter)
            rows[str(b)] = {**bm_row(mem, q["question"], now, b, texts, recalled, counter),
                            "rrf": evidence_share(rrf_text, texts), "rrf_tokens": rrf_tokens,
                            "last": evidence_share(last[b][0], texts), "last_tokens": last[b][1]}
        records.append({"sample": sample["sample_id"], "qi": q["qi"], "category": q["category"],
                        "evidence": len(texts), "recall30": len(recalled) / len(texts), "budgets": rows})
    return records


def run_dataset(path: Path, args: argparse.Namespace, bm: str, root: Path, counter) -> dict:
    from brandmind import Memory
    data = json.loads(path.read_text())
    if args.only:
        data = [s for s in data if s["sample_id"] in set(args.only.split(","))]
    records, ingest_s, t0 = [], 0.0, time.perf_counter()
    for sample in data:
        home, n_turns, seconds = build_store(bm, root / path.stem, sample)
        ingest_s += seconds
        t1 = time.perf_counter()
        with Memory(home) as mem:
            got = evaluate(mem, sample, args.budgets, counter)
        records += got
        print(f"{path.stem} {sample['sample_id']}: {n_turns} turns, {len(got)} questions, "
              f"{time.perf_counter() - t1:.1f} s", file=sys.stderr, flush=True)
    return {"file": str(path), "conversations": len(data), "questions": len(records),
            "ingest_seconds": round(ingest_s, 1), "seconds": round(time.perf_counter() - t0, 1),
            "summary": summarise(records, args.budgets), "records": records}


# -- reporting ----------------------------------------------------------------------------------
def summarise(records: list[dict], budgets: tuple[int, ...]) -> dict:
    """Means over questions (macro), x100 for shares, per category and for "1-4"."""
    groups = {str(c): [r for r in records if r["category"] == c] for c in CATEGORIES}
    groups = {k: v for k, v in groups.items() if v}
    groups["1-4"] = records
    out = {}
    for name, recs in groups.items():
        row = {"n": len(recs), "recall30": _mean([100 * r["recall30"] for r in recs])}
        for b in budgets:
            keys = recs[0]["budgets"][str(b)].keys() if recs else ()
            row[str(b)] = {k: _mean([r["budgets"][str(b)][k] * (1 if _is_count(k) else 100) for r in recs])
                           for k in keys}
        out[name] = row
    return out


def _is_count(key: str) -> bool:
    """Token and item counts are averaged as they are; shares are shown as percentages."""
    return key.endswith("_tokens") or key.startswith("bm_n_")


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def print_dataset(name: str, result: dict, budgets: tuple[int, ...]) -> None:
    s = result["summary"]
    head = s["1-4"]
    print(f"\n{name}: {result['conversations']} conversations, {head['n']} questions (categories 1-4), "
          f"{result['seconds']} s")
    print("evidence in context, % (mean over questions), categories 1-4:")
    print("  budget " + "".join(f"{LABELS[k]:>13}" for k in SYSTEMS) + "   bm tokens used (memories + recent)")
    for b in budgets:
        r = head[str(b)]
        print(f"  {b:>6} " + "".join(f"{r[k]:>13.1f}" for k in SYSTEMS)
              + f"   {r['bm_tokens']:>6.0f} ({r['bm_memory_tokens']:.0f} + {r['bm_recent_tokens']:.0f})")
    print("per category, bm / RRF packing / last turns:")
    for cat in [c for c in s if c != "1-4"]:
        cells = "  ".join(f"{b}: " + "/".join(f"{s[cat][str(b)][k]:.1f}" for k in SYSTEMS) for b in budgets)
        print(f"  cat {cat} (n={s[cat]['n']:>3})  {cells}")
    print(f"bm's block, categories 1-4 (recall top-{_recall_k()} holds {head['recall30']:.1f}% of the evidence):")
    print("  budget  memories  recent  ev.in memories  ev.in recent  recalled but left out  truncated")
    for b in budgets:
        r = head[str(b)]
        print(f"  {b:>6} {r['bm_n_memories']:>9.1f} {r['bm_n_recent']:>7.1f} {r['bm_in_memories']:>15.1f} "
              f"{r['bm_in_recent']:>13.1f} {r['bm_recalled_left_out']:>22.1f} {r['bm_n_truncated']:>10.2f}")


def _recall_k() -> int:
    from brandmind.context import RECALL_K
    return RECALL_K


def pick_data(values: list[str]) -> list[Path]:
    """``--data`` values: ``locomo``, ``realtalk`` or a JSON file in the LoCoMo layout."""
    out = []
    for value in values or list(DATASETS):
        path = DATASETS.get(value, Path(value))
        if not path.is_file():
            sys.exit(f"Error: no data file {path} (hint: --data locomo, realtalk or a LoCoMo-layout JSON)")
        out.append(path)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", action="append", default=[],
                    help="locomo, realtalk or a LoCoMo-layout JSON (repeatable; default: both dev sets)")
    ap.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="folder with the scorer (BM25, evidence ids)")
    ap.add_argument("--keep", type=Path, default=None, help="keep (and reuse) stores in this folder")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="token budgets, comma-separated")
    ap.add_argument("--only", default="", help="comma-separated sample ids")
    ap.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON (- : stdout, no tables)")
    args = ap.parse_args()
    args.budgets = tuple(int(b) for b in args.budgets.split(","))
    sys.path.insert(0, str(args.locomo))
    from brandmind.tokens import get_counter
    counter = get_counter()
    paths = pick_data(args.data)
    bm = find_bm("bench_context")
    root = args.keep or Path(tempfile.mkdtemp(prefix="bm-context-"))
    try:
        results = {p.stem: run_dataset(p, args, bm, root, counter) for p in paths}
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    report = {"command": shlex.join([sys.executable, *sys.argv]), "load": list(os.getloadavg()),
              "tokenizer": counter.name, "budgets": list(args.budgets), "datasets": results}
    if args.json == "-":
        print(json.dumps(report, indent=1))
        return
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    print(f"command: {report['command']}")
    print("load average: " + " ".join(f"{x:.2f}" for x in report["load"]) + f"; tokens: {counter.name}")
    for name, result in results.items():
        print_dataset(name, result, args.budgets)


if __name__ == "__main__":
    main()
