"""The offline rule-based extractor: a labelled corpus (precision and recall asserted),
dates read relative to the turn's time, negations, things that must yield nothing, and
the wiring into remember / ingest / extract (CLI and API)."""
from __future__ import annotations

import json

import pytest

from brandmind.clock import iso, parse_time
from brandmind.extract import Extractor, Fact, Turn
from brandmind.extract.choose import get_extractor
from brandmind.extract.dates import find_date
from brandmind.extract.rules import RulesExtractor

from conftest import assert_error, open_memory

TS = parse_time("2024-05-15T10:00:00Z")  # a Wednesday

# (turn text, speaker, expected {(subject, predicate, object, negated)})
CORPUS: list[tuple[str, str | None, set[tuple[str, str, str, bool]]]] = [
    ("My name is Ann Smith.", "user", {("user", "name", "Ann Smith", False)}),
    ("Hi, I'm Caroline!", "c1", {("c1", "name", "Caroline", False)}),
    ("You can call me Jo.", "j", {("j", "name", "Jo", False)}),
    ("I live in Lisbon with my husband Tom.", "Ann",
     {("Ann", "lives_in", "Lisbon", False), ("Ann", "is_married_to", "Tom", False)}),
    ("We just moved to New York City in March 2023.", "Ann",
     {("Ann", "moved_to", "New York City", False), ("Ann", "lives_in", "New York City", False)}),
    ("I'm originally from Brazil.", "Ann", {("Ann", "from", "Brazil", False)}),
    ("I was born in Madrid.", "Ann", {("Ann", "born_in", "Madrid", False)}),
    ("I work at Google as a software engineer.", "Ann",
     {("Ann", "works_at", "Google", False), ("Ann", "works_as", "software engineer", False)}),
    ("I'm a nurse at St Mary Hospital.", "Bo",
     {("Bo", "works_as", "nurse", False), ("Bo", "works_at", "St Mary Hospital", False)}),
    ("I'm a student at MIT.", "Cy", {("Cy", "works_as", "student", False), ("Cy", "studies_at", "MIT", False)}),
    ("I love hiking, camping and swimming.", "Ann",
     {("Ann", "likes", "hiking", False), ("Ann", "likes", "camping", False), ("Ann", "likes", "swimming", False)}),
    ("I'm really into jazz these days.", "Ann", {("Ann", "likes", "jazz", False)}),
    ("I'm a big fan of the Beatles.", "Ann", {("Ann", "likes", "Beatles", False)}),
    ("My favorite movie is The Matrix.", "Ann", {("Ann", "likes", "The Matrix", False)}),
    ("I love to paint landscapes.", "Ann", {("Ann", "likes", "painting landscapes", False)}),
    ("I hate mushrooms.", "Ann", {("Ann", "dislikes", "mushrooms", False)}),
    ("Honestly, I can't stand traffic.", "Ann", {("Ann", "dislikes", "traffic", False)}),
    ("I don't like horror movies.", "Ann", {("Ann", "dislikes", "horror movies", False)}),
    ("I'm planning to visit Japan next year.", "Ann", {("Ann", "plans", "visit Japan", False)}),
    ("I'm going to run a marathon in October.", "Ann", {("Ann", "plans", "run a marathon", False)}),
    ("I decided to quit smoking.", "Ann", {("Ann", "decided", "quit smoking", False)}),
    ("We chose the blue sofa.", "Ann", {("Ann", "decided", "blue sofa", False)}),
    ("Maria is my sister.", "Ann", {("Ann", "sibling_of", "Maria", False)}),
    ("My best friend Jake lives nearby.", "Ann", {("Ann", "friend_of", "Jake", False)}),
    ("My mom Linda is visiting.", "Ann", {("Ann", "child_of", "Linda", False)}),
    ("Bob's wife Alice is a doctor.", None, {("Bob", "is_married_to", "Alice", False)}),
    ("I have a dog named Max.", "Ann", {("Ann", "has", "dog named Max", False)}),
    ("My cat Luna sleeps all day.", "Ann", {("Ann", "has", "cat named Luna", False)}),
    ("I have two kids.", "Ann", {("Ann", "has", "two kids", False)}),
    ("I own a small bakery.", "Ann", {("Ann", "has", "small bakery", False)}),
    ("I went to a concert last week.", "Ann", {("Ann", "attended", "concert", False)}),
    ("I attended the Web Summit on May 5.", "Ann", {("Ann", "attended", "Web Summit", False)}),
    ("I visited Paris yesterday.", "Ann", {("Ann", "visited", "Paris", False)}),
    ("Last weekend I went hiking with my friend Jake.", "Ann",
     {("Ann", "did", "hiking", False), ("Ann", "friend_of", "Jake", False)}),
    ("Tom works at Microsoft.", "Ann", {("Tom", "works_at", "Microsoft", False)}),
    ("Ann lives in Porto and works at Farfetch.", None,
     {("Ann", "lives_in", "Porto", False), ("Ann", "works_at", "Farfetch", False)}),
    ("I'm 34 years old.", "Ann", {("Ann", "age", "34", False)}),
    ("I speak Spanish and French.", "Ann", {("Ann", "speaks", "Spanish", False), ("Ann", "speaks", "French", False)}),
    ("I joined a support group yesterday.", "Ann", {("Ann", "joined", "support group", False)}),
    ("I'm allergic to peanuts.", "Ann", {("Ann", "allergic_to", "peanuts", False)}),
    # negations: the positive predicate, negated (a plain "don't like" is dislikes, above)
    ("I no longer live in Paris.", "Ann", {("Ann", "lives_in", "Paris", True)}),
    ("I don't live in Berlin anymore.", "Ann", {("Ann", "lives_in", "Berlin", True)}),
    ("I don't like sushi anymore.", "Ann", {("Ann", "likes", "sushi", True)}),
    ("I used to work at Amazon.", "Ann", {("Ann", "works_at", "Amazon", True)}),
    ("I sold my car.", "Ann", {("Ann", "has", "car", True)}),
    # nothing to extract: questions, hypotheticals, wishes, other people's words, small talk
    ("Do you live in Paris?", "Ann", set()),
    ("Where do you work", "Ann", set()),
    ("If I lived in Paris, I would be happy.", "Ann", set()),
    ("Maybe I will move to Rome.", "Ann", set()),
    ("I would love to live in Tokyo.", "Ann", set()),
    ("I wish I had a dog.", "Ann", set()),
    ('Tom said "I live in Berlin and I love techno".', "Ann", set()),
    ("Tom told me he works at Apple.", "Ann", set()),
    ("Sounds like a plan!", "Ann", set()),
    ("I love it!", "Ann", set()),
    ("I'm going to the gym.", "Ann", set()),
    ("I'm Canadian.", "Ann", set()),
    ("I'm a good cook.", "Ann", set()),
    ("I have a meeting tomorrow.", "Ann", set()),
]


