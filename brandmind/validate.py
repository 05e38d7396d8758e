"""Checks on what callers hand bm, each failing with an InvalidInput that names the fix."""
from __future__ import annotations

import math
import re
from typing import Any

from .errors import InvalidInput

MEMORY_TYPES = ("fact", "preference", "decision", "insight", "question", "concept", "episode")
NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")


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
    if not isinstance(value, str) or not NAME.match(value) or value != value.strip():
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
    return json_value(value, what="meta")


MAX_DEPTH = 64  # nesting of a JSON value bm stores (meta, provenance, ...)


def json_value(value: Any, *, what: str) -> Any:
    """Plain JSON (string keys, finite numbers) nested at most MAX_DEPTH deep: a deep value
    is refused here, never a RecursionError somewhere later (the walk stops at MAX_DEPTH)."""
    _walk(value, 1, what)
    return value


_JSON_HINT = "use strings, numbers, booleans, null, lists and objects, nested a few levels at most"


def _walk(v: Any, depth: int, what: str) -> None:
    t = type(v)
    if t is str or t is int or v is None or t is bool:
        return
    if t is dict or t is list or t is tuple or isinstance(v, (dict, list, tuple)):
        if depth > MAX_DEPTH:
            raise InvalidInput(f"{what} is nested more than {MAX_DEPTH} levels deep", hint=_JSON_HINT)
        if isinstance(v, dict):
            for k, item in v.items():
                if type(k) is not str and not isinstance(k, str):
                    raise InvalidInput(f"{what} has a key that is not a string ({k!r})", hint=_JSON_HINT)
                ti = type(item)
                if not (ti is str or ti is int or item is None or ti is bool):
                    _walk(item, depth + 1, what)
        else:
            for item in v:
                ti = type(item)
                if not (ti is str or ti is int or item is None or ti is bool):
                    _walk(item, depth + 1, what)
    elif isinstance(v, float):
        if not math.isfinite(v):
            raise InvalidInput(f"{what} holds {v!r}, which is not JSON", hint=_JSON_HINT)
    elif not isinstance(v, (str, int)):
        raise InvalidInput(f"{what} holds a {type(v).__name__}, which is not JSON", hint=_JSON_HINT)


def too_deep(where: str, hint: str) -> InvalidInput:
    """The error of a JSON text nested deeper than the parser goes (json raises RecursionError)."""
    return InvalidInput(f"{where}: JSON nested too deeply to read", hint=hint)
