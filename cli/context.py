"""context: the block an agent puts in its prompt; consolidate: merge near-duplicate memories."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from .common import AgentOpt, JsonOpt, UserOpt, date_option, open_store
from .output import emit


def context(
    query: Annotated[str, typer.Argument(help="What the agent is about to answer (- reads stdin).")],
    budget: Annotated[int, typer.Option("--budget", "-b", help="Token budget, 1 to 1,000,000 (counted on the printed block).")] = 2000,
    user: UserOpt = None,
    agent: AgentOpt = None,
    now: Annotated[Optional[str], date_option("--now", help="Treat this date as now (ISO 8601): time words, and no later beads.")] = None,
    as_of: Annotated[Optional[str], date_option("--as-of", help="What was true at this date (ISO 8601).")] = None,
    recent: Annotated[int, typer.Option("--recent", help="Recent beads of the thread to consider (0 to 1000).")] = 20,
    margin: Annotated[float, typer.Option("--margin", help="Keep this fraction of the budget free, e.g. 0.15 for an LLM tokenizer that counts more.")] = 0.0,
    thread: Annotated[Optional[str], typer.Option("--thread", help="Only this thread's beads (default: all of the user's).")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Serialise the block as text (## sections) or json.")] = "text",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: the block, its sections, what was dropped, the token count (the block alone otherwise, even when piped).")] = False,
) -> None:
    """Print the best context for QUERY that fits --budget tokens: core memory, relevant
    memories, recent conversation.  Tokens are counted on the printed block with the
    embedded model's WordPiece tokenizer; --json prints the block with what was chosen,
    dropped and counted.

    \b
    Examples:
      bm context "what should I pack for Kyoto?" --budget 1500 --user ann > context.txt
      bm context "plan dinner" -b 800 -u ann -a coach --json | jq .dropped
    """
    from .quick import run_context  # the body `bm context` runs without typer too

    run_context(query, budget=budget, user=user, agent=agent, now=now, as_of=as_of, recent=recent, margin=margin,
                thread=thread, fmt=fmt, as_json=as_json)


def consolidate(
    user: UserOpt = None,
    threshold: Annotated[float, typer.Option("--threshold", help="Cosine from which two memories may be merged (0-1].")] = 0.92,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would be merged; store nothing.")] = False,
    include_turns: Annotated[bool, typer.Option("--include-turns", help="Also merge raw conversation turns (left alone by default).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Merge near-duplicate memories (same user, scope and type) into the oldest of each group.

    Merged memories are retired, not deleted: `bm memories show ID` still shows them.

    \b
    Example:
      bm consolidate --user ann --dry-run
    """
    with open_store() as mem:
        report = mem.consolidate(user=user, threshold=threshold, dry_run=dry_run, include_turns=include_turns)
    emit(report, as_json=as_json, jsonl=False, table=_groups_table)


def _groups_table(report: dict):  # type: ignore[no-untyped-def]
    from rich.table import Table

    t = Table(header_style="bold")
    for col in ("kept", "merged", "texts"):
        t.add_column(col, overflow="fold", no_wrap=col != "texts")
    for g in report["groups"]:
        t.add_row(g["kept"], "\n".join(g["merged"]), "\n".join(g["texts"]))
    verb = "would merge" if report["dry_run"] else "merged"
    t.caption = f"{verb} {report['merged']} memor{'y' if report['merged'] == 1 else 'ies'} in {len(report['groups'])} group(s)" + \
        (" (dry run: nothing stored)" if report["dry_run"] else "")
    return t
