"""Remote-assisted recall: local recall merged with the edge and node search of graph remotes
(Zep, Graphiti), within a time budget, falling back to local results alone.

Python API (what ``bm recall [--remote]`` runs)::

    from brandmind import Memory
    from brandmind.sync.assist import recall_with_remote

    with Memory() as mem:
        results, reports = recall_with_remote(mem, "where does Ann live?", user="ann", remote=True)

``results`` is what ``mem.recall`` returns, merged with the remotes' hits (below);
``reports`` says per remote asked whether it answered (``status`` ok / timeout / error).

When a remote is asked
    ``bm recall --remote`` asks every zep / graphiti remote (or the one named), at the same
    time as the local recall runs.  Without the flag, a remote configured with
    ``assist = true`` is asked only when local recall *finds too little*: fewer than
    ``min(k, ASSIST_MIN)`` results that share a word with the query (a keyword hit) or
    have a cosine of at least ``ASSIST_COSINE``.

Budget
    The whole call is bounded by the remote's ``timeout_ms`` (default 700 ms, the seed SLO),
    counted from the start; a remote that has not answered by then is dropped for this
    call (its thread is left to finish on its own) and the answer says so: local results
    only, ``remote.status = "timeout"``; an outage or error gives ``"error"`` with its
    message.  Local recall is never delayed by a remote beyond the budget.

Merge
    Reciprocal-rank fusion of the local list (weight 1) and each remote's list (weight
    ``REMOTE_WEIGHT``), constant ``RRF_K``.  A remote hit that is a local memory (it carries
    the memory id: pushed from here or harvested) boosts that memory and adds the remote to
    its provenance instead of appearing twice; one whose text equals a local result's (case-
    and space-insensitive) does the same.  Other remote hits are appended as results of type
    ``fact`` with id ``<remote>:<uuid>``, ``source`` = the remote's kind and provenance
    ``[{"source": kind, "remote": name, "uuid": ...}]``.  Every result keeps its local
    ``score``/``signals``; ``fused`` is the RRF score the list is ordered by.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from brandmind.errors import BMError

ASSIST_MIN = 3          # local results that must match for "enough"
ASSIST_COSINE = 0.45    # a vector match this close counts as a match
REMOTE_WEIGHT = 1.0
RRF_K = 60
DEFAULT_TIMEOUT_MS = 700


def found_too_little(results: list[dict], k: int) -> bool:
    """Fewer than min(k, ASSIST_MIN) local results that match the query."""
    def matches(r: dict) -> bool:
        sig = r.get("signals") or {}
        kw = sig.get("keyword") or {}
        vec = sig.get("vector") or {}
        return kw.get("rank") is not None or float(vec.get("cosine") or 0.0) >= ASSIST_COSINE

    return sum(1 for r in results if matches(r)) < min(max(k, 1), ASSIST_MIN)


class _Ask(threading.Thread):
    """One remote's search, on a daemon thread (a late answer is simply dropped)."""

    def __init__(self, remote: Any, user: str, query: str, limit: int, timeout: float) -> None:
        super().__init__(name=f"bm-assist-{remote.name}", daemon=True)
        self.remote, self.user, self.query, self.limit, self.timeout = remote, user, query, limit, timeout
        self.hits: list[Any] | None = None
        self.error: BMError | None = None
        self.took = 0.0

    def run(self) -> None:
        t0 = time.perf_counter()
        try:
            self.hits = list(self.remote.search(self.user, self.query, self.limit, self.timeout))
        except BMError as exc:
            self.error = exc
        except Exception as exc:  # noqa: BLE001 - a remote's library failing must not break recall
            self.error = BMError(f"{type(exc).__name__}: {exc}", hint="see `bm remote test`")
        self.took = time.perf_counter() - t0


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def merge(local: list[dict], answers: list[tuple[Any, list[Any]]], k: int) -> list[dict]:
    """RRF of the local list and each remote's hits (module docstring); the first ``k``."""
    out: dict[str, dict] = {}
    fused: dict[str, float] = {}
    by_text: dict[str, str] = {}
    for rank, r in enumerate(local, 1):
        key = r["id"]
        out[key] = dict(r)
        fused[key] = 1.0 / (RRF_K + rank)
        by_text.setdefault(_norm(r.get("text", "")), key)
    for remote, hits in answers:
        for rank, hit in enumerate(hits, 1):
            entry = {"source": remote.kind, "remote": remote.name, "uuid": hit.uuid}
            key = hit.local_id if hit.local_id in out else by_text.get(_norm(hit.text))
            if key is None:
                key = f"{remote.name}:{hit.uuid}"
                if key not in out:
                    out[key] = {"id": key, "text": hit.text, "type": "fact", "source": remote.kind,
                                "provenance": [entry], "score": round(float(hit.score), 6),
                                "remote": {"name": remote.name, "kind": hit.kind, "uuid": hit.uuid},
                                "valid_from": hit.valid_at, "valid_to": hit.invalid_at}
                    by_text.setdefault(_norm(hit.text), key)
            else:
                row = out[key]
                prov = list(row.get("provenance") or [])
                if entry not in prov:
                    row["provenance"] = prov + [entry]
            fused[key] = fused.get(key, 0.0) + REMOTE_WEIGHT / (RRF_K + rank)
    order = sorted(out, key=lambda key: (-fused[key], key))
    result = []
    for key in order[:k]:
        row = out[key]
        row["fused"] = round(fused[key], 6)
        result.append(row)
    return result


