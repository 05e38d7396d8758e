"""bm block list|show|set|append|replace|edit|define: core memory blocks (brandmind/blocks.py)."""
from __future__ import annotations

import os
from typing import Annotated, Any, Optional

import typer

from .common import (AgentOpt, JsonOpt, UserOpt, by, checked, open_store, option, read_text_arg,
                     store_for_writing)
from .output import emit, emit_json, info, kv_table, wants_json

block_app = typer.Typer(
    help="Core memory blocks: labelled text with a character limit (human, agent_persona, "
         "user_persona_profile, custom ones, and the shared <persona>_service_experience blocks). "
         "Concurrent edits merge (CRDT).",
    no_args_is_help=True)

LabelArg = Annotated[str, typer.Argument(help="Block label: human, agent_persona, user_persona_profile, "
                                              "<handle>_service_experience, or a custom label.",
                                         callback=checked(by("brandmind.blocks:validate_label")))]
PersonaOpt = Annotated[Optional[str], option("--persona", "-p", help="A persona handle: its shared block.",
                                             check=by("brandmind.blocks:validate_handle"))]
RedactOpt = Annotated[bool, typer.Option("--redact", help="Shared persona blocks: store PII found in the text "
                                                          "as [REDACTED:<kind>] instead of refusing the write.")]
AsAgentOpt = Annotated[bool, typer.Option("--as-agent", help="Write as the agent (with --agent): read-only "
                                                             "blocks refuse. By default the CLI writes as the user.")]
LimitOpt = Annotated[Optional[int], option("--limit", help="Character limit of the block.",
                                           check=by("brandmind.blocks:check_limit"))]
DescriptionOpt = Annotated[Optional[str], option("--description", "-d", help="What the block is for.",
                                                 check=by("brandmind.blocks:check_description"))]
ReadOnlyOpt = Annotated[Optional[bool], typer.Option("--read-only/--writable",
                                                     help="Whether agents may write the block.")]


def _scope(b: dict) -> str:
    if b["scope"] == "agent":
        return f"agent:{b['agent']}"
    if b["scope"] == "persona":
        return f"persona:{b['persona']}"
    return "user"


def _size(b: dict) -> str:
    out = f"{b['chars']:,}/{b['limit']:,}"
    if b["over_limit"]:
        out += f" ({b['over_by']:,} OVER)"
    return out


def _table(items: list[dict]) -> Any:
    from rich.table import Table

    t = Table(header_style="bold")
    for col in ("label", "scope", "chars", "flags", "text"):
        t.add_column(col, overflow="fold" if col == "text" else "ellipsis", no_wrap=col != "text")
    for b in items:
        flags = ",".join(f for f, on in (("read-only", b["read_only"]), ("over-limit", b["over_limit"])) if on)
        preview = b["value"].replace("\n", " ⏎ ")
        t.add_row(b["label"], _scope(b), _size(b), flags, preview[:120] + ("…" if len(preview) > 120 else ""))
    if not items:
        t.caption = "no blocks yet: `bm block set human \"...\"` creates one"
    elif any(b["over_limit"] for b in items):
        t.caption = "over-limit: concurrent edits merged past the limit; trim it (`bm block edit LABEL`)"
    return t


def _show(b: dict) -> Any:
    fields = {k: b[k] for k in ("label", "scope", "user", "agent", "persona", "description", "read_only",
                                "updated", "updated_by", "id") if b.get(k) is not None}
    fields["scope"] = _scope(b)
    fields["chars"] = _size(b)
    if b["over_limit"]:
        fields["over_limit"] = (f"{b['over_by']:,} characters over its limit after merging concurrent edits; "
                                f"trim it with `bm block edit {b['label']}` or `bm block replace`")
    if not b["exists"]:
        fields["exists"] = "no (nothing written yet; these are its defaults)"
    fields["value"] = b["value"]
    return kv_table(fields, title=b["label"])


def _written(b: dict, as_json: bool, verb: str) -> None:
    if wants_json(as_json):
        emit_json(b)
        return
    msg = f"{verb} {b['label']} ({_scope(b)}): {_size(b)} characters"
    if b.get("replaced"):
        msg += f", {b['replaced']} occurrence(s) replaced"
    if b.get("redacted"):
        msg += "; redacted " + ", ".join(f"{h['kind']} {h['text']!r}" for h in b["redacted"])
    if b["over_limit"]:
        msg += " — still over its limit after a merge: trim it further"
    info(msg)


@block_app.command("list")
def block_list(user: UserOpt = None, agent: AgentOpt = None, as_json: JsonOpt = False) -> None:
    """The user's blocks, their agents' (only --agent's when given) and their personas' shared blocks.

    \b
    Example:
      bm block list -u ann --agent coach
    """
    with open_store(if_missing="empty") as mem:
        items = mem.blocks.list(user=user, agent=agent)
    emit(items, as_json=as_json, jsonl=False, table=_table)


@block_app.command("show")
def block_show(label: LabelArg, user: UserOpt = None, agent: AgentOpt = None, persona: PersonaOpt = None,
               as_json: JsonOpt = False) -> None:
    """One block: its text, size and limit (and whether a merge left it over the limit).

    \b
    Example:
      bm block show human -u ann --json | jq -r .value
    """
    with open_store(if_missing="empty") as mem:
        b = mem.blocks.get(label, user=user, agent=agent, persona=persona)
    emit(b, as_json=as_json, jsonl=False, table=_show)


