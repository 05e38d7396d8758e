"""``StoreHandle``: what ``sync`` uses of an open store (``brandmind.store.Store``).

Sync never reaches into ``Memory``: every function of this package takes a store handle,
the Protocol below, which ``brandmind.store.Store`` satisfies (``mem.store`` of a Memory).
For convenience a ``Memory`` is accepted too: :func:`store_of` takes its ``.store``.

Features of the layers above the store come from their own classes over the same store
(``brandmind.admin.Admin(store).reindex()`` after a snapshot made with another model);
remote-assisted recall (assist.py) is given the Memory, whose ``recall`` it merges with.
"""
from __future__ import annotations

from typing import Any, Iterable, Protocol


class StoreHandle(Protocol):
    """The narrow handle of an open store (``brandmind.store.Store``)."""

    config: Any          # brandmind.config.Config (paths, sync_* settings)
    paths: Any           # brandmind.config.Paths (data_dir, lmdb_dir, sqlite_file, blob_dir)
    log: Any             # brandmind.oplog.OpLog
    blobs: Any           # brandmind.oplog.BlobStore
    sql: Any             # brandmind.sqlstore.SQLStore
    searcher: Any        # brandmind.recall.Searcher
    embedder_name: str

    @property
    def embedder(self) -> Any: ...

    def user(self, user: str | None) -> str: ...

    def write(self) -> Any: ...

    def catch_up(self, progress: Any = None) -> int: ...

    def receive_ops(self, ops: Iterable[dict], *, now_ms: int | None = None, apply: bool = True) -> dict: ...

    def embed_docs(self, texts: list[str]) -> Any: ...

    def vector_for(self, text: str) -> bytes: ...

    def reopen(self, *, check_model: bool = True) -> None: ...

    def close(self) -> None: ...


def store_of(obj: Any) -> StoreHandle:
    """The store handle of ``obj``: a Store itself, or what holds one as ``.store`` (a Memory)."""
    inner = getattr(obj, "store", None)  # (a Store has no .store)
    return inner if inner is not None else obj
