"""A small, dependency-free parser for the date phrases people use in chat.

``find_date(text, ref_ms, tense="past")`` finds the first date phrase in ``text``
and resolves it against ``ref_ms`` (epoch milliseconds, UTC: the time of the
turn it was said in) to a :class:`DateSpan` ``[start, end)`` with a grain
(``day``, ``weekend``, ``week``, ``month``, ``year``).  Understood phrases:

* relative days: yesterday, today, tonight, this morning/afternoon/evening,
  last night, tomorrow, the day before yesterday, the day after tomorrow;
* ``last|this|next|past`` ``week|weekend|month|year`` (``this past weekend``);
* weekdays: ``last Friday``, ``this Friday``, ``next Friday``, ``on Friday``
  (``on``/``this`` take the most recent one for ``tense="past"``, the next one
  for ``"future"``);
* ``N days|weeks|months|years ago`` (N a digit, ``a``/``an``/``one``…``twelve``,
  ``a couple of``); ``in N days|weeks|…`` only for ``tense="future"``;
* absolute dates: ``2023-05-07``, ``May 7``, ``May 7th, 2023``, ``7 May 2023``,
  ``the 7th of May``, ``May 2023``, ``in May`` (the nearest May before, or for
  the future after, ``ref_ms``), ``in 2023``.

Month names must be capitalised (``may`` is a verb far more often than a
month).  Phrases that need a reference time return nothing when ``ref_ms`` is
None.  Vague phrases ("a few days ago", "recently", "last summer") are not
resolved: better no date than a wrong one.  Weeks start on Monday; all times
are UTC.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

__all__ = ["DateSpan", "MONTHS", "MONTH_NAMES", "find_date", "find_dates"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MONTHS = {
    "January": 1, "Jan": 1, "February": 2, "Feb": 2, "March": 3, "Mar": 3, "April": 4, "Apr": 4,
    "May": 5, "June": 6, "Jun": 6, "July": 7, "Jul": 7, "August": 8, "Aug": 8,
    "September": 9, "Sept": 9, "Sep": 9, "October": 10, "Oct": 10, "November": 11, "Nov": 11,
    "December": 12, "Dec": 12,
}
MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December"]
_WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4,
             "saturday": 5, "sunday": 6}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
            "a couple of": 2, "a couple": 2, "couple of": 2}


@dataclass(frozen=True)
class DateSpan:
    """``[start, end)`` in epoch ms (UTC) and how precise it is."""

    start: int
    end: int
    grain: str  # day | weekend | week | month | year

    def describe(self) -> str:
        """An absolute English phrase: "on 5 May 2024", "in May 2024", "in 2024"..."""
        d = _to_date(self.start)
        if self.grain == "day":
            return f"on {d.day} {MONTH_NAMES[d.month - 1]} {d.year}"
        if self.grain == "weekend":
            return f"on the weekend of {d.day} {MONTH_NAMES[d.month - 1]} {d.year}"
        if self.grain == "week":
            return f"in the week of {d.day} {MONTH_NAMES[d.month - 1]} {d.year}"
        if self.grain == "month":
            return f"in {MONTH_NAMES[d.month - 1]} {d.year}"
        return f"in {d.year}"


def _ms(d: date) -> int:
    return (datetime(d.year, d.month, d.day, tzinfo=timezone.utc) - _EPOCH) // timedelta(milliseconds=1)


def _to_date(ms: int) -> date:
    return (_EPOCH + timedelta(milliseconds=int(ms))).date()


def _day(d: date) -> DateSpan:
    return DateSpan(_ms(d), _ms(d + timedelta(days=1)), "day")


def _week(d: date) -> DateSpan:
    monday = d - timedelta(days=d.weekday())
    return DateSpan(_ms(monday), _ms(monday + timedelta(days=7)), "week")


def _weekend(d: date) -> DateSpan:
    saturday = d - timedelta(days=d.weekday()) + timedelta(days=5)
    return DateSpan(_ms(saturday), _ms(saturday + timedelta(days=2)), "weekend")


def _month(year: int, month: int) -> DateSpan | None:
    if not (1 <= year <= 9999 and 1 <= month <= 12):
        return None
    nxt = date(year + (month == 12), month % 12 + 1, 1) if year < 9999 or month < 12 else date(9999, 12, 31)
    return DateSpan(_ms(date(year, month, 1)), _ms(nxt), "month")


def _year(year: int) -> DateSpan | None:
    if not 1 <= year < 9999:
        return None
    return DateSpan(_ms(date(year, 1, 1)), _ms(date(year + 1, 1, 1)), "year")


def _add_months(d: date, n: int) -> tuple[int, int]:
    index = d.year * 12 + (d.month - 1) + n
    return index // 12, index % 12 + 1


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


_MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
_NUM_RE = r"\d{1,3}|a couple of|a couple|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_ORD = r"(?:st|nd|rd|th)?"
_WD = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"

# (compiled pattern, handler name); case-insensitive except the month names
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), "iso"),
    (re.compile(r"\bthe day before yesterday\b", re.I), "day_m2"),
    (re.compile(r"\bthe day after tomorrow\b", re.I), "day_p2"),
    (re.compile(r"\b(?:yesterday|last night)\b", re.I), "day_m1"),
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I), "day_0"),
    (re.compile(r"\btomorrow\b", re.I), "day_p1"),
    (re.compile(rf"\b(?P<n>{_NUM_RE})\s+(?P<unit>day|week|month|year)s?\s+ago\b", re.I), "ago"),
    (re.compile(rf"\bin\s+(?P<n>{_NUM_RE})\s+(?P<unit>day|week|month|year)s?(?:'|’)?(?:\s+time)?\b", re.I), "in_n"),
    (re.compile(r"\b(?P<rel>last|this past|past|this|next)\s+(?P<unit>weekend|week|month|year)\b", re.I), "rel_unit"),
    (re.compile(rf"\b(?P<rel>last|this past|this|next|on)\s+(?P<wd>{_WD})\b", re.I), "weekday"),
    # 7 May 2023 / the 7th of May / 7th May
    (re.compile(rf"\b(?:the\s+)?(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<m>{_MONTH_RE})\b\.?(?:,?\s+(?P<y>\d{{4}})\b)?"),
     "dmy"),
    # May 7 / May 7th, 2023 (not "May 2023": the day is at most two digits not followed by a digit)
    (re.compile(rf"\b(?P<m>{_MONTH_RE})\.?\s+(?:the\s+)?(?P<d>\d{{1,2}}){_ORD}\b(?!\d)(?:,?\s+(?P<y>\d{{4}})\b)?"),
     "mdy"),
    (re.compile(rf"\b(?P<m>{_MONTH_RE})\.?,?\s+(?:of\s+)?(?P<y>\d{{4}})\b"), "my"),
    (re.compile(rf"\b(?:[Ii]n|[Ss]ince|[Ee]arly|[Ll]ate|[Dd]uring|[Tt]his|[Ll]ast|[Nn]ext)\s+(?:early\s+|late\s+|mid-?)?(?P<m>{_MONTH_RE})\b(?!\s*\d)"),
     "in_month"),
    (re.compile(r"\b(?:[Ii]n|[Ss]ince|[Dd]uring|[Bb]ack in)\s+(?P<y>(?:19|20)\d{2})\b"), "year"),
]


def _number(word: str) -> int | None:
    word = word.lower()
    if word.isdigit():
        return int(word)
    return _NUMBERS.get(word)


def _resolve(kind: str, m: re.Match[str], ref: date | None, tense: str) -> DateSpan | None:
    """The span the phrase ``m`` (of pattern ``kind``) names, said on ``ref`` (None: unknown)."""
    future = tense == "future"
    if kind in _ABSOLUTE:
        return _ABSOLUTE[kind](kind, m, ref, future)
    if ref is None:
        return None
    return _RELATIVE[kind](kind, m, ref, future)


def _iso(kind: str, m: re.Match[str], ref: date | None, future: bool) -> DateSpan | None:
    d = _safe_date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    return _day(d) if d else None


def _calendar(kind: str, m: re.Match[str], ref: date | None, future: bool) -> DateSpan | None:
    """ "7 May 2023", "May 7th", "May 2023"; a day without a year is the nearest one in the tense."""
    month = MONTHS[m.group("m")]
    y = m.group("y")
    if kind == "my":
        return _month(int(y), month)
    day = int(m.group("d"))
    if y:
        d = _safe_date(int(y), month, day)
        return _day(d) if d else None
    if ref is None:
        return None
    d = _safe_date(ref.year, month, day)
    if d is None:
        return None
    if not future and d > ref + timedelta(days=1):  # "on May 7" said in March: last year's
        d = _safe_date(ref.year - 1, month, day)
    elif future and d < ref:
        d = _safe_date(ref.year + 1, month, day)
    return _day(d) if d else None


def _in_year(kind: str, m: re.Match[str], ref: date | None, future: bool) -> DateSpan | None:
    return _year(int(m.group("y")))


def _day_offset(kind: str, m: re.Match[str], ref: date, future: bool) -> DateSpan | None:
    offset = {"day_m2": -2, "day_m1": -1, "day_0": 0, "day_p1": 1, "day_p2": 2}[kind]
    return _day(ref + timedelta(days=offset))


def _count(kind: str, m: re.Match[str], ref: date, future: bool) -> DateSpan | None:
    """ "two weeks ago" (``ago``), "in two weeks" (``in_n``, only about the future)."""
    if kind == "in_n" and not future:  # "I did it in two weeks" is a duration
        return None
    n = _number(m.group("n"))
    if n is None or n > 500:
        return None
    n = n if kind == "in_n" else -n
    unit = m.group("unit").lower()
    if unit == "day":
        return _day(ref + timedelta(days=n))
    if unit == "week":
        return _week(ref + timedelta(weeks=n))
    if unit == "month":
        return _month(*_add_months(ref, n))
    return _year(ref.year + n)


def _rel_unit(kind: str, m: re.Match[str], ref: date, future: bool) -> DateSpan | None:
    """ "last week", "this month", "next year", "this past weekend"."""
    rel = m.group("rel").lower()
    step = {"last": -1, "this past": -1, "past": -1, "this": 0, "next": 1}[rel]
    unit = m.group("unit").lower()
    if unit == "weekend":
        return _rel_weekend(ref, step)
    if unit == "week":
        return _week(ref + timedelta(weeks=step))
    if unit == "month":
        return _month(*_add_months(ref, step))
    return _year(ref.year + step)


def _rel_weekend(ref: date, step: int) -> DateSpan:
    if step == 0:
        return _weekend(ref)
    # "last weekend" said on a Sunday is the one just gone; said on a Monday too
    if step < 0:
        d = ref - timedelta(days=ref.weekday() + 2) if ref.weekday() < 5 else ref - timedelta(days=7)
        return _weekend(d)
    # "next weekend" said on a weekday is the coming one; said on a weekend, the one after
    return _weekend(ref if ref.weekday() < 5 else ref + timedelta(days=7))


def _weekday(kind: str, m: re.Match[str], ref: date, future: bool) -> DateSpan | None:
    rel = m.group("rel").lower()
    wd = _WEEKDAYS[m.group("wd").lower()]
    back = (ref.weekday() - wd) % 7  # days since the most recent such weekday (0 = today)
    fwd = (wd - ref.weekday()) % 7
    if rel in ("last", "this past"):
        d = ref - timedelta(days=back or 7)
    elif rel == "next":
        d = ref + timedelta(days=fwd or 7)
    elif future:  # "on Friday", "this Friday" about the future
        d = ref + timedelta(days=fwd)
    else:
        d = ref - timedelta(days=back)
    return _day(d)


def _in_month(kind: str, m: re.Match[str], ref: date, future: bool) -> DateSpan | None:
    month = MONTHS[m.group("m")]
    lead = m.group(0).split()[0].lower()
    year = ref.year
    if lead == "last":
        year = ref.year - (month >= ref.month)
    elif lead == "next":
        year = ref.year + (month <= ref.month)
    elif lead == "this":
        year = ref.year
    elif future:
        year = ref.year + (month < ref.month)
    else:
        year = ref.year - (month > ref.month)
    return _month(year, month)


# pattern kind -> resolver: the absolute ones need no reference day, the relative ones do
_ABSOLUTE = {"iso": _iso, "dmy": _calendar, "mdy": _calendar, "my": _calendar, "year": _in_year}
_RELATIVE = {"day_m2": _day_offset, "day_m1": _day_offset, "day_0": _day_offset, "day_p1": _day_offset,
             "day_p2": _day_offset, "ago": _count, "in_n": _count, "rel_unit": _rel_unit, "weekday": _weekday,
             "in_month": _in_month}


def find_dates(text: str, ref_ms: int | None, *, tense: str = "past") -> list[tuple[DateSpan, int, int]]:
    """Every resolvable date phrase in ``text``: ``(span, start_char, end_char)``, in order.
    Overlapping phrases keep the earliest pattern that matched (more specific first)."""
    ref = _to_date(ref_ms) if ref_ms is not None else None
    found: list[tuple[DateSpan, int, int]] = []
    taken: list[tuple[int, int]] = []
    for pattern, kind in _PATTERNS:
        for m in pattern.finditer(text):
            a, b = m.span()
            if any(a < y and x < b for x, y in taken):
                continue
            span = _resolve(kind, m, ref, tense)
            if span is not None:
                found.append((span, a, b))
                taken.append((a, b))
    found.sort(key=lambda f: f[1])
    return found


def find_date(text: str, ref_ms: int | None, *, tense: str = "past") -> tuple[DateSpan, int, int] | None:
    """The first resolvable date phrase in ``text`` (see :func:`find_dates`), or None."""
    found = find_dates(text, ref_ms, tense=tense)
    return found[0] if found else None
