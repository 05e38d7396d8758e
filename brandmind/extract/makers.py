"""What turns a matched phrase into facts for the rules extractor: the clause context
(:class:`Ctx`) and the fact makers shared by the verb and "to be" rules."""
from __future__ import annotations

import re

from .base import Fact, Turn
from .dates import DateSpan, find_dates
from .patterns import (
    BAD_JOB_MODIFIERS,
    DIET_TAIL,
    EVENT_STOP,
    GENERIC_OBJECTS,
    LIST_RE,
    ME_RE,
    MY_RE,
    NAME,
    NOT_NAMES,
    NP_STOP,
    PETS,
    PLAN_VERBS,
    POSS_MODIFIERS,
    POSSESSIONS,
    REL_NOUNS,
    VP_STOP,
)
from .phrases import (
    MONTH_NAMES,
    article,
    clean_object,
    cut_at,
    gerund,
    is_generic,
    np_at_start,
    person_name,
    proper_name,
    say_text,
    split_list,
    thing_like,
    without_the,
)


# -- the extractor --------------------------------------------------------------------------
class Ctx:
    """What a clause's rules need: who "I" is, when it was said, where to put facts."""

    __slots__ = ("me", "ts", "turn", "out", "clause", "sentence", "verb")

    def __init__(self, me: str, turn: Turn, out: list[Fact]) -> None:
        self.me = me
        self.ts = turn.ts
        self.turn = turn
        self.out = out
        self.clause = ""
        self.sentence = ""
        self.verb: str | None = None

    def date(self, tense: str = "past") -> DateSpan | None:
        """The date phrase of the clause, else the only one of its sentence ("Last week, I ...")."""
        found = find_dates(self.clause, self.ts, tense=tense)
        if found:
            return found[0][0]
        found = find_dates(self.sentence, self.ts, tense=tense)
        return found[0][0] if len(found) == 1 else None

    def add(self, subject: str, predicate: str, obj: str, text: str, *, type: str = "fact",
            negated: bool = False, valid_from: int | None = None, confidence: float = 0.8,
            subject_type: str = "person", object_type: str = "entity") -> None:
        obj = obj.strip()
        if not obj or not subject:
            return
        if predicate == "name" and self.turn.speaker and obj.casefold() == subject.casefold():
            return  # "I'm Ann" said by Ann tells nothing new (said as user "ann", it tells the name)
        # the speaker's "my" and "me" inside a phrase ("visit my parents")
        obj = MY_RE.sub(f"{self.me}'s", ME_RE.sub(self.me, obj))
        text = MY_RE.sub(f"{self.me}'s", ME_RE.sub(self.me, text))
        text = text[0].upper() + text[1:] if text[:1].islower() else text
        self.out.append(Fact(
            text=text, subject=subject, predicate=predicate, object=obj, type=type,
            valid_from=valid_from, confidence=confidence, subject_type=subject_type,
            object_type=object_type, sources=[self.turn.bead] if self.turn.bead else [],
            negated=negated, meta={"extractor": "rules"}))


def rel_fact(ctx: Ctx, subject: str, rel: str, name: str, *, neg: bool = False) -> None:
    rel_l = rel.lower()
    pred, otype = REL_NOUNS[rel_l]
    if name == subject or name.split()[0] in NOT_NAMES:
        return
    if pred == "is_married_to" or pred == "partner_of":
        text = f"{name} is {subject}'s {rel_l}"
    else:
        text = f"{name} is {subject}'s {rel_l}"
    if neg:
        text = f"{name} is no longer {subject}'s {rel_l}"
    ctx.add(subject, pred, name, text, negated=neg, object_type=otype, confidence=0.85)


def birthday_fact(ctx: "Ctx", subject: str, month: int, day: int, year: int | None) -> None:
    when = f"{MONTH_NAMES[month - 1]} {day}"
    ctx.add(subject, "birthday", when, f"{subject}'s birthday is {when}", object_type="date", confidence=0.85)
    if year is not None:
        iso_day = f"{year:04d}-{month:02d}-{day:02d}"
        ctx.add(subject, "born_on", iso_day, f"{subject} was born on {when}, {year}", object_type="date",
                confidence=0.85)