def _facts(text: str, speaker: str | None, ts: int | None = TS, user: str = "user") -> list[Fact]:
    return RulesExtractor().extract([Turn(text, speaker=speaker, ts=ts, bead="b_1", user=user)])


def test_rules_corpus_precision_and_recall():
    assert 40 <= len(CORPUS)
    expected_all, found_all = set(), set()
    wrong, missed = [], []
    for n, (text, speaker, expected) in enumerate(CORPUS):
        got = {(f.subject, f.predicate, f.object, f.negated) for f in _facts(text, speaker)}
        expected_all |= {(n, *e) for e in expected}
        found_all |= {(n, *g) for g in got}
        wrong += [(text, g) for g in got - expected]
        missed += [(text, e) for e in expected - got]
    tp = len(expected_all & found_all)
    precision = tp / len(found_all)
    recall = tp / len(expected_all)
    assert precision >= 0.97, f"invented facts: {wrong}"
    assert recall >= 0.95, f"missed facts: {missed}"
    # the sentences that must yield nothing yield nothing at all
    for text, speaker, expected in CORPUS:
        if not expected:
            assert _facts(text, speaker) == [], text


def test_fact_shape_text_sources_and_types():
    facts = {f.predicate: f for f in _facts("I live in the Netherlands and I love jazz.", "Ann")}
    lives = facts["lives_in"]
    assert lives.text == "Ann lives in the Netherlands" and lives.object == "Netherlands"
    assert lives.sources == ["b_1"] and lives.type == "fact" and lives.object_type == "place"
    assert facts["likes"].type == "preference" and facts["likes"].text == "Ann likes jazz"
    decided = _facts("We decided to move to Lisbon.", "Ann")[0]
    assert decided.type == "decision" and decided.text == "Ann decided to move to Lisbon"
    # "my" inside an object is the speaker's
    plan = _facts("I'm going to visit my parents next week.", "Ann")[0]
    assert plan.object == "visit Ann's parents" and "my" not in plan.text


