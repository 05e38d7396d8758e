"""The CLI contract (issue 12): JSON when piped, batch defaults from the command line, usage
errors exit 2, a store made by the first write, tables that fit 80 columns, help that shows
what it says, and hints instead of a bare ``[]``."""
from __future__ import annotations

import json
import os
import re
import select
import shlex
import subprocess
import time

import pytest

from conftest import BM_CMD, assert_error, open_memory, run_bm

LISBON = "Ann moved to Lisbon in May 2024 and loves the old tram that climbs to the castle"


def jsonl(items: list) -> str:
    return "".join(json.dumps(x) + "\n" for x in items)


def remember(bm, text: str, *args: str) -> str:
    res = bm("remember", text, *args)
    assert res.code == 0, res
    return res.json()["id"]


def is_json(out: str) -> bool:
    try:
        json.loads(out)
    except ValueError:
        return False
    return True


# -- JSON when piped ------------------------------------------------------------------------------
def test_writes_print_json_when_piped(bm, store):
    res = bm("remember", "Ann likes green tea", "-u", "ann")
    assert res.code == 0 and set(res.json()) == {"id"} and res.json()["id"].startswith("m_"), res
    fact = bm("remember", "--fact", '{"subject": "Ann", "predicate": "lives_in", "object": "Lisbon"}', "-u", "ann")
    assert fact.code == 0 and fact.json()["action"] == "added" and fact.json()["retired"] == [], fact
    extracted = bm("remember", "I hate mushrooms.", "-u", "ann", "--extract")
    assert extracted.code == 0 and extracted.json()["facts"]["added"] == 1, extracted
    bead = bm("beads", "add", "hello there", "-u", "ann")
    assert bead.code == 0 and bead.json()["id"].startswith("b_"), bead
    link = bm("memories", "link", res.json()["id"], fact.json()["id"], "--type", "supports")
    assert link.code == 0 and link.json()["predicate"] == "supports", link
    setting = bm("config", "set", "user", "ann")
    assert setting.code == 0 and setting.json() == {"key": "user", "value": "ann"}, setting


def test_piped_output_of_every_command_is_json(bm, tmp_path):
    """Each command (but kg, sync and daemon, tested with their own) with stdout a pipe: JSON
    (JSONL for --jsonl and export), or nothing; only what is documented as raw (the context
    block, a workspace file, a config value) is not."""
    (tmp_path / "chat.jsonl").write_text(jsonl([{"role": "user", "speaker": "Ann", "content": "I love jazz"}]))
    (tmp_path / "facts.jsonl").write_text(jsonl([{"subject": "Ann", "predicate": "works_at", "object": "Acme"}]))
    skills = tmp_path / "skills" / "s2"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: s2\ndescription: second skill\n---\nSteps.\n")
    m1 = remember(bm, LISBON, "-u", "ann")
    m2 = remember(bm, "Ann prefers window seats", "-u", "ann", "-t", "preference")
    commands = [
        ("init",), ("remember", "Bob plays cello", "-u", "bob"),
        ("remember", "--fact", '{"subject": "Bob", "predicate": "likes", "object": "tea"}', "-u", "bob"),
        ("recall", "Lisbon", "-u", "ann"), ("recall", "Lisbon", "-u", "ann", "--explain"),
        ("ingest", str(tmp_path / "chat.jsonl"), "-u", "ann"), ("consolidate", "-u", "ann"),
        ("beads", "add", "a turn", "-u", "ann"), ("beads", "tail", "-u", "ann"),
        ("memories", "list", "-u", "ann"), ("memories", "show", m1), ("memories", "history", m1),
        ("memories", "link", m1, m2), ("facts", "add", str(tmp_path / "facts.jsonl"), "-u", "ann"),
        ("block", "set", "human", "Likes jazz", "-u", "ann"), ("block", "append", "human", "and tea", "-u", "ann"),
        ("block", "replace", "human", "tea", "coffee", "-u", "ann"), ("block", "define", "notes", "--limit", "99", "-u", "ann"),
        ("block", "list", "-u", "ann"), ("block", "show", "human", "-u", "ann"),
        ("skill", "list"), ("skill", "import", str(tmp_path / "skills")), ("skill", "show", "s2"),
        ("skill", "match", "second"),
        ("fs", "write", "/notes/a.md", "jazz bars", "-u", "ann"), ("fs", "append", "/notes/a.md", " more", "-u", "ann"),
        ("fs", "ls", "/", "-u", "ann"), ("fs", "find", "*.md", "-u", "ann"), ("fs", "index", "-u", "ann"),
        ("fs", "mv", "/notes/a.md", "/notes/b.md", "-u", "ann"), ("fs", "rm", "/notes/b.md", "-u", "ann"),
        ("persona", "list"), ("persona", "show", "qsr_real_estate"), ("persona", "assign", "qsr_real_estate", "-u", "ann"),
        ("persona", "unassign", "qsr_real_estate", "-u", "ann"), ("persona", "detect", "restaurant sites"),
        ("persona", "load-starters"), ("persona", "doc", "set", "--name", "Pi"), ("persona", "doc", "show"),
        ("stats",), ("doctor",), ("rebuild",), ("reindex",), ("config",), ("config", "set", "user", "ann"),
        ("skill", "remove", "s2"), ("forget", m2, "--yes"),
    ]
    for args in commands:
        res = bm(*args)
        assert res.code == 0, (args, res)
        assert res.out == "" or is_json(res.out), (args, res)
    assert all(is_json(line) for line in bm("export").out.splitlines())
    assert all(is_json(line) for line in bm("memories", "list", "--all-users", "--jsonl").out.splitlines())