def plan_fact(ctx: Ctx, subject: str, vp: str, *, strict: bool, neg: str | None = None) -> None:
    """A plan: ``vp`` is the verb phrase ("visit Japan next month")."""
    span = ctx.date("future")
    vp_clean = clean_object(cut_at(vp, VP_STOP), drop_article=False)
    # take the date phrase out of the verb phrase
    for found, a, b in find_dates(vp_clean, ctx.ts, tense="future"):
        vp_clean = vp_clean[:a] + vp_clean[b:]
    vp_clean = re.sub(r"\s+(?:in|on|at|by|around|for|during)\s*$", "", " ".join(vp_clean.split()))
    vp_clean = clean_object(vp_clean, drop_article=False)
    words = vp_clean.split()
    if not words or not re.fullmatch(r"[a-z][a-z-]*", words[0]) or len(words) > 10:
        return
    if words[0] in GENERIC_OBJECTS or words[0] in {"the", "a", "an", "to", "be", "let", "keep", "make"}:
        return
    if strict and words[0] not in PLAN_VERBS:
        return
    if strict and words[0] in {"see", "try", "get", "have", "go"} and span is None:
        return
    if span is not None and ctx.ts is not None and span.end <= ctx.ts:  # a plan in the past
        return
    if not thing_like(vp_clean):
        return
    if len(words) == 1 and words[0] not in {"retire", "graduate", "travel", "move", "quit", "marry"}:
        return
    when = f" {span.describe()}" if span else ""
    if neg:
        text = f"{subject} no longer plans to {vp_clean}"
    else:
        text = f"{subject} plans to {vp_clean}{when}"
    ctx.add(subject, "plans", vp_clean, text, negated=bool(neg), object_type="activity", confidence=0.75)


def likes_fact(ctx: Ctx, subject: str, text: str, *, negative: bool, neg: str | None,
           weak: bool = False) -> None:
    """``text`` follows "like"/"hate" (or "am into", "am a fan of")."""
    if negative and neg:  # "I don't hate X": not understood
        return
    if neg == "plain" and not negative:  # "I don't like X" = dislikes X
        negative, neg = True, None
    text = text.strip()
    m = re.match(r"^to\s+([a-z]+)\b(.*)$", text)
    infinitive = bool(m)
    if m:
        if m.group(1) in {"be", "think", "know", "say", "keep", "make", "have", "get", "do", "see",
                          "let", "believe", "feel", "imagine", "hear", "call"}:
            return
        text = gerund(m.group(1)) + m.group(2)
    listed = LIST_RE.match(text)
    if listed and len(split_list(listed.group(0))) > 1:
        parts = split_list(listed.group(0))
    else:
        obj = np_at_start(text, max_words=6)
        if not obj:
            return
        parts = split_list(obj)
    for part in parts:
        clean = clean_object(part)
        if not clean or is_generic(clean):
            continue
        otype = "activity" if clean.split()[0].endswith("ing") or infinitive else (
            "entity" if clean[:1].isupper() else "thing")
        if negative:
            ctx.add(subject, "dislikes", clean, f"{subject} dislikes {part}", type="preference",
                    object_type=otype, confidence=0.8)
        else:
            ctx.add(subject, "likes", clean, say_text("likes", subject, part, neg), type="preference",
                    negated=bool(neg), object_type=otype, confidence=0.7 if weak else 0.8)


def works_as_fact(ctx: Ctx, subject: str, text: str, neg: str | None) -> None:
    obj = np_at_start(text, max_words=4, stop=re.compile(NP_STOP.pattern + r"|\s(?:at|in|on)\b", re.I))
    if not obj:
        return
    role = clean_object(obj).lower()
    if not role or any(w in BAD_JOB_MODIFIERS for w in role.split()[:-1]):
        return
    text = (f"{subject} no longer works as {article(role)}" if neg == "anymore"
            else f"{subject} does not work as {article(role)}" if neg else f"{subject} works as {article(role)}")
    ctx.add(subject, "works_as", role, text, negated=bool(neg), object_type="role", confidence=0.8)


def studies_fact(ctx: Ctx, subject: str, text: str, neg: str | None) -> None:
    m = re.match(r"^(?P<what>.*?)\s+at\s+(?P<org>[A-Z].*)$", text)
    what = m.group("what") if m else text
    obj = np_at_start(what, max_words=4, stop=re.compile(NP_STOP.pattern + r"|\s(?:at|in|on|to|from)\b", re.I))
    if obj and not obj[0].isdigit():
        ctx.add(subject, "studies", clean_object(obj), say_text("studies", subject, obj, neg),
                negated=bool(neg), object_type="subject", confidence=0.75)
    if m:
        org = proper_name(m.group("org"))
        if org:
            ctx.add(subject, "studies_at", without_the(org), say_text("studies_at", subject, org, neg),
                    negated=bool(neg), object_type="organization", confidence=0.75)


def was_fact(rest: str, subject: str, neg: str | None, ctx: Ctx) -> None:
    """ "I was at the concert yesterday" -> attended (only with a date)."""
    m = re.match(r"^(?:was|were)\s+at\s+(.*)$", rest, re.I)
    if m and not neg:
        span = ctx.date()
        if span is None:
            return
        obj = np_at_start(m.group(1), max_words=6, stop=EVENT_STOP)
        if obj and not obj[0].isupper() and re.match(r"^(?:a|an|the)\s", obj):
            ctx.add(subject, "attended", clean_object(obj), f"{subject} was at {obj} {span.describe()}",
                    valid_from=span.start, object_type="event", confidence=0.7)


