"""Checks on what callers hand bm, each failing with an InvalidInput that names the fix."""
from __future__ import annotations

import re
from typing import Any

from .errors import InvalidInput

MEMORY_TYPES = ("fact", "preference", "decision", "insight", "question", "concept", "episode")
_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")


def utf8(value: str | bytes, *, what: str = "text",
         hint: str = "convert it first, e.g. `iconv -f latin1 -t utf-8`") -> str:
    """Bytes decoded as UTF-8 (strings pass through), or InvalidInput naming the bad byte."""
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what} is not valid UTF-8 (byte {exc.start})", hint=hint) from None


def text(value: Any, *, what: str = "text", limit: int | None = None) -> str:
    if isinstance(value, bytes):
        value = utf8(value, what=what)
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}",
                           hint=f"pass the {what} as a JSON string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates: undecodable bytes from argv or a pipe
        raise InvalidInput(f"{what} is not valid UTF-8 (character {exc.start})",
                           hint="convert it first, e.g. `iconv -f latin1 -t utf-8`") from None
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character", hint="strip NUL bytes from the input")
    if not value.strip():
        raise InvalidInput(f"{what} is empty", hint=f"give some non-blank {what}")
    if limit is not None and len(value) > limit:
        raise InvalidInput(
            f"{what} is {len(value):,} characters, over the memory limit of {limit:,}",
            hint="store long content as a bead (`bm beads add`), which offloads it to the blob "
                 "store, or raise `max_memory_chars` with `bm config set`")
    return value


def name(value: Any, *, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value) or value != value.strip():
        raise InvalidInput(f"invalid {what} {value!r}",
                           hint=f"a {what} is 1-128 printable characters without surrounding spaces")
    return value


def memory_type(value: Any) -> str:
    if value not in MEMORY_TYPES:
        raise InvalidInput(f"unknown memory type {value!r}", hint="use one of: " + ", ".join(MEMORY_TYPES))
    return value


def importance(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not 0.0 <= number <= 1.0:
        raise InvalidInput(f"importance must be a number from 0 to 1, got {value!r}",
                           hint="e.g. --importance 0.8")
    return number


def meta(value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"meta must be a JSON object, got {type(value).__name__}",
                           hint='e.g. "meta": {"source": "slack"}')
    return value
