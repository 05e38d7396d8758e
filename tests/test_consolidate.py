"""bm consolidate / Memory.consolidate: near-duplicates merged into their oldest member by a
``memory.merge`` op; unrelated memories untouched; replay gives the same store."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brandmind.consolidate import _Text
from brandmind.errors import UsageError
from brandmind.memory import Memory
from brandmind.recall import STOPWORDS

from conftest import assert_error


def rows(mem) -> dict:
    """Every column of every memory (what a rebuild must reproduce; rowids aside, which
    forgotten rows leave gaps in)."""
    return {r["id"]: {k: v for k, v in r.items() if k != "rowid"}
            for r in mem.sql.rows("SELECT * FROM memories ORDER BY id")}


def remember_all(mem, items) -> list[str]:
    ids = []
    for n, item in enumerate(items):
        text, kw = (item, {}) if isinstance(item, str) else item
        ids.append(mem.remember(text, user=kw.pop("user", "ann"), ts=1_700_000_000_000 + n * 1000, **kw)["id"])
    return ids


def test_merges_near_duplicates_into_the_oldest_and_leaves_the_rest_alone(store):
    with Memory() as mem:
        ids = remember_all(mem, [
            "Ann lives in Lisbon",                 # 0 kept
            "Ann likes green tea",                 # 1
            "ann lives in lisbon!",                # 2 -> 0 (same words: identical hash vectors)
            "Ann lives in Porto",                  # 3 another city: not a duplicate
            "Ann lives in Lisbon.",                # 4 -> 0
            ("Ann lives in Lisbon", {"type": "preference"}),   # 5 another type
            ("Ann lives in Lisbon", {"agent": "travel"}),      # 6 another scope
            ("Ann lives in Lisbon", {"user": "bob"}),          # 7 another user
            "Ann likes green tea",                 # 8 -> 1
        ])
        ops_before = mem.log.count("ops")
        report = mem.consolidate(user="ann")
        assert report["merged"] == 3 and report["dry_run"] is False
        assert [(g["kept"], g["merged"]) for g in report["groups"]] == [
            (ids[0], [ids[2], ids[4]]), (ids[1], [ids[8]])]
        assert report["groups"][0]["texts"] == ["Ann lives in Lisbon", "ann lives in lisbon!", "Ann lives in Lisbon."]
        assert mem.log.count("ops") == ops_before + 2  # one memory.merge per group
        merge = [op for op in mem.log.iter_ops() if op["kind"] == "memory.merge"][0]
        assert set(merge["payload"]) == {"into", "ids", "ts", "user", "provenance"}
        assert "Lisbon" not in json.dumps(merge)

        after = rows(mem)
        for merged, into in ((ids[2], ids[0]), (ids[4], ids[0]), (ids[8], ids[1])):
            assert after[merged]["retired_at"] == merge["payload"]["ts"]
            assert after[merged]["superseded_by"] == into
            assert json.loads(after[merged]["meta"])["retired_reason"] == "merged"
        assert after[ids[0]]["confirmations"] == 2 and after[ids[1]]["confirmations"] == 1
        assert after[ids[0]]["retired_at"] is None and after[ids[0]]["updated_at"] == merge["payload"]["ts"]
        for untouched in (ids[3], ids[5], ids[6], ids[7]):
            assert after[untouched]["retired_at"] is None and after[untouched]["confirmations"] == 0
        # merged memories are retired, not deleted; running again finds nothing more
        assert len(after) == 9
        assert mem.consolidate(user="ann")["groups"] == []
        assert mem.consolidate(user="bob")["groups"] == []


def test_the_text_check_keeps_apart_what_the_embedder_finds_close(store):
    with Memory() as mem:
        remember_all(mem, ["Meeting at 3pm on Monday", "Meeting at 4pm on Monday",
                           "Ann does not like coffee", "Ann does like coffee",
                           "Ann lives in Lisbon", "Ann lives in Porto",
                           "ok", "ok!"])
        # a low threshold lets the hash embedder's cosine pass; the text check decides
        groups = mem.consolidate(user="ann", threshold=0.5, dry_run=True)["groups"]
    assert [g["texts"] for g in groups] == [["ok", "ok!"]]
    t = lambda s: _Text(s, STOPWORDS)  # noqa: E731
    assert t("Ann likes green tea").compatible(t("Ann really likes green tea"))
    assert t("Ann prefers window seats on trains").compatible(t("On trains Ann prefers a window seat"))
    assert not t("Ann likes cats").compatible(t("Ann likes dogs"))
    assert not t("Ann can't swim").compatible(t("Ann can swim"))
    assert not t("Call Priya on Monday").compatible(t("Call Priya on Tuesday"))


def test_raw_turns_are_left_alone_unless_asked_and_then_keep_both_provenances(store):
    lines = [json.dumps({"id": f"t{n}", "role": "user", "speaker": "Ann", "content": "I live in Lisbon",
                         "ts": f"2024-03-0{n}T10:00:00Z"}) for n in (1, 2)]
    with Memory() as mem:
        mem.ingest(lines, user="ann")
        assert mem.consolidate(user="ann")["groups"] == []
        report = mem.consolidate(user="ann", include_turns=True)
        assert report["merged"] == 1
        kept = rows(mem)[report["groups"][0]["kept"]]
        assert [p["turn_id"] for p in json.loads(kept["provenance"])] == ["t1", "t2"]
        assert mem.get(report["groups"][0]["kept"])["text"] == "Ann: I live in Lisbon"


def test_rebuild_after_a_merge_gives_the_same_store(store):
    with Memory() as mem:
        ids = remember_all(mem, ["Ann lives in Lisbon", "Ann lives in Lisbon!", "Ann likes tea",
                                 "ann likes tea", "Ann owns a bike", "Ann owns a bike!", "Ann owns a bike?"])
        mem.consolidate(user="ann")
        mem.forget(ids[1])  # a merged memory forgotten afterwards (its add op is redacted)
        mem.forget(ids[4])  # and a kept one
        before = rows(mem)
        assert before[ids[0]]["confirmations"] == 1 and ids[1] not in before
        assert before[ids[5]]["superseded_by"] == ids[4] and before[ids[6]]["retired_at"] is not None
        mem.admin.rebuild()
        assert rows(mem) == before
    with Memory() as mem:
        mem.sql.close()
        mem.paths.sqlite_file.unlink()
    with Memory() as mem:  # the index refilled from the log on open
        assert rows(mem) == before


def test_forgetting_the_user_redacts_their_merges(store):
    lines = [json.dumps({"id": f"t{n}", "role": "user", "content": "my PIN is 4921", "meta": {"secret": "x"},
                         "ts": f"2024-03-0{n}T10:00:00Z"}) for n in (1, 2)]
    with Memory() as mem:
        mem.ingest(lines, user="ann")
        assert mem.consolidate(user="ann", include_turns=True)["merged"] == 1
        mem.forget_user("ann")
        merges = [op for op in mem.log.iter_ops() if op["kind"] == "memory.merge"]
        assert [op["payload"] for op in merges] == [{"into": merges[0]["payload"]["into"], "redacted": True}]
        mem.admin.rebuild()
        assert rows(mem) == {}


def test_dry_run_stores_nothing_and_reports_what_a_run_would_merge(store, bm):
    with Memory() as mem:
        remember_all(mem, ["Ann lives in Lisbon", "Ann lives in Lisbon!"])
        before, ops = rows(mem), mem.log.count("ops")
        dry = mem.consolidate(user="ann", dry_run=True)
        assert rows(mem) == before and mem.log.count("ops") == ops
    res = bm("consolidate", "--user", "ann", "--dry-run", "--json")
    assert res.code == 0, res
    assert res.json()["groups"] == dry["groups"] and res.json()["dry_run"] is True
    with Memory() as mem:
        assert rows(mem) == before
    res = bm("consolidate", "--user", "ann", "--json")
    assert res.json()["groups"] == dry["groups"] and res.json()["merged"] == 1


@pytest.mark.parametrize("threshold", ["0", "-0.5", "1.5", "nan"])
def test_cli_rejects_a_bad_threshold(store, bm, threshold):
    assert_error(bm("consolidate", "--threshold", threshold), 2, "threshold")


def test_api_rejects_a_bad_threshold(store):
    with Memory() as mem:
        for bad in (0, 1.01, "x", True, float("inf")):
            with pytest.raises(UsageError):
                mem.consolidate(threshold=bad)


@pytest.mark.real_embedder
def test_paraphrases_merge_with_the_embedded_model(store):
    with Memory() as mem:
        ids = remember_all(mem, [
            "Ann works at Tidewater Labs", "The user's cat is called Miso",
            "Ann is employed by Tidewater Labs", "The user has a cat named Miso",
            "Meeting at 3pm on Monday", "Meeting at 4pm on Monday",        # cosine 0.94: numbers differ
            "Ann prefers window seats on trains", "Ann prefers aisle seats on trains",
        ])
        report = mem.consolidate(user="ann")
    assert [(g["kept"], g["merged"]) for g in report["groups"]] == [(ids[0], [ids[2]]), (ids[1], [ids[3]])]


# -- property: whatever was merged and forgotten, a replay gives the same rows ------------------
_TEXTS = ["Ann lives in Lisbon", "ann lives in lisbon!", "Ann likes tea", "Ann likes tea.", "Ann owns a bike"]
_ADD = st.one_of(
    st.tuples(st.just("remember"), st.sampled_from(_TEXTS), st.sampled_from(["ann", "ann", "bob"]),
              st.sampled_from(["fact", "fact", "preference"])),
    st.tuples(st.just("ingest"), st.sampled_from(_TEXTS), st.integers(0, 3)))
_FORGET = st.one_of(st.tuples(st.just("forget"), st.integers(0, 20)),
                    st.tuples(st.just("forget_user"), st.sampled_from(["ann", "bob"])))
_CONSOLIDATE = st.tuples(st.just("consolidate"), st.sampled_from(["ann", "ann", "bob"]), st.booleans())
# adds, a consolidation, forgets, more adds, another consolidation, more forgets
_OPS = st.tuples(st.lists(_ADD, min_size=2, max_size=6), _CONSOLIDATE, st.lists(_FORGET, max_size=2),
                 st.lists(_ADD, max_size=3), _CONSOLIDATE, st.lists(_FORGET, max_size=2)).map(
    lambda parts: [op for part in parts for op in (part if isinstance(part, list) else [part])])


def run(mem, operations) -> int:
    merged = 0
    for op in operations:
        if op[0] == "remember":
            mem.remember(op[1], user=op[2], type=op[3])
        elif op[0] == "ingest":
            mem.ingest([json.dumps({"id": str(op[2]), "role": "user", "content": op[1]})], user="ann")
        elif op[0] == "consolidate":
            merged += mem.consolidate(user=op[1], include_turns=op[2])["merged"]
        elif op[0] == "forget":
            live = mem.sql.memory_ids("1 ORDER BY rowid")
            if live:
                mem.forget(live[op[1] % len(live)])
        else:
            mem.forget_user(op[1])
    return merged


def test_property_rebuild_reproduces_merges():
    merges = []

    @settings(max_examples=40, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(_OPS)
    def check(operations):
        with tempfile.TemporaryDirectory(dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None) as tmp:
            with Memory(home=Path(tmp), create=True) as mem:
                merges.append(run(mem, operations))
                before = rows(mem)
                mem.admin.rebuild()
                assert rows(mem) == before

    check()
    assert sum(1 for n in merges if n) >= 10, merges  # the examples do merge
