"""Skills (procedural memory): `bm skill add|list|show|remove|match|import`, the merge rule of
skill.add / skill.remove, rebuild and export/import."""
from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from conftest import assert_error, open_memory

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "budget": {"type": "number"}},
          "required": ["city"]}


def op_kinds() -> list[str]:
    with open_memory() as mem:
        return [op["kind"] for op in mem.log.iter_ops()]


def skill_md(folder: Path, name: str, description: str | None, *, extra: str = "", body: str = "Do the thing.",
             dirname: str | None = None) -> Path:
    d = folder / (dirname or name)
    d.mkdir(parents=True, exist_ok=True)
    front = f"name: {name}\n" + (f"description: {description}\n" if description is not None else "") + extra
    (d / "SKILL.md").write_text(f"---\n{front}---\n\n{body}\n", encoding="utf-8")
    return d / "SKILL.md"


# -- CLI end to end ----------------------------------------------------------------------------
def test_add_list_show_update_remove_revive(bm, store, tmp_path):
    body = tmp_path / "steps.md"
    body.write_text("# Steps\n\n1. Pull foot traffic\n2. Check leases\n", encoding="utf-8")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA), encoding="utf-8")
    res = bm("skill", "add", "site-selection", "--description", "Pick restaurant sites: traffic, leases",
             "--schema", str(schema), "--example", "find a drive-thru site in Austin",
             "--example", '{"city": "Austin"}', "--tag", "real-estate", "--tag", "qsr",
             "--version", "1.0.0", "--body", str(body))
    assert res.code == 0, res
    assert res.json() == {"name": "site-selection", "version": "1.0.0", "changed": True}
    res = bm("skill", "add", "market-research", "-d", "Size a market and its competitors",
             "--schema", '{"type": "object", "properties": {"market": {"type": "string"}}}',
             "--body", "-", input="Look at the numbers.\n")
    assert res.code == 0, res

    listed = bm("skill", "list").json()
    assert [s["name"] for s in listed] == ["market-research", "site-selection"]
    assert listed[0]["version"] == "0.1.0"  # the default of a new skill
    shown = bm("skill", "show", "site-selection").json()
    assert shown["input_schema"] == SCHEMA and shown["tags"] == ["real-estate", "qsr"]
    assert shown["examples"] == ["find a drive-thru site in Austin", {"city": "Austin"}]
    assert shown["body"].startswith("# Steps") and "Check leases" in shown["body"]
    assert bm("skill", "show", "market-research").json()["body"] == "Look at the numbers.\n"
    assert [s["name"] for s in bm("skill", "list", "--tag", "qsr").json()] == ["site-selection"]

    # an update replaces only the fields given
    res = bm("skill", "add", "site-selection", "--version", "1.1.0", "--tag", "sites")
    assert res.json()["changed"] is True
    shown = bm("skill", "show", "site-selection").json()
    assert shown["version"] == "1.1.0" and shown["tags"] == ["sites"] and shown["input_schema"] == SCHEMA
    assert shown["description"] == "Pick restaurant sites: traffic, leases"
    # the same again stores nothing
    before = len(op_kinds())
    assert bm("skill", "add", "site-selection", "--tag", "sites").json()["changed"] is False
    assert len(op_kinds()) == before
    # the version never goes backwards
    assert_error(bm("skill", "add", "site-selection", "--version", "1.0.9"), 1, "1.1.0", "backwards")
    assert bm("skill", "show", "site-selection").json()["version"] == "1.1.0"

    res = bm("skill", "remove", "site-selection")
    assert res.code == 0 and res.json() == {"removed": "site-selection"}
    assert [s["name"] for s in bm("skill", "list").json()] == ["market-research"]
    assert_error(bm("skill", "show", "site-selection"), 1, "no skill")
    assert_error(bm("skill", "remove", "site-selection"), 1, "no skill")
    # a later add revives it, at any version, and needs a description again
    assert_error(bm("skill", "add", "site-selection", "--version", "0.5.0"), 1, "description")
    assert bm("skill", "add", "site-selection", "-d", "Pick sites again", "--version", "0.5.0").code == 0
    assert bm("skill", "show", "site-selection").json()["version"] == "0.5.0"
    assert op_kinds().count("skill.remove") == 1


