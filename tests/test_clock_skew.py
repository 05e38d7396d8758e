"""One device with a wrong clock must not block the healthy ones (issue 12).

* Property (Hypothesis, the harness of test_sync_converge.py): one replica's clock runs ahead
  by up to 10 years while the others share a correct clock.  At quiescence the healthy
  replicas have every healthy op and identical exports (equal to an oracle of their logs);
  the skewed replica's ops that are too far ahead are held (not applied, not lost, and the
  healthy clocks did not move past them), so ops the healthy replicas make next are taken
  by every other healthy replica.  Once time reaches the held ops, or every healthy replica
  accepts them, everything converges (the full check of test_sync_converge).
* Teeth: applying held ops (the old "raise sync_max_skew_ms" hint), moving the HLC when an
  op is held, dropping held ops, and the old refusal each fail the property.
* End to end through `bm` on a real S3 server (SeaweedFS): a device whose clock is an hour
  ahead refuses to push with an error naming the fix; once its clock is fixed its ops go out
  and the healthy device holds them (`bm sync status`) while it keeps syncing, until
  `bm sync accept`; a device behind is told so.  `bm remote test` without a key makes none.
"""
from __future__ import annotations

import copy
import os
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import BM_CMD, Result, assert_error  # noqa: E402
from seaweed import SKIP_REASON, start_seaweed, weed_path  # noqa: E402
from test_sync_converge import ACTIONS, BASE, FAULTS, SYNCS, Sim, _diff  # noqa: E402

import brandmind.replication as replication  # noqa: E402
from brandmind.config import Config  # noqa: E402
from brandmind.exchange import export_lines  # noqa: E402
from brandmind.memory import Memory  # noqa: E402
from brandmind.oplog import loads  # noqa: E402
from brandmind.projection import hlc_key  # noqa: E402

WINDOW = 300_000  # sync_max_skew_ms (the default)
HOUR = 3_600_000
TEN_YEARS = 10 * 365 * 86_400_000


def _wall(op: dict) -> int:
    return int(op["hlc"][0])


def _held_ids(mem: Memory) -> set[str]:
    return {op["id"] for op in replication.held_ops(mem.log)}


def _hlc(mem: Memory) -> list:
    with mem.log.read() as txn:
        raw = txn.get(b"hlc", db=mem.log.db["meta"])
    return loads(raw) if raw else [0, 0]


class SkewSim(Sim):
    """Replica ``bad``'s clock runs ``shift`` ms ahead; the others read the true time (so a
    bad op within the window for one healthy replica is within it for all of them)."""

    def __init__(self, n: int, bad: int, shift: int, bad_grain: int, faults) -> None:
        skews, grains = [0] * n, [1] * n
        skews[bad], grains[bad] = shift, bad_grain
        super().__init__(n, skews, grains, faults)
        self.bad = bad
        self.healthy = [i for i in range(n) if i != bad]

    def settle(self) -> None:
        """Sync everyone (no faults) until nothing moves: logs and held ops stay the same."""
        self.quiesce(lambda m: (m.log.version_vector(), sorted(_held_ids(m))), same=False)

    def bad_ops(self) -> list[dict]:
        prefix = self.mems[self.bad].log.replica + ":"
        return sorted((o for i, o in self.originals.items() if i.startswith(prefix)),
                      key=lambda o: int(o["id"].rpartition(":")[2]))

    def check_healthy(self) -> None:
        """The property while the bad replica's ops are (partly) too far ahead."""
        now = self.t  # every healthy replica's clock
        bad = self.bad_ops()
        # the held ones: from the first op stamped beyond the window on (a replica's ops in order)
        first_far = next((k for k, o in enumerate(bad) if _wall(o) - now > WINDOW), len(bad))
        want_held = {o["id"] for o in bad[first_far:]}
        want_log = set(self.originals) - want_held
        exports = []
        for i in self.healthy:
            mem = self.mems[i]
            mem.store.catch_up()
            log = {op["id"] for op in mem.log.iter_ops()}
            held = _held_ids(mem)
            assert held == want_held, f"replica {i} holds {sorted(held)[:4]}, not {sorted(want_held)[:4]}"
            assert log == want_log, f"replica {i}: log lacks {sorted(want_log - log)[:4]}, has extra {sorted(log - want_log)[:4]}"
            # not lost: what is held is the op as made (or as a forget here left it)
            for op in replication.held_ops(mem.log):
                orig = self.originals[op["id"]]
                assert (op["hlc"], op["kind"]) == (orig["hlc"], orig["kind"])
            # the clock did not follow the held ops
            assert _hlc(mem)[0] <= now + WINDOW, f"replica {i}'s HLC moved to {_hlc(mem)[0] - now} ms ahead"
            exports.append(list(export_lines(mem)))
        for k, ex in enumerate(exports[1:], 1):
            assert ex == exports[0], _diff(exports[0], ex, f"healthy replica {self.healthy[0]} vs {self.healthy[k]}")
        if self.healthy:
            oracle = Memory(create=True, config=Config.load(self.root / f"oracle-{len(self.originals)}"))
            try:
                ops = sorted((self.originals[i] for i in want_log), key=lambda o: (hlc_key(o["hlc"]), o["id"]))
                oracle.receive_ops(copy.deepcopy(ops), now_ms=now + 10 * TEN_YEARS)
                want = list(export_lines(oracle))
            finally:
                oracle.close()
            assert exports[0] == want, _diff(want, exports[0], "oracle vs healthy replicas")

    def healthy_write(self) -> None:
        for i in self.healthy:
            with self.on(i) as mem:
                mem.remember(f"healthy replica {i} writes after the skewed one", user="ann")
            self.capture(i)


