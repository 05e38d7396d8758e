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
a confidence (0-1), discovered_at and last_confirmed.  :meth:`Personas.assign` also calls
``blocks.ensure_persona_block`` so the shared
``<handle>_service_experience`` block exists; it is attached to every user holding the persona
(``blocks.shared_blocks`` reads who holds it), so :meth:`Personas.unassign` detaches it.

**Detection** (:meth:`Personas.detect`) ranks personas for a piece of conversation:

* similarity ``sim`` = 0.5 * cos(text, profile) + 0.5 * max over queries cos(text, query), where
  profile = industry, role, description, KPIs and motivations, embedded with the store's embedder
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

The op kinds (``persona.define``, ``persona.assign``, ``persona.unassign``, ``persona.doc``)
and how they merge: brandmind/personarules.py and ``merge.persona_*``; the tables:
brandmind/storage/personas.py; the checks of a definition and a document: ``validate.persona``
and ``validate.persona_doc``.  :class:`Personas` (``mem.personas``) is the API.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from . import blocks, validate
from .clock import iso, now_millis, parse_time
from .errors import InvalidInput, NotFound, UsageError
from .ops import Kind
from .storage import personas as rows
from .validate import (PERSONA_ALIASES as ALIASES, PERSONA_DOC_FIELDS as DOC_FIELDS,  # noqa: F401
                       PERSONA_FIELDS as FIELDS, PERSONA_LIST_FIELDS as LIST_FIELDS, slug)

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

DEFAULT_AGENT = "default"
BLOCK_SUFFIX = "_service_experience"
# the checks (brandmind/validate.py), under the names callers know
check_handle = validate.persona_handle
normalize = validate.persona
check_doc = validate.persona_doc
check_confidence = validate.confidence


def block_label(handle: str) -> str:
    """The label of the persona's shared block."""
    return f"{handle}{BLOCK_SUFFIX}"


# -- starter personas -----------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _starters() -> dict[str, dict]:
    from importlib.resources import files

    raw = json.loads(files("brandmind").joinpath("data/personas.json").read_text(encoding="utf-8"))
    return {p["handle"]: normalize(p) for p in raw["personas"]}


def starters() -> list[dict]:
    """The built-in starter personas (copies)."""
    return [dict(p) for p in _starters().values()]


# -- output shapes -----------------------------------------------------------------------------------
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


def _define_payload(p: dict, *, source: str, ts: int, created_at: int | None = None) -> dict:
    payload = {k: p[k] for k in FIELDS}
    payload.update({"source": source, "ts": ts})
    if created_at is not None:
        payload["created_at"] = created_at
    return payload


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


# -- detection (the scoring is in the module docstring) --------------------------------------------
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


def _persona_vectors(embedder: Any, p: dict) -> Any:
    """[profile, query 1, query 2, ...] vectors of a persona, cached per process."""
    import numpy as np

    texts = [_profile_text(p), *p.get("quintessential_queries", [])]
    key = (embedder.name, hashlib.sha1("\x00".join(texts).encode()).hexdigest())
    vecs = _VECTORS.get(key)
    if vecs is None:
        vecs = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        _VECTORS[key] = vecs
    return vecs


def _keyword_fit(terms: dict[str, tuple[float, str]], normed: str, df: dict[str, int],
                 n: int) -> tuple[float, list[str]]:
    """``(kw, matched phrases as written)`` of one persona's terms in the normalised text."""
    matched = sorted(((t, w * math.log((n + 1) / (df[t] + 0.5)), shown) for t, (w, shown) in terms.items()
                      if f" {t} " in normed), key=lambda m: (-m[1], m[0]))
    # a phrase's words count once: drop single words inside a matched phrase
    phrases = [t for t, _, _ in matched if " " in t]
    matched = [m for m in matched if " " in m[0] or not any(f" {m[0]} " in f" {ph} " for ph in phrases)]
    weight = sum(max(w, 0.0) for _, w, _ in matched)
    return 1.0 - math.exp(-weight / 3.0), list(dict.fromkeys(shown for _, _, shown in matched))


