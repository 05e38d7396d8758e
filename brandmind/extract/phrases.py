"""Phrase helpers of the rules extractor: cutting, cleaning and checking the noun phrases,
names, places and dates a pattern matched (pure string functions)."""
from __future__ import annotations

import datetime as _dt
import re

from .dates import MONTHS, find_dates
from .patterns import (
    CAL_DATE,
    CLAUSE_WORDS,
    DANGLING,
    FILLER_TAIL,
    GENERIC_OBJECTS,
    LANGUAGES,
    NAME_RE,
    NATIONALITIES,
    NOT_NAMES,
    NP_STOP,
    POSSESSIONS,
    PROPER_RE,
    SAY_FORMS,
)


def cut_at(text: str, stop: re.Pattern[str]) -> str:
    m = stop.search(text)
    return text[: m.start()] if m else text


def clean_object(obj: str, *, drop_article: bool = True) -> str:
    obj = obj.strip(" \t,.;:!?-–—'\"")
    prev = None
    while prev != obj:
        prev = obj
        obj = FILLER_TAIL.sub("", obj).strip(" \t,.;:!?-–—'\"")
    if drop_article:
        obj = re.sub(r"^(?:a|an|the|some)\s+", "", obj)
    return obj


def is_generic(obj: str) -> bool:
    words = obj.lower().split()
    if not words:
        return True
    bare = re.sub(r"^(?:a|an|the|some)\s+", "", obj.lower())
    return words[0] in GENERIC_OBJECTS or obj.lower() in GENERIC_OBJECTS or bare in GENERIC_OBJECTS


def gerund(verb: str) -> str:
    v = verb.lower()
    irregular = {"be": "being", "see": "seeing", "ski": "skiing", "die": "dying", "lie": "lying",
                 "tie": "tying", "flee": "fleeing", "agree": "agreeing", "free": "freeing",
                 "dye": "dyeing", "canoe": "canoeing", "hoe": "hoeing", "visit": "visiting",
                 "travel": "traveling", "garden": "gardening", "open": "opening", "listen": "listening",
                 "cook": "cooking", "read": "reading"}
    if v in irregular:
        return irregular[v]
    if v.endswith("ie"):
        return v[:-2] + "ying"
    if v.endswith("e") and not v.endswith(("ee", "ye", "oe")) and len(v) > 2:
        return v[:-1] + "ing"
    if (len(v) <= 4 and len(v) >= 3 and v[-1] not in "aeiouwxy" and v[-2] in "aeiou"
            and v[-3] not in "aeiou"):
        return v + v[-1] + "ing"
    return v + "ing"


def article(noun_phrase: str) -> str:
    first = noun_phrase.split()[0].lower() if noun_phrase.split() else ""
    if first.isdigit() or first in {"two", "three", "four", "five", "six", "seven", "eight", "nine",
                                    "ten", "some", "several", "many", "a", "an", "the"}:
        return noun_phrase
    if noun_phrase.split()[-1].lower().endswith("s") and noun_phrase.split()[-1].lower() not in {
            "bus", "glass", "bass", "class", "grass", "boss", "canvas", "cactus", "walrus",
            "platypus", "octopus", "iris", "lotus", "chess", "business", "dress", "citrus"} \
            and noun_phrase.split()[-1].lower() in POSSESSIONS:
        return noun_phrase
    return ("an " if first[:1] in "aeiou" and not first.startswith(("uni", "use", "eu", "one"))
            else "a ") + noun_phrase


def person_name(text: str, *, strict: bool = False) -> str | None:
    """A person's name at the start of ``text`` (one or two capitalised words), or None.
    ``strict`` also refuses words that are more often adjectives ("I'm Canadian")."""
    m = NAME_RE.match(text)
    if not m:
        return None
    words = m.group(0).split()
    bad = NOT_NAMES | NATIONALITIES | LANGUAGES if strict else NOT_NAMES | LANGUAGES
    if words[0] in bad:
        return None
    end = m.end()
    if len(words) > 1 and words[1] in bad:
        words = words[:1]
        end = m.start() + len(words[0])
    if text[end:end + 1].isalnum():
        return None
    return " ".join(words)