# -- recall --batch takes the command line's options as defaults ----------------------------------------
def test_recall_batch_uses_command_line_options_as_defaults(bm, store):
    for day, kind in (("2024-01-10", "fact"), ("2024-02-10", "preference"), ("2024-03-10", "preference"),
                      ("2024-04-10", "fact")):
        remember(bm, f"Ann noted something about coffee on {day}", "-u", "ann", "--ts", day, "-t", kind)
    lines = jsonl([{"id": "plain", "query": "coffee"}, {"id": "own-k", "query": "coffee", "k": 3},
                   {"id": "own-type", "query": "coffee", "type": "fact", "since": "2024-01-01"}])
    res = bm("recall", "--batch", "-", "-u", "ann", "-k", "1", "--type", "preference", "--since", "2024-02-01",
             "--until", "2024-03-01", input=lines)
    assert res.code == 0, res
    out = {r["id"]: r for r in res.jsonl()}
    plain = out["plain"]["results"]
    assert len(plain) == 1 and plain[0]["type"] == "preference" and plain[0]["ts"].startswith("2024-02-10"), plain
    assert [r["ts"][:10] for r in out["own-k"]["results"]] == ["2024-02-10"]  # k from the line, filters the defaults
    assert [(r["type"], r["ts"][:10]) for r in out["own-type"]["results"]] == [("fact", "2024-01-10")]
    # --min-score and --as-of are defaults too
    high = bm("recall", "--batch", "-", "-u", "ann", "--min-score", "1000", input=lines)
    assert high.code == 0 and all(r["results"] == [] for r in high.jsonl()), high
    fact = bm("remember", "--fact", '{"subject": "Ann", "predicate": "drinks", "object": "coffee", '
              '"valid_from": "2024-05-01"}', "-u", "ann").json()["id"]
    one = jsonl([{"query": "Ann drinks coffee", "k": 10}])
    now = bm("recall", "--batch", "-", "-u", "ann", input=one)
    past = bm("recall", "--batch", "-", "-u", "ann", "--as-of", "2024-01-01", input=one)
    assert fact in [r["id"] for r in now.jsonl()[0]["results"]], now
    assert past.code == 0 and fact not in [r["id"] for r in past.jsonl()[0]["results"]], past


