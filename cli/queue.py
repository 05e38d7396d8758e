"""`bm queue`: the backlog of work accepted now and done later (brandmind/backlog.py): vectors
waiting to be made, extraction jobs queued or failing; `bm queue run` does it in the foreground.

A daemon that runs a worker (sync/worker.py) sets ``WORKER`` in its process (cli/resident.py):
`bm queue` then shows the worker's live counters too.
"""
from __future__ import annotations

from typing import Any

import typer

from .common import JsonOpt, open_store
from .output import emit, kv_table

queue_app = typer.Typer(help="The backlog: vectors and extractions accepted now, done in the background.")

WORKER: Any = None  # the daemon's sync.worker.Worker, when this process is the daemon


@queue_app.callback(invoke_without_command=True)
def queue_show(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Show the backlog: ops accepted, vectors made and waiting, extraction jobs queued,
    done and failing (JSON when piped).  Reads the store, with or without a daemon.

    \b
    Examples:
      bm queue
      bm queue --json | jq .vectors_pending
    """
    if ctx.invoked_subcommand is not None:
        return
    if WORKER is not None:
        out = WORKER.status()
    else:
        from brandmind import backlog

        with open_store(if_missing="empty") as mem:
            out = {**backlog.status(mem.store), "running": False}
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title="bm queue"))


@queue_app.command("run")
def queue_run(as_json: JsonOpt = False) -> None:
    """Do the backlog now and return when it is done: embed every waiting memory, then run
    every queued extraction (also those that kept failing); a failing one stops it (exit 1,
    the job stays queued).  With a daemon running the work is done there (a batch its
    worker is embedding meanwhile is not done twice: only rows still waiting are filled).

    \b
    Examples:
      bm queue run
      bm queue run --json | jq .vectors_pending
    """
    from brandmind import backlog

    with open_store() as mem:
        store = mem.store
        out = {**backlog.drain(lambda: store), **backlog.status(store)}
    if WORKER is not None:
        out = {**WORKER.status(), **out}
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title="bm queue run"))
