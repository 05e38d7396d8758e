"""The live agent loop: every turn is kept, and the context block holds what was true then
and what matters most.

An agent asks `bm context` for each turn and hands the turn back with `bm ingest`; these
tests drive that loop through the CLI (forgetting: tests/test_forget_everywhere.py).
"""
from __future__ import annotations

import json

from conftest import open_memory, run_bm


def turn(bm, role: str, content: str, user: str = "f", **extra) -> dict:
    res = bm("ingest", "-", "-u", user, input=json.dumps({"role": role, "content": content, **extra}) + "\n")
    assert res.code == 0, res
    return res.json()


def tail(bm, user: str = "f", n: int = 50) -> list[dict]:
    return bm("beads", "tail", "-n", n, "-u", user, "--json").json()


# -- repeated turns are new turns ---------------------------------------------------------------
def test_a_repeated_turn_without_id_or_ts_is_stored_again(bm, store):
    assert turn(bm, "user", "yes")["ingested"] == 1
    assert turn(bm, "assistant", "Booked it.")["ingested"] == 1
    report = turn(bm, "user", "yes")
    assert (report["ingested"], report["duplicates"]) == (1, 0)
    assert [(b["role"], b["content"]) for b in tail(bm)] == [
        ("user", "yes"), ("assistant", "Booked it."), ("user", "yes")]
    with open_memory() as mem:
        assert mem.sql.conn.execute("SELECT count(*) FROM memories WHERE text='yes'").fetchone()[0] == 2


def test_an_assistant_repeating_the_user_is_a_turn_of_its_own(bm, store):
    ts = "2024-05-01T10:00:00Z"
    turn(bm, "user", "Lisbon it is", ts=ts)
    report = turn(bm, "assistant", "Lisbon it is", ts=ts)
    assert report["ingested"] == 1
    assert [b["role"] for b in tail(bm)] == ["user", "assistant"]


def test_a_line_with_ts_or_id_is_still_idempotent(bm, store):
    lines = [{"role": "user", "content": "yes", "ts": "2024-05-01T10:00:00Z"},
             {"role": "user", "content": "yes", "id": "turn-7"},
             {"role": "user", "content": "yes"}]
    data = "".join(json.dumps(m) + "\n" for m in lines)
    assert bm("ingest", "-", "-u", "f", input=data).json()["ingested"] == 3
    again = bm("ingest", "-", "-u", "f", input=data).json()
    # the line with neither id nor ts is a new turn each time; the others are known
    assert (again["ingested"], again["duplicates"]) == (1, 2)
    assert len(tail(bm)) == 4


def test_dry_run_counts_repeated_turns_as_new(bm, store):
    data = '{"role":"user","content":"yes"}\n' * 2
    assert bm("ingest", "-", "--dry-run", input=data).json()["would_ingest"] == 2


# -- context as of a moment --------------------------------------------------------------------
def test_context_now_shows_only_what_existed_then(bm, store):
    for text, ts in [("Ann plays the cello in a quartet", "2024-01-10T10:00:00Z"),
                     ("Ann sold her cello and took up the drums", "2024-06-10T10:00:00Z")]:
        assert bm("remember", text, "-u", "ann", "--ts", ts).code == 0
    turns = [{"role": "user", "content": "cello lesson booked", "ts": "2024-01-11T10:00:00Z"},
             {"role": "user", "content": "drum kit arrived", "ts": "2024-06-11T10:00:00Z"}]
    bm("ingest", "-", "-u", "ann", input="".join(json.dumps(t) + "\n" for t in turns))
    res = bm("context", "what instrument does Ann play?", "-u", "ann", "--now", "2024-03-01", "--format", "json")
    assert res.code == 0, res
    text = res.out
    assert "quartet" in text and "cello lesson booked" in text
    assert "drums" not in text and "drum kit" not in text
    # recall --now is the same moment
    found = bm("recall", "instrument", "-u", "ann", "--now", "2024-03-01", "--json").json()
    assert found and all(m["ts"] < "2024-03-01" for m in found)
    # and without --now, today, both are there
    assert "drums" in bm("context", "what instrument does Ann play?", "-u", "ann").out


def test_a_fact_retired_after_now_was_still_current_then(bm, store):
    with open_memory() as mem:
        mem.facts.add({"subject": "Ann", "predicate": "lives_in", "object": "Lisbon"}, user="ann", ts="2024-01-01")
        mem.facts.add({"subject": "Ann", "predicate": "lives_in", "object": "Porto"}, user="ann", ts="2024-06-01")
    then = bm("context", "where does Ann live?", "-u", "ann", "--now", "2024-03-01").out
    assert "Lisbon" in then and "Porto" not in then
    now = bm("context", "where does Ann live?", "-u", "ann").out
    assert "Porto" in now and "Lisbon" not in now


