"""The resident service: `bm daemon` serving the CLI and tool calls on a Unix socket.

Real daemons (`bm daemon start` subprocesses) on real stores; commands through the real
client (the `bm` entry point, ``python -m brandmind.cli.client``) or the wire protocol
spoken by hand (cli/client.py documents it) for what a well-behaved client never sends.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import assert_error, drain_pty, open_memory

from brandmind.cli import client

CLIENT = [sys.executable, "-m", "brandmind.cli.client"]
LOCAL = [sys.executable, "-m", "brandmind.cli.app"]


def bm(*args: str, input: bytes | str = b"", env: dict | None = None, cwd: str | None = None,
       timeout: float = 120) -> subprocess.CompletedProcess:
    """`bm ARGS` through the entry point users run (the daemon when it serves the store)."""
    data = input.encode() if isinstance(input, str) else input
    return subprocess.run([*CLIENT, *args], input=data, capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def local(*args: str, input: bytes | str = b"", env: dict | None = None) -> subprocess.CompletedProcess:
    """`bm ARGS` in its own process, never through a daemon."""
    data = input.encode() if isinstance(input, str) else input
    return subprocess.run([*LOCAL, *args], input=data, capture_output=True, timeout=120,
                          env={**os.environ, **(env or {})})


class Result:
    def __init__(self, proc: subprocess.CompletedProcess) -> None:
        self.code, self.out, self.err = proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]

    def __repr__(self) -> str:
        return f"Result({self.code}, out={self.out[:500]!r}, err={self.err[:500]!r})"


@pytest.fixture
def daemon(store: Path):
    """A daemon serving the test's store (stopped, and checked to have exited, after)."""
    proc = local("daemon", "start")
    assert proc.returncode == 0, proc.stderr
    pid = json.loads(proc.stdout)["pid"]
    yield pid
    local("daemon", "stop")


def status() -> dict:
    return client.daemon_status()


def served() -> int:
    return status()["served"] - status()["ran_in_client"]


