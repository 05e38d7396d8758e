"""The offline, rule-based fact extractor (the embedded default).

Regular expressions over each sentence of a turn, for the common patterns of
personal memory, in the first person (the turn's speaker is the subject of "I",
"my", "we"; the ``user`` when the turn has no speaker) and the third person (a
capitalised name as subject: "Ann lives in Lisbon"):

============================  ===============================================
pattern                       facts
============================  ===============================================
name                          "my name is X", "call me X", "I go by X", "I'm X",
                              "everyone calls me X" -> name
birthdays                     "my birthday is June 3", "Ann's birthday's on the
                              3rd of June", "I was born on June 3, 1990" ->
                              birthday (+ born_on with a year); "I was born in
                              1990" -> birth_year
diet                          "I'm vegetarian", "I'm a vegan", "I went
                              pescatarian last year", "I follow a keto diet"
                              -> diet (negated: "I'm no longer vegan")
where someone lives / is from "I live in X", "I'm based in X" -> lives_in;
                              "I moved to X" -> moved_to + lives_in;
                              "I moved from X (to Y)" -> moved_from X and
                              lives_in X negated (+ moved_to Y, lives_in Y);
                              "I'm from X" -> from; "I was born in X" -> born_in
work and study                "I work at/for X" -> works_at; "I work as a X",
                              "I'm a nurse" -> works_as; "I got a job at X";
                              "I quit my job at X" (negated works_at);
                              "I study X" -> studies; "I'm a student at X"
likes and dislikes            "I love/like/enjoy/adore/am into X" -> likes;
                              "I hate/dislike/can't stand X", "I don't like X"
                              -> dislikes; "my favorite F is X" -> likes
plans and decisions           "I'm planning to/going to V", "I will V <date>",
                              "I'm moving to X" -> plans; "I decided to V",
                              "we chose X" -> decided (type decision)
relationships                 "my wife Sara", "Sara is my wife", "my sister's
                              name is Maria", "Ann's brother Tom" ->
                              is_married_to / partner_of / sibling_of /
                              child_of / parent_of / friend_of / ...
possessions                   "I have/own a dog", "my dog Max", "I adopted a
                              cat last week" -> has
events with dates             "I went to/attended/visited X <date>" ->
                              attended / visited; "I went hiking yesterday"
                              -> did; "I started V", "I joined X" -> started /
                              joined; valid_from = the date, resolved against
                              the turn's time (dates.py)
============================  ===============================================

Negations ("I no longer live in X", "I don't like X anymore", "I used to work
at X", "I sold my car") give the positive predicate with ``negated=True``; a
plain "I don't like X" is ``dislikes X``.

Precision over recall: questions, hypotheticals (if, would, could, maybe,
wish, want to, hope...), reported speech (said, told, thinks...) and quoted
text yield nothing; objects must look like what the predicate takes (places
and organisations are capitalised, jobs come from a lexicon, possessions from
a list of things people own); pronoun objects ("I love it") are dropped.
"""
from __future__ import annotations

import re
from typing import Any

from .base import Fact, Turn, attributable, empty_report, person_turns
from .clauses import clause_facts
from .dates import find_dates
from .makers import Ctx, birthday_fact, rel_fact
from .patterns import (
    ANYWHERE_HINT,
    AUX_START,
    BIRTHDAY,
    CALL_ME,
    CLAUSE_SPLIT,
    CLAUSE_WORDS,
    CONTINUATION,
    CONTRACTION,
    FAVORITE,
    GENERIC_OBJECTS,
    GO_BY,
    HAVE_GOT,
    HYPOTHETICAL_CLAUSE,
    HYPOTHETICAL_SENTENCE,
    INTRO,
    MY_NAME,
    MY_NAME_LOWER,
    MY_PET_NAME,
    MY_REL_IS_NAME,
    MY_REL_NAME,
    NAME_IS_MY_REL,
    NAME_NEGATED,
    NAMES_REL_NAME,
    NOT_LOWER_NAMES,
    NP_STOP,
    QUESTION_START,
    QUOTED,
    REPORTED,
    SENTENCE_SPLIT,
    STARTS_WITH_SUBJECT,
    SUBJECT_AHEAD,
    SUBJECT_PREFIX,
    TAG_QUESTION,
    expand,
)
from .phrases import (
    article,
    calendar_day,
    clean_object,
    cut_at,
    is_generic,
    person_name,
)

