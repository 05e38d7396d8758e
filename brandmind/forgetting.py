"""Forgetting: memories and turns, with what they came from or gave, gone everywhere.

``forget_ids(store, ids, bead_ids)`` forgets memories and beads and what they came from or
gave: the turns a forgotten memory was made from (its provenance beads) and every memory made
from a forgotten turn (its raw-turn memory, facts extracted from it).  One op each
(``memory.forget``, ``bead.forget``), so every replica forgets the same set; the adds are
redacted in the log, the text scrubbed from the files (oplog.scrub, SQLite secure_delete and a
WAL truncate); graph nodes only the forgotten facts named go too (``kg.node.remove``).  A
forgotten turn's ingest key stays, as a digest carried by its ``bead.forget``: an agent that
re-sends its history does not bring the turn back (``ingest.forgotten``).  ``forget_in`` and
``after_forget`` are its two halves (in the write transaction, then after the catch-up), which
an edit at ingest runs around its own writes (``edit_plan``: what an edit forgets).
``sparing_pinned(store, ids, bead_ids)`` keeps of those the ones whose forget takes no pinned
memory along (brandmind/expiry.py: expiry and ``--older-than`` never forget a pin).
``scrub_blocks(blocks, query, user)`` takes out of the user's own core blocks every sentence
holding every word of ``query`` (``bm forget --match``: the next context must not say it); the
block's earlier versions stay in its history (a CRDT cannot drop an edit), until the user goes.
``scrub_files(workspace, query)`` does the same to the workspace files recall indexes (notes,
profile: a later edit would index the sentence again) and lists the others that say it.
``forget_user_ops(store, user)`` appends the ``user.forget`` that removes everything of a user
and redacts the log (brandmind/logforget.py ``forget_user_in_log``).
"""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Callable, Iterable

from .clock import now_millis
from .ops import Kind
from .projection import apply_log_side, hlc_key
from .ingest import key_digest, text_digest, text_sha
from .logforget import forget_bead_in_log, forget_memory_in_log, forget_nodes_in_log, forget_user_in_log
from .storage import forget as q
from .storage.expiry import pinned_among
from .storage.keywords import query_words
from .storage.kwindex import tokenizer
from .workspace_files import indexed_type

if TYPE_CHECKING:  # pragma: no cover
    from .blocks import Blocks
    from .logtxn import LogTxn
    from .sqlstore import SQLStore
    from .workspace import Workspace
    from .store import Store

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_LEAD = re.compile(r"[ \t]*(?:(?:[-*+>]|#+|\d+[.)])[ \t]+)?")


def closure(store: "Store", ids: list[str], beads: list[str]) -> tuple[list[str], list[str], dict[str, dict]]:
    """``ids`` and ``beads`` plus the turns the memories came from and the memories the
    turns gave; with the rows of the memories (id -> row)."""
    rows = {r["id"]: r for r in q.memory_rows(store.sql, ids)}
    for row in rows.values():
        beads += [p["bead"] for p in json.loads(row["provenance"])
                  if isinstance(p, dict) and isinstance(p.get("bead"), str) and p["bead"] not in beads]
    more = [m for m in q.memories_from_beads(store.sql, beads) if m not in ids]
    if more:
        ids += more
        rows.update({r["id"]: r for r in q.memory_rows(store.sql, more)})
    return ids, beads, rows


def forget_ids(store: "Store", ids: Iterable[str], bead_ids: Iterable[str] = ()) -> dict:
    """See the module docstring.  Returns ``{"memories", "beads", "nodes"}`` forgotten."""
    ids, beads, rows = closure(store, list(dict.fromkeys(ids)), list(dict.fromkeys(bead_ids)))
    if not ids and not beads:
        return {"memories": [], "beads": [], "nodes": []}
    nodes = q.nodes_named_by(store.sql, ids)
    with store.write() as t:
        forget_in(t, ids, beads, rows)
    store.catch_up()
    return {"memories": ids, "beads": beads, "nodes": after_forget(store, nodes)}


