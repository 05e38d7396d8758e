"""Forgetting on a schedule (brandmind/expiry.py): ``--ttl`` on remember and ingest, ``bm pin``,
``bm forget --older-than`` / ``--expired``, and recall's optional access counts.

Time is injected (``brandmind.clock.now_millis`` moved forward, never slept): an expired memory
or turn is never returned by recall or the context from that moment, then is forgotten by the
forget rules -- on the next open, by the daemon worker's turn or `bm forget --expired` -- and
its words are in no file of the store (tests/test_forget_everywhere.py's helpers).  The expiry
is part of the ``memory.add`` op, so a second store that syncs agrees on it.
"""
from __future__ import annotations

import json
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import assert_error, run_bm, use_home  # noqa: E402
from test_forget_everywhere import everywhere, files_holding  # noqa: E402

HOUR, DAY = 3_600_000, 86_400_000
SECRET = "wombat-7731"


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch):
    """``later(ms)`` moves the library's clock forward (what expiry, recall and ops read)."""
    from brandmind import clock

    real, shift = clock.now_millis, [0]
    monkeypatch.setattr(clock, "now_millis", lambda: real() + shift[0])

    def advance(ms: int) -> None:
        shift[0] += ms

    return advance


def turn(content: str, **more: object) -> dict:
    return {"role": "user", "content": content, **more}


# -- durations ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, ms", [
    ("2s", 2_000), ("90m", 90 * 60_000), ("12h", 12 * HOUR), ("30d", 30 * DAY), ("2w", 14 * DAY),
    ("1d12h", 36 * HOUR), (" 3H ", 3 * HOUR), (45, 45_000), (timedelta(minutes=5), 300_000)])
def test_durations_read(value: object, ms: int) -> None:
    from brandmind.expiry import parse_ttl

    assert parse_ttl(value) == ms


@pytest.mark.parametrize("value", ["", "2", "2x", "d", "-1d", "0s", "1.5h", "2d and", "40000w", None, True, -3])
def test_bad_durations_are_usage_errors(value: object) -> None:
    from brandmind.errors import UsageError
    from brandmind.expiry import parse_ttl

    with pytest.raises(UsageError) as err:
        parse_ttl(value)
    assert err.value.hint


def test_bad_durations_on_the_command_line(bm, store: Path) -> None:
    res = run_bm("remember", "x", "--ttl", "3x")  # a real process: exit code and stderr
    assert "90m" in assert_error(res, 2, "--ttl", "3x")
    assert_error(bm("remember", "x", "--ttl", "0s"), 2, "--ttl", "longer than 0")
    assert_error(bm("ingest", "-", "--ttl", "soon", input=json.dumps(turn("hi")) + "\n"), 2, "--ttl")
    assert_error(bm("forget", "--older-than", "ages", "--yes"), 2, "--older-than")
    assert_error(bm("forget", "--dry-run", "--match", "x"), 2, "--dry-run")
    assert_error(bm("remember", '{"subject": "a", "predicate": "b", "object": "c"}', "--fact", "--pin"), 2, "--pin")
    assert bm("memories", "list", "--json").json() == []  # nothing was stored


# -- remember --ttl: never returned once expired, then forgotten everywhere --------------------------
def test_an_expired_memory_is_never_returned_then_gone_from_every_file(bm, store: Path, bm_home: Path, later) -> None:
    res = bm("remember", f"the gate code is {SECRET}", "-u", "f", "--ttl", "2h", "--json")
    kept = bm("remember", "the gate is green", "-u", "f", "--json").json()["id"]
    shown = bm("memories", "show", res.json()["id"], "--json").json()
    assert shown["expires_at"] and not shown["pinned"]
    assert SECRET in bm("recall", "gate code", "-u", "f", "--json").out
    later(2 * HOUR + 1000)
    from brandmind.memory import Memory

    mem = Memory.__new__(Memory)  # the store as a long-running agent holds it: no reopen, no sweep
    from brandmind.store import Store
    from brandmind.config import Config

    mem.store = Store(Config.load())
    try:
        assert [r["id"] for r in mem.recall("gate code", user="f")] == [kept]
        assert SECRET not in mem.context("what is the gate code?", user="f")["text"]
    finally:
        mem.close()
    # the next open forgets it, by the forget rules: no file of the store holds it any more
    assert SECRET not in everywhere(bm)
    assert files_holding(bm_home, SECRET) == []
    assert [m["id"] for m in bm("memories", "list", "-u", "f", "--json").json()] == [kept]
    assert bm("rebuild").code == 0 and SECRET not in everywhere(bm)
    assert bm("forget", "--expired", "--json").json() == {"forgotten": [], "beads": []}  # (done at open)