__all__ = ["RulesExtractor"]


class RulesExtractor:
    """Offline rule-based extractor (see the module docstring for the patterns)."""

    name = "rules"
    prompt_version: str | None = None

    def __init__(self) -> None:
        self.last_report: dict[str, Any] = empty_report()

    def estimate(self, turns: list[Turn]) -> dict[str, int]:
        return {"calls": 0, "tokens": 0}

    def extract(self, turns: list[Turn]) -> list[Fact]:
        out: list[Fact] = []
        for turn in turns:
            out.extend(self.extract_turn(turn))
        self.last_report = empty_report()
        return out

    def extract_text(self, text: str, *, speaker: str | None = None, ts: int | None = None,
                     user: str = "default", bead: str | None = None) -> list[Fact]:
        return self.extract_turn(Turn(text=text, speaker=speaker, ts=ts, bead=bead, user=user))

    def extract_turn(self, turn: Turn) -> list[Fact]:
        if not person_turns([turn]):
            return []  # the agent's "I" (no speaker name): nothing a person said
        me = turn.speaker or turn.user
        out: list[Fact] = []
        ctx = Ctx(me, turn, out)
        text = QUOTED.sub(" ", turn.text.replace("’", "'").replace("‘", "'"))
        for sentence in SENTENCE_SPLIT.split(text):
            sentence = " ".join(sentence.split())
            tag = TAG_QUESTION.search(sentence)
            if tag and tag.start() > 0 and not AUX_START.match(INTRO.sub("", sentence)):
                sentence = sentence[:tag.start()].rstrip(" ,;") + "."
            if not sentence or _is_question(sentence):
                continue
            sentence = CONTRACTION.sub(expand, sentence)
            if "got" in sentence:  # "I've got a dog" = "I have a dog"
                sentence = HAVE_GOT.sub(r"\1 have", sentence)
            if HYPOTHETICAL_SENTENCE.search(sentence):
                continue
            ctx.clause = ctx.sentence = sentence
            if ANYWHERE_HINT.search(sentence):
                _anywhere(sentence, ctx)
            if REPORTED.search(sentence):
                continue
            for clause in _clauses(sentence):
                ctx.clause = clause
                clause_facts(clause, ctx)
        # one fact once per turn (the same thing said twice in a turn)
        seen: set[tuple] = set()
        unique = []
        for f in out:
            key = (f.subject, f.predicate, f.object.lower(), f.negated)
            if key not in seen and attributable(f, turn):
                seen.add(key)
                unique.append(f)
        return unique


def _is_question(sentence: str) -> bool:
    s = sentence.rstrip(" )\"'")
    return s.endswith("?") or bool(QUESTION_START.match(INTRO.sub("", s)))


def _clauses(sentence: str) -> list[str]:
    """The sentence cut into clauses that each start with their subject."""
    sentence = sentence.rstrip(" .!")
    parts: list[str] = []
    for piece in CLAUSE_SPLIT.split(sentence):
        if not piece:
            continue
        pieces = CONTINUATION.split(piece)
        subject = None
        for i, p in enumerate(pieces):
            p = _strip_intro(p)
            if i == 0:
                subject = _subject_prefix(p)
            elif subject:
                p = f"{subject} {p}"
            if p:
                parts.append(p)
    return parts


