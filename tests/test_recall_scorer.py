"""Recall's pure scorer (brandmind/scoring.py): tables of candidates and weights in, scores
and rankings out, no store needed."""
from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from brandmind import scoring
from brandmind.scoring import Candidate, Signals, Weights

DAY = 86_400_000
NOW = 1_000 * DAY


def row(rowid: int, text: str | None = None, *, speaker: str | None = None, importance: float = 0.5,
        created: int = NOW, valid_from: int | None = None, thread: str | None = None,
        episode: str | None = None) -> dict:
    return {"rowid": rowid, "id": f"m_{rowid}", "text": text or f"memory {rowid}", "agent_id": None,
            "importance": importance, "created_at": created, "valid_from": valid_from,
            "thread": thread, "episode": episode, "speaker": speaker}


@dataclass
class Window:
    start: int
    end: int
    phrase: str


ONLY_VECTOR = Weights(keyword=0, speaker=0, neighbor=0, episode=0, graph=0, time=0, recency=0, importance=0)


# -- base scores: one signal at a time ---------------------------------------------------------
@pytest.mark.parametrize("cand, signals, base, parts", [
    # the vector signal: weight * cosine, with its rank among the vector hits
    (Candidate(1, row(1), cos=0.8), Signals(ONLY_VECTOR, vec_rank={1: 3}), 0.8,
     {"vector": (0.8, {"cosine": 0.8, "rank": 3})}),
    # no cosine (another signal brought it, no vector): 0
    (Candidate(1, row(1)), Signals(ONLY_VECTOR), 0.0, {"vector": (0.0, {"cosine": 0.0, "rank": None})}),
    # keyword: weight * bm25 / best bm25
    (Candidate(1, row(1), cos=0.5, bm25=2.0), Signals(Weights(importance=0), kw_rank={1: 2}, best_bm=4.0),
     0.5 + 0.4 * 0.5, {"vector": (0.5, {"cosine": 0.5, "rank": None}), "keyword": (0.2, {"bm25": 2.0, "rank": 2})}),
    # keyword weighs nothing when no hit scored above 0
    (Candidate(1, row(1), cos=0.5, bm25=2.0), Signals(Weights(importance=0), kw_rank={1: 1}, best_bm=0.0),
     0.5, {"vector": (0.5, {"cosine": 0.5, "rank": None})}),
    # speaker: the one speaker the query names, on that speaker's turn
    (Candidate(1, row(1, speaker="Ann"), cos=0.5), Signals(Weights(importance=0), speaker="Ann"), 0.75,
     {"vector": (0.5, {"cosine": 0.5, "rank": None}), "speaker": (0.25, {"speaker": "Ann"})}),
    (Candidate(1, row(1, speaker="Bob"), cos=0.5), Signals(Weights(importance=0), speaker="Ann"), 0.5,
     {"vector": (0.5, {"cosine": 0.5, "rank": None})}),
    # time: valid_from (else created_at) inside a window the query names; the first window wins
    (Candidate(1, row(1, valid_from=5 * DAY), cos=0.5),
     Signals(Weights(importance=0), windows=(Window(0, 4 * DAY, "a"), Window(4 * DAY, 6 * DAY, "b"),
                                             Window(5 * DAY, 7 * DAY, "c"))),
     0.8, {"vector": (0.5, {"cosine": 0.5, "rank": None}), "time": (0.3, {"phrase": "b"})}),
    (Candidate(1, row(1, created=6 * DAY), cos=0.5), Signals(Weights(importance=0), windows=(Window(0, 6 * DAY, "a"),)),
     0.5, {"vector": (0.5, {"cosine": 0.5, "rank": None})}),
    # recency: weight * 0.5 ** (age / half-life)
    (Candidate(1, row(1, created=NOW - 30 * DAY), cos=0.0), Signals(Weights(recency=0.2, importance=0), now=NOW),
     0.1, {"vector": (0.0, {"cosine": 0.0, "rank": None}), "recency": (0.1, {"age_days": 30.0})}),
    # importance: weight * (importance - 0.5), absent at the default 0.5
    (Candidate(1, row(1, importance=0.9), cos=0.0), Signals(Weights()), 0.1 * 0.4,
     {"vector": (0.0, {"cosine": 0.0, "rank": None}), "importance": (0.1 * 0.4, {"importance": 0.9})}),
    (Candidate(1, row(1, importance=0.5), cos=0.0), Signals(Weights()), 0.0,
     {"vector": (0.0, {"cosine": 0.0, "rank": None})}),
])
def test_base_score(cand, signals, base, parts):
    scoring.base_score(cand, signals)
    assert math.isclose(cand.base, base)
    assert cand.signals.keys() == parts.keys()
    for name, (value, detail) in parts.items():
        assert math.isclose(cand.signals[name][0], value) and cand.signals[name][1] == detail