# -- usage errors exit 2 --------------------------------------------------------------------------------
@pytest.mark.parametrize("args, words", [
    (("recall", "x", "--since", "notadate"), ("--since", "cannot read since", "ISO 8601")),
    (("recall", "x", "--until", "2024-13-45"), ("--until",)),
    (("recall", "x", "--now", "someday"), ("--now",)),
    (("recall", "x", "--as-of", "soon"), ("--as-of",)),
    (("recall", "x", "--type", "bogus"), ("--type", "unknown memory type", "preference")),
    (("recall", "x", "-u", " ann "), ("--user", "invalid user")),
    (("recall", "x", "--min-score", "nan"), ("--min-score", "finite")),
    (("remember", "x", "--importance", "7"), ("--importance", "from 0 to 1")),
    (("remember", "x", "--type", "feeling"), ("--type", "unknown memory type")),
    (("remember", "x", "--ts", "soon"), ("--ts", "cannot read ts")),
    (("remember", "x", "-a", "a\tb"), ("--agent", "invalid agent")),
    (("beads", "add", "x", "--ts", "99999-01-01"), ("--ts",)),
    (("beads", "add", "x", "--role", ""), ("--role", "invalid role")),
    (("memories", "list", "--type", "bogus"), ("--type",)),
    (("memories", "list", "--limit", "0"), ("--limit",)),
    (("memories", "link", "m_a", "m_b", "--type", "hates"), ("--type", "unknown link type")),
    (("memories", "link", "m_a", "m_b", "--strength", "2"), ("--strength", "from 0 to 1")),
    (("context", "x", "--now", "later"), ("--now",)),
    (("block", "set", "bad label!", "x"), ("LABEL", "invalid block label")),
    (("block", "define", "notes", "--limit", "0"), ("--limit", "from 1 to")),
    (("block", "set", "notes", "x", "--persona", "Bad Handle"), ("--persona", "invalid persona handle")),
    (("skill", "add", "Bad Name", "-d", "x"), ("NAME", "invalid skill name")),
    (("skill", "add", "ok", "-d", "x", "--version", "one"), ("--version", "invalid skill version")),
    (("skill", "add", "ok", "-d", "x", "--tag", "a,b"), ("--tag", "invalid tag")),
    (("persona", "assign", "qsr_real_estate", "--confidence", "1.5"), ("--confidence", "confidence must be")),
    (("persona", "show", "Not A Handle"), ("HANDLE", "invalid persona handle")),
    (("persona", "doc", "set", "--name", "Pi", "--version", "0"), ("--version", "at least 1")),
])
def test_bad_option_values_are_usage_errors_found_before_the_store(bm, bm_home, args, words):
    assert_error(bm(*args), 2, *words)
    assert not (bm_home / "data").exists()  # checked before any store is opened or created


def test_usage_errors_exit_2_in_a_real_process_and_bad_data_stays_1(bm, store, tmp_path):
    for args in (("recall", "x", "--since", "notadate"), ("recall", "x", "--type", "bogus"),
                 ("remember", "x", "--importance", "7")):
        res = run_bm(*args)
        assert_error(res, 2, args[-2])
        assert res.out == ""
    # what is wrong is the input's content, not the command line: exit 1
    assert_error(bm("remember", "   "), 1, "text is empty")
    bad = tmp_path / "facts.jsonl"
    bad.write_text('{"subject": "Ann", "predicate": "likes", "object": "tea"}\n{"subject": "x"}\n')
    assert_error(bm("facts", "add", str(bad)), 1, "line 2")
    assert_error(bm("ingest", "-", input="not json\n"), 1, "line 1")
    assert_error(bm("remember", "--fact", "[1]"), 1, "JSON object")


# -- a store is created by the first write --------------------------------------------------------------
@pytest.mark.parametrize("args, stdin", [
    (("remember", "Ann likes tea", "-u", "ann"), None),
    (("remember", "--fact", '{"subject": "Ann", "predicate": "likes", "object": "tea"}', "-u", "ann"), None),
    (("ingest", "-", "-u", "ann"), jsonl([{"role": "user", "content": "I like tea"}])),
    (("beads", "add", "a turn", "-u", "ann"), None),
    (("facts", "add", "-", "-u", "ann"), jsonl([{"subject": "Ann", "predicate": "likes", "object": "tea"}])),
    (("block", "set", "human", "Likes tea", "-u", "ann"), None),
    (("block", "define", "notes", "--limit", "500", "-u", "ann"), None),
    (("skill", "add", "tea-making", "-d", "How to make tea"), None),
    (("fs", "write", "/notes/tea.md", "green tea", "-u", "ann"), None),
    (("persona", "assign", "qsr_real_estate", "-u", "ann"), None),
    (("persona", "doc", "set", "--name", "Pi"), None),
])
def test_the_first_write_creates_the_store(bm, bm_home, args, stdin):
    assert not (bm_home / "data").exists()
    res = bm(*args, input=stdin)
    assert res.code == 0, res
    assert "created a new bm store" in res.err and str(bm_home / "data") in res.err
    stats = bm("stats")
    assert stats.code == 0 and stats.json()["ops"] >= 1, stats
    assert "created" not in bm(*args[:1], *args[1:], input=stdin).err  # only the first time


