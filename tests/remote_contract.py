"""Contract checks every sync remote must pass, as plain functions taking a Remote.

Each takes the remote and the store whose ops are pushed (``mem``; a mirror remote
translates them from that store's state).  ``snapshot`` (optional) returns something
comparable that describes what the remote holds, so idempotence is checked on the remote's
content too, not only on its heads.  ``keeps_streams``: the remote stores op streams and
gives them back (MemoryRemote, S3); a mirror (Zep, Graphiti) holds the graph instead and
``pull`` returns [].

Used by tests/test_sync_zep.py (MemoryRemote and MirrorRemote(ZepSink)); other remotes add
themselves by calling :func:`run_contract`.
"""
from __future__ import annotations

from typing import Any, Callable

from brandmind.sync.remote import Remote, seq_of


def own_ops(mem: Any) -> list[dict]:
    return mem.log.ops_of(mem.log.replica, 0)


def check_heads_empty(remote: Remote) -> None:
    """A new remote knows no replica."""
    assert dict(remote.heads()) == {}, remote.heads()


def check_push_sets_head(remote: Remote, mem: Any) -> int:
    """Pushing a replica's ops 1..n answers n, and heads() reports n for it."""
    ops = own_ops(mem)
    assert ops, "the store needs some ops"
    replica = mem.log.replica
    head = remote.push(replica, ops)
    assert head == seq_of(ops[-1]), (head, seq_of(ops[-1]))
    assert dict(remote.heads()).get(replica) == head, remote.heads()
    return head


def check_repush_idempotent(remote: Remote, mem: Any, snapshot: Callable[[], Any] | None = None) -> None:
    """Pushing the same ops again (a retry after a lost answer) changes nothing: the same
    head, and the same remote content; so does pushing a suffix that overlaps the head."""
    ops = own_ops(mem)
    replica = mem.log.replica
    before_heads = dict(remote.heads())
    before = snapshot() if snapshot else None
    assert remote.push(replica, ops) == seq_of(ops[-1])
    assert remote.push(replica, ops[len(ops) // 2:]) == seq_of(ops[-1])
    assert dict(remote.heads()) == before_heads
    if snapshot:
        assert snapshot() == before


def check_pull_own(remote: Remote, mem: Any, *, keeps_streams: bool) -> None:
    """A remote with streams gives the pushed ops back in seq order; a mirror gives []."""
    ops = own_ops(mem)
    replica = mem.log.replica
    got = remote.pull(replica, 0)
    if keeps_streams:
        assert [o["id"] for o in got] == [o["id"] for o in ops]
        assert [o["id"] for o in remote.pull(replica, 1, 2)] == [o["id"] for o in ops[1:3]]
    else:
        assert got == []


def run_contract(remote: Remote, mem: Any, *, keeps_streams: bool, snapshot: Callable[[], Any] | None = None) -> None:
    """Every check, in order, on a fresh remote and a store with ops."""
    assert isinstance(remote, Remote)
    assert isinstance(remote.name, str) and remote.name
    check_heads_empty(remote)
    check_push_sets_head(remote, mem)
    check_repush_idempotent(remote, mem, snapshot)
    check_pull_own(remote, mem, keeps_streams=keeps_streams)