def forget_in(t: "LogTxn", ids: list[str], beads: list[str], rows: dict[str, dict], *,
              keep_keys: bool = False) -> None:
    """Append and apply (log side) the forgets of memories ``ids`` (their ``rows``) and of
    ``beads``, in the caller's write transaction.  ``keep_keys`` (an edit, which stores the
    message again in the same transaction): the turns' keys stay free and their old texts are
    kept as superseded (``_about``)."""
    for memory_id in ids:
        op = t.append(Kind.MEMORY_FORGET, {"id": memory_id})
        # the text does not linger in the log; a copy of the add arriving later is redacted
        row = rows.get(memory_id)
        forget_memory_in_log(t, memory_id, hlc_key(op["hlc"]), row["op_id"] if row else None)
        if row:
            t.drop_vectors(row["text"])
    for bead_id in beads:
        bead = t.get_bead(bead_id)  # its user tells a mirror remote where the turn is
        op = t.append(Kind.BEAD_FORGET, {"id": bead_id, **_about(bead, keep_keys)})
        apply_log_side(t, op)  # its ingest key is kept forgotten
        blob = forget_bead_in_log(t, bead_id, hlc_key(op["hlc"]))
        if blob:
            t.dead_blobs.append(blob)


def after_forget(store: "Store", nodes: list[str]) -> list[str]:
    """Once a forget is applied: the graph ``nodes`` only the forgotten memories named (e.g. the
    place in a forgotten fact) go too; the text leaves the WAL file and the recall index file.
    Returns the nodes removed."""
    orphans = q.orphan_nodes(store.sql, nodes)
    if orphans:
        with store.write() as t:
            for node, owner in sorted(orphans.items()):
                op = t.append(Kind.KG_NODE_REMOVE, {"id": node, "user": owner, "ts": now_millis()})
                forget_nodes_in_log(t, {node}, hlc_key(op["hlc"]))
        store.catch_up()
    store.sql.truncate_wal()  # the pages that held the text leave the WAL file too
    store.searcher.forgotten()  # and their vectors the recall index file
    return sorted(orphans)


def edit_plan(store: "Store", beads: list[str]) -> tuple[list[str], dict[str, dict], list[str]]:
    """What an edit of the turns ``beads`` forgets besides them: the memories made from them
    alone and not pinned (a merged memory keeps its other turns; a pin is never taken by
    anything automatic), their rows, and the graph nodes those name."""
    made = q.memories_from_beads(store.sql, list(beads))
    rows = {r["id"]: r for r in q.memory_rows(store.sql, made)}
    pinned = pinned_among(store.sql, list(rows))
    ids = [m for m, r in rows.items() if m not in pinned and _turns_of(r) <= set(beads)]
    return ids, {m: rows[m] for m in ids}, q.nodes_named_by(store.sql, ids)


def _about(bead: dict | None, edit: bool = False) -> dict:
    """What a ``bead.forget`` says of the turn: whose it was (a mirror remote deletes it
    there) and the digest of its ingest key (re-sending the message stores nothing), or for an
    edit that of its old text (re-sending that version is no edit)."""
    if bead is None:
        return {}
    if not bead.get("key"):
        return {"user": bead["user"]}
    if not edit:
        return {"user": bead["user"], "key": key_digest(bead["key"])}
    return {"user": bead["user"], "was": text_digest(bead["key"], bead.get("blob") or text_sha(bead["content"]))}


def _turns_of(row: dict | None) -> set[str]:
    """The beads a memory was made from (its provenance)."""
    return {p["bead"] for p in json.loads(row["provenance"]) if isinstance(p, dict)
            and isinstance(p.get("bead"), str)} if row else set()


def sparing_pinned(store: "Store", ids: list[str], bead_ids: list[str]) -> tuple[list[str], list[str]]:
    """Those of ``ids`` and ``bead_ids`` whose forget takes no pinned memory along: not
    pinned themselves, and not made from (or being) a turn a pinned memory was made from
    (forgetting a turn forgets what was made from it: :func:`forget_ids`)."""
    every, _, rows = closure(store, list(ids), list(bead_ids))
    pinned = pinned_among(store.sql, every)
    if not pinned:
        return list(ids), list(bead_ids)
    held = set().union(*(_turns_of(rows.get(p)) for p in pinned))
    return ([i for i in ids if i not in pinned and not held & _turns_of(rows.get(i))],
            [b for b in bead_ids if b not in held])


def forget_user_ops(store: "Store", user: str) -> None:
    """Append and apply the ``user.forget`` of ``user``: memories, beads, graph nodes, core
    blocks go (their edits of shared persona blocks stay, without their name)."""
    with store.write() as t:
        op = t.append(Kind.USER_FORGET, {"user": user})
        apply_log_side(t, op)
        # the user's words must not linger in the log: redact every earlier op carrying
        # their content (memories, beads, graph nodes and the edges and mentions of
        # those); their ops arriving later by sync are stored redacted
        forget_user_in_log(t, op)
    store.catch_up()
    store.searcher.forgotten(names=True)  # the user's vectors and name leave the recall index file


