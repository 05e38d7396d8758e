"""Checks on what callers hand bm, each failing with an InvalidInput that names the fix."""
from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import InvalidInput

MEMORY_TYPES = ("fact", "preference", "decision", "insight", "question", "concept", "episode")
NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")


def utf8(value: str | bytes, *, what: str = "text",
         hint: str = "convert it first, e.g. `iconv -f latin1 -t utf-8`") -> str:
    """Bytes decoded as UTF-8 (strings pass through), or InvalidInput naming the bad byte."""
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what} is not valid UTF-8 (byte {exc.start})", hint=hint) from None


def text(value: Any, *, what: str = "text", limit: int | None = None) -> str:
    if isinstance(value, bytes):
        value = utf8(value, what=what)
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}",
                           hint=f"pass the {what} as a JSON string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates: undecodable bytes from argv or a pipe
        raise InvalidInput(f"{what} is not valid UTF-8 (character {exc.start})",
                           hint="convert it first, e.g. `iconv -f latin1 -t utf-8`") from None
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character", hint="strip NUL bytes from the input")
    if not value.strip():
        raise InvalidInput(f"{what} is empty", hint=f"give some non-blank {what}")
    if limit is not None and len(value) > limit:
        raise InvalidInput(
            f"{what} is {len(value):,} characters, over the memory limit of {limit:,}",
            hint="store long content as a bead (`bm beads add`), which offloads it to the blob "
                 "store, or raise `max_memory_chars` with `bm config set`")
    return value


def name(value: Any, *, what: str) -> str:
    if not isinstance(value, str) or not NAME.match(value) or value != value.strip():
        raise InvalidInput(f"invalid {what} {value!r}",
                           hint=f"a {what} is 1-128 printable characters without surrounding spaces")
    return value


def memory_type(value: Any) -> str:
    if value not in MEMORY_TYPES:
        raise InvalidInput(f"unknown memory type {value!r}", hint="use one of: " + ", ".join(MEMORY_TYPES))
    return value


def importance(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not 0.0 <= number <= 1.0:
        raise InvalidInput(f"importance must be a number from 0 to 1, got {value!r}",
                           hint="e.g. --importance 0.8")
    return number


def meta(value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"meta must be a JSON object, got {type(value).__name__}",
                           hint='e.g. "meta": {"source": "slack"}')
    return json_value(value, what="meta")


MAX_DEPTH = 64  # nesting of a JSON value bm stores (meta, provenance, ...)


def json_value(value: Any, *, what: str) -> Any:
    """Plain JSON (string keys, finite numbers) nested at most MAX_DEPTH deep: a deep value
    is refused here, never a RecursionError somewhere later (the walk stops at MAX_DEPTH)."""
    _walk(value, 1, what)
    return value


_JSON_HINT = "use strings, numbers, booleans, null, lists and objects, nested a few levels at most"


def _walk(v: Any, depth: int, what: str) -> None:
    t = type(v)
    if t is str or t is int or v is None or t is bool:
        return
    if t is dict or t is list or t is tuple or isinstance(v, (dict, list, tuple)):
        if depth > MAX_DEPTH:
            raise InvalidInput(f"{what} is nested more than {MAX_DEPTH} levels deep", hint=_JSON_HINT)
        if isinstance(v, dict):
            for k, item in v.items():
                if type(k) is not str and not isinstance(k, str):
                    raise InvalidInput(f"{what} has a key that is not a string ({k!r})", hint=_JSON_HINT)
                ti = type(item)
                if not (ti is str or ti is int or item is None or ti is bool):
                    _walk(item, depth + 1, what)
        else:
            for item in v:
                ti = type(item)
                if not (ti is str or ti is int or item is None or ti is bool):
                    _walk(item, depth + 1, what)
    elif isinstance(v, float):
        if not math.isfinite(v):
            raise InvalidInput(f"{what} holds {v!r}, which is not JSON", hint=_JSON_HINT)
    elif not isinstance(v, (str, int)):
        raise InvalidInput(f"{what} holds a {type(v).__name__}, which is not JSON", hint=_JSON_HINT)


def too_deep(where: str, hint: str) -> InvalidInput:
    """The error of a JSON text nested deeper than the parser goes (json raises RecursionError)."""
    return InvalidInput(f"{where}: JSON nested too deeply to read", hint=hint)


# -- personas (brandmind/personas.py; opcheck checks persona ops with these) --------------------
PERSONA_LIST_FIELDS = ("typical_kpis", "typical_motivations", "quintessential_queries", "keywords")
PERSONA_FIELDS = ("handle", "industry", "role", "description", *PERSONA_LIST_FIELDS)
# other spellings accepted on input (a file written after the seed's SQL columns, or short names)
PERSONA_ALIASES = {"persona_handle": "handle", "professional_role": "role", "kpis": "typical_kpis",
                   "motivations": "typical_motivations", "queries": "quintessential_queries"}
PERSONA_DOC_FIELDS = ("id", "name", "version", "description", "goals", "norms", "traits", "skills")
# output-only fields (a `bm persona show` result can be fed back)
_PERSONA_OUTPUT = ("source", "created_at", "updated_at", "stored", "users", "block", "holders", "updated")
_HANDLE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)+$")
HANDLE_MAX = 64
_PERSONA_TEXT_MAX = 4000
_PERSONA_LIST_MAX = 50
_PERSONA_DOC_MAX = 64_000


