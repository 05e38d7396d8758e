"""The sync daemon: schedule and backoff (pure, fake clock), the loop with a fake step, and
real processes: one instance per store, SIGTERM mid-step, kill -9 and restart, start /
stop / status, logs in the state directory, systemd unit and launchd plist."""
from __future__ import annotations

import json
import os
import plistlib
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import assert_error, run_bm

from brandmind.sync import daemon as d
from brandmind.sync.daemon import Schedule, backoff_delay

TESTS = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------- backoff (pure)
def test_backoff_is_exponential_capped_and_fully_jittered() -> None:
    top = [backoff_delay(n, base=5, cap=900, rand=lambda: 1.0) for n in range(1, 12)]
    assert top == [5, 10, 20, 40, 80, 160, 320, 640, 900, 900, 900]
    assert backoff_delay(0, rand=lambda: 1.0) == 0.0
    # full jitter: anywhere in [MIN_RETRY, ceiling], never below the floor nor above the cap
    assert backoff_delay(4, base=5, cap=900, rand=lambda: 0.0) == d.MIN_RETRY
    assert backoff_delay(4, base=5, cap=900, rand=lambda: 0.5) == 20.0
    import random

    rng = random.Random(7)
    samples = [backoff_delay(6, base=5, cap=900, rand=rng.random) for _ in range(2000)]
    assert min(samples) >= d.MIN_RETRY and max(samples) <= 160
    assert max(samples) > 150 and min(samples) < 10  # spread over the whole range, not a fixed delay
    huge = backoff_delay(10_000, base=5, cap=60, rand=lambda: 1.0)
    assert huge == 60


# ---------------------------------------------------------------------------- schedule (pure)
def _sched(now: float = 0.0, **kw) -> Schedule:
    args = dict(push_interval=60, pull_interval=120, push_after_ops=100, backoff_cap=900)
    args.update(kw)
    return Schedule.starting(now, **args)


def test_schedule_syncs_at_start_then_on_intervals() -> None:
    s = _sched(1000)
    assert s.due(1000, 0) == (True, True)
    s.done(1000.5, pushed=True, pulled=True, ok=True)
    assert s.due(1001, 0) == (False, False)
    assert s.due(1060.4, 99) == (False, False)
    assert s.due(1060.5, 0) == (True, False)       # push interval runs from the end of the step
    s.done(1061, pushed=True, pulled=False, ok=True)
    assert s.due(1120.5, 0) == (False, True)        # pull every 120 s
    assert s.wake_at() == 1120.5


def test_schedule_pushes_after_n_new_ops() -> None:
    s = _sched(0)
    s.done(0, pushed=True, pulled=True, ok=True)
    assert s.due(5, 99) == (False, False)
    assert s.due(5, 100) == (True, False)
    s.done(6, pushed=True, pulled=False, ok=True)
    assert s.next_push == 66  # the count-triggered push restarts the interval


def test_missed_ticks_are_skipped_not_replayed() -> None:
    """An hour asleep (60 push ticks, 30 pull ticks missed) gives ONE push and ONE pull."""
    s = _sched(0)
    s.done(0, pushed=True, pulled=True, ok=True)
    now = 3600.0
    steps = 0
    for i in range(200):  # the loop looks again and again right after waking
        t = now + i * 0.01
        push, pull = s.due(t, 0)
        if push or pull:
            steps += 1
            s.done(t, pushed=push, pulled=pull, ok=True)
    assert steps == 1
    assert s.next_push == pytest.approx(3660.0) and s.next_pull == pytest.approx(3720.0)


def test_failures_back_off_and_a_success_resets() -> None:
    s = _sched(0, backoff_cap=60)
    delays = []
    now = 0.0
    for _ in range(8):
        assert s.due(now, 10_000) == (True, True)
        s.done(now, pushed=True, pulled=True, ok=False, rand=lambda: 1.0)
        delays.append(s.retry_at - now)
        # blocked until the retry time, even with many new ops
        assert s.due(s.retry_at - 0.01, 10_000) == (False, False)
        assert s.wake_at() == s.retry_at
        now = s.retry_at
    assert delays == [5, 10, 20, 40, 60, 60, 60, 60]
    s.done(now, pushed=True, pulled=True, ok=True)
    assert s.failures == 0 and s.due(now + 1, 0) == (False, False)
    assert s.next_push == now + 60


