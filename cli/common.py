"""What every command shares: option types, opening the store, reading inputs."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import typer
from typing import Annotated

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (the default when stdout is not a terminal).")]
JsonlOpt = Annotated[bool, typer.Option("--jsonl", help="Print one JSON object per line.")]
UserOpt = Annotated[Optional[str], typer.Option("--user", "-u", help="Whose memory (default: config `user`).")]
AgentOpt = Annotated[Optional[str], typer.Option("--agent", "-a", help="Agent id; omit for the user's global scope.")]


def open_store(**kwargs: Any) -> Any:
    from brandmind.memory import Memory

    return Memory(**kwargs)


def read_text_arg(value: str) -> str | bytes:
    """TEXT, or the whole of stdin for ``-``."""
    if value == "-":
        return sys.stdin.buffer.read().rstrip(b"\r\n")
    return value


@contextmanager
def open_input(path: str) -> Iterator[Any]:
    """A binary line iterator over FILE, or stdin for ``-``."""
    from brandmind.errors import NotFound

    if path == "-":
        yield sys.stdin.buffer
        return
    p = Path(path)
    if p.is_dir():
        from brandmind.errors import UsageError

        raise UsageError(f"{path} is a directory, not a file",
                         hint=f"give a JSONL file in it (e.g. {p / 'chat.jsonl'}), or - to read stdin")
    if not p.is_file():
        raise NotFound(f"no such file: {path}", hint="give a JSONL file path, or - to read stdin")
    with p.open("rb") as fh:
        yield fh


@contextmanager
def progress_bar(label: str, total: int | None = None) -> Iterator[Callable[[int, int | None], None]]:
    """A rich progress bar on stderr when it is a terminal; a no-op otherwise."""
    if not sys.stderr.isatty():
        yield lambda done, total=None: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .output import console

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)

        def update(done: int, total: int | None = None) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def confirm(question: str, yes: bool) -> bool:
    """Ask on a terminal; ``--yes`` skips it."""
    if yes or not sys.stdin.isatty():
        return True
    return typer.confirm(question, default=False, err=True)