def run_skew(n, bad, shift, bad_grain, faults, actions, release: str) -> None:
    sim = SkewSim(n, bad, shift, bad_grain, faults)
    try:
        for action in actions:
            sim.run(action)
        sim.settle()
        sim.check_healthy()
        sim.healthy_write()  # their next ops are not stamped ahead: every healthy replica takes them
        sim.settle()
        sim.check_healthy()
        if release == "time":  # the true time reaches the held stamps
            sim.t += shift + 2 * WINDOW
        else:
            for i in sim.healthy:
                with sim.on(i) as mem:
                    replication.accept_held(mem.store)
        sim.quiesce()
        for mem in sim.mems:
            assert not _held_ids(mem)
        sim.check()  # every replica: every op once, identical exports equal to the oracle
    finally:
        sim.close()


SHIFTS = (st.sampled_from([HOUR, TEN_YEARS, WINDOW + 1, 2 * WINDOW, WINDOW // 2])
          | st.integers(0, TEN_YEARS) | st.integers(0, 3 * HOUR))


@st.composite
def skew_scenarios(draw):
    n = draw(st.sampled_from([2, 3, 4]))
    bad = draw(st.integers(0, n - 1))
    shift = draw(SHIFTS)
    grain = draw(st.sampled_from([1, 1000, 60_000]))
    faults = draw(FAULTS)
    actions = draw(st.lists(ACTIONS | SYNCS, min_size=4, max_size=24))
    release = draw(st.sampled_from(["time", "accept"]))
    return n, bad, shift, grain, faults, actions, release


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(skew_scenarios())
def test_healthy_replicas_keep_converging_whatever_one_clock_does(scenario):
    run_skew(*scenario)


# -- the property has teeth ---------------------------------------------------------------------
# the bad replica (1) writes an hour ahead (before and after pulling), the others write and sync
TEETH_ACTIONS = (
    ("remember", 0, 0, 0), ("remember", 1, 0, 1), ("fact", 1, 1, 0, 0, 1), ("sync", 1, -1, True, True),
    ("sync", 0, -1, True, True), ("block_set", 2, 0, 1), ("sync", 2, -2, True, True),
    ("sync", 1, 0, True, True), ("remember", 1, 1, 2), ("sync", 1, -2, True, True),
    ("sync", 2, -1, True, True), ("sync", 0, -2, True, True))


def _teeth(release: str = "time") -> tuple:
    from brandmind.sync.remote import Faults

    return 3, 1, HOUR, 1, Faults(), list(TEETH_ACTIONS), release


@pytest.mark.parametrize("release", ["time", "accept"])
def test_the_teeth_scenario_passes(release):
    run_skew(*_teeth(release))


def test_applying_ops_too_far_ahead_fails_the_check(monkeypatch):
    """The old hint: raise sync_max_skew_ms.  The ops are applied and the clocks follow them."""
    real = Config.load.__func__
    monkeypatch.setattr(Config, "load", classmethod(
        lambda cls, *a, **k: real(cls, *a, **{**k, "sync_max_skew_ms": 100 * TEN_YEARS})))
    with pytest.raises(AssertionError):
        run_skew(*_teeth())


def test_moving_the_clock_when_an_op_is_held_fails_the_check(monkeypatch):
    real = replication.receive

    def receive(t, op, **kw):
        got = real(t, op, **kw)
        if got is None and kw.get("counters") is not None:
            kw["counters"].see(op["hlc"])  # the receive rule applied to a held op
        return got

    monkeypatch.setattr(replication, "receive", receive)
    with pytest.raises(AssertionError, match="HLC moved|holds"):
        run_skew(*_teeth())


def test_dropping_held_ops_fails_the_check(monkeypatch):
    def sets_aside(self, op, replica, seq, too_far):
        first = self.first_held(replica)
        return too_far or (first is not None and seq > first)  # "held", but not stored

    monkeypatch.setattr(replication.Held, "sets_aside", sets_aside)
    with pytest.raises(AssertionError, match="holds"):
        run_skew(*_teeth())


def test_refusing_ops_too_far_ahead_fails_the_check(monkeypatch):
    """The code before: the op raised ClockSkew and the round reported an error."""
    monkeypatch.setattr(replication.Held, "sets_aside", lambda self, op, replica, seq, too_far: False)
    with pytest.raises(AssertionError):
        run_skew(*_teeth())


# -- the pieces ------------------------------------------------------------------------------------
@pytest.fixture
def trio(tmp_path):
    mems = [Memory(create=True, config=Config.load(tmp_path / n)) for n in ("a", "b", "c")]
    yield mems
    for mem in mems:
        mem.close()


def test_a_held_op_holds_the_later_ops_of_its_replica_only(trio):
    """A's first op is an hour ahead, its second (forged) is not: both wait; C's ops go on."""
    a, b, c = trio
    with mock.patch("brandmind.clock.now_millis", lambda: BASE + HOUR):
        a.remember("Ann lives in Paris", user="ann")
    with mock.patch("brandmind.clock.now_millis", lambda: BASE):
        c.remember("Carl likes chess", user="carl")
        ops = a.log.ops_of(a.log.replica, 0)
        later = {**ops[0], "id": f"{a.log.replica}:2", "hlc": [BASE, 0, a.log.replica],
                 "payload": {**ops[0]["payload"], "id": "m_later", "text": "Ann likes tea"}}
        got = b.receive_ops([*ops, later, *c.log.ops_of(c.log.replica, 0)])
        assert got == {"received": 1, "duplicates": 0, "held": 2}
        assert b.log.version_vector() == {c.log.replica: 1}
        assert [m["text"] for m in b.list_memories(user="carl")] == ["Carl likes chess"]
        assert b.list_memories(user="ann") == [] and _hlc(b)[0] == BASE
        [h] = replication.held_summary(b.log)
        assert (h["replica"], h["ops"], h["first_seq"], h["last_seq"], h["ahead_ms"]) == (a.log.replica, 2, 1, 2, HOUR)
        assert h["ahead"] == "1h00m"
        # pulled again: still held once each (and a different op under a held id is a clash)
        assert b.receive_ops(ops)["held"] == 1 and len(replication.held_ops(b.log)) == 2
        from brandmind.errors import SyncConflict

        with pytest.raises(SyncConflict, match="share replica id"):
            b.receive_ops([{**ops[0], "hlc": [BASE + HOUR, 5, a.log.replica]}])
        # accepting one replica: applied in seq order, the clock jumps past them
        assert replication.accept_held(b.store, a.log.replica) == 2
        assert sorted(m["text"] for m in b.list_memories(user="ann")) == ["Ann likes tea", "Ann lives in Paris"]
        assert _hlc(b)[0] == BASE + HOUR and not replication.held_ops(b.log)


# -- end to end: `bm` on a real S3 server -----------------------------------------------------------
needs_s3 = pytest.mark.skipif(weed_path() is None, reason=SKIP_REASON)


@pytest.fixture(scope="module")
def sw(tmp_path_factory):
    if weed_path() is None:
        pytest.skip(SKIP_REASON)
    server = start_seaweed(tmp_path_factory.mktemp("seaweed"))
    yield server
    server.stop()


class Device:
    """One store (its own BM_HOME) driven through `bm` subprocesses; ``shift``: how far its
    clock is off (BM_TEST_CLOCK_SHIFT_MS, read only by brandmind.clock, for tests)."""

    def __init__(self, home: Path, sw) -> None:
        self.home = home
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BM_"))}
        self.env.update(sw.env(), BM_HOME=str(home), BM_EMBEDDER="hash")

    def run(self, *args: object, shift: int = 0, input: str | None = None) -> Result:
        import subprocess

        env = {**self.env, "BM_TEST_CLOCK_SHIFT_MS": str(shift)}
        proc = subprocess.run([*BM_CMD, *map(str, args)], input=(input or "").encode(), capture_output=True,
                              env=env, timeout=120)
        return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))

    def ok(self, *args: object, shift: int = 0) -> Result:
        res = self.run(*args, shift=shift)
        assert res.code == 0 and "Traceback" not in res.err, res
        return res


