"""Persona cohorts, assignments, detection and the agent's persona document
(brandmind/personas.py, `bm persona ...`): CLI end to end, the shared block they attach,
merge rules, rebuild, forget, export/import."""
from __future__ import annotations

import json
import random

import pytest

from conftest import assert_error, open_memory, run_bm, use_home

STARTERS = ["cpg_retail_media", "qsr_real_estate", "retail_asset_management", "tobacco_consumer_insights"]


def ops_of(kind_prefix: str = "persona.") -> list[dict]:
    with open_memory() as mem:
        return [op for op in mem.log.iter_ops() if op["kind"].startswith(kind_prefix)]


def tables() -> dict:
    with open_memory() as mem:
        c = mem.sql.conn
        return {t: c.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
                for t in ("personas", "persona_users", "persona_docs")}


# -- list / show --------------------------------------------------------------------------------------
def test_list_shows_the_four_built_in_starters_without_writing_anything(bm, store):
    res = bm("persona", "list")
    assert res.code == 0, res
    items = res.json()
    assert [p["handle"] for p in items] == STARTERS
    qsr = items[1]
    assert (qsr["industry"], qsr["role"], qsr["stored"], qsr["users"]) == ("QSR", "Real Estate", False, 0)
    assert qsr["block"] == "qsr_real_estate_service_experience"
    for p in items:
        assert p["description"] and p["typical_kpis"] and p["typical_motivations"] and p["quintessential_queries"]
    assert ops_of() == []  # init, list and show write no op


def test_show_a_persona_and_errors_for_unknown_or_malformed_handles(bm, store):
    res = bm("persona", "show", "tobacco_consumer_insights")
    assert res.code == 0, res
    out = res.json()
    assert out["industry"] == "Tobacco" and out["role"] == "Consumer Insights" and out["holders"] == []
    assert_error(bm("persona", "show", "qsr_marketing"), 1, "no persona 'qsr_marketing'", "bm persona list")
    assert_error(bm("persona", "show", "Not A Handle"), 2, "invalid persona handle")


# -- add ---------------------------------------------------------------------------------------------
def test_add_from_options_then_show_and_list(bm, store):
    res = bm("persona", "add", "--industry", "QSR", "--role", "Operations",
             "-d", "Restaurant operations leaders who run speed of service and labour",
             "--kpi", "speed of service", "--kpi", "labour cost", "--query", "Which stores are slowest at lunch?",
             "--keyword", "operations")
    assert res.code == 0, res
    out = res.json()
    assert out["handle"] == "qsr_operations" and out["stored"] and not out["updated"]
    assert out["typical_kpis"] == ["speed of service", "labour cost"]
    assert bm("persona", "show", "qsr_operations").json()["quintessential_queries"] == ["Which stores are slowest at lunch?"]
    assert "qsr_operations" in [p["handle"] for p in bm("persona", "list").json()]
    # again: replaces (last writer wins), same handle
    again = bm("persona", "add", "--industry", "QSR", "--role", "Operations", "-d", "Ops leaders").json()
    assert again["updated"] and again["description"] == "Ops leaders" and again["typical_kpis"] == []
    assert [op["kind"] for op in ops_of()] == ["persona.define", "persona.define"]


def test_add_from_yaml_and_json_files(bm, store, tmp_path):
    yml = tmp_path / "personas.yaml"
    yml.write_text("""
personas:
  - industry: Grocery
    role: Category Management
    description: Category managers at grocery chains.
    typical_kpis: [category sales, share of shelf]
    quintessential_queries:
      - Which categories drive trips to our stores?
  - handle: banking_branch_strategy
    industry: Banking
    professional_role: Branch Strategy
    description: Branch network planners at retail banks.
""", encoding="utf-8")
    res = bm("persona", "add", "--file", str(yml))
    assert res.code == 0, res
    assert [p["handle"] for p in res.json()] == ["grocery_category_management", "banking_branch_strategy"]
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"industry": "Fitness", "role": "Real Estate", "description": "Gym site selection",
                               "kpis": ["members per site"]}), encoding="utf-8")
    out = bm("persona", "add", "-f", str(one)).json()
    assert out["handle"] == "fitness_real_estate" and out["typical_kpis"] == ["members per site"]
    # from stdin, a `bm persona show` result fed back
    shown = bm("persona", "show", "fitness_real_estate").out
    assert bm("persona", "add", "-f", "-", input=shown).json()["updated"] is True


