"""Keyword search (brandmind/storage/keywords.py): the candidate cap keeps the full BM25 ranking
of the candidates, never empties a query, changes nothing below it, and the filters are checked
over every candidate only when they dropped hits and more candidates exist."""
from __future__ import annotations

import pytest

from brandmind.memory import Memory
from brandmind.storage import keywords
from brandmind.storage.search import Filters


def _exact(mem: Memory, words: list[str], user: str, n: int) -> list[tuple[int, float]]:
    """Every given word ranked by FTS5 bm25 over all its postings, the user's memories only."""
    rows = mem.sql.conn.execute(
        "SELECT m.rowid, bm25(memories_fts) AS s FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid "
        "WHERE memories_fts MATCH ? AND m.user_id = ? ORDER BY s, m.rowid LIMIT ?",
        [keywords.keyword_query(words), user, n]).fetchall()
    return [(r[0], -r[1]) for r in rows]


def _candidates(mem: Memory, query: str, n: int, user: str | None = None) -> list[tuple[int, float]]:
    return mem.store.searcher.keyword_candidates(query, Filters(user=mem.store.user(user)), n)


@pytest.fixture()
def river(store):
    """80 memories: "zebra" in 3 (one of them also "river"), "river" in 6, filler in all."""
    with Memory() as mem:
        for i in range(80):
            text = f"note {i} about the weather"
            if i in (3, 4):
                text = f"zebra seen {i}"                      # short: ranks first on "zebra" alone
            if i == 7:
                text = f"note {i}: a zebra crossed the river near the weather station"
            if i in (10, 11, 12, 13, 14):
                text = f"note {i}: the river rose in the weather"
            mem.remember(text)
        yield mem


def test_below_the_caps_the_candidates_are_the_exact_bm25_ranking(river) -> None:
    user = river.store.user(None)
    got = _candidates(river, "zebra river", 10)
    want = _exact(river, ["zebra", "river"], user, 10)
    assert [r for r, _ in got] == [r for r, _ in want] and len(got) == 8
    assert [s for _, s in got] == pytest.approx([s for _, s in want])


def test_the_candidate_cap_ranks_its_candidates_by_every_kept_word(river, monkeypatch) -> None:
    monkeypatch.setattr(keywords, "CANDIDATE_POSTINGS", 1)  # "zebra" (3) alone chooses
    assert river.store.searcher.keywords.words("zebra river") == (["zebra"], ["river"])
    user = river.store.user(None)
    got = _candidates(river, "zebra river", 10)
    exact = dict(_exact(river, ["zebra", "river"], user, 10))
    zebra = [r for r, _ in _exact(river, ["zebra"], user, 10)]
    # only memories holding "zebra" are candidates, each scored as the uncapped query scores it:
    # the one with "river" too comes first (on "zebra" alone it would be last)
    assert {r for r, _ in got} == set(zebra)
    assert got[0][0] == zebra[-1]
    for rowid, score in got:
        assert score == pytest.approx(exact[rowid])


def test_a_cap_never_drops_the_rarest_word(river, monkeypatch) -> None:
    monkeypatch.setattr(keywords, "CANDIDATE_POSTINGS", 0)
    monkeypatch.setattr(keywords, "MAX_POSTINGS", 0)
    assert river.store.searcher.keywords.words("river zebra") == (["zebra"], [])
    assert len(_candidates(river, "river zebra", 10)) == 3
    assert keywords.split_words(["a", "b"], {"a": 50, "b": 40}, 1000, 0, 0) == (["b"], [])
    assert keywords.split_words(["a", "b"], {"a": 50, "b": 40}, 1000, 90, 40) == (["b"], ["a"])
    assert keywords.split_words(["a", "b"], {"a": 50, "b": 40}, 1000, 89, None) == (["b"], [])


def _count_rankings(monkeypatch) -> list:
    calls: list = []
    real = keywords.ranked

    def counting(sql, rare, other, limit, newest=None):  # type: ignore[no-untyped-def]
        calls.append(limit)
        return real(sql, rare, other, limit, newest)

    monkeypatch.setattr(keywords, "ranked", counting)
    return calls


