"""Merging near-duplicate memories: ``Memory.consolidate`` / ``bm consolidate`` (over a Store;
the queries are in brandmind/storage/memories.py, the projection of ``memory.merge`` in
brandmind/applying.py).

Which memories are near-duplicates
----------------------------------
Only *current* memories are considered (``retired_at IS NULL`` and not ended:
``valid_to`` empty or in the future), of one user, and only within one scope
and type: the same agent (or both global) and the same memory type.  Raw
conversation turns (``meta.kind == "turn"``, what ``bm ingest`` stores) are left
out unless ``include_turns``: two people saying "ok" are not one memory.

Two memories are near-duplicates when both hold:

1. the cosine of their stored vectors (``memories_vec``, the vectors recall
   searches) is at least ``threshold`` (default 0.92);
2. a cheap text check, so that short texts an embedder finds close but that say
   different things are not merged:

   * the same numbers (digit runs: "3pm" is not "4pm");
   * the same polarity (both or neither contain a negation: not, no, never, n't, ...);
   * every capitalised word of one (a name: Lisbon, Monday) occurs in the other,
     case-insensitively (the first word of a sentence and "I" do not count);
   * their content words (lower-cased, stop words removed, crudely stemmed: -ing,
     -ed, -es, -s, a final e) overlap with a Jaccard index of at least 0.6 ("Ann
     works at Tidewater Labs" / "Ann is employed by Tidewater Labs": 3 of 5, merged;
     "Ann likes cats" / "Ann likes dogs": 2 of 4, kept apart).

Groups are formed from the oldest memory on (``created_at``, then id): each
memory not yet in a group keeps every later one that is a near-duplicate *of it*
(no chains: A~B and B~C does not merge C into A unless A~C).

What a merge stores
-------------------
One ``memory.merge`` op per group, ``{into, ids, ts, user, provenance}`` (see
projection.py; ``provenance`` is the union of the merged memories' provenance,
carried in the op like ``memory.confirm`` does): the merged memories are retired
(``retired_at = ts``, ``superseded_by = into``, ``meta.retired_reason = "merged"``:
the same min / set-once rules as ``memory.retire``, so they never disappear and
``bm memories history`` can show them) and the kept one gains that provenance (a
set union) and one confirmation per merged memory.  ``dry_run`` reports the same
groups and stores nothing.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from .clock import now_millis
from .errors import UsageError
from .facts import get_memory
from .ops import Kind
from .recall import STOPWORDS
from .storage import memories

DEFAULT_THRESHOLD = 0.92
MIN_JACCARD = 0.6
_BLOCK = 1024  # rows of the similarity matrix computed at once
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_NUMBER = re.compile(r"\d+")
_NEGATION = re.compile(r"\b(?:not|no|never|none|nothing|nobody|nowhere|neither|nor|without|cannot)\b"
                       r"|n['’]t\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?:;]\s*$")


def check_threshold(threshold: Any) -> float:
    try:
        value = float(threshold)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(threshold, bool) or not (0.0 < value <= 1.0) or not math.isfinite(value):
        raise UsageError(f"threshold must be a cosine above 0 and at most 1, got {threshold!r}",
                         hint="e.g. --threshold 0.92 (higher merges less)")
    return value


# -- the text check ------------------------------------------------------------------
def _stem(word: str) -> str:
    """A crude suffix stripper: lives, living, lived, live -> liv; seats -> seat."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


class _Text:
    """What the text check needs of one memory, computed once."""

    __slots__ = ("words", "numbers", "negated", "names", "content")

    def __init__(self, text: str, stopwords: frozenset[str]) -> None:
        tokens = [(m.group(), m.start()) for m in _WORD.finditer(text)]
        self.words = {w.lower().replace("’", "'") for w, _ in tokens}
        self.numbers = frozenset(_NUMBER.findall(text))
        self.negated = bool(_NEGATION.search(text))
        names = set()
        for w, start in tokens:
            at_start = not text[:start].strip() or bool(_SENTENCE_END.search(text[:start]))
            if w[0].isupper() and not at_start and w != "I":
                names.add(w.lower())
        self.names = names
        content = set()
        for w in self.words:
            base = w.split("'")[0]
            if base not in stopwords and not base.isdigit() and len(base) > 1:
                content.add(_stem(base))
        self.content = content

    def compatible(self, other: "_Text") -> bool:
        if self.numbers != other.numbers or self.negated != other.negated:
            return False
        if not self.names <= other.words or not other.names <= self.words:
            return False
        union = self.content | other.content
        if not union:
            return self.words == other.words
        return len(self.content & other.content) / len(union) >= MIN_JACCARD