# -- the agent loop: context -> ingest with a ttl -> the next context -------------------------------
def test_the_agent_loop_never_sees_an_expired_turn_again(store: Path, bm_home: Path, later) -> None:
    from brandmind import expiry
    from brandmind.memory import Memory

    with Memory() as mem:
        mem.ingest([turn("I like tea"), turn("my bike lock is 4921")], user="f")
        ctx = mem.context("what do I like?", user="f")
        mem.ingest([turn(f"tell nobody: the safe opens with {SECRET}", ts="2024-05-01T10:00:00Z"),
                    turn("the weather is fine")], user="f", ttl="30m")
        assert SECRET in mem.context("how does the safe open?", user="f")["text"]
        later(31 * 60_000)
        ctx = mem.context("how does the safe open?", user="f", budget=4000)
        assert SECRET not in ctx["text"] and "weather is fine" not in ctx["text"]
        assert "bike lock is 4921" in ctx["text"]  # the turns without a ttl stay
        assert SECRET not in json.dumps(mem.beads_tail(50, user="f"))
        assert SECRET not in json.dumps(mem.recall("safe opens", user="f", k=50))
        # the daemon worker's turn forgets it (its lock held), turns and memories both
        assert expiry.housekeeping(lambda: mem, threading.RLock()) == 2
        assert SECRET not in mem.context("how does the safe open?", user="f")["text"]
        assert [m["text"] for m in mem.list_memories(user="f")] == ["my bike lock is 4921", "I like tea"]


def test_facts_extracted_from_an_expiring_turn_expire_with_it(store: Path, bm_home: Path, later) -> None:
    from brandmind.memory import Memory

    with Memory() as mem:
        mem.ingest([turn("I live in Quenterville")], user="f", ttl="1h", extract=True)
        facts = [m for m in mem.list_memories(user="f") if m["type"] != "episode"]
        assert facts and all(m["expires_at"] for m in facts)
        later(HOUR + 1)
        assert "Quenterville" not in json.dumps(mem.recall("where do I live?", user="f"))
        assert mem.forget_expired()["memories"]
        assert mem.list_memories(user="f") == []
    assert files_holding(bm_home, "Quenterville") == []


# -- pin --------------------------------------------------------------------------------------------
def test_a_pin_survives_expiry_and_older_than_but_not_an_explicit_forget(bm, store: Path, later) -> None:
    from brandmind.memory import Memory

    with Memory() as mem:
        pinned = mem.remember("pinned: the wifi password", user="f", ttl="1h", pin=True)["id"]
        later_pin = mem.remember("pinned later: the boat is blue", user="f", ttl="1h")["id"]
        assert mem.pin(later_pin)["pinned"]
        gone = mem.remember("the wifi was down", user="f", ttl="1h")["id"]
        mem.ingest([turn("a turn I pin"), turn("a turn that goes")], user="f", ttl="1h")
        turn_mem = next(m for m in mem.list_memories(user="f") if m["text"] == "a turn I pin")
        mem.pin(turn_mem["id"])
        later(2 * HOUR)
        texts = [r["id"] for r in mem.recall("wifi password boat", user="f", k=20)]
        assert pinned in texts and later_pin in texts and gone not in texts
        out = mem.forget_expired()
        assert gone in out["memories"] and len(out["beads"]) == 1  # the unpinned turn's
        left = {m["id"] for m in mem.list_memories(user="f")}
        assert left == {pinned, later_pin, turn_mem["id"]}
        assert mem.get_bead(turn_mem["provenance"][0]["bead"])  # the pin keeps its turn too
        # --older-than leaves pinned memories (and an unpin lets the ttl apply again)
        assert mem.forget_older_than("1m", user="f")["memories"] == []
        mem.unpin(later_pin)
        assert mem.forget_expired()["memories"] == [later_pin]
    res = bm("forget", pinned, "--yes", "--json")  # named by id, a pinned memory is forgotten
    assert res.code == 0 and res.json()["forgotten"] == [pinned]
    assert_error(bm("pin", "m_nosuchmemory"), 1, "no memory")


