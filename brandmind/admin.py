"""Looking after a store: ``rebuild`` (every projection again from the op log), ``reindex``
(every memory re-embedded with the configured model), ``stats``, ``users`` and ``doctor``.
``mem.admin`` is an ``Admin`` over the store (brandmind/store.py)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from . import backlog, blocks
from .errors import BMError
from .opcheck import problem, quarantined
from .projection import apply_log_side, apply_sql_side
from .replication import catch_up
from .sqlstore import SQLStore, copy_device_local, vec_extension_path
from .storage import memories
from .storage import stats as q

if TYPE_CHECKING:  # pragma: no cover
    from .store import Progress, Store


def _kept_vectors(store: "Store") -> Callable[[str], "bytes | None"]:
    """Where a rebuild finds a memory's vector: the projection it replaces (vectors are kept
    there, not in the log's cache: brandmind/oplog.py), else ``Store.vector_for`` (the log's
    cache, else the embedder: only for what the old projection lacks, e.g. when it is lost)."""
    rows = memories.rows_by_text(store.sql)

    def vector_for(text: str) -> "bytes | None":
        rowid = rows.get(hash(text))
        vec = memories.vector_of_text(store.sql, rowid, text) if rowid is not None else None
        return vec if vec is not None else store.vector_for(text)
    return vector_for


class Admin:
    """``mem.admin``: rebuild, reindex, stats, users, doctor."""

    def __init__(self, store: "Store") -> None:
        self.store = store

    def rebuild(self, progress: "Progress | None" = None) -> dict:
        """Rebuild every projection from the op log (LMDB beads and the SQLite index)."""
        store = self.store
        live = store.paths.sqlite_file
        tmp = live.with_name("memory.sqlite.rebuild")
        _unlink(tmp, "", "-wal", "-shm")
        model, dim = store.sql.model, store.sql.dim
        fresh = SQLStore(tmp, model=model, dim=lambda: dim, create=True, check_model=False)
        total = store.log.last_arrival()
        with store.write() as t:
            t.clear("beads", "bead_time", "bead_keys")
            for _, op in store.log.ops_after(0):
                if problem(op) is None:  # an invalid op is skipped (quarantined by the catch-up)
                    apply_log_side(t, op)
        # the same order as the live catch-up: arrival order, each replica's ops in seq order
        ops = catch_up(store.log, fresh, _kept_vectors(store), progress, apply=apply_sql_side)
        copy_device_local(store.sql, fresh)  # e.g. remote_map: not in the op log
        fresh.truncate_wal()
        fresh.close()
        store.sql.close()
        _unlink(live, "-wal", "-shm")
        os.replace(tmp, live)
        _unlink(tmp, "-wal", "-shm")
        store.swap_index(SQLStore(live, model=model, dim=lambda: dim, check_model=False))
        if progress:
            progress(ops, total)
        return {"ops": ops, "memories": q.count(store.sql, "memories"), "beads": store.log.count("beads"),
                "skipped": q.count(store.sql, "quarantine")}

    def reindex(self, progress: "Progress | None" = None, batch: int = 128) -> dict:
        """Re-embed every memory with the configured embedder and swap the vectors in."""
        import numpy as np

        store = self.store
        rows = q.memory_texts(store.sql)
        name = store.embedder.name
        vecs: list[bytes] = []
        for i in range(0, len(rows), batch):
            chunk = [r["text"] for r in rows[i:i + batch]]
            arr = np.asarray(store.embedder.embed_documents(chunk), dtype=np.float32)
            vecs.extend(v.tobytes() for v in arr)
            if progress:
                progress(min(i + batch, len(rows)), len(rows))
        dim = int(store.embedder.dim)
        with store.sql.write():
            store.sql.replace_vectors(zip(rows, vecs), name, dim)
        store.swap_index(store.sql, name)
        return {"memories": len(rows), "model": name, "dim": dim}

    def stats(self, *, user: str | None = None) -> dict:
        store = self.store
        by_type = q.memories_by_type(store.sql, user)
        nodes, edges = q.graph_counts(store.sql, user)
        counts = {"memories": sum(by_type.values()),
                  "beads": len(store.log.bead_ids(user, None)) if user else store.log.count("beads"),
                  "nodes": nodes, "edges": edges}
        per_user = self.users()
        size = sum(f.stat().st_size for f in store.paths.data_dir.rglob("*") if f.is_file())
        return {"store": str(store.paths.data_dir), "replica": store.log.replica,
                "model": store.sql.model, "dim": store.sql.dim, "counts": counts,
                "memories_by_type": by_type, "users": list(per_user), "per_user": per_user,
                "ops": store.log.count("ops"), "blobs": sum(1 for _ in store.blobs.digests()), "bytes": size}

    def users(self) -> dict[str, dict[str, int]]:
        """Every user with memories or beads, by name: ``{user: {"memories": n, "beads": n}}``."""
        out = {u: {"memories": n, "beads": 0} for u, n in q.memories_by_user(self.store.sql).items()}
        for user, n in self.store.log.bead_counts().items():
            out.setdefault(user, {"memories": 0, "beads": 0})["beads"] = n
        return dict(sorted(out.items()))

    def has_user(self, user: str) -> bool:
        """Whether ``user`` has anything stored: a memory or a bead."""
        return q.has_memories(self.store.sql, user) or bool(self.store.log.bead_ids(user, 1))

    def doctor(self) -> list[dict]:
        """Checks of the store, the model, the extension and the disk."""
        checks: list[dict] = []

        def check(name: str, ok: bool, detail: str, hint: str | None = None) -> None:
            checks.append({"check": name, "ok": ok, "detail": detail, "hint": None if ok else hint})

        self._check_index(check)
        self._check_recall(check)
        self._check_files(check)
        check(*blocks.Blocks(self.store).doctor_check())  # blocks over their limit after a merge, updates waiting
        return checks

    def _check_index(self, check: Any) -> None:
        store = self.store
        problems = store.sql.integrity()
        check("memory index", not problems,
              "; ".join(problems) or f"{q.count(store.sql, 'memories')} memories", "run `bm rebuild`")
        behind = store.log.last_arrival() - store.sql.applied()
        check("index up to date", behind == 0, f"{behind} op(s) not applied" if behind else "all ops applied",
              "run `bm rebuild`")
        lag = backlog.status(store)  # work accepted by the daemon and not done yet
        check("backlog", not lag["jobs_stuck"],
              f"{lag['vectors_pending']} vector(s) waiting, {lag['jobs_queued']} extraction job(s) queued"
              + (f", {lag['jobs_failing']} failing: {lag['last_error']}" if lag["jobs_failing"] else ""),
              "`bm queue run` retries them in the foreground (see the error above)")
        bad = quarantined(store.sql)  # ops of the log that are skipped, not applied
        check("quarantined ops", not bad,
              "; ".join(f"{x['op_id']} ({x['kind']}): {x['error']}" for x in bad[:5])
              + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "") if bad else "none",
              f"{len(bad)} op(s) in the log are skipped (written by an older bm or a faulty peer); the "
              "rest of the store works. To be rid of them, `bm export` and `bm import` into a fresh store")

    def _check_recall(self, check: Any) -> None:
        """The recall index (storage/recallindex.py) holds every memory, and a vector for each
        one that is not waiting for it."""
        store = self.store
        try:
            got = store.searcher.recall_index().summary()
        except (OSError, ValueError) as exc:
            check("recall index", False, f"cannot read it: {exc}", "run `bm rebuild`")
            return
        memories = q.count(store.sql, "memories")
        vectors = memories - backlog.status(store)["vectors_pending"]
        ok = got["rows"] == memories and got["vectors"] == vectors
        check("recall index", ok, f"{got['rows']} of {memories} memories, {got['vectors']} of {vectors} vectors, "
              f"{got['behind']} row(s) newer than its file",
              "run `bm rebuild` (the index file, data/recall.idx, is rebuilt from SQLite)")

    def _check_files(self, check: Any) -> None:
        store = self.store
        blob_dir = store.paths.blob_dir
        missing = sum(1 for bead in store.log.iter_beads()
                      if "blob" in bead and not (blob_dir / bead["blob"][:2] / bead["blob"]).exists())
        check("blobs", missing == 0, f"{missing} missing blob(s)" if missing else "all bead blobs present",
              "restore blobs/ from a backup")
        check("sqlite-vec", True, f"{q.vec_version(store.sql)} loaded from {vec_extension_path()}")
        try:
            vec = store.embedder.embed_query("doctor")
            ok = len(vec) == store.sql.dim
            check("embedder", ok, f"{store.embedder.name}, {len(vec)}-d"
                  + ("" if ok else f" (store is {store.sql.dim}-d)"), "run `bm reindex`")
        except BMError as exc:
            check("embedder", False, exc.message, exc.hint)
        free = shutil.disk_usage(store.paths.data_dir).free
        check("disk", free > 200 * 2**20, f"{free / 2**30:.1f} GiB free", "free some disk space")


def _unlink(path: Path, *suffixes: str) -> None:
    for suffix in suffixes:
        Path(str(path) + suffix).unlink(missing_ok=True)
