"""Reading conversation messages (JSONL) for ``bm ingest``.

One message a line: ``{"id"?, "role", "speaker"?, "content", "ts"?, "thread"?, "meta"?}``.
Parsing is pure: it turns a line into a validated message dict or raises
InvalidInput naming the line.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Iterable, Iterator

from . import validate
from .clock import parse_time
from .errors import InvalidInput

FIELDS = {"id", "role", "speaker", "content", "ts", "thread", "meta"}


def _no_constant(name: str) -> None:
    """NaN and Infinity are not JSON; storing them would make bm's own output unreadable."""
    raise json.JSONDecodeError(f"{name} is not valid JSON", name, 0)


def parse_message(line: str | bytes, lineno: int) -> dict | None:
    """The message on one JSONL line, or None for a blank line."""
    where = f"line {lineno}"
    line = validate.utf8(line, what=where, hint="convert the file to UTF-8, or pass --skip-bad")
    if not line.strip():
        return None
    try:
        obj = json.loads(line, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})",
                           hint="fix that line, or pass --skip-bad to report bad lines and go on") from None
    except RecursionError:  # e.g. 200,000 nested brackets
        raise validate.too_deep(where, "fix that line, or pass --skip-bad to report bad lines and go on") from None
    return message_from_obj(obj, where)


def message_from_obj(obj: Any, where: str) -> dict:
    hint = 'each line is {"role": "user", "content": "..."} with optional id, speaker, ts, thread, meta'
    if not isinstance(obj, dict):
        raise InvalidInput(f"{where}: expected a JSON object, got {type(obj).__name__}", hint=hint)
    unknown = sorted(set(obj) - FIELDS)
    if unknown:
        raise InvalidInput(f"{where}: unknown field(s) {', '.join(unknown)}", hint=hint)
    missing = [f'"{key}"' for key in ("role", "content") if obj.get(key) is None]
    if missing:
        raise InvalidInput(f"{where}: missing {' and '.join(missing)}", hint=hint)
    try:
        role = validate.name(obj.get("role"), what="role")
        content = validate.text(obj.get("content"), what="content")
        speaker = obj.get("speaker")
        if speaker is not None:
            speaker = validate.name(speaker, what="speaker")
        thread = obj.get("thread")
        if thread is not None:
            thread = validate.name(thread, what="thread")
        msg_id = obj.get("id")
        if msg_id is not None:
            if isinstance(msg_id, (int, float)) and not isinstance(msg_id, bool):
                msg_id = str(msg_id)
            msg_id = validate.name(msg_id, what="id")
        ts = parse_time(obj.get("ts"), field="ts")
        meta = validate.meta(obj.get("meta"))
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc.message}", hint=exc.hint) from None
    return {"id": msg_id, "role": role, "speaker": speaker, "content": content, "ts": ts,
            "thread": thread, "meta": meta}


def message_key(user: str, msg: dict) -> str | None:
    """What makes a message provably the one stored before, or None when nothing does.

    Its ``id`` (within its thread); else an explicit ``ts`` together with thread, role,
    speaker and content.  A message with neither is always new: in a live agent loop a
    second "yes" (or an assistant repeating the user's words) is a new turn, not a copy."""
    if msg.get("id") is not None:
        return f"{user}\x1fid\x1f{msg['thread'] or ''}\x1f{msg['id']}"
    if msg.get("ts") is None:
        return None
    digest = hashlib.sha256("\x1f".join([
        msg.get("thread") or "", str(msg["ts"]), msg.get("role") or "", msg.get("speaker") or "",
        msg["content"],
    ]).encode()).hexdigest()
    return f"{user}\x1fts\x1f{digest}"


# bead_keys db: what a forget or an edit leaves of a message, so a re-sent one does not undo them,
# each as ``kind`` + user + ``\0`` + 16 bytes of a digest -> the HLC key of the op that left it
# (carried by the ``bead.forget`` op, so a rebuild and every replica keep them; forgetting the
# user drops those stamped before: ``LogTxn.drop_marks``): a forgotten message key (``key_digest``),
# and a text an edit replaced (``text_digest``, ``was``).
FORGOTTEN_KEY = b"\x00"
SUPERSEDED_KEY = b"\x01"


