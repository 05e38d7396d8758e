"""scripts/bench_context.py: the evidence-in-context measure and its two baselines, on a tiny
synthetic conversation in the LoCoMo layout (hash embedder; no benchmark data needed except
for the end-to-end run, which uses the LoCoMo scorer's BM25 from ../shared/ when present)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from brandmind.memory import Memory
from brandmind.tokens import RegexCounter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import bench_context as bc
from bmcmd import shared_dir

SCORER = shared_dir() / "bench" / "locomo"

TURNS = [
    ("Ann", "I adopted a grey cat called Pepper from the shelter."),
    ("Bob", "Nice! Does Pepper get along with your dog?"),
    ("Ann", "Mostly, they share the sofa now."),
    ("Bob", "I started learning the cello last month."),
    ("Ann", "How is the cello going?"),
    ("Bob", "Slowly, my teacher is patient.\nVery patient."),
]
SAMPLE = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:00 pm on 2 March, 2024",
        "session_1": [{"speaker": s, "dia_id": f"D1:{i + 1}", "text": t} for i, (s, t) in enumerate(TURNS[:3])],
        "session_2_date_time": "9:30 am on 5 April, 2024",
        "session_2": [{"speaker": s, "dia_id": f"D2:{i + 1}", "text": t} for i, (s, t) in enumerate(TURNS[3:])],
    },
    "qa": [
        {"question": "What is the name of Ann's cat from the shelter?", "evidence": ["D1:1"], "category": 4},
        {"question": "Who is patient with Bob?", "evidence": ["D2:3"], "category": 4},
        {"question": "Which pets share the sofa?", "evidence": ["D1:1", "D1:3"], "category": 1},
        {"question": "Is anything unanswerable?", "evidence": ["D1:2"], "category": 5},
    ],
}


def test_a_turn_counts_only_when_its_whole_text_is_in_the_block():
    text = bc.norm("Slowly, my teacher is patient.\nVery patient.")
    assert bc.contains(bc.norm("[2024-04-05 09:30] Bob: Slowly, my teacher is patient.\n  Very patient."), text)
    assert not bc.contains(bc.norm("- Bob: Slowly, my teacher is patient. …"), text)  # cut to fit
    assert not bc.contains("Ann: Yeahh sure", "Yeah")  # glued to a longer word
    assert bc.contains("Ann: Yeah! sure", "Yeah!") and bc.contains("Yeah", "Yeah")
    assert not bc.contains("anything", "")
    block = "Ann: I adopted a grey cat called Pepper from the shelter.\nBob: hello"
    texts = [bc.norm(t) for _, t in TURNS[:3]]
    assert bc.evidence_share(block, texts) == pytest.approx(1 / 3)


def test_packing_fills_the_budget_in_order_and_last_turns_stop_at_the_first_that_does_not_fit():
    counter = RegexCounter()
    lines = ["Ann: a b c d e f g h", "Bob: x", "Ann: y z", "Bob: one two three four five six seven"]
    counts = counter.count_many(lines)  # 10, 3, 4, 9
    text, tokens = bc.pack(lines, counts, [3, 2, 1, 0], 14, counter)  # 9 + 4, then 3 does not fit
    assert text.splitlines() == [lines[3], lines[2]] and tokens == 13 == counter.count(text)
    text, _ = bc.pack(lines, counts, [0, 3, 1, 2], 14, counter)  # 10, skip 9, 3, skip 4
    assert text.splitlines() == [lines[0], lines[1]]
    text, _ = bc.pack(lines, counts, [0, 3, 1, 2], 14, counter, contiguous=True)
    assert text.splitlines() == [lines[0]]
    assert bc.pack(lines, counts, [0], 5, counter) == ("", 0)


def test_the_sections_of_a_real_block(store):
    with Memory() as mem:
        mem.ingest(bc.messages(SAMPLE), user=bc.USER)  # all six turns are recent: shown there, once
        mem.remember("Ann's cat Pepper sleeps on the\npiano", user=bc.USER, ts="2024-03-03T10:00:00Z")
        block = mem.context("Ann's cat", budget=400, user=bc.USER, now=bc.question_time(SAMPLE))
    parts = bc.sections_of(block["text"])
    assert set(parts) == {"memories", "recent"}
    assert bc.contains(bc.norm(parts["memories"]), "Ann's cat Pepper sleeps on the piano")
    assert bc.contains(bc.norm(parts["recent"]), bc.norm(TURNS[-1][1]))
    assert not bc.contains(bc.norm(parts["memories"]), bc.norm(TURNS[0][1]))


@pytest.mark.skipif(not (SCORER / "locomo_retrieval_eval.py").is_file(), reason="needs ../shared/bench/locomo (or $BM_SHARED_DIR)")
def test_evaluate_a_tiny_conversation(store):
    sys.path.insert(0, str(SCORER))
    counter = RegexCounter()
    lines = [f"{s}: {t}" for s, t in TURNS]
    newest = counter.count(lines[-1])
    with Memory() as mem:
        mem.ingest(bc.messages(SAMPLE), user=bc.USER)
        records = bc.evaluate(mem, SAMPLE, (newest, 10_000), counter)
    assert [(r["qi"], r["category"], r["evidence"]) for r in records] == [(0, 4, 1), (1, 4, 1), (2, 1, 2)]
    small, big = str(newest), "10000"
    # the last-turns window at the newest turn's size holds that turn only
    assert [r["budgets"][small]["last"] for r in records] == [0.0, 1.0, 0.0]
    assert all(r["budgets"][small]["last_tokens"] == newest for r in records)
    for r in records:  # a budget holding the whole conversation: every system has all the evidence
        row = r["budgets"][big]
        assert (row["bm"], row["rrf"], row["last"]) == (1.0, 1.0, 1.0), row
        assert row["bm_in_memories"] + row["bm_in_recent"] >= 1.0
        assert row["bm_recalled_left_out"] == 0.0
    # BM25's top turn ("cat", "shelter") leads the fused ranking for the first question
    assert records[0]["budgets"][small]["rrf"] == 1.0
    summary = bc.summarise(records, (newest, 10_000))
    assert summary["1-4"]["n"] == 3 and summary["1"]["n"] == 1
    assert summary["4"][small]["last"] == 50.0 and summary["1-4"][big]["bm"] == 100.0
