"""Ops held back: stamped too far ahead of this device's clock (brandmind/merge.py rule 0).

An op stamped more than ``sync_max_skew_ms`` ahead of local time would win every LWW
register and drag this device's clock along, so ``replication.receive`` sets it aside
(:class:`Held`): kept in the log's ``sync`` database (``OpLog.held_ops``), not applied, not
lost, and without moving the local HLC; so are the later ops of the same replica (they come
after it).  ``replication.receive_batch`` releases held ops once they are within the window
(every batch and sync round re-checks) or when the user accepts them (``bm sync accept``,
``replication.accept_held``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import clock
from .errors import SyncConflict
from .merge import same_op

if TYPE_CHECKING:  # pragma: no cover
    from .oplog import LogTxn, OpLog

ACCEPT_ALL_MS = 1 << 62  # the skew cap of an accepted op: none

# what to do when two devices turn out to share a replica id (a copied store directory)
CLASH_HINT = ('this store was copied from another device: on the copy, save what it holds with `bm export`, then start it in a fresh BM_HOME (`bm init`, `bm sync key import KEYFILE`, `bm remote add ...`, `bm sync now`) and re-add anything only the copy had')


def split_id(op_id: str) -> tuple[str, int]:
    replica, _, seq = str(op_id).rpartition(":")
    return replica, int(seq)


class Held:
    """The held ops as one receive transaction sees them.  An op is set aside when it is
    stamped too far ahead, or when an earlier op of its replica is held (a replica's ops
    apply in seq order; its HLC never goes back, so the later ones are as far ahead).
    Setting an op aside stores it and nothing else: no arrival, no version vector, no HLC."""

    def __init__(self, t: "LogTxn") -> None:
        self.t = t
        self.first: dict[str, int | None] = {}  # replica -> its lowest held seq (None: none)
        self.count = 0  # ops this transaction set aside (held before or not)

    def first_held(self, replica: str) -> int | None:
        if replica not in self.first:
            self.first[replica] = self.t.first_held(replica)
        return self.first[replica]

    def sets_aside(self, op: dict, replica: str, seq: int, too_far: bool) -> bool:
        first = self.first_held(replica)
        if not too_far and (first is None or seq < first):
            return False
        stored = self.t.held_op(replica, seq)
        if stored is not None:
            if not same_op(stored, op):
                raise SyncConflict(f"two devices share replica id {replica}: op {op['id']} is "
                                   f"{stored['kind']} at {stored['hlc'][0]} here (held) but {op['kind']} "
                                   f"at {op['hlc'][0]} on the remote", hint=CLASH_HINT)
        else:
            self.t.hold(replica, seq, {"id": op["id"], "hlc": list(op["hlc"]), "kind": op["kind"],
                                       "payload": op["payload"]})
        if first is None or seq < first:
            self.first[replica] = seq
        self.count += 1
        return True


def has_held(log: "OpLog") -> bool:
    return log.has_held()


def held_ops(log: "OpLog", replica: str | None = None) -> list[dict]:
    """The held ops (of one replica), by replica and seq."""
    return log.held_ops(replica)


def held_top(log: "OpLog", replica: str, after: int) -> int:
    """The highest seq S such that ops ``after + 1 .. S`` of ``replica`` are all held (or
    ``after``): a pull goes on from there instead of fetching the held ones again."""
    return log.held_top(replica, after)


def held_summary(log: "OpLog", now_ms: int | None = None) -> list[dict]:
    """Per replica: how many of its ops are held, their seqs and how far ahead of this
    device's clock they are stamped (``ahead_ms``: the furthest; ``due_in_ms``: until the
    first one is within the window is up to the caller: it knows the window)."""
    now = now_ms if now_ms is not None else clock.now_millis()
    out: dict[str, dict] = {}
    for op in log.held_ops():
        replica, seq = split_id(op["id"])
        wall = int(op["hlc"][0])
        g = out.get(replica)
        if g is None:
            g = out[replica] = {"replica": replica, "ops": 0, "first_seq": seq, "last_seq": seq,
                                "first_ahead_ms": wall - now, "ahead_ms": wall - now}
        g["ops"] += 1
        g["first_seq"], g["last_seq"] = min(g["first_seq"], seq), max(g["last_seq"], seq)
        g["first_ahead_ms"] = min(g["first_ahead_ms"], wall - now)
        g["ahead_ms"] = max(g["ahead_ms"], wall - now)
    for g in out.values():
        g["ahead"] = clock.span(g["ahead_ms"])
        g["stamped_up_to"] = clock.iso(now + g["ahead_ms"])
    return list(out.values())
