"""One rule decides whether a sync round starts the store from the remote's snapshot
(sync/bootstrap.py): `bm sync now` and the daemon take the same decision for the same case.

The remotes are in-process: an ObjectRemote stand-in (what S3 offers: named objects, so
snapshots) and a plain op-stream remote (MemoryRemote: no snapshots); the snapshot install
itself is recorded, not run (test_sync_s3.py installs real ones on a real S3 server).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from brandmind.sync import bootstrap, snapshot
from brandmind.sync.remote import MemoryRemote, ObjectRemote


class ObjectStandIn(MemoryRemote):
    """An op-stream remote that also holds objects (as S3 does), with no snapshot in it."""

    def __init__(self, name: str = "objects") -> None:
        super().__init__(name, accepts_pushes_for_others=False)
        self.keyring = None
        self.cfg = type("Cfg", (), {"type": "s3", "url": lambda self: "s3://stand-in"})()

    def where(self, rel: str) -> str:
        return f"stand-in://{rel}"

    def get(self, rel: str):
        return None

    def put(self, rel: str, body: bytes, **cond: str) -> str:
        return ""

    def delete(self, rel: str) -> None:
        return None

    def read_doc(self, rel: str):
        return None, None

    def cas(self, rel: str, merge):
        return merge(None)

    def map(self, fn, items):
        return map(fn, items)

    def pull_blobs(self, ops) -> None:
        return None


class Streams(MemoryRemote):
    def __init__(self, name: str = "streams") -> None:
        super().__init__(name, accepts_pushes_for_others=False)
        self.cfg = type("Cfg", (), {"type": "zep", "url": lambda self: "zep://stand-in"})()


CASES = [  # (store has ops, remote kind, the round pulls) -> bootstrap?
    (False, "objects", True, True),
    (False, "objects", False, False),
    (True, "objects", True, False),
    (False, "streams", True, False),
    (True, "streams", True, False),
]


@pytest.fixture
def installs(monkeypatch: pytest.MonkeyPatch) -> list:
    """Record snapshot installs instead of running them; the round itself does nothing."""
    calls: list = []

    def fake_install(store, remote, *, forced=False):
        calls.append((remote.name, forced))
        return None

    def fake_round(store, remote, *, push=True, pull=True, fault=None):
        return {"remote": remote.name, "pushed": {}, "pulled": {}, "errors": [], "version_vector": {}}

    monkeypatch.setattr(snapshot, "bootstrap", fake_install)
    from brandmind.sync import engine

    monkeypatch.setattr(engine, "sync_once", fake_round)
    return calls


def _remote(kind: str):
    return ObjectStandIn() if kind == "objects" else Streams()


def test_the_object_stand_in_is_what_snapshots_need():
    assert isinstance(ObjectStandIn(), ObjectRemote) and not isinstance(Streams(), ObjectRemote)


@pytest.mark.parametrize("has_ops,kind,pull,want", CASES)
def test_cli_and_daemon_decide_alike(store: Path, bm, monkeypatch, installs, has_ops, kind, pull, want):
    from brandmind.cli import sync as cli_sync
    from brandmind.memory import Memory
    from brandmind.sync import daemon as d

    if has_ops:
        with Memory() as mem:
            mem.remember("a note, so the store is not empty")
    with Memory() as mem:
        assert bootstrap.should_bootstrap(mem.store, _remote(kind), pull=pull) is want
    # the CLI: `bm sync now` with the remote
    monkeypatch.setattr(cli_sync, "_remotes", lambda store, name: [_remote(kind)])
    res = bm("sync", "now", "--json", *([] if pull else ["--no-pull"]))
    assert res.code == 0, res
    cli_decision = bool(installs)
    installs.clear()
    # the daemon: one step with the same remote
    with Memory() as mem:
        dm = d.Daemon(mem, remotes=[_remote(kind)], clock=lambda: 0.0, state_file=mem.paths.data_dir / "d.json")
        rem = _remote(kind)
        dm._sched(rem.name, 0.0)
        dm.step(rem, True, pull, 0)
    daemon_decision = bool(installs)
    assert cli_decision is daemon_decision is want


def test_bootstrap_when_asked_on_a_store_with_ops_is_an_error_on_the_cli_only(store: Path, monkeypatch):
    """--bootstrap forces the decision (then the install refuses a store with ops); the
    daemon never forces it."""
    from brandmind.memory import Memory

    with Memory() as mem:
        mem.remember("a note")
        assert bootstrap.should_bootstrap(mem.store, ObjectStandIn(), forced=True)
        assert not bootstrap.should_bootstrap(mem.store, ObjectStandIn())
        assert not bootstrap.should_bootstrap(mem.store, Streams(), forced=True)
