"""One clause of the rules extractor: its subject, negation and tense, then the "to be"
rules, births, "was", "will" and the verb rules."""
from __future__ import annotations

import re

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
    clause = clause.strip()
    m = FIRST.match(clause)
    if m:
        subject, first = ctx.me, True
        rest = clause[m.end():]
    else:
        m = THIRD.match(clause)
        if not m:
            return
        name = person_name(clause)
        if not name:
            return
        subject, first = name, False
        rest = clause[len(name):].lstrip()
        # a name takes "lives", "is", "moved": "Sounds like fun" is no one liking fun
        verb = rest.split(" ", 1)[0].lower() if rest else ""
        if not (verb.endswith("s") or verb.endswith("ed") or verb in THIRD_OK):
            return
    if HYPOTHETICAL_CLAUSE.search(rest):
        return
    rest, n = ANYMORE.subn("", rest)
    anymore = n > 0
    rest = ADVERBS.sub("", rest)
    neg: str | None = None
    mm = re.match(r"^(?:do|does)\s+not\s+", rest, re.I)
    if mm:
        neg = "anymore" if anymore else "plain"
        rest = rest[mm.end():]
    elif re.match(r"^(?:did\s+not|never|have\s+not|has\s+not|was\s+not|were\s+not)\b", rest, re.I):
        return
    else:
        mm = re.match(r"^(?:no\s+longer|used\s+to)\s+", rest, re.I)
        if mm:
            neg = "anymore"
            rest = rest[mm.end():]
        elif anymore and not re.match(r"^(?:am|is|are)\s+(?:not|no\s+longer)\b", rest, re.I):
            return  # "anymore" without a negation ("I love it anymore"): not understood
    mm = re.match(r"^(?:do|does)\s+(?=\w)", rest, re.I)  # emphatic "I do love"
    if mm and not neg:
        rest = rest[mm.end():]
    rest = ADVERBS.sub("", rest)
    # perfect tenses: "I have always loved", "I have lived", "I have been ..."
    mm = re.match(r"^(?:have|has)\s+(?:always\s+|long\s+|just\s+|recently\s+|now\s+|also\s+|finally\s+)*"
                  r"(?P<pp>loved|liked|enjoyed|hated|lived|worked|been|moved|decided|started|joined|"
                  r"adopted|bought|got|visited|chosen|picked|owned|had|studied|played|spoken)\b\s*", rest, re.I)
    perfect = False
    if mm:
        perfect = True
        pp = mm.group("pp").lower()
        base = {"loved": "love", "liked": "like", "enjoyed": "enjoy", "hated": "hate", "lived": "live",
                "worked": "work", "owned": "own", "had": "have", "studied": "study", "played": "play",
                "spoken": "speak", "chosen": "chose"}.get(pp, pp)
        rest = ("am " + rest[mm.end():]) if pp == "been" else (base + " " + rest[mm.end():])
    if re.match(r"^(?:am|is|are)\b", rest, re.I):
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
        _be(body, subject, first, neg, ctx, perfect=perfect)
        return
    mm = re.match(r"^(?:was|were)\s+born\s+on\s+", rest, re.I)
    if mm:
        found = calendar_day(rest[mm.end():])
        if found and not neg:
            birthday_fact(ctx, subject, *found)
        return
    mm = re.match(r"^(?:was|were)\s+born\s+in\s+((?:19|20)\d\d)\s*$", rest, re.I)
    if mm:
        if not neg:
            ctx.add(subject, "birth_year", mm.group(1), f"{subject} was born in {mm.group(1)}",
                    object_type="number", confidence=0.8)
        return
    if re.match(r"^(?:was|were)\s+born\s+in\s+", rest, re.I):
        place = proper_name(re.sub(r"^(?:was|were)\s+born\s+in\s+", "", rest, flags=re.I))
        if place and not neg and not re.fullmatch(r"(?:19|20)\d\d", place):
            ctx.add(subject, "born_in", without_the(place), f"{subject} was born in {place}",
                    object_type="place", confidence=0.85)
        return
    if re.match(r"^(?:was|were)\b", rest, re.I):
        was_fact(rest, subject, neg, ctx)
        return
    if re.match(r"^will\s+", rest, re.I):
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
        return
    verb_facts(rest, subject, first, neg, ctx, perfect=perfect)


