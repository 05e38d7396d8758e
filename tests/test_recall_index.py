"""The recall index (brandmind/storage/recallindex.py): the sign-code first pass finds what
an exact scan finds, the filter columns agree with the SQL filters, the neighbour links
agree with the thread order in SQLite, and the file survives what other processes do."""
from __future__ import annotations

import json

import numpy as np
import pytest

from brandmind.memory import Memory
from brandmind.storage import kwindex, recallindex
from brandmind.storage.indexfile import IndexFile
from brandmind.storage.recallsql import rotate, text_key
from brandmind.questions import asked_share
from brandmind.timewords import says_when
from brandmind.storage.search import Filters


@pytest.fixture()
def big(store):
    """1,200 memories of two users, two agents and three types, some retired, in threads."""
    with Memory() as mem:
        lines = [json.dumps({"role": "user", "speaker": "Ann" if i % 3 else "Bo", "thread": f"t{i % 4}",
                             "content": f"message {i} about topic {i % 37} and colour {i % 11} with word w{i % 101}",
                             "ts": 1_700_000_000_000 + i * 60_000})
                 for i in range(1000)]
        mem.ingest(lines, user="ann")
        for i in range(200):
            mem.remember(f"fact {i}: the item {i % 13} is kept in box {i % 7}", user="ann" if i % 2 else "zed",
                         agent="a1" if i % 5 == 0 else None, type="fact" if i % 3 else "preference")
        yield mem


@pytest.mark.parametrize("rows", ["one user's", "every row"])
def test_the_code_first_pass_finds_what_an_exact_scan_finds(big, monkeypatch, rows):
    monkeypatch.setattr(recallindex, "EXACT_MAX", 0)
    monkeypatch.setattr(recallindex, "FIRST_KEEP", 2)
    ri = big.store.searcher.recall_index()
    # every row passing the filters takes the first pass's own path (the rescored rows are a subset)
    m = ri.mask(Filters(user="ann")) if rows == "one user's" else ri.cols["has_vec"][:ri.n] == 1
    vecs = ri.cols["vec"][:ri.n] * ri.cols["vscale"][:ri.n, None]  # int8 rows x 1 / their norm
    found = 0
    for q in big.embedder.embed_documents([f"topic {i} colour {i % 11}" for i in range(30)]):
        q = np.asarray(q, np.float32)
        pos, sims = ri.nearest(q, m, 10, rescore=100)
        assert np.all(np.diff(sims) <= 0) and m[pos].all()
        exact = np.flatnonzero(m)[np.argsort(-(vecs[m] @ rotate(q)[0]), kind="stable")[:10]]  # rows as SQLite keeps them
        found += len(set(pos.tolist()) & set(exact.tolist()))
    assert found / 300 >= 0.9  # 100 of ~1,100 (~1,200) rows rescored


def test_the_mask_agrees_with_the_sql_filters(big):
    ri = big.store.searcher.recall_index()
    (first,) = big.sql.conn.execute("SELECT id FROM memories WHERE user_id = 'ann' LIMIT 1").fetchone()
    big.forget(first)
    ri = big.store.searcher.recall_index()
    cases = [Filters(user="ann"), Filters(user="zed"), Filters(user="nobody"), Filters(user="ann", agent="a1"),
             Filters(user="ann", agent="a1", scope="agent"), Filters(user="ann", scope="global"),
             Filters(user="ann", types=("preference",)), Filters(user="ann", since=1_700_000_000_000 + 500 * 60_000),
             Filters(user="ann", until=1_700_000_000_000 + 10 * 60_000), Filters(user="ann", everything=True)]
    for f in cases:
        where, args = f.sql("m")
        want = {r[0] for r in big.sql.conn.execute(f"SELECT rowid FROM memories m WHERE {where}", args)}
        got = set(ri.cols["rowid"][:ri.n][ri.mask(f)].tolist())
        assert got == want, f


def test_neighbour_links_follow_the_thread_order_after_adds_and_forgets(big):
    ri = big.store.searcher.recall_index()
    turns = [r[0] for r in big.sql.conn.execute("SELECT id FROM memories WHERE thread = 't1' ORDER BY created_at")]
    big.forget(turns[3])
    big.ingest([json.dumps({"role": "user", "thread": "t1", "content": "a late turn",
                            "ts": 1_700_000_000_000 + 10 * 60_000 + 1})], user="ann")  # lands mid-thread
    ri = big.store.searcher.recall_index()
    rows = big.sql.conn.execute("SELECT rowid, user_id, thread FROM memories WHERE thread IS NOT NULL "
                                "ORDER BY user_id, thread, created_at, rowid").fetchall()
    want = {}
    for a, b in zip(rows, rows[1:]):
        if a[1:] == b[1:]:
            want[a[0]] = b[0]
    pos = ri.positions([r[0] for r in rows])
    got = {int(ri.cols["rowid"][p]): int(ri.cols["next"][p]) for p in pos if ri.cols["next"][p] >= 0}
    assert got == want