def raw(frames: bytes) -> bytes:
    """Send raw bytes to the daemon's socket; what it answered before closing."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(client.socket_path(client.state_dir()))
    try:
        try:
            sock.sendall(frames)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            return b""
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:  # closed with our bytes unread
                chunk = b""
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        sock.close()


def frame(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">cI", kind, len(payload)) + payload


def cli_request(argv: list[str], stdin: bytes = b"") -> tuple[int, bytes, bytes]:
    """One forwarded command spoken by hand (as cli/client.py does): (code, stdout, stderr)."""
    sock = client.connect()
    out, err = [], []
    try:
        client.send(sock, b"C", client.pack_command(argv, os.getcwd(), client.request_env(), {}, None))
        while True:
            kind, data = client.recv(sock)
            if kind == b"N":
                client.send(sock, b"I", stdin)
                client.send(sock, b"I", b"")
            elif kind == b"O":
                out.append(data)
            elif kind == b"E":
                err.append(data)
            elif kind == b"X":
                assert not data.startswith(b"fallback:"), data
                return int(data), b"".join(out), b"".join(err)
    finally:
        sock.close()


# ------------------------------------------------------------------------------ the CLI both ways
def test_the_cli_suite_passes_through_the_daemon(tmp_path: Path) -> None:
    """tests/test_cli.py again, every command through a daemon (conftest BM_TEST_VIA_DAEMON):
    same output, same exit codes, same errors as in-process."""
    served_log = tmp_path / "served"
    env = {**os.environ, "BM_TEST_VIA_DAEMON": "1", "BM_TEST_SERVED_LOG": str(served_log)}
    env.pop("BM_HOME", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:randomly", "-p", "no:cacheprovider",
                           # (the real model's end-to-end test is about the model: in-process only)
                           "-m", "not real_embedder", "tests/test_cli.py"], cwd=Path(__file__).parent.parent, env=env,
                          capture_output=True, timeout=900)
    tail = proc.stdout.decode()[-3000:]
    assert proc.returncode == 0, tail
    counts = [json.loads(line) for line in served_log.read_text().splitlines()]
    # most tests' commands were served by their daemon, not handed back
    assert len(counts) >= 20, counts
    assert sum(c["served"] - c["ran_in_client"] for c in counts) >= 60, counts


def test_output_and_errors_are_the_same_with_and_without_the_daemon(store: Path, daemon: int) -> None:
    for args, stdin in [(("remember", "Ann moved to Lisbon in May 2024", "-u", "ann", "--ts", "2024-05-02"), b""),
                        (("ingest", "-", "-u", "ann"), b'{"role": "user", "content": "I love jazz", "id": "t1", "ts": "2024-06-01"}\n')]:
        assert bm(*args, input=stdin).returncode == 0
    cases = [("recall", "where does Ann live?", "-u", "ann", "-k", "2"), ("memories", "list", "-u", "ann"),
             ("recall", "-k", "0", "x"), ("recall",), ("nosuchcommand",), ("recall", "x", "-u", "bad user!"),
             ("beads", "tail", "-u", "ann"), ("stats",), ("kg", "neighbors", "nobody", "-u", "ann"),
             ("context", "Ann", "-u", "ann", "--budget", "200")]
    before = served()
    for args in cases:
        via = Result(bm(*args))
        here = Result(bm(*args, env={"BM_NO_DAEMON": "1"}))
        assert (via.code, via.err) == (here.code, here.err), (args, via, here)
        if args[0] not in ("stats",):  # stats shows sizes and times of the moment
            assert via.out == here.out, (args, via, here)
    assert served() - before == len(cases)


def test_stdin_cwd_and_relative_paths_are_the_clients(store: Path, daemon: int, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "chat.jsonl").write_text('{"role": "user", "content": "we adopted a cat named Miso", "id": "c1"}\n')
    before = served()
    res = Result(bm("ingest", "chat.jsonl", "-u", "ann", cwd=str(work)))
    assert res.code == 0 and json.loads(res.out)["ingested"] == 1, res
    res = Result(bm("ingest", "-", "-u", "ann", input=b'{"role": "user", "content": "Miso likes tuna"}\n' * 3))
    assert json.loads(res.out)["ingested"] == 3, res
    res = Result(bm("remember", "-", "-u", "ann", input=b"Ann's sister is called Bea\n"))
    assert res.code == 0, res
    with open_memory() as mem:
        assert mem.get(json.loads(res.out)["id"])["text"] == "Ann's sister is called Bea"
    res = Result(bm("export", "-o", "out.jsonl", cwd=str(work)))
    assert res.code == 0 and (work / "out.jsonl").stat().st_size > 0, res
    missing = Result(bm("ingest", "nope.jsonl", cwd=str(work)))
    assert_error(missing, 1, "nope.jsonl")
    assert served() - before == 5
    # the daemon's own working directory was not changed for good
    assert Path(f"/proc/{daemon}/cwd").resolve() == Path("/") or not Path("/proc").exists()


def test_a_terminal_gets_the_same_table(store: Path, daemon: int) -> None:
    import fcntl
    import pty
    import termios

    assert bm("remember", "Ann moved to Lisbon in May 2024", "-u", "ann", "--ts", "2024-05-02").returncode == 0

    def on_a_terminal(env: dict) -> bytes:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        proc = subprocess.Popen([*CLIENT, "memories", "list", "-u", "ann"], stdin=slave, stdout=slave, stderr=slave,
                                env={**os.environ, "TERM": "xterm-256color", **env})
        os.close(slave)
        out = drain_pty(master)
        proc.wait(60)
        os.close(master)
        return out

    before = served()
    via, here = on_a_terminal({}), on_a_terminal({"BM_NO_DAEMON": "1"})
    assert served() - before == 1
    assert b"Lisbon" in via and b"\x1b[" in via  # a table, with colour
    assert via == here


def test_settings_that_differ_run_in_the_client(store: Path, daemon: int) -> None:
    """The daemon reads the store with its own BM_ settings: a command run with others is
    handed back and runs in the calling process, with the caller's settings."""
    assert bm("remember", "Bob likes tea", "-u", "bob").returncode == 0
    st = status()
    res = Result(bm("recall", "tea", "-k", "1", env={"BM_USER": "bob"}))
    assert json.loads(res.out)[0]["text"] == "Bob likes tea", res
    after = status()
    assert after["ran_in_client"] == st["ran_in_client"] + 1


def test_the_command_frame_round_trips_any_argument() -> None:
    argv = ["recall", "naïve café", "", "--x=y", "a\nb", "\udcff bytes that were not UTF-8", "=", "-u", "ann"]
    env = {"BM_USER": "ann=bob", "TERM": "xterm", "EMPTY": ""}
    tty = {"stdin": True, "stdout": False, "stderr": True}
    back = client.unpack_command(client.pack_command(argv, "/tmp/a b", env, tty, 120))
    assert back == {"v": 1, "kind": "cli", "argv": argv, "cwd": "/tmp/a b", "columns": 120, "tty": tty, "env": env}
    for bad in (b"", b"2\0/\0\0000\0" + b"0", b"1\0/\0\0000\0" + b"3\0a", b"1\0/\0\0000\0" + b"0\0NOEQUALS"):
        with pytest.raises(ValueError):
            client.unpack_command(bad)


