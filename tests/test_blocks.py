"""Core memory blocks (brandmind/blocks.py, `bm block`): limits on every path (CLI, API,
import, merge), read-only agent_persona, two processes appending at once, the pycrdt
per-origin ordering regression, rebuild equality, forget --user, and CLI errors."""
from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

from conftest import assert_error, open_memory, run_bm, use_home


@pytest.fixture(autouse=True)
def _store(store):
    return store


def ops_count() -> int:
    with open_memory() as mem:
        return mem.log.count("ops")


def apply_block_op(sql, op: dict) -> None:
    """One block op into the projection, as the catch-up applies it (brandmind/blockrules.py)."""
    from brandmind import blockrules, converge
    from brandmind.clock import hlc_key

    blockrules.apply_op(sql, op, hlc_key(op["hlc"]), forgotten_at=converge.forgotten_at)


def block_rows(mem) -> list:
    return mem.sql.conn.execute(
        "SELECT id, scope, user_id, agent_id, persona, label, description, char_limit, read_only, created_hlc, "
        "state, value, over_limit, updated_at, updated_by FROM blocks ORDER BY id").fetchall()


def update_rows(mem) -> list:
    return mem.sql.conn.execute("SELECT block_id, origin, seq, op_id, hlc, scope, user_id, agent_id, data, deps, "
                                "applied FROM block_updates ORDER BY block_id, origin, seq").fetchall()


# -- definitions and plain writes -----------------------------------------------------------
def test_default_labels_have_their_limits_and_are_created_on_first_write():
    with open_memory() as mem:
        human = mem.blocks.get("human", user="ann")
        assert (human["exists"], human["value"], human["limit"], human["read_only"]) == (False, "", 3000, False)
        assert mem.blocks.get("agent_persona", user="ann")["limit"] == 2000
        assert mem.blocks.get("agent_persona", user="ann")["read_only"] is True
        assert mem.blocks.get("user_persona_profile", user="ann")["limit"] == 5000
        assert mem.blocks.get("qsr_real_estate_service_experience")["limit"] == 8000
        assert mem.blocks.list(user="ann") == []  # reading wrote nothing
        assert mem.log.count("ops") == 0

        b = mem.blocks.set("human", "Prefers tables.", user="ann")
        assert (b["exists"], b["value"], b["scope"], b["limit"]) == (True, "Prefers tables.", "user", 3000)
        b = mem.blocks.append("human", "Has a dog named Rex.", user="ann")
        assert b["value"] == "Prefers tables.\nHas a dog named Rex.\n"
        b = mem.blocks.replace("human", "Rex", "Max", user="ann")
        assert b["value"] == "Prefers tables.\nHas a dog named Max.\n" and b["replaced"] == 1
        custom = mem.blocks.set("project_notes", "Q3 review pending", user="ann")
        assert (custom["limit"], custom["description"]) == (2000, "")
        # with agent=, the agent writes the user's block it sees ...
        seen = mem.blocks.append("human", "Speaks French.", user="ann", agent="a1")
        assert seen["id"] == b["id"] and seen["value"].endswith("Speaks French.\n")
        mem.blocks.replace("human", "Speaks French.\n", "", user="ann", agent="a1")
        # ... until it has its own block of that label
        mem.blocks.define("human", user="ann", agent="a1")
        agent_block = mem.blocks.set("human", "Talks to the agent in French.", user="ann", agent="a1")
        assert agent_block["scope"] == "agent" and agent_block["id"] != b["id"]
        assert mem.blocks.get("human", user="ann")["value"] == b["value"]
        assert mem.blocks.get("human", user="ann", agent="a1")["value"] == "Talks to the agent in French."
        # a custom label an agent creates is its own
        assert mem.blocks.set("scratch", "todo", user="ann", agent="a2")["scope"] == "agent"
        # core blocks: defaults first, the agent's block replaces the user's of the same label
        core = mem.blocks.core(user="ann", agent="a1")
        assert [(c["label"], c["scope"]) for c in core] == [("human", "agent"), ("project_notes", "user")]
        assert [c["label"] for c in mem.blocks.core(user="ann")] == ["human", "project_notes"]
        assert mem.blocks.text(user="ann", agent="a1", label="human") == "Talks to the agent in French."
        assert mem.blocks.text(user="ann", agent="a9", label="human") == b["value"]
        assert set(core[0]) >= {"label", "value", "limit", "description", "read_only", "scope"}
        assert mem.blocks.text(user="ann", agent=None, label="human") == b["value"]
        assert mem.blocks.text(user="bob", agent=None, label="human") is None
        assert mem.blocks.list(user="bob") == []