def test_import_creates_the_store_and_a_real_process_too(bm, bm_home, tmp_path):
    res = run_bm("remember", LISBON, "-u", "ann")
    assert res.code == 0 and res.json()["id"].startswith("m_"), res
    dump = tmp_path / "dump.jsonl"
    dump.write_text(bm("export").out)
    other = tmp_path / "other"
    res = run_bm("--home", str(other), "import", str(dump))
    assert res.code == 0 and (other / "data").is_dir(), res


def test_a_failed_or_dry_write_leaves_no_store(bm, bm_home, tmp_path):
    assert_error(bm("remember", "   "), 1, "text is empty")
    assert_error(bm("ingest", "-", input="{broken\n"), 1, "line 1")
    assert_error(bm("ingest", str(tmp_path / "missing.jsonl")), 1, "no such file")
    res = bm("ingest", "-", "--dry-run", input=jsonl([{"role": "user", "content": "hi"}]))
    assert res.code == 0 and res.json()["would_ingest"] == 1, res
    assert not (bm_home / "data").exists()


def test_reads_on_a_missing_store_answer_empty_with_a_note_and_create_nothing(bm, bm_home):
    """Searches and listings answer as an empty store would (an agent loop's first `bm context`
    works), with a note naming the path (a mistyped BM_HOME shows); nothing is created."""
    for args, empty in ((("recall", "tea"), "[]"), (("memories", "list"), "[]"), (("beads", "tail"), "[]"),
                        (("block", "list"), "[]"), (("skill", "list"), "[]"), (("context", "tea"), "")):
        res = bm(*args)
        assert res.code == 0 and res.out.strip() == empty, (args, res)
        assert res.err_lines() == [res.err_lines()[0]] and "no bm store at " + str(bm_home / "data") in res.err, res
        assert "bm remember" in res.err
    res = bm("recall", "--batch", "-", input=jsonl([{"id": 1, "query": "tea"}]))
    assert res.code == 0 and res.jsonl() == [{"id": 1, "results": []}], res
    res = run_bm("context", "tea", "--budget", "200", "--json")
    assert res.code == 0 and res.json()["text"] == "" and "no bm store" in res.err, res
    assert not (bm_home / "data").exists()
    # what needs a store says how to make one
    for args in (("stats",), ("export",), ("memories", "show", "m_x"), ("rebuild",)):
        line = assert_error(bm(*args), 1, "no bm store")
        assert "bm remember" in line and "bm init" in line
    assert not (bm_home / "data").exists()


