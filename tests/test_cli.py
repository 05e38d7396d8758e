"""Every `bm` command end to end, with JSON output (stdout is not a terminal in tests).

Most calls run in-process (the ``bm`` fixture) to keep the suite fast; ``run_bm`` runs a
real subprocess where the process boundary matters.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import memory_count, open_memory, run_bm, use_home

ANN_MESSAGES = [
    {"id": "D1:1", "role": "user", "speaker": "Caroline", "thread": "s1", "ts": "2023-05-08T13:56:00Z",
     "content": "I went to a support group yesterday and it was really powerful.", "meta": {"dia_id": "D1:1"}},
    {"id": "D1:2", "role": "assistant", "speaker": "Melanie", "thread": "s1", "ts": "2023-05-08T13:58:00Z",
     "content": "That sounds great! What happened there?", "meta": {"dia_id": "D1:2"}},
    {"id": "D1:3", "role": "assistant", "speaker": "Melanie", "thread": "s1", "ts": "2023-05-08T14:00:00Z",
     "content": "I am painting a sunrise over the lake with my kids.", "meta": {"dia_id": "D1:3"}},
]


@pytest.fixture(autouse=True)
def _store(store):
    """Every test here starts on an initialised, empty store."""
    return store


def jsonl(items: list[dict]) -> str:
    return "".join(json.dumps(x) + "\n" for x in items)


def remember(bm, text: str, *args: str) -> str:
    res = bm("remember", text, *args, "--json")
    assert res.code == 0, res
    return res.json()["id"]


# -- version, init, help ---------------------------------------------------------------
def test_version_in_process_and_subprocess(bm):
    from brandmind import __version__

    res = bm("--version")
    assert res.code == 0 and res.out.strip() == f"bm {__version__}"
    proc = run_bm("--version")
    assert proc.code == 0 and proc.out.strip() == f"bm {__version__}", proc


def test_a_process_ends_without_teardown_and_loses_nothing():
    """`bm` ends with ``os._exit`` once a command returns (cli/boundary.py ``exit_now``: no
    interpreter teardown): what it wrote to a pipe arrives whole, notes on stderr too, its
    exit code is the command's, and what it stored is there for the next process."""
    texts = [f"note {i}: the {i}th shelf holds {'jars ' * 40}" for i in range(60)]
    for i in range(0, 60, 20):
        proc = run_bm("ingest", "-", "--json", input=jsonl([{"role": "user", "content": t} for t in texts[i:i + 20]]))
        assert proc.code == 0, proc
    proc = run_bm("recall", "which shelf holds jars", "-k", "60", "--json")
    assert proc.code == 0, proc
    assert len(proc.json()) == 60  # 60 results of ~250 characters: more than a pipe's first write
    lines = run_bm("export").out.splitlines()
    records = [json.loads(line) for line in lines]
    assert sorted(r["text"] for r in records if r["kind"] == "memory") == sorted(texts)
    proc = run_bm("recall", "jars", "-u", "nobody-here", "--json")
    assert proc.code == 0 and proc.json() == [] and "nobody-here" in proc.err, proc  # the note on stderr
    proc = run_bm("forget", "m_nonexistent", "--yes")
    assert proc.code == 1 and proc.err.startswith("Error: "), proc


def test_init_creates_store_and_is_safe_to_rerun(bm, tmp_path, monkeypatch):
    bm_home = use_home(monkeypatch, tmp_path / "fresh")
    assert not (bm_home / "data").exists()
    res = bm("init")
    assert res.code == 0, res
    out = res.json()
    assert out["model"] == "hash:384"
    assert Path(out["store"]) == bm_home / "data"
    assert (bm_home / "data" / "log.lmdb" / "data.mdb").is_file()
    assert (bm_home / "data" / "memory.sqlite").is_file()
    mid = remember(bm, "kept across init")
    again = bm("init")
    assert again.code == 0 and again.json()["replica"] == out["replica"]
    assert [m["id"] for m in bm("memories", "list").json()] == [mid]


def _command_tree():
    import typer

    from brandmind.cli.app import app

    def walk(cmd, path):
        yield path, cmd
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            yield from walk(sub, [*path, name])

    return list(walk(typer.main.get_command(app), []))


def test_every_command_has_help(bm):
    tree = _command_tree()
    names = {" ".join(path) for path, _ in tree}
    expected = {"", "init", "remember", "recall", "forget", "ingest", "beads", "beads add", "beads tail",
                "memories", "memories list", "memories show", "kg", "kg node", "kg link", "kg show",
                "export", "import", "rebuild", "reindex", "stats", "doctor", "config", "config get",
                "config set"}
    assert expected <= names, expected - names
    for path, cmd in tree:
        text = (cmd.help or cmd.short_help or "").strip()
        assert text, f"`bm {' '.join(path)}` has no help text"
        res = bm(*path, "--help")
        assert res.code == 0, (path, res)
        assert "Usage:" in res.out, (path, res)
        # the first words of the help text are shown
        assert " ".join(text.split()[:3]) in " ".join(res.out.replace("│", " ").split()), (path, res.out)
    # -h works too, and through a real process
    assert bm("recall", "-h").code == 0
    proc = run_bm("--help")
    assert proc.code == 0 and "remember" in proc.out and "Traceback" not in proc.err