@pytest.mark.parametrize("args,code,words", [
    (["--industry", "QSR", "--role", "Ops", "-d", "x", "--handle", "qsr_operations"], 1, ["does not match", "qsr_ops"]),
    (["--industry", "QSR", "--role", "Ops"], 1, ["description"]),
    (["--role", "Ops", "-d", "x"], 1, ["industry"]),
    ([], 2, ["nothing to add"]),
    (["--file", "nope.yaml"], 1, ["no such file"]),
    (["--file", "x.yaml", "--industry", "QSR"], 2, ["either --file"]),
])
def test_add_refuses_bad_input(bm, store, args, code, words):
    assert_error(bm("persona", "add", *args), code, *words)
    assert ops_of() == []


def test_add_file_errors_name_the_problem_and_write_nothing(bm, store, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("industry: QSR\nrole: [unclosed\n", encoding="utf-8")
    assert_error(bm("persona", "add", "-f", str(bad)), 1, "neither JSON nor valid YAML", "line")
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps([{"industry": "A", "role": "B", "description": "ok"},
                                   {"industry": "C", "role": "D", "description": "ok", "budget": 3}]))
    assert_error(bm("persona", "add", "-f", str(unknown)), 1, "unknown persona field 'budget'")
    typed = tmp_path / "typed.json"
    typed.write_text(json.dumps({"industry": "A", "role": "B", "description": "ok", "typical_kpis": {"a": 1}}))
    assert_error(bm("persona", "add", "-f", str(typed)), 1, "typical_kpis must be a list of strings")
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert_error(bm("persona", "add", "-f", str(empty)), 1, "holds no persona")
    assert ops_of() == []  # the good first persona of `unknown` was not written either


# -- assign / unassign and the shared block --------------------------------------------------------------
def test_assign_attaches_the_shared_block_and_unassign_detaches_it(bm, store):
    res = bm("persona", "assign", "qsr_real_estate", "--user", "ann", "--confidence", "0.9")
    assert res.code == 0, res
    out = res.json()
    assert (out["user"], out["handle"], out["confidence"]) == ("ann", "qsr_real_estate", 0.9)
    assert out["block"] == "qsr_real_estate_service_experience"
    # the starter was stored with the assignment, and the shared block defined, in one transaction
    with open_memory() as mem:
        kinds = [op["kind"] for op in mem.log.iter_ops()]
        assert kinds == ["persona.define", "block.define", "persona.assign"]
        shared = mem.blocks.shared(user="ann")
        assert [(b["label"], b["limit"], b["scope"]) for b in shared] == [
            ("qsr_real_estate_service_experience", 8000, "persona")]
        assert mem.blocks.shared(user="bob") == []
    assert bm("persona", "show", "qsr_real_estate").json()["holders"] == ["ann"]
    # a second holder shares the same block; no second block definition
    bm("persona", "assign", "qsr_real_estate", "--user", "bob")
    assert [op["kind"] for op in ops_of("")][-1] == "persona.assign"
    assert sum(op["kind"] == "block.define" for op in ops_of("")) == 1
    with open_memory() as mem:
        mem.blocks.append("qsr_real_estate_service_experience", "QSR users start with site selection.", user="ann")
        assert "site selection" in mem.blocks.shared(user="bob")[0]["value"]
    listed = bm("persona", "list", "--user", "ann").json()
    assert [(p["handle"], p["confidence"]) for p in listed] == [("qsr_real_estate", 0.9)]

    res = bm("persona", "unassign", "qsr_real_estate", "--user", "ann")
    assert res.code == 0 and res.json() == {"user": "ann", "handle": "qsr_real_estate", "unassigned": True}
    assert bm("persona", "list", "--user", "ann").json() == []
    with open_memory() as mem:
        assert mem.blocks.shared(user="ann") == []
        assert "site selection" in mem.blocks.shared(user="bob")[0]["value"]  # stays for the other holder
    assert_error(bm("persona", "unassign", "qsr_real_estate", "--user", "ann"), 1, "does not hold")
    # assigning again re-attaches it
    bm("persona", "assign", "qsr_real_estate", "--user", "ann")
    with open_memory() as mem:
        assert len(mem.blocks.shared(user="ann")) == 1


