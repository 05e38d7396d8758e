"""Faults with real processes: concurrent writers, and `bm ingest` killed with SIGKILL.

Every child runs with ``BM_EMBEDDER=hash`` and its own ``BM_HOME``; every child is killed
and reaped in a ``finally`` whatever happens to the test.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path


import brandmind
from brandmind.logtxn import bead_in

N_WRITERS = 4
PER_WRITER = 500
N_MESSAGES = 10_000


# -- helpers ------------------------------------------------------------------------------
def bm_argv() -> list[str]:
    """The installed `bm` console script of this interpreter (the real CLI)."""
    script = Path(sys.executable).with_name("bm")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "brandmind.cli.app"]  # pragma: no cover


def child_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BM_")}
    env.update(BM_HOME=str(home), BM_EMBEDDER="hash")
    return env


def bm(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*bm_argv(), *args], env=child_env(home), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def reap(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass


def doctor_ok(home: Path) -> list[dict]:
    res = bm(home, "doctor", "--json")
    assert res.returncode == 0, (res.stdout, res.stderr)
    checks = json.loads(res.stdout)
    assert checks and all(c["ok"] for c in checks), checks
    return checks


# -- (a) concurrent writers ----------------------------------------------------------------
WRITER = textwrap.dedent("""
    import os, sys, time
    import brandmind.memory  # pay the imports before the start line
    home, tag, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    deadline = time.time() + 60
    while not os.path.exists(go):
        if time.time() > deadline:
            sys.exit("no start signal")
        time.sleep(0.005)
    with brandmind.memory.Memory(home=home, create=True) as mem:  # all create the store at once
        for i in range(n):
            mem.remember(f"writer {tag} wrote memory {i} about topic {i % 13}", user="load",
                         meta={"writer": tag, "i": i})
    print("ok", tag)
