"""bm hooks: memory for coding agents through their lifecycle hooks (Claude Code, Codex).

``bm hooks install claude-code`` merges five command hooks into Claude Code's settings.json
(``{"hooks": {Event: [{"matcher", "hooks": [{"type": "command", "command", "timeout"}]}]}}``),
leaving every other setting and every other tool's hooks as they are.  Each runs
``bm hooks run EVENT``, which reads the event's JSON on stdin:

- ``SessionStart`` -> ``session-start``: prints ``bm context`` for the project (the basename of
  ``cwd``) as ``hookSpecificOutput.additionalContext``, which the agent adds to its context;
  on ``resume``/``compact`` the recent turns are the session's own (thread = ``session_id``).
- ``UserPromptSubmit`` -> ``prompt``: ingests ``prompt`` as a user turn of the thread.
- ``PostToolUse`` -> ``tool``: ingests ``tool_name``/``tool_input``/``tool_response`` as a tool
  turn (cut to HEAD + TAIL characters; a bead over ``blob_threshold`` goes to the blob store).
- ``Stop`` -> ``stop``: ingests the reply (``last_assistant_message``, else the transcript's
  last assistant text) as an assistant turn; ``--extract`` also extracts facts from this turn.
- ``SessionEnd`` -> ``session-end``: extracts facts from the session's turns that no fact
  cites yet (config ``extractor``; what ``bm ingest --extract`` does after an ingest).

Codex has the same hooks (``~/.codex/hooks.json``, same format; no SessionEnd in most
versions), so ``bm hooks install codex`` writes the first four with ``stop --extract``.

A hook never breaks the agent: any failure is one ``Error:`` line on stderr and exit 1,
which both agents treat as a non-blocking error (exit 2 would block a prompt or a stop).
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .common import UserOpt, checked, open_store, store_for_writing
from .output import emit_json, info, wants_json

hooks_app = typer.Typer(help="Memory for coding agents through their hooks (Claude Code, Codex).",
                        no_args_is_help=True)

# client -> [(agent event, `bm hooks run` arguments, timeout in seconds)]
EVENTS = {
    "claude-code": [("SessionStart", "session-start", 30), ("UserPromptSubmit", "prompt", 30),
                    ("PostToolUse", "tool", 30), ("Stop", "stop", 30),
                    # SessionEnd hooks get 1.5 s unless they declare a timeout (at most 60 s)
                    ("SessionEnd", "session-end", 60)],
    "codex": [("SessionStart", "session-start", 30), ("UserPromptSubmit", "prompt", 30),
              ("PostToolUse", "tool", 30), ("Stop", "stop --extract", 60)],
}
RUN_EVENTS = ("session-start", "prompt", "tool", "stop", "session-end")
OURS = re.compile(r"(bm|brandmind)\S*\s.*\bhooks\s+run\s+(" + "|".join(RUN_EVENTS) + r")\b")
HEAD, TAIL = 100_000, 20_000  # characters of a tool turn kept from its start and its end
TURN_WINDOW = 200  # beads of the session read back to find the current turn (stop --extract)


class HookFailed(Exception):
    """Any failure of `bm hooks run`: printed as one line, exit 1 (never 2, which blocks)."""


def _client(value: str) -> str:
    from brandmind.errors import InvalidInput

    if value not in EVENTS:
        raise InvalidInput(f"unknown client {value!r}", hint="use one of: " + ", ".join(EVENTS))
    return value


def _scope(value: str) -> str:
    from brandmind.errors import InvalidInput

    if value not in ("user", "project"):
        raise InvalidInput(f"unknown scope {value!r}", hint="use user (your own settings) or project (this directory's)")
    return value


ClientArg = Annotated[str, typer.Argument(help="The agent: claude-code or codex.", callback=checked(_client))]
SettingsOpt = Annotated[Optional[Path], typer.Option(
    "--settings", help="The file to edit (default: Claude Code's settings.json, Codex's hooks.json, of --scope).")]
ScopeOpt = Annotated[str, typer.Option("--scope", help="user (~/.claude/settings.json, ~/.codex/hooks.json) or "
                                       "project (.claude/settings.json, .codex/hooks.json here).",
                                       callback=checked(_scope))]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print what would be written; write nothing.")]
JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON (the default when stdout is not a terminal).")]


# -- the settings file -------------------------------------------------------------------------------
def settings_path(client: str, scope: str, given: Path | None) -> Path:
    if given is not None:
        return given.expanduser().absolute()
    if client == "claude-code":
        base = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") if scope == "user" \
            else Path.cwd() / ".claude"
        return base / "settings.json"
    base = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") if scope == "user" else Path.cwd() / ".codex"
    return base / "hooks.json"


def load_settings(path: Path) -> dict:
    """The settings as a dict ({} for a missing or empty file); a file bm cannot read or parse
    is an error, and it is never overwritten."""
    from brandmind.errors import ConfigError

    keep = "bm changed nothing; fix the file by hand, or give another with --settings"
    if not path.exists():
        return {}
    if path.is_dir():
        raise ConfigError(f"{path} is a directory, not a settings file", hint="give the JSON file with --settings")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", hint=f"check its permissions; {keep}") from None
    if not raw.strip():
        return {}
    try:
        doc = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text", hint=keep) from None
    except RecursionError:
        raise ConfigError(f"{path} is nested too deep to be a settings file", hint=keep) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
                          hint=keep) from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path} holds a JSON {type(doc).__name__}, not an object", hint=keep)
    hooks = doc.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise ConfigError(f'"hooks" in {path} is a {type(hooks).__name__}, not an object', hint=keep)
    for event, groups in (hooks or {}).items():
        if not isinstance(groups, list):
            raise ConfigError(f'"hooks.{event}" in {path} is not a list of matcher groups', hint=keep)
    return doc


def write_settings(path: Path, doc: dict) -> None:
    """Write atomically (a temporary file renamed over the old one), keeping its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.bm-{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if path.exists():
        os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)


