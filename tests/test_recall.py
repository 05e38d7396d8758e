"""Recall: the recall index follows writes of other processes (their adds, their deletes: a
stale index would return forgotten memories), keyword search, and the filters."""
from __future__ import annotations

import subprocess
import sys

from brandmind.memory import Memory
from brandmind.storage import recallindex


def _in_other_process(code: str) -> str:
    script = "from brandmind.memory import Memory\nmem = Memory()\n" + code
    return subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_the_index_follows_other_writers_adds_and_deletes_without_a_rebuild(store, monkeypatch) -> None:
    with Memory() as mem:
        for i in range(30):
            mem.remember(f"note number {i} about gardening and tomatoes")
        mem.recall("gardening")
        index = mem.store.searcher.index
        assert index is not None and index.n == 30 and (mem.store.paths.data_dir / "recall.idx").is_file()
        monkeypatch.setattr(recallindex.RecallIndex, "build", lambda self: (_ for _ in ()).throw(AssertionError))

        new_id = _in_other_process("print(mem.remember('the zebra migration crosses the river')['id'])")
        hits = mem.recall("zebra migration river", k=3)
        assert hits[0]["id"] == new_id and "vector" in hits[0]["signals"]
        assert mem.store.searcher.index is index and index.n == 31

        _in_other_process(f"mem.forget({new_id!r})")
        hits = mem.recall("zebra migration river", k=40)
        assert new_id not in {h["id"] for h in hits} and len(hits) == 30
        assert int(index.cols["alive"][:index.n].sum()) == 30


def test_a_fresh_process_maps_the_file_instead_of_building(store, monkeypatch) -> None:
    with Memory() as mem:
        for i in range(20):
            mem.remember(f"fact {i}: the lighthouse keeper paints boats")
        mem.recall("lighthouse")
        mem.store.searcher.index.persist()
        mem.remember("the ferry leaves at noon")  # past the file: caught up from SQLite
    built = []
    monkeypatch.setattr(recallindex.RecallIndex, "build", lambda self: built.append(1))
    with Memory() as mem:
        hits = mem.recall("when does the ferry leave", k=1)
    assert hits[0]["text"] == "the ferry leaves at noon" and built == []


def test_a_change_log_pruned_past_the_file_rebuilds_it(store) -> None:
    with Memory() as mem:
        a = mem.remember("the kettle is blue")
        mem.remember("the toaster is red")
        mem.recall("kettle")
        mem.store.searcher.index.persist()
        mem.forget(a["id"])
        mem.remember("a third memory to move the log on")
        mem.sql.conn.execute("DELETE FROM mem_changes")  # as if pruned: the delete is not listed
        mem.sql.conn.execute("INSERT INTO mem_changes(mem_rowid) VALUES(999999)")
    with Memory() as mem:
        ids = {h["id"] for h in mem.recall("what colour is the kettle", k=5)}
    assert a["id"] not in ids and len(ids) == 2


def test_keyword_search_skips_words_found_in_most_memories(store) -> None:
    with Memory() as mem:
        for i in range(40):
            mem.remember(f"Ann: message {i} about the weather and the garden")
        tea = mem.remember("Ann: I only drink green tea in the morning")
        hits = mem.recall("Ann green tea", k=10)
        keyword_hits = [h["id"] for h in hits if "keyword" in h["signals"]]
        # "ann" is in every memory: it must not turn every memory into a keyword hit
        assert keyword_hits == [tea["id"]]
        assert hits[0]["id"] == tea["id"]
        # a query made only of such words still gets vector results
        assert mem.recall("Ann", k=5)
        # below COMMON_MIN_DOCS every word counts
    with Memory() as mem:
        mem.forget_many([m["id"] for m in mem.list_memories(limit=1000)][:35])
        hits = mem.recall("Ann green tea", k=10)
        assert len([h for h in hits if "keyword" in h["signals"]]) > 1


def test_keyword_search_keeps_its_rarest_words_within_a_postings_budget(store, monkeypatch) -> None:
    import brandmind.storage.keywords as search

    with Memory() as mem:
        mem.ingest([{"role": "user", "content": f"note {i} about the weather" + (" and the garden" if i < 5 else "")}
                    for i in range(80)])
        mem.remember("tulip bulbs go in the garden in autumn")  # "garden": 6 of 81, under the 10% share
        monkeypatch.setattr(search, "MAX_POSTINGS", 4)
        # "garden" (6 memories) would overflow the budget once "tulip" (1) is in: it is dropped
        assert mem.store.searcher.selective_words("tulip garden") == ["tulip"]
        monkeypatch.setattr(search, "MAX_POSTINGS", 20_000)
        assert mem.store.searcher.selective_words("tulip garden") == ["tulip", "garden"]
        # the rarest word always stays, even alone over the budget
        monkeypatch.setattr(search, "MAX_POSTINGS", 0)
        assert mem.store.searcher.selective_words("garden weather") == ["garden"]


def test_a_forgotten_memory_leaves_no_vector_and_a_forgotten_user_no_name_in_the_index_file(store) -> None:
    import numpy as np

    from brandmind.storage.recallsql import quantised  # the file keeps the int8 vector

    with Memory() as mem:
        for i in range(5):
            mem.remember(f"filler {i} about the weather", user="zoe")
        secret = mem.remember("my locker code is 4417", user="ann")
        mem.recall("locker", user="ann")  # the index file is written
        path = mem.store.paths.data_dir / "recall.idx"
        vec = quantised(np.asarray(mem.embedder.embed_documents([secret["text"]])[0], np.float32).tobytes())
        assert vec in path.read_bytes() and b"ann" in path.read_bytes()  # the check can fail
        mem.forget(secret["id"])
        assert vec not in path.read_bytes()
        mem.forget_user("ann")
        assert b'"ann"' not in path.read_bytes()
        assert len(mem.recall("weather", user="zoe")) == 5


def test_recall_in_a_child_forked_after_a_recall_answers(store) -> None:
    """query.recall embeds the query in a thread while the keyword candidates are found; a
    child forked after a recall (a daemon, a worker pool) has none of its parent's threads:
    its own recall must not wait on them."""
    import os
    import time

    with Memory() as mem:
        mem.remember("the heron nests by the mill pond")
        assert mem.recall("heron", k=1)
        pid = os.fork()
        if pid == 0:  # the child: exit 0 if recall answers
            try:
                hits = mem.recall("where does the heron nest?", k=1)
                os._exit(0 if hits and "heron" in hits[0]["text"] else 1)
            except BaseException:  # noqa: BLE001 - the child reports by its exit code only
                os._exit(2)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                assert os.waitstatus_to_exitcode(status) == 0
                return
            time.sleep(0.05)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("recall in the forked child hung")


def test_an_embedder_error_in_the_querys_thread_reaches_the_caller(store, monkeypatch) -> None:
    from brandmind.errors import EmbedderUnavailable

    with Memory() as mem:
        mem.remember("the heron nests by the mill pond")

        def down(text: str):
            raise EmbedderUnavailable("the embedding server is down", hint="start it")

        monkeypatch.setattr(mem.store.embedder, "embed_query", down)
        try:
            mem.recall("heron")
        except EmbedderUnavailable as exc:
            assert exc.hint == "start it"
        else:
            raise AssertionError("recall answered without its query's vector")
