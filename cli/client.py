"""The thin client: hand a `bm` command (or an MCP tool call) to the store's resident daemon.

Only the standard library is imported here, so that a `bm recall` that the daemon answers
costs one interpreter start and one round trip (the daemon has the model, the vectors and
the remotes' clients loaded).  When no daemon serves the store, :func:`forward` returns
None and the command runs in this process as it always did.

The wire protocol (``cli/serve.py`` is the other side) is a stream of frames on a Unix
socket: one type byte, a 4-byte big-endian length, the payload.

client -> daemon  ``C`` a command (:func:`pack_command`), ``R`` a tool or status request (JSON),
                  ``I`` a chunk of stdin (empty: end of stdin)
(over loopback TCP the first frame is ``H``, the token from ``<state>/bm.port``)
daemon -> client  ``A`` accepted (the command started), ``O`` stdout bytes, ``E`` stderr
                  bytes, ``N`` the command reads stdin, ``X`` done (the exit code in ASCII digits,
                  or ``fallback:WHY``: run it locally), ``T`` a tool's result (JSON)

A command needs no JSON (importing ``json`` and the ``re`` it pulls in costs a cold client
~10 ms): its fields are NUL-separated.  A tool request is ``{"v": 1, "kind": "tool", "name",
"args", "env"}``.  ``env`` carries the ``BM_*`` variables: a daemon started with other ones
answers ``fallback`` (their config would differ).
"""
from __future__ import annotations

import os
import sys

try:  # the C module itself: `socket` adds ~8 ms of enum set-up to every cold `bm` call
    import _socket as socket
except ImportError:  # pragma: no cover - another Python
    import socket  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

HEADER_SIZE = 5  # the type byte, then the length as 4 bytes big-endian (no `struct`: ~2 ms a call)
MAX_FRAME = 64 << 20
SOCKET_NAME = "bm.sock"
PORT_FILE = "bm.port"  # {"port", "token", "pid"}, mode 0600: the loopback TCP alternative
# commands that always run in the calling process: the daemon's own controls, servers with
# their own lifetime, an editor on this terminal, and everything about the shell itself
LOCAL = {"daemon", "mcp"}
LOCAL |= {"publish", "worker"}  # a broker's publisher and a worker over many stores (cli/worker.py): no one store
LOCAL_PAIRS = {("block", "edit"), ("hooks", "install"), ("hooks", "uninstall")}
LOCAL_FLAGS = {"-h", "--help", "-V", "--version", "--install-completion", "--show-completion"}
# the environment variables a request carries (config overrides; paths are the socket's)
PASS_ENV = ("TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "EDITOR", "VISUAL")
NOT_CONFIG = {"BM_HOME", "BM_NO_DAEMON", "BM_WAIT", "BM_SOCKET"}


class NoDaemon(Exception):
    """No daemon serves this store (or it cannot answer this request): do it locally."""


# -- where the socket is ------------------------------------------------------------------------
def state_dir(home: str | None = None, env: Any = None) -> str:
    """The store's state directory, as ``brandmind.config.resolve_paths`` finds it (os.path,
    not pathlib: importing pathlib alone costs a cold client ~10 ms)."""
    env = os.environ if env is None else env
    home = home if home is not None else env.get("BM_HOME")
    if home:
        return os.path.join(os.path.realpath(os.path.expanduser(home)), "state")
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "brandmind")


def socket_path(state: Any) -> str:
    """``<state>/bm.sock``; where that path is too long for a Unix socket (about 104 bytes),
    a short one in a private per-user directory under the temp dir, named by the state dir."""
    path = os.path.join(str(state), SOCKET_NAME)
    if len(os.fsencode(path)) < 100:
        return path
    import hashlib

    digest = hashlib.sha256(os.fsencode(os.path.realpath(str(state)))).hexdigest()[:20]
    base = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, f"bm-{os.getuid()}", f"{digest}.sock")


def home_in(argv: list[str]) -> tuple[str | None, list[str]]:
    """``--home DIR`` given before the command (the app's root option), and argv without it."""
    out, home, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            out.extend(argv[i:])
            break
        if arg == "--home" and i + 1 < len(argv):
            home, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--home="):
            home, i = arg.split("=", 1)[1], i + 1
            continue
        out.append(arg)
        i += 1
    return home, out


# commands that embed (the query, or what they store): the local model's session and tokenizer
# are made in threads while the rest of the command starts (brandmind/embed/preload.py; a cold
# `bm recall` ~50 ms shorter, `bm ingest` of one turn ~40 ms, `bm remember` ~30 ms)
MODEL_COMMANDS = ("recall", "context", "ingest", "remember")


