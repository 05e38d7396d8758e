"""The local model's session and tokenizer, made in threads while a command starts.

A cold `bm recall` spends 40-90 ms creating the onnxruntime session of the cached model and
~60 ms parsing tokenizer.json: C++ and Rust work that releases the GIL (measured: a Python loop
beside the session's creation runs as fast as alone, and beside the tokenizer's ~10% slower).
The command line (brandmind/cli/client.py) calls :func:`start` for the commands that embed
(`recall`, `context`, `ingest`, `remember`) before it imports the rest of the command line and
opens the store; the embedder (local.py ``_cached_session``) :func:`take` s the session, waiting for it if
needed, or loads one itself when none was started or this one failed (then it reports why),
and finds the tokenizer already parsed (minilm.shared_tokenizer parses it once per process).

Only those two are made in the threads.  onnxruntime, numpy and tokenizers are imported
first, in the calling thread: imports hold the GIL, so a thread would not make them faster,
and two threads importing at once can meet on one module half-imported.  Only for a model
already in the cache: building one is the embedder's job (its lock, its messages).  Nothing
outlives a command: :func:`settle` waits for what nobody took (the command line calls it
before it exits).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from .minilm import cache_file, model_dir, new_session, shared_tokenizer

_loads: dict[tuple[str, str, int], "_Load"] = {}
_tokenizer: list[threading.Thread] = []
_lock = threading.Lock()


class _Load:
    def __init__(self, path: str, variant: str, threads: int) -> None:
        self.session: Any = None
        self.thread = threading.Thread(target=self._run, args=(path, variant, threads), name="bm-model-load",
                                       daemon=True)

    def _run(self, path: str, variant: str, threads: int) -> None:
        try:
            self.session = new_session(path, variant, threads)
        except Exception:  # noqa: BLE001 - the embedder loads it again and says what is wrong
            self.session = None


def start(cache_dir: str | Path, variant: str, threads: int | None = None) -> bool:
    """Start creating the session of the cached ``variant`` in ``cache_dir`` (``threads``: the
    embedder's, default every core); False when that model is not built yet (or onnxruntime
    is missing: the embedder says so)."""
    threads = threads or os.cpu_count() or 1
    path = cache_file(cache_dir, variant)
    if not path.is_file():
        return False
    try:
        import onnxruntime  # noqa: F401 - imported here, not in the threads (module docstring)
        import tokenizers  # noqa: F401
        mdir = model_dir()
    except Exception:  # noqa: BLE001 - missing packages or weights: the embedder says so
        return False
    key = (str(path), variant, threads)
    with _lock:
        if key in _loads:
            return True
        load = _loads[key] = _Load(str(path), variant, threads)
        _tokenizer.append(threading.Thread(target=_parse_tokenizer, args=(mdir,), name="bm-tokenizer", daemon=True))
    load.thread.start()
    _tokenizer[-1].start()
    return True


def _parse_tokenizer(mdir: Path) -> None:
    try:
        shared_tokenizer(mdir)  # parsed once per process: the embedder's call then finds it
    except Exception:  # noqa: BLE001 - the embedder parses it again and says what is wrong
        pass


def take(path: str | Path, variant: str, threads: int) -> Any:
    """The session :func:`start` made for this model, once it is made; None when none was
    started or it failed."""
    with _lock:
        load = _loads.pop((str(path), variant, threads), None)
    if load is None:
        return None
    load.thread.join()
    return load.session


def settle() -> None:
    """Wait for the threads nobody took from (a command that failed before it embedded anything)."""
    with _lock:
        threads = [load.thread for load in _loads.values()] + _tokenizer
        _loads.clear()
        _tokenizer.clear()
    for thread in threads:
        thread.join()
