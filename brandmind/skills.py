"""Skills: procedural memory ("how to do market research"), `bm skill`.

A skill is ``{name, description, input_schema, examples, tags, version, body, source, meta}``:

* ``name``: unique per store (skills are the agent system's know-how, shared by every
  user and agent of the store, like the seed design's codebase-level Agent Skills); 1-64
  lowercase letters, digits, ``-`` and ``_``, starting and ending with a letter or digit
  (the SKILL.md convention, e.g. ``market-research``);
* ``description``: what it does and when to use it (1-1,024 characters, as in SKILL.md);
* ``input_schema``: a JSON Schema of the skill's input, which must describe a JSON object
  (``{"type": "object", ...}``; ``properties`` an object of schemas, ``required`` names
  from it); checked structurally, and against the JSON Schema meta-schema when the
  ``jsonschema`` package happens to be installed (it is not a dependency);
* ``examples`` (list of strings or JSON values), ``tags`` (list of short strings),
  ``version`` (``MAJOR[.MINOR[.PATCH[.BUILD]]][-prerelease][+build]``, default 0.1.0;
  it must not go backwards when a skill is updated), ``body`` (markdown instructions),
  ``source`` (the SKILL.md path it was imported from), ``meta`` (other SKILL.md front
  matter keys: license, allowed-tools, metadata, ...).

Ops (see projection.py): ``skill.add`` carries the whole skill; ``skill.remove`` {name, ts}.
Merge: the visible skill of a name is, among its adds stamped after its latest remove
(by HLC), the one with the highest version, ties broken by the later HLC.  So a remove
wins over every earlier add, a later add revives the skill (at any version), and two
replicas updating concurrently converge on the higher version.  Adds that can never be
visible again (an add with a higher-or-equal version and a later HLC exists, or a remove
came after it) are dropped from ``skill_adds``; what is kept depends only on the set of
ops, not on their order, so replicas and ``bm rebuild`` agree.

Matching (``bm skill match``): every skill is scored ``weight_vector * cosine +
weight_keyword * bm25 / best bm25`` (the recall weights from config) between the task and
the skill's description, tags, examples and the head of its body (vectors cached per text
in the LMDB vector cache) and BM25 over the skill's fields (name and tags weigh most),
stemmed like recall's keywords.

Import (``bm skill import DIR``): every ``SKILL.md`` under DIR (DIR's own included, hidden
folders skipped), each YAML front matter (name and description required; version, tags,
examples, input_schema optional; anything else goes to meta) plus a markdown body.  Bad
files are reported with their path and reason and nothing is imported, unless
``skip_bad``; a skill whose content (everything but ``source``) is unchanged is skipped.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from .clock import iso, now_millis
from .errors import InvalidInput, NotFound, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory
    from .sqlstore import SQLStore

NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$")
VERSION_RE = re.compile(r"^(\d{1,9})(?:\.(\d{1,9}))?(?:\.(\d{1,9}))?(?:\.(\d{1,9}))?"
                        r"(?:-([0-9A-Za-z.-]{1,40}))?(?:\+([0-9A-Za-z.-]{1,40}))?$")
DEFAULT_VERSION = "0.1.0"
MAX_DESCRIPTION = 1024
MAX_BODY = 200_000
MAX_EXAMPLES = 100
MAX_TAGS = 50
BODY_HEAD = 600          # characters of the body that go into a skill's vector
_FIELDS = ("name", "description", "input_schema", "examples", "tags", "version", "body", "meta")
_FRONT_KEYS = {"name", "description", "version", "tags", "examples", "input_schema", "inputSchema", "schema"}

SCHEMA = [
    # the add ops that may still become visible (see the module doc), per name
    """CREATE TABLE skill_adds(name TEXT NOT NULL, hlc TEXT NOT NULL, payload TEXT NOT NULL,
       op_id TEXT NOT NULL, PRIMARY KEY(name, hlc))""",
    # the latest remove of each name (HLC key)
    "CREATE TABLE skill_removes(name TEXT PRIMARY KEY, hlc TEXT NOT NULL)",
    # the visible skills
    """CREATE TABLE skills(rowid INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
       description TEXT NOT NULL, input_schema TEXT, examples TEXT NOT NULL, tags TEXT NOT NULL,
       version TEXT NOT NULL, body TEXT NOT NULL, source TEXT, meta TEXT NOT NULL,
       content_hash TEXT NOT NULL, updated_at INTEGER NOT NULL, hlc TEXT NOT NULL)""",
]


# -- validation -------------------------------------------------------------------------------
def check_name(value: Any) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise InvalidInput(f"invalid skill name {value!r}",
                           hint="1-64 lowercase letters, digits, '-' or '_', starting and ending "
                                "with a letter or digit, e.g. market-research")
    return value


def version_key(version: str) -> tuple:
    """A sort key: numbers (missing ones 0), then a release above its pre-releases, whose
    dot-separated identifiers compare numerically when numeric (semver order)."""
    m = VERSION_RE.match(version)
    if m is None:  # pragma: no cover - versions are checked before they are stored
        return ((0, 0, 0, 0), 0, ())
    nums = tuple(int(m.group(i) or 0) for i in range(1, 5))
    pre = m.group(5)
    if pre is None:
        return (nums, 1, ())
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (nums, 0, ids)


def check_version(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidInput(f"invalid skill version {value!r}", hint="e.g. 1.0.0 or 2.1.0-beta.1")
    text = str(value).strip()
    if not VERSION_RE.match(text):
        raise InvalidInput(f"invalid skill version {text!r}",
                           hint="MAJOR[.MINOR[.PATCH]][-prerelease], e.g. 1.0.0 or 2.1.0-beta.1")
    return text


def check_schema(schema: Any) -> dict | None:
    """A JSON Schema describing a JSON object (see the module doc); None stays None."""
    if schema is None:
        return None
    hint = 'e.g. {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}'
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
    _json_safe(schema, "the input schema")
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


def _json_safe(value: Any, what: str) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{what} is not plain JSON ({exc})",
                           hint="use strings, numbers, booleans, null, lists and objects") from None
    return value


def _text(value: Any, what: str, limit: int, *, empty: bool = False) -> str:
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


def check_tags(tags: Any) -> list[str]:
    if isinstance(tags, str):
        tags = [t for t in tags.split(",")]
    if not isinstance(tags, (list, tuple)):
        raise InvalidInput(f"tags must be a list of strings, got {type(tags).__name__}", hint="e.g. tags: [research, retail]")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip() or len(tag.strip()) > 64 or "," in tag \
                or any(ord(c) < 32 or ord(c) == 127 for c in tag):
            raise InvalidInput(f"invalid tag {tag!r}", hint="a tag is 1-64 printable characters without commas")
        if tag.strip() not in out:
            out.append(tag.strip())
    if len(out) > MAX_TAGS:
        raise InvalidInput(f"{len(out)} tags, over the limit of {MAX_TAGS}", hint="keep the tags that matter")
    return out


def check_examples(examples: Any) -> list:
    if isinstance(examples, str):
        examples = [examples]
    if not isinstance(examples, (list, tuple)):
        raise InvalidInput(f"examples must be a list, got {type(examples).__name__}",
                           hint='e.g. examples: ["research QSR sites in Austin"]')
    if len(examples) > MAX_EXAMPLES:
        raise InvalidInput(f"{len(examples)} examples, over the limit of {MAX_EXAMPLES}", hint="keep the best ones")
    out = []
    for ex in examples:
        if isinstance(ex, str):
            out.append(_text(ex, "example", 4000))
        else:
            out.append(_json_safe(ex, "an example"))
    return out


def check_meta(meta: Any) -> dict:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise InvalidInput(f"skill meta must be an object, got {type(meta).__name__}", hint='e.g. {"license": "MIT"}')
    return _json_safe(meta, "the skill's meta")


def content_hash(skill: dict) -> str:
    """What "unchanged" means for a re-import: every field but source."""
    canon = json.dumps({k: skill.get(k) for k in _FIELDS}, ensure_ascii=False, sort_keys=True,
                       separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


# -- projection (called from projection.apply_sql_side) ---------------------------------------
def apply_op(sql: "SQLStore", op: dict) -> None:
    """``skill.add`` / ``skill.remove`` (merge rule in the module doc)."""
    from .projection import hlc_key

    c = sql.conn
    p = op["payload"]
    name, h = p["name"], hlc_key(op["hlc"])
    row = c.execute("SELECT hlc FROM skill_removes WHERE name=?", (name,)).fetchone()
    removed = row[0] if row else None
    if op["kind"] == "skill.remove":
        if removed is not None and removed >= h:
            return
        c.execute("INSERT OR REPLACE INTO skill_removes VALUES(?,?)", (name, h))
        c.execute("DELETE FROM skill_adds WHERE name=? AND hlc < ?", (name, h))
    else:
        if removed is not None and h <= removed:
            return  # a later remove wins
        new_v = version_key(p["version"])
        adds = [(r[0], version_key(json.loads(r[1])["version"]))
                for r in c.execute("SELECT hlc, payload FROM skill_adds WHERE name=?", (name,))]
        if any(v >= new_v and hh > h for hh, v in adds) or any(hh == h for hh, _ in adds):
            return  # never visible (or applied already)
        for hh, v in adds:
            if new_v >= v and h > hh:
                c.execute("DELETE FROM skill_adds WHERE name=? AND hlc=?", (name, hh))
        c.execute("INSERT INTO skill_adds VALUES(?,?,?,?)",
                  (name, h, json.dumps(p, ensure_ascii=False, sort_keys=True), op["id"]))
    _refresh_visible(sql, name)


def _refresh_visible(sql: "SQLStore", name: str) -> None:
    c = sql.conn
    best = None
    for h, raw in c.execute("SELECT hlc, payload FROM skill_adds WHERE name=?", (name,)):
        p = json.loads(raw)
        key = (version_key(p["version"]), h)
        if best is None or key > best[0]:
            best = (key, h, p)
    old = c.execute("SELECT rowid FROM skills WHERE name=?", (name,)).fetchone()
    if old is not None:
        if best is not None and c.execute("SELECT hlc FROM skills WHERE rowid=?", (old[0],)).fetchone()[0] == best[1]:
            return
        c.execute("DELETE FROM skills WHERE rowid=?", (old[0],))
    if best is None:
        return
    _, h, p = best
    dumps = lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True)  # noqa: E731
    c.execute("INSERT INTO skills(name, description, input_schema, examples, tags, version, body, source, "
              "meta, content_hash, updated_at, hlc) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
              (name, p["description"], dumps(p["input_schema"]) if p.get("input_schema") is not None else None,
               dumps(p.get("examples", [])), dumps(p.get("tags", [])), p["version"], p.get("body", ""),
               p.get("source"), dumps(p.get("meta", {})), content_hash(p), int(p["ts"]), h))


# -- reading ----------------------------------------------------------------------------------
def _out(row: dict, *, full: bool = True) -> dict:
    out = {"name": row["name"], "description": row["description"], "version": row["version"],
           "tags": json.loads(row["tags"]), "updated": iso(row["updated_at"])}
    if full:
        out.update({"input_schema": json.loads(row["input_schema"]) if row["input_schema"] else None,
                    "examples": json.loads(row["examples"]), "body": row["body"], "source": row["source"],
                    "meta": json.loads(row["meta"])})
    return out


def _row(mem: "Memory", name: str) -> dict | None:
    rows = list(mem.sql.rows("SELECT * FROM skills WHERE name=?", (name,)))
    return rows[0] if rows else None


def get(mem: "Memory", name: str) -> dict:
    row = _row(mem, name) if isinstance(name, str) else None
    if row is None:
        raise NotFound(f"no skill {name!r}", hint="list skills with `bm skill list`")
    return _out(row)


def list_skills(mem: "Memory", *, tag: str | None = None, full: bool = False) -> list[dict]:
    out = [_out(r, full=full) for r in mem.sql.rows("SELECT * FROM skills ORDER BY name")]
    if tag is not None:
        out = [s for s in out if tag in s["tags"]]
    return out


# -- writing ----------------------------------------------------------------------------------
def build(mem: "Memory", name: str, *, description: str | None = None, input_schema: Any = None,
          examples: Any = None, tags: Any = None, version: Any = None, body: str | None = None,
          source: str | None = None, meta: Any = None) -> tuple[dict, dict | None]:
    """The validated payload of an add (fields not given keep the stored skill's values),
    and the stored skill (None if new).  Refuses a version older than the stored one."""
    name = check_name(name)
    current = _row(mem, name)
    cur = _out(current) if current else None
    if description is None and cur is None:
        raise InvalidInput(f"a new skill needs a description ({name!r} does not exist yet)",
                           hint=f'bm skill add {name} --description "what it does and when to use it"')
    skill = {
        "name": name,
        "description": _text(description, "description", MAX_DESCRIPTION).strip()
        if description is not None else cur["description"],
        "input_schema": check_schema(input_schema) if input_schema is not None
        else (cur["input_schema"] if cur else None),
        "examples": check_examples(examples) if examples is not None else (cur["examples"] if cur else []),
        "tags": check_tags(tags) if tags is not None else (cur["tags"] if cur else []),
        "version": check_version(version) if version is not None else (cur["version"] if cur else DEFAULT_VERSION),
        "body": _text(body, "body", MAX_BODY, empty=True) if body is not None else (cur["body"] if cur else ""),
        "source": _text(source, "source", 4096) if source is not None else (cur["source"] if cur else None),
        "meta": check_meta(meta) if meta is not None else (cur["meta"] if cur else {}),
    }
    if cur is not None and version_key(skill["version"]) < version_key(cur["version"]):
        raise InvalidInput(f"skill {name!r} is at version {cur['version']}; {skill['version']} would go backwards",
                           hint=f"give --version {cur['version']} or later (or `bm skill remove {name}` first)")
    return skill, cur


def _vector_text(skill: dict) -> str:
    parts = [f"{skill['name'].replace('-', ' ').replace('_', ' ')}: {skill['description']}"]
    if skill.get("tags"):
        parts.append("Tags: " + ", ".join(skill["tags"]))
    examples = [e if isinstance(e, str) else json.dumps(e, ensure_ascii=False) for e in skill.get("examples") or []]
    if examples:
        parts.append("Examples: " + "; ".join(examples)[:1000])
    body = (skill.get("body") or "").strip()
    if body:
        parts.append(body[:BODY_HEAD])
    return "\n".join(parts)


def add(mem: "Memory", name: str, **fields: Any) -> dict:
    """Add or update a skill; returns it with ``"changed"`` (False: nothing to store)."""
    skill, cur = build(mem, name, **fields)
    if cur is not None and content_hash(skill) == content_hash(cur) and skill["source"] == cur["source"]:
        return {**get(mem, skill["name"]), "changed": False}
    _write(mem, [skill])
    return {**get(mem, skill["name"]), "changed": True}


def _write(mem: "Memory", skills: list[dict], ts: int | None = None) -> None:
    if not skills:
        return
    texts = [_vector_text(s) for s in skills]
    missing = [t for t in dict.fromkeys(texts) if mem.log.cached_vector(mem.sql.model, t) is None]
    vecs = mem.store.embed_docs(missing) if missing else []
    now = ts if ts is not None else now_millis()
    with mem.log.write() as t:
        for skill in skills:
            t.append("skill.add", {**skill, "ts": skill.get("ts", now)})
        for text, vec in zip(missing, vecs):
            t.cache_vector(mem.sql.model, text, vec.tobytes())
    mem.store.catch_up()


def remove(mem: "Memory", name: str) -> dict:
    item = get(mem, name)
    with mem.log.write() as t:
        t.append("skill.remove", {"name": item["name"], "ts": now_millis()})
    mem.store.catch_up()
    return item


# -- matching ---------------------------------------------------------------------------------
def match(mem: "Memory", query: Any, k: int = 5) -> list[dict]:
    """Skills ranked for a task (see the module doc), best first, with scores and signals."""
    import operator

    import numpy as np

    from . import validate

    query = validate.text(query, what="query")
    try:
        k_ok = operator.index(k) if not isinstance(k, bool) else None
    except TypeError:
        k_ok = None
    if k_ok is None or not 1 <= k_ok <= 1000:
        raise UsageError(f"k must be a whole number from 1 to 1000, got {k!r}", hint="e.g. -k 5")
    rows = list(mem.sql.rows("SELECT * FROM skills ORDER BY name"))
    if not rows:
        return []
    skills = [_out(r) for r in rows]
    texts = [_vector_text(s) for s in skills]
    cached = {t: mem.log.cached_vector(mem.sql.model, t) for t in dict.fromkeys(texts)}
    missing = [t for t, v in cached.items() if v is None or len(v) != 4 * mem.sql.dim]
    if missing:
        vecs = mem.store.embed_docs(missing)
        with mem.log.write() as t:
            for text, vec in zip(missing, vecs):
                t.cache_vector(mem.sql.model, text, vec.tobytes())
                cached[text] = vec.tobytes()
    matrix = np.frombuffer(b"".join(cached[t] for t in texts), np.float32).reshape(len(texts), mem.sql.dim)
    q = np.asarray(mem.embedder.embed_query(query), dtype=np.float32)
    cos = np.einsum("ij,j->i", matrix, q)
    bm = _bm25(mem, query, skills)
    best_bm = max(bm.values(), default=0.0)
    vec_rank = {i: r for r, i in enumerate(sorted(range(len(rows)), key=lambda i: (-cos[i], rows[i]["name"])), 1)}
    kw_rank = {i: r for r, i in enumerate(sorted(bm, key=lambda i: (-bm[i], rows[i]["name"])), 1)}
    wv, wk = mem.config.weight_vector, mem.config.weight_keyword
    out = []
    for i, (row, skill) in enumerate(zip(rows, skills)):
        signals = {"vector": {"score": round(wv * float(cos[i]), 4), "cosine": round(float(cos[i]), 4),
                              "rank": vec_rank[i]}}
        score = wv * float(cos[i])
        b = bm.get(i)
        if b is not None and best_bm > 0:
            part = wk * b / best_bm
            score += part
            signals["keyword"] = {"score": round(part, 4), "bm25": round(b, 4), "rank": kw_rank[i]}
        out.append({**_out(row, full=False), "score": round(score, 6), "signals": signals})
    out.sort(key=lambda s: (-s["score"], s["name"]))
    return out[:k_ok]


# (field, weight) of the keyword signal: a word in the name or tags counts most
KEYWORD_FIELDS = (("name", 2.0), ("tags", 2.0), ("description", 1.5), ("examples", 1.0), ("body", 0.5))
BM25_K1, BM25_B = 1.2, 0.75


def _bm25(mem: "Memory", query: str, skills: list[dict]) -> dict[int, float]:
    """BM25 of each skill (by position) holding a query word, over its weighted fields,
    stemmed like recall's keywords (FTS5 porter); idf = ln(1 + (N - df + .5) / (df + .5)),
    which stays positive in a small collection (FTS5's bm25 flattens to ~0 there)."""
    import math

    import apsw

    from .recall import query_words

    tokenize = mem.sql.conn.fts5_tokenizer("porter", ["unicode61"])

    def stems(text: str, flags: int) -> list[str]:
        return [t[2] for t in tokenize(text.encode("utf-8"), flags, None)] if text else []

    terms = {t for w in query_words(query) for t in stems(w, apsw.FTS5_TOKENIZE_QUERY)}
    if not terms:
        return {}
    docs: list[tuple[dict[str, float], float]] = []
    for s in skills:
        fields = {"name": s["name"].replace("-", " ").replace("_", " "), "tags": " ".join(s["tags"]),
                  "description": s["description"], "body": s.get("body") or "",
                  "examples": "\n".join(e if isinstance(e, str) else json.dumps(e, ensure_ascii=False)
                                        for e in s.get("examples") or [])}
        tf: dict[str, float] = {}
        length = 0.0
        for field, weight in KEYWORD_FIELDS:
            words = stems(fields[field], apsw.FTS5_TOKENIZE_DOCUMENT)
            length += weight * len(words)
            for w in words:
                if w in terms:
                    tf[w] = tf.get(w, 0.0) + weight
        docs.append((tf, length))
    n = len(docs)
    avg = sum(length for _, length in docs) / n or 1.0
    df = {t: sum(1 for tf, _ in docs if t in tf) for t in terms}
    out = {}
    for i, (tf, length) in enumerate(docs):
        if tf:
            norm = BM25_K1 * (1 - BM25_B + BM25_B * length / avg)
            out[i] = sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * f * (BM25_K1 + 1) / (f + norm)
                         for t, f in tf.items())
    return out


# -- SKILL.md import --------------------------------------------------------------------------
def parse_skill_md(path: Path) -> dict:
    """A skill from a SKILL.md file (its fields, ``source`` = the resolved path); raises
    InvalidInput with the reason."""
    import yaml

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read it: {exc.strerror or exc}", hint="check the file's permissions") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"not valid UTF-8 (byte {exc.start})", hint="save it as UTF-8") from None
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise InvalidInput("no YAML front matter (the file must start with a '---' line)",
                           hint="start SKILL.md with ---, name: ..., description: ..., ---")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        raise InvalidInput("the front matter is not closed by a '---' line", hint="add --- after the front matter")
    try:
        front = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InvalidInput(f"the front matter is not valid YAML{where}: {problem}",
                           hint="fix the YAML between the --- lines") from None
    if not isinstance(front, dict):
        raise InvalidInput("the front matter is not a YAML mapping", hint="use key: value lines")
    front = {str(k): _plain(v) for k, v in front.items()}
    if isinstance(front.get("version"), (int, float)) and not isinstance(front["version"], bool):
        # YAML reads `version: 1.10` as the number 1.1: take the text as written
        m = re.search(r"(?m)^version:\s*([0-9][0-9A-Za-z.+-]*)\s*(#.*)?$", "\n".join(lines[1:end]))
        if m:
            front["version"] = m.group(1)
    for key in ("name", "description"):
        if front.get(key) in (None, ""):
            raise InvalidInput(f"the front matter has no {key}", hint=f"add `{key}: ...` to the front matter")
    nested = front.get("metadata") if isinstance(front.get("metadata"), dict) else {}
    schema = next((front[k] for k in ("input_schema", "inputSchema", "schema") if k in front), None)
    body = "\n".join(lines[end + 1:]).strip("\n").rstrip()
    return {
        "name": front["name"], "description": front["description"],
        "version": front.get("version", nested.get("version")),
        "tags": front.get("tags", nested.get("tags")),
        "examples": front.get("examples"), "input_schema": schema, "body": body,
        "source": str(path.resolve()),
        "meta": {k: v for k, v in front.items() if k not in _FRONT_KEYS},
    }


def _plain(value: Any) -> Any:
    """YAML values as JSON ones (dates become ISO strings)."""
    import datetime as dt

    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, float) and value != value:
        return None
    return value


