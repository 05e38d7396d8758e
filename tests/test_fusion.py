"""Fusion recall: time words, scopes, conversation structure, the graph, explanations."""
from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brandmind.clock import parse_time
from brandmind.memory import Memory
from brandmind.storage.search import in_own_words, named_in
from brandmind.timewords import asks_when, find_windows, says_when

from conftest import assert_error

NOW = "2026-11-21T12:00:00Z"  # a Saturday


def _window(text: str) -> tuple[str, str] | None:
    wins = find_windows(text, parse_time(NOW))
    if not wins:
        return None
    d = wins[0].as_dict()
    return d["from"][:10], d["to"][:10]


@pytest.mark.parametrize("text, expected", [
    ("what did I do last Tuesday?", ("2026-11-17", "2026-11-18")),
    ("on Friday", ("2026-11-20", "2026-11-21")),
    ("what happened in May 2023", ("2023-05-01", "2023-06-01")),
    ("in June", ("2026-06-01", "2026-07-01")),
    ("in December", ("2025-12-01", "2026-01-01")),  # the most recent December
    ("two weeks ago", ("2026-11-04", "2026-11-12")),
    ("3 days ago", ("2026-11-18", "2026-11-20")),
    ("yesterday", ("2026-11-20", "2026-11-21")),
    ("last month", ("2026-10-01", "2026-11-01")),
    ("last year", ("2025-01-01", "2026-01-01")),
    ("last weekend", ("2026-11-14", "2026-11-16")),
    ("the 5th of May, 2023", ("2023-05-05", "2023-05-06")),
    ("on March 3rd", ("2026-03-03", "2026-03-04")),
    ("in 2019", ("2019-01-01", "2020-01-01")),
    ("on 23.01.2024", ("2024-01-23", "2024-01-24")),  # dotted: day first
    ("on 2024-01-23?", ("2024-01-23", "2024-01-24")),
    ("on 01/23/2024", ("2024-01-23", "2024-01-24")),  # slashed: month first ...
    ("on 23/01/2024", ("2024-01-23", "2024-01-24")),  # ... unless it cannot be a month
    # words before a date move its window
    ("in the week before 16 November 2023", ("2023-11-09", "2023-11-16")),
    ("on the Friday before 10.01.2024", ("2024-01-05", "2024-01-06")),
    ("shortly before 7 Jan 2024", ("2024-01-06", "2024-01-07")),
    ("two days after 3 Jan 2024", ("2024-01-04", "2024-01-06")),
    ("the weekend before 10.01.2024", ("2024-01-06", "2024-01-08")),
    ("the weekend before 7 Jan 2024", ("2023-12-30", "2024-01-01")),  # a Sunday: the weekend before it
    ("between August 11 and August 15 2023", ("2023-08-11", "2023-08-16")),
])
def test_time_words_become_windows_relative_to_now(text: str, expected: tuple[str, str]) -> None:
    assert _window(text) == expected


_TIME_WORDS = ["today", "yesterday", "tonight", "this morning", "last night", "recently", "lately", "ago", "a",
               "a couple of", "two", "12", "day", "days", "week", "weeks", "weekends", "weekend", "month",
               "months", "year", "years", "last", "this", "past", "on", "in", "since", "the", "before",
               "friday", "may", "jan.", "sept", "december", "5th", "2019", "ann", "mayor", "monday's"]


def test_the_quick_check_never_skips_a_text_a_time_pattern_matches() -> None:
    """find_windows runs no pattern on a text without a digit or a time word
    (timewords.may_name_time): of every sequence of up to three of these words, none that a
    pattern matches is skipped."""
    from itertools import product

    from brandmind import timewords

    patterns = [p for _, p in timewords._patterns()]
    for n in (1, 2, 3):
        for words in product(_TIME_WORDS, repeat=n):
            low = " ".join(words)
            if not timewords.may_name_time(low):
                assert not any(p.search(low) for p in patterns), low