def is_ours(handler: Any) -> bool:
    return isinstance(handler, dict) and isinstance(handler.get("command"), str) and bool(OURS.search(handler["command"]))


def strip_ours(hooks: dict) -> list[tuple[str, str]]:
    """Remove bm's handlers from every event (groups and events left empty by that go too);
    returns the (event, command) pairs removed.  Everything else stays as it was."""
    removed = []
    for event in list(hooks):
        groups = hooks[event]
        kept_groups = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list) or not any(is_ours(h) for h in handlers):
                kept_groups.append(group)
                continue
            removed += [(event, h["command"]) for h in handlers if is_ours(h)]
            rest = [h for h in handlers if not is_ours(h)]
            if rest:
                kept_groups.append({**group, "hooks": rest})
        if kept_groups or not groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    return removed


def bm_command() -> list[str]:
    """How to run this bm from anywhere: the `bm` script of this installation, by absolute
    path (else the one on PATH, else this Python with -m)."""
    import shutil

    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name in ("bm", "brandmind", "bm.exe") and argv0.is_file():
        return [str(argv0.resolve())]
    beside = Path(sys.executable).parent / ("bm.exe" if os.name == "nt" else "bm")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("bm")
    if found:
        return [str(Path(found).resolve())]
    return [sys.executable, "-m", "brandmind.cli.app"]


def hook_command(run_args: str, user: str | None) -> str:
    import shlex

    parts = [shlex.quote(p) for p in bm_command()]
    home = os.environ.get("BM_HOME")
    if home:  # (also what --home sets)
        parts += ["--home", shlex.quote(str(Path(home).expanduser().resolve()))]
    parts += ["hooks", "run", *run_args.split()]
    if user:
        parts += ["--user", shlex.quote(user)]
    return " ".join(parts)


def _say_changes(client: str, path: Path, changes: list[tuple[str, str]], *, verb: str, dry_run: bool,
                 as_json: bool) -> None:
    if wants_json(as_json):
        emit_json({"client": client, "settings": str(path), "dry_run": dry_run,
                   "hooks": [{"event": e, "command": c} for e, c in changes]})
        return
    sys.stdout.write(f"{'would ' if dry_run else ''}{verb} {len(changes)} hook(s) {'in' if verb == 'wrote' else 'from'} {path}:\n")
    for event, command in changes:
        sys.stdout.write(f"  {event}: {command}\n")