# -- remember ---------------------------------------------------------------------------
def test_remember_prints_id_and_json(bm):
    res = bm("remember", "Ann moved to Lisbon in May")  # piped: {"id"} (JSON, as with --json)
    assert res.code == 0, res
    plain = res.json()["id"]
    assert plain.startswith("m_")
    res = bm("remember", "Ann likes green tea", "--json")
    assert res.code == 0 and set(res.json()) == {"id"} and res.json()["id"].startswith("m_")
    shown = bm("memories", "show", plain).json()
    assert shown["text"] == "Ann moved to Lisbon in May" and shown["type"] == "fact"


def test_remember_from_stdin(bm):
    res = bm("remember", "-", "--json", input="Ann's cat is called Mochi ☕\n")
    assert res.code == 0, res
    item = bm("memories", "show", res.json()["id"]).json()
    assert item["text"] == "Ann's cat is called Mochi ☕"  # trailing newline dropped, UTF-8 kept


def test_remember_type_importance_meta_agent(bm):
    mid = remember(bm, "Ann prefers window seats", "--type", "preference", "--importance", "0.9",
                   "--meta", "source=slack", "--meta", "n=3", "--meta", 'tags=["a","b"]',
                   "--agent", "travel-bot", "--user", "ann")
    item = bm("memories", "show", mid).json()
    assert item["type"] == "preference"
    assert item["importance"] == pytest.approx(0.9)
    assert item["meta"] == {"source": "slack", "n": 3, "tags": ["a", "b"]}
    assert item["user"] == "ann" and item["agent"] == "travel-bot" and item["scope"] == "agent:travel-bot"


# -- recall -----------------------------------------------------------------------------
def test_recall_result_shape_and_ranking(bm):
    target = remember(bm, "Ann moved to Lisbon in May", "--meta", "source=chat")
    remember(bm, "Bob plays the cello on Sundays")
    remember(bm, "The deploy runs every night at two")
    res = bm("recall", "where does Ann live? Lisbon")
    assert res.code == 0, res
    results = res.json()
    assert isinstance(results, list) and results
    for item in results:
        assert {"id", "text", "type", "score", "ts", "scope", "provenance"} <= set(item)
        assert isinstance(item["score"], float) and isinstance(item["provenance"], list)
        assert item["ts"].endswith("Z") and item["scope"] == "global"
    assert results[0]["id"] == target and results[0]["text"] == "Ann moved to Lisbon in May"
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    # --jsonl: one object per line
    lines = bm("recall", "Lisbon", "--jsonl").jsonl()
    assert lines[0]["id"] == target and len(lines) == len(bm("recall", "Lisbon").json())


def test_recall_query_from_stdin(bm):
    target = remember(bm, "The staging database lives on host db-7")
    remember(bm, "Lunch is at noon")
    res = bm("recall", "-", input="which host runs the staging database\n")
    assert res.code == 0 and res.json()[0]["id"] == target, res


def test_recall_k(bm):
    for i in range(6):
        remember(bm, f"note number {i} about gardening")
    assert len(bm("recall", "gardening", "-k", "2").json()) == 2
    assert len(bm("recall", "gardening", "-k", "4").json()) == 4
    assert len(bm("recall", "gardening").json()) == 6


def test_recall_type_filter(bm):
    fact = remember(bm, "Ann drinks coffee daily", "--type", "fact")
    pref = remember(bm, "Ann prefers coffee black", "--type", "preference")
    dec = remember(bm, "Ann decided to quit coffee in June", "--type", "decision")
    only = bm("recall", "coffee", "--type", "preference").json()
    assert [r["id"] for r in only] == [pref]
    two = bm("recall", "coffee", "--type", "fact", "--type", "decision").json()
    assert {r["id"] for r in two} == {fact, dec}
    assert all(r["type"] in ("fact", "decision") for r in two)


def test_recall_since_until(bm):
    old = remember(bm, "trip to Porto", "--ts", "2020-01-15")
    mid = remember(bm, "trip to Madrid", "--ts", "2022-06-01T10:00:00Z")
    new = remember(bm, "trip to Rome", "--ts", "2024-03-01")
    assert {r["id"] for r in bm("recall", "trip", "--since", "2021-01-01").json()} == {mid, new}
    assert {r["id"] for r in bm("recall", "trip", "--until", "2022-06-01T10:00:00Z").json()} == {old}
    window = bm("recall", "trip", "--since", "2021-01-01", "--until", "2023-01-01").json()
    assert [r["id"] for r in window] == [mid]
    assert window[0]["ts"] == "2022-06-01T10:00:00.000Z"