def test_first_person_without_a_speaker_is_the_user():
    [fact] = _facts("I work at Spotify.", None, user="ann")
    assert (fact.subject, fact.predicate, fact.object) == ("ann", "works_at", "Spotify")


@pytest.mark.parametrize("text,day,grain", [
    ("I visited Paris yesterday.", "2024-05-14", "on 14 May 2024"),
    ("I went to a concert last week.", "2024-05-06", "in the week of 6 May 2024"),
    ("I adopted a puppy two weeks ago.", "2024-04-29", "in the week of 29 April 2024"),
    ("I attended the Web Summit on May 5.", "2024-05-05", "on 5 May 2024"),
    ("I moved to Berlin last month.", "2024-04-01", "in April 2024"),
    ("Last weekend I went hiking.", "2024-05-11", "on the weekend of 11 May 2024"),
    ("I went to a wedding last Friday.", "2024-05-10", "on 10 May 2024"),
    ("I joined a choir in 2019.", "2019-01-01", "in 2019"),
])
def test_event_dates_are_resolved_against_the_turn_time(text, day, grain):
    fact = next(f for f in _facts(text, "Ann") if f.valid_from is not None)
    assert iso(fact.valid_from)[:10] == day
    assert grain in fact.text and "yesterday" not in fact.text and "last" not in fact.text
    # the same words a year later mean another day
    later = next(f for f in _facts(text, "Ann", ts=TS + 365 * 86400_000) if f.valid_from is not None)
    if "2019" not in text:
        assert later.valid_from != fact.valid_from


def test_relative_dates_without_a_turn_time_are_left_out():
    [fact] = _facts("I visited Paris yesterday.", "Ann", ts=None)
    assert fact.valid_from is None and fact.text == "Ann visited Paris"
    assert [f for f in _facts("I went to a concert last week.", "Ann", ts=None)] == []  # no date, no event


def test_plans_in_the_past_or_without_a_life_event_are_not_plans():
    assert _facts("I'll always remember our trip in 2022.", "Ann") == []
    assert _facts("I'll let you know.", "Ann") == []
    [plan] = _facts("I will start a new job next month.", "Ann")
    assert plan.predicate == "plans" and "in June 2024" in plan.text


def test_negations_say_no_longer():
    [f] = _facts("I no longer work at Google.", "Ann")
    assert (f.predicate, f.object, f.negated, f.text) == ("works_at", "Google", True, "Ann no longer works at Google")
    [f] = _facts("I'm not into techno anymore.", "Ann")
    assert (f.predicate, f.negated, f.text) == ("likes", True, "Ann no longer likes techno")
    [f] = _facts("I'm not a fan of techno.", "Ann")
    assert (f.predicate, f.negated) == ("dislikes", False)
    assert _facts("I never liked techno.", "Ann") == []  # not understood: nothing rather than a guess


def test_date_parser_basics():
    span, a, b = find_date("we met two days ago at noon", TS)
    assert iso(span.start)[:10] == "2024-05-13" and span.grain == "day"
    assert find_date("in May 2023", None)[0].describe() == "in May 2023"
    assert find_date("on 7 June", TS, tense="future")[0].describe() == "on 7 June 2024"
    assert find_date("on 7 June", TS)[0].describe() == "on 7 June 2023"  # said in May: last June
    assert find_date("you may go", TS) is None  # "may" is a verb
    assert find_date("in two weeks", TS) is None  # a duration unless it is about the future
    assert find_date("a few days ago", TS) is None  # vague: no date rather than a wrong one


