"""The verb rules of the rules extractor: the handler of each pattern of
``patterns.VERB_RULES`` and the dispatch from a clause's verb phrase to them."""
from __future__ import annotations

import re
from typing import Callable

from .makers import (
    Ctx,
    diet_fact,
    event_fact,
    has_fact,
    likes_fact,
    move_fact,
    plan_fact,
    studies_fact,
    works_as_fact,
)
from .patterns import (
    DID_ACTIVITIES,
    DIET_RE,
    EVENT_STOP,
    GENERIC_OBJECTS,
    JOB_AT,
    LANGUAGES,
    NP_STOP,
    PLAYABLE,
    POSS_MODIFIERS,
    POSSESSIONS,
    VERB_RULES,
    VP_STOP,
    Simple,
)
from .phrases import (
    article,
    clean_object,
    cut_at,
    gerund,
    np_at_start,
    person_name,
    proper_name,
    say_text,
    ungerund,
    without_the,
)


def verb_facts(rest: str, subject: str, first: bool, neg: str | None, ctx: Ctx, *, perfect: bool) -> None:
    """The facts of the verb phrase ``rest``: the first pattern of VERB_RULES that matches."""
    for pattern, rule in VERB_RULES:
        m = pattern.match(rest)
        if not m:
            continue
        x = m.group("x").strip()
        ctx.verb = m.groupdict().get("v")
        if isinstance(rule, Simple):
            simple_fact(ctx, subject, x, neg, rule)
        else:
            VERB_HANDLERS[rule](ctx, subject, x, neg, perfect)
        return


def simple_fact(ctx: Ctx, s: str, x: str, neg: str | None, spec: Simple) -> None:
    """The one fact of a :class:`~brandmind.extract.patterns.Simple` pattern."""
    obj = proper_name(x) if spec.take == "place" else person_name(x) if x else None
    if not obj or (neg and not spec.negatable):
        return
    span = ctx.date() if spec.dated or "{when}" in spec.text else None
    when = f" {span.describe()}" if span else ""
    text = say_text(spec.predicate, s, obj, neg) if spec.negatable else spec.text.format(s=s, o=obj, when=when)
    ctx.add(s, spec.predicate, without_the(obj) if spec.take == "place" else obj, text,
            negated=spec.negated or bool(neg), valid_from=span.start if span and spec.dated else None,
            object_type=spec.object_type, confidence=spec.confidence)