def test_recall_agent_scope(bm):
    glob = remember(bm, "Ann's timezone is Europe/Lisbon")
    a1 = remember(bm, "Ann asked agent one about timezone conversions", "--agent", "a1")
    a2 = remember(bm, "Ann asked agent two about timezone apps", "--agent", "a2")
    ids = lambda *args: {r["id"] for r in bm("recall", "timezone", *args).json()}  # noqa: E731
    assert ids() == {glob, a1, a2}
    assert ids("--agent", "a1") == {glob, a1}
    assert ids("--agent", "a2") == {glob, a2}
    assert ids("--agent", "a3") == {glob}
    scopes = {r["id"]: r["scope"] for r in bm("recall", "timezone").json()}
    assert scopes == {glob: "global", a1: "agent:a1", a2: "agent:a2"}


def test_users_never_see_each_other(bm):
    ann = {remember(bm, f"Ann secret number {i}: the vault code is 1234", "--user", "ann") for i in range(3)}
    bob = {remember(bm, f"Bob note {i} about the garden shed", "--user", "bob") for i in range(2)}
    for query in ("vault code secret", "garden", "Ann"):
        got = bm("recall", query, "--user", "bob", "-k", "50").json()
        assert {r["id"] for r in got} <= bob and not {r["id"] for r in got} & ann
        assert all(r["user"] == "bob" for r in got)
    got = bm("recall", "garden shed", "--user", "ann", "-k", "50").json()
    assert {r["id"] for r in got} == ann
    assert {m["id"] for m in bm("memories", "list", "--user", "bob").json()} == bob
    # the default user has nothing
    assert bm("recall", "vault code").json() == []
    batch = bm("recall", "--batch", "-", "--user", "bob", input='{"id": 1, "query": "vault code"}\n').jsonl()
    assert not {r["id"] for r in batch[0]["results"]} & ann


def test_recall_batch_file_and_stdin(bm, tmp_path):
    lisbon = remember(bm, "Ann moved to Lisbon in May")
    cello = remember(bm, "Bob plays the cello on Sundays")
    remember(bm, "The deploy runs every night at two")
    queries = [{"id": "q-lisbon", "query": "Lisbon move", "k": 1},
               {"id": 7, "query": "who plays the cello", "k": 2},
               {"query": "deploy schedule"}]
    path = tmp_path / "q.jsonl"
    path.write_text(jsonl(queries) + "\n")  # a blank line is skipped
    for res in (bm("recall", "--batch", str(path)), bm("recall", "--batch", "-", input=jsonl(queries))):
        assert res.code == 0, res
        lines = res.jsonl()
        assert [line["id"] for line in lines] == ["q-lisbon", 7, 3]  # ids echoed; missing id -> line number
        assert all(set(line) == {"id", "results"} for line in lines)
        assert [r["id"] for r in lines[0]["results"]] == [lisbon]
        assert lines[1]["results"][0]["id"] == cello and len(lines[1]["results"]) == 2
        assert "deploy" in lines[2]["results"][0]["text"]


def test_recall_batch_bad_line_reports_and_answers_the_rest(bm):
    lisbon = remember(bm, "Ann moved to Lisbon in May")
    text = ('{"id": "a", "query": "Lisbon"}\n'
            '{"id": "b", "query": \n'          # not JSON
            '{"id": "c", "k": 3}\n'             # no query
            '{"id": "d", "query": "Lisbon", "k": 0}\n'  # bad k
            '{"id": "e", "query": "Ann Lisbon"}\n')
    res = bm("recall", "--batch", "-", input=text)
    assert res.code == 1, res
    lines = res.jsonl()
    assert [line["id"] for line in lines] == ["a", 2, "c", "d", "e"]
    assert lines[0]["results"][0]["id"] == lisbon and lines[4]["results"][0]["id"] == lisbon
    assert "line 2" in lines[1]["error"] and "JSON" in lines[1]["error"]
    assert "query" in lines[2]["error"] and lines[2]["hint"]
    assert "k must be" in lines[3]["error"]
    err = res.err_lines()
    assert len(err) == 1 and err[0].startswith("Error: 3 batch line(s) failed") and "hint:" in err[0]


# -- forget -----------------------------------------------------------------------------
def _store_state(mid: str, rowid: int, word: str) -> dict:
    with open_memory() as mem:
        c = mem.sql.conn
        ops = list(mem.log.iter_ops())
        return {
            "rows": c.execute("SELECT count(*) FROM memories WHERE id=?", (mid,)).fetchone()[0],
            "fts": [r[0] for r in c.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?",
                                            (f'"{word}"',))],
            "vec": c.execute("SELECT count(*) FROM memories_vec WHERE rowid=?", (rowid,)).fetchone()[0],
            "n_mem": c.execute("SELECT count(*) FROM memories").fetchone()[0],
            "n_vec": c.execute("SELECT count(*) FROM memories_vec").fetchone()[0],
            "ops": ops,
        }