@pytest.mark.parametrize("args, words", [
    (["Bad Name", "-d", "x"], ["invalid skill name"]),
    (["UPPER", "-d", "x"], ["invalid skill name"]),
    (["ok-name"], ["needs a description"]),
    (["ok-name", "-d", "   "], ["description is empty"]),
    (["ok-name", "-d", "x", "--version", "one"], ["invalid skill version"]),
    (["ok-name", "-d", "x", "--schema", "[1, 2]"], ["must be a JSON object", "got list"]),
    (["ok-name", "-d", "x", "--schema", '{"type": "string"}'], ["must describe a JSON object"]),
    (["ok-name", "-d", "x", "--schema", '{"type": "object", "required": ["a"], "properties": {"b": {}}}'],
     ["requires a"]),
    (["ok-name", "-d", "x", "--schema", '{"type": "object", "properties": []}'], ["properties"]),
    (["ok-name", "-d", "x", "--schema", "{not json"], ["not valid JSON"]),
    (["ok-name", "-d", "x", "--schema", "missing.json"], ["no such schema file"]),
    (["ok-name", "-d", "x", "--body", "missing.md"], ["no such body file"]),
    (["ok-name", "-d", "x" * 1025], ["over the limit"]),
])
def test_add_refuses_bad_input(bm, store, args, words):
    usage = words[0] in ("invalid skill name", "invalid skill version")  # a bad NAME or --version: exit 2
    assert_error(bm("skill", "add", *args), 2 if usage else 1, *words)
    assert bm("skill", "list").json() == []


def test_schema_is_checked_against_the_meta_schema_when_jsonschema_is_installed(bm, store):
    pytest.importorskip("jsonschema")
    bad = '{"type": "object", "properties": {"city": {"type": "strin"}}}'
    assert_error(bm("skill", "add", "x", "-d", "x", "--schema", bad), 1, "not a valid JSON Schema", "properties/city")


def test_no_store_and_usage_errors(bm, tmp_path):
    res = bm("skill", "list")  # a listing on a missing store: empty, with a note
    assert res.code == 0 and res.json() == [] and "no bm store" in res.err, res
    assert_error(bm("skill", "show", "x"), 1, "no bm store")
    assert bm("init").code == 0
    assert_error(bm("skill", "match", "x", "-k", "0"), 2, "k must be")
    assert bm("skill", "match", "anything").json() == []  # no skills yet


# -- match ---------------------------------------------------------------------------------------
SKILLS = {
    "site-selection": ("Pick real estate sites for new restaurants: foot traffic, demographics, leases",
                       ["real-estate", "qsr"]),
    "market-research": ("Size a market: competitors, trends and market share", ["research"]),
    "retail-media-plan": ("Plan a retail media campaign: audiences, budget, ad placements on retailer sites",
                          ["advertising", "cpg"]),
    "consumer-survey": ("Design and analyse a consumer survey about smoking habits and brand perception",
                        ["tobacco", "insights"]),
    "portfolio-review": ("Review a retail asset portfolio: occupancy, rents, tenant mix", ["asset-management"]),
}


def add_skills(bm) -> None:
    for name, (desc, tags) in SKILLS.items():
        args = ["skill", "add", name, "-d", desc]
        for t in tags:
            args += ["--tag", t]
        assert bm(*args).code == 0


@pytest.mark.parametrize("query, best", [
    ("where should we open the next drive-thru restaurant? check leases", "site-selection"),
    ("budget the ad placements of our retail media campaign", "retail-media-plan"),
    ("survey smokers on brand perception", "consumer-survey"),
    ("how big is this market and who are the competitors", "market-research"),
    ("tenant mix and occupancy of the mall portfolio", "portfolio-review"),
])
def test_match_ranks_the_right_skill(bm, store, query, best):
    add_skills(bm)
    res = bm("skill", "match", query, "-k", "3")
    assert res.code == 0, res
    items = res.json()
    assert len(items) == 3 and items[0]["name"] == best, items
    assert [i["score"] for i in items] == sorted((i["score"] for i in items), reverse=True)
    top = items[0]
    assert set(top["signals"]) >= {"vector"} and "cosine" in top["signals"]["vector"]
    assert "keyword" in top["signals"] and top["signals"]["keyword"]["rank"] == 1
    assert top["score"] == pytest.approx(sum(s["score"] for s in top["signals"].values()), abs=1e-3)