@pytest.mark.parametrize("text", ["May I ask what Ann likes?", "where does Ann live", "the year of the dragon",
                                  "2023 was fine", "agenda",
                                  "release v1.2.2024", "at 10.30", "11/22/63", "on 31.02.2024"])
def test_words_that_are_not_times_give_no_window(text: str) -> None:
    assert _window(text) is None


@pytest.mark.parametrize("text, says", [
    ("we went yesterday", True), ("two days ago", True), ("see you on Friday!", True), ("last week was fun", True),
    ("that summer, last year", True), ("back in December", True), ("it was 2022", True), ("the 5th", True),
    ("on 12.03.2023", True), ("I may go", False), ("this is great", False), ("I have 12 cats", False),
    ("I love tea", False),
])
def test_a_text_says_when(text: str, says: bool) -> None:
    assert says_when(text) is says


@pytest.mark.parametrize("text, asks", [
    ("When did Ann move?", True), ("what date was the party", True), ("How long ago was it?", True),
    ("Which year did Bob start?", True), ("What did Ann cook?", False), ("How long is the trail?", False),
])
def test_a_question_asks_when(text: str, asks: bool) -> None:
    assert asks_when(text) is asks


def _seed_days(mem: Memory) -> dict[str, str]:
    ids = {}
    for day, text in [("2026-11-17T18:00:00Z", "went bouldering at the climbing gym with Sam"),
                      ("2026-11-03T18:00:00Z", "went to the climbing gym to try the new routes"),
                      ("2026-10-20T18:00:00Z", "climbing gym session, mostly stretching")]:
        ids[day[:10]] = mem.remember(text, type="episode", ts=day)["id"]
    return ids


def test_time_words_in_the_query_boost_memories_of_that_time(store) -> None:
    with Memory() as mem:
        ids = _seed_days(mem)
        hits = mem.recall("what did I do at the climbing gym last Tuesday?", now=NOW, k=3)
        assert hits[0]["id"] == ids["2026-11-17"]
        assert hits[0]["signals"]["time"]["phrase"] == "last Tuesday"
        hits = mem.recall("the climbing gym two weeks ago", now=NOW, k=3)
        assert hits[0]["id"] == ids["2026-11-03"]
        hits = mem.recall("climbing gym in October", now=NOW, k=3)
        assert hits[0]["id"] == ids["2026-10-20"]
        # relative to another --now, "last Tuesday" is another day
        hits = mem.recall("what did I do at the climbing gym last Tuesday?", now="2026-11-06T10:00:00Z", k=3)
        assert hits[0]["id"] == ids["2026-11-03"]


def test_recall_now_and_as_of_on_the_command_line(bm, store) -> None:
    with Memory() as mem:
        ids = _seed_days(mem)
    res = bm("recall", "climbing gym last Tuesday", "--now", NOW, "-k", "1", "--json")
    assert res.code == 0, res
    assert res.json()[0]["id"] == ids["2026-11-17"]
    assert_error(bm("recall", "gym", "--now", "someday"), 2, "now")
    assert_error(bm("recall", "gym", "--as-of", "soon"), 2, "as_of")


def _scoped(mem: Memory) -> None:
    for i in range(8):
        mem.remember(f"support ticket {i}: the printer jams on page two", agent="helpdesk")
        mem.remember(f"user note {i}: the printer in room {i} jams", user="default")
        mem.remember(f"sales lead {i}: wants a printer that never jams", agent="sales")
        mem.remember(f"other user's printer {i} jams too", user="mallory")


def test_agent_scope_merges_its_top_5_with_3_global_and_never_another_agents(store) -> None:
    with Memory() as mem:
        _scoped(mem)
        hits = mem.recall("printer jams", agent="helpdesk")
        scopes = [h["scope"] for h in hits]
        assert scopes.count("agent:helpdesk") == 5 and scopes.count("global") == 3, scopes
        assert hits == sorted(hits, key=lambda h: -h["score"])
        assert all(h["user"] == "default" for h in hits)
        # -k splits in the same 5:3 ratio
        scopes = [h["scope"] for h in mem.recall("printer jams", agent="helpdesk", k=16)]
        assert scopes.count("agent:helpdesk") == 8 and scopes.count("global") == 8, scopes  # global fills in
        scopes = [h["scope"] for h in mem.recall("printer jams", agent="helpdesk", k=4)]
        assert scopes.count("agent:helpdesk") == 2 and scopes.count("global") == 2, scopes
        # without an agent: every scope of this user, never another user's
        hits = mem.recall("printer jams", k=50)
        assert {h["scope"] for h in hits} == {"agent:helpdesk", "agent:sales", "global"}
        assert len(hits) == 24
        assert not [h for h in mem.recall("printer jams", user="mallory", k=50) if h["user"] != "mallory"]