def slug(value: str) -> str:
    """``"Real Estate"`` -> ``real_estate``."""
    return re.sub(r"[^a-z0-9]+", "_", value.casefold()).strip("_")


def persona_handle(handle: Any) -> str:
    """A persona handle: ``<industry>_<role>`` in lower case letters, digits and ``_``."""
    if not isinstance(handle, str) or not _HANDLE.match(handle) or len(handle) > HANDLE_MAX:
        raise InvalidInput(f"invalid persona handle {handle!r}",
                           hint="a handle is <industry>_<role> in lower case letters, digits and _, "
                                f"at most {HANDLE_MAX} characters, e.g. qsr_real_estate")
    return handle


def _persona_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"persona {what} must be a non-empty string, got {value!r}",
                           hint=f"give the {what}, e.g. --{what.replace('_', '-')} ...")
    value = text(value, what=what)
    if len(value) > _PERSONA_TEXT_MAX:
        raise InvalidInput(f"persona {what} is {len(value):,} characters, over {_PERSONA_TEXT_MAX:,}",
                           hint="shorten it")
    return value.strip()


def _persona_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [line.strip(" -*\t") for line in value.splitlines()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"persona {what} must be a list of strings, got {type(value).__name__}",
                           hint=f'e.g. "{what}": ["first", "second"]')
    out = [text(v, what=what).strip() for v in value if v.strip()]
    if len(out) > _PERSONA_LIST_MAX or any(len(v) > _PERSONA_TEXT_MAX for v in out):
        raise InvalidInput(f"persona {what} has too many or too long entries",
                           hint=f"at most {_PERSONA_LIST_MAX} entries of {_PERSONA_TEXT_MAX:,} characters")
    return list(dict.fromkeys(out))


def persona(raw: Any) -> dict:
    """A persona definition checked and in canonical form (InvalidInput naming the problem)."""
    if not isinstance(raw, dict):
        raise InvalidInput(f"a persona must be an object, got {type(raw).__name__}",
                           hint='e.g. {"industry": "QSR", "role": "Real Estate", "description": "..."}')
    data: dict[str, Any] = {}
    for key, value in raw.items():
        key = PERSONA_ALIASES.get(key, key)
        if key in _PERSONA_OUTPUT:
            continue
        if key not in PERSONA_FIELDS:
            raise InvalidInput(f"unknown persona field {key!r}", hint="fields: " + ", ".join(PERSONA_FIELDS))
        data[key] = value
    industry = _persona_text(data.get("industry"), "industry")
    role = _persona_text(data.get("role"), "role")
    expected = f"{slug(industry)}_{slug(role)}"
    handle = data.get("handle") or expected
    persona_handle(handle)
    if handle != expected:
        raise InvalidInput(f"persona handle {handle!r} does not match industry {industry!r} and role {role!r}",
                           hint=f"the handle is <industry>_<role>: use {expected!r}, or change the industry/role")
    out = {"handle": handle, "industry": industry, "role": role,
           "description": _persona_text(data.get("description"), "description")}
    for key in PERSONA_LIST_FIELDS:
        out[key] = _persona_list(data.get(key), key)
    return out


