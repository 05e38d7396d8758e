"""Build bm's wheel from a copy of the checkout, and make venvs to install it into
(tests/test_packaging.py, tests/test_extras.py; the ``built_wheel`` fixture in conftest)."""
from __future__ import annotations

import fcntl
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]


def once_per_run(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config, name: str,
                 build: Callable[[Path], Any]) -> Any:
    """``build(directory)``'s (JSON) result, made once per pytest run: under xdist every worker's
    session fixture would otherwise build its own (bm's wheel ~18 s, the core venv ~55 s, the
    model ~9 s, each per worker).  The directory is in the run's base temp, which the workers
    share; the first one to ask builds while the others wait on a lock, then reuse it."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if hasattr(config, "workerinput") else base) / name  # a worker's: <run>/popen-gwN
    root.mkdir(exist_ok=True)
    with open(root.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / ".built.json"
        if done.exists():
            return json.loads(done.read_text())
        result = build(root)
        done.write_text(json.dumps(result))
        return result


def copy_source(dest: Path) -> Path:
    """The files a build reads, copied away so the build leaves nothing in the checkout."""
    src = dest / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.onnx", "*.egg-info")
    for name in ("pyproject.toml", "README.md", "LICENSE", "setup.cfg", "MANIFEST.in"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    for name in ("_backend", "bin", "brandmind", "cli", "sync"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
    return src


def build_wheel(src: Path, out: Path) -> tuple[Path, str]:
    """Build without isolation when the installed setuptools can (fast, offline); otherwise
    let pip make an isolated build environment from its configured index."""
    attempts = [("--no-build-isolation", [sys.executable, "-m", "pip", "wheel", "--no-deps",
                                          "--no-build-isolation", str(src), "-w", str(out)]),
                ("isolated", [sys.executable, "-m", "pip", "wheel", "--no-deps", str(src), "-w", str(out)])]
    errors = []
    for how, cmd in attempts:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=out)
        wheels = sorted(out.glob("brandmind-*.whl"))
        if res.returncode == 0 and wheels:
            return wheels[0], how
        errors.append(f"{how}: {res.stdout[-1500:]}{res.stderr[-1500:]}")
    pytest.fail("could not build a wheel:\n" + "\n".join(errors))


def outer_sites() -> list[str]:
    """This interpreter's site-packages directories (a venv's own, when the tests run in one)."""
    import site
    import sysconfig

    dirs = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if Path(d).is_dir()]


def make_venv(venv: Path, see: list[str] = ()) -> Path:
    """A new venv (no pip in it: run ``pip --python <venv python>``) whose own site-packages
    come first, then the directories ``see``.  A ``.pth`` line adds a directory without running
    the ``.pth`` files in it, so an editable install there does not leak in.  Returns the
    venv's python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    py = venv / "bin" / "python"
    if see:
        (Path(site_packages(py)) / "_seen_sites.pth").write_text("\n".join(see) + "\n", encoding="utf-8")
    return py


def site_packages(py: Path) -> str:
    return subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def make_venv_seeing_this_one(venv: Path) -> Path:
    """A new venv that sees this interpreter's packages after its own (so the wheel's
    dependencies need no network), whether the tests run in a venv or not.  ``python -m venv
    --system-site-packages`` would not do: from inside a venv it sees the *base* interpreter's
    site-packages, not the venv's, and the dependencies are missing."""
    return make_venv(venv, outer_sites())


def pip_install(py: Path, *requirements: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """``pip install REQUIREMENTS`` into the venv whose python is ``py``.  With uv when the test
    extra brought it: it resolves the same packages from the same sources as pip here (pip's
    index, extra indexes, find-links and constraints are passed on) in ~4 s where pip takes ~35
    s of CPU for the core install; without uv, or when uv fails (an index only pip can use),
    pip itself.  uv installs into the venv's own site-packages, ignoring directories a
    ``.pth`` adds (make_venv's ``see``): an extra's venv then holds its own core copy too."""
    uv = _uv_binary()
    if uv is not None:
        res = subprocess.run([uv, "pip", "install", "--quiet", "--no-progress", "--python", str(py),
                              *_pip_sources(), *requirements], capture_output=True, text=True, timeout=timeout)
        if res.returncode == 0:
            return res
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-compile",
                           "--disable-pip-version-check", *requirements],
                          capture_output=True, text=True, timeout=timeout)


def _uv_binary() -> str | None:
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return find_uv_bin()
    except FileNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def _pip_sources() -> tuple[str, ...]:
    """uv options naming where pip installs from here (``pip config list``: its config files and
    PIP_* variables); local paths that do not exist are left out, as pip skips them."""
    res = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60)
    config: dict[str, list[str]] = {}
    for line in res.stdout.splitlines():
        key, _, value = line.partition("=")
        name = key.rpartition(".")[2]
        config.setdefault(name, []).extend(value.strip().strip("'\"").split())

    def usable(location: str) -> bool:
        path = location[len("file://"):] if location.startswith("file://") else location
        return "://" in location and not location.startswith("file://") or Path(path).exists()

    out: list[str] = []
    for name, flag in (("index-url", "--index-url"), ("extra-index-url", "--extra-index-url"),
                       ("find-links", "--find-links"), ("constraint", "--constraint")):
        for value in dict.fromkeys(config.get(name, [])):
            if usable(value):
                out += [flag, value]
    if out:
        out += ["--index-strategy", "unsafe-best-match"]  # pip's rule: the best version of any index
    return tuple(out)
