"""Bad input and faults: each fails cleanly (exit 1 error / 2 usage, one ``Error: …`` line with
a hint on stderr, no traceback) and loses nothing that was stored before."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import assert_error, memory_count, open_memory, run_bm

LISBON = "Ann moved to Lisbon in May"


def jsonl(items: list) -> str:
    return "".join(json.dumps(x) + "\n" for x in items)


def msg(i: int, **extra) -> dict:
    return {"id": f"m{i}", "role": "user", "speaker": "Ann", "content": f"message number {i} about kayaks",
            "ts": f"2024-01-01T00:00:{i:02d}Z", **extra}


@pytest.fixture
def seeded(bm, store) -> list[str]:
    """A store holding two memories (one of them LISBON)."""
    ids = []
    for text in (LISBON, "Bob plays the cello on Sundays"):
        res = bm("remember", text, "--json")
        assert res.code == 0, res
        ids.append(res.json()["id"])
    return ids


def texts() -> list[str]:
    with open_memory() as mem:
        return sorted(r[0] for r in mem.sql.conn.execute("SELECT text FROM memories"))


# -- invalid UTF-8 ------------------------------------------------------------------------
def test_invalid_utf8_on_stdin_for_remember(seeded):
    before = texts()
    res = run_bm("remember", "-", input=b"caf\xe9 au lait\n")
    assert_error(res, 1, "not valid UTF-8", "iconv")
    assert res.out == ""
    assert texts() == before


def test_invalid_utf8_in_argv_for_remember(seeded):
    before = texts()
    res = run_bm("remember", b"caf\xe9 au lait")
    assert_error(res, 1, "not valid UTF-8")
    assert texts() == before


def test_invalid_utf8_query(seeded):
    res = run_bm("recall", "-", input=b"Lisb\xf3n")
    assert_error(res, 1, "query is not valid UTF-8")


def test_invalid_utf8_inside_an_ingest_line(seeded):
    data = (json.dumps(msg(1)) + "\n").encode() + b'{"role": "user", "content": "caf\xe9"}\n' + \
        (json.dumps(msg(3)) + "\n").encode()
    res = run_bm("ingest", "-", input=data)
    line = assert_error(res, 1, "line 2", "not valid UTF-8", "1 message(s) before it were stored")
    assert "--skip-bad" in line
    assert memory_count() == len(seeded) + 1
    # --skip-bad stores the rest; the line before is not stored twice
    res = run_bm("ingest", "-", "--skip-bad", input=data)
    assert res.code == 0, res
    report = json.loads(res.out)
    assert (report["ingested"], report["duplicates"]) == (1, 1)
    assert [b["line"] for b in report["bad"]] == [2]
    assert "skipped line 2" in res.err and "Traceback" not in res.err
    assert memory_count() == len(seeded) + 2


# -- empty and oversized text ----------------------------------------------------------------
@pytest.mark.parametrize("text", ["", "   ", "\n\t  \n"])
def test_empty_text_is_refused(bm, seeded, text):
    assert_error(bm("remember", text), 1, "text is empty")
    assert memory_count() == len(seeded)


def test_empty_stdin_is_refused(seeded):
    assert_error(run_bm("remember", "-", input=b"\n\n"), 1, "text is empty")
    assert_error(run_bm("beads", "add", "-", input=b""), 1, "content is empty")
    assert memory_count() == len(seeded)


def test_empty_query_is_refused(bm, seeded):
    assert_error(bm("recall", "  "), 1, "query is empty")


def test_nul_in_text_is_refused(bm, seeded):
    assert_error(bm("remember", "-", input=b"abc\x00def"), 1, "NUL")
    assert memory_count() == len(seeded)


def test_text_over_the_memory_limit_is_refused_but_beads_offload(bm, seeded, bm_home, monkeypatch):
    monkeypatch.setenv("BM_MAX_MEMORY_CHARS", "100")
    monkeypatch.setenv("BM_BLOB_THRESHOLD", "100")
    big = "The quarterly report says " + "numbers " * 30
    assert len(big) > 100
    line = assert_error(bm("remember", big), 1, "over the memory limit of 100")
    assert "bm beads add" in line
    assert_error(bm("remember", "-", input=big), 1, "over the memory limit")
    assert memory_count() == len(seeded)
    res = bm("beads", "add", "-", input=big)
    assert res.code == 0, res
    bead = bm("beads", "show", res.json()["id"]).json()
    assert bead["content"] == big
    assert [p.read_text() for p in (bm_home / "data" / "blobs").rglob("*") if p.is_file()] == [big]
    # text exactly at the limit is fine
    assert bm("remember", "x" * 100).code == 0


def test_ingest_of_an_oversized_message_stores_a_truncated_memory(bm, store, monkeypatch):
    monkeypatch.setenv("BM_MAX_MEMORY_CHARS", "100")
    content = "kayak " * 50
    res = bm("ingest", "-", input=jsonl([{"role": "user", "content": content}]))
    assert res.code == 0 and res.json()["ingested"] == 1, res
    [item] = bm("memories", "list").json()
    assert len(item["text"]) == 100 and item["meta"].get("truncated") is True
    bead = bm("beads", "show", item["provenance"][0]["bead"]).json()
    assert bead["content"] == content


# -- malformed JSONL ---------------------------------------------------------------------------
def test_malformed_jsonl_names_the_line_and_a_fixed_rerun_stores_only_the_rest(bm, seeded, tmp_path):
    good = [json.dumps(msg(i)) for i in range(1, 5)]
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(good[:2] + ['{"role": "user", "content": "oops"'] + good[2:]) + "\n")
    res = bm("ingest", str(path))
    line = assert_error(res, 1, "line 3", "not valid JSON", "2 message(s) before it were stored")
    assert "re-run" in line
    assert memory_count() == len(seeded) + 2
    assert [b["turn_id"] for b in bm("beads", "tail").json()] == ["m1", "m2"]
    # fix the line and re-run the same command
    path.write_text("\n".join(good[:2] + [json.dumps(msg(9))] + good[2:]) + "\n")
    res = bm("ingest", str(path))
    assert res.code == 0, res
    assert res.json() == {"ingested": 3, "duplicates": 2, "bad": [], "lines": 5}
    assert memory_count() == len(seeded) + 5
    turns = sorted(b["turn_id"] for b in bm("beads", "tail", "-n", "100").json())
    assert turns == ["m1", "m2", "m3", "m4", "m9"]
    assert LISBON in texts()


def test_malformed_jsonl_counts_duplicates_before_it(bm, store, tmp_path):
    good = [json.dumps(msg(i)) for i in range(1, 4)]
    assert bm("ingest", "-", input="\n".join(good[:2]) + "\n").code == 0
    res = bm("ingest", "-", input="\n".join(good + ["[1, 2"]) + "\n")
    assert_error(res, 1, "line 4", "1 message(s) before it were stored", "2 already known")
    assert memory_count() == 3


def test_ingest_skip_bad_reports_and_goes_on(bm, seeded):
    lines = [json.dumps(msg(1)), "not json at all", json.dumps({"role": "user"}),
             json.dumps(msg(4, colour="red")), "", json.dumps(msg(6))]
    res = bm("ingest", "-", "--skip-bad", input="\n".join(lines) + "\n")
    assert res.code == 0, res
    report = res.json()
    assert report["ingested"] == 2 and [b["line"] for b in report["bad"]] == [2, 3, 4]
    err = res.err_lines()
    assert [e.split(":")[0] for e in err] == ["skipped line 2", "skipped line 3", "skipped line 4"]
    assert "content" in err[1] and "colour" in err[2]
    assert "Traceback" not in res.err
    assert memory_count() == len(seeded) + 2


@pytest.mark.parametrize("line, words", [
    ({"role": "user", "content": "hi", "colour": "red"}, ("unknown field(s) colour",)),
    ({"content": "hi"}, ('missing "role"',)),
    ({"role": "user"}, ('missing "content"',)),
    ({"role": "user", "content": None}, ('missing "content"',)),
    ({"role": "user", "content": "hi", "ts": 1e20}, ("ts", "out of range")),
    ({"role": "user", "content": "hi", "ts": -1e15}, ("ts", "out of range")),
    ({"role": "user", "content": "hi", "ts": "0000-01-01"}, ("ts",)),
    ({"role": "user", "content": "   "}, ("content is empty",)),
    ({"role": "user", "content": 42}, ("content must be a string",)),
    ({"role": "user", "content": "hi", "ts": "yesterday-ish"}, ("ts",)),
    ({"role": "user", "content": "hi", "meta": ["not", "an", "object"]}, ("meta must be a JSON object",)),
    ({"role": "user", "content": "hi", "speaker": ""}, ("speaker",)),
    (["role", "content"], ("expected a JSON object",)),
    ("just a string", ("expected a JSON object",)),
])
def test_ingest_bad_message_fields(bm, seeded, line, words):
    data = jsonl([msg(1), line, msg(3)])
    res = bm("ingest", "-", input=data)
    assert_error(res, 1, "line 2", *words)
    assert memory_count() == len(seeded) + 1  # line 1 committed, line 3 not reached


@pytest.mark.parametrize("bad", ['{"role": "user", "content": "hi", "ts": NaN}',
                                 '{"role": "user", "content": "hi", "meta": {"x": Infinity}}'])
def test_ingest_refuses_nan_and_infinity(bm, seeded, bad):
    """Python's json reads them, but they are not JSON: stored, they would break bm's output."""
    res = bm("ingest", "-", input=jsonl([msg(1)]) + bad + "\n")
    assert_error(res, 1, "line 2", "not valid JSON")
    assert memory_count() == len(seeded) + 1
    listed = bm("memories", "list", "--all-users")
    assert listed.code == 0 and len(listed.json()) == len(seeded) + 1


def test_far_dates_are_refused_and_the_store_stays_readable(bm, seeded):
    assert_error(bm("remember", "x", "--ts", "99999-01-01"), 2, "cannot read ts")
    assert_error(bm("recall", "x", "--since", "1e20"), 2, "cannot read since")
    # the extremes that can be printed back are fine, and read back exactly
    for ts, iso in (("0001-01-01", "0001-01-01T00:00:00.000Z"),
                    ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
                    ("1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z")):
        mid = bm("remember", f"dated {ts}", "--ts", ts, "--json").json()["id"]
        assert bm("memories", "show", mid).json()["ts"] == iso
    assert len(bm("memories", "list").json()) == len(seeded) + 3
    assert bm("export").code == 0


def test_non_finite_numbers_are_refused_or_kept_as_text(bm, seeded):
    assert bm("kg", "node", "A").code == 0 and bm("kg", "node", "B").code == 0
    for weight in ("nan", "inf"):
        assert_error(bm("kg", "link", "A", "knows", "B", "--weight", weight), 1, "weight must be a finite number")
    assert bm("kg", "show", "A").json()["edges"] == []
    mid = bm("remember", "meta with odd values", "--meta", "a=NaN", "--meta", "b=Infinity", "--json").json()["id"]
    assert bm("memories", "show", mid).json()["meta"] == {"a": "NaN", "b": "Infinity"}


def test_batch_lines_with_bad_values_fail_alone(bm, seeded):
    bad = [{"id": "k-text", "query": "Lisbon", "k": "abc"}, {"id": "k-float", "query": "Lisbon", "k": 2.5},
           {"id": "k-bool", "query": "Lisbon", "k": True}, {"id": "type-int", "query": "Lisbon", "type": 5},
           {"id": "type-list", "query": "Lisbon", "type": ["fact", 5]}, {"id": "user-int", "query": "Lisbon", "user": 5},
           {"id": "since", "query": "Lisbon", "since": [1]}, {"id": "query-list", "query": ["Lisbon"]},
           [1, 2], "just text"]
    good = {"id": "good", "query": "Lisbon", "k": 1, "type": "fact"}
    res = bm("recall", "--batch", "-", input=jsonl(bad + [good]))
    lines = res.jsonl()
    assert [line["id"] for line in lines] == [*(b["id"] for b in bad[:8]), 9, 10, "good"]
    assert all("error" in line and line["hint"] for line in lines[:-1]), lines
    assert "k must be a whole number" in lines[0]["error"]
    assert "expected a JSON object" in lines[8]["error"]
    assert [r["id"] for r in lines[-1]["results"]] == [seeded[0]]
    assert_error(res, 1, "10 batch line(s) failed")


def test_beads_tail_n_zero_and_negative(bm, seeded):
    for i in range(3):
        assert bm("beads", "add", f"b{i}").code == 0
    assert bm("beads", "tail", "-n", "0").json() == []
    assert bm("beads", "tail", "-n", "0", "--thread", "main").json() == []
    assert [b["content"] for b in bm("beads", "tail", "-n", "1").json()] == ["b2"]
    assert [b["content"] for b in bm("beads", "tail", "-n", "1", "--thread", "main").json()] == ["b2"]
    assert_error(bm("beads", "tail", "-n", "-1"), 2, "n must be 0 or more")


def test_export_to_a_missing_directory(bm, seeded, tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "backup.jsonl"
    assert_error(bm("export", "-o", str(target)), 1, "cannot write", "omit -o")
    assert not target.parent.exists()


def test_ingest_missing_file(bm, seeded, tmp_path):
    assert_error(bm("ingest", str(tmp_path / "nope.jsonl")), 1, "no such file")


def test_import_of_something_that_is_not_an_export(bm, seeded, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"kind": "header", "format": "bm-export/1"}\n{"role": "user", "content": "hi"}\n')
    assert_error(bm("import", str(path)), 1, "line 2", "not a bm export record")
    path.write_text("garbage\n")
    assert_error(bm("import", str(path)), 1, "line 1", "not valid JSON")
    assert memory_count() == len(seeded)


# -- missing and corrupt stores ---------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ("export",), ("stats",), ("forget", "m_x", "--yes"), ("kg", "show", "Ann"), ("rebuild",),
])
def test_missing_store_names_bm_init(bm, bm_home, args):  # (a first write creates the store; searches answer empty)
    res = bm(*args, input=jsonl([msg(1)]))
    assert_error(res, 1, "no bm store", "bm init")
    assert not (bm_home / "data").exists()  # nothing was created by accident


def test_missing_store_in_a_real_process(bm_home):
    res = run_bm("stats")
    assert_error(res, 1, "bm init")
    assert res.out == ""
    doctor = run_bm("doctor")
    assert doctor.code == 1 and "bm init" in doctor.err and "Traceback" not in doctor.err


def test_corrupt_memory_index_names_doctor_and_rebuild_and_rebuild_repairs_it(bm, seeded, bm_home):
    sqlite = bm_home / "data" / "memory.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{sqlite}{suffix}").unlink(missing_ok=True)
    sqlite.write_bytes(os.urandom(3000) + b"this is not a database" * 200)
    res = run_bm("recall", "Lisbon")
    line = assert_error(res, 1, "bm doctor", "bm rebuild")
    assert "memory index" in line
    assert_error(bm("remember", "new while corrupt"), 1, "bm rebuild")
    doctor = bm("doctor")
    assert_error(doctor, 1, "bm rebuild")
    assert any(not c["ok"] for c in doctor.json())
    rebuilt = run_bm("rebuild")
    assert rebuilt.code == 0, rebuilt
    assert json.loads(rebuilt.out)["memories"] == len(seeded)
    assert bm("recall", "Lisbon").json()[0]["id"] == seeded[0]
    assert sorted(m["id"] for m in bm("memories", "list").json()) == sorted(seeded)
    assert bm("doctor").code == 0
    # the bad file was kept aside, not deleted
    assert list(sqlite.parent.glob("memory.sqlite.corrupt-*"))


def test_truncated_memory_index_is_reported_and_repaired(bm, seeded, bm_home):
    sqlite = bm_home / "data" / "memory.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{sqlite}{suffix}").unlink(missing_ok=True)
    data = sqlite.read_bytes()
    sqlite.write_bytes(data[: len(data) // 3])
    res = bm("recall", "Lisbon")
    if res.code == 0:  # SQLite may still read the first pages; doctor must then see the damage
        assert_error(bm("doctor"), 1, "bm rebuild")
    else:
        assert_error(res, 1, "bm rebuild")
    assert bm("rebuild").code == 0
    assert bm("doctor").code == 0
    assert bm("recall", "Lisbon").json()[0]["id"] == seeded[0]


def test_corrupt_op_log_is_a_clear_error(bm, seeded, bm_home):
    mdb = bm_home / "data" / "log.lmdb" / "data.mdb"
    size = mdb.stat().st_size
    mdb.write_bytes(os.urandom(max(size, 65536)))
    res = run_bm("recall", "Lisbon")
    line = assert_error(res, 1, "op log")
    assert "bm doctor" in line
    assert_error(run_bm("doctor"), 1, "op log")
    assert_error(bm("remember", "x"), 1, "op log")


def test_unreadable_config_file(bm, seeded, bm_home):
    (bm_home / "config.toml").write_text("user = [unclosed\n")
    assert_error(bm("recall", "Lisbon"), 1, "cannot parse", "config.toml")
    (bm_home / "config.toml").write_text('colour = "red"\n')
    assert_error(bm("recall", "Lisbon"), 1, "unknown key(s)", "colour")


# -- queries full of FTS syntax -------------------------------------------------------------------
FTS_QUERIES = [
    'Lisbon"', '"Lisbon', '"Lisbon May', 'Lisbon*', '*Lisbon', 'Lis* Lisbon', 'Lisbon AND (',
    'AND ( Lisbon', 'Lisbon AND', 'Lisbon NEAR May', 'NEAR(Lisbon May, 2)', 'NEAR Lisbon',
    'Lisbon OR', 'OR Lisbon', 'Lisbon NOT', 'NOT Lisbon', '-Lisbon', 'Lisbon -May', 'text:Lisbon',
    'memories_fts:Lisbon', 'Lisbon:', '^Lisbon', 'Lisbon)', '((Lisbon', '(Lisbon))) "" ((',
    "Lisbon' OR 1=1 --", 'Lisbon; DROP TABLE memories;', '{Lisbon May}', 'Lisbon + May',
    'Lisbon\\', '"""Lisbon"""', 'lisbon?!', 'Ann-moved', 'Ann’s Lisbon', 'LISBON',
]


@pytest.mark.parametrize("query", FTS_QUERIES)
def test_fts_syntax_is_searched_as_text(bm, seeded, query):
    res = bm("recall", "-k", "10", "--", query)  # `--`: "-Lisbon" is a query, not an option
    assert res.code == 0, res
    results = res.json()
    assert results and results[0]["id"] == seeded[0], (query, results)
    assert results[0]["signals"].get("keyword"), (query, results[0])


@pytest.mark.parametrize("query", ['"', '*', '(', ')', 'AND (', 'NEAR', 'OR', '- -', '--', ':', '^', '""', '*:*', "'"])
def test_pure_syntax_queries_do_not_fail(bm, seeded, query):
    res = bm("recall", "--", query)  # (a lone `-` means stdin)
    assert res.code == 0, res
    assert isinstance(res.json(), list)


def test_fts_syntax_in_a_real_process_and_in_batch_and_forget(bm, seeded):
    res = run_bm("recall", 'Lisbon" AND (NEAR')
    assert res.code == 0 and json.loads(res.out)[0]["id"] == seeded[0], res
    batch = bm("recall", "--batch", "-", input=jsonl([{"id": i, "query": q} for i, q in enumerate(FTS_QUERIES[:8])]))
    assert batch.code == 0, batch
    assert all(line["results"][0]["id"] == seeded[0] for line in batch.jsonl())
    res = bm("forget", "--match", 'Lisbon" AND (', "--yes")
    assert res.code == 0 and res.json() == {"forgotten": [seeded[0]], "beads": [], "blocks": [], "files": []}, res
    assert memory_count() == 1


# -- usage errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, words", [
    (("frobnicate",), ("No such command",)),
    (("recall", "x", "--bogus"), ("No such option", "--bogus")),
    (("beads", "frob"), ("No such command",)),
    (("recall", "x", "-k", "abc"), ("-k",)),
    (("recall", "x", "-k", "0"), ("k must be a whole number from 1 to 1000",)),
    (("recall", "x", "-k", "1001"), ("k must be a whole number from 1 to 1000",)),
    (("recall",), ("missing QUERY",)),
    (("recall", "x", "--batch", "-"), ("not both",)),
    (("remember", "x", "--meta", "novalue"), ("key=value",)),
    (("remember",), ("Missing argument",)),
])
def test_usage_errors_exit_2(bm, seeded, args, words):
    assert_error(bm(*args), 2, *words)
    assert memory_count() == len(seeded)


def test_usage_errors_in_a_real_process(seeded):
    assert_error(run_bm("frobnicate"), 2, "No such command")
    assert_error(run_bm("recall", "x", "-k", "0"), 2, "k must be")


@pytest.mark.parametrize("args", [
    ("forget", "--yes"),
    ("forget", "ID", "--wipe-user", "ann", "--yes"),
    ("forget", "--wipe-user", "ann", "--match", "Lisbon", "--yes"),
    ("forget", "ID", "--match", "Lisbon", "--yes"),
])
def test_forget_needs_exactly_one_target(bm, seeded, args):
    args = tuple(seeded[0] if a == "ID" else a for a in args)
    assert_error(bm(*args), 2, "exactly one of ID, --match or --wipe-user")
    assert memory_count() == len(seeded)


@pytest.mark.parametrize("flag, value, words", [
    ("--since", "last tuesday", ("cannot read since", "ISO 8601")),
    ("--until", "2024-13-45", ("cannot read until", "ISO 8601")),
    ("--type", "feeling", ("unknown memory type", "preference")),
    ("--user", " ann ", ("invalid user",)),
    ("--agent", "a\tb", ("invalid agent",)),
])
def test_bad_recall_filters(bm, seeded, flag, value, words):
    assert_error(bm("recall", "Lisbon", flag, value), 2, *words)


@pytest.mark.parametrize("args, words", [
    (("--type", "feeling"), ("unknown memory type",)),
    (("--importance", "1.5"), ("importance must be a number from 0 to 1",)),
    (("--ts", "soon"), ("cannot read ts",)),
    (("--user", ""), ("invalid user",)),
])
def test_bad_remember_options(bm, seeded, args, words):
    assert_error(bm("remember", "a perfectly fine text", *args), 2, *words)
    assert memory_count() == len(seeded)


def test_unknown_ids(bm, seeded):
    assert_error(bm("memories", "show", "m_nope"), 1, "no memory", "bm memories list")
    assert_error(bm("beads", "show", "b_nope"), 1, "no bead")
    assert_error(bm("forget", "m_nope", "--yes"), 1, "no memory")
    assert_error(bm("kg", "show", "Nobody"), 1, "no graph node", "bm kg node")
    assert_error(bm("kg", "link", "Nobody", "mentions", "m_nope"), 1, "no memory")
    assert_error(bm("kg", "link", "n_nope", "knows", "Nobody"), 1, "no graph node")
    assert memory_count() == len(seeded)


def test_no_args_prints_help(bm):
    res = bm()
    assert res.code == 2 and "Usage:" in res.out and "Traceback" not in res.err
