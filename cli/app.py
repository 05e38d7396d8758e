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
from . import personas as personas_cmd
from . import skills as skills_cmd
from . import sync as sync_cmd

app = typer.Typer(
    name="bm",
    help="bm: local-first memory for AI agents. Beads, memories, a knowledge graph; JSON in and out of pipes.",
    no_args_is_help=True,
    add_completion=False,
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
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    if home:
        os.environ["BM_HOME"] = home


app.command()(admin.init)
app.command()(memories.remember)
app.command()(memories.recall)
app.command()(memories.forget)
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
app.command("import")(admin.import_)
app.command()(admin.rebuild)
app.command()(admin.reindex)
app.command()(admin.stats)
app.command()(admin.doctor)
app.add_typer(admin.config_app, name="config")
app.add_typer(sync_cmd.remote_app, name="remote")
app.add_typer(sync_cmd.sync_app, name="sync")
from . import daemon as daemon_cmd  # noqa: E402

app.add_typer(daemon_cmd.daemon_app, name="daemon")


def main(argv: list[str] | None = None) -> int:
    """Entry point of `bm` and `brandmind`: runs a command, turns errors into one line."""
    from brandmind.errors import BMError

    click = _click()

    command = _command()
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
    except BrokenPipeError:
        # the reader went away (e.g. `bm recall ... | head -1`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    if argv is None:
        sys.exit(code)
    return code


_COMMAND = None


def _command():
    """The click command tree, built once per process (building it costs ~40 ms, which a
    process calling main() more than once, e.g. the tests, would otherwise pay each time)."""
    global _COMMAND
    if _COMMAND is None:
        _COMMAND = typer.main.get_command(app)
    return _COMMAND


def _click():  # typer >= 0.26 vendors click as typer._click
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - older typer on real click
        from click import exceptions
    if not hasattr(exceptions, "NoArgsIsHelpError"):  # pragma: no cover
        exceptions.NoArgsIsHelpError = type("NoArgsIsHelpError", (Exception,), {})
    return exceptions


def _error(message: str, hint: str | None) -> None:
    line = f"Error: {message}"
    if hint:
        line += f" (hint: {hint})"
    sys.stderr.write(line + "\n")


if __name__ == "__main__":  # pragma: no cover
    main()