# -- finding groups ---------------------------------------------------------------------
def find_groups(sql: Any, *, user: str, threshold: float, include_turns: bool = False,
                now: int | None = None) -> list[dict]:
    """Near-duplicate groups among ``user``'s current memories: ``[{kept, merged, texts}]``,
    in the order of their kept (oldest) memory."""
    now = now_millis() if now is None else now
    rows = memories.current_of_user(sql, user, now)
    if not include_turns:
        rows = [r for r in rows if json.loads(r["meta"]).get("kind") != "turn"]
    if len(rows) < 2:
        return []
    wanted = {r["rowid"] for r in rows}
    vectors: dict[int, Any] = {}
    for rowid, blob in memories.user_vectors(sql, user):
        if rowid in wanted and blob is not None and len(blob) == 4 * sql.dim:
            vectors[rowid] = blob
    scopes: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if r["rowid"] in vectors:
            scopes.setdefault((r["agent"], r["type"]), []).append(r)
    groups = []
    for members in scopes.values():
        if len(members) >= 2:
            groups += _groups_in(members, vectors, sql.dim, threshold)
    groups.sort(key=lambda g: g.pop("_order"))
    return groups


def _near(members: list[dict], vectors: dict[int, Any], dim: int, threshold: float) -> dict[int, list[int]]:
    """i -> the later members j whose cosine with member i is at least ``threshold``."""
    import numpy as np

    vecs = np.frombuffer(b"".join(vectors[r["rowid"]] for r in members), np.float32)
    vecs = vecs.reshape(len(members), dim).astype(np.float64)
    norms = np.linalg.norm(vecs, axis=1)
    norms[norms == 0] = 1.0
    vecs /= norms[:, None]
    near: dict[int, list[int]] = {}
    for start in range(0, len(members), _BLOCK):
        sims = vecs[start:start + _BLOCK] @ vecs.T
        for i, j in zip(*np.nonzero(sims >= threshold - 1e-9)):
            i = int(i) + start
            if int(j) > i:  # members are in age order: j is the younger one
                near.setdefault(i, []).append(int(j))
    return near


def _groups_in(members: list[dict], vectors: dict[int, Any], dim: int, threshold: float) -> list[dict]:
    """The groups of one scope and type (members oldest first); each carries ``_order``."""
    near = _near(members, vectors, dim, threshold)
    if not near:
        return []
    texts: dict[int, _Text] = {}

    def text_of(i: int) -> _Text:
        if i not in texts:
            texts[i] = _Text(members[i]["text"], STOPWORDS)
        return texts[i]

    groups, taken = [], set()
    for i in range(len(members)):
        if i in taken or i not in near:
            continue
        merged = [j for j in near[i] if j not in taken and text_of(i).compatible(text_of(j))]
        if not merged:
            continue
        taken.add(i)
        taken.update(merged)
        groups.append({"kept": members[i]["id"], "merged": [members[j]["id"] for j in merged],
                       "texts": [members[k]["text"] for k in (i, *merged)],
                       "_order": (members[i]["created_at"], members[i]["id"])})
    return groups


def consolidate(store: Any, *, user: str | None = None, threshold: float = DEFAULT_THRESHOLD,
                dry_run: bool = False, include_turns: bool = False) -> dict:
    """See ``Memory.consolidate`` and the module docstring."""
    threshold = check_threshold(threshold)
    user_name = store.user(user)
    groups = find_groups(store.sql, user=user_name, threshold=threshold, include_turns=include_turns)
    merged = sum(len(g["merged"]) for g in groups)
    if groups and not dry_run:
        ts = now_millis()
        with store.write() as t:
            for g in groups:
                provenance: list = []
                for memory_id in g["merged"]:
                    for entry in get_memory(store.sql, memory_id)["provenance"]:
                        if entry not in provenance:
                            provenance.append(entry)
                t.append(Kind.MEMORY_MERGE, {"into": g["kept"], "ids": g["merged"], "ts": ts, "user": user_name,
                                          "provenance": provenance})
        store.catch_up()
    return {"user": user_name, "threshold": threshold, "dry_run": bool(dry_run), "groups": groups,
            "merged": merged}
