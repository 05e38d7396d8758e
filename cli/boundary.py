"""The command line's single error boundary, and how a `bm` process ends.

Exit codes: 0 ok, 1 error (``Error: …`` and a hint on stderr, no traceback), 2 usage, 130 on
Ctrl-C.  Commands raise; only :func:`run` catches.  Typer-free: the typer app (cli/app.py)
and the commands parsed without it (cli/quick.py) both run through here; the app turns
click's own parse errors into :class:`brandmind.errors.UsageError` first.
"""
from __future__ import annotations

import os
import sys
from typing import Callable


def run(command: Callable[[], int]) -> int:
    """``command()``'s exit code; what it raised, as one line on stderr and its exit code."""
    from brandmind.errors import BMError

    try:
        code = command()
    except BMError as exc:
        error_line(exc.message, exc.hint)
        code = exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("\nInterrupted.\n")
        code = 130
    except ImportError as exc:  # a package bm or one of its optional backends needs is missing
        error_line(*missing_package(exc))
        code = 1
    except BrokenPipeError:
        # the reader went away (e.g. `bm recall ... | head -1`): not an error
        _silence_stdout()
        code = 0
    except OSError as exc:  # the system refused (no space, no permission, a bad path): one line
        where = f": {exc.filename}" if exc.filename and len(str(exc.filename)) <= 200 else ""
        error_line(f"{exc.strerror or exc}{where}", "check the path, its permissions and the free disk space")
        code = 1
    return finish(code)


def finish(code: int) -> int:
    """After a command: no model thread outlives it, stdout is flushed (its reader may be gone)."""
    from .client import settle_model_threads

    settle_model_threads()  # the model's session or tokenizer still being made: no thread outlives bm
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    return code


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown: freeing the model session, numpy and
    every module's objects one by one takes ~0.1 s, a sixth of a cold `bm recall`.  Nothing
    is lost by skipping it: the command has returned, so its store is closed (every command
    opens it with ``with``), its writes are committed (SQLite and LMDB commit at the end of
    each transaction, and an uncommitted one is discarded, as after a kill: tests/test_faults.py),
    bm starts no thread that outlives a command, and the two streams and logging's handlers are
    flushed here.  The exit code is the command's.  Under a tracer or a profiler (coverage,
    cProfile), which write their reports at exit, the interpreter ends as usual."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        sys.exit(code)
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or vanished reader: nothing left to say
            pass
    os._exit(code)


def _silence_stdout() -> None:
    """Point stdout at /dev/null (its reader is gone), where it has a file descriptor."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # a daemon request's stream (cli/serve.py)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)


# packages (and bm's own modules, by file name) whose failing import means this extra is incomplete
_EXTRAS = {"graphiti_core": "graphiti", "falkordb": "graphiti", "graphiti": "graphiti",
           "zep_cloud": "zep", "zep": "zep", "ollama": "ollama",
           "mcp": "mcp", "mcp_types": "mcp", "mcpserver": "mcp"}
_EXTRAS.update({"redis": "redis", "broker_redis": "redis"})  # bm publish / bm worker with redis://


def missing_package(exc: ImportError) -> tuple[str, str]:
    """The message and hint for an ImportError: which package is missing, and the install
    command of the extra whose code needed it (found from where the import failed)."""
    import traceback

    name = exc.name or ""
    extra = _EXTRAS.get(name.partition(".")[0])
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if extra:
            break
        parts = frame.filename.replace("\\", "/").removesuffix(".py").split("/")
        extra = next((_EXTRAS[p] for p in reversed(parts) if p in _EXTRAS), None)
    missing = f"a Python package is missing: {name}" if name else f"an import failed: {exc}"
    if extra:
        return missing, f"pip install 'brandmind[{extra}]'"
    return missing, "reinstall bm with its dependencies (pip install brandmind, or pip install -e . in a checkout)"


def error_line(message: str, hint: str | None) -> None:
    line = f"Error: {message}"
    if hint:
        line += f" (hint: {hint})"
    sys.stderr.write(line + "\n")
