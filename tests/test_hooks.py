"""bm hooks: install/uninstall in Claude Code's and Codex's settings, and `bm hooks run` fed
the JSON the agents send, in real `bm` subprocesses (the installed commands themselves are run
through a shell, as the agent runs them)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import assert_error, run_bm

SESSION = "5b1d6f0e-8c2a-4a57-9d3e-2f1c0b7a9e41"
OTHER_HOOKS = {
    "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npx prettier --write"}]}],
    "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "cat ~/.notes.md"}]}],
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/guard"}]}],
}
SETTINGS = {"model": "opus", "permissions": {"allow": ["Bash(git log:*)"]}, "hooks": OTHER_HOOKS,
            "env": {"FOO": "1"}}


def common(event: str, cwd: Path) -> dict:
    """The fields Claude Code sends with every event."""
    return {"session_id": SESSION, "transcript_path": str(cwd / f"{SESSION}.jsonl"), "cwd": str(cwd),
            "permission_mode": "default", "hook_event_name": event}


def run_hook(command: str, payload: dict | str | bytes) -> subprocess.CompletedProcess:
    """Run an installed hook command as the agent does: through a shell, the event on stdin
    (stdout and stderr decoded)."""
    data = payload if isinstance(payload, bytes) else (
        payload if isinstance(payload, str) else json.dumps(payload)).encode()
    proc = subprocess.run(command, shell=True, input=data, capture_output=True, env=os.environ, timeout=120)
    return subprocess.CompletedProcess(command, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def installed(path: Path) -> dict[str, str]:
    """The bm command installed for each event in a settings file."""
    doc = json.loads(path.read_text())
    out = {}
    for event, groups in doc["hooks"].items():
        for group in groups:
            for h in group["hooks"]:
                if " hooks run " in h["command"]:
                    assert event not in out, (event, "twice")
                    out[event] = h["command"]
    return out


def beads(*args: str) -> list[dict]:
    res = run_bm("beads", "tail", "-n", "50", *args)
    assert res.code == 0, res
    return res.json()


# -- a whole Claude Code session --------------------------------------------------------------------------
def test_a_claude_code_session_through_the_installed_hooks(tmp_path, bm_home):
    project = tmp_path / "kyoto-trip"
    project.mkdir()
    assert run_bm("remember", "The kyoto-trip project deploys with make ship", "-u", "ann").code == 0
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(SETTINGS))
    res = run_bm("hooks", "install", "claude-code", "--settings", settings, "--user", "ann")
    assert res.code == 0, res
    hooks = installed(settings)
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"}
    assert all(f"--home {bm_home}" in c and c.split()[0].startswith("/") for c in hooks.values()), hooks

    start = run_hook(hooks["SessionStart"], {**common("SessionStart", project), "source": "startup",
                                             "model": "claude-sonnet-4-5"})
    assert start.returncode == 0, start
    out = json.loads(start.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    assert "deploys with make ship" in out["additionalContext"] and "kyoto-trip" in out["additionalContext"]

    prompt = {**common("UserPromptSubmit", project), "prompt": "I moved to Berlin last month and I love jazz"}
    assert run_hook(hooks["UserPromptSubmit"], prompt).returncode == 0
    tool = {**common("PostToolUse", project), "tool_name": "Bash", "tool_use_id": "toolu_01ABC",
            "tool_input": {"command": "ls -1 docs", "description": "List docs"},
            "tool_response": {"stdout": "itinerary.md\nbudget.xlsx", "stderr": "", "interrupted": False,
                              "isImage": False}}
    assert run_hook(hooks["PostToolUse"], tool).returncode == 0
    big = {**common("PostToolUse", project), "tool_name": "Read", "tool_use_id": "toolu_02DEF",
           "tool_input": {"file_path": str(project / "log.txt")},
           "tool_response": {"type": "text", "file": {"filePath": str(project / "log.txt"),
                                                      "content": "start " + "x" * 300_000 + " finish",
                                                      "numLines": 1, "startLine": 1, "totalLines": 1}}}
    assert run_hook(hooks["PostToolUse"], big).returncode == 0
    stop = {**common("Stop", project), "stop_hook_active": False,
            "last_assistant_message": "Noted: Berlin, and jazz. Your docs hold itinerary.md."}
    assert run_hook(hooks["Stop"], stop).returncode == 0

    turns = beads("-u", "ann", "--thread", SESSION)
    assert [b["role"] for b in turns] == ["user", "tool", "tool", "assistant"], turns
    assert turns[0]["content"] == prompt["prompt"]
    assert turns[1]["content"] == "[Bash] ls -1 docs\nitinerary.md\nbudget.xlsx"
    assert turns[2]["content"].startswith("[Read] ") and turns[2]["content"].endswith(" finish")
    assert "characters cut]" in turns[2]["content"] and len(turns[2]["content"]) < 130_000
    assert "blob" in turns[2] or turns[2]["size"] > 65536
    found = run_bm("recall", "itinerary budget", "-u", "ann", "-k", "3").json()
    assert any("itinerary.md" in r["text"] for r in found), found

    end = run_hook(hooks["SessionEnd"], {**common("SessionEnd", project), "reason": "prompt_input_exit"})
    assert end.returncode == 0 and "fact(s) found" in end.stderr, end
    facts = {m["text"] for m in run_bm("memories", "list", "-u", "ann", "--type", "fact").json()}
    assert "Ann lives in Berlin" in facts, facts
    prefs = {m["text"] for m in run_bm("memories", "list", "-u", "ann", "--type", "preference").json()}
    assert "Ann likes jazz" in prefs, prefs
    again = run_hook(hooks["SessionEnd"], {**common("SessionEnd", project), "reason": "other"})
    assert again.returncode == 0 and "no new turns" in again.stderr, again

    resumed = run_hook(hooks["SessionStart"], {**common("SessionStart", project), "source": "resume"})
    assert "Berlin" in json.loads(resumed.stdout)["hookSpecificOutput"]["additionalContext"], resumed


def test_a_prompt_sent_twice_with_its_id_is_stored_once_and_empty_prompts_are_skipped(tmp_path, store):
    event = {**common("UserPromptSubmit", tmp_path), "prompt": "use tabs, never spaces",
             "prompt_id": "9f0c7d1e-0000-4000-8000-000000000001"}
    for _ in range(2):
        assert run_bm("hooks", "run", "prompt", input=json.dumps(event)).code == 0
    assert run_bm("hooks", "run", "prompt", input=json.dumps({**event, "prompt": "  "})).code == 0
    assert [b["content"] for b in beads("--thread", SESSION)] == ["use tabs, never spaces"]


def test_stop_reads_the_reply_from_the_transcript_when_the_event_has_none(tmp_path, store):
    transcript = tmp_path / f"{SESSION}.jsonl"
    lines = [
        {"type": "user", "message": {"role": "user", "content": "what is in docs?"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."}, {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "itinerary.md"}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "It holds itinerary.md."}]}},
    ]
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{torn line\n")
    res = run_bm("hooks", "run", "stop", input=json.dumps({**common("Stop", tmp_path), "stop_hook_active": False}))
    assert res.code == 0, res
    assert [b["content"] for b in beads("--thread", SESSION)] == ["Let me look.\nIt holds itinerary.md."]


def test_session_start_on_a_missing_store_prints_nothing_and_creates_nothing(tmp_path, bm_home):
    res = run_bm("hooks", "run", "session-start", input=json.dumps({**common("SessionStart", tmp_path),
                                                                    "source": "startup"}))
    assert res.code == 0 and res.out == "", res
    assert not (bm_home / "data").exists()


# -- Codex --------------------------------------------------------------------------------------------------
def test_codex_hooks_json_and_a_codex_turn(tmp_path, store, monkeypatch):
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    res = run_bm("hooks", "install", "codex")
    assert res.code == 0 and "trust" in res.err, res
    hooks = installed(tmp_path / "codex" / "hooks.json")
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"}
    assert hooks["Stop"].endswith("hooks run stop --extract")
    base = {"session_id": SESSION, "transcript_path": None, "cwd": str(tmp_path), "model": "gpt-5-codex",
            "permission_mode": "default"}
    turn = {**base, "turn_id": "019d036d-c7fa-72d2-b6fd-78878bfe34e4"}
    assert run_hook(hooks["UserPromptSubmit"], {**turn, "hook_event_name": "UserPromptSubmit",
                                               "prompt": "I work at Acme Robotics"}).returncode == 0
    assert run_hook(hooks["PostToolUse"], {**turn, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                                          "tool_use_id": "call_1", "tool_input": {"command": "pwd"},
                                          "tool_response": "/src/app\n"}).returncode == 0
    stop = run_hook(hooks["Stop"], {**turn, "hook_event_name": "Stop", "stop_hook_active": False,
                                    "last_assistant_message": "Got it."})
    assert stop.returncode == 0 and "1 turn(s) of this turn" in stop.stderr, stop
    assert [b["role"] for b in beads("--thread", SESSION)] == ["user", "tool", "assistant"]
    facts = {m["text"] for m in run_bm("memories", "list", "--type", "fact").json()}
    assert any("Acme Robotics" in f for f in facts), facts
    assert run_bm("hooks", "uninstall", "codex").code == 0
    assert json.loads((tmp_path / "codex" / "hooks.json").read_text()) == {}


# -- install / uninstall ------------------------------------------------------------------------------------
def test_install_twice_keeps_one_entry_and_everything_else_and_uninstall_restores(tmp_path, monkeypatch):
    project = tmp_path / "repo"
    (project / ".claude").mkdir(parents=True)
    path = project / ".claude" / "settings.json"
    path.write_text(json.dumps(SETTINGS, indent=4))
    monkeypatch.chdir(project)
    dry = run_bm("hooks", "install", "claude-code", "--scope", "project", "--dry-run")
    assert dry.code == 0 and dry.json()["dry_run"] and len(dry.json()["hooks"]) == 5, dry
    assert json.loads(path.read_text()) == SETTINGS
    for _ in range(2):
        res = run_bm("hooks", "install", "claude-code", "--scope", "project")
        assert res.code == 0 and res.json()["settings"] == str(path), res
    doc = json.loads(path.read_text())
    assert {k: v for k, v in doc.items() if k != "hooks"} == {k: v for k, v in SETTINGS.items() if k != "hooks"}
    for event, groups in OTHER_HOOKS.items():
        assert doc["hooks"][event][:len(groups)] == groups, event
    assert len(installed(path)) == 5
    assert doc["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 60  # (1.5 s without one)
    removed = run_bm("hooks", "uninstall", "claude-code", "--scope", "project")
    assert removed.code == 0 and len(removed.json()["hooks"]) == 5, removed
    assert json.loads(path.read_text()) == SETTINGS
    nothing = run_bm("hooks", "uninstall", "claude-code", "--scope", "project")
    assert nothing.code == 0 and nothing.json()["hooks"] == [] and "nothing changed" in nothing.err


def test_uninstall_takes_only_bm_out_of_a_shared_group(tmp_path):
    path = tmp_path / "settings.json"
    assert run_bm("hooks", "install", "claude-code", "--settings", path).code == 0
    doc = json.loads(path.read_text())
    doc["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "say done"})
    path.write_text(json.dumps(doc))
    assert run_bm("hooks", "uninstall", "claude-code", "--settings", path).code == 0
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [
        {"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}]}}


def test_only_bm_commands_count_as_bm_hooks():
    from brandmind.cli import hooks as hooks_cmd

    assert hooks_cmd.OURS.search(hooks_cmd.hook_command("session-start", "ann"))
    assert not hooks_cmd.is_ours({"type": "command", "command": "cat ~/.notes.md"})
    assert not hooks_cmd.is_ours({"type": "command", "command": "entire hooks claude-code session-start"})


@pytest.mark.parametrize("content, what", [
    ("{not json", "not valid JSON"),
    ('["a list"]', "not an object"),
    ('{"hooks": ["x"]}', "not an object"),
    ('{"hooks": {"Stop": {"matcher": ""}}}', "not a list"),
    (b"\xff\xfe{}", "not UTF-8"),
])
def test_a_broken_settings_file_is_an_error_and_never_overwritten(tmp_path, content, what):
    path = tmp_path / "settings.json"
    raw = content if isinstance(content, bytes) else content.encode()
    path.write_bytes(raw)
    for verb in ("install", "uninstall"):
        res = run_bm("hooks", verb, "claude-code", "--settings", path)
        assert_error(res, 1, what, str(path), "changed nothing")
        assert path.read_bytes() == raw


def test_bad_client_scope_and_unreadable_settings(tmp_path):
    assert_error(run_bm("hooks", "install", "cursor"), 2, "unknown client 'cursor'", "claude-code, codex")
    assert_error(run_bm("hooks", "uninstall", "vim"), 2, "unknown client")
    assert_error(run_bm("hooks", "install", "codex", "--scope", "team"), 2, "unknown scope")
    assert_error(run_bm("hooks", "install", "claude-code", "--settings", tmp_path), 1, "is a directory")
    locked = tmp_path / "locked.json"
    locked.write_text("{}")
    locked.chmod(0)
    try:
        res = run_bm("hooks", "install", "claude-code", "--settings", locked)
        if os.geteuid() != 0:  # (root reads it anyway)
            assert_error(res, 1, "cannot read", "permissions")
    finally:
        locked.chmod(0o600)


# -- garbage in ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("event", ["session-start", "prompt", "tool", "stop", "session-end"])
@pytest.mark.parametrize("stdin, words", [
    (b"", "no event JSON"),
    (b"   \n", "no event JSON"),
    (b"garbage", "not valid JSON"),
    (b'{"session_id": "s1", ', "not valid JSON"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b"[1, 2]", "not an object"),
    (b"[" * 100_000, "event on stdin"),
])
def test_garbage_on_stdin_is_one_error_line_and_exit_1(store, event, stdin, words):
    res = run_bm("hooks", "run", event, input=stdin)
    assert_error(res, 1, words)


@pytest.mark.parametrize("event, payload, words", [
    ("prompt", {"prompt": "hi"}, "no session_id"),
    ("prompt", {"session_id": SESSION}, "no prompt"),
    ("prompt", {"session_id": " ", "prompt": "hi"}, "no session_id"),
    ("prompt", {"session_id": "a\nb", "prompt": "hi"}, "invalid thread"),
    ("tool", {"session_id": SESSION, "tool_input": {}}, "no tool_name"),
    ("session-start", {"session_id": 7}, "no session_id"),
    ("bogus", {"session_id": SESSION}, "unknown hook event"),
])
def test_events_missing_what_they_need_are_errors_not_tracebacks(store, event, payload, words):
    res = run_bm("hooks", "run", event, input=json.dumps(payload))
    assert_error(res, 1, words)
    assert beads() == []
