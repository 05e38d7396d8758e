"""Remote-assisted recall (sync/assist.py) and the zep / graphiti remote configuration.

The merge and the budget are tested with in-process remotes that answer, fail or sleep;
the real SDK paths are in test_sync_zep.py (loopback Zep server) and test_sync_graphiti.py
(real FalkorDB), including `bm recall --remote` end to end.
"""
from __future__ import annotations

import time

import pytest

from conftest import assert_error

from brandmind.sync.assist import assisted_recall, found_too_little, merge
from brandmind.sync.mirror import RemoteHit


class FakeRemote:
    def __init__(self, name: str, hits: list[RemoteHit] | None = None, *, sleep: float = 0.0,
                 fail: Exception | None = None, kind: str = "zep") -> None:
        self.name, self.kind, self.hits, self.sleep, self.fail = name, kind, hits or [], sleep, fail
        self.asked = 0

    def search(self, user: str, query: str, limit: int, timeout: float) -> list[RemoteHit]:
        self.asked += 1
        if self.sleep:
            time.sleep(self.sleep)
        if self.fail is not None:
            raise self.fail
        return self.hits[:limit]


def hit(uuid: str, text: str, local_id: str | None = None, score: float = 0.9) -> RemoteHit:
    return RemoteHit(uuid=uuid, text=text, score=score, kind="edge", valid_at=None, invalid_at=None,
                     local_id=local_id)


def local_row(i: int, text: str, cosine: float = 0.2, keyword: bool = False) -> dict:
    sig = {"vector": {"cosine": cosine, "rank": i}}
    if keyword:
        sig["keyword"] = {"rank": i}
    return {"id": f"m_{i}", "text": text, "provenance": [], "score": 1.0 / i, "signals": sig}


def test_merge_fuses_ranks_dedups_local_ids_and_texts_and_marks_provenance():
    local = [local_row(1, "Ann lives in Lisbon"), local_row(2, "Bo likes jazz"), local_row(3, "Cy sails")]
    rem = FakeRemote("zep")
    answers = [(rem, [hit("u1", "Bo likes jazz", local_id="m_2"),        # the same memory: boosted
                      hit("u2", "  ann LIVES in lisbon "),                # the same text: boosted
                      hit("u3", "Dee works at Acme")])]                   # new: appended
    out = merge(local, answers, k=10)
    ids = [r["id"] for r in out]
    assert len(ids) == len(set(ids)) == 4
    assert ids[:2] == ["m_2", "m_1"] or ids[:2] == ["m_1", "m_2"]
    assert ids.index("zep:u3") > ids.index("m_1") and "m_3" in ids
    by = {r["id"]: r for r in out}
    assert {"source": "zep", "remote": "zep", "uuid": "u1"} in by["m_2"]["provenance"]
    assert {"source": "zep", "remote": "zep", "uuid": "u2"} in by["m_1"]["provenance"]
    assert by["m_3"]["provenance"] == []
    new = by["zep:u3"]
    assert new["source"] == "zep" and new["text"] == "Dee works at Acme" and new["type"] == "fact"
    assert [r["fused"] for r in out] == sorted((r["fused"] for r in out), reverse=True)
    assert len(merge(local, answers, k=2)) == 2


def test_found_too_little_counts_matching_results_only():
    weak = [local_row(i, f"t{i}", cosine=0.1) for i in range(1, 11)]
    assert found_too_little(weak, 10)
    strong = [local_row(i, f"t{i}", cosine=0.8) for i in range(1, 4)] + weak[3:]
    assert not found_too_little(strong, 10)
    assert not found_too_little([local_row(1, "x", keyword=True)], 1)
    assert found_too_little([], 5)


def test_forced_assist_merges_and_auto_assist_asks_only_when_local_is_short():
    local_rows = [local_row(1, "Ann lives in Lisbon", cosine=0.9), local_row(2, "Ann moved", cosine=0.9),
                  local_row(3, "Ann again", cosine=0.9)]
    rem = FakeRemote("zep", [hit("u9", "Ann speaks Portuguese")])
    out, reports = assisted_recall(lambda: list(local_rows), [rem], "Ann", user="u", k=5, forced=True)
    assert [r["status"] for r in reports] == ["ok"] and "zep:u9" in [r["id"] for r in out]
    rem.asked = 0
    out, reports = assisted_recall(lambda: list(local_rows), [rem], "Ann", user="u", k=5, forced=False)
    assert rem.asked == 0 and reports == [] and out == local_rows    # enough locally: not asked
    out, reports = assisted_recall(lambda: [], [rem], "Ann", user="u", k=5, forced=False)
    assert rem.asked == 1 and [r["id"] for r in out] == ["zep:u9"]


