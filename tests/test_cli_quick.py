"""`bm recall`, `bm context`, `bm ingest` and `bm remember` parsed without typer (cli/quick.py):
every command line it takes means what the typer app makes of it, everything else is left to
the app, and a cold call does not import typer at all."""
from __future__ import annotations

import inspect
import json
import os
import random
import subprocess
import sys

import pytest

from conftest import BM_CMD, assert_error, run_bm
from brandmind.cli import app, quick

# pieces of the quick commands' lines: an option with a value, a flag, or a stray word (typer's
# alone, or wrong)
VALUES = ["3", "x", "800", "ann", "ann-2", " bad", "07", "t1", "json", "text", "-1", "", "1_000", "fact",
          "preference", "bogus", "0.8", "1.5", "nan", ".5"]
OTHER_WORDS = ["recall", "--home", "--home=", "--min-score", "0.5", "--since", "--now", "-h", "--help", "--wait",
               "--", "-k5", "--json=1", "--margin", "-t", "fact"]


def calls(monkeypatch: pytest.MonkeyPatch) -> list:
    """The bodies replaced by recorders of their arguments (defaults filled in)."""
    seen: list = []

    def recorder(name):  # type: ignore[no-untyped-def]
        real = getattr(quick, name)

        def record(query, **kwargs):  # type: ignore[no-untyped-def]
            bound = inspect.signature(real).bind(query, **kwargs)
            bound.apply_defaults()
            seen.append((name, dict(bound.arguments)))

        return record

    for name in (f"run_{command}" for command in quick.SPECS):
        monkeypatch.setattr(quick, name, recorder(name))
    return seen


def random_argv(rng: random.Random) -> list[str]:
    head = rng.choice([[], [], ["--home", "/tmp/x"], ["--home=/tmp/y"], ["--wait"]])
    command = rng.choice([*quick.SPECS, "forget"])
    options, flags = quick.SPECS.get(command, quick.SPECS["recall"])
    rest: list[str] = []
    for _ in range(rng.randint(0, 4)):
        roll = rng.random()
        if roll < 0.5:
            opt = rng.choice(sorted(options))
            value = rng.choice(VALUES)
            rest += [f"{opt}={value}"] if opt.startswith("--") and rng.random() < 0.3 else [opt, value]
        elif roll < 0.85:
            rest.append(rng.choice(sorted(flags)))
        else:
            rest.append(rng.choice(OTHER_WORDS))
    if rng.random() < 0.9:
        rest.insert(rng.randint(0, len(rest)), rng.choice(["what does Ann like?", "-", "tea"]))
    return [*head, command, *rest]


def test_every_line_quick_reads_means_what_the_typer_app_makes_of_it(monkeypatch, capsys, tmp_path):
    """Random command lines: where quick.parse reads one, the typer app calls the same body with
    the same arguments and --home; quick reads a good share of them (it is not always None)."""
    monkeypatch.setenv("BM_HOME", str(tmp_path / "unused"))
    seen = calls(monkeypatch)
    rng, read = random.Random(7), 0
    for _ in range(600):
        argv = random_argv(rng)
        parsed = quick.parse(argv)
        if parsed is None:
            continue
        read += 1
        monkeypatch.setenv("BM_HOME", "-")
        seen.clear()
        assert quick.run(parsed) == 0, argv
        assert len(seen) == 1, argv
        home_quick = os.environ["BM_HOME"]
        monkeypatch.setenv("BM_HOME", "-")
        assert app.main(list(argv)) == 0, (argv, capsys.readouterr())
        assert len(seen) == 2 and seen[0] == seen[1], argv
        assert os.environ["BM_HOME"] == home_quick, argv
    assert read > 150


@pytest.mark.parametrize("argv", [
    ["recall", "tea", "--min-score", "0.5"],  # an option quick does not take
    ["recall", "tea", "-k", "3", "-k", "4"],  # twice: click keeps the last
    ["recall", "tea", "-k", "x"],             # a bad value: typer's usage error
    ["recall", "tea", "-u", " bad"],
    ["recall", "tea", "one more"],            # an extra argument
    ["recall", "--help"], ["context", "tea", "-h"],
    ["recall", "-k", "3"],                    # no QUERY
    ["recall", "tea", "-k", "-3"],            # a value like an option
    ["--wait", "recall", "tea"], ["recall", "tea", "-k5"], ["recall", "tea", "--", "x"],
    ["remember", "tea", "--fact"], ["ingest", "chat.jsonl", "--extract"], ["beads", "add", "tea"], [],
    ["remember", "tea", "-t", "bogus"], ["remember", "tea", "-i", "1.5"], ["remember", "tea", "-i", "nan"],
])
def test_anything_else_is_left_to_the_typer_app(argv):
    assert quick.parse(argv) is None


@pytest.mark.parametrize("argv,code,words", [
    (["recall", "tea", "-k", "x"], 2, ["-k", "integer"]),
    (["recall", "tea", "-u", " bad"], 2, ["--user", "invalid user"]),
    (["context", "tea", "-b", "0"], 2, ["budget"]),
    (["recall", "tea", "-k", "0"], 2, ["-k 10"]),
])
def test_bad_values_get_one_line_and_the_usual_exit_code(store, argv, code, words):
    res = run_bm(*argv)
    assert_error(res, code, *words)


def test_the_turn_commands_import_no_typer(tmp_path):
    """The point of cli/quick.py: `bm remember`, `bm ingest`, `bm recall` and `bm context` as a
    script writes them load neither typer nor click, and answer as the typer app does."""
    env = {**os.environ, "BM_HOME": str(tmp_path / "home")}

    def quick_run(*argv: str, input: str = "") -> str:
        proc = subprocess.run([BM_CMD[0], "-X", "importtime", "-m", "brandmind.cli.client", *argv], input=input,
                              capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
        assert "brandmind.cli.quick" in imported and not {"typer", "click"} & imported, argv
        return proc.stdout

    assert quick_run("remember", "Ann drinks green tea every morning", "-u", "ann", "--json").startswith('{"id": "m_')
    turn = '{"role": "user", "speaker": "Ann", "content": "I switched to oolong last week"}\n'
    assert json.loads(quick_run("ingest", "-", "-u", "ann", "--json", input=turn))["ingested"] == 1
    for argv in (["recall", "what does Ann drink?", "-u", "ann", "--json"],
                 ["context", "what does Ann drink?", "-u", "ann", "-b", "300"]):
        out = quick_run(*argv)
        assert "green tea" in out and "oolong" in out, out
        extra = ["--min-score=-1000"] if argv[0] == "recall" else ["--margin", "0"]  # not quick's: typer
        typed = run_bm(*argv, *extra, env=env)
        assert typed.code == 0 and typed.out == out, (typed, out)


def test_quick_has_no_typer_at_import():
    code = "import sys; import brandmind.cli.quick, brandmind.cli.client; print('typer' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc
