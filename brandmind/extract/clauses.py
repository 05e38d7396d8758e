"""One clause of the rules extractor: its subject, negation and tense, then the "to be"
rules, births, "was", "will" and the verb rules."""
from __future__ import annotations

import re
from typing import Callable, NamedTuple

from .makers import (
    Ctx,
    birthday_fact,
    diet_fact,
    likes_fact,
    plan_fact,
    studies_fact,
    was_fact,
    works_as_fact,
)
from .patterns import (
    ADVERBS,
    ANYMORE,
    BAD_JOB_MODIFIERS,
    DIET_RE,
    FIRST,
    HYPOTHETICAL_CLAUSE,
    JOB_SUFFIXES,
    JOBS,
    NAME,
    NATIONALITIES,
    THIRD,
    THIRD_OK,
)
from .phrases import (
    article,
    calendar_day,
    clean_object,
    neg_be,
    np_at_start,
    person_name,
    proper_name,
    say_text,
    ungerund,
    without_the,
)
from .verbs import verb_facts


def clause_facts(clause: str, ctx: Ctx) -> None:
    """The facts of one clause that starts with its subject ("I ...", "Ann ...")."""
    found = _subject(clause.strip(), ctx)
    if found is None:
        return
    subject, first, rest = found
    if HYPOTHETICAL_CLAUSE.search(rest):
        return
    polar = _polarity(rest)
    if polar is None:
        return
    rest, neg, anymore = polar
    rest, perfect = _perfect(rest)
    if re.match(r"^(?:am|is|are)\b", rest, re.I):
        _after_be(rest, subject, first, neg, anymore, ctx, perfect)
        return
    if _born(rest, subject, neg, ctx):
        return
    if re.match(r"^(?:was|were)\b", rest, re.I):
        was_fact(rest, subject, neg, ctx)
        return
    if re.match(r"^will\s+", rest, re.I):
        _will(rest, subject, neg, ctx)
        return
    verb_facts(rest, subject, first, neg, ctx, perfect=perfect)


def _subject(clause: str, ctx: Ctx) -> tuple[str, bool, str] | None:
    """(subject, first person?, the rest) of a clause, or None when it starts with no subject."""
    m = FIRST.match(clause)
    if m:
        return ctx.me, True, clause[m.end():]
    m = THIRD.match(clause)
    if not m:
        return None
    name = person_name(clause)
    if not name:
        return None
    rest = clause[len(name):].lstrip()
    # a name takes "lives", "is", "moved": "Sounds like fun" is no one liking fun
    verb = rest.split(" ", 1)[0].lower() if rest else ""
    if not (verb.endswith("s") or verb.endswith("ed") or verb in THIRD_OK):
        return None
    return name, False, rest


def _polarity(rest: str) -> tuple[str, str | None, bool] | None:
    """(the rest without its negation, neg, "anymore" said?); ``neg`` is "plain" ("I don't"),
    "anymore" ("I no longer", "I used to", "I don't ... anymore") or None.  None when the
    clause is refused ("I didn't", "I never", or "anymore" without a negation)."""
    rest, n = ANYMORE.subn("", rest)
    anymore = n > 0
    rest = ADVERBS.sub("", rest)
    neg: str | None = None
    mm = re.match(r"^(?:do|does)\s+not\s+", rest, re.I)
    if mm:
        neg = "anymore" if anymore else "plain"
        rest = rest[mm.end():]
    elif re.match(r"^(?:did\s+not|never|have\s+not|has\s+not|was\s+not|were\s+not)\b", rest, re.I):
        return None
    else:
        mm = re.match(r"^(?:no\s+longer|used\s+to)\s+", rest, re.I)
        if mm:
            neg = "anymore"
            rest = rest[mm.end():]
        elif anymore and not re.match(r"^(?:am|is|are)\s+(?:not|no\s+longer)\b", rest, re.I):
            return None  # "anymore" without a negation ("I love it anymore"): not understood
    mm = re.match(r"^(?:do|does)\s+(?=\w)", rest, re.I)  # emphatic "I do love"
    if mm and not neg:
        rest = rest[mm.end():]
    return ADVERBS.sub("", rest), neg, anymore


_PARTICIPLES = {"loved": "love", "liked": "like", "enjoyed": "enjoy", "hated": "hate", "lived": "live",
                "worked": "work", "owned": "own", "had": "have", "studied": "study", "played": "play",
                "spoken": "speak", "chosen": "chose"}


