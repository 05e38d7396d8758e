"""Repairing the knowledge graph (brandmind/graph.py, cli/graph.py): ``bm kg list``, ``bm kg rm``,
``bm kg merge``, ``bm kg node`` on a name that exists, ``bm kg link`` creating what is missing,
JSON when piped; rm and merge are ops in the log, so a rebuild replays them and a sync carries
them to another store, including edges that another device made before it saw the merge."""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import assert_error, open_memory


def graph_of(mem, user="ann") -> dict:
    """The user's graph as plain data: nodes by name, edges as (src name, predicate, dst name)."""
    names = {r["id"]: r["name"] for r in mem.sql.rows("SELECT id, name FROM kg_nodes WHERE user_id=?", (user,))}
    edges = sorted((names.get(r["src"], r["src"]), r["predicate"], names.get(r["dst"], r["dst"]))
                   for r in mem.sql.rows("SELECT src, dst, predicate FROM kg_edges"))
    mentions = sorted((names.get(r["node_id"], r["node_id"]), r["memory_id"])
                      for r in mem.sql.rows("SELECT node_id, memory_id FROM kg_mentions"))
    return {"nodes": sorted(names.values()), "edges": edges, "mentions": mentions}


def test_the_readme_link_works_as_written_and_creates_missing_nodes(store, bm):
    res = bm("kg", "link", "Ann", "lives_in", "Lisbon", "-u", "ann")
    assert res.code == 0, res
    edge = res.json()  # piped: JSON
    assert edge["predicate"] == "lives_in"
    assert sorted(n["name"] for n in edge["created"]) == ["Ann", "Lisbon"]
    # the same names again (any case, spaced differently): the same nodes, no twins
    again = bm("kg", "link", "ann", "Lives In", " lisbon ", "-u", "ann").json()
    assert again["created"] == [] and (again["src"], again["dst"]) == (edge["src"], edge["dst"])
    assert again["predicate"] == "lives_in"
    # the help says so
    assert "created" in bm("kg", "link", "--help").out or "new node" in bm("kg", "link", "--help").out
    # an id that does not exist is an error, not a node named "n_nope"
    assert_error(bm("kg", "link", "n_nope", "knows", "Ann", "-u", "ann"), 1, "n_nope")


def test_kg_node_returns_the_existing_node_and_prints_json_when_piped(store, bm):
    first = bm("kg", "node", "Lisbon", "--type", "place", "-u", "ann")
    assert first.code == 0, first
    node = first.json()
    assert node["created"] is True and node["type"] == "place" and node["id"].startswith("n_")
    same = bm("kg", "node", "lisbon", "--type", "place", "-u", "ann").json()
    assert same == {**node, "created": False}
    untyped = bm("kg", "node", "LISBON", "-u", "ann").json()  # no type: any type matches
    assert untyped["id"] == node["id"] and untyped["created"] is False
    other = bm("kg", "node", "Lisbon", "--type", "project", "-u", "ann").json()  # another type: a new node
    assert other["created"] is True and other["id"] != node["id"]
    assert bm("kg", "node", "Lisbon", "--type", "place", "-u", "bob").json()["id"] != node["id"]  # another user
    with open_memory() as mem:
        assert mem.sql.conn.execute("SELECT count(*) FROM kg_nodes").fetchone()[0] == 3


def test_facts_use_the_nodes_kg_link_made_instead_of_twins(store, bm):
    bm("kg", "link", "Ann", "lives_in", "Lisbon", "-u", "ann")
    assert bm("remember", "--fact", '{"subject": "ann", "predicate": "likes", "object": "Lisbon"}',
              "-u", "ann").code == 0
    nodes = bm("kg", "list", "-u", "ann").json()
    assert [(n["name"], n["edges"]) for n in nodes] == [("Ann", 2), ("Lisbon", 2)]


def test_kg_list_filters_and_counts(store, bm):
    bm("kg", "link", "Ann", "lives_in", "Lisbon", "-u", "ann")
    bm("kg", "link", "Ann", "works_at", "Acme", "-u", "ann")
    bm("kg", "node", "Tom", "--type", "person", "-u", "ann")
    bm("kg", "node", "Zed", "-u", "bob")
    res = bm("kg", "list", "-u", "ann")
    assert res.code == 0, res
    nodes = res.json()
    assert [(n["name"], n["edges"], n["mentions"]) for n in nodes] == [
        ("Acme", 1, 0), ("Ann", 2, 0), ("Lisbon", 1, 0), ("Tom", 0, 0)]
    assert [n["name"] for n in bm("kg", "list", "-u", "ann", "--type", "person").json()] == ["Tom"]
    assert [n["name"] for n in bm("kg", "list", "-u", "ann", "--limit", "2").json()] == ["Acme", "Ann"]
    assert [n["name"] for n in bm("kg", "list", "-u", "ann", "--name", "lis").json()] == ["Lisbon"]
    assert [n["name"] for n in bm("kg", "list", "-u", "bob").json()] == ["Zed"]
    assert_error(bm("kg", "list", "--limit", "0"), 2, "--limit")


def test_kg_rm_removes_a_node_with_its_edges_and_mentions_and_rebuild_agrees(store, bm):
    m = bm("remember", "Ann moved to Lisbon", "-u", "ann").json()["id"]
    bm("kg", "link", "Ann", "lives_in", "Lisbon", "-u", "ann")
    bm("kg", "link", "Lisbon", "mentions", m, "-u", "ann")
    bm("kg", "link", "Ann", "likes", "Porto", "-u", "ann")
    res = bm("kg", "rm", "lisbon", "-u", "ann")
    assert res.code == 0, res
    out = res.json()
    assert (out["name"], out["edges"], out["mentions"]) == ("Lisbon", 1, 1)
    with open_memory() as mem:
        graph = graph_of(mem)
        assert graph == {"nodes": ["Ann", "Porto"], "edges": [("Ann", "likes", "Porto")], "mentions": []}
        assert mem.get(m)["text"] == "Ann moved to Lisbon"  # the memory stays
        mem.admin.rebuild()
        assert graph_of(mem) == graph
    assert_error(bm("kg", "rm", "Lisbon", "-u", "ann"), 1, "Lisbon")
    assert_error(bm("kg", "show", "Lisbon", "-u", "ann"), 1, "Lisbon")