def key_digest(key: str) -> str:
    """The digest a forgotten message key is kept as (hex; not the key itself)."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def text_digest(key: str, content_sha256: str) -> str:
    """The digest a superseded text of the message ``key`` is kept as (from the sha256 hex of
    the text, which a blob is named by: an edit need not read the old text)."""
    return hashlib.sha256(f"{key}\x1f{content_sha256}".encode()).hexdigest()[:32]


def text_sha(text: str) -> str:
    """The sha256 hex of a text's UTF-8 bytes (what a blob holding it is named by)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def mark_key(kind: bytes, user: str, digest: str) -> bytes:
    """The ``bead_keys`` entry of a forgotten key or superseded text (``kind``) of ``user``
    (with ``digest`` "": the prefix of all of theirs of that kind)."""
    return kind + user.encode() + b"\0" + bytes.fromhex(digest)


def _user_of(key: str) -> str:
    return key.split("\x1f", 1)[0]  # a message key starts with its user (message_key)


def forgotten_key(key: str) -> bytes:
    """The ``bead_keys`` entry of a forgotten message ``key``."""
    return mark_key(FORGOTTEN_KEY, _user_of(key), key_digest(key))


def superseded(get: Callable[[bytes], Any], key: str, content: str) -> bool:
    """Whether ``content`` is a text the message ``key`` had before an edit replaced it."""
    return get(mark_key(SUPERSEDED_KEY, _user_of(key), text_digest(key, text_sha(content)))) is not None


def _keys(user: str, msg: dict) -> list[str]:
    """The keys a message may be stored under: its key, and for a line with a ts and no id the
    key bm gave it before the role was part of it (thread + ts + speaker + content)."""
    key = message_key(user, msg)
    if key is None:
        return []
    if msg.get("id") is not None:
        return [key]
    legacy = hashlib.sha256("\x1f".join([
        msg.get("thread") or "", str(msg["ts"]), msg.get("speaker") or "", msg["content"],
    ]).encode()).hexdigest()
    return [key, f"{user}\x1fh\x1f{legacy}"]


def known_bead(get: Callable[[bytes], Any], user: str, msg: dict) -> str | None:
    """The bead a message was stored as, by its key; ``get`` reads the ``bead_keys`` db (under
    either of its keys, so re-running a file ingested before the role was keyed stores nothing)."""
    for key in _keys(user, msg):
        found = get(key.encode())
        if found is not None:
            return bytes(found).decode()
    return None


def same_text(bead: dict, content: str) -> bool:
    """Whether a stored bead says ``content`` (a blob's name is the sha256 of its bytes): a
    message re-sent with its id and another text is an edit."""
    if "content" in bead:
        return bead["content"] == content
    return bead.get("blob") == text_sha(content)


def forgotten(get: Callable[[bytes], Any], user: str, msg: dict) -> bool:
    """Whether the message was stored once and its turn forgotten since (its key is kept as a
    digest: FORGOTTEN_KEY): re-sending it stores nothing."""
    return any(get(forgotten_key(key)) is not None for key in _keys(user, msg))


def read_messages(lines: Iterable[str | bytes | dict], report: dict, *, skip_bad: bool,
                  on_bad: Callable[[InvalidInput], None]) -> Iterator[dict]:
    """The messages of a JSONL stream (or of dicts), in order; ``report["lines"]`` counts the
    lines read.  A bad line goes to ``report["bad"]`` with ``skip_bad``; otherwise
    ``on_bad(error)`` may finish what came before and reword the error, which is raised."""
    for lineno, line in enumerate(lines, 1):
        report["lines"] = lineno
        try:
            msg = (message_from_obj(line, f"line {lineno}") if isinstance(line, dict)
                   else parse_message(line, lineno))
        except InvalidInput as exc:
            if not skip_bad:
                on_bad(exc)
                raise
            report["bad"].append({"line": lineno, "error": exc.message})
            continue
        if msg is not None:
            yield msg