# -- install / uninstall ----------------------------------------------------------------------------
@hooks_app.command("install")
def install(client: ClientArg, settings: SettingsOpt = None, scope: ScopeOpt = "user", user: UserOpt = None,
            dry_run: DryRunOpt = False, as_json: JsonOut = False) -> None:
    """Add bm's hooks to the agent's settings (other settings and hooks are kept; running it
    again replaces bm's entries instead of adding more).  The commands name this bm by
    absolute path, with --home when BM_HOME is set.

    Claude Code: SessionStart (bm context), UserPromptSubmit and PostToolUse (ingest),
    Stop (ingest the reply), SessionEnd (extract facts).  Codex (hooks.json, same format):
    the first four, its Stop also extracting; Codex runs a new hook once you trust it in /hooks.

    \b
    Examples:
      bm hooks install claude-code
      bm hooks install claude-code --scope project --dry-run
      bm hooks install codex --user ann
    """
    path = settings_path(client, scope, settings)
    doc = load_settings(path)
    hooks = doc.setdefault("hooks", {})
    strip_ours(hooks)
    wrote = []
    for event, run_args, timeout in EVENTS[client]:
        command = hook_command(run_args, user)
        hooks.setdefault(event, []).append(
            {"matcher": "", "hooks": [{"type": "command", "command": command, "timeout": timeout}]})
        wrote.append((event, command))
    if not dry_run:
        write_settings(path, doc)
    _say_changes(client, path, wrote, verb="wrote", dry_run=dry_run, as_json=as_json)
    if client == "codex" and not dry_run:
        info("note: Codex runs a new or changed hook only after you trust it: open /hooks in Codex and trust "
             "bm's four hooks (Codex before 0.124 also needs `[features] codex_hooks = true` in config.toml)")


@hooks_app.command("uninstall")
def uninstall(client: ClientArg, settings: SettingsOpt = None, scope: ScopeOpt = "user",
              dry_run: DryRunOpt = False, as_json: JsonOut = False) -> None:
    """Remove exactly bm's hooks from the agent's settings; everything else stays.

    \b
    Examples:
      bm hooks uninstall claude-code
      bm hooks uninstall codex --scope project
    """
    path = settings_path(client, scope, settings)
    doc = load_settings(path)
    hooks = doc.get("hooks")
    removed = strip_ours(hooks) if isinstance(hooks, dict) else []
    if isinstance(hooks, dict) and not hooks and removed:
        del doc["hooks"]
    if removed and not dry_run:
        write_settings(path, doc)
    _say_changes(client, path, removed, verb="removed", dry_run=dry_run, as_json=as_json)
    if not removed:
        info(f"note: no bm hooks in {path}; nothing changed")


# -- run: one event from stdin -----------------------------------------------------------------------
@hooks_app.command("run")
def run(
    event: Annotated[str, typer.Argument(help="session-start, prompt, tool, stop or session-end.")],
    user: UserOpt = None,
    budget: Annotated[int, typer.Option("--budget", "-b", help="session-start: the context's token budget.")] = 1500,
    extract: Annotated[bool, typer.Option("--extract", help="stop: also extract facts from this turn (for agents without SessionEnd, e.g. Codex).")] = False,
    plain: Annotated[bool, typer.Option("--plain", help="session-start: print the context as plain text instead of the hook JSON.")] = False,
) -> None:
    """Handle one hook event: its JSON comes on stdin, as the agent sends it.  The thread of
    the turns is the agent's session_id; the user is config `user` unless --user.  Any
    failure prints one Error: line and exits 1, which the agents treat as non-blocking.

    \b
    Examples:
      echo '{"session_id": "s1", "cwd": "/src/app", "source": "startup"}' | bm hooks run session-start --plain
      echo '{"session_id": "s1", "prompt": "I prefer tabs"}' | bm hooks run prompt -u ann
    """
    from brandmind.errors import BMError

    try:
        if event not in RUN_EVENTS:
            raise HookFailed(f"unknown hook event {event!r} (hint: use one of: {', '.join(RUN_EVENTS)})")
        data = read_event()
        HANDLERS[event](data, user=user, budget=budget, extract=extract, plain=plain)
    except HookFailed as exc:
        _fail(str(exc))
    except BMError as exc:
        _fail(exc.message + (f" (hint: {exc.hint})" if exc.hint else ""))
    except Exception as exc:  # noqa: BLE001 - a hook must never break the agent with a traceback
        _fail(f"bm hooks run {event}: {type(exc).__name__}: {exc} (hint: run it again by hand with the same "
              "stdin to see more; please report it)")


