"""Packaging: one import root, a library that does not depend on its front ends, a fast
`bm --help`, and a wheel that installs and runs on its own."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import wheelbuild

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "brandmind"
FRONT_ENDS = ("brandmind.cli", "brandmind.sync")
HEAVY = ("numpy", "onnxruntime", "onnx", "apsw", "lmdb", "sqlite_vec", "tokenizers", "safetensors",
         "yaml", "jsonschema", "pycrdt", "boto3", "botocore", "cryptography")


# -- (a) the import boundary ------------------------------------------------------------------
def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module an import in ``source`` can bring in (relative imports resolved; for
    ``from X import a`` both X and X.a, since ``a`` may be a submodule), plus string
    arguments of ``importlib.import_module`` / ``__import__``."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                found.add(node.args[0].value)
    return found


def _crosses(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FRONT_ENDS)


def test_the_import_checker_sees_every_form():
    src = ("import brandmind.cli.app\nfrom brandmind import sync\nfrom ..cli import common\n"
           "from . import cli\nimport importlib\nimportlib.import_module('brandmind.sync.s3')\n")
    mods = imported_modules(src, "brandmind.embed.local")
    assert {"brandmind.cli.app", "brandmind.sync", "brandmind.cli", "brandmind.cli.common",
            "brandmind.embed.cli", "brandmind.sync.s3"} <= mods
    assert imported_modules("from . import clock", "brandmind", is_package=True) >= {"brandmind.clock"}
    assert not any(_crosses(m) for m in imported_modules("from .clock import now_millis\nimport numpy",
                                                         "brandmind.memory"))


def test_the_library_never_imports_its_front_ends():
    files = [p for p in LIBRARY.rglob("*.py")
             if not {"cli", "sync", "__pycache__"} & set(p.relative_to(LIBRARY).parts[:-1])]
    assert LIBRARY / "memory.py" in files and LIBRARY / "embed" / "__init__.py" in files
    bad = {}
    for path in files:
        module = _module_name(path)
        names = imported_modules(path.read_text(encoding="utf-8"), module,
                                 is_package=path.name == "__init__.py")
        crossing = sorted(n for n in names if _crosses(n))
        if crossing:
            bad[str(path.relative_to(ROOT))] = crossing
    assert bad == {}, f"library modules importing the CLI or sync layer: {bad}"


def test_editable_install_has_one_import_root(tmp_path):
    """From outside the checkout: `brandmind.cli` is the cli/ folder, and there is no `cli`."""
    code = ("import importlib.util, brandmind, brandmind.cli.app as app\n"
            "print(brandmind.__file__); print(app.__file__); print(importlib.util.find_spec('cli'))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lib, app, cli = res.stdout.split()
    if Path(lib).resolve().is_relative_to(ROOT):  # the editable install of this checkout
        assert Path(app).resolve() == ROOT / "cli" / "app.py"
    assert Path(app).resolve().parent.name in ("cli",) and cli == "None"


# -- (b) `bm --help` stays light ------------------------------------------------------------------
PROBE = """
import sys
HEAVY = {heavy!r}
def report():
    loaded = sorted(m for m in HEAVY if m in sys.modules)
    sys.stderr.write("HEAVY-LOADED:" + ",".join(loaded) + "\\n")
    sys.stderr.write("BRANDMIND-LOADED:" + ",".join(sorted(m for m in sys.modules if m.startswith("brandmind"))) + "\\n")