""")


def test_four_processes_writing_at_once_lose_nothing(tmp_path):
    home = tmp_path / "store"
    go = tmp_path / "go"
    procs = []
    try:
        for w in range(N_WRITERS):
            procs.append(subprocess.Popen(
                [sys.executable, "-c", WRITER, str(home), f"w{w}", str(PER_WRITER), str(go)],
                env=child_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        time.sleep(0.3)
        go.touch()
        outs = [p.communicate(timeout=150) for p in procs]
    finally:
        reap(procs)
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.startswith("ok"), (out, err)

    total = N_WRITERS * PER_WRITER
    with brandmind.Memory(home=home) as mem:
        c = mem.sql.conn
        assert c.execute("SELECT count(*) FROM memories").fetchone()[0] == total
        assert c.execute("SELECT count(DISTINCT id) FROM memories").fetchone()[0] == total
        assert c.execute("SELECT count(*) FROM memories_vec").fetchone()[0] == total
        metas = [json.loads(r[0]) for r in c.execute("SELECT meta FROM memories")]
        per_writer = Counter(m["writer"] for m in metas)
        assert per_writer == {f"w{w}": PER_WRITER for w in range(N_WRITERS)}
        for w in range(N_WRITERS):
            assert sorted(m["i"] for m in metas if m["writer"] == f"w{w}") == list(range(PER_WRITER))

        ops = list(mem.log.iter_ops())
        assert len(ops) == total
        replicas = {op["id"].rsplit(":", 1)[0] for op in ops}
        assert replicas == {mem.log.replica}  # one store, one stream, shared by all processes
        seqs = [int(op["id"].rsplit(":", 1)[1]) for op in ops]
        assert sorted(seqs) == list(range(1, total + 1))
        assert seqs == sorted(seqs)  # arrival order is sequence order
        hlcs = [tuple(op["hlc"][:2]) for op in ops]
        assert all(a < b for a, b in zip(hlcs, hlcs[1:]))
        assert mem.sql.applied() == mem.log.last_arrival() == total

        hits = mem.recall("writer w2 wrote memory 417", user="load", k=5)
        assert hits[0]["text"] == "writer w2 wrote memory 417 about topic 1"
        assert len(mem.recall("topic 5", user="load", k=50)) == 50
    doctor_ok(home)


# -- (b) SIGKILL in the middle of `bm ingest` --------------------------------------------------
def write_conversation(path: Path, n: int) -> None:
    base = 1_714_000_000
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({
                "id": f"t{i}", "role": "user" if i % 2 == 0 else "assistant",
                "speaker": "ann" if i % 2 == 0 else "bot", "thread": "long-chat", "ts": base + i,
                "content": f"message {i}: we talked about topic {i % 97} and item {i % 13}",
                "meta": {"n": i},
            }) + "\n")


def committed_ops(home: Path) -> int:
    """Ops committed to the log so far, read without disturbing the writer (read-only LMDB)."""
    import lmdb

    env = lmdb.open(str(home / "data" / "log.lmdb"), readonly=True, lock=True, max_dbs=16)
    try:
        meta = env.open_db(b"meta", create=False)
        with env.begin() as txn:
            raw = txn.get(b"next_arrival", db=meta)
        return int.from_bytes(raw, "big") - 1 if raw else 0
    finally:
        env.close()


def kill_ingest(home: Path, path: Path, *, after_ops: int | None = None, after_s: float | None = None) -> int:
    """Start `bm ingest`, SIGKILL it once ``after_ops`` more ops are committed or after
    ``after_s`` seconds, whichever comes first; returns the ops seen committed right before
    the kill."""
    start = committed_ops(home)
    proc = subprocess.Popen([*bm_argv(), "ingest", str(path), "--user", "ann", "--json"],
                            env=child_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while True:
            seen = committed_ops(home)
            if after_ops is not None and seen - start >= after_ops:
                break
            if after_s is not None and time.monotonic() - t0 >= after_s:
                break
            assert proc.poll() is None, ("ingest finished before the kill", proc.communicate())
            assert time.monotonic() - t0 < 60, "ingest made no progress"
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        return seen
    finally:
        reap([proc])


def index_lag(home: Path) -> int:
    """How many committed ops the SQLite index has not applied yet (read before any open)."""
    import apsw

    conn = apsw.Connection(str(home / "data" / "memory.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='applied'").fetchone()
    finally:
        conn.close()
    return committed_ops(home) - int(row[0] if row else 0)


def check_consistent(home: Path, acknowledged_ops: int) -> int:
    """The store after a kill: opens, doctor clean, no half-written message. Returns the count."""
    lag = index_lag(home)
    assert lag >= 0
    with brandmind.Memory(home=home) as mem:
        c = mem.sql.conn
        n_ops = mem.log.last_arrival()
        assert n_ops >= acknowledged_ops  # nothing committed before the kill was lost
        assert n_ops % 2 == 0  # each message is a bead.add + memory.add pair, never half of one
        assert mem.sql.applied() == n_ops  # opening caught the index up with the log
        rows = c.execute("SELECT id, provenance, meta FROM memories WHERE source='ingest'").fetchall()
        assert c.execute("SELECT count(*) FROM memories").fetchone()[0] == len(rows)
        with mem.log.read() as txn:
            beads = {k.decode(): bead_in(txn, mem.log.db["ops"], v) for k, v in txn.cursor(db=mem.log.db["beads"])}
            assert None not in beads.values()  # every bead's ref names a stored op that carries it
            n_keys = txn.stat(mem.log.db["bead_keys"])["entries"]
        assert len(beads) == len(rows) == n_keys == n_ops // 2
        bead_of = {json.loads(prov)[0]["bead"] for _, prov, _ in rows}
        assert bead_of == set(beads)  # every memory has its bead and every bead its memory
        turns = sorted(int(b["turn_id"][1:]) for b in beads.values())
        assert turns == list(range(len(turns)))  # a prefix of the file, each line once
        assert c.execute("SELECT count(*) FROM memories_vec").fetchone()[0] == len(rows)
        assert mem.sql.integrity() == []
        if rows:
            last = turns[-1]
            hit = mem.recall(f"message {last}: we talked about topic {last % 97}", user="ann", k=3)
            assert hit and hit[0]["provenance"][0]["turn_id"] == f"t{last}"
    doctor_ok(home)
    print(f"killed with {len(rows)} messages stored, the index {lag} ops behind the log")
    return len(rows)


def test_ingest_killed_with_sigkill_leaves_a_clean_store_and_resumes(tmp_path):
    home = tmp_path / "store"
    path = tmp_path / "chat.jsonl"
    write_conversation(path, N_MESSAGES)
    res = bm(home, "init", "--json")
    assert res.returncode == 0, res.stderr

    counts = []
    # 1: early, once a couple of batches are committed
    seen = kill_ingest(home, path, after_ops=600)
    counts.append(check_consistent(home, seen))
    assert counts[-1] >= 300
    # 2: at an arbitrary moment (the re-run first skips what is stored, then goes on);
    #    a cap on the work keeps it a mid-way kill on a much faster machine too
    seen = kill_ingest(home, path, after_s=1.0, after_ops=8000)
    counts.append(check_consistent(home, seen))
    # 3: well into the rest of the file
    seen = kill_ingest(home, path, after_ops=6000)
    counts.append(check_consistent(home, seen))
    assert counts == sorted(counts) and counts[-1] < N_MESSAGES

    # the same command again finishes the job, storing nothing twice
    res = bm(home, "ingest", str(path), "--user", "ann", "--json", timeout=300)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["ingested"] + report["duplicates"] == N_MESSAGES
    assert report["duplicates"] == counts[-1] and report["bad"] == []
    assert check_consistent(home, 2 * N_MESSAGES) == N_MESSAGES

    # and once more: nothing new
    res = bm(home, "ingest", str(path), "--user", "ann", "--json", timeout=300)
    assert json.loads(res.stdout) == {"ingested": 0, "duplicates": N_MESSAGES, "bad": [], "lines": N_MESSAGES}
    with brandmind.Memory(home=home) as mem:
        assert mem.admin.stats()["counts"]["memories"] == N_MESSAGES
        tail = mem.beads_tail(3, user="ann")
        assert [b["turn_id"] for b in tail] == [f"t{i}" for i in range(N_MESSAGES - 3, N_MESSAGES)]
