"""`bm worker --sync s3://BUCKET/PREFIX`: every user's store of a worker fleet synced to S3 by
the existing sync (sync/engine.py, sync/s3.py), so a worker machine can be replaced.

* **Where.** The store of user ``u`` (``ROOT/<user_dirname(u)>``) gets the S3 remote
  ``origin`` at ``s3://BUCKET/PREFIX/<user_dirname(u)>`` (``<data_dir>/remotes.toml``, as
  ``bm remote add s3`` writes it), so ``BM_HOME=ROOT/<dir> bm sync now`` works there too.
  Credentials: the usual boto3 chain (``AWS_*`` variables, ``--sync-profile``, a role).
* **The key.** One sync key for the fleet (``--sync-key FILE``, from ``bm sync key export``),
  imported into each store as its active key.  Not one per user: a replacement machine would
  then need each user's key from somewhere off the machine, i.e. a key store sealed with a
  fleet key anyway; and a worker machine holds every tenant's plaintext already.  Tenants are
  kept apart by their prefixes (and the worker's own isolation), not by keys.
* **When.** On opening a user's store (first event of the user in this worker, or after the
  shard's lease came back from another worker) the store is synced (:meth:`FleetSync.attach`):
  an empty store (a new machine) is first started from the remote's snapshot if there is one,
  then every op it lacks is pulled, and what it has not pushed is pushed, *before* the event
  is stored.  After events are committed the worker pushes each user's store at most every
  ``--sync-every`` seconds, and at ``--drain`` / exit, and acknowledges the events only once
  their push succeeded (sync/broker_worker.py): Redis keeps an unacknowledged event pending,
  so a machine lost between commit and push leaves its events to the next worker, which
  restores the store from S3 (without them) and stores them again; lost between push and ack,
  the restored store holds them already and ``ingest`` skips their ids.  Nothing is lost or
  stored twice either way.
* **Snapshots.** After a push, the user's remote is compacted (sync/compact.py: the segments
  folded into a snapshot, which a new machine starts from) when ``sync_compact_interval``
  (the store's config, 86400 s by default; ``BM_SYNC_COMPACT_INTERVAL``) has passed since
  its last compaction (or there was none) and at least ``compact_min_ops`` (1,000) ops came
  since: a snapshot costs about 2 MB whatever the store holds, more than replaying a few
  hundred ops, and a fleet has many small stores.
* A sync that fails (S3 down, a wrong key) is :class:`SyncUnavailable`: the worker keeps the
  events pending and retries with backoff, it never dead-letters a turn for it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from brandmind.errors import BMError, InvalidInput, NotFound, UsageError

REMOTE = "origin"   # the remote's name in each user's store
COMPACT_MIN_OPS = 1000  # ops past the last snapshot before a store's remote is compacted
SYNC_EVERY = 30.0   # default seconds between pushes of one user's store


class SyncUnavailable(BMError):
    """A user's store could not be synced with S3 now (its events stay pending: retried)."""


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://BUCKET/PREFIX`` -> (bucket, prefix); a UsageError otherwise."""
    if not url.startswith("s3://") or not url[5:].split("/", 1)[0]:
        raise UsageError(f"--sync must be an s3://BUCKET/PREFIX URL, not {url!r}",
                         hint="e.g. --sync s3://my-bucket/bm-users")
    bucket, _, prefix = url[5:].partition("/")
    return bucket, prefix.strip("/")


def read_key(path: str | Path) -> str:
    """The text of a key file written by `bm sync key export` (checked)."""
    from brandmind.crypto import SyncKey

    p = Path(path).expanduser()
    if not p.is_file():
        raise NotFound(f"no such sync key file: {path}",
                       hint="make the fleet's key once: BM_HOME=$(mktemp -d) sh -c 'bm init >/dev/null && bm sync "
                            "key export -o fleet.key', then copy fleet.key to every worker machine")
    text = p.read_text(encoding="utf-8", errors="replace")
    try:
        SyncKey.from_export(text)
    except BMError as exc:
        raise InvalidInput(f"{path} is not a sync key: {exc.message}",
                           hint="give the file written by `bm sync key export -o FILE`") from None
    return text


