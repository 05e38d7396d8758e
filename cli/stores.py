"""What a command opens (the store, its input file or stdin, a progress bar) and what a read
says about the store: typer-free, so that the commands a shell calls every turn (cli/quick.py)
start without loading the command line."""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional


class _Resident(threading.local):
    """Set by the daemon (cli/serve.py) in the thread running a command: the resident Memory."""
    mem: Any = None


resident = _Resident()


class RunLocally(Exception):
    """Raised in the daemon by a command it cannot run there (one that opens the store in
    its own way: repair, another model); the client then runs it in its own process."""


class _Kept:
    """The resident Memory for a ``with`` block; leaving the block keeps it open."""

    def __init__(self, mem: Any) -> None:
        self.mem = mem

    def __enter__(self) -> Any:
        return self.mem

    def __exit__(self, *exc: object) -> None:
        return None


def _check_resident(kwargs: dict) -> None:
    """The resident store serves a command that opens it like this (it is open already, and
    ``check_model=False`` only relaxes a check it passed); else RunLocally."""
    other = sorted(k for k, v in kwargs.items() if not (k == "check_model" and v is False))
    if other:
        raise RunLocally(f"opens the store with {', '.join(other)}")


NO_STORE_HINT = ("nothing is stored there yet: `bm remember TEXT`, `bm ingest FILE` or `bm init` creates it; "
                 "or point BM_HOME / --home at an existing store")


def open_store(*, if_missing: str = "error", **kwargs: Any) -> Any:
    """The store, for a command that reads it (use it with ``with``).  A read never creates
    a store.  On a missing store: an error naming the commands that create one, or with
    ``if_missing="empty"`` (searches and listings: recall, context, lists) the answer of an
    empty store, with a note on stderr, so that an agent loop's first `bm context` works
    and a mistyped BM_HOME still shows."""
    if resident.mem is not None:
        _check_resident(kwargs)
        return _Kept(resident.mem)
    from brandmind.errors import StoreMissing
    from brandmind.memory import Memory

    try:
        return Memory(**kwargs)
    except StoreMissing as exc:
        if if_missing != "empty":
            raise StoreMissing(exc.message, hint=NO_STORE_HINT) from None
    return _empty_store(**kwargs)


@contextmanager
def _empty_store(**kwargs: Any) -> Iterator[Any]:
    """An empty store in a temporary directory, removed on close (the configured path is
    left alone: nothing is created there)."""
    import dataclasses
    import shutil
    import tempfile

    from brandmind.config import Config
    from brandmind.memory import Memory

    from .output import info

    config = Config.load()
    info(f"note: no bm store at {config.paths.data_dir} yet, so nothing is found "
         "(the first write, e.g. `bm remember` or `bm ingest`, creates it)")
    tmp = Path(tempfile.mkdtemp(prefix="bm-empty-"))
    try:
        empty = dataclasses.replace(config, paths=dataclasses.replace(config.paths, data_dir=tmp / "data"))
        with Memory(config=empty, create=True, **kwargs) as mem:
            mem.throwaway = True  # (note_unknown_user: the note above said it all)
            yield mem
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def store_for_writing(**kwargs: Any) -> Iterator[Any]:
    """The store, for a command that writes: created on first write (as `bm init` would).
    A store this command created and left empty (it failed, or was a dry run) is removed
    again, so only a write that happened leaves a store behind."""
    if resident.mem is not None:
        _check_resident(kwargs)
        yield resident.mem
        return
    import shutil

    from brandmind.config import Config
    from brandmind.memory import Memory

    config = Config.load()
    data_dir = config.paths.data_dir
    existed = (config.paths.lmdb_dir / "data.mdb").exists()
    dir_existed = data_dir.exists()
    try:
        mem = Memory(config=config, create=not existed, **kwargs)
    except BaseException:
        if not existed and not dir_existed:
            shutil.rmtree(data_dir, ignore_errors=True)
        raise
    ops = 0
    try:
        yield mem
    finally:
        if not existed:
            ops = mem.log.count("ops")
        mem.close()
        if not existed and not ops and not dir_existed:
            shutil.rmtree(data_dir, ignore_errors=True)
    if not existed and ops:
        from .output import info

        info(f"note: created a new bm store at {data_dir}")


def read_text_arg(value: str) -> str | bytes:
    """TEXT, or the whole of stdin for ``-``."""
    if value == "-":
        return sys.stdin.buffer.read().rstrip(b"\r\n")
    return value


def note_unknown_user(mem: Any, user: Optional[str]) -> None:
    """After a read for a user found nothing: when that user has nothing stored at all,
    say so on stderr and name the users who do (a typo in -u shows, instead of a bare
    ``[]``; stdout stays what it was)."""
    if getattr(mem, "throwaway", False):
        return
    name = mem.store.user(user)
    if mem.admin.has_user(name):
        return
    import difflib

    from .output import info

    known = list(mem.admin.users())
    who = f"user {name!r}" + ("" if user is not None else " (the configured user: no -u given)")
    if not known:
        info(f"note: no memories for {who}: this store holds none yet")
        return
    line = f"note: no memories for {who}; users: " + ", ".join(known[:20]) + (", …" if len(known) > 20 else "")
    close = difflib.get_close_matches(name, known, n=1)
    info(line + (f" (did you mean -u {close[0]}?)" if close else ""))


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
