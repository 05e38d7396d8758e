"""Convergence of sync (Hypothesis): N in {2, 3, 5} replicas (separate stores), random
histories of every op kind, delivery through a faulty in-process remote and through peer
stores (relays A -> B -> C) that drop, duplicate and reorder ops (also within one origin),
partial syncs, crashes before and after the upload and before the watermark is saved,
skewed and coarse clocks.  At quiescence (everyone syncs until nothing moves):

* every replica's canonical export (``bm export``) is identical,
* and equal to an oracle store that receives the union of all ops, sorted by (HLC, id),
* every op is in every log exactly once (one arrival each), with the same payload
  (redactions included: remove wins everywhere), and the version vectors are equal,
* a rebuild from the log gives the same export.

The harness has teeth: a last-writer-wins that compares wall clocks only, and applying one
origin's ops out of order, each make it fail (tests at the end).
"""
from __future__ import annotations

import contextlib
import copy
import json
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brandmind import clock
from brandmind.config import Config
from brandmind.errors import BMError, ClockSkew
from brandmind.exchange import export_lines
from brandmind.memory import Memory
from brandmind.projection import hlc_key
from brandmind.sync.engine import sync_once
from brandmind.sync.remote import Faults, MemoryRemote, PeerRemote

BASE = 1_750_000_000_000  # fake wall time of the simulation (ms)
USERS = ("ann", "bob")
TEXTS = ("Ann lives in Paris", "Ann likes green tea", "Bob plays chess on Sundays",
         "the project deadline is Friday", "Ann likes green tea")
SUBJECTS = ("Ann", "Bob")
PREDICATES = ("lives_in", "likes", "works_at")
OBJECTS = ("Paris", "Berlin", "tea", "Acme")
HANDLES = ("qsr_real_estate", "cpg_retail_media")
SKILLS = ("market-research", "summarize")
WORDS = ("alpha", "beta", "gamma", "delta")


def _root() -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir():
        return Path(tempfile.mkdtemp(prefix="bm-converge-", dir=shm))
    return Path(tempfile.mkdtemp(prefix="bm-converge-"))


class Crash(Exception):
    """A simulated crash (kill -9) at a point of a sync round."""


class Flaky:
    """A remote whose answers drop, duplicate and reorder ops (wraps a PeerRemote)."""

    def __init__(self, inner, faults: Faults) -> None:
        self.inner, self.faults = inner, faults
        self.name = inner.name
        self.accepts_pushes_for_others = inner.accepts_pushes_for_others

    def heads(self):
        return self.inner.heads()

    def push(self, replica, ops):
        return self.inner.push(replica, ops)

    def pull(self, replica, after, limit=None):
        ops = self.inner.pull(replica, after, limit)
        out = []
        for op in ops:
            if self.faults.hit(self.faults.drop):
                continue
            out.append(op)
            if self.faults.hit(self.faults.duplicate):
                out.append(copy.deepcopy(op))
        if self.faults.reorder:
            self.faults.rng.shuffle(out)
        return out