def test_match_uses_keywords_in_body_and_examples_and_caches_vectors(bm, store):
    add_skills(bm)
    bm("skill", "add", "market-research", "-e", "estimate the TAM of oat milk")
    res = bm("skill", "match", "oat milk TAM", "-k", "1").json()
    assert res[0]["name"] == "market-research"
    with open_memory() as mem:
        from brandmind.skills import vector_text

        for s in mem.skills.list(full=True):  # every skill's vector is in the LMDB cache
            assert mem.log.cached_vector(mem.sql.model, vector_text(s)) is not None


@pytest.mark.real_embedder
def test_match_with_the_real_model_understands_paraphrases(bm, store):
    add_skills(bm)
    items = bm("skill", "match", "which storefront location gets the most passers-by", "-k", "2").json()
    assert items[0]["name"] == "site-selection", items
    items = bm("skill", "match", "questionnaire for cigarette users", "-k", "2").json()
    assert items[0]["name"] == "consumer-survey", items


# -- SKILL.md import ------------------------------------------------------------------------------
def test_import_a_folder_of_skills(bm, store, tmp_path):
    root = tmp_path / "skills"
    skill_md(root, "pdf-tools", "Extract text and tables from PDF files",
             extra="version: 1.2\ntags: [pdf, documents]\nlicense: MIT\nmetadata:\n  author: ann\n",
             body="# PDF\n\nUse pdfplumber.")
    skill_md(root, "brand-voice", "Write in the brand's voice", extra="examples:\n  - a tweet\n  - a tagline\n"
             "input_schema:\n  type: object\n  properties:\n    topic: {type: string}\n")
    skill_md(root / ".hidden", "ignored", "in a hidden folder")
    res = bm("skill", "import", str(root))
    assert res.code == 0, res
    report = res.json()
    assert sorted(report["added"]) == ["brand-voice", "pdf-tools"] and report["bad"] == []
    pdf = bm("skill", "show", "pdf-tools").json()
    assert pdf["version"] == "1.2" and pdf["tags"] == ["pdf", "documents"]
    assert pdf["meta"] == {"license": "MIT", "metadata": {"author": "ann"}}
    assert pdf["body"] == "# PDF\n\nUse pdfplumber." and pdf["source"] == str((root / "pdf-tools" / "SKILL.md").resolve())
    voice = bm("skill", "show", "brand-voice").json()
    assert voice["examples"] == ["a tweet", "a tagline"] and voice["input_schema"]["properties"] == {"topic": {"type": "string"}}

    # re-import of unchanged skills: a no-op (no op appended)
    before = len(op_kinds())
    report = bm("skill", "import", str(root)).json()
    assert sorted(report["unchanged"]) == ["brand-voice", "pdf-tools"] and not report["added"] and not report["updated"]
    assert len(op_kinds()) == before
    # one changed: only it is stored again
    skill_md(root, "pdf-tools", "Extract text and tables from PDF files", extra="version: 1.10\n", body="New body.")
    report = bm("skill", "import", str(root)).json()
    assert report["updated"] == ["pdf-tools"] and report["unchanged"] == ["brand-voice"]
    assert len(op_kinds()) == before + 1
    pdf = bm("skill", "show", "pdf-tools").json()
    assert pdf["body"] == "New body." and pdf["tags"] == []  # the file is the whole skill
    assert pdf["version"] == "1.10"  # as written (YAML alone reads the number 1.1)

    # a single skill folder (SKILL.md in the folder itself)
    one = skill_md(tmp_path / "single", "solo", "A skill on its own", dirname=".").parent
    assert bm("skill", "import", str(one)).json()["added"] == ["solo"]