def test_unicode_text_edits_land_at_the_right_place():
    # pycrdt 0.14 Text positions are UTF-8 byte offsets: a character offset would misplace edits
    with open_memory() as mem:
        mem.blocks.set("notes", "café 😀 naïve", user="ann")
        assert mem.blocks.replace("notes", "😀", "🎉🎉", user="ann")["value"] == "café 🎉🎉 naïve"
        assert mem.blocks.set("notes", "café au lait 🎉 naïve ünïcödé", user="ann")["value"] == "café au lait 🎉 naïve ünïcödé"
        assert mem.blocks.replace("notes", "naïve ", "", user="ann")["value"] == "café au lait 🎉 ünïcödé"
        mem.admin.rebuild()
        assert mem.blocks.get("notes", user="ann")["value"] == "café au lait 🎉 ünïcödé"


def test_set_is_a_diff_so_a_concurrent_edit_elsewhere_survives():
    with open_memory() as mem:
        mem.blocks.set("notes", "alpha\nbeta\ngamma\n", user="ann")
        ref = mem.blocks.resolve("notes", user="ann")
        one, two = mem.blocks.snapshot(ref), mem.blocks.snapshot(ref)  # two writers, same view
        mem.blocks.commit(one, "ALPHA\nbeta\ngamma\n", writer="ann")
        mem.blocks.commit(two, "alpha\nbeta\nGAMMA\n", writer="ann")
        assert mem.blocks.get("notes", user="ann")["value"] == "ALPHA\nbeta\nGAMMA\n"


# -- the limit on every path ----------------------------------------------------------------
def test_api_write_over_the_limit_is_refused_with_how_far_over():
    from brandmind.errors import InvalidInput

    with open_memory() as mem:
        mem.blocks.set("human", "x" * 2900, user="ann")
        before = mem.log.count("ops")
        with pytest.raises(InvalidInput) as err:
            mem.blocks.set("human", "y" * 3112, user="ann")
        assert err.value.message == "block 'human' would be 3,112 characters, 112 over its limit of 3,000"
        assert "bm block replace" in err.value.hint and "--limit" in err.value.hint
        with pytest.raises(InvalidInput, match="would be 3,011 characters, 11 over"):
            mem.blocks.append("human", "z" * 109, user="ann")  # "\n" + 109 + "\n" on top of 2,900
        with pytest.raises(InvalidInput, match="over its limit of 2,000"):
            mem.blocks.set("agent_persona", "p" * 2001, user="ann")
        assert mem.log.count("ops") == before
        _hold(mem, "ann", "qsr_real_estate")
        before = mem.log.count("ops")
        with pytest.raises(InvalidInput, match="would be 8,001 characters, 1 over its limit of 8,000"):
            mem.blocks.set("qsr_real_estate_service_experience", "s" * 8001, user="ann")
        assert mem.log.count("ops") == before
        assert mem.blocks.get("human", user="ann")["value"] == "x" * 2900
        # exactly at the limit is fine
        assert mem.blocks.set("human", "y" * 3000, user="ann")["chars"] == 3000


def _hold(mem, user: str, handle: str) -> bool:
    mem.personas.assign(user, handle)
    return True


def test_custom_limits_define_and_lowering_below_the_text(bm):
    res = bm("block", "define", "project_notes", "--limit", "50", "--description", "Open questions", "--user", "ann")
    assert res.code == 0, res
    assert (res.json()["limit"], res.json()["description"], res.json()["exists"]) == (50, "Open questions", True)
    assert bm("block", "set", "project_notes", "a" * 50, "--user", "ann").code == 0
    assert_error(bm("block", "append", "project_notes", "more", "--user", "ann"), 1,
                 "would be 56 characters, 6 over its limit of 50", "bm block define project_notes --limit N")
    assert_error(bm("block", "define", "project_notes", "--limit", "40", "--user", "ann"), 1,
                 "50 characters, 10 over the new limit of 40")
    # set with a new limit: both land together (and a limit below the text is refused)
    assert_error(bm("block", "set", "project_notes", "b" * 30, "--limit", "20", "--user", "ann"), 1,
                 "would be 30 characters, 10 over its limit of 20")
    res = bm("block", "set", "project_notes", "b" * 30, "--limit", "30", "--user", "ann")
    assert res.code == 0 and (res.json()["limit"], res.json()["description"]) == (30, "Open questions"), res
    assert_error(bm("block", "define", "project_notes", "--limit", "0", "--user", "ann"), 2, "from 1 to")


