"""Names speakers are called by (brandmind/storage/aliases.py): a query that names a speaker as
the conversation calls them ("Kate" for the speaker recorded as Emi) ranks that speaker's turns
as if it had named them; a name said of someone else, or a place, is no alias; a forgotten
turn no longer counts."""
from __future__ import annotations

import re

import pytest

from brandmind.memory import Memory
from brandmind.storage import aliases


@pytest.mark.parametrize("text, word, said_to", [
    ("Hey Kate! How are you?", "Kate", True),
    ("Kate! You have to tell me more", "Kate", True),
    ("Kate, look at this", "Kate", True),
    ("Thank you, Kate.", "Kate", True),
    ("thanks Kate", "Kate", True),
    ("What about you Kate?", "Kate", True),
    ("see you tomorrow\nKate, bring the map", "Kate", True),
    ("I met this amazing woman, Jean, who had been through a lot", "Jean", False),
    ("we met Kate at the station", "Kate", False),
    ("Paris?! That is really great", "Paris", False),
    ("I love Paris.", "Paris", False),
    ("Is Kate coming too?", "Kate", False),
])
def test_a_name_is_said_to_someone_only_in_a_form_of_address(text: str, word: str, said_to: bool) -> None:
    assert aliases.addresses(text, re.search(word, text)) is said_to


@pytest.mark.parametrize("query, words", [
    ("What are Kate's hobbies?", ["Kate"]),
    ("Kate likes what?", []),                          # the opening word: any sentence starts so
    ("When did Emi and Kate meet in Paris?", ["Kate", "Paris"]),
    ("what did Mel, Jo and Kate and Lea and Max eat?", ["Mel", "Jo", "Kate", "Lea"]),  # the first four
])
def test_candidates_are_capitalised_words_that_name_no_speaker(query: str, words: list[str]) -> None:
    assert aliases.candidates(query, {"emi"}) == words


def _chat(mem: Memory) -> list[str]:
    """Emi and Elise, who calls Emi "Kate"; Kate is never a speaker's recorded name.  "Jean" is
    a friend they talk about; Paris a place they mention.  Returns the ids of Elise's turns
    that address Kate."""
    said = [
        ("Elise", "Hey Kate! How was your weekend?"),
        ("Emi", "Lovely, I went skiing with my brother in the Alps."),
        ("Elise", "Thank you, Kate. That photo is beautiful."),
        ("Emi", "My favourite hobby is pottery, I throw bowls every Sunday."),
        ("Elise", "What about you Kate?"),
        ("Emi", "I also met our friend Jean, she is moving to Paris."),
        ("Elise", "Jean told me about Paris too, she loves it there."),
        ("Emi", "Paris will suit Jean, she always wanted to live in Paris."),
        ("Elise", "My hobbies are painting and running, and I just started a pottery class."),
        ("Elise", "Bye Kate, talk tomorrow!"),
    ]
    ids = []
    for i, (who, text) in enumerate(said):
        out = mem.ingest([{"role": "user", "speaker": who, "content": text, "thread": "chat",
                           "ts": f"2026-03-01T10:{i:02d}:00Z"}])
        ids.append((who, text, out))
    return [mem.recall(text, k=1)[0]["id"] for who, text, _ in ids if who == "Elise" and "Kate" in text]


def test_a_speaker_is_found_by_the_name_the_conversation_calls_them(store) -> None:
    with Memory() as mem:
        addressing = _chat(mem)
        searcher = mem.store.searcher
        assert searcher.speakers_named("What are Kate's hobbies?", "default") == ("What are Emi's hobbies?", ["Emi"])
        # a friend talked about and a place: no speaker
        assert searcher.speakers_named("Where is Jean moving?", "default") == ("Where is Jean moving?", [])
        assert searcher.speakers_named("Who lives in Paris?", "default") == ("Who lives in Paris?", [])
        hits = mem.recall("What are Kate's hobbies?", k=3)
        assert hits[0]["meta"]["speaker"] == "Emi" and "pottery" in hits[0]["text"], [h["text"] for h in hits]
        assert hits[0]["signals"]["speaker"]["speaker"] == "Emi"
        # forgetting the turns that call Emi "Kate" takes the alias with them
        for memory_id in addressing[:2]:
            mem.forget(memory_id)
        assert searcher.speakers_named("What are Kate's hobbies?", "default") == ("What are Kate's hobbies?", [])


