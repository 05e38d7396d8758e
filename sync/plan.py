"""The sync planner: what to push and what to pull, from two version vectors.  Pure: no I/O,
tested with a table of cases (tests/test_sync_plan.py).

``local_vv``      replica -> highest contiguous seq stored in this store's op log
``remote_heads``  replica -> highest contiguous seq stored on the remote
``own_replica``   this store's replica id
``push_others``   the remote takes ops of other replicas from us (a relay: a peer store, an
                  in-process test remote); S3 takes only each replica's own ops

Push: every replica we may push for (our own; the others only with ``push_others``) of
which we hold more than the remote: ``(after, upto)`` = (remote head, our head), i.e. ops
``after+1 .. upto``.  Pull: every replica of which the remote holds more than we do, from
our head (``after``) on, our own replica included (a store restored from the remote gets
its own ops back).  A replica can be in both only if it is ours and the two histories
diverged; the receive step then raises SyncConflict.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Plan:
    push: dict[str, tuple[int, int]] = field(default_factory=dict)
    pull: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.push and not self.pull

    def push_count(self) -> int:
        return sum(upto - after for after, upto in self.push.values())


def _clean(vv: dict[str, int] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for replica, head in (vv or {}).items():
        if not isinstance(replica, str) or not replica:
            continue
        try:
            n = int(head)
        except (TypeError, ValueError):
            continue
        if n > 0:
            out[replica] = n
    return out


def plan(local_vv: dict[str, int], remote_heads: dict[str, int], own_replica: str, *,
         push_others: bool) -> Plan:
    """See the module docstring."""
    mine, theirs = _clean(local_vv), _clean(remote_heads)
    push = {r: (theirs.get(r, 0), head) for r, head in sorted(mine.items())
            if (r == own_replica or push_others) and head > theirs.get(r, 0)}
    pull = {r: mine.get(r, 0) for r, head in sorted(theirs.items()) if head > mine.get(r, 0)}
    return Plan(push=push, pull=pull)