def test_a_clock_mark_holds_until_the_wall_clock_is_set(monkeypatch):
    """clock.skewed_by: the mark stands while the wall clock moves with the monotonic one,
    and lapses when the wall clock steps (it was set) or the machine restarted."""
    from brandmind import clock

    mono = [1_000_000.0]  # seconds
    monkeypatch.setattr(clock.time, "monotonic", lambda: mono[0])
    mark = {"offset_ms": HOUR, "wall_ms": 5_000_000, "mono_ms": mono[0] * 1000}
    mono[0] += 600  # ten minutes later, wall clock untouched
    assert clock.skewed_by(mark, now_ms=5_000_000 + 600_000) == HOUR
    assert clock.skewed_by(mark, now_ms=5_000_000 + 600_000 - HOUR) is None  # set back an hour
    mono[0] = 5.0  # restarted: the monotonic clock began again
    assert clock.skewed_by(mark, now_ms=5_000_000 + 600_000) is None
    assert clock.skewed_by(None) is None


def _devices(sw, root: Path, bucket: str, n: int = 2) -> list[Device]:
    devs = [Device(root / f"dev{i}", sw) for i in range(n)]
    for dev in devs:
        dev.ok("init")
        dev.ok("remote", "add", "s3", "--bucket", bucket, "--prefix", "bm", "--endpoint-url", sw.endpoint)
    key = root / "sync.key"
    devs[0].ok("sync", "key", "export", "-o", key)
    for dev in devs[1:]:
        dev.ok("sync", "key", "import", key)
    return devs