def test_forget_id_removes_from_every_projection(bm):
    keep = remember(bm, "Ann likes green tea")
    gone = remember(bm, "Ann's old address was Zanzibar street 5", "--meta", "k=v")
    with open_memory() as mem:
        rowid = mem.sql.conn.execute("SELECT rowid FROM memories WHERE id=?", (gone,)).fetchone()[0]
    before = _store_state(gone, rowid, "zanzibar")
    assert before["rows"] == 1 and before["fts"] == [rowid] and before["vec"] == 1
    assert gone in {r["id"] for r in bm("recall", "Zanzibar address").json()}
    # a graph node mentions it
    assert bm("kg", "node", "Ann", "--json").code == 0
    assert bm("kg", "link", "Ann", "mentions", gone).code == 0
    assert bm("kg", "show", "Ann").json()["memories"] == [gone]

    res = bm("forget", gone, "--yes")
    assert res.code == 0, res
    assert res.json() == {"forgotten": [gone], "beads": []}

    assert gone not in {r["id"] for r in bm("recall", "Zanzibar address", "-k", "50").json()}
    assert [m["id"] for m in bm("memories", "list").json()] == [keep]
    assert bm("memories", "show", gone).code == 1
    assert bm("kg", "show", "Ann").json()["memories"] == []
    after = _store_state(gone, rowid, "zanzibar")
    assert after["rows"] == 0 and after["fts"] == [] and after["vec"] == 0
    assert after["n_mem"] == after["n_vec"] == 1
    forgets = [op for op in after["ops"] if op["kind"] == "memory.forget"]
    assert [op["payload"] for op in forgets] == [{"id": gone}]
    adds = [op for op in after["ops"] if op["kind"] == "memory.add" and op["payload"]["id"] == gone]
    assert len(adds) == 1 and adds[0]["payload"] == {"id": gone, "redacted": True}
    assert "Zanzibar" not in json.dumps(after["ops"])
    # forgetting again: not found, nothing else touched
    again = bm("forget", gone, "--yes")
    assert again.code == 1 and "no memory" in again.err
    assert memory_count() == 1


def test_forget_user(bm, tmp_path):
    ann = [remember(bm, f"Ann fact {i} about sailing", "--user", "ann") for i in range(3)]
    bob = remember(bm, "Bob fact about sailing", "--user", "bob")
    assert bm("beads", "add", "Ann said hi", "--user", "ann").code == 0
    assert bm("beads", "add", "Bob said hi", "--user", "bob").code == 0
    assert bm("kg", "node", "Boat", "--user", "ann").code == 0
    path = tmp_path / "chat.jsonl"
    path.write_text(jsonl(ANN_MESSAGES))
    assert bm("ingest", str(path), "--user", "ann").code == 0

    res = bm("forget", "--wipe-user", "ann", "--yes")
    assert res.code == 0, res
    out = res.json()
    assert out["user"] == "ann" and out["forgotten"]["memories"] == 3 + len(ANN_MESSAGES)
    assert out["forgotten"]["beads"] == 1 + len(ANN_MESSAGES)
    assert bm("recall", "sailing", "--user", "ann").json() == []
    assert bm("memories", "list", "--user", "ann").json() == []
    assert bm("beads", "tail", "--user", "ann").json() == []
    assert bm("kg", "show", "Boat", "--user", "ann").code == 1
    assert [r["id"] for r in bm("recall", "sailing", "--user", "bob").json()] == [bob]
    assert [b["content"] for b in bm("beads", "tail", "--user", "bob").json()] == ["Bob said hi"]
    with open_memory() as mem:
        ops = list(mem.log.iter_ops())
        assert mem.sql.conn.execute("SELECT count(*) FROM memories_vec").fetchone()[0] == 1
    assert [op["payload"] for op in ops if op["kind"] == "user.forget"] == [{"user": "ann"}]
    assert all(op["payload"].get("redacted") for op in ops
               if op["kind"] == "memory.add" and op["payload"]["id"] in ann)
    # the whole user is gone, so a re-ingest stores the conversation again
    again = bm("ingest", str(path), "--user", "ann").json()
    assert again["ingested"] == len(ANN_MESSAGES)


def test_forget_match(bm):
    a = remember(bm, "Ann's old address was Rua Augusta 12")
    b = remember(bm, "The old address of the office was Main street")
    keep1 = remember(bm, "Ann's new address is Avenida 5")   # has "address" but not "old"
    keep2 = remember(bm, "An old photo of the harbour")      # has "old" but not "address"
    res = bm("forget", "--match", "old address", "--yes")
    assert res.code == 0, res
    assert sorted(res.json()["forgotten"]) == sorted([a, b])
    assert {m["id"] for m in bm("memories", "list").json()} == {keep1, keep2}
    # no match: nothing forgotten, exit 0
    none = bm("forget", "--match", "xylophone", "--yes")
    assert none.code == 0 and none.json() == {"forgotten": [], "beads": [], "blocks": [], "files": []}
    assert memory_count() == 2


