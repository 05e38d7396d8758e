"""Forgetting: memories and turns, with what they came from or gave, gone everywhere.

``forget_ids(store, ids, bead_ids)`` forgets memories and beads and what they came from or
gave: the turns a forgotten memory was made from (its provenance beads) and every memory made
from a forgotten turn (its raw-turn memory, facts extracted from it).  One op each
(``memory.forget``, ``bead.forget``), so every replica forgets the same set; the adds are
redacted in the log, the text scrubbed from the files (oplog.scrub, SQLite secure_delete and a
WAL truncate); graph nodes only the forgotten facts named go too (``kg.node.remove``).  A
forgotten turn's ingest key stays, as a digest carried by its ``bead.forget``: an agent that
re-sends its history does not bring the turn back (``ingest.forgotten``).
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
from typing import TYPE_CHECKING, Iterable

from .clock import now_millis
from .ops import Kind
from .projection import apply_log_side, hlc_key
from .ingest import key_digest
from .logforget import forget_bead_in_log, forget_memory_in_log, forget_nodes_in_log, forget_user_in_log
from .storage import forget as q
from .storage.expiry import pinned_among
from .workspace_files import indexed_type

if TYPE_CHECKING:  # pragma: no cover
    from .blocks import Blocks
    from .workspace import Workspace
    from .store import Store

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_LEAD = re.compile(r"\s*(?:(?:[-*+>]|#+|\d+[.)])\s+)?")


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


def forget_ids(store: "Store", ids: Iterable[str], bead_ids: Iterable[str] = (), *, keep_keys: bool = False) -> dict:
    """See the module docstring.  Returns ``{"memories", "beads", "nodes"}`` forgotten.
    ``keep_keys``: the turns' ingest keys stay free (an edit stores the message again)."""
    ids, beads, rows = closure(store, list(dict.fromkeys(ids)), list(dict.fromkeys(bead_ids)))
    if not ids and not beads:
        return {"memories": [], "beads": [], "nodes": []}
    nodes = q.nodes_named_by(store.sql, ids)
    with store.write() as t:
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
    store.catch_up()
    # graph nodes only these memories named (e.g. the place in a forgotten fact) go too
    orphans = q.orphan_nodes(store.sql, nodes)
    if orphans:
        with store.write() as t:
            for node, owner in sorted(orphans.items()):
                op = t.append(Kind.KG_NODE_REMOVE, {"id": node, "user": owner, "ts": now_millis()})
                forget_nodes_in_log(t, {node}, hlc_key(op["hlc"]))
        store.catch_up()
    store.sql.truncate_wal()  # the pages that held the text leave the WAL file too
    store.searcher.forgotten()  # and their vectors the recall index file
    return {"memories": ids, "beads": beads, "nodes": sorted(orphans)}


def _about(bead: dict | None, keep_key: bool = False) -> dict:
    """What a ``bead.forget`` says of the turn: whose it was (a mirror remote deletes it
    there) and the digest of its ingest key (re-sending the message stores nothing)."""
    if bead is None:
        return {}
    forgotten = bead.get("key") and not keep_key
    return {"user": bead["user"], **({"key": key_digest(bead["key"])} if forgotten else {})}


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


def words_of(text: str) -> set[str]:
    """The words ``forget --match`` compares (case-folded, punctuation dropped)."""
    return set(re.findall(r"\w+", text.casefold()))


def without_sentences(text: str, words: set[str]) -> tuple[str, int]:
    """``text`` without its sentences holding every one of ``words`` (a line they leave empty
    goes too), and how many went.  Sentences end at . ! ? ; or a line break."""
    kept, gone = [], 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        lead = _LEAD.match(body).group()  # a list item's or quote's mark stays with what is left
        parts = [p for p in _SENTENCE_END.split(body[len(lead):]) if p]
        left = [p for p in parts if not words <= words_of(p)]
        gone += len(parts) - len(left)
        if left or not parts:
            kept.append(lead + " ".join(left) + line[len(body):])
    return "".join(kept), gone


def scrub_blocks(blocks: "Blocks", query: str, user: str, *, dry_run: bool = False) -> list[dict]:
    """The user's own blocks (theirs and their agents') that hold a sentence with every word of
    ``query``, each ``{"label", "agent", "sentences"}``; unless ``dry_run`` those sentences are
    taken out (one block write each: it syncs, and concurrent edits elsewhere merge)."""
    words = words_of(query)
    out: list[dict] = []
    if not words:
        return out
    for block in blocks.list(user=user):
        if block["scope"] not in ("user", "agent"):
            continue  # the shared persona blocks carry no one's words (the PII guard)
        _, n = without_sentences(block["value"], words)
        if not n:
            continue
        if not dry_run:
            blocks.write(block["label"], lambda old: without_sentences(old, words)[0], user=user,
                         agent=block["agent"], by_agent=False)
        out.append({"label": block["label"], "agent": block["agent"], "sentences": n})
    return out


def scrub_files(workspace: "Workspace", query: str, *, dry_run: bool = False) -> list[dict]:
    """The user's workspace files holding a sentence with every word of ``query``, each
    ``{"path", "sentences"}``: unless ``dry_run`` the files recall indexes (notes, profile) lose
    those sentences (rewritten and indexed again); the others (drafts, system: never in a
    context) are only listed, with ``"kept": True``."""
    words = words_of(query)
    out: list[dict] = []
    for entry in workspace.find("*") if words else ():
        try:
            text = workspace.cat(entry["path"]).decode("utf-8")
        except UnicodeDecodeError:
            continue  # not text: nothing a context shows
        new, n = without_sentences(text, words)
        if not n:
            continue
        indexed = indexed_type(entry["path"]) is not None
        if indexed and not dry_run:
            workspace.write(entry["path"], new)
        out.append({"path": entry["path"], "sentences": n, **({} if indexed else {"kept": True})})
    return out
