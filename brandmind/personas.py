"""Persona cohorts (``<industry>_<role>``), who holds them, detection, and the agent's persona document.

**Personas** describe a professional cohort: handle ``<industry>_<role>`` (lower case,
``_``-joined slugs of the industry and the role, e.g. ``qsr_real_estate``), industry, role,
description, typical KPIs, typical motivations, quintessential queries, and optional
detection keywords.  The four starter personas of the seed design (brandmind/data/personas.json:
qsr_real_estate, tobacco_consumer_insights, retail_asset_management, cpg_retail_media) are
*built in*: listed, detected and assignable without loading anything.  A starter is written
to the op log (``persona.define``) the first time it is assigned, or all at once by
``bm persona load-starters``; nothing is written by ``bm init`` (a fresh store's log and
export stay empty).  A stored definition overrides the built-in one of the same handle.

**Assignments** (the seed's UserPersonaBridge): a user holds any number of personas, each with
a confidence (0-1), discovered_at and last_confirmed.  :func:`assign` also calls
``brandmind.blocks.ensure_persona_block(mem, handle)`` so the shared
``<handle>_service_experience`` block exists; it is attached to every user holding the persona
(``blocks.shared_blocks`` reads :func:`user_personas`), so :func:`unassign` detaches it.

**Detection** (:func:`detect`) ranks personas for a piece of conversation:

* similarity ``sim`` = 0.5 * cos(text, profile) + 0.5 * max over queries cos(text, query), where
  profile = industry, role, description, KPIs and motivations, embedded with ``mem.embedder``
  (documents) against the text (query); persona vectors are cached per process;
* keyword evidence ``kw`` = 1 - exp(-W / 3), W the summed weight of the persona's terms found in
  the text (keywords, industry, role and handle words weigh 2, multi-word ones 3; words of the
  KPIs, queries and description weigh 1), each times its rarity across personas
  (log((N + 1) / (df + 0.5)));
* score = 0.5 * sim + 0.5 * kw;
* **confidence** = softmax(score / 0.08) over all personas, times the persona's absolute fit
  ``max(kw, clamp((sim - 0.2) / 0.4))``: the first factor says how much better it fits than the
  others, the second whether it fits at all, so an unrelated text gets low confidence
  everywhere rather than 1/N.  ``why`` names the matched terms and the similarity.

**Persona documents** describe the agent itself, one per agent id: ``{id, name, version,
description, goals[], norms[], traits, skills[]}`` (traits: a list of strings or a mapping of
trait -> value; skills: skill names).  A new document must carry a higher version than the
stored one.

Op kinds (see brandmind/projection.py for the list of all ops):

``persona.define``   {handle, industry, role, description, typical_kpis, typical_motivations,
                      quintessential_queries, keywords, source, ts, created_at?}: last writer wins
                      by HLC for every field; created_at = min over all defines
``persona.assign``   {user, handle, confidence, discovered_at, last_confirmed}: discovered_at =
                      min, last_confirmed = max, confidence = that of the latest assign by HLC
``persona.unassign`` {user, handle}: the user holds the persona iff their latest assign's HLC is
                      above their latest unassign's (LWW between the two; both kept as max)
``persona.doc``      {agent, doc, ts}: the document with the highest (version, HLC) wins
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from . import validate
from .clock import iso, now_millis, parse_time
from .errors import InvalidInput, NotFound, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory
    from .sqlstore import SQLStore

SCHEMA = [
    """CREATE TABLE personas(
        handle TEXT PRIMARY KEY, industry TEXT NOT NULL, role TEXT NOT NULL,
        description TEXT NOT NULL, typical_kpis TEXT NOT NULL, typical_motivations TEXT NOT NULL,
        quintessential_queries TEXT NOT NULL, keywords TEXT NOT NULL, source TEXT NOT NULL,
        created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, hlc TEXT NOT NULL)""",
    # one row per (user, persona) ever assigned or unassigned; held iff assign_hlc > unassign_hlc
    """CREATE TABLE persona_users(
        user_id TEXT NOT NULL, handle TEXT NOT NULL, confidence REAL, discovered_at INTEGER,
        last_confirmed INTEGER, assign_hlc TEXT, unassign_hlc TEXT, PRIMARY KEY(user_id, handle))""",
    "CREATE INDEX persona_users_handle ON persona_users(handle)",
    """CREATE TABLE persona_docs(
        agent TEXT PRIMARY KEY, doc TEXT NOT NULL, version INTEGER NOT NULL, updated_at INTEGER NOT NULL,
        hlc TEXT NOT NULL)""",
]

OP_KINDS = ("persona.define", "persona.assign", "persona.unassign", "persona.doc")
LIST_FIELDS = ("typical_kpis", "typical_motivations", "quintessential_queries", "keywords")
FIELDS = ("handle", "industry", "role", "description", *LIST_FIELDS)
# other spellings accepted on input (a file written after the seed's SQL columns, or short names)
ALIASES = {"persona_handle": "handle", "professional_role": "role", "kpis": "typical_kpis",
           "motivations": "typical_motivations", "queries": "quintessential_queries"}
DOC_FIELDS = ("id", "name", "version", "description", "goals", "norms", "traits", "skills")
DEFAULT_AGENT = "default"
BLOCK_SUFFIX = "_service_experience"
_HANDLE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)+$")
_HANDLE_MAX = 64
_TEXT_MAX = 4000
_LIST_MAX = 50
_DOC_MAX = 64_000


# -- validation -------------------------------------------------------------------------------
def slug(value: str) -> str:
    """``"Real Estate"`` -> ``real_estate``."""
    return re.sub(r"[^a-z0-9]+", "_", value.casefold()).strip("_")


def check_handle(handle: Any) -> str:
    if not isinstance(handle, str) or not _HANDLE.match(handle) or len(handle) > _HANDLE_MAX:
        raise InvalidInput(f"invalid persona handle {handle!r}",
                           hint="a handle is <industry>_<role> in lower case letters, digits and _, "
                                f"at most {_HANDLE_MAX} characters, e.g. qsr_real_estate")
    return handle


def block_label(handle: str) -> str:
    """The label of the persona's shared block."""
    return f"{handle}{BLOCK_SUFFIX}"


