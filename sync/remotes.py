"""Open a configured remote (``remotes.toml``, sync/config.py) as a sync Remote, whatever its
type, and check one with a harmless round trip (``bm remote test``).

    s3        S3Remote (sync/s3.py): op streams in encrypted segments
    zep       MirrorRemote(ZepSink) (sync/mirror.py, sync/zep.py): the graph mirrored to Zep
    graphiti  MirrorRemote(GraphitiSink) (sync/graphiti.py): the graph in a self-hosted
              Graphiti on FalkorDB

Secrets are read from the environment variables the config names, when a remote is opened.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from brandmind.errors import BMError

from .config import RemoteConfig, load_remotes
from .handle import store_of


def open_remote(store: Any, cfg: RemoteConfig) -> Any:
    """A Remote for ``cfg``, bound to the open store (a StoreHandle; a Memory gives its
    .store); ``.cfg`` is set on it."""
    store = store_of(store)
    if cfg.type == "s3":
        from .s3 import open_remote as open_s3

        remote = open_s3(store, cfg)
    else:
        from .mirror import MirrorRemote

        remote = MirrorRemote(open_sink(cfg, Path(store.config.paths.data_dir), store), store)
    remote.cfg = cfg
    return remote


def open_sink(cfg: RemoteConfig, data_dir: Path, store: Any = None) -> Any:
    """The GraphSink of a zep / graphiti remote (no store needed, except for graphiti's query
    embeddings: ``store``'s embedder)."""
    if cfg.type == "zep":
        from .zep import ZepSink

        return ZepSink(cfg.name, api_key_env=cfg.api_key_env or "ZEP_API_KEY", base_url=cfg.base_url,
                       cache_path=Path(data_dir) / f"zep_{cfg.name}_ids.json")
    if cfg.type == "graphiti":
        from .graphiti import GraphitiSink

        def embed(text: str) -> list[float]:
            if store is None:
                raise BMError("graphiti search needs the store's embedder", hint="open the store first")
            return [float(x) for x in store.embedder.embed_query(text)]

        return GraphitiSink(cfg.name, embed, host=cfg.host or "127.0.0.1", port=int(cfg.port or 6379),
                            username=cfg.username, password_env=cfg.password_env, database=cfg.database or "bm")
    raise BMError(f"remote {cfg.name!r} has type {cfg.type!r}, which holds no graph",
                  hint="use a zep or graphiti remote")


def open_all(store: Any, *, types: tuple[str, ...] | None = None) -> list[Any]:
    """Every configured remote (of these types): op-log (S3) remotes first, then by name."""
    store = store_of(store)
    configs = load_remotes(store.config.paths.data_dir)
    return [open_remote(store, cfg) for cfg in sorted(configs.values(), key=lambda c: (c.mirror, c.name))
            if types is None or cfg.type in types]


def probe(cfg: RemoteConfig, data_dir: Path) -> dict[str, Any]:
    """One harmless round trip: ``{"remote", "type", "url", "ok", "latency_ms", ...}``.
    S3: write, read and delete an encrypted probe object and check conditional writes;
    zep / graphiti: one read-only request.  A failure is reported in ``error`` / ``hint``."""
    out: dict[str, Any] = {"remote": cfg.name, "type": cfg.type, "url": cfg.url()}
    t0 = time.perf_counter()
    try:
        if cfg.type == "s3":
            from brandmind.crypto import IMPORT_HINT, Keyring
            from .s3 import S3Remote

            ring = Keyring(data_dir)
            if ring.has_key():
                out.update(S3Remote(cfg, ring).probe())
            else:  # test with a throwaway key: testing must not make this store's key
                out.update(S3Remote(cfg, Keyring.throwaway(data_dir)).probe(check_key=False))
                out["key_id"] = None
                if out.get("has_data"):
                    out.update(ok=False, error="this store has no sync key, and other devices already "
                                               "sync through this remote with theirs",
                               hint=IMPORT_HINT)
                else:
                    out["note"] = ("this store has no sync key yet: the first `bm sync now` makes one "
                                   "(or `bm sync key import FILE` to use another device's)")
        else:
            sink = open_sink(cfg, data_dir)
            try:
                sink.ping()
            finally:
                close = getattr(sink, "close", None)
                if close is not None:
                    close()
            out["ok"] = True
    except BMError as exc:
        out.update(ok=False, error=exc.message, hint=exc.hint)
    out["latency_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    return out