def _text_columns_agree(mem: Memory) -> int:
    ri = mem.store.searcher.recall_index()
    texts = dict(mem.sql.conn.execute("SELECT rowid, text FROM memories").fetchall())
    speakers = dict(mem.sql.conn.execute("SELECT rowid, speaker FROM memories").fetchall())
    turns = {r for (r,) in mem.sql.conn.execute("SELECT rowid FROM memories WHERE thread IS NOT NULL")}
    pos = ri.positions(sorted(texts))
    assert (pos >= 0).all()
    assert ri.cols["thash"][pos].tolist() == [text_key(texts[r]) for r in sorted(texts)]
    assert ri.cols["dated"][pos].tolist() == [says_when(texts[r]) for r in sorted(texts)]
    assert ri.cols["asks"][pos].tolist() == [round(100 * asked_share(texts[r], speakers[r])) if r in turns else 0
                                             for r in sorted(texts)]  # a question remembered as such keeps its score
    return len(texts)


def test_recall_shows_one_memory_per_text_from_the_index_columns(store):
    with Memory() as mem:
        a = mem.remember("Ann keeps the spare key under the blue pot")["id"]
        mem.remember("ann keeps the  spare key under the BLUE pot ")
        mem.remember("Ann moved the spare key on 12 May 2023")
        mem.remember("Open question: should the spare key go to Bo?")
        mem.ingest([json.dumps({"role": "user", "speaker": "Bo", "content": "Where is it? Did Ann move the key?"})])
        got = [h["id"] for h in mem.recall("where is the spare key", k=5)]
        assert len(got) == 4 and a in got  # the older of two equal texts (equal scores: lower rowid)
        _text_columns_agree(mem)  # caught up in this process
        (rowid,) = mem.sql.conn.execute("SELECT rowid FROM memories WHERE id = ?", (a,)).fetchone()
        mem.forget(a)
        assert len(mem.recall("where is the spare key", k=5)) == 4  # the other copy now shows
        ri = mem.store.searcher.recall_index()
        (pos,) = ri.positions([rowid], live=False)
        assert ri.cols["alive"][pos] == 0 and ri.cols["thash"][pos] == 0  # no key of a forgotten text left
        assert ri.cols["asks"][ri.positions(sorted(dict(mem.sql.conn.execute(
            "SELECT rowid, 1 FROM memories WHERE speaker = 'Bo'").fetchall())))].tolist() == [100]
    with Memory() as mem:
        assert _text_columns_agree(mem) == 4  # from the file


def test_a_torn_or_foreign_file_is_rebuilt_not_trusted(store):
    with Memory() as mem:
        mem.remember("the red kite nests in the oak")
        mem.recall("kite")
        path = mem.store.paths.data_dir / "recall.idx"
    path.write_bytes(path.read_bytes()[:5000])  # torn
    with Memory() as mem:
        assert mem.recall("where does the kite nest", k=1)[0]["text"] == "the red kite nests in the oak"
    assert path.stat().st_size > 5000


def test_rebuild_and_reindex_write_a_new_index_file(store):
    with Memory() as mem:
        for i in range(30):
            mem.remember(f"note {i}: the harbour crane lifts container {i}")
        before = [h["id"] for h in mem.recall("which crane lifts container 7", k=5)]
        path = mem.store.paths.data_dir / "recall.idx"
        first = path.stat().st_ino
        mem.admin.rebuild()
        assert path.stat().st_ino != first  # written by the rebuild, not by a later query
        rebuilt = path.stat().st_ino
        assert [h["id"] for h in mem.recall("which crane lifts container 7", k=5)] == before
        mem.admin.reindex()
        assert path.stat().st_ino != rebuilt
        assert [h["id"] for h in mem.recall("which crane lifts container 7", k=5)] == before


def test_files_abandoned_by_a_dead_writer_are_removed_fresh_ones_kept(store):
    import os
    import time

    with Memory() as mem:
        mem.remember("the lantern is in the shed")
        data = mem.store.paths.data_dir
        old, fresh = data / ".recall.idx.111.dead", data / ".recall.idx.222.busy"
        old.write_bytes(b"x" * 100)
        fresh.write_bytes(b"x" * 100)
        past = time.time() - 7200
        os.utime(old, (past, past))
        mem.recall("lantern")  # writes the index file
        assert not old.exists() and fresh.exists()


def test_forgetting_the_newest_memory_then_remembering_needs_no_rebuild(store, monkeypatch):
    """SQLite gives the next memory the rowid of a deleted top row: it takes that row's place."""
    with Memory() as mem:
        for i in range(5):
            mem.remember(f"note {i} about the allotment")
        mem.recall("allotment")
        monkeypatch.setattr(recallindex.RecallIndex, "build", lambda self: (_ for _ in ()).throw(AssertionError))
        last = mem.remember("the newest note, said by mistake")
        mem.recall("allotment")
        mem.forget(last["id"])
        again = mem.remember("the shed key is under the pot")
        hits = mem.recall("where is the shed key", k=1)
        assert hits[0]["id"] == again["id"] and "vector" in hits[0]["signals"]
        assert last["id"] not in {h["id"] for h in mem.recall("newest note said by mistake", k=10)}


