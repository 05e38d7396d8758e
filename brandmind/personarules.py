"""How the persona ops apply to SQLite (called from brandmind/projection.py; the merge
decisions are the pure ``merge.persona_*`` functions, the tables brandmind/storage/personas.py).

``persona.define``   {handle, industry, role, description, typical_kpis, typical_motivations,
                      quintessential_queries, keywords, source, ts, created_at?}: last writer wins
                      by HLC for every field; created_at = min over all defines
``persona.assign``   {user, handle, confidence, discovered_at, last_confirmed}: discovered_at =
                      min, last_confirmed = max, confidence = that of the latest assign by HLC
``persona.unassign`` {user, handle}: the user holds the persona iff their latest assign's HLC is
                      above their latest unassign's (LWW between the two; both kept as max)
``persona.doc``      {agent, doc, ts}: the document with the highest (version, HLC) wins

Every rule commutes, so any arrival order gives the same tables.  Assign and unassign ops
are kept (``sync_persona_ops``) so that a ``user.forget`` at H drops exactly the ops stamped
before H and folds the rest again (assignments made after the forget survive whatever the
arrival order); an assign or unassign stamped before the user's latest forget applies as
nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import merge
from .clock import hlc_key
from .ops import Kind
from .storage import converge as tombstones
from .storage import personas as store
from .validate import PERSONA_LIST_FIELDS

if TYPE_CHECKING:  # pragma: no cover
    from .sqlstore import SQLStore

KINDS = (Kind.PERSONA_DEFINE, Kind.PERSONA_ASSIGN, Kind.PERSONA_UNASSIGN, Kind.PERSONA_DOC)
HOLDING = (Kind.PERSONA_ASSIGN, Kind.PERSONA_UNASSIGN)  # the kinds that say who holds a persona


def _forgotten_at(sql: "SQLStore", user: str) -> str | None:
    """HLC key of the user's latest ``user.forget`` (their ``user:<name>`` tombstone)."""
    return tombstones.tombstone_hlc(sql, "user:" + user)


def apply(sql: "SQLStore", op: dict) -> None:
    """Apply one persona.* op as the projection does: an assign or unassign is also kept
    for a later ``user.forget``."""
    if op["kind"] in HOLDING:
        if merge.forgotten_before(hlc_key(op["hlc"]), _forgotten_at(sql, op["payload"]["user"])):
            return
        store.keep_op(sql, op, hlc_key(op["hlc"]))
    apply_op(sql, op)


def apply_op(sql: "SQLStore", op: dict) -> None:
    """Apply one persona.* op to SQLite; deterministic and commutative (module docstring)."""
    kind, p = op["kind"], op["payload"]
    hlc = hlc_key(op["hlc"])
    if kind == Kind.PERSONA_DEFINE:
        _define(sql, p, hlc, int(p.get("ts") or op["hlc"][0]))
    elif kind in HOLDING:
        if merge.forgotten_before(hlc, _forgotten_at(sql, p["user"])):
            return  # stamped before the user was forgotten (arrived late from another replica)
        row = store.assignment(sql, p["user"], p["handle"])
        if kind == Kind.PERSONA_UNASSIGN:
            row = merge.persona_unassign(row, hlc)
        else:
            row = merge.persona_assign(row, hlc, float(p["confidence"]), int(p["discovered_at"]),
                                       int(p["last_confirmed"]))
        store.put_assignment(sql, p["user"], p["handle"], row)
    elif kind == Kind.PERSONA_DOC:
        doc = p["doc"]
        if merge.persona_doc_wins(store.doc_stamp(sql, p["agent"]), int(doc["version"]), hlc):
            store.put_doc(sql, p["agent"], doc, updated_at=int(p.get("ts") or op["hlc"][0]), hlc=hlc)


def _define(sql: "SQLStore", p: dict, hlc: str, ts: int) -> None:
    created = int(p.get("created_at") or ts)
    stamp = store.stamp(sql, p["handle"])
    if stamp is not None:
        created = min(created, stamp[1])
    if merge.persona_define_wins(stamp[0] if stamp else None, hlc):
        store.put_definition(sql, p, PERSONA_LIST_FIELDS, source=p.get("source") or "user",
                             created_at=created, updated_at=ts, hlc=hlc)
    elif created != stamp[1]:
        store.set_created_at(sql, p["handle"], created)


def forget_user(sql: "SQLStore", user: str, hk: str) -> None:
    """``user.forget`` at ``hk``: the user's assignments are folded again from their ops
    stamped after it (usually none); their redacted ops replay as nothing."""
    store.drop_ops_before(sql, user, hk)
    store.delete_user(sql, user)
    for op in store.kept_ops(sql, user):
        apply_op(sql, op)