def _fail(line: str) -> None:
    sys.stderr.write(f"Error: {' '.join(line.split())}\n")
    raise typer.Exit(1)


def read_event() -> dict:
    raw = sys.stdin.buffer.read()
    how = ("hint: the agent sends the event's JSON on stdin; by hand: "
           "echo '{\"session_id\": \"s1\", \"prompt\": \"hi\"}' | bm hooks run prompt")
    if not raw.strip():
        raise HookFailed(f"no event JSON on stdin ({how})")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise HookFailed(f"the event on stdin is not UTF-8 ({how})") from None
    except json.JSONDecodeError as exc:
        raise HookFailed(f"the event on stdin is not valid JSON: {exc.msg} at column {exc.colno} ({how})") from None
    except RecursionError:
        raise HookFailed(f"the event on stdin is nested too deep ({how})") from None
    if not isinstance(data, dict):
        raise HookFailed(f"the event on stdin is a JSON {type(data).__name__}, not an object ({how})")
    return data


def _field(data: dict, key: str, *, required: bool = True) -> str | None:
    value = data.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise HookFailed(f"the event has no {key} (a non-empty string) (hint: the agent's hook JSON carries one)")
    return value


def _turn(data: dict, role: str, content: str, msg_id: str | None, **meta: Any) -> dict:
    session = _field(data, "session_id")
    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
    msg = {"role": role, "content": content, "thread": session,
           "meta": {k: v for k, v in {"hook": data.get("hook_event_name"), "cwd": cwd, **meta}.items()
                    if isinstance(v, str) and v}}
    if msg_id:
        msg["id"] = msg_id[:128]
    return msg


def _ingest(msg: dict, user: str | None) -> None:
    with store_for_writing() as mem:
        mem.ingest([msg], user=user)


# -- the events ----------------------------------------------------------------------------------------
def on_session_start(data: dict, *, user: str | None, budget: int, plain: bool, **_: Any) -> None:
    session = _field(data, "session_id")
    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) and data.get("cwd") else os.getcwd()
    project = Path(cwd).name or cwd
    own = data.get("source") in ("resume", "compact")  # else a new session: the user's recent turns
    with open_store(if_missing="empty") as mem:
        result = mem.context(f"project {project}", budget=budget, user=user, thread=session if own else None)
        name = mem.store.user(user)
    if not result["text"]:
        return
    text = (f"Memory from bm (user {name}, project {project}); `bm recall QUERY -u {name}` finds more.\n\n"
            + result["text"])
    if plain:
        sys.stdout.write(text + "\n")
    else:
        sys.stdout.write(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                                            "additionalContext": text}}, ensure_ascii=False) + "\n")


def on_prompt(data: dict, *, user: str | None, **_: Any) -> None:
    prompt = data.get("prompt")
    if not isinstance(prompt, str):
        raise HookFailed("the event has no prompt (a string) (hint: wire `bm hooks run prompt` to UserPromptSubmit)")
    if not prompt.strip():
        return
    turn_id = data.get("prompt_id") or data.get("turn_id")
    _ingest(_turn(data, "user", prompt, turn_id if isinstance(turn_id, str) else None), user)


def on_tool(data: dict, *, user: str | None, **_: Any) -> None:
    name = _field(data, "tool_name")
    content = tool_text(name, data.get("tool_input"), data.get("tool_response"))
    use_id = data.get("tool_use_id")
    _ingest(_turn(data, "tool", content, use_id if isinstance(use_id, str) else None, tool=name), user)


def on_stop(data: dict, *, user: str | None, extract: bool, **_: Any) -> None:
    reply = data.get("last_assistant_message")
    if not isinstance(reply, str) or not reply.strip():
        path = data.get("transcript_path")
        reply = last_reply(Path(path)) if isinstance(path, str) and path else None
    turn_id = data.get("turn_id") or data.get("prompt_id")
    with store_for_writing() as mem:
        if reply and reply.strip():
            msg_id = f"{turn_id}:reply" if isinstance(turn_id, str) and turn_id else None
            mem.ingest([_turn(data, "assistant", reply, msg_id)], user=user)
        if extract:
            report = extract_session(mem, user, _field(data, "session_id"), this_turn=True)
            _say_extracted(report, "this turn")