# -- forget --older-than ----------------------------------------------------------------------------
def test_forget_older_than_with_dry_run_user_filter_and_pins(bm, store: Path, bm_home: Path) -> None:
    old = "2020-01-01T00:00:00Z"
    a = bm("remember", f"ann's old note {SECRET}", "-u", "ann", "--ts", old, "--json").json()["id"]
    keep = bm("remember", "ann's old pinned note", "-u", "ann", "--ts", old, "--pin", "--json").json()["id"]
    bm("remember", "ann's new note", "-u", "ann")
    bm("remember", "bob's old note", "-u", "bob", "--ts", old)
    bm("ingest", "-", "-u", "ann", input=json.dumps(turn(f"an old turn {SECRET}", ts=old)) + "\n")
    bm("beads", "add", "an old bead alone", "-u", "ann", "--ts", old)
    res = bm("forget", "--older-than", "30d", "-u", "ann", "--dry-run", "--json")
    assert res.code == 0 and res.json()["dry_run"] and len(res.json()["forgotten"]) == 2  # a + the turn
    assert len(res.json()["beads"]) == 2  # the turn's bead and the lone bead
    assert_error(bm("forget", "--older-than", "30d", "-u", "ann"), 2, "--yes")  # piped: no prompt
    assert bm("forget", "--older-than", "30d", "-u", "ann", "--yes").code == 0
    ann = {m["text"] for m in bm("memories", "list", "-u", "ann", "--json").json()}
    assert ann == {"ann's old pinned note", "ann's new note"}
    assert [m["text"] for m in bm("memories", "list", "-u", "bob", "--json").json()] == ["bob's old note"]
    assert bm("beads", "tail", "-u", "ann", "--json").json() == []
    assert files_holding(bm_home, SECRET, "old bead alone") == [] and a != keep


# -- sync: two devices agree on expiry and pins -----------------------------------------------------
def test_expiry_and_pins_sync_between_two_stores(store: Path, tmp_path: Path, monkeypatch, later) -> None:
    from dirremote import DirRemote

    from brandmind.memory import Memory
    from brandmind.sync.engine import sync_once

    remote = DirRemote(tmp_path / "remote")
    home_a = Path(str(store))
    with Memory() as a:
        m = a.remember(f"a: the vault code {SECRET}", user="f", ttl="1h")
        p = a.remember("a: pinned, the vault is downstairs", user="f", ttl="1h")["id"]
        a.ingest([turn("a: a turn for an hour")], user="f", ttl="1h")
        assert sync_once(a, remote)["errors"] == []
    use_home(monkeypatch, tmp_path / "b")
    with Memory(create=True) as b:
        assert sync_once(b, remote)["errors"] == []
        assert b.get(m["id"])["expires_at"] == m["expires_at"]  # the same moment on both
        assert [x["content"] for x in b.beads_tail(5, user="f")] == ["a: a turn for an hour"]
        b.pin(p)  # pinned on b, synced to a before it expires
        assert sync_once(b, remote)["errors"] == []
    use_home(monkeypatch, home_a)
    with Memory() as a:
        assert sync_once(a, remote)["errors"] == []
        assert a.get(p)["pinned"]
    later(HOUR + 1000)
    for home in (home_a, tmp_path / "b"):  # each device forgets on its own at its next open
        use_home(monkeypatch, home)
        with Memory() as dev:
            assert [x["id"] for x in dev.list_memories(user="f")] == [p]
            assert dev.beads_tail(5, user="f") == []
            assert sync_once(dev, remote)["errors"] == []  # the other's forgets: nothing changes
            assert [x["id"] for x in dev.list_memories(user="f")] == [p]
        assert files_holding(home, SECRET) == []


