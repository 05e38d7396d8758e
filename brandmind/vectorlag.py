"""What waits for its vector: the count recall's lag note gives (brandmind/backlog.py embeds
them).  Apart from the backlog so that `bm recall` and `bm context`, which print the note, do
not import the backlog's fact extractor (its patterns cost ~60 ms of a cold call)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .storage import memories

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store


def pending(store: "Store", user: str | None = None) -> int:
    """How many memories (of ``user``, or of all) wait for their vector."""
    if user is None:
        return memories.pending_count(store.sql)
    if not memories.has_pending(store.sql):  # the usual case: one row lookup, not a user's index walk
        return 0
    return memories.pending_where(store.sql, "m.user_id = ?", [user])


def lag_note(store: "Store", user: str | None) -> str | None:
    """What recall says while memories of the user wait for their vector (None: none wait)."""
    n = pending(store, store.user(user))
    if not n:
        return None
    return (f"note: {n} memor{'y is' if n == 1 else 'ies are'} not yet vectorised (found by keyword and "
            "recency only until the backlog embeds them: `bm queue`)")