def test_kg_merge_moves_edges_and_mentions_and_rebuild_agrees(store, bm):
    m = bm("remember", "Ann loves Lisboa", "-u", "ann").json()["id"]
    bm("kg", "link", "Ann", "lives_in", "Lisbon", "-u", "ann")
    bm("kg", "node", "Lisboa", "--type", "place", "-u", "ann")
    bm("kg", "link", "Ann", "likes", "Lisboa", "-u", "ann")
    bm("kg", "link", "Lisboa", "part_of", "Portugal", "-u", "ann")
    bm("kg", "link", "Lisboa", "mentions", m, "-u", "ann")
    res = bm("kg", "merge", "Lisboa", "Lisbon", "-u", "ann")
    assert res.code == 0, res
    out = res.json()
    assert (out["name"], out["edges_moved"], out["mentions_moved"]) == ("Lisbon", 2, 1)
    want = {"nodes": ["Ann", "Lisbon", "Portugal"],
            "edges": [("Ann", "likes", "Lisbon"), ("Ann", "lives_in", "Lisbon"), ("Lisbon", "part_of", "Portugal")],
            "mentions": [("Lisbon", m)]}
    with open_memory() as mem:
        assert graph_of(mem) == want
        mem.admin.rebuild()
        assert graph_of(mem) == want
    # the merged node's id names where it went
    shown = bm("kg", "show", out["merged"], "-u", "ann")
    assert_error(shown, 1, "merged into " + out["into"])
    # bad merges: one line, nothing written
    assert_error(bm("kg", "merge", "Lisbon", "lisbon", "-u", "ann"), 2, "same node")
    assert_error(bm("kg", "merge", "Nowhere", "Lisbon", "-u", "ann"), 1, "Nowhere")


def test_ambiguous_names_say_which_ids_and_how_to_fix(store, bm):
    a = bm("kg", "node", "Sam", "--type", "person", "-u", "ann").json()["id"]
    b = bm("kg", "node", "Sam", "--type", "project", "-u", "ann").json()["id"]
    err = assert_error(bm("kg", "rm", "sam", "-u", "ann"), 2, a, b)
    assert "bm kg merge" in err
    assert bm("kg", "merge", a, b, "-u", "ann").code == 0
    assert bm("kg", "rm", "Sam", "-u", "ann").json()["removed"] == b


def test_the_new_ops_are_redacted_when_their_user_is_forgotten(store, bm):
    bm("kg", "link", "Ann", "likes", "Biscuit", "-u", "ann")
    bm("kg", "node", "Bisquit", "-u", "ann")
    bm("kg", "merge", "Bisquit", "Biscuit", "-u", "ann")
    bm("kg", "rm", "Ann", "-u", "ann")
    assert bm("forget", "--wipe-user", "ann", "--yes").code == 0
    with open_memory() as mem:
        ops = list(mem.log.iter_ops())
        mine = [op for op in ops if op["kind"] in ("kg.node.remove", "kg.node.merge")]
        assert len(mine) == 2 and all(op["payload"].get("redacted") for op in mine)
        assert graph_of(mem) == {"nodes": [], "edges": [], "mentions": []}


# -- sync: two stores, an in-process remote ----------------------------------------------------------
@pytest.fixture
def two_stores():
    from brandmind.config import Config
    from brandmind.memory import Memory
    from brandmind.sync.remote import MemoryRemote

    root = Path(tempfile.mkdtemp(prefix="bm-kg-"))
    mems = [Memory(create=True, config=Config.load(root / f"r{i}")) for i in range(2)]
    try:
        yield mems, MemoryRemote("hub")
    finally:
        for mem in mems:
            with contextlib.suppress(Exception):
                mem.close()
        shutil.rmtree(root, ignore_errors=True)


def _sync_all(mems, remote) -> None:
    from brandmind.sync.engine import sync_once

    for _ in range(2):
        for mem in mems:
            report = sync_once(mem, remote)
            assert not report["errors"], report


def test_sync_carries_rm_and_merge_and_late_edges_follow_the_merge(two_stores):
    (a, b), remote = two_stores
    a.graph.add_edge("Ann", "Lisbon", "lives_in", user="ann")
    a.graph.add_node("Lisboa", type="place", user="ann")
    a.graph.add_edge("Ann", "Porto", "likes", user="ann")
    _sync_all([a, b], remote)
    assert graph_of(b) == graph_of(a)
    # concurrently: A merges Lisboa into Lisbon and removes Porto; B, not knowing,
    # links Lisboa and Porto to new nodes
    a.graph.merge_nodes("Lisboa", "Lisbon", user="ann")
    a.graph.remove_node("Porto", user="ann")
    b.graph.add_edge("Lisboa", "Portugal", "part_of", user="ann")
    b.graph.add_edge("Tom", "Porto", "visited", user="ann")
    _sync_all([a, b], remote)
    want = {"nodes": ["Ann", "Lisbon", "Portugal", "Tom"],
            "edges": [("Ann", "lives_in", "Lisbon"), ("Lisbon", "part_of", "Portugal")],
            "mentions": []}
    assert graph_of(a) == want
    assert graph_of(b) == want
    for mem in (a, b):
        mem.admin.rebuild()
        assert graph_of(mem) == want
