"""The ``check`` hook of each op kind (brandmind/ops.py): what a payload must hold before it
may enter the op log; and the screen and quarantine of ops that fail it.

Every op is checked here whatever made it: a local write (``LogTxn.append``), an import
(``exchange.import_lines``, which names the line), an op pulled from another replica
(``replication.receive_batch`` via :func:`screen`) and, for logs written before these
checks existed, the apply step (``projection.apply_sql_side``), which quarantines an op
that fails them instead of applying it.

The rules are those of ``remember`` / ``ingest`` (brandmind/validate.py) for the fields
they share, and for the rest exactly what the projection relies on (types, ranges, ids
that are safe as keys and file names).  Fields a check does not know are left alone, so
a newer peer can add fields; an op kind this version does not know is not checked (it is
stored, and not applied: see projection.py).

A pulled op that fails its check is stored with its payload replaced by
``{"refused": "<why>"}`` (:func:`screen`): the content never enters the log, the peer's
stream stays contiguous (its later ops keep arriving and applying), and the apply step
records the op in the ``quarantine`` table, which ``bm doctor`` lists.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable

from . import validate
from .clock import MAX_MS, MIN_MS, hlc_key
from .errors import InvalidInput
from .merge import decode_state_vector
from .ops import REFUSED, Kind, provide, rule
from .storage import quarantine as q
from .storage.blocks import FIELDS, MAX_LIMIT, SCOPES, validate_handle, validate_label

# memory, bead, node, edge and block ids: letters, digits and a few separators, never a path
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
_DIGEST = re.compile(r"[0-9a-f]{32}")
_B64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")

Check = Callable[[dict], None]


class _Bad(InvalidInput):
    pass


def _bad(message: str, hint: str = "the file or device this came from wrote a bad value: fix it there") -> _Bad:
    return _Bad(message, hint=hint)


def _need(p: dict, key: str) -> Any:
    if key not in p:
        raise _bad(f'missing field "{key}"')
    return p[key]


def _id(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise _bad(f"invalid {what} {value!r}",
                   hint=f"a {what} is 1-128 letters, digits, '_', '.', ':', '@' or '-', e.g. m_01H…")
    return value


def _opt(p: dict, key: str, check: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    if p.get(key) is not None:
        check(p[key], *args, **kwargs)


def _digest(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _DIGEST.fullmatch(value):
        raise _bad(f"invalid {what} {value!r}", hint=f"a {what} is 32 lowercase hex digits")
    return value


def _string(value: Any, what: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise _bad(f"{what} must be a string, got {type(value).__name__}")
    if not empty:
        return validate.text(value, what=what)
    if "\x00" in value:
        raise _bad(f"{what} contains a NUL character")
    return value


def _time(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_MS <= value <= MAX_MS:
        raise _bad(f"{what} must be a time in epoch milliseconds (years 1-9999), got {value!r}")
    return value


def _number(value: Any, what: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not lo <= value <= hi:
        span = f" from {lo:g} to {hi:g}" if math.isfinite(lo) and math.isfinite(hi) else ""
        raise _bad(f"{what} must be a finite number{span}, got {value!r}")
    return value


def _count(value: Any, what: str, lo: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value < 2**63:
        raise _bad(f"{what} must be a whole number of at least {lo}, got {value!r}")
    return value


def json_value(value: Any, what: str) -> Any:
    return validate.json_value(value, what=what)


def _object(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise _bad(f"{what} must be a JSON object, got {type(value).__name__}",
                   hint=f'e.g. "{what}": {{"source": "slack"}}')
    return json_value(value, what)


def _list(value: Any, what: str, item: Callable[[Any, str], Any] | None = None) -> list:
    if type(value) is not list:
        raise _bad(f"{what} must be a list, got {type(value).__name__}")
    if item is not None:
        for entry in value:
            item(entry, f"an entry of {what}")
    return json_value(value, what)


def _provenance(value: Any, what: str = "provenance") -> list:
    if type(value) is not list:
        raise _bad(f"{what} must be a list, got {type(value).__name__}")
    for entry in value:
        if type(entry) is not dict:
            raise _bad(f"an entry of {what} must be a JSON object, got {type(entry).__name__}")
    return json_value(value, what)


def _name(value: Any, what: str) -> str:
    return validate.name(value, what=what)


def _redacted_ok(p: dict) -> bool:
    """A payload redacted by a forget (``{"id": ..., "redacted": true}`` and the like:
    the ``redact`` hooks of brandmind/ops.py): only its keys are checked."""
    if "redacted" not in p:
        return False
    if p["redacted"] is not True:
        raise _bad(f'"redacted" must be true, got {p["redacted"]!r}')
    for key in ("id", "into", "node", "memory"):
        if p.get(key) is not None:
            _id(p[key], key)
    if p.get("user") is not None:
        _name(p["user"], "user")
    return True


# -- the checks, one per kind ------------------------------------------------------------------------
# The two kinds a pull or an ingest carries by the thousand check each field with an inline
# test first; only a value that fails it goes to the helper, which raises the error.
_id_ok = _ID.match
_name_ok = validate.NAME.match
_TIMES = ("valid_from", "valid_to", "recorded_at", "updated", "expires_at")
_SPO = ("subject", "predicate", "object")


def _text_ok(v: Any) -> bool:
    return type(v) is str and v != "" and not v.isspace() and "\x00" not in v and (v.isascii() or _utf8(v))


def _utf8(v: str) -> bool:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_name(v: Any) -> bool:
    return type(v) is str and _name_ok(v) is not None and v == v.strip()


def _is_time(v: Any) -> bool:
    return type(v) is int and MIN_MS <= v <= MAX_MS


def _is_share(v: Any) -> bool:
    return (type(v) is float or type(v) is int) and 0.0 <= v <= 1.0


def memory_add(p: dict) -> None:
    g = p.get
    v = g("id")
    if not (type(v) is str and _id_ok(v)):
        _id(_need(p, "id"), "memory id")
    if not _text_ok(g("text")):
        validate.text(_need(p, "text"))
    if g("type") not in validate.MEMORY_TYPES:
        validate.memory_type(_need(p, "type"))
    if not _is_name(g("user")):
        _name(_need(p, "user"), "user")
    v = g("agent")
    if v is not None and not _is_name(v):
        _name(v, "agent")
    if not _is_share(g("importance")):
        _number(_need(p, "importance"), "importance", 0.0, 1.0)
    if not _is_time(g("ts")):
        _time(_need(p, "ts"), "ts")
    for key in _TIMES:
        v = g(key)
        if v is not None and not _is_time(v):
            _time(v, key)
    if not _text_ok(g("source")):
        _string(_need(p, "source"), "source")
    if "provenance" in p:
        _provenance(p["provenance"])
    if "meta" in p:
        _object(p["meta"], "meta")
    for key in _SPO:
        v = g(key)
        if v is not None and not _text_ok(v):
            _string(v, key)


def bead_add(p: dict) -> None:
    bead = _need(p, "bead")
    if type(bead) is not dict:
        raise _bad(f"bead must be a JSON object, got {type(bead).__name__}")
    g = bead.get
    v = g("id")
    if not (type(v) is str and _id_ok(v)):
        _id(_need(bead, "id"), "bead id")
    if not _is_time(g("ts")):
        _time(_need(bead, "ts"), "ts")
    if not _is_name(g("user")):
        _name(_need(bead, "user"), "user")
    if not _is_name(g("role")):
        _name(_need(bead, "role"), "role")
    for key in ("speaker", "thread"):
        v = g(key)
        if v is not None and not _is_name(v):
            _name(v, key)
    for key in ("source", "turn_id", "key"):
        v = g(key)
        if v is not None and not _text_ok(v):
            _string(v, key)
    v = g("importance", 0.5)
    if not _is_share(v):
        _number(v, "importance", 0.0, 1.0)
    if g("spans") is not None:
        _list(bead["spans"], "spans")
    if g("meta") is not None:
        _object(bead["meta"], "meta")
    _opt(bead, "size", _count, "size")
    _opt(bead, "expires_at", _time, "expires_at")  # --ttl (brandmind/expiry.py)
    if "blob" in bead:
        blob = bead["blob"]
        if not isinstance(blob, str) or not re.fullmatch(r"[0-9a-f]{64}", blob):
            raise _bad(f"blob must be a sha256 digest, got {blob!r}")
    elif not _text_ok(g("content")):
        validate.text(_need(bead, "content"), what="content")


def memory_forget(p: dict) -> None:
    _id(_need(p, "id"), "memory id")


def memory_pin(p: dict) -> None:  # bm pin / unpin (brandmind/expiry.py)
    _id(_need(p, "id"), "memory id")
    _opt(p, "user", _name, "user")
    if not isinstance(_need(p, "pinned"), bool):
        raise _bad(f"pinned must be true or false, got {p['pinned']!r}")


def user_forget(p: dict) -> None:
    _name(_need(p, "user"), "user")


def bead_forget(p: dict) -> None:
    _id(_need(p, "id"), "bead id")
    _opt(p, "user", _name, "user")  # whose turn it was (mirrors delete it there); older ops lack it
    _opt(p, "key", _digest, "message key digest")  # its ingest key, kept forgotten; older ops lack it
    _opt(p, "was", _digest, "superseded text digest")  # an edit's old text
    if (p.get("key") or p.get("was")) and not p.get("user"):
        raise _bad('a bead.forget with "key" or "was" names its "user"')


def memory_retire(p: dict) -> None:
    _id(_need(p, "id"), "memory id")
    _opt(p, "user", _name, "user")
    _time(_need(p, "retired_at"), "retired_at")
    _opt(p, "valid_to", _time, "valid_to")
    _opt(p, "by", _id, "memory id")
    _opt(p, "reason", _string, "reason", empty=True)


def memory_confirm(p: dict) -> None:
    _id(_need(p, "id"), "memory id")
    _opt(p, "user", _name, "user")
    _time(_need(p, "ts"), "ts")
    if p.get("provenance") is not None:
        _provenance(p["provenance"])
    if "count" in p:
        _count(p["count"], "count", 1)


def memory_merge(p: dict) -> None:
    _id(_need(p, "into"), "memory id")
    _list(_need(p, "ids"), "ids", _id)
    _time(_need(p, "ts"), "ts")
    _opt(p, "user", _name, "user")
    if p.get("provenance") is not None:
        _provenance(p["provenance"])


def kg_node(p: dict) -> None:
    _id(_need(p, "id"), "node id")
    _name(_need(p, "user"), "user")
    _name(_need(p, "type"), "node type")
    validate.text(_need(p, "name"), what="node name")
    if "labels" in p:
        _list(p["labels"], "labels", _string)
    if "meta" in p:
        _object(p["meta"], "meta")
    _time(_need(p, "ts"), "ts")


def kg_edge(p: dict) -> None:
    _id(_need(p, "id"), "edge id")
    _id(_need(p, "src"), "src")
    _id(_need(p, "dst"), "dst")
    _string(_need(p, "predicate"), "predicate")
    if "weight" in p:
        _number(p["weight"], "weight")
    if "evidence" in p:
        _list(p["evidence"], "evidence", _id)
    if "meta" in p:
        _object(p["meta"], "meta")
    _time(_need(p, "ts"), "ts")
    for key in ("valid_from", "valid_to", "recorded_at"):
        _opt(p, key, _time, key)
    _opt(p, "user", _name, "user")


def kg_edge_retire(p: dict) -> None:
    _id(_need(p, "id"), "edge id")
    _time(_need(p, "retired_at"), "retired_at")
    _opt(p, "valid_to", _time, "valid_to")


def kg_mention(p: dict) -> None:
    _id(_need(p, "node"), "node id")
    _id(_need(p, "memory"), "memory id")


def kg_node_remove(p: dict) -> None:  # bm kg rm (brandmind/graph.py)
    _id(_need(p, "id"), "node id")
    _name(_need(p, "user"), "user")
    _time(_need(p, "ts"), "ts")


def kg_node_merge(p: dict) -> None:  # bm kg merge (brandmind/graph.py)
    kg_node_remove(p)
    _id(_need(p, "into"), "node id")


def _block_owner(p: dict) -> None:
    _id(_need(p, "id"), "block id")
    scope = _need(p, "scope")
    if scope not in SCOPES:
        raise _bad(f"block scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if scope != "persona":  # the owner (a persona block's update names its writer, or no one)
        _name(_need(p, "user"), "user")
    else:
        _opt(p, "user", _name, "user")
    _opt(p, "agent", _name, "agent")


def block_define(p: dict) -> None:
    _block_owner(p)
    validate_label(_need(p, "label"))
    if p["scope"] == "persona":
        validate_handle(_need(p, "persona"))
    _string(_need(p, "description"), "description", empty=True)
    _count(_need(p, "limit"), "limit", 1)
    if p["limit"] > MAX_LIMIT:
        raise _bad(f"limit must be at most {MAX_LIMIT:,}, got {p['limit']!r}")
    if not isinstance(_need(p, "read_only"), bool):
        raise _bad(f"read_only must be true or false, got {p['read_only']!r}")
    _list(p.get("explicit", []), "explicit", _string)
    unknown = [f for f in p.get("explicit", []) if f not in FIELDS]
    if unknown:
        raise _bad(f"explicit names unknown block field {unknown[0]!r}")


def _b64(value: Any, what: str) -> bytes:
    import base64
    import binascii

    if not isinstance(value, str) or not _B64.match(value):
        raise _bad(f"{what} must be base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(f"{what} is not valid base64") from None


def block_update(p: dict) -> None:
    _block_owner(p)
    _count(_need(p, "origin"), "origin")
    _count(_need(p, "seq"), "seq", 1)
    if p.get("deps") is not None:
        try:
            decode_state_vector(_b64(p["deps"], "deps"))
        except ValueError:
            raise _bad("deps is not a state vector") from None
    data = _b64(_need(p, "update"), "update")
    import pycrdt

    try:  # decodable (a pending update, missing what it builds on, is fine)
        pycrdt.Doc().apply_update(data)
    except ValueError as exc:
        raise _bad(f"update is not a CRDT update ({exc})") from None


def skill_add(p: dict) -> None:
    validate.skill_name(_need(p, "name"))
    validate.skill_text(_need(p, "description"), "description", validate.SKILL_MAX_DESCRIPTION)
    validate.skill_schema(p.get("input_schema"))
    validate.skill_examples(_list(p.get("examples", []), "examples"))
    validate.skill_tags(_list(p.get("tags", []), "tags", _string))
    version = _need(p, "version")
    if not isinstance(version, str) or validate.skill_version(version) != version:
        raise _bad(f"invalid skill version {version!r}", hint="e.g. 1.0.0")
    validate.skill_text(p.get("body", ""), "body", validate.SKILL_MAX_BODY, empty=True)
    _opt(p, "source", _string, "source", empty=True)
    validate.skill_meta(p.get("meta"))
    json_value(p.get("meta"), "meta")
    json_value(p.get("input_schema"), "input_schema")
    _time(_need(p, "ts"), "ts")


def skill_remove(p: dict) -> None:
    validate.skill_name(_need(p, "name"))
    _opt(p, "ts", _time, "ts")


def persona_define(p: dict) -> None:
    validate.persona_handle(_need(p, "handle"))
    validate.persona({k: p.get(k) for k in validate.PERSONA_FIELDS})
    _opt(p, "source", _string, "source")
    _opt(p, "ts", _time, "ts")
    _opt(p, "created_at", _time, "created_at")


def persona_unassign(p: dict) -> None:
    _name(_need(p, "user"), "user")
    validate.persona_handle(_need(p, "handle"))


def persona_assign(p: dict) -> None:
    persona_unassign(p)
    _number(_need(p, "confidence"), "confidence", 0.0, 1.0)
    _time(_need(p, "discovered_at"), "discovered_at")
    _time(_need(p, "last_confirmed"), "last_confirmed")


def persona_doc(p: dict) -> None:
    agent = _name(_need(p, "agent"), "agent")
    doc = validate.persona_doc(_need(p, "doc"), agent=agent)
    if doc["version"] is None:
        raise _bad("a persona document needs a version")
    json_value(p["doc"], "doc")
    _opt(p, "ts", _time, "ts")


CHECKS: dict[Kind, Check] = {
    Kind.MEMORY_ADD: memory_add,
    Kind.MEMORY_FORGET: memory_forget,
    Kind.MEMORY_PIN: memory_pin,
    Kind.MEMORY_RETIRE: memory_retire,
    Kind.MEMORY_CONFIRM: memory_confirm,
    Kind.MEMORY_MERGE: memory_merge,
    Kind.USER_FORGET: user_forget,
    Kind.BEAD_ADD: bead_add,
    Kind.BEAD_FORGET: bead_forget,
    Kind.KG_NODE: kg_node,
    Kind.KG_EDGE: kg_edge,
    Kind.KG_EDGE_RETIRE: kg_edge_retire,
    Kind.KG_MENTION: kg_mention,
    Kind.KG_NODE_REMOVE: kg_node_remove,
    Kind.KG_NODE_MERGE: kg_node_merge,
    Kind.BLOCK_DEFINE: block_define,
    Kind.BLOCK_UPDATE: block_update,
    Kind.SKILL_ADD: skill_add,
    Kind.SKILL_REMOVE: skill_remove,
    Kind.PERSONA_DEFINE: persona_define,
    Kind.PERSONA_ASSIGN: persona_assign,
    Kind.PERSONA_UNASSIGN: persona_unassign,
    Kind.PERSONA_DOC: persona_doc,
}
provide("check", CHECKS)


def failure(kind: str, payload: Any) -> InvalidInput | None:
    """The InvalidInput (message naming the field, and a hint) that ``payload`` fails as a
    payload of ``kind``, or None when it is valid (or ``kind`` is not known here)."""
    if not isinstance(payload, dict):
        return _bad(f"the payload must be a JSON object, got {type(payload).__name__}")
    r = rule(kind)
    checker = r.check if r is not None else None
    if checker is None:
        return None
    try:
        if not _redacted_ok(payload):
            checker(payload)
    except InvalidInput as exc:
        return exc
    except RecursionError:  # pragma: no cover - json_value is iterative; belt and braces
        return _bad("a value is nested too deeply")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a shape no check foresaw
        return _bad(f"a field has an unexpected shape ({type(exc).__name__}: {exc})")
    return None


def check(kind: str, payload: Any) -> None:
    """Raise InvalidInput unless ``payload`` is a valid payload of ``kind``."""
    exc = failure(kind, payload)
    if exc is not None:
        raise InvalidInput(f"bad {kind} op: {exc.message}", hint=exc.hint)


def problem(op: dict) -> str | None:
    """Why a stored op must not be applied: it was refused when pulled, or it fails its
    check (a log written by an older bm); None when it may be applied."""
    p = op.get("payload")
    if isinstance(p, dict) and REFUSED in p:
        return str(p[REFUSED])
    exc = failure(op.get("kind"), p)
    return None if exc is None else exc.message


def screen(op: Any) -> Any:
    """A pulled op as it may be stored: unchanged when valid, else with its payload replaced
    by ``{"refused": why}`` (id, HLC and kind kept, so the peer's stream stays whole).
    Anything that is not shaped like an op is left for ``replication.receive`` to refuse."""
    if not isinstance(op, dict) or not isinstance(op.get("kind"), str) or not isinstance(op.get("payload"), dict):
        return op
    p = op["payload"]
    if REFUSED in p:  # refused by the device that relayed it
        return {**op, "payload": {REFUSED: str(p[REFUSED])[:500]}}
    why = problem(op)
    if why is None:
        return op
    return {**op, "payload": {REFUSED: why[:500]}}


# -- the quarantine (SQLite table ``quarantine``, migration 0012; brandmind/storage/quarantine.py) -----
def quarantine(sql: Any, op: dict, error: str) -> None:
    """Record that ``op`` is not applied, and why (the caller counts it as applied)."""
    try:
        hk = hlc_key(op["hlc"])
    except (KeyError, TypeError, ValueError, IndexError):
        hk = None
    q.put(sql, str(op.get("id")), str(op.get("kind")), hk, error[:500])


def quarantined(sql: Any) -> list[dict]:
    """The ops set aside, oldest HLC first: {op_id, kind, hlc, error}."""
    return q.rows(sql)
