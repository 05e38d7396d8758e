"""How each op kind lands in the projections.  Replaying the log through these
functions in arrival order (each replica's ops in seq order: replication.catch_up)
rebuilds a store exactly (``bm rebuild``).  Sync delivers other replicas' ops in any
interleaving, so every rule below gives the same projection for any arrival order that
keeps each replica's own order (brandmind/converge.py has the pieces; sync/rules.py the
merge rules in one place).

Op kinds and their payloads:

``bead.add``      {bead}: one bead (see beads.py); LMDB side only
``memory.add``    {id, text, type, user, agent, importance, ts, valid_from, valid_to,
                   source, provenance, meta, subject?, predicate?, object?, recorded_at?};
                   ignored when the id is tombstoned; stamped before its user's latest
                   forget, it kills the id (remove wins).  Ops aimed at it that came
                   first (retire, confirm, merge) are replayed now.  recorded_at (system time) is the op's HLC wall ms unless the
                   payload carries one (an import keeps the original)
``memory.retire`` {id, user, retired_at, valid_to|null, by|null, reason}: the fact stopped
                   being believed (brandmind/facts.py).  Merge: retired_at = min of all
                   retires (the reason, kept in meta.retired_reason, goes with the earliest;
                   ties: the smaller reason); valid_to = min(valid_to, given) when given;
                   superseded_by = min of the non-null ``by`` (ids sort by time: the first
                   replacement).  All min/set-once, so retires commute.  A memory not
                   here yet: waits in ``sync_pending``; a dead (forgotten) one: dropped
``memory.confirm`` {id, user, ts, provenance, count?}: a duplicate of the fact was stated
                   again (count: how many times, default 1; an import restores the total).
                   Merge: confirmations += count (ops apply once), provenance gets
                   the entries it does not hold yet (a set union, added entries ordered
                   by the HLC of the op that first brought them), updated_at =
                   max(updated_at, ts).  Not here yet: waits; dead: dropped
``memory.merge``  {into, ids, ts, user, provenance}: near-duplicates merged into their
                   oldest member (brandmind/consolidate.py, ``bm consolidate``).  Each of
                   ``ids`` (other than ``into``) is retired by the memory.retire rule
                   {retired_at: ts, by: into, reason: "merged"} (min / set-once: commutes
                   with other retires; an absent id is skipped); ``into``, when present,
                   gets the payload's provenance (the merged memories', a set union in
                   arrival order), confirmations += len(ids) (ops apply once) and
                   updated_at = max(updated_at, ts).  It never reads the merged rows, so
                   forgetting one later changes nothing on replay.  No text in the payload
``memory.forget`` {id}: remove wins; the id is tombstoned, so a late add cannot resurrect it
``bead.forget``   {id}: a turn forgotten (``bm beads rm``, or with a memory made from it): LMDB
                   only (brandmind/replication.py forget_bead_in_log): the bead goes, its add
                   is redacted, a late add is stored redacted (remove wins)
``user.forget``   {user}: every memory, bead and graph node of the user stamped before it
                   goes (whenever it arrives), and their persona assignments; the user's
                   tombstone keeps the latest forget's HLC
``kg.node``       {id, user, type, name, labels, meta, ts}: stamped before its user's latest
                   forget (or redacted), the node id is dead with its edges and mentions
``kg.edge``       {id, src, dst, predicate, weight, evidence, meta, ts, valid_from?, valid_to?,
                   user?, recorded_at?}: src/dst are node ids (``n_``) or memory ids (``m_``: a
                   typed link between notes, weight = strength); recorded_at = the op's HLC
                   wall ms unless the payload carries one (an import keeps the original).
                   Insert-once by id; skipped when an end (memory or node) or its only
                   evidence is dead (remove wins); retires that came first are replayed
``kg.edge.retire`` {id, retired_at, valid_to|null}: retired_at = min, valid_to = min when
                   given (commutes); an edge not here yet: waits in ``sync_pending``
``kg.mention``    {node, memory}: a node is mentioned by (linked to) a memory; skipped when
                   the memory or the node is dead (a merged node's go to the node it became)
``kg.node.remove`` {id, user, ts}: ``bm kg rm``, or a node only forgotten facts named: the node,
                   its edges and mentions go; the id is tombstoned (remove wins); in the log
                   its add and those of its edges and mentions are redacted (replication.py).
                   ``kg.node.merge`` {id, into, user, ts}: ``bm kg merge``: the node's edges
                   and mentions move to ``into`` and it goes; later
                   edges and mentions of it follow (brandmind/graph.py)
``block.define``  {id, scope, user, agent, persona, label, description, limit, read_only,
                   explicit}: a core memory block (brandmind/blocks.py); id = hash of scope,
                   owner and label, so replicas defining the same block converge.  Merge: per
                   field of ``explicit``, LWW by HLC; fields nobody set keep the label's default
``block.update``  {id, scope, origin, seq, update, deps, user, agent}: one write to a block as
                   a base64 pycrdt update.  Merge: CRDT text, applied per origin strictly in
                   ``seq`` order and only once the block's state vector covers ``deps`` (the
                   writer's state vector); others wait in ``block_updates`` until the gap
                   fills (pycrdt 0.14.13 diverges otherwise).  Over-limit merge results are
                   kept and flagged ``over_limit`` (never truncated).  Both kinds are ignored
                   for a user/agent block whose owner was forgotten at a later HLC;
                   ``user.forget`` drops the user's own blocks and nulls their name on their
                   earlier persona-block updates (``redacted`` in blocks.py)
``skill.add``     {name, description, input_schema, examples, tags, version, body, source,
                   meta, ts}: the whole skill (brandmind/skills.py).  Merge: the visible skill
                   of a name is, among its adds stamped after its latest remove, the one with
                   the highest version, ties broken by the later HLC (a max over a total
                   order: commutes; dominated adds are dropped, order-independently)
``skill.remove``  {name, ts}: hides every add of the name stamped before it (latest remove
                   HLC = max); a later add revives the skill
``persona.define`` {handle, industry, role, description, typical_kpis, typical_motivations,
                   quintessential_queries, keywords, source, ts, created_at?}: a persona
                   (brandmind/personas.py).  Merge: LWW by HLC for the definition;
                   created_at = min over all defines
``persona.assign`` {user, handle, confidence, discovered_at, last_confirmed}: the user holds
                   the persona.  Merge per (user, handle): discovered_at = min, last_confirmed =
                   max, confidence = that of the assign with the highest HLC; skipped when the
                   user was forgotten at a later HLC
``persona.unassign`` {user, handle}: LWW against assign: the user holds the persona iff the
                   max assign HLC > the max unassign HLC (both kept as max: commutes)
``persona.doc``   {agent, doc: {id, name, version, description, goals, norms, traits, skills},
                   ts}: the agent's persona document; the highest (version, HLC) wins (writers
                   must raise the version; equal versions from two replicas: LWW by HLC)
(workspace files, brandmind/workspace.py, are indexed as ``memory.add`` ops with meta
 kind "file" and dropped with ``memory.forget``; no op kind of their own)

``memory.add`` payloads of forgotten memories are redacted in the log to
``{"id": ..., "redacted": true}``, which applies as a kill of the id; so are the
``memory.add``, ``bead.add`` and ``kg.node`` payloads of a forgotten user
(those stamped before the ``user.forget``), and their ``memory.retire``,
``memory.confirm``, ``memory.merge`` and ``kg.edge`` ops, and their ``persona.assign`` /
``persona.unassign`` ops (to ``{"redacted": true}``) (memory.py ``_owned_by``).  Forgetting a
memory also removes its mentions, its typed links and the graph edges whose only
evidence it is.
"""
from __future__ import annotations