sys.argv = ["bm", *{argv!r}]
from brandmind.cli import app, boundary
boundary.exit_now = lambda code: (report(), sys.exit(code))  # bm ends with os._exit: no atexit
app.main()
"""


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["remember", "--help"],
                                  ["recall", "--help"], ["ingest", "--help"], ["kg", "--help"],
                                  ["config", "--help"],
                                  ["skill", "--help"], ["skill", "import", "--help"], ["fs", "--help"],
                                  ["block", "--help"], ["block", "edit", "--help"],
                                  ["persona", "--help"], ["persona", "doc", "import", "--help"],
                                  ["remote", "--help"], ["remote", "add", "s3", "--help"],
                                  ["sync", "--help"], ["sync", "now", "--help"], ["sync", "key", "--help"]])
def test_help_does_not_import_heavy_modules(argv, tmp_path):
    res = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY, argv=argv)],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**os.environ, "BM_HOME": str(tmp_path / "home")})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip(), "no help or version printed"
    lines = dict(line.split(":", 1) for line in res.stderr.splitlines()
                 if line.startswith(("HEAVY-LOADED:", "BRANDMIND-LOADED:")))
    assert lines["HEAVY-LOADED"] == "", f"`bm {' '.join(argv)}` imported {lines['HEAVY-LOADED']}"
    loaded = set(lines["BRANDMIND-LOADED"].split(","))
    assert not loaded & {"brandmind.memory", "brandmind.oplog", "brandmind.sqlstore", "brandmind.recall"}
    assert not (tmp_path / "home").exists()  # help touches no store


def test_commands_convert_plain_options_without_pydantic(store, bm):
    """typer validates options through pydantic TypeAdapters (~0.1 s a cold `bm recall`);
    cli/app.py converts plain str/int/float/bool/list options itself, with the same messages."""
    import brandmind.cli.app  # noqa: F401  (so the check below is about what the commands load)

    for name in [m for m in sys.modules if m == "pydantic" or m.startswith("pydantic.")]:
        sys.modules.pop(name)
    assert bm("remember", "Ann likes tea", "--importance", "0.7", "-m", "k=v").code == 0
    res = bm("recall", "tea", "-k", "3", "-t", "fact", "--now", "2030-01-01", "--json")
    assert res.code == 0 and res.json()[0]["text"] == "Ann likes tea"
    assert "pydantic" not in sys.modules
    bad = bm("recall", "tea", "-k", "2.5")
    assert bad.code == 2 and "Input should be a valid integer" in bad.err
    bad = bm("remember", "x", "--importance", "lots")
    assert bad.code == 2 and "Input should be a valid number" in bad.err


def test_importing_the_library_is_light():
    code = ("import sys, brandmind, brandmind.errors, brandmind.config\n"
            f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "", (res.stdout, res.stderr)


# -- (c) a built wheel installs and runs outside the checkout --------------------------------------
@pytest.mark.slow
def test_built_wheel_installs_into_a_fresh_venv_and_runs(tmp_path, built_wheel):
    wheel, how = built_wheel
    names = zipfile.ZipFile(wheel).namelist()
    assert "brandmind/cli/app.py" in names and "brandmind/memory.py" in names
    assert "brandmind/embed/hashing.py" in names and "brandmind/embed/local.py" in names
    assert "brandmind/extract/prompts/extract_v1.md" in names  # the versioned LLM prompts ship
    assert "brandmind/data/personas.json" in names  # the starter personas ship
    assert not [n for n in names if n.startswith("cli/")], "a top-level cli package leaked into the wheel"
    top = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top).decode().split() == ["brandmind"]
    # `bm` and `brandmind` are plain scripts running the thin client (the daemon when one serves
    # the store, else cli.app): no console-script launcher, whose `import re` costs every call
    for script in ("bm", "brandmind"):
        body = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(f".data/scripts/{script}"))).decode()
        assert body.startswith("#!python\n") and "from brandmind.cli.client import main" in body
        assert "import re" not in body

    assert {"brandmind/embed/model/model.safetensors", "brandmind/embed/model/tokenizer.json"} <= set(names)

    venv = tmp_path / "venv"
    py = wheelbuild.make_venv_seeing_this_one(venv)
    res = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--force-reinstall",
                          "--no-index", str(wheel)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["BM_HOME"] = str(tmp_path / "home")
    run = lambda *cmd: subprocess.run([str(c) for c in cmd], capture_output=True, text=True,  # noqa: E731
                                      timeout=60, cwd=elsewhere, env=env)
    where = run(py, "-c", "import brandmind, brandmind.cli.app as app, brandmind.embed.hashing as h; "
                          "print(brandmind.__file__); print(app.__file__); print(h.__file__)")
    assert where.returncode == 0, where.stderr
    site = (venv / "lib").resolve()
    for line in where.stdout.split():
        assert Path(line).resolve().is_relative_to(site), f"{line} is not from the venv (built {how})"
        assert not Path(line).resolve().is_relative_to(ROOT)

    helped = run(venv / "bin" / "bm", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "remember" in helped.stdout and "recall" in helped.stdout
    version = run(venv / "bin" / "brandmind", "--version")
    assert version.returncode == 0 and version.stdout.strip() == "bm 0.1.0", version
    # and the installed CLI does real work (hash embedder: no model needed)
    env["BM_EMBEDDER"] = "hash"
    assert run(venv / "bin" / "bm", "init").returncode == 0
    remembered = run(venv / "bin" / "bm", "remember", "Ann lives in Lisbon", "--json")
    assert remembered.returncode == 0, remembered.stderr
    recalled = run(venv / "bin" / "bm", "recall", "where does Ann live", "--json")
    assert recalled.returncode == 0 and "Lisbon" in recalled.stdout, recalled
    # the embedding model's weights come from the installed wheel itself
    weights = run(py, "-c", "from brandmind.embed.local import model_dir; print(model_dir())")
    assert weights.returncode == 0, weights.stderr
    assert Path(weights.stdout.strip()).resolve().is_relative_to(site), weights.stdout
