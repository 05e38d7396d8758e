"""How much of a text asks (brandmind/questions.py) and recall's ``asks`` signal: a turn that
only asks names the topic of a question about it, the reply holds the answer."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

from brandmind.memory import Memory
from brandmind.questions import asked_share


@pytest.mark.parametrize("text, speaker, share", [
    ("How about you? How do you manage your time?", None, 1.0),
    ("Emi: How about you? Do you work?", "Emi", 1.0),  # the speaker's prefix is not a sentence
    ("I went to a support group yesterday and it was so powerful.", None, 0.0),
    ("Yes! I study at UCLA. Do you?", None, 7 / 27),  # characters of the sentences that ask
    ("really?! 😂", None, 1.0),  # an emoji alone is not a sentence; "?!" asks
    ("Version 2.5 is out? yes", None, 19 / 22),  # "2.5" does not end a sentence
    ("", None, 0.0), ("... 😂", None, 0.0), ("ok", "Ann", 0.0),
    ("Ann: is it?", "Bo", 1.0),  # another speaker's prefix stays text
])
def test_the_share_of_a_text_that_asks(text, speaker, share):
    assert asked_share(text, speaker) == pytest.approx(share)


@pytest.mark.real_embedder
def test_the_reply_comes_before_the_turn_that_only_asked(store):
    """The question restates the query; the answer is in the reply.  The asking turn carries
    the signal (minus the weight: all of it asks), the reply none, and the reply comes first
    (with the signal off, the question does)."""
    turns = [("Bo", "So what did the vet say about Max? Is he okay?"),
             ("Ann", "The vet said Max just has a mild ear infection.")]
    query = "What did the vet say about Max?"
    with Memory() as mem:
        mem.ingest([json.dumps({"role": "user", "speaker": s, "content": c, "ts": 1_700_000_000_000 + i * 60_000})
                    for i, (s, c) in enumerate(turns)])

        def lead() -> tuple[float, dict]:
            got = {h["text"].split(":")[0]: h for h in mem.recall(query, k=2)}
            return got["Bo"]["score"] - got["Ann"]["score"], got

        on, got = lead()
        assert got["Bo"]["signals"]["asks"] == {"score": -0.7, "asked": 1.0} and "asks" not in got["Ann"]["signals"]
        mem.store.config = dataclasses.replace(mem.config, weight_asks=0.0)
        off, got = lead()
        assert "asks" not in got["Bo"]["signals"]
        assert on < 0 < off and math.isclose(off - on, 0.7, abs_tol=1e-5)  # (scores are rounded to 6 places)
