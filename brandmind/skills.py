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

Ops: ``skill.add`` carries the whole skill; ``skill.remove`` {name, ts}.  Merge: the
visible skill of a name is, among its adds stamped after its latest remove (by HLC), the
one with the highest version, ties broken by the later HLC (brandmind/skillrules.py,
``merge.skill_*``; the tables: brandmind/storage/skills.py; the field checks:
``validate.skill_*``).  :class:`Skills` (``mem.skills``) is the API.

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

import json
import math
import operator
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from . import validate
from .clock import iso, now_millis, parse_time
from .errors import InvalidInput, NotFound, UsageError
from .merge import version_key  # noqa: F401 (the order of versions, re-exported)
from .ops import Kind
from .recall import query_words
from .skillrules import content_hash
from .storage import skills as rows
from .validate import (SKILL_MAX_BODY as MAX_BODY, SKILL_MAX_DESCRIPTION as MAX_DESCRIPTION,  # noqa: F401
                       SKILL_MAX_EXAMPLES as MAX_EXAMPLES, SKILL_MAX_TAGS as MAX_TAGS,
                       SKILL_NAME as NAME_RE, SKILL_VERSION as VERSION_RE)

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

DEFAULT_VERSION = "0.1.0"
BODY_HEAD = 600          # characters of the body that go into a skill's vector
_FRONT_KEYS = {"name", "description", "version", "tags", "examples", "input_schema", "inputSchema", "schema"}
# the checks (brandmind/validate.py), under the names callers know
check_name = validate.skill_name
check_version = validate.skill_version
check_schema = validate.skill_schema
check_tags = validate.skill_tags
check_examples = validate.skill_examples
check_meta = validate.skill_meta
text = validate.skill_text


def _out(row: dict, *, full: bool = True) -> dict:
    out = {"name": row["name"], "description": row["description"], "version": row["version"],
           "tags": json.loads(row["tags"]), "updated": iso(row["updated_at"])}
    if full:
        out.update({"input_schema": json.loads(row["input_schema"]) if row["input_schema"] else None,
                    "examples": json.loads(row["examples"]), "body": row["body"], "source": row["source"],
                    "meta": json.loads(row["meta"])})
    return out


def vector_text(skill: dict) -> str:
    """The text a skill's vector is made of: name, description, tags, examples, head of the body."""
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


def _merged(name: str, cur: dict | None, fields: dict) -> dict:
    """The checked fields of an add; a field given as None keeps the stored skill's value."""
    def pick(key: str, check: Any, default: Any) -> Any:
        if fields.get(key) is not None:
            return check(fields[key])
        return cur[key] if cur else default

    return {
        "name": name,
        "description": pick("description", lambda v: text(v, "description", MAX_DESCRIPTION).strip(), None),
        "input_schema": pick("input_schema", check_schema, None),
        "examples": pick("examples", check_examples, []),
        "tags": pick("tags", check_tags, []),
        "version": pick("version", check_version, DEFAULT_VERSION),
        "body": pick("body", lambda v: text(v, "body", MAX_BODY, empty=True), ""),
        "source": pick("source", lambda v: text(v, "source", 4096), None),
        "meta": pick("meta", check_meta, {}),
    }


# -- matching -----------------------------------------------------------------------------------------
# (field, weight) of the keyword signal: a word in the name or tags counts most
KEYWORD_FIELDS = (("name", 2.0), ("tags", 2.0), ("description", 1.5), ("examples", 1.0), ("body", 0.5))
BM25_K1, BM25_B = 1.2, 0.75


def _keyword_fields(s: dict) -> dict[str, str]:
    return {"name": s["name"].replace("-", " ").replace("_", " "), "tags": " ".join(s["tags"]),
            "description": s["description"], "body": s.get("body") or "",
            "examples": "\n".join(e if isinstance(e, str) else json.dumps(e, ensure_ascii=False)
                                  for e in s.get("examples") or [])}


def bm25(tokenize: Any, query: str, skills: list[dict]) -> dict[int, float]:
    """BM25 of each skill (by position) holding a query word, over its weighted fields,
    stemmed like recall's keywords (``tokenize``: FTS5 porter); idf = ln(1 + (N - df + .5) /
    (df + .5)), which stays positive in a small collection (FTS5's bm25 flattens to ~0 there)."""
    import apsw

    def stems(text: str, flags: int) -> list[str]:
        return [t[2] for t in tokenize(text.encode("utf-8"), flags, None)] if text else []

    terms = {t for w in query_words(query) for t in stems(w, apsw.FTS5_TOKENIZE_QUERY)}
    if not terms:
        return {}
    docs: list[tuple[dict[str, float], float]] = []
    for s in skills:
        fields = _keyword_fields(s)
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


def _check_k(k: Any) -> int:
    try:
        k_ok = operator.index(k) if not isinstance(k, bool) else None
    except TypeError:
        k_ok = None
    if k_ok is None or not 1 <= k_ok <= 1000:
        raise UsageError(f"k must be a whole number from 1 to 1000, got {k!r}", hint="e.g. -k 5")
    return k_ok


