"""The helper process that applies a big pull's ops while the round stores the next batches
(sync/applier.py): the result is the same store as applying in the round, whatever the
helper does (finishes, dies at once, or stops on a vector it cannot find)."""
from __future__ import annotations

import json
import shutil
import sys

import pytest

import brandmind.sync.engine as engine
from brandmind.config import Config
from brandmind.exchange import export_lines
from brandmind.memory import Memory
from brandmind.sync import applier
from brandmind.sync.remote import MemoryRemote


@pytest.fixture
def stores(tmp_path):
    mems = {n: Memory(create=True, config=Config.load(tmp_path / n)) for n in ("a", "b", "c", "d")}
    yield mems
    for mem in mems.values():
        mem.close()
    shutil.rmtree(tmp_path, ignore_errors=True)


def fill(a: Memory, b: Memory) -> None:
    """Two devices' histories: turns, facts and their retires, forgets (of a memory and of
    a user), blocks, graph links; B's retire of A's fact is stored before A's add arrives."""
    a.ingest([json.dumps({"role": "user", "speaker": "Ann", "content": f"turn {i} about topic {i % 7}"})
              for i in range(120)], user="ann")
    a.facts.add({"subject": "Ann", "predicate": "lives_in", "object": "Paris"}, user="ann")
    gone = a.remember("Ann's PIN is 1234", user="ann")
    a.forget(gone["id"])
    a.remember("Bob plays chess on Sundays", user="bob")
    a.forget_user("bob")
    a.blocks.set("human", "Ann likes green tea", user="ann")
    kim, acme = (a.graph.add_node(name, user="ann") for name in ("Kim", "Acme"))
    a.graph.add_edge(kim["id"], acme["id"], "works_at", user="ann")
    b.receive_ops(a.log.ops_of(a.log.replica, 0))
    b.facts.add({"subject": "Ann", "predicate": "lives_in", "object": "Berlin"}, user="ann")
    b.blocks.append("human", "and chess", user="ann")
    for i in range(40):
        b.remember(f"note {i}: the deadline moved to week {i}", user="ann")


def pull_all(mem: Memory, remote: MemoryRemote) -> dict:
    report = engine.sync_once(mem, remote, push=False)
    assert report["errors"] == []
    return report


def hub_with(a: Memory, b: Memory) -> MemoryRemote:
    remote = MemoryRemote("hub")
    # B's ops first: a store pulling them holds B's retire before A's add (it waits there)
    for mem in (b, a):
        assert engine.sync_once(mem, remote, pull=False)["errors"] == []
    return remote


def record_helpers(monkeypatch, executable: str | None = None) -> list:
    """Every pull from here on starts a helper (run with ``executable`` if given); returns
    the list each helper's exit status is appended to as its round finishes with it."""
    codes: list = []

    class Recording(applier.Applier):
        def __init__(self, mem):
            with monkeypatch.context() as m:
                if executable:
                    m.setattr(sys, "executable", executable)
                super().__init__(mem)

        def finish(self):
            codes.append(super().finish())
            return codes[-1]

    monkeypatch.setattr(engine, "Applier", Recording)
    monkeypatch.setattr(engine, "APPLIER_MIN_OPS", 1)
    return codes


def test_a_pull_applied_by_the_helper_gives_the_same_store(stores, monkeypatch):
    a, b, c, d = stores["a"], stores["b"], stores["c"], stores["d"]
    fill(a, b)
    remote = hub_with(a, b)
    codes = record_helpers(monkeypatch)
    monkeypatch.setattr(engine, "PULL_BATCH", 37)  # many batches: the helper runs behind the round
    pull_all(c, remote)
    assert codes == [0]  # one helper, and it applied everything itself
    monkeypatch.setattr(engine, "APPLIER_MIN_OPS", 10**9)
    pull_all(d, remote)
    assert codes == [0]  # no helper for the in-round pull
    a.receive_ops(b.log.ops_of(b.log.replica, 0))
    expected = list(export_lines(a))
    assert list(export_lines(c)) == expected
    assert list(export_lines(d)) == expected
    assert c.sql.applied() == c.log.last_arrival()
    # and recall in the round's process sees the pulled state
    assert [m["text"] for m in c.recall("where does Ann live", user="ann", k=3)][:1] == \
           [m["text"] for m in d.recall("where does Ann live", user="ann", k=3)][:1]
    c.admin.rebuild()
    assert list(export_lines(c)) == expected


@pytest.mark.parametrize("how", ["dies", "no vectors"])
def test_the_round_applies_what_the_helper_did_not(stores, monkeypatch, how):
    """A helper that fails at once, or stops at the first vector missing from the cache,
    leaves the rest to the round: the store ends the same."""
    a, b, c = stores["a"], stores["b"], stores["c"]
    fill(a, b)
    remote = hub_with(a, b)
    codes = record_helpers(monkeypatch, "/bin/false" if how == "dies" else None)  # /bin/false exits 1 at once
    if how == "no vectors":
        # the round caches nothing: every memory's vector is missing for the helper
        monkeypatch.setattr("brandmind.replication._embed_ahead", lambda mem, ops: {})
    monkeypatch.setattr(engine, "PULL_BATCH", 50)
    report = pull_all(c, remote)
    assert codes and codes[0] == (1 if how == "dies" else 3)
    assert report["applier"] == ("exit status 1" if how == "dies" else "a pulled memory's vector is not in the cache")
    a.receive_ops(b.log.ops_of(b.log.replica, 0))
    assert list(export_lines(c)) == list(export_lines(a))
    assert c.sql.applied() == c.log.last_arrival()
