"""Time words in a query ("last Tuesday", "in May 2023", "two weeks ago") as time windows.

``find_windows(text, now)`` returns the windows the query names, relative to ``now``
(epoch ms, UTC), each ``Window(start, end, phrase)`` with ``start`` inclusive and
``end`` exclusive.  Recall boosts memories whose time falls in a window (it does
not filter: a question's time words are often loose, and ``--since/--until`` are
there for hard limits).

Understood (case-insensitive; numbers as digits or words up to twelve):

* ``today``, ``yesterday``, ``tonight``, ``this morning``, ``last night``
* ``last/this/next week|month|year``, ``last weekend``, ``this weekend``
* ``N days|weeks|months|years ago`` (also ``a week ago``, ``a couple of days ago``):
  the unit-wide window centred N units back (two weeks ago = 17.5 to 10.5 days back)
* ``last|on|this <weekday>``: the most recent such day before today
* ``2024-01-23``, ``23.01.2024`` (day first), ``01/23/2024`` (month first unless the first
  number is over 12)
* ``in|during <month> [year]``, ``<month> <day>[, year]``, ``<day> <month> [year]``:
  without a year, the most recent such month (or day) not after ``now``
* ``in|during|since <year>`` (1900-2199); ``since`` opens the window up to ``now``
* ``recently``, ``lately``: the last 30 days
* a date's window moved by the words before it: ``the week|month before|after <date>``,
  ``N days before|after <date>``, ``the <weekday> before|after <date>``, ``the weekend
  before|after|of <date>``, ``shortly|just before <date>`` (the day before), and
  ``between <date> and <date>`` (one window; the first date takes the second one's year)
"""
from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from functools import lru_cache
from datetime import datetime, timedelta, timezone

from .clock import iso

DAY = 86_400_000
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
            "a couple of": 2, "a few": 3, "several": 3}
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30.44, "year": 365.25}

_NUM = r"(?P<n>\d{1,3}|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20|21)\d\d)"
_PATTERN_TEXT = [  # compiled on first use (_patterns)
    ("ago", _NUM + r"\s+(?P<unit>day|week|month|year)s?\s+ago\b"),
    ("relative", r"\b(?P<which>last|this|next|past)\s+(?P<unit>week(?:end)?|month|year)\b"),
    ("weekday", r"\b(?:(?P<which>last|this|on|past)\s+)?(?P<day>" + "|".join(_WEEKDAYS) + r")\b"),
    ("numeric", r"(?<![\w.:/-])(?:(?P<y1>(?:19|20|21)\d\d)-(?P<m1>\d{1,2})-(?P<d1>\d{1,2})"
                r"|(?P<a>\d{1,2})(?P<sep>[./])(?P<b>\d{1,2})(?P=sep)(?P<y2>(?:19|20|21)\d\d))(?![\d.:/-]?\d)"),
    ("day_month", r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+" + _YEAR + r")?\b"),
    ("month_day", r"\b" + _MONTH + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+" + _YEAR + r")?"),
    ("month", r"\b(?P<prep>in|during|since|of|by)?\s*" + _MONTH + r"(?:,?\s+" + _YEAR + r")?\b"),
    ("year", r"\b(?P<prep>in|during|since)\s+" + _YEAR + r"\b"),
    ("word", r"\b(?P<w>today|yesterday|tonight|this morning|last night|recently|lately)\b"),
]


# a statement of when: a day or period said outright or relative to the time of speaking
_WHEN_WORDS = frozenset({"yesterday", "today", "tonight", "tomorrow", "ago", "recently", "lately", "weekend",
                         *_WEEKDAYS, *(n for n in _MONTHS if len(n) > 3)})
_RELATIVE = frozenset({"last", "next", "past", "coming", "previous", "this"})
_UNITS = frozenset({"week", "month", "year", "night", "morning", "evening", "summer", "winter", "spring", "fall",
                    "autumn"})
