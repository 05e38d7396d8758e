"""bm context / Memory.context: the best block that fits a token budget, counted on the
serialised text; and the token counter behind it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brandmind.context import HEADERS, full_history_tokens
from brandmind.errors import UsageError
from brandmind.memory import Memory
from brandmind.tokens import REGEX, WORDPIECE, RegexCounter, WordPieceCounter, get_counter

from conftest import assert_error

SAMPLE = Path(__file__).resolve().parents[1] / "scripts" / "sample_conversation.jsonl"
QUESTION = "Where does Ann work, and which days is she in the office?"


@pytest.fixture
def ann(store):
    """A store holding the sample conversation (74 turns of Ann and her assistant)."""
    with Memory() as mem:
        with SAMPLE.open("rb") as fh:
            assert mem.ingest(fh, user="ann")["ingested"] == 74
        mem.remember("Ann prefers window seats on trains", type="preference", user="ann",
                     ts="2024-03-20T10:00:00Z")
    return store


def candidates(result: dict) -> set[str]:
    chosen = {item.get("id") or item.get("label") for items in result["sections"].values() for item in items}
    dropped = {key for name, keys in result["dropped"].items() if name != "duplicates" for key in keys}
    assert not chosen & dropped
    return chosen | dropped


def check_result(result: dict, budget: int, counter=None) -> None:
    """The invariants of every answer: counted exactly on the returned text, within the budget."""
    counter = counter or get_counter()
    assert result["budget"] == budget
    assert result["tokens"] <= result["limit"] <= budget
    assert result["tokens"] == (counter.count(result["text"]) if result["text"] else 0)
    assert (result["text"] == "") == (result["tokens"] == 0)
    assert result["tokenizer"] == counter.name
    chosen = sum(len(v) for v in result["sections"].values())
    assert (chosen == 0) == (result["text"] == "")
    if result["format"] == "json" and result["text"]:
        assert json.loads(result["text"]) == {k: v for k, v in result["sections"].items() if v}
    elif result["text"]:
        for item in result["sections"]["memories"] + result["sections"]["recent"]:
            first = item["text"].splitlines()[0]
            # a turn that continues the line above (same speaker, same conversation) is shown without its speaker
            said = first.split(": ", 1)[1] if ": " in first else first
            assert first in result["text"] or f"\n  {said}" in result["text"]


# -- the token counter ------------------------------------------------------------------------
def test_the_default_counter_is_the_embedded_wordpiece_tokenizer_without_special_tokens():
    counter = get_counter()
    assert counter.name == WORDPIECE
    assert counter.count("") == 0
    assert counter.count("hello") == 1                      # no [CLS] / [SEP]
    assert counter.count("I live in Alfama.") == 6          # i live in alfa ##ma .
    long = "word " * 5000                                   # no truncation (the file says 128)
    assert counter.count(long) == 5000
    texts = ["Ann lives in Lisbon.", "", "ok", "The ferry leaves at 18:40 from Cais do Sodré!"]
    assert counter.count_many(texts) == [counter.count(t) for t in texts]
    # additive over whitespace: what lets bm count lines before joining them
    assert counter.count("\n".join(texts)) == sum(counter.count_many(texts))
    # words are counted by the embedder's own tokenizer (parsed once a process), which truncates
    # at 256: a word that long without a space is counted again in full
    from brandmind.embed.minilm import shared_tokenizer
    from brandmind.embed.minilm import model_dir as minilm_dir

    fresh = WordPieceCounter()
    assert fresh._words_tokenizer()[0] is shared_tokenizer(minilm_dir())
    assert fresh.count("," * 600) == 600 and fresh.count("日本" * 200 + " ok") == 401
    assert fresh.count("," * 255) == 255 and fresh.count("," * 256) == 256


_LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
                max_size=160)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, max_size=8))
def test_both_counters_are_additive_over_newlines(lines):
    """What lets a context block be counted as the sum of its lines (context._fit): any
    text (accents, CJK, emoji, punctuation, words over 100 characters) joined by newlines."""
    for counter in (_WORDPIECE, RegexCounter()):
        assert counter.count("\n".join(lines)) == sum(counter.count_many(lines)), counter.name
    # and bm's WordPiece counts (a text's words summed, from its word cache) are the
    # tokenizer's own count of the whole text, joined by newlines or spaces
    raw = _WORDPIECE._tokenizer()
    for text in [*lines, "\n".join(lines), " ".join(lines)]:
        assert _WORDPIECE.count(text) == len(raw.encode(text, add_special_tokens=False).ids), repr(text)


_WORDPIECE = WordPieceCounter()


def test_wordpiece_counts_are_kept_per_text_and_stay_exact(monkeypatch):
    import brandmind.tokens as tokens

    counter, fresh = WordPieceCounter(), WordPieceCounter()
    texts = ["Ann lives in Lisbon.", "ok", "Ann lives in Lisbon.", "x " * 3000]
    assert counter.count_many(texts) == fresh.count_many(texts) == [5, 1, 5, 3000]
    asked = []
    tok = counter._tokenizer()
    monkeypatch.setattr(counter, "_tok", type("Spy", (), {"encode_batch_fast": lambda self, t, **kw: asked.append(
        list(t)) or tok.encode_batch_fast(t, **kw)})())
    assert counter.count_many(texts + ["new line"]) == [5, 1, 5, 3000, 2]
    # the short texts came from the text cache; the long one (not kept whole) from its words' counts;
    # only the words never seen went to the tokenizer
    assert asked == [["new", "line"]]
    monkeypatch.setattr(tokens, "CACHE_SIZE", 3)  # full: cleared whole, counts still exact
    monkeypatch.setattr(tokens, "WORD_CACHE_SIZE", 4)
    assert "Ann" in counter._words
    assert counter.count_many(["a b", "c d e", "f"]) == [2, 3, 1] and len(counter._counts) <= 3
    assert "Ann" not in counter._words and counter.count_many(["Lisbon's ferries", "Ann f"]) == [4, 2]


def test_the_regex_fallback_is_close_to_wordpiece_and_used_when_the_model_is_missing(monkeypatch):
    rx, wp = RegexCounter(), WordPieceCounter()
    turns = [json.loads(line)["content"] for line in SAMPLE.read_text().splitlines()]
    ratio = sum(rx.count_many(turns)) / sum(wp.count_many(turns))
    assert 0.85 <= ratio <= 1.15, ratio
    assert rx.count("Hello, world!") == 4
    assert rx.count("2024-05-01") == 6  # digits in groups of up to 3: 2 + 1 + 1, two hyphens
    assert rx.count("我喜欢绿茶") == 5  # one per CJK ideograph, as BERT splits them
    assert rx.count("  \n\t ") == 0

    import brandmind.tokens as tokens

    monkeypatch.setattr(tokens, "wordpiece_available", lambda: False)
    monkeypatch.setattr(tokens, "_default", None)
    assert tokens.get_counter().name == REGEX


# -- the budget ---------------------------------------------------------------------------------
def test_the_budget_is_never_exceeded_for_any_budget(ann):
    counter = get_counter()
    with Memory() as mem:
        full = full_history_tokens(mem.store, user="ann")

        @settings(max_examples=60, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(budget=st.one_of(st.integers(1, 40), st.integers(1, full + 500)),
               fmt=st.sampled_from(["text", "json"]), recent=st.integers(0, 30),
               margin=st.sampled_from([0.0, 0.15]))
        def check(budget, fmt, recent, margin):
            res = mem.context(QUESTION, budget=budget, user="ann", format=fmt, recent=recent, margin=margin)
            check_result(res, budget, counter)
            assert res["tokens"] <= int(budget * (1 - margin))
            # every candidate is either in the block or listed as dropped
            assert len(candidates(res)) == sum(len(v) for v in res["sections"].values()) + \
                sum(len(v) for k, v in res["dropped"].items() if k != "duplicates")

        check()
        # a large budget takes everything; more budget never gives fewer tokens
        big = mem.context(QUESTION, budget=1_000_000, user="ann")
        assert not any(v for k, v in big["dropped"].items() if k != "duplicates")
        used = [mem.context(QUESTION, budget=b, user="ann")["tokens"] for b in (50, 200, 800, 3000)]
        assert used == sorted(used) and used[0] > 0


class Spy:
    """The default counter, noting every text it is asked to count."""

    def __init__(self, inner):
        self.inner, self.name, self.additive, self.seen = inner, inner.name, inner.additive, []

    def count(self, text):
        return self.count_many([text])[0]

    def count_many(self, texts):
        self.seen += texts
        return self.inner.count_many(texts)


def test_only_candidates_that_may_fit_are_counted_and_the_block_is_the_same(ann, monkeypatch):
    """Lines whose words alone no longer fit are skipped uncounted: the same block as counting
    every candidate first, for a fraction of the counting."""
    from brandmind import context as ctx
    from brandmind.context import build_context

    with Memory() as mem:
        for budget in range(30, 1200, 31):
            for fmt in ("text", "json") if budget % 3 == 0 else ("text",):
                lazy, eager = Spy(get_counter()), Spy(get_counter())
                got = build_context(mem.store, QUESTION, budget=budget, user="ann", format=fmt, counter=lazy)
                with monkeypatch.context() as m:
                    m.setattr(ctx, "_at_least", lambda it: -10**9)  # every candidate counted
                    want = build_context(mem.store, QUESTION, budget=budget, user="ann", format=fmt, counter=eager)
                assert got == want
                check_result(got, budget)
                if fmt == "text" and budget <= 600:  # (compact JSON has few spaces: a weak bound;
                    # past ~300 tokens the refill offers what merged lines saved to the rest: fewer skipped)
                    assert len(lazy.seen) < len(eager.seen) * (0.75 if budget < 200 else 1.0), \
                        (budget, len(lazy.seen), len(eager.seen))


@pytest.mark.parametrize("budget", [1, 2, 3, 4])
def test_a_budget_smaller_than_a_header_gives_an_empty_block(ann, budget):
    with Memory() as mem:
        res = mem.context(QUESTION, budget=budget, user="ann")
    assert res["text"] == "" and res["tokens"] == 0
    assert res["sections"] == {"core": [], "shared": [], "memories": [], "recent": []}
    assert len(res["dropped"]["memories"]) > 5 and len(res["dropped"]["recent"]) == 20


def test_the_margin_leaves_room_for_another_tokenizer(ann):
    with Memory() as mem:
        plain = mem.context(QUESTION, budget=600, user="ann")
        safe = mem.context(QUESTION, budget=600, user="ann", margin=0.15)
    assert safe["limit"] == 510 and safe["tokens"] <= 510 < plain["limit"]
    assert plain["tokens"] > 510  # the margin changed the choice


# -- what goes in ---------------------------------------------------------------------------
def test_a_speakers_turns_in_a_row_read_as_one_excerpt_and_what_that_saves_is_spent(store, monkeypatch):
    """A turn by the speaker of the memory line above, in the same conversation (thread and
    episode), continues that line without repeating the speaker; another speaker, thread or
    episode (a pause over episode_gap_minutes) starts a new line.  The tokens saved go to
    further candidates: more memories than filling by whole lines alone, still within the limit."""
    from brandmind import context as ctx

    t0 = 1_709_542_800_000  # 2024-03-04 09:00 UTC
    turns = [("Ann", "the otter rescue in Porto needs volunteers", 0, "main"),
             ("Ann", "I signed up for the otter rescue on Saturdays", 1, "main"),
             ("Ann", "otters eat crabs at the rescue", 2, "main"),
             ("Bo", "the otter rescue sounds lovely", 3, "main"),
             ("Bo", "my cousin fed otters at the rescue once", 4, "main"),
             ("Ann", "otter rescue again: the pool was cleaned", 200, "main"),  # 3 h later: a new episode
             ("Ann", "side thread: otter rescue stickers", 201, "other")]
    lines = [json.dumps({"role": "user", "speaker": who, "content": text, "thread": thread,
                         "ts": t0 + minute * 60_000}) for who, text, minute, thread in turns]
    with Memory() as mem:
        mem.ingest(lines, user="ann")
        res = mem.context("otter rescue", budget=2000, user="ann", recent=0)
        check_result(res, 2000)
        text = res["text"]
        assert ("- Ann: the otter rescue in Porto needs volunteers\n  I signed up for the otter rescue on Saturdays\n"
                "  otters eat crabs at the rescue\n- Bo: the otter rescue sounds lovely\n"
                "  my cousin fed otters at the rescue once\n") in text
        assert "\n- Ann: otter rescue again: the pool was cleaned\n" in text  # another episode
        assert "- Ann: side thread: otter rescue stickers" in text  # another thread
        # the saving is spent: a budget where whole lines leave a memory out takes it in
        tight = [mem.context("otter rescue", budget=b, user="ann", recent=0) for b in range(20, 120, 4)]
        with monkeypatch.context() as m:
            m.setattr(ctx, "REFILL_ROUNDS", 0)
            whole = [mem.context("otter rescue", budget=b, user="ann", recent=0) for b in range(20, 120, 4)]
    for a, b in zip(tight, whole):
        check_result(a, a["budget"])
        assert len(a["sections"]["memories"]) >= len(b["sections"]["memories"])
    assert any(len(a["sections"]["memories"]) > len(b["sections"]["memories"]) for a, b in zip(tight, whole))


def test_sections_come_in_order_with_dates_and_core_blocks_first(ann):
    with Memory() as mem:
        mem.blocks.set("human", "Ann's timezone: Europe/Lisbon", user="ann")
        mem.blocks.set("agent_persona", "You are Ann's assistant.", user="ann", agent="coach", by_agent=False)
        res = mem.context(QUESTION + " Which seats does she prefer?", budget=1500, user="ann", agent="coach")
    text = res["text"]
    heads = [text.index(HEADERS[s]) for s in ("core", "memories", "recent")]
    assert heads == sorted(heads) and heads[0] == 0
    assert set(text.splitlines()[1:3]) == {"agent_persona: You are Ann's assistant.",
                                           "human: Ann's timezone: Europe/Lisbon"}
    assert {b["label"] for b in res["sections"]["core"]} == {"agent_persona", "human"}
    memory_lines = text.split(HEADERS["memories"])[1].split(HEADERS["recent"])[0].strip().splitlines()
    assert memory_lines and re.fullmatch(r"\[\d{4}-\d{2}-\d{2}\]", memory_lines[0])
    assert all(re.fullmatch(r"\[\d{4}-\d{2}-\d{2}\]", line) or line.startswith("- ") for line in memory_lines
               if not line.startswith("  "))  # "  ": the same speaker's next turn (test_a_speakers_turns_...)
    assert not memory_lines[0].startswith("  ") and all(
        not line.startswith("  ") or not memory_lines[i - 1].startswith("[") for i, line in enumerate(memory_lines))
    day = memory_lines.index("[2024-03-20]")
    assert "- (preference) Ann prefers window seats on trains" in memory_lines[day + 1:]
    # memories come as excerpts by day: each day once, the days in order of their best-ranked
    # memory; beads are oldest first and show their date when it changes
    days = [m["date"] for m in res["sections"]["memories"]]
    runs = [d for i, d in enumerate(days) if i == 0 or days[i - 1] != d]
    assert len(runs) == len(set(runs)) == sum(re.fullmatch(r"\[.*\]", line) is not None for line in memory_lines)
    best = {d: max(m["score"] for m in res["sections"]["memories"] if m["date"] == d) for d in runs}
    assert runs == sorted(runs, key=lambda d: -best[d])
    stamps = [b["ts"] for b in res["sections"]["recent"]]
    assert stamps == sorted(stamps)
    recent_lines = text.split(HEADERS["recent"])[1].strip().splitlines()
    assert re.match(r"\[\d{4}-\d{2}-\d{2} \d\d:\d\d\] \w+: ", recent_lines[0])
    assert any(re.match(r"\[\d\d:\d\d\] \w+: ", line) for line in recent_lines[1:])
    # core blocks come first even when the budget is tight
    with Memory() as mem:
        tight = mem.context(QUESTION, budget=30, user="ann", agent="coach")
    assert tight["text"].startswith(HEADERS["core"]) and tight["tokens"] <= 30


def test_a_block_edit_shows_in_the_next_context(ann, bm):
    assert bm("block", "set", "human", "Ann is vegetarian", "--user", "ann").code == 0
    first = bm("context", QUESTION, "--budget", "400", "--user", "ann").out
    assert "human: Ann is vegetarian" in first
    assert bm("block", "replace", "human", "vegetarian", "vegan", "--user", "ann").code == 0
    second = bm("context", QUESTION, "--budget", "400", "--user", "ann").out
    assert "human: Ann is vegan" in second and "vegetarian" not in second


def test_priority_is_core_shared_top_memories_then_recent(ann):
    with Memory() as mem:
        mem.blocks.set("human", "Ann is vegetarian", user="ann")
        mem.personas.assign("ann", "qsr_real_estate", confidence=0.9)
        mem.blocks.append("qsr_real_estate_service_experience",
                         "Site-selection users want drive-thru traffic counts before rent figures.",
                         persona="qsr_real_estate", user="ann")
        res = mem.context(QUESTION, budget=4000, user="ann")
        assert [b["label"] for b in res["sections"]["shared"]] == ["qsr_real_estate_service_experience"]
        heads = [res["text"].index(HEADERS[s]) for s in ("core", "shared", "memories", "recent")]
        assert heads == sorted(heads)
        # a budget too small for everything keeps the tiers in order: the recent turns go first
        small = mem.context(QUESTION, budget=160, user="ann")
        assert small["sections"]["core"] and small["sections"]["shared"]
        assert small["dropped"]["recent"] and not small["dropped"]["core"] and not small["dropped"]["shared"]


def test_private_blocks_and_memories_never_reach_another_users_context(store, bm):
    with Memory() as mem:
        for user in ("ann", "bob"):
            mem.personas.assign(user, "cpg_retail_media", confidence=0.8)
        mem.blocks.set("human", "Ann Marquez lives at 14 Rua das Flores, Lisbon; phone +351 912 345 678", user="ann")
        mem.remember("Ann's daughter Lucia starts school at Colegio Verde in September", user="ann")
        # what Ann's agent learned, without PII, is shared with Bob's agents
        mem.blocks.append("cpg_retail_media_service_experience",
                         "Retail media users ask for incrementality before ROAS.",
                         persona="cpg_retail_media", user="ann")
    # Ann's private names, places and numbers are refused in the shared block ...
    for leak in ("Ann Marquez prefers weekly ROAS reports", "Lucia's school Colegio Verde runs a sampling pilot",
                 "call +351 912 345 678 for the media plan"):
        res = bm("block", "append", "cpg_retail_media_service_experience", leak,
                 "--persona", "cpg_retail_media", "--user", "ann")
        assert res.code == 1 and "Error:" in res.err, (leak, res)
    # ... or redacted with --redact
    res = bm("block", "append", "cpg_retail_media_service_experience", "Ann Marquez wanted weekly ROAS",
             "--persona", "cpg_retail_media", "--user", "ann", "--redact")
    assert res.code == 0, res
    with Memory() as mem:
        bob = mem.context("what do retail media users want? tell me about school and Lisbon",
                          budget=4000, user="bob")
    assert "incrementality" in bob["text"]
    for private in ("Marquez", "Rua das Flores", "912 345", "Lucia", "Colegio Verde", "Lisbon"):
        assert private not in bob["text"], private


def test_a_recent_turn_that_is_also_recalled_appears_once(ann):
    with Memory() as mem:
        last = mem.beads_tail(1, user="ann")[0]
        res = mem.context(last["content"], budget=4000, user="ann")
        turn = next(m for m in mem.recall(last["content"], k=30, user="ann")
                    if m["provenance"] and m["provenance"][0]["bead"] == last["id"])
    assert res["text"].count(last["content"]) == 1
    assert last["id"] in [b["id"] for b in res["sections"]["recent"]]
    assert turn["id"] not in [m["id"] for m in res["sections"]["memories"]]
    assert turn["id"] in res["dropped"]["duplicates"]
    # an older turn outside the recent window stays among the memories
    with Memory() as mem:
        res = mem.context(QUESTION, budget=4000, user="ann", recent=2)
    ids = [m["id"] for m in res["sections"]["memories"]]
    assert any("Tidewater" in m["text"] for m in res["sections"]["memories"]) and len(ids) == len(set(ids))


def test_beads_after_now_are_not_recent_and_other_users_never_appear(ann):
    with Memory() as mem:
        mem.remember("Bob lives in Porto and works at the Tidewater office too", user="bob")
        mem.remember("Ann's travel agent books aisle seats", user="ann", agent="travel")
        res = mem.context(QUESTION, budget=4000, user="ann", now="2024-03-10T00:00:00Z")
        then = mem.context(QUESTION, budget=4000, user="ann", as_of="2024-03-05")
        other = mem.context("Tidewater office", budget=4000, user="bob")
        scoped = mem.context("seats", budget=4000, user="ann", agent="travel")
        unscoped = mem.context("seats", budget=4000, user="ann", agent="other")
    assert res["sections"]["recent"] and all(b["ts"] < "2024-03-10" for b in res["sections"]["recent"])
    assert then["sections"]["recent"] and all(b["ts"] < "2024-03-05" for b in then["sections"]["recent"])
    assert any("aisle" in m["text"] for m in scoped["sections"]["memories"])
    assert not any("aisle" in m["text"] for m in unscoped["sections"]["memories"])
    assert "Bob" not in res["text"]
    assert [m["text"] for m in other["sections"]["memories"]] == [
        "Bob lives in Porto and works at the Tidewater office too"]
    assert other["sections"]["recent"] == []


def test_retired_memories_never_appear(store):
    with Memory() as mem:
        kept = mem.remember("Ann's favourite tea is sencha", user="ann")
        dup = mem.remember("Ann's favourite tea is sencha!", user="ann")
        before = mem.context("favourite tea", user="ann")["sections"]["memories"]
        assert {m["id"] for m in before} == {kept["id"], dup["id"]}
        assert mem.consolidate(user="ann")["merged"] == 1
        res = mem.context("favourite tea", user="ann")
    assert [m["id"] for m in res["sections"]["memories"]] == [kept["id"]]
    assert res["text"].count("sencha") == 1


def test_json_format_counts_the_json_it_returns(ann):
    with Memory() as mem:
        res = mem.context(QUESTION, budget=1200, user="ann", format="json")
    check_result(res, 1200)
    assert set(res) >= {"text", "tokens", "budget", "sections", "dropped", "tokenizer"}
    assert set(res["sections"]) == {"core", "shared", "memories", "recent"}
    assert set(res["dropped"]) == {"core", "shared", "memories", "recent", "duplicates"}
    data = json.loads(res["text"])
    assert list(data) == ["memories", "recent"]
    assert set(data["memories"][0]) >= {"id", "date", "type", "scope", "text", "score"}
    assert set(data["recent"][0]) == {"id", "ts", "role", "speaker", "text"}


def test_bad_arguments_are_usage_errors(ann):
    with Memory() as mem:
        for bad in (0, -1, 1_000_001, 2.5, True, "100"):
            with pytest.raises(UsageError, match="budget"):
                mem.context("x", budget=bad, user="ann")
        with pytest.raises(UsageError, match="format"):
            mem.context("x", format="xml", user="ann")
        with pytest.raises(UsageError, match="recent"):
            mem.context("x", recent=-1, user="ann")
        with pytest.raises(UsageError, match="margin"):
            mem.context("x", margin=1.0, user="ann")


# -- the measurement -----------------------------------------------------------------------------
def test_context_fits_the_budget_and_costs_far_less_than_the_full_history(ann, capsys):
    """On the sample conversation: the block for a question, counted exactly as returned,
    against sending the whole history (every turn rendered the same way)."""
    counter = get_counter()
    with Memory() as mem:
        full = full_history_tokens(mem.store, user="ann")
        res = mem.context(QUESTION, budget=500, user="ann")
    check_result(res, 500, counter)
    assert 400 <= res["tokens"] <= 500          # the budget is used, not wasted
    ratio = res["tokens"] / full
    assert full > 2000 and ratio < 0.25
    assert "Tidewater" in res["text"] and res["sections"]["recent"]
    with capsys.disabled():
        print(f"\ncontext: {res['tokens']} tokens of a 500 budget vs {full} for the full history "
              f"({ratio:.1%}, {1 - ratio:.0%} fewer)")


# -- the CLI --------------------------------------------------------------------------------------
def test_cli_prints_the_block_or_the_json(ann, bm):
    res = bm("context", QUESTION, "--budget", "300", "--user", "ann")
    assert res.code == 0, res
    with Memory() as mem:
        api = mem.context(QUESTION, budget=300, user="ann")
    assert res.out == api["text"] + "\n"
    assert res.out.startswith(HEADERS["memories"])
    res = bm("context", QUESTION, "--budget", "300", "--user", "ann", "--json")
    data = res.json()
    assert data["text"] == api["text"] and data["tokens"] == api["tokens"] <= 300
    res = bm("context", QUESTION, "-b", "300", "-u", "ann", "--format", "json")
    assert json.loads(res.out)["memories"]
    res = bm("context", "-", "--budget", "2", "--user", "ann", input=QUESTION)
    assert res.code == 0 and res.out == ""  # nothing fits: an empty block


@pytest.mark.parametrize("args, words", [
    (["--budget", "0"], ["budget", "1,000,000"]),
    (["--budget", "-5"], ["budget"]),
    (["--budget", "1000001"], ["budget"]),
    (["--budget", "lots"], ["--budget"]),
    (["--format", "xml"], ["format"]),
    (["--margin", "1.5"], ["margin"]),
    (["--recent", "-1"], ["recent"]),
])
def test_cli_usage_errors_exit_2(store, bm, args, words):
    assert_error(bm("context", "where?", *args), 2, *words)


def test_cli_without_a_store_gives_an_empty_block_and_a_note(bm, bm_home):
    res = bm("context", "where?")  # an agent loop's first turn, before anything was stored
    assert res.code == 0 and res.out == "" and "no bm store" in res.err and "bm ingest" in res.err, res
    assert not (bm_home / "data").exists()


def test_the_block_asks_recall_for_no_signals_and_gets_the_same_ranking(ann):
    from brandmind import query

    with Memory() as mem:
        full = query.recall(mem.store, QUESTION, k=40, user="ann")
        lean = query.recall(mem.store, QUESTION, k=40, user="ann", explain=False)
    assert [(m["id"], m["score"]) for m in lean] == [(m["id"], m["score"]) for m in full]
    assert all("signals" in m for m in full) and not any("signals" in m for m in lean)
    assert [{k: v for k, v in m.items() if k != "signals"} for m in full] == lean