def _perfect(rest: str) -> tuple[str, bool]:
    """Perfect tenses as the simple form: "I have always loved" -> "love", "I have been" -> "am"."""
    mm = re.match(r"^(?:have|has)\s+(?:always\s+|long\s+|just\s+|recently\s+|now\s+|also\s+|finally\s+)*"
                  r"(?P<pp>loved|liked|enjoyed|hated|lived|worked|been|moved|decided|started|joined|"
                  r"adopted|bought|got|visited|chosen|picked|owned|had|studied|played|spoken)\b\s*", rest, re.I)
    if not mm:
        return rest, False
    pp = mm.group("pp").lower()
    base = _PARTICIPLES.get(pp, pp)
    return ("am " + rest[mm.end():]) if pp == "been" else (base + " " + rest[mm.end():]), True


def _after_be(rest: str, subject: str, first: bool, neg: str | None, anymore: bool, ctx: Ctx,
              perfect: bool) -> None:
    """ "I am ...", "I am not ...", "I am no longer ..."."""
    be = re.match(r"^(?:am|is|are)\s+", rest, re.I)
    body = rest[be.end():] if be else ""
    body = ADVERBS.sub("", body)
    mm = re.match(r"^not\s+", body, re.I)
    if mm:
        if neg:
            return
        neg = "anymore" if anymore else "plain"
        body = ADVERBS.sub("", body[mm.end():])
    else:
        mm = re.match(r"^no\s+longer\s+", body, re.I)
        if mm:
            neg = "anymore"
            body = ADVERBS.sub("", body[mm.end():])
    be_facts(_Be(body, subject, first, neg, ctx, perfect))


def _born(rest: str, subject: str, neg: str | None, ctx: Ctx) -> bool:
    """ "I was born on June 3 (1990)", "in 1990", "in Lisbon"; whether the clause was one."""
    mm = re.match(r"^(?:was|were)\s+born\s+on\s+", rest, re.I)
    if mm:
        found = calendar_day(rest[mm.end():])
        if found and not neg:
            birthday_fact(ctx, subject, *found)
        return True
    mm = re.match(r"^(?:was|were)\s+born\s+in\s+((?:19|20)\d\d)\s*$", rest, re.I)
    if mm:
        if not neg:
            ctx.add(subject, "birth_year", mm.group(1), f"{subject} was born in {mm.group(1)}",
                    object_type="number", confidence=0.8)
        return True
    if re.match(r"^(?:was|were)\s+born\s+in\s+", rest, re.I):
        place = proper_name(re.sub(r"^(?:was|were)\s+born\s+in\s+", "", rest, flags=re.I))
        if place and not neg and not re.fullmatch(r"(?:19|20)\d\d", place):
            ctx.add(subject, "born_in", without_the(place), f"{subject} was born in {place}",
                    object_type="place", confidence=0.85)
        return True
    return False


def _will(rest: str, subject: str, neg: str | None, ctx: Ctx) -> None:
    """ "I will V ...": a plan ("I will be moving to X" too; other "will be" nothing)."""
    if neg:
        return
    body = ADVERBS.sub("", re.sub(r"^will\s+", "", rest, flags=re.I))
    if re.match(r"^(?:be\s+)?(?:moving|relocating)\s+to\s+", body, re.I):
        place = proper_name(re.sub(r"^(?:be\s+)?(?:moving|relocating)\s+to\s+", "", body, flags=re.I))
        if place:
            plan_fact(ctx, subject, f"move to {place}", strict=False)
        return
    if re.match(r"^be\s+", body, re.I):
        return
    plan_fact(ctx, subject, body, strict=True)


# -- "to be" ---------------------------------------------------------------------------------------
class _Be(NamedTuple):
    """What follows "I am" / "Ann is" (``neg``: "I am not", "I am no longer")."""

    body: str
    subject: str
    first: bool
    neg: str | None
    ctx: Ctx
    perfect: bool


def be_facts(b: _Be) -> None:
    """The facts of a "to be" clause: the first rule of BE_RULES that takes it decides."""
    for rule in BE_RULES:
        if rule(b):
            return


def _be_diet(b: _Be) -> bool:
    m = re.match(rf"^(?:a\s+|an\s+|on\s+a\s+|on\s+an\s+)?(?:(?:strict|full|committed|lifelong|proud|total|complete|"
                 rf"practicing|practising|fully|full-time)\s+)?(?P<d>{DIET_RE})(?:\s+diet)?(?P<tail>.*)$", b.body, re.I)
    return bool(m and diet_fact(b.ctx, b.subject, m.group("d"), m.group("tail"), b.neg))


def _be_age(b: _Be) -> bool:
    m = re.match(r"^(\d{1,3})(?:\s+(?:years?|yrs?)(?:\s+old)?|\s*y/?o)?\s*$", b.body)
    if not m:
        return False
    age = int(m.group(1))
    if 1 <= age <= 120 and not b.neg:
        b.ctx.add(b.subject, "age", str(age), f"{b.subject} is {age} years old", object_type="number",
                  confidence=0.8)
    return True