def _ranked(names: list[str], cos: Any, bm: dict[int, float]) -> tuple[dict[int, int], dict[int, int]]:
    """Rank of each skill (by position) by cosine, and by BM25 among those that have one."""
    vec_rank = {i: r for r, i in enumerate(sorted(range(len(names)), key=lambda i: (-cos[i], names[i])), 1)}
    kw_rank = {i: r for r, i in enumerate(sorted(bm, key=lambda i: (-bm[i], names[i])), 1)}
    return vec_rank, kw_rank


# -- SKILL.md import --------------------------------------------------------------------------
def _front_matter(text: str) -> tuple[dict, list[str], int]:
    """``(front matter, lines, index of its closing line)`` of a SKILL.md text."""
    import yaml

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
    return {str(k): _plain(v) for k, v in front.items()}, lines, end


def parse_skill_md(path: Path) -> dict:
    """A skill from a SKILL.md file (its fields, ``source`` = the resolved path); raises
    InvalidInput with the reason."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read it: {exc.strerror or exc}", hint="check the file's permissions") from None
    try:
        content = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"not valid UTF-8 (byte {exc.start})", hint="save it as UTF-8") from None
    front, lines, end = _front_matter(content.replace("\r\n", "\n"))
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


def _skill_folder(path: str | Path) -> list[Path]:
    root = Path(path).expanduser()
    if not root.is_dir():
        raise NotFound(f"no such folder: {path}",
                       hint="give a folder holding SKILL.md, or subfolders that each hold one")
    files = find_skill_files(root)
    if not files:
        raise NotFound(f"no SKILL.md under {path}",
                       hint="each skill is a folder with a SKILL.md (YAML front matter with name and description)")
    return files


# -- the API ------------------------------------------------------------------------------------
class Skills:
    """The skills of a store (``mem.skills``; see the module docstring)."""

    def __init__(self, store: "Store") -> None:
        self.store = store

    # -- reading -----------------------------------------------------------------------
    def get(self, name: str) -> dict:
        row = rows.row(self.store.sql, name) if isinstance(name, str) else None
        if row is None:
            raise NotFound(f"no skill {name!r}", hint="list skills with `bm skill list`")
        return _out(row)

    def list(self, *, tag: str | None = None, full: bool = False) -> list[dict]:
        """Every skill by name (``full``: with schema, examples, body, source, meta)."""
        out = [_out(r, full=full) for r in rows.rows(self.store.sql)]
        if tag is not None:
            out = [s for s in out if tag in s["tags"]]
        return out

    # -- writing -----------------------------------------------------------------------
    def build(self, name: str, **fields: Any) -> tuple[dict, dict | None]:
        """The validated payload of an add (fields not given, or None, keep the stored
        skill's values: description, input_schema, examples, tags, version, body, source,
        meta), and the stored skill (None if new).  Refuses a version older than the stored one."""
        name = check_name(name)
        current = rows.row(self.store.sql, name)
        cur = _out(current) if current else None
        if fields.get("description") is None and cur is None:
            raise InvalidInput(f"a new skill needs a description ({name!r} does not exist yet)",
                               hint=f'bm skill add {name} --description "what it does and when to use it"')
        skill = _merged(name, cur, fields)
        if cur is not None and version_key(skill["version"]) < version_key(cur["version"]):
            raise InvalidInput(f"skill {name!r} is at version {cur['version']}; {skill['version']} would go backwards",
                               hint=f"give --version {cur['version']} or later (or `bm skill remove {name}` first)")
        return skill, cur

    def add(self, name: str, *, description: str | None = None, input_schema: Any = None,
            examples: Any = None, tags: Any = None, version: Any = None, body: str | None = None,
            source: str | None = None, meta: Any = None) -> dict:
        """Add a skill, or update one (fields left None keep their values; the version may
        not go backwards).  Returns the skill plus ``changed`` (False: identical, nothing stored)."""
        skill, cur = self.build(name, description=description, input_schema=input_schema, examples=examples,
                                tags=tags, version=version, body=body, source=source, meta=meta)
        if cur is not None and content_hash(skill) == content_hash(cur) and skill["source"] == cur["source"]:
            return {**self.get(skill["name"]), "changed": False}
        self._write([skill])
        return {**self.get(skill["name"]), "changed": True}

    def _write(self, skills: list[dict], ts: int | None = None) -> None:
        if not skills:
            return
        store = self.store
        texts = [vector_text(s) for s in skills]
        missing = [t for t in dict.fromkeys(texts) if store.log.cached_vector(store.sql.model, t) is None]
        vecs = store.embed_docs(missing) if missing else []
        now = ts if ts is not None else now_millis()
        with store.write() as t:
            for skill in skills:
                t.append(Kind.SKILL_ADD, {**skill, "ts": skill.get("ts", now)})
            for vtext, vec in zip(missing, vecs):
                t.cache_vector(store.sql.model, vtext, vec.tobytes())
        store.catch_up()

    def remove(self, name: str) -> dict:
        """Remove a skill (a later add revives it); returns what was removed."""
        item = self.get(name)
        with self.store.write() as t:
            t.append(Kind.SKILL_REMOVE, {"name": item["name"], "ts": now_millis()})
        self.store.catch_up()
        return item

    # -- matching ---------------------------------------------------------------------------
    def _vectors(self, texts: list[str]) -> Any:
        """The vectors of ``texts`` as a matrix: from the log's cache, the missing ones embedded
        and cached."""
        import numpy as np

        store = self.store
        cached = {t: store.log.cached_vector(store.sql.model, t) for t in dict.fromkeys(texts)}
        missing = [t for t, v in cached.items() if v is None or len(v) != 4 * store.sql.dim]
        if missing:
            vecs = store.embed_docs(missing)
            with store.write() as t:
                for vtext, vec in zip(missing, vecs):
                    t.cache_vector(store.sql.model, vtext, vec.tobytes())
                    cached[vtext] = vec.tobytes()
        return np.frombuffer(b"".join(cached[t] for t in texts), np.float32).reshape(len(texts), store.sql.dim)

    def match(self, query: Any, k: int = 5) -> list[dict]:
        """The skills that best fit a task (see the module doc), best first, each with
        ``score`` and ``signals``."""
        import numpy as np

        query = validate.text(query, what="query")
        k_ok = _check_k(k)
        found = rows.rows(self.store.sql)
        if not found:
            return []
        skills = [_out(r) for r in found]
        matrix = self._vectors([vector_text(s) for s in skills])
        q = np.asarray(self.store.embedder.embed_query(query), dtype=np.float32)
        cos = np.einsum("ij,j->i", matrix, q)
        bm = bm25(rows.tokenizer(self.store.sql), query, skills)
        best_bm = max(bm.values(), default=0.0)
        vec_rank, kw_rank = _ranked([r["name"] for r in found], cos, bm)
        wv, wk = self.store.config.weight_vector, self.store.config.weight_keyword
        out = []
        for i, row in enumerate(found):
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

    # -- SKILL.md import ------------------------------------------------------------------
    def _import_one(self, file: Path, seen: dict[str, Path]) -> tuple[dict, dict | None]:
        fields = parse_skill_md(file)
        name = check_name(fields.pop("name"))
        if name in seen:
            raise InvalidInput(f"skill name {name!r} also used by {seen[name]}", hint="give each skill its own name")
        skill, cur = self.build(name, **fields)
        # a SKILL.md is the whole skill: what it leaves out is empty, not "as before"
        for key, empty in (("tags", []), ("examples", []), ("input_schema", None)):
            if fields.get(key) is None:
                skill[key] = empty
        seen[name] = file
        return skill, cur

    def import_dir(self, path: str | Path, *, skip_bad: bool = False) -> dict:
        """Import a folder of SKILL.md skills (see the module doc).  Returns ``{"added",
        "updated", "unchanged": [names], "bad": [{"path", "reason"}]}``; without ``skip_bad``
        a bad file stops the import before anything is stored, naming every bad file."""
        report: dict[str, list] = {"added": [], "updated": [], "unchanged": [], "bad": []}
        ready: list[dict] = []
        seen: dict[str, Path] = {}
        for file in _skill_folder(path):
            try:
                skill, cur = self._import_one(file, seen)
            except InvalidInput as exc:
                report["bad"].append({"path": str(file), "reason": exc.message})
                continue
            if cur is not None and content_hash(skill) == content_hash(cur):
                report["unchanged"].append(skill["name"])
            else:
                report["updated" if cur is not None else "added"].append(skill["name"])
                ready.append(skill)
        if report["bad"] and not skip_bad:
            detail = "; ".join(f"{b['path']}: {b['reason']}" for b in report["bad"])
            raise InvalidInput(f"{len(report['bad'])} bad skill file(s), nothing imported: {detail}",
                               hint="fix them, or pass --skip-bad to import the others")
        self._write(ready)
        return report

    # -- export / import (brandmind/exchange.py) ---------------------------------------------
    def export_records(self) -> Iterable[dict]:
        """One ``{"kind": "skill", ...}`` record per visible skill, by name."""
        for row in rows.rows(self.store.sql):
            yield {"kind": "skill", **_out(row)}

    def import_payload(self, rec: dict) -> dict | None:
        """The ``skill.add`` payload of an export record (None: a skill of that name exists)."""
        name = check_name(rec["name"])
        if rows.row(self.store.sql, name) is not None:
            return None
        return {
            "name": name, "description": text(rec["description"], "description", MAX_DESCRIPTION),
            "input_schema": check_schema(rec.get("input_schema")), "examples": check_examples(rec.get("examples", [])),
            "tags": check_tags(rec.get("tags", [])), "version": check_version(rec.get("version", DEFAULT_VERSION)),
            "body": text(rec.get("body", ""), "body", MAX_BODY, empty=True),
            "source": rec.get("source") if isinstance(rec.get("source"), str) else None,
            "meta": check_meta(rec.get("meta")), "ts": parse_time(rec.get("updated"), field="updated") or now_millis(),
        }