@needs_s3
def test_a_device_an_hour_ahead_does_not_block_the_healthy_one(sw, tmp_path):
    good, bad = _devices(sw, tmp_path, sw.new_bucket())
    good.ok("remember", "Ann lives in Paris", "-u", "ann")
    assert good.ok("sync", "now").json()["ok"]

    # the skewed device: local writes work, the push is refused with the fix named
    stamped = time.monotonic()
    bad.ok("remember", "Bob moved to Rome", "-u", "bob", shift=HOUR)
    res = bad.run("sync", "now", shift=HOUR)
    line = assert_error(res, 1, "this device's clock is", "ahead of the S3 server's", "timedatectl",
                        "1 op(s) kept here")
    assert "59m" in line or "1h00m" in line or "1h01m" in line, line
    report = res.json()["remotes"][0]
    assert report["pushed"] == {} and report["pulled"]  # it still pulls the healthy device's ops
    assert HOUR - 10_000 < report["clock"]["offset_ms"] < HOUR + 10_000
    status = bad.ok("sync", "status").json()
    assert status["remotes"]["origin"]["pending_total"] == 1
    assert "ahead of the S3 server" in status["remotes"]["origin"]["last_error"]["message"]
    # now that it knows, it stamps nothing new while its clock stays wrong: one clear error
    line = assert_error(bad.run("remember", "Bob likes jazz", "-u", "bob", shift=HOUR), 1,
                        "ahead of the sync server's", "nothing was stored", "timedatectl")
    assert "jazz" not in bad.ok("export").out

    # its clock is fixed (bm sees the wall clock stepped): it writes again at once, though its
    # HLC, which never goes back, stamps this op after the one made while it was wrong; both
    # go out, and the healthy device holds them until their time (or `bm sync accept`)
    bad.ok("remember", "Bob likes jazz", "-u", "bob")
    bad.ok("sync", "now")
    good.ok("remember", "Ann likes green tea", "-u", "ann")
    res = good.ok("sync", "now")
    assert res.json()["ok"] and "held" in res.err and "bm sync accept" in res.err
    status = good.ok("sync", "status").json()
    [held] = status["held"]
    bad_replica = bad.ok("sync", "status").json()["replica"]
    assert held["replica"] == bad_replica and held["ops"] == 2
    assert bad_replica not in status["remotes"]["origin"]["incoming"]  # held, not still to pull
    # (ahead of the healthy clock by the hour less the time these commands took since)
    assert HOUR - (time.monotonic() - stamped + 5) * 1000 < held["ahead_ms"] <= HOUR
    texts = [m["text"] for m in good.ok("memories", "list", "-u", "bob").json()]
    assert texts == []  # not applied
    # the healthy device keeps syncing, and its clock did not follow: the skewed device (and
    # any other) takes its next op at once
    good.ok("remember", "Ann plays chess", "-u", "ann")
    assert good.ok("sync", "now").json()["ok"]
    bad.ok("sync", "now")
    assert "Ann plays chess" in {m["text"] for m in bad.ok("memories", "list", "-u", "ann").json()}
    with Memory(config=Config.load(good.home)) as mem:
        mine = mem.log.ops_of(mem.log.replica, 0)
        assert all(_wall(op) < _wall(held_op) - HOUR // 2
                   for op in mine for held_op in replication.held_ops(mem.log))

    # accepting: a warning about the jump, then the op is applied
    assert_error(good.run("sync", "accept", "--replica", "r_nosuch"), 1, "no ops of replica", bad_replica)
    res = good.ok("sync", "accept")
    assert res.json()["accepted"] == 2 and "jumps" in res.err
    assert sorted(m["text"] for m in good.ok("memories", "list", "-u", "bob").json()) == [
        "Bob likes jazz", "Bob moved to Rome"]
    assert good.ok("sync", "status").json()["held"] == []


