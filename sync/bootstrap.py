"""Whether a sync round starts the store from the remote's snapshot: decided here, once, for
``bm sync now`` (cli/sync.py) and the daemon (sync/daemon.py).

A round bootstraps when it pulls, the remote holds snapshots (an
:class:`~brandmind.sync.remote.ObjectRemote`: S3) and the store has no op at all (or the
user asked, ``bm sync now --bootstrap``: then a store with ops is an error, see
``snapshot.bootstrap``).  What a failure does is the caller's: the CLI reports it, the daemon
logs it and replays every op instead.
"""
from __future__ import annotations

from typing import Any

from . import snapshot
from .handle import store_of
from .remote import ObjectRemote


def should_bootstrap(store: Any, remote: Any, *, pull: bool = True, forced: bool = False) -> bool:
    """The rule (module docstring).  ``store``: a StoreHandle (a Memory gives its .store)."""
    return bool(pull) and isinstance(remote, ObjectRemote) and (forced or snapshot.is_empty(store_of(store)))


def maybe_bootstrap(store: Any, remote: Any, *, pull: bool = True, forced: bool = False) -> dict | None:
    """Install the remote's snapshot when :func:`should_bootstrap` says so; returns what was
    installed (``snapshot.bootstrap``), or None."""
    if not should_bootstrap(store, remote, pull=pull, forced=forced):
        return None
    return snapshot.bootstrap(store, remote, forced=forced)