def test_scope_sizes_come_from_config(bm, store) -> None:
    with Memory() as mem:
        _scoped(mem)
    assert bm("config", "set", "recall_agent_k", "2").code == 0
    assert bm("config", "set", "recall_global_k", "0").code == 0
    res = bm("recall", "printer jams", "--agent", "helpdesk", "--json")
    assert [h["scope"] for h in res.json()] == ["agent:helpdesk"] * 2
    assert_error(bm("config", "set", "recall_agent_k", "1001"), 1, "recall_agent_k")
    assert_error(bm("config", "set", "recall_global_k", "2.5"), 1, "recall_global_k")
    assert_error(bm("config", "set", "weight_vector", "lots"), 1, "weight_vector")


def _conversation() -> str:
    turns = [("Ann", "Have you picked a name for the new puppy yet?"),
             ("Bob", "We went with Biscuit, the kids chose it."),
             ("Ann", "Cute! I spent the weekend repainting the kitchen."),
             ("Bob", "What colour did you choose?"),
             ("Ann", "A pale sage green, it looks calm.")]
    lines = []
    for i, (who, text) in enumerate(turns):
        lines.append(json.dumps({"id": f"t{i}", "role": "user", "speaker": who, "content": text,
                                 "ts": f"2026-05-02T10:00:{i:02d}Z"}))
    # a later episode, after a long pause
    lines.append(json.dumps({"id": "t9", "role": "user", "speaker": "Bob", "content": "The puppy chewed a shoe.",
                             "ts": "2026-06-10T09:00:00Z"}))
    return "\n".join(lines) + "\n"


def test_turns_get_episodes_and_neighbours_bring_the_answer_turn(bm, store) -> None:
    assert bm("ingest", "-", input=_conversation()).code == 0
    with Memory() as mem:
        rows = {r["text"][:12]: r["meta"] for r in mem.list_memories(limit=10)}
        episodes = {m["episode"] for m in rows.values()}
        assert len(episodes) == 2, rows  # the pause of five weeks starts a new episode
        hits = mem.recall("what name did they pick for the puppy?", k=3)
        texts = [h["text"] for h in hits]
        # the answer shares few words with the question; the turn before it does
        assert "Bob: We went with Biscuit, the kids chose it." in texts, texts
        answer = next(h for h in hits if h["text"].startswith("Bob: We went"))
        assert answer["signals"]["neighbor"]["score"] > 0


def test_a_named_speaker_ranks_their_turns_first(store) -> None:
    with Memory() as mem:
        lines = []
        for i in range(30):
            who = "Ann" if i % 2 else "Bob"
            lines.append({"role": "user", "speaker": who, "content": f"my garden has {i} tomato plants",
                          "ts": f"2026-05-0{1 + i % 9}T10:00:{i:02d}Z"})
        mem.ingest(lines)
        hits = mem.recall("how many tomato plants does Ann have?", k=5)
        assert all(h["meta"]["speaker"] == "Ann" for h in hits), [h["text"] for h in hits]
        assert hits[0]["signals"]["speaker"]["speaker"] == "Ann"