def find_skill_files(root: Path) -> list[Path]:
    """Every SKILL.md under ``root`` (its own included), outside hidden folders, sorted."""
    found = []
    for path in sorted(root.rglob("SKILL.md")):
        rel = path.relative_to(root).parts[:-1]
        if any(p.startswith(".") for p in rel) or not path.is_file():
            continue
        found.append(path)
    return found


def import_dir(mem: "Memory", path: str | Path, *, skip_bad: bool = False) -> dict:
    """Import a folder of SKILL.md skills (see the module doc).  Returns ``{"added",
    "updated", "unchanged": [names], "bad": [{"path", "reason"}]}``; without ``skip_bad``
    a bad file stops the import before anything is stored, naming every bad file."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise NotFound(f"no such folder: {path}",
                       hint="give a folder holding SKILL.md, or subfolders that each hold one")
    files = find_skill_files(root)
    if not files:
        raise NotFound(f"no SKILL.md under {path}",
                       hint="each skill is a folder with a SKILL.md (YAML front matter with name and description)")
    report: dict[str, list] = {"added": [], "updated": [], "unchanged": [], "bad": []}
    ready: list[dict] = []
    seen: dict[str, Path] = {}
    for file in files:
        try:
            fields = parse_skill_md(file)
            name = check_name(fields.pop("name"))
            if name in seen:
                raise InvalidInput(f"skill name {name!r} also used by {seen[name]}", hint="give each skill its own name")
            skill, cur = build(mem, name, **{k: v for k, v in fields.items() if v is not None})
            # a SKILL.md is the whole skill: what it leaves out is empty, not "as before"
            for key, empty in (("tags", []), ("examples", []), ("input_schema", None)):
                if fields.get(key) is None:
                    skill[key] = empty
            seen[name] = file
        except InvalidInput as exc:
            report["bad"].append({"path": str(file), "reason": exc.message})
            continue
        if cur is not None and content_hash(skill) == content_hash(cur):
            report["unchanged"].append(name)
        else:
            report["updated" if cur is not None else "added"].append(name)
            ready.append(skill)
    if report["bad"] and not skip_bad:
        detail = "; ".join(f"{b['path']}: {b['reason']}" for b in report["bad"])
        raise InvalidInput(f"{len(report['bad'])} bad skill file(s), nothing imported: {detail}",
                           hint="fix them, or pass --skip-bad to import the others")
    _write(mem, ready)
    return report


# -- export / import (brandmind/exchange.py) ---------------------------------------------------
def export_records(mem: "Memory") -> Iterable[dict]:
    """One ``{"kind": "skill", ...}`` record per visible skill, by name."""
    for row in mem.sql.rows("SELECT * FROM skills ORDER BY name"):
        yield {"kind": "skill", **_out(row)}


def import_payload(mem: "Memory", rec: dict) -> dict | None:
    """The ``skill.add`` payload of an export record (None: a skill of that name exists)."""
    from .clock import parse_time

    name = check_name(rec["name"])
    if _row(mem, name) is not None:
        return None
    return {
        "name": name, "description": _text(rec["description"], "description", MAX_DESCRIPTION),
        "input_schema": check_schema(rec.get("input_schema")), "examples": check_examples(rec.get("examples", [])),
        "tags": check_tags(rec.get("tags", [])), "version": check_version(rec.get("version", DEFAULT_VERSION)),
        "body": _text(rec.get("body", ""), "body", MAX_BODY, empty=True),
        "source": rec.get("source") if isinstance(rec.get("source"), str) else None,
        "meta": check_meta(rec.get("meta")), "ts": parse_time(rec.get("updated"), field="updated") or now_millis(),
    }