def test_factory_and_protocol(monkeypatch):
    from brandmind.config import Config
    from brandmind.errors import ConfigError

    ext = get_extractor(Config.load())
    assert isinstance(ext, Extractor) and ext.name == "rules"
    assert ext.estimate([Turn("I live in Lisbon")]) == {"calls": 0, "tokens": 0}
    monkeypatch.setenv("BM_EXTRACTOR", "llm")
    assert get_extractor(Config.load()).name == "llm:llama3.1:8b"
    monkeypatch.setenv("BM_EXTRACTOR", "gpt")
    with pytest.raises(ConfigError) as err:
        Config.load()
    assert "rules" in err.value.hint


@pytest.mark.parametrize("key,value", [("llm_max_calls", "0"), ("llm_max_tokens", "lots"), ("extractor", "magic")])
def test_bad_llm_settings_are_refused(bm, key, value):
    assert_error(bm("config", "set", key, value), 1, key if key != "extractor" else "extractor")


# -- wiring: remember / ingest / extract --------------------------------------------------------
def _facts_of(mem, user="ann"):
    return list(mem.sql.rows("SELECT * FROM memories WHERE user_id=? AND subject IS NOT NULL ORDER BY rowid", (user,)))


def test_remember_extract_stores_facts_next_to_the_memory(store, bm):
    res = bm("remember", "I live in Lisbon and I love jazz. My wife Sara is a painter.", "--user", "ann",
             "--extract", "--json")
    assert res.code == 0, res
    out = res.json()
    assert out["facts"] == {"added": 3, "confirmed": 0, "updated": 0, "contradicted": 0}
    assert out["llm"] == {"calls": 0, "tokens": 0, "capped": False}
    with open_memory() as mem:
        raw = mem.get(out["id"])
        assert raw["text"].startswith("I live in Lisbon")  # the memory itself is kept
        rows = _facts_of(mem)
        assert {(r["subject"], r["predicate"], r["object"]) for r in rows} == {
            ("ann", "lives_in", "Lisbon"), ("ann", "likes", "jazz"), ("ann", "is_married_to", "Sara")}
        meta = json.loads(rows[0]["meta"])
        assert meta["extractor"] == "rules" and meta["source_memory"] == out["id"]
        assert all(r["source"] == "extract" for r in rows)
    # saying it again confirms, moving updates
    again = bm("remember", "I live in Lisbon.", "--user", "ann", "--extract", "--json").json()
    assert again["facts"]["confirmed"] == 1 and again["facts"]["added"] == 0
    moved = bm("remember", "I moved to Porto.", "--user", "ann", "--extract", "--json").json()
    assert moved["facts"]["updated"] == 1  # lives_in Lisbon retired by lives_in Porto
    with open_memory() as mem:
        current = {(r["predicate"], r["object"]) for r in _facts_of(mem) if r["retired_at"] is None}
        assert ("lives_in", "Porto") in current and ("lives_in", "Lisbon") not in current
        assert ("likes", "jazz") in current  # unrelated facts are never touched


def test_remember_extract_on_a_terminal_prints_the_id_then_a_summary(store, bm):
    res = bm("remember", "I hate mushrooms.", "--user", "ann", "--extract")  # piped: JSON, id and report
    assert res.code == 0 and res.json()["id"].startswith("m_") and res.json()["facts"]["added"] == 1, res
    assert_error(bm("remember", '{"subject": "a"}', "--fact", "--extract"), 2, "--extract")


CHAT = [
    {"id": "1", "role": "user", "speaker": "Ann", "content": "Hi! I moved to Berlin last month.",
     "ts": "2024-05-15T10:00:00Z"},
    {"id": "2", "role": "assistant", "content": "Nice! I love Berlin.", "ts": "2024-05-15T10:00:05Z"},
    {"id": "3", "role": "user", "speaker": "Ann", "content": "I went to a techno concert yesterday.",
     "ts": "2024-05-15T10:01:00Z"},
    {"id": "4", "role": "user", "speaker": "Ann", "content": "Do you like techno?", "ts": "2024-05-15T10:02:00Z"},
]