# -- tight budgets ----------------------------------------------------------------------------
LOCKER = "Ann's locker code is 4471 and the locker is in the basement of building C near the gym entrance"


def _locker_store(bm) -> None:
    assert bm("remember", LOCKER, "-u", "ann").code == 0
    for _ in range(5):
        turn(bm, "user", "yes", user="ann")
        turn(bm, "assistant", "thanks", user="ann")


def test_a_tight_budget_shows_the_best_memory_cut_not_a_thanks(bm, store):
    _locker_store(bm)
    res = bm("context", "what is the locker code?", "-u", "ann", "--budget", "25")
    assert res.code == 0, res
    assert "locker code is 4471" in res.out and res.out.rstrip().endswith("…")
    assert "thanks" not in res.out and "yes" not in res.out
    assert "was cut to fit --budget 25" in res.err
    full = bm("context", "what is the locker code?", "-u", "ann", "--budget", "25", "--json").json()
    assert full["tokens"] <= 25 and len(full["truncated"]) == 1
    assert full["sections"]["memories"][0]["truncated"] is True
    # with room, it is shown whole and unmarked, the turns after it
    roomy = bm("context", "what is the locker code?", "-u", "ann", "--budget", "200").out
    assert LOCKER in roomy and "…" not in roomy
    assert roomy.index("locker code") < roomy.index("thanks")


def test_an_empty_block_says_why_on_stderr(store):
    assert run_bm("remember", LOCKER, "-u", "ann").code == 0
    res = run_bm("context", "locker", "-u", "ann", "--budget", "3")
    assert res.code == 0 and res.out == ""
    assert "nothing fits in --budget 3" in res.err and "Traceback" not in res.err


def test_a_file_ingested_by_an_older_bm_is_still_not_stored_twice(bm, store):
    """bm before 0.2 keyed a line with a ts on thread + ts + speaker + content (no role)."""
    import hashlib

    line = {"role": "user", "speaker": "Ann", "content": "see you at nine", "ts": "2024-05-01T10:00:00Z"}
    assert bm("ingest", "-", "-u", "ann", input=json.dumps(line) + "\n").json()["ingested"] == 1
    with open_memory() as mem, mem.log.write() as t:  # re-key it the way the older bm did
        db = mem.log.db["bead_keys"]
        (key, bead), = list(t.txn.cursor(db=db))
        t.txn.delete(key, db=db)
        ts = 1714557600000
        old = hashlib.sha256(f"\x1f{ts}\x1fAnn\x1fsee you at nine".encode()).hexdigest()
        t.txn.put(f"ann\x1fh\x1f{old}".encode(), bead, db=db)
    again = bm("ingest", "-", "-u", "ann", input=json.dumps(line) + "\n").json()
    assert (again["ingested"], again["duplicates"]) == (0, 1)
    assert bm("ingest", "-", "-u", "ann", "--dry-run", input=json.dumps(line) + "\n").json()["duplicates"] == 1


def test_a_forgotten_turn_an_older_bm_stored_is_not_stored_again(bm, store, tmp_path, monkeypatch):
    """A turn an older bm keyed its way (no role in the key), forgotten now: re-sent, it stays out."""
    import hashlib

    from brandmind.memory import Memory

    line = {"role": "user", "speaker": "Ann", "content": "zq see you at nine", "ts": "2024-05-01T10:00:00Z"}
    assert bm("ingest", "-", "-u", "ann", input=json.dumps(line) + "\n").json()["ingested"] == 1
    with open_memory() as mem:
        ops = list(mem.log.iter_ops())
    old = hashlib.sha256("\x1f1714557600000\x1fAnn\x1fzq see you at nine".encode()).hexdigest()
    bead = next(op for op in ops if op["kind"] == "bead.add")["payload"]["bead"]
    bead["key"] = f"ann\x1fh\x1f{old}"  # as the older bm's op carried it
    monkeypatch.setenv("BM_HOME", str(tmp_path / "older"))
    with Memory(create=True) as mem:
        mem.receive_ops(ops)
        assert mem.ingest([line], user="ann")["duplicates"] == 1
        mem.forget_many([], bead_ids=[bead["id"]])
        report = mem.ingest([line], user="ann")
        assert (report["ingested"], report.get("forgotten")) == (0, 1)
        assert mem.beads_tail(5, user="ann") == []


def test_the_agent_loop_script_keeps_every_turn_and_forgets_for_good(tmp_path):
    """scripts/agent_loop.sh, the loop the README shows, end to end (hash embedder for speed)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "agent_loop.sh"
    env = {**os.environ, "BM_EMBEDDER": "hash", "BM_HOME": str(tmp_path / "loop"),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    res = subprocess.run(["bash", str(script), "--keep"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok: no turn lost, the forgotten turn is gone everywhere" in res.stdout
    assert "19 turns stored" in res.stdout and "FAIL" not in res.stdout