# ---------------------------------------------------------------------------- the loop, fake step
class _Fixed:
    def __init__(self, *remotes) -> None:
        self.remotes = list(remotes)

    def current(self):
        return self.remotes


class _Named:
    accepts_pushes_for_others = False

    def __init__(self, name: str) -> None:
        self.name = name


def test_loop_with_a_fake_clock(store: Path, tmp_path: Path) -> None:
    from brandmind.config import Config
    from brandmind.memory import Memory

    t = [500.0]
    calls: list[tuple] = []
    fail = [False]

    def fake_sync(mem, remote, *, push=True, pull=True):
        calls.append((t[0], remote.name, push, pull))
        t[0] += 0.25  # a step takes time
        if fail[0]:
            return {"pushed": {}, "pulled": {}, "errors": ["remote down"]}
        return {"pushed": {"r": 3} if push else {}, "pulled": {}, "errors": []}

    cfg = Config.load(sync_push_after_ops=5)
    with Memory(config=cfg) as mem:
        dm = d.Daemon(mem, remotes=_Fixed(_Named("a"), _Named("b")), sync=fake_sync,
                      clock=lambda: t[0], state_file=tmp_path / "daemon.json")
        assert dm.run_once() <= d.POLL_SECONDS
        assert [(c[1], c[2], c[3]) for c in calls] == [("a", True, True), ("b", True, True)]
        calls.clear()
        assert dm.run_once() > 0 and calls == []
        t[0] += 10 * 3600  # asleep ten hours
        dm.run_once()
        dm.run_once()
        assert [(c[1], c[2], c[3]) for c in calls] == [("a", True, True), ("b", True, True)]
        calls.clear()
        for i in range(5):  # five local ops: a push (only) to both remotes, before the interval
            mem.remember(f"note {i}")
        dm.run_once()
        assert [(c[1], c[2], c[3]) for c in calls] == [("a", True, False), ("b", True, False)]
        calls.clear()
        t[0] += 60.0
        fail[0] = True
        dm.run_once()
        assert len(calls) == 2 and dm.schedules["a"].failures == 1
        st = json.loads((tmp_path / "daemon.json").read_text())
        assert st["status"] == "running" and "remote down" in st["last_error"]["message"]
        assert st["retry_at"] and st["last_push"]["ops"] == 3
        calls.clear()
        dm.run_once()
        assert calls == []  # backing off
        fail[0] = False
        t[0] = max(s.retry_at for s in dm.schedules.values()) + 0.01
        dm.run_once()
        assert len(calls) == 2 and all(s.failures == 0 for s in dm.schedules.values())


def test_idle_wait_is_bounded_by_the_poll_and_the_next_tick(store: Path, tmp_path: Path) -> None:
    from brandmind.memory import Memory

    t = [0.0]
    with Memory() as mem:
        dm = d.Daemon(mem, remotes=_Fixed(_Named("a")), sync=lambda *a, **k: {"errors": []},
                      clock=lambda: t[0], state_file=tmp_path / "s.json", poll=2.0)
        dm.run_once()
        assert dm.run_once() == 2.0
        t[0] = 59.5
        assert dm.run_once() == pytest.approx(0.5)


