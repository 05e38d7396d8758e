"""brandmind/lmdbscrub.py: after a scrub, every live value reads back unchanged and no byte
of a deleted or overwritten value is left anywhere in data.mdb (free pages, page gaps,
overflow tails); a reader holding an old snapshot in another process defers it."""
from __future__ import annotations

import subprocess
import sys

import lmdb
from hypothesis import HealthCheck, given, settings, strategies as st

from brandmind.lmdbscrub import scrub

# (key index, size) puts and key-index deletes, over two named databases
ACTION = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(["a", "b"]), st.integers(0, 40), st.integers(1, 12_000)),
    st.tuples(st.just("del"), st.sampled_from(["a", "b"]), st.integers(0, 40)),
)


def _value(serial: int, size: int) -> bytes:
    mark = f"<<dead-or-alive-{serial:06d}>>".encode()
    return (mark * (size // len(mark) + 1))[:max(size, len(mark))]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(ACTION, min_size=1, max_size=60))
def test_live_values_survive_and_dead_ones_leave_no_byte(tmp_path_factory, actions):
    path = tmp_path_factory.mktemp("lmdb")
    env = lmdb.open(str(path), max_dbs=4, map_size=1 << 28)
    dbs = {name: env.open_db(name.encode()) for name in ("a", "b")}
    live: dict[tuple[str, int], bytes] = {}
    dead: list[bytes] = []
    for serial, action in enumerate(actions):
        with env.begin(write=True) as txn:
            key = (action[1], action[2])
            if key in live:
                dead.append(live.pop(key)[:25])
            if action[0] == "put":
                live[key] = _value(serial, action[3])
                txn.put(str(key[1]).encode(), live[key], db=dbs[key[0]])
            else:
                txn.delete(str(key[1]).encode(), db=dbs[key[0]])
    with env.begin(write=True) as txn:  # roll the second meta page past the last delete
        txn.put(b"tick", b"1")
    assert scrub(env, path / "data.mdb")
    with env.begin() as txn:
        for (name, k), value in live.items():
            assert txn.get(str(k).encode(), db=dbs[name]) == value
        for name, db in dbs.items():
            assert sum(1 for _ in txn.cursor(db=db)) == sum(1 for n, _ in live if n == name)
    data = (path / "data.mdb").read_bytes()
    alive = {v[:25] for v in live.values()}
    for mark in dead:
        if mark not in alive:
            assert mark not in data, mark
    env.close()


def test_a_reader_of_an_older_snapshot_defers_the_scrub(tmp_path):
    env = lmdb.open(str(tmp_path), max_dbs=2, map_size=1 << 26)
    with env.begin(write=True) as txn:
        txn.put(b"k", b"secret-value-" * 50)
    reader = subprocess.Popen([sys.executable, "-c", (
        "import lmdb, sys, time; e = lmdb.open(sys.argv[1], max_dbs=2, map_size=1 << 26); "
        "t = e.begin(); t.get(b'k'); print('ready', flush=True); sys.stdin.read()"),
        str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "ready"
        for _ in range(2):
            with env.begin(write=True) as txn:
                txn.put(b"k", b"other")
        assert scrub(env, tmp_path / "data.mdb") is False  # its snapshot still uses the old pages
        assert b"secret-value-" in (tmp_path / "data.mdb").read_bytes()
    finally:
        reader.communicate("", timeout=30)
    assert scrub(env, tmp_path / "data.mdb") is True
    assert b"secret-value-" not in (tmp_path / "data.mdb").read_bytes()
    env.close()
