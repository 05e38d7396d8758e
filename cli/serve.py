"""The daemon's socket server: `bm` commands and MCP tool calls against the resident store.

``bm daemon run`` listens on ``<state_dir>/bm.sock`` (``cli/client.py`` has the path rule and
the wire protocol).  Each connection is served by its own thread; the command itself runs
under the store lock that the sync loop and the background worker also take, so one
command at a time touches the store (and the process-wide things a command uses: the
working directory, ``sys.stdout``).  A command runs exactly as in its own process: the
same typer app and error boundary (``cli.app.main``), its stdout and stderr streamed back
as it writes them, stdin read from the client only if the command reads it, so output,
errors and exit codes are the same.  What differs: ``open_store()`` and
``store_for_writing()`` return the resident store (``cli.common.resident``), and writes
only append to the op log and the keyword index; the worker makes their vectors (unless the
client asked ``--wait`` / ``BM_WAIT=1``).

Safety: the socket file is mode 0600 in a private directory; on Linux the peer's uid is
checked (``SO_PEERCRED``) and another user's connection is closed unanswered.  A client
that sends garbage gets its connection closed; one that goes away mid-command makes the
command's next write fail (a broken pipe, as in a shell) and nothing else.
"""
from __future__ import annotations

import io
import json
import logging
import os
import socket
import struct
import sys
import threading
from pathlib import Path
from typing import Any

from . import client
from .client import recv, send

log = logging.getLogger("brandmind.daemon.serve")

MAX_REQUEST = 16 << 20


# -- per-thread standard streams ---------------------------------------------------------------
class _Slots(threading.local):
    stdout: Any = None
    stderr: Any = None
    stdin: Any = None


_slots = _Slots()


class Router:
    """Stands in for ``sys.stdout`` (and stderr, stdin) in the daemon: the current request's
    stream in a thread serving one, the real stream everywhere else (the sync loop, logging)."""

    def __init__(self, name: str, original: Any) -> None:
        self._name = name
        self._original = original

    def _target(self) -> Any:
        own = getattr(_slots, self._name)
        return own if own is not None else self._original

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._target(), attr)

    def __iter__(self) -> Any:
        return iter(self._target())


def install_routers() -> None:
    for name in ("stdout", "stderr", "stdin"):
        current = getattr(sys, name)
        if not isinstance(current, Router):
            setattr(sys, name, Router(name, current))


class _Out:
    """A request's stdout or stderr: text and bytes, sent to the client in frames."""

    encoding = "utf-8"
    errors = "strict"
    closed = False

    def __init__(self, conn: socket.socket, kind: bytes, tty: bool) -> None:
        self.conn, self.kind, self.tty = conn, kind, tty
        self.pending = bytearray()
        self.sent = False
        self.buffer = _OutBytes(self)

    def write(self, text: str) -> int:
        self.pending += text.encode("utf-8", "surrogateescape")
        if len(self.pending) >= 1 << 16:
            self.flush()
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.pending:
            data, self.pending = bytes(self.pending), bytearray()
            self.sent = True
            send(self.conn, self.kind, data)

    def isatty(self) -> bool:
        return self.tty

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a daemon request's stream has no file descriptor")

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False


class _OutBytes:
    def __init__(self, out: _Out) -> None:
        self.out = out

    def write(self, data: bytes) -> int:
        self.out.pending += data
        if len(self.out.pending) >= 1 << 16:
            self.out.flush()
        return len(data)

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return self.out.tty

    def fileno(self) -> int:
        return self.out.fileno()