@pytest.mark.parametrize("seed_base, strength, hops, bonus", [
    (1.0, 1.0, 0, 0.3), (1.0, 1.0, 1, 0.15), (1.0, 1.0, 2, 0.075), (0.5, 0.4, 1, 0.03)])
def test_graph_bonus_is_the_seed_times_the_path_halved_per_hop(seed_base, strength, hops, bonus):
    assert math.isclose(scoring.graph_bonus(Weights(), seed_base, strength, hops), bonus)


def test_add_graph_adds_the_bonus_of_the_memories_in_the_pool_only():
    cands = {1: Candidate(1, row(1), base=0.5), 2: Candidate(2, row(2), base=0.1)}
    scoring.add_graph(cands, {"m_2": (0.2, {"from": "m_1", "via": "likes", "hops": 1}), "m_9": (1.0, {})})
    assert cands[1].base == 0.5 and "graph" not in cands[1].signals
    assert math.isclose(cands[2].base, 0.3) and cands[2].signals["graph"] == (0.2, {"from": "m_1", "via": "likes",
                                                                                   "hops": 1})


def test_best_is_by_base_then_rowid():
    cands = [Candidate(3, row(3), base=0.5), Candidate(1, row(1), base=0.5), Candidate(2, row(2), base=0.9)]
    assert [c.rowid for c in scoring.best(cands, 2)] == [2, 1]


# -- the ranking: context, episode, dedup, cut -------------------------------------------------
def pool(*cands: Candidate) -> dict[int, Candidate]:
    return {c.rowid: c for c in cands}


W = Weights()  # neighbor 0.3, episode 0.5


@pytest.mark.parametrize("cands, k, want", [
    # outside a conversation a memory is its own neighbour and episode:
    # score = base * (1 + neighbor) * (1 + episode)
    (pool(Candidate(1, row(1), base=1.0), Candidate(2, row(2), base=0.5)), 10,
     [(1, 1.0 * 1.3 * 1.5), (2, 0.5 * 1.3 * 1.5)]),
    # a turn takes the best base of the turns before and after it, then the best context of its episode
    (pool(Candidate(1, row(1, thread="t", episode="e"), base=0.2, next=2),
          Candidate(2, row(2, thread="t", episode="e"), base=1.0, prev=1, next=3),
          Candidate(3, row(3, thread="t", episode="e"), base=0.1, prev=2)), 10,
     [(2, 1.0 + 0.3 * 0.2 + 0.5 * (1.0 + 0.3 * 0.2)),
      (1, 0.2 + 0.3 * 1.0 + 0.5 * (1.0 + 0.3 * 0.2)),
      (3, 0.1 + 0.3 * 1.0 + 0.5 * (1.0 + 0.3 * 0.2))]),
    # another episode of the thread does not lift a turn
    (pool(Candidate(1, row(1, thread="t", episode="e1"), base=1.0),
          Candidate(2, row(2, thread="t", episode="e2"), base=0.1)), 10,
     [(1, 1.0 + 0.5 * 1.0), (2, 0.1 + 0.5 * 0.1)]),
    # equal scores rank by rowid; the same text (case and spacing aside) is shown once; cut to k
    (pool(Candidate(5, row(5, "Ann  likes tea"), base=0.5), Candidate(4, row(4, "ann likes tea "), base=0.5),
          Candidate(6, row(6, "Bob"), base=0.4), Candidate(7, row(7, "Cid"), base=0.1)), 2,
     [(4, 0.5 * 1.3 * 1.5), (6, 0.4 * 1.3 * 1.5)]),
])
def test_rank(cands, k, want):
    got = scoring.rank(cands, W, k)
    assert [g["rowid"] for g in got] == [r for r, _ in want]
    for g, (_, score) in zip(got, want):
        assert math.isclose(g["score"], score)


def test_rank_shows_each_signal_rounded():
    c = Candidate(1, row(1), base=0.123456, signals={"vector": (0.123456, {"cosine": 0.123456, "rank": 1}),
                                                    "recency": (0.0, {"age_days": 12.3456})})
    (got,) = scoring.rank({1: c}, Weights(neighbor=0.3, episode=0), 5)
    assert got["signals"] == {"vector": {"score": 0.1235, "cosine": 0.1235, "rank": 1},
                              "recency": {"score": 0.0, "age_days": 12.3},
                              "neighbor": {"score": round(0.3 * 0.123456, 4)}}


def test_weights_come_from_config():
    class Config:
        weight_vector = 0.7
        weight_graph = 0.0
        recency_half_life_days = 7.0

    w = Weights.from_config(Config())
    assert (w.vector, w.graph, w.half_life_days, w.keyword) == (0.7, 0.0, 7.0, Weights().keyword)