def test_reassigning_confirms_discovered_min_confirmed_max_confidence_latest(store):
    with open_memory() as mem:
        mem.personas.assign("ann", "cpg_retail_media", 0.6, discovered_at="2024-01-01", last_confirmed="2024-02-01")
        mem.personas.assign("ann", "cpg_retail_media", 0.8, discovered_at="2024-03-01", last_confirmed="2024-01-15")
        held = mem.personas.held("ann")
        assert len(held) == 1
        assert held[0]["confidence"] == 0.8
        assert held[0]["discovered_at"].startswith("2024-01-01")
        assert held[0]["last_confirmed"].startswith("2024-02-01")
        mem.personas.assign("ann", "tobacco_consumer_insights", 0.95)
        assert [p["handle"] for p in mem.personas.held("ann")] == ["tobacco_consumer_insights", "cpg_retail_media"]


@pytest.mark.parametrize("args,code,words", [
    (["assign", "nope_persona", "--user", "ann"], 1, ["no persona 'nope_persona'"]),
    (["assign", "qsr_real_estate", "--user", "ann", "--confidence", "1.5"], 2, ["confidence must be"]),
    (["assign", "QSR", "--user", "ann"], 2, ["invalid persona handle"]),
    (["assign", "qsr_real_estate", "--user", " ann"], 2, ["invalid user"]),
    (["unassign", "qsr_real_estate", "--user", "ann"], 1, ["does not hold"]),
])
def test_assign_and_unassign_errors_write_nothing(bm, store, args, code, words):
    assert_error(bm("persona", *args), code, *words)
    assert ops_of("") == []


def test_the_agent_api(store):
    with open_memory() as mem:
        assert [p["handle"] for p in mem.personas.available()] == STARTERS
        out = mem.personas.assign("carol", "tobacco_consumer_insights", 1.0)
        assert out["persona"]["stored"] and out["persona"]["source"] == "starter"
        assert [p["handle"] for p in mem.personas.held("carol")] == ["tobacco_consumer_insights"]
        assert mem.personas.get("tobacco_consumer_insights")["users"] == 1
        assert mem.personas.available()[3]["users"] == 1
        top = mem.personas.detect("Carol studies where adult smokers buy cigarettes")[0]
        assert top["handle"] == "tobacco_consumer_insights"


# -- detect ------------------------------------------------------------------------------------------
DETECT_CASES = [
    ("I'm a real estate analyst for quick-service restaurants", "qsr_real_estate"),
    ("Looking for new drive-thru sites for our burger franchise; worried about cannibalization", "qsr_real_estate"),
    ("How did the menthol ban change visits to convenience stores and vape shops?", "tobacco_consumer_insights"),
    ("Roll up visits across my mall portfolio and flag weak tenants", "retail_asset_management"),
    ("Did our in-store media campaign at Kroger drive incremental sales for the snack brand?", "cpg_retail_media"),
]


@pytest.mark.parametrize("text,handle", DETECT_CASES)
def test_detect_ranks_the_right_starter_first(bm, store, text, handle):
    res = bm("persona", "detect", text)
    assert res.code == 0, res
    ranked = res.json()
    assert len(ranked) == 3 and ranked[0]["handle"] == handle, ranked
    assert ranked[0]["confidence"] >= 0.5 > ranked[1]["confidence"]
    assert all(0.0 <= r["confidence"] <= 1.0 for r in ranked)
    assert "keywords:" in ranked[0]["why"] and "similarity" in ranked[0]["why"]