def test_forget_without_yes_off_terminal_refuses_bulk(bm):
    remember(bm, "Ann's old address was Rua Augusta 12", "--user", "ann")
    res = bm("forget", "--wipe-user", "ann")
    assert res.code == 2 and "--yes" in res.err
    res = bm("forget", "--match", "old address", "--user", "ann")
    assert res.code == 2
    assert len(bm("memories", "list", "--user", "ann").json()) == 1


# -- ingest -----------------------------------------------------------------------------
def test_ingest_provenance_carries_meta(bm, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(jsonl(ANN_MESSAGES))
    res = bm("ingest", str(path), "--user", "ann")
    assert res.code == 0, res
    assert res.json() == {"ingested": 3, "duplicates": 0, "bad": [], "lines": 3}
    top = bm("recall", "painting a sunrise over the lake", "--user", "ann").json()[0]
    assert top["text"] == "Melanie: I am painting a sunrise over the lake with my kids."
    assert top["type"] == "episode" and top["ts"] == "2023-05-08T14:00:00.000Z"
    prov = top["provenance"]
    assert len(prov) == 1 and prov[0]["meta"] == {"dia_id": "D1:3"} and prov[0]["bead"].startswith("b_")
    bead = bm("beads", "show", prov[0]["bead"]).json()
    assert bead["content"] == ANN_MESSAGES[2]["content"]
    assert bead["speaker"] == "Melanie" and bead["role"] == "assistant" and bead["thread"] == "s1"
    assert bead["meta"] == {"dia_id": "D1:3"}
    tail = bm("beads", "tail", "--user", "ann").json()
    assert [b["content"] for b in tail] == [m["content"] for m in ANN_MESSAGES]


def test_ingest_from_stdin(bm):
    res = bm("ingest", "-", input=jsonl([{"role": "user", "content": "the wifi password is hunter2"}]))
    assert res.code == 0 and res.json()["ingested"] == 1, res
    assert bm("recall", "wifi password").json()[0]["text"] == "the wifi password is hunter2"


def test_reingest_by_id_stores_nothing_twice(bm, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(jsonl(ANN_MESSAGES))
    assert bm("ingest", str(path)).json()["ingested"] == 3
    again = bm("ingest", str(path)).json()
    assert again["ingested"] == 0 and again["duplicates"] == 3
    # same ids, edited content: the same messages, edited (each new text replaces the old)
    edited = [{**m, "content": m["content"] + " (edited)"} for m in ANN_MESSAGES]
    report = bm("ingest", "-", input=jsonl(edited)).json()
    assert (report["ingested"], report["edited"], report["duplicates"]) == (3, 3, 0)
    assert memory_count() == 3
    assert [b["content"] for b in bm("beads", "tail", "-n", "100").json()] == [m["content"] for m in edited]
    # one new message alongside the others: only it is stored
    more = edited + [{**ANN_MESSAGES[0], "id": "D1:4", "content": "See you next week!"}]
    report = bm("ingest", "-", input=jsonl(more)).json()
    assert (report["ingested"], report["duplicates"]) == (1, 3)
    assert memory_count() == 4


def test_reingest_without_id_dedups_by_thread_ts_speaker_content(bm):
    msgs = [{k: v for k, v in m.items() if k != "id"} for m in ANN_MESSAGES]
    assert bm("ingest", "-", input=jsonl(msgs)).json()["ingested"] == 3
    report = bm("ingest", "-", input=jsonl(msgs)).json()
    assert (report["ingested"], report["duplicates"]) == (0, 3)
    # the same message twice in one file is stored once
    dup = {"role": "user", "speaker": "Ann", "content": "ping", "ts": "2024-01-01T00:00:00Z"}
    assert bm("ingest", "-", input=jsonl([dup, dup])).json() == {"ingested": 1, "duplicates": 1, "bad": [], "lines": 2}
    # any one of thread, ts, speaker or content differing makes it a new message
    variants = [{**dup, "thread": "other"}, {**dup, "ts": "2024-01-01T00:00:01Z"},
                {**dup, "speaker": "Bob"}, {**dup, "content": "pong"}]
    assert bm("ingest", "-", input=jsonl(variants)).json()["ingested"] == 4
    assert memory_count() == 3 + 1 + 4


# -- beads ------------------------------------------------------------------------------
def test_beads_add_and_tail_oldest_first(bm):
    ids = []
    for i in range(5):
        res = bm("beads", "add", f"turn {i}", "--role", "assistant" if i % 2 else "user", "--speaker", "Ann")
        assert res.code == 0, res
        ids.append(res.json()["id"])
    assert all(i.startswith("b_") for i in ids)
    tail = bm("beads", "tail", "-n", "3").json()
    assert [b["content"] for b in tail] == ["turn 2", "turn 3", "turn 4"]
    assert [b["id"] for b in tail] == ids[2:]
    assert tail[1]["role"] == "assistant" and tail[0]["speaker"] == "Ann"
    assert len(bm("beads", "tail").json()) == 5
    # --ts given out of order: tail is by time, oldest first
    for day in ("03", "01", "02"):
        assert bm("beads", "add", f"day {day}", "--ts", f"2020-01-{day}", "--thread", "days").code == 0
    days = bm("beads", "tail", "--thread", "days").json()
    assert [b["content"] for b in days] == ["day 01", "day 02", "day 03"]
    assert days[0]["ts"] == "2020-01-01T00:00:00.000Z"
    assert bm("beads", "add", "x", "--json").json()["id"].startswith("b_")


def test_beads_large_content_goes_to_blobs(bm, bm_home, monkeypatch):
    monkeypatch.setenv("BM_BLOB_THRESHOLD", "1024")
    big = "".join(f"line {i}: naïve café ☕ — {'x' * (i % 13)}\n" for i in range(400)).rstrip("\n")
    assert len(big.encode()) > 4096
    small = bm("beads", "add", "small one")
    res = bm("beads", "add", "-", "--role", "tool", "--source", "tool:grep", input=big.encode())
    assert small.code == 0 and res.code == 0, res
    bead_id = res.json()["id"]
    blobs = [p for p in (bm_home / "data" / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == 1 and blobs[0].read_bytes() == big.encode()
    shown = bm("beads", "show", bead_id).json()
    assert shown["content"] == big and shown["size"] == len(big.encode()) and shown["source"] == "tool:grep"
    tail = bm("beads", "tail", "-n", "2").json()
    assert [b["content"] for b in tail] == ["small one", big]
    # the small bead is not offloaded
    assert "blob" not in tail[0]
    # in a fresh process too
    proc = run_bm("beads", "tail", "-n", "1")
    assert proc.code == 0 and json.loads(proc.out)[0]["content"] == big


# -- memories list/show -------------------------------------------------------------------
def test_memories_list_and_show(bm):
    ids = [remember(bm, f"memory {i}", "--type", "insight" if i % 2 else "fact") for i in range(5)]
    listed = bm("memories", "list").json()
    assert [m["id"] for m in listed] == ids[::-1]  # newest first
    assert [m["id"] for m in bm("memories", "list", "-n", "2").json()] == ids[::-1][:2]
    assert [m["id"] for m in bm("memories", "list", "--limit", "2", "--offset", "2").json()] == [ids[2], ids[1]]
    assert {m["id"] for m in bm("memories", "list", "--type", "insight").json()} == {ids[1], ids[3]}
    lines = bm("memories", "list", "--jsonl").jsonl()
    assert [m["id"] for m in lines] == ids[::-1]
    shown = bm("memories", "show", ids[0]).json()
    assert shown["id"] == ids[0] and shown["text"] == "memory 0" and shown["provenance"] == []
    remember(bm, "someone else's", "--user", "zed")
    assert len(bm("memories", "list", "--all-users").json()) == 6
    missing = bm("memories", "show", "m_nope")
    assert missing.code == 1 and "bm memories list" in missing.err


# -- knowledge graph ------------------------------------------------------------------------
def test_kg_node_link_show(bm):
    mid = remember(bm, "Ann moved to Lisbon in May")
    ann = bm("kg", "node", "Ann", "--type", "person", "--label", "friend", "--json").json()["id"]
    lis = bm("kg", "node", "Lisbon", "--type", "place").json()["id"]  # JSON when piped
    assert ann.startswith("n_") and lis.startswith("n_")
    edge = bm("kg", "link", "Ann", "lives_in", "Lisbon", "--weight", "0.8", "--evidence", mid, "--json")
    assert edge.code == 0, edge
    e = edge.json()
    assert (e["src"], e["dst"], e["predicate"], e["weight"], e["evidence"]) == (ann, lis, "lives_in", 0.8, [mid])
    assert bm("kg", "link", ann, "mentions", mid).code == 0
    node = bm("kg", "show", "Ann").json()
    assert node["id"] == ann and node["type"] == "person" and node["labels"] == ["friend"]
    assert [(x["src"], x["predicate"], x["dst"]) for x in node["edges"]] == [(ann, "lives_in", lis)]
    assert node["memories"] == [mid]
    assert bm("kg", "show", lis).json()["edges"][0]["id"] == e["id"]
    made = bm("kg", "link", "Ann", "knows", "Nobody").json()  # a missing end is created, and said so
    assert [n["name"] for n in made["created"]] == ["Nobody"] and made["src"] == ann


# -- export / import / rebuild ------------------------------------------------------------------
def _populate(bm, tmp_path) -> dict:
    """A store with a bit of everything, including a forgotten memory and a blob bead."""
    assert bm("init").code == 0
    ids = {
        "lisbon": remember(bm, "Ann moved to Lisbon in May", "--user", "ann", "--meta", "source=slack"),
        "tea": remember(bm, "Ann prefers green tea", "--user", "ann", "--type", "preference",
                        "--agent", "barista", "--ts", "2023-02-01"),
        "gone": remember(bm, "Ann's old pin is 9911", "--user", "ann"),
        "bob": remember(bm, "Bob sails on weekends", "--user", "bob", "--importance", "0.7"),
    }
    path = tmp_path / "chat.jsonl"
    path.write_text(jsonl(ANN_MESSAGES))
    assert bm("ingest", str(path), "--user", "ann").code == 0
    assert bm("beads", "add", "-", "--user", "ann", "--role", "tool", input="log " * 400).code == 0
    assert bm("kg", "node", "Ann", "--user", "ann", "--type", "person").code == 0
    assert bm("kg", "node", "Lisbon", "--user", "ann", "--type", "place").code == 0
    assert bm("kg", "link", "Ann", "lives_in", "Lisbon", "--user", "ann", "-e", ids["lisbon"]).code == 0
    assert bm("kg", "link", "Ann", "mentions", ids["lisbon"], "--user", "ann").code == 0
    assert bm("forget", ids["gone"], "--yes").code == 0
    ids["after"] = remember(bm, "Ann bought a bike", "--user", "ann")
    return ids


QUERIES = [("where does Ann live", "ann"), ("tea", "ann"), ("painting sunrise", "ann"),
           ("support group", "ann"), ("sailing", "bob"), ("pin", "ann"), ("bike", "ann")]


def _answers(bm) -> list:
    out = []
    for query, user in QUERIES:
        res = bm("recall", query, "--user", user, "-k", "5")
        assert res.code == 0, res
        out.append([(r["id"], r["text"], r["score"], r["provenance"]) for r in res.json()])
    return out


def _best(bm) -> list:
    """Per query: the top result and every result the keywords found."""
    out = []
    for query, user in QUERIES:
        results = bm("recall", query, "--user", user, "-k", "5").json()
        out.append((results[0]["text"] if results else None,
                    sorted(r["id"] for r in results if "keyword" in r["signals"])))
    return out


def test_export_import_round_trip(bm, tmp_path, monkeypatch):
    monkeypatch.setenv("BM_BLOB_THRESHOLD", "1024")
    ids = _populate(bm, tmp_path)
    first = bm("export")
    assert first.code == 0, first
    lines = first.out.splitlines()
    kinds = [json.loads(line)["kind"] for line in lines]
    assert kinds[0] == "header"
    assert kinds.count("memory") == 4 + len(ANN_MESSAGES) and kinds.count("bead") == 1 + len(ANN_MESSAGES)
    assert (kinds.count("node"), kinds.count("edge"), kinds.count("mention")) == (2, 1, 1)
    assert ids["gone"] not in first.out and "9911" not in first.out
    export_file = tmp_path / "backup.jsonl"
    assert bm("export", "-o", str(export_file)).code == 0
    assert export_file.read_text().splitlines() == lines
    best = _best(bm)

    use_home(monkeypatch, tmp_path / "second")
    res = bm("import", str(export_file))
    assert res.code == 0, res
    counts = res.json()
    assert counts["memory"] == 4 + len(ANN_MESSAGES) and counts["bead"] == 1 + len(ANN_MESSAGES)
    assert bm("export").out.splitlines() == lines
    # the same best answers (equal scores may rank in another order: rowids follow the file)
    assert _best(bm) == best
    # importing again adds nothing
    again = bm("import", "-", input=first.out).json()
    assert again["skipped"] == len(lines) - 1 and again["memory"] == 0
    assert bm("export").out.splitlines() == lines


def test_rebuild_answers_exactly_like_before(bm, tmp_path, bm_home, monkeypatch):
    monkeypatch.setenv("BM_BLOB_THRESHOLD", "1024")
    _populate(bm, tmp_path)
    export_before = bm("export").out
    answers = _answers(bm)
    tail = bm("beads", "tail", "--user", "ann").json()
    stats = bm("stats").json()["counts"]
    res = bm("rebuild")
    assert res.code == 0, res
    out = res.json()
    assert out["memories"] == stats["memories"] and out["beads"] == stats["beads"] and out["ops"] > 0
    assert bm("export").out == export_before
    assert _answers(bm) == answers
    assert bm("beads", "tail", "--user", "ann").json() == tail
    assert bm("stats").json()["counts"] == stats
    # a deleted index is rebuilt too
    (bm_home / "data" / "memory.sqlite").unlink()
    assert bm("rebuild").code == 0
    assert _answers(bm) == answers and bm("export").out == export_before
    assert bm("doctor").code == 0


def test_stats(bm, tmp_path):
    ids = _populate(bm, tmp_path)
    res = bm("stats")
    assert res.code == 0, res
    s = res.json()
    assert s["counts"] == {"memories": 4 + len(ANN_MESSAGES), "beads": 1 + len(ANN_MESSAGES), "nodes": 2, "edges": 1}
    assert s["model"] == "hash:384" and s["dim"] == 384
    assert s["users"] == ["ann", "bob"]
    assert s["memories_by_type"] == {"fact": 3, "preference": 1, "episode": 3}
    assert s["ops"] > 0 and s["bytes"] > 0
    assert ids


def test_doctor_clean_store(bm):
    remember(bm, "something to check")
    res = bm("doctor")
    assert res.code == 0, res
    checks = res.json()
    assert {c["check"] for c in checks} >= {"memory index", "index up to date", "recall index", "blobs", "sqlite-vec",
                                            "embedder", "disk"}
    assert all(c["ok"] for c in checks), checks
    proc = run_bm("doctor")
    assert proc.code == 0 and proc.err == "", proc


def test_reindex(bm):
    mid = remember(bm, "Ann moved to Lisbon in May")
    res = bm("reindex")
    assert res.code == 0, res
    assert res.json() == {"memories": 1, "model": "hash:384", "dim": 384}
    assert bm("recall", "Lisbon").json()[0]["id"] == mid


# -- config ---------------------------------------------------------------------------------------
def test_config_show_get_set(bm, bm_home):
    shown = bm("config")
    assert shown.code == 0, shown
    cfg = shown.json()
    assert cfg["embedder"] == "hash" and cfg["user"] == "default"
    assert cfg["config_file"] == str(bm_home / "config.toml") and cfg["data_dir"] == str(bm_home / "data")
    assert bm("config", "get", "blob_threshold").out.strip() == "65536"
    res = bm("config", "set", "user", "ann")
    assert res.code == 0, res
    assert 'user = "ann"' in (bm_home / "config.toml").read_text()
    assert bm("config", "get", "user").out.strip() == "ann"
    assert bm("config", "set", "max_memory_chars", "500").code == 0
    assert bm("config", "get", "max_memory_chars").out.strip() == "500"
    # the setting is used: memories go to ann by default
    mid = remember(bm, "stored for the configured user")
    assert bm("memories", "show", mid).json()["user"] == "ann"
    # environment beats the file
    assert bm("config", "get", "embedder").out.strip() == "hash"


@pytest.mark.parametrize("args, words", [
    (("config", "set", "colour", "blue"), ("unknown config key", "known keys")),
    (("config", "get", "colour"), ("unknown config key",)),
    (("config", "set", "blob_threshold", "lots"), ("whole number",)),
    (("config", "set", "max_memory_chars", "0"), ("positive",)),
    (("config", "set", "max_memory_chars", "--", "-5"), ("positive",)),
])
def test_config_bad_key_or_value(bm, bm_home, args, words):
    from conftest import assert_error

    assert bm("config", "set", "user", "ann").code == 0
    before = (bm_home / "config.toml").read_text()
    assert_error(bm(*args), 1, *words)
    assert (bm_home / "config.toml").read_text() == before


# -- the real embedder, end to end --------------------------------------------------------------
@pytest.mark.real_embedder
def test_end_to_end_with_the_real_local_model(tmp_path):
    res = run_bm("init")
    assert res.code == 0 and json.loads(res.out)["model"] == "local:all-MiniLM-L6-v2:int8s", res
    path = tmp_path / "chat.jsonl"
    path.write_text(jsonl(ANN_MESSAGES))
    assert run_bm("ingest", str(path), "--user", "ann").code == 0
    assert run_bm("remember", "Ann's favourite food is grilled sardines", "--user", "ann").code == 0
    # no shared words with the stored text: only the vectors can find it
    res = run_bm("recall", "what does she like to eat?", "--user", "ann", "-k", "1")
    assert res.code == 0, res
    top = json.loads(res.out)[0]
    assert top["text"] == "Ann's favourite food is grilled sardines"
    res = run_bm("recall", "what is Melanie painting?", "--user", "ann", "-k", "1")
    assert json.loads(res.out)[0]["provenance"][0]["meta"] == {"dia_id": "D1:3"}
    # the model's session is made in a thread while the command starts (brandmind/embed/preload.py):
    # a command that fails before it embeds waits for it and still says only what is wrong
    res = run_bm("recall", " ", "--user", "ann")
    assert res.code == 1 and res.err.startswith("Error: ") and len(res.err.strip().splitlines()) == 1, res
    res = run_bm("context", "what does Ann eat?", "--user", "ann", "--budget", "300")
    assert res.code == 0 and "sardines" in res.out, res
    doctor = run_bm("doctor")
    assert doctor.code == 0, doctor