@pytest.mark.parametrize("query, named", [
    ("what does Ann Lee grow?", ["Ann Lee"]),
    ("what does Ann grow?", ["Ann Lee"]),        # one word of the name, no other speaker's
    ("what does Aqib grow?", ["Akib"]),          # a capitalised word one letter off
    ("what does Lee grow?", []),                 # "lee" is in two names: names neither
    ("what does aqib grow?", []),                # a typo is a name only when capitalised
    ("what did Ann and Akib grow?", ["Ann Lee", "Akib"]),
])
def test_a_speaker_is_named_by_a_word_of_the_name_or_a_typo(query: str, named: list[str]) -> None:
    assert named_in(query, ["Ann Lee", "Bo Lee", "Akib"]) == named


def test_a_speaker_named_by_first_name_ranks_their_turns_first(store) -> None:
    with Memory() as mem:
        mem.ingest([{"role": "user", "speaker": "Ann Lee" if i % 2 else "Bob Stone",
                     "content": f"my garden has {i} tomato plants", "ts": f"2026-05-0{1 + i % 9}T10:00:{i:02d}Z"}
                    for i in range(30)])
        hits = mem.recall("how many tomato plants does Ann have?", k=5)
        assert all(h["meta"]["speaker"] == "Ann Lee" for h in hits), [h["text"] for h in hits]
        assert all(h["signals"]["speaker"]["speaker"] == "Ann Lee" for h in hits)


@pytest.mark.parametrize("query, said", [
    ("what foods doesn't Ann like?", "what foods doesn't I like?"),
    ("when did Ann's job start?", "when did my job start?"),
    ("when did Akib' job start?", "when did my job start?"),
    ("what does Aqib read?", "what does I read?"),              # the typo of a name too
    ("do Ann and Akib both travel?", "do and both travel?"),    # several named: names dropped
    ("what does Kate like?", "what does Kate like?"),          # not a speaker's name
    ("Ann?", "I?"),
])
def test_a_query_is_embedded_in_the_named_speakers_own_words(query: str, said: str) -> None:
    assert in_own_words(query, ["Ann Lee", "Akib"]) == said


def test_recall_embeds_the_query_as_the_named_speaker_says_it(store) -> None:
    import numpy as np

    with Memory() as mem:
        mem.ingest([{"role": "user", "speaker": "Ann", "content": "I really like green tea", "ts": "2026-05-01T10:00:00Z"},
                    {"role": "user", "speaker": "Bob", "content": "good morning Ann", "ts": "2026-05-01T10:01:00Z"}])
        hit = mem.recall("what does Ann like?", k=1)[0]
        assert hit["text"] == "Ann: I really like green tea"
        doc = mem.embedder.embed_documents([hit["text"]])[0]
        want = float(np.dot(mem.embedder.embed_query("what does I like?"), doc))
        assert hit["signals"]["vector"]["cosine"] == pytest.approx(want, abs=1e-3)
        config = dataclasses.replace(mem.config, weight_speaker=0.0)
    with Memory(config=config) as mem:  # without the speaker signal, the query is embedded as asked
        hit = mem.recall("what does Ann like?", k=2)
        asked = float(np.dot(mem.embedder.embed_query("what does Ann like?"), doc))
        assert [h["signals"]["vector"]["cosine"] for h in hit if h["text"] == "Ann: I really like green tea"] == \
            [pytest.approx(asked, abs=1e-3)]


def test_graph_expansion_adds_memories_linked_through_entities(store) -> None:
    with Memory() as mem:
        a = mem.remember("the billing service is written in Rust")
        b = mem.remember("postgres needs a vacuum every night")
        for i in range(20):
            mem.remember(f"unrelated note {i} about lunch plans")
        billing = mem.graph.add_node("billing service", type="project")
        pg = mem.graph.add_node("Postgres", type="tool")
        mem.graph.add_edge(billing["id"], a["id"], "mentions")
        mem.graph.add_edge(pg["id"], b["id"], "mentions")
        mem.graph.add_edge(billing["id"], pg["id"], "depends_on", weight=0.9)
        hits = mem.recall("what language is the billing service written in?", k=3)
        assert hits[0]["id"] == a["id"]
        linked = next(h for h in hits if h["id"] == b["id"])
        assert linked["signals"]["graph"]["from"] == a["id"]
        assert linked["signals"]["graph"]["hops"] == 1
        # with the graph weight at 0 it falls back behind the other notes
        mem.config.weight_graph = 0.0
        assert b["id"] not in [h["id"] for h in mem.recall("what language is the billing service written in?", k=3)]


