"""A writer's private terms, gathered from a store for the PII guard of shared blocks.

``gather_private_terms(store, user)`` reads what ``user`` keeps private -- their ``human``
block and their other blocks in the user and agent scopes (never a shared persona block),
their newest memories (``pii.MEMORY_LIMIT``), their graph nodes and the objects of their
facts -- and hands it to the pure :func:`brandmind.pii.private_terms_from`.  The result is
cached per store until the next op is applied, so a burst of writes pays for it once.
"""
from __future__ import annotations

import weakref
from typing import Any

from . import pii
from .storage import privacy as q

__all__ = ["gather_private_terms"]

# store.sql -> ((user, applied), Terms): both a Memory and its Store share one SQLStore
_CACHE: "weakref.WeakKeyDictionary[Any, tuple[tuple[str, int], pii.Terms]]" = weakref.WeakKeyDictionary()


def gather_private_terms(store: Any, user: str) -> pii.Terms:
    """The names and places of ``user``'s private content (see ``brandmind.pii``); a
    :class:`~brandmind.pii.Terms` set (``.kinds``: term -> "name" | "place" | "private")."""
    sql = store.sql
    stamp = (user, sql.applied())
    cached = _CACHE.get(sql)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    human: str | None = None
    blocks: list[str] = []
    for scope, label, value in q.private_blocks(sql, user):
        if scope == "user" and label == "human":
            human = value
        blocks.append(value)
    blocks = [value for value in blocks if value != human]
    memories = q.newest_memories(sql, user, pii.MEMORY_LIMIT)
    nodes = q.node_names(sql, user)
    objects = q.fact_objects(sql, user)
    terms = pii.private_terms_from(user, human=human, blocks=blocks, memories=memories, nodes=nodes,
                                   objects=objects)
    _CACHE[sql] = (stamp, terms)
    return terms
