"""remember, recall, forget, memories list/show."""
from __future__ import annotations

import json
import sys
from typing import Annotated, Any, List, Optional

import typer

from .common import (AgentOpt, JsonlOpt, JsonOpt, TsOpt, TypeOpt, UserOpt, by, confirm, date_option, name_check,
                     note_unknown_user, open_input, open_store, option, read_text_arg, store_for_writing)
from .output import emit, info, kv_table, memories_table, wants_json


TtlOpt = Annotated[Optional[str], option("--ttl", help="Forget it this long from now (2s, 90m, 12h, 30d, 2w): recall and context stop showing it then.",
                                         check=by("brandmind.expiry:check_ttl"))]


def _no_constant(name: str) -> None:
    raise ValueError(name)


def _meta(pairs: list[str]) -> dict:
    from brandmind.errors import UsageError

    out: dict = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--meta takes key=value, got {pair!r}", hint="e.g. --meta source=slack")
        try:
            out[key] = json.loads(value, parse_constant=_no_constant)
        except ValueError:  # not JSON (or NaN/Infinity, which JSON readers reject): a string
            out[key] = value
    return out


def remember(
    text: Annotated[str, typer.Argument(help="The memory, or - to read it from stdin.")],
    type: TypeOpt = "fact",
    user: UserOpt = None,
    agent: AgentOpt = None,
    importance: Annotated[float, option("--importance", "-i", help="How much it matters, 0 to 1.",
                                        check=by("brandmind.validate:importance"))] = 0.5,
    meta: Annotated[Optional[List[str]], typer.Option("--meta", "-m", help="key=value (repeatable; JSON values allowed).")] = None,
    ts: TsOpt = None,
    fact: Annotated[bool, typer.Option("--fact", help="TEXT is a JSON fact {subject, predicate, object, valid_from?, ...}: stored with reconciliation; prints the action and id.")] = False,
    extract: Annotated[bool, typer.Option("--extract", help="Also extract atomic facts from TEXT (config `extractor`: rules or llm; \"I\" is the user) and store them with reconciliation.")] = False,
    ttl: TtlOpt = None,
    pin: Annotated[bool, typer.Option("--pin", help="Pin it: never expired, never taken by `forget --older-than` (bm unpin ID undoes it).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Store one memory and print its id ({"id"} as JSON when piped).  The first write
    creates the store.

    \b
    Examples:
      echo "Ann moved to Lisbon in May" | bm remember - --type fact --user ann
      bm remember "Prefers green tea" -t preference -u ann --importance 0.8 --meta source=chat
      bm remember --fact '{"subject": "Ann", "predicate": "lives_in", "object": "Lisbon", "valid_from": "2024-05-01"}'
      bm remember "door code is 4711 today" -u ann --ttl 12h   # recalled for 12 hours, then forgotten
    """
    if fact and (ttl is not None or pin):
        from brandmind.errors import UsageError

        raise UsageError("--ttl and --pin do not go with --fact",
                         hint="store the fact, then `bm pin ID`; or remember plain text with --ttl")
    if fact and extract:
        from brandmind.errors import UsageError

        raise UsageError("--fact and --extract do not go together",
                         hint="--fact stores TEXT as one JSON fact; --extract finds facts in plain text")
    if fact:
        from .facts import remember_fact

        remember_fact(read_text_arg(text), type=type, user=user, agent=agent, importance=importance,
                      meta=_meta(meta or []), ts=ts, as_json=as_json)
        return
    from .quick import run_remember  # the body `bm remember` runs without typer too

    run_remember(text, type=type, user=user, agent=agent, importance=importance, meta=_meta(meta) if meta else None,
                 ts=ts, extract=extract, ttl=ttl, pin=pin, as_json=as_json)


def recall(
    query: Annotated[Optional[str], typer.Argument(help="What to look for (- reads stdin).")] = None,
    k: Annotated[Optional[int], typer.Option("-k", help="How many results [default: 10; with --agent 5 of its own + 3 global].")] = None,
    user: UserOpt = None,
    agent: AgentOpt = None,
    type: Annotated[Optional[List[str]], option("--type", "-t", help="Only these types (repeatable).",
                                                check=by("brandmind.validate:memory_type"))] = None,
    since: Annotated[Optional[str], date_option("--since", help="Only memories from this date on (ISO 8601).")] = None,
    until: Annotated[Optional[str], date_option("--until", help="Only memories before this date (ISO 8601).")] = None,
    now: Annotated[Optional[str], date_option("--now", help="What time words in the query are relative to (ISO 8601) [default: now].")] = None,
    as_of: Annotated[Optional[str], date_option("--as-of", help="What was true on this date (ISO 8601), instead of what is true now.")] = None,
    min_score: Annotated[Optional[float], option("--min-score", help="Leave out results scoring below this (see --explain for what scores are made of).",
                                                 check=_finite)] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Show which signals put each result there, and how much.")] = False,
    batch: Annotated[Optional[str], typer.Option("--batch", help="JSONL file (or -) of {\"query\", \"k\"?, \"id\"?, \"type\"?, \"since\"?, ...}: one result line per query; -k, --type, --since, --until, --now, --as-of and --min-score are the defaults of every line.")] = None,
    remote: Annotated[bool, typer.Option("--remote", help="Also search the graph remotes (Zep, Graphiti) and merge their hits, within their budget (700 ms by default); local results alone if they fail or are late.")] = False,
    as_json: JsonOpt = False,
    jsonl: JsonlOpt = False,
) -> None:
    """Find the memories that best answer QUERY, best first.

    \b
    Examples:
      bm recall "where does Ann live?" -u ann -k 3 | jq -r '.[0].text'
      bm recall "tea" -u ann --type preference --since 2024-01-01 --min-score 0.5
      printf '%s\\n' '{"query": "pets"}' '{"query": "job", "k": 1}' | bm recall --batch - -u ann -k 3
    """
    from brandmind.errors import UsageError

    if batch is not None:
        if query is not None:
            raise UsageError("give either QUERY or --batch, not both", hint="bm recall --batch queries.jsonl")
        _recall_batch(batch, user, agent, now=now, k=k, types=type or (), since=since, until=until,
                      as_of=as_of, min_score=min_score)
        return
    if query is None:
        raise UsageError("missing QUERY", hint='bm recall "what does Ann like?" (or --batch FILE)')
    from .quick import run_recall  # the body `bm recall` runs without typer too

    run_recall(query, k=k, user=user, agent=agent, types=tuple(type or ()), since=since, until=until, now=now,
               as_of=as_of, min_score=min_score, remote=remote, explain=explain, as_json=as_json, jsonl=jsonl)


def _finite(value: float) -> float:
    import math

    from brandmind.errors import InvalidInput

    if not math.isfinite(value):
        raise InvalidInput(f"must be a finite number, got {value!r}", hint="e.g. --min-score 0.5")
    return value


def _recall_batch(path: str, user: Optional[str], agent: Optional[str], **defaults: object) -> None:
    """One result line per query line; ``defaults`` (k, types, since, ...: the command line's
    options) apply to every line that does not set its own."""
    failed = 0

    def queries(fh):  # type: ignore[no-untyped-def]
        nonlocal failed
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                q = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                failed += 1
                q = {"id": lineno, "_error": f"line {lineno}: not valid JSON ({exc})"}
            except RecursionError:  # e.g. 200,000 nested brackets
                failed += 1
                q = {"id": lineno, "_error": f"line {lineno}: JSON nested too deeply to read"}
            if not isinstance(q, dict):
                failed += 1
                q = {"id": lineno, "_error": f"line {lineno}: expected a JSON object"}
            elif "id" not in q:  # a query without an id is known by its line number
                q = {**q, "id": lineno}
            yield q

    with open_store(if_missing="empty") as mem, open_input(path) as fh:
        mem.refresh_workspace(user)  # notes edited on disk (reads never refresh: brandmind/workspace.py)
        for q in queries(fh):
            if "_error" in q:
                out = {"id": q["id"], "error": q["_error"], "hint": 'each line is {"query": "...", "k": 10, "id": ...}'}
            else:
                out = next(mem.recall_batch([q], user=user, agent=agent, **defaults))  # type: ignore[arg-type]
                failed += "error" in out
            sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
            sys.stdout.flush()
    if failed:
        from brandmind.errors import InvalidInput

        raise InvalidInput(f"{failed} batch line(s) failed; their result lines carry the error",
                           hint="fix those lines; the other queries were answered")


def forget(
    memory_id: Annotated[Optional[str], typer.Argument(help="The id of a memory (m_...) or of a turn (b_...).")] = None,
    match: Annotated[Optional[str], typer.Option("--match", help="Forget the user's memories and turns containing every word of this text, and take the sentences saying it out of their core blocks and notes/profile files.")] = None,
    user: Annotated[Optional[str], option("--user", "-u", help="Whose memories --match or --older-than look in (default: the configured user).",
                                          check=name_check("user"))] = None,
    wipe_user: Annotated[Optional[str], option("--wipe-user", help="Forget everything of this user: memories, turns, graph, blocks, files.",
                                               check=name_check("user"))] = None,
    older_than: Annotated[Optional[str], option("--older-than", help="Forget the user's memories and turns dated more than this long ago (30d, 12h, 2w), except pinned ones.",
                                                check=by("brandmind.expiry:check_ttl"))] = None,
    expired: Annotated[bool, typer.Option("--expired", help="Forget now what expired (--ttl); also done on the next open and by the daemon.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --older-than: say how many would go, forget nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Forget memories and the turns they came from: gone from recall, context, beads,
    export and the store's files; the log keeps only a tombstone.  Pinned memories
    (bm pin) are left by --older-than and never expire; naming one by ID forgets it.

    \b
    Examples:
      bm forget m_01h...                               # a memory and the turns it came from
      bm forget b_01h... --yes                         # a turn and what was made from it
      bm forget --match "locker code" -u ann --yes     # ann's memories and turns with both words
      bm forget --older-than 30d -u ann --dry-run      # how many of ann's are older than 30 days
      bm forget --expired                              # what --ttl let expire, now
      bm forget --wipe-user ann --yes                  # everything of ann
    """
    _check_forget_args(memory_id, match, user, wipe_user, older_than, expired, dry_run)
    with open_store() as mem:
        if memory_id is not None:
            result = _forget_one(mem, memory_id, yes)
        elif wipe_user is not None:
            result = _forget_user(mem, wipe_user, yes)
        elif older_than is not None or expired:
            result = _forget_by_age(mem, older_than, user, dry_run, yes)
        else:
            result = _forget_matching(mem, match or "", user, yes)
        if "memories" in result:
            result = {"forgotten": result["memories"], "beads": result["beads"],
                      **{k: result[k] for k in ("blocks", "files") if k in result},
                      **({"dry_run": True} if dry_run else {}), **({"before": result["before"]} if "before" in result else {})}
    if wants_json(as_json):
        print(json.dumps(result))
    elif "user" in result:
        info(f"forgot {json.dumps(result['forgotten'])}")
    elif dry_run:
        info(f"would forget {len(result['forgotten'])} memories and {len(result['beads'])} turns"
             " (and the turns and memories they came from or gave)")
    elif result["forgotten"] or result["beads"] or result.get("blocks") or _edited(result.get("files", [])):
        edited = [f["path"] for f in _edited(result.get("files", []))]
        info(f"forgot {len(result['forgotten'])} memories and {len(result['beads'])} turns"
             + (f"; took out {_sentences(result['blocks'])}" if result.get("blocks") else "")
             + (f"; took the sentences out of {', '.join(edited)}" if edited else ""))


def _check_forget_args(memory_id: Optional[str], match: Optional[str], user: Optional[str], wipe_user: Optional[str],
                       older_than: Optional[str], expired: bool, dry_run: bool) -> None:
    from brandmind.errors import UsageError

    if user is not None and match is None and older_than is None:
        raise UsageError("-u/--user only scopes --match and --older-than",
                         hint=f"to forget everything of {user!r}: bm forget --wipe-user {user} --yes")
    if len([x for x in (memory_id, match, wipe_user, older_than, expired or None) if x is not None]) != 1:
        raise UsageError("give exactly one of ID, --match or --wipe-user (or --older-than, --expired)",
                         hint="bm forget ID, bm forget --match TEXT -u USER, bm forget --older-than 30d, "
                              "or bm forget --wipe-user USER")
    if dry_run and older_than is None:  # (what expired goes when the store opens: nothing to preview)
        raise UsageError("--dry-run goes with --older-than",
                         hint="bm forget --older-than 30d --dry-run")


def _forget_by_age(mem: Any, older_than: Optional[str], user: Optional[str], dry_run: bool, yes: bool) -> dict:
    """``--older-than AGE`` (after a confirmation) or ``--expired``."""
    from brandmind.errors import UsageError

    if older_than is None:
        return mem.forget_expired()
    found = mem.forget_older_than(older_than, user=user, dry_run=True)
    if dry_run or not (found["memories"] or found["beads"]):
        return found
    if not yes and not sys.stdin.isatty():
        raise UsageError(f"refusing to forget {len(found['memories'])} memories and {len(found['beads'])} turns "
                         f"dated before {found['before']} without confirmation", hint="add --yes to confirm (or --dry-run)")
    if not confirm(f"Forget {len(found['memories'])} memories and {len(found['beads'])} turns dated before "
                   f"{found['before']}?", yes):
        raise typer.Exit(1)
    return mem.forget_older_than(older_than, user=user)


def _forget_one(mem: Any, memory_id: str, yes: bool) -> dict:
    is_bead = memory_id.startswith("b_")
    text = mem.get_bead(memory_id)["content"] if is_bead else mem.get(memory_id)["text"]
    if not confirm(f"Forget {memory_id}: {text[:80]!r}?", yes):
        raise typer.Exit(1)
    return mem.forget_many([], [memory_id]) if is_bead else mem.forget_many([memory_id])


def _forget_user(mem: Any, wipe_user: str, yes: bool) -> dict:
    from brandmind.errors import UsageError

    if not yes and not sys.stdin.isatty():
        raise UsageError(f"refusing to forget all of user {wipe_user!r} without confirmation",
                         hint="add --yes to confirm")
    counts = mem.admin.stats(user=wipe_user)["counts"]
    if not confirm(f"Forget everything of user {wipe_user!r} ({counts['memories']} memories, {counts['beads']} beads)?", yes):
        raise typer.Exit(1)
    return {"user": wipe_user, "forgotten": mem.forget_user(wipe_user)}


def _forget_matching(mem: Any, match: str, user: Optional[str], yes: bool) -> dict:
    from brandmind.errors import UsageError

    found = mem.match(match, user=user)
    turns = mem.match_beads(match, user=user)
    held = mem.scrub_blocks(match, user=user, dry_run=True)  # core blocks that say it
    files = mem.scrub_files(match, user=user, dry_run=True)  # and workspace files
    edited = _edited(files)
    if not found and not turns and not held and not edited:
        info(f"nothing matched {match!r} for user {mem.store.user(user)!r}: nothing forgotten")
        _kept_files(files)
        return {"forgotten": [], "beads": [], "blocks": [], "files": files}
    what = (f"{len(found)} memories and {len(turns)} turns" + (f" and {_sentences(held)}" if held else "")
            + (f" and {sum(f['sentences'] for f in edited)} sentence(s) of file(s) "
               + ", ".join(f["path"] for f in edited) if edited else ""))
    if not yes and not sys.stdin.isatty():
        raise UsageError(f"refusing to forget {what} without confirmation",
                         hint="add --yes to confirm (bm recall shows what matches)")
    if found and sys.stdin.isatty() and not yes:
        from .output import console

        console(stderr=True).print(memories_table(found))
    if not confirm(f"Forget these {what}?", yes):
        raise typer.Exit(1)
    out = mem.forget_matching(match, user=user)
    _kept_files(out["files"])
    return {**out, "memories": out.pop("forgotten")}


def _edited(files: list[dict]) -> list[dict]:
    """The files --match takes sentences out of (recalled ones: drafts are only named)."""
    return [f for f in files if f["sentences"] and f.get("why") != "never recalled"]


def _kept_files(files: list[dict]) -> None:
    """Say which files still hold the words (drafts, system: not indexed, so never in a context)."""
    for f in files:
        if f.get("kept"):
            why = ("drafts and system files are never recalled" if f["why"] == "never recalled"
                   else "every word, but in no one sentence: not edited")
            info(f"note: {f['path']} still says it ({why}): "
                 f"`bm fs cat {f['path']}` shows it, `bm fs write` or `bm fs rm` changes it")


def _sentences(blocks: list[dict]) -> str:
    """'2 sentence(s) of block human (and agent helper's notes)': what --match takes out of blocks."""
    names = ", ".join(b["label"] + (f" of agent {b['agent']}" if b["agent"] else "") for b in blocks)
    return f"{sum(b['sentences'] for b in blocks)} sentence(s) of block(s) {names}"


def pin(memory_id: Annotated[str, typer.Argument(help="Memory id (m_...).")], as_json: JsonOpt = False) -> None:
    """Pin a memory: it never expires (--ttl) and `forget --older-than` leaves it (and the
    turns it came from); `bm forget ID` still forgets it.  Syncs to your other devices.

    \b
    Example:
      bm pin m_01h...   # prints the id ({"id", "pinned": true} when piped)
    """
    _set_pin(memory_id, True, as_json)


def unpin(memory_id: Annotated[str, typer.Argument(help="Memory id (m_...).")], as_json: JsonOpt = False) -> None:
    """Unpin a memory: a ttl it has applies again (past it, it is forgotten at once).

    \b
    Example:
      bm unpin m_01h...
    """
    _set_pin(memory_id, False, as_json)


def _set_pin(memory_id: str, pinned: bool, as_json: bool) -> None:
    with store_for_writing() as mem:
        item = mem.pin(memory_id, pinned)
        if not pinned:
            mem.forget_expired()
    print(json.dumps({"id": item["id"], "pinned": item["pinned"]}) if wants_json(as_json) else item["id"])


memories_app = typer.Typer(help="List and show stored memories.", no_args_is_help=True)


@memories_app.command("list")
def memories_list(
    user: UserOpt = None,
    agent: AgentOpt = None,
    type: Annotated[Optional[str], option("--type", "-t", help="Only this type (fact, preference, decision, ...).",
                                          check=by("brandmind.validate:memory_type"))] = None,
    limit: Annotated[int, option("--limit", "-n", help="How many, at least 1.", check=_at_least(1, "--limit 50"))] = 50,
    offset: Annotated[int, option("--offset", help="Skip this many of the newest first (paging).",
                                  check=_at_least(0, "--offset 100"))] = 0,
    all_users: Annotated[bool, typer.Option("--all-users", help="Every user's memories.")] = False,
    as_json: JsonOpt = False,
    jsonl: JsonlOpt = False,
) -> None:
    """Newest memories first.

    \b
    Examples:
      bm memories list -u ann -n 10
      bm memories list --all-users --type preference --json
    """
    with open_store(if_missing="empty") as mem:
        items = mem.list_memories(user=user, agent=agent, type=type, limit=limit, offset=offset,
                                  all_users=all_users)
        if not items and not all_users and not offset:
            note_unknown_user(mem, user)
    emit(items, as_json=as_json, jsonl=jsonl, table=memories_table)


@memories_app.command("show")
def memories_show(memory_id: Annotated[str, typer.Argument(help="Memory id.")], as_json: JsonOpt = False) -> None:
    """One memory with its provenance.

    \b
    Example:
      bm memories show m_01h... --json | jq .provenance
    """
    with open_store() as mem:
        item = mem.get(memory_id)
    emit(item, as_json=as_json, jsonl=False, table=lambda m: kv_table(m, title=m["id"]))


@memories_app.command("history")
def memories_history(memory_id: Annotated[str, typer.Argument(help="Memory id of a fact.")],
                     as_json: JsonOpt = False, jsonl: JsonlOpt = False) -> None:
    """How a fact changed: its versions oldest first, with world time (valid from/to) and
    system time (recorded, retired).

    \b
    Example:
      bm memories history m_01h... --json
    """
    with open_store() as mem:
        items = mem.facts.history(memory_id)
    emit(items, as_json=as_json, jsonl=jsonl, table=_history_table)


def _history_table(items: list[dict]):  # type: ignore[no-untyped-def]
    """The versions of a fact; the ids whole, the text with its world and system time on a dim
    line under it, so that it fits an 80-column terminal."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
    t.add_column("id", no_wrap=True, min_width=8)
    t.add_column("status", overflow="fold")
    t.add_column("fact", overflow="fold", ratio=1, min_width=20)
    for m in items:
        cell = Text(m["text"])
        when = f"valid {(m['valid_from'] or '…')[:10]} → {(m['valid_to'] or '…')[:10]}"
        if m["retired_at"]:
            when += f" · retired {m['retired_at'][:10]}"
        cell.append(f"\n{when} · seen {1 + m['confirmations']}", style="dim")
        t.add_row(m["id"], m["status"] + (f" ({m['reason']})" if m.get("reason") else ""), cell)
    t.caption = "valid: world time; retired: when bm stopped believing it (--json has the exact times)"
    return t


@memories_app.command("link")
def memories_link(
    src: Annotated[str, typer.Argument(help="Source memory id.")],
    dst: Annotated[str, typer.Argument(help="Target memory id.")],
    type: Annotated[str, option("--type", "-t", help="extends, contradicts, supports, example_of, part_of, relates_to, answers, caused_by or temporal.",
                                check=_link_type)] = "relates_to",
    strength: Annotated[float, option("--strength", "-s", help="How strong the link is, 0 to 1.",
                                      check=_fraction("strength", "--strength 0.8"))] = 0.5,
    as_json: JsonOpt = False,
) -> None:
    """A typed link between two memories; prints its id (the link as JSON when piped).

    \b
    Example:
      bm memories link m_new m_old --type contradicts --strength 0.8
    """
    with open_store() as mem:
        edge = mem.graph.link(src, dst, type, strength)
    print(json.dumps(edge) if wants_json(as_json) else edge["id"])


def _at_least(low: int, example: str):  # type: ignore[no-untyped-def]
    def check(value: int) -> int:
        from brandmind.errors import InvalidInput

        if value < low:
            raise InvalidInput(f"must be at least {low}, got {value}", hint=f"e.g. {example}")
        return value

    return check


def _fraction(what: str, example: str):  # type: ignore[no-untyped-def]
    def check(value: float) -> float:
        from brandmind.errors import InvalidInput

        if not 0.0 <= value <= 1.0:  # NaN too
            raise InvalidInput(f"{what} must be a number from 0 to 1, got {value!r}", hint=f"e.g. {example}")
        return value

    return check


def _link_type(value: str) -> str:
    from brandmind.errors import InvalidInput
    from brandmind.facts import LINK_TYPES

    if value not in LINK_TYPES:
        raise InvalidInput(f"unknown link type {value!r}", hint="use one of: " + ", ".join(LINK_TYPES))
    return value