class FleetSync:
    """The S3 sync of a worker's user stores; see the module docstring."""

    def __init__(self, url: str, key_text: str, *, endpoint_url: str | None = None, region: str | None = None,
                 profile: str | None = None, every: float = SYNC_EVERY,
                 compact_min_ops: int = COMPACT_MIN_OPS) -> None:
        from brandmind.sync.config import make_s3

        self.bucket, self.prefix = parse_s3_url(url)
        self.endpoint_url, self.region, self.profile = endpoint_url, region, profile
        self.key_text = key_text
        self.every = every
        self.compact_min_ops = compact_min_ops
        self.next_compact: dict[str, float] = {}  # per store directory: when to look at compact.json again
        make_s3(REMOTE, bucket=self.bucket, prefix=self._prefix("x"), endpoint_url=endpoint_url,
                region=region, profile=profile)  # bad input fails now, not at the first user

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/") + "/<user>" + (
            f" at {self.endpoint_url}" if self.endpoint_url else "")

    def _prefix(self, dirname: str) -> str:
        return f"{self.prefix}/{dirname}" if self.prefix else dirname

    def config(self, dirname: str) -> Any:
        """The RemoteConfig of the store in directory ``dirname`` (a ``user_dirname``)."""
        from brandmind.sync.config import make_s3

        return make_s3(REMOTE, bucket=self.bucket, prefix=self._prefix(dirname), endpoint_url=self.endpoint_url,
                       region=self.region, profile=self.profile)

    def attach(self, mem: Any, dirname: str) -> tuple[Any, dict]:
        """Configure the store's remote and key, then sync it (starting an empty store from the
        remote's snapshot); returns (the open remote, what the sync did).  SyncUnavailable when
        it cannot (nothing is stored then)."""
        from brandmind.crypto import Keyring
        from brandmind.sync.config import add_remote, load_remotes
        from brandmind.sync.remotes import open_remote

        data_dir = Path(mem.config.paths.data_dir)
        cfg = self.config(dirname)
        try:
            if load_remotes(data_dir).get(REMOTE) != cfg:  # new, or --sync changed: this fleet's remote
                add_remote(data_dir, cfg, replace=True)
            Keyring(data_dir).import_key(self.key_text)  # nothing changes when it is already the active key
            remote = open_remote(mem.store, cfg)
        except BMError as exc:
            raise SyncUnavailable(f"cannot set up the sync of {dirname}: {exc.message}", hint=exc.hint) from None
        return remote, self.sync(mem, remote, pull=True)

    def sync(self, mem: Any, remote: Any, *, pull: bool) -> dict:
        """Push the store's new ops (and with ``pull`` bootstrap / pull first); SyncUnavailable
        on any error."""
        from brandmind.sync.bootstrap import maybe_bootstrap
        from brandmind.sync.engine import sync_once

        out: dict = {}
        try:
            if pull:
                boot = maybe_bootstrap(mem.store, remote)
                if boot is not None:
                    out["bootstrap"] = boot
            report = sync_once(mem.store, remote, push=True, pull=pull)
        except BMError as exc:
            raise SyncUnavailable(f"sync with {remote.cfg.url()} failed: {exc.message}", hint=exc.hint) from None
        if report.get("errors"):
            err = report["errors"][0]
            raise SyncUnavailable(f"sync with {remote.cfg.url()} failed: {err.get('message')}", hint=err.get("hint"))
        out["pushed"] = sum((report.get("pushed") or {}).values())
        out["pulled"] = sum((report.get("pulled") or {}).values())
        return out

    def maybe_compact(self, mem: Any, remote: Any, dirname: str) -> dict | None:
        """Compact the store's remote when due (module docstring); what it did, or None.  A
        failure is returned as ``{"error": ...}`` (tried again an interval later), never raised."""
        import time

        from brandmind.sync.compact import compact, due, record
        from brandmind.sync.s3format import floor_of

        interval = int(getattr(mem.config, "sync_compact_interval", 0) or 0)
        now = time.monotonic()
        if interval <= 0 or now < self.next_compact.get(dirname, now):
            return None
        try:
            wait = due(remote, interval)
            if wait > 0:
                self.next_compact[dirname] = now + wait
                return None
            fresh = sum(mem.store.log.version_vector().values()) - sum(floor_of(record(remote)).values())
            if fresh < self.compact_min_ops:  # looked at again an interval later
                self.next_compact[dirname] = now + interval
                return None
            done = compact(mem.store, remote)
        except BMError as exc:
            self.next_compact[dirname] = now + interval
            return {"error": exc.message}
        self.next_compact[dirname] = now + interval
        return done
