"""The agent tool set (cli/tools.py): `bm tools export` in each format, the schemas valid
JSON Schema that accept what `call` accepts, and `call` failing only with BMErrors."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import jsonschema
import pytest

from conftest import assert_error

from brandmind.cli import tools
from brandmind.errors import BMError, UsageError

NAMES = ["remember", "recall", "get", "context", "forget", "block_get", "block_list", "block_set", "block_append",
         "kg_link", "kg_neighbors", "kg_hubs", "kg_clusters", "skill_match", "recall_memory", "create_note", "create_link",
         "get_linked_notes"]


def exported(bm, fmt: str) -> list[dict]:
    res = bm("tools", "export", "--format", fmt)
    assert res.code == 0, res
    return res.json()


def test_the_tool_set_is_the_issues_and_follows_the_cli():
    assert [t.name for t in tools.TOOLS] == NAMES
    params = {t.name: list(t.params) for t in tools.TOOLS}
    assert params["remember"][:4] == ["text", "user", "agent", "type"]
    assert params["recall"] == ["query", "user", "agent", "k"]
    assert params["recall_memory"] == params["recall"] and params["create_note"] == params["remember"]
    for alias, of in (("recall_memory", "recall"), ("create_note", "remember")):
        assert f"Alias of {of}" in tools.BY_NAME[alias].description
    # the enums spelt in tools.py are the library's
    from brandmind.facts import LINK_TYPES
    from brandmind.validate import MEMORY_TYPES

    assert tools.MEMORY_TYPES == MEMORY_TYPES and tools.LINK_TYPES == LINK_TYPES


def test_annotations_say_what_each_tool_does_to_the_store():
    reads = {t.name for t in tools.TOOLS if t.read_only}
    assert reads == {"recall", "recall_memory", "get", "context", "block_get", "block_list", "kg_neighbors",
                     "skill_match", "get_linked_notes", "kg_hubs", "kg_clusters"}
    assert {t.name for t in tools.TOOLS if t.destructive} == {"forget", "block_set"}
    assert not any(t.read_only and t.destructive for t in tools.TOOLS)


def test_each_format_is_valid_and_names_the_same_tools(bm):
    mcp, openai, anthropic = (exported(bm, f) for f in ("mcp", "openai", "anthropic"))
    for fmt, items, schema_of in (("mcp", mcp, lambda t: t["inputSchema"]),
                                  ("openai", openai, lambda t: t["function"]["parameters"]),
                                  ("anthropic", anthropic, lambda t: t["input_schema"])):
        assert len(items) == len(NAMES), fmt
        for item, name in zip(items, NAMES):
            schema = schema_of(item)
            jsonschema.Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object" and schema["additionalProperties"] is False
            assert set(schema["required"]) <= set(schema["properties"])
            assert schema == tools.BY_NAME[name].input_schema, (fmt, name)
    assert [t["function"]["name"] for t in openai] == NAMES and all(t["type"] == "function" for t in openai)
    assert all(set(t) == {"name", "description", "input_schema"} for t in anthropic)
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", t["name"]) for t in anthropic)
    assert all(len(t["description"]) > 40 for t in anthropic)


def test_the_mcp_export_is_the_sdks_tool_type(bm):
    import mcp_types as types
    for item in exported(bm, "mcp"):
        tool = types.Tool.model_validate(item)
        assert tool.annotations.read_only_hint is tools.BY_NAME[tool.name].read_only
        assert tool.annotations.destructive_hint is tools.BY_NAME[tool.name].destructive
        assert tool.annotations.idempotent_hint is tools.BY_NAME[tool.name].idempotent
        assert tool.model_dump(by_alias=True, exclude_none=True, mode="json") == item


def test_a_bad_format_is_a_usage_error(bm):
    assert_error(bm("tools", "export", "--format", "xml"), 2, "unknown format 'xml'", "openai")


def test_importing_the_tool_set_loads_nothing_heavy():
    code = ("import sys; import brandmind.cli.tools as t; t.export('openai'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'numpy', 'apsw', 'lmdb', 'onnxruntime', 'mcp', 'typer', 'rich', 'pydantic'} "
            "or m.startswith('brandmind.') and m not in ('brandmind.cli', 'brandmind.cli.tools', 'brandmind.errors')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


# -- call: the arguments checked against the schema, errors only as BMError --------------------------
GOOD = {"remember": {"text": "Ann likes tea", "user": "ann", "agent": "coach", "type": "preference", "importance": 0.7},
        "recall": {"query": "tea", "user": "ann", "k": 3}, "context": {"query": "tea", "budget": 200},
        "block_set": {"label": "human", "text": ""}, "kg_link": {"src": "Ann", "predicate": "likes", "dst": "tea", "weight": 1},
        "kg_neighbors": {"ref": "Ann", "radius": 3}, "create_link": {"src": "m_a", "dst": "m_b", "type": "supports"}}
BAD = [("recall", {}), ("recall", {"query": 3}), ("recall", {"query": "x", "k": 0}), ("recall", {"query": "x", "k": 1.5}),
       ("recall", {"query": "x", "k": True}), ("recall", {"query": "x", "extra": 1}), ("recall", {"query": ""}),
       ("remember", {"text": "x", "type": "gossip"}), ("remember", {"text": "x", "importance": 2}),
       ("context", {"query": "x", "budget": "lots"}), ("kg_neighbors", {"ref": "Ann", "radius": 4}),
       ("create_link", {"src": "m_a", "dst": "m_b", "type": "hates"}), ("block_set", {"label": "human"}),
       ("get", {"id": ["m_a"]}), ("forget", {"id": {"m": 1}})]


@pytest.mark.parametrize("name,args", list(GOOD.items()))
def test_the_schema_and_the_check_accept_the_same_good_arguments(name, args):
    jsonschema.validate(args, tools.BY_NAME[name].input_schema)
    assert tools.check(tools.BY_NAME[name], args) == args


@pytest.mark.parametrize("name,args", BAD)
def test_the_schema_and_the_check_refuse_the_same_bad_arguments(name, args):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(args, tools.BY_NAME[name].input_schema)
    with pytest.raises(UsageError) as err:
        tools.call(None, name, args)  # refused before the store is touched
    assert err.value.message.startswith(f"{name}: ") and err.value.hint, err.value.message


def test_unknown_tools_and_non_object_arguments_are_usage_errors():
    with pytest.raises(UsageError, match=r"unknown tool 'recal' \(did you mean recall\?\)"):
        tools.call(None, "recal", {})
    with pytest.raises(UsageError, match="unknown tool"):
        tools.call(None, None, {})
    with pytest.raises(UsageError, match="must be a JSON object, got an array"):
        tools.call(None, "recall", ["tea"])


WEIRD = [None, 0, -1, 10**30, 1.5, math.nan, math.inf, True, "", " ", "x", "\x00", "m_nope", "b_nope", "n_nope",
         "ümlaut ✓", "a" * 5000, [], {}, ["x"], {"a": 1}]


def test_no_argument_value_gets_anything_but_a_bm_error(store):
    """Every tool, every argument given each weird value (the others good): a result or a
    BMError, never another exception (no traceback can reach a client)."""
    from brandmind.memory import Memory

    with Memory() as mem:
        seed = tools.call(mem, "remember", {"text": "Ann likes green tea", "user": "ann"})["id"]
        base = {"id": seed, "ref": "Ann", "src": seed, "dst": seed, "query": "tea", "text": "tea", "label": "human",
                "predicate": "likes"}
        for tool in tools.TOOLS:
            for key in tool.params:
                for value in WEIRD:
                    args = {k: base[k] for k in tool.required}
                    args[key] = value
                    try:
                        tools.call(mem, tool.name, args)
                    except BMError:
                        pass
