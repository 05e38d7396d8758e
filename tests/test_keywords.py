"""Keyword search (brandmind/storage/keywords.py chooses the words, storage/kwindex.py ranks):
below the caps the candidates are SQLite's own BM25 ranking, a cap never empties a query,
the filters apply before the cut to n, and the counts follow every write."""
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
    # "note" and "weather" are in most memories: skipped, they change nothing
    assert [r for r, _ in _candidates(river, "zebra river weather note", 10)] == [r for r, _ in got]


def test_a_cap_never_drops_the_rarest_word(river, monkeypatch) -> None:
    monkeypatch.setattr(keywords, "MAX_POSTINGS", 0)
    assert river.store.searcher.selective_words("river zebra") == ["zebra"]
    user = river.store.user(None)
    got = _candidates(river, "river zebra", 10)
    want = _exact(river, ["zebra"], user, 10)
    assert [r for r, _ in got] == [r for r, _ in want] and len(got) == 3
    assert keywords.keep_words(["a", "b"], {"a": 50, "b": 40}, 1000, 0) == ["b"]
    assert keywords.keep_words(["a", "b"], {"a": 50, "b": 40}, 1000, 90) == ["a", "b"]
    assert keywords.keep_words(["a", "b"], {"a": 50, "b": 40}, 1000, 89) == ["b"]
    assert keywords.keep_words(["a", "b"], {"a": 150, "b": 40}, 1000, None) == ["b"]  # a: over 10%
    assert keywords.keep_words(["a", "b"], {"a": 15, "b": 4}, 10, None) == ["a", "b"]  # a small store


def test_the_filters_apply_before_the_cut_to_n(store) -> None:
    with Memory() as mem:
        for i in range(8):  # bob's: the best hits (short texts)
            mem.remember(f"kayak {i}", user="bob")
        mem.remember("ann went out in the kayak on the lake with her sister", user="ann")
        mem.remember("ann's second kayak story, a long one about the river and the rain", user="ann")
        mem.ingest([{"role": "user", "content": f"filler note {i} about something else"} for i in range(100)],
                   user="ann")
        ann = {r[0] for r in mem.sql.conn.execute("SELECT rowid FROM memories WHERE user_id = 'ann'")}
        got = _candidates(mem, "kayak", 2, user="ann")
        assert len(got) == 2 and {r for r, _ in got} <= ann
        want = _exact(mem, ["kayak"], "ann", 2)
        assert [r for r, _ in got] == [r for r, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want])
        bob = _candidates(mem, "kayak", 3, user="bob")
        assert len(bob) == 3 and not {r for r, _ in bob} & ann


def test_counts_follow_every_write(store) -> None:
    with Memory() as mem:
        for i in range(30):
            mem.remember(f"note {i} about the weather" + (" and the garden" if i < 2 else ""))
        search = mem.store.searcher
        assert search.selective_words("garden") == ["garden"]
        for i in range(6):  # "garden": 8 of 36, over the 10% share: skipped from now on
            mem.remember(f"garden note {i}")
        assert search.selective_words("garden") == []
        for m in mem.list_memories(limit=1000):
            if "garden" in m["text"] and not m["text"].startswith("note"):
                mem.forget(m["id"])  # 2 of 30 again
        assert search.selective_words("garden") == ["garden"]
        assert {r for r, _ in _candidates(mem, "garden", 10)} == {
            r[0] for r in mem.sql.conn.execute("SELECT rowid FROM memories WHERE text LIKE '%garden%'")}