_WORDS = re.compile(r"[a-z0-9]+")
# every pattern needs a digit or one of these words: a text with neither names no time, and
# the patterns (~10 ms to compile) are not even compiled for it
_TRIGGERS = frozenset({"day", "days", "week", "weeks", "weekend", "month", "months", "year", "years", "today",
                       "yesterday", "tonight", "morning", "night", "recently", "lately", *_WEEKDAYS, *_MONTHS})
_DIGIT = re.compile(r"\d")
_NUMERIC_DATE = re.compile(r"\b\d{1,2}[./-]\d{1,2}[./-]\d{2,4}\b")
_DATED_NUMBER = re.compile(r"^(?:(?:19|20)\d\d|\d{1,2}(?:st|nd|rd|th))$")
_ASKS_WHEN = re.compile(r"\bwhen\b|\bwhat\s+(?:date|day|time|year|month|week)\b|\bhow\s+long\s+ago\b"
                        r"|\bwhich\s+(?:date|day|year|month|week)\b", re.IGNORECASE)


def asks_when(text: str) -> bool:
    """Whether a question asks when something happened ("when did ...", "what date ...",
    "how long ago ...")."""
    return bool(_ASKS_WHEN.search(text))


def says_when(text: str) -> bool:
    """Whether a text says when something happened: a time word ("yesterday", "two days
    ago", "on Friday", "last week": a relative word and a unit anywhere in it), a month
    name, a year, an ordinal day or a numeric date."""
    low = text.lower()
    words = set(_WORDS.findall(low))
    if words & _WHEN_WORDS or (words & _RELATIVE and words & _UNITS):
        return True
    return bool(_DIGIT.search(low)) and (any(_DATED_NUMBER.match(w) for w in words) or bool(_NUMERIC_DATE.search(low)))


