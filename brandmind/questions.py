"""How much of a text asks rather than tells: the share of its sentences' characters that are
questions.  A conversation turn that only asks ("How about you? Do you work?") names the topic
of a question about it but holds no answer; the answer is in the turn that replies.  Recall
lowers such turns by ``weight_asks`` times the square of this share (scoring.py): a turn that
tells and then asks back ("I study at UCLA! Do you?") keeps most of its score.  Only turns
(the recall index's ``asks`` column is 0 for any other memory: one remembered as a question
has no reply to defer to).
"""
from __future__ import annotations

import re

# a sentence ends at . ! ? (or a full-width one) followed by a space: "2.5" is not an end
_SENTENCE_END = re.compile(r"(?<=[.!?？！。])\s+")
_WORD = re.compile(r"\w")
_ASKING = ("?", "？", "?!", "!?")


def asked_share(text: str, speaker: str | None = None) -> float:
    """The share (0-1) of ``text``'s characters in sentences that end with a question mark,
    counting only sentences with a letter or digit (an emoji or "..." alone is not one); a
    conversation turn's leading ``"<speaker>: "`` left out."""
    if speaker and text.startswith(speaker + ": "):
        text = text[len(speaker) + 2:]
    asked = total = 0
    for sentence in _SENTENCE_END.split(text.strip()):
        if not _WORD.search(sentence):
            continue
        total += len(sentence)
        if sentence.endswith(_ASKING):
            asked += len(sentence)
    return asked / total if total else 0.0
