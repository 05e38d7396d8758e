"""What every command shares: option types and their checks, confirmation; opening the store
and the input is cli/stores.py (re-exported here: the commands import it from here)."""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import typer
from typing import Annotated

from .stores import (RunLocally, note_unknown_user, open_input, open_store, progress_bar,  # noqa: F401
                     read_text_arg, resident, store_for_writing)


# -- option values are checked while the command line is parsed: a bad one is a usage error ----------
def by(target: str, **kwargs: Any) -> Callable[[Any], Any]:
    """The library's own check ``module:function`` (imported when first used), called as
    ``function(value, **kwargs)``; it raises InvalidInput on a bad value."""
    def check(value: Any) -> Any:
        import importlib

        module, _, func = target.partition(":")
        return getattr(importlib.import_module(module), func)(value, **kwargs)

    return check


def checked(check: Callable[[Any], Any]) -> Callable[..., Any]:
    """A typer callback running an option's value (each value of a repeatable one) through
    ``check``: a bad value is a usage error (exit 2: ``Error: --since: …`` with the check's
    hint), found before any store is opened or created."""

    def callback(ctx, param, value):  # type: ignore[no-untyped-def]  # typer passes them by position
        if value is None or getattr(ctx, "resilient_parsing", False):  # shell completion: no checks
            return value
        from brandmind.errors import InvalidInput, UsageError

        try:
            for one in value if isinstance(value, (list, tuple)) else (value,):
                check(one)
        except InvalidInput as exc:
            opt = max(param.opts, key=len) if param.param_type_name == "option" else param.name.upper()
            raise UsageError(f"{opt}: {exc.message}", hint=exc.hint) from None
        return value

    return callback


def option(*decls: str, help: str, check: Callable[[Any], Any] | None = None, **kwargs: Any) -> Any:
    """``typer.Option`` whose value goes through ``check`` (see :func:`checked`)."""
    return typer.Option(*decls, help=help, callback=checked(check) if check else None, **kwargs)


def date_option(*decls: str, help: str) -> Any:
    """An ISO 8601 date option, read as the library reads it (``--as-of`` -> field as_of)."""
    field = decls[0].lstrip("-").replace("-", "_")
    return option(*decls, help=help, check=by("brandmind.clock:parse_time", field=field))


def name_check(what: str) -> Callable[[Any], Any]:
    return by("brandmind.validate:name", what=what)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (the default when stdout is not a terminal).")]
JsonlOpt = Annotated[bool, typer.Option("--jsonl", help="Print one JSON object per line.")]
UserOpt = Annotated[Optional[str], option("--user", "-u", help="Whose memory (default: config `user`).",
                                          check=name_check("user"))]
AgentOpt = Annotated[Optional[str], option("--agent", "-a", help="Agent id; omit for the user's global scope.",
                                           check=name_check("agent"))]
TsOpt = Annotated[Optional[str], date_option("--ts", help="When it happened (ISO 8601); default now.")]
TypeOpt = Annotated[str, option("--type", "-t", check=by("brandmind.validate:memory_type"),
                                help="fact, preference, decision, insight, question, concept or episode.")]


def confirm(question: str, yes: bool) -> bool:
    """Ask on a terminal; ``--yes`` skips it."""
    if yes or not sys.stdin.isatty():
        return True
    return typer.confirm(question, default=False, err=True)
