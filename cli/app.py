"""The `bm` typer app: every command and group, the command tree built for one command.

Errors and exit codes: cli/boundary.py (the one error boundary).  `bm recall`, `context`,
`ingest` and `remember` in their common forms are parsed without typer (cli/quick.py);
everything else comes here.
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
from . import boundary

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
    """Entry point of `bm` and `brandmind` (via cli/client.py): runs a command through the
    error boundary (cli/boundary.py); with no ``argv`` (a process's own), ends the process."""
    code = boundary.run(lambda: _invoke(argv))
    if argv is None:
        boundary.exit_now(code)
    return code


def _invoke(argv: list[str] | None) -> int:
    """Run the command ``argv`` names; click's own errors become bm's (a usage error exits 2)."""
    from brandmind.errors import BMError, UsageError

    click = _click()
    command = build_command(sys.argv[1:] if argv is None else argv)
    try:
        result = command.main(args=argv, prog_name="bm", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except typer.Abort:
        sys.stderr.write("\nAborted.\n")
        return 130
    except click.NoArgsIsHelpError as exc:
        sys.stdout.write(exc.ctx.get_help() + "\n")
        return 2
    except click.UsageError as exc:
        cmd = exc.ctx.command_path if exc.ctx else "bm"
        raise UsageError(exc.format_message(), hint=f"see `{cmd} --help`") from None
    except click.ClickException as exc:
        error = BMError(exc.format_message())
        error.exit_code = exc.exit_code
        raise error from None
    except typer.Exit as exc:
        code = exc.exit_code
    if code == 130:  # typer turns Ctrl-C into Exit(130) (returned in non-standalone mode)
        sys.stderr.write("\nInterrupted.\n")
    return code


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


if __name__ == "__main__":  # pragma: no cover
    main()
