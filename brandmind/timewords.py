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
"""
from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
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
_PATTERNS = [
    ("ago", re.compile(_NUM + r"\s+(?P<unit>day|week|month|year)s?\s+ago\b")),
    ("relative", re.compile(r"\b(?P<which>last|this|next|past)\s+(?P<unit>week(?:end)?|month|year)\b")),
    ("weekday", re.compile(r"\b(?:(?P<which>last|this|on|past)\s+)?(?P<day>" + "|".join(_WEEKDAYS) + r")\b")),
    ("numeric", re.compile(r"(?<![\w.:/-])(?:(?P<y1>(?:19|20|21)\d\d)-(?P<m1>\d{1,2})-(?P<d1>\d{1,2})"
                            r"|(?P<a>\d{1,2})(?P<sep>[./])(?P<b>\d{1,2})(?P=sep)(?P<y2>(?:19|20|21)\d\d))(?![\d.:/-]?\d)")),
    ("day_month", re.compile(r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+" + _YEAR + r")?\b")),
    ("month_day", re.compile(r"\b" + _MONTH + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+" + _YEAR + r")?")),
    ("month", re.compile(r"\b(?P<prep>in|during|since|of|by)?\s*" + _MONTH + r"(?:,?\s+" + _YEAR + r")?\b")),
    ("year", re.compile(r"\b(?P<prep>in|during|since)\s+" + _YEAR + r"\b")),
    ("word", re.compile(r"\b(?P<w>today|yesterday|tonight|this morning|last night|recently|lately)\b")),
]


# a statement of when: a day or period said outright or relative to the time of speaking
_WHEN_WORDS = frozenset({"yesterday", "today", "tonight", "tomorrow", "ago", "recently", "lately", "weekend",
                         *_WEEKDAYS, *(n for n in _MONTHS if len(n) > 3)})
_RELATIVE = frozenset({"last", "next", "past", "coming", "previous", "this"})
_UNITS = frozenset({"week", "month", "year", "night", "morning", "evening", "summer", "winter", "spring", "fall",
                    "autumn"})
_WORDS = re.compile(r"[a-z0-9]+")
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


def find_windows(text: str, now: int) -> list[Window]:
    """Every time window the text names, in the order found (overlapping matches skipped)."""
    low = text.lower()
    today = _day_start(datetime.fromtimestamp(now / 1000, timezone.utc))
    taken: list[tuple[int, int]] = []
    out: list[Window] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(low):
            if any(m.start() < b and a < m.end() for a, b in taken):
                continue
            win = _window(kind, m, today, now)
            if win is None:
                continue
            taken.append((m.start(), m.end()))
            out.append(Window(_ms(win[0]) if isinstance(win[0], datetime) else win[0],
                              _ms(win[1]) if isinstance(win[1], datetime) else win[1],
                              text[m.start():m.end()].strip()))
    return out


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