def test_detect_reads_stdin_takes_k_and_is_unsure_about_unrelated_text(bm, store):
    ranked = bm("persona", "detect", "-", "-k", "4", input="Which tenants drive cross-shopping at this mall?").json()
    assert [r["handle"] for r in ranked][0] == "retail_asset_management" and len(ranked) == 4
    unrelated = bm("persona", "detect", "Can you write a poem about my cat?").json()
    assert max(r["confidence"] for r in unrelated) < 0.3
    assert_error(bm("persona", "detect", "   "), 1, "text is empty")
    assert_error(bm("persona", "detect", "x", "-k", "0"), 2, "k must be")
    assert ops_of("") == []


def test_detect_uses_stored_personas_too(bm, store):
    bm("persona", "add", "--industry", "Fitness", "--role", "Real Estate",
       "-d", "Gym and fitness club site selection teams", "--keyword", "gym", "--keyword", "fitness club",
       "--query", "Where should we open our next gym?")
    ranked = bm("persona", "detect", "We want to open a new gym; which fitness club locations are saturated?").json()
    assert ranked[0]["handle"] == "fitness_real_estate"


@pytest.mark.real_embedder
def test_detect_with_the_real_embedder(store):
    with open_memory() as mem:
        for text, handle in [
            ("I need to find candidate sites for a new Chick-fil-A in Dallas", "qsr_real_estate"),
            ("Where do adult smokers buy cigarettes, gas stations or convenience stores?", "tobacco_consumer_insights"),
            ("Which tenants at our shopping centers are underperforming compared with last year?",
             "retail_asset_management"),
            ("Did our snack brand's ads on Kroger's network drive more shoppers into stores?", "cpg_retail_media"),
        ]:
            ranked = mem.personas.detect(text)
            assert ranked[0]["handle"] == handle, (text, ranked)
            assert ranked[0]["confidence"] >= 0.5
        assert max(r["confidence"] for r in mem.personas.detect("what's the weather like today")) < 0.3


# -- load-starters --------------------------------------------------------------------------------------
def test_load_starters_stores_the_missing_ones_once(bm, store):
    bm("persona", "assign", "cpg_retail_media", "--user", "dan")
    res = bm("persona", "load-starters")
    assert res.code == 0, res
    assert res.json() == {"loaded": ["qsr_real_estate", "tobacco_consumer_insights", "retail_asset_management"],
                          "already_stored": ["cpg_retail_media"]}
    assert all(p["stored"] for p in bm("persona", "list").json())
    assert bm("persona", "load-starters").json()["loaded"] == []
    assert sum(op["kind"] == "persona.define" for op in ops_of()) == 4


# -- the agent's persona document ------------------------------------------------------------------------
def test_doc_set_show_and_versions(bm, store):
    assert_error(bm("persona", "doc", "show"), 1, "no persona document", "bm persona doc set")
    res = bm("persona", "doc", "set", "--name", "Pi", "-d", "Location analytics assistant",
             "--goal", "answer with data", "--norm", "never store PII in shared blocks",
             "--trait", "tone=concise", "--trait", "formality=low", "--skill", "site-selection")
    assert res.code == 0, res
    doc = res.json()
    assert doc["version"] == 1 and doc["id"] == "persona_default" and doc["traits"] == {"formality": "low", "tone": "concise"}
    # set keeps what it is not given, and takes the next version
    doc2 = bm("persona", "doc", "set", "--goal", "be brief").json()
    assert doc2["version"] == 2 and doc2["goals"] == ["be brief"] and doc2["norms"] == doc["norms"]
    assert bm("persona", "doc", "show").json() == doc2
    assert_error(bm("persona", "doc", "set", "--version", "2", "--name", "Pi"), 1, "version 2 is not above")
    assert bm("persona", "doc", "set", "--version", "7", "--name", "Pi 2").json()["version"] == 7
    # per agent
    assert_error(bm("persona", "doc", "show", "--agent", "scout"), 1, "'scout'")
    bm("persona", "doc", "set", "--agent", "scout", "--name", "Scout", "--trait", "curious")
    assert bm("persona", "doc", "show", "--agent", "scout").json()["traits"] == ["curious"]
    assert bm("persona", "doc", "show").json()["name"] == "Pi 2"
    assert_error(bm("persona", "doc", "set"), 2, "nothing to set")
    assert_error(bm("persona", "doc", "set", "--agent", "new", "--goal", "x"), 1, "needs a name")
    assert_error(bm("persona", "doc", "set", "--trait", "a=b", "--trait", "c"), 2, "--trait")