@pytest.fixture
def mixed_store(bm, store):
    with Memory() as mem:
        _seed_days(mem)
        _scoped(mem)
        mem.remember("Ann loves tomato soup", importance=0.9)
    assert bm("ingest", "-", input=_conversation()).code == 0
    return store


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(["printer", "jams", "garden", "tomato", "last", "Tuesday", "Ann", "in", "May",
                                       "2026", "gym", "climbing", "puppy", "name", "Bob"]), min_size=1, max_size=6))
def test_each_score_is_the_sum_of_its_signals_contributions(mixed_store, words: list[str]) -> None:
    with Memory() as mem:
        hits = mem.recall(" ".join(words), k=20, now=NOW)
    assert hits
    for h in hits:
        parts = sum(s["score"] for s in h["signals"].values())
        assert abs(parts - h["score"]) < 1e-3, h
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_explain_shows_each_signals_part(bm, store) -> None:
    with Memory() as mem:
        _seed_days(mem)
    res = bm("recall", "climbing gym last Tuesday", "--now", NOW, "--explain")
    assert res.code == 0, res
    assert "vector" in res.out and "time" in res.out
    res = bm("recall", "climbing gym last Tuesday", "--now", NOW, "--explain", "--json")
    top = res.json()[0]
    assert {"vector", "time"} <= set(top["signals"])


def test_recency_and_importance_add_candidates_not_only_boosts(store) -> None:
    with Memory() as mem:
        mem.ingest([{"role": "user", "content": f"gardening note {i}: tomatoes need sun and water",
                     "ts": f"2026-01-01T{i // 60:02d}:{i % 60:02d}:00Z"} for i in range(260)])
        vital = mem.remember("the passport expires in March", importance=1.0, ts="2025-06-01T00:00:00Z")
        newest = mem.remember("bought a red bicycle", ts="2026-11-20T00:00:00Z")
        # neither shares a word with the query, and 260 turns outrank them on vectors:
        # only the recency / importance candidates can bring them into the pool
        assert newest["id"] not in [h["id"] for h in mem.recall("tomatoes sun water", k=5, now=NOW)]
        mem.config.weight_recency = 5.0
        hits = mem.recall("tomatoes sun water", k=1, now=NOW)
        assert hits[0]["id"] == newest["id"] and hits[0]["signals"]["recency"]["age_days"] == 1.5
        mem.config.weight_recency = 0.0
        mem.config.weight_importance = 10.0
        hits = mem.recall("tomatoes sun water", k=1, now=NOW)
        assert hits[0]["id"] == vital["id"] and "importance" in hits[0]["signals"]


def test_recall_returns_what_is_true_now_or_as_of_a_date(bm, store) -> None:
    with Memory() as mem:
        old = mem.facts.add({"subject": "Ann", "predicate": "lives_in", "object": "Lisbon",
                            "valid_from": "2019-03-01"})["id"]
        new = mem.facts.add({"subject": "Ann", "predicate": "lives_in", "object": "Porto",
                            "valid_from": "2024-09-01"})["id"]
        ended = mem.remember("Ann works at the bakery", ts="2020-01-01T00:00:00Z")
        ids = [h["id"] for h in mem.recall("where does Ann live?", k=50)]
        assert new in ids and old not in ids
        ids = [h["id"] for h in mem.recall("where does Ann live?", k=50, as_of="2022-01-01")]
        assert old in ids and new not in ids and ended["id"] in ids
        assert [h["id"] for h in mem.recall("where does Ann live?", k=50, as_of="2018-01-01")
                if h["id"] in (old, new)] == []
    res = bm("recall", "where does Ann live", "--as-of", "2022-01-01", "--type", "fact", "-k", "1", "--json")
    assert res.json()[0]["id"] == old and res.json()[0]["valid_to"].startswith("2024-09-01")
