"""The backlog: what a write accepted now leaves for later, and the steps that do it.

While a thread defers vectors (``Store.deferring_vectors``: the resident daemon's request
threads), ``remember`` and ``ingest`` store each memory with its keywords at once and a
``vec_pending`` row (storage/memories.py); ``--extract`` queues the extraction as a job in
the op-log transaction of the turns (``LogTxn.queue_job``; LMDB's ``jobs`` database, local
to this device).  Both queues are durable; the work is acknowledged with its result:

* vectors (:func:`vector_step`): a batch of waiting ``(rowid, text)`` is read under the
  lock, embedded OUTSIDE it (the embedder is shared and thread-safe), then, under the lock
  and inside the op-log write transaction (so no forget can slip in between), one SQLite
  transaction writes the vectors and deletes their ``vec_pending`` rows, only for the rows
  still waiting with the same text (a forget or a rebuild in between wins).  The vectors
  live in the projection only (``bm rebuild`` takes them from there, brandmind/admin.py),
  not in the log's vector cache.  A kill -9 before the SQLite commit redoes the batch;
  nothing is doubled: a filled row waits no more.
* extraction jobs (:func:`job_step`): the extractor runs over the job's turns outside the
  lock and its facts are saved in the job (so a retry never asks the LLM again); the facts
  are then stored with reconciliation, and each op-log transaction of facts records the
  job's progress (how many facts are stored); the last one acknowledges the job (deletes
  it).  A kill -9 at any point resumes from the last committed fact: none is lost or
  stored twice.  A failing job keeps its place with its error and attempts; after
  ``MAX_ATTEMPTS`` the worker leaves it for ``bm queue run``.

``lock``: the daemon's store lock (any context manager; None: no lock, the foreground
``bm queue run``); ``get_store``: the store to work on, asked again under the lock each time
(the daemon may reopen it).
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager

from .errors import BMError, ModelMismatch
from .extract import Turn
from .extract.run import extract_facts, store_facts, stored_turns
from .storage import memories
from .storage import stats as q
from .vectorlag import pending  # how many memories wait for their vector (also read by the worker)

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

BATCH = 128        # memories embedded per batch (the model's best rate at 64-128 on 2 cores)
MAX_ATTEMPTS = 8   # a job failing this often (~2 min of backoff) is left for `bm queue run`
GetStore = Callable[[], "Store"]


def status(store: "Store") -> dict:
    """The backlog as the store holds it (any process): ops accepted, vectors made and
    waiting, extraction jobs queued, done and failing (with the last error)."""
    jobs = store.log.jobs()
    counts = store.log.job_counts()
    failing = [job for _, job in jobs if job.get("error")]
    total = q.count(store.sql, "memories")
    waiting = pending(store)
    return {"ops": store.log.last_arrival(), "memories": total, "vectors": total - waiting,
            "vectors_pending": waiting, "jobs_queued": counts["queued"], "jobs_done": counts["done"],
            "jobs_failing": len(failing), "jobs_stuck": sum(1 for j in failing if j.get("attempts", 0) >= MAX_ATTEMPTS),
            "last_error": failing[-1]["error"] if failing else None}


# -- vectors ---------------------------------------------------------------------------------------
@dataclass
class Batch:
    """Waiting memories taken for embedding: ``items`` (rowid, text), the model and size of
    the index they were read from, and ``vectors`` (text -> vector) as they are found."""

    model: str
    dim: int
    items: list[tuple[int, str]]
    vectors: dict[str, bytes] = field(default_factory=dict)


def take(store: "Store", n: int = BATCH) -> Batch | None:
    """The first ``n`` waiting memories (their cached vectors found); None when none wait."""
    rows = memories.pending_batch(store.sql, n)
    if not rows:
        return None
    batch = Batch(store.sql.model, store.sql.dim, rows)
    for _, text in rows:
        raw = store.log.cached_vector(batch.model, text)
        if raw is not None and len(raw) == 4 * batch.dim:
            batch.vectors[text] = bytes(raw)
    return batch


def embed(store: "Store", batch: Batch) -> int:
    """Embed the batch's texts the cache lacked (no lock needed); returns how many."""
    import numpy as np

    todo = [text for text in dict.fromkeys(text for _, text in batch.items) if text not in batch.vectors]
    if not todo:
        return 0
    vecs = np.asarray(store.embedder.embed_documents(todo), dtype=np.float32)
    if vecs.ndim != 2 or vecs.shape[1] != batch.dim:
        raise ModelMismatch(f"the embedder returned {vecs.shape[-1]}-d vectors; this store holds {batch.dim}-d ones",
                            hint="run `bm reindex` to re-embed the store with the configured model")
    for text, vec in zip(todo, vecs):
        batch.vectors[text] = vec.tobytes()
    return len(todo)


def commit(store: "Store", batch: Batch, *, again: bool = True) -> int:
    """Write the batch's vectors (see the module docstring); returns how many memories got one."""
    sql = store.sql
    if sql.model != batch.model or sql.dim != batch.dim:  # reindexed meanwhile: taken again later
        return 0
    items = [(rowid, text, batch.vectors[text]) for rowid, text in batch.items if text in batch.vectors]
    behind, done = False, []
    with store.log.write() as t:  # no op can be appended (a forget) until the vectors are in
        with sql.write():
            behind = sql.applied() < t.next_arrival() - 1
            if not behind:
                done = memories.fill_vectors(sql, items)
    store.searcher.invalidate()
    if behind and again:  # ops of another process not applied yet (one may be a forget)
        store.catch_up()
        return commit(store, batch, again=False)
    return len(done)