@dataclass(frozen=True)
class Window:
    start: int   # epoch ms, inclusive
    end: int     # epoch ms, exclusive
    phrase: str  # the words it came from

    def as_dict(self) -> dict:
        return {"phrase": self.phrase, "from": iso(self.start), "to": iso(self.end)}


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def _day_start(dt: datetime) -> datetime:
    return dt.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_window(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
    return start, end


def may_name_time(low: str) -> bool:
    """Whether a lower-cased text holds what every time pattern needs: a digit or one of
    ``_TRIGGERS`` (False: it names no time, and no pattern is run)."""
    return bool(_DIGIT.search(low)) or not _TRIGGERS.isdisjoint(_WORDS.findall(low))


@lru_cache(maxsize=1)
def _patterns() -> list[tuple[str, "re.Pattern[str]"]]:
    return [(kind, re.compile(pattern)) for kind, pattern in _PATTERN_TEXT]


def find_windows(text: str, now: int) -> list[Window]:
    """Every time window the text names, in the order found (overlapping matches skipped),
    a date's window moved by the words before it (:func:`_relative_to_dates`)."""
    low = text.lower()
    if not may_name_time(low):
        return []
    today = _day_start(datetime.fromtimestamp(now / 1000, timezone.utc))
    found: list[tuple[int, int, int, int]] = []  # match start, end, window start, end (ms)
    for kind, pattern in _patterns():
        for m in pattern.finditer(low):
            if any(m.start() < b and a < m.end() for a, b, _, _ in found):
                continue
            win = _window(kind, m, today, now)
            if win is None:
                continue
            found.append((m.start(), m.end(), _ms(win[0]) if isinstance(win[0], datetime) else win[0],
                          _ms(win[1]) if isinstance(win[1], datetime) else win[1]))
    return [Window(ws, we, text[a:b].strip()) for a, b, ws, we in _relative_to_dates(low, found)]


# words before a date that move its window: "the week before", "two days after", "the Friday
# before", "shortly before", "the weekend of"; and "between <date> and <date>"
_BEFORE_DATE = (
    r"(?:(?:the|on|in|during)\s+)*(?:(?P<n>\d{1,2}|a|one|two|three|four|five|six|seven|a couple of|a few)\s+)?"
    r"(?:(?P<unit>day|week|weekend|month)s?|(?P<day>" + "|".join(_WEEKDAYS) + r")|(?P<near>shortly|just|right))"
    r"\s+(?P<dir>before|after|of|prior to)\s+(?:the\s+)?$")
_BETWEEN = r"\bbetween\s+(?:the\s+)?$"  # both compiled when a text has a date (re's cache)


def _relative_to_dates(low: str, found: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """``found`` (match start, end, window start, end) with each date's window moved by the
    words just before it (``_BEFORE_DATE``; a window those words also matched, such as the
    weekday of "the Friday before", is dropped), and "between A and B" made one window."""
    found = sorted(found)
    out: list[tuple[int, int, int, int]] = []
    for a, b, ws, we in found:
        if out and re.search(_BETWEEN, low[:out[-1][0]]) and re.fullmatch(r"\s+and\s+", low[out[-1][1]:a]):
            out[-1] = (out[-1][0], b, _year_before(out[-1][2], we), we)
            continue
        m = re.search(_BEFORE_DATE, low[:a]) if we - ws <= DAY else None
        if m is None:
            out.append((a, b, ws, we))
            continue
        while out and out[-1][1] > m.start():  # the weekday of "the Friday before" is part of this date
            out.pop()
        out.append((m.start(), b, *_moved(m.groupdict(), ws, we)))
    return out


def _year_before(start: int, end: int) -> int:
    """``start`` moved back by whole years until it is before ``end`` ("between August 11 and
    August 15 2023": the first date takes the second one's year)."""
    day = datetime.fromtimestamp(start / 1000, timezone.utc)
    while _ms(day) >= end and day.year > 1900:
        day = day.replace(year=day.year - 1, day=min(day.day, 28) if day.month == 2 else day.day)
    return _ms(day)


def _moved(g: dict, ws: int, we: int) -> tuple[int, int]:
    """The window ``g`` (a ``_BEFORE_DATE`` match) makes of the day ``[ws, we)``."""
    n = int(g["n"]) if g["n"] and g["n"].isdigit() else _NUMBERS.get(g["n"] or "", 1)
    if g["day"]:  # the Friday before (after) the date
        wd = datetime.fromtimestamp(ws / 1000, timezone.utc).weekday()
        back = (wd - _WEEKDAYS[g["day"]]) % 7 or 7
        start = ws - back * DAY if g["dir"] != "after" else ws + ((_WEEKDAYS[g["day"]] - wd) % 7 or 7) * DAY
        return start, start + DAY
    if g["near"]:
        return (ws - DAY, ws) if g["dir"] != "after" else (we, we + DAY)
    if g["unit"] == "weekend":  # the Saturday and Sunday before, after, or of the date's week
        wd = datetime.fromtimestamp(ws / 1000, timezone.utc).weekday()
        sat = ws + (5 - wd) * DAY
        sat += {"of": 0, "after": 7 * DAY if wd >= 5 else 0}.get(g["dir"], -7 * DAY)
        return sat, sat + 2 * DAY
    span = int(n * {"day": 1, "week": 7, "month": 30.44}[g["unit"]] * DAY)
    if g["dir"] == "of":  # the week (month) around the date
        return ws - span // 2, we + span // 2
    return (ws - span, ws) if g["dir"] != "after" else (we, we + span)


def _window(kind: str, m: re.Match, today: datetime, now: int):
    """The (start, end) the match ``m`` of pattern ``kind`` names (datetimes or epoch ms), or None."""
    return _WINDOWS[kind](m.groupdict(), today, now)


def _ago(g: dict, today: datetime, now: int):
    n = int(g["n"]) if g["n"].isdigit() else _NUMBERS[g["n"]]
    span = _UNIT_DAYS[g["unit"]] * DAY
    centre = now - n * span
    return int(centre - span / 2), int(centre + span / 2) + DAY


def _relative(g: dict, today: datetime, now: int):
    unit, which = g["unit"], g["which"]
    step = {"last": -1, "past": -1, "this": 0, "next": 1}[which]
    if unit == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)
        if which in ("last", "past") and saturday >= today - timedelta(days=1):
            saturday -= timedelta(days=7)
        if which == "next":
            saturday += timedelta(days=7)
        return saturday, saturday + timedelta(days=2)
    if unit == "week":
        if which == "past":
            return today - timedelta(days=7), today + timedelta(days=1)
        monday = today - timedelta(days=today.weekday()) + timedelta(days=7 * step)
        return monday, monday + timedelta(days=7)
    if unit == "month":
        if which == "past":
            return today - timedelta(days=31), today + timedelta(days=1)
        y, mth = today.year, today.month + step
        y, mth = (y - 1, 12) if mth < 1 else (y + 1, 1) if mth > 12 else (y, mth)
        return _month_window(y, mth)
    if which == "past":
        return today - timedelta(days=366), today + timedelta(days=1)
    y = today.year + step
    return datetime(y, 1, 1, tzinfo=timezone.utc), datetime(y + 1, 1, 1, tzinfo=timezone.utc)


def _weekday(g: dict, today: datetime, now: int):
    # "on Tuesday", "last Tuesday" and a bare "Tuesday" all mean the last one before today
    back = (today.weekday() - _WEEKDAYS[g["day"]]) % 7 or 7
    day = today - timedelta(days=back)
    return day, day + timedelta(days=1)


def _calendar_day(g: dict, today: datetime, now: int):
    month, d = _MONTHS[g["month"]], int(g["d"])
    year = int(g["year"]) if g.get("year") else None
    if not 1 <= d <= 31:
        return None
    if year is None:
        year = today.year
        if (month, d) > (today.month, today.day):
            year -= 1
    try:
        day = datetime(year, month, d, tzinfo=timezone.utc)
    except ValueError:
        return None
    return day, day + timedelta(days=1)


def _numeric(g: dict, today: datetime, now: int):
    """2024-01-23 (ISO), 23.01.2024 (day first, the dotted form), 01/23/2024 (month first
    unless the first number cannot be a month)."""
    if g.get("y1"):
        y, mth, d = int(g["y1"]), int(g["m1"]), int(g["d1"])
    else:
        a, b, y = int(g["a"]), int(g["b"]), int(g["y2"])
        d, mth = (a, b) if g["sep"] == "." or a > 12 else (b, a)
    try:
        day = datetime(y, mth, d, tzinfo=timezone.utc)
    except ValueError:
        return None
    return day, day + timedelta(days=1)


def _month(g: dict, today: datetime, now: int):
    name = g["month"]
    if g.get("prep") is None and g.get("year") is None and name in ("may", "march", "mar", "jan", "sept", "sep",
                                                                  "dec", "oct", "nov", "aug", "jun", "jul",
                                                                  "apr", "feb"):
        return None  # a bare "may" is a verb; short forms alone are too ambiguous
    month = _MONTHS[name]
    if g.get("year"):
        year = int(g["year"])
    else:
        year = today.year if month <= today.month else today.year - 1
    start, end = _month_window(year, month)
    if g.get("prep") == "since":
        return start, now + 1
    return start, end


def _year(g: dict, today: datetime, now: int):
    y = int(g["year"])
    start = datetime(y, 1, 1, tzinfo=timezone.utc)
    if g["prep"] == "since":
        return start, now + 1
    return start, datetime(y + 1, 1, 1, tzinfo=timezone.utc)


def _word(g: dict, today: datetime, now: int):
    w = g["w"]
    if w in ("today", "tonight", "this morning"):
        return today, today + timedelta(days=1)
    if w in ("yesterday", "last night"):
        return today - timedelta(days=1), today
    return now - 30 * DAY, now + 1  # recently, lately


_WINDOWS = {"numeric": _numeric, "ago": _ago, "relative": _relative, "weekday": _weekday, "day_month": _calendar_day,
            "month_day": _calendar_day, "month": _month, "year": _year, "word": _word}