def test_a_late_or_failing_remote_falls_back_to_local_results_within_the_budget():
    from brandmind.errors import BMError

    local_rows = [local_row(1, "Ann lives in Lisbon")]
    slow = FakeRemote("slow", [hit("u1", "late fact")], sleep=3.0)
    broken = FakeRemote("broken", fail=BMError("down", hint="later"))
    crashing = FakeRemote("crashing", fail=RuntimeError("library bug"), kind="graphiti")
    good = FakeRemote("good", [hit("u2", "Ann speaks Portuguese")])
    t0 = time.perf_counter()
    out, reports = assisted_recall(lambda: list(local_rows), [slow, broken, crashing, good], "Ann",
                                   user="u", k=5, forced=True, timeout_ms=300)
    took = time.perf_counter() - t0
    assert took < 2.0   # the budget (0.3 s) holds: the slow remote's 3 s are not waited for
    status = {r["remote"]: r["status"] for r in reports}
    assert status == {"slow": "timeout", "broken": "error", "crashing": "error", "good": "ok"}
    assert [r["id"] for r in out] == ["m_1", "good:u2"] or [r["id"] for r in out] == ["good:u2", "m_1"]
    out, reports = assisted_recall(lambda: list(local_rows), [slow], "Ann", user="u", k=5, forced=True,
                                   timeout_ms=200)
    assert out == local_rows and reports[0]["status"] == "timeout"


def test_recall_with_remote_is_the_python_api_of_assisted_recall(store):
    """The library function `bm recall` calls: local recall merged with the remotes asked."""
    from brandmind.memory import Memory
    from brandmind.sync.assist import recall_with_remote

    with Memory() as mem:
        mem.remember("Ann lives in Lisbon", user="ann")
        rem = FakeRemote("zep", [hit("u7", "Ann speaks Portuguese")])
        out, reports = recall_with_remote(mem, "where does Ann live", user="ann", remote=True, remotes=[rem])
        assert rem.asked == 1 and [r["status"] for r in reports] == ["ok"]
        texts = [r["text"] for r in out]
        assert "Ann lives in Lisbon" in texts and "Ann speaks Portuguese" in texts
        by = {r["text"]: r for r in out}
        assert by["Ann speaks Portuguese"]["id"] == "zep:u7" and "fused" in by["Ann lives in Lisbon"]
        # without remote=True and no remote configured with assist: local recall only, nobody asked
        local, none = recall_with_remote(mem, "where does Ann live", user="ann")
        assert none == [] and [r["text"] for r in local] == ["Ann lives in Lisbon"]
        # a recall as of a date is local only: the remotes know the present
        past, none = recall_with_remote(mem, "Ann", user="ann", remote=True, remotes=[rem], as_of="2100-01-01")
        assert none == [] and rem.asked == 1


# -- configuration ------------------------------------------------------------------------------------------
def test_zep_and_graphiti_remotes_keep_only_the_names_of_secret_variables(bm, store, monkeypatch):
    monkeypatch.setenv("ZEP_API_KEY", "z-secret-value")
    monkeypatch.setenv("FALKOR_PW", "f-secret-value")
    res = bm("remote", "add", "zep", "--base-url", "http://127.0.0.1:9/api/v4", "--assist", "--json")
    assert res.code == 0, res
    assert res.json()["api_key_env"] == "ZEP_API_KEY" and res.json()["assist"] is True
    res = bm("remote", "add", "graphiti", "--port", "9", "--password-env", "FALKOR_PW", "--json")
    assert res.code == 0, res
    text = (store / "data" / "remotes.toml").read_text()
    assert "z-secret-value" not in text and "f-secret-value" not in text
    assert 'api_key_env = "ZEP_API_KEY"' in text and 'password_env = "FALKOR_PW"' in text
    listed = {r["name"]: r for r in bm("remote", "list", "--json").json()}
    assert listed["zep"]["type"] == "zep" and listed["graph"]["url"] == "falkordb://127.0.0.1:9"


def test_bad_remote_settings_get_one_clear_line(bm, store, monkeypatch):
    assert_error(bm("remote", "add", "graphiti", "--password-env", "my secret"), 1, "environment variable")
    assert_error(bm("remote", "add", "graphiti", "--port", "70000"), 1, "port")
    assert_error(bm("remote", "add", "zep", "--base-url", "ftp://x"), 1, "Zep URL")
    assert_error(bm("remote", "add", "zep", "--timeout-ms", "5"), 1, "timeout")
    assert not (store / "data" / "remotes.toml").exists()
    # recall --remote without a graph remote
    bm("remember", "Ann lives in Lisbon")
    assert_error(bm("recall", "Ann", "--remote"), 1, "no zep or graphiti remote")
    # a missing key variable: the test says which variable, and the key is never asked for
    monkeypatch.delenv("ZEP_API_KEY", raising=False)
    assert bm("remote", "add", "zep", "--base-url", "http://127.0.0.1:9/api/v4").code == 0
    line = assert_error(bm("remote", "test", "zep"), 1, "ZEP_API_KEY")
    assert "export ZEP_API_KEY" in line


def test_recall_with_an_unreachable_remote_says_so_and_answers_locally(bm, store, monkeypatch):
    monkeypatch.setenv("ZEP_API_KEY", "k")
    bm("remember", "Ann lives in Lisbon")
    assert bm("remote", "add", "zep", "--base-url", "http://127.0.0.1:9/api/v4").code == 0
    res = bm("recall", "where does Ann live", "--remote", "--json")
    assert res.code == 0, res
    assert res.json()[0]["text"] == "Ann lives in Lisbon"
    # refused connections are retried within the budget: "error" once the retries give up,
    # "timeout" on a loaded machine where they outlast the 700 ms; either way it says so
    assert ("note: remote zep error" in res.err or "note: remote zep timeout" in res.err), res
    assert "local results only" in res.err
    plain = bm("recall", "where does Ann live", "--json")   # assist is off: the remote is not asked
    assert plain.code == 0 and plain.err == "" and plain.json()[0]["text"] == "Ann lives in Lisbon"
