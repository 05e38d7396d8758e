"""Export and import a store as JSONL: the ``export`` and ``import_`` hooks of the op rules.

One record a line, ``{"kind": ..., ...}``, in a stable order (beads, memories,
graph nodes, edges, mentions, skills, workspace files, blocks, personas; each sorted by
id), with keys sorted, so that export -> import into an empty store -> export gives the
same lines.  Each op kind's rule (brandmind/ops.py) exports the records it owns and
imports the records of its ``Rule.record`` as the ops that restore them (a ``memory``
record is a ``memory.add``, with a ``memory.retire`` and a ``memory.confirm`` when it was
retired or confirmed).  Workspace files are no op kind: they are written as files.
Vectors are not exported: the importing store embeds with its own model (its vector cache
makes a re-import cheap).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from . import beads, validate, workspace
from .blocks import Blocks
from .clock import parse_time
from .errors import InvalidInput
from .graph import edge_out, link_out, node_out
from .opcheck import failure
from .ops import RULES, Kind, apply_log_side, provide
from .personas import Personas
from .skills import Skills
from .storage import exchange as q
from .storage.memories import memory_out

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

FORMAT = "bm-export/1"
_MEMORY_FIELDS = ("id", "text", "type", "user", "agent", "importance", "ts", "updated",
                  "valid_from", "valid_to", "source", "provenance", "meta")
# bi-temporal facts (brandmind/facts.py): exported when set, so a restored store keeps
# what was retired, by what, and when it was learned
_FACT_FIELDS = ("recorded_at", "retired_at", "subject", "predicate", "object", "superseded_by",
                "confirmations", "expires_at", "pinned")  # (the last two: brandmind/expiry.py)
_EDGE_TIMES = ("valid_from", "valid_to", "recorded_at", "retired_at")
FILE = "file"  # the record of a workspace file (no op kind of its own)
_RECORDS = {r.record: r for r in RULES.values() if r.record}  # record kind -> the rule importing it
_HINT = "is this a `bm export` file? nothing from this batch was imported"
Ops = list[tuple[Kind, dict]]


def _line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _store(src: Any) -> "Store":
    """The Store of ``src`` (a Store, or a Memory: ``mem.store``)."""
    return getattr(src, "store", src)


def export_lines(src: Any) -> Iterator[str]:
    """The lines of ``bm export`` of a Store (or a Memory's): the kinds' records in the
    order of ``ops.Kind``, the workspace files after the skills."""
    store = _store(src)
    yield _line({"kind": "header", "format": FORMAT})
    for kind in Kind:
        if kind is Kind.BLOCK_DEFINE:
            yield from map(_line, workspace.export_records(store))
        yield from map(_line, RULES[kind].export(store))


def import_lines(src: Any, lines: Iterable[str | bytes], batch: int = 256) -> dict:
    """Add every record not already in the store; all-or-nothing per batch of lines."""
    store = _store(src)
    counts = {record: 0 for record in _RECORDS}
    counts[FILE] = counts["skipped"] = 0
    pending: list[tuple[int, dict]] = []
    for lineno, line in enumerate(lines, 1):
        rec = _record(lineno, line)
        if rec is None:
            continue
        pending.append((lineno, rec))
        if len(pending) >= batch:
            _import_batch(store, pending, counts)
            pending = []
    _import_batch(store, pending, counts)
    return counts


def _record(lineno: int, line: str | bytes) -> dict | None:
    """The record of one line (None: a blank line or the header), or InvalidInput."""
    line = validate.utf8(line, what=f"line {lineno}", hint="is this a `bm export` file?")
    if not line.strip():
        return None
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"line {lineno}: not valid JSON ({exc.msg})", hint=_HINT) from None
    except RecursionError:
        raise validate.too_deep(f"line {lineno}", _HINT) from None
    if not isinstance(rec, dict) or (rec.get("kind") not in _RECORDS and rec.get("kind") not in ("header", FILE)):
        raise InvalidInput(f"line {lineno}: not a bm export record", hint="is this a `bm export` file?")
    if rec["kind"] == "header":
        if rec.get("format") != FORMAT:
            raise InvalidInput(f"line {lineno}: unsupported export format {rec.get('format')!r}",
                               hint=f"this bm reads {FORMAT}")
        return None
    return rec


def _import_batch(store: "Store", pending: list[tuple[int, dict]], counts: dict) -> None:
    """Check every record of the batch (the first bad one names its line and nothing is
    stored), then append their ops, embed the new memories and write the files."""
    if not pending:
        return
    ops: Ops = []
    files: list = []  # workspace files, written once the batch's ops are in
    for lineno, rec in pending:
        kind = rec.get("kind")
        try:
            kind = rec.pop("kind")
            if kind == FILE:
                found: Any = workspace.import_record(store, rec)
            else:
                found = _RECORDS[kind].import_(store, rec)
                for op_kind, op_payload in found or ():  # every op as any write's (brandmind/opcheck.py)
                    bad = failure(op_kind, op_payload)
                    if bad is not None:
                        raise bad
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidInput(f"line {lineno}: {kind} record is missing or has a bad field ({exc})",
                               hint=_HINT) from None
        except InvalidInput as exc:
            raise InvalidInput(f"line {lineno}: {exc.message}", hint=exc.hint) from None
        if found is None:  # the store has it (a file at that path, a skill of that name, ...)
            counts["skipped"] += 1
            continue
        if kind == FILE:
            files.append(found)
        else:
            ops.extend(found)
        counts[kind] += 1
    _write(store, ops)
    workspace.write_imported(files)


def _write(store: "Store", ops: Ops) -> None:
    texts = [p["text"] for kind, p in ops if kind == Kind.MEMORY_ADD]
    vecs = store.embed_docs(texts) if texts else []
    with store.write() as t:
        for kind, payload in ops:
            apply_log_side(t, t.append(kind, payload))
        for text, vec in zip(texts, vecs):
            t.cache_vector(store.sql.model, text, vec.tobytes())
    store.catch_up()


# -- the hooks: beads, memories, graph ---------------------------------------------------------------
def no_export(store: "Store") -> Iterator[dict]:
    """The kind has no record of its own (what it did is in the record of another kind)."""
    return iter(())


def no_import(store: "Store", rec: dict) -> Ops:
    """No record is imported as this kind alone (see ``Rule.record``): nothing to restore."""
    return []


def export_beads(store: "Store") -> Iterator[dict]:
    for bead in sorted(store.log.iter_beads(), key=lambda b: b["id"]):
        out = beads.bead_out(store, bead)
        out.pop("size", None)
        out.pop("blob", None)
        if bead.get("key"):  # the ingest dedup key: a restored store still knows what it has seen
            out["key"] = bead["key"]
        yield {"kind": "bead", **out}


def import_bead(store: "Store", rec: dict) -> Ops | None:
    if store.log.get_bead(rec["id"]) is not None:
        return None
    bead = beads.bead_payload(
        store, validate.text(rec["content"], what="content"), user=validate.name(rec["user"], what="user"),
        role=validate.name(rec["role"], what="role"),
        speaker=rec.get("speaker"), ts=parse_time(rec["ts"], field="ts"),
        thread=rec.get("thread"), source=rec.get("source", "import"),
        turn_id=rec.get("turn_id"), importance=validate.importance(rec.get("importance", 0.5)),
        spans=rec.get("spans"), meta=validate.meta(rec.get("meta")), bead_id=rec["id"],
        key=rec.get("key") if isinstance(rec.get("key"), str) else None)
    return [(Kind.BEAD_ADD, {"bead": bead})]


def export_memories(store: "Store") -> Iterator[dict]:
    for row in q.memory_rows(store.sql):
        m = memory_out(row)
        yield {"kind": "memory", **{k: m[k] for k in _MEMORY_FIELDS},
               **{k: m[k] for k in _FACT_FIELDS if m.get(k) not in (None, 0)}}


def _memory_payload(store: "Store", rec: dict) -> dict:
    """The ``memory.add`` of a record, by the rules of ``remember`` (the rest is checked with
    the op: brandmind/opcheck.py)."""
    payload = {k: rec.get(k) for k in _MEMORY_FIELDS if k != "updated"}
    payload["text"] = validate.text(rec["text"], limit=store.config.max_memory_chars)
    payload["type"] = validate.memory_type(rec["type"])
    payload["user"] = validate.name(rec.get("user"), what="user")
    if rec.get("agent") is not None:
        payload["agent"] = validate.name(rec["agent"], what="agent")
    payload["importance"] = validate.importance(rec.get("importance"))
    payload["meta"] = validate.meta(rec.get("meta"))
    payload["provenance"] = [] if rec.get("provenance") is None else rec["provenance"]
    payload["source"] = "import" if rec.get("source") is None else rec["source"]
    for key in ("ts", "valid_from", "valid_to"):
        payload[key] = parse_time(rec.get(key), field=key)
    payload["updated"] = parse_time(rec.get("updated"), field="updated") or payload["ts"]
    for key in ("subject", "predicate", "object"):
        if rec.get(key) is not None:
            payload[key] = validate.text(rec[key], what=key)
    if rec.get("recorded_at") is not None:
        payload["recorded_at"] = parse_time(rec["recorded_at"], field="recorded_at")
    if rec.get("expires_at") is not None:
        payload["expires_at"] = parse_time(rec["expires_at"], field="expires_at")
    return payload


def import_memory(store: "Store", rec: dict) -> Ops | None:
    """A ``memory.add``; a ``memory.retire`` when it was retired, a ``memory.confirm`` with
    the count of its confirmations."""
    if q.has_memory(store.sql, rec["id"]):
        return None
    payload = _memory_payload(store, rec)
    ops: Ops = [(Kind.MEMORY_ADD, payload)]
    if rec.get("retired_at") is not None:
        ops.append((Kind.MEMORY_RETIRE, {
            "id": payload["id"], "user": payload["user"],
            "retired_at": parse_time(rec["retired_at"], field="retired_at"), "valid_to": None,
            "by": rec.get("superseded_by"), "reason": payload["meta"].get("retired_reason") or ""}))
    if int(rec.get("confirmations") or 0) > 0:
        ops.append((Kind.MEMORY_CONFIRM, {"id": payload["id"], "user": payload["user"], "ts": payload["updated"],
                                          "provenance": [], "count": int(rec["confirmations"])}))
    if rec.get("pinned") is True:
        ops.append((Kind.MEMORY_PIN, {"id": payload["id"], "user": payload["user"], "pinned": True}))
    return ops


def export_nodes(store: "Store") -> Iterator[dict]:
    for row in q.node_rows(store.sql):
        yield {"kind": "node", **node_out(row)}


def import_node(store: "Store", rec: dict) -> Ops | None:
    if q.has_node(store.sql, rec["id"]):
        return None
    return [(Kind.KG_NODE, {"id": rec["id"], "user": rec["user"], "type": rec["type"], "name": rec["name"],
                            "labels": rec.get("labels", []), "meta": rec.get("meta", {}),
                            "ts": parse_time(rec["created"])})]


def export_edges(store: "Store") -> Iterator[dict]:
    for row in q.edge_rows(store.sql):
        times = {k: v for k, v in link_out(row).items() if k in _EDGE_TIMES and v is not None}
        yield {"kind": "edge", **edge_out(row), **times}


def import_edge(store: "Store", rec: dict) -> Ops | None:
    """A ``kg.edge``, and a ``kg.edge.retire`` when it was retired."""
    if q.has_edge(store.sql, rec["id"]):
        return None
    edge = {"id": rec["id"], "src": rec["src"], "dst": rec["dst"], "predicate": rec["predicate"],
            "weight": rec.get("weight", 1.0), "evidence": rec.get("evidence", []), "meta": rec.get("meta", {}),
            "ts": parse_time(rec["created"])}
    for key in ("valid_from", "valid_to", "recorded_at"):
        if rec.get(key) is not None:
            edge[key] = parse_time(rec[key], field=key)
    ops: Ops = [(Kind.KG_EDGE, edge)]
    if rec.get("retired_at") is not None:
        ops.append((Kind.KG_EDGE_RETIRE, {"id": rec["id"], "valid_to": None,
                                          "retired_at": parse_time(rec["retired_at"], field="retired_at")}))
    return ops


def export_mentions(store: "Store") -> Iterator[dict]:
    for row in q.mention_rows(store.sql):
        yield {"kind": "mention", "node": row["node_id"], "memory": row["memory_id"]}


def import_mention(store: "Store", rec: dict) -> Ops | None:
    if q.has_mention(store.sql, rec["node"], rec["memory"]):
        return None
    return [(Kind.KG_MENTION, {"node": rec["node"], "memory": rec["memory"]})]


# -- the hooks: skills, blocks, personas (their domain modules) --------------------------------------
def export_skills(store: "Store") -> Iterator[dict]:
    return iter(Skills(store).export_records())


def import_skill(store: "Store", rec: dict) -> Ops | None:
    item = Skills(store).import_payload(rec)
    return None if item is None else [(Kind.SKILL_ADD, item)]


def export_blocks(store: "Store") -> Iterator[dict]:
    """Core memory blocks by id: definition and text (not the CRDT history)."""
    for rec in Blocks(store).export_records():
        yield {"kind": "block", **rec}


def import_block(store: "Store", rec: dict) -> Ops | None:
    """A ``block.define`` and a ``block.update`` holding the text (the limit is checked like
    any write's)."""
    return Blocks(store).import_ops(rec)


def _persona_records(record: str) -> tuple[Any, Any]:
    """The export and import hooks of one of the persona records (personas by handle,
    assignments by user, the agents' persona documents)."""
    def export(store: "Store") -> Iterator[dict]:
        return (rec for rec in Personas(store).export_records() if rec["kind"] == record)

    def import_(store: "Store", rec: dict) -> Ops | None:
        return Personas(store).import_ops(record, rec)

    return export, import_


export_personas, import_persona = _persona_records("persona")
export_assignments, import_assignment = _persona_records("persona_user")
export_persona_docs, import_persona_doc = _persona_records("persona_doc")

provide("export", {
    Kind.BEAD_ADD: export_beads, Kind.BEAD_FORGET: no_export,
    Kind.MEMORY_ADD: export_memories, Kind.MEMORY_RETIRE: no_export, Kind.MEMORY_CONFIRM: no_export,
    Kind.MEMORY_MERGE: no_export, Kind.MEMORY_FORGET: no_export, Kind.USER_FORGET: no_export,
    Kind.MEMORY_PIN: no_export,  # (the memory record's "pinned")
    Kind.KG_NODE: export_nodes, Kind.KG_EDGE: export_edges, Kind.KG_EDGE_RETIRE: no_export,
    Kind.KG_MENTION: export_mentions, Kind.KG_NODE_REMOVE: no_export, Kind.KG_NODE_MERGE: no_export,
    Kind.SKILL_ADD: export_skills, Kind.SKILL_REMOVE: no_export,
    Kind.BLOCK_DEFINE: export_blocks, Kind.BLOCK_UPDATE: no_export,
    Kind.PERSONA_DEFINE: export_personas, Kind.PERSONA_ASSIGN: export_assignments,
    Kind.PERSONA_UNASSIGN: no_export, Kind.PERSONA_DOC: export_persona_docs,
})
provide("import_", {
    Kind.BEAD_ADD: import_bead, Kind.BEAD_FORGET: no_import,
    Kind.MEMORY_ADD: import_memory, Kind.MEMORY_RETIRE: no_import, Kind.MEMORY_CONFIRM: no_import,
    Kind.MEMORY_MERGE: no_import, Kind.MEMORY_FORGET: no_import, Kind.USER_FORGET: no_import,
    Kind.MEMORY_PIN: no_import,
    Kind.KG_NODE: import_node, Kind.KG_EDGE: import_edge, Kind.KG_EDGE_RETIRE: no_import,
    Kind.KG_MENTION: import_mention, Kind.KG_NODE_REMOVE: no_import, Kind.KG_NODE_MERGE: no_import,
    Kind.SKILL_ADD: import_skill, Kind.SKILL_REMOVE: no_import,
    Kind.BLOCK_DEFINE: import_block, Kind.BLOCK_UPDATE: no_import,
    Kind.PERSONA_DEFINE: import_persona, Kind.PERSONA_ASSIGN: import_assignment,
    Kind.PERSONA_UNASSIGN: no_import, Kind.PERSONA_DOC: import_persona_doc,
})
