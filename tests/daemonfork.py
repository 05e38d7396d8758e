"""Per-test daemons for ``BM_TEST_VIA_DAEMON=1`` (tests/test_service.py re-runs tests/test_cli.py
with every command forwarded through a daemon), forked from one warm process.

Each test there has its own store, so its own daemon: ~40 of them.  A daemon started as a new
interpreter spends ~1.6 s of CPU before it serves anything: importing bm and numpy, building the
command tree, and its warm-up's first recall (loading the keyword tokenizer and the recall
modules) -- the same every time, and nothing that test proves.  So one "zygote" process pays that
once (imports, then the daemon's own warm-up on a scratch store, closed and deleted), and each
test's daemon is a fork of it that runs exactly what ``bm daemon start`` spawns:
``main(["daemon", "run", "--detached"])`` with the test's environment, working directory and a
new session.  What a warm process keeps between stores (module caches) is what the in-process
``bm`` fixture keeps across all of tests/test_cli.py anyway; a daemon's cold start from a new
interpreter is covered by tests/test_service.py's own tests (``bm daemon start``).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ZYGOTE = r'''
import json, os, shutil, signal, sys, tempfile

scratch = tempfile.mkdtemp(prefix="bm-zygote-")
os.environ.update(BM_HOME=scratch, BM_EMBEDDER="hash")
from brandmind.cli import app, client, daemon, resident, serve  # noqa: F401 - what `daemon run` imports
from brandmind.memory import Memory
from brandmind.sync import daemon as sync_daemon, worker  # noqa: F401

app.build_command()
with Memory(create=True) as mem:  # what the daemon's warm-up does (cli/serve.py), once
    mem.recall("warm up", k=1)
    mem.context("warm up", budget=200)
shutil.rmtree(scratch, ignore_errors=True)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the daemons that exit
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:  # a test's daemon
        code = 1
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.setsid()
            os.environ.clear()
            os.environ.update(req["env"])
            os.chdir(req["cwd"])
            null = os.open(os.devnull, os.O_RDWR)
            err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(null, 0), os.dup2(null, 1), os.dup2(err, 2)
            sys.stdin = open(os.devnull)
            code = app.main(["daemon", "run", "--detached"]) or 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os._exit(code)
    print(pid, flush=True)
'''


class Forked:
    """A forked daemon, with the bits of ``subprocess.Popen`` conftest uses."""

    def __init__(self, pid: int, stderr: Path) -> None:
        self.pid, self.stderr_path = pid, stderr

    def poll(self) -> int | None:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return 1
        with open(f"/proc/{self.pid}/stat") as fh:  # exited, not yet reaped
            return 1 if fh.read().rpartition(")")[2].split()[0] == "Z" else None

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def terminate(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"daemon {self.pid} still runs after {timeout} s")
            time.sleep(0.01)


_zygote: subprocess.Popen | None = None


def fork_daemon(stderr: Path) -> Forked:
    """A daemon for the store under the current BM_HOME, run like `bm daemon run --detached`.
    (The zygote exits when this process does: its stdin closes.)"""
    global _zygote
    if _zygote is None or _zygote.poll() is not None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BM_")}
        _zygote = subprocess.Popen([sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   env=env, text=True, start_new_session=True)
        assert _zygote.stdout.readline().strip() == "ready", "the daemon zygote did not start"
    _zygote.stdin.write(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "stderr": str(stderr)}) + "\n")
    _zygote.stdin.flush()
    return Forked(int(_zygote.stdout.readline()), stderr)