def test_configured_remotes_follow_the_remotes_file(store: Path) -> None:
    from brandmind.errors import ConfigError
    from brandmind.memory import Memory
    from brandmind.sync.config import add_remote, make_s3, remotes_path

    with Memory() as mem:
        data_dir = mem.config.paths.data_dir
        remotes = d.ConfiguredRemotes(mem)
        assert remotes.current() == []
        add_remote(data_dir, make_s3("origin", bucket="bucket-one", endpoint_url="http://127.0.0.1:9"))
        first = remotes.current()
        assert [r.name for r in first] == ["origin"]
        assert remotes.current() is first  # not reopened while the file is unchanged
        remotes_path(data_dir).write_text("this is [not toml")
        assert remotes.current() is first  # a broken edit keeps what the daemon had
        remotes_path(data_dir).unlink()
        add_remote(data_dir, make_s3("backup", bucket="bucket-two", endpoint_url="http://127.0.0.1:9"))
        assert [r.name for r in remotes.current()] == ["backup"]
        remotes_path(data_dir).write_text("this is [not toml")
        with pytest.raises(ConfigError):
            d.ConfiguredRemotes(mem).current()  # at start it is an error


def test_the_daemon_reopens_the_store_after_a_rebuild_or_a_config_change(store: Path, tmp_path: Path) -> None:
    from brandmind.memory import Memory

    seen = []

    def fake_sync(mem, remote, *, push=True, pull=True):
        seen.append(mem.sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0])
        return {"errors": []}

    t = [0.0]
    dm = d.Daemon(Memory(), remotes=_Fixed(_Named("a")), sync=fake_sync, clock=lambda: t[0],
                  state_file=tmp_path / "s.json", reopen=lambda: Memory())
    try:
        first = dm.mem
        dm.run_once()
        assert run_bm("remember", "written by another process").code == 0
        assert run_bm("rebuild").code == 0  # replaces memory.sqlite
        dm.run_once()
        assert dm.mem is not first
        assert run_bm("config", "set", "sync_push_interval", "5").code == 0
        dm.run_once()
        assert dm.schedules["a"].push_interval == 5.0
        t[0] = 5.0
        dm.run_once()
        assert seen == [0, 1]  # the push after 5 s ran on the reopened store, which sees the memory
    finally:
        dm.mem.close()


# ---------------------------------------------------------------------------- paths
def test_state_dir_is_bm_home_state_or_xdg_state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from brandmind.config import resolve_paths

    assert resolve_paths(tmp_path / "h").state_dir == (tmp_path / "h" / "state").resolve()
    monkeypatch.delenv("BM_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xs"))
    assert resolve_paths().state_dir == tmp_path / "xs" / "brandmind"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_paths().state_dir == tmp_path / "home" / ".local" / "state" / "brandmind"