def matcher(sql: "SQLStore", query: str) -> "Callable[[str], bool] | None":
    """Whether a text holds every content word of ``query`` the way ``forget --match`` finds
    memories (FTS5: porter stems over unicode61, stopwords dropped: storage/keywords.py), so a
    sentence of a block or a file goes exactly when a memory saying it would; None: no word
    the tokenizer keeps (``_``: then nothing matches, as FTS5 finds nothing)."""
    words = query_words(query)
    want = set(tokenizer(sql, query=True)(" ".join(words))) if words else set()
    if not want:
        return None
    stems = tokenizer(sql)
    return lambda text: want <= set(stems(text))


def without_sentences(text: str, match: "Callable[[str], bool]") -> tuple[str, int]:
    """``text`` without its sentences that ``match`` (a line they leave empty goes too), and how
    many went.  A sentence ends at . ! ? ; or a line end (a sentence wrapped over two lines is
    two: the file is then named, not cut: ``scrub_files``); a table row is one; what is not
    taken out is left byte for byte."""
    out, gone = [], 0
    for line in text.splitlines(keepends=True):
        end = len(line.rstrip("\r\n"))
        lead = len(_LEAD.match(line[:end]).group())  # a list item's or quote's mark stays with the rest
        body = line[lead:end]
        row = body.lstrip().startswith("|")
        cuts = sorted({0, len(body), *(() if row else (m.end() for m in _SENTENCE_END.finditer(body)))})
        spans = [body[a:b] for a, b in zip(cuts, cuts[1:])]
        kept = [p for p in spans if not match(p)]
        if len(kept) == len(spans):
            out.append(line)
            continue
        gone += len(spans) - len(kept)
        if "".join(kept).strip():
            out.append(line[:lead] + "".join(kept).rstrip() + line[end:])
    return "".join(out), gone


def scrub_blocks(blocks: "Blocks", query: str, user: str, *, dry_run: bool = False) -> list[dict]:
    """The user's own blocks (theirs and their agents') that hold a sentence with every word of
    ``query``, each ``{"label", "agent", "sentences"}``; unless ``dry_run`` those sentences are
    taken out (one block write each: it syncs, and concurrent edits elsewhere merge)."""
    match = matcher(blocks.sql, query)
    out: list[dict] = []
    for block in blocks.list(user=user) if match else ():
        if block["scope"] not in ("user", "agent"):
            continue  # the shared persona blocks carry no one's words (the PII guard)
        _, n = without_sentences(block["value"], match)
        if not n:
            continue
        if not dry_run:
            blocks.write(block["label"], lambda old: without_sentences(old, match)[0], user=user,
                         agent=block["agent"], by_agent=False)
        out.append({"label": block["label"], "agent": block["agent"], "sentences": n})
    return out


def scrub_files(workspace: "Workspace", query: str, *, dry_run: bool = False) -> list[dict]:
    """The user's workspace files holding a sentence with every word of ``query``, each
    ``{"path", "sentences"}``: unless ``dry_run`` the files recall indexes (notes, profile) lose
    those sentences (rewritten and indexed again); the others (drafts, system: never in a
    context), and a note that holds every word but in no one sentence, are only listed, with
    ``"kept": True`` and ``"why"``."""
    match = matcher(workspace.store.sql, query)
    out: list[dict] = []
    for entry in workspace.find("*") if match else ():
        try:
            text = workspace.cat(entry["path"]).decode("utf-8")
        except UnicodeDecodeError:
            continue  # not text: nothing a context shows
        new, n = without_sentences(text, match)
        indexed = indexed_type(entry["path"]) is not None
        if indexed and n and not dry_run:
            workspace.write(entry["path"], new)
        if not indexed and n:
            out.append({"path": entry["path"], "sentences": n, "kept": True, "why": "never recalled"})
        elif indexed and match(new):  # every word still there, but in no one sentence: the user's to edit
            out.append({"path": entry["path"], "sentences": n, "kept": True, "why": "not in one sentence"})
        elif n:
            out.append({"path": entry["path"], "sentences": n})
    return out
