"""``bm ingest``: JSONL messages in, each stored as a bead plus a raw-turn memory.

Messages provably seen before (by id, else by an explicit ts with thread, role, speaker and
content: brandmind/ingest.py ``message_key``) are not stored again; a message with neither is
always new.  One re-sent with its id and another text is an edit (a chat edit, or a streamed
reply sent again whole): the turn it replaces is forgotten, with the memories made from it alone,
and the new text stored in its place (its ts, unless the message gives one), in the one
transaction of its batch; its old text is kept as superseded (a digest), so re-sending an older
version changes nothing.  One whose turn was forgotten is not stored again.  A bad line stops
the ingest with its line number, after committing the lines before it (``skip_bad`` reports it
and goes on).  Every batch is one op-log transaction and
one SQLite transaction: nothing is ever half-stored.  Each turn's memory carries its episode:
that of the turn before it in the thread when the pause since is at most
``episode_gap_minutes``, else a new one named by its start.

While the store defers vectors (``Store.deferring_vectors``: the resident daemon), nothing is
embedded here: the memories wait in ``vec_pending`` for brandmind/backlog.py, and with
``queue`` (a job template) each batch's extraction is queued in the batch's own op-log
transaction.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from . import beads
from .clock import iso, new_id, now_millis
from .errors import InvalidInput
from .forgetting import after_forget, edit_plan, forget_in
from .ingest import forgotten, known_bead, message_key, read_messages, same_text, superseded
from .ops import Kind
from .projection import apply_log_side
from .storage.memories import last_turn_before

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

BATCH = 256
# batches between unmapping the log's resident pages (OpLog.release_pages): each batch's random
# puts (vector cache, dedup keys, beads) fault in ~35 MB of the log's map (the kernel maps 64 KB
# around each faulting page); releasing costs ~2 ms
RELEASE_EVERY = 4


def ingest(store: "Store", lines: Iterable[str | bytes | dict], *, user: str,
           skip_bad: bool = False, progress: Callable[[dict], None] | None = None,
           extract: bool = False, queue: dict | None = None, expires_at: int | None = None) -> dict:
    """See ``Memory.ingest`` (``user`` already resolved; ``expires_at``: --ttl, brandmind/expiry.py).  With ``extract`` the
    report also lists the bead ids stored or found (``_beads``, ``_fresh``) for the extraction
    that follows (brandmind/extract/run.py ``extract_after_ingest``); with ``queue`` too, each
    batch queues that extraction as a job (``queue`` plus its bead ids; ``_jobs`` counts them)."""
    report: dict[str, Any] = {"ingested": 0, "duplicates": 0, "bad": [], "lines": 0}
    if extract:  # the bead ids of the messages stored (and found stored) by this ingest
        report["_beads"], report["_fresh"] = [], []
    if extract and queue is not None:
        report["_queue"], report["_jobs"] = queue, 0
    batch: list[dict] = []

    def stop_at_bad_line(exc: InvalidInput) -> None:
        store_batch(store, batch, user, report, expires_at=expires_at)
        exc.message += (f" — {report['ingested']} message(s) before it were stored"
                        + (f", {report['duplicates']} already known" if report["duplicates"] else ""))
        exc.hint = "fix the line and re-run the same command: stored messages are not stored twice; or pass --skip-bad"

    batches = 0
    for msg in read_messages(lines, report, skip_bad=skip_bad, on_bad=stop_at_bad_line):
        batch.append(msg)
        if len(batch) >= BATCH:
            store_batch(store, batch, user, report, expires_at=expires_at)
            batch = []
            batches += 1
            if batches % RELEASE_EVERY == 0:  # else a 1M ingest shows the whole log file as its RSS
                store.log.release_pages()
            if progress:
                progress(report)
    store_batch(store, batch, user, report, expires_at=expires_at)
    if progress:
        progress(report)
    report.pop("_queue", None)
    report.pop("_edited", None)
    return report


def _unseen(store: "Store", batch: list[dict], user: str, report: dict) -> tuple[list[tuple[str | None, dict]], list[str]]:
    """The messages of ``batch`` to store: not seen before (in the store, or earlier in this
    batch), or an edit (re-sent with their id and a text their turn neither says nor said
    before: ``ingest.superseded``); and the beads the edits replace.  Of the lines of one id
    in a batch, the last is the message (a reply streamed in parts, then whole), and so is a later
    line of an id this ingest edited (so where batches split changes nothing)."""
    fresh, keys, again = [], set(), []
    last = {message_key(user, m): i for i, m in enumerate(batch) if m.get("id") is not None}
    edited = report.setdefault("_edited", set())  # keys this ingest edited: a later line of one wins
    with store.log.bead_keys() as seen:  # one read of ingest's dedup keys (OpLog.bead_keys)
        for i, msg in enumerate(batch):
            key = message_key(user, msg)  # None: nothing proves it was seen, so it is new
            known = known_bead(seen, user, msg)
            if key is not None and not known and key not in keys and forgotten(seen, user, msg):
                report["forgotten"] = report.get("forgotten", 0) + 1  # (only when some were)
                keys.add(key)
                continue
            if key is not None and (key in keys or last.get(key, i) != i or (
                    known and key not in edited and superseded(seen, key, msg["content"]))):
                _duplicate(report, known)  # seen in this batch, a later line has its id, or an old text of it
                continue
            keys.add(key)
            if known and msg.get("id") is not None:
                again.append((known, key, msg))  # its text is compared below (a read of its own)
            elif known:
                _duplicate(report, known)
            else:
                fresh.append((key, msg))
    replaced = []
    for (known, key, msg), old in zip(again, store.log.get_beads(k for k, _, _ in again)):
        if old is None or same_text(old, msg["content"]):
            _duplicate(report, known)
            continue
        report["edited"] = report.get("edited", 0) + 1  # (only when some were)
        edited.add(key)
        replaced.append(known)  # an edit keeps the turn's place in the thread, and its expiry
        keep = {"ts": old["ts"]} if msg["ts"] is None else {}
        fresh.append((key, {**msg, **keep, "expires_at": old.get("expires_at")}))
    return fresh, replaced


def _duplicate(report: dict, bead_id: str | None) -> None:
    """Count a message found stored (as ``bead_id``; None: earlier in this batch), which an
    extraction after the ingest still reads (``_beads``)."""
    report["duplicates"] += 1
    if bead_id and "_beads" in report:
        report["_beads"].append(bead_id)


def store_batch(store: "Store", batch: list[dict], user: str, report: dict, *,
                expires_at: int | None = None) -> None:
    """Store one batch of parsed messages: one log transaction, then one catch-up
    (``expires_at``: of every turn stored, brandmind/expiry.py)."""
    mark = (len(report["_beads"]), len(report["_fresh"])) if "_queue" in report else None
    fresh, replaced = _unseen(store, batch, user, report) if batch else ([], [])
    # an edited message: its old turn goes in the same transaction (with the memories made from
    # it alone, not pinned ones), its key stays free, its old text is kept as superseded
    edit = edit_plan(store, replaced) if replaced else None
    if not fresh:
        if mark and report["_beads"][mark[0]:]:  # messages stored before: their extraction still
            with store.write() as t:
                _queue_job(t, report, mark)
        return
    limit = store.config.max_memory_chars
    texts = []
    for _, msg in fresh:
        body = msg["content"][:limit]
        texts.append(f"{msg['speaker']}: {body}" if msg["speaker"] else body)
    if store.deferring:  # the backlog embeds later; the texts said before have a vector now
        known = store.log.cached_vectors(store.sql.model, texts)
    else:
        known = {text: vec.tobytes() for text, vec in zip(texts, store.embed_docs(texts))}
    now = now_millis()
    episodes: dict[str, tuple[int, str]] = {}
    stored = 0
    ops: dict[int, dict] = {}  # arrival -> op: the catch-up does not read them back
    with store.write() as t:
        if edit:
            forget_in(t, edit[0], replaced, edit[1], keep_keys=True)
        for (key, msg), text in zip(fresh, texts):
            if key is not None and t.key_forgotten(key):  # another process forgot it meanwhile
                report["forgotten"] = report.get("forgotten", 0) + 1
                continue
            if key is not None and t.bead_for_key(key):  # another process stored it meanwhile
                _duplicate(report, t.bead_for_key(key))
                continue
            bead_id = _store_turn(store, t, msg, key, text, user, now, episodes, ops,
                                  expires_at if expires_at is not None else msg.get("expires_at"))
            stored += 1
            if "_beads" in report:
                report["_beads"].append(bead_id)
                report["_fresh"].append(bead_id)
        if mark:
            _queue_job(t, report, mark)
    store.catch_up(fresh=ops, vectors=known)
    if edit:
        after_forget(store, edit[2])
    report["ingested"] += stored


def _queue_job(t: Any, report: dict, mark: tuple[int, int]) -> None:
    """Queue the extraction of this batch's turns (brandmind/backlog.py runs it)."""
    beads, fresh = report["_beads"][mark[0]:], report["_fresh"][mark[1]:]
    if beads:
        t.queue_job({**report["_queue"], "beads": beads, "fresh": fresh})
        report["_jobs"] += 1


