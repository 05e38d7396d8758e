"""The sync daemon from outside (sync/daemon.py runs it): the one-daemon-per-store lock,
the state file ``bm daemon status`` reads (:func:`state`, :func:`summary`), and starting it
detached (:func:`start`) and stopping it (:func:`stop`).  Files: ``<data_dir>/daemon.lock``
(the lock, holding the pid), and in the state directory (``BM_HOME/state`` or
``$XDG_STATE_HOME/brandmind``) ``daemon.json``, ``daemon.log`` and ``daemon.stderr``.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from brandmind.errors import BMError

LOCK_NAME = "daemon.lock"      # in the store's data directory
STATE_NAME = "daemon.json"     # in the state directory
LOG_NAME = "daemon.log"
STDERR_NAME = "daemon.stderr"
STOP_GRACE = 20.0              # a step still running this long after SIGTERM is abandoned


class DaemonRunning(BMError):
    """Another daemon holds this store's lock."""


class DaemonError(BMError):
    """The daemon could not be started, stopped or installed."""


def iso_wall(wall: float | None) -> str | None:
    if wall is None:
        return None
    return datetime.fromtimestamp(wall, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def lock_path(paths: Any) -> Path:
    return Path(paths.data_dir) / LOCK_NAME


def state_path(paths: Any) -> Path:
    return Path(paths.state_dir) / STATE_NAME


def log_path(paths: Any) -> Path:
    return Path(paths.state_dir) / LOG_NAME


def stderr_path(paths: Any) -> Path:
    return Path(paths.state_dir) / STDERR_NAME


def paths_of(obj: Any) -> Any:
    """A ``Paths`` from a Memory, a Config or a Paths (None: the configured store)."""
    if obj is None:
        from brandmind.config import resolve_paths

        return resolve_paths()
    if hasattr(obj, "state_dir"):
        return obj
    if hasattr(obj, "paths"):
        return obj.paths
    if hasattr(obj, "config"):
        return obj.config.paths
    raise TypeError(f"not a store, config or paths: {obj!r}")


def write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class StoreLock:
    """The one-daemon-per-store lock: ``flock(LOCK_EX)`` on ``<data_dir>/daemon.lock``,
    which then holds the owner's pid.  Released when the process ends, however it ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, attempts: int = 8) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        for attempt in range(attempts):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                # a `bm daemon status` may be probing the lock for a moment: retry briefly
                time.sleep(0.05 * (attempt + 1))
        else:
            pid = read_pid(fd)
            os.close(fd)
            raise DaemonRunning(
                f"a bm daemon is already running for this store (pid {pid if pid else 'unknown'})",
                hint="`bm daemon status` shows it; `bm daemon stop` stops it")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            finally:
                os.close(self.fd)  # closing the last descriptor drops the flock
                self.fd = None


def read_pid(fd: int) -> int | None:
    for _ in range(20):  # the owner writes its pid right after taking the lock
        raw = os.pread(fd, 32, 0).strip()
        if raw.isdigit():
            return int(raw)
        time.sleep(0.025)
    return None


def running_pid(paths: Any = None) -> int | None:
    """The pid of the daemon holding this store's lock, or None when none runs.
    (-1 when the lock is held but the pid could not be read.)"""
    path = lock_path(paths_of(paths))
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            pid = read_pid(fd)
            return pid if pid else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def state(store: Any = None) -> dict:
    """What the daemon of this store is doing (for `bm daemon status` and `bm sync status`).

    ``store`` is a Memory, Config or Paths (default: the configured store).  Always has
    ``running`` (bool) and ``pid``; when a daemon ran here before, also ``status``,
    ``started_at``, ``uptime_s`` (running only), ``last_push``, ``last_pull``,
    ``last_success_at``, ``last_error``, ``next_push_at``, ``next_pull_at``,
    ``retry_at``, ``remotes`` (per remote) and ``log``.  Never raises for a missing or
    unreadable state file."""
    paths = paths_of(store)
    pid = running_pid(paths)
    data = read_json(state_path(paths)) or {}
    out: dict[str, Any] = {"running": pid is not None, "pid": pid}
    if data:
        out.update({k: v for k, v in data.items() if k not in ("running", "pid", "version")})
        if pid is None:
            if data.get("status") == "running":
                out["status"] = "dead"  # it did not get to say goodbye (kill -9, crash, reboot)
            out["last_pid"] = data.get("pid")
            for key in ("next_push_at", "next_pull_at", "retry_at", "next_tick_at"):
                out[key] = None
        elif pid != data.get("pid"):
            out["status"] = "starting"
        if pid is not None and data.get("started_wall"):
            out["uptime_s"] = round(max(0.0, time.time() - float(data["started_wall"])), 1)
    out.pop("started_wall", None)
    out["log"] = str(log_path(paths))
    return out


def summary(store: Any = None) -> dict:
    """The short form of :func:`state` for `bm sync status`: running, pid, uptime, last
    push / pull / error and the next ticks (None where unknown)."""
    st = state(store)
    keys = ("running", "pid", "status", "uptime_s", "last_push", "last_pull", "last_success_at", "last_error",
            "next_tick_at", "next_push_at", "next_pull_at", "retry_at")
    return {k: st.get(k) for k in keys}



def start(store: Any = None, *, timeout: float = 30.0, argv: list[str] | None = None) -> dict:
    """Start ``bm daemon run`` as a detached background process (new session, stdin from
    /dev/null, output to ``daemon.stderr``) and return once it runs: {"pid", "log"}.
    A daemon that fails to start raises its own error here."""
    import subprocess

    from brandmind.config import resolve_paths
    from brandmind.errors import StoreMissing

    paths = paths_of(store) if store is not None else resolve_paths()
    if not (paths.lmdb_dir / "data.mdb").exists():
        raise StoreMissing(f"no bm store at {paths.data_dir}",
                           hint="run `bm init` first (or point BM_HOME at an existing store)")
    pid = running_pid(paths)
    if pid is not None:
        raise DaemonRunning(f"a bm daemon is already running for this store (pid {pid})",
                            hint="`bm daemon status` shows it; `bm daemon stop` stops it")
    Path(paths.state_dir).mkdir(parents=True, exist_ok=True)
    err_file = stderr_path(paths)
    env = dict(os.environ)
    if env.get("BM_HOME"):
        env["BM_HOME"] = str(Path(env["BM_HOME"]).expanduser().resolve())
    cmd = argv or [sys.executable, "-m", "brandmind.cli.app", "daemon", "run", "--detached"]
    with open(err_file, "wb") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env,
                                start_new_session=True, close_fds=True, cwd="/")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise child_error(err_file, code)
        data = read_json(state_path(paths)) or {}
        if data.get("pid") == proc.pid and data.get("status") == "running":
            proc.returncode = 0  # detached on purpose: no "still running" warning on exit
            return {"pid": proc.pid, "log": str(log_path(paths)), "started": True}
        time.sleep(0.05)
    raise DaemonError(f"the daemon (pid {proc.pid}) did not report running within {timeout:g} s",
                      hint=f"see {err_file} and {log_path(paths)}; `bm daemon stop` stops it")


def child_error(err_file: Path, code: int) -> BMError:
    try:
        lines = [line for line in err_file.read_text(encoding="utf-8", errors="replace").splitlines()
                 if line.strip()]
    except OSError:
        lines = []
    for line in reversed(lines):
        if line.startswith("Error: "):
            text = line[len("Error: "):]
            message, sep, hint = text.partition(" (hint: ")
            if message.startswith("a bm daemon is already running"):
                return DaemonRunning(message, hint.rstrip(")") if sep else None)
            return DaemonError(message, hint.rstrip(")") if sep else f"see {err_file}")
    tail = lines[-1] if lines else "no output"
    return DaemonError(f"the daemon exited with code {code} while starting: {tail}",
                       hint=f"see {err_file}")


def stop(store: Any = None, *, timeout: float = STOP_GRACE + 10) -> dict:
    """SIGTERM the store's daemon and wait until it has let go of the lock.
    {"stopped": bool, "pid": pid or None}; not running is not an error."""
    paths = paths_of(store)
    pid = running_pid(paths)
    if pid is None:
        return {"stopped": False, "pid": None, "running": False}
    if pid < 0:
        raise DaemonError("the daemon's lock is held but its pid is unreadable",
                          hint=f"find it with `fuser {lock_path(paths)}` and stop it with kill")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running_pid(paths) != pid:
            return {"stopped": True, "pid": pid, "running": False}
        time.sleep(0.05)
    raise DaemonError(f"the daemon (pid {pid}) did not stop within {timeout:g} s",
                      hint=f"`kill -9 {pid}` is safe: the op log keeps every op it had not pushed")

