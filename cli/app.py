"""The `bm` app and its single error boundary.

Exit codes: 0 ok, 1 error (``Error: …`` and a hint on stderr, no traceback),
2 usage, 130 on Ctrl-C.  Commands raise; only :func:`main` catches.
"""
from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from . import admin, beads, facts, graph, memories
from . import blocks as blocks_cmd
from . import context as context_cmd
from . import fs as fs_cmd
from . import importing as importing_cmd
from . import personas as personas_cmd
from . import skills as skills_cmd
from . import sync as sync_cmd
from .client import settle_model_threads

HELP = """bm: local-first memory for AI agents. Beads, memories, a knowledge graph; JSON in and
out of pipes (a table on a terminal, JSON when piped or with --json).  The first write
creates the store; errors exit 1, usage errors 2.

\b
Examples:
  bm remember "Ann moved to Lisbon in May 2024" -u ann
  echo '{"role": "user", "content": "I love jazz"}' | bm ingest - -u ann
  bm recall "where does Ann live?" -u ann -k 3 | jq -r '.[0].text'
  bm context "plan dinner with Ann" --budget 800 -u ann > prompt-memory.txt

\b
Shell completion: bm --install-completion (bash, zsh, fish, PowerShell).
"""

app = typer.Typer(
    name="bm",
    help=HELP,
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion
    # plain click help: option help is printed as written ("[default: 10]" would be eaten as
    # rich markup), and `bm --help` does not import rich (~0.15 s)
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from brandmind import __version__

        print(f"bm {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    home: Annotated[Optional[str], typer.Option("--home", help="Store directory (same as BM_HOME).", envvar=None)] = None,
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="With a daemon running: return only once this write's "
                                        "vectors exist (BM_WAIT=1 for every command); without one, writes always do.")] = False,
) -> None:
    if home:
        os.environ["BM_HOME"] = home


app.command()(admin.init)
app.command()(memories.remember)
app.command()(memories.recall)
app.command()(memories.forget)
app.command()(memories.pin)  # forgetting on a schedule (brandmind/expiry.py)
app.command()(memories.unpin)
app.command()(beads.ingest)
app.command()(context_cmd.context)
app.command()(context_cmd.consolidate)
app.add_typer(beads.beads_app, name="beads")
app.add_typer(memories.memories_app, name="memories")
app.add_typer(graph.kg_app, name="kg")
app.add_typer(facts.facts_app, name="facts")
app.add_typer(blocks_cmd.block_app, name="block")
app.add_typer(skills_cmd.skill_app, name="skill")
app.add_typer(fs_cmd.fs_app, name="fs")
app.add_typer(personas_cmd.persona_app, name="persona")
app.command()(admin.export)
app.command("import")(importing_cmd.import_)  # a `bm export` file, or --from another tool's export
app.command()(admin.rebuild)
app.command()(admin.reindex)
app.command()(admin.stats)
app.command()(admin.doctor)
app.add_typer(admin.config_app, name="config")
app.add_typer(sync_cmd.remote_app, name="remote")
app.add_typer(sync_cmd.sync_app, name="sync")
from . import daemon as daemon_cmd  # noqa: E402

app.add_typer(daemon_cmd.daemon_app, name="daemon")
from . import queue as queue_cmd  # noqa: E402  (the backlog: brandmind/backlog.py)

app.add_typer(queue_cmd.queue_app, name="queue")
from . import hooks as hooks_cmd  # noqa: E402

app.add_typer(hooks_cmd.hooks_app, name="hooks")
from . import mcp as mcp_cmd  # noqa: E402

app.add_typer(mcp_cmd.mcp_app, name="mcp")
app.add_typer(mcp_cmd.tools_app, name="tools")
from . import worker as worker_cmd  # noqa: E402  (issue 18: a broker between agents and per-user stores)

