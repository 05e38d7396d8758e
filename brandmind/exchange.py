"""Export and import a store as JSONL.

One record a line, ``{"kind": ..., ...}``, in a stable order (beads, memories,
graph nodes, edges, mentions; each sorted by id), with keys sorted, so that
export -> import into an empty store -> export gives the same lines.
Vectors are not exported: the importing store embeds with its own model
(its vector cache makes a re-import cheap).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable, Iterator

from . import validate
from .clock import parse_time
from .errors import InvalidInput
from .opcheck import failure
from .projection import apply_log_side

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory

FORMAT = "bm-export/1"
_MEMORY_FIELDS = ("id", "text", "type", "user", "agent", "importance", "ts", "updated",
                  "valid_from", "valid_to", "source", "provenance", "meta")
# bi-temporal facts (brandmind/facts.py): exported when set, so a restored store keeps
# what was retired, by what, and when it was learned
_FACT_FIELDS = ("recorded_at", "retired_at", "subject", "predicate", "object", "superseded_by",
                "confirmations")
_EDGE_TIMES = ("valid_from", "valid_to", "recorded_at", "retired_at")


def _line(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def export_lines(mem: "Memory") -> Iterator[str]:
    yield _line({"kind": "header", "format": FORMAT})
    with mem.log.read() as txn:
        beads = [json.loads(raw) for _, raw in txn.cursor(db=mem.log.db["beads"])]
    for bead in sorted(beads, key=lambda b: b["id"]):
        out = mem._bead_out(bead)
        out.pop("size", None)
        out.pop("blob", None)
        if bead.get("key"):  # the ingest dedup key: a restored store still knows what it has seen
            out["key"] = bead["key"]
        yield _line({"kind": "bead", **out})
    for row in mem.sql.rows("SELECT id FROM memories ORDER BY id"):
        m = mem.get(row["id"])
        yield _line({"kind": "memory", **{k: m[k] for k in _MEMORY_FIELDS},
                     **{k: m[k] for k in _FACT_FIELDS if m.get(k) not in (None, 0)}})
    for row in mem.sql.rows("SELECT id FROM kg_nodes ORDER BY id"):
        node = mem.kg_node(row["id"])
        node.pop("edges"), node.pop("memories")
        yield _line({"kind": "node", **node})
    for row in mem.sql.rows("SELECT * FROM kg_edges ORDER BY id"):
        from .graph import _edge_out, _link_out

        times = {k: v for k, v in _link_out(row).items() if k in _EDGE_TIMES and v is not None}
        yield _line({"kind": "edge", **_edge_out(row), **times})
    for row in mem.sql.rows("SELECT * FROM kg_mentions ORDER BY node_id, memory_id"):
        yield _line({"kind": "mention", "node": row["node_id"], "memory": row["memory_id"]})
    from . import skills, workspace

    for rec in skills.export_records(mem):  # skills by name, then workspace files by user and path
        yield _line(rec)
    for rec in workspace.export_records(mem.store):
        yield _line(rec)
    from .blocks import Blocks

    for rec in Blocks(mem.store).export_records():  # core memory blocks by id: definition and text
        yield _line({"kind": "block", **rec})
    from .personas import export_records as persona_records

    for rec in persona_records(mem):  # personas by handle, assignments by user, agents' persona documents
        yield _line(rec)


def import_lines(mem: "Memory", lines: Iterable[str | bytes], batch: int = 256) -> dict:
    """Add every record not already in the store; all-or-nothing per batch of lines."""
    counts = {"bead": 0, "memory": 0, "node": 0, "edge": 0, "mention": 0, "skipped": 0}
    counts.update({"skill": 0, "file": 0})
    counts["block"] = 0
    counts.update({"persona": 0, "persona_user": 0, "persona_doc": 0})
    pending: list[tuple[int, dict]] = []
    for lineno, line in enumerate(lines, 1):
        line = validate.utf8(line, what=f"line {lineno}", hint="is this a `bm export` file?")
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"line {lineno}: not valid JSON ({exc.msg})",
                               hint="is this a `bm export` file? nothing from this batch was imported") from None
        except RecursionError:
            raise validate.too_deep(f"line {lineno}", "is this a `bm export` file? nothing from this batch "
                                                      "was imported") from None
        if not isinstance(rec, dict) or rec.get("kind") not in {"header", "bead", "memory", "node", "edge", "mention", "skill", "file", "block",
                                                              "persona", "persona_user", "persona_doc"}:
            raise InvalidInput(f"line {lineno}: not a bm export record", hint="is this a `bm export` file?")
        if rec["kind"] == "header":
            if rec.get("format") != FORMAT:
                raise InvalidInput(f"line {lineno}: unsupported export format {rec.get('format')!r}",
                                   hint=f"this bm reads {FORMAT}")
            continue
        pending.append((lineno, rec))
        if len(pending) >= batch:
            _import_batch(mem, pending, counts)
            pending = []
    _import_batch(mem, pending, counts)
    return counts


def _import_batch(mem: "Memory", pending: list[tuple[int, dict]], counts: dict) -> None:
    if not pending:
        return
    c = mem.sql.conn
    texts, memories, ops = [], [], []
    files: list = []  # workspace files, written once the batch's ops are in
    for lineno, rec in pending:
        first = len(ops)
        kind = rec.get("kind")
        try:
            kind = rec.pop("kind")
            if kind == "memory":
                if c.execute("SELECT 1 FROM memories WHERE id=?", (rec["id"],)).fetchone():
                    counts["skipped"] += 1
                    continue
                payload = {k: rec.get(k) for k in _MEMORY_FIELDS if k != "updated"}
                payload["text"] = validate.text(rec["text"], limit=mem.config.max_memory_chars)
                payload["type"] = validate.memory_type(rec["type"])
                # the rules of `remember` (the rest is checked with the op: brandmind/opcheck.py)
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
                memories.append(payload)
                texts.append(payload["text"])
                ops.append(("memory.add", payload))
                if rec.get("retired_at") is not None:
                    ops.append(("memory.retire", {
                        "id": payload["id"], "user": payload["user"],
                        "retired_at": parse_time(rec["retired_at"], field="retired_at"), "valid_to": None,
                        "by": rec.get("superseded_by"),
                        "reason": payload["meta"].get("retired_reason") or ""}))
                if int(rec.get("confirmations") or 0) > 0:
                    ops.append(("memory.confirm", {"id": payload["id"], "user": payload["user"],
                                                   "ts": payload["updated"], "provenance": [],
                                                   "count": int(rec["confirmations"])}))
            elif kind == "bead":
                if mem.log.get_bead(rec["id"]) is not None:
                    counts["skipped"] += 1
                    continue
                bead = mem._bead_payload(
                    validate.text(rec["content"], what="content"), user=validate.name(rec["user"], what="user"),
                    role=validate.name(rec["role"], what="role"),
                    speaker=rec.get("speaker"), ts=parse_time(rec["ts"], field="ts"),
                    thread=rec.get("thread"), source=rec.get("source", "import"),
                    turn_id=rec.get("turn_id"), importance=validate.importance(rec.get("importance", 0.5)),
                    spans=rec.get("spans"), meta=validate.meta(rec.get("meta")), bead_id=rec["id"],
                    key=rec.get("key") if isinstance(rec.get("key"), str) else None)
                ops.append(("bead.add", {"bead": bead}))
            elif kind == "node":
                if c.execute("SELECT 1 FROM kg_nodes WHERE id=?", (rec["id"],)).fetchone():
                    counts["skipped"] += 1
                    continue
                ops.append(("kg.node", {"id": rec["id"], "user": rec["user"], "type": rec["type"],
                                        "name": rec["name"], "labels": rec.get("labels", []),
                                        "meta": rec.get("meta", {}), "ts": parse_time(rec["created"])}))
            elif kind == "edge":
                if c.execute("SELECT 1 FROM kg_edges WHERE id=?", (rec["id"],)).fetchone():
                    counts["skipped"] += 1
                    continue
                edge = {"id": rec["id"], "src": rec["src"], "dst": rec["dst"],
                        "predicate": rec["predicate"], "weight": rec.get("weight", 1.0),
                        "evidence": rec.get("evidence", []), "meta": rec.get("meta", {}),
                        "ts": parse_time(rec["created"])}
                for key in ("valid_from", "valid_to", "recorded_at"):
                    if rec.get(key) is not None:
                        edge[key] = parse_time(rec[key], field=key)
                ops.append(("kg.edge", edge))
                if rec.get("retired_at") is not None:
                    ops.append(("kg.edge.retire", {"id": rec["id"], "valid_to": None,
                                                   "retired_at": parse_time(rec["retired_at"], field="retired_at")}))
            elif kind == "block":
                from .blocks import Blocks

                block_ops = Blocks(mem.store).import_ops(rec)  # the limit is checked like any write
                if block_ops is None:  # the store has that block
                    counts["skipped"] += 1
                    continue
                ops.extend(block_ops)
            elif kind in ("persona", "persona_user", "persona_doc"):
                from .personas import import_ops as persona_ops

                found = persona_ops(mem, kind, rec)
                if found is None:  # the store has that persona, assignment or document version
                    counts["skipped"] += 1
                    continue
                ops.extend(found)
            elif kind in ("skill", "file"):
                from . import skills, workspace

                item = skills.import_payload(mem, rec) if kind == "skill" else workspace.import_record(mem.store, rec)
                if item is None:  # a skill of that name, or a file at that path, exists
                    counts["skipped"] += 1
                    continue
                if kind == "skill":
                    ops.append(("skill.add", item))
                else:
                    files.append(item)
            else:
                if c.execute("SELECT 1 FROM kg_mentions WHERE node_id=? AND memory_id=?",
                             (rec["node"], rec["memory"])).fetchone():
                    counts["skipped"] += 1
                    continue
                ops.append(("kg.mention", {"node": rec["node"], "memory": rec["memory"]}))
            for op_kind, op_payload in ops[first:]:  # every op as any write's (brandmind/opcheck.py)
                bad = failure(op_kind, op_payload)
                if bad is not None:
                    raise bad
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidInput(f"line {lineno}: {kind} record is missing or has a bad field ({exc})",
                               hint="is this a `bm export` file? nothing from this batch was imported") from None
        except InvalidInput as exc:
            raise InvalidInput(f"line {lineno}: {exc.message}", hint=exc.hint) from None
        counts[kind] += 1
    vecs = mem.store.embed_docs(texts) if texts else []
    with mem.log.write() as t:
        for kind, payload in ops:
            op = t.append(kind, payload)
            apply_log_side(t, op)
        for text, vec in zip(texts, vecs):
            t.cache_vector(mem.sql.model, text, vec.tobytes())
    mem.store.catch_up()
    if files:
        from .workspace import write_imported

        write_imported(files)