def rank(personas: list[dict], text: str, embedder: Any, k: int) -> list[dict]:
    """The ``k`` of ``personas`` that best fit ``text``, best first (module docstring)."""
    import numpy as np

    qvec = np.asarray(embedder.embed_query(text), dtype=np.float32)
    qvec /= max(float(np.linalg.norm(qvec)), 1e-12)
    normed = _norm(text)
    all_terms = [_terms(p) for p in personas]
    df: dict[str, int] = {}
    for terms in all_terms:
        for term in terms:
            df[term] = df.get(term, 0) + 1
    found = []
    for p, terms in zip(personas, all_terms):
        cos = _persona_vectors(embedder, p) @ qvec
        sim = float(0.5 * cos[0] + 0.5 * (cos[1:].max() if len(cos) > 1 else cos[0]))
        kw, words = _keyword_fit(terms, normed, df, len(personas))
        found.append((p["handle"], sim, kw, words))
    scores = np.array([0.5 * sim + 0.5 * kw for _, sim, kw, _ in found])
    soft = np.exp((scores - scores.max()) / TEMPERATURE)
    soft /= soft.sum()
    out = []
    for (handle, sim, kw, words), score, share in zip(found, scores, soft):
        fit = max(kw, min(1.0, max(0.0, (sim - SIM_FLOOR) / SIM_SPAN)))
        why = (f"keywords: {', '.join(words[:6])}" if words else "no keywords") + f"; similarity {sim:.2f}"
        out.append({"handle": handle, "confidence": round(float(share) * fit, 3), "why": why,
                    "score": round(float(score), 4), "similarity": round(sim, 4), "keywords": words[:10]})
    out.sort(key=lambda r: (-r["confidence"], -r["score"], r["handle"]))
    return out[:k]


# -- the API ------------------------------------------------------------------------------------
EXPORT_KINDS = ("persona", "persona_user", "persona_doc")