class Sim:
    """N replicas (one open Memory each for the whole history), a shared faulty remote and
    per-replica clocks: replica i reads ((T + skew_i) // grain_i) * grain_i."""

    def __init__(self, n: int, skews: list[int], grains: list[int], faults: Faults) -> None:
        self.root = _root()
        self.mems = [Memory(create=True, config=Config.load(self.root / f"r{i}")) for i in range(n)]
        self.skews, self.grains = skews, grains
        self.t = BASE
        self.remote = MemoryRemote("hub", faults=faults)  # a relay: takes everyone's ops from anyone
        self.own_only = MemoryRemote("s3", accepts_pushes_for_others=False, faults=faults)  # like S3
        self.faults = faults
        self.originals: dict[str, dict] = {}
        self.seen = [0] * n

    def close(self) -> None:
        for mem in self.mems:
            with contextlib.suppress(Exception):
                mem.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def now(self, i: int) -> int:
        g = self.grains[i]
        return ((self.t + self.skews[i]) // g) * g

    @contextlib.contextmanager
    def on(self, i: int):
        with mock.patch.object(clock, "now_millis", lambda: self.now(i)):
            yield self.mems[i]

    def capture(self, i: int) -> None:
        """Keep a copy of replica i's new ops as they were made (before any later redaction)."""
        mem = self.mems[i]
        for op in mem.log.ops_of(mem.log.replica, self.seen[i]):
            self.originals[op["id"]] = copy.deepcopy(op)
            self.seen[i] = int(op["id"].rpartition(":")[2])

    def remote_for(self, i: int, target: int):
        if target == -2:
            return self.own_only
        target = target % len(self.mems) if target >= 0 else target
        if target < 0 or target == i:
            return self.remote
        return Flaky(PeerRemote(self.mems[target], now_ms=lambda: self.now(target)), self.faults)

    # -- actions ---------------------------------------------------------------------------------
    def run(self, action: tuple) -> None:
        kind, i, *args = action
        i %= len(self.mems)
        self.t += args[-1] if kind == "tick" else 0
        with self.on(i) as mem:
            try:
                getattr(self, "do_" + kind)(mem, i, *args)
            except BMError:
                pass  # e.g. NotFound for something another replica removed: nothing written
        self.capture(i)

    def do_tick(self, mem, i, ms):
        pass

    def do_remember(self, mem, i, user, text):
        mem.remember(TEXTS[text], user=USERS[user])

    def do_forget(self, mem, i, pick):
        ids = [r[0] for r in mem.sql.conn.execute("SELECT id FROM memories ORDER BY id")]
        if ids:
            mem.forget(ids[pick % len(ids)])

    def do_forget_user(self, mem, i, user):
        mem.forget_user(USERS[user])

    def do_fact(self, mem, i, user, s, p, o):
        mem.facts.add({"subject": SUBJECTS[s], "predicate": PREDICATES[p], "object": OBJECTS[o]},
                     user=USERS[user])

    def do_consolidate(self, mem, i, user):
        mem.consolidate(user=USERS[user])

    def do_node(self, mem, i, user, name):
        mem.graph.add_node(OBJECTS[name], user=USERS[user])

    def do_link(self, mem, i, a, b, p):
        nodes = [r[0] for r in mem.sql.conn.execute("SELECT id FROM kg_nodes ORDER BY id")]
        if nodes:
            mem.graph.add_edge(nodes[a % len(nodes)], nodes[b % len(nodes)], PREDICATES[p])

    def do_retire_edge(self, mem, i, user, s, p, o):
        # a second fact with the same subject and single-valued predicate retires the first one's edge
        self.do_fact(mem, i, user, s, p, o)

    def do_block_set(self, mem, i, user, word):
        mem.blocks.set("human", f"{USERS[user]} says {WORDS[word]}", user=USERS[user])

    def do_block_append(self, mem, i, user, word):
        mem.blocks.append("human", WORDS[word], user=USERS[user])

    def do_assign(self, mem, i, user, h):
        mem.personas.assign(USERS[user], HANDLES[h], confidence=0.5 + 0.1 * i)

    def do_unassign(self, mem, i, user, h):
        mem.personas.unassign(USERS[user], HANDLES[h])

    def do_skill_add(self, mem, i, name, word):
        mem.skills.add(SKILLS[name], description=f"{WORDS[word]} skill from replica {i}")

    def do_skill_remove(self, mem, i, name):
        mem.skills.remove(SKILLS[name])

    def do_ingest(self, mem, i, user, word):
        line = json.dumps({"role": "user", "content": f"I said {WORDS[word]} to replica {i}",
                           "thread": "t1", "ts": BASE + 1000 * word})
        mem.ingest([line], user=USERS[user])

    def do_sync(self, mem, i, target, push, pull):
        sync_once(mem, self.remote_for(i, target), push=push, pull=pull)

    def do_crash(self, mem, i, target, point):
        def fault(at: str) -> None:
            if at == point:
                raise Crash(at)

        with contextlib.suppress(Crash):
            sync_once(mem, self.remote_for(i, target), fault=fault)

    def do_crash_index(self, mem, i, target):
        """A crash after pulled ops are in the log but before the index applied them."""
        real = mem.store.catch_up

        def crash(*a, **k):
            raise Crash("catch_up")

        mem.store.catch_up = crash
        try:
            with contextlib.suppress(Crash):
                sync_once(mem, self.remote_for(i, target), push=False)
        finally:
            del mem.store.catch_up
        assert mem.store.catch_up.__func__ is real.__func__

    # -- quiescence and the checks -----------------------------------------------------------------
    def quiesce(self, state_of=None, *, same: bool = True) -> None:
        """Sync everyone (no faults) until nothing moves: ``state_of(mem)`` (default the
        version vector) stays put, and with ``same`` it is the same on every replica."""
        state_of = state_of or (lambda m: m.log.version_vector())
        self.remote.faults = self.own_only.faults = None
        self.t += 1000
        last = None
        for _ in range(12):
            for i in range(len(self.mems)):
                with self.on(i) as mem:
                    for remote in (self.remote, self.own_only):
                        report = sync_once(mem, remote)
                        assert not report["errors"], report  # a healthy device keeps syncing
            state = [state_of(m) for m in self.mems]
            if state == last and (not same or all(s == state[0] for s in state)):
                return
            last = state
        raise AssertionError(f"no quiescence: {last}")

    def check(self) -> None:
        exports = []
        for mem in self.mems:
            mem.store.catch_up()
            exports.append(list(export_lines(mem)))
        for i, ex in enumerate(exports[1:], 1):
            assert ex == exports[0], _diff(exports[0], ex, f"replica 0 vs replica {i}")
        # every op exactly once, the same everywhere (payloads too: redactions agree)
        logs = [{op["id"]: op for op in mem.log.iter_ops()} for mem in self.mems]
        for mem, log in zip(self.mems, logs):
            assert set(log) == set(self.originals)
            assert mem.log.count("order") == mem.log.count("ops") == len(self.originals)
            assert log == logs[0]
        counts: dict[str, int] = {}
        for op_id in self.originals:
            r = op_id.rpartition(":")[0]
            counts[r] = counts.get(r, 0) + 1
        for mem in self.mems:
            assert mem.log.version_vector() == counts
        # the oracle: a fresh store that receives the union of the ops as made, in canonical order
        oracle = Memory(create=True, config=Config.load(self.root / "oracle"))
        try:
            ops = sorted(self.originals.values(), key=lambda o: (hlc_key(o["hlc"]), o["id"]))
            oracle.receive_ops(copy.deepcopy(ops), now_ms=self.t + 10**9)
            want = list(export_lines(oracle))
        finally:
            oracle.close()
        assert exports[0] == want, _diff(want, exports[0], "oracle vs replicas")
        # a rebuild from the log is exact
        self.mems[-1].admin.rebuild()
        assert list(export_lines(self.mems[-1])) == exports[0]


def _diff(a: list[str], b: list[str], what: str) -> str:
    sa, sb = set(a), set(b)
    only_a = sorted(sa - sb)[:6]
    only_b = sorted(sb - sa)[:6]
    return f"{what} differ:\n only first: {only_a}\n only second: {only_b}"


# -- strategies ----------------------------------------------------------------------------------
R = st.integers(0, 4)
U = st.integers(0, len(USERS) - 1)
TARGET = st.integers(-2, 4)  # -1: the shared relay, -2: an S3-like remote (own ops only); else a peer store
POINTS = st.sampled_from(["before_push", "after_push", "before_watermark", "after_receive"])

ACTIONS = st.one_of(
    st.tuples(st.just("remember"), R, U, st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("forget"), R, st.integers(0, 50)),
    st.tuples(st.just("forget_user"), R, U),
    st.tuples(st.just("fact"), R, U, st.integers(0, 1), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("retire_edge"), R, U, st.just(0), st.just(0), st.integers(0, 3)),
    st.tuples(st.just("consolidate"), R, U),
    st.tuples(st.just("node"), R, U, st.integers(0, 3)),
    st.tuples(st.just("link"), R, st.integers(0, 20), st.integers(0, 20), st.integers(0, 2)),
    st.tuples(st.just("block_set"), R, U, st.integers(0, 3)),
    st.tuples(st.just("block_append"), R, U, st.integers(0, 3)),
    st.tuples(st.just("assign"), R, U, st.integers(0, 1)),
    st.tuples(st.just("unassign"), R, U, st.integers(0, 1)),
    st.tuples(st.just("skill_add"), R, st.integers(0, 1), st.integers(0, 3)),
    st.tuples(st.just("skill_remove"), R, st.integers(0, 1)),
    st.tuples(st.just("ingest"), R, U, st.integers(0, 3)),
    st.tuples(st.just("sync"), R, TARGET, st.booleans(), st.booleans()),
    st.tuples(st.just("sync"), R, TARGET, st.just(True), st.just(True)),
    st.tuples(st.just("crash"), R, TARGET, POINTS),
    st.tuples(st.just("crash_index"), R, TARGET),
    st.tuples(st.just("tick"), R, st.integers(0, 90_000)),
)

SYNCS = st.tuples(st.just("sync"), R, TARGET, st.just(True), st.just(True))

FAULTS = st.builds(
    Faults, seed=st.integers(0, 2**16), fail=st.sampled_from([0.0, 0.15]),
    fail_after_commit=st.sampled_from([0.0, 0.2]), partial=st.sampled_from([0.0, 0.2]),
    drop=st.sampled_from([0.0, 0.3]), duplicate=st.sampled_from([0.0, 0.3]), reorder=st.booleans(),
    stale_heads=st.sampled_from([0.0, 0.3]))


@st.composite
def scenarios(draw):
    n = draw(st.sampled_from([2, 3, 5]))
    skews = draw(st.lists(st.sampled_from([0, 0, -30_000, 45_000, 120_000]) | st.integers(-120_000, 120_000),
                          min_size=n, max_size=n))
    grains = draw(st.lists(st.sampled_from([1, 1000, 60_000]), min_size=n, max_size=n))
    faults = draw(FAULTS)
    actions = draw(st.lists(ACTIONS | SYNCS, min_size=4, max_size=30))
    return n, skews, grains, faults, actions


def run_scenario(n, skews, grains, faults, actions) -> None:
    sim = Sim(n, skews, grains, faults)
    try:
        for action in actions:
            sim.run(action)
        sim.quiesce()
        sim.check()
    finally:
        sim.close()


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_replicas_converge(scenario):
    run_scenario(*scenario)


# -- the harness has teeth -----------------------------------------------------------------------
# A wall-clock LWW: A's clock is a minute ahead; B pulls A's skill and rewrites it, which the
# HLC stamps (A's wall, counter + 1); C gets B's write first (through a remote that holds
# only B's own stream, like S3) and A's afterwards.
WALL_TIE = (3, [60_000, 0, 0], [1, 1, 1], Faults(),
            [("skill_add", 0, 0, 0), ("sync", 0, -1, True, True), ("sync", 1, -1, True, True),
             ("skill_add", 1, 0, 1), ("sync", 1, -2, True, False), ("sync", 2, -2, False, True)])

# One origin's block updates delivered shuffled (seeded) next to a concurrent writer's.
SHUFFLED_BLOCK = (3, [0, 0, 0], [1, 1, 1], Faults(seed=0, reorder=True),
                  [("block_set", 0, 0, 0), ("block_append", 0, 0, 1), ("block_append", 0, 0, 2),
                   ("block_set", 1, 0, 3), ("block_append", 1, 0, 0),
                   ("sync", 0, -1, True, False), ("sync", 1, -1, True, False), ("sync", 2, -1, False, True)])


@pytest.mark.parametrize("scenario", [WALL_TIE, SHUFFLED_BLOCK], ids=["wall-tie", "shuffled-block"])
def test_the_tricky_scenarios_converge(scenario):
    run_scenario(*copy.deepcopy(scenario))


def test_a_wall_clock_lww_fails_the_check(monkeypatch):
    """Comparing wall clocks only (dropping the HLC counter and replica) breaks LWW ties by
    arrival order: the replicas end with different skills."""
    import sys

    def wall_only(hlc):
        return f"{int(hlc[0]):015d}"

    # every module that orders by the HLC key (brandmind/clock.py hlc_key, imported by name)
    real = clock.hlc_key
    for name, module in sorted(sys.modules.items()):
        if name.startswith("brandmind") and getattr(module, "hlc_key", None) is real:
            monkeypatch.setattr(module, "hlc_key", wall_only)
    with pytest.raises(AssertionError, match="differ"):
        run_scenario(*copy.deepcopy(WALL_TIE))


def test_applying_one_origins_ops_out_of_order_fails_the_check(monkeypatch):
    """Without the per-origin order (the catch-up applying in arrival order, blocks applying
    each update as it comes), the shuffled updates leave one replica's block text different."""
    import brandmind.blockrules as blockrules
    import brandmind.replication as replication

    def catch_up_in_arrival_order(log, sql, vector_for, progress=None, *, apply=None, fresh=None):
        from brandmind.projection import apply_sql_side

        apply = apply or apply_sql_side
        with sql.write():
            last = sql.applied()
            n = 0
            for arrival, op in log.ops_after(last, known=fresh):
                apply(sql, op, vector_for)
                last, n = arrival, n + 1
            sql.set_meta("applied", str(last))
        return n

    def drain_as_they_come(sql, bid):
        c = sql.conn
        row = c.execute("SELECT state FROM blocks WHERE id=?", (bid,)).fetchone()
        waiting = [r[0] for r in c.execute("SELECT data FROM block_updates WHERE block_id=? AND applied=0 "
                                           "ORDER BY rowid", (bid,))]
        if row is None or not waiting:
            return
        doc, text = blockrules.load(row[0])
        for data in waiting:
            doc.apply_update(data)
        c.execute("UPDATE block_updates SET applied=1 WHERE block_id=?", (bid,))
        blockrules.store_doc(sql, bid, doc.get_update(), str(text))

    monkeypatch.setattr(replication, "catch_up", catch_up_in_arrival_order)
    monkeypatch.setattr(blockrules, "drain", drain_as_they_come)
    with pytest.raises(AssertionError, match="differ"):
        run_scenario(*copy.deepcopy(SHUFFLED_BLOCK))


# -- the pieces, one at a time ---------------------------------------------------------------------
@pytest.fixture
def pair():
    root = _root()
    mems = [Memory(create=True, config=Config.load(root / n)) for n in ("a", "b")]
    yield mems
    for mem in mems:
        mem.close()
    shutil.rmtree(root, ignore_errors=True)


def test_an_op_waits_for_its_predecessor_of_the_same_replica(pair):
    """Ops of one replica delivered in reverse: each is stored at once (the version vector
    counts only the contiguous prefix) and applied once its predecessor is."""
    a, b = pair
    first = a.remember("Ann lives in Paris", user="ann")
    a.forget(first["id"])
    a.remember("Ann likes tea", user="ann")
    ops = a.log.ops_of(a.log.replica, 0)
    assert [op["kind"] for op in ops] == ["memory.add", "memory.forget", "memory.add"]
    assert b.receive_ops([ops[2]]) == {"received": 1, "duplicates": 0}
    assert b.log.version_vector() == {} and b.list_memories(user="ann") == []  # held back
    b.receive_ops([ops[1], ops[2]])
    assert b.list_memories(user="ann") == []
    assert b.receive_ops(list(reversed(ops))) == {"received": 1, "duplicates": 2}
    assert b.log.version_vector() == {a.log.replica: 3}
    assert [m["text"] for m in b.list_memories(user="ann")] == ["Ann likes tea"]
    assert list(export_lines(a)) == list(export_lines(b))
    b.admin.rebuild()
    assert list(export_lines(a)) == list(export_lines(b))


def test_a_retire_that_arrives_before_its_memory_waits_for_it(pair):
    """B updates a fact it pulled from A; a third store gets B's retire before A's add."""
    a, b = pair
    a.facts.add({"subject": "Ann", "predicate": "lives_in", "object": "Paris"}, user="ann")
    b.receive_ops(a.log.ops_of(a.log.replica, 0))
    b.facts.add({"subject": "Ann", "predicate": "lives_in", "object": "Berlin"}, user="ann")
    root = _root()
    try:
        with Memory(create=True, config=Config.load(root / "c")) as c:
            c.receive_ops(b.log.ops_of(b.log.replica, 0))  # the retire of a memory not here yet
            assert c.sql.conn.execute("SELECT count(*) FROM sync_pending").fetchone()[0] >= 1
            c.receive_ops(a.log.ops_of(a.log.replica, 0))
            assert c.sql.conn.execute("SELECT count(*) FROM sync_pending").fetchone()[0] == 0
            a.receive_ops(b.log.ops_of(b.log.replica, 0))
            assert list(export_lines(c)) == list(export_lines(a)) == list(export_lines(b))
            paris = [m for m in c.list_memories(user="ann") if m["object"] == "Paris"][0]
            assert paris["retired_at"] is not None and paris["superseded_by"] is not None
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_offline_replica_never_brings_forgotten_data_back(pair):
    """B forgets user ann while A, offline, still has her memory; when A's ops reach B (and a
    new store), they are stored redacted and nothing of ann comes back."""
    a, b = pair
    with mock.patch.object(clock, "now_millis", lambda: BASE):
        m = a.remember("Ann's secret is 1234", user="ann")
    b.receive_ops(a.log.ops_of(a.log.replica, 0), now_ms=BASE)
    with mock.patch.object(clock, "now_millis", lambda: BASE + 60_000):
        b.forget_user("ann")
    with mock.patch.object(clock, "now_millis", lambda: BASE + 1):  # A, offline, its clock behind
        a.remember("Ann's PIN is 5678", user="ann")
        a.ingest([json.dumps({"role": "user", "content": "my PIN is 5678"})], user="ann")
    with mock.patch.object(clock, "now_millis", lambda: BASE + 2 * 60_000):  # A, later, after the forget
        kept = a.remember("Ann moved to Rome", user="ann")
    b.receive_ops(a.log.ops_of(a.log.replica, 0), now_ms=BASE + 3 * 60_000)
    a.receive_ops(b.log.ops_of(b.log.replica, 0), now_ms=BASE + 3 * 60_000)
    assert list(export_lines(a)) == list(export_lines(b))
    for mem in (a, b):
        logged = json.dumps(list(mem.log.iter_ops()))
        assert "1234" not in logged and "5678" not in logged  # redacted in both logs
        assert [x["id"] for x in mem.list_memories(user="ann")] == [kept["id"]]  # made after the forget
        assert mem.beads_tail(user="ann") == []
    assert m["id"] not in {x["id"] for x in b.list_memories(user="ann")}


def test_a_user_forget_arriving_late_takes_only_the_turns_stamped_before_it(pair):
    """Whether a bead is older than a user.forget is read from the bead's op (its HLC)."""
    a, b = pair
    with mock.patch.object(clock, "now_millis", lambda: BASE):
        a.ingest([json.dumps({"role": "user", "content": "my PIN is 5678"})], user="ann")
    with mock.patch.object(clock, "now_millis", lambda: BASE + 60_000):
        b.forget_user("ann")
    with mock.patch.object(clock, "now_millis", lambda: BASE + 2 * 60_000):
        a.ingest([json.dumps({"role": "user", "content": "I moved to Rome"})], user="ann")
    a.receive_ops(b.log.ops_of(b.log.replica, 0), now_ms=BASE + 3 * 60_000)
    assert [t["content"] for t in a.beads_tail(user="ann")] == ["I moved to Rome"]
    assert "5678" not in json.dumps(list(a.log.iter_ops()))


def test_a_remote_op_too_far_ahead_is_held_with_the_skew(pair):
    """(Was refused with ClockSkew, which stopped the round; tests/test_clock_skew.py has the rest.)"""
    from brandmind import replication

    a, b = pair
    with mock.patch.object(clock, "now_millis", lambda: BASE + 10 * 60_000):  # A's clock: 10 min ahead
        a.remember("from the future", user="ann")
    remote = MemoryRemote("hub")
    sync_once(a, remote)
    with mock.patch.object(clock, "now_millis", lambda: BASE):
        report = sync_once(b, remote)
        assert not report["errors"] and b.log.version_vector() == {}  # set aside, not stored
        [held] = report["held"]
        assert (held["replica"], held["ops"], held["ahead_ms"]) == (a.log.replica, 1, 600_000)
        with pytest.raises(ClockSkew, match="ahead of this device's clock"):  # a lone receive refuses
            with b.log.write() as t:
                replication.receive(t, remote.pull(a.log.replica, 0)[0], max_skew_ms=b.config.sync_max_skew_ms)
    with mock.patch.object(clock, "now_millis", lambda: BASE + 6 * 60_000):  # within the window now
        assert sync_once(b, remote)["released"] == 1
        assert [m["text"] for m in b.list_memories(user="ann")] == ["from the future"]


def test_two_devices_with_one_replica_id_stop_with_a_conflict(pair):
    from brandmind.errors import SyncConflict

    a, b = pair
    a.remember("one", user="ann")
    forged = dict(a.log.ops_of(a.log.replica, 0)[0], hlc=[BASE, 7, a.log.replica])
    with pytest.raises(SyncConflict, match="share replica id") as exc:
        a.receive_ops([forged])
    assert "fresh BM_HOME" in exc.value.hint
    remote = MemoryRemote("hub")
    sync_once(a, remote)
    with pytest.raises(SyncConflict):
        remote.push(a.log.replica, [forged])
    # the other device (same replica id, another history) pulls: the round stops with the fix named
    remote.streams[a.log.replica][1] = json.dumps(forged)
    remote.streams[a.log.replica][2] = json.dumps({**forged, "id": f"{a.log.replica}:2", "hlc": [BASE, 8, a.log.replica]})
    report = sync_once(a, remote)
    assert report["errors"][0]["error"] == "SyncConflict" and "fresh BM_HOME" in report["errors"][0]["hint"]


def test_pulled_workspace_chunks_survive_a_refresh_on_a_device_without_the_file(pair):
    """Workspace files stay on the device that wrote them; their chunks (memories) sync.  A
    refresh on another device (`bm recall` runs one before it reads) must not take the missing file
    for a deleted one and forget the chunks everywhere."""
    a, b = pair
    a.workspace("ann").write("/notes/trip.md", "# Trip\n\nWe fly to Lisbon in May.")
    b.receive_ops(a.log.ops_of(a.log.replica, 0))
    b.workspace("ann").refresh()  # what `bm recall` runs before it reads
    assert ["Lisbon" in m["text"] for m in b.recall("Lisbon", user="ann", k=3)] == [True]
    assert not b.log.ops_of(b.log.replica, 0)  # the refresh wrote nothing
    memories = [[x for x in export_lines(m) if '"kind":"memory"' in x] for m in (a, b)]
    assert len(memories[0]) == 1 and memories[0] == memories[1]


def test_a_store_from_before_sync_gets_its_version_vector_and_heads(pair):
    """Stores made before sync have no version vector and no per-replica heads: both are
    computed once on open, and new local ops are applied at once (not held back)."""
    a, b = pair
    a.remember("old one", user="ann")
    a.remember("old two", user="ann")
    home = a.paths.data_dir.parent
    with a.log.write() as t:
        t.txn.drop(t.db["sync"], delete=False)
    with a.sql.write():
        a.sql.conn.execute("DELETE FROM sync_heads")
        a.sql.conn.execute("DELETE FROM meta WHERE key='sync_heads'")
    a.close()
    a2 = Memory(config=Config.load(home))
    try:
        assert a2.log.version_vector() == {a2.log.replica: 2}
        a2.remember("new one", user="ann")
        assert sorted(m["text"] for m in a2.list_memories(user="ann")) == ["new one", "old one", "old two"]
        assert a2.sql.conn.execute("SELECT count(*) FROM sync_held").fetchone()[0] == 0
    finally:
        a2.close()
        pair[0] = Memory(config=Config.load(home))
