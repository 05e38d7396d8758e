"""Regular expressions compiled when first used, not when their module is imported.

A cold `bm` process pays at import for every pattern its modules compile: the PII guard's
~40 (brandmind/pii.py, piiterms.py) cost a cold `bm context` ~30 ms, and only a write to a
shared block runs them.  ``lazy(pattern, flags)`` takes ``re.compile``'s arguments and
compiles on the first attribute asked for (``search``, ``finditer``, ``sub``, ...), once.
"""
from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern | None = None

    def __getattr__(self, name: str) -> Any:  # only for what the slots do not hold
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(*self._args)
        return getattr(compiled, name)


def lazy(pattern: str, flags: int = 0) -> Any:
    """A pattern used like ``re.compile(pattern, flags)``'s, compiled on first use."""
    return LazyPattern(pattern, flags)
