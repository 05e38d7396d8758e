"""Recall's keyword postings (brandmind/storage/kwindex.py): the same BM25 as SQLite's FTS5
over the same tokens, kept in step with writes, rewrites, reopens and forgets (a forgotten
memory's words leave the index file too)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from brandmind.memory import Memory
from brandmind.storage import keywords, kwindex, recallindex
from brandmind.storage.indexfile import IndexFile
from brandmind.storage.search import Filters

WORDS = ("river stone maple cedar harbor lantern violet ember quartz meadow falcon orchid "
         "canyon willow saffron copper glacier thistle juniper marble").split()


def fts_bm25(mem: Memory, words: list[str]) -> dict[int, float]:
    """rowid -> minus FTS5's bm25 of the memories holding any of ``words`` (SQLite's own ranking)."""
    q = keywords.keyword_query(words)
    return {r: -s for r, s in mem.sql.conn.execute(
        "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?", [q])}


def ours(mem: Memory, query: str, n: int = 10_000) -> dict[int, float]:
    ri = mem.store.searcher.recall_index()
    m = ri.mask(Filters(user=mem.store.user(None)))
    pos, score = ri.keywords(query, m, n)
    return dict(zip(ri.cols["rowid"][pos].tolist(), score.tolist()))


def same(mem: Memory, query: str) -> None:
    want, got = fts_bm25(mem, keywords.query_words(query)), ours(mem, query)
    assert set(got) == set(want), query
    for rowid, score in want.items():
        assert got[rowid] == pytest.approx(score, rel=1e-9, abs=1e-12), (query, rowid)


@pytest.fixture
def every_word(monkeypatch):
    """No word is too common to search (the caps have their own tests in test_keywords.py)."""
    monkeypatch.setattr(keywords, "COMMON_SHARE", 1.0)
    monkeypatch.setattr(keywords, "MAX_POSTINGS", 10**9)


def texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        words = rng.choices(WORDS, k=rng.randint(1, 12))
        out.append(" ".join(w.capitalize() if rng.random() < 0.2 else w + ("s" if rng.random() < 0.2 else "")
                            for w in words) + f" (note {i}).")
    return out


QUERIES = ["river stones", "maple and the cedars", "Glacier? quartz!", "falcon orchid canyon willow", "note 7",
           "nothing-here-at-all", "the", "lantern lanterns river rivers"]  # (the last: two words, one stem each)


def test_scores_are_sqlites_bm25_from_the_file_the_delta_and_after_a_rewrite(store, every_word, monkeypatch):
    rng = random.Random(7)
    with Memory() as mem:
        for t in texts(rng, 120):
            mem.remember(t)
        for q in QUERIES:  # the first search builds the file
            same(mem, q)
        for t in texts(rng, 40):  # rows past the file: the process's delta
            mem.remember(t)
        for h in mem.list_memories(limit=200)[::7]:  # rows of the file changed (their text is the same)
            mem.pin(h["id"])
        ri = mem.store.searcher.recall_index()
        assert ri.kw.extra, "the new rows' postings are in the delta"
        for q in QUERIES:
            same(mem, q)
        victims = [h["id"] for h in mem.list_memories(limit=200)][::9]
        for mid in victims:  # dead rows: neither found nor counted in N, df or the average length
            mem.forget(mid)
        for q in QUERIES:
            same(mem, q)
        ri = mem.store.searcher.recall_index()
        ri.persist()  # the delta folded into a new file, the dead rows dropped
        assert not ri.kw.extra and not ri.kw.void
        for q in QUERIES:
            same(mem, q)
    with Memory() as mem:  # a new process reads the file
        for q in QUERIES:
            same(mem, q)


def test_a_reused_rowid_takes_the_new_texts_words_only(store, every_word):
    with Memory() as mem:
        for i in range(5):
            mem.remember(f"harbor lantern {i}")
        top = mem.remember("saffron glacier thistle")
        ours(mem, "saffron")  # in the file now
        mem.forget(top["id"])
        again = mem.remember("juniper marble")
        rowid = mem.sql.conn.execute("SELECT rowid FROM memories WHERE id=?", [again["id"]]).fetchone()[0]
        assert ours(mem, "saffron glacier") == {}
        assert list(ours(mem, "juniper")) == [rowid]
        same(mem, "juniper harbor saffron")


def test_a_forgotten_memorys_words_leave_the_file(store):
    with Memory() as mem:
        for i in range(5):
            mem.remember(f"filler {i} about the canal boat")
        secret = mem.remember("my locker code is zanzibar8812")
        assert ours(mem, "zanzibar8812")  # the file is written with it
        path = mem.store.paths.data_dir / "recall.idx"
        assert kwindex.term_key("zanzibar8812") in set(IndexFile.open(path).postings()[0].tolist())
        mem.forget(secret["id"])
        keys = set(IndexFile.open(path).postings()[0].tolist())
        assert kwindex.term_key("zanzibar8812") not in keys and kwindex.term_key("locker") not in keys
        assert kwindex.term_key("canal") in keys and ours(mem, "canal boat")
        assert ours(mem, "zanzibar8812 locker") == {}
    with Memory() as mem:
        assert ours(mem, "zanzibar8812 locker") == {}


def test_filters_and_ties_best_first_then_rowid(store):
    with Memory() as mem:
        for i in range(6):
            mem.remember("copper kettle", user="ann")
            mem.remember("copper kettle", user="bob")
        ri = mem.store.searcher.recall_index()
        m = ri.mask(Filters(user=mem.store.user("ann")))
        pos, score = ri.keywords("copper", m, 4)
        assert len(pos) == 4 and m[pos].all() and len(set(score.round(12).tolist())) == 1
        assert list(pos) == sorted(pos) == list(np.flatnonzero(m)[:4])


def test_pack_groups_by_key_keeping_the_order_within_a_key():
    keys = np.array([3, 5, 9], np.uint64)
    ids = np.array([1, 0, 1, 0, 2], np.uint32)
    pos = np.array([4, 2, 1, 0, 3])
    k, start, p, tf = kwindex.pack(keys, ids, pos, np.arange(5))
    assert k.tolist() == [3, 5, 9] and start.tolist() == [0, 2, 4, 5]
    assert p.tolist() == [2, 0, 4, 1, 3] and tf.tolist() == [1, 3, 0, 2, 4]
    b = kwindex.Builder()
    b.add([0, 1], [["x", "y", "x"], ["y"]])
    b.add([2], [["z", "x"]])
    k, start, p, tf = b.arrays()
    got = {int(k[i]): list(zip(p[start[i]:start[i + 1]].tolist(), tf[start[i]:start[i + 1]].tolist()))
           for i in range(len(k))}
    assert got == {kwindex.term_key("x"): [(0, 2), (2, 1)], kwindex.term_key("y"): [(0, 1), (1, 1)],
                   kwindex.term_key("z"): [(2, 1)]}