def test_a_search_never_writes_the_file_the_idle_worker_does(store, monkeypatch):
    from brandmind import backlog

    monkeypatch.setattr(recallindex, "STALE_ROWS", 10)
    with Memory() as mem:
        for i in range(5):
            mem.remember(f"seed note {i}")
        mem.recall("seed")
        path = mem.store.paths.data_dir / "recall.idx"
        first = path.stat().st_ino
        assert not backlog.save_index(lambda: mem)  # not ahead of the file
        for i in range(30):
            mem.remember(f"later note {i} about pumpkins")
        mem.recall("pumpkins")  # catches up 30 rows, writes nothing
        assert path.stat().st_ino == first
        assert backlog.save_index(lambda: mem) and path.stat().st_ino != first
    built = []
    monkeypatch.setattr(recallindex.RecallIndex, "build", lambda self: built.append(1))
    with Memory() as mem:
        assert mem.store.searcher.recall_index().n == 35 and built == []


def test_a_forget_while_the_worker_writes_the_file_is_scrubbed_from_it(store, monkeypatch):
    """The worker writes without the store lock: a memory forgotten meanwhile (by a request
    thread) must not come back on disk with the new file."""
    import threading

    from brandmind import backlog

    monkeypatch.setattr(recallindex, "STALE_ROWS", 0)
    with Memory() as mem:
        for i in range(5):
            mem.remember(f"filler {i} about the canal boat")
        mem.recall("canal")
        secret = mem.remember("my bank pin is 5521")
        mem.recall("bank pin")  # caught up past the file
        path = mem.store.paths.data_dir / "recall.idx"
        vec = np.asarray(mem.embedder.embed_documents([secret["text"]])[0], np.float32).tobytes()
        real = recallindex.RecallIndex._write

        def write(self, old, keep, postings):
            out = real(self, old, keep, postings)  # the new file holds the vector and the words now
            if not forgot:
                forgot.append(mem.forget(secret["id"]))  # meanwhile, another request forgets it
            return out

        forgot: list = []

        monkeypatch.setattr(recallindex.RecallIndex, "_write", write)
        assert backlog.save_index(lambda: mem, threading.RLock())
        assert vec not in path.read_bytes()
        # nor its words: no key of a stem only it held (storage/kwindex.py scrub)
        keys = IndexFile.open(path).postings()[0]
        assert kwindex.term_key("5521") not in set(keys.tolist()) and kwindex.term_key("pin") not in set(keys.tolist())
        assert kwindex.term_key("canal") in set(keys.tolist())
        assert secret["id"] not in {h["id"] for h in mem.recall("bank pin", k=10)}


def test_appends_past_the_file_capacity_grow_it(store):
    with Memory() as mem:
        for i in range(5):
            mem.remember(f"seed {i} about the orchard")
        mem.recall("orchard")
        cap = mem.store.searcher.index.file.cap
        mem.ingest([json.dumps({"role": "user", "content": f"turn {i} on the apple called pip{i}x"})
                    for i in range(cap)], user="default")
        hits = mem.recall("the apple called pip1000x", k=1)
        index = mem.store.searcher.index
        assert index.file.cap > cap and index.n == cap + 5
        assert hits[0]["text"] == "turn 1000 on the apple called pip1000x"


def test_doctor_finds_a_recall_index_that_lost_a_memory_or_a_vector(store):
    with Memory() as mem:
        for i in range(4):
            mem.remember(f"note {i} about the bakery")
        assert [c for c in mem.admin.doctor() if c["check"] == "recall index"][0]["ok"]
        index = mem.store.searcher.recall_index()
        index.cols["has_vec"][0] = 0  # as a bug would leave it
        (got,) = [c for c in mem.admin.doctor() if c["check"] == "recall index"]
        assert not got["ok"] and "3 of 4 vectors" in got["detail"] and "bm rebuild" in got["hint"]


@pytest.mark.parametrize("tty", [True, False])
def test_making_a_large_index_anew_is_announced_on_a_terminal_only(store, monkeypatch, capsys, tty):
    """Its first search after a format change, or ``bm rebuild``, pauses ~2 min at 1M memories:
    a terminal is told why (one line on stderr), a pipe or a log never is."""
    import sys

    from brandmind.storage import indexfile

    with Memory() as mem:
        mem.remember("Ann keeps the spare key under the blue pot")
        mem.remember("Bo parks by the north gate")
    monkeypatch.setattr(indexfile, "ANNOUNCE_ROWS", 2)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)
    with Memory() as mem:
        mem.store.searcher.index_path.unlink(missing_ok=True)  # as after an upgrade that changed its format
        capsys.readouterr()
        assert mem.recall("where is the key", k=1)
        err = capsys.readouterr().err
    if tty:
        assert err.startswith("bm: building the recall index of 2 memories (once; about 1 s) in ") and err.count("\n") == 1
    else:
        assert err == ""