class _InRaw(io.RawIOBase):
    """A request's stdin: asks the client for it on the first read, then reads its chunks."""

    def __init__(self, conn: socket.socket, tty: bool) -> None:
        super().__init__()
        self.conn, self.tty = conn, tty
        self.asked = self.eof = False
        self.pending = b""

    def readable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.tty

    def readinto(self, buf: Any) -> int:
        while not self.pending and not self.eof:
            if not self.asked:
                send(self.conn, b"N")
                self.asked = True
            kind, data = recv(self.conn)
            if kind != b"I":
                raise BrokenPipeError("the client sent something other than stdin")
            self.eof = not data
            self.pending = data
        n = min(len(buf), len(self.pending))
        buf[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def _stdin(conn: socket.socket, tty: bool) -> Any:
    return io.TextIOWrapper(io.BufferedReader(_InRaw(conn, tty)), encoding="utf-8")


# -- the server -------------------------------------------------------------------------------
class Server:
    """Listens on the store's socket; ``resident`` has ``lock``, ``memory()``, ``refresh()``
    (reopen the store when `bm rebuild` or `bm config set` changed it) and ``wrote()``
    (called after each request: wakes the worker)."""

    def __init__(self, resident: Any, state_dir: Path) -> None:
        self.resident = resident
        self.state_dir = Path(state_dir)
        self.path = Path(client.socket_path(state_dir))
        self.token: str | None = None  # set when serving loopback TCP
        self.env = config_env(os.environ)
        self.sock: socket.socket | None = None
        self.stopping = False
        self.served = 0
        self.declined = 0

    def start(self) -> "Server":
        install_routers()
        if hasattr(socket, "AF_UNIX") and os.environ.get("BM_SOCKET", "unix") != "tcp":
            self.sock = bind(self.path)
        else:  # no Unix sockets here (or asked for TCP): loopback, a token in a 0600 file
            self.sock, self.token = bind_tcp(self.state_dir)
            self.path = self.state_dir / client.PORT_FILE
        threading.Thread(target=self._accept, name="bm-serve", daemon=True).start()
        threading.Thread(target=self._warm_up, name="bm-warm-up", daemon=True).start()
        log.info("serving bm commands and MCP tool calls on %s", self.path)
        return self

    def _warm_up(self) -> None:
        """Load what the first command would otherwise wait for: the command tree, the
        recall modules, the model and the recall index (one recall of the default user; a
        store without an index file has it built here)."""
        try:
            from . import app

            app.build_command()
            with self.resident.lock:
                mem = self.resident.memory()
                mem.recall("warm up", k=1)
                mem.context("warm up", budget=200)
        except Exception as exc:  # a cold first command is all it costs
            log.warning("warm-up failed: %s", exc)
        try:  # the graph remotes `bm recall --remote` asks: imported and connected once
            from brandmind.sync.assist import assist_remotes

            with self.resident.lock:
                store = self.resident.store
            assist_remotes(store, forced=False)
            assist_remotes(store, forced=True)
        except Exception as exc:  # e.g. no graph remote configured (NotFound), or it is down
            log.debug("no graph remote warmed up: %s", exc)

    def stop(self) -> None:
        log.info("served %d requests (%d handed back to the client)", self.served, self.declined)
        self.stopping = True
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass

    def _accept(self) -> None:
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                if self.stopping:
                    return
                continue
            threading.Thread(target=self._serve, args=(conn,), name="bm-request", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                if not self._allowed(conn):
                    return
                kind, data = recv(conn)
                if kind not in (b"R", b"C") or len(data) > MAX_REQUEST:
                    raise ValueError("not a request frame")
                request = client.unpack_command(data) if kind == b"C" else json.loads(data)
                if not isinstance(request, dict) or request.get("v") != 1:
                    raise ValueError("not a version-1 request")
                if request.get("kind") == "status":
                    send(conn, b"T", json.dumps({"result": self.status()}, default=str).encode())
                    return
                self.served += 1
                if request.get("kind") == "tool":
                    self._tool(conn, request)
                elif request.get("kind") == "cli":
                    self._cli(conn, request)
                else:
                    raise ValueError("unknown request kind")
            except (EOFError, ConnectionError, BrokenPipeError):
                return  # the client went away
            except (ValueError, TypeError, KeyError, struct.error) as exc:
                log.warning("closed a connection that sent a bad request: %s", exc)
            except Exception:  # a bug: log it, keep serving the others
                log.exception("unexpected error serving a request")

    def _allowed(self, conn: socket.socket) -> bool:
        """The peer is this user (Unix socket), or knows the token (loopback TCP)."""
        if self.token is None:
            if same_user(conn):
                return True
            log.warning("refused a connection from another user")
            return False
        import hmac

        kind, data = recv(conn)
        if kind == b"H" and hmac.compare_digest(data, self.token.encode()):
            return True
        log.warning("refused a loopback connection without the token")
        return False

    def status(self) -> dict:
        """For `bm daemon status`: the socket, requests served and handed back, the worker."""
        return {"socket": str(self.path), "served": self.served, "ran_in_client": self.declined,
                "worker": self.resident.status()}

    def _declined(self, request: dict) -> str | None:
        theirs = config_env(request.get("env") or {})
        if theirs != self.env:
            diff = sorted(set(theirs.items()) ^ set(self.env.items()))
            return "the daemon runs with other BM_ settings: " + ", ".join(sorted({k for k, _ in diff}))
        return None

    def _ready(self) -> None:
        """Call holding the lock: the resident store, current and sound; RunLocally if not."""
        from .common import RunLocally

        if self.stopping:
            raise RunLocally("the daemon is stopping")
        self.resident.refresh()

    def _fallback(self, conn: socket.socket, why: str) -> None:
        """Tell the client to run it itself (counted: `bm daemon status` shows how often)."""
        self.declined += 1
        log.debug("handed back to the client: %s", why)
        send(conn, b"X", b"fallback:" + why.encode("utf-8", "replace"))

    # -- a tool call ----------------------------------------------------------------------
    def _tool(self, conn: socket.socket, request: dict) -> None:
        why = self._declined(request)
        if why:
            self._fallback(conn, why)
            return
        from brandmind.errors import BMError

        from . import common, tools

        name, args = request.get("name"), request.get("args")
        with self.resident.lock:
            try:
                self._ready()
            except common.RunLocally as exc:
                self._fallback(conn, str(exc))
                return
            try:  # a tool's write embeds now (an agent's next call may well recall it)
                reply: dict = {"result": tools.call(self.resident.memory(), name, args or {})}
            except BMError as exc:
                reply = {"error": {"message": exc.message, "hint": exc.hint, "exit_code": exc.exit_code}}
            self.resident.wrote()
        send(conn, b"T", json.dumps(reply, default=str).encode())

    # -- a CLI command --------------------------------------------------------------------
    def _cli(self, conn: socket.socket, request: dict) -> None:
        argv = request.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise ValueError("argv is not a list of strings")
        why = self._declined(request) or ("runs in the calling process" if client.runs_locally(argv) else None)
        if why:
            self._fallback(conn, why)
            return
        _, argv = client.home_in(argv)  # the socket already chose this store
        wait_env = str((request.get("env") or {}).get("BM_WAIT", "")).strip().lower()
        wait = "--wait" in argv[:_command_at(argv)] or wait_env not in ("", "0", "false", "no", "off")
        tty = request.get("tty") or {}
        with self.resident.lock:
            code = self._run(conn, request, argv, tty, wait)
            self.resident.wrote()
        if code is not None:
            send(conn, b"X", str(code).encode())

    def _run(self, conn: socket.socket, request: dict, argv: list[str], tty: dict, wait: bool) -> int | None:
        from . import common, output
        from .app import main

        out, err = _Out(conn, b"O", bool(tty.get("stdout"))), _Out(conn, b"E", bool(tty.get("stderr")))
        here = os.getcwd()
        _slots.stdout, _slots.stderr, _slots.stdin = out, err, _stdin(conn, bool(tty.get("stdin")))
        output.terminal.set(request.get("env") or {}, request.get("columns"))
        try:
            os.chdir(request.get("cwd") or "/")
            self._ready()
            common.resident.mem = self.resident.memory()
            send(conn, b"A")
            with self.resident.deferring(not wait):
                code = main(argv)
            out.flush()
            err.flush()
            return code
        except common.RunLocally as exc:
            self._fallback(conn, str(exc))
            return None
        except (BrokenPipeError, ConnectionError, EOFError):
            return None
        except Exception as exc:
            if not out.sent and type(exc).__module__.partition(".")[0] in ("apsw", "lmdb"):
                # the store's files failed under the open store (e.g. a damaged index): the
                # client runs the command itself, which opens them afresh and says what to do
                log.warning("bm %s: %s: the client runs it itself", argv[:1], exc)
                self._fallback(conn, f"{type(exc).__name__}: {exc}")
                return None
            # a bug in a command: the client gets one line, the log the rest
            log.exception("unexpected error running bm %s", " ".join(argv)[:200])
            err.pending.clear()
            err.write(f"Error: internal error in the bm daemon: {type(exc).__name__}: {exc} "
                      "(hint: see the daemon's log, `bm daemon status`)\n")
            err.flush()
            return 1
        finally:
            common.resident.mem = None
            output.terminal.clear()
            _slots.stdout = _slots.stderr = _slots.stdin = None
            try:
                os.chdir(here)
            except OSError:
                os.chdir("/")


def _command_at(argv: list[str]) -> int:
    """Index of the first word that is not a root option (the command)."""
    for i, arg in enumerate(argv):
        if not arg.startswith("-"):
            return i
    return len(argv)


def config_env(env: Any) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("BM_") and k not in client.NOT_CONFIG}


# -- the socket -------------------------------------------------------------------------------
def bind(path: Path) -> socket.socket:
    """Listen on ``path`` (mode 0600, its directory 0700 when bm made it).  A socket file left
    by a daemon that died is replaced; the store lock already proved none is running."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.parent.name.startswith("bm-"):  # the short per-user directory under the temp dir
        st = path.parent.stat()
        if st.st_uid != os.getuid():
            from brandmind.errors import BMError

            raise BMError(f"{path.parent} belongs to another user",
                          hint="set TMPDIR to a directory of your own, or use a shorter BM_HOME")
        os.chmod(path.parent, 0o700)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(64)
    return sock


def bind_tcp(state_dir: Path) -> tuple[socket.socket, str]:
    """Listen on a random loopback port; its number and a fresh token go to
    ``<state>/bm.port`` (mode 0600, written whole): only this user can read them."""
    import secrets

    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    token = secrets.token_hex(32)
    path = state_dir / client.PORT_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"port": sock.getsockname()[1], "token": token, "pid": os.getpid()}, fh)
    os.replace(tmp, path)
    return sock, token


def same_user(conn: socket.socket) -> bool:
    """The peer runs as this user (SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS/BSD); where
    the OS tells neither, the socket's file mode is the guard."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        return uid == os.getuid()
    peercred = getattr(socket, "LOCAL_PEERCRED", None)
    if peercred is not None:  # struct xucred { u_int cr_version; uid_t cr_uid; ... }
        raw = conn.getsockopt(0, peercred, 76)
        return struct.unpack_from("=II", raw)[1] == os.getuid()
    return True


