"""The words of keyword search: a query's content words, which of them search, and the FTS5
query syntax for them.  Recall's BM25 runs over the recall index's postings
(storage/kwindex.py); ``bm forget --match`` and other lookups query FTS5 (``memories_fts``,
porter over unicode61) with :func:`keyword_query`.

Which words search: those found in over ``COMMON_SHARE`` of the memories are skipped (a
speaker's name prefixed to every turn weighs next to nothing in BM25; the vector signal still
sees them); of the rest, the rarest within ``MAX_POSTINGS`` postings are kept (always at least
one): a question whose words are all common costs at most that many postings.
"""
from __future__ import annotations

import re

COMMON_SHARE = 0.1           # keyword search skips words found in more than this share of memories
COMMON_MIN_DOCS = 20         # ... once the store holds at least this many
MAX_POSTINGS = 20_000        # ... and keeps its rarest words within this many postings in all
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves s t don
""".split())
_WORD = re.compile(r"\w+", re.UNICODE)


def query_words(text: str) -> list[str]:
    """The query's content words, lower-cased, deduplicated, in order (at most 32)."""
    words = [w.lower() for w in _WORD.findall(text)]
    content = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(content))[:32]


def keyword_query(text: str | list[str], op: str = "OR") -> str | None:
    """An FTS5 query joining the query's content words with ``op`` (OR: any word, AND:
    every word), each word quoted, so it is never FTS syntax."""
    words = query_words(text) if isinstance(text, str) else text
    if not words:
        return None
    return f" {op} ".join('"' + w.replace('"', '""') + '"' for w in words)


def keep_words(words: list[str], freq: dict[str, int], total: int, cap: int | None = None) -> list[str]:
    """The words that search, in query order: those in at most ``COMMON_SHARE`` of ``total``
    memories (every word below ``COMMON_MIN_DOCS``), then the rarest within ``cap`` postings
    in all (a cap never drops the rarest word; None: no cap).  ``freq``: word -> its postings."""
    if total < COMMON_MIN_DOCS:
        kept = list(words)
    else:
        kept = [w for w in words if freq.get(w, 0) <= COMMON_SHARE * total]
    return _rarest(kept, freq, cap)


def _rarest(words: list[str], freq: dict[str, int], cap: int | None) -> list[str]:
    """The rarest ``words`` within ``cap`` postings in all (at least one), in their order."""
    if cap is None:
        return words
    budget, keep = 0, set()
    for w in sorted(words, key=lambda w: (freq.get(w, 0), w)):
        if keep and budget + freq.get(w, 0) > cap:
            break
        budget += freq.get(w, 0)
        keep.add(w)
    return [w for w in words if w in keep]
