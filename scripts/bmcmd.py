"""Shared by the scripts: where the `bm` command of this interpreter is, and where the shared
benchmark data is."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def find_bm(who: str) -> str:
    """The `bm` installed next to this interpreter (not a pyenv shim, which adds ~0.2 s a
    call), else the one on PATH; exits naming ``who`` if there is none."""
    for candidate in (os.path.join(sys.prefix, "bin", "bm"),
                      os.path.join(os.path.dirname(sys.executable), "bm")):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("bm")
    if not found:
        sys.exit(f"{who}: cannot find the `bm` command; install bm first (pip install -e .)")
    return found


def shared_dir() -> Path:
    """The shared data folder (``bench/locomo``, ``bench/realtalk``): ``$BM_SHARED_DIR``, else
    ``../shared`` beside the checkout (where CI's checkout has it; a clone elsewhere sets the
    variable)."""
    env = os.environ.get("BM_SHARED_DIR")
    return Path(env).expanduser() if env else Path(__file__).resolve().parent.parent.parent / "shared"