# ------------------------------------------------------------------------------ concurrency
def test_eight_clients_times_300_writes_lose_nothing(store: Path, daemon: int, tmp_path: Path) -> None:
    """8 clients write 300 memories each at once through the socket while another process
    writes directly (no daemon): every write is there exactly once."""
    errors: list = []

    def writer(n: int) -> None:
        try:
            for i in range(300):
                code, out, err = cli_request(["remember", f"client {n} note {i}", "-u", "ann"])
                assert code == 0, err
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    direct = tmp_path / "direct.jsonl"
    direct.write_text("".join(json.dumps({"role": "user", "content": f"direct {i}", "id": f"d{i}"}) + "\n"
                              for i in range(300)))
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    side = local("ingest", str(direct), "-u", "ann")
    for t in threads:
        t.join(300)
    assert not errors, errors[:3]
    assert side.returncode == 0, side.stderr
    with open_memory() as mem:
        texts = [m["text"] for m in mem.list_memories(user="ann", limit=10_000)]
    assert len(texts) == 8 * 300 + 300
    assert len(set(texts)) == len(texts)
    assert {f"client {n} note {i}" for n in range(8) for i in range(300)} <= set(texts)


# ------------------------------------------------------------------------------ reliability
def test_the_socket_is_private(store: Path, daemon: int) -> None:
    path = Path(client.socket_path(client.state_dir()))
    assert (path.stat().st_mode & 0o777) == 0o600
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        from brandmind.cli.serve import same_user

        assert same_user(a)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_is_refused(store: Path, daemon: int) -> None:
    path = client.socket_path(client.state_dir())
    os.chmod(path, 0o666)  # even if the file let them in, the peer check does not

    def as_nobody() -> str:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(r)
            try:
                os.setgid(65534)
                os.setuid(65534)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(20)
                try:
                    s.connect(path)
                    s.sendall(frame(b"R", json.dumps({"v": 1, "kind": "status"}).encode()))
                    answer = s.recv(100)
                    os.write(w, b"answered" if answer else b"closed")
                except PermissionError:
                    os.write(w, b"denied")
                except OSError as exc:
                    os.write(w, f"error {exc}".encode())
            finally:
                os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        with os.fdopen(r, "rb") as fh:
            return fh.read().decode()

    assert as_nobody() in ("closed", "denied")
    os.chmod(path, 0o600)
    assert as_nobody() == "denied"
    assert bm("stats").returncode == 0


@pytest.mark.parametrize("garbage", [
    b"hello daemon\n" * 10,
    struct.pack(">cI", b"R", 2**31),                    # a frame too big to be real
    frame(b"R", b"{not json"),
    frame(b"R", b"[1, 2, 3]"),
    frame(b"R", json.dumps({"v": 1, "kind": "cli", "argv": "recall x"}).encode()),
    frame(b"R", json.dumps({"v": 7, "kind": "cli"}).encode()),
    frame(b"R", json.dumps({"v": 1, "kind": "bogus"}).encode()),
    frame(b"Q", b"x" * 100),
    os.urandom(5000),
    b"",
])
def test_garbage_does_not_hurt_the_daemon(store: Path, daemon: int, garbage: bytes) -> None:
    answer = raw(garbage)
    assert b"X" not in answer[:1] or b"fallback" not in answer  # no command ran
    assert bm("remember", "still here", "-u", "ann").returncode == 0
    assert json.loads(bm("recall", "still here", "-u", "ann", "-k", "1").stdout)[0]["text"] == "still here"
    assert status()["served"] >= 2


def test_a_client_that_goes_away_mid_request(store: Path, daemon: int) -> None:
    # asks for `ingest -`, sends half a line of stdin, hangs up
    sock = client.connect()
    req = {"v": 1, "kind": "cli", "argv": ["ingest", "-", "-u", "ann"], "cwd": "/", "env": client.request_env(),
           "tty": {}, "columns": None}
    client.send(sock, b"R", json.dumps(req).encode())
    kinds = [client.recv(sock)[0], client.recv(sock)[0]]
    assert kinds == [b"A", b"N"]
    client.send(sock, b"I", b'{"role": "user", "content": "half')
    sock.close()
    # a reader that disconnects while a big answer streams
    for i in range(50):
        assert bm("remember", f"filler {i} " + "x" * 2000, "-u", "ann").returncode == 0
    sock = client.connect()
    req["argv"] = ["memories", "list", "-u", "ann"]
    client.send(sock, b"R", json.dumps(req).encode())
    assert client.recv(sock)[0] == b"A"
    sock.close()
    time.sleep(0.3)
    assert bm("doctor").returncode == 0
    assert "half" not in bm("memories", "list", "-u", "ann").stdout.decode()
    assert len(json.loads(bm("memories", "list", "-u", "ann").stdout)) == 50


