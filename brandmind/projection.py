"""How ops land in the projections: ``apply_sql_side`` (SQLite) and ``apply_log_side``
(LMDB), each a dispatch on the op's rule (``ops.RULES[kind]``: the ``apply`` hooks are in
brandmind/applying.py, ``apply_log`` in brandmind/ops.py, which also lists every op kind,
its payload and its merge rule).  Replaying the log through these functions in arrival
order (each replica's ops in seq order: replication.catch_up) rebuilds a store exactly
(``bm rebuild``).  Sync delivers other replicas' ops in any interleaving, so every rule
gives the same projection for any arrival order that keeps each replica's own order
(brandmind/converge.py has the pieces; brandmind/merge.py the merge rules in one place).
An op kind this version does not know is stored and not applied.
"""
from __future__ import annotations

from typing import Callable

from . import applying  # noqa: F401  (binds the apply hooks of ops.RULES)
from .clock import hlc_key
from .opcheck import quarantine
from .ops import REFUSED, apply_log_side, rule
from .sqlstore import SQLStore

__all__ = ["apply_log_side", "apply_sql_side", "hlc_key"]

VectorFor = Callable[[str], "bytes | None"]  # None: the vector is made later (vec_pending)


def apply_sql_side(sql: SQLStore, op: dict, vector_for: VectorFor) -> None:
    """The SQLite projections of one op (its rule's ``apply``); the caller holds the write
    transaction.  An op refused when it was pulled is quarantined instead
    (brandmind/opcheck.py; the catch-up checks the ops of logs written before ops were
    checked on entry); a redacted add kills its id (``applying.forget_redacted``)."""
    p = op["payload"]
    if REFUSED in p:
        quarantine(sql, op, str(p[REFUSED]))
        return
    r = rule(op["kind"])
    if r is None or r.apply is None:
        return
    hk = hlc_key(op["hlc"])
    if p.get("redacted"):
        applying.forget_redacted(sql, op, hk, vector_for)
        return
    r.apply(sql, op, hk, vector_for)