def _h_moved(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    """ "I moved to Y (from X)"."""
    place = proper_name(x)
    if neg or not place:
        return
    m = re.match(r"^\s+(?:from|out\s+of)\s+(.*)$", x[len(place):])
    move_fact(ctx, s, proper_name(m.group(1)) if m else None, place)


def _h_moved_from(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    """ "I moved from X (to Y)"."""
    origin = proper_name(x)
    if neg or not origin:
        return
    m = re.match(r"^\s+(?:back\s+|over\s+)?to\s+(.*)$", x[len(origin):])
    move_fact(ctx, s, origin, proper_name(m.group(1)) if m else None)


def _h_diet(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    m = re.match(rf"^(?:a\s+|an\s+)?(?:(?:strict|mostly)\s+)?(?P<d>{DIET_RE})(?:\s+diet)?(?P<tail>.*)$", x, re.I)
    if m:
        diet_fact(ctx, s, m.group("d"), m.group("tail"), neg)


def _h_diet_start(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    m = re.match(rf"^(?P<d>{DIET_RE})(?P<tail>.*)$", x, re.I)
    if m:
        diet_fact(ctx, s, m.group("d"), m.group("tail"), None, started=True)


def _h_move_future(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    pass  # "I move to X" without a tense marker: not understood


def _h_work_at(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    org = proper_name(x)
    if org:
        ctx.add(s, "works_at", without_the(org), say_text("works_at", s, org, neg), negated=bool(neg),
                object_type="organization", confidence=0.85)
        m = re.match(r"^\s+as\s+(?:an?\s+)?(.*)$", x[len(org):])
        if m:
            works_as_fact(ctx, s, m.group(1), neg)


def _h_work_as(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    works_as_fact(ctx, s, x, neg)


def _h_like(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    likes_fact(ctx, s, x, negative=False, neg=neg)


def _h_hate(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    likes_fact(ctx, s, x, negative=True, neg=neg)


def _h_plan(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg == "anymore":
        plan_fact(ctx, s, x, strict=False, neg=neg)
    elif not neg:
        mm = re.match(r"^([a-z]+ing)\b(.*)$", x)
        plan_fact(ctx, s, ungerund(mm.group(1)) + mm.group(2) if mm else x, strict=False)


def _h_decide(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    m = re.match(r"^to\s+(?P<vp>[a-z].*)$", x)
    if m:
        vp = np_at_start(m.group("vp"), max_words=10, stop=VP_STOP)
        if vp and vp.split()[0] not in GENERIC_OBJECTS:
            span = ctx.date()
            ctx.add(s, "decided", vp, f"{s} decided to {vp}", type="decision",
                    valid_from=span.start if span else None, object_type="activity", confidence=0.8)
        return
    if re.match(r"^(?:that|whether|what|how|if|not)\b", x):
        return
    obj = np_at_start(re.sub(r"^(?:on|for)\s+", "", x), max_words=6)
    if obj:
        span = ctx.date()
        ctx.add(s, "decided", clean_object(obj), f"{s} chose {obj}", type="decision",
                valid_from=span.start if span else None, object_type="thing", confidence=0.75)


def _h_have(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    has_fact(ctx, s, x, neg, acquired=False, verb="has")


def _h_acquire(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    m = re.match(r"^(?:a\s+)?(?:new\s+)?(?:job|position|role)\s+(?:at|with)\s+(?P<org>.*)$", x)
    if m:
        simple_fact(ctx, s, m.group("org"), neg, JOB_AT)
        return
    verb = "got"
    for v in ("bought", "adopted", "rescued", "purchased", "welcomed"):
        if v in ctx.clause.split()[1:4] or v in ctx.clause:
            verb = v
            break
    has_fact(ctx, s, x, None, acquired=True, verb=verb)


def _h_lose(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    m = re.match(rf"^(?P<np>{POSS_MODIFIERS}(?P<head>[a-z]+))\b", x, re.I)
    if m and m.group("head").lower() in POSSESSIONS - {"kid", "kids", "child", "children", "son", "daughter",
                                                        "baby", "sister", "brother"}:
        obj = m.group("np").strip().lower()
        span = ctx.date()
        ctx.add(s, "has", obj, f"{s} no longer has {article(obj)}", negated=True,
                valid_from=span.start if span else None, object_type="thing", confidence=0.75)


def _h_visited(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if not neg:
        event_fact(ctx, s, "visited", x, "visited", need_date=False)


def _h_went_to(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    if x[:1].isupper() or (x.startswith("the ") and x[4:5].isupper()):
        event_fact(ctx, s, "visited", x, "went to", need_date=False)
    else:
        event_fact(ctx, s, "attended", x, "went to", need_date=True)


def _h_attended(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if not neg:
        verb = " ".join((ctx.verb or "attended").split())
        event_fact(ctx, s, "attended", x, verb, need_date=False)


def _h_completed(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    verb = ctx.clause.split()
    obj = np_at_start(x, max_words=6, stop=EVENT_STOP)
    if not obj or not re.search(r"\b(?:marathon|race|5k|10k|half|triathlon|ultra|competition|tournament|"
                                r"championship|course|degree|program|programme|certification|hackathon|"
                                r"contest|award|prize|medal)\b", obj, re.I):
        return
    span = ctx.date()
    word = next((w for w in verb if w.lower() in ("ran", "completed", "finished", "won")), "completed")
    ctx.add(s, "completed", clean_object(obj), f"{s} {word.lower()} {obj}" + (f" {span.describe()}" if span else ""),
            valid_from=span.start if span else None, object_type="event", confidence=0.75)


def _h_did(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    act = x.lower()
    if act not in DID_ACTIVITIES and act.split()[0] not in DID_ACTIVITIES:
        return
    span = ctx.date()
    if span is None:
        return
    ctx.add(s, "did", act, f"{s} went {act} {span.describe()}", valid_from=span.start,
            object_type="activity", confidence=0.75)


def _h_started(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    m = re.match(r"^(?:to\s+)?([a-z]+)\b", x)
    if not m:
        return
    if m.group(0).startswith("to "):
        x = gerund(m.group(1)) + x[m.end():]
    obj = np_at_start(x, max_words=6, stop=EVENT_STOP)
    if not obj or obj.lower().split()[0] in {"to", "a", "an", "the"} and len(obj.split()) < 2:
        return
    if re.match(r"^(?:crying|laughing|thinking|feeling|wondering|getting|going|doing|being|talking|"
                r"looking|to|it|this|that|off|out|up|over)\b", obj, re.I):
        return
    span = ctx.date()
    ctx.add(s, "started", clean_object(obj), f"{s} started {obj}" + (f" {span.describe()}" if span else ""),
            valid_from=span.start if span else None, object_type="activity", confidence=0.75)


def _h_joined(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if neg:
        return
    org = proper_name(x) if x[:1].isupper() or (x.startswith("the ") and x[4:5].isupper()) else None
    obj = org or np_at_start(x, max_words=6, stop=EVENT_STOP)
    if not obj or (not org and not re.match(r"^(?:a|an|the)\s", obj)):
        return
    span = ctx.date()
    ctx.add(s, "joined", without_the(obj) if org else clean_object(obj),
            f"{s} joined {obj}" + (f" {span.describe()}" if span else ""),
            valid_from=span.start if span else None, object_type="organization", confidence=0.75)


def _h_speak(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    words = re.findall(r"[A-Z][a-z]+", cut_at(x, NP_STOP))
    langs = [w for w in words if w in LANGUAGES and w != "Sign"]
    if not langs or re.match(r"^(?:to|with|about|at|for|of)\b", x):
        return
    for lang in langs:
        ctx.add(s, "speaks", lang, say_text("speaks", s, lang, neg), negated=bool(neg), object_type="language",
                confidence=0.8)


def _h_play(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    obj = cut_at(x, EVENT_STOP).strip().lower()
    obj = clean_object(obj, drop_article=False)
    if obj in PLAYABLE:
        clean = without_the(obj)
        ctx.add(s, "plays", clean, say_text("plays", s, obj, neg), negated=bool(neg), object_type="activity",
                confidence=0.8)


def _h_study(ctx: Ctx, s: str, x: str, neg: str | None, perfect: bool) -> None:
    if not neg or neg == "anymore":
        studies_fact(ctx, s, x, neg)


VERB_HANDLERS: dict[str, Callable[[Ctx, str, str, str | None, bool], None]] = {
    "moved": _h_moved, "move_future": _h_move_future, "moved_from": _h_moved_from, "diet": _h_diet,
    "diet_start": _h_diet_start, "work_at": _h_work_at, "work_as": _h_work_as, "like": _h_like, "hate": _h_hate,
    "plan": _h_plan, "decide": _h_decide, "have": _h_have, "acquire": _h_acquire, "lose": _h_lose,
    "visited": _h_visited, "went_to": _h_went_to, "attended": _h_attended, "completed": _h_completed,
    "did": _h_did, "started": _h_started, "joined": _h_joined, "speak": _h_speak, "play": _h_play,
    "study": _h_study,
}
