"""Who a fact is about, the statements the rule extractor used to miss (with the near misses
that must stay silent), one spelling per predicate wherever a fact enters, and the shared-block
PII guard seeing names that a cue marks in the writer's own blocks (issue 12)."""
from __future__ import annotations

import json

import pytest

from brandmind.clock import iso, parse_time
from brandmind.extract import Turn
from brandmind.extract.rules import RulesExtractor

from conftest import open_memory

TS = parse_time("2024-05-15T10:00:00Z")


def facts(text: str, *, speaker: str | None = None, role: str | None = None, user: str = "U") -> set[tuple]:
    found = RulesExtractor().extract([Turn(text, speaker=speaker, ts=TS, bead="b_1", user=user, role=role)])
    return {(f.subject, f.predicate, f.object, f.negated, iso(f.valid_from)[:10] if f.valid_from else None)
            for f in found}


def stored_facts(mem, user: str = "U") -> set[tuple]:
    return {(r["subject"], r["predicate"], r["object"]) for r in mem.sql.rows(
        "SELECT subject, predicate, object FROM memories WHERE user_id=? AND subject IS NOT NULL", (user,))}


# -- 1. attribution ------------------------------------------------------------------------------------
def test_an_assistant_turn_never_becomes_a_fact_about_the_user(store, bm):
    line = json.dumps({"role": "assistant", "content": "I work for Acme Travel. Ann lives in Lisbon."}) + "\n"
    res = bm("ingest", "-", "-u", "U", "--extract", input=line)
    assert res.code == 0, res
    assert res.json()["facts"]["added"] == 0
    # through the API, a role on a turn dict counts too (it was ignored: "I" became the user)
    with open_memory() as mem:
        for role in ("assistant", "system", "tool", "Assistant"):
            report = mem.extract([{"role": role, "content": "I work for Acme Travel."}], user="U")
            assert report["found"] == 0, role
        assert stored_facts(mem) == set()
        # a person's turn still is (role user, human, or none)
        for role in ("user", "human", None):
            item = {"content": "I work for Acme Travel."}
            if role:
                item["role"] = role
            assert mem.extract([item], user="U")["found"] == 1, role
        assert stored_facts(mem) == {("U", "works_at", "Acme Travel")}


def test_a_named_agent_turn_yields_facts_about_its_speaker_only(store, bm):
    lines = "".join(json.dumps(r) + "\n" for r in [
        {"role": "assistant", "speaker": "Bot", "content": "I work for Acme Travel. Ann lives in Lisbon. "
                                                           "My name is Robo."},
        {"role": "user", "speaker": "Ann", "content": "My sister Maria lives in Porto."},
    ])
    res = bm("ingest", "-", "-u", "ann", "--extract", input=lines)
    assert res.code == 0, res
    with open_memory() as mem:
        got = stored_facts(mem, "ann")
    assert ("Bot", "works_at", "Acme Travel") in got and ("Bot", "name", "Robo") in got
    assert not any(s == "Ann" and p == "lives_in" and o == "Lisbon" for s, p, o in got)  # the agent's claim
    assert ("Ann", "sibling_of", "Maria") in got  # what a person says about others stays
    # the rules on their own apply the same rule
    assert facts("Ann lives in Lisbon. I work for Acme Travel.", speaker="Bot", role="assistant") == {
        ("Bot", "works_at", "Acme Travel", False, None)}
    assert facts("I work for Acme Travel.", role="assistant") == set()