# -- tables fit an 80-column terminal -----------------------------------------------------------------------
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_terminal(*args: str, columns: int = 80) -> tuple[int, list[str]]:
    """`bm ARGS` with stdout a real terminal (a pty, so tables, not JSON) COLUMNS wide."""
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm", "NO_COLOR": "1"}
    proc = subprocess.Popen([*BM_CMD, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    data = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not chunk:
                break
            data += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    text = _ANSI.sub("", data.decode("utf-8", "replace")).replace("\r\n", "\n")
    return proc.returncode, text.splitlines()


def test_recall_and_list_tables_fit_80_columns_with_the_text_visible(bm, store):
    ids = [remember(bm, LISBON, "-u", "ann", "-a", "coach", "-t", "preference"),
           remember(bm, "Ann's cat Mochi sleeps on the piano", "-u", "ann")]
    for args in (("recall", "Lisbon tram castle", "-u", "ann"), ("memories", "list", "-u", "ann"),
                 ("recall", "Lisbon", "-u", "ann", "--explain")):
        code, lines = run_on_terminal(*args)
        assert code == 0, lines
        assert lines and max(len(line) for line in lines) <= 80, "\n".join(lines)
        screen = "\n".join(lines)
        words = " ".join(screen.split())
        for memory_id in ids:
            assert memory_id in screen  # whole, on one line, to copy
        for text in (LISBON, "Ann's cat Mochi sleeps on the piano"):
            assert " ".join(text.split()) in words or all(w in words for w in text.split()), screen
    code, lines = run_on_terminal("memories", "list", "-u", "ann")
    assert "preference" in "\n".join(lines) and "agent:coach" in "\n".join(lines)
    old = bm("remember", "--fact", '{"subject": "Ann", "predicate": "lives_in", "object": "Lisbon"}', "-u", "ann")
    new = bm("remember", "--fact", '{"subject": "Ann", "predicate": "lives_in", "object": "Porto"}', "-u", "ann")
    code, lines = run_on_terminal("memories", "history", old.json()["id"])
    screen = "\n".join(lines)
    assert code == 0 and max(len(line) for line in lines) <= 80, screen
    assert old.json()["id"] in screen and new.json()["id"] in screen and "Ann lives in Porto" in screen, screen
    code, lines = run_on_terminal("remember", "on a terminal: the id alone", "-u", "ann")
    assert code == 0 and len(lines) == 1 and lines[0].strip().startswith("m_"), lines


# -- help --------------------------------------------------------------------------------------------------
def _commands():
    from brandmind.cli.app import build_command as _command

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, cmd

    return list(walk(_command(), []))


def test_a_named_command_is_built_alone_with_the_same_help_and_errors(bm, capsys):
    """`bm recall ...` builds only recall's part of the command tree (the whole tree is ~0.2 s
    of a cold call): what each command prints for --help and for a usage error is the same as
    from the whole tree; unknown names still get the whole tree, `bm --help` a listing of it."""
    from brandmind.cli import app

    assert list(app.build_command(["--home", "/nowhere", "--wait", "recall", "q"]).commands) == ["recall"]
    assert list(app.build_command(["memories", "list"]).commands) == ["memories"]
    full = app.build_command()
    assert app.build_command(["recal"]) is full and app.build_command(["--version"]) is full
    assert len(full.commands) > 20
    # `bm`, `bm --help`, `bm -h`: a listing tree (commands without their parameters), the same text
    full.main(args=["--help"], prog_name="bm", standalone_mode=False)
    listed = capsys.readouterr().out
    for args in (["--help"], ["-h"], []):
        assert app.build_command(args) is not full
        res = bm(*args)
        assert res.out.rstrip("\n") == listed.rstrip("\n") and res.code == (0 if args else 2), args
    for path, _ in _commands():
        for args in ([*path, "--help"], [*path, "--no-such-option"]):
            alone = bm(*args)
            try:
                code = full.main(args=args, prog_name="bm", standalone_mode=False)
            except Exception as exc:  # noqa: BLE001 - the usage error main() turns into a line
                code = type(exc).__name__
            whole = capsys.readouterr()
            if args[-1] == "--help":
                assert alone.code == 0 and alone.out == whole.out, path
            else:
                assert alone.code == 2 and code == "NoSuchOption" and "--no-such-option" in alone.err, path


def test_bracketed_option_help_is_shown_as_written(bm):
    seen = 0
    for path, cmd in _commands():
        bracketed = [p for p in cmd.params if "[" in (getattr(p, "help", None) or "")]
        if not bracketed:
            continue
        shown = " ".join(bm(*path, "--help").out.split())
        for p in bracketed:
            for part in re.findall(r"\[[^\]]*\]", p.help):
                assert " ".join(part.split()) in shown, (path, part)
                seen += 1
    assert seen >= 10  # the [default: …] notes of recall, fs and the remotes
    assert "brandmind[graphiti]" in " ".join(bm("remote", "add", "graphiti", "--help").out.split())


def test_every_option_has_help_and_every_command_an_example(bm):
    for path, cmd in _commands():
        name = " ".join(path)
        assert all(getattr(p, "help", None) for p in cmd.params), (name, [p.name for p in cmd.params if not p.help])
        shown = bm(*path, "--help").out
        assert re.search(r"Examples?:\n\s+(\S+ )*bm ", shown), (name, shown)
    top = bm("--help").out
    assert "Examples:" in top and "bm recall" in top


def test_version_short_flag_and_shell_completion(bm):
    from brandmind import __version__

    assert bm("-V").out.strip() == f"bm {__version__}"
    top = bm("--help").out
    assert "--install-completion" in top and "--show-completion" in top
    # typer finds the shell among bm's parent processes (shellingham): run it from bash, as a
    # user does (under a pytest-xdist worker no shell may be among the parents)
    # (bash execs a lone command in place of itself: the ``exit`` after it keeps bash its parent)
    cmd = " ".join(shlex.quote(c) for c in BM_CMD) + " --show-completion; exit $?"
    script = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert script.returncode == 0 and "_bm_completion" in script.stdout, script
    words = run_bm(env={"_BM_COMPLETE": "complete_bash", "COMP_WORDS": "bm rec", "COMP_CWORD": "1"})
    assert words.code == 0 and "recall" in words.out.split(), words
    opts = run_bm(env={"_BM_COMPLETE": "complete_bash", "COMP_WORDS": "bm recall --si", "COMP_CWORD": "2"})
    assert "--since" in opts.out.split(), opts


# -- hints instead of a bare [] ----------------------------------------------------------------------------
def test_a_user_typo_gets_a_hint_and_stdout_stays_json(bm, store):
    remember(bm, LISBON, "-u", "ann")
    assert bm("beads", "add", "hi", "-u", "bob").code == 0
    for args in (("recall", "Lisbon", "-u", "anm"), ("memories", "list", "-u", "anm"), ("beads", "tail", "-u", "anm")):
        res = bm(*args)
        assert res.code == 0 and res.json() == [], res
        assert "no memories for user 'anm'; users: ann, bob" in res.err and "-u ann" in res.err, res
    res = bm("recall", "Lisbon")  # no -u: the configured user, named as such
    assert res.json() == [] and "no -u given" in res.err and "users: ann, bob" in res.err, res
    # a known user with nothing matching gets no note
    res = bm("recall", "Lisbon", "-u", "ann", "--type", "decision")
    assert res.code == 0 and res.json() == [] and res.err == "", res


def test_stats_counts_per_user(bm, store):
    remember(bm, LISBON, "-u", "ann")
    remember(bm, "Ann has a cat", "-u", "ann")
    assert bm("beads", "add", "hi", "-u", "bob").code == 0
    assert bm("ingest", "-", "-u", "carol", input=jsonl([{"role": "user", "content": "hello"}])).code == 0
    per_user = bm("stats").json()["per_user"]
    assert per_user == {"ann": {"memories": 2, "beads": 0}, "bob": {"memories": 0, "beads": 1},
                        "carol": {"memories": 1, "beads": 1}}
    code, lines = run_on_terminal("stats")
    screen = "\n".join(lines)
    assert code == 0 and re.search(r"ann\s+2\s+0", screen) and re.search(r"carol\s+1\s+1", screen), screen


def test_recall_min_score(bm, store):
    remember(bm, LISBON, "-u", "ann")
    remember(bm, "Bob plays the cello on Sundays", "-u", "ann")
    everything = bm("recall", "Lisbon tram", "-u", "ann").json()
    assert len(everything) == 2
    floor = (everything[0]["score"] + everything[1]["score"]) / 2
    kept = bm("recall", "Lisbon tram", "-u", "ann", "--min-score", str(floor))
    assert kept.code == 0 and [r["id"] for r in kept.json()] == [everything[0]["id"]], kept
    none = bm("recall", "Lisbon tram", "-u", "ann", "--min-score", "1000")
    assert none.code == 0 and none.json() == [] and none.err == "", none
    with open_memory() as mem:
        assert len(mem.recall("Lisbon tram", user="ann")) == 2  # the library's recall is unchanged


def test_help_stays_fast():
    """`bm --help` imports neither rich nor the store (plain click help)."""
    code = ("import sys, time; t = time.perf_counter(); from brandmind.cli.app import main; "
            "import io, contextlib\nwith contextlib.redirect_stdout(io.StringIO()): main(['--help'])\n"
            "print(sorted(m for m in ('rich', 'numpy', 'brandmind.memory') if m in sys.modules))")
    proc = subprocess.run([BM_CMD[0], "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc


def test_a_system_error_is_one_line_not_a_traceback(tmp_path):
    """What the OS refuses (a store path under a file, an argument too long for a file name)
    ends in one Error line with a hint, exit 1."""
    from conftest import assert_error, run_bm

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert_error(run_bm("remember", "hello", env={"BM_HOME": str(blocker / "store")}), 1, "Not a directory")
    schema = json.dumps({"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(40)}})
    res = run_bm("skill", "add", "long-schema", "--schema", schema, "-d", "inline schema longer than a file name")
    assert res.code == 0 and "Traceback" not in res.err, res
