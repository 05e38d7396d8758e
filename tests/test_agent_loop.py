"""The live agent loop: every turn is kept, and a forgotten turn is gone everywhere.

An agent asks `bm context` for each turn and hands the turn back with `bm ingest`; these
tests drive that loop through the CLI and then look for the forgotten words in every output
and in the raw files of the store.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import assert_error, open_memory, run_bm


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