def test_cli_write_over_the_limit_is_one_error_line_and_writes_nothing(bm):
    assert bm("block", "set", "human", "hello", "--user", "ann").code == 0
    before = ops_count()
    line = assert_error(bm("block", "set", "human", "x" * 3112, "--user", "ann"), 1)
    assert "block 'human' would be 3,112 characters, 112 over its limit of 3,000" in line
    assert "bm block replace human" in line and "--limit" in line
    assert_error(bm("block", "append", "human", "-", "--user", "ann", input="y" * 3100), 1, "over its limit of 3,000")
    proc = run_bm("block", "set", "user_persona_profile", "-", "--user", "ann", input="z" * 5001)
    assert_error(proc, 1, "5,001 characters, 1 over its limit of 5,000")
    assert ops_count() == before
    assert bm("block", "show", "human", "--user", "ann").json()["value"] == "hello"


def test_import_rechecks_the_limit_and_imports_nothing_of_a_bad_batch(bm, tmp_path, monkeypatch):
    assert bm("remember", "Ann likes tea", "--user", "ann").code == 0
    assert bm("block", "set", "human", "Prefers tables.", "--user", "ann").code == 0
    lines = bm("export").out.splitlines()
    block = next(json.loads(x) for x in lines if json.loads(x)["kind"] == "block")
    assert block["value"] == "Prefers tables." and block["limit"] == 3000
    bad = [x if json.loads(x)["kind"] != "block" else json.dumps({**block, "value": "x" * 3050}) for x in lines]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(bad) + "\n", encoding="utf-8")
    use_home(monkeypatch, tmp_path / "other")
    assert bm("init").code == 0
    line = assert_error(bm("import", str(path)), 1, "would be 3,050 characters, 50 over its limit of 3,000",
                        "nothing from this batch was imported")
    assert line.startswith("Error: line ")
    with open_memory() as mem:
        assert mem.log.count("ops") == 0 and block_rows(mem) == []  # not even the memory before it


def test_export_import_export_is_identical_with_blocks(bm, tmp_path, monkeypatch):
    assert bm("block", "set", "human", "Prefers tables. 😀", "--user", "ann").code == 0
    assert bm("block", "define", "agent_persona", "--read-only", "--description", "who I am", "--user", "ann",
              "--agent", "a1").code == 0
    assert bm("block", "define", "empty_one", "--limit", "10", "--user", "bob").code == 0
    with open_memory() as mem:
        _hold(mem, "ann", "qsr_real_estate")
        mem.blocks.append("qsr_real_estate_service_experience", "Users start with site selection.", user="ann")
    first = bm("export").out
    assert first.count('"kind":"block"') == 4
    path = tmp_path / "x.jsonl"
    path.write_text(first, encoding="utf-8")
    use_home(monkeypatch, tmp_path / "copy")
    assert bm("init").code == 0
    res = bm("import", str(path))
    assert res.code == 0 and res.json()["block"] == 4, res
    assert bm("export").out == first
    again = bm("import", str(path))
    assert again.json()["block"] == 0 and again.json()["skipped"] >= 4  # present already: skipped


# -- the limit and the merge of concurrent edits ----------------------------------------------------
WRITER = textwrap.dedent("""
    import os, sys, time
    from brandmind import blocks
    from brandmind.memory import Memory
    name, barrier, line = sys.argv[1], sys.argv[2], sys.argv[3]
    with Memory() as mem:
        ref = mem.blocks.resolve("human", user="ann")
        snap = mem.blocks.snapshot(ref)         # each process reads the block ...
        new = snap.value + line + "\\n"
        blocks.check_growth(ref, new, snap.value, 3000)   # ... and finds its write within the limit
        open(barrier + "." + name, "w").close()
        while not all(os.path.exists(barrier + "." + n) for n in ("a", "b")):
            time.sleep(0.005)
        mem.blocks.commit(snap, new, writer="ann")
""")


