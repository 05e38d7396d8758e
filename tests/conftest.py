"""Shared fixtures: every test gets its own store, the hash embedder unless it asks for the real one.

* ``BM_HOME`` points at a fresh directory for every test (autouse), and every other
  ``BM_*`` setting is cleared so a developer's environment cannot leak in.
* ``BM_EMBEDDER=hash`` by default; mark a test ``@pytest.mark.real_embedder`` (or use the
  ``real_embedder`` fixture) to run on the embedded all-MiniLM-L6-v2 instead.  The built
  ONNX model is shared by all tests of a session through one cache directory.
* ``bm`` (fixture): runs the CLI in this process through ``brandmind.cli.app.main`` (fast).
* ``run_bm`` (function): runs it as a real subprocess, for what the process boundary
  decides (raw stdin bytes, exit codes, no traceback).
* ``BM_TEST_VIA_DAEMON=1`` runs both through a resident daemon instead, as a user with
  `bm daemon` running gets them: once a test's store exists, a `bm daemon` serves it and
  every command goes through the client (``cli/client.py``); ``BM_WAIT=1`` so that writes
  are embedded before they return and recall answers exactly as without the daemon
  (tests/test_service.py runs CLI test files this way).
"""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

VIA_DAEMON = os.environ.get("BM_TEST_VIA_DAEMON") == "1"
BM_CMD = [sys.executable, "-m", "brandmind.cli.client" if VIA_DAEMON else "brandmind.cli.app"]
_DAEMONS: dict[str, subprocess.Popen] = {}
_STOPPING: list[subprocess.Popen] = []


def ensure_daemon() -> None:
    """In ``BM_TEST_VIA_DAEMON`` mode: a daemon serves the current store once it exists."""
    home = os.environ.get("BM_HOME", "")
    if not VIA_DAEMON or home in _DAEMONS or not (Path(home) / "data" / "log.lmdb" / "data.mdb").exists():
        return
    from brandmind.cli.client import NoDaemon, daemon_status

    # `bm daemon run --detached` itself (what `bm daemon start` spawns), ready once it answers;
    # forked from a process that has bm imported and warm (tests/daemonfork.py: ~1.6 s less each)
    from daemonfork import fork_daemon

    proc = fork_daemon(Path(home).with_name(Path(home).name + ".daemon-stderr"))
    deadline = time.monotonic() + 60
    while True:
        try:
            daemon_status(home)
            break
        except NoDaemon:
            assert proc.poll() is None, proc.stderr_text()
            assert time.monotonic() < deadline, "the daemon did not answer within 60 s"
            time.sleep(0.02)
    _DAEMONS[home] = proc


@pytest.fixture(autouse=VIA_DAEMON)
def _stop_daemons():
    yield
    for home in list(_DAEMONS):
        if os.environ.get("BM_TEST_SERVED_LOG"):  # tests/test_service.py: were commands served?
            from brandmind.cli.client import NoDaemon, daemon_status

            try:
                counts = daemon_status(home)
            except NoDaemon:
                counts = {"served": 0, "ran_in_client": 0}
            with open(os.environ["BM_TEST_SERVED_LOG"], "a") as fh:
                fh.write(json.dumps({k: counts.get(k) for k in ("served", "ran_in_client")}) + "\n")
        proc = _DAEMONS.pop(home)
        proc.terminate()  # SIGTERM: it finishes the request under way and exits
        _STOPPING.append(proc)
    while len(_STOPPING) > 4:  # reap the ones that exited meanwhile; never more than a few linger
        _STOPPING.pop(0).wait(60)
_SETTINGS = ("BM_HOME", "BM_EMBEDDER", "BM_OLLAMA_HOST", "BM_OLLAMA_MODEL", "BM_USER",
             "BM_BLOB_THRESHOLD", "BM_MAX_MEMORY_CHARS", "BM_EXTRACTOR", "BM_LLM_MODEL",
             "BM_LLM_MAX_CALLS", "BM_LLM_MAX_TOKENS", "BM_SYNC_PUSH_INTERVAL", "BM_SYNC_PUSH_AFTER_OPS",
             "BM_SYNC_PULL_INTERVAL", "BM_SYNC_BACKOFF_MAX", "BM_SYNC_MAX_SKEW_MS", "XDG_STATE_HOME",
             "BM_CACHE_DIR")

