"""A forgotten turn leaves the graph mirrors (sync/mirror.py: ``bead.forget`` -> the sink's
``delete_messages``).  Graphiti against a REAL FalkorDB (tests/falkor.py): the episode is
gone and no node or relationship there holds the forgotten text (checked with Cypher
through the falkordb client).  Zep (the real SDK against tests/zep_server.py) cannot delete
one message with its v4 API: the round says it may keep the turn, instead of pretending.
"""
from __future__ import annotations

import json
import secrets
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from falkor import GRAPHITI_MARKS, falkordb  # noqa: E402,F401  (falkordb: the fixture)
from brandmind.forgetting import forget_ids  # noqa: E402

PW_ENV = "BM_TEST_FALKOR_PASSWORD"
TURNS = [{"role": "user", "content": "my locker code is 4711, behind the gym"},
         {"role": "assistant", "content": "Noted, Ann."}]


def graphiti(fn):
    for mark in GRAPHITI_MARKS:
        fn = mark(fn)
    return fn


def holding(fk, graph, text):
    """(label or type, property) of every node or relationship on ``graph`` whose value holds ``text``."""
    if graph not in fk.graphs():
        return []
    found = []
    for cypher in ("MATCH (n) RETURN labels(n), properties(n)", "MATCH ()-[e]->() RETURN type(e), properties(e)"):
        for kind, props in fk.query(graph, cypher):
            found += [(str(kind), k) for k, v in props.items() if isinstance(v, str) and text in v]
    return found


def episodes(fk, graph):
    """(uuid, name = bead id) of the graph's episodes."""
    if graph not in fk.graphs():
        return []
    return [tuple(r) for r in fk.query(graph, "MATCH (e:Episodic) RETURN e.uuid, e.name ORDER BY e.name")]


@pytest.fixture
def graphiti_db(store, falkordb, monkeypatch, bm):
    """A graphiti remote ``graph`` (bm remote add) on the test server, in a namespace of its own."""
    monkeypatch.setenv(PW_ENV, falkordb.password)
    db = "f" + secrets.token_hex(4)
    res = bm("remote", "add", "graphiti", "graph", "--host", falkordb.host, "--port", falkordb.port,
             "--password-env", PW_ENV, "--database", db)
    assert res.code == 0, res.err
    return db


def ingest(bm, user="ann"):
    res = bm("ingest", "-", "-u", user, input="".join(json.dumps(t) + "\n" for t in TURNS))
    assert res.code == 0, res.err


def sync(bm) -> dict:
    res = bm("sync", "now", "--json")
    assert res.code == 0, res.err
    report = json.loads(res.out)["remotes"][0]
    assert report["errors"] == []
    return report


@graphiti
def test_forget_match_deletes_the_turn_on_graphiti(graphiti_db, falkordb, bm):
    from brandmind.sync.graphiti import episode_uuid, group_id

    ingest(bm)
    sync(bm)
    group = group_id("ann", graphiti_db)
    assert len(episodes(falkordb, group)) == 2 and holding(falkordb, group, "4711")  # the turn is there

    res = bm("forget", "--match", "locker 4711", "-u", "ann", "--yes", "--json")
    assert res.code == 0, res.err
    gone = json.loads(res.out)["beads"]
    assert len(gone) == 1
    assert "notes" not in sync(bm)
    left = episodes(falkordb, group)
    assert episode_uuid(group, gone[0]) not in {u for u, _ in left}
    assert [name for _, name in left] != gone and len(left) == 1    # the other turn stays
    assert holding(falkordb, group, "4711") == [] and holding(falkordb, group, "locker") == []
    assert holding(falkordb, group, "Noted, Ann.")


@graphiti
def test_beads_rm_of_an_older_forget_without_user_still_deletes(graphiti_db, falkordb, bm):
    """A ``bead.forget`` from before it carried the user (payload {id}): the mirror looks for
    the turn in every user's graph it knows."""
    from brandmind.memory import Memory
    from brandmind.sync.graphiti import GraphitiSink, group_id
    from brandmind.sync.mirror import MirrorRemote

    ingest(bm)
    ingest(bm, user="bob")
    sync(bm)
    ann, bob = group_id("ann", graphiti_db), group_id("bob", graphiti_db)
    target = episodes(falkordb, ann)[0][1]
    older = {"kind": "bead.forget", "id": "x:1", "payload": {"id": target}}   # as an older bm wrote it
    with Memory() as mem:
        sink = GraphitiSink("graph", lambda t: [float(x) for x in mem.embedder.embed_query(t)],
                            host=falkordb.host, port=falkordb.port, password_env=PW_ENV, database=graphiti_db)
        try:
            remote = MirrorRemote(sink, mem)
            forget_ids(mem.store, [], [target])
            plan = remote.plan([older])
            assert plan.forget_messages == {"ann": [target], "bob": [target]}
            remote.apply(plan)
        finally:
            sink.close()
    assert target not in {name for _, name in episodes(falkordb, ann)}
    assert len(episodes(falkordb, ann)) == 1 and len(episodes(falkordb, bob)) == 2
    assert holding(falkordb, ann, "4711") == [] and holding(falkordb, bob, "4711")
    sync(bm)  # the store's own ops (the forget names ann) push cleanly after that
    assert len(episodes(falkordb, ann)) == 1 and len(episodes(falkordb, bob)) == 2


def test_zep_reports_that_it_keeps_a_forgotten_turn(tmp_path, monkeypatch):
    from zep_server import ZepServer

    from brandmind.config import Config
    from brandmind.memory import Memory
    from brandmind.sync.engine import sync_once
    from brandmind.sync.mirror import MirrorRemote
    from brandmind.sync.zep import ZepSink

    server = ZepServer(api_key="k-" + uuid.uuid4().hex).start()
    monkeypatch.setenv("ZEP_API_KEY", server.api_key)
    try:
        with Memory(create=True, config=Config.load(tmp_path / "a")) as mem:
            remote = MirrorRemote(ZepSink("zep", base_url=server.base_url, timeout=2.0), mem)
            mem.ingest([dict(t) for t in TURNS], user="ann")
            first = sync_once(mem, remote)
            assert first["errors"] == [] and "notes" not in first
            assert len(server.messages_of("bm-ann")) == 2
            turn = mem.match_beads("locker 4711", user="ann")
            assert len(turn) == 1
            op = forget_ids(mem.store, [], [turn[0]["id"]])
            assert op["beads"] == [turn[0]["id"]]
            report = sync_once(mem, remote)
            assert report["errors"] == []
            assert report["notes"] == [("zep remote 'zep' may still hold 1 forgotten turn(s): it cannot delete "
                                        "a single message (forgetting the user deletes all of theirs)")]
            assert remote.notes == []                       # reported once, not again next round
            assert "notes" not in sync_once(mem, remote)
            remote.close()
    finally:
        server.stop()
    assert server.violations == [], server.violations


def test_bead_forget_carries_the_user(store):
    from brandmind.memory import Memory

    with Memory() as mem:
        mem.ingest([dict(t) for t in TURNS], user="ann")
        bead = mem.match_beads("locker 4711", user="ann")[0]
        forget_ids(mem.store, [], [bead["id"]])
        ops = [op for op in mem.log.iter_ops() if op["kind"] == "bead.forget"]
    assert ops and ops[-1]["payload"] == {"id": bead["id"], "user": "ann"}