def test_doc_import_json_and_yaml_with_validation(bm, store, tmp_path):
    yml = tmp_path / "pi.yaml"
    yml.write_text("""
id: pi
name: Pi
version: 3
description: Expert location analytics assistant.
goals: [answer with data, explain methodology]
norms:
  - never put PII in a shared block
traits: {tone: concise, patience: 0.9}
skills: [site-selection, trade-area]
""", encoding="utf-8")
    res = bm("persona", "doc", "import", str(yml))
    assert res.code == 0, res
    doc = res.json()
    assert (doc["id"], doc["version"], doc["skills"]) == ("pi", 3, ["site-selection", "trade-area"])
    assert doc["traits"] == {"patience": 0.9, "tone": "concise"}
    # the same version again: refused
    assert_error(bm("persona", "doc", "import", str(yml)), 1, "version 3 is not above", "version 4")
    # JSON from stdin without a version: the next one
    data = json.dumps({"name": "Pi", "goals": ["be brief"]})
    assert bm("persona", "doc", "import", "-", input=data).json()["version"] == 4
    for body, words in [
        ('{"goals": ["x"]}', ["needs a name"]),
        ('{"name": "Pi", "mood": "happy"}', ["unknown persona document field 'mood'"]),
        ('{"name": "Pi", "version": "five"}', ["version must be a whole number"]),
        ('{"name": "Pi", "goals": "x", "norms": [1]}', ["norms must be a list"]),
        ("name: [Pi\n", ["neither JSON nor valid YAML", "line"]),
        ("[1, 2]", ["must be an object"]),
        ("", ["empty"]),
    ]:
        assert_error(bm("persona", "doc", "import", "-", input=body), 1, *words)
    assert_error(bm("persona", "doc", "import", str(tmp_path / "missing.yaml")), 1, "no such file")
    assert bm("persona", "doc", "show").json()["version"] == 4  # nothing half-written


# -- merge rules, rebuild, forget, export/import -------------------------------------------------------------
def _populate(bm) -> None:
    bm("persona", "assign", "qsr_real_estate", "--user", "ann", "-c", "0.7")
    bm("persona", "assign", "qsr_real_estate", "--user", "bob")
    bm("persona", "assign", "cpg_retail_media", "--user", "ann", "-c", "0.4")
    bm("persona", "assign", "qsr_real_estate", "--user", "ann", "-c", "0.9")
    bm("persona", "unassign", "cpg_retail_media", "--user", "ann")
    bm("persona", "add", "--industry", "QSR", "--role", "Operations", "-d", "Ops leaders")
    bm("persona", "add", "--industry", "QSR", "--role", "Operations", "-d", "Ops leaders, v2")
    bm("persona", "doc", "set", "--name", "Pi", "--goal", "help")
    bm("persona", "doc", "set", "--goal", "help more")


def test_rebuild_gives_the_same_persona_state(bm, store):
    _populate(bm)
    before = tables()
    assert len(before["persona_users"]) == 3 and len(before["persona_docs"]) == 1
    with open_memory() as mem:
        mem.admin.rebuild()
    assert tables() == before
    assert [p["handle"] for p in bm("persona", "list", "--user", "ann").json()] == ["qsr_real_estate"]


def test_persona_ops_commute(bm, store, tmp_path):
    """Replaying the persona ops in any order gives the same tables (what sync needs)."""
    from brandmind import personarules
    from brandmind.sqlstore import SQLStore

    _populate(bm)
    ops = ops_of()
    expected = tables()
    rng = random.Random(4)
    for attempt in range(5):
        order = list(reversed(ops)) if attempt == 0 else rng.sample(ops, len(ops))
        sql = SQLStore(tmp_path / f"replay{attempt}.sqlite", model="hash:384", dim=lambda: 384, create=True)
        with sql.write():
            for op in order:
                personarules.apply_op(sql, op)
            for op in order[:3]:  # applying an op twice changes nothing
                personarules.apply_op(sql, op)
        got = {t: sql.conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
               for t in ("personas", "persona_users", "persona_docs")}
        sql.close()
        assert got == expected, order