def _preload(argv: list[str]) -> None:
    """Start making the local model's session when ``argv`` is a command that embeds, run here."""
    home, rest = home_in(argv)
    words = [a for a in rest if not a.startswith("-")]
    if not words or words[0] not in MODEL_COMMANDS or "-h" in rest or "--help" in rest:
        return
    # a Ctrl-C waits for the imports below (~0.2 s): inside a C extension's import (onnxruntime's
    # numpy import_array) it would turn into an ImportError, lost or taken for a missing package
    import signal

    pressed: list[bool] = []
    previous = signal.signal(signal.SIGINT, lambda *_: pressed.append(True))
    try:
        from brandmind.config import Config
        from brandmind.embed import preload_local

        preload_local(Config.load(home))
    except Exception:  # noqa: BLE001 - only a head start: the command itself reports a bad config
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt


def settle_model_threads() -> None:
    """Wait for the model threads :func:`_preload` started, before the interpreter ends: their
    onnxruntime code must not outlive it (a Ctrl-C that ended bm while a session was being made
    aborted the process: "terminate called without an active exception").  A second Ctrl-C
    while waiting ends the process at once, without the interpreter's teardown."""
    preload = sys.modules.get("brandmind.embed.preload")
    if preload is None:
        return
    try:
        preload.settle()
    except KeyboardInterrupt:
        sys.stderr.flush()
        os._exit(130)


def runs_locally(argv: list[str]) -> bool:
    words = [a for a in argv if not a.startswith("-")]
    if not words or any(a in LOCAL_FLAGS for a in argv) or os.environ.get("BM_NO_DAEMON"):
        return True
    return words[0] in LOCAL or tuple(words[:2]) in LOCAL_PAIRS


def request_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith("BM_")}
    env.update({k: os.environ[k] for k in PASS_ENV if k in os.environ})
    return env


# -- frames -----------------------------------------------------------------------------------
def send(sock: Any, kind: bytes, payload: bytes = b"") -> None:
    sock.sendall(kind + len(payload).to_bytes(4, "big") + payload)


def recv_exact(sock: Any, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv(sock: Any) -> tuple[bytes, bytes]:
    header = recv_exact(sock, HEADER_SIZE)
    kind, size = header[:1], int.from_bytes(header[1:], "big")
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    return kind, recv_exact(sock, size) if size else b""


def connect(home: str | None = None) -> Any:
    """A connection to the daemon of the store (``home`` or BM_HOME); NoDaemon if none.
    Its Unix socket, else (where a daemon had none: ``BM_SOCKET=tcp``, or no AF_UNIX) the
    loopback port in ``<state>/bm.port``, whose token the first frame (``H``) proves."""
    state = state_dir(home)
    if hasattr(socket, "AF_UNIX"):
        path = socket_path(state)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except OSError:
            sock.close()
    try:
        import json

        with open(os.path.join(state, PORT_FILE), "rb") as fh:
            where = json.loads(fh.read())
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, ValueError):
        raise NoDaemon(state) from None
    try:
        sock.connect(("127.0.0.1", int(where["port"])))
        send(sock, b"H", str(where["token"]).encode())
    except (OSError, KeyError, TypeError, ValueError):
        sock.close()
        raise NoDaemon(state) from None
    return sock


# -- a CLI command ----------------------------------------------------------------------------
def forward(argv: list[str]) -> int | None:
    """Run ``bm argv`` in the daemon; the exit code, or None: run it in this process."""
    if runs_locally(argv):
        return None
    home, _ = home_in(argv)
    try:
        sock = connect(home)
    except NoDaemon:
        return None
    try:
        tty = {name: _isatty(stream) for name, stream in
               (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))}
        try:
            send(sock, b"C", pack_command(argv, os.getcwd(), request_env(), tty, _columns()))
            return _converse(sock)
        except (EOFError, ConnectionError, ValueError) as exc:
            if isinstance(exc, _Started):
                raise
            return None  # the daemon went away before it started the command: run it here
    finally:
        sock.close()


class _Started(EOFError):
    """The daemon went away after it had started the command."""


def _converse(sock: Any) -> int | None:
    started = False
    out, err = sys.stdout.buffer, sys.stderr.buffer
    try:
        while True:
            kind, data = recv(sock)
            if kind == b"A":
                started = True
            elif kind == b"O":
                out.write(data)
                out.flush()
            elif kind == b"E":
                err.write(data)
                err.flush()
            elif kind == b"N":
                import threading

                threading.Thread(target=_pump_stdin, args=(sock,), daemon=True).start()
            elif kind == b"X":
                return None if data.startswith(b"fallback:") else int(data)
    except (EOFError, ConnectionError) as exc:
        if not started:
            raise
        raise _Started(str(exc)) from None