# a developer's own provider keys and endpoints must not reach a test's store
_KEYS = ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "HF_TOKEN")  # (ZEP_API_KEY: the live Zep test)


def _developer_settings() -> tuple[str, ...]:
    """Every ``BM_*`` setting of the environment (not the tests' own ``BM_TEST*``/``BM_SOAK_*``
    switches), and the providers' API keys."""
    return tuple(k for k in os.environ if (k.startswith("BM_") and not k.startswith(("BM_TEST", "BM_SOAK_")))
                 or k in _KEYS)


from ci_guard import (pytest_collectreport, pytest_runtest_makereport, pytest_sessionfinish,  # noqa: E402,F401
                      pytest_terminal_summary)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_embedder: run with the real local embedder (BM_EMBEDDER unset)")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)

    def jsonl(self) -> list:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]

    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]

    def __repr__(self) -> str:  # readable assertion failures
        return f"Result(code={self.code}, out={self.out[:2000]!r}, err={self.err[:2000]!r})"


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Path:
    """One cache directory for the built local model, shared by the whole run (all xdist
    workers: bm's own build lock makes a second builder wait for the first)."""
    from wheelbuild import once_per_run

    return Path(once_per_run(tmp_path_factory, pytestconfig, "model-cache", str))


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> tuple[Path, str]:
    """bm's wheel, built once per run (all xdist workers) from a copy of the checkout: (path, how it was built)."""
    import wheelbuild

    def build(tmp: Path) -> list[str]:
        (tmp / "dist").mkdir()
        wheel, how = wheelbuild.build_wheel(wheelbuild.copy_source(tmp), tmp / "dist")
        return [str(wheel), how]

    wheel, how = wheelbuild.once_per_run(tmp_path_factory, pytestconfig, "wheel", build)
    return Path(wheel), how


