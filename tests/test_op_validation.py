"""No input, import or peer can break a store (issue 12).

Every op is checked before it enters the log (brandmind/opcheck.py): a bad `bm import`
record is a bad line; a bad op pulled from a peer is stored refused (its stream stays
whole) and quarantined; an op already in the log that cannot be applied (a log written by
an older bm) is quarantined, named by `bm doctor` and skipped by `bm rebuild`, and every
command keeps working.  The matrices below give every field of every op kind (and of every
export record kind) a wrong value, then run the commands.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

import pytest

from brandmind import opcheck
from brandmind.clock import now_millis
from brandmind.errors import BMError, InvalidInput
from brandmind.exchange import export_lines, import_lines
from brandmind.memory import Memory

from conftest import run_bm, use_home
from dirremote import DirRemote

PEER = "r_peer0000000000000000000"
ISSUE_CASES = [("importance", "high"), ("importance", None), ("user", 7), ("agent", 5), ("importance", -5),
               ("meta", [1]), ("provenance", "x"), ("id", "../../etc")]


# -- material: one op of every kind, one record of every export kind, made by a real store --------
def _workload(mem: Memory) -> None:
    m1 = mem.remember("Ann lives in Lisbon", user="ann", meta={"a": 1}, ttl="30d")  # expires_at (brandmind/expiry.py)
    mem.pin(m1["id"])  # memory.pin
    mem.remember("Ann lives in Lisbon", user="ann")  # a near-duplicate: consolidate merges it
    mem.ingest([{"role": "user", "content": "hello there", "id": "t1"}], user="ann")
    n1, n2 = mem.graph.add_node("Lisbon", user="ann"), mem.graph.add_node("Ann", user="ann")
    mem.graph.add_edge(n2["id"], n1["id"], "lives_in", user="ann")
    mem.graph.add_edge(n1["id"], m1["id"], "mentions", user="ann")
    for obj in ("Acme", "Acme", "Globex"):  # added, confirmed, updated (retire, edge retire)
        mem.facts.add({"subject": "Ann", "predicate": "works_at", "object": obj}, user="ann")
    mem.consolidate(user="ann")
    mem.blocks.set("human", "likes tea", user="ann")
    mem.skills.add("market-research", description="do research", tags=["x"], examples=["one"])
    mem.skills.add("tmp-skill", description="tmp")
    mem.skills.remove("tmp-skill")
    mem.personas.assign("ann", "qsr_real_estate")
    mem.personas.assign("bob", "qsr_real_estate")
    mem.personas.unassign("bob", "qsr_real_estate")
    mem.personas.put_doc({"name": "Pi", "goals": ["help"]}, agent="default")
    mem.add_bead("a note", user="ann")


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """{"ops": one valid op of every kind (payloads), "records": one export record of every kind}."""
    home = tmp_path_factory.mktemp("source")
    with mock.patch.dict("os.environ", {"BM_HOME": str(home), "BM_EMBEDDER": "hash"}):
        with Memory(create=True) as mem:
            _workload(mem)
            ops: dict[str, dict] = {}
            for op in mem.log.iter_ops():
                ops.setdefault(op["kind"], op["payload"])
            records: dict[str, dict] = {}
            for line in export_lines(mem):
                rec = json.loads(line)
                records.setdefault(rec["kind"], rec)
    memory_id = ops["memory.add"]["id"]
    node_id = ops["kg.node"]["id"]
    ts = now_millis()
    # the forgetting kinds, by hand (made by the API they would take the data away with them)
    ops["memory.forget"] = {"id": memory_id}
    ops["bead.forget"] = {"id": ops["bead.add"]["bead"]["id"]}
    ops["kg.node.remove"] = {"id": node_id, "user": "ann", "ts": ts}
    ops["kg.node.merge"] = {"id": node_id, "into": ops["kg.edge"]["dst"], "user": "ann", "ts": ts}
    ops["user.forget"] = {"user": "zed"}
    records.pop("header")
    return {"ops": ops, "records": records}


def test_material_covers_every_op_kind_and_every_record_kind(material: dict) -> None:
    assert set(material["ops"]) == set(opcheck.CHECKS)
    assert set(material["records"]) >= {"bead", "memory", "node", "edge", "mention", "skill", "block",
                                        "persona", "persona_user", "persona_doc"}
    for kind, payload in material["ops"].items():  # each is valid as made
        opcheck.check(kind, payload)


def _wrong(value: Any) -> list[Any]:
    """Values of another type than ``value`` (and a few out-of-range ones)."""
    if isinstance(value, bool):
        return ["yes", None]
    if isinstance(value, (int, float)):
        return ["high", None, -5, [1]]
    if isinstance(value, str):
        return [7, None, ["x"], "../../etc"]
    if isinstance(value, list):
        return ["x", {"a": 1}, [[1]]]
    if isinstance(value, dict):
        return [[1], "x"]
    return [7, {"a": 1}]


_MISSING = object()


def _mutations(payload: dict) -> Iterator[tuple[str, dict]]:
    """(what, payload) with one field given a wrong value or left out; for ``bead.add`` the
    fields of the bead, for ``persona.doc`` those of the document too."""
    for key, value in payload.items():
        for bad in [*_wrong(value), _MISSING]:
            out = dict(payload)
            if bad is _MISSING:
                del out[key]
            else:
                out[key] = bad
            yield f"{key}={'<missing>' if bad is _MISSING else repr(bad)}", out
        if isinstance(value, dict) and key in ("bead", "doc"):
            for what, inner in _mutations(value):
                yield f"{key}.{what}", {**payload, key: inner}


def _stream(material: dict, first_seq: int = 1) -> tuple[list[dict], dict]:
    """A peer's op stream: the valid ops, then every mutation of every op, then forgets and a
    sentinel memory; returns (ops, {"sentinel": id, "bad": [(op id, kind, what)]})."""
    valid = material["ops"]
    forgets = ("memory.forget", "bead.forget", "kg.node.remove", "kg.node.merge", "user.forget")
    entries = [(kind, p, None) for kind, p in valid.items() if kind not in forgets]
    for kind, p in valid.items():
        entries += [(kind, bad, what) for what, bad in _mutations(p)]
    entries += [(kind, valid[kind], None) for kind in forgets]
    sentinel = dict(valid["memory.add"], id="m_sentinel", text="the last op of the peer")
    entries.append(("memory.add", sentinel, None))
    base = now_millis() - 60_000
    ops, bad = [], []
    for i, (kind, payload, what) in enumerate(entries):
        seq = first_seq + i
        ops.append({"id": f"{PEER}:{seq}", "hlc": [base + i, 0, PEER], "kind": kind, "payload": payload})
        if what is not None:
            bad.append((f"{PEER}:{seq}", kind, what))
    return ops, {"sentinel": "m_sentinel", "bad": bad}


def _library_commands(mem: Memory) -> None:
    """Every read and maintenance path of the API; only BMError may come out."""
    for call in (lambda: mem.admin.stats(), lambda: mem.recall("Lisbon", user="ann"),
                 lambda: mem.context("where does Ann live", user="ann"), lambda: mem.admin.doctor(),
                 lambda: list(export_lines(mem)), lambda: mem.beads_tail(user="ann"),
                 lambda: mem.list_memories(all_users=True), lambda: mem.admin.rebuild()):
        try:
            call()
        except BMError:
            pass
    for row in mem.list_memories(all_users=True)[:1]:
        mem.forget(row["id"])


def _cli_commands(extra: tuple = ()) -> list:
    """Run every command in a real process; none may print a traceback."""
    results = []
    for args in (("stats",), ("recall", "Lisbon", "-u", "ann"), ("context", "where does Ann live", "-u", "ann"),
                 ("doctor",), ("rebuild",), ("export",), ("beads", "tail", "-u", "ann"),
                 ("memories", "list", "-u", "ann"), ("forget", "--match", "Lisbon", "-u", "ann", "--yes"), *extra):
        res = run_bm(*args)
        assert "Traceback" not in res.out + res.err, (args, res)
        assert res.code == 0 or res.err_lines()[-1].startswith("Error: "), (args, res)
        results.append((args, res))
    return results


# -- 1. pulled ops ------------------------------------------------------------------------------------
def test_every_wrong_field_of_every_pulled_op_is_refused_and_the_rest_of_the_stream_applies(
        material: dict, store: Path) -> None:
    ops, info = _stream(material)
    with Memory() as mem:
        got = mem.receive_ops(ops)
        assert got["received"] == len(ops)
        assert mem.get(info["sentinel"])["text"] == "the last op of the peer"  # the stream stayed whole
        assert mem.log.version_vector()[PEER] == len(ops)
        quarantined = {q["op_id"]: q for q in opcheck.quarantined(mem.sql)}
        # nothing of a refused op is in the log: its payload is the reason
        for op_id, q in quarantined.items():
            replica, seq = op_id.rsplit(":", 1)
            assert mem.log.get_op(replica, int(seq))["payload"] == {"refused": q["error"]}
        named = {(kind, what) for op_id, kind, what in info["bad"] if op_id in quarantined}
        for kind, field in [("memory.add", "importance='high'"), ("memory.add", "importance=None"),
                            ("memory.add", "user=7"), ("memory.add", "agent=7"), ("memory.add", "importance=-5"),
                            ("memory.add", "meta=[1]"), ("memory.add", "provenance='x'"),
                            ("memory.add", "id='../../etc'"), ("bead.add", "bead.ts='high'"),
                            ("kg.edge", "weight='high'"), ("block.update", "update=7"),
                            ("persona.assign", "confidence='high'"), ("skill.add", "version=7")]:
            assert (kind, field) in named, (kind, field)
        # every kind had at least one of its mutations refused
        assert {kind for kind, _ in named} == set(opcheck.CHECKS)
        checks = {c["check"]: c for c in mem.admin.doctor()}
        assert not checks["quarantined ops"]["ok"]
        assert "importance" in checks["quarantined ops"]["detail"] or len(quarantined) > 5
        _library_commands(mem)
        rebuilt = mem.admin.rebuild()
        assert rebuilt["skipped"] == len(opcheck.quarantined(mem.sql)) > 0
    _cli_commands()


def test_bad_pulled_ops_through_a_real_sync_round(material: dict, store: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from brandmind.sync.engine import sync_once

    remote = DirRemote(tmp_path / "remote")
    ops, info = _stream(material)
    assert remote.push(PEER, ops) == len(ops)  # a faulty peer's stream, on the remote
    with Memory() as mem:
        mine = mem.remember("a healthy device's own memory", user="ann")["id"]
        report = sync_once(mem, remote)
        assert report["errors"] == [], report
        assert report["pulled"][PEER] == len(ops)
        assert mem.get(info["sentinel"])
        assert len(opcheck.quarantined(mem.sql)) >= len({kind for _, kind, _ in info["bad"]})
        assert sync_once(mem, remote)["errors"] == []  # the next round goes on as usual
        assert remote.heads()[mem.log.replica] >= 1  # and this device's own ops went out
    # a second healthy device pulls both streams from the remote
    use_home(monkeypatch, tmp_path / "second")
    with Memory(create=True) as other:
        report = sync_once(other, remote)
        assert report["errors"] == [], report
        assert other.get(mine)["text"] == "a healthy device's own memory"
        assert other.get(info["sentinel"])
    _cli_commands()


def test_refused_op_relayed_by_another_device_stays_refused(material: dict, store: Path) -> None:
    op = {"id": f"{PEER}:1", "hlc": [now_millis(), 0, PEER], "kind": "memory.add",
          "payload": {"refused": "importance must be a finite number from 0 to 1, got 'high'"}}
    with Memory() as mem:
        mem.receive_ops([op])
        assert [q["op_id"] for q in opcheck.quarantined(mem.sql)] == [f"{PEER}:1"]
        assert mem.admin.stats()["counts"]["memories"] == 0


# -- 2. import ---------------------------------------------------------------------------------------
# the field that makes a record new to a store (records already present are skipped unchecked)
_FRESH = {"bead": ("id", "b_case{}"), "memory": ("id", "m_case{}"), "node": ("id", "n_case{}"),
          "edge": ("id", "e_case{}"), "skill": ("name", "case-{}"), "persona_user": ("user", "u{}"),
          "persona_doc": ("agent", "a{}"), "block": ("user", "u{}")}


def _import(mem: Memory, rec: dict) -> InvalidInput | None:
    before = mem.log.count("ops")
    try:
        import_lines(mem, [json.dumps({"kind": "header", "format": "bm-export/1"}), json.dumps(rec)])
    except InvalidInput as exc:  # only InvalidInput may come out, naming the line
        assert exc.message.startswith("line 2: "), exc.message
        assert mem.log.count("ops") == before  # a bad line stores nothing
        return exc
    return None


def test_every_wrong_field_of_every_import_record_is_a_bad_line_or_harmless(
        material: dict, tmp_path: Path) -> None:
    refused, n = set(), 0
    for kind, rec in sorted(material["records"].items()):
        body = {k: v for k, v in rec.items() if k != "kind"}
        if kind == "block":
            body.pop("id")  # derived from scope, owner and label (a new owner below)
        with Memory(home=tmp_path / kind, create=True) as mem:
            for what, bad in _mutations(body):
                n += 1
                fresh = _FRESH.get(kind)
                if fresh and not what.startswith((f"{fresh[0]}=", f"{fresh[0]}.")):
                    bad[fresh[0]] = fresh[1].format(n)
                if fresh is None:  # a persona (its handle is its name), a mention: a store of its own
                    with Memory(home=tmp_path / f"{kind}{n}", create=True) as own:
                        exc = _import(own, {"kind": kind, **bad})
                        _library_commands(own)
                else:
                    exc = _import(mem, {"kind": kind, **bad})
                if exc is not None:
                    refused.add((kind, what))
            _library_commands(mem)  # whatever was imported, the store works
            assert opcheck.quarantined(mem.sql) == []
    for what in ("importance='high'", "importance=None", "importance=-5", "user=7", "agent=7", "meta=[1]",
                 "provenance='x'", "id='../../etc'", "ts=['x']", "text=None", "type=7"):
        assert ("memory", what) in refused, what
    assert {kind for kind, _ in refused} == set(material["records"])


@pytest.mark.parametrize("field,value", ISSUE_CASES)
def test_bm_import_of_a_bad_memory_line_is_a_bad_line_and_stores_nothing(
        material: dict, store: Path, tmp_path: Path, field: str, value: Any) -> None:
    rec = {**material["records"]["memory"], "id": "m_imported", field: value}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"kind": "header", "format": "bm-export/1"}) + "\n"
                    + json.dumps(material["records"]["bead"]) + "\n" + json.dumps(rec) + "\n")
    res = run_bm("import", path)
    assert res.code == 1 and "Traceback" not in res.err, res
    assert res.err_lines()[-1].startswith("Error: line 3: "), res
    with Memory() as mem:
        assert mem.log.count("ops") == 0  # nothing of the batch was stored


def test_after_a_refused_import_every_command_works(material: dict, store: Path, tmp_path: Path) -> None:
    run_bm("remember", "Ann lives in Lisbon", "-u", "ann")
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"kind": "header", "format": "bm-export/1"}) + "\n"
                    + json.dumps({**material["records"]["memory"], "id": "m_x", "importance": "high"}) + "\n")
    assert run_bm("import", path).code == 1
    results = dict(_cli_commands())
    assert results[("doctor",)].code == 0, results[("doctor",)]
    assert results[("stats",)].json()["counts"]["memories"] == 1


# -- 3. ops already in the log (written by an older bm) -----------------------------------------------
def _legacy_append(mem: Memory, ops: list[tuple[str, dict]]) -> None:
    """Append ops without the check, as bm before opcheck did, and leave them unapplied (the
    older bm died in its catch-up); the store then meets this bm for the first time."""
    with mock.patch.object(mem.log, "check", lambda kind, payload: None), mem.log.write() as t:
        for kind, payload in ops:
            t.append(kind, payload)
        t.txn.delete(b"checked_from", db=t.db["meta"])


def test_bad_ops_in_an_old_log_are_quarantined_named_by_doctor_and_skipped_by_rebuild(material: dict,
                                                                                       store: Path) -> None:
    good = material["ops"]["memory.add"]
    with Memory() as mem:
        mem.remember("Ann lives in Lisbon", user="ann")
        _legacy_append(mem, [
            ("memory.add", {**good, "id": "m_high", "importance": "high"}),
            ("memory.add", {**good, "id": "m_user", "user": 7}),
            ("memory.add", {**good, "id": "m_neg", "importance": -5}),
            ("memory.add", {**good, "id": "../../etc"}),
            ("bead.add", {"bead": {**material["ops"]["bead.add"]["bead"], "id": "b_bad", "ts": "x"}}),
            ("kg.edge", {**material["ops"]["kg.edge"], "id": "e_bad", "weight": "heavy"}),
            ("memory.add", {**good, "id": "m_after", "text": "written after the bad ones"}),
        ])
    res = run_bm("stats")  # before: a traceback from every command
    assert res.code == 0 and "Traceback" not in res.err, res
    doctor = run_bm("doctor")
    assert doctor.code == 1 and "Traceback" not in doctor.err, doctor
    line = doctor.err_lines()[-1]
    assert line.startswith("Error: doctor: quarantined ops: ") and "memory.add" in line and "importance" in line
    checks = {c["check"]: c for c in doctor.json()}
    assert checks["quarantined ops"]["detail"].count("(memory.add)") == 4
    assert checks["index up to date"]["ok"] and checks["memory index"]["ok"]
    rebuilt = run_bm("rebuild")
    assert rebuilt.code == 0 and rebuilt.json()["skipped"] == 6, rebuilt
    with Memory() as mem:
        assert mem.get("m_after")["text"] == "written after the bad ones"
        assert {q["op_id"].rsplit(":", 1)[1] for q in opcheck.quarantined(mem.sql)} == {"2", "3", "4", "5", "6", "7"}
        assert mem.log.get_bead("b_bad") is None
    _cli_commands()


def test_an_op_whose_apply_fails_is_quarantined_and_the_rest_applies(store: Path) -> None:
    """The apply step itself never stops a store: an op that passes its check but fails to
    apply (a bug, or a shape no check foresaw) is rolled back alone and quarantined."""
    from brandmind.projection import apply_sql_side
    from brandmind.replication import catch_up

    with Memory() as mem:
        with mem.log.write() as t:
            for text in ("first", "second", "third"):
                t.append("memory.add", {"id": f"m_{text}", "text": text, "type": "fact", "user": "ann",
                                        "agent": None, "importance": 0.5, "ts": 1000, "source": "test",
                                        "provenance": [], "meta": {}})

        def flaky(sql: Any, op: dict, vector_for: Any) -> None:
            apply_sql_side(sql, op, vector_for)
            if op["payload"].get("id") == "m_second":
                raise KeyError("boom")  # after writing rows: they must be rolled back

        assert catch_up(mem.log, mem.sql, mem.store.vector_for, apply=flaky) == 3
        ids = {r[0] for r in mem.sql.conn.execute("SELECT id FROM memories")}
        assert ids == {"m_first", "m_third"}
        [q] = opcheck.quarantined(mem.sql)
        assert q["kind"] == "memory.add" and "KeyError" in q["error"] and "boom" in q["error"]
        assert mem.sql.applied() == mem.log.last_arrival()


def test_local_writes_are_checked_before_they_are_stored(store: Path) -> None:
    with Memory() as mem:
        before = mem.log.last_arrival()
        with pytest.raises(InvalidInput, match="importance"), mem.log.write() as t:
            t.append("bead.add", {"bead": {"id": "b_ok", "ts": 1, "user": "ann", "role": "user", "content": "x"}})
            t.append("memory.add", {"id": "m_x", "text": "x", "type": "fact", "user": "ann", "importance": "high",
                                    "ts": 1, "source": "api"})
        assert mem.log.last_arrival() == before  # the whole transaction was refused
        with pytest.raises(InvalidInput, match="nested more than"):
            deep: Any = 1
            for _ in range(100):
                deep = {"a": deep}
            mem.remember("deep meta", meta={"x": deep})


# -- 4. deeply nested JSON and directories -------------------------------------------------------------
DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize("args", [("ingest", "-"), ("import", "-"), ("facts", "add", "-"),
                                  ("persona", "doc", "import", "-")])
def test_deeply_nested_json_is_a_bad_line_not_a_traceback(store: Path, args: tuple) -> None:
    res = run_bm(*args, input=DEEP + "\n")
    assert res.code == 1 and "Traceback" not in res.out + res.err, res
    assert "nested too deeply" in res.err_lines()[-1], res


def test_deeply_nested_recall_batch_line_is_reported_and_the_others_answered(store: Path) -> None:
    res = run_bm("recall", "--batch", "-", "-u", "ann", input=json.dumps({"query": "x"}) + "\n" + DEEP + "\n")
    assert res.code == 1 and "Traceback" not in res.out + res.err, res
    lines = res.jsonl()
    assert "results" in lines[0] and "nested too deeply" in lines[1]["error"]


def test_deeply_nested_meta_in_an_ingest_line_names_the_line(store: Path) -> None:
    meta = "1"
    for _ in range(100):
        meta = '{"a": ' + meta + "}"
    line = '{"role": "user", "content": "hi", "meta": ' + meta + "}"
    res = run_bm("ingest", "-", "-u", "ann", input=json.dumps({"role": "user", "content": "ok"}) + "\n" + line + "\n")
    assert res.code == 1 and "Traceback" not in res.err, res
    assert res.err_lines()[-1].startswith("Error: line 2: meta is nested more than 64 levels deep"), res


def test_ingest_of_a_directory_is_a_usage_error(store: Path, tmp_path: Path) -> None:
    res = run_bm("ingest", tmp_path)
    assert res.code == 2 and "Traceback" not in res.err, res
    line = res.err_lines()[-1]
    assert line.startswith(f"Error: {tmp_path} is a directory") and "(hint: " in line
    assert "no such file" not in line