def _pump_stdin(sock: Any) -> None:
    try:
        fd = sys.stdin.fileno()
        read = lambda: os.read(fd, 1 << 16)  # noqa: E731 - whatever is there (a line on a terminal)
    except (OSError, ValueError, AttributeError):  # stdin without a descriptor (tests, embedders)
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        read = lambda: stream.read(1 << 16)  # noqa: E731
    try:
        while True:
            chunk = read()
            if isinstance(chunk, str):
                chunk = chunk.encode("utf-8")
            send(sock, b"I", chunk or b"")
            if not chunk:
                return
    except OSError:
        return


def pack_command(argv: list[str], cwd: str, env: dict[str, str], tty: dict[str, bool],
                 columns: int | None) -> bytes:
    """A ``C`` frame's payload: version, cwd, columns, the tty flags of stdin/stdout/stderr,
    the number of arguments, the arguments, then ``KEY=VALUE`` of the environment; NUL
    separated (no argument, path or variable can hold a NUL)."""
    flags = "".join("1" if tty.get(name) else "0" for name in ("stdin", "stdout", "stderr"))
    fields = ["1", cwd, str(columns or ""), flags, str(len(argv)), *argv, *(f"{k}={v}" for k, v in env.items())]
    return "\0".join(fields).encode("utf-8", "surrogateescape")


def unpack_command(data: bytes) -> dict:
    """The request :func:`pack_command` made (ValueError if it is not one)."""
    fields = data.decode("utf-8", "surrogateescape").split("\0")
    if len(fields) < 5 or fields[0] != "1" or len(fields[3]) != 3:
        raise ValueError("not a version-1 command")
    n = int(fields[4])
    argv, rest = fields[5:5 + n], fields[5 + n:]
    if len(argv) != n or any("=" not in item for item in rest):
        raise ValueError("a malformed command")
    return {"v": 1, "kind": "cli", "argv": argv, "cwd": fields[1],
            "columns": int(fields[2]) if fields[2] else None,
            "tty": dict(zip(("stdin", "stdout", "stderr"), (c == "1" for c in fields[3]))),
            "env": dict(item.split("=", 1) for item in rest)}


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _columns() -> int | None:
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return None


# -- a tool call (MCP) ------------------------------------------------------------------------
def call_tool(name: str, args: dict, *, home: str | None = None) -> Any:
    """Run the tool ``name`` in the daemon (``brandmind.cli.tools.call``); its JSON result.
    NoDaemon: none serves the store (or it would read it with another config); a BMError
    raised by the tool is raised here again."""
    import json

    sock = connect(home)
    try:
        try:
            send(sock, b"R", json.dumps({"v": 1, "kind": "tool", "name": name, "args": args,
                                         "env": request_env()}).encode())
            while True:
                kind, data = recv(sock)
                if kind == b"T":
                    reply = json.loads(data)
                    break
                if kind == b"X":
                    raise NoDaemon(data.decode("utf-8", "replace").removeprefix("fallback:"))
        except (EOFError, ConnectionError, ValueError) as exc:
            raise NoDaemon(f"the daemon went away: {exc}") from None
    finally:
        sock.close()
    if "error" in reply:
        from brandmind.errors import BMError

        err = reply["error"]
        exc = BMError(err.get("message", "the tool failed"), hint=err.get("hint"))
        exc.exit_code = int(err.get("exit_code", 1))
        raise exc
    return reply.get("result")


def daemon_status(home: str | None = None) -> dict:
    """What the daemon's server says about itself (socket, requests served, the worker);
    NoDaemon when none answers."""
    import json

    sock = connect(home)
    try:
        send(sock, b"R", json.dumps({"v": 1, "kind": "status"}).encode())
        kind, data = recv(sock)
    except (EOFError, ConnectionError, ValueError) as exc:
        raise NoDaemon(f"the daemon went away: {exc}") from None
    finally:
        sock.close()
    return json.loads(data).get("result") or {}


def main() -> None:
    """The `bm` / `brandmind` entry point: the daemon when it runs, else this process."""
    argv = sys.argv[1:]
    try:
        code = forward(argv)
        if code is None:  # run here: start on the model, load the command line (Ctrl-C: below)
            _preload(argv)
            from . import quick
            from .boundary import exit_now

            parsed = quick.parse(argv)  # `bm recall` / `bm context` as scripts write them: no typer
            if parsed is None:
                from .app import main as run_here
    except _Started as exc:
        sys.stderr.write(f"Error: the bm daemon stopped while running this command ({exc}) "
                         "(hint: check `bm daemon status` and its log; the store is intact, "
                         "re-run the command)\n")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.stderr.write("\nInterrupted.\n")
        settle_model_threads()
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    if code is None:
        if parsed is not None:
            exit_now(quick.run(parsed))
        run_here()
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover - `python -m brandmind.cli.client` is `bm`
    main()