def confidence(value: Any) -> float:
    """A persona assignment's confidence, 0 to 1."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not 0.0 <= number <= 1.0:
        raise InvalidInput(f"confidence must be a number from 0 to 1, got {value!r}", hint="e.g. --confidence 0.8")
    return number


def _doc_strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InvalidInput(f"persona document {what} must be a list of non-empty strings",
                           hint=f'e.g. {what}: ["..."]')
    return [text(v, what=what).strip() for v in value]


def _doc_traits(traits: Any) -> Any:
    if traits is None:
        return []
    if isinstance(traits, dict):
        if not all(isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in traits.items()):
            raise InvalidInput("persona document traits must map names to strings, numbers or booleans",
                               hint='e.g. traits: {tone: concise, formality: 0.3}')
        return dict(sorted(traits.items()))
    return _doc_strings(traits, "traits")


def persona_doc(raw: Any, *, agent: str) -> dict:
    """A persona document checked and in canonical form (version may still be None)."""
    if not isinstance(raw, dict):
        raise InvalidInput(f"a persona document must be an object, got {type(raw).__name__}",
                           hint="fields: " + ", ".join(PERSONA_DOC_FIELDS))
    unknown = sorted(set(raw) - set(PERSONA_DOC_FIELDS) - {"agent", "updated_at"})
    if unknown:
        raise InvalidInput(f"unknown persona document field {unknown[0]!r}",
                           hint="fields: " + ", ".join(PERSONA_DOC_FIELDS))
    title = raw.get("name")
    if not isinstance(title, str) or not title.strip():
        raise InvalidInput("a persona document needs a name", hint='e.g. name: "Pi"')
    version = raw.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        raise InvalidInput(f"persona document version must be a whole number of at least 1, got {version!r}",
                           hint="e.g. version: 2 (or leave it out to take the next one)")
    doc_id = raw.get("id") or f"persona_{slug(agent) or 'agent'}"
    if not isinstance(doc_id, str):
        raise InvalidInput(f"persona document id must be a string, got {doc_id!r}", hint='e.g. id: "pi"')
    description = raw.get("description") or ""
    if not isinstance(description, str):
        raise InvalidInput("persona document description must be a string", hint='e.g. description: "..."')
    doc = {"id": name(doc_id, what="document id"), "name": text(title, what="name").strip(),
           "version": version, "description": text(description, what="description").strip()
           if description.strip() else "",
           "goals": _doc_strings(raw.get("goals"), "goals"), "norms": _doc_strings(raw.get("norms"), "norms"),
           "traits": _doc_traits(raw.get("traits")), "skills": _doc_strings(raw.get("skills"), "skills")}
    if len(json.dumps(doc, ensure_ascii=False)) > _PERSONA_DOC_MAX:
        raise InvalidInput(f"the persona document is over {_PERSONA_DOC_MAX:,} characters", hint="shorten it")
    return doc


# -- skills (brandmind/skills.py; opcheck checks skill ops with these) -------------------------
SKILL_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$")
SKILL_VERSION = re.compile(r"^(\d{1,9})(?:\.(\d{1,9}))?(?:\.(\d{1,9}))?(?:\.(\d{1,9}))?"
                           r"(?:-([0-9A-Za-z.-]{1,40}))?(?:\+([0-9A-Za-z.-]{1,40}))?$")
SKILL_MAX_DESCRIPTION = 1024
SKILL_MAX_BODY = 200_000
SKILL_MAX_EXAMPLES = 100
SKILL_MAX_TAGS = 50


def skill_name(value: Any) -> str:
    if not isinstance(value, str) or not SKILL_NAME.match(value):
        raise InvalidInput(f"invalid skill name {value!r}",
                           hint="1-64 lowercase letters, digits, '-' or '_', starting and ending "
                                "with a letter or digit, e.g. market-research")
    return value


def skill_version(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidInput(f"invalid skill version {value!r}", hint="e.g. 1.0.0 or 2.1.0-beta.1")
    version = str(value).strip()
    if not SKILL_VERSION.match(version):
        raise InvalidInput(f"invalid skill version {version!r}",
                           hint="MAJOR[.MINOR[.PATCH]][-prerelease], e.g. 1.0.0 or 2.1.0-beta.1")
    return version


def plain_json(value: Any, what: str) -> Any:
    """``value`` if ``json.dumps`` takes it (no NaN), else InvalidInput."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} is not plain JSON ({exc})",
                           hint="use strings, numbers, booleans, null, lists and objects") from None
    return value


