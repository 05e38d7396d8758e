"""The backlog (brandmind/backlog.py): writes accepted without their vectors (and with their
extraction queued) while a thread defers vectors, and the steps that do the work later.
The worker thread and kill -9 are in tests/test_backlog_worker.py."""
from __future__ import annotations

import json
import os

import pytest

from brandmind import backlog, vectorlag
from brandmind.memory import Memory
from brandmind.storage import recallindex


# these call `bm` in this process on a backlog made here: a daemon's worker would do it meanwhile
NO_DAEMON = pytest.mark.skipif(os.environ.get("BM_TEST_VIA_DAEMON") == "1",
                               reason="the backlog made here would be done by the daemon's worker meanwhile")


def turns(n: int, thread: str = "t1", start: int = 0) -> list[str]:
    return [json.dumps({"id": f"{thread}-{i}", "role": "user", "thread": thread,
                        "ts": 1_700_000_000_000 + 60_000 * i, "content": f"I moved to Porto in 2020, note {i}"})
            for i in range(start, start + n)]


def counts(mem: Memory) -> tuple[int, int, int]:
    c = mem.sql.conn
    return (c.execute("SELECT count(*) FROM memories").fetchone()[0],
            c.execute("SELECT count(*) FROM memories_vec").fetchone()[0],
            c.execute("SELECT count(*) FROM vec_pending").fetchone()[0])


