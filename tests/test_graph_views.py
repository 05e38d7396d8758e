"""Graph views (brandmind/graphviews.py, `bm kg hubs` / `bm kg clusters`, mem.graph.hubs /
clusters): known hubs and two communities in a graph built with facts, retired, ended and
forgotten facts left out, --at, typed links between memories as ties, empty graphs, bad
flags, JSON when piped and the table on a terminal."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from conftest import assert_error, open_memory

# Two circles (work in Lisbon; a chess club in Porto) and one fact between them (Ann knows Tom).
WORK = [("Ann", "works_at", "Acme", 1.0), ("Bob", "works_at", "Acme", 1.0), ("Carol", "works_at", "Acme", 1.0),
        ("Ann", "knows", "Bob", 0.8), ("Ann", "knows", "Carol", 0.8), ("Ann", "uses", "Python", 0.8),
        ("Bob", "uses", "Python", 0.8), ("Ann", "lives_in", "Lisbon", 0.8)]
CHESS = [("Tom", "plays", "chess", 0.3), ("Eve", "plays", "chess", 0.8), ("Zoe", "plays", "chess", 0.8),
         ("Eve", "knows", "Tom", 0.3), ("Eve", "knows", "Zoe", 0.8), ("Eve", "lives_in", "Porto", 0.8),
         ("Tom", "lives_in", "Porto", 0.3)]
BRIDGE = [("Ann", "knows", "Tom", 0.8)]


def add_facts(mem, triples, user="ann", **extra) -> list[str]:
    facts = [{"subject": s, "predicate": p, "object": o, "confidence": c, "subject_type": "entity",
              "object_type": "entity", **extra} for s, p, o, c in triples]
    return [r["id"] for r in mem.facts.add_many(facts, user=user)]


@pytest.fixture(scope="module")
def circles():
    """One store with the two circles, shared by the tests that only read it: (home, fact ids)."""
    home = Path(tempfile.mkdtemp(prefix="graph-views-"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BM_HOME", str(home))
        mp.setenv("BM_EMBEDDER", "hash")
        from brandmind.memory import Memory

        with Memory(create=True) as mem:
            ids = add_facts(mem, WORK + CHESS + BRIDGE)
            mem.remember("Ann has a cat", user="ann")  # no graph: changes nothing
    yield home, dict(zip(WORK + CHESS + BRIDGE, ids))
    import shutil

    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def shared(circles, monkeypatch):
    monkeypatch.setenv("BM_HOME", str(circles[0]))
    return circles[1]


def test_hubs_by_degree_and_by_weight(shared):
    with open_memory() as mem:
        hubs = mem.graph.hubs(user="ann", limit=6)
        assert [(h["name"], h["degree"], h["neighbors"]) for h in hubs] == [
            ("Ann", 6, 6), ("Eve", 4, 4), ("Tom", 4, 4), ("Acme", 3, 3), ("Bob", 3, 3), ("chess", 3, 3)]
        ann = hubs[0]
        assert ann["weight"] == pytest.approx(1.0 + 0.8 * 5) and ann["memories"] == 6 and ann["type"] == "entity"
        # by weight: Tom's facts are weak (0.3), so he falls behind Acme (3 x 1.0) and Bob (1.0 + 0.8 + 0.8)
        by_weight = mem.graph.hubs(user="ann", by="weight", limit=5)
        assert [(h["name"], round(h["weight"], 2)) for h in by_weight] == [
            ("Ann", 5.0), ("Acme", 3.0), ("Eve", 2.7), ("Bob", 2.6), ("chess", 1.9)]
        assert mem.graph.hubs(user="bob") == []  # another user's graph is another graph
        with pytest.raises(Exception) as bad:
            mem.graph.hubs(user="ann", by="size")
        assert "degree or weight" in bad.value.hint


def test_two_circles_are_two_clusters_with_their_hubs_and_facts(shared):
    with open_memory() as mem:
        found = mem.graph.clusters(user="ann", top=3)
        again = mem.graph.clusters(user="ann", top=3)
    assert found == again  # seeded: the same graph gives the same clusters
    assert [(c["cluster"], c["size"], c["edges"], c["memory_count"]) for c in found] == [(1, 6, 8, 8), (2, 5, 7, 7)]
    work, chess = found
    assert [(e["name"], e["degree"]) for e in work["entities"]] == [("Ann", 5), ("Acme", 3), ("Bob", 3)]
    assert [(e["name"], e["degree"]) for e in chess["entities"]] == [("Eve", 4), ("chess", 3), ("Tom", 3)]
    assert work["weight"] == pytest.approx(sum(c for *_, c in WORK))
    # each cluster's memories are the facts that link its entities, those about its hubs first
    assert len(work["memories"]) == 3 and {m["id"] for m in work["memories"]} <= {shared[t] for t in WORK}
    assert work["memories"][0]["id"] in {shared[t] for t in WORK if t[0] == "Ann" and t[2] in ("Acme", "Bob")}
    assert {m["text"] for m in chess["memories"]} <= {f"{s} {p.replace('_', ' ')} {o}" for s, p, o, _ in CHESS}
    bridge = shared[BRIDGE[0]]
    with open_memory() as mem:
        everything = mem.graph.clusters(user="ann", top=100)
    members = {m["id"] for c in everything for m in c["memories"]}
    assert members == {shared[t] for t in WORK + CHESS} and bridge not in members
    assert sorted(e["name"] for e in everything[1]["entities"]) == ["Eve", "Porto", "Tom", "Zoe", "chess"]


def test_cli_prints_json_when_piped_and_a_table_on_a_terminal(shared, bm):
    res = bm("kg", "hubs", "-u", "ann", "--limit", "2")
    assert res.code == 0 and res.err == "", res
    assert [(h["name"], h["degree"]) for h in res.json()] == [("Ann", 6), ("Eve", 4)]
    assert set(res.json()[0]) == {"id", "name", "type", "degree", "neighbors", "weight", "memories"}
    assert [h["name"] for h in bm("kg", "hubs", "-u", "ann", "--by", "weight", "-k", "2").json()] == ["Ann", "Acme"]
    res = bm("kg", "clusters", "-u", "ann", "--min-size", "6", "--top", "1")
    assert res.code == 0 and res.err == "", res
    (only,) = res.json()
    assert set(only) == {"cluster", "size", "edges", "weight", "entities", "memories", "memory_count"}
    assert (only["size"], only["entities"][0]["name"], len(only["memories"])) == (6, "Ann", 1)
    assert set(only["memories"][0]) == {"id", "text", "type", "ts"}
    assert len(bm("kg", "clusters", "-u", "ann", "--limit", "1").json()) == 1
    from rich.console import Console

    from brandmind.cli.graph import _clusters_table, _hubs_table

    screen = Console(width=80, record=True, file=open("/dev/null", "w"))
    screen.print(_hubs_table(bm("kg", "hubs", "-u", "ann").json(), "degree"))
    screen.print(_clusters_table(bm("kg", "clusters", "-u", "ann", "--top", "2").json()))
    text = screen.export_text()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "Ann" in text and "Ann (5), Acme (3) +4 more" in text and "+6 more memories" in text, text


def test_retired_ended_and_forgotten_facts_do_not_count(bm, store):
    with open_memory() as mem:
        ids = add_facts(mem, [("Ann", "lives_in", "Lisbon", 0.8)], valid_from="2020-01-01")
        ids += add_facts(mem, [("Ann", "likes", "tea", 0.8), ("Ann", "uses", "vim", 0.8)])
        # an update retires Lisbon (its world time ends now); a fact that ended long ago
        berlin = mem.facts.add({"subject": "Ann", "predicate": "lives_in", "object": "Berlin",
                                "subject_type": "entity", "object_type": "entity"}, user="ann")
        assert berlin["retired"] == [ids[0]]
        add_facts(mem, [("Ann", "works_at", "Initech", 0.8)], valid_from="2010-01-01", valid_to="2012-01-01")
        mem.forget(ids[1])  # forgotten: its edge goes with it
        assert {h["name"]: h["degree"] for h in mem.graph.hubs(user="ann")} == {"Ann": 2, "Berlin": 1, "vim": 1}
        # --at: what was true then (vim has no start: open), in world time
        assert {h["name"] for h in mem.graph.hubs(user="ann", at="2021-06-01")} == {"Ann", "Lisbon", "vim"}
        assert {h["name"] for h in mem.graph.hubs(user="ann", at="2011-06-01")} == {"Ann", "Initech", "vim"}
        # a fact retired while its edge stayed current (as an expiry might leave it) takes the edge out too
        with mem.store.write() as t:
            t.append("memory.retire", {"id": ids[2], "user": "ann", "retired_at": 1, "valid_to": None, "by": None,
                                       "reason": "correction"})
        # an edge retired by itself (a `kg link` has no fact behind it)
        edge = mem.graph.add_edge("Ann", "emacs", "uses", user="ann")["id"]
        assert {h["name"] for h in mem.graph.hubs(user="ann")} == {"Ann", "Berlin", "emacs"}
        with mem.store.write() as t:
            t.append("kg.edge.retire", {"id": edge, "retired_at": 1, "valid_to": None})
        mem.store.catch_up()
        assert {h["name"] for h in mem.graph.hubs(user="ann")} == {"Ann", "Berlin"}
        assert [c["size"] for c in mem.graph.clusters(user="ann")] == [2]
        # evidence: only stale memories -> out; one current memory or a turn id among it -> in
        mem.graph.add_edge("Ann", "tea", "likes", evidence=[ids[2]], user="ann")
        mem.graph.add_edge("Ann", "jazz", "likes", evidence=[ids[2], berlin["id"]], user="ann")
        mem.graph.add_edge("Ann", "notes", "keeps", evidence=[ids[2], "b_01turn"], user="ann")
        assert {h["name"] for h in mem.graph.hubs(user="ann")} == {"Ann", "Berlin", "jazz", "notes"}
        (one,) = mem.graph.clusters(user="ann")
        assert one["memory_count"] == 1 and one["memories"][0]["id"] == berlin["id"]  # not the turn id
    # in 2011: Initech, and the `kg link` (no dates: always) backed by a turn; not Berlin's facts
    assert [h["name"] for h in bm("kg", "hubs", "-u", "ann", "--at", "2011-06-01").json()] == ["Ann", "notes", "Initech"]


def test_typed_links_between_memories_tie_their_entities(store):
    with open_memory() as mem:
        a, b = add_facts(mem, [("Pia", "likes", "Quito", 0.8), ("Rui", "likes", "Sintra", 0.8)])
        assert [c["size"] for c in mem.graph.clusters(user="ann")] == [2, 2]
        mem.graph.link(a, b, "contradicts", 1.0)  # no tie
        assert [c["size"] for c in mem.graph.clusters(user="ann")] == [2, 2]
        mem.graph.link(a, b, "supports", 1.0)
        (one,) = mem.graph.clusters(user="ann")
        assert one["size"] == 4 and one["edges"] == 2 and one["memory_count"] == 2
        assert [h["degree"] for h in mem.graph.hubs(user="ann")] == [1, 1, 1, 1]  # links are no entity edges


def test_an_empty_graph_is_an_empty_list_with_a_note(bm, store):
    for view in ("hubs", "clusters"):
        res = bm("kg", view, "-u", "ann")
        assert res.code == 0 and res.json() == [], res
        assert "no memories for user 'ann'" in res.err, res
    assert bm("remember", "Ann has a cat", "-u", "ann").code == 0
    for view in ("hubs", "clusters"):
        res = bm("kg", view, "-u", "ann")
        assert res.code == 0 and res.json() == [], res
        assert "has no current edges between entities" in res.err and "bm kg link" in res.err, res
    bm("kg", "link", "Ann", "likes", "tea", "-u", "ann")
    res = bm("kg", "clusters", "-u", "ann", "--min-size", "3")
    assert res.code == 0 and res.json() == [] and "no cluster has 3 or more entities" in res.err, res


def test_evidence_is_read_as_stored():
    from brandmind.graphviews import _evidence

    for ids in ([], ["m_a"], ["m_a", "b_b"], ['m_"q"'], ["m_\\"]):
        assert list(_evidence(json.dumps(ids))) == ids


@pytest.mark.parametrize("args,word", [
    (("hubs", "--limit", "0"), "--limit"), (("hubs", "--limit", "many"), "--limit"),
    (("hubs", "--by", "size"), "--by"), (("hubs", "--at", "someday"), "--at"),
    (("clusters", "--min-size", "0"), "--min-size"), (("clusters", "--top", "0"), "--top"),
    (("clusters", "--at", "2024-13-45"), "--at"), (("clusters", "--bogus"), "--bogus")])
def test_bad_flags_are_one_error_line_exit_2(bm, args, word):
    assert_error(bm("kg", *args, "-u", "ann"), 2, word)