def _store_turn(store: "Store", t: Any, msg: dict, key: str | None, text: str, user: str, now: int,
                episodes: dict[str, tuple[int, str]], ops: dict[int, dict], expires_at: int | None = None) -> str:
    """Append the bead and the raw-turn memory of one message (``ops``: arrival -> op of
    what it appends); returns the bead id."""
    limit = store.config.max_memory_chars
    ts = msg["ts"] if msg["ts"] is not None else now
    bead = beads.bead_payload(
        store, msg["content"], user=user, role=msg["role"], speaker=msg["speaker"], ts=ts,
        thread=msg["thread"], source="ingest", turn_id=msg["id"], importance=0.5,
        spans=None, meta=msg["meta"], key=key, expires_at=expires_at)
    arrival = t.next_arrival()
    op = ops[arrival] = t.append(Kind.BEAD_ADD, {"bead": bead})
    apply_log_side(t, op)
    meta = {"kind": "turn", "role": msg["role"], "thread": bead["thread"],
            "episode": episode(store, user, bead["thread"], ts, episodes)}
    if msg["speaker"]:
        meta["speaker"] = msg["speaker"]
    if len(msg["content"]) > limit:
        meta["truncated"] = True
    payload = {
        "id": new_id("m", ts), "text": text, "type": "episode", "user": user,
        "agent": None, "importance": 0.5, "ts": ts, "valid_from": None,
        "valid_to": None, "source": "ingest", "meta": meta,
        "provenance": [{"bead": bead["id"], "turn_id": msg["id"], "meta": msg["meta"]}],
    }
    if expires_at is not None:
        payload["expires_at"] = expires_at
    ops[arrival + 1] = t.append(Kind.MEMORY_ADD, payload)
    return bead["id"]


def episode(store: "Store", user: str, thread: str, ts: int, last: dict[str, tuple[int, str]]) -> str:
    """The episode a turn belongs to (see the module docstring).  ``last`` carries the
    previous turn of each thread through an ingest."""
    prev = last.get(thread)
    if prev is None or ts < prev[0]:
        row = last_turn_before(store.sql, user, thread, ts)
        prev = row if row and row[1] else None
    gap = store.config.episode_gap_minutes * 60_000
    name = prev[1] if prev and ts - prev[0] <= gap else iso(ts)
    last[thread] = (ts, name)
    return name