import json
from typing import Callable

from . import blockrules, converge
from .clock import hlc_key  # noqa: F401 (re-exported: callers import it from here)
from .opcheck import REFUSED, quarantine
from .oplog import LogTxn
from .sqlstore import SQLStore

VectorFor = Callable[[str], bytes]


def apply_log_side(txn: LogTxn, op: dict, hk: str | None = None) -> None:
    """The LMDB projections of one op (beads and their dedup keys).  Order-free: a
    ``user.forget`` at H removes the user's beads stamped before H (brandmind/replication.py
    keeps each bead's op HLC), and a message key maps to the smallest bead id holding it.
    ``hk``: the op's :func:`hlc_key`, when the caller has it."""
    kind, p = op["kind"], op["payload"]
    if p.get("redacted") or REFUSED in p:
        return
    if kind == "bead.add":
        bead = p["bead"]
        txn.put_bead(bead)
        txn.note_bead_hlc(bead["id"], hk or hlc_key(op["hlc"]), op["id"])
        if bead.get("key"):
            known = txn.bead_for_key(bead["key"])
            if known is None or bead["id"] < known or txn.get_bead(known) is None:
                txn.set_bead_key(bead["key"], bead["id"])
    elif kind == "user.forget":
        hk = hk or hlc_key(op["hlc"])
        for bead_id in txn.user_bead_ids(p["user"]):
            bead = txn.get_bead(bead_id)
            known = txn.bead_hlc(bead_id)
            if bead and (known is None or known < hk):
                txn.delete_bead(bead)


# kinds whose only projection is in LMDB (apply_log_side)
_LOG_ONLY = frozenset({"bead.add", "bead.forget"})


