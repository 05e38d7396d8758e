"""The PII guard (brandmind/pii.py) against a labelled corpus, rule by rule, and on a store.

Corpus: tests/data/pii_corpus.jsonl, one sentence a line, written for this test: service-
experience notes an agent might put in a shared persona block.  ``pii`` says whether the
sentence holds PII, ``kinds`` which, ``private_terms`` the writer's private names/places
(what ``privacy.gather_private_terms`` would return) when the sentence was written against some.
Most clean sentences are built to look risky (dates, prices, percentages, counts, KPIs,
versions, ids, city names used generically, the words key/token/password).  Lines with
``"split": "holdout"`` were written after the rules were tuned and never tuned against.

Metrics are SENTENCE-LEVEL: a sentence is flagged iff ``scan`` returns at least one hit;
precision = flagged PII sentences / flagged sentences, recall = flagged PII sentences / PII
sentences.  Targets (issue 4): recall >= 0.95 with precision >= 0.9.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from brandmind import pii, privacy

CORPUS = Path(__file__).parent / "data" / "pii_corpus.jsonl"
RECALL_TARGET, PRECISION_TARGET = 0.95, 0.90


def corpus(split: str | None = None) -> list[dict]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split is None or r.get("split", "main") == split]


def metrics(rows: list[dict]) -> dict:
    tp = fp = fn = tn = 0
    missed, false_alarms = [], []
    for r in rows:
        flagged = bool(pii.scan(r["text"], private_terms=r.get("private_terms", ())))
        if r["pii"] and flagged:
            tp += 1
        elif r["pii"]:
            fn += 1
            missed.append(r["text"])
        elif flagged:
            fp += 1
            false_alarms.append(r["text"])
        else:
            tn += 1
    return {"precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0,
            "tp": tp, "fp": fp, "fn": fn, "tn": tn, "missed": missed, "false_alarms": false_alarms}


def test_the_corpus_is_big_and_covers_every_kind():
    rows = corpus()
    assert len(rows) >= 200
    assert len({r["text"] for r in rows}) == len(rows)
    positives = [r for r in rows if r["pii"]]
    assert 80 <= len(positives) <= len(rows) - 100  # many clean sentences too
    kinds = {k for r in positives for k in r["kinds"]}
    assert {"email", "phone", "address", "card", "account", "secret", "name", "place"} <= kinds
    assert any(r.get("private_terms") and not r["pii"] for r in rows)  # terms that must not match
    assert len(corpus("holdout")) >= 50


def test_precision_and_recall_on_the_corpus_meet_the_target(capsys):
    report = {}
    for split in ("main", "holdout", None):
        m = metrics(corpus(split))
        report[split or "all"] = m
        with capsys.disabled():
            print(f"\nPII guard, sentence level, {split or 'all'}: precision {m['precision']:.3f}, "
                  f"recall {m['recall']:.3f} (tp {m['tp']}, fp {m['fp']}, fn {m['fn']}, tn {m['tn']})")
    for name, m in report.items():
        assert m["recall"] >= RECALL_TARGET, (name, m["missed"])
        assert m["precision"] >= PRECISION_TARGET, (name, m["false_alarms"])


def test_a_flagged_pii_sentence_is_flagged_for_the_right_kind():
    """Beyond the sentence-level metric: the expected kind is among the hits (private terms
    given as a plain list come back as kind "private")."""
    wrong = []
    for r in corpus():
        if not r["pii"]:
            continue
        kinds = {h.kind for h in pii.scan(r["text"], private_terms=r.get("private_terms", ()))}
        expected = {"private" if r.get("private_terms") and k in ("name", "place") else k for k in r["kinds"]}
        if not expected <= kinds:
            wrong.append((r["text"], expected, kinds))
    assert not wrong


@pytest.mark.parametrize("rule", sorted(pii.RULES))
def test_a_guard_without_any_one_rule_misses_the_recall_target(rule, monkeypatch):
    """The corpus is not too easy: each rule carries its weight (e.g. no phone rule -> recall
    0.83), so a regression in any of them fails the target."""
    assert metrics(corpus())["recall"] >= RECALL_TARGET
    monkeypatch.delitem(pii.RULES, rule)
    assert metrics(corpus())["recall"] < RECALL_TARGET


def test_a_guard_that_ignores_private_terms_misses_the_recall_target():
    rows = [{**r, "private_terms": ()} for r in corpus()]
    assert metrics(rows)["recall"] < RECALL_TARGET


# -- single rules, the edges they are built on -------------------------------------------------------
@pytest.mark.parametrize("text,kind,span", [
    ("mail ann.lee+x@example.co.uk now", "email", "ann.lee+x@example.co.uk"),
    ("call +44 20 7946 0958 today", "phone", "+44 20 7946 0958"),
    ("at (415) 555-0132.", "phone", "(415) 555-0132"),
    ("at 123 Main St, Apt 4B.", "address", "123 Main St, Apt 4B"),
    ("card 4111-1111-1111-1111 on file", "card", "4111-1111-1111-1111"),
    ("IBAN GB82 WEST 1234 5698 7654 32 ok", "account", "GB82 WEST 1234 5698 7654 32"),
    ("key AKIAIOSFODNN7EXAMPLE leaked", "secret", "AKIAIOSFODNN7EXAMPLE"),
    ("Dr. Okafor asked", "name", "Dr. Okafor"),
])
def test_each_rule_finds_its_span(text, kind, span):
    hits = pii.scan(text)
    assert [(h.kind, h.text) for h in hits] == [(kind, span)]
    assert text[hits[0].start:hits[0].end] == span


@pytest.mark.parametrize("text", [
    "card 4111 1111 1111 1112 fails the Luhn check",          # one digit off
    "IBAN GB83 WEST 1234 5698 7654 32 has a bad checksum",     # check digits wrong
    "visits rose 12.5% to 1,234,567 between 2023-01-01 and 2024-12-31",
    "upgrade from v2.14.0 to 3.0.1 before the 09:30 refresh",
    "the token count is 3,500 and the API key lives in the console",
    "In 2023 Fifth Avenue rents rose 12%",
])
def test_lookalikes_are_not_flagged(text):
    assert pii.scan(text) == []


def test_private_terms_match_whole_words_case_insensitively_with_their_kind():
    terms = pii.Terms()
    terms.add_term("Ann", "name")
    terms.add_term("Lisbon", "place")
    terms.add_term("Lisbon", "private")  # a weaker kind does not replace a stronger one
    hits = pii.scan("ANN moved; Annual plans for lisbon; Anne", private_terms=terms)
    assert [(h.kind, h.text) for h in hits] == [("name", "ANN"), ("place", "lisbon")]
    assert pii.scan("Annual visits", private_terms=["Ann"]) == []
    assert [h.kind for h in pii.scan("Ask Ann", private_terms=["Ann"])] == ["private"]


def test_redact_replaces_each_span_with_its_kind():
    text = "Mail ann@example.com or call (212) 555-0187 about Lisbon."
    hits = pii.scan(text, private_terms=["Lisbon"])
    assert [h.kind for h in hits] == ["email", "phone", "private"]
    assert pii.redact(text, hits) == ("Mail [REDACTED:email] or call [REDACTED:phone] about "
                                      "[REDACTED:private].")
    assert pii.redact(text, []) == text
    assert "ann@example.com" in pii.describe(hits)


def test_overlapping_hits_keep_the_stronger_kind():
    # the digits of a labelled account look like a phone number too: account wins
    hits = pii.scan("account number 4155550132")
    assert [(h.kind, h.text) for h in hits] == [("account", "4155550132")]


# -- the writer's private terms from a store -------------------------------------------------------------
def test_private_terms_come_from_the_human_block_memories_and_facts(store):
    from brandmind.memory import Memory

    with Memory() as mem:
        mem.blocks.set("human", "User name: Sarah Whitcombe\nPrefers tables. Lives near Richmond.", user="sarah")
        mem.remember("Sarah's sister Imogen visited Porto in May.", user="sarah")
        mem.remember("Prefers weekly summaries on Monday.", user="sarah")
        mem.facts.add({"subject": "Sarah", "predicate": "works_at", "object": "Grupo Pereira"}, user="sarah")
        mem.remember("Bob likes Houston.", user="bob")
        terms = privacy.gather_private_terms(mem.store, "sarah")
        for term in ("Sarah Whitcombe", "Whitcombe", "Richmond", "Imogen", "Porto", "Grupo Pereira"):
            assert term in terms, (term, sorted(terms))
        assert terms.kinds["Sarah Whitcombe"] == "name"
        for common in ("Prefers", "Monday", "May", "User", "Lives"):
            assert common not in terms, common
        assert "Bob" not in terms and "Houston" not in terms  # another user's words
        assert privacy.gather_private_terms(mem.store, "sarah") is terms  # cached until the next op
        mem.remember("Dinner with Ottoline.", user="sarah")
        assert "Ottoline" in privacy.gather_private_terms(mem.store, "sarah")
        hits = pii.scan("QSR users near Richmond like Imogen want maps", private_terms=privacy.gather_private_terms(mem.store, "sarah"))
        assert {h.text for h in hits} == {"Richmond", "Imogen"}


def test_a_name_that_is_an_everyday_word_matches_only_as_written(store):
    from brandmind.memory import Memory

    with Memory() as mem:
        mem.blocks.set("human", "User name: Will Harper\nPersonal facts about the user to be discovered "
                               "through interaction.", user="will")
        mem.remember("I will send the deck to Will's manager tomorrow.", user="will")
        terms = privacy.gather_private_terms(mem.store, "will")
        assert {"Will Harper", "Will", "Harper"} <= terms and "Personal" not in terms
        assert "Will" in terms.exact and "Harper" not in terms.exact
        note = "Users will ask for maps; harper-style notes are fine"
        assert pii.scan(note, private_terms=terms) == [pii.Hit(note.index("harper"), note.index("-"), "name", "harper")]
        assert [h.text for h in pii.scan("Will asked for maps", private_terms=terms)] == ["Will"]


def test_the_guard_stays_linear_on_adversarial_input():
    for text in ("a.b-" * 2000 + "@x.com", "a.b-" * 2000 + "://a:b@", "1 " * 4000, "(0" * 4000,
                 "+1 " * 3000, "x@" * 4000, "password: " * 800, "12 " * 3000 + "Street"):
        start = time.perf_counter()
        pii.scan(text, private_terms=["Ann"])
        assert time.perf_counter() - start < 0.5, text[:12]


def test_a_shared_block_write_with_pii_is_refused_or_redacted(store):
    """The guard as the blocks module uses it (brandmind/blocks.py calls scan with the
    writer's private terms before a shared-block write lands)."""
    from brandmind.errors import InvalidInput
    from brandmind.memory import Memory

    with Memory() as mem:
        mem.blocks.set("human", "User name: Carol Mendes. Based in Richmond.", user="carol")
        mem.personas.assign("carol", "tobacco_consumer_insights", 1.0)
        label = "tobacco_consumer_insights_service_experience"
        with pytest.raises(InvalidInput) as err:
            mem.blocks.append(label, "Carol in Richmond wants c-store flows; reach her at carol@x.com", user="carol")
        assert "carol@x.com" in err.value.message and "Richmond" in err.value.message
        assert mem.blocks.get(label, user="carol")["value"] == ""
        out = mem.blocks.append(label, "Users in Richmond ask about menthol share", user="carol", redact=True)
        assert out["value"].strip() == "Users in [REDACTED:place] ask about menthol share"
        assert [(h["kind"], h["text"]) for h in out["redacted"]] == [("place", "Richmond")]
        mem.blocks.append(label, "Tobacco insights users compare c-store share by daypart.", user="carol")
