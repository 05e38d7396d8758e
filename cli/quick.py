"""The commands an agent loop runs every turn, parsed without typer: `bm context` and `bm recall`
before it answers, `bm ingest` (or `bm remember`) after.

A cold `bm recall` starts the model's session first (cli/client.py ``_preload``); while it is
made, this process imports the store and opens it, and only then asks for the query's vector.
typer, click and the command modules were ~0.1 s of that wait (`scripts/bench_speed.py --only
cold`, 10,000 memories: 0.60 s before, 0.40-0.48 s after, the floor 0.34-0.40 s), and
0.05-0.07 s of every cold write.  So these commands,
in the forms a script writes (:data:`SPECS`), are read here and run the same bodies the typer
commands run (``run_<command>``), through the same error boundary.

Anything else on the line (another option, ``--opt=value`` for an option not listed,
``--help``, an option given twice, a value starting with ``-``, a value the typer command
would refuse) is left to the typer app (:func:`parse` returns None), which answers it as
it always did: the help, and the usage errors with their exit code 2, stay typer's.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

from . import boundary
from .output import emit, emit_json, explain_table, info, memories_table, wants_json
from .stores import note_unknown_user, open_input, open_store, progress_bar, read_text_arg, store_for_writing

# command -> (options taking a value -> keyword, flags -> keyword); the typer commands'
# names for them (cli/memories.py recall and remember, cli/context.py context, cli/beads.py ingest)
SPECS = {
    "recall": ({"-k": "k", "-u": "user", "--user": "user", "-a": "agent", "--agent": "agent"},
               {"--json": "as_json", "--jsonl": "jsonl", "--explain": "explain", "--remote": "remote"}),
    "context": ({"-b": "budget", "--budget": "budget", "-u": "user", "--user": "user", "-a": "agent",
                 "--agent": "agent", "--recent": "recent", "--thread": "thread", "-f": "fmt", "--format": "fmt"},
                {"--json": "as_json"}),
    "ingest": ({"-u": "user", "--user": "user"}, {"--json": "as_json"}),
    "remember": ({"-t": "type", "--type": "type", "-u": "user", "--user": "user", "-a": "agent", "--agent": "agent",
                  "-i": "importance", "--importance": "importance"}, {"--json": "as_json"}),
}
# converted as typer converts them (cli/app.py ``_plain_coercion``: int() and float())
INTS = ("k", "budget", "recent")
FLOATS = ("importance",)
# the checks the typer options run (cli/common.py ``checked``), by keyword: brandmind.validate's
CHECKS = {"user": ("name", {"what": "user"}), "agent": ("name", {"what": "agent"}),
          "type": ("memory_type", {}), "importance": ("importance", {})}


def parse(argv: list[str]) -> tuple[str, str | None, str, dict] | None:
    """(command, --home, QUERY, keyword arguments) of a command line this module runs; None
    for any other."""
    home, i = None, 0
    while i < len(argv) and argv[i] != "--home=" and argv[i].startswith("--home"):
        if argv[i] == "--home" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            home, i = argv[i + 1], i + 2
        elif argv[i].startswith("--home="):
            home, i = argv[i].split("=", 1)[1], i + 1
        else:
            return None
    if i >= len(argv) or argv[i] not in SPECS or os.environ.get("_BM_COMPLETE"):
        return None
    command = argv[i]
    options, flags = SPECS[command]
    query, kwargs, rest = None, {}, list(argv[i + 1:])
    while rest:
        arg = rest.pop(0)
        if arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in options:
            arg, value = arg.split("=", 1)
            rest.insert(0, value)
        if arg in flags and flags[arg] not in kwargs:
            kwargs[flags[arg]] = True
        elif arg in options and options[arg] not in kwargs and rest and not rest[0].startswith("-"):
            kwargs[options[arg]] = rest.pop(0)
        elif query is None and (arg == "-" or not arg.startswith("-")):
            query = arg
        else:
            return None
    if query is None:
        return None
    from brandmind import validate
    from brandmind.errors import InvalidInput

    try:
        for key in kwargs:
            if key in INTS or key in FLOATS:
                kwargs[key] = (int if key in INTS else float)(kwargs[key])
            if key in CHECKS:
                check, args = CHECKS[key]
                getattr(validate, check)(kwargs[key], **args)
    except (ValueError, InvalidInput):
        return None
    return command, home, query, kwargs


def run(parsed: tuple[str, str | None, str, dict]) -> int:
    """Run the command line :func:`parse` read; its exit code."""
    command, home, query, kwargs = parsed
    if home:  # as the app's --home (cli/app.py root)
        os.environ["BM_HOME"] = home
    body = globals()[f"run_{command}"]
    return boundary.run(lambda: body(query, **kwargs) or 0)


# -- the bodies: the typer commands call these too --------------------------------------------
def run_recall(query: str, *, k: Optional[int] = None, user: Optional[str] = None, agent: Optional[str] = None,
               types: tuple = (), since: Optional[str] = None, until: Optional[str] = None,
               now: Optional[str] = None, as_of: Optional[str] = None, min_score: Optional[float] = None,
               remote: bool = False, explain: bool = False, as_json: bool = False, jsonl: bool = False) -> None:
    """`bm recall QUERY`: the memories that best answer it, printed."""
    text = read_text_arg(query)
    with open_store(if_missing="empty") as mem:
        mem.refresh_workspace(user)  # notes edited on disk (reads never refresh: brandmind/workspace.py)
        from brandmind.sync.assist import recall_with_remote

        results, reports = recall_with_remote(mem, text, k=k, user=user, agent=agent, types=types,
                                              since=since, until=until, now=now, as_of=as_of, remote=remote)
        for rep in reports:
            if rep["status"] != "ok":
                info(f"note: remote {rep['remote']} {rep['status']} ({rep.get('message')}): "
                     "these are local results only")
        if min_score is not None:
            results = [r for r in results if r["score"] >= min_score]
        if not results:
            note_unknown_user(mem, user)
        print_lag_note(mem, user)
    table = explain_table if explain else (lambda r: memories_table(r, scores=True))
    emit(results, as_json=as_json, jsonl=jsonl, table=table)


def run_context(query: str, *, budget: int = 2000, user: Optional[str] = None, agent: Optional[str] = None,
                now: Optional[str] = None, as_of: Optional[str] = None, recent: int = 20, margin: float = 0.0,
                thread: Optional[str] = None, fmt: str = "text", as_json: bool = False) -> None:
    """`bm context QUERY`: the block for the agent's prompt, printed (or JSON with --json)."""
    with open_store(if_missing="empty") as mem:
        mem.refresh_workspace(user)  # notes edited on disk (reads never refresh: brandmind/workspace.py)
        result = mem.context(read_text_arg(query), budget=budget, user=user, agent=agent, now=now,
                             as_of=as_of, format=fmt, recent=recent, margin=margin, thread=thread)
        print_lag_note(mem, user)
    if as_json:
        emit_json(result)
        return
    if result["text"]:
        sys.stdout.write(result["text"] + "\n")
    dropped = [k for s, keys in result["dropped"].items() if s != "duplicates" for k in keys]
    if result["truncated"]:
        info(f"note: {result['truncated'][0]} was cut to fit --budget {budget} (marked …); a larger budget shows it whole")
    elif not result["text"] and dropped:
        info(f"note: nothing fits in --budget {budget} tokens ({len(dropped)} candidate(s) left out); raise --budget")
    if sys.stderr.isatty():
        dropped = sum(len(v) for k, v in result["dropped"].items() if k != "duplicates")
        info(f"{result['tokens']} of {result['budget']} tokens ({result['tokenizer']}); {dropped} candidate(s) left out")