def apply_sql_side(sql: SQLStore, op: dict, vector_for: VectorFor) -> None:
    """The SQLite projections of one op; the caller holds the write transaction.  An op
    refused when it was pulled is quarantined instead (brandmind/opcheck.py; the catch-up
    checks the ops of logs written before ops were checked on entry)."""
    kind, p = op["kind"], op["payload"]
    if REFUSED in p:
        quarantine(sql, op, str(p[REFUSED]))
        return
    if kind in _LOG_ONLY:
        return
    if p.get("redacted"):
        # a redacted add is a forgotten one: the id is dead (remove wins; brandmind/converge.py)
        if kind == "memory.add" and p.get("id"):
            converge.kill_memory(sql, p["id"])
        elif kind == "kg.node" and p.get("id"):
            converge.kill_node(sql, p["id"])
        return
    c = sql.conn
    hk = hlc_key(op["hlc"])
    if kind == "memory.add":
        if converge.dead(sql, p["id"]):
            return
        gone = converge.forgotten_at(sql, p["user"])
        if gone is not None and hk < gone:  # stamped before its user was forgotten
            converge.kill_memory(sql, p["id"])
            return
        row = c.execute("SELECT hlc FROM memories WHERE id=?", (p["id"],)).fetchone()
        if row is not None:  # another add of the id (an import on two replicas): keep the earliest HLC
            if row[0] is not None and hk < row[0]:
                c.execute("UPDATE memories SET hlc=? WHERE id=?", (hk, p["id"]))
            return
        if p.get("predicate") is not None:  # one spelling ("lives in" = lives_in), also for old ops
            from .facts import normalize_predicate

            p = {**p, "predicate": normalize_predicate(p["predicate"])}
        sql.insert_memory({**p, "op_id": op["id"], "hlc": hk,
                           "recorded_at": p.get("recorded_at") or int(op["hlc"][0])}, vector_for(p["text"]))
        converge.replay(sql, p["id"], _apply_to_memory)
    elif kind == "memory.retire":
        converge.aim(sql, op, p["id"], "retire", p, _apply_to_memory)
    elif kind == "memory.confirm":
        converge.aim(sql, op, p["id"], "confirm", p, _apply_to_memory)
    elif kind == "memory.merge":
        from .consolidate import merged_ids

        ids = merged_ids(p)
        for memory_id in ids:
            converge.aim(sql, op, memory_id, "retire",
                         {"id": memory_id, "retired_at": int(p["ts"]), "by": p["into"], "reason": "merged"},
                         _apply_to_memory)
        if ids:
            converge.aim(sql, op, p["into"], "merge_into",
                         {"id": p["into"], "count": len(ids), "ts": int(p["ts"]),
                          "provenance": p.get("provenance") or []},
                         _apply_to_memory)
    elif kind == "memory.forget":
        converge.kill_memory(sql, p["id"], hk)
    elif kind == "user.forget":
        user = p["user"]
        converge.tombstone(sql, "user:" + user, hk)
        for memory_id in sql.memory_ids("user_id=? AND (hlc IS NULL OR hlc < ?)", (user, hk)):
            converge.kill_memory(sql, memory_id)
        c.execute("DELETE FROM sync_pending WHERE user_id=? AND hlc < ?", (user, hk))
        nodes = [r[0] for r in c.execute("SELECT id FROM kg_nodes WHERE user_id=? AND (hlc IS NULL OR hlc < ?)",
                                         (user, hk))]
        for node in nodes:
            converge.kill_node(sql, node)
        blockrules.forget_user(sql, user, hk)
        converge.forget_persona_user(sql, user, hk)
    elif kind in ("block.define", "block.update"):
        blockrules.apply_op(sql, op, hk, forgotten_at=converge.forgotten_at)
    elif kind == "kg.node":
        if converge.dead(sql, p["id"]):
            return
        gone = converge.forgotten_at(sql, p["user"])
        if gone is not None and hk < gone:
            converge.kill_node(sql, p["id"])
            return
        row = c.execute("SELECT hlc FROM kg_nodes WHERE id=?", (p["id"],)).fetchone()
        if row is not None:
            if row[0] is not None and hk < row[0]:
                c.execute("UPDATE kg_nodes SET hlc=? WHERE id=?", (hk, p["id"]))
            return
        c.execute("INSERT INTO kg_nodes(id, user_id, type, name, labels, meta, created_at, hlc) "
                  "VALUES(?,?,?,?,?,?,?,?)",
                  (p["id"], p["user"], p["type"], p["name"], json.dumps(p.get("labels", [])),
                   json.dumps(p.get("meta", {}), sort_keys=True), p["ts"], hk))
    elif kind == "kg.edge":
        if converge.edge_is_dead(sql, p):
            from .graph import redirect_edge  # an end merged into another node: the edge follows

            p = redirect_edge(sql, p)
            if p is None:
                return
        from .facts import normalize_predicate

        c.execute("INSERT OR IGNORE INTO kg_edges(id, src, dst, predicate, weight, evidence, meta, "
                  "created_at, valid_from, valid_to, recorded_at) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                  (p["id"], p["src"], p["dst"], normalize_predicate(p["predicate"]), float(p.get("weight", 1.0)),
                   json.dumps(p.get("evidence", [])), json.dumps(p.get("meta", {}), sort_keys=True),
                   p["ts"], p.get("valid_from"), p.get("valid_to"), p.get("recorded_at") or int(op["hlc"][0])))
        converge.replay(sql, p["id"], _apply_to_edge)
    elif kind == "kg.edge.retire":
        converge.aim(sql, op, p["id"], "edge_retire", p, _apply_to_edge, table="kg_edges")
    elif kind == "kg.mention":
        node = p["node"]
        if converge.dead(sql, node):
            from .graph import redirect_node

            node = redirect_node(sql, node)
        if node is None or converge.dead(sql, p["memory"]):
            return
        c.execute("INSERT OR IGNORE INTO kg_mentions VALUES(?,?)", (node, p["memory"]))
    elif kind in ("kg.node.remove", "kg.node.merge"):  # brandmind/graph.py (bm kg rm / merge)
        from . import graph

        graph.apply_remove(sql, p) if kind == "kg.node.remove" else graph.apply_merge(sql, p, hk)
    elif kind in ("skill.add", "skill.remove"):
        from . import skills

        skills.apply_op(sql, op)
    elif kind in ("persona.define", "persona.assign", "persona.unassign", "persona.doc"):
        from . import personas

        if kind in ("persona.assign", "persona.unassign"):
            gone = converge.forgotten_at(sql, p["user"])
            if gone is not None and hk < gone:
                return  # stamped before the user was forgotten
            converge.note_persona_op(sql, op)
        personas.apply_op(sql, op)