def proper_name(text: str) -> str | None:
    """A capitalised place or organisation name at the start of ``text``, or None."""
    m = PROPER_RE.match(text)
    if not m:
        return None
    value = m.group(0)
    # trailing linkers ("Lisbon and") or month/day words ("Lisbon In May") are not part of it
    words = value.replace(",", " ,").split()
    while words and (words[-1] in (",",) or words[-1].lower() in {"of", "and", "&", "the", "on", "am",
                                                                  "for", "de", "la", "le"}
                     or words[-1] in NOT_NAMES - {"May"} or words[-1] in {
                         "January", "February", "March", "April", "June", "July", "August",
                         "September", "October", "November", "December", "Monday", "Tuesday",
                         "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}):
        words.pop()
    if not words:
        return None
    value = " ".join(words).replace(" ,", ",")
    bare = re.sub(r"^[Tt]he\s+", "", value)
    if not bare or bare.split()[0] in NOT_NAMES or bare.split()[0] in NATIONALITIES - {"Back", "Home"}:
        return None
    return value


def say_text(pred: str, s: str, o: str, neg: str | None) -> str:
    v3, vb = SAY_FORMS[pred]
    if neg == "anymore":
        return f"{s} no longer {v3} {o}"
    if neg:
        return f"{s} does not {vb} {o}"
    return f"{s} {v3} {o}"


def calendar_day(text: str) -> tuple[int, int, int | None] | None:
    """(month, day, year or None) of a calendar date at the start of ``text`` ("June 3",
    "the 3rd of June, 1990", "3 Jun"), when it is a real day; else None."""
    m = CAL_DATE.match(text.strip())
    if not m:
        return None
    month_word = (m.group("m1") or m.group("m2")).rstrip(".").capitalize()
    month = MONTHS.get(month_word)
    day = int(m.group("d1") or m.group("d2"))
    year = int(m.group("y")) if m.group("y") else None
    try:
        _dt.date(year or 2000, month, day)  # 2000: a leap year, so "February 29" is a birthday
    except (TypeError, ValueError):
        return None
    return month, day, year


MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
                "October", "November", "December")


def without_the(value: str) -> str:
    return re.sub(r"^[Tt]he\s+", "", value)


def neg_be(subject: str, np: str, neg: str | None) -> str | None:
    if neg == "anymore":
        return f"{subject} is no longer {np}"
    if neg:
        return f"{subject} is not {np}"
    return None


def ungerund(word: str) -> str:
    w = word.lower()
    special = {"visiting": "visit", "traveling": "travel", "travelling": "travel", "moving": "move",
               "taking": "take", "making": "make", "having": "have", "going": "go", "getting": "get",
               "starting": "start", "buying": "buy", "doing": "do", "running": "run", "leaving": "leave",
               "quitting": "quit", "writing": "write", "hiking": "hike", "adopting": "adopt",
               "joining": "join", "learning": "learn", "opening": "open", "selling": "sell",
               "retiring": "retire", "hosting": "host", "throwing": "throw", "spending": "spend",
               "coming": "come", "driving": "drive", "flying": "fly", "baking": "bake",
               "attending": "attend", "applying": "apply", "building": "build", "launching": "launch",
               "studying": "study", "camping": "camp", "swimming": "swim", "painting": "paint",
               "seeing": "see", "trying": "try", "giving": "give", "renovating": "renovate"}
    return special.get(w, w[:-3])


def np_at_start(text: str, *, max_words: int = 8, stop: re.Pattern[str] = NP_STOP) -> str | None:
    """A noun phrase at the start of ``text``, cut at the clause's end, or None."""
    for _, a, b in reversed(find_dates(text, 0)):  # a date phrase ends the phrase
        text = text[:a].rstrip() + " ," + text[b:]
    cut = cut_at(text, stop)
    if _has_clause_words(cut):
        return None
    obj = clean_object(cut, drop_article=False)
    obj = re.sub(r"\s+(?:in|on|at|by|around|for|during|about)\s*$", "", obj)
    obj = clean_object(obj, drop_article=False)
    if not obj or is_generic(obj) or len(obj.split()) > max_words or not thing_like(obj):
        return None
    return obj


def _has_clause_words(text: str) -> bool:
    return any(w.strip(",.!?-") in CLAUSE_WORDS for w in text.lower().replace("'s ", " 's ").split())


def thing_like(obj: str) -> bool:
    """No clause words ("it's", "them", "you") and nothing dangling at the end ("write about")."""
    words = obj.lower().replace("'s ", " 's ").split()
    if not words or not re.search(r"[a-z]", obj.lower()):
        return False
    if any(w.strip(",.!?-") in CLAUSE_WORDS for w in words):
        return False
    return words[-1].strip(",.!?-") not in DANGLING


def split_list(obj: str) -> list[str]:
    """ "hiking, camping and swimming" -> three; "rock and roll" stays one."""
    parts = [p.strip() for p in re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", obj) if p.strip()]
    if len(parts) < 2:
        return [obj]
    if all(p.split()[0].endswith("ing") for p in parts) or all(p[:1].isupper() for p in parts):
        return parts
    if "," in obj and all(len(p.split()) <= 3 for p in parts):
        return parts
    return [obj]