def test_forget_user_removes_their_assignments_and_redacts_their_ops(bm, store):
    _populate(bm)
    res = bm("forget", "--wipe-user", "ann", "--yes")
    assert res.code == 0, res
    assert bm("persona", "list", "--user", "ann").json() == []
    assert [p["handle"] for p in bm("persona", "list", "--user", "bob").json()] == ["qsr_real_estate"]
    assert bm("persona", "show", "qsr_real_estate").json()["holders"] == ["bob"]
    held_ops = [op for op in ops_of() if op["kind"] in ("persona.assign", "persona.unassign")]
    assert sum(op["payload"].get("redacted", False) for op in held_ops) == 4  # ann's 3 assigns + 1 unassign
    assert all(op["payload"]["user"] == "bob" for op in held_ops if not op["payload"].get("redacted"))
    with open_memory() as mem:
        assert mem.blocks.shared(user="ann") == []
        mem.admin.rebuild()
        assert mem.personas.held("ann") == []
    # a late assign stamped before the forget (another replica's) does not resurrect it
    from brandmind import personarules

    with open_memory() as mem:
        forget = next(op for op in mem.log.iter_ops() if op["kind"] == "user.forget")
        with mem.sql.write():
            personarules.apply_op(mem.sql, {"kind": "persona.assign", "hlc": [forget["hlc"][0] - 1, 0, "rX"],
                                        "payload": {"user": "ann", "handle": "qsr_real_estate", "confidence": 1.0,
                                                    "discovered_at": 1, "last_confirmed": 1}})
        assert mem.personas.held("ann") == []
    # and the user can be given a persona again afterwards
    bm("persona", "assign", "tobacco_consumer_insights", "--user", "ann")
    assert [p["handle"] for p in bm("persona", "list", "--user", "ann").json()] == ["tobacco_consumer_insights"]


def test_export_import_carries_personas_assignments_and_documents(bm, store, tmp_path, monkeypatch):
    _populate(bm)
    first = bm("export").out
    kinds = [json.loads(line)["kind"] for line in first.splitlines()]
    assert kinds.count("persona") == 3 and kinds.count("persona_user") == 2 and kinds.count("persona_doc") == 1
    dump = tmp_path / "dump.jsonl"
    dump.write_text(first, encoding="utf-8")
    use_home(monkeypatch, tmp_path / "other")
    res = bm("import", str(dump))
    assert res.code == 0, res
    counts = res.json()
    assert (counts["persona"], counts["persona_user"], counts["persona_doc"]) == (3, 2, 1)
    assert bm("export").out == first
    assert bm("persona", "list", "--user", "ann").json()[0]["confidence"] == 0.9
    assert bm("persona", "doc", "show").json()["goals"] == ["help more"]
    with open_memory() as mem:
        assert len(mem.blocks.shared(user="bob")) == 1
    # importing again skips everything
    again = bm("import", str(dump)).json()
    assert (again["persona"], again["persona_user"], again["persona_doc"]) == (0, 0, 0)


def test_import_rejects_a_bad_persona_record(bm, store, tmp_path):
    dump = tmp_path / "bad.jsonl"
    dump.write_text('{"kind":"header","format":"bm-export/1"}\n'
                    '{"kind":"persona_user","user":"ann","handle":"qsr_real_estate","confidence":3,'
                    '"discovered_at":"2024-01-01","last_confirmed":"2024-01-01"}\n', encoding="utf-8")
    assert_error(bm("import", str(dump)), 1, "line 2", "confidence")
    assert ops_of("") == []


# -- the process boundary --------------------------------------------------------------------------------
def test_cli_in_a_subprocess_json_when_piped_and_clean_errors(store):
    res = run_bm("persona", "detect", "Which c-store banners gained share after the menthol ban?")
    assert res.code == 0, res
    assert res.json()[0]["handle"] == "tobacco_consumer_insights"
    assert_error(run_bm("persona", "assign", "nope_nope", "--user", "ann"), 1, "no persona")
    res = run_bm("persona", "--help")
    assert res.code == 0 and "load-starters" in res.out and "doc" in res.out