def test_bad_expiry_and_pin_ops_are_refused_when_pulled(store: Path) -> None:
    from brandmind import opcheck
    from brandmind.clock import now_millis
    from brandmind.memory import Memory

    hlc, peer = now_millis(), "peer01"
    add = {"id": "m_x1", "text": "t", "type": "fact", "user": "f", "agent": None, "importance": 0.5,
           "ts": hlc, "valid_from": None, "valid_to": None, "source": "sync", "provenance": [], "meta": {}}
    ops = [{"id": f"{peer}:1", "hlc": [hlc, 0, peer], "kind": "memory.add", "payload": {**add, "expires_at": "soon"}},
           {"id": f"{peer}:2", "hlc": [hlc, 1, peer], "kind": "memory.pin", "payload": {"id": "m_x1", "pinned": "yes"}},
           {"id": f"{peer}:3", "hlc": [hlc, 2, peer], "kind": "memory.add", "payload": {**add, "id": "m_x2"}},
           {"id": f"{peer}:4", "hlc": [hlc, 3, peer], "kind": "memory.pin", "payload": {"id": "m_x2", "pinned": True}}]
    with Memory() as mem:
        mem.receive_ops(ops)
        assert {q["op_id"] for q in opcheck.quarantined(mem.sql)} == {f"{peer}:1", f"{peer}:2"}
        assert mem.get("m_x2")["pinned"] and mem.get("m_x2")["expires_at"] is None
    with pytest.raises(Exception, match="pinned must be true or false"):
        opcheck.check("memory.pin", {"id": "m_x2", "pinned": 1})


def test_a_pin_arriving_before_its_memory_waits_and_the_later_pin_wins(store: Path) -> None:
    from brandmind.clock import now_millis
    from brandmind.memory import Memory

    hlc, peer = now_millis(), "peer02"

    def op(seq: int, counter: int, kind: str, payload: dict, replica: str = peer) -> dict:
        return {"id": f"{replica}:{seq}", "hlc": [hlc, counter, replica], "kind": kind, "payload": payload}

    add = {"id": "m_y1", "text": "t", "type": "fact", "user": "f", "agent": None, "importance": 0.5,
           "ts": hlc, "valid_from": None, "valid_to": None, "source": "sync", "provenance": [], "meta": {}}
    with Memory() as mem:
        # the later unpin (another device) arrives first and waits; the earlier pin comes with the add
        mem.receive_ops([op(1, 5, "memory.pin", {"id": "m_y1", "pinned": False}, "other9")])
        mem.receive_ops([op(1, 0, "memory.add", add), op(2, 1, "memory.pin", {"id": "m_y1", "pinned": True})])
        assert not mem.get("m_y1")["pinned"]
        # a pin stamped after both wins; an older one arriving later changes nothing
        mem.receive_ops([op(2, 9, "memory.pin", {"id": "m_y1", "pinned": True}, "other9")])
        mem.receive_ops([op(3, 2, "memory.pin", {"id": "m_y1", "pinned": False})])
        assert mem.get("m_y1")["pinned"]


# -- access counts (recall's optional signal) --------------------------------------------------------
@pytest.mark.parametrize("hits, days_ago, bonus", [
    (0, 0, 0.0), (1, 0, 0.25), (3, 0, 0.375), (2, 30, 0.25), (4, 60, 0.25), (1, 1e6, 0.0)])
def test_access_bonus_saturates_and_fades_with_the_half_life(hits: int, days_ago: float, bonus: float) -> None:
    import numpy as np

    from brandmind.scoring import DAY_MS, Weights, access_bonus

    now = 10 ** 13
    got = access_bonus(Weights(access=0.5, half_life_days=30.0), np.array([hits]),
                       np.array([now - int(days_ago * DAY_MS)]), now)
    assert got[0] == pytest.approx(bonus, abs=1e-9)


def test_access_counts_only_while_the_signal_is_on(store: Path, monkeypatch) -> None:
    from brandmind.memory import Memory

    with Memory() as mem:
        ids = [mem.remember(t, user="f")["id"] for t in ("green tea", "black tea", "coffee beans")]
        mem.recall("tea", user="f")
    with Memory() as mem:
        assert mem.sql.conn.execute("SELECT count(*) FROM memory_access").fetchone()[0] == 0
    monkeypatch.setenv("BM_WEIGHT_ACCESS", "0.5")
    with Memory() as mem:
        for _ in range(3):
            top = mem.recall("tea", user="f", k=1)[0]
        assert top["signals"]["access"]["score"] > 0  # counted before being written
    with Memory() as mem:
        hits = dict(mem.sql.conn.execute("SELECT id, hits FROM memory_access").fetchall())
        assert hits == {top["id"]: 3}
        mem.forget(top["id"])
        assert mem.sql.conn.execute("SELECT count(*) FROM memory_access").fetchone()[0] == 0
        assert set(ids) > {r["id"] for r in mem.recall("tea", user="f")}