def assisted_recall(local: Callable[[], list[dict]], remotes: list[Any], query: str, *, user: str, k: int,
                    forced: bool, timeout_ms: int | None = None) -> tuple[list[dict], list[dict]]:
    """Run ``local()`` (the store's recall) and, when forced or when it finds too little, the
    remotes' searches, within the budget.  Returns ``(results, reports)``; a report per remote
    asked: ``{"remote", "kind", "status": "ok"|"timeout"|"error", "hits", "ms", "message"?,
    "hint"?}``."""
    budget = (timeout_ms or min((int(getattr(getattr(r, "cfg", None), "timeout_ms", None) or DEFAULT_TIMEOUT_MS)
                                 for r in remotes), default=DEFAULT_TIMEOUT_MS)) / 1000.0
    t0 = time.perf_counter()
    asks: list[_Ask] = []

    def ask() -> None:
        left = max(0.05, budget - (time.perf_counter() - t0))
        for remote in remotes:
            a = _Ask(remote, user, query, max(k, 10), left)
            a.start()
            asks.append(a)

    if forced and remotes:
        ask()  # at the same time as the local recall
    results = local()
    if not forced and remotes and found_too_little(results, k):
        ask()
    if not asks:
        return results, []
    reports, answers = [], []
    for a in asks:
        a.join(max(0.0, budget - (time.perf_counter() - t0)))
        rep: dict[str, Any] = {"remote": a.remote.name, "kind": a.remote.kind}
        if a.is_alive():
            rep.update(status="timeout", hits=0, ms=round(budget * 1000),
                       message=f"no answer within {budget * 1000:.0f} ms")
        elif a.error is not None:
            rep.update(status="error", hits=0, ms=round(a.took * 1000), message=a.error.message, hint=a.error.hint)
        else:
            rep.update(status="ok", hits=len(a.hits or []), ms=round(a.took * 1000))
            answers.append((a.remote, a.hits or []))
        reports.append(rep)
    if not answers:
        return results, reports
    return merge(results, answers, k), reports


def assist_remotes(store: Any, *, forced: bool) -> list[Any]:
    """The graph remotes recall may ask: every zep / graphiti remote when ``forced``, else
    those configured with ``assist = true`` (``found_too_little`` decides whether they are
    asked).  NotFound when forced and the store has none."""
    data_dir = store.config.paths.data_dir
    # the file name of sync/config.py REMOTES_FILE, checked without importing sync.config
    # (dataclasses, regexes: ~10 ms of every cold recall of a store with no remotes)
    if not forced and not (Path(data_dir) / "remotes.toml").exists():
        return []
    from .config import load_remotes
    from .remotes import open_remote

    path = Path(data_dir) / "remotes.toml"
    try:
        st = path.stat()
        key: tuple | None = (str(path), st.st_mtime_ns, st.st_size, id(store), forced)
    except OSError:
        key = None
    cached = _OPENED.get(key) if key is not None else None
    if cached is not None:
        return cached
    configs = [c for _, c in sorted(load_remotes(data_dir).items()) if c.mirror and (forced or c.assist)]
    if forced and not configs:
        from brandmind.errors import NotFound

        raise NotFound("--remote: this store has no zep or graphiti remote",
                       hint="add one: `bm remote add zep --api-key-env ZEP_API_KEY` or `bm remote add graphiti --host H`")
    opened = [open_remote(store, c) for c in configs]
    if key is not None:
        # the store's remotes as configured now (assisting and forced sets side by side);
        # those of an older remotes.toml or a closed store go
        for old in [k for k in _OPENED if k[:4] != key[:4]]:
            del _OPENED[old]
        _OPENED[key] = opened
    return opened


# the remotes assist_remotes opened, kept while remotes.toml and the store stay the same: a
# resident daemon answers `bm recall --remote` on warm clients (connections, imports)
_OPENED: dict[tuple, list[Any]] = {}


def recall_with_remote(mem: Any, query: str, *, k: int | None = None, user: str | None = None,
                       agent: str | None = None, types: Iterable[str] = (), since: str | int | None = None,
                       until: str | int | None = None, now: str | int | None = None,
                       as_of: str | int | None = None, remote: bool = False, remotes: list[Any] | None = None,
                       timeout_ms: int | None = None) -> tuple[list[dict], list[dict]]:
    """``mem.recall(query, ...)`` (a Memory: the local recall), with the graph remotes' hits
    merged in when ``remote`` (every zep / graphiti remote, asked at once) or when local
    recall finds too little and a remote is configured with ``assist = true`` (module
    docstring).  ``remotes``: the remotes to ask instead of the configured ones.  A recall
    ``as_of`` a date is local only (the remotes know the present).  Returns ``(results,
    reports)``: one report per remote asked (``assisted_recall``)."""
    def local() -> list[dict]:
        return mem.recall(query, k=k, user=user, agent=agent, types=types, since=since, until=until,
                          now=now, as_of=as_of)

    if as_of is not None:
        return local(), []
    store = mem.store
    helpers = list(remotes) if remotes is not None else assist_remotes(store, forced=remote)
    if not helpers:
        return local(), []
    store.embedder  # noqa: B018 - loaded once here, not by both the recall and a remote's thread at once
    return assisted_recall(local, helpers, query, user=store.user(user), k=k or 10, forced=remote,
                           timeout_ms=timeout_ms)