@block_app.command("set")
def block_set(label: LabelArg,
              text: Annotated[str, typer.Argument(help="The new text, or - to read it from stdin.")],
              user: UserOpt = None, agent: AgentOpt = None, persona: PersonaOpt = None,
              limit: LimitOpt = None, description: DescriptionOpt = None, read_only: ReadOnlyOpt = None,
              redact: RedactOpt = False, as_agent: AsAgentOpt = False, as_json: JsonOpt = False) -> None:
    """Replace a block's text (creating the block).

    \b
    Example:
      bm block set human "Prefers tables. Based in Lisbon." --user ann
    """
    with store_for_writing() as mem:
        b = mem.blocks.set(label, read_text_arg(text), user=user, agent=agent, persona=persona, limit=limit,
                          description=description, read_only=read_only, redact=redact,
                          by_agent=as_agent)
    _written(b, as_json, "set")


@block_app.command("append")
def block_append(label: LabelArg,
                 text: Annotated[str, typer.Argument(help="The text to add (on a new line), or - for stdin.")],
                 user: UserOpt = None, agent: AgentOpt = None, persona: PersonaOpt = None,
                 redact: RedactOpt = False, as_agent: AsAgentOpt = False, as_json: JsonOpt = False) -> None:
    """Add a line at the end of a block (concurrent appends from other processes both survive).

    \b
    Example:
      bm block append qsr_real_estate_service_experience "Site selection: check cannibalisation first." --user ann
    """
    with store_for_writing() as mem:
        b = mem.blocks.append(label, read_text_arg(text), user=user, agent=agent, persona=persona,
                             redact=redact, by_agent=as_agent)
    _written(b, as_json, "appended to")


@block_app.command("replace")
def block_replace(label: LabelArg,
                  old: Annotated[str, typer.Argument(help="Text to find (every occurrence).")],
                  new: Annotated[str, typer.Argument(help="What to put instead ('' deletes).")],
                  user: UserOpt = None, agent: AgentOpt = None, persona: PersonaOpt = None,
                  redact: RedactOpt = False, as_agent: AsAgentOpt = False, as_json: JsonOpt = False) -> None:
    """Replace every occurrence of OLD with NEW.

    \b
    Example:
      bm block replace human "Lisbon" "Porto" --user ann
    """
    with store_for_writing() as mem:
        b = mem.blocks.replace(label, old, new, user=user, agent=agent, persona=persona, redact=redact,
                              by_agent=as_agent)
    _written(b, as_json, "replaced in")


@block_app.command("define")
def block_define(label: LabelArg, user: UserOpt = None, agent: AgentOpt = None, persona: PersonaOpt = None,
                 limit: LimitOpt = None, description: DescriptionOpt = None, read_only: ReadOnlyOpt = None,
                 as_agent: AsAgentOpt = False, as_json: JsonOpt = False) -> None:
    """Create a block, or change its limit, description or read-only flag.

    \b
    Example:
      bm block define project_notes --limit 4000 --description "Open questions of the project" --user ann
    """
    with store_for_writing() as mem:
        b = mem.blocks.define(label, limit=limit, description=description, read_only=read_only, user=user,
                             agent=agent, persona=persona, by_agent=as_agent)
    _written(b, as_json, "defined")


@block_app.command("edit")
def block_edit(label: LabelArg, user: UserOpt = None, agent: AgentOpt = None, persona: PersonaOpt = None,
               redact: RedactOpt = False, as_agent: AsAgentOpt = False, as_json: JsonOpt = False) -> None:
    """Edit a block in $VISUAL / $EDITOR; the change is applied as one edit, merged with
    whatever others wrote meanwhile.

    \b
    Example:
      EDITOR=nano bm block edit human -u ann
    """
    import shlex
    import subprocess
    import tempfile

    from brandmind.errors import InvalidInput, UsageError

    editor = (os.environ.get("VISUAL") or os.environ.get("EDITOR") or "").strip()
    if not editor:
        raise UsageError("no editor to open: $VISUAL and $EDITOR are not set",
                         hint=f"e.g. `EDITOR=nano bm block edit {label}`, or `bm block set {label} -` "
                              "to read the text from stdin")
    try:
        argv = shlex.split(editor)
    except ValueError as exc:
        raise UsageError(f"cannot read the editor command {editor!r}: {exc}",
                         hint="fix $VISUAL / $EDITOR, e.g. EDITOR='code --wait'") from None
    with store_for_writing() as mem:
        snap = mem.blocks.edit_begin(label, user=user, agent=agent, persona=persona)
    fd, path = tempfile.mkstemp(prefix=f"bm-block-{label}-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(snap.value)
        try:
            rc = subprocess.run([*argv, path]).returncode
        except OSError as exc:
            raise InvalidInput(f"cannot run the editor {editor!r}: {exc.strerror or exc}",
                               hint="set $VISUAL or $EDITOR to an installed editor; the block was not changed") from None
        if rc != 0:
            raise InvalidInput(f"the editor {editor!r} exited with status {rc}; block {label!r} was not changed",
                               hint=f"save and quit the editor normally, or use `bm block set {label} -`")
        with open(path, "rb") as fh:
            data = fh.read()
    finally:
        os.unlink(path)
    try:
        new = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the edited text is not valid UTF-8 (byte {exc.start}); block {label!r} was not changed",
                           hint="save the file as UTF-8") from None
    if not snap.value.endswith("\n"):  # editors add a final newline
        new = new[:-2] if new.endswith("\r\n") else new[:-1] if new.endswith("\n") else new
    if new == snap.value:
        info(f"no change to {label}")
        if wants_json(as_json):
            with open_store() as mem:
                emit_json(mem.blocks.get(label, user=user, agent=agent, persona=persona))
        return
    with store_for_writing() as mem:
        b = mem.blocks.edit_commit(snap, new, user=user, agent=agent, redact=redact, by_agent=as_agent)
    _written(b, as_json, "edited")