app.command()(worker_cmd.publish)
app.command()(worker_cmd.worker)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `bm` and `brandmind`: runs a command, turns errors into one line."""
    from brandmind.errors import BMError

    click = _click()

    command = build_command(sys.argv[1:] if argv is None else argv)
    code = 0
    try:
        result = command.main(args=argv, prog_name="bm", standalone_mode=False)
        code = result if isinstance(result, int) else 0
        if code == 130:  # typer turns Ctrl-C into Exit(130), returned in non-standalone mode
            sys.stderr.write("\nInterrupted.\n")
    except BMError as exc:
        _error(exc.message, exc.hint)
        code = exc.exit_code
    except typer.Abort:
        sys.stderr.write("\nAborted.\n")
        code = 130
    except click.NoArgsIsHelpError as exc:
        sys.stdout.write(exc.ctx.get_help() + "\n")
        code = 2
    except click.UsageError as exc:
        cmd = exc.ctx.command_path if exc.ctx else "bm"
        _error(exc.format_message(), f"see `{cmd} --help`")
        code = 2
    except click.ClickException as exc:
        _error(exc.format_message(), None)
        code = exc.exit_code
    except typer.Exit as exc:
        code = exc.exit_code
        if code == 130:  # typer turns Ctrl-C into Exit(130)
            sys.stderr.write("\nInterrupted.\n")
    except KeyboardInterrupt:
        sys.stderr.write("\nInterrupted.\n")
        code = 130
    except ImportError as exc:  # a package bm or one of its optional backends needs is missing
        _error(*_missing_package(exc))
        code = 1
    except BrokenPipeError:
        # the reader went away (e.g. `bm recall ... | head -1`): not an error
        _silence_stdout()
        code = 0
    except OSError as exc:  # the system refused (no space, no permission, a bad path): one line
        where = f": {exc.filename}" if exc.filename and len(str(exc.filename)) <= 200 else ""
        _error(f"{exc.strerror or exc}{where}", "check the path, its permissions and the free disk space")
        code = 1
    settle_model_threads()  # the model's session or tokenizer still being made: no thread outlives bm
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    if argv is None:
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
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


_COMMAND = None
_LISTING = None                # `bm --help`'s tree (_listing)
_ONE: dict[str, object] = {}  # top-level command name -> a tree holding only it


def build_command(argv: list[str] | None = None):
    """The click command tree, built once per process.  Building the whole tree costs ~0.2 s
    (typer evaluates every command's annotations), a third of a cold `bm recall`: when
    ``argv`` names a top-level command, the tree holds only that command (its options, help
    and errors are the same: the group's name, options and callback are kept); `bm`, `bm -h`
    and `bm --help` get a listing (``_listing``); completion and anything else (no ``argv``,
    an unknown name) the whole tree."""
    global _COMMAND, _LISTING
    _plain_coercion()  # once per process (it marks what it patched)
    if os.environ.get("_BM_COMPLETE"):  # shell completion: it looks at the whole tree
        argv = None
    if argv is not None and (not argv or argv[0] in ("-h", "--help")):
        if _LISTING is None:
            _LISTING = typer.main.get_command(_listing(app))
        return _LISTING
    name = _command_named(argv) if argv is not None else None
    if name is not None:
        if name not in _ONE:
            import copy

            one = copy.copy(app)  # a shallow copy: the same callback and settings
            one.registered_commands = [c for c in app.registered_commands if _name_of(c) == name]
            one.registered_groups = [g for g in app.registered_groups if g.name == name]
            _ONE[name] = typer.main.get_command(one)
        return _ONE[name]
    if _COMMAND is None:
        _COMMAND = typer.main.get_command(app)
    return _COMMAND


def _listing(typer_app):
    """``typer_app`` with every command's function replaced by one taking no parameters but
    keeping its name and docstring: the top-level help lists the same commands with the same
    lines (tests/test_cli_contract.py compares it with the whole tree's) at a fraction of the
    cost; the app's own callback (its options) is kept."""
    import copy

    def stub(fn):
        def command() -> None:  # pragma: no cover - listed, never run
            raise RuntimeError("the help listing's command tree runs no command")

        command.__name__, command.__doc__ = fn.__name__, fn.__doc__
        return command

    out = copy.copy(typer_app)
    out.registered_commands = []
    for info in typer_app.registered_commands:
        info = copy.copy(info)
        info.callback = stub(info.callback)
        out.registered_commands.append(info)
    out.registered_groups = []
    for info in typer_app.registered_groups:
        info = copy.copy(info)
        info.typer_instance = _listing(info.typer_instance)
        out.registered_groups.append(info)
    return out


def _name_of(info) -> str:
    return info.name or typer.main.get_command_name(info.callback.__name__)


def _command_named(argv: list[str]) -> str | None:
    """The top-level command ``argv`` runs, when it is one bm has (None: build everything)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--home":
            i += 2
        elif arg.startswith("--home=") or arg == "--wait":
            i += 1
        elif arg.startswith("-"):
            return None
        else:
            names = {_name_of(c) for c in app.registered_commands} | {g.name for g in app.registered_groups}
            return arg if arg in names else None
    return None


_BOOL_WORDS = {**dict.fromkeys(("1", "true", "t", "yes", "y", "on"), True),
               **dict.fromkeys(("0", "false", "f", "no", "n", "off"), False)}
_MESSAGES = {int: "Input should be a valid integer, unable to parse string as an integer",
             float: "Input should be a valid number, unable to parse string as a number"}


def _plain_coercion() -> None:
    """Convert plain parameters (str, int, float, bool, Path, lists of str) directly.

    typer 0.29 checks every parameter with a pydantic TypeAdapter built on first use: about
    7 ms a parameter, 0.1 s of a cold `bm recall`.  For these types the conversion is
    Python's own, with the same error messages.  Anything else (and any typer whose
    internals differ) keeps typer's own coercion."""
    try:
        from typer.core import _TyperParameter
    except ImportError:  # pragma: no cover - another typer layout
        return
    original = getattr(_TyperParameter, "get_runtime_param", None)
    if original is None or getattr(original, "_bm_plain", False):  # pragma: no cover
        return

    def get_runtime_param(self):  # type: ignore[no-untyped-def]
        plain = _plain_param(self)
        return plain if plain is not None else original(self)

    get_runtime_param._bm_plain = True  # type: ignore[attr-defined]
    _TyperParameter.get_runtime_param = get_runtime_param


def _plain_param(param):  # type: ignore[no-untyped-def]
    from pathlib import Path
    from typing import List, get_args, get_origin

    desc = getattr(param, "type_descriptor", None)
    info = getattr(desc, "parameter_info", None)
    if desc is None or getattr(desc, "file_annotation", None) is not None or any(
            getattr(info, name, None) is not None for name in ("parser", "click_type", "min", "max")):
        return None
    annotation = desc.annotation
    many = get_origin(annotation) in (list, List) and get_args(annotation) == (str,)
    if annotation not in (str, int, float, bool, Path) and not many:
        return None
    convert = str if many else annotation
    return _PlainParam(convert)


class _PlainParam:
    def __init__(self, convert) -> None:  # type: ignore[no-untyped-def]
        self.convert = convert

    def coerce(self, value, param, ctx):  # type: ignore[no-untyped-def]
        exceptions = _click()
        multi = param.multiple or param.nargs == -1
        if value is None:
            return () if multi else None
        if multi:
            if isinstance(value, str):
                raise exceptions.BadParameter("Value must be an iterable.", ctx=ctx, param=param)
            return [self._one(v, param, ctx) for v in value]
        return self._one(value, param, ctx)

    def _one(self, value, param, ctx):  # type: ignore[no-untyped-def]
        convert = self.convert
        if convert is str:
            if isinstance(value, str):
                return value
            raise _click().BadParameter("Input should be a valid string", ctx=ctx, param=param)
        if convert is bool:
            if isinstance(value, bool):
                return value
            word = str(value).strip().lower()
            if word in _BOOL_WORDS:
                return _BOOL_WORDS[word]
            raise _click().BadParameter("Input should be a valid boolean, unable to interpret input",
                                        ctx=ctx, param=param)
        if isinstance(value, convert) and not isinstance(value, bool):
            return value
        try:
            if convert is int and isinstance(value, float):
                raise ValueError(value)
            return convert(value)
        except (TypeError, ValueError):
            raise _click().BadParameter(_MESSAGES.get(convert, f"Input should be a valid {convert.__name__}"),
                                        ctx=ctx, param=param) from None


def _click():  # typer >= 0.26 vendors click as typer._click
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - older typer on real click
        from click import exceptions
    if not hasattr(exceptions, "NoArgsIsHelpError"):  # pragma: no cover
        exceptions.NoArgsIsHelpError = type("NoArgsIsHelpError", (Exception,), {})
    return exceptions


# packages (and bm's own modules, by file name) whose failing import means this extra is incomplete
_EXTRAS = {"graphiti_core": "graphiti", "falkordb": "graphiti", "graphiti": "graphiti",
           "zep_cloud": "zep", "zep": "zep", "ollama": "ollama",
           "mcp": "mcp", "mcp_types": "mcp", "mcpserver": "mcp"}
_EXTRAS.update({"redis": "redis", "broker_redis": "redis"})  # bm publish / bm worker with redis://


def _missing_package(exc: ImportError) -> tuple[str, str]:
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


def _error(message: str, hint: str | None) -> None:
    line = f"Error: {message}"
    if hint:
        line += f" (hint: {hint})"
    sys.stderr.write(line + "\n")


if __name__ == "__main__":  # pragma: no cover
    main()
