"""ingest, beads add/tail/show/rm."""
from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from .common import (JsonlOpt, JsonOpt, TsOpt, UserOpt, by, confirm, name_check, note_unknown_user, open_store,
                     option, read_text_arg, store_for_writing)
from .output import beads_table, emit, info, kv_table, wants_json


def ingest(
    path: Annotated[str, typer.Argument(help="JSONL messages file, or - for stdin.")],
    user: UserOpt = None,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Report bad lines and go on instead of stopping.")] = False,
    extract: Annotated[bool, typer.Option("--extract", help="Also extract atomic facts from the turns (config `extractor`: rules or llm) and store them with reconciliation.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Store nothing and call no LLM: report what would be ingested and, with --extract, the estimated LLM calls and tokens (rules: the facts).")] = False,
    ttl: Annotated[Optional[str], option("--ttl", help="Forget these turns (and what is made from them) this long from now: 2s, 90m, 12h, 30d, 2w.",
                                         check=by("brandmind.expiry:check_ttl"))] = None,
    as_json: JsonOpt = False,
) -> None:
    """Store a conversation: each message becomes a bead and a recallable raw-turn memory.

    One message per line: {"id"?, "role", "speaker"?, "content", "ts"?, "thread"?, "meta"?}.
    Re-running is safe for lines with an "id" or a "ts": those are stored once. A line
    with neither is always a new turn (a second "yes" in a live loop is kept).

    \b
    Examples:
      cat chat.jsonl | bm ingest - --user ann
      echo '{"role": "user", "content": "I moved to Berlin"}' | bm ingest - -u ann --extract
      bm ingest chat.jsonl --extract --dry-run   (then without --dry-run)
      bm ingest session.jsonl -u ann --ttl 7d    (forgotten a week from now)
    """
    from .quick import run_ingest  # the body `bm ingest` runs without typer too

    run_ingest(path, user=user, skip_bad=skip_bad, extract=extract, dry_run=dry_run, ttl=ttl, as_json=as_json)


beads_app = typer.Typer(help="The append-only short-term log of turns and tool outputs.", no_args_is_help=True)


@beads_app.command("add")
def beads_add(
    content: Annotated[str, typer.Argument(help="Content, or - to read stdin (large content goes to the blob store).")],
    role: Annotated[str, option("--role", "-r", help="Who produced it: user, assistant, tool, system, ...",
                                check=name_check("role"))] = "user",
    speaker: Annotated[Optional[str], option("--speaker", "-s", help="Who said it, by name (e.g. Ann).",
                                             check=name_check("speaker"))] = None,
    user: UserOpt = None,
    thread: Annotated[Optional[str], option("--thread", help="Conversation thread (default: main).",
                                            check=name_check("thread"))] = None,
    source: Annotated[str, typer.Option("--source", help="Where it came from, e.g. cli, tool:grep.")] = "cli",
    ts: TsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Append one bead and print its id ({"id"} as JSON when piped).

    \b
    Example:
      some-tool --verbose 2>&1 | bm beads add - --role tool --source tool:some-tool
    """
    with store_for_writing() as mem:
        bead = mem.add_bead(read_text_arg(content), role=role, speaker=speaker, user=user,
                            thread=thread, source=source, ts=ts)
    print(json.dumps({"id": bead["id"]}) if wants_json(as_json) else bead["id"])


@beads_app.command("tail")
def beads_tail(
    n: Annotated[int, typer.Option("-n", help="How many, 0 or more.")] = 20,
    user: UserOpt = None,
    thread: Annotated[Optional[str], typer.Option("--thread", help="Only this conversation thread.")] = None,
    as_json: JsonOpt = False,
    jsonl: JsonlOpt = False,
) -> None:
    """The last N beads of the user's thread, oldest first (the short-term window).

    \b
    Example:
      bm beads tail -n 20 -u ann
    """
    with open_store(if_missing="empty") as mem:
        beads = mem.beads_tail(n, user=user, thread=thread)
        if not beads and n:
            note_unknown_user(mem, user)
    emit(beads, as_json=as_json, jsonl=jsonl, table=beads_table)


@beads_app.command("show")
def beads_show(bead_id: Annotated[str, typer.Argument(help="Bead id (b_...), as `bm beads tail` shows it.")],
               as_json: JsonOpt = False) -> None:
    """One bead, with its content read back from the blob store if it was offloaded.

    \b
    Example:
      bm beads show b_01h... --json | jq -r .content
    """
    with open_store() as mem:
        bead = mem.get_bead(bead_id)
    emit(bead, as_json=as_json, jsonl=False, table=lambda b: kv_table(b, title=b["id"]))


@beads_app.command("rm")
def beads_rm(
    bead_ids: Annotated[list[str], typer.Argument(help="One or more bead ids (b_...), as `bm beads tail` shows them.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Forget turns: each bead goes, with every memory made from it (its raw-turn memory,
    facts extracted from it), from recall, context, export and the store's files.

    \b
    Example:
      bm beads tail -u ann              # find the turn's id
      bm beads rm b_01h... --yes
    """
    with open_store() as mem:
        beads = [mem.get_bead(b) for b in dict.fromkeys(bead_ids)]
        shown = "; ".join(repr(b["content"][:60]) for b in beads[:3])
        if not confirm(f"Forget {len(beads)} turn(s): {shown}?", yes):
            raise typer.Exit(1)
        result = mem.forget_many([], [b["id"] for b in beads])
    if wants_json(as_json):
        print(json.dumps({"forgotten": result["memories"], "beads": result["beads"]}))
    else:
        info(f"forgot {len(result['beads'])} turns and {len(result['memories'])} memories")