def _schema_shape(schema: Any, hint: str) -> None:
    if not isinstance(schema, dict):
        raise InvalidInput(f"the input schema must be a JSON object, got {type(schema).__name__}", hint=hint)
    kind = schema.get("type")
    if kind != "object" and not (isinstance(kind, list) and "object" in kind):
        raise InvalidInput(f'the input schema must describe a JSON object ("type": "object"), got type {kind!r}',
                           hint=hint)
    props = schema.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(v, (dict, bool)) for v in props.values()):
        raise InvalidInput('the input schema\'s "properties" must be an object of schemas', hint=hint)
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise InvalidInput('the input schema\'s "required" must be a list of property names', hint=hint)
    missing = [r for r in required if props and r not in props]
    if missing:
        raise InvalidInput(f"the input schema requires {', '.join(missing)}, not among its properties",
                           hint="add them to \"properties\" or drop them from \"required\"")


def skill_schema(schema: Any) -> dict | None:
    """A JSON Schema describing a JSON object (see brandmind/skills.py); None stays None."""
    if schema is None:
        return None
    hint = 'e.g. {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}'
    _schema_shape(schema, hint)
    plain_json(schema, "the input schema")
    try:
        import jsonschema  # optional: only when it is installed anyway
    except ImportError:
        return schema
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "top level"
        raise InvalidInput(f"the input schema is not a valid JSON Schema at {where}: {exc.message}",
                           hint=hint) from None
    return schema


def skill_text(value: Any, what: str, limit: int, *, empty: bool = False) -> str:
    """A skill's text field (description, body, example, source): UTF-8 without NUL, at
    most ``limit`` characters, not blank unless ``empty``."""
    if not isinstance(value, str):
        raise InvalidInput(f"the {what} must be text, got {type(value).__name__}", hint=f"give the {what} as a string")
    if "\x00" in value:
        raise InvalidInput(f"the {what} contains a NUL character", hint="strip NUL bytes from it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"the {what} is not valid UTF-8", hint="convert it to UTF-8 first") from None
    if not empty and not value.strip():
        raise InvalidInput(f"the {what} is empty", hint=f"give a non-blank {what}")
    if len(value) > limit:
        raise InvalidInput(f"the {what} is {len(value):,} characters, over the limit of {limit:,}",
                           hint=f"shorten the {what}")
    return value


def skill_tags(tags: Any) -> list[str]:
    if isinstance(tags, str):
        tags = [t for t in tags.split(",")]
    if not isinstance(tags, (list, tuple)):
        raise InvalidInput(f"tags must be a list of strings, got {type(tags).__name__}",
                           hint="e.g. tags: [research, retail]")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip() or len(tag.strip()) > 64 or "," in tag \
                or any(ord(c) < 32 or ord(c) == 127 for c in tag):
            raise InvalidInput(f"invalid tag {tag!r}", hint="a tag is 1-64 printable characters without commas")
        if tag.strip() not in out:
            out.append(tag.strip())
    if len(out) > SKILL_MAX_TAGS:
        raise InvalidInput(f"{len(out)} tags, over the limit of {SKILL_MAX_TAGS}", hint="keep the tags that matter")
    return out


def skill_examples(examples: Any) -> list:
    if isinstance(examples, str):
        examples = [examples]
    if not isinstance(examples, (list, tuple)):
        raise InvalidInput(f"examples must be a list, got {type(examples).__name__}",
                           hint='e.g. examples: ["research QSR sites in Austin"]')
    if len(examples) > SKILL_MAX_EXAMPLES:
        raise InvalidInput(f"{len(examples)} examples, over the limit of {SKILL_MAX_EXAMPLES}",
                           hint="keep the best ones")
    return [skill_text(ex, "example", 4000) if isinstance(ex, str) else plain_json(ex, "an example")
            for ex in examples]


def skill_meta(value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"skill meta must be an object, got {type(value).__name__}", hint='e.g. {"license": "MIT"}')
    return plain_json(value, "the skill's meta")