def _be_job(b: _Be) -> bool:
    """Jobs: "a nurse", "a software engineer at Google", "a student at MIT"."""
    m = re.match(r"^(?:now\s+|currently\s+|also\s+)?(?:a|an)\s+(?P<np>[A-Za-z-]+(?:\s+[A-Za-z-]+){0,3}?)"
                 r"(?=\s*$|\s*,|\s+(?:at|for|with|in|and|who|from|based|working|by|since|of|now|too|"
                 r"myself|full-time|part-time|here|there)\b|'s)(?P<tail>.*)$", b.body)
    if not m:
        return False
    words = m.group("np").split()
    job = words[-1].lower()
    mods = words[:-1]
    head_ok = job in JOBS or job.endswith(JOB_SUFFIXES)
    if not head_ok or any(w.lower() in BAD_JOB_MODIFIERS for w in mods) or (
            len(mods) and mods[0].lower() in {"fan", "bit", "lot"}):
        return False
    tail = m.group("tail").strip()
    # "a fan of", "a teacher's" etc. are not jobs
    if tail.startswith(("of ", "'s")) and job not in ("student",):
        if not tail.startswith("of "):
            return True
        if job not in {"professor", "director", "manager", "founder", "co-founder", "cofounder"}:
            return True
    _job_facts(b, " ".join(words).lower(), job, tail)
    return True


def _job_facts(b: _Be, np: str, job: str, tail: str) -> None:
    """works_as the role ``np`` (and works_at / studies_at the organisation after it)."""
    s, neg = b.subject, b.neg
    student = job == "student"
    b.ctx.add(s, "works_as", np, neg_be(s, f"a {np}" if student else article(np), neg) or f"{s} is {article(np)}",
              negated=bool(neg), object_type="role", confidence=0.8)
    at = re.match(r"^(?:at|in)\s+(.*)$" if student else r"^(?:at|for|with)\s+(.*)$", tail)
    if at and not neg:
        org = proper_name(at.group(1))
        if org and student:
            b.ctx.add(s, "studies_at", without_the(org), f"{s} studies at {org}", object_type="organization",
                      confidence=0.8)
        elif org:
            b.ctx.add(s, "works_at", without_the(org), f"{s} works at {org}", object_type="organization",
                      confidence=0.75)


def _be_from(b: _Be) -> bool:
    m = re.match(r"^(?:originally\s+)?from\s+(.*)$", b.body)
    if not m:
        return False
    place = proper_name(m.group(1))
    if place and not b.neg:
        b.ctx.add(b.subject, "from", without_the(place), f"{b.subject} is from {place}", object_type="place",
                  confidence=0.85)
    return True


def _be_based(b: _Be) -> bool:
    """ "living / based / settled in X" (lives_in), "working at X" (works_at)."""
    for pattern, pred, otype in ((r"^(?:living|based|settled|residing)\s+(?:now\s+)?in\s+(.*)$", "lives_in", "place"),
                                 (r"^(?:working|employed)\s+(?:at|for|by)\s+(.*)$", "works_at", "organization")):
        m = re.match(pattern, b.body)
        if m:
            where = proper_name(m.group(1))
            if where:
                b.ctx.add(b.subject, pred, without_the(where), say_text(pred, b.subject, where, b.neg),
                          negated=bool(b.neg), object_type=otype, confidence=0.85)
            return True
    return False


def _be_working_as(b: _Be) -> bool:
    m = re.match(r"^working\s+as\s+(?:an?\s+)?(.*)$", b.body)
    if m:
        works_as_fact(b.ctx, b.subject, m.group(1), b.neg)
    return bool(m)


def _be_married(b: _Be) -> bool:
    m = re.match(r"^(?:happily\s+)?(?P<how>married|engaged)\s+to\s+(?P<rest>.*)$", b.body)
    if not m:
        return False
    name = person_name(m.group("rest"))
    if name:
        s, neg = b.subject, b.neg
        pred = "is_married_to" if m.group("how") == "married" else "partner_of"
        word = "married" if pred == "is_married_to" else "engaged"
        text = (f"{s} is no longer {word} to {name}" if neg == "anymore"
                else f"{s} is not {word} to {name}" if neg else f"{s} is {word} to {name}")
        b.ctx.add(s, pred, name, text, negated=bool(neg), object_type="person", confidence=0.85)
    return True


def _be_planning(b: _Be) -> bool:
    m = re.match(r"^(?:planning|intending|preparing|scheduled|set|about)\s+(?:to|on)\s+(.*)$", b.body)
    if not m or b.neg:
        return False
    vp = m.group(1)
    mm = re.match(r"^([a-z]+ing)\b(.*)$", vp)  # "planning on visiting X"
    if mm:
        vp = ungerund(mm.group(1)) + mm.group(2)
    plan_fact(b.ctx, b.subject, vp, strict=False)
    return True


