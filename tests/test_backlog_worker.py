"""The daemon's worker (sync/worker.py) over a real store: threads writing and recalling while
it embeds, the real default model, and kill -9 mid-batch (the store opens clean, the queue
resumes, no vector or fact lost or doubled)."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from brandmind import backlog
from brandmind.memory import Memory
from brandmind.sync.worker import Worker

CITIES = ["Lisbon", "Porto", "Oslo", "Berlin", "Madrid", "Rome", "Vienna", "Prague"]


def talk(n: int, start: int = 0, thread: str = "t") -> list[str]:
    out = []
    for i in range(start, start + n):
        city = CITIES[i % len(CITIES)]
        text = [f"I live in {city}.", f"My friend Eva{i % 13} lives in {city}.", f"I love {city} in spring, note {i}.",
                f"I work at Acme{i % 5}."][i % 4]
        out.append(json.dumps({"id": f"{thread}{i}", "role": "user", "thread": thread,
                               "ts": 1_700_000_000_000 + 60_000 * i, "content": text}))
    return out


def state(mem: Memory) -> dict:
    c = mem.sql.conn
    one = lambda q: c.execute(q).fetchone()[0]  # noqa: E731
    return {"memories": one("SELECT count(*) FROM memories"), "vectors": one("SELECT count(*) FROM memories_vec"),
            "pending": one("SELECT count(*) FROM vec_pending"), "jobs": mem.log.job_counts()["queued"],
            "facts": c.execute("SELECT subject, predicate, object, confirmations, retired_at IS NULL, valid_from "
                               "FROM memories WHERE subject IS NOT NULL ORDER BY 1, 2, 3, 4, 5, 6").fetchall()}


def test_the_worker_embeds_while_requests_write_and_recall(store):
    mem = Memory()
    lock = threading.RLock()
    worker = Worker(lambda: mem.store, lock, batch=64, idle=0.2)
    worker.start()
    errors: list[BaseException] = []

    def writer(thread: str) -> None:
        try:
            for b in range(5):
                with lock, mem.store.deferring_vectors():
                    mem.ingest(talk(100, start=100 * b, thread=thread), user="ann", extract=b == 4)
                worker.wake()
                with lock:
                    mem.recall("where does Eva live", user="ann", k=3)
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert worker.drain(60)
    st = worker.status()
    worker.stop()
    # every turn got its vector from the worker (texts said before: from the cache, in turn)
    assert st["running"] and st["accepted"] == 10 and st["embedded"] >= 1000
    assert st["vectors_pending"] == 0 and st["jobs_queued"] == 0 and st["jobs_done"] == 2
    assert st["failures"] == 0 and st["last_error"] is None
    s = state(mem)
    assert s["memories"] == s["vectors"] and s["facts"] and mem.sql.integrity() == []
    # recall by vector now reaches every turn
    hit = mem.recall("note 499", user="ann", k=1)[0]
    assert hit["signals"]["vector"]["rank"] is not None
    mem.close()


def test_a_failing_batch_backs_off_and_is_reported_then_done(store):
    mem = Memory()
    lock = threading.RLock()
    with mem.store.deferring_vectors():
        mem.remember("waits for a vector", user="ann")
    real = mem.store.embedder.embed_documents
    calls = []

    def flaky(texts):
        calls.append(len(texts))
        if len(calls) == 1:
            raise RuntimeError("model not ready")
        return real(texts)

    mem.store.embedder.embed_documents = flaky
    worker = Worker(lambda: mem.store, lock, idle=0.05, max_backoff=1.0)
    worker.start()
    worker.wake()
    deadline = time.monotonic() + 10
    while worker.status()["failures"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    st = worker.status()
    assert st["failures"] == 1 and "model not ready" in st["last_error"] and st["vectors_pending"] == 1
    assert worker.drain(10)  # after the pause, the same batch again
    worker.stop()
    assert backlog.pending(mem.store) == 0 and len(calls) == 2
    mem.close()


@pytest.mark.real_embedder
def test_the_worker_with_the_real_default_model(store):
    mem = Memory()
    lock = threading.RLock()
    worker = Worker(lambda: mem.store, lock)
    worker.start()
    with lock, mem.store.deferring_vectors():
        mem.remember("Ann adopted a small grey kitten last spring", user="ann")
        mem.ingest(talk(200), user="ann")
    worker.wake()
    t0 = time.monotonic()
    assert worker.drain(120)
    took = time.monotonic() - t0
    st = worker.status()
    worker.stop()
    assert st["embedded"] > 100 and st["vectors_pending"] == 0, st
    hit = mem.recall("does she have a pet cat?", user="ann", k=1)[0]  # by meaning: no shared word
    assert "kitten" in hit["text"] and hit["signals"]["vector"]["rank"] == 1
    print(f"real model: 201 memories embedded by the worker in {took:.2f} s")
    mem.close()


CHILD = textwrap.dedent("""
    import sys, threading, time
    from brandmind.embed.hashing import HashEmbedder
    from brandmind.memory import Memory
    from brandmind.sync.worker import Worker

    class Slow(HashEmbedder):  # slow enough for a kill to land mid-batch
        def embed_documents(self, texts):
            time.sleep(0.002 * len(texts))
            return super().embed_documents(texts)

    mem = Memory(embedder=Slow())
    lock = threading.RLock()
    worker = Worker(lambda: mem.store, lock, batch=32, idle=0.05)
    worker.start()
    worker.wake()
    print("started", flush=True)
    time.sleep(120)
""")


def _fill(mem: Memory) -> None:
    with mem.store.deferring_vectors():
        for b in range(4):
            mem.ingest(talk(300, start=300 * b), user="ann", extract=True)


def test_kill_9_mid_batch_loses_and_doubles_nothing(store, tmp_path, monkeypatch):
    with Memory() as mem:
        _fill(mem)
        assert state(mem)["pending"] == 1200 and state(mem)["jobs"] == 8  # a job per batch of 256
    rng = random.Random(7)
    kills, waiting = 0, True
    for _ in range(12):
        proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, env=os.environ.copy())
        assert proc.stdout.readline().strip() == b"started"
        time.sleep(rng.uniform(0.05, 0.6) if waiting else rng.uniform(0.5, 2.5))  # mid-batch, then mid-job
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        with Memory() as mem:  # opens clean every time
            assert mem.sql.integrity() == []
            s = state(mem)
            assert s["memories"] == s["vectors"] + s["pending"]
            waiting = s["pending"] > 0
            if not s["pending"] and not s["jobs"]:
                break
    with Memory() as mem:
        backlog.drain(lambda: mem.store)
        got = state(mem)
        assert mem.sql.integrity() == []
    monkeypatch.setenv("BM_HOME", str(tmp_path / "reference"))
    with Memory(create=True) as ref:  # the same writes, the backlog done without a kill
        _fill(ref)
        backlog.drain(lambda: ref.store)
        want = state(ref)
    assert got == want and got["facts"] and got["pending"] == 0 and got["jobs"] == 0
    assert kills >= 3
