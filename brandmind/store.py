"""``Store``: the narrow handle the domain modules and ``sync`` receive instead of ``Memory``.

It owns the op log (LMDB, ``oplog.py``), the blob store, the SQLite projection
(``sqlstore.py``) and the embedder, and offers what a feature needs of them:

- ``user(u)``: the user a call acts for (the configured default when ``u`` is None);
- ``write()`` / ``catch_up()``: append ops to the log, then apply them to SQLite in log order
  (``replication.catch_up``: each replica's ops in seq order);
- ``receive_ops(ops)``: store and apply ops pulled from another replica;
- ``embed_docs(texts)`` / ``vector_for(text)`` / ``embedder``: vectors, cached in the log;
- ``deferring_vectors()``: in this thread, memories are stored without a vector, which the
  backlog makes later (brandmind/backlog.py: the resident daemon's worker);
- ``reopen()`` / ``swap_index()``: close and reopen the files (a snapshot installed under the
  store, a rebuilt index).

The layer above (``Memory`` and its sub-APIs) is built on it; ``sync.remote.StoreHandle`` is
the Protocol of it that ``sync`` depends on.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from . import replication, validate
from .clock import now_millis
from .config import Config
from .embed import embedder_from_config, name_from_config
from .errors import ModelMismatch, StoreCorrupt, StoreMissing
from .opcheck import check as check_op
from .oplog import BlobStore, OpLog
from .projection import apply_sql_side
from .sqlstore import SQLStore
from .storage.memories import has_pending
from .storage.search import SearchIndex

Progress = Callable[[int, int], None]  # (done, total)


class Store:
    """The files of one bm store and the embedder; see the module docstring."""

    def __init__(self, config: Config, *, embedder: Any = None, create: bool = False,
                 check_model: bool = True, repair: bool = False) -> None:
        self.config = config
        self.paths = config.paths
        self._embedder = embedder
        self._local = threading.local()  # per thread: whether vectors are deferred
        self.embedder_name = embedder.name if embedder is not None else name_from_config(config)
        self._open(create=create, check_model=check_model, repair=repair)

    def _open(self, *, create: bool, check_model: bool, repair: bool) -> None:
        """Open the log, the blobs and the index (and bring the index up to date)."""
        paths = self.paths
        if not create and not (paths.lmdb_dir / "data.mdb").exists():
            raise StoreMissing(f"no bm store at {paths.data_dir}",
                               hint="run `bm init` first (or point BM_HOME at an existing store)")
        paths.data_dir.mkdir(parents=True, exist_ok=True)
        self.log = OpLog(paths.lmdb_dir, create=create, check=check_op)  # every append is checked
        self.blobs = BlobStore(paths.blob_dir)
        self.sql: SQLStore | None = None
        try:
            self._open_index(check_model=check_model, repair=repair)
        except BaseException:
            # LMDB refuses a second open of an env in one process: never leave it open behind
            # a failed open (e.g. ModelMismatch, then a retry with check_model=False)
            if self.sql is not None:
                self.sql.close()
            self.log.close()
            raise

    def _open_index(self, *, check_model: bool, repair: bool) -> None:
        paths = self.paths
        # a deleted index is created empty and refilled from the log by the catch-up
        try:
            self.sql = SQLStore(paths.sqlite_file, model=self.embedder_name, dim=self.dim,
                                create=True, check_model=check_model)
        except StoreCorrupt:
            if not repair:
                raise
            stamp = now_millis()
            for suffix in ("", "-wal", "-shm"):
                bad = Path(str(paths.sqlite_file) + suffix)
                if bad.exists():
                    os.replace(bad, Path(f"{bad}.corrupt-{stamp}"))
            self.sql = SQLStore(paths.sqlite_file, model=self.embedder_name, dim=self.dim,
                                create=True, check_model=check_model)
        self.searcher = SearchIndex(self.sql)
        self.catch_up()

    def reopen(self, *, check_model: bool = True) -> None:
        """Open the files again after ``close()`` (a snapshot was installed under the store)."""
        self._open(create=False, check_model=check_model, repair=False)

    def swap_index(self, sql: SQLStore, embedder_name: str | None = None) -> None:
        """Use ``sql`` as the projection from now on (a rebuilt or re-embedded index)."""
        self.sql = sql
        if embedder_name:
            self.embedder_name = embedder_name
        self.searcher = SearchIndex(sql)
        self.searcher.recall_index()  # its recall index is written now, not by the first query

    def close(self) -> None:
        if self.sql is not None:
            self.searcher.close()
            self.sql.close()
        self.log.close()

    # -- the embedder ------------------------------------------------------------
    def dim(self) -> int:
        return int(self.embedder.dim)

    @property
    def embedder(self) -> Any:
        if self._embedder is None:  # one provider or a chain of them (brandmind/embed/chain.py)
            self._embedder = embedder_from_config(self.config)
        return self._embedder

    @property
    def embedder_loaded(self) -> Any:
        """The embedder if one is loaded or was given, else None (never loads a model)."""
        return self._embedder

    def embed_docs(self, texts: list[str]) -> Any:
        """``texts`` as a float32 matrix of the store's dimension (ModelMismatch otherwise)."""
        import numpy as np

        vecs = np.asarray(self.embedder.embed_documents(texts), dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[1] != self.sql.dim:
            raise ModelMismatch(
                f"the embedder returned {vecs.shape[-1]}-d vectors; this store holds {self.sql.dim}-d ones",
                hint="run `bm reindex` to re-embed the store with the configured model")
        return vecs

    @contextmanager
    def deferring_vectors(self, on: bool = True) -> Iterator[None]:
        """In this thread (the daemon serves requests in threads while its worker embeds),
        ``remember`` and ``ingest`` store memories without embedding them: each gets its
        keywords at once and a ``vec_pending`` row; brandmind/backlog.py makes the vectors."""
        before = self.deferring
        self._local.defer = on
        try:
            yield
        finally:
            self._local.defer = before

    @property
    def deferring(self) -> bool:
        """Whether this thread defers vectors (``deferring_vectors``)."""
        return bool(getattr(self._local, "defer", False))

    def deferred_vector(self, raw: bytes | None) -> bytes | None:
        """While deferring: a cached vector is used at once only when no memory waits for
        one, so vectors land in rowid order; otherwise the memory waits its turn and the
        backlog takes the vector from the cache."""
        if raw is None or len(raw) != 4 * self.sql.dim or has_pending(self.sql):
            return None
        return raw

    def vector_for(self, text: str) -> bytes | None:
        """The vector of ``text``: from the log's vector cache, else embedded and cached
        (None when this thread defers vectors: the backlog makes it)."""
        raw = self.log.cached_vector(self.sql.model, text)
        if self.deferring:
            return self.deferred_vector(raw)
        if raw is not None and len(raw) == 4 * self.sql.dim:
            return raw
        vec = self.embed_docs([text])[0].tobytes()
        with self.log.write() as t:
            t.cache_vector(self.sql.model, text, vec)
        return vec

    # -- ops ------------------------------------------------------------------------
    def user(self, user: str | None) -> str:
        """The user a call acts for: ``user``, else the configured default; validated."""
        return validate.name(user if user is not None else self.config.user, what="user")

    def write(self) -> Any:
        """A write transaction on the op log (``with store.write() as t: t.append(...)``);
        call ``catch_up()`` after it to apply what was appended."""
        return self.log.write()

    def catch_up(self, progress: Progress | None = None, *, fresh: dict[int, dict] | None = None,
                 vectors: dict[str, bytes] | None = None) -> int:
        """Apply every op the SQLite projection has not seen yet; returns how many.
        ``fresh`` (arrival -> op) and ``vectors`` (text -> vector): what a caller that just
        stored ops has in hand already (replication.receive_batch, ingest); while deferring,
        a text mapped to None is known to have no cached vector."""
        if self.sql.applied() >= self.log.last_arrival():
            return 0
        vector_for = self.vector_for
        if vectors:
            deferring = self.deferring

            def vector_for(text: str) -> bytes | None:
                if deferring and text in vectors:  # known: no second cache read
                    return self.deferred_vector(vectors[text])
                vec = vectors.get(text)
                return vec if vec is not None else self.vector_for(text)

        # arrival order, each replica's ops in seq order (brandmind/replication.py)
        n = replication.catch_up(self.log, self.sql, vector_for, progress, apply=apply_sql_side, fresh=fresh)
        self.searcher.invalidate()
        return n

    def receive_ops(self, ops: Iterable[dict], *, now_ms: int | None = None, apply: bool = True) -> dict:
        """Store ops pulled from another replica (sync) and apply them: ``{"received",
        "duplicates", ...}``.  Ops stamped too far ahead of this device's clock are held
        back, not applied; SyncConflict: nothing of the batch is stored.  ``apply=False``
        leaves applying to SQLite to a later catch-up.  See brandmind/replication.py."""
        return replication.receive_batch(self, ops, now_ms=now_ms, apply=apply)