def test_every_candidate_is_ranked_again_only_when_the_filters_dropped_hits_and_more_exist(store, monkeypatch) -> None:
    with Memory() as mem:
        for i in range(10):  # bob's: the best hits (short texts)
            mem.remember(f"kayak {i}", user="bob")
        mem.remember("ann went out in the kayak on the lake with her sister", user="ann")
        mem.ingest([{"role": "user", "content": f"filler note {i} about something else"} for i in range(100)],
                   user="ann")
        ann = {r[0] for r in mem.sql.conn.execute("SELECT rowid FROM memories WHERE user_id = 'ann'")}
        calls = _count_rankings(monkeypatch)
        # 11 hits, pool 4 x 2 = 8: bob's fill the pool, so every candidate is ranked again
        got = _candidates(mem, "kayak", 2, user="ann")
        assert calls == [8, None] and len(got) == 1 and got[0][0] in ann
        # pool 4 x 3 = 12 holds all 11 hits: filtering them is the answer, no second ranking
        calls.clear()
        assert _candidates(mem, "kayak", 3, user="ann") == got and calls == [12]
        # the first n hits pass: nothing more is looked at
        calls.clear()
        assert len(_candidates(mem, "kayak", 2, user="bob")) == 2 and calls == [8]


def test_counts_are_read_again_after_a_write(store) -> None:
    with Memory() as mem:
        for i in range(30):
            mem.remember(f"note {i} about the weather" + (" and the garden" if i < 2 else ""))
        kw = mem.store.searcher.keywords
        assert kw.words("garden") == (["garden"], [])
        assert kw.total() == 30
        for i in range(6):  # "garden": 8 of 36, over the 10% share: skipped from now on
            mem.remember(f"garden note {i}")
        assert kw.total() == 36 and kw.words("garden") == ([], [])
        mem.forget(mem.list_memories(limit=1)[0]["id"])
        count = mem.sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        assert kw.total() == count == keywords.indexed_rows(mem.sql)


def test_frequencies_outlive_writes_that_barely_move_n(store, monkeypatch) -> None:
    """An agent writes every turn: the frequencies (a doclist walk per word) are kept until N
    moves by DF_STALE_SHARE; N itself is read after every write."""
    read = []
    real = keywords.doc_freq
    monkeypatch.setattr(keywords, "doc_freq", lambda sql, terms: read.append(terms) or real(sql, terms))
    monkeypatch.setattr(keywords, "DF_STALE_SHARE", 0.5)
    with Memory() as mem:
        for i in range(30):
            mem.remember(f"note {i} about the weather")
        kw = mem.store.searcher.keywords
        kw.words("weather report")
        assert len(read) == 1
        mem.remember("one more note")  # 31 of 30: within the share
        kw.words("weather report")
        assert len(read) == 1 and kw.total() == 31
        for i in range(15):
            mem.remember(f"another note {i}")  # 46: past it
        kw.words("weather report")
        assert len(read) == 2


def test_a_candidate_word_in_too_many_memories_ranks_only_its_newest(store, monkeypatch) -> None:
    with Memory() as mem:
        mem.ingest([{"role": "user", "content": f"filler note {i} about something else"} for i in range(200)])
        kayak = [mem.remember("kayak lake" if i == 0 else f"kayak trip {i} with lake" if i in (5, 10, 11)
                              else f"kayak trip {i}")["id"] for i in range(12)]
        for j in range(11):
            mem.remember(f"lake view {j}")
        rowid = dict(mem.sql.conn.execute("SELECT id, rowid FROM memories").fetchall())
        newest4 = [rowid[m] for m in kayak[-4:]]
        user = mem.store.user(None)
        # uncapped, the short "kayak lake" (the oldest) is the best hit
        assert _exact(mem, ["kayak", "lake"], user, 1)[0][0] == rowid[kayak[0]]
        monkeypatch.setattr(keywords, "CANDIDATE_POSTINGS", 1)  # "kayak" (12) chooses, "lake" (15) scores
        monkeypatch.setattr(keywords, "NEWEST_RANKED", 1)       # the window: max(1, 4 x n) = 4 rows
        assert mem.store.searcher.keywords.words("kayak lake") == (["kayak"], ["lake"])
        calls = _count_rankings(monkeypatch)
        got = _candidates(mem, "kayak lake", 1)
        # only the newest four memories holding "kayak" were ranked, by both words: one with "lake" wins
        marks = ",".join("?" * 4)
        want = mem.sql.conn.execute(
            f"SELECT rowid, bm25(memories_fts) AS s FROM memories_fts WHERE memories_fts MATCH ? AND rowid IN ({marks}) "
            "ORDER BY s, rowid LIMIT 1", [keywords.keyword_query(["kayak", "lake"]), *newest4]).fetchall()
        assert [r for r, _ in got] == [want[0][0]] and want[0][0] in (rowid[kayak[10]], rowid[kayak[11]])
        assert got[0][1] == pytest.approx(-want[0][1]) and calls == [4]
