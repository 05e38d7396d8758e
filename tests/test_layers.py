"""The layers of the library (brandmind/__init__.py draws them), enforced on the source.

An AST pass (tests/archcheck.py; function-level imports count, ``if TYPE_CHECKING:`` blocks
do not) checks that no module imports one above it, that the library has no import cycle,
that no module reads another module's private names, that only the storage layer issues SQL
or touches LMDB, that op kinds are spelt only in ops.py, and that files and functions stay
short.  Each check prints what it found, so a failure names the line to fix.
"""
from __future__ import annotations

import ast
import re

import archcheck
import pytest

# The layers, lowest first; inside a layer, a module may import only those before it.
LAYERS: list[tuple[str, list[str]]] = [
    ("foundation", ["errors", "lazyre", "clock", "logvalues", "validate", "config", "timewords", "questions", "notices", "crypto", "s3session", "embed.base", "embed.hashing",
                    "embed.minilm", "embed.preload", "embed.local_build", "embed.local", "embed.ollama", "embed.openai_compat", "embed.hfapi", "embed.chain", "embed", "tokens",
                    "ingest", "bulk", "piiterms", "pii", "extract.base", "extract", "extract.predicates", "extract.dates",
                    "extract.patterns", "extract.phrases", "extract.makers", "extract.verbs",
                    "extract.clauses", "extract.rules", "extract.openai_chat", "extract.llm", "extract.choose", "lmdbscrub"]),
    ("storage", ["logtxn", "oplog", "storage", "storage.keywords", "storage.kwindex", "storage.indexfile", "storage.scan",
                 "storage.recallsql",
                 "storage.expiry", "storage.recallindex", "storage.graph", "storage.aliases", "storage.*", "sqlstore"]),
    ("rules", ["ops", "merge", "opcheck", "blockrules", "personarules", "skillrules", "logforget",
               "held", "converge", "applying", "projection", "replication"]),
    ("store", ["store"]),
    ("domain", ["beads", "scoring", "recall", "query", "factrules", "facts", "graphviews", "graph", "blocks", "personas", "skills",
                "workspace_files", "workspace_bucket", "workspace_s3", "workspace_index", "workspace", "privacy", "context", "consolidate",
                "importers",  # (bm import --from: reads other tools' exports; the facade stores them)
                "forgetting", "expiry", "exchange", "extract.run", "ingesting", "vectorlag", "backlog", "admin"]),
    ("facade", ["memory", ""]),
]
HEAVY = {"numpy", "apsw", "lmdb", "onnxruntime", "onnx", "pycrdt", "boto3", "botocore", "sqlite_vec",
         "redis", "falkordb", "graphiti_core", "zep_cloud", "mcp", "httpx", "ollama", "tokenizers",
         "huggingface_hub", "hypothesis", "cryptography", "networkx"}

HEAVY |= {"openai"}  # the OpenAI-compatible providers (embed/openai_compat.py, extract/openai_chat.py)


def rank_of(module: str) -> tuple[int, int] | None:
    """(layer, position) of a library module, None if it is placed nowhere."""
    name = module.removeprefix("brandmind").removeprefix(".")
    pos = 0
    for layer, (_, members) in enumerate(LAYERS):
        for member in members:
            pattern = re.escape(member).replace(r"\*", ".*")
            if re.fullmatch(pattern, name):
                return layer, pos
            pos += 1
    return None


@pytest.fixture(scope="module")
def mods():
    return archcheck.analyse()


def library(mods):
    return {n: m for n, m in mods.items() if archcheck.library(n)}


def test_every_library_module_has_a_place_in_the_layers(mods):
    unplaced = sorted(n for n in library(mods) if rank_of(n) is None)
    assert not unplaced, f"place these modules in LAYERS (tests/test_layers.py): {unplaced}"


def test_no_module_imports_one_above_it(mods):
    bad = []
    for name, mod in sorted(library(mods).items()):
        mine = rank_of(name)
        for target in sorted(mod.imports):
            if not archcheck.library(target) or mine is None:
                continue
            theirs = rank_of(target)
            if theirs is not None and theirs >= mine and target != name:
                if name == "brandmind.embed" or (target.startswith(name + ".")):
                    continue  # a package re-exporting its own submodules
                bad.append(f"{name} ({LAYERS[mine[0]][0]}) imports {target} ({LAYERS[theirs[0]][0]})")
    print("\n".join(bad))
    assert not bad