def _jsonl(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_ingest_extract_links_facts_to_their_beads(store, bm, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(_jsonl(CHAT))
    res = bm("ingest", path, "--user", "ann", "--extract", "--json")
    assert res.code == 0, res
    report = res.json()
    assert report["ingested"] == 4
    assert report["facts"]["added"] == 3  # moved_to, lives_in, attended; nothing from the assistant
    assert report["llm"]["calls"] == 0 and report["extract"]["extractor"] == "rules"
    with open_memory() as mem:
        rows = _facts_of(mem)
        beads = {b["turn_id"]: b["id"] for b in mem.beads_tail(10, user="ann")}
        by_pred = {r["predicate"]: r for r in rows}
        assert set(by_pred) == {"moved_to", "lives_in", "attended"}
        assert json.loads(by_pred["attended"]["provenance"]) == [{"bead": beads["3"]}]
        assert iso(by_pred["attended"]["valid_from"])[:10] == "2024-05-14"
        assert iso(by_pred["moved_to"]["valid_from"])[:10] == "2024-04-01"
        assert by_pred["attended"]["text"] == "Ann went to a techno concert on 14 May 2024"
        n = mem.admin.stats()["counts"]["memories"]
    # re-running stores nothing twice: every turn is known and already has its facts
    again = bm("ingest", path, "--user", "ann", "--extract", "--json").json()
    assert again["ingested"] == 0 and again["duplicates"] == 4
    assert again["facts"] == {"added": 0, "confirmed": 0, "updated": 0, "contradicted": 0}
    with open_memory() as mem:
        assert mem.admin.stats()["counts"]["memories"] == n


def test_extract_after_a_plain_ingest_reads_the_stored_turns(store, bm, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(_jsonl(CHAT))
    assert bm("ingest", path, "--user", "ann").code == 0
    report = bm("ingest", path, "--user", "ann", "--extract", "--json").json()
    assert report["ingested"] == 0 and report["facts"]["added"] == 3


def test_ingest_dry_run_stores_nothing_and_lists_the_facts(store, bm, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(_jsonl(CHAT))
    res = bm("ingest", path, "--user", "ann", "--extract", "--dry-run", "--json")
    assert res.code == 0, res
    report = res.json()
    assert report["dry_run"] and report["would_ingest"] == 4 and "ingested" not in report
    assert report["llm"] == {"calls": 0, "tokens": 0, "capped": False}
    assert {f["predicate"] for f in report["extract"]["would_extract"]} == {"moved_to", "lives_in", "attended"}
    with open_memory() as mem:
        assert mem.admin.stats()["counts"]["memories"] == 0 and mem.admin.stats()["counts"]["beads"] == 0
    # the human form (a terminal) says the same
    from brandmind.cli.extract import dry_run_lines

    lines = dry_run_lines(report)
    assert "nothing was stored" in lines[0] and "3 fact(s)" in lines[1]
    assert "  Ann went to a techno concert on 14 May 2024" in lines


def test_extract_api_and_rebuild_equality(store):
    with open_memory() as mem:
        report = mem.extract([{"text": "I live in Lisbon.", "speaker": "Ann", "ts": "2024-05-15"},
                              "I no longer live in Lisbon."], user="ann", ts="2024-06-01")
        assert report["found"] == 2 and report["facts"]["added"] == 1
        assert report["facts"]["contradicted"] == 1  # "no longer" retires it
        preview = mem.extract("I love jazz.", user="ann", dry_run=True)
        assert preview["would_extract"][0]["object"] == "jazz"
        assert len(_facts_of(mem)) == 2  # the dry run stored nothing
        before = [(r["id"], r["retired_at"], r["valid_to"]) for r in _facts_of(mem)]
        mem.admin.rebuild()
        assert [(r["id"], r["retired_at"], r["valid_to"]) for r in _facts_of(mem)] == before