def test_the_llm_path_stores_nothing_an_agent_says_about_the_user(store, monkeypatch):
    pytest.importorskip("ollama")
    try:
        from .ollama_server import FakeOllama
    except ImportError:
        from ollama_server import FakeOllama  # type: ignore[no-redef]
    from brandmind.extract.llm import LLMExtractor

    with FakeOllama() as server:
        # a "model" that reads the assistant's turn as facts about the user and about itself
        server.chat_facts = [
            {"turn": 0, "subject": "U", "predicate": "works at", "object": "Acme Travel", "text": "U works at Acme"},
            {"turn": 0, "subject": "Bot", "predicate": "Works At", "object": "Acme Travel", "text": "Bot works at Acme"},
            {"turn": 1, "subject": "U", "predicate": "likesTea", "object": "green tea", "text": "U likes green tea"},
        ]
        turns = [Turn("I work for Acme Travel.", "Bot", TS, "b_0", "U", "assistant"),
                 Turn("I like green tea.", None, TS, "b_1", "U", "user"),
                 Turn("I am the assistant.", None, TS, "b_2", "U", "assistant")]
        ext = LLMExtractor(host=server.url)
        got = [(f.subject, f.predicate, f.object, f.sources) for f in ext.extract(turns)]
        assert got == [("Bot", "works_at", "Acme Travel", ["b_0"]), ("U", "likes_tea", "green tea", ["b_1"])]
        assert ext.last_report["bad_facts"] == 0
        sent = server.chat_requests[0]["messages"][1]["content"]
        assert "I am the assistant" not in sent  # an unnamed agent turn is not even sent
        # and through the store
        monkeypatch.setenv("BM_EXTRACTOR", "llm")
        monkeypatch.setenv("BM_OLLAMA_HOST", server.url)
        with open_memory() as mem:
            mem.extract([{"role": "assistant", "speaker": "Bot", "text": "I work for Acme Travel."},
                         {"role": "user", "text": "I like green tea."}], user="U")
            assert stored_facts(mem) == {("Bot", "works_at", "Acme Travel"), ("U", "likes_tea", "green tea")}