@pytest.fixture(scope="session")
def _homes_root(tmp_path_factory: pytest.TempPathFactory):
    """Where test stores live: tmpfs when there is one (a store's fsyncs cost ~0.1 s on
    disk and nothing there), else pytest's tmp dir.  BM_TESTS_ON_DISK=1 forces the disk."""
    shm = Path("/dev/shm")
    if os.environ.get("BM_TESTS_ON_DISK") != "1" and shm.is_dir() and os.access(shm, os.W_OK):
        root = Path(tempfile.mkdtemp(prefix="bm-tests-", dir=shm))
        yield root
        shutil.rmtree(root, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("homes")


@pytest.fixture(autouse=True)
def bm_home(request: pytest.FixtureRequest, _homes_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty BM_HOME for every test (no store in it yet: see ``store``)."""
    for key in _SETTINGS + _developer_settings():
        monkeypatch.delenv(key, raising=False)
    home = Path(tempfile.mkdtemp(prefix=request.node.name[:40].replace("/", "_") + "-", dir=_homes_root))
    monkeypatch.setenv("BM_HOME", str(home))
    monkeypatch.setenv("BM_CACHE_DIR", str(request.getfixturevalue("model_cache")))
    if VIA_DAEMON:
        monkeypatch.setenv("BM_WAIT", "1")
    if request.node.get_closest_marker("real_embedder"):
        _use_real_embedder(home, request.getfixturevalue("model_cache"), monkeypatch)
    else:
        monkeypatch.setenv("BM_EMBEDDER", "hash")
    return home


def _use_real_embedder(home: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BM_EMBEDDER", raising=False)
    monkeypatch.setenv("BM_CACHE_DIR", str(model_cache))


@pytest.fixture
def real_embedder(bm_home: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Use the embedded default (all-MiniLM-L6-v2) from here on; the built model is shared
    by the session.  (Or mark the test ``@pytest.mark.real_embedder``.)"""
    _use_real_embedder(bm_home, model_cache, monkeypatch)
    return bm_home


@pytest.fixture
def store(bm_home: Path) -> Path:
    """An initialised, empty store under BM_HOME (what `bm init` makes)."""
    from brandmind.memory import Memory

    Memory(create=True).close()
    return bm_home


def use_home(monkeypatch: pytest.MonkeyPatch, path: Path) -> Path:
    """Point BM_HOME somewhere else (e.g. a second, empty store)."""
    path.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("BM_HOME", str(path))
    return path


def run_bm(*args: object, input: str | bytes | None = None, env: dict | None = None,
           timeout: float = 120) -> Result:
    """Run `bm ARGS` in a subprocess (stdout a pipe, so JSON output); returns a Result.

    ``args`` may hold bytes (passed to the OS as they are, e.g. invalid UTF-8 in argv).
    """
    data = input.encode("utf-8") if isinstance(input, str) else input
    argv = [a if isinstance(a, bytes) else str(a) for a in args]
    ensure_daemon()
    proc = subprocess.run([*BM_CMD, *argv], input=data if data is not None else b"",
                          capture_output=True, env={**os.environ, **(env or {})},
                          timeout=timeout)
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                  proc.stderr.decode("utf-8", "replace"))


@pytest.fixture
def bm(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    """Run `bm ARGS` in this process: ``bm("recall", "x", input=b"...")`` -> Result."""
    from brandmind.cli import quick
    from brandmind.cli.app import main
    from brandmind.cli.client import forward

    if VIA_DAEMON:
        monkeypatch.setenv("BM_WAIT", "1")

    def run(*args: object, input: str | bytes | None = None) -> Result:
        data = input.encode("utf-8") if isinstance(input, str) else (input or b"")
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        capsys.readouterr()
        ensure_daemon()
        code = forward([str(a) for a in args]) if VIA_DAEMON else None
        if code is None:  # as `bm` runs it here (cli/client.py main): quick's forms without typer
            argv = [str(a) for a in args]
            parsed = quick.parse(argv)
            code = quick.run(parsed) if parsed is not None else main(argv)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


def drain_pty(master: int) -> bytes:
    """Everything written to a pseudo-terminal until its last writer closed it."""
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            return out
        if not chunk:
            return out
        out += chunk


def open_memory():
    """The store under the current BM_HOME through the Python API."""
    from brandmind.memory import Memory

    return Memory()


def memory_count() -> int:
    with open_memory() as mem:
        return mem.sql.conn.execute("SELECT count(*) FROM memories").fetchone()[0]


def assert_error(res: Result, code: int = 1, *words: str) -> str:
    """A clean failure: exit ``code``, exactly one ``Error: …`` line on stderr with a hint,
    no traceback anywhere; each of ``words`` appears in it.  Returns that line."""
    assert res.code == code, res
    assert "Traceback" not in res.out + res.err, res
    lines = res.err_lines()
    assert len(lines) == 1, res
    line = lines[0]
    assert line.startswith("Error: "), res
    assert "(hint: " in line and not line.rstrip().endswith("(hint: )"), res
    for word in words:
        assert word in line, (word, line)
    return line


def inflated_after(data: bytes, befores: list[bytes]) -> list[bytes]:
    """Every op packed after the op before it (``PACKED_AFTER``, brandmind/logvalues.py) found
    anywhere in ``data``, live or in a free page, inflated: each 0x03 byte is tried as one, with
    each of ``befores`` (the plain ops found, one of them its predecessor) as that op."""
    import zlib

    from brandmind.logvalues import DICTIONARY_V1

    out = []
    at = data.find(b"\x03")
    while at >= 0:
        chunk = data[at + 1:at + 1 + 65536]
        for before in befores:  # a wrong one can inflate too, even into JSON: every one is kept
            try:
                d = zlib.decompressobj(-15, DICTIONARY_V1 + before)
                text = d.decompress(chunk, 1 << 20)
                if d.eof and text[:1] == b"{":
                    json.loads(text)
                    out.append(text)
            except (zlib.error, ValueError):
                continue
        at = data.find(b"\x03", at + 1)
    return out