def run_ingest(path: str, *, user: Optional[str] = None, skip_bad: bool = False, extract: bool = False,
               dry_run: bool = False, ttl: Optional[str] = None, as_json: bool = False) -> None:
    """`bm ingest FILE`: each message a bead and a raw-turn memory; the report."""
    with open_input(path) as fh, store_for_writing() as mem, progress_bar("ingesting") as bar:
        report = mem.ingest(fh, user=user, skip_bad=skip_bad, extract=extract, dry_run=dry_run, ttl=ttl,
                            progress=lambda r: bar(r["ingested"] + r["duplicates"], None))
    for bad in report["bad"]:
        info(f"skipped line {bad['line']}: {bad['error']}")
    if wants_json(as_json):
        print(json.dumps(report))
    elif dry_run:
        from .extract import dry_run_lines

        for line in dry_run_lines(report):
            info(line)
    else:
        line = (f"ingested {report['ingested']} message(s), {report['duplicates']} already known, "
                + (f"{report['edited']} edited (the new text replaces the old), " if report.get("edited") else "")
                + (f"{report['forgotten']} forgotten before (not stored again), " if report.get("forgotten") else "")
                + f"{len(report['bad'])} bad line(s) skipped")
        if extract:
            from .extract import facts_summary

            line += "; " + facts_summary(report["facts"], report.get("llm"), report.get("extract"))
        info(line)


def run_remember(text: str, *, type: str = "fact", user: Optional[str] = None, agent: Optional[str] = None,
                 importance: float = 0.5, meta: Optional[dict] = None, ts: Optional[str] = None,
                 extract: bool = False, ttl: Optional[str] = None, pin: bool = False, as_json: bool = False) -> None:
    """`bm remember TEXT` (plain text; ``--fact`` is the typer command's): its id."""
    with store_for_writing() as mem:
        item = mem.remember(read_text_arg(text), type=type, user=user, agent=agent, importance=importance,
                            meta=meta, ts=ts, extract=extract, ttl=ttl, pin=pin)
    if wants_json(as_json):
        out = {"id": item["id"]}
        if extract:
            report = dict(item["extract"])
            out["facts"], out["llm"] = report.pop("facts"), report.pop("llm")
            out["extract"] = report
        print(json.dumps(out))
    else:
        print(item["id"])
        if extract:
            from .extract import facts_summary

            report = item["extract"]
            info(facts_summary(report["facts"], report["llm"], report))


def print_lag_note(mem: Any, user: str | None) -> None:
    """On stderr: how many of the user's memories wait for their vector (the daemon's backlog)."""
    from brandmind.vectorlag import lag_note  # not brandmind.backlog: its extractor is heavy

    note = lag_note(mem.store, user)
    if note:
        info(note)