def test_one_addressing_turn_said_many_times_is_no_alias(store) -> None:
    """A text repeated (an agent loop replays it) counts once: three votes need three texts."""
    with Memory() as mem:
        turns = []
        for i in range(6):
            turns.append({"role": "user", "speaker": "Elise", "content": "Hey Kate! Lovely day.", "thread": "chat",
                          "ts": f"2026-03-01T10:{2 * i:02d}:00Z"})
            turns.append({"role": "user", "speaker": "Emi", "content": f"Indeed, day {i} is lovely.",
                          "thread": "chat", "ts": f"2026-03-01T10:{2 * i + 1:02d}:00Z"})
        mem.ingest(turns)
        assert mem.store.searcher.speakers_named("What does Kate like?", "default")[1] == []


def test_the_context_block_says_which_speaker_the_question_calls_by_another_name(store) -> None:
    """An agent reading the block for "What are Kate's hobbies?" sees the turns of Emi marked
    as Kate's, among the recalled memories ("- Emi (Kate): ...") and the recent turns
    ("[10:03] Emi (Kate): ..."); turns of others, and blocks for questions that call nobody by
    another name, are as before."""
    with Memory() as mem:
        _chat(mem)
        for recent, line in ((0, "- Emi (Kate): My favourite hobby is pottery"),
                             (20, "Emi (Kate): My favourite hobby is pottery")):
            block = mem.context("What are Kate's hobbies?", budget=400, recent=recent)["text"]
            assert line in block and "Elise (Kate)" not in block and "Elise: " in block, block
            plain = mem.context("What are Emi's hobbies?", budget=400, recent=recent)["text"]
            assert "(Kate)" not in plain and "Emi: My favourite hobby is pottery" in plain, plain


def test_another_users_turns_with_the_word_do_not_crowd_the_users_out(store) -> None:
    """The turns holding the word are read per user: a second user's 80 newer turns naming
    their cat Kate neither hide the first user's addresses nor make Kate an alias for them."""
    with Memory() as mem:
        _chat(mem)
        mem.ingest([{"role": "user", "speaker": "Bob" if i % 2 else "Al", "thread": "pets",
                     "content": f"Kate the cat knocked cup {i} off the table.", "ts": f"2026-03-02T10:{i % 60:02d}:{i // 60:02d}Z"}
                    for i in range(80)], user="bob")
        assert mem.store.searcher.speakers_named("What are Kate's hobbies?", "default")[1] == ["Emi"]
        assert mem.store.searcher.speakers_named("What did Kate knock over?", "bob")[1] == []


def test_names_stay_known_across_writes_and_follow_the_rows_added(store, monkeypatch) -> None:
    """An agent loop writes a turn before each query: the speakers, and the names they are
    called by, are kept across writes and brought up to date from the rows added (a new
    speaker is known at once, a word said again is looked at again), not read anew from every
    row of the user's."""
    from brandmind.storage import search

    def turn(i: int, who: str, text: str, thread: str = "chat") -> dict:
        return {"role": "user", "speaker": who, "content": text, "thread": thread, "ts": f"2026-03-01T10:{i:02d}:00Z"}

    with Memory() as mem:
        s = mem.store.searcher
        mem.ingest([turn(0, "Emi", "Morning! Back from the mountains."),
                    turn(1, "Elise", "Hey Kate! How was your weekend?"),
                    turn(2, "Emi", "Lovely, I went skiing in the Alps."),
                    turn(3, "Elise", "Thank you, Kate. That photo is beautiful."),
                    turn(4, "Emi", "My favourite hobby is pottery.")])
        assert s.speakers_named("What are Kate's hobbies?", "default")[1] == []  # two addresses: not yet
        calls: list[int] = []
        real = search.speakers
        monkeypatch.setattr(search, "speakers", lambda sql, user, after=0: calls.append(after) or real(sql, user, after))
        mem.ingest([turn(5, "Zed", "Zed here, I just joined.", thread="other")])
        assert s.speakers_named("What did Zed say?", "default")[1] == ["Zed"]
        sql = mem.store.sql
        with sql.write():  # a vector made late lands (the daemon's worker): mem_changes moves, no name can go
            rowid = sql.conn.execute("SELECT max(rowid) FROM memories").fetchone()[0]
            sql.conn.execute("INSERT INTO vec_pending(rowid) VALUES(?)", (rowid,))
            sql.conn.execute("DELETE FROM vec_pending WHERE rowid = ?", (rowid,))
        assert s.speakers_named("What did Zed say?", "default")[1] == ["Zed"]
        assert calls and all(after > 0 for after in calls)  # only the rows added were read
        mem.ingest([turn(6, "Elise", "What about you Kate?"), turn(7, "Emi", "Pottery, as always.")])
        assert s.speakers_named("What are Kate's hobbies?", "default") == ("What are Emi's hobbies?", ["Emi"])
        mem.forget(mem.recall("Zed here, I just joined.", k=1)[0]["id"])  # a delete: read anew
        assert s.speakers_named("What did Zed say?", "default")[1] == [] and calls[-1] == 0