def test_the_library_has_no_import_cycle(mods):
    print("import graph (library):")
    for name, mod in sorted(library(mods).items()):
        print(f"  {name} -> {' '.join(sorted(i for i in mod.imports if archcheck.library(i)))}")
    found = archcheck.cycles(mods)
    assert not found, f"import cycles: {found}"


def test_function_level_imports_are_only_for_heavy_third_party_modules(mods):
    bad = []
    for name, mod in sorted(mods.items()):
        for node in archcheck._walk(mod.tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.level:
                    target = archcheck._resolve(name, mod.path, inner)
                elif isinstance(inner, ast.ImportFrom):
                    target = inner.module or ""
                elif isinstance(inner, ast.Import):
                    target = inner.names[0].name
                else:
                    continue
                top = target.split(".")[0]
                # the CLI and sync defer the library and each other so `bm --help` stays fast
                if top == "brandmind" and not archcheck.library(name):
                    continue
                if name == "brandmind" and node.name == "__getattr__":
                    continue  # the package defers Memory: `import brandmind` (and `bm --help`) stay fast
                if name == "brandmind.memory" and any("# lazy:" in mod.lines[n - 1] for n in (
                        inner.lineno, inner.lineno - 1, inner.lineno - 2)):
                    continue  # the facade loads its sub-APIs on first use (a cold `bm recall` stays fast)
                if top == "brandmind" and archcheck.library(name):
                    bad.append(f"{name}:{inner.lineno} imports {target} inside a function")
    print("\n".join(bad))
    assert not bad


def test_no_module_reads_another_modules_private_names(mods):
    found = {n: m.private_reads for n, m in mods.items() if m.private_reads}
    for name, reads in sorted(found.items()):
        print(name, reads)
    assert not found


def test_only_the_storage_layer_issues_sql_or_touches_lmdb(mods):
    storage = {n for n in mods if rank_of(n) is not None and LAYERS[rank_of(n)[0]][0] == "storage"}
    sql = {n: len(m.sql) for n, m in mods.items() if m.sql and n not in storage}
    lmdb = {n: len(m.lmdb) for n, m in mods.items() if m.lmdb
            and n not in {"brandmind.oplog", "brandmind.lmdbscrub"}}
    print("SQL outside storage:", sql, "LMDB outside oplog:", lmdb)
    assert not sql and not lmdb


def test_op_kinds_are_spelt_only_in_the_ops_module(mods):
    from brandmind.ops import Kind

    kinds = {k.value for k in Kind}
    bad = []
    for name, mod in sorted(mods.items()):
        if name == "brandmind.ops":
            continue
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in kinds:
                bad.append(f"{name}:{node.lineno} {node.value!r}")
    print("\n".join(bad))
    assert not bad


def test_files_and_functions_stay_short(mods):
    big = {n: len(m.lines) for n, m in mods.items() if len(m.lines) > archcheck.MAX_FILE}
    long = {n: m.long_funcs for n, m in mods.items() if m.long_funcs}
    print("files over", archcheck.MAX_FILE, "lines:", big)
    print("functions over", archcheck.MAX_FUNC, "lines:", long)
    assert not big and not long


def test_the_checks_catch_what_they_claim(tmp_path, monkeypatch):
    """The analyser itself: an upward import inside a function, a private read, SQL and a
    cycle in a throwaway package are all found."""
    pkg = tmp_path / "brandmind"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "clock.py").write_text("def f():\n    from .memory import _x\n    return _x\n")
    (pkg / "memory.py").write_text("from . import clock\n_x = 1\ndef g(c):\n    return c.execute('select 1')\n")
    monkeypatch.setattr(archcheck, "PACKAGES", {"brandmind": pkg})
    m = archcheck.analyse()
    assert "brandmind.memory" in m["brandmind.clock"].imports
    assert m["brandmind.clock"].private_reads and m["brandmind.memory"].sql
    assert archcheck.cycles(m) == [["brandmind.clock", "brandmind.memory"]]