def test_concurrent_edits_that_merge_over_the_limit_are_kept_flagged_and_reported(bm, tmp_path):
    assert bm("block", "set", "human", "h" * 2899 + "\n", "--user", "ann").code == 0
    script = tmp_path / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    procs = [subprocess.Popen([sys.executable, str(script), n, str(tmp_path / "go"), n * 80],
                              env=os.environ.copy()) for n in ("a", "b")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    b = bm("block", "show", "human", "--user", "ann").json()
    # both edits kept (never truncated); 2,900 + 81 + 81 = 3,062
    assert "a" * 80 in b["value"] and "b" * 80 in b["value"] and b["chars"] == 3062
    assert (b["over_limit"], b["over_by"]) == (True, 62)
    listed = bm("block", "list", "--user", "ann").json()
    assert listed[0]["over_limit"] is True
    assert_error(bm("doctor"), 1, "blocks", "'human' of ann (62 over)", "bm block replace human")
    # growth is refused until trimmed; shrinking is accepted, step by step
    assert_error(bm("block", "append", "human", "more", "--user", "ann"), 1,
                 "would be 3,067 characters, 67 over its limit of 3,000", "already 62 over")
    res = bm("block", "replace", "human", "a" * 80, "a" * 40, "--user", "ann")
    assert res.code == 0 and res.json()["over_by"] == 22 and res.json()["over_limit"], res
    res = bm("block", "replace", "human", "h" * 2899, "h" * 2799, "--user", "ann")
    assert res.code == 0 and res.json()["over_limit"] is False and res.json()["chars"] == 2922
    assert bm("doctor").code == 0
    with open_memory() as mem:  # the flag is a projection: a rebuild gives the same
        rows = block_rows(mem)
        mem.admin.rebuild()
        assert block_rows(mem) == rows


def test_editing_with_a_stale_view_checks_the_limit_on_the_merge():
    from brandmind.errors import InvalidInput

    with open_memory() as mem:
        mem.blocks.set("notes", "n" * 1900, user="ann")
        snap = mem.blocks.edit_begin("notes", user="ann")
        mem.blocks.append("notes", "o" * 80, user="ann")  # someone else, while the editor is open
        with pytest.raises(InvalidInput, match="would be 2,082 characters, 82 over its limit of 2,000"):
            mem.blocks.edit_commit(snap, "n" * 1900 + "p" * 100, user="ann")
        out = mem.blocks.edit_commit(snap, "n" * 1800 + "p" * 100, user="ann")
        value = out["value"]  # both edits merged (the CRDT picks where the concurrent append goes)
        assert value.startswith("n" * 1800) and "\n" + "o" * 80 + "\n" in value and "p" * 100 in value
        assert len(value) == 1982 and value.count("n") == 1800


# -- concurrency: two real processes -------------------------------------------------------------
APPENDER = textwrap.dedent("""
    import os, sys, time
    from brandmind.memory import Memory
    name, barrier = sys.argv[1], sys.argv[2]
    with Memory() as mem:
        open(barrier + "." + name, "w").close()
        while not all(os.path.exists(barrier + "." + n) for n in ("a", "b")):
            time.sleep(0.002)
        for i in range(50):
            mem.blocks.append("human", f"{name} line {i}", user="ann")
""")


def test_two_processes_appending_at_once_both_keep_every_line(tmp_path):
    script = tmp_path / "appender.py"
    script.write_text(APPENDER, encoding="utf-8")
    procs = [subprocess.Popen([sys.executable, str(script), n, str(tmp_path / "go")], env=os.environ.copy(),
                              stderr=subprocess.PIPE) for n in ("a", "b")]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    with open_memory() as mem:
        lines = mem.blocks.get("human", user="ann")["value"].splitlines()
        assert sorted(lines) == sorted(f"{n} line {i}" for n in "ab" for i in range(50))
        for n in "ab":  # each process's own lines stay in its order
            mine = [int(x.split()[-1]) for x in lines if x.startswith(n)]
            assert mine == list(range(50))
        updates = update_rows(mem)
        assert len(updates) == 100 and all(u[-1] == 1 for u in updates)
        assert mem.log.count("ops") == 101  # one define, one update per append
        rows = block_rows(mem)
        mem.admin.rebuild()
        assert block_rows(mem) == rows and update_rows(mem) == updates


# -- the pycrdt per-origin ordering regression --------------------------------------------------------
def _scenario(seed: int) -> list[dict]:
    """Three writers editing one text with random syncs between them: their update ops."""
    from pycrdt import Doc, Text

    rng = random.Random(seed)
    peers = [Doc(client_id=1000 + i) for i in range(3)]
    for p in peers:
        p.get("text", type=Text)
    seqs, ops = [0, 0, 0], []
    for _ in range(30):
        i = rng.randrange(3)
        doc = peers[i]
        text = doc.get("text", type=Text)
        before = doc.get_state()
        s = str(text)  # ASCII only here, so byte and character offsets agree
        if s and rng.random() < 0.3:
            a = rng.randrange(len(s))
            del text[a:min(len(s), a + rng.randrange(1, 4))]
        else:
            text.insert(rng.randrange(len(s) + 1), rng.choice(["ab", "x", "hello ", "Z"]))
        seqs[i] += 1
        ops.append({"origin": 1000 + i, "seq": seqs[i], "update": doc.get_update(before), "deps": before})
        if rng.random() < 0.4:
            j = rng.randrange(3)
            if j != i:
                peers[j].apply_update(peers[i].get_update(peers[j].get_state()))
    return ops


def _naive_text(ops: list[dict]) -> str:
    from pycrdt import Doc, Text

    doc = Doc()
    text = doc.get("text", type=Text)
    for op in ops:
        doc.apply_update(op["update"])
    return str(text)


def _projected_text(mem, handle: str, ops: list[dict], define_at: int = 0) -> tuple[str, int]:
    """Feed the ops to the blocks projection in the given order (the define at ``define_at``);
    returns the text and the largest number of updates that waited at once."""
    from brandmind.blocks import Ref, define_payload, defaults_for

    ref = Ref("persona", None, None, handle, handle + "_service_experience")
    define = {"id": "x:0", "hlc": [1, 0, "x"], "kind": "block.define",
              "payload": define_payload(ref, defaults_for(ref), [])}
    stream = [{"id": f"x:{n + 1}", "hlc": [n + 2, 0, "x"], "kind": "block.update",
               "payload": {"id": ref.id, "scope": "persona", "origin": op["origin"], "seq": op["seq"],
                           "update": base64.b64encode(op["update"]).decode(),
                           "deps": base64.b64encode(op["deps"]).decode(), "user": "ann", "agent": None}}
              for n, op in enumerate(ops)]
    stream.insert(define_at, define)
    most = 0
    with mem.sql.write():
        for op in stream:
            apply_block_op(mem.sql, op)
            waiting = mem.sql.conn.execute("SELECT count(*) FROM block_updates WHERE block_id=? AND applied=0",
                                           (ref.id,)).fetchone()[0]
            most = max(most, waiting)
        value = mem.sql.conn.execute("SELECT value FROM blocks WHERE id=?", (ref.id,)).fetchone()[0]
    return value, most


def test_out_of_order_updates_are_buffered_per_origin_and_converge():
    diverged = 0
    with open_memory() as mem:
        for seed in range(25):
            ops = _scenario(seed)
            expected = _naive_text(ops)  # the writers' order is a causal order: the reference
            shuffled = ops[:]
            random.Random(seed).shuffle(shuffled)
            # pycrdt applied out of order on its own: diverges (NOTES.md) on some scenarios
            diverged += _naive_text(shuffled) != expected
            text, most = _projected_text(mem, f"t{seed}", shuffled, define_at=seed % 5)
            assert text == expected, seed
            assert most > 0  # the buffering path ran: updates waited for their gaps
            # one origin's updates reversed, the others in order
            reordered = [op for op in ops if op["origin"] != 1000] + \
                        sorted((op for op in ops if op["origin"] == 1000), key=lambda o: -o["seq"])
            assert _projected_text(mem, f"r{seed}", reordered)[0] == expected, seed
    assert diverged > 0, "naive out-of-order application no longer diverges: this test could not fail"


def test_updates_arriving_twice_or_before_their_block_apply_once():
    with open_memory() as mem:
        mem.blocks.set("notes", "one two", user="ann")
        ops = [op for _, op in mem.log.ops_after(0)]
        with mem.sql.write():
            for op in ops:  # a replay of the same ops changes nothing
                apply_block_op(mem.sql, op)
        assert mem.blocks.get("notes", user="ann")["value"] == "one two"
        assert len(update_rows(mem)) == 1


# -- read-only, persona blocks, PII ---------------------------------------------------------------
def test_agent_persona_is_read_only_to_agents_but_the_user_can_set_it(bm):
    from brandmind.errors import InvalidInput

    with open_memory() as mem:
        mem.blocks.set("agent_persona", "I am Pi, a location analytics assistant.", user="ann")
        with pytest.raises(InvalidInput, match="read-only to agents"):
            mem.blocks.append("agent_persona", "I also tell jokes.", user="ann", agent="a1")
        with pytest.raises(InvalidInput, match="read-only to agents"):
            mem.blocks.set("agent_persona", "rewritten", user="ann", agent="a1")
        with pytest.raises(InvalidInput, match="read-only to agents"):  # nor may it lift the flag
            mem.blocks.define("agent_persona", read_only=False, user="ann", agent="a1")
        with pytest.raises(InvalidInput, match="read-only to agents"):  # the user-scope one too
            mem.blocks.set("agent_persona", "x", user="ann", agent=None, by_agent=True)
        # the user giving agent a1 a persona of its own
        mem.blocks.define("agent_persona", user="ann", agent="a1", by_agent=False)
        own = mem.blocks.set("agent_persona", "Agent a1 persona", user="ann", agent="a1", by_agent=False)
        assert (own["value"], own["scope"], own["read_only"]) == ("Agent a1 persona", "agent", True)
        with pytest.raises(InvalidInput, match="read-only to agents"):
            mem.blocks.append("agent_persona", "x", user="ann", agent="a1")
        # an agent may write its other blocks
        assert mem.blocks.append("human", "Likes maps.", user="ann", agent="a1")["value"] == "Likes maps.\n"
        assert mem.blocks.get("agent_persona", user="ann")["value"] == "I am Pi, a location analytics assistant."
    assert_error(bm("block", "append", "agent_persona", "x", "--user", "ann", "--agent", "a1", "--as-agent"), 1,
                 "read-only to agents")
    assert bm("block", "append", "agent_persona", "More.", "--user", "ann", "--agent", "a1").code == 0
    # a custom read-only block
    assert bm("block", "set", "rules", "Never share prices.", "--read-only", "--user", "ann").code == 0
    assert_error(bm("block", "set", "rules", "x", "--user", "ann", "--agent", "a2", "--as-agent"), 1, "read-only")


def test_persona_block_is_shared_guarded_and_only_for_holders(bm):
    from brandmind.errors import InvalidInput

    label = "qsr_real_estate_service_experience"
    with open_memory() as mem:
        mem.blocks.set("human", "User name: Annabel Whitfield. Lives in Dallas.", user="ann")
        mem.personas.assign("ann", "qsr_real_estate")
        mem.personas.assign("bob", "qsr_real_estate")
        assert mem.blocks.get(label)["exists"] is True and mem.blocks.get(label)["value"] == ""
        mem.blocks.append(label, "Users start with site selection, then cannibalisation.", user="ann", agent="a1")
        mem.blocks.append(label, "Trade areas matter most.", user="bob")
        with pytest.raises(InvalidInput, match="does not hold persona"):
            mem.blocks.append(label, "Hello", user="carol")
        with pytest.raises(InvalidInput) as err:
            mem.blocks.append(label, "Mail ann@example.com about Annabel.", user="ann")
        assert "email 'ann@example.com'" in err.value.message and "Annabel" in err.value.message
        assert "--redact" in err.value.hint
        out = mem.blocks.append(label, "Mail ann@example.com about it.", user="ann", redact=True)
        assert "[REDACTED:email]" in out["value"] and "ann@example.com" not in out["value"]
        assert out["redacted"][0]["kind"] == "email"
        # old text another user wrote does not block an unrelated write
        shared = mem.blocks.shared(user="bob")
        assert [b["label"] for b in shared] == [label]
        assert "Trade areas matter most." in shared[0]["value"]
        assert mem.blocks.shared(user="carol") == []
        assert [b["label"] for b in mem.blocks.list(user="bob")] == [label]
    res = bm("block", "append", label, "Call 415-555-0132 now", "--user", "ann")
    assert_error(res, 1, "PII", "phone")
    res = bm("block", "append", label, "Call 415-555-0132 now", "--user", "ann", "--redact")
    assert res.code == 0 and "[REDACTED:phone]" in res.json()["value"], res


def test_context_shows_a_block_edit_next_time(bm):
    assert bm("block", "set", "human", "Prefers answers as tables.", "--user", "ann").code == 0
    res = bm("context", "what does ann like", "--user", "ann", "--json")
    assert res.code == 0 and "Prefers answers as tables." in res.out, res
    assert bm("block", "replace", "human", "tables", "bullet lists", "--user", "ann").code == 0
    res = bm("context", "what does ann like", "--user", "ann", "--json")
    assert "Prefers answers as bullet lists." in res.out and "as tables" not in res.out


# -- rebuild and forget -------------------------------------------------------------------------------------
def test_rebuild_reproduces_every_block_table():
    with open_memory() as mem:
        mem.personas.assign("ann", "qsr_real_estate")
        mem.blocks.set("human", "Prefers tables.", user="ann")
        mem.blocks.append("human", "Has a dog.", user="ann", agent="a1")
        mem.blocks.define("notes", limit=100, description="d1", user="ann")
        mem.blocks.define("notes", description="d2", user="ann")
        mem.blocks.set("notes", "n" * 90, user="ann")
        ref = mem.blocks.resolve("notes", user="ann")
        one, two = mem.blocks.snapshot(ref), mem.blocks.snapshot(ref)
        mem.blocks.commit(one, one.value + "x" * 10, writer="ann")
        mem.blocks.commit(two, "y" * 10 + two.value, writer="ann")  # merged: 110 > 100, over limit
        mem.blocks.append("qsr_real_estate_service_experience", "Shared lesson.", user="ann")
        before = (block_rows(mem), update_rows(mem),
                  mem.sql.conn.execute("SELECT * FROM block_defs ORDER BY block_id, op_id").fetchall())
        notes = mem.blocks.get("notes", user="ann")
        assert notes["over_limit"] and notes["description"] == "d2" and notes["limit"] == 100
        mem.admin.rebuild()
        after = (block_rows(mem), update_rows(mem),
                 mem.sql.conn.execute("SELECT * FROM block_defs ORDER BY block_id, op_id").fetchall())
        assert after == before


def test_forget_user_removes_their_blocks_and_anonymises_their_shared_edits(bm):
    label = "qsr_real_estate_service_experience"
    with open_memory() as mem:
        mem.personas.assign("ann", "qsr_real_estate")
        mem.personas.assign("bob", "qsr_real_estate")
        mem.blocks.set("human", "Secretive Zebra fact about ann", user="ann")
        mem.blocks.set("project_notes", "Ann agent note Quokka", user="ann", agent="a1")
        mem.blocks.append(label, "Lesson from ann's session.", user="ann", agent="a1")
        mem.blocks.append(label, "Lesson from bob.", user="bob")
        mem.blocks.set("human", "Bob likes tea", user="bob")
    res = bm("forget", "--wipe-user", "ann", "--yes")
    assert res.code == 0, res
    with open_memory() as mem:
        assert [b["label"] for b in mem.blocks.list(user="ann")] == []  # ann holds no persona any more either
        assert mem.blocks.get("human", user="ann")["exists"] is False
        assert mem.blocks.get("human", user="bob")["value"] == "Bob likes tea"
        shared = mem.blocks.get(label)
        assert shared["value"] == "Lesson from ann's session.\nLesson from bob.\n"
        writers = {r[0] for r in mem.sql.conn.execute(
            "SELECT user_id FROM block_updates WHERE scope='persona'")}
        assert writers == {None, "bob"}
        rows = mem.sql.conn.execute("SELECT count(*) FROM block_updates WHERE user_id='ann'").fetchone()[0]
        assert rows == 0 and mem.sql.conn.execute(
            "SELECT count(*) FROM block_defs WHERE user_id='ann'").fetchone()[0] == 0
        # nothing of ann's own blocks lingers in the log: not the text, not her name
        for _, op in mem.log.ops_after(0):
            if op["kind"].startswith("block."):
                p = op["payload"]
                assert p.get("user") != "ann", op
                data = base64.b64decode(p["update"]) if "update" in p else b""
                assert b"Zebra" not in data and b"Quokka" not in data
        state = b"".join(r[0] for r in mem.sql.conn.execute("SELECT state FROM blocks"))
        assert b"Zebra" not in state and b"Quokka" not in state
        rows = block_rows(mem)
        mem.admin.rebuild()
        assert block_rows(mem) == rows
        # ann can start over: a new block, a new history
        assert mem.blocks.set("human", "New start", user="ann")["value"] == "New start"
        mem.admin.rebuild()
        assert mem.blocks.get("human", user="ann")["value"] == "New start"


def test_ops_of_a_forgotten_user_arriving_late_are_ignored():
    with open_memory() as mem:
        mem.blocks.set("human", "old", user="ann")
        late = [op for _, op in mem.log.ops_after(0)]  # as another replica would still send them
        mem.forget_user("ann")
        with mem.sql.write():
            for op in late:
                apply_block_op(mem.sql, op)
        assert block_rows(mem) == []


# -- CLI errors and edit ---------------------------------------------------------------------------------------
def test_cli_errors_are_one_line_with_exit_codes(bm, monkeypatch):
    assert_error(bm("block", "show", "nothing_here", "--user", "ann"), 1, "no block 'nothing_here'",
                 "bm block set nothing_here")
    assert_error(bm("block", "set", "bad label!", "x", "--user", "ann"), 2, "invalid block label")
    assert_error(bm("block", "set", "notes", "x", "--persona", "Bad Handle"), 2, "invalid persona handle")
    assert_error(bm("block", "show", "cpg_retail_media_service_experience", "--persona", "qsr_real_estate"), 2,
                 "not the shared block of persona")
    assert bm("block", "set", "human", "hello", "--user", "ann").code == 0
    assert_error(bm("block", "replace", "human", "absent", "x", "--user", "ann"), 1, "does not occur")
    assert_error(bm("block", "append", "human", "   ", "--user", "ann"), 1, "empty")
    assert_error(bm("block", "set", "human", "-", "--user", "ann", input=b"\xff\xfe"), 1, "UTF-8")
    assert_error(bm("block", "set", "human", "x", "--limit", "abc", "--user", "ann"), 2)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    assert_error(bm("block", "edit", "human", "--user", "ann"), 2, "no editor", "EDITOR=")
    monkeypatch.setenv("EDITOR", "false")
    assert_error(bm("block", "edit", "human", "--user", "ann"), 1, "exited with status 1", "was not changed")
    monkeypatch.setenv("EDITOR", "/nonexistent/editor-xyz")
    assert_error(bm("block", "edit", "human", "--user", "ann"), 1, "cannot run the editor")
    proc = run_bm("block", "append", "human", "-", "--user", "ann", input="z" * 4000)
    assert_error(proc, 1, "over its limit")
    assert bm("block", "show", "human", "--user", "ann").json()["value"] == "hello"


EDITOR = textwrap.dedent("""
    import subprocess, sys
    path = sys.argv[1]
    text = open(path, encoding="utf-8").read()
    # someone else appends while the editor is open
    subprocess.run([sys.executable, "-m", "brandmind.cli.app", "block", "append", "human",
                    "Added elsewhere.", "--user", "ann"], check=True, stdout=subprocess.DEVNULL)
    open(path, "w", encoding="utf-8").write(text.replace("tables", "charts") + "\\n")
""")


def test_edit_applies_the_editors_diff_and_keeps_a_concurrent_append(bm, tmp_path, monkeypatch):
    assert bm("block", "set", "human", "Prefers tables.", "--user", "ann").code == 0
    script = tmp_path / "editor.py"
    script.write_text(EDITOR, encoding="utf-8")
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    res = bm("block", "edit", "human", "--user", "ann")
    assert res.code == 0, res
    assert res.json()["value"] == "Prefers charts.\nAdded elsewhere.\n"
    with open_memory() as mem:
        assert [op["kind"] for _, op in mem.log.ops_after(0)][-1] == "block.update"
        assert mem.log.count("ops") == 4  # define, set, the other append, the edit: one op
    monkeypatch.setenv("EDITOR", "true")  # saved unchanged: nothing written
    res = bm("block", "edit", "human", "--user", "ann")
    assert res.code == 0 and "no change" in res.err
    assert ops_count() == 4
