"""An AST pass over brandmind/, sync/ and cli/: the numbers issue 13 is judged by.

Run ``python tests/archcheck.py`` for the report; tests/test_layers.py asserts on it.
Counted the way the issue says: imports inside functions count, ``if TYPE_CHECKING:``
blocks do not.

- cycles: strongly connected components of more than one module in the import graph of
  the library (``brandmind`` without ``cli``/``sync``);
- private reads: ``obj._x`` where ``obj`` is not ``self``/``cls`` and ``_x`` is not defined
  in the same module, and ``from m import _x`` of a project module;
- SQL: calls of ``execute``/``executemany``/``executescript`` (and ``sql.rows``) and string literals
  that start with an SQL statement (``SELECT ...``, f-strings included), per module; LMDB: modules that open transactions or sub-databases
  (``.begin(``/``.open_db(``) or build keys with the LMDB key helpers;
- sizes: files over 600 lines, functions over 60 lines without a ``# long:`` comment on
  the ``def`` line or the line above it.
"""
from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"brandmind": ROOT / "brandmind", "brandmind.sync": ROOT / "sync",
            "brandmind.cli": ROOT / "cli"}
SQL_CALLS = {"execute", "executemany", "executescript", "rows"}
SQL_TEXT = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|PRAGMA|REPLACE|DROP|ALTER)\s")
LMDB_CALLS = {"begin", "open_db"}
MAX_FILE = 600
MAX_FUNC = 60


def modules() -> dict[str, Path]:
    out = {}
    for pkg, base in PACKAGES.items():
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([pkg, *parts])] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _walk(tree: ast.AST):
    """ast.walk without the bodies of ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def _resolve(mod: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    parts = pkg.split(".")
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


# underscore names the standard library documents as public
STDLIB_PUBLIC = {"os._exit"}


class Module:
    def __init__(self, name: str, path: Path, known: set[str]):
        self.name, self.path = name, path
        self.text = path.read_text()
        self.lines = self.text.splitlines()
        self.tree = ast.parse(self.text)
        self.imports: set[str] = set()
        self.private_reads: list[tuple[int, str]] = []
        self.sql: list[int] = []
        self.lmdb: list[int] = []
        self.long_funcs: list[tuple[str, int, int]] = []
        defined = self._defined_names()
        for node in _walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self._add_import(a.name, known)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, path, node)
                for a in node.names:
                    full = f"{base}.{a.name}"
                    if full in known:
                        self._add_import(full, known)
                    else:
                        self._add_import(base, known)
                        if (a.name.startswith("_") and not a.name.startswith("__")
                                and base.startswith("brandmind")):
                            self.private_reads.append((node.lineno, f"from {base} import {a.name}"))
            elif isinstance(node, ast.Attribute):
                attr = node.attr
                if attr.startswith("_") and not attr.startswith("__"):
                    v = node.value
                    if (not (isinstance(v, ast.Name) and v.id in ("self", "cls")) and attr not in defined
                            and ast.unparse(node) not in STDLIB_PUBLIC):
                        self.private_reads.append((node.lineno, f"{ast.unparse(v)}.{attr}"))
            if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                if SQL_TEXT.match(str(node.values[0].value)):
                    self.sql.append(node.lineno)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_TEXT.match(node.value):
                self.sql.append(node.lineno)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in SQL_CALLS and (node.func.attr != "rows" or ast.unparse(
                        node.func.value).endswith("sql")):
                    self.sql.append(node.lineno)
                elif node.func.attr in LMDB_CALLS:
                    self.lmdb.append(node.lineno)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNC and not self._waived(node):
                    self.long_funcs.append((node.name, node.lineno, n))

    def _waived(self, node: ast.AST) -> bool:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        window = self.lines[max(0, first - 2): node.lineno]
        return any("# long:" in line for line in window)

    def _defined_names(self) -> set[str]:
        names = set()
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name)
        # __slots__ / dataclass fields
        for node in ast.walk(self.tree):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
        return names

    def _add_import(self, target: str, known: set[str]) -> None:
        while target and target not in known:
            if "." not in target:
                return
            target = target.rsplit(".", 1)[0]
        if target and target != self.name:
            self.imports.add(target)


def analyse() -> dict[str, Module]:
    mods = modules()
    known = set(mods)
    return {name: Module(name, path, known) for name, path in mods.items()}


def library(name: str) -> bool:
    return name.startswith("brandmind") and not name.startswith(("brandmind.cli", "brandmind.sync"))


def cycles(mods: dict[str, Module], only=library) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    graph = {n: sorted(i for i in m.imports if only(i)) for n, m in mods.items() if only(n)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, []):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def report(mods: dict[str, Module] | None = None) -> dict:
    mods = mods or analyse()
    return {
        "cycles": cycles(mods),
        "private": {n: m.private_reads for n, m in mods.items() if m.private_reads},
        "sql": {n: len(set(m.sql)) for n, m in mods.items() if m.sql},
        "lmdb": {n: len(m.lmdb) for n, m in mods.items() if m.lmdb},
        "big_files": {n: len(m.lines) for n, m in mods.items() if len(m.lines) > MAX_FILE},
        "long_funcs": {n: m.long_funcs for n, m in mods.items() if m.long_funcs},
    }


def main() -> None:
    mods = analyse()
    r = report(mods)
    print(f"import cycles in the library: {len(r['cycles'])}")
    for c in r["cycles"]:
        print(f"  {len(c)} modules: {' '.join(x.removeprefix('brandmind.') for x in c)}")
    total = sum(len(v) for v in r["private"].values())
    print(f"private reads across modules: {total}")
    for n, v in sorted(r["private"].items()):
        print(f"  {n}: {len(v)}  " + ", ".join(f"{ln}:{s}" for ln, s in v[:6]))
    print(f"SQL in {len(r['sql'])} modules: " + ", ".join(f"{n}={c}" for n, c in sorted(r['sql'].items())))
    print(f"LMDB in {len(r['lmdb'])} modules: " + ", ".join(f"{n}={c}" for n, c in sorted(r['lmdb'].items())))
    print(f"files over {MAX_FILE} lines: {len(r['big_files'])} " + ", ".join(
        f"{n}={c}" for n, c in sorted(r["big_files"].items())))
    nf = sum(len(v) for v in r["long_funcs"].values())
    print(f"functions over {MAX_FUNC} lines: {nf}")
    for n, v in sorted(r["long_funcs"].items()):
        print(f"  {n}: " + ", ".join(f"{f}@{ln}({c})" for f, ln, c in v))
    if "-v" in sys.argv:
        print("import graph (library):")
        for n, m in sorted(mods.items()):
            if library(n):
                print(f"  {n} -> {' '.join(sorted(i for i in m.imports if library(i)))}")


if __name__ == "__main__":
    main()