def has_fact(ctx: Ctx, subject: str, text: str, neg: str | None, *, acquired: bool, verb: str) -> None:
    m = re.match(rf"^(?P<q>a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d{{1,2}}|my\s+own|a\s+new|another|some|several)\s+"
                 rf"(?P<np>{POSS_MODIFIERS}(?P<head>guinea pig|drum kit|3d printer|sewing machine|[a-z]+))\b"
                 rf"(?:(?:,\s*|\s+)(?:named|called)\s+(?P<name>{NAME}))?", text, re.I)
    if not m:
        return
    head = m.group("head").lower()
    if head not in POSSESSIONS:
        return
    q = m.group("q").lower()
    np = m.group("np").strip().lower()
    if q not in ("a", "an", "one", "my own", "a new", "another", "some"):
        np = f"{q} {np}"
    elif q == "a new":
        np = f"new {np}" if not np.startswith("new ") else np
    name = person_name(m.group("name")) if m.group("name") else None
    obj = f"{np} named {name}" if name else np
    span = ctx.date() if acquired else None
    if acquired:
        text_out = f"{subject} {verb} {article(obj)}" + (f" {span.describe()}" if span else "")
    else:
        text_out = say_text("has", subject, article(obj), neg)
    otype = "animal" if head.rstrip("s") in PETS or head in ("puppies", "fish") else (
        "person" if head in {"kid", "kids", "child", "children", "son", "sons", "daughter", "daughters",
                             "baby", "babies", "sister", "sisters", "brother", "brothers", "sibling",
                             "siblings", "twin", "twins", "grandchild", "grandchildren", "grandkids",
                             "stepson", "stepdaughter"} else "thing")
    ctx.add(subject, "has", obj, text_out, negated=bool(neg), valid_from=span.start if span else None,
            object_type=otype, confidence=0.8)


def event_fact(ctx: Ctx, subject: str, pred: str, text: str, verb_text: str, *, need_date: bool) -> None:
    span = ctx.date()
    if span is None and need_date:
        return
    place = proper_name(text) if text[:1].isupper() or text.startswith("the ") and text[4:5].isupper() else None
    if place:
        obj, otype = place, "place" if pred == "visited" else "event"
    else:
        if pred == "visited" and span is None:
            return
        obj = np_at_start(text, max_words=6, stop=EVENT_STOP)
        if not obj or re.match(r"^(?:bed|sleep|work|school|church|class|lunch|dinner|breakfast|the bathroom|"
                               r"the toilet|the kitchen|the store|the shop|the shops|the gym|the office|"
                               r"home|town|it|there|his|her|their|your|my (?:place|room|house|home|office|"
                               r"desk|car|bed))\b", obj, re.I):
            return
        otype = "event"
    when = f" {span.describe()}" if span else ""
    ctx.add(subject, pred, without_the(obj) if place else clean_object(obj), f"{subject} {verb_text} {obj}{when}",
            valid_from=span.start if span else None, object_type=otype, confidence=0.75)


def move_fact(ctx: Ctx, s: str, origin: str | None, dest: str | None) -> None:
    """A move, from the turn's date on: X (origin) is where s no longer lives, Y (dest) where
    s lives now."""
    span = ctx.date()
    when = f" {span.describe()}" if span else ""
    vf = span.start if span else None
    if origin:
        ctx.add(s, "moved_from", without_the(origin), f"{s} moved from {origin}" + (f" to {dest}" if dest else "") + when,
                valid_from=vf, object_type="place", confidence=0.85)
        ctx.add(s, "lives_in", without_the(origin), f"{s} no longer lives in {origin}", negated=True, valid_from=vf,
                object_type="place", confidence=0.75)
    if dest:
        ctx.add(s, "moved_to", without_the(dest), f"{s} moved to {dest}{when}", valid_from=vf,
                object_type="place", confidence=0.85)
        ctx.add(s, "lives_in", without_the(dest), f"{s} lives in {dest}", valid_from=vf,
                object_type="place", confidence=0.75)


def diet_fact(ctx: Ctx, s: str, diet: str, tail: str, neg: str | None, *, started: bool = False) -> bool:
    """A diet fact when ``tail`` is empty or a time phrase; whether it was one."""
    if not DIET_TAIL.match(tail):
        return False
    diet = diet.lower()
    diet = {"veggie": "vegetarian", "pescetarian": "pescatarian"}.get(diet, diet)
    span = ctx.date()
    vf = span.start if span and (started or re.match(r"^\s+since\b", tail, re.I)) else None
    if neg == "anymore":
        text = f"{s} is no longer {diet}"
    elif neg:
        text = f"{s} is not {diet}"
    elif started:
        text = f"{s} became {diet}" + (f" {span.describe()}" if span else "")
    else:
        text = f"{s} is {diet}"
    ctx.add(s, "diet", diet, text, negated=bool(neg), valid_from=vf if not neg else None,
            object_type="diet", confidence=0.85)
    return True