def _be_going(b: _Be) -> bool:
    m = re.match(r"^going\s+to\s+(.*)$", b.body)
    if not m or b.neg:
        return False
    vp = m.group(1)
    place = proper_name(vp) if vp[:1].isupper() else None
    if place:
        plan_fact(b.ctx, b.subject, f"go to {place} " + vp[len(place):], strict=False)
    elif re.match(r"^(?:the|a|an|my|our|his|her|their|be|see|have|try|get|do|need)\b", vp, re.I) is None:
        plan_fact(b.ctx, b.subject, vp, strict=True)
    return True


def _be_moving(b: _Be) -> bool:
    m = re.match(r"^(?:moving|relocating)\s+(?:back\s+)?to\s+(.*)$", b.body)
    if not m or b.neg:
        return False
    place = proper_name(m.group(1))
    if place:
        plan_fact(b.ctx, b.subject, f"move to {place} " + m.group(1)[len(place):], strict=False)
    return True


def _be_into(b: _Be) -> bool:
    """Likes in be-form: "into", "a big fan of", "interested in" (weaker)."""
    m = re.match(r"^(?:(?:really|so|super|very|totally|quite|pretty|a\s+bit|also)\s+)*"
                 r"(?P<how>into|obsessed\s+with|passionate\s+about|crazy\s+about|addicted\s+to|"
                 r"(?:a\s+)?(?:big\s+|huge\s+|massive\s+|great\s+|real\s+)?fan\s+of|keen\s+on|"
                 r"fond\s+of|interested\s+in)\s+(?P<obj>.*)$", b.body, re.I)
    if m:
        likes_fact(b.ctx, b.subject, m.group("obj"), negative=False, neg=b.neg,
                   weak=m.group("how").lower().startswith("interested"))
    return bool(m)


def _be_allergic(b: _Be) -> bool:
    m = re.match(r"^allergic\s+to\s+(.*)$", b.body)
    if not m or b.neg:
        return False
    obj = np_at_start(m.group(1))
    if obj:
        b.ctx.add(b.subject, "allergic_to", clean_object(obj), f"{b.subject} is allergic to {obj}",
                  object_type="thing", confidence=0.85)
    return True


def _be_learning(b: _Be) -> bool:
    m = re.match(r"^(?:learning|studying)\s+(.*)$", b.body)
    if not m or b.neg:
        return False
    studies_fact(b.ctx, b.subject, m.group(1), b.neg)
    return True


_GROUPS = re.compile(r"\b(?:club|team|group|band|association|society|church|choir|union|party|community|"
                     r"organi[sz]ation|league|council|committee|board|crew|brigade|guild|network|orchestra|"
                     r"chapter|circle|collective|cooperative|gym|program|programme|army|navy)\b", re.I)


def _be_member(b: _Be) -> bool:
    m = re.match(r"^(?:a\s+)?(?:member|part)\s+of\s+(.*)$", b.body)
    if not m:
        return False
    obj = np_at_start(m.group(1), max_words=6)
    if obj and (obj[:1].isupper() or _GROUPS.search(obj)):
        s, neg = b.subject, b.neg
        text = (f"{s} is no longer a member of {obj}" if neg == "anymore"
                else f"{s} is not a member of {obj}" if neg else f"{s} is a member of {obj}")
        b.ctx.add(s, "member_of", clean_object(obj), text, negated=bool(neg), object_type="organization",
                  confidence=0.75)
    return True


def _be_called(b: _Be) -> bool:
    m = re.match(r"^(?:called|named)\s+(.*)$", b.body)
    if not m or not b.first or b.neg:
        return False
    name = person_name(m.group(1))
    if name:
        b.ctx.add(b.subject, "name", name, f"{b.subject}'s name is {name}", confidence=0.8)
    return True


def _be_name(b: _Be) -> bool:
    """ "I am Ann" (only a lone capitalised name ending the clause)."""
    if not b.first or b.neg or b.perfect:
        return True
    m = re.match(rf"^({NAME})(?:\s*,?\s*(?:(?:it's\s+|it\s+is\s+)?(?:nice|pleased|good|great|glad|lovely)\s+to\s+"
                 rf"meet\s+you|by the way|btw))?\s*$", b.body)
    if m:
        name = person_name(m.group(1), strict=True)
        if name and name not in NATIONALITIES and not any(w in NATIONALITIES for w in name.split()):
            b.ctx.add(b.subject, "name", name, f"{b.subject}'s name is {name}", confidence=0.7)
    return True


# tried in order; a rule returns whether the clause was its (even when it yields no fact)
BE_RULES: tuple[Callable[[_Be], bool], ...] = (
    _be_diet, _be_age, _be_job, _be_from, _be_based, _be_working_as, _be_married, _be_planning, _be_going,
    _be_moving, _be_into, _be_allergic, _be_learning, _be_member, _be_called, _be_name)