@needs_s3
def test_a_device_behind_is_told_and_holds_what_looks_ahead(sw, tmp_path):
    good, slow = _devices(sw, tmp_path, sw.new_bucket())
    good.ok("remember", "Ann lives in Paris", "-u", "ann")
    good.ok("sync", "now")
    res = slow.run("sync", "now", shift=-HOUR)
    assert_error(res, 1, "this device's clock is", "behind the S3 server's", "timedatectl")
    [held] = slow.ok("sync", "status", shift=-HOUR).json()["held"]
    assert held["ops"] >= 1
    slow.ok("sync", "now")  # fixed: they are applied
    assert [m["text"] for m in slow.ok("memories", "list", "-u", "ann").json()] == ["Ann lives in Paris"]


@needs_s3
def test_remote_test_without_a_key_makes_none(sw, tmp_path):
    bucket = sw.new_bucket()
    fresh = Device(tmp_path / "fresh", sw)
    fresh.ok("init")
    fresh.ok("remote", "add", "s3", "--bucket", bucket, "--prefix", "bm", "--endpoint-url", sw.endpoint)
    res = fresh.ok("remote", "test")
    out = res.json()
    assert out["ok"] is True and out["key_id"] is None and "no sync key yet" in res.err
    assert not list(fresh.home.rglob("sync_keys.json"))
    # another device syncs through it: without its key, the test fails and says how to get it
    other = Device(tmp_path / "other", sw)
    other.ok("init")
    other.ok("remote", "add", "s3", "--bucket", bucket, "--prefix", "bm", "--endpoint-url", sw.endpoint)
    other.ok("remember", "Ann lives in Paris", "-u", "ann")
    other.ok("sync", "now")
    res = fresh.run("remote", "test")
    assert_error(res, 1, "no sync key", "bm sync key import")
    assert not list(fresh.home.rglob("sync_keys.json"))