def test_log_rotates_by_size(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from brandmind.config import resolve_paths

    monkeypatch.setattr(d, "LOG_MAX_BYTES", 2000)
    paths = resolve_paths()
    d.setup_logging(paths, to_stderr=False)
    try:
        for i in range(200):
            d.log.info("line %d of a daemon log that keeps growing", i)
        files = sorted(p.name for p in paths.state_dir.iterdir())
        assert {"daemon.log", "daemon.log.1", "daemon.log.3"} <= set(files)
        assert "daemon.log.4" not in files
        assert all(p.stat().st_size <= 2100 for p in paths.state_dir.glob("daemon.log*"))
    finally:
        import logging

        for h in list(logging.getLogger("brandmind").handlers):
            if getattr(h, "_bm_daemon", False):
                logging.getLogger("brandmind").removeHandler(h)
                h.close()


def test_status_without_a_daemon(store: Path) -> None:
    res = run_bm("daemon", "status")
    assert res.code == 0, res
    st = res.json()
    assert st["running"] is False and st["pid"] is None and st["log"].endswith("state/daemon.log")


def test_without_a_remote_the_daemon_runs_and_serves(store: Path) -> None:
    """No remote configured: the daemon still starts (it serves and works the queue; syncing
    starts when a remote is added: test_configured_remotes_follow_the_remotes_file)."""
    res = run_bm("daemon", "start")
    try:
        assert res.code == 0, res
        st = run_bm("daemon", "status").json()
        assert st["running"] and st["remotes"] == {}, st
        from brandmind.cli.client import socket_path, state_dir

        assert Path(socket_path(state_dir(str(store)))).exists()
    finally:
        assert run_bm("daemon", "stop").code == 0


def test_stop_without_a_daemon_is_fine(store: Path) -> None:
    res = run_bm("daemon", "stop")
    assert res.code == 0 and res.json()["stopped"] is False, res


# ---------------------------------------------------------------------------- service files
def _systemd_analyze() -> str | None:
    return shutil.which("systemd-analyze")


def test_install_writes_a_unit_that_systemd_accepts(store: Path, tmp_path: Path) -> None:
    xdg = tmp_path / "xdg-config"
    env = {"XDG_CONFIG_HOME": str(xdg)}
    printed = run_bm("daemon", "install", "--systemd", "--print", env=env)
    assert printed.code == 0, printed
    assert not (xdg / "systemd").exists()  # --print writes nothing
    unit = printed.out
    assert f"Environment=BM_HOME={store}" in unit
    assert f"ExecStart={sys.executable} -m brandmind.cli.app daemon run" in unit
    res = run_bm("daemon", "install", "--systemd", env=env)
    assert res.code == 0, res
    path = xdg / "systemd" / "user" / "bm-daemon.service"
    assert res.json()["path"] == str(path) and path.read_text() == unit
    # installing again is a no-op; another store's unit is not clobbered without --force
    assert run_bm("daemon", "install", "--systemd", env=env).code == 0
    other = run_bm("daemon", "install", "--systemd", env={**env, "BM_HOME": str(tmp_path / "other")})
    assert_error(other, 1, "already exists", "--force")
    if _systemd_analyze():
        # verify a temp copy (ExecStart already names this interpreter: a real executable)
        check = tmp_path / "verify" / "bm-daemon.service"
        check.parent.mkdir()
        check.write_text(unit)
        proc = subprocess.run([_systemd_analyze(), "verify", str(check)], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc
        assert "bm-daemon.service" not in proc.stdout + proc.stderr, proc  # no warnings about it
        broken = check.with_name("bm-broken.service")
        broken.write_text(unit.replace(sys.executable, "/nonexistent/python"))
        bad = subprocess.run([_systemd_analyze(), "verify", str(broken)], capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode != 0  # the check can fail
    gone = run_bm("daemon", "uninstall", "--systemd", env=env)
    assert gone.code == 0 and gone.json()["removed"] is True and not path.exists(), gone
    again = run_bm("daemon", "uninstall", "--systemd", env=env)
    assert again.code == 0 and again.json()["removed"] is False


def test_unit_quotes_odd_paths(tmp_path: Path) -> None:
    from brandmind.sync import service

    odd = tmp_path / "my python 100%" / "bin"
    odd.mkdir(parents=True)
    (odd / "py").symlink_to(sys.executable)
    unit = service.systemd_unit([str(odd / "py"), "-m", "brandmind.cli.app", "daemon", "run"],
                                {"BM_HOME": "/home/a b/100%$x"})
    assert f'ExecStart="{str(odd).replace("%", "%%")}/py" -m brandmind.cli.app daemon run' in unit
    assert 'Environment="BM_HOME=/home/a b/100%%$$x"' in unit
    if _systemd_analyze():  # systemd reads the quoted, escaped path back as the real executable
        check = tmp_path / "bm-odd.service"
        check.write_text(unit)
        proc = subprocess.run([_systemd_analyze(), "verify", str(check)], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0 and "bm-odd.service" not in proc.stdout + proc.stderr, proc


def test_launchd_plist_parses(store: Path, tmp_path: Path) -> None:
    res = run_bm("daemon", "install", "--launchd", "--print", env={"HOME": str(tmp_path)})
    assert res.code == 0, res
    doc = plistlib.loads(res.out.encode())
    assert doc["ProgramArguments"] == [sys.executable, "-m", "brandmind.cli.app", "daemon", "run"]
    assert doc["EnvironmentVariables"]["BM_HOME"] == str(store)
    assert doc["Label"] == "io.brandmind.bm-daemon" and doc["RunAtLoad"] is True
    assert doc["KeepAlive"] == {"SuccessfulExit": False}
    written = run_bm("daemon", "install", "--launchd", env={"HOME": str(tmp_path)})
    assert written.code == 0, written
    path = tmp_path / "Library" / "LaunchAgents" / "io.brandmind.bm-daemon.plist"
    assert plistlib.loads(path.read_bytes()) == doc


def test_unit_without_bm_home_has_no_bm_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from brandmind.sync import service

    monkeypatch.delenv("BM_HOME")
    assert "BM_HOME" not in service.systemd_unit()
    assert "BM_HOME" not in plistlib.loads(service.launchd_plist())["EnvironmentVariables"]


# ---------------------------------------------------------------------------- real processes
# The daemon runs in a child process against a DirRemote (tests/dirremote.py): a remote in a
# directory, which outlives the process, so kill -9 and a restart can be checked.
CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from dirremote import DirRemote
    from brandmind.errors import BMError
    from brandmind.sync import daemon

    remote = DirRemote({root!r}, delay={delay!r}, op_delay={op_delay!r})
    try:
        sys.exit(daemon.run(remotes=[remote], grace={grace!r}))
    except BMError as exc:
        sys.stderr.write(f"Error: {{exc.message}} (hint: {{exc.hint}})\\n")
        sys.exit(1)
""")


def _child_cmd(root: Path, *, delay: float = 0.0, op_delay: float = 0.0, grace: float = d.STOP_GRACE) -> list[str]:
    code = CHILD.format(tests=str(TESTS), root=str(root), delay=delay, op_delay=op_delay, grace=grace)
    return [sys.executable, "-c", code]


def _spawn(root: Path, env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen(_child_cmd(root, **kw), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})


def _wait(cond, timeout: float = 60.0, what: str = "condition", proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"daemon exited {proc.returncode} while waiting for {what}: {err.decode()[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def _local_ops() -> tuple[str, list[dict]]:
    from brandmind.memory import Memory

    with Memory() as mem:
        replica = mem.log.replica
        ops = [op for op in mem.log.iter_ops() if op["id"].startswith(replica + ":")]
    return replica, sorted(ops, key=lambda op: int(op["id"].rsplit(":", 1)[1]))


def _add_ops(n: int, tag: str = "x") -> None:
    """n local ops, quickly (one ingest batch of beads)."""
    from brandmind.memory import Memory

    lines = [json.dumps({"id": f"{tag}{i}", "role": "user", "speaker": "Ann", "content": f"{tag} message {i}"})
             for i in range(n)]
    with Memory() as mem:
        mem.ingest(lines)


def _head(root: Path, replica: str) -> int:
    try:
        return int((root / "heads" / replica).read_text())
    except FileNotFoundError:
        return 0


def _assert_exactly_once(remote_root: Path, replica: str, local: list[dict], unjournaled: int = 0) -> None:
    """The remote holds every local op once; each was written once (``unjournaled``: ops a
    killed push call wrote before it could add its journal line)."""
    from dirremote import DirRemote

    rem = DirRemote(remote_root)
    stored = rem.stored(replica)
    assert [op["id"] for op in stored] == [op["id"] for op in local]  # every op, once, in order
    assert [(op["hlc"], op["kind"]) for op in stored] == [(op["hlc"], op["kind"]) for op in local]
    journal = [j for j in rem.journal() if j["replica"] == replica]
    assert sum(j["new"] for j in journal) + unjournaled == len(local)  # each op written exactly once


def test_one_daemon_per_store(store: Path, tmp_path: Path) -> None:
    first = _spawn(tmp_path / "remote")
    try:
        _wait(lambda: d.state().get("status") == "running" and d.state()["pid"] == first.pid
              and d.state().get("last_push"), what="the first daemon's first sync", proc=first)
        second = subprocess.run(_child_cmd(tmp_path / "remote"), capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and f"already running for this store (pid {first.pid})" in second.stderr
        res = run_bm("daemon", "run")
        assert_error(res, 1, "already running", f"pid {first.pid}", "bm daemon stop")
        res = run_bm("daemon", "start")
        assert_error(res, 1, "already running", f"pid {first.pid}")
        st = run_bm("daemon", "status").json()
        assert st["running"] is True and st["pid"] == first.pid and st["uptime_s"] >= 0
        assert st["last_push"] and st["last_pull"] and st["next_push_at"] and st["last_error"] is None
        assert st["next_tick_at"] == min(st["next_push_at"], st["next_pull_at"])
        stopped = run_bm("daemon", "stop")
        assert stopped.code == 0 and stopped.json() == {"stopped": True, "pid": first.pid, "running": False}
        assert first.wait(timeout=30) == 0
    finally:
        _reap(first)
    st = run_bm("daemon", "status").json()
    assert st["running"] is False and st["status"] == "stopped" and st["next_push_at"] is None


def test_sigterm_mid_push_finishes_the_step_and_loses_nothing(store: Path, tmp_path: Path) -> None:
    _add_ops(300)
    root = tmp_path / "remote"
    proc = _spawn(root, delay=3.0)  # every push call takes 3 s
    try:
        _wait(lambda: (root / "push-started").exists(), what="a push in progress", proc=proc)
        assert not (root / "journal.jsonl").exists()  # mid-step: nothing written yet
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        _reap(proc)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"SIGTERM received" in err
    assert took < d.STOP_GRACE
    replica, local = _local_ops()
    # the step that was running when the signal came was finished, not cut
    assert _head(root, replica) == len(local)
    _assert_exactly_once(root, replica, local)
    log = (store / "state" / "daemon.log").read_text()
    assert "SIGTERM received" in log and f"pushed {len(local)}" in log


def test_sigterm_while_idle_exits_at_once(store: Path, tmp_path: Path) -> None:
    proc = _spawn(tmp_path / "remote")
    try:
        _wait(lambda: d.state().get("status") == "running" and d.state().get("last_push"),
              what="the first sync", proc=proc)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)  # Ctrl-C in the foreground: the same clean stop
        proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 5.0  # no waiting for the next tick (60 s)
    finally:
        _reap(proc)
    assert proc.returncode == 0


def test_a_stuck_step_is_abandoned_after_the_grace_and_resumed_later(store: Path, tmp_path: Path) -> None:
    _add_ops(50)
    root = tmp_path / "remote"
    proc = _spawn(root, delay=600, grace=1.0)  # a push that would hang for ten minutes
    try:
        _wait(lambda: (root / "push-started").exists(), what="the stuck push", proc=proc)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 10
    finally:
        _reap(proc)
    assert proc.returncode == 0
    assert "stopping without finishing" in (store / "state" / "daemon.log").read_text()
    replica, local = _local_ops()
    assert _head(root, replica) == 0
    again = _spawn(root)
    try:
        _wait(lambda: _head(root, replica) == len(local), what="the push after the restart", proc=again)
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=30)
    finally:
        _reap(again)
    _assert_exactly_once(root, replica, local)


def test_kill_9_mid_push_then_restart_pushes_the_rest_exactly_once(store: Path, tmp_path: Path) -> None:
    _add_ops(1500)
    replica, local = _local_ops()
    root = tmp_path / "remote"
    proc = _spawn(root, op_delay=0.002)  # ~3 s to write the 1500 op files
    try:
        _wait(lambda: len(list((root / "ops" / replica).glob("*.json"))) >= 300 if (root / "ops" / replica).exists()
              else False, what="a partial push", proc=proc)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        _reap(proc)
    written = len(list((root / "ops" / replica).glob("*.json")))
    assert 300 <= written < len(local), written  # killed in the middle of the upload
    st = run_bm("daemon", "status").json()
    assert st["running"] is False and st["status"] == "dead"
    # more local writes while the daemon is down
    _add_ops(200, tag="y")
    replica, local = _local_ops()
    again = _spawn(root)
    try:
        _wait(lambda: _head(root, replica) == len(local), what="the rest of the push", proc=again)
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=30) == 0
    finally:
        _reap(again)
    _assert_exactly_once(root, replica, local, unjournaled=written)
    from dirremote import DirRemote

    resent = sum(j["same"] for j in DirRemote(root).journal())
    assert resent <= written  # only what the killed upload had stored was sent again (as "already there")


def test_start_status_stop_and_pull_between_two_stores(store: Path, tmp_path: Path) -> None:
    """`start` returns once the daemon runs; two stores' daemons meet at one remote; the
    daemon's log is in the state directory."""
    root = tmp_path / "remote"
    fast = {"BM_SYNC_PUSH_INTERVAL": "1", "BM_SYNC_PULL_INTERVAL": "1"}
    other = tmp_path / "other-home"
    env_b = {**os.environ, **fast, "BM_HOME": str(other)}
    assert run_bm("init", env=env_b).code == 0
    a_env = {**fast}
    old = {k: os.environ.get(k) for k in a_env}
    os.environ.update(a_env)
    try:
        started = d.start(argv=_child_cmd(root))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    b = subprocess.Popen(_child_cmd(root), env=env_b, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert started["pid"] == d.running_pid()
        assert run_bm("daemon", "status").json()["pid"] == started["pid"]
        res = run_bm("remember", "the daemon carries this across", env={"BM_HOME": str(store)})
        assert res.code == 0, res

        def arrived() -> bool:
            found = run_bm("memories", "list", "--json", env={"BM_HOME": str(other)})
            return found.code == 0 and "the daemon carries this across" in found.out

        _wait(arrived, timeout=60, what="the memory to reach the other store", proc=b)
        stop = run_bm("daemon", "stop")
        assert stop.code == 0 and stop.json()["stopped"] is True
        b.send_signal(signal.SIGTERM)
        assert b.wait(timeout=30) == 0
    finally:
        _reap(b)
        pid = d.running_pid()
        if pid:
            os.kill(pid, signal.SIGKILL)
    log = (store / "state" / "daemon.log").read_text()
    assert "bm daemon started" in log and "pushed" in log
    assert (other / "state" / "daemon.log").exists()


# ---------------------------------------------------------------------------- with a real S3 server
def test_daemon_start_syncs_two_stores_through_s3(store: Path, tmp_path: Path) -> None:
    """`bm remote add s3` + `bm daemon start` on two stores (SeaweedFS): a memory written on
    one reaches the other; `bm sync status` shows the daemon; `bm daemon stop` ends both."""
    from seaweed import SKIP_REASON, start_seaweed, weed_path

    if weed_path() is None:
        pytest.skip(SKIP_REASON)
    server = start_seaweed(tmp_path / "s3")
    other = tmp_path / "other-home"
    fast = {"BM_SYNC_PUSH_INTERVAL": "1", "BM_SYNC_PULL_INTERVAL": "1", **server.env()}
    env_a = {**fast, "BM_HOME": str(store)}
    env_b = {**fast, "BM_HOME": str(other)}
    try:
        bucket = server.new_bucket("daemon")
        assert run_bm("init", env=env_b).code == 0
        key = run_bm("sync", "key", "export", env=env_a)
        assert key.code == 0, key
        assert run_bm("sync", "key", "import", "-", input=key.out, env=env_b).code == 0
        for env in (env_a, env_b):
            added = run_bm("remote", "add", "s3", "--bucket", bucket, "--endpoint-url", server.endpoint, env=env)
            assert added.code == 0, added
            started = run_bm("daemon", "start", env=env)
            assert started.code == 0, started
            assert started.json()["pid"] > 0
        assert run_bm("remember", "the tram leaves at seven", env=env_a).code == 0

        def arrived() -> bool:
            res = run_bm("memories", "list", "--json", env=env_b)
            return res.code == 0 and "the tram leaves at seven" in res.out

        _wait(arrived, timeout=60, what="the memory to reach the second store through S3")
        status = run_bm("sync", "status", env=env_a)
        assert status.code == 0, status
        daemon_state = status.json()["daemon"]
        assert daemon_state["running"] is True and daemon_state["last_push"]
        assert daemon_state["last_error"] is None
    finally:
        for env in (env_a, env_b):
            run_bm("daemon", "stop", env=env)
        server.stop()
    for env in (env_a, env_b):
        assert run_bm("daemon", "status", env=env).json()["running"] is False
