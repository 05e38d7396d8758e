"""Beads: the turns of each user's thread (the short-term window), over a Store.

A bead is ``{"id", "ts", "user", "role", "speaker", "thread", "source", "turn_id",
"importance", "spans", "meta", "size", "content" | "blob", "key"?}``, stored by a
``bead.add`` op on the log side only (brandmind/oplog.py keeps them by id and by user and
time).  Content longer than config ``blob_threshold`` bytes lives in the blob store
(``"blob"``: its digest).  ``key`` is ingest's dedup key (brandmind/ingest.py); it never
leaves the store.  The public form (:func:`bead_out`) has the content inline and ``ts``
as ISO 8601.

``Memory.add_bead`` / ``get_bead`` / ``beads_tail`` call these functions.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import clock, validate
from .clock import iso, new_id, parse_time
from .errors import NotFound, UsageError
from .ops import Kind
from .projection import apply_log_side

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store


def bead_payload(store: "Store", content: str, *, user: str, role: str, speaker: str | None,
                 ts: int | None, thread: str | None, source: str, turn_id: str | None,
                 importance: float, spans: list | None, meta: dict | None,
                 key: str | None = None, bead_id: str | None = None, expires_at: int | None = None) -> dict:
    """The stored form of a bead (checked values in; large content put in a blob;
    ``expires_at``: --ttl, brandmind/expiry.py)."""
    ts = ts if ts is not None else clock.now_millis()  # (read through the module: tests freeze it)
    data = content.encode("utf-8")
    bead = {"id": bead_id or new_id("b", ts), "ts": ts, "user": user, "role": role,
            "speaker": speaker, "thread": thread or "main", "source": source,
            "turn_id": turn_id, "importance": importance, "spans": spans or [],
            "meta": meta or {}, "size": len(data)}
    if len(data) > store.config.blob_threshold:
        bead["blob"] = store.blobs.put(data)
    else:
        bead["content"] = content
    if key:
        bead["key"] = key
    if expires_at is not None:
        bead["expires_at"] = expires_at
    return bead


def bead_out(store: "Store", bead: dict) -> dict:
    """The public form of a stored bead: content inline, ts as ISO 8601, no dedup key."""
    out = dict(bead)
    if "blob" in out:
        out["content"] = store.blobs.get(out["blob"]).decode("utf-8")
    out.pop("key", None)
    out["ts"] = iso(out["ts"])
    if "expires_at" in out:
        out["expires_at"] = iso(out["expires_at"])
    return out


def add_bead(store: "Store", content: str | bytes, *, role: str = "user", speaker: str | None = None,
             user: str | None = None, thread: str | None = None, source: str = "cli",
             turn_id: str | None = None, importance: float = 0.5, spans: list | None = None,
             meta: dict | None = None, ts: str | int | None = None) -> dict:
    """Store one turn as a bead (``bead.add``); returns its public form."""
    content = validate.text(content, what="content")
    bead = bead_payload(
        store, content, user=store.user(user), role=validate.name(role, what="role"),
        speaker=validate.name(speaker, what="speaker") if speaker else None,
        ts=parse_time(ts, field="ts"), thread=validate.name(thread, what="thread") if thread else None,
        source=source, turn_id=turn_id, importance=validate.importance(importance),
        spans=spans, meta=validate.meta(meta))
    with store.write() as t:
        op = t.append(Kind.BEAD_ADD, {"bead": bead})
        apply_log_side(t, op)
    return bead_out(store, bead)


def get_bead(store: "Store", bead_id: str) -> dict:
    """One bead by id (NotFound when there is none)."""
    bead = store.log.get_bead(bead_id)
    if bead is None:
        raise NotFound(f"no bead {bead_id!r}", hint="list beads with `bm beads tail`")
    return bead_out(store, bead)


def beads_tail(store: "Store", n: int = 20, *, user: str | None = None, thread: str | None = None) -> list[dict]:
    """The last n beads of the user's thread, oldest first (the short-term window)."""
    user = store.user(user)
    if int(n) < 0:
        raise UsageError(f"n must be 0 or more, got {n}", hint="e.g. bm beads tail -n 20")
    if int(n) == 0:
        return []
    log = store.log
    now = clock.now_millis()
    if thread is None:
        want = n
        while True:  # expired turns (--ttl) are left out: ask for as many more
            ids = log.bead_ids(user, want)
            beads = [b for b in map(log.get_bead, ids) if b and not _expired(b, now)]
            if len(beads) >= n or len(ids) < want:
                break
            want += n - len(beads)
        beads = beads[:n]
    else:
        beads = []
        for i in log.bead_ids(user, None):
            b = log.get_bead(i)
            if b and b.get("thread") == thread and not _expired(b, now):
                beads.append(b)
                if len(beads) >= n:
                    break
    return [bead_out(store, b) for b in reversed(beads) if b]


def _expired(bead: dict, now: int) -> bool:
    """A turn past its ttl (brandmind/expiry.py): no read shows it until it is forgotten."""
    at = bead.get("expires_at")
    return at is not None and at <= now


def beads_before(store: "Store", user: str, n: int, cutoff: int | None,
                 thread: str | None = None) -> list[dict]:
    """The last ``n`` beads of ``user`` (in ``thread`` if given) stamped at or before
    ``cutoff`` (epoch ms; None: no limit), oldest first, in their public form."""
    if n == 0:
        return []
    if cutoff is None:
        return beads_tail(store, n, user=user, thread=thread)
    now, want = clock.now_millis(), n
    while True:  # expired turns (--ttl) are left out: ask for as many more
        got = store.log.beads_before(user, cutoff, want, thread)
        beads = [b for b in got if not _expired(b, now)]
        if len(beads) >= n or len(got) < want:
            break
        want += n - len(beads)
    return [bead_out(store, b) for b in reversed(beads[:n])]