def test_kill_9_mid_write_leaves_a_clean_store_and_a_queue_that_resumes(store: Path, tmp_path: Path) -> None:
    lines = tmp_path / "turns.jsonl"
    lines.write_text("".join(json.dumps({"role": "user", "content": f"turn {i} about the garden", "id": f"t{i}"}) + "\n"
                             for i in range(6000)))
    started = json.loads(local("daemon", "start").stdout)["pid"]
    ingest = subprocess.Popen([*CLIENT, "ingest", str(lines), "-u", "ann"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    time.sleep(0.4)
    os.kill(started, signal.SIGKILL)
    out, err = ingest.communicate(timeout=120)
    # the client either finished or says the daemon stopped; never a traceback
    assert b"Traceback" not in err
    assert ingest.returncode == 0 or b"the bm daemon stopped" in err, err
    time.sleep(0.2)
    assert Result(local("doctor")).code == 0
    # the same file again (ids: nothing twice), then a new daemon works the vectors queue off
    assert local("ingest", str(lines), "-u", "ann").returncode == 0
    assert local("daemon", "start").returncode == 0
    try:
        deadline = time.time() + 120
        while json.loads(bm("queue", "--json").stdout)["vectors_pending"] and time.time() < deadline:
            time.sleep(0.2)
        q = json.loads(bm("queue", "--json").stdout)
        assert q["vectors_pending"] == 0 and q["memories"] == q["vectors"] == 6000, q
    finally:
        local("daemon", "stop")


def test_two_daemons_on_one_store_are_refused(store: Path, daemon: int) -> None:
    second = Result(local("daemon", "run"))
    assert_error(second, 1, "already running")
    assert status()["served"] >= 0 and bm("stats").returncode == 0  # the first one still serves


def test_wait_returns_once_the_vectors_exist(store: Path, daemon: int) -> None:
    for i in range(20):
        res = Result(bm("--wait", "remember", f"waited note {i}", "-u", "ann"))
        assert res.code == 0, res
        assert json.loads(bm("queue", "--json").stdout)["vectors_pending"] == 0
    res = Result(bm("ingest", "-", "-u", "ann", input="".join(
        json.dumps({"role": "user", "content": f"fresh turn {i} about " + ("kayaks" if i == 150 else "the lake")})
        + "\n" for i in range(300))))
    assert res.code == 0
    # found at once by keyword, vectorised or not (a word in one memory: one in over 10% of the
    # store would not search, storage/keywords.py, and the turn would wait for its vector)
    assert "kayaks" in json.loads(bm("recall", "kayaks", "-u", "ann", "-k", "1").stdout)[0]["text"]


def test_loopback_tcp_with_a_token_where_there_are_no_unix_sockets(store: Path) -> None:
    """BM_SOCKET=tcp (what a system without AF_UNIX gets): a random loopback port, its token
    in a 0600 file; the client finds both; a connection without the token is refused."""
    proc = local("daemon", "start", env={"BM_SOCKET": "tcp"})
    assert proc.returncode == 0, proc.stderr
    try:
        port_file = Path(client.state_dir()) / client.PORT_FILE
        assert (port_file.stat().st_mode & 0o777) == 0o600
        assert not Path(client.socket_path(client.state_dir())).exists()
        assert bm("remember", "over tcp", "-u", "ann").returncode == 0
        assert json.loads(bm("recall", "over tcp", "-u", "ann", "-k", "1").stdout)[0]["text"] == "over tcp"
        assert served() == 2
        where = json.loads(port_file.read_text())
        for hello in (b"", frame(b"H", b"wrong token"), frame(b"R", json.dumps({"v": 1, "kind": "status"}).encode())):
            with socket.create_connection(("127.0.0.1", where["port"]), timeout=10) as s:
                s.sendall(hello)
                s.shutdown(socket.SHUT_WR)
                try:
                    assert s.recv(100) == b""  # closed unanswered
                except ConnectionResetError:
                    pass
        assert served() == 2
    finally:
        local("daemon", "stop")
    assert not port_file.exists()