def on_session_end(data: dict, *, user: str | None, **_: Any) -> None:
    session = _field(data, "session_id")
    with store_for_writing() as mem:
        report = extract_session(mem, user, session, this_turn=False)
    _say_extracted(report, f"session {session}")


HANDLERS = {"session-start": on_session_start, "prompt": on_prompt, "tool": on_tool, "stop": on_stop,
            "session-end": on_session_end}


def extract_session(mem: Any, user: str | None, session: str, *, this_turn: bool) -> dict | None:
    """Extract facts (config `extractor`) from the person turns of the session (thread =
    session id) that no fact cites yet; ``this_turn``: only from the last user turn on."""
    from brandmind.extract.run import stored_turns

    beads = mem.beads_tail(TURN_WINDOW if this_turn else 1_000_000, user=user, thread=session)
    if this_turn:
        starts = [i for i, b in enumerate(beads) if b.get("role") == "user"]
        beads = beads[starts[-1]:] if starts else []
    turns = stored_turns(mem.store, [b["id"] for b in beads], mem.store.user(user), fresh=set())
    return mem.extract(turns, user=user) if turns else None


def _say_extracted(report: dict | None, where: str) -> None:
    if report is None:
        info(f"bm: no new turns to extract from in {where}")
        return
    counts = ", ".join(f"{n} {k}" for k, n in report["facts"].items() if n) or "none new"
    info(f"bm: {report['found']} fact(s) found in {report['turns']} turn(s) of {where} ({counts})")


# -- what a tool turn says ------------------------------------------------------------------------------
def tool_text(name: str, tool_input: Any, response: Any) -> str:
    """``[Tool] what it was asked`` and what it answered, cut to HEAD + TAIL characters."""
    asked = _asked(tool_input)
    head = f"[{name}] {asked}".rstrip() if asked else f"[{name}]"
    body = _answer(response)
    text = f"{head}\n{body}" if body.strip() else head
    if len(text) > HEAD + TAIL:
        cut = len(text) - HEAD - TAIL
        text = f"{text[:HEAD]}\n… [{cut:,} characters cut] …\n{text[-TAIL:]}"
    return text


def _asked(tool_input: Any) -> str:
    if isinstance(tool_input, str):
        return tool_input[:2000]
    if not isinstance(tool_input, dict):
        return "" if tool_input is None else json.dumps(tool_input, ensure_ascii=False)[:2000]
    for key in ("command", "file_path", "path", "pattern", "query", "url", "description", "prompt"):
        if isinstance(tool_input.get(key), str) and tool_input[key].strip():
            return tool_input[key][:2000]
    return json.dumps(tool_input, ensure_ascii=False)[:2000]


def _answer(response: Any) -> str:
    """The text of a tool's answer: Bash's stdout/stderr, Read's file content, MCP text
    blocks, a plain string; anything else as JSON."""
    if response is None:
        return ""
    if isinstance(response, str):
        return response
    if isinstance(response, list):
        texts = [b.get("text") for b in response if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(texts) if texts else json.dumps(response, ensure_ascii=False)
    if isinstance(response, dict):
        if "stdout" in response or "stderr" in response:
            out, err = response.get("stdout") or "", response.get("stderr") or ""
            return str(out) + (f"\n[stderr]\n{err}" if err else "")
        file = response.get("file")
        if isinstance(file, dict) and isinstance(file.get("content"), str):
            return file["content"]
        for key in ("content", "output", "result", "text"):
            if isinstance(response.get(key), (str, list)):
                return _answer(response[key])
    return json.dumps(response, ensure_ascii=False)


def last_reply(path: Path) -> str | None:
    """The text of the assistant's last reply in a Claude Code transcript (JSONL: entries
    ``{"type": "user"|"assistant", "message": {"content": str | [blocks]}}``): the text
    blocks of the assistant entries after the last prompt."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    texts: list[str] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if entry.get("type") == "user":
            prompt = isinstance(content, str) or (isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "text" for b in content))
            if prompt:
                texts = []
        elif entry.get("type") == "assistant" and isinstance(content, list):
            texts += [b["text"] for b in content
                      if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    reply = "\n".join(t for t in texts if t.strip())
    return reply or None