def _be(body: str, subject: str, first: bool, neg: str | None, ctx: Ctx, *, perfect: bool) -> None:
    """After "I am" / "Ann is" (``neg``: "I am not", "I am no longer")."""
    m = re.match(rf"^(?:a\s+|an\s+|on\s+a\s+|on\s+an\s+)?(?:(?:strict|full|committed|lifelong|proud|total|complete|"
                 rf"practicing|practising|fully|full-time)\s+)?(?P<d>{DIET_RE})(?:\s+diet)?(?P<tail>.*)$", body, re.I)
    if m and diet_fact(ctx, subject, m.group("d"), m.group("tail"), neg):
        return
    # age
    m = re.match(r"^(\d{1,3})(?:\s+(?:years?|yrs?)(?:\s+old)?|\s*y/?o)?\s*$", body)
    if m:
        age = int(m.group(1))
        if 1 <= age <= 120 and not neg:
            ctx.add(subject, "age", str(age), f"{subject} is {age} years old", object_type="number",
                    confidence=0.8)
        return
    # jobs: "a nurse", "a software engineer at Google", "a student at MIT"
    m = re.match(r"^(?:now\s+|currently\s+|also\s+)?(?:a|an)\s+(?P<np>[A-Za-z-]+(?:\s+[A-Za-z-]+){0,3}?)"
                 r"(?=\s*$|\s*,|\s+(?:at|for|with|in|and|who|from|based|working|by|since|of|now|too|"
                 r"myself|full-time|part-time|here|there)\b|'s)(?P<tail>.*)$", body)
    if m:
        words = m.group("np").split()
        job = words[-1].lower()
        mods = words[:-1]
        head_ok = job in JOBS or job.endswith(JOB_SUFFIXES)
        if head_ok and not any(w.lower() in BAD_JOB_MODIFIERS for w in mods) and not (
                len(mods) and mods[0].lower() in {"fan", "bit", "lot"}):
            np = " ".join(words)
            tail = m.group("tail").strip()
            # "a fan of", "a teacher's" etc. are not jobs
            if tail.startswith(("of ", "'s")) and job not in ("student",):
                if not tail.startswith("of "):
                    return
                if job not in {"professor", "director", "manager", "founder", "co-founder", "cofounder"}:
                    return
            if job == "student":
                ctx.add(subject, "works_as", np.lower(), neg_be(subject, f"a {np.lower()}", neg) or
                        f"{subject} is {article(np.lower())}", negated=bool(neg), object_type="role",
                        confidence=0.8)
                at = re.match(r"^(?:at|in)\s+(.*)$", tail)
                if at and not neg:
                    org = proper_name(at.group(1))
                    if org:
                        ctx.add(subject, "studies_at", without_the(org), f"{subject} studies at {org}",
                                object_type="organization", confidence=0.8)
                return
            ctx.add(subject, "works_as", np.lower(), neg_be(subject, article(np.lower()), neg) or
                    f"{subject} is {article(np.lower())}", negated=bool(neg), object_type="role",
                    confidence=0.8)
            at = re.match(r"^(?:at|for|with)\s+(.*)$", tail)
            if at and not neg:
                org = proper_name(at.group(1))
                if org:
                    ctx.add(subject, "works_at", without_the(org), f"{subject} works at {org}",
                            object_type="organization", confidence=0.75)
            return
    # from
    m = re.match(r"^(?:originally\s+)?from\s+(.*)$", body)
    if m:
        place = proper_name(m.group(1))
        if place and not neg:
            ctx.add(subject, "from", without_the(place), f"{subject} is from {place}", object_type="place",
                    confidence=0.85)
        return
    # living / based in
    m = re.match(r"^(?:living|based|settled|residing)\s+(?:now\s+)?in\s+(.*)$", body)
    if m:
        place = proper_name(m.group(1))
        if place:
            ctx.add(subject, "lives_in", without_the(place), say_text("lives_in", subject, place, neg),
                    negated=bool(neg), object_type="place", confidence=0.85)
        return
    m = re.match(r"^(?:working|employed)\s+(?:at|for|by)\s+(.*)$", body)
    if m:
        org = proper_name(m.group(1))
        if org:
            ctx.add(subject, "works_at", without_the(org), say_text("works_at", subject, org, neg),
                    negated=bool(neg), object_type="organization", confidence=0.85)
        return
    m = re.match(r"^working\s+as\s+(?:an?\s+)?(.*)$", body)
    if m:
        works_as_fact(ctx, subject, m.group(1), neg)
        return
    # married / engaged
    m = re.match(r"^(?:happily\s+)?(?P<how>married|engaged)\s+to\s+(?P<rest>.*)$", body)
    if m:
        name = person_name(m.group("rest"))
        if name:
            pred = "is_married_to" if m.group("how") == "married" else "partner_of"
            word = "married" if pred == "is_married_to" else "engaged"
            text = (f"{subject} is no longer {word} to {name}" if neg == "anymore"
                    else f"{subject} is not {word} to {name}" if neg else f"{subject} is {word} to {name}")
            ctx.add(subject, pred, name, text, negated=bool(neg), object_type="person", confidence=0.85)
        return
    # plans
    m = re.match(r"^(?:planning|intending|preparing|scheduled|set|about)\s+(?:to|on)\s+(.*)$", body)
    if m and not neg:
        vp = m.group(1)
        mm = re.match(r"^([a-z]+ing)\b(.*)$", vp)  # "planning on visiting X"
        if mm:
            vp = ungerund(mm.group(1)) + mm.group(2)
        plan_fact(ctx, subject, vp, strict=False)
        return
    m = re.match(r"^going\s+to\s+(.*)$", body)
    if m and not neg:
        vp = m.group(1)
        place = proper_name(vp) if vp[:1].isupper() else None
        if place:
            plan_fact(ctx, subject, f"go to {place} " + vp[len(place):], strict=False)
        elif re.match(r"^(?:the|a|an|my|our|his|her|their|be|see|have|try|get|do|need)\b", vp, re.I) is None:
            plan_fact(ctx, subject, vp, strict=True)
        return
    m = re.match(r"^(?:moving|relocating)\s+(?:back\s+)?to\s+(.*)$", body)
    if m and not neg:
        place = proper_name(m.group(1))
        if place:
            plan_fact(ctx, subject, f"move to {place} " + m.group(1)[len(place):], strict=False)
        return
    # likes in be-form
    m = re.match(r"^(?:(?:really|so|super|very|totally|quite|pretty|a\s+bit|also)\s+)*"
                 r"(?P<how>into|obsessed\s+with|passionate\s+about|crazy\s+about|addicted\s+to|"
                 r"(?:a\s+)?(?:big\s+|huge\s+|massive\s+|great\s+|real\s+)?fan\s+of|keen\s+on|"
                 r"fond\s+of|interested\s+in)\s+(?P<obj>.*)$", body, re.I)
    if m:
        likes_fact(ctx, subject, m.group("obj"), negative=False, neg=neg,
               weak=m.group("how").lower().startswith("interested"))
        return
    m = re.match(r"^allergic\s+to\s+(.*)$", body)
    if m and not neg:
        obj = np_at_start(m.group(1))
        if obj:
            ctx.add(subject, "allergic_to", clean_object(obj), f"{subject} is allergic to {obj}",
                    object_type="thing", confidence=0.85)
        return
    m = re.match(r"^(?:learning|studying)\s+(.*)$", body)
    if m and not neg:
        studies_fact(ctx, subject, m.group(1), neg)
        return
    m = re.match(r"^(?:a\s+)?(?:member|part)\s+of\s+(.*)$", body)
    if m:
        obj = np_at_start(m.group(1), max_words=6)
        if obj and (obj[:1].isupper() or re.search(
                r"\b(?:club|team|group|band|association|society|church|choir|union|party|community|"
                r"organi[sz]ation|league|council|committee|board|crew|brigade|guild|network|orchestra|"
                r"chapter|circle|collective|cooperative|gym|program|programme|army|navy)\b", obj, re.I)):
            text = (f"{subject} is no longer a member of {obj}" if neg == "anymore"
                    else f"{subject} is not a member of {obj}" if neg else f"{subject} is a member of {obj}")
            ctx.add(subject, "member_of", clean_object(obj), text, negated=bool(neg),
                    object_type="organization", confidence=0.75)
        return
    m = re.match(r"^(?:called|named)\s+(.*)$", body)
    if m and first and not neg:
        name = person_name(m.group(1))
        if name:
            ctx.add(subject, "name", name, f"{subject}'s name is {name}", confidence=0.8)
        return
    # "I am Ann" (only a lone capitalised name ending the clause)
    if first and not neg and not perfect:
        m = re.match(rf"^({NAME})(?:\s*,?\s*(?:(?:it's\s+|it\s+is\s+)?(?:nice|pleased|good|great|glad|lovely)\s+to\s+"
                     rf"meet\s+you|by the way|btw))?\s*$", body)
        if m:
            name = person_name(m.group(1), strict=True)
            if name and name not in NATIONALITIES and not any(w in NATIONALITIES for w in name.split()):
                ctx.add(subject, "name", name, f"{subject}'s name is {name}", confidence=0.7)