def _apply_to_memory(sql: SQLStore, part: str, p: dict, hk: str) -> None:
    """One part of an op aimed at a memory that is there (brandmind/converge.py replays
    parts that arrived before it)."""
    if part == "retire":
        _retire_memory(sql, p)
    elif part == "confirm":
        _confirm_memory(sql, p, hk)
    elif part == "merge_into":  # memory.merge: the kept memory gains the merged ones' provenance
        _confirm_memory(sql, {**p, "count": int(p["count"])}, hk)


def _apply_to_edge(sql: SQLStore, part: str, p: dict, hk: str) -> None:
    sql.conn.execute("UPDATE kg_edges SET retired_at = min(coalesce(retired_at, :r), :r), "
                     "valid_to = CASE WHEN :v IS NULL THEN valid_to ELSE min(coalesce(valid_to, :v), :v) END "
                     "WHERE id = :id", {"r": int(p["retired_at"]), "v": p.get("valid_to"), "id": p["id"]})



def _retire_memory(sql: SQLStore, p: dict) -> None:
    """``memory.retire``: min/set-once merges, so retires from several replicas commute."""
    c = sql.conn
    row = c.execute("SELECT retired_at, valid_to, superseded_by, meta FROM memories WHERE id=?",
                    (p["id"],)).fetchone()
    if row is None:
        return
    retired_at, valid_to, superseded_by, meta_json = row
    meta = json.loads(meta_json)
    new_at, reason = int(p["retired_at"]), p.get("reason") or ""
    if retired_at is None or (new_at, reason) < (retired_at, meta.get("retired_reason", "")):
        retired_at = new_at
        if reason:
            meta["retired_reason"] = reason
        else:
            meta.pop("retired_reason", None)
    if p.get("valid_to") is not None and (valid_to is None or int(p["valid_to"]) < valid_to):
        valid_to = int(p["valid_to"])
    if p.get("by") and (superseded_by is None or p["by"] < superseded_by):
        superseded_by = p["by"]
    c.execute("UPDATE memories SET retired_at=?, valid_to=?, superseded_by=?, meta=? WHERE id=?",
              (retired_at, valid_to, superseded_by, json.dumps(meta, ensure_ascii=False, sort_keys=True),
               p["id"]))


def _confirm_memory(sql: SQLStore, p: dict, hk: str) -> None:
    """``memory.confirm`` (and the kept memory of a ``memory.merge``): a counter, a set union
    of provenance entries (ordered by the HLC of the op that brought them: converge.py),
    a max of times."""
    c = sql.conn
    c.execute("UPDATE memories SET confirmations = confirmations + ?, updated_at = max(updated_at, ?) WHERE id=?",
              (int(p.get("count", 1)), int(p["ts"]), p["id"]))
    converge.add_provenance(sql, p["id"], list(p.get("provenance") or []), hk)
