"""Recall's pure scorer (brandmind/scoring.py): tables of candidates and weights in, scores
and rankings out, no store needed."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest

from brandmind import scoring
from brandmind.scoring import Pool, Signals, Weights
from brandmind.storage.recallsql import text_key
from brandmind.timewords import says_when

DAY = 86_400_000
NOW = 1_000 * DAY


SPEAKERS = {"Ann": 0, "Bob": 1}


def cand(rowid: int, *, cos: float = 0.0, bm25: float | None = None, vec_rank: int = 0, kw_rank: int = 0,
         speaker: str | None = None, importance: float = 0.5, created: int = NOW, valid_from: int | None = None,
         episode: str | None = None, base: float | None = None, prev: int | None = None,
         next: int | None = None, asks: float = 0.0) -> dict:
    """One candidate's columns (``episode``: a conversation turn of that episode; ``prev``/``next``:
    the rowids of the linked turns)."""
    return {"rowid": rowid, "cos": cos, "bm25": math.nan if bm25 is None else bm25, "vec_rank": vec_rank,
            "kw_rank": kw_rank, "speaker": SPEAKERS.get(speaker, -1), "created": created,
            "valid_from": scoring.NO_TIME if valid_from is None else valid_from, "importance": importance,
            "turn": episode is not None, "episode": hash(episode) & 0xFFFFFF if episode else 0,
            "thash": text_key(f"memory {rowid}"), "dated": False, "asks": asks, "_base": base, "_prev": prev, "_next": next}


def pool(*cands: dict) -> Pool:
    p = Pool.of(**{f: [c[f] for c in cands] for f in scoring.FIELDS})
    at = {c["rowid"]: i for i, c in enumerate(cands)}
    for i, c in enumerate(cands):
        if c["_base"] is not None:
            p.base[i] = c["_base"]
        p.prev[i] = at.get(c["_prev"], -1)
        p.next[i] = at.get(c["_next"], -1)
    return p


def with_texts(p: Pool, **texts: str) -> Pool:
    """The pool with the texts ``m<rowid>=...`` as the recall index keeps them (their key and
    whether they say when); the others are "memory <rowid>"."""
    for i, rowid in enumerate(p.cols["rowid"].tolist()):
        text = texts.get(f"m{rowid}", f"memory {rowid}")
        p.cols["thash"][i], p.cols["dated"][i] = text_key(text), says_when(text)
    return p


@dataclass
class Window:
    start: int
    end: int
    phrase: str


ONLY_VECTOR = Weights(keyword=0, speaker=0, neighbor=0, episode=0, graph=0, time=0, recency=0, importance=0)


# -- base scores: one signal at a time ---------------------------------------------------------
@pytest.mark.parametrize("cand, signals, base, parts", [
    # the vector signal: weight * cosine, with its rank among the vector hits
    (cand(1, cos=0.8, vec_rank=3), Signals(ONLY_VECTOR), 0.8,
     {"vector": (0.8, {"cosine": 0.8, "rank": 3})}),
    # no cosine (another signal brought it, no vector): 0
    (cand(1), Signals(ONLY_VECTOR), 0.0, {"vector": (0.0, {"cosine": 0.0, "rank": None})}),
    # keyword: weight * bm25 / best bm25
    (cand(1, cos=0.5, bm25=2.0, kw_rank=2), Signals(Weights(importance=0), best_bm=4.0),
     0.5 + 0.4 * 0.5, {"vector": (0.5, {"cosine": 0.5, "rank": None}), "keyword": (0.2, {"bm25": 2.0, "rank": 2})}),
    # keyword weighs nothing when no hit scored above 0
    (cand(1, cos=0.5, bm25=2.0, kw_rank=1), Signals(Weights(importance=0), best_bm=0.0),
     0.5, {"vector": (0.5, {"cosine": 0.5, "rank": None})}),
    # speaker: the one speaker the query names, on that speaker's turn
    (cand(1, speaker="Ann", cos=0.5), Signals(Weights(importance=0), speaker=0, speaker_name="Ann"), 1.0,
     {"vector": (0.5, {"cosine": 0.5, "rank": None}), "speaker": (0.5, {"speaker": "Ann"})}),
    (cand(1, speaker="Bob", cos=0.5), Signals(Weights(importance=0), speaker=0, speaker_name="Ann"), 0.5,
     {"vector": (0.5, {"cosine": 0.5, "rank": None})}),
    # time: valid_from (else created_at) inside a window the query names; the first window wins
    (cand(1, valid_from=5 * DAY, cos=0.5),
     Signals(Weights(importance=0), windows=(Window(0, 4 * DAY, "a"), Window(4 * DAY, 6 * DAY, "b"),
                                             Window(5 * DAY, 7 * DAY, "c"))),
     0.8, {"vector": (0.5, {"cosine": 0.5, "rank": None}), "time": (0.3, {"phrase": "b"})}),
    # ... or told within a day after it ends (TOLD_AFTER: "last night we ..."), not later
    (cand(1, created=6 * DAY + DAY // 2, cos=0.5), Signals(Weights(importance=0), windows=(Window(0, 6 * DAY, "a"),)),
     0.8, {"vector": (0.5, {"cosine": 0.5, "rank": None}), "time": (0.3, {"phrase": "a"})}),
    (cand(1, created=7 * DAY, cos=0.5), Signals(Weights(importance=0), windows=(Window(0, 6 * DAY, "a"),)),
     0.5, {"vector": (0.5, {"cosine": 0.5, "rank": None})}),
    # recency: weight * 0.5 ** (age / half-life)
    (cand(1, created=NOW - 30 * DAY), Signals(Weights(recency=0.2, importance=0), now=NOW),
     0.1, {"vector": (0.0, {"cosine": 0.0, "rank": None}), "recency": (0.1, {"age_days": 30.0})}),
    # importance: weight * (importance - 0.5), absent at the default 0.5
    (cand(1, importance=0.9), Signals(Weights()), 0.1 * 0.4,
     {"vector": (0.0, {"cosine": 0.0, "rank": None}), "importance": (0.1 * 0.4, {"importance": 0.9})}),
    (cand(1, importance=0.5), Signals(Weights()), 0.0,
     {"vector": (0.0, {"cosine": 0.0, "rank": None})}),
])
def test_base_score(cand, signals, base, parts):
    p = pool(cand)
    scoring.base_scores(p, signals)
    assert math.isclose(p.base[0], base)
    (got,) = scoring.rank(p, replace(signals, weights=replace(signals.weights, neighbor=0, episode=0)), 1)
    assert got["signals"] == scoring.shown(parts)
    assert math.isclose(got["score"], base)


@pytest.mark.parametrize("asked, lost", [(1.0, 0.7), (0.3, 0.7 * 0.09), (0.0, 0.0)])
def test_a_turn_that_asks_loses_weight_times_the_square_of_its_share_in_the_final_score_only(asked, lost):
    """``asks``: the asking turn's own score drops; its base, which lifts the reply after it
    (neighbor) and its episode, does not."""
    w = Weights(importance=0)
    p = pool(cand(1, cos=0.8, episode="e", next=2, asks=asked), cand(2, cos=0.5, episode="e", prev=1))
    scoring.base_scores(p, Signals(w))
    assert p.base.tolist() == [0.8, 0.5]
    got = {h["rowid"]: h for h in scoring.rank(p, Signals(w), 2)}
    assert math.isclose(got[1]["score"], 0.8 + 0.3 * 0.5 + 0.5 * (0.8 + 0.3 * 0.5) - lost)
    assert math.isclose(got[2]["score"], 0.5 + 0.3 * 0.8 + 0.5 * (0.8 + 0.3 * 0.5))  # the reply keeps all
    assert got[1]["signals"].get("asks") == ({"score": round(-lost, 4), "asked": asked} if asked else None)
    off = {h["rowid"]: h["score"] for h in scoring.rank(p, Signals(replace(w, asks=0)), 2)}
    assert math.isclose(off[1], got[1]["score"] + lost)


def test_base_scores_only_set_the_entries_from_start():
    p = pool(cand(1, cos=0.9), cand(2, cos=0.4))
    p.base[0] = 7.0
    scoring.base_scores(p, Signals(ONLY_VECTOR), start=1)
    assert p.base[0] == 7.0 and math.isclose(p.base[1], 0.4)


@pytest.mark.parametrize("seed_base, strength, hops, bonus", [
    (1.0, 1.0, 0, 0.3), (1.0, 1.0, 1, 0.15), (1.0, 1.0, 2, 0.075), (0.5, 0.4, 1, 0.03)])
def test_graph_bonus_is_the_seed_times_the_path_halved_per_hop(seed_base, strength, hops, bonus):
    assert math.isclose(scoring.graph_bonus(Weights(), seed_base, strength, hops), bonus)


def test_add_graph_adds_each_bonus_to_its_entry_and_shows_how():
    p = pool(cand(1, base=0.5), cand(2, base=0.1))
    scoring.add_graph(p, {1: (0.2, {"from": "m_1", "via": "likes", "hops": 1})})
    assert p.base[0] == 0.5 and math.isclose(p.base[1], 0.3)
    got = {g["rowid"]: g["signals"] for g in scoring.rank(p, Signals(Weights(neighbor=0, episode=0)), 5)}
    assert "graph" not in got[1] and got[2]["graph"] == {"score": 0.2, "from": "m_1", "via": "likes", "hops": 1}


def test_best_is_by_base_then_rowid():
    p = pool(cand(3, base=0.5), cand(1, base=0.5), cand(2, base=0.9))
    assert [int(p.cols["rowid"][i]) for i in scoring.best(p, 2)] == [2, 1]


# -- the ranking: context, episode, dedup, cut -------------------------------------------------
W = Weights()  # neighbor 0.3, episode 0.5


@pytest.mark.parametrize("cands, k, texts, want", [
    # outside a conversation a memory is its own neighbour and episode:
    # score = base * (1 + neighbor) * (1 + episode)
    (pool(cand(1, base=1.0), cand(2, base=0.5)), 10, {},
     [(1, 1.0 * 1.3 * 1.5), (2, 0.5 * 1.3 * 1.5)]),
    # a turn takes the best base of the turns before and after it, then the best context of its episode
    (pool(cand(1, episode="e", base=0.2, next=2), cand(2, episode="e", base=1.0, prev=1, next=3),
          cand(3, episode="e", base=0.1, prev=2)), 10, {},
     [(2, 1.0 + 0.3 * 0.2 + 0.5 * (1.0 + 0.3 * 0.2)),
      (1, 0.2 + 0.3 * 1.0 + 0.5 * (1.0 + 0.3 * 0.2)),
      (3, 0.1 + 0.3 * 1.0 + 0.5 * (1.0 + 0.3 * 0.2))]),
    # an unlinked turn has no neighbour; another episode of the thread does not lift a turn
    (pool(cand(1, episode="e1", base=1.0), cand(2, episode="e2", base=0.1)), 10, {},
     [(1, 1.0 + 0.5 * 1.0), (2, 0.1 + 0.5 * 0.1)]),
    # equal scores rank by rowid; the same text (case and spacing aside) is shown once; cut to k
    (pool(cand(5, base=0.5), cand(4, base=0.5), cand(6, base=0.4), cand(7, base=0.1)), 2,
     {"m5": "Ann  likes tea", "m4": "ann likes tea ", "m6": "Bob", "m7": "Cid"},
     [(4, 0.5 * 1.3 * 1.5), (6, 0.4 * 1.3 * 1.5)]),
])
def test_rank(cands, k, texts, want):
    got = scoring.rank(with_texts(cands, **texts), Signals(W), k)
    assert [g["rowid"] for g in got] == [r for r, _ in want]
    for g, (_, score) in zip(got, want):
        assert math.isclose(g["score"], score)


def test_rank_keeps_the_best_entry_of_each_text_in_score_order():
    # 200 entries, 5 texts: the best of each text, best first, wherever in the pool it is
    p = pool(*[cand(r, base=1.0 - r / 1000) for r in range(1, 201)])
    with_texts(p, **{f"m{r}": f"text {r % 5}" for r in range(1, 201)})
    assert [g["rowid"] for g in scoring.rank(p, Signals(W), 10)] == [1, 2, 3, 4, 5]
    assert [g["rowid"] for g in scoring.rank(p, Signals(W), 3)] == [1, 2, 3]


def test_rank_shows_each_signal_rounded():
    p = pool(cand(1, cos=0.123456, vec_rank=1, created=NOW - int(12.3456 * DAY)))
    s = Signals(Weights(neighbor=0.3, episode=0, recency=1e-9, importance=0), now=NOW)
    scoring.base_scores(p, s)
    (got,) = scoring.rank(p, s, 5)
    assert got["signals"]["vector"] == {"score": 0.1235, "cosine": 0.1235, "rank": 1}
    assert got["signals"]["recency"] == {"score": 0.0, "age_days": 12.3}
    assert got["signals"]["neighbor"] == {"score": round(0.3 * float(p.base[0]), 4)}


def test_weights_come_from_config():
    class Config:
        weight_vector = 0.7
        weight_graph = 0.0
        recency_half_life_days = 7.0

    w = Weights.from_config(Config())
    assert (w.vector, w.graph, w.half_life_days, w.keyword) == (0.7, 0.0, 7.0, Weights().keyword)


def test_a_when_question_lifts_the_best_entries_that_say_when():
    p = pool(cand(1, base=1.0), cand(2, base=0.95), cand(3, base=0.92), cand(4, base=0.91))
    with_texts(p, m1="Ann: I like tea", m2="Bob: we met yesterday", m3="Cid: back in May 2023",
               m4="Dan: the 12th was fun")
    w = Weights(neighbor=0, episode=0)
    got = scoring.rank(p, Signals(w, asks_when=True), 4)
    assert [g["rowid"] for g in got] == [2, 3, 4, 1]
    assert got[0]["signals"]["dated"] == {"score": w.dated} and "dated" not in got[3]["signals"]
    assert math.isclose(got[0]["score"], 0.95 + w.dated)
    # not asked when, or the weight off: the order of the base scores
    for s in (Signals(w), Signals(replace(w, dated=0), asks_when=True)):
        assert [g["rowid"] for g in scoring.rank(p, s, 4)] == [1, 2, 3, 4]


def test_only_the_best_entries_are_checked_for_a_statement_of_when():
    n = scoring.DATED_POOL + 5
    p = pool(*[cand(r, base=1.0 - r / 1000) for r in range(1, n + 1)])
    with_texts(p, **{f"m{n}": "we met yesterday", f"m{scoring.DATED_POOL}": "we met on Friday"})
    got = [g["rowid"] for g in scoring.rank(p, Signals(Weights(neighbor=0, episode=0), asks_when=True), 5)]
    assert got == [scoring.DATED_POOL, 1, 2, 3, 4]  # the last one, lifted, would be second