def test_import_with_bad_files_is_all_or_nothing(bm, store, tmp_path):
    root = tmp_path / "skills"
    skill_md(root, "good-one", "Fine")
    no_desc = skill_md(root, "no-desc", None)
    bad_name = skill_md(root, "Bad Name", "bad name", dirname="bad-name")
    bad_yaml = root / "bad-yaml" / "SKILL.md"
    bad_yaml.parent.mkdir()
    bad_yaml.write_text("---\nname: x\ndescription: [unclosed\n---\nbody\n", encoding="utf-8")
    no_front = root / "no-front" / "SKILL.md"
    no_front.parent.mkdir()
    no_front.write_text("# Just markdown\n", encoding="utf-8")
    latin = root / "latin" / "SKILL.md"
    latin.parent.mkdir()
    latin.write_bytes(b"---\nname: caf\xe9\n---\n")
    older = skill_md(root, "versioned", "Has a version", extra="version: 0.9.0\n")
    bm("skill", "add", "versioned", "-d", "Has a version", "--version", "1.0.0")
    before = len(op_kinds())

    line = assert_error(bm("skill", "import", str(root)), 1, "6 bad skill file(s)", "nothing imported", "--skip-bad")
    for path, reason in ((no_desc, "no description"), (bad_name, "invalid skill name"),
                         (bad_yaml, "not valid YAML"), (no_front, "no YAML front matter"),
                         (latin, "not valid UTF-8"), (older, "backwards")):
        assert f"{path}: " in line and reason in line, (path, reason, line)
    assert len(op_kinds()) == before
    assert [s["name"] for s in bm("skill", "list").json()] == ["versioned"]

    res = bm("skill", "import", str(root), "--skip-bad")
    assert res.code == 0, res
    report = res.json()
    assert report["added"] == ["good-one"] and len(report["bad"]) == 6
    assert {b["path"] for b in report["bad"]} == {str(p) for p in (no_desc, bad_name, bad_yaml, no_front, latin, older)}
    assert all(b["reason"] for b in report["bad"])
    assert [s["name"] for s in bm("skill", "list").json()] == ["good-one", "versioned"]


def test_import_refuses_missing_folders_and_duplicate_names(bm, store, tmp_path):
    assert_error(bm("skill", "import", str(tmp_path / "nope")), 1, "no such folder")
    (tmp_path / "empty").mkdir()
    assert_error(bm("skill", "import", str(tmp_path / "empty")), 1, "no SKILL.md")
    skill_md(tmp_path / "dups", "same", "first", dirname="a")
    skill_md(tmp_path / "dups", "same", "second", dirname="b")
    assert_error(bm("skill", "import", str(tmp_path / "dups")), 1, "also used by")