class Personas:
    """Persona cohorts, who holds them, detection and the agents' persona documents over a
    store (``mem.personas``; see the module docstring)."""

    def __init__(self, store: "Store") -> None:
        self.store = store

    # -- reading -----------------------------------------------------------------------
    def available(self) -> list[dict]:
        """Every persona an agent can assign: the stored ones and the built-in starters not
        stored yet, by handle; each with ``stored``, ``source``, ``block`` and ``users`` (how
        many users hold it)."""
        counts = rows.held_counts(self.store.sql)
        out = {r["handle"]: _row_out(r, counts.get(r["handle"], 0)) for r in rows.definitions(self.store.sql)}
        for handle, p in _starters().items():
            if handle not in out:
                out[handle] = _starter_out(p, counts.get(handle, 0))
        return [out[h] for h in sorted(out)]

    def get(self, handle: str) -> dict:
        """One persona (stored, else built in), or NotFound."""
        check_handle(handle)
        users = rows.held_count(self.store.sql, handle)
        row = rows.definition(self.store.sql, handle)
        if row is not None:
            return _row_out(row, users)
        if handle in _starters():
            return _starter_out(_starters()[handle], users)
        raise NotFound(f"no persona {handle!r}",
                       hint="list them with `bm persona list`, or add one with `bm persona add`")

    def held(self, user: str | None = None) -> list[dict]:
        """The personas ``user`` holds, highest confidence first: ``{"handle", "confidence",
        "discovered_at", "last_confirmed", "industry", "role", "block"}``."""
        user = self.store.user(user)
        out = []
        for r in rows.held_by(self.store.sql, user):
            try:
                p = self.get(r["handle"])
            except NotFound:  # assigned on another replica whose definition has not arrived yet
                p = {"industry": None, "role": None}
            out.append({"handle": r["handle"], "confidence": r["confidence"],
                        "discovered_at": iso(r["discovered_at"]), "last_confirmed": iso(r["last_confirmed"]),
                        "industry": p["industry"], "role": p["role"], "block": block_label(r["handle"])})
        return out

    def holders(self, handle: str) -> list[str]:
        """The users holding ``handle``."""
        return rows.holders(self.store.sql, handle)

    def detect(self, text: str | bytes, k: int = 3) -> list[dict]:
        """The ``k`` personas that best fit ``text``, best first: ``{"handle", "confidence",
        "why", "score", "similarity", "keywords"}`` (calibration in the module docstring)."""
        text = validate.text(text, what="text")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
            raise UsageError(f"k must be a whole number from 1 to 100, got {k!r}", hint="e.g. -k 3")
        personas = self.available()
        return rank(personas, text, self.store.embedder, k) if personas else []

    # -- writing -----------------------------------------------------------------------
    def _append(self, ops: Iterable[tuple[str, dict]]) -> None:
        with self.store.write() as t:
            for kind, payload in ops:
                t.append(kind, payload)
        self.store.catch_up()

    def define(self, raw: dict, *, source: str = "user") -> dict:
        """Add or replace a persona definition; returns it (with ``updated``: whether it
        replaced a stored one)."""
        p = normalize(raw)
        existed = rows.definition(self.store.sql, p["handle"]) is not None
        self._append([(Kind.PERSONA_DEFINE, _define_payload(p, source=source, ts=now_millis()))])
        return {**self.get(p["handle"]), "updated": existed}

    def define_many(self, raws: Iterable[dict], *, source: str = "user") -> list[dict]:
        """Several definitions, all checked before any is written (one op-log transaction)."""
        items = [normalize(r) for r in raws]
        handles = [p["handle"] for p in items]
        dupes = sorted({h for h in handles if handles.count(h) > 1})
        if dupes:
            raise InvalidInput(f"persona {dupes[0]!r} is defined twice in the input",
                               hint="keep one definition per handle")
        stored = rows.handles(self.store.sql)
        now = now_millis()
        self._append((Kind.PERSONA_DEFINE, _define_payload(p, source=source, ts=now)) for p in items)
        return [{**self.get(h), "updated": h in stored} for h in handles]

    def load_starters(self) -> dict:
        """Store the built-in starter personas that are not stored yet."""
        stored = rows.handles(self.store.sql)
        todo = [p for h, p in _starters().items() if h not in stored]
        if todo:
            now = now_millis()
            self._append((Kind.PERSONA_DEFINE, _define_payload(p, source="starter", ts=now)) for p in todo)
        return {"loaded": [p["handle"] for p in todo], "already_stored": sorted(set(_starters()) & stored)}

    def assign(self, user: str | None, handle: str, confidence: float = 1.0, *,
               discovered_at: int | str | None = None, last_confirmed: int | str | None = None) -> dict:
        """Record that ``user`` holds persona ``handle`` (again: confirms it) and make sure its
        shared block exists (``blocks.ensure_persona_block``), which attaches it to the user.
        A starter persona not stored yet is stored in the same op-log transaction.  Returns the
        assignment as :meth:`held` lists it, plus ``"user"`` and ``"persona"``."""
        user = self.store.user(user)
        check_handle(handle)
        confidence = check_confidence(confidence)
        persona = self.get(handle)  # NotFound for an unknown handle, before anything is written
        now = now_millis()
        payload = {"user": user, "handle": handle, "confidence": confidence,
                   "discovered_at": parse_time(discovered_at, field="discovered_at")
                   if discovered_at is not None else now,
                   "last_confirmed": parse_time(last_confirmed, field="last_confirmed")
                   if last_confirmed is not None else now}
        ops = []  # definition, shared block and assignment land together
        if not persona["stored"]:
            ops.append((Kind.PERSONA_DEFINE, _define_payload(_starters()[handle], source="starter", ts=now)))
        shared = blocks.Blocks(self.store)
        if not shared.has_persona_block(handle):
            ops.append(blocks.persona_block_op(handle))
        ops.append((Kind.PERSONA_ASSIGN, payload))
        self._append(ops)
        shared.ensure_persona_block(handle)  # a no-op now; defines it if a replay lost it
        held = next(p for p in self.held(user) if p["handle"] == handle)
        return {**held, "user": user, "persona": self.get(handle)}

    def unassign(self, user: str | None, handle: str) -> dict:
        """``user`` no longer holds ``handle`` (the shared block is detached from them; it stays
        for the other holders).  NotFound when they do not hold it."""
        user = self.store.user(user)
        check_handle(handle)
        if not rows.holds(self.store.sql, user, handle):
            raise NotFound(f"user {user!r} does not hold persona {handle!r}",
                           hint=f"see the user's personas with `bm persona list --user {user}`")
        self._append([(Kind.PERSONA_UNASSIGN, {"user": user, "handle": handle})])
        return {"user": user, "handle": handle, "unassigned": True}

    # -- persona documents ---------------------------------------------------------------
    def doc(self, agent: str = DEFAULT_AGENT) -> dict:
        """The agent's persona document, or NotFound."""
        agent = validate.name(agent, what="agent")
        found = rows.doc(self.store.sql, agent)
        if found is None:
            raise NotFound(f"agent {agent!r} has no persona document",
                           hint="write one with `bm persona doc set --name NAME ...` or `bm persona doc import FILE`")
        return {"agent": agent, **found[0], "updated_at": iso(found[2])}

    def put_doc(self, raw: dict, *, agent: str = DEFAULT_AGENT, merge: bool = False) -> dict:
        """Store a new version of the agent's persona document.  ``merge``: fields not given
        keep their stored values (``bm persona doc set``).  Without a version, the next one is
        taken; a given version must be above the stored one."""
        agent = validate.name(agent, what="agent")
        found = rows.doc(self.store.sql, agent)
        if merge and found:
            raw = {**found[0], "version": None, **{k: v for k, v in raw.items() if v is not None}}
        doc = check_doc(raw, agent=agent)
        if doc["version"] is None:
            doc["version"] = (found[1] + 1) if found else 1
        elif found and doc["version"] <= found[1]:
            raise InvalidInput(f"the persona document of agent {agent!r} is at version {found[1]}; "
                               f"version {doc['version']} is not above it",
                               hint=f"give version {found[1] + 1} or more (or leave the version out)")
        self._append([(Kind.PERSONA_DOC, {"agent": agent, "doc": doc, "ts": now_millis()})])
        return self.doc(agent)

    # -- export / import (brandmind/exchange.py) -------------------------------------------
    def export_records(self) -> Iterator[dict]:
        """Stored personas, held assignments and documents, each sorted by key."""
        sql = self.store.sql
        for row in rows.definitions(sql):
            out = _row_out(row)
            yield {"kind": "persona", **{k: out[k] for k in FIELDS}, "source": out["source"],
                   "created_at": out["created_at"], "updated_at": out["updated_at"]}
        for row in rows.all_held(sql):
            yield {"kind": "persona_user", "user": row["user_id"], "handle": row["handle"],
                   "confidence": row["confidence"], "discovered_at": iso(row["discovered_at"]),
                   "last_confirmed": iso(row["last_confirmed"])}
        for agent in rows.doc_agents(sql):
            yield {"kind": "persona_doc", **self.doc(agent)}

    def import_ops(self, kind: str, rec: dict) -> list[tuple[str, dict]] | None:
        """The ops that restore one exported record (``rec`` without its kind); None when the
        store already has it."""
        sql = self.store.sql
        if kind == "persona":
            p = normalize({k: v for k, v in rec.items() if k in FIELDS})
            if rows.definition(sql, p["handle"]) is not None:
                return None
            ts = parse_time(rec.get("updated_at"), field="updated_at") or now_millis()
            created = parse_time(rec.get("created_at"), field="created_at") or ts
            return [(Kind.PERSONA_DEFINE, _define_payload(p, source=str(rec.get("source") or "import"), ts=ts,
                                                       created_at=created))]
        if kind == "persona_user":
            user = validate.name(rec["user"], what="user")
            handle = check_handle(rec["handle"])
            if rows.holds(sql, user, handle):
                return None
            return [(Kind.PERSONA_ASSIGN, {
                "user": user, "handle": handle, "confidence": check_confidence(rec["confidence"]),
                "discovered_at": parse_time(rec["discovered_at"], field="discovered_at"),
                "last_confirmed": parse_time(rec["last_confirmed"], field="last_confirmed")})]
        if kind == "persona_doc":
            agent = validate.name(rec["agent"], what="agent")
            doc = check_doc({k: v for k, v in rec.items() if k in DOC_FIELDS}, agent=agent)
            if doc["version"] is None:
                raise InvalidInput("a persona_doc record needs a version", hint="is this a `bm export` file?")
            stamp = rows.doc_stamp(sql, agent)
            if stamp is not None and stamp[0] >= doc["version"]:
                return None
            return [(Kind.PERSONA_DOC, {"agent": agent, "doc": doc,
                                     "ts": parse_time(rec.get("updated_at"), field="updated_at") or now_millis()})]
        raise InvalidInput(f"not a persona record kind: {kind!r}", hint="is this a `bm export` file?")