def _text_field(value: Any, what: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"persona {what} must be a non-empty string, got {value!r}",
                           hint=f"give the {what}, e.g. --{what.replace('_', '-')} ...")
    value = validate.text(value, what=what)
    if len(value) > _TEXT_MAX:
        raise InvalidInput(f"persona {what} is {len(value):,} characters, over {_TEXT_MAX:,}",
                           hint="shorten it")
    return value.strip()


def _list_field(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [line.strip(" -*\t") for line in value.splitlines()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"persona {what} must be a list of strings, got {type(value).__name__}",
                           hint=f'e.g. "{what}": ["first", "second"]')
    out = [validate.text(v, what=what).strip() for v in value if v.strip()]
    if len(out) > _LIST_MAX or any(len(v) > _TEXT_MAX for v in out):
        raise InvalidInput(f"persona {what} has too many or too long entries",
                           hint=f"at most {_LIST_MAX} entries of {_TEXT_MAX:,} characters")
    return list(dict.fromkeys(out))


def normalize(raw: Any) -> dict:
    """A persona definition checked and in canonical form (InvalidInput naming the problem)."""
    if not isinstance(raw, dict):
        raise InvalidInput(f"a persona must be an object, got {type(raw).__name__}",
                           hint='e.g. {"industry": "QSR", "role": "Real Estate", "description": "..."}')
    data: dict[str, Any] = {}
    for key, value in raw.items():
        key = ALIASES.get(key, key)
        if key in ("source", "created_at", "updated_at", "stored", "users", "block", "holders", "updated"):
            continue  # output-only fields (a `bm persona show` result can be fed back)
        if key not in FIELDS:
            raise InvalidInput(f"unknown persona field {key!r}", hint="fields: " + ", ".join(FIELDS))
        data[key] = value
    industry = _text_field(data.get("industry"), "industry")
    role = _text_field(data.get("role"), "role")
    expected = f"{slug(industry)}_{slug(role)}"
    handle = data.get("handle") or expected
    check_handle(handle)
    if handle != expected:
        raise InvalidInput(f"persona handle {handle!r} does not match industry {industry!r} and role {role!r}",
                           hint=f"the handle is <industry>_<role>: use {expected!r}, or change the industry/role")
    out = {"handle": handle, "industry": industry, "role": role,
           "description": _text_field(data.get("description"), "description")}
    for key in LIST_FIELDS:
        out[key] = _list_field(data.get(key), key)
    return out


# -- starter personas -----------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _starters() -> dict[str, dict]:
    from importlib.resources import files

    raw = json.loads(files("brandmind").joinpath("data/personas.json").read_text(encoding="utf-8"))
    return {p["handle"]: normalize(p) for p in raw["personas"]}


def starters() -> list[dict]:
    """The built-in starter personas (copies)."""
    return [dict(p) for p in _starters().values()]


# -- projection (called from brandmind/projection.py) ---------------------------------------------
def apply_op(sql: "SQLStore", op: dict) -> None:
    """Apply one persona.* op to SQLite; deterministic and commutative (see the module docstring)."""
    from .projection import hlc_key

    kind, p, c = op["kind"], op["payload"], sql.conn
    hlc = hlc_key(op["hlc"])
    if kind == "persona.define":
        ts = int(p.get("ts") or op["hlc"][0])
        created = int(p.get("created_at") or ts)
        row = c.execute("SELECT hlc, created_at FROM personas WHERE handle=?", (p["handle"],)).fetchone()
        if row is not None and row[0] >= hlc:
            c.execute("UPDATE personas SET created_at=min(created_at, ?) WHERE handle=?", (created, p["handle"]))
            return
        values = (p["handle"], p["industry"], p["role"], p["description"],
                  *(json.dumps(p.get(k) or [], ensure_ascii=False) for k in LIST_FIELDS),
                  p.get("source") or "user", min(created, row[1]) if row else created, ts, hlc)
        c.execute("INSERT OR REPLACE INTO personas VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", values)
    elif kind in ("persona.assign", "persona.unassign"):
        forgotten = c.execute("SELECT hlc FROM tombstones WHERE id=?", ("user:" + p["user"],)).fetchone()
        if forgotten is not None and hlc < forgotten[0]:
            return  # stamped before the user was forgotten (arrived late from another replica)
        c.execute("INSERT OR IGNORE INTO persona_users(user_id, handle) VALUES(?,?)", (p["user"], p["handle"]))
        if kind == "persona.unassign":
            c.execute("UPDATE persona_users SET unassign_hlc = max(coalesce(unassign_hlc, ''), ?) "
                      "WHERE user_id=? AND handle=?", (hlc, p["user"], p["handle"]))
            return
        c.execute(
            "UPDATE persona_users SET "
            "confidence = CASE WHEN assign_hlc IS NULL OR assign_hlc < :h THEN :conf ELSE confidence END, "
            "discovered_at = min(coalesce(discovered_at, :d), :d), "
            "last_confirmed = max(coalesce(last_confirmed, :l), :l), "
            "assign_hlc = max(coalesce(assign_hlc, ''), :h) WHERE user_id = :u AND handle = :p",
            {"h": hlc, "conf": float(p["confidence"]), "d": int(p["discovered_at"]),
             "l": int(p["last_confirmed"]), "u": p["user"], "p": p["handle"]})
    elif kind == "persona.doc":
        doc = p["doc"]
        version = int(doc["version"])
        row = c.execute("SELECT version, hlc FROM persona_docs WHERE agent=?", (p["agent"],)).fetchone()
        if row is not None and (row[0], row[1]) >= (version, hlc):
            return
        c.execute("INSERT OR REPLACE INTO persona_docs VALUES(?,?,?,?,?)",
                  (p["agent"], json.dumps(doc, ensure_ascii=False, sort_keys=True), version,
                   int(p.get("ts") or op["hlc"][0]), hlc))


def forget_user_sql(sql: "SQLStore", user: str) -> None:
    """``user.forget``: the user's assignments go (their redacted ops replay as nothing)."""
    sql.conn.execute("DELETE FROM persona_users WHERE user_id=?", (user,))


# -- reading ---------------------------------------------------------------------------------------
def _row_out(row: dict, users: int = 0) -> dict:
    out = {k: row[k] for k in ("handle", "industry", "role", "description")}
    for key in LIST_FIELDS:
        out[key] = json.loads(row[key])
    out.update({"source": row["source"], "stored": True, "created_at": iso(row["created_at"]),
                "updated_at": iso(row["updated_at"]), "block": block_label(row["handle"]), "users": users})
    return out


def _starter_out(p: dict, users: int = 0) -> dict:
    return {**p, "source": "starter", "stored": False, "created_at": None, "updated_at": None,
            "block": block_label(p["handle"]), "users": users}


def _held_sql() -> str:
    return "assign_hlc IS NOT NULL AND (unassign_hlc IS NULL OR assign_hlc > unassign_hlc)"


def available(mem: "Memory") -> list[dict]:
    """Every persona an agent can assign: the stored ones and the built-in starters not
    stored yet, by handle; each with ``stored``, ``source``, ``block`` and ``users`` (how many
    users hold it)."""
    counts = dict(mem.sql.conn.execute(
        f"SELECT handle, count(*) FROM persona_users WHERE {_held_sql()} GROUP BY handle").fetchall())
    out = {r["handle"]: _row_out(r, counts.get(r["handle"], 0))
           for r in mem.sql.rows("SELECT * FROM personas")}
    for handle, p in _starters().items():
        if handle not in out:
            out[handle] = _starter_out(p, counts.get(handle, 0))
    return [out[h] for h in sorted(out)]


def get(mem: "Memory", handle: str) -> dict:
    """One persona (stored, else built in), or NotFound."""
    check_handle(handle)
    users = mem.sql.conn.execute(f"SELECT count(*) FROM persona_users WHERE handle=? AND {_held_sql()}",
                                 (handle,)).fetchone()[0]
    rows = list(mem.sql.rows("SELECT * FROM personas WHERE handle=?", (handle,)))
    if rows:
        return _row_out(rows[0], users)
    if handle in _starters():
        return _starter_out(_starters()[handle], users)
    raise NotFound(f"no persona {handle!r}",
                   hint="list them with `bm persona list`, or add one with `bm persona add`")


def user_personas(mem: "Memory", user: str) -> list[dict]:
    """The personas ``user`` holds, highest confidence first: ``{"handle", "confidence",
    "discovered_at", "last_confirmed", "industry", "role", "block"}``."""
    user = validate.name(user, what="user")
    rows = list(mem.sql.rows(
        f"SELECT * FROM persona_users WHERE user_id=? AND {_held_sql()} ORDER BY confidence DESC, handle",
        (user,)))
    out = []
    for r in rows:
        try:
            p = get(mem, r["handle"])
        except NotFound:  # assigned on another replica whose definition has not arrived yet
            p = {"industry": None, "role": None}
        out.append({"handle": r["handle"], "confidence": r["confidence"],
                    "discovered_at": iso(r["discovered_at"]), "last_confirmed": iso(r["last_confirmed"]),
                    "industry": p["industry"], "role": p["role"], "block": block_label(r["handle"])})
    return out


def holders(mem: "Memory", handle: str) -> list[str]:
    """The users holding ``handle``."""
    return [r[0] for r in mem.sql.conn.execute(
        f"SELECT user_id FROM persona_users WHERE handle=? AND {_held_sql()} ORDER BY user_id", (handle,))]


# -- writing ---------------------------------------------------------------------------------------
def _define_payload(p: dict, *, source: str, ts: int, created_at: int | None = None) -> dict:
    payload = {k: p[k] for k in FIELDS}
    payload.update({"source": source, "ts": ts})
    if created_at is not None:
        payload["created_at"] = created_at
    return payload


def define(mem: "Memory", raw: dict, *, source: str = "user") -> dict:
    """Add or replace a persona definition; returns it (with ``updated``: whether it replaced
    a stored one)."""
    p = normalize(raw)
    existed = mem.sql.conn.execute("SELECT 1 FROM personas WHERE handle=?", (p["handle"],)).fetchone()
    with mem.log.write() as t:
        t.append("persona.define", _define_payload(p, source=source, ts=now_millis()))
    mem.store.catch_up()
    return {**get(mem, p["handle"]), "updated": existed is not None}


def define_many(mem: "Memory", raws: Iterable[dict], *, source: str = "user") -> list[dict]:
    """Several definitions, all checked before any is written (one op-log transaction)."""
    items = [normalize(r) for r in raws]
    handles = [p["handle"] for p in items]
    dupes = sorted({h for h in handles if handles.count(h) > 1})
    if dupes:
        raise InvalidInput(f"persona {dupes[0]!r} is defined twice in the input", hint="keep one definition per handle")
    stored = {r[0] for r in mem.sql.conn.execute("SELECT handle FROM personas")}
    now = now_millis()
    with mem.log.write() as t:
        for p in items:
            t.append("persona.define", _define_payload(p, source=source, ts=now))
    mem.store.catch_up()
    return [{**get(mem, h), "updated": h in stored} for h in handles]


def load_starters(mem: "Memory") -> dict:
    """Store the built-in starter personas that are not stored yet."""
    stored = {r[0] for r in mem.sql.conn.execute("SELECT handle FROM personas")}
    todo = [p for h, p in _starters().items() if h not in stored]
    if todo:
        now = now_millis()
        with mem.log.write() as t:
            for p in todo:
                t.append("persona.define", _define_payload(p, source="starter", ts=now))
        mem.store.catch_up()
    return {"loaded": [p["handle"] for p in todo], "already_stored": sorted(set(_starters()) & stored)}


def _confidence(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not 0.0 <= number <= 1.0:
        raise InvalidInput(f"confidence must be a number from 0 to 1, got {value!r}", hint="e.g. --confidence 0.8")
    return number


def assign(mem: "Memory", user: str, handle: str, confidence: float = 1.0, *,
           discovered_at: int | str | None = None, last_confirmed: int | str | None = None) -> dict:
    """Record that ``user`` holds persona ``handle`` (again: confirms it) and make sure its
    shared block exists (``blocks.ensure_persona_block``), which attaches it to the user.
    A starter persona not stored yet is stored in the same op-log transaction.  Returns the
    assignment as :func:`user_personas` lists it, plus ``"persona"``."""
    user = validate.name(user, what="user")
    check_handle(handle)
    confidence = _confidence(confidence)
    persona = get(mem, handle)  # NotFound for an unknown handle, before anything is written
    now = now_millis()
    payload = {"user": user, "handle": handle, "confidence": confidence,
               "discovered_at": parse_time(discovered_at, field="discovered_at") if discovered_at is not None else now,
               "last_confirmed": parse_time(last_confirmed, field="last_confirmed") if last_confirmed is not None else now}
    from . import blocks

    label = block_label(handle)
    has_block = blocks.Blocks(mem.store).has_persona_block(handle)
    with mem.log.write() as t:  # definition, shared block and assignment land together
        if not persona["stored"]:
            t.append("persona.define", _define_payload(_starters()[handle], source="starter", ts=now))
        if not has_block:
            t.append(*blocks.persona_block_op(handle))
        t.append("persona.assign", payload)
    mem.store.catch_up()
    blocks.Blocks(mem.store).ensure_persona_block(handle)  # a no-op now; defines it if a replay lost it
    held = next(p for p in user_personas(mem, user) if p["handle"] == handle)
    return {**held, "user": user, "persona": get(mem, handle)}


def unassign(mem: "Memory", user: str, handle: str) -> dict:
    """``user`` no longer holds ``handle`` (the shared block is detached from them; it stays
    for the other holders).  NotFound when they do not hold it."""
    user = validate.name(user, what="user")
    check_handle(handle)
    held = [p for p in user_personas(mem, user) if p["handle"] == handle]
    if not held:
        raise NotFound(f"user {user!r} does not hold persona {handle!r}",
                       hint=f"see the user's personas with `bm persona list --user {user}`")
    with mem.log.write() as t:
        t.append("persona.unassign", {"user": user, "handle": handle})
    mem.store.catch_up()
    return {"user": user, "handle": handle, "unassigned": True}


# -- detection -------------------------------------------------------------------------------------
_VECTORS: dict[tuple[str, str], Any] = {}  # (embedder name, sha1 of the persona text) -> vectors
_STOP = frozenset("""a an and are as at be by for from has have how i in is it its of on or our that the
their them they this to was we what which who why will with you your my me do does did can could would
should about into than then there these those who whom also more most other some such only own same so
very just not no new one two use using used like want wants need needs get show find which whose when
where across per each all any""".split())
TEMPERATURE = 0.08
SIM_FLOOR, SIM_SPAN = 0.2, 0.4


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _norm(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.casefold())
    return " " + " ".join(_stem(w) for w in words) + " "


def _terms(p: dict) -> dict[str, tuple[float, str]]:
    """The persona's keyword terms: normalised phrase -> (base weight, phrase as written)."""
    terms: dict[str, tuple[float, str]] = {}

    def add(phrase: str, weight: float) -> None:
        key = _norm(phrase).strip()
        if not key or key in _STOP or len(key) < 3 and not key.isalpha():
            return
        if key not in terms or terms[key][0] < weight:
            terms[key] = (weight, phrase.casefold() if len(phrase) <= 40 else key)

    for phrase in [p["industry"], p["role"], *p.get("keywords", []), p["handle"].replace("_", " ")]:
        add(phrase, 3.0 if " " in _norm(phrase).strip() else 2.0)
    for phrase in [p["industry"], p["role"], *p["handle"].split("_")]:
        for word in _norm(phrase).split():
            if word not in _STOP and len(word) >= 3:
                add(word, 2.0)
    for text in [p["description"], *p.get("typical_kpis", []), *p.get("quintessential_queries", [])]:
        for word in re.findall(r"[a-z0-9]+", text.casefold()):
            if _stem(word) not in _STOP and len(word) >= 4 and not word.isdigit():
                add(word, 1.0)
    return terms


def _profile_text(p: dict) -> str:
    return (f"{p['industry']} {p['role']}: {p['description']} Typical KPIs: {'; '.join(p.get('typical_kpis', []))}. "
            f"Motivations: {'; '.join(p.get('typical_motivations', []))}.")


def _persona_vectors(mem: "Memory", p: dict) -> Any:
    """[profile, query 1, query 2, ...] vectors of a persona, cached per process."""
    import numpy as np

    texts = [_profile_text(p), *p.get("quintessential_queries", [])]
    key = (mem.embedder.name, hashlib.sha1("\x00".join(texts).encode()).hexdigest())
    vecs = _VECTORS.get(key)
    if vecs is None:
        vecs = np.asarray(mem.embedder.embed_documents(texts), dtype=np.float32)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        _VECTORS[key] = vecs
    return vecs


def detect(mem: "Memory", text: str | bytes, k: int = 3) -> list[dict]:
    """The ``k`` personas that best fit ``text``, best first: ``{"handle", "confidence",
    "why", "score", "similarity", "keywords"}`` (calibration in the module docstring)."""
    import numpy as np

    text = validate.text(text, what="text")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
        raise UsageError(f"k must be a whole number from 1 to 100, got {k!r}", hint="e.g. -k 3")
    personas = available(mem)
    if not personas:
        return []
    qvec = np.asarray(mem.embedder.embed_query(text), dtype=np.float32)
    qvec /= max(float(np.linalg.norm(qvec)), 1e-12)
    normed = _norm(text)
    all_terms = [_terms(p) for p in personas]
    df: dict[str, int] = {}
    for terms in all_terms:
        for term in terms:
            df[term] = df.get(term, 0) + 1
    n = len(personas)
    rows = []
    for p, terms in zip(personas, all_terms):
        vecs = _persona_vectors(mem, p)
        cos = vecs @ qvec
        sim = float(0.5 * cos[0] + 0.5 * (cos[1:].max() if len(cos) > 1 else cos[0]))
        matched = sorted(((t, w * math.log((n + 1) / (df[t] + 0.5)), shown) for t, (w, shown) in terms.items()
                          if f" {t} " in normed), key=lambda m: (-m[1], m[0]))
        # a phrase's words count once: drop single words inside a matched phrase
        phrases = [t for t, _, _ in matched if " " in t]
        matched = [m for m in matched if " " in m[0] or not any(f" {m[0]} " in f" {ph} " for ph in phrases)]
        weight = sum(max(w, 0.0) for _, w, _ in matched)
        kw = 1.0 - math.exp(-weight / 3.0)
        rows.append((p["handle"], sim, kw, list(dict.fromkeys(shown for _, _, shown in matched))))
    scores = np.array([0.5 * sim + 0.5 * kw for _, sim, kw, _ in rows])
    soft = np.exp((scores - scores.max()) / TEMPERATURE)
    soft /= soft.sum()
    out = []
    for (handle, sim, kw, words), score, share in zip(rows, scores, soft):
        fit = max(kw, min(1.0, max(0.0, (sim - SIM_FLOOR) / SIM_SPAN)))
        confidence = float(share) * fit
        why = (f"keywords: {', '.join(words[:6])}" if words else "no keywords") + f"; similarity {sim:.2f}"
        out.append({"handle": handle, "confidence": round(confidence, 3), "why": why,
                    "score": round(float(score), 4), "similarity": round(sim, 4), "keywords": words[:10]})
    out.sort(key=lambda r: (-r["confidence"], -r["score"], r["handle"]))
    return out[:k]


# -- persona documents -------------------------------------------------------------------------------
def _str_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InvalidInput(f"persona document {what} must be a list of non-empty strings",
                           hint=f'e.g. {what}: ["..."]')
    return [validate.text(v, what=what).strip() for v in value]


def check_doc(raw: Any, *, agent: str) -> dict:
    """A persona document checked and in canonical form (version may still be None)."""
    if not isinstance(raw, dict):
        raise InvalidInput(f"a persona document must be an object, got {type(raw).__name__}",
                           hint="fields: " + ", ".join(DOC_FIELDS))
    unknown = sorted(set(raw) - set(DOC_FIELDS) - {"agent", "updated_at"})
    if unknown:
        raise InvalidInput(f"unknown persona document field {unknown[0]!r}", hint="fields: " + ", ".join(DOC_FIELDS))
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
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
    traits = raw.get("traits")
    if traits is None:
        traits = []
    elif isinstance(traits, dict):
        if not all(isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in traits.items()):
            raise InvalidInput("persona document traits must map names to strings, numbers or booleans",
                               hint='e.g. traits: {tone: concise, formality: 0.3}')
        traits = dict(sorted(traits.items()))
    else:
        traits = _str_list(traits, "traits")
    doc = {"id": validate.name(doc_id, what="document id"), "name": validate.text(name, what="name").strip(),
           "version": version, "description": validate.text(description, what="description").strip()
           if description.strip() else "",
           "goals": _str_list(raw.get("goals"), "goals"), "norms": _str_list(raw.get("norms"), "norms"),
           "traits": traits, "skills": _str_list(raw.get("skills"), "skills")}
    if len(json.dumps(doc, ensure_ascii=False)) > _DOC_MAX:
        raise InvalidInput(f"the persona document is over {_DOC_MAX:,} characters", hint="shorten it")
    return doc


def get_doc(mem: "Memory", agent: str = DEFAULT_AGENT) -> dict:
    agent = validate.name(agent, what="agent")
    row = mem.sql.conn.execute("SELECT doc, updated_at FROM persona_docs WHERE agent=?", (agent,)).fetchone()
    if row is None:
        raise NotFound(f"agent {agent!r} has no persona document",
                       hint="write one with `bm persona doc set --name NAME ...` or `bm persona doc import FILE`")
    return {"agent": agent, **json.loads(row[0]), "updated_at": iso(row[1])}


def put_doc(mem: "Memory", raw: dict, *, agent: str = DEFAULT_AGENT, merge: bool = False) -> dict:
    """Store a new version of the agent's persona document.  ``merge``: fields not given keep
    their stored values (``bm persona doc set``).  Without a version, the next one is taken;
    a given version must be above the stored one."""
    agent = validate.name(agent, what="agent")
    row = mem.sql.conn.execute("SELECT doc, version FROM persona_docs WHERE agent=?", (agent,)).fetchone()
    current = json.loads(row[0]) if row else None
    if merge and current:
        raw = {**current, "version": None, **{k: v for k, v in raw.items() if v is not None}}
    doc = check_doc(raw, agent=agent)
    if doc["version"] is None:
        doc["version"] = (row[1] + 1) if row else 1
    elif row and doc["version"] <= row[1]:
        raise InvalidInput(f"the persona document of agent {agent!r} is at version {row[1]}; "
                           f"version {doc['version']} is not above it",
                           hint=f"give version {row[1] + 1} or more (or leave the version out)")
    with mem.log.write() as t:
        t.append("persona.doc", {"agent": agent, "doc": doc, "ts": now_millis()})
    mem.store.catch_up()
    return get_doc(mem, agent)


def read_structured(data: str | bytes, *, name: str = "input") -> Any:
    """JSON or YAML text -> Python data (InvalidInput with the line of a syntax error)."""
    text = validate.utf8(data, what=name)
    if not text.strip():
        raise InvalidInput(f"{name} is empty", hint="give a JSON or YAML document")
    try:
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:  # e.g. 200,000 nested brackets
        raise validate.too_deep(name, "give a JSON or YAML document nested a few levels at most") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise InvalidInput(f"{name} is YAML nested too deeply to read",
                           hint="give a JSON or YAML document nested a few levels at most") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise InvalidInput(f"{name} is neither JSON nor valid YAML ({problem}{where})",
                           hint="fix the syntax; check with `python -m json.tool` or a YAML linter") from None


# -- export / import (brandmind/exchange.py) ---------------------------------------------------------
EXPORT_KINDS = ("persona", "persona_user", "persona_doc")


def export_records(mem: "Memory") -> Iterator[dict]:
    """Stored personas, held assignments and documents, each sorted by key."""
    for row in mem.sql.rows("SELECT * FROM personas ORDER BY handle"):
        out = _row_out(row)
        yield {"kind": "persona", **{k: out[k] for k in FIELDS}, "source": out["source"],
               "created_at": out["created_at"], "updated_at": out["updated_at"]}
    for row in mem.sql.rows(f"SELECT * FROM persona_users WHERE {_held_sql()} ORDER BY user_id, handle"):
        yield {"kind": "persona_user", "user": row["user_id"], "handle": row["handle"],
               "confidence": row["confidence"], "discovered_at": iso(row["discovered_at"]),
               "last_confirmed": iso(row["last_confirmed"])}
    for row in mem.sql.rows("SELECT agent FROM persona_docs ORDER BY agent"):
        yield {"kind": "persona_doc", **get_doc(mem, row["agent"])}


def import_ops(mem: "Memory", kind: str, rec: dict) -> list[tuple[str, dict]] | None:
    """The ops that restore one exported record (``rec`` without its kind); None when the
    store already has it."""
    c = mem.sql.conn
    if kind == "persona":
        p = normalize({k: v for k, v in rec.items() if k in FIELDS})
        if c.execute("SELECT 1 FROM personas WHERE handle=?", (p["handle"],)).fetchone():
            return None
        ts = parse_time(rec.get("updated_at"), field="updated_at") or now_millis()
        created = parse_time(rec.get("created_at"), field="created_at") or ts
        return [("persona.define", _define_payload(p, source=str(rec.get("source") or "import"), ts=ts,
                                                   created_at=created))]
    if kind == "persona_user":
        user = validate.name(rec["user"], what="user")
        handle = check_handle(rec["handle"])
        if c.execute(f"SELECT 1 FROM persona_users WHERE user_id=? AND handle=? AND {_held_sql()}",
                     (user, handle)).fetchone():
            return None
        return [("persona.assign", {"user": user, "handle": handle, "confidence": _confidence(rec["confidence"]),
                                    "discovered_at": parse_time(rec["discovered_at"], field="discovered_at"),
                                    "last_confirmed": parse_time(rec["last_confirmed"], field="last_confirmed")})]
    if kind == "persona_doc":
        agent = validate.name(rec["agent"], what="agent")
        doc = check_doc({k: v for k, v in rec.items() if k in DOC_FIELDS}, agent=agent)
        if doc["version"] is None:
            raise InvalidInput("a persona_doc record needs a version", hint="is this a `bm export` file?")
        row = c.execute("SELECT version FROM persona_docs WHERE agent=?", (agent,)).fetchone()
        if row is not None and row[0] >= doc["version"]:
            return None
        return [("persona.doc", {"agent": agent, "doc": doc,
                                 "ts": parse_time(rec.get("updated_at"), field="updated_at") or now_millis()})]
    raise InvalidInput(f"not a persona record kind: {kind!r}", hint="is this a `bm export` file?")