def vector_step(get_store: GetStore, lock: ContextManager[Any] | None = None, n: int = BATCH) -> tuple[int, int]:
    """One batch: take, embed outside the lock, commit.  Returns (taken, filled); (0, 0)
    when nothing waits."""
    lock = lock if lock is not None else nullcontext()
    with lock:
        batch = take(get_store(), n)
    if batch is None:
        return 0, 0
    embed(get_store(), batch)
    with lock:
        return len(batch.items), commit(get_store(), batch)


def save_index(get_store: GetStore, lock: ContextManager[Any] | None = None) -> bool:
    """Write the recall index file if this process is well ahead of it (the worker, when it
    has nothing else to do: a search never writes it), holding ``lock`` only to choose the
    rows and to bookkeep, not while it writes.  ``get_store`` may give a Memory."""
    with lock if lock is not None else nullcontext():
        target = get_store()
    if target is None:
        return False
    return getattr(target, "store", target).searcher.save_index(lock)


# -- extraction jobs ---------------------------------------------------------------------------------
def next_job(store: "Store", *, stuck: bool = False) -> tuple[int, dict] | None:
    """The oldest queued job the worker may run (``stuck``: also those failing too often)."""
    for seq, job in store.log.jobs():
        if stuck or job.get("attempts", 0) < MAX_ATTEMPTS:
            return seq, job
    return None


def job_turns(store: "Store", job: dict) -> tuple[list[Turn], dict | None]:
    """The turns a job extracts from (as stored now: forgotten ones are gone) and the meta
    its facts carry."""
    user = job["user"]
    if job["kind"] == "extract_memory":
        row = memories.row(store.sql, job["memory"])
        if row is None or row["user_id"] != user:
            return [], None
        return [Turn(row["text"], None, row["created_at"], None, user)], {"source_memory": job["memory"]}
    return stored_turns(store, job["beads"], user, fresh=set(job.get("fresh") or [])), None


def _fail(get_store: GetStore, lock: ContextManager[Any], seq: int, job: dict, exc: BaseException) -> None:
    message = exc.message if isinstance(exc, BMError) else f"{type(exc).__name__}: {exc}"
    with lock:
        with get_store().write() as t:
            current = t.get_job(seq) or job
            t.update_job(seq, {**current, "attempts": current.get("attempts", 0) + 1, "error": message})


def job_step(get_store: GetStore, lock: ContextManager[Any] | None = None, *, stuck: bool = False) -> dict | None:
    """Run the oldest runnable job to its end; returns its report (None: no job).  On a
    failure the job records it (attempts, error) and the error is raised."""
    lock = lock if lock is not None else nullcontext()
    with lock:
        store = get_store()
        found = next_job(store, stuck=stuck)
        if found is None:
            return None
        seq, job = found
        turns, meta = job_turns(store, job) if "facts" not in job else ([], None)
    try:
        if "facts" not in job:  # the extractor reads no store: no lock while it runs
            items, report = extract_facts(get_store(), turns, meta=meta)
            job = {**job, "facts": items, "report": report, "done": 0}
            with lock:
                with get_store().write() as t:
                    t.update_job(seq, job)
        with lock:
            store = get_store()
            with store.deferring_vectors():  # the facts' vectors (cached) land in rowid order
                return _store_job_facts(store, seq, job)
    except Exception as exc:
        _fail(get_store, lock, seq, job, exc)
        raise


def _store_job_facts(store: "Store", seq: int, job: dict) -> dict:
    """Store the job's facts from where it stopped; each commit records the progress, the
    last one acknowledges the job."""
    items = job["facts"][int(job.get("done", 0)):]
    kept = [item for item in items if _sources_here(store, item)]
    if len(kept) < len(items):  # turns forgotten since the extraction: their facts go
        job = {**job, "facts": kept, "done": 0}
        with store.write() as t:
            t.update_job(seq, job)
    start = int(job.get("done", 0))

    def progress(t: Any, n: int) -> None:
        if n >= len(kept):
            t.ack_job(seq)
        else:
            t.update_job(seq, {**job, "done": start + n})

    report = store_facts(store, kept, job["report"], user=job["user"], agent=job.get("agent"),
                         on_commit=progress)
    if not kept:
        with store.write() as t:
            t.ack_job(seq)
    return report


def _sources_here(store: "Store", item: dict) -> bool:
    """A fact whose every source turn was forgotten since the extraction is not stored."""
    sources = item.get("sources") or []
    return not sources or any(store.log.get_bead(b) is not None for b in sources)


def drain(get_store: GetStore, lock: ContextManager[Any] | None = None, *, stuck: bool = True,
          progress: Callable[[dict], None] | None = None) -> dict:
    """Do the whole backlog in the foreground (``bm queue run``): every waiting vector,
    then every job (those failing too, with ``stuck``); a job that fails stops it (raised)."""
    done = {"embedded": 0, "jobs": 0, "facts": 0}
    while True:
        taken, filled = vector_step(get_store, lock)
        if taken:
            done["embedded"] += filled
        else:
            report = job_step(get_store, lock, stuck=stuck)
            if report is None:
                return done
            done["jobs"] += 1
            done["facts"] += sum(report.get("facts", {}).values())
        if progress:
            progress(done)
