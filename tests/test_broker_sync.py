"""`bm worker --sync` (sync/broker_sync.py) and `bm worker --extract`: against a real Redis
(tests/redis_server.py) and a real S3 server (SeaweedFS `weed mini`, tests/seaweed.py), one of
each for the module, the hash embedder, stores in this process except one `bm worker` run.

A worker machine is replaced: worker A stores and syncs a few users, then (a second run on the
same root) commits more turns: one user's pushed (a snapshot made) and acked, one's pushed
and not acked, one's only committed, and dies; A's root is deleted; worker B on an empty root
restores each store from S3 (snapshot or op log) and stores the rest: every user's store
holds all their turns exactly once, in order, nothing of another user's, the bucket holds no
plaintext, and a store started from S3 alone has them all too.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import BM_CMD  # noqa: E402
from redis_server import SKIP_REASON as NO_REDIS, redis_binary, start_redis  # noqa: E402
from seaweed import SKIP_REASON as NO_WEED, start_seaweed, weed_path  # noqa: E402

from brandmind.sync.broker import open_broker, user_dirname, user_home  # noqa: E402
from brandmind.sync.broker_sync import FleetSync, read_key  # noqa: E402
from brandmind.sync.broker_worker import BrokerWorker  # noqa: E402

USERS = ["ann", "bob", "Carl"]  # Carl: a %-escaped directory, and so a %-escaped S3 prefix


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    if redis_binary() is None:
        pytest.fail(NO_REDIS)
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sw(tmp_path_factory):
    if weed_path() is None:
        pytest.fail(NO_WEED)
    server = start_seaweed(tmp_path_factory.mktemp("seaweed"))
    yield server
    server.stop()


@pytest.fixture
def aws(sw, monkeypatch):
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in sw.env().items():
        monkeypatch.setenv(k, v)
    return sw


def turns(user: str, start: int, n: int) -> list[dict]:
    return [{"role": "user", "content": f"{user} says number {i}"} for i in range(start, start + n)]


def stored(home: Path, user: str) -> list[str]:
    """The user's turns in the store at ``home``, in order; asserts it holds no other user's."""
    from brandmind.memory import Memory

    with Memory(home) as mem:
        assert set(mem.admin.stats()["per_user"]) <= {user}
        return [b["content"] for b in mem.beads_tail(1000, user=user)]


def new_key(path: Path) -> Path:
    from brandmind.crypto import SyncKey

    path.write_text(SyncKey(os.urandom(32)).export_text() + "\n")
    return path


# long: one story, machine A then its replacement B, checked at each step
def test_a_replaced_worker_machine_restores_each_store_from_s3_nothing_lost_or_doubled(redis_server, aws, tmp_path):
    bucket = aws.new_bucket()
    url, key = f"s3://{bucket}/fleet", new_key(tmp_path / "fleet.key")
    pre = f"s{os.getpid()}"
    broker = open_broker(redis_server.url, shards=2, prefix=pre)
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    for u in USERS:
        broker.publish(u, turns(u, 0, 3))
    # machine A, through the CLI: stored, pushed once each at the drain, acked after the push
    run = subprocess.run([*BM_CMD, "worker", "-b", redis_server.url, "--prefix", pre, "--root", str(root_a),
                          "--drain", "--claim-idle", "1", "--sync", url, "--sync-endpoint-url", aws.endpoint,
                          "--sync-key", str(key), "--json"], capture_output=True, text=True, timeout=120,
                         env=os.environ.copy())
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert (report["stored"], report["pushes"], report["sync_failures"], report["dead"]) == (9, 3, 0, 0), report
    assert report["compactions"] == 0  # under 1,000 ops: no snapshot yet
    keys = set(aws.objects(bucket))
    assert {k.split("/")[1] for k in keys} == {user_dirname(u) for u in USERS} and all(k.startswith("fleet/") for k in keys)

    # A again: commits two more turns a user; ann's pushed (her remote compacted: a snapshot)
    # and acked, bob's pushed and not acked, Carl's only committed; then the machine dies
    for u in USERS:
        broker.publish(u, turns(u, 3, 2))
    fleet = FleetSync(url, read_key(key), endpoint_url=aws.endpoint, every=3600, compact_min_ops=1)
    a = BrokerWorker(broker, root_a, sync=fleet, claim_idle=0.5, name="a2")
    a.coordinate(force=True)
    assert a.round() and set(a.unpushed) == set(USERS)
    assert a._push("ann") and a.stats["compactions"] == 1
    fleet.sync(a.stores["bob"], a.remotes["bob"], pull=False)
    for mem in a.stores.values():
        mem.close()
    shutil.rmtree(root_a)  # the machine is gone; its leases and 4 pending events stay in Redis
    assert sum(s["pending"] for s in broker.backlog("bm-workers").values()) == 4

    # a worker with the wrong key takes over: nothing stored, nothing dead-lettered, all pending
    wrong = BrokerWorker(broker, tmp_path / "wrong", claim_idle=0.5, name="wrong",
                         sync=FleetSync(url, read_key(new_key(tmp_path / "other.key")), endpoint_url=aws.endpoint))
    for _ in range(30):
        if wrong.round() is None:
            break
    wrong.shutdown()
    assert wrong.stats["sync_failures"] >= 1 and wrong.stats["stored"] == 0 and wrong.stats["dead"] == 0
    assert broker.dead_letters() == [] and sum(s["pending"] for s in broker.backlog("bm-workers").values()) == 4

    # machine B, an empty root: restores each store from S3, then stores the rest
    for u in USERS:
        broker.publish(u, turns(u, 5, 2))
    notes: list[str] = []
    b = BrokerWorker(broker, root_b, claim_idle=0.5, name="b", log=notes.append,
                     sync=FleetSync(url, read_key(key), endpoint_url=aws.endpoint, every=3600))
    report = b.run(drain=True)
    started = {n.split("'")[1] for n in notes if "synced from S3 before use" in n and "'bootstrap'" in n}
    assert started == {"ann"}, notes  # from her snapshot; bob's and Carl's by replaying their ops
    assert (report["restored"], report["claimed"], report["duplicates"], report["stored"], report["dead"]) \
        == (3, 4, 2, 8, 0), report  # bob's 2 pushed turns were in S3: found stored, not stored again
    assert all(s == {"waiting": 0, "pending": 0} for s in broker.backlog("bm-workers").values())
    for u in USERS:
        assert stored(user_home(root_b, u), u) == [f"{u} says number {i}" for i in range(7)]
        assert sorted(os.listdir(root_b)) == sorted(user_dirname(x) for x in USERS)

    # S3 is the durable copy: a store started from it alone holds everything; no plaintext there
    from brandmind.memory import Memory

    for u in USERS:
        home = tmp_path / "c" / user_dirname(u)
        with Memory(home, create=True) as mem:
            fleet.attach(mem, user_dirname(u))
        assert stored(home, u) == [f"{u} says number {i}" for i in range(7)]
    blobs = aws.objects(bucket)
    assert not any(b"says number" in body for body in blobs.values())


def test_sync_usage_errors(bm, tmp_path):
    from conftest import assert_error

    base = ["worker", "-b", str(tmp_path / "q"), "--root", str(tmp_path / "r")]
    for extra, code, message in [(["--sync", "s3://b-1/p"], 2, "--sync needs --sync-key FILE"),
                                 (["--sync-key", "k"], 2, "go with --sync"),
                                 (["--sync", "http://x", "--sync-key", "k"], 2, "must be an s3://BUCKET/PREFIX URL"),
                                 (["--sync", "s3://b-1/p", "--sync-key", str(tmp_path / "none")], 1,
                                  "no such sync key file")]:
        assert_error(bm(*base, *extra), code, message)
    assert not (tmp_path / "r").exists()


def test_worker_extract_stores_the_rule_extractors_facts_in_the_users_store(tmp_path):
    from brandmind.memory import Memory

    broker = open_broker(str(tmp_path / "queue"), shards=2)
    broker.publish("ann", [{"role": "user", "content": "I moved to Lisbon last year"}])
    broker.publish("bob", [{"role": "user", "content": "The weather is nice"}])
    report = BrokerWorker(broker, tmp_path / "users", extract=True).run(drain=True)
    assert report["stored"] == 2 and report["dead"] == 0
    with Memory(user_home(tmp_path / "users", "ann")) as mem:
        facts = [r for r in mem.recall("where does ann live?", user="ann") if r["type"] == "fact"]
    assert {(f["predicate"], f["object"], f["source"]) for f in facts} >= {("lives_in", "Lisbon", "extract")}
    with Memory(user_home(tmp_path / "users", "bob")) as mem:
        assert not [r for r in mem.recall("Lisbon", user="bob") if "Lisbon" in r["text"]]


def test_a_shard_handed_between_machines_is_pushed_before_and_synced_after(redis_server, aws, tmp_path):
    """Worker A holds both shards, with turns committed and not yet pushed; B joins on another
    root: A pushes and acks that shard's stores before giving it up, B syncs each store before
    storing into it; A stops (pushing the rest), B restarts, takes A's shard too and stores a
    turn more of each user.  Both S3 and B's stores then hold every user's turns once, in order."""
    from brandmind.memory import Memory

    bucket = aws.new_bucket()
    key = read_key(new_key(tmp_path / "fleet.key"))
    broker = open_broker(redis_server.url, shards=2, prefix=f"h{os.getpid()}")
    users = ["ann", "bob", "dan", "eve"]  # ann and dan on shard 1, bob and eve on shard 0

    def fleet() -> FleetSync:
        return FleetSync(f"s3://{bucket}/f", key, endpoint_url=aws.endpoint, every=3600)

    a = BrokerWorker(broker, tmp_path / "a", sync=fleet(), claim_idle=5, name="a")
    for u in users:
        broker.publish(u, turns(u, 0, 2))
    a.coordinate(force=True)
    assert a.held == {0, 1} and a.round() and set(a.unpushed) == set(users)
    b = BrokerWorker(broker, tmp_path / "b", sync=fleet(), claim_idle=5, name="b")
    b.coordinate(force=True)
    assert b.held == set()
    a.coordinate(force=True)  # two workers alive: A gives one shard up, its stores pushed and acked first
    assert len(a.held) == 1 and a.stats["pushes"] == 2 and len(a.unpushed) == 2
    b.coordinate(force=True)
    assert len(b.held) == 1 and broker.backlog("bm-workers")[next(iter(b.held))] == {"waiting": 0, "pending": 0}
    for u in users:
        broker.publish(u, turns(u, 2, 2))
    assert a.round() and b.round()
    a.shutdown()  # pushes its users, acks, gives its shard up
    assert not a.unpushed and a.stats["sync_failures"] == 0
    b.shutdown()
    assert (b.stats["stored"], b.stats["restored"]) == (4, 2)  # its users had A's first turns
    for u in users:
        broker.publish(u, turns(u, 4, 1))
    b2 = BrokerWorker(broker, tmp_path / "b", sync=fleet(), claim_idle=0.5, name="b2")  # B restarted
    report = b2.run(drain=True)  # takes both shards: A's users' stores come from S3 first
    assert (report["stored"], report["duplicates"], report["restored"]) == (4, 0, 2), report
    for u in users:
        assert stored(user_home(tmp_path / "b", u), u) == [f"{u} says number {i}" for i in range(5)]
        home = tmp_path / "s3" / u
        with Memory(home, create=True) as mem:
            fleet().attach(mem, user_dirname(u))
        assert stored(home, u) == [f"{u} says number {i}" for i in range(5)]