# -- merge rule, rebuild, export -------------------------------------------------------------------
def test_merge_rule_commutes_and_rebuild_reproduces_skills(store):
    """Every order of the same skill ops gives the same visible skills (remove wins over
    earlier adds, a later add revives, the higher version wins), and rebuild agrees."""
    from brandmind.projection import apply_sql_side
    from brandmind.sqlstore import SQLStore

    with open_memory() as mem:
        mem.skills.add("a", description="first", version="1.0.0")
        mem.skills.add("a", description="second", version="2.0.0")
        mem.skills.remove("a")
        mem.skills.add("a", description="revived", version="0.1.0")
        mem.skills.add("b", description="bee", version="1.0.0")
        mem.skills.remove("b")
        mem.skills.add("c", description="sea", tags=["x"])
        mem.skills.add("c", description="sea two", version="0.2.0")
        # a concurrent replica's older-HLC add of a higher version wins; a lower one loses
        ops = [op for op in mem.log.iter_ops() if op["kind"].startswith("skill.")]
        early = ops[0]["hlc"]
        ops.append({"id": "other:1", "hlc": [early[0], early[1] + 1, "zz"], "kind": "skill.add",
                    "payload": {**ops[-1]["payload"], "description": "sea from elsewhere", "version": "0.3.0"}})
        ops.append({"id": "other:2", "hlc": [early[0], early[1] + 2, "zz"], "kind": "skill.add",
                    "payload": {**ops[-2]["payload"], "description": "sea older", "version": "0.0.1"}})
        expected = {"a": ("revived", "0.1.0"), "c": ("sea from elsewhere", "0.3.0")}
        dim, model = mem.sql.dim, mem.sql.model
        home = mem.paths.data_dir

        def visible(sql) -> dict:
            return {r[0]: (r[1], r[2]) for r in sql.conn.execute("SELECT name, description, version FROM skills")}

        orders = [ops, ops[::-1]] + [random.Random(seed).sample(ops, len(ops)) for seed in range(20)]
        for i, order in enumerate(orders):
            sql = SQLStore(home / f"perm{i}.sqlite", model=model, dim=lambda: dim, create=True, check_model=False)
            with sql.write():
                for op in order:
                    apply_sql_side(sql, op, lambda text: b"")
                    apply_sql_side(sql, op, lambda text: b"")  # applying twice changes nothing
            assert visible(sql) == expected, i
            sql.close()

        before = mem.skills.list(full=True)
        assert [(s["name"], s["description"]) for s in before] == [("a", "revived"), ("c", "sea two")]
        mem.admin.rebuild()
        assert mem.skills.list(full=True) == before
    # the index deleted outright: reopening refills it from the log
    for f in home.glob("memory.sqlite*"):
        f.unlink()
    with open_memory() as mem:
        assert mem.skills.list(full=True) == before


def test_export_import_carries_skills(bm, store, tmp_path, monkeypatch):
    from conftest import use_home

    add_skills(bm)
    bm("skill", "add", "market-research", "--schema", json.dumps(SCHEMA), "-e", "x", "--body", "-", input="Body.")
    bm("skill", "remove", "portfolio-review")
    out = bm("export")
    assert out.code == 0, out
    records = [json.loads(line) for line in out.out.splitlines()]
    skills = [r for r in records if r["kind"] == "skill"]
    assert [s["name"] for s in skills] == sorted(set(SKILLS) - {"portfolio-review"})
    dump = tmp_path / "dump.jsonl"
    dump.write_text(out.out, encoding="utf-8")

    use_home(monkeypatch, tmp_path / "other")
    res = bm("import", str(dump))
    assert res.code == 0 and res.json()["skill"] == 4, res
    assert bm("export").out == out.out
    assert bm("import", str(dump)).json()["skipped"] >= 4  # already there
    assert bm("skill", "show", "market-research").json()["input_schema"] == SCHEMA


def test_api_is_thin_and_complete(store, tmp_path):
    with open_memory() as mem:
        item = mem.skills.add("x-skill", description="Does x", tags=["t"], examples=["do x"], version="2.0.0-beta.1",
                             input_schema={"type": "object"}, body="steps", meta={"owner": "ann"})
        assert item["changed"] and item["version"] == "2.0.0-beta.1"
        assert mem.skills.add("x-skill", version="2.0.0")["version"] == "2.0.0"  # a release is above its beta
        with pytest.raises(Exception, match="backwards"):
            mem.skills.add("x-skill", version="2.0.0-rc.1")
        assert mem.skills.get("x-skill")["meta"] == {"owner": "ann"}
        assert [s["name"] for s in mem.skills.list()] == ["x-skill"]
        assert mem.skills.match("do x", k=1)[0]["name"] == "x-skill"
        skill_md(tmp_path / "s", "y-skill", "Does y")
        assert mem.skills.import_dir(tmp_path / "s")["added"] == ["y-skill"]
        assert mem.skills.remove("y-skill")["name"] == "y-skill"
        assert [s["name"] for s in mem.skills.list()] == ["x-skill"]


def test_version_order():
    from brandmind.skills import version_key

    ordered = ["0.0.1", "0.1", "0.1.1", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta.2",
               "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.0.1", "1.2", "10.0.0"]
    for a, b in itertools.pairwise(ordered):
        assert version_key(a) < version_key(b), (a, b)
    assert version_key("1.0") == version_key("1.0.0") == version_key("1.0.0+build.5")
