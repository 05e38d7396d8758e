"""Forgetting on a schedule: ``--ttl``, pins and ``forget --older-than``, over a Store.

* A memory stored with a ttl (``remember``/``ingest`` ``ttl="30d"``: :func:`parse_ttl`) carries
  ``expires_at`` = the moment it was stored + ttl in its ``memory.add`` op (an ingested turn's
  bead carries it too), so every device that has the op agrees on it.  From that moment recall
  and the context never return it (storage/search.py and the recall index filter on the real
  clock; brandmind/beads.py leaves expired turns out of the recent window), and it is
  forgotten by the forget rules (brandmind/forgetting.py: ``memory.forget``/``bead.forget`` ops,
  the text scrubbed from every file, the turns it came from and what was made from them
  included) by :func:`forget_expired`: on the next open of the store (``Memory``), by the
  daemon's worker (sync/worker.py) within a second, or by ``bm forget --expired``.  Two
  devices that both sweep append the same forgets (idempotent: remove wins).
* A pinned memory (``memory.pin`` op, LWW by HLC: ``bm pin`` / ``bm unpin``) never expires and
  ``--older-than`` leaves it; a forget that would take it along (an expired turn it was made
  from) is not made either, so the pin keeps its turns.  An explicit ``bm forget ID`` still
  forgets it.  A pin made on one device that reaches another only after the memory expired
  there does not bring it back (forget wins).
* :func:`forget_older_than`: the user's memories dated (``ts``) before now - age and their
  turns, and turns of theirs that old, except what a pin keeps.
"""
from __future__ import annotations

import re
from datetime import timedelta
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Callable

from . import clock
from .clock import MAX_MS
from .errors import InvalidInput, UsageError
from .forgetting import forget_ids, sparing_pinned
from .ops import Kind
from .storage import expiry as q

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}
MAX_TTL_MS = 100 * 365 * 86_400_000  # a hundred years: longer is no ttl at all
SWEEP_LIMIT = 10_000  # memories one sweep forgets (the next sweep takes the rest)
_PART = re.compile(r"(\d+)\s*([smhdw])")
_HINT = "a number and a unit: s, m, h, d or w, e.g. 90m, 12h, 30d, 2w (or 1d12h)"


def parse_ttl(value: Any, *, what: str = "ttl") -> int:
    """A duration in milliseconds from ``"2s"``, ``"90m"``, ``"12h"``, ``"30d"``, ``"2w"`` (or a
    sum like ``"1d12h"``), a number of seconds or a ``timedelta``; UsageError otherwise."""
    lead = f"{what} " if what else ""
    if isinstance(value, timedelta):
        ms = value // timedelta(milliseconds=1)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        ms = int(value * 1000) if value == value and abs(value) < 1e15 else -1
    elif isinstance(value, str):
        text = value.strip().lower()
        parts = _PART.findall(text)
        if not parts or _PART.sub("", text).strip():
            raise UsageError(f"{lead}must be a duration, got {value!r}", hint=_HINT)
        ms = sum(int(n) * UNITS[u] for n, u in parts)
    else:
        raise UsageError(f"{lead}must be a duration, got {type(value).__name__}", hint=_HINT)
    if ms <= 0:
        raise UsageError(f"{lead}must be longer than 0, got {value!r}", hint=_HINT)
    if ms > MAX_TTL_MS:
        raise UsageError(f"{lead}must be at most 100 years, got {value!r}", hint="to keep it for good, give no ttl")
    return ms


def check_ttl(value: Any) -> Any:
    """The CLI's check of ``--ttl`` / ``--older-than`` (cli/common.py ``checked`` names the
    option): the value itself when it reads as a duration."""
    try:
        parse_ttl(value, what="")
    except UsageError as exc:
        raise InvalidInput(exc.message, hint=exc.hint) from None
    return value


def expiry_of(ttl: Any, now: int | None = None) -> int | None:
    """When something stored now with ``ttl`` expires (epoch ms; None: no ttl)."""
    if ttl is None:
        return None
    at = (clock.now_millis() if now is None else now) + parse_ttl(ttl)
    return min(at, MAX_MS)


def expired(item: dict, now: int | None = None) -> bool:
    """Whether a bead (or a payload) with ``expires_at`` has expired at ``now``."""
    at = item.get("expires_at")
    return isinstance(at, int) and at <= (clock.now_millis() if now is None else now)


def due(store: "Store", now: int | None = None) -> bool:
    """Whether a memory has expired and waits to be forgotten (one indexed lookup)."""
    return q.has_expired(store.sql, clock.now_millis() if now is None else now)


def forget_expired(store: "Store", *, now: int | None = None, dry_run: bool = False) -> dict:
    """Forget what expired at ``now`` (default: the clock), sparing what a pin keeps:
    ``{"memories": [ids], "beads": [ids], "nodes": [ids]}`` (``dry_run``: what would go,
    without the turns and memories they take along)."""
    now = clock.now_millis() if now is None else now
    ids, _ = sparing_pinned(store, q.expired_ids(store.sql, now, SWEEP_LIMIT), [])
    if dry_run or not ids:
        return {"memories": ids, "beads": [], "nodes": []}
    return forget_ids(store, ids)


def forget_older_than(store: "Store", age: Any, *, user: str, dry_run: bool = False,
                      now: int | None = None, limit: int = 100_000) -> dict:
    """Forget ``user``'s memories dated before now - ``age`` (a duration: :func:`parse_ttl`),
    their turns and what was made from them, and the user's turns that old, except what a pin
    keeps.  Returns ``{"before", "memories", "beads", "nodes"}`` (``dry_run``: what would be
    forgotten first-hand, nothing stored)."""
    before = (clock.now_millis() if now is None else now) - parse_ttl(age, what="--older-than")
    ids = q.older_than_ids(store.sql, user, before, limit)
    beads = [b["id"] for b in store.log.beads_before(user, before - 1, limit)]
    ids, beads = sparing_pinned(store, ids, beads)
    out = {"before": clock.iso(before)}
    if dry_run or not (ids or beads):
        return {**out, "memories": ids, "beads": beads, "nodes": []}
    return {**out, **forget_ids(store, ids, beads)}


def set_pinned(store: "Store", memory_id: str, user: str, pinned: bool) -> None:
    """Append and apply the ``memory.pin`` of a memory (``pinned`` False: unpin)."""
    with store.write() as t:
        t.append(Kind.MEMORY_PIN, {"id": memory_id, "user": user, "pinned": bool(pinned)})
    store.catch_up()


def housekeeping(get_store: Callable[[], Any], lock: Any = None) -> int:
    """The daemon worker's turn (sync/worker.py, each time it wakes, about every second):
    write recall's access counts and forget what expired, holding ``lock``; returns how
    many memories were forgotten.  ``get_store`` may give a Memory, or None."""
    with lock if lock is not None else nullcontext():
        target = get_store()
        store = getattr(target, "store", target)
        if store is None:
            return 0
        store.searcher.flush_access()
        return len(forget_expired(store)["memories"]) if due(store) else 0
