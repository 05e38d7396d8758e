"""`bm import`: a `bm export` file, or another tool's export with --from (brandmind/importers.py)."""
from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from . import admin
from .common import JsonOpt, UserOpt, by, option, progress_bar, store_for_writing
from .output import info, wants_json

FROM_HELP = ("Read another tool's export: chatgpt or claude (conversations.json, or the export .zip), "
             "mem0 (the JSON of get_all()), basic-memory (memory.json: the MCP memory server's graph).")


def import_(
    path: Annotated[str, typer.Argument(help="The file: a `bm export` JSONL, or with --from the other tool's export; - for stdin.")],
    source: Annotated[Optional[str], option("--from", "-f", help=FROM_HELP,
                                            check=by("brandmind.importers:check_kind"))] = None,
    user: UserOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --from: store nothing, print what would be imported (counts).")] = False,
    extract: Annotated[bool, typer.Option("--extract", help="With --from chatgpt/claude: also extract facts from the turns, as `bm ingest --extract`.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Import a `bm export` file, or with --from a ChatGPT, Claude, Mem0 or Basic Memory export.

    Conversations become turns (a bead and a recallable memory each, with their own time and
    speaker, one thread per conversation); Mem0 memories become memories, Basic Memory's
    observations memories and its entities and relations graph nodes and edges (with a fact
    each); everything keeps where it came from in its meta ("imported"). The whole file is checked first (a bad one stores nothing) and
    importing it again stores nothing new.

    \b
    Examples:
      bm import --from chatgpt ~/Downloads/chatgpt-export.zip -u ann --dry-run
      bm import --from claude conversations.json -u ann
      bm import --from mem0 mem0-dump.json -u ann && bm recall "diet" -u ann
      bm import --from basic-memory memory.jsonl -u ann && bm kg list -u ann
      bm export > backup.jsonl && BM_HOME=./copy bm import backup.jsonl
    """
    if source is None:
        if user is not None or dry_run or extract:
            from brandmind.errors import UsageError

            raise UsageError("-u, --dry-run and --extract go with --from",
                             hint="a `bm export` file keeps its own users: bm import FILE; else add --from KIND")
        admin.import_(path, as_json)
        return
    data = sys.stdin.buffer.read() if path == "-" else path
    with store_for_writing() as mem, progress_bar("importing") as bar:
        report = mem.import_from(source, data, user=user, dry_run=dry_run,
                                 extract=extract, progress=lambda r: bar(r.get("ingested", 0) + r["duplicates"], None))
    if wants_json(as_json):
        print(json.dumps(report))
    else:
        info(summary(report))


def summary(report: dict) -> str:
    """What an import found and stored (or, dry, would store): one line, and with a dry
    --extract the extraction's estimate below it."""
    found = ", ".join(f"{v} {k}" for k, v in report["found"].items())
    new = ", ".join(f"{v} {k}" for k, v in report["new"].items() if v) or "nothing"
    line = (f"{report['from']}: found {found}; " + ("would store " if report["dry_run"] else "stored ")
            + f"{new}; {report['duplicates']} already there")
    if report["skipped"]:
        line += f"; {report['skipped']} message(s) skipped (system, tool, hidden or empty)"
    if report["dry_run"]:
        line += "; nothing was stored"
        if "extract" in report:  # what --extract would do: the lines of `bm ingest --dry-run`
            from .extract import dry_run_lines

            line += "".join("\n" + more for more in dry_run_lines({**report, "would_ingest": 0, "bad": []})[1:])
    elif "facts" in report:
        from .extract import facts_summary

        line += "; " + facts_summary(report["facts"], report.get("llm"), report.get("extract"))
    return line
