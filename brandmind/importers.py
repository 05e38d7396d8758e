"""Other tools' exports in: ``bm import --from chatgpt|claude|mem0|basic-memory FILE``.

``read_export(kind, source)`` reads and checks a whole file before anything is stored (a bad
file is one InvalidInput naming the conversation, item or line, and nothing is written);
``Memory.import_from`` then stores it through the existing paths:

* **Conversations** (ChatGPT, Claude) become ingest messages (brandmind/ingest.py), stored by
  ``Memory.ingest``: a bead and a raw-turn memory per turn, with the turn's own time, role and
  speaker (``ChatGPT`` / ``Claude`` for the assistant; the user's own turns have none), one
  thread per conversation (``chatgpt:<conversation id>``), and the message id as the turn id.
  Ingest's dedup key is (user, thread, id), so importing the same file again stores nothing,
  and a longer export of the same account later stores only the new turns.  Provenance rides
  in each bead's meta and its memory's provenance: ``{"imported": {"from", "conversation",
  "title", "message"}}``.
* **Memories and the graph** (Mem0, the MCP memory server's knowledge graph) become records of
  ``bm export`` (brandmind/exchange.py ``import_lines``) with ids derived from the source's
  ids (:func:`stable_id`): the records are checked as every write's ops are, a record already
  in the store is skipped (so a re-import stores nothing), and they are written in one
  op-log transaction.  They are stored as they are, not reconciled against the facts stored
  before (``bm remember --fact`` would retire a contradicted one; an import does not).

The formats, as followed (read 2026-11, from the sources named):

* ChatGPT (Settings > Data controls > Export data: a .zip with ``conversations.json``): a list
  of conversations ``{"conversation_id"|"id", "title", "create_time" (epoch s), "mapping":
  {node id: {"message", "parent", "children"}}, "current_node"}``; a message is ``{"id",
  "author": {"role"}, "create_time", "content": {"content_type", "parts"}, "recipient",
  "metadata": {"is_visually_hidden_from_conversation"?, "model_slug"?}}``.  The visible
  branch is the chain of parents from ``current_node`` up to the root (edited and regenerated
  turns live on other branches); without ``current_node``, the last child at each step.
  Only user and assistant turns addressed to everyone (``recipient`` "all") whose content is
  ``text`` or ``multimodal_text`` are kept (the string parts and the ``text`` of
  ``audio_transcription`` parts, what was said in voice mode; images and audio are left out); system,
  tool, hidden, reasoning, code-for-a-tool and empty messages are counted as skipped.
  Followed: basicmachines-co/basic-memory ``src/basic_memory/importers/chatgpt_importer.py``
  and its tests (``tests/cli/test_import_chatgpt.py``; hidden messages, ``create_time``).
* Claude (Settings > Privacy > Export data: a .zip with ``conversations.json``): a list of
  ``{"uuid", "name", "created_at", "updated_at", "chat_messages": [{"uuid", "sender":
  "human"|"assistant", "text", "content": [{"type": "text", "text"}, ...], "created_at"}]}``;
  a turn's text is its ``text`` blocks (tool use, tool results and thinking are left out),
  else ``text``.  Followed: basic-memory ``importers/claude_conversations_importer.py`` and
  ``tests/cli/test_import_claude_conversations.py``.
* Mem0: the JSON of ``Memory.get_all()`` (``{"results": [...]}``), of the platform's
  ``MemoryClient.get_all()`` (``{"count", "next", "previous", "results"}``) or a plain list;
  items ``{"id", "memory", "hash"?, "user_id"?, "agent_id"?, "run_id"?, "metadata"?,
  "categories"?, "created_at"?, "updated_at"?}``.  Followed: mem0ai/mem0
  ``mem0/memory/main.py`` (``get_all``, ``_get_all_from_vector_store``), ``mem0/client/main.py``
  and ``docs/api-reference/memory/get-memories.mdx``.  Each becomes a ``fact`` memory of the
  importing user's global scope (Mem0 lists an agent's memories under the user too), its
  time ``created_at`` (else now); Mem0's ids, user, agent, run, categories and metadata are
  kept in its meta.
* Basic Memory's ``memory.json``: the knowledge graph of the MCP memory server
  (modelcontextprotocol/servers ``src/memory/index.ts``: ``saveGraph`` writes one JSON object a
  line, ``{"type": "entity", "name", "entityType", "observations": [...]}`` and ``{"type":
  "relation", "from", "to", "relationType"}``; the file is ``memory.jsonl`` now, ``memory.json``
  before), which Basic Memory imports with ``bm import memory-json``
  (basic-memory ``importers/memory_json_importer.py``, which also reads ``entityName``,
  ``from_id``/``to_id`` and ``relation_type``; so does this).  The ``{"entities",
  "relations"}`` object that the server's ``read_graph`` returns is read too.  An entity is a
  graph node (the user's node of that name is reused), each observation a ``fact`` memory
  "<entity>: <observation>" mentioning it; a relation is a fact memory with its triple and an
  edge ``from -relation-> to`` (evidence: that memory), as ``bm remember --fact`` stores one.
  The format has no times: they are stored with the time of the import.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from . import validate
from .clock import encode_id, iso, now_millis, parse_time
from .errors import InvalidInput, NotFound, UsageError
from .factrules import norm, predicate_name
from .ingest import message_from_obj
from .storage import exchange as q
from .storage.graph import node_keys

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

KINDS = ("chatgpt", "claude", "mem0", "basic-memory")
CONVERSATIONS = ("chatgpt", "claude")
LABEL = {"chatgpt": "ChatGPT", "claude": "Claude", "mem0": "Mem0", "basic-memory": "Basic Memory"}
ASSISTANT = {"chatgpt": "ChatGPT", "claude": "Claude"}
_SHAPE = {
    "chatgpt": 'a ChatGPT export: the .zip, or the conversations.json in it (a list of {"title", "mapping", ...})',
    "claude": 'a Claude export: the .zip, or the conversations.json in it (a list of {"uuid", "chat_messages", ...})',
    "mem0": 'a Mem0 dump: the JSON of get_all(), {"results": [{"id", "memory", ...}]} or a list of them',
    "basic-memory": 'a memory.json(l) of the MCP memory server: lines of {"type": "entity", ...} / {"type": "relation", ...}',
}


@dataclass
class Export:
    """A checked export: ``messages`` for ``Memory.ingest`` (conversations), or ``items`` for
    :func:`records` (Mem0 memories; Basic Memory entities and relations)."""
    kind: str
    found: dict
    messages: list[dict] = field(default_factory=list)
    items: list[dict] = field(default_factory=list)
    skipped: int = 0


def check_kind(kind: Any) -> str:
    """The kind of export, or InvalidInput naming the ones there are."""
    if kind not in KINDS:
        raise InvalidInput(f"unknown export kind {kind!r}", hint="use one of: " + ", ".join(KINDS))
    return kind


def stable_id(prefix: str, ms: int | None, *parts: str) -> str:
    """An id of bm's form (``<prefix>_`` + time + 60 bits) made from ``parts``, the same on
    every import of the same item: sortable by ``ms`` (the item's own time, when it has one)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    ms = ms if ms is not None and 0 <= ms < 1 << 50 else 0
    return encode_id(prefix, ms, int.from_bytes(digest[:8], "big") >> 4)


# -- reading the file -------------------------------------------------------------------------------
def read_export(kind: str, source: str | os.PathLike[str] | bytes) -> Export:
    """The export in ``source`` (a path, or the file's bytes), read whole and checked."""
    kind = check_kind(kind)
    name = "stdin" if isinstance(source, bytes) else os.fspath(source)
    data = source if isinstance(source, bytes) else _read_bytes(name)
    if data[:4] == b"PK\x03\x04":
        if kind not in CONVERSATIONS:
            raise InvalidInput(f"{name} is a zip archive, not a {LABEL[kind]} file",
                               hint=f"--from {kind} reads {_SHAPE[kind]}")
        data, name = _from_zip(data, name, kind)
    if kind == "basic-memory":
        return _basic_memory(_graph_lines(data, name), name)
    doc = _json(data, name, kind)
    return {"chatgpt": _chatgpt, "claude": _claude, "mem0": _mem0}[kind](doc, name)


def _read_bytes(path: str) -> bytes:
    if os.path.isdir(path):
        raise UsageError(f"{path} is a directory, not a file", hint="give the export file (or the .zip) itself")
    if not os.path.isfile(path):
        raise NotFound(f"no such file: {path}", hint="give the path of the export file (or the .zip)")
    with open(path, "rb") as fh:
        return fh.read()


def _from_zip(data: bytes, name: str, kind: str) -> tuple[bytes, str]:
    """The ``conversations.json`` of an export archive (the shallowest one)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = [m for m in archive.infolist()
                       if not m.is_dir() and m.filename.replace("\\", "/").rsplit("/", 1)[-1] == "conversations.json"]
            if not members:
                raise InvalidInput(f"{name}: the zip archive holds no conversations.json",
                                   hint=f"give the data export .zip of {LABEL[kind]}, or the conversations.json from it")
            member = min(members, key=lambda m: (m.filename.count("/"), m.filename))
            return archive.read(member), f"{name}:{member.filename}"
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as exc:
        raise InvalidInput(f"{name}: not a readable zip archive ({exc})",
                           hint="download the export again, or unzip it and give its conversations.json") from None


def _no_constant(word: str) -> None:
    raise ValueError(f"{word} is not valid JSON")


def _json(data: bytes, name: str, kind: str) -> Any:
    hint = f"is the file whole? --from {kind} reads {_SHAPE[kind]}"
    try:
        return json.loads(data, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        first = _first_line(data) if exc.msg == "Extra data" else None  # JSON lines: of which tool?
        if looks_like(first) not in (None, kind):
            raise _wrong(name, kind, first, "one JSON object a line") from None
        raise InvalidInput(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
                           hint=hint) from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{name}: not UTF-8 text", hint=hint) from None
    except ValueError as exc:  # NaN / Infinity
        raise InvalidInput(f"{name}: {exc}", hint=hint) from None
    except RecursionError:
        raise validate.too_deep(name, hint) from None


def _first_line(data: bytes) -> Any:
    """The JSON of the first line of ``data``, or None."""
    try:
        return json.loads(data.split(b"\n", 1)[0], parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None


def looks_like(doc: Any) -> str | None:
    """Which export ``doc`` (parsed JSON) looks like, by its first item, or None."""
    if isinstance(doc, dict):
        if doc.get("kind") == "header" and "format" in doc:
            return "bm"
        if isinstance(doc.get("results"), list):
            return "mem0"
        if isinstance(doc.get("entities"), list) or doc.get("type") in ("entity", "relation"):
            return "basic-memory"
        if "mapping" in doc:
            return "chatgpt"
        if "chat_messages" in doc:
            return "claude"
        return None
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        return looks_like(doc[0]) or ("mem0" if "memory" in doc[0] else None)
    return None


def _wrong(name: str, kind: str, doc: Any, what: str) -> InvalidInput:
    """The error for a file that is not a ``kind`` export, naming what it looks like."""
    other = looks_like(doc)
    if other == "bm":
        return InvalidInput(f"{name} is a `bm export` file, not a {LABEL[kind]} export",
                            hint=f"import it without --from: bm import {name}")
    if other and other != kind:
        return InvalidInput(f"{name} does not look like a {LABEL[kind]} export ({what}); "
                            f"it looks like a {LABEL[other]} one", hint=f"use --from {other}")
    return InvalidInput(f"{name} does not look like a {LABEL[kind]} export ({what})",
                        hint=f"--from {kind} reads {_SHAPE[kind]}")


def _list_of(doc: Any, name: str, kind: str, key: str, need: str) -> list[dict]:
    """The list of items of an export (``doc`` itself, or ``doc[key]``), each an object with
    ``need``; else the error saying what the file looks like."""
    items = doc.get(key) if isinstance(doc, dict) and isinstance(doc.get(key), list) else doc
    if not isinstance(items, list):
        raise _wrong(name, kind, doc, f"expected a list, got a JSON {type(doc).__name__}")
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict) or need not in item:
            raise _wrong(name, kind, doc, f'item {i} has no "{need}"' if isinstance(item, dict)
                         else f"item {i} is not an object")
    return items


def _text(value: Any) -> str:
    """Text as stored: NUL characters (which bm refuses anywhere) dropped."""
    return value.replace("\x00", "") if isinstance(value, str) else ""


def _ref(kind: str, value: Any, fallback: str) -> str:
    """A source id usable as a bm name (thread, turn id): itself, else a digest of it."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value) else fallback
    if validate.NAME.match(text) and text == text.strip() and len(text) <= 100:
        return text
    return kind + "-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _message(where: str, obj: dict) -> dict:
    """An ingest message, checked as ``bm ingest`` checks a line (InvalidInput names ``where``)."""
    try:
        return message_from_obj(obj, where)
    except InvalidInput as exc:
        exc.hint = "the export is damaged there: export again, or leave that conversation out"
        raise


# -- ChatGPT ----------------------------------------------------------------------------------------
def _chatgpt(doc: Any, name: str) -> Export:
    convs = [doc] if isinstance(doc, dict) and "mapping" in doc else _list_of(doc, name, "chatgpt", "conversations", "mapping")
    out = Export("chatgpt", {"conversations": len(convs), "messages": 0})
    for i, conv in enumerate(convs, 1):
        mapping = conv.get("mapping")
        where = f"{name}: conversation {i}"
        if not isinstance(mapping, dict):
            raise InvalidInput(f'{where}: "mapping" is not an object', hint="the export is damaged: export again")
        title = conv.get("title") if isinstance(conv.get("title"), str) else None
        conv_id = _ref("chatgpt", conv.get("conversation_id") or conv.get("id"),
                       f"{title}\x1f{conv.get('create_time')}")
        for j, (node_id, msg) in enumerate(_visible_branch(mapping, conv.get("current_node"), where), 1):
            role, text = _chatgpt_turn(msg)
            if role is None:
                out.skipped += 1
                continue
            msg_id = _ref("chatgpt", msg.get("id") or node_id, str(j))
            meta = {"from": "chatgpt", "conversation": conv_id, "title": title, "message": msg_id}
            slug = (msg.get("metadata") or {}).get("model_slug")
            if isinstance(slug, str):
                meta["model"] = slug
            ts = msg.get("create_time") or conv.get("create_time")
            out.messages.append(_message(f"{where} ({title!r}), message {msg_id}", {
                "id": msg_id, "role": role, "speaker": ASSISTANT["chatgpt"] if role == "assistant" else None,
                "content": text, "ts": ts, "thread": f"chatgpt:{conv_id}", "meta": {"imported": meta}}))
    out.found["messages"] = len(out.messages) + out.skipped
    return out


def _visible_branch(mapping: dict, current: Any, where: str) -> list[tuple[str, dict]]:
    """The messages of the branch the user last saw, root first: the parents of
    ``current_node``; without one, the last child at each step from the root."""
    if not isinstance(current, str) or current not in mapping:
        roots = [k for k, n in mapping.items() if isinstance(n, dict) and n.get("parent") in (None, "")]
        current, seen = (roots[0] if roots else None), set()
        while current is not None and current not in seen:
            seen.add(current)
            node = mapping.get(current)
            children = node.get("children") if isinstance(node, dict) else None
            kids = [c for c in children if isinstance(c, str) and c in mapping] if isinstance(children, list) else []
            if not kids:
                break
            current = kids[-1]
    chain, seen = [], set()
    while isinstance(current, str) and current in mapping and current not in seen:
        seen.add(current)
        node = mapping[current]
        if not isinstance(node, dict):
            raise InvalidInput(f"{where}: node {current!r} is not an object", hint="the export is damaged: export again")
        if isinstance(node.get("message"), dict):
            chain.append((current, node["message"]))
        current = node.get("parent")
    return chain[::-1]


def _chatgpt_turn(msg: dict) -> tuple[str | None, str]:
    """(role, text) of a visible turn, or (None, "") for what the user never saw as one."""
    author = msg.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    meta = msg.get("metadata") or {}
    content = msg.get("content") or {}
    if (role not in ("user", "assistant") or not isinstance(meta, dict) or not isinstance(content, dict)
            or meta.get("is_visually_hidden_from_conversation") or msg.get("recipient") not in (None, "all")
            or content.get("content_type") not in ("text", "multimodal_text")):
        return None, ""
    parts = content.get("parts") if isinstance(content.get("parts"), list) else []
    said = [p if isinstance(p, str) else p.get("text") if isinstance(p, dict)  # voice: what was said
            and p.get("content_type") == "audio_transcription" else None for p in parts]
    text = "\n".join(_text(p) for p in said if isinstance(p, str) and p.strip()).strip()
    return (role, text) if text else (None, "")


# -- Claude -----------------------------------------------------------------------------------------
def _claude(doc: Any, name: str) -> Export:
    convs = [doc] if isinstance(doc, dict) and "chat_messages" in doc else _list_of(doc, name, "claude", "conversations", "chat_messages")
    out = Export("claude", {"conversations": len(convs), "messages": 0})
    for i, conv in enumerate(convs, 1):
        where = f"{name}: conversation {i}"
        turns = conv.get("chat_messages")
        if not isinstance(turns, list):
            raise InvalidInput(f'{where}: "chat_messages" is not a list', hint="the export is damaged: export again")
        title = conv.get("name") if isinstance(conv.get("name"), str) else None
        conv_id = _ref("claude", conv.get("uuid"), f"{title}\x1f{conv.get('created_at')}")
        for j, msg in enumerate(turns, 1):
            if not isinstance(msg, dict):
                raise InvalidInput(f"{where}: message {j} is not an object", hint="the export is damaged: export again")
            role = {"human": "user", "assistant": "assistant"}.get(str(msg.get("sender")).lower())
            text = _claude_text(msg)
            if role is None or not text:
                out.skipped += 1
                continue
            msg_id = _ref("claude", msg.get("uuid"), str(j))
            meta = {"from": "claude", "conversation": conv_id, "title": title, "message": msg_id}
            out.messages.append(_message(f"{where} ({title!r}), message {msg_id}", {
                "id": msg_id, "role": role, "speaker": ASSISTANT["claude"] if role == "assistant" else None,
                "content": text, "ts": msg.get("created_at") or conv.get("created_at"),
                "thread": f"claude:{conv_id}", "meta": {"imported": meta}}))
    out.found["messages"] = len(out.messages) + out.skipped
    return out


def _claude_text(msg: dict) -> str:
    blocks = msg.get("content")
    if isinstance(blocks, list) and blocks:
        texts = [_text(b.get("text")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        return "\n\n".join(t.strip() for t in texts if t.strip())
    return _text(msg.get("text")).strip()


# -- Mem0 -------------------------------------------------------------------------------------------
def _mem0(doc: Any, name: str) -> Export:
    items = _list_of(doc, name, "mem0", "results", "memory")
    out = Export("mem0", {"memories": len(items)})
    for i, item in enumerate(items, 1):
        where = f"{name}: memory {i}"
        ident = item.get("id")
        if not isinstance(ident, (str, int)) or isinstance(ident, bool) or not str(ident).strip():
            raise InvalidInput(f'{where} has no "id"', hint="each Mem0 memory has its id: export again")
        try:
            text = validate.text(_text(item.get("memory")), what="memory")
            created = parse_time(item.get("created_at"), field="created_at")
            updated = parse_time(item.get("updated_at"), field="updated_at")
            meta = validate.meta(item.get("metadata"))
        except InvalidInput as exc:
            raise InvalidInput(f"{where} ({ident}): {exc.message}", hint=exc.hint) from None
        kept = {"from": "mem0", "id": str(ident)}
        for key in ("user_id", "agent_id", "run_id", "hash"):
            if isinstance(item.get(key), str):
                kept[key] = item[key]
        if isinstance(item.get("categories"), list):
            kept["categories"] = [c for c in item["categories"] if isinstance(c, str)]
        if meta:
            kept["metadata"] = meta
        out.items.append({"id": str(ident), "text": text, "created": created, "updated": updated, "meta": kept})
    return out


# -- Basic Memory / the MCP memory server ---------------------------------------------------------
def _graph_lines(data: bytes, name: str) -> Iterator[tuple[str, dict]]:
    """The objects of a memory.json(l): one a line, or the ``{"entities", "relations"}`` of
    ``read_graph``; each with where it is."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput(f"{name}: not UTF-8 text", hint=f"--from basic-memory reads {_SHAPE['basic-memory']}") from None
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")) and "\n{" not in stripped.rstrip():
        try:
            doc = json.loads(stripped, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict) and ("entities" in doc or "relations" in doc):
            for key, kind in (("entities", "entity"), ("relations", "relation")):
                for i, obj in enumerate(doc.get(key) or [], 1):
                    yield f"{name}: {key}[{i}]", ({**obj, "type": kind} if isinstance(obj, dict) else obj)
            return
        if doc is not None and not (isinstance(doc, dict) and doc.get("type") in ("entity", "relation")):
            raise _wrong(name, "basic-memory", doc, "expected one entity or relation a line")
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield f"{name}: line {lineno}", _json(line.encode("utf-8"), f"{name}: line {lineno}", "basic-memory")


def _basic_memory(objects: Iterator[tuple[str, dict]], name: str) -> Export:
    out = Export("basic-memory", {"entities": 0, "observations": 0, "relations": 0})
    for where, obj in objects:
        if not isinstance(obj, dict) or obj.get("type") not in ("entity", "relation"):
            raise InvalidInput(f'{where}: not an entity or a relation (no "type": "entity"/"relation")',
                               hint=f"--from basic-memory reads {_SHAPE['basic-memory']}")
        try:
            if obj["type"] == "entity":
                item = _entity(obj)
                out.found["entities"] += 1
                out.found["observations"] += len(item["observations"])
            else:
                item = _relation(obj)
                out.found["relations"] += 1
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc.message}", hint=exc.hint) from None
        out.items.append(item)
    return out


def _entity(obj: dict) -> dict:
    name = validate.text(_text(obj.get("name") or obj.get("entityName") or obj.get("id")), what="entity name",
                         limit=512).strip()
    kind = obj.get("entityType") or "entity"
    observations = obj.get("observations") or []
    if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
        raise InvalidInput('"observations" must be a list of strings', hint='e.g. "observations": ["Speaks Spanish"]')
    return {"type": "entity", "name": name, "entity_type": validate.name(kind, what="entityType"),
            "observations": [o for o in (_text(o).strip() for o in observations) if o]}


def _relation(obj: dict) -> dict:
    ends = []
    for keys in (("from", "from_id"), ("to", "to_id")):
        value = next((obj[k] for k in keys if obj.get(k)), None)
        ends.append(validate.text(_text(value), what=f'relation "{keys[0]}"', limit=512).strip())
    said = validate.text(_text(obj.get("relationType") or obj.get("relation_type")), what="relationType").strip()
    try:
        predicate = predicate_name(said)
    except InvalidInput:  # e.g. not in ASCII: kept as said, in the text and meta
        predicate = "related_to"
    return {"type": "relation", "from": ends[0], "to": ends[1], "relation": said, "predicate": predicate}


# -- what an export stores: bm export records (brandmind/exchange.py) ------------------------------------
def records(store: "Store", export: Export, *, user: str, now: int | None = None) -> list[dict]:
    """The ``bm export`` records of a Mem0 or Basic Memory export for ``user``: memories,
    nodes (the user's node of a name is reused), edges and mentions, with stable ids (a
    Mem0 memory's from its Mem0 id alone: one changed in Mem0 since is not stored again)."""
    now = now_millis() if now is None else now
    if export.kind == "mem0":
        recs = [_memory(stable_id("m", None, "mem0", user, it["id"]), it["text"], user,
                        it["created"] if it["created"] is not None else now, it["meta"], updated=it["updated"])
                for it in export.items]
    else:
        recs = _graph_records(store, export, user, now)
    limit = store.config.max_memory_chars
    for rec in recs:
        if rec["kind"] == "memory" and len(rec["text"]) > limit:
            what = ", ".join(f"{k} {v}" for k, v in rec["meta"]["imported"].items() if k != "from" and isinstance(v, str))
            raise InvalidInput(f"a {LABEL[export.kind]} memory ({what}) is {len(rec['text']):,} characters, "
                               f"over the memory limit of {limit:,}; nothing was stored",
                               hint="raise `max_memory_chars` with `bm config set`, or shorten it in the file")
    return recs


def _graph_records(store: "Store", export: Export, user: str, now: int) -> list[dict]:
    """The records of Basic Memory's graph (see :func:`records`)."""
    store.catch_up()
    known: dict[str, list[tuple[str, str]]] = {}  # normalised name -> the user's (id, type), oldest first
    for nid, kind, name in reversed(list(node_keys(store.sql, user))):
        known.setdefault(norm(name), []).append((nid, kind))
    out: dict[tuple, dict] = {}
    nodes: dict[str, str] = {}

    def node(name: str, kind: str) -> str:
        key = norm(name) or name
        if key not in nodes:
            rows = known.get(key, [])
            found = ([r for r in rows if r[1] == kind] or [r for r in rows if r[1] == "entity"]
                     or (rows if kind == "entity" else []))
            nodes[key] = found[0][0] if found else stable_id("n", 0, "node", user, key)
            if not found:
                out[("node", nodes[key])] = {"kind": "node", "id": nodes[key], "user": user, "type": kind,
                                             "name": name, "labels": [], "created": iso(now),
                                             "meta": {"imported": {"from": "basic-memory"}}}
        return nodes[key]

    for it in (i for i in export.items if i["type"] == "entity"):  # typed nodes first
        nid = node(it["name"], it["entity_type"])
        for obs in it["observations"]:
            mid = stable_id("m", 0, "basic-memory", user, it["name"], obs)
            meta = {"from": "basic-memory", "entity": it["name"], "entity_type": it["entity_type"]}
            out[("memory", mid)] = _memory(mid, f"{it['name']}: {obs}", user, now, meta)
            out[("mention", nid, mid)] = {"kind": "mention", "node": nid, "memory": mid}
    for it in (i for i in export.items if i["type"] == "relation"):
        src, dst = node(it["from"], "entity"), node(it["to"], "entity")
        mid = stable_id("m", 0, "basic-memory", user, it["from"], it["relation"], it["to"])
        meta = {"from": "basic-memory", "relation": it["relation"]}
        out[("memory", mid)] = {**_memory(mid, f"{it['from']} {it['relation']} {it['to']}", user, now, meta),
                                "subject": it["from"], "predicate": it["predicate"], "object": it["to"]}
        eid = stable_id("e", 0, "basic-memory", user, src, it["predicate"], dst)
        out[("edge", eid)] = {"kind": "edge", "id": eid, "src": src, "dst": dst, "predicate": it["predicate"],
                              "weight": 1.0, "evidence": [mid], "created": iso(now), "meta": {"imported": meta}}
        for end in dict.fromkeys((src, dst)):
            out[("mention", end, mid)] = {"kind": "mention", "node": end, "memory": mid}
    return list(out.values())


def _memory(mid: str, text: str, user: str, ts: int, imported: dict, updated: int | None = None) -> dict:
    return {"kind": "memory", "id": mid, "text": text, "type": "fact", "user": user, "agent": None,
            "importance": 0.5, "ts": iso(ts), "updated": iso(updated) if updated is not None else None,
            "valid_from": None, "valid_to": None, "source": imported["from"],
            "provenance": [{k: v for k, v in imported.items() if k in ("from", "id", "entity", "relation")}],
            "meta": {"imported": imported}}


def new_records(store: "Store", recs: list[dict]) -> list[dict]:
    """The records not in the store yet (what an import would add)."""
    has = {"memory": lambda r: q.has_memory(store.sql, r["id"]), "node": lambda r: q.has_node(store.sql, r["id"]),
           "edge": lambda r: q.has_edge(store.sql, r["id"]),
           "mention": lambda r: q.has_mention(store.sql, r["node"], r["memory"])}
    return [r for r in recs if not has[r["kind"]](r)]


def count_new(store: "Store", recs: list[dict], report: dict) -> list[dict]:
    """The records not in the store yet (what the import adds, in one transaction:
    ``Memory.import_from``), counted by kind in ``report["new"]``; ``report["duplicates"]``
    counts the ones the store has."""
    fresh = new_records(store, recs)
    report["duplicates"] += len(recs) - len(fresh)
    for rec in fresh:
        key = {"memory": "memories", "node": "nodes", "edge": "edges", "mention": "mentions"}[rec["kind"]]
        report["new"][key] += 1
    return fresh


def as_lines(recs: list[dict]) -> Iterator[str]:
    """Records as the lines of a ``bm export`` file (what brandmind/exchange.py reads)."""
    return (json.dumps(r, ensure_ascii=False) for r in recs)


def new_report(export: Export, *, dry_run: bool) -> dict:
    """The report of an import: what the file holds, what is (or, dry, would be) new."""
    new = ({"turns": 0} if export.kind in CONVERSATIONS
           else {"memories": 0, "nodes": 0, "edges": 0, "mentions": 0})
    return {"from": export.kind, "dry_run": dry_run, "found": dict(export.found), "skipped": export.skipped,
            "new": new, "duplicates": 0}