# -- 2. statements the rules missed --------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("I moved from Paris to Berlin last month.", {
        ("U", "moved_from", "Paris", False, "2024-04-01"), ("U", "lives_in", "Paris", True, "2024-04-01"),
        ("U", "moved_to", "Berlin", False, "2024-04-01"), ("U", "lives_in", "Berlin", False, "2024-04-01")}),
    ("We relocated from Lisbon to Porto in 2020.", {
        ("U", "moved_from", "Lisbon", False, "2020-01-01"), ("U", "lives_in", "Lisbon", True, "2020-01-01"),
        ("U", "moved_to", "Porto", False, "2020-01-01"), ("U", "lives_in", "Porto", False, "2020-01-01")}),
    ("I moved to Berlin from Paris.", {
        ("U", "moved_from", "Paris", False, None), ("U", "lives_in", "Paris", True, None),
        ("U", "moved_to", "Berlin", False, None), ("U", "lives_in", "Berlin", False, None)}),
    ("I relocated to Porto.", {("U", "moved_to", "Porto", False, None), ("U", "lives_in", "Porto", False, None)}),
    ("I moved out of London.", {("U", "moved_from", "London", False, None), ("U", "lives_in", "London", True, None)}),
    ("My name is Dana", {("U", "name", "Dana", False, None)}),
    ("my name is dana", {("U", "name", "Dana", False, None)}),
    ("Hello! My name is Dana, what's yours?", {("U", "name", "Dana", False, None)}),
    ("Hi, I'm Dana, nice to meet you", {("U", "name", "Dana", False, None)}),
    ("Call me Dee.", {("U", "name", "Dee", False, None)}),
    ("Everyone calls me Dee.", {("U", "name", "Dee", False, None)}),
    ("I go by Sam.", {("U", "name", "Sam", False, None)}),
    ("I'm vegetarian", {("U", "diet", "vegetarian", False, None)}),
    ("I am a vegan.", {("U", "diet", "vegan", False, None)}),
    ("I'm a strict pescatarian.", {("U", "diet", "pescatarian", False, None)}),
    ("I've been veggie for ten years.", {("U", "diet", "vegetarian", False, None)}),
    ("I went vegan last year.", {("U", "diet", "vegan", False, "2023-01-01")}),
    ("I follow a keto diet.", {("U", "diet", "keto", False, None)}),
    ("I'm no longer vegan.", {("U", "diet", "vegan", True, None)}),
    ("Ann is vegan.", {("Ann", "diet", "vegan", False, None)}),
    ("My birthday is June 3", {("U", "birthday", "June 3", False, None)}),
    ("my birthday's on the 5th of May.", {("U", "birthday", "May 5", False, None)}),
    ("Ann's birthday is Dec 24th.", {("Ann", "birthday", "December 24", False, None)}),
    ("I was born on March 3, 1990.", {("U", "birthday", "March 3", False, None),
                                       ("U", "born_on", "1990-03-03", False, None)}),
    ("I was born in 1990.", {("U", "birth_year", "1990", False, None)}),
])
def test_common_statements_are_extracted(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize("statement, near_miss", [
    ("I'm vegetarian.", "Am I vegetarian?"),
    ("My name is Dana.", "Is my name Dana?"),
    ("my name is dana", "Is my name Dana"),
    ("My birthday is June 3.", "Is my birthday June 3?"),
    ("My birthday is June 3.", "Do you know if my birthday is June 3?"),
    ("My birthday is June 3.", "What if my birthday is June 3"),
    ("I'm vegetarian.", "If I were vegetarian I would lose weight."),
    ("I am a vegan.", "I'd like to be vegan."),
    ("I went vegan last year.", "I'm thinking about going vegan."),
    ("I went vegan last year.", "Should I go vegan?"),
    ("I went vegan last year.", "Maybe I will become vegetarian."),
    ("I moved from Paris to Berlin.", "I want to move from Paris to Berlin."),
    ("I moved from Paris to Berlin.", "I might move from Paris to Berlin."),
    ("I'm vegetarian.", "My friend is vegetarian."),
    ("Everyone calls me Dana.", "Don't call me Dana."),
    ("Everyone calls me Dana.", "Please never call me Dana."),
    ("My name is Dana.", "I wish my name was Dana."),
    ("My name is Dana.", "My name is not Dana."),
    ("My name is Dana.", "She said her name is Dana."),
    ("My birthday is June 3.", "My birthday is coming up."),
    ("My birthday is June 3.", "My birthday is next week."),
    ("My birthday is June 3.", "My birthday is June 31."),
    ("my name is dana", "My name is pretty common."),
    ("my name is dana", "My name is hard to spell."),
    ("I was born on March 3, 1990.", "I was born on a farm."),
    ("I'm a vegan.", "Vegan food is great."),
    ("I'm a vegan.", "I'm a vegetarian restaurant owner."),
    ("I go by Sam.", "You could call me lazy."),
])
def test_near_misses_of_each_new_pattern_produce_no_fact(statement, near_miss):
    assert facts(statement)  # the pattern fires on the statement...
    assert facts(near_miss) == set()  # ...and stays silent on a question, wish or hypothetical


def test_the_users_own_name_is_a_fact_when_the_user_id_is_not_a_name(store):
    with open_memory() as mem:
        mem.extract(["My name is Dana."], user="dana")
        assert stored_facts(mem, "dana") == {("dana", "name", "Dana")}
    # said by a speaker of that name, it tells nothing new
    assert facts("I'm Dana.", speaker="Dana") == set()


def test_a_move_ends_the_old_home_and_the_diet_is_single_valued(store):
    with open_memory() as mem:
        mem.extract([{"text": "I live in Paris.", "ts": "2024-01-10"},
                     {"text": "I moved from Paris to Berlin last month.", "ts": "2024-05-15"},
                     {"text": "I'm vegetarian.", "ts": "2024-05-15"},
                     {"text": "I went vegan this week.", "ts": "2024-06-20"}], user="U")
        current = {(r["predicate"], r["object"], bool(json.loads(r["meta"]).get("negated")))
                   for r in mem.sql.rows("SELECT predicate, object, meta FROM memories WHERE user_id='U' "
                                         "AND subject IS NOT NULL AND retired_at IS NULL")}
        assert ("lives_in", "Berlin", False) in current and ("lives_in", "Paris", False) not in current
        assert ("diet", "vegan", False) in current and ("diet", "vegetarian", False) not in current
        paris = next(mem.sql.rows("SELECT valid_to FROM memories WHERE predicate='lives_in' AND object='Paris' "
                                  "AND text='U lives in Paris'"))
        assert iso(paris["valid_to"])[:10] == "2024-04-01"  # ended by the move


# -- 3. one spelling per predicate ---------------------------------------------------------------------
def test_predicates_are_one_spelling_wherever_a_fact_enters(store, bm):
    facts_in = "".join(json.dumps(f) + "\n" for f in [
        {"subject": "Ann", "predicate": "lives in", "object": "Lisbon"},
        {"subject": "Ann", "predicate": "Lives In", "object": "Lisbon"},
        {"subject": "Ann", "predicate": "lives-in", "object": "lisbon"},
        {"subject": "Ann", "predicate": "livesIn", "object": "Lisbon"},
    ])
    report = bm("facts", "add", "-", "-u", "ann", input=facts_in).json()
    assert (report["added"], report["confirmed"]) == (1, 3)
    assert bm("remember", "--fact", '{"subject": "Ann", "predicate": "LIVES_IN", "object": "Porto"}',
              "-u", "ann").json()["action"] == "updated"  # the same functional predicate: an update
    edge = bm("kg", "link", "Ann", "Works At", "Acme", "-u", "ann").json()
    assert edge["predicate"] == "works_at"
    with open_memory() as mem:
        preds = {r["predicate"] for r in mem.sql.rows("SELECT predicate FROM memories WHERE user_id='ann' "
                                                       "AND predicate IS NOT NULL")}
        assert preds == {"lives_in"}


def test_stored_rows_with_an_old_spelling_still_reconcile_and_rebuild_normalises(store):
    with open_memory() as mem:
        old = mem.facts.add({"subject": "Ann", "predicate": "lives_in", "object": "Lisbon"}, user="ann")["id"]
        # a row projected before predicates were normalised (an old import): "Lives In"
        with mem.sql.write():
            mem.sql.conn.execute("UPDATE memories SET predicate='Lives In' WHERE id=?", (old,))
        result = mem.facts.add({"subject": "Ann", "predicate": "lives in", "object": "Porto"}, user="ann")
        assert result["action"] == "updated" and result["retired"] == [old]
        # an op in the log with an old spelling is projected with the one spelling
        with mem.log.write() as t:
            t.append("memory.add", {"id": "m_oldspelling", "text": "Bob works at Acme", "type": "fact",
                                    "user": "bob", "agent": None, "importance": 0.5, "meta": {},
                                    "source": "import", "provenance": [], "ts": TS, "subject": "Bob",
                                    "predicate": "Works At", "object": "Acme"})
        mem.store.catch_up()
        assert mem.get("m_oldspelling")["predicate"] == "works_at"
        mem.admin.rebuild()
        assert {r["predicate"] for r in mem.sql.rows("SELECT predicate FROM memories WHERE subject IS NOT NULL")} \
            == {"lives_in", "works_at"}


# -- 4. the shared-block PII guard --------------------------------------------------------------------
LABEL = "tobacco_consumer_insights_service_experience"


@pytest.mark.parametrize("human", [
    "Biscuit is Ann's dog.",
    "Pet: Biscuit (dog)",
    "dog: biscuit",
    "Has a dog. Biscuit loves walks.",
    "Owns a beagle called biscuit.",
    "Biscuit (her dog) is 3.",
    "Ann's dog is called Biscuit. Ann bakes a biscuit on Sundays.",
])
def test_a_pets_name_in_the_writers_human_block_is_refused_in_a_shared_block(store, human):
    from brandmind.errors import InvalidInput
    from brandmind.memory import Memory

    note = "Users with a dog like Biscuit prefer morning walks"
    with Memory() as mem:
        mem.blocks.set("human", human, user="ann")
        mem.personas.assign("ann", "tobacco_consumer_insights", 1.0)
        with pytest.raises(InvalidInput) as err:
            mem.blocks.append(LABEL, note, user="ann")
        assert "Biscuit" in err.value.message
        assert mem.blocks.get(LABEL, user="ann")["value"] == ""
        out = mem.blocks.append(LABEL, note, user="ann", redact=True)
        assert "Biscuit" not in out["value"] and "[REDACTED:" in out["value"]
        # the generic note without the name goes in
        mem.blocks.append(LABEL, "Dog owners prefer morning walks.", user="ann")


def test_names_cued_in_other_private_blocks_and_memories_count_and_common_words_do_not(store):
    from brandmind import pii, privacy
    from brandmind.memory import Memory

    with Memory() as mem:
        mem.blocks.set("project_notes", "Sister's name: Imogen. Work is her passion.", user="sam")
        mem.remember("My cat, Pixel, sleeps all day. Coffee keeps me going.", user="sam")
        terms = privacy.gather_private_terms(mem.store, "sam")
        assert {"Imogen", "Pixel"} <= terms
        for common in ("Work", "Coffee", "Sister"):
            assert common not in terms
        hits = pii.scan("Cat owners like Pixel want quiet hours; work and coffee come up often", private_terms=terms)
        assert [h.text for h in hits] == ["Pixel"]