class CountingEmbedder:
    """The hash embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        from brandmind.embed.hashing import HashEmbedder

        self.inner = HashEmbedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.texts: list[str] = []

    def embed_documents(self, texts):
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


@pytest.fixture
def mem(store):
    m = Memory(embedder=CountingEmbedder())
    yield m
    m.close()


def test_deferred_writes_store_keywords_now_and_vectors_later(mem):
    emb = mem.store.embedder
    with mem.store.deferring_vectors():
        assert mem.store.deferring and mem.store.vector_for("never seen") is None
        mem.remember("Ann keeps a green bicycle in the hallway", user="ann")
        report = mem.ingest(turns(300), user="ann")
    assert not mem.store.deferring  # per block, per thread
    assert report["ingested"] == 300 and emb.texts == []  # nothing embedded while accepting
    assert counts(mem) == (301, 0, 301)
    assert mem.sql.integrity() == []  # memories = vectors + waiting
    assert backlog.pending(mem.store) == 301 and backlog.pending(mem.store, "bob") == 0
    assert "301 memories are not yet vectorised" in vectorlag.lag_note(mem.store, "ann")
    # found by keyword meanwhile
    assert mem.recall("bicycle hallway", user="ann", k=1)[0]["text"].startswith("Ann keeps a green bicycle")
    done = backlog.drain(lambda: mem.store)
    assert done["embedded"] == 301 and counts(mem) == (301, 301, 0)
    assert mem.sql.integrity() == [] and vectorlag.lag_note(mem.store, "ann") is None
    assert len(emb.texts) == 301  # each text once
    # the vectors are in the index: a rebuild takes them from there and embeds nothing
    emb.texts.clear()
    mem.admin.rebuild()
    assert emb.texts == [] and counts(mem) == (301, 301, 0)


def test_rebuild_and_reindex_make_the_waiting_vectors(mem):
    with mem.store.deferring_vectors():
        mem.ingest(turns(10), user="ann")
    mem.admin.rebuild()  # not deferring: the rebuild embeds what waited
    assert counts(mem) == (10, 10, 0)
    with mem.store.deferring_vectors():
        mem.ingest(turns(5, start=10), user="ann")
        mem.admin.rebuild()  # deferring: the old index's vectors are kept, the waiting ones still wait
    assert counts(mem) == (15, 10, 5) and mem.sql.integrity() == []
    emb = mem.store.embedder
    emb.texts.clear()
    backlog.drain(lambda: mem.store)
    assert counts(mem) == (15, 15, 0) and len(emb.texts) == 5  # only the waiting ones are embedded
    with mem.store.deferring_vectors():
        mem.ingest(turns(5, start=15), user="ann")
    mem.admin.reindex()
    assert counts(mem) == (20, 20, 0) and mem.sql.integrity() == []


def test_forget_wins_over_a_batch_in_flight(mem):
    with mem.store.deferring_vectors():
        a = mem.remember("the spare key is under the blue flowerpot", user="ann")
        b = mem.remember("the wifi password is on the fridge", user="ann")
    batch = backlog.take(mem.store)
    backlog.embed(mem.store, batch)  # the daemon embeds outside its lock; a forget comes meanwhile
    mem.forget(a["id"])
    assert backlog.commit(mem.store, batch) == 1
    assert counts(mem) == (1, 1, 0) and mem.sql.integrity() == []
    # the forgotten text's vector went nowhere: neither the index nor the log's cache
    assert mem.log.cached_vector(mem.sql.model, a["text"]) is None
    assert mem.recall("spare key blue flowerpot", user="ann")[0]["id"] == b["id"]
    # a forgotten memory that waits takes its waiting row with it
    with mem.store.deferring_vectors():
        c = mem.remember("a third thing to forget", user="ann")
    mem.forget(c["id"])
    assert counts(mem) == (1, 1, 0) and backlog.take(mem.store) is None


def test_a_batch_for_a_reused_rowid_with_another_text_is_not_applied(mem):
    with mem.store.deferring_vectors():
        a = mem.remember("first text at the top rowid", user="ann")
    batch = backlog.take(mem.store)
    backlog.embed(mem.store, batch)
    mem.forget(a["id"])
    with mem.store.deferring_vectors():
        mem.remember("second text, same rowid", user="ann")  # SQLite reuses the top rowid
    assert backlog.commit(mem.store, batch) == 0 and counts(mem) == (1, 0, 1)
    backlog.drain(lambda: mem.store)
    assert counts(mem) == (1, 1, 0)


def test_recall_finds_waiting_memories_by_keyword_and_recency(mem, bm_home):
    mem.remember("Ann's sister lives in Oslo", user="ann", ts="2024-01-01")
    with mem.store.deferring_vectors():
        fresh = mem.remember("the parcel arrives on Tuesday", user="ann", ts="2024-06-01")
    hits = mem.recall("parcel Tuesday", user="ann", k=3)
    assert hits[0]["id"] == fresh["id"] and hits[0]["signals"]["keyword"]["rank"] == 1
    assert hits[0]["signals"]["vector"]["rank"] is None  # it has no vector yet
    # no shared word: found as one of the newest when recency counts
    mem.config.weight_recency = 0.5
    ids = [h["id"] for h in mem.recall("what happens next week", user="ann", k=3, now="2024-06-02")]
    assert fresh["id"] in ids


def test_a_late_vector_reaches_a_loaded_index(mem, monkeypatch):
    """A vector made after its memory was indexed (listed in ``mem_changes`` when its
    ``vec_pending`` row goes) reaches an index loaded before it, in place, without a rebuild."""
    with mem.store.deferring_vectors():
        late = mem.remember("zebra crossing near the old mill", user="ann")
    for i in range(3):
        mem.remember(f"filler memory number {i} about gardening", user="ann")  # vectors at once
    mem.recall("gardening", user="ann", k=1)
    index = mem.store.searcher.index
    assert index.n == 4 and int(index.cols["has_vec"][:4].sum()) == 3
    monkeypatch.setattr(recallindex.RecallIndex, "build", lambda self: (_ for _ in ()).throw(AssertionError))
    backlog.drain(lambda: mem.store)
    hits = mem.recall("zebra crossing mill", user="ann", k=1)
    assert hits[0]["id"] == late["id"] and hits[0]["signals"]["vector"]["rank"] == 1
    assert mem.store.searcher.index is index and index.n == 4 and int(index.cols["has_vec"][:4].sum()) == 4


def test_doctor_counts_waiting_memories(mem):
    with mem.store.deferring_vectors():
        mem.remember("waiting", user="ann")
    assert mem.sql.integrity() == []
    mem.sql.conn.execute("DELETE FROM vec_pending")
    assert mem.sql.integrity() == ["1 memories but 0 vectors"]


def test_doctor_reports_the_backlog(mem, monkeypatch):
    with mem.store.deferring_vectors():
        mem.ingest(talk(), user="ann", extract=True)
    check = next(c for c in mem.admin.doctor() if c["check"] == "backlog")
    assert check["ok"] and check["detail"] == "6 vector(s) waiting, 1 extraction job(s) queued"

    def broken(*a, **k):
        raise RuntimeError("extractor down")

    monkeypatch.setattr(backlog, "extract_facts", broken)
    monkeypatch.setattr(backlog, "MAX_ATTEMPTS", 1)
    with pytest.raises(RuntimeError):
        backlog.job_step(lambda: mem.store)
    check = next(c for c in mem.admin.doctor() if c["check"] == "backlog")
    assert not check["ok"] and "extractor down" in check["detail"] and "bm queue run" in check["hint"]


# -- extraction queue -------------------------------------------------------------------------------
def facts_of(mem: Memory) -> list[tuple]:
    return mem.sql.conn.execute(
        "SELECT subject, predicate, object, confirmations, retired_at IS NULL FROM memories "
        "WHERE subject IS NOT NULL ORDER BY subject, predicate, object, recorded_at").fetchall()


TALK = ["I live in Lisbon.", "I love green tea.", "My sister Eva lives in Oslo.", "I work at Acme.",
        "I moved to Porto.", "I have a dog named Rex."]


def talk() -> list[str]:
    return [json.dumps({"id": f"m{i}", "role": "user", "thread": "t", "ts": 1_700_000_000_000 + i * 60_000,
                        "content": text}) for i, text in enumerate(TALK)]


def test_extraction_is_queued_with_the_turns_and_run_later(mem, bm_home, tmp_path, monkeypatch):
    with mem.store.deferring_vectors():
        report = mem.ingest(talk(), user="ann", extract=True)
        r = mem.remember("I prefer window seats", user="ann", extract=True)
    assert report["extract"] == {"queued": 1} and r["extract"]["queued"] == 1 and report["facts"]["added"] == 0
    assert "_beads" not in report and facts_of(mem) == []
    assert mem.log.job_counts() == {"queued": 2, "done": 0, "total": 2}
    backlog.drain(lambda: mem.store)
    assert mem.log.job_counts() == {"queued": 0, "done": 2, "total": 2}
    got = facts_of(mem)
    # the same as extracting inline in another store
    monkeypatch.setenv("BM_HOME", str(tmp_path / "inline"))
    with Memory(create=True) as other:
        other.ingest(talk(), user="ann", extract=True)
        other.remember("I prefer window seats", user="ann", extract=True)
        assert facts_of(other) == got and got


def test_a_job_killed_between_fact_commits_resumes_without_doubling(mem, tmp_path, monkeypatch):
    from brandmind import facts as facts_mod

    with mem.store.deferring_vectors():
        mem.ingest(talk(), user="ann", extract=True)
    real = facts_mod.Facts.add_many
    monkeypatch.setattr(facts_mod.Facts, "add_many", lambda self, items, **kw: real(self, items, **{**kw, "chunk": 2}))
    commits = []
    real_commit = facts_mod.Facts._commit

    def dying_commit(self, ops, vectors, on_commit=None, done=0):
        if len(commits) == 2:
            raise KeyboardInterrupt("killed")  # as a kill -9 after two committed chunks
        commits.append(done)
        return real_commit(self, ops, vectors, on_commit, done)

    monkeypatch.setattr(facts_mod.Facts, "_commit", dying_commit)
    with pytest.raises(KeyboardInterrupt):
        backlog.job_step(lambda: mem.store)
    (seq, job), = mem.log.jobs()
    assert job["done"] == 4 and len(job["facts"]) > 4
    monkeypatch.setattr(facts_mod.Facts, "_commit", real_commit)
    backlog.drain(lambda: mem.store)
    got = facts_of(mem)
    monkeypatch.setenv("BM_HOME", str(tmp_path / "inline"))
    with Memory(create=True) as other:
        other.ingest(talk(), user="ann", extract=True)
        assert facts_of(other) == got


def test_a_failing_job_stays_queued_with_its_error(mem, monkeypatch):
    from brandmind.extract import run

    with mem.store.deferring_vectors():
        mem.ingest(talk(), user="ann", extract=True)

    def broken(*a, **k):
        raise RuntimeError("extractor down")

    monkeypatch.setattr(backlog, "extract_facts", broken)
    for _ in range(backlog.MAX_ATTEMPTS):
        with pytest.raises(RuntimeError):
            backlog.job_step(lambda: mem.store)
    st = backlog.status(mem.store)
    assert st["jobs_queued"] == 1 and st["jobs_failing"] == 1 and st["jobs_stuck"] == 1
    assert "extractor down" in st["last_error"]
    assert backlog.job_step(lambda: mem.store) is None  # the worker leaves it
    monkeypatch.setattr(backlog, "extract_facts", run.extract_facts)
    assert backlog.drain(lambda: mem.store)["jobs"] == 1  # bm queue run retries it
    assert backlog.status(mem.store)["jobs_queued"] == 0 and facts_of(mem)


def test_facts_of_turns_forgotten_before_the_job_ran_are_not_stored(mem):
    with mem.store.deferring_vectors():
        mem.ingest(talk(), user="ann", extract=True)
    mem.forget_user("ann")
    backlog.drain(lambda: mem.store)
    assert facts_of(mem) == [] and mem.log.job_counts()["queued"] == 0


@NO_DAEMON
def test_cli_queue_and_the_recall_note(bm, store):
    with Memory() as m, m.store.deferring_vectors():
        m.ingest(talk(), user="ann", extract=True)
    res = bm("queue", "--json")
    assert res.code == 0 and res.json()["vectors_pending"] == 6 and res.json()["jobs_queued"] == 1
    res = bm("recall", "green tea", "-u", "ann")
    assert res.code == 0 and "note: 6 memories are not yet vectorised" in res.err
    assert res.json()[0]["text"] == "I love green tea."  # stdout unchanged: the results
    assert "not yet vectorised" in bm("context", "tea", "-u", "ann").err
    res = bm("queue", "run", "--json")
    assert res.code == 0, res
    out = res.json()
    assert out["embedded"] == 6 and out["jobs"] == 1 and out["vectors_pending"] == 0 and out["jobs_queued"] == 0
    assert "not yet vectorised" not in bm("recall", "green tea", "-u", "ann").err


@NO_DAEMON
def test_cli_write_with_extract_says_it_was_queued(bm, store, monkeypatch):
    """A command run by a daemon whose requests defer (cli/serve.py) prints the queued job."""
    from brandmind.store import Store

    monkeypatch.setattr(Store, "deferring", property(lambda self: True))
    from brandmind.cli.extract import facts_summary

    res = bm("remember", "I live in Lisbon", "-u", "ann", "--extract")
    assert res.code == 0 and res.json()["extract"] == {"queued": 1}, res
    assert facts_summary(res.json()["facts"], None, {"queued": 1}).startswith("extraction queued (1 job(s)")
    res = bm("ingest", "-", "-u", "ann", "--extract", input="\n".join(talk()) + "\n")
    assert res.code == 0 and res.json()["extract"] == {"queued": 1}, res
    res = bm("remember", "I work at Acme", "-u", "ann", "--extract", "--json")
    assert res.code == 0 and res.json()["extract"] == {"queued": 1}, res


def test_while_deferring_vectors_land_in_rowid_order(mem):
    """A cached text (said before, or a fact the extraction embedded) waits its turn while
    other memories wait: the backlog fills in rowid order."""
    with mem.store.deferring_vectors():
        mem.ingest(talk(), user="ann", extract=True)
        mem.ingest([json.dumps({"role": "user", "thread": "u", "content": "I love green tea."})] * 3, user="ann")
        assert counts(mem) == (9, 0, 9)
    backlog.drain(lambda: mem.store)
    assert counts(mem)[2] == 0 and counts(mem)[0] > 9  # the facts are in too