def _strip_intro(clause: str) -> str:
    clause = INTRO.sub("", clause.strip())
    # a leading time phrase ("Last week, I went ...")
    m = re.match(r"^([^,]{2,40}),\s+(?=(?:I|i|we|We|[Mm]y|[Oo]ur)\b)", clause)
    if m and (find_dates(m.group(1), 0) or re.match(
            r"(?i)(?:recently|lately|last|next|this|since|after|before|back in|earlier|later|"
            r"a (?:few|couple)|two|three|over|during|in|on|at|for)\b", m.group(1))):
        clause = clause[m.end():]
    elif not STARTS_WITH_SUBJECT.match(clause) and SUBJECT_AHEAD.search(clause[:60]):
        # "Last week I went ...", "Yesterday we moved ..."
        found = find_dates(clause[:40], 0)
        if found and found[0][1] == 0:
            m = re.match(r"^,?\s+(?=(?:I|i|we|We)\s)", clause[found[0][2]:])
            if m:
                clause = clause[found[0][2] + m.end():]
    return clause.strip()


def _subject_prefix(clause: str) -> str | None:
    m = SUBJECT_PREFIX.match(clause)
    if not m:
        return None
    if m.group(0)[0].isupper() and m.group(0) not in ("I", "We") and person_name(clause) is None:
        return None
    return m.group(0)


def _anywhere(sentence: str, ctx: Ctx) -> None:
    me = ctx.me
    for m in MY_NAME.finditer(sentence):
        name = person_name(m.group("name"))
        if name:
            ctx.add(me, "name", name, f"{me}'s name is {name}", confidence=0.9)
    for m in MY_NAME_LOWER.finditer(sentence):
        word = m.group("name")
        if word not in NOT_LOWER_NAMES and word not in GENERIC_OBJECTS and word not in CLAUSE_WORDS:
            name = word[0].upper() + word[1:]
            ctx.add(me, "name", name, f"{me}'s name is {name}", confidence=0.8)
    for pattern in (CALL_ME, GO_BY):
        for m in pattern.finditer(sentence):
            name = person_name(m.group("name"))
            if name and not NAME_NEGATED.search(sentence[:m.start()]) \
                    and not HYPOTHETICAL_CLAUSE.search(sentence[:m.start()]):
                ctx.add(me, "name", name, f"{me}'s name is {name}", confidence=0.8)
    for m in BIRTHDAY.finditer(sentence):
        who = m.group("who")
        subject = me if who.lower() == "my" else person_name(who[:-2])
        found = calendar_day(m.group("rest"))
        if subject and found and not HYPOTHETICAL_CLAUSE.search(sentence[:m.start()]):
            birthday_fact(ctx, subject, *found)
    for m in MY_REL_NAME.finditer(sentence):
        name = person_name(m.group("name"))
        if name:
            rel_fact(ctx, me, m.group("rel"), name)
    for m in MY_REL_IS_NAME.finditer(sentence):
        name = person_name(m.group("name"))
        if name:
            rel_fact(ctx, me, m.group("rel"), name)
    for m in NAME_IS_MY_REL.finditer(sentence):
        name = person_name(m.group("name"))
        if name:
            rel_fact(ctx, me, m.group("rel"), name)
    for m in NAMES_REL_NAME.finditer(sentence):
        subj = person_name(m.group("subj"))
        name = person_name(m.group("name"))
        if subj and name:
            rel_fact(ctx, subj, m.group("rel"), name)
    for m in MY_PET_NAME.finditer(sentence):
        name = person_name(m.group("name"))
        if name:
            pet = m.group("pet").lower()
            obj = f"{pet} named {name}"
            ctx.add(me, "has", obj, f"{me} has {article(obj)}", object_type="animal", confidence=0.85)
    for m in FAVORITE.finditer(sentence):
        if HYPOTHETICAL_CLAUSE.search(sentence) or REPORTED.search(sentence):
            continue
        obj = clean_object(cut_at(m.group("obj"), NP_STOP), drop_article=False)
        if obj and not is_generic(obj) and len(obj.split()) <= 6:
            what = m.group("what")
            ctx.add(me, "likes", clean_object(obj), f"{me}'s favorite {what} is {obj}",
                    type="preference", object_type="thing", confidence=0.85)
