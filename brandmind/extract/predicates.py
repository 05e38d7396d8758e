"""The one spelling of a predicate, shared by the extractors and the fact store."""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["normalize_predicate"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@lru_cache(maxsize=4096)
def normalize_predicate(value: str) -> str:
    """The one spelling of a predicate: "lives in", "Lives In", "lives-in", "livesIn" and
    "lives_in" are all ``lives_in`` (NFKC, camelCase split, case-folded, every run of spaces,
    hyphens and underscores one ``_``, none at the ends).  Never raises; what is left may
    still be invalid ("lives in!": see :func:`brandmind.facts.predicate_name`).  Every way a fact or edge
    enters uses it (Facts.add, ``bm facts add``, ``bm kg link``, both extractors), the projection
    applies it to every ``memory.add`` / ``kg.edge`` op (ops from older peers, imports, ``bm rebuild``),
    and reconciliation compares stored predicates through it (rows projected before it)."""
    if not isinstance(value, str):
        return value
    s = _CAMEL.sub("_", unicodedata.normalize("NFKC", value).strip())
    return re.sub(r"[\s_-]+", "_", s.casefold()).strip("_")
