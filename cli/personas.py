"""bm persona list|show|add|assign|unassign|detect|load-starters and bm persona doc show|set|import
(brandmind/personas.py)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, List, Optional

import typer

from .common import (JsonOpt, UserOpt, by, checked, name_check, open_store, option, read_text_arg,
                     store_for_writing)
from .output import emit, kv_table

persona_app = typer.Typer(
    help="Persona cohorts (<industry>_<role>): who holds them, their shared "
         "<handle>_service_experience block, detection; and the agent's own persona document. "
         "The four starter personas are built in (stored on first assignment or by load-starters).",
    no_args_is_help=True)
doc_app = typer.Typer(help="The agent's persona document: id, name, version, description, goals, norms, "
                           "traits, skills.", no_args_is_help=True)
persona_app.add_typer(doc_app, name="doc")

HandleArg = Annotated[str, typer.Argument(help="A persona handle, e.g. qsr_real_estate.",
                                          callback=checked(by("brandmind.personas:check_handle")))]
AgentDocOpt = Annotated[str, option("--agent", "-a", help="Whose persona document (an agent id).",
                                   check=name_check("agent"))]


def _read_file(path: str) -> bytes:
    from brandmind.errors import NotFound

    if path == "-":
        return sys.stdin.buffer.read()
    p = Path(path)
    if not p.is_file():
        raise NotFound(f"no such file: {path}", hint="give a JSON or YAML file, or - to read stdin")
    return p.read_bytes()


# -- tables ------------------------------------------------------------------------------------------
def _personas_table(items: list[dict]) -> Any:
    from rich.table import Table

    t = Table(header_style="bold")
    for col in ("handle", "industry", "role", "stored", "users", "description"):
        t.add_column(col, overflow="fold", no_wrap=col in ("handle", "stored", "users"))
    for p in items:
        desc = p["description"] if len(p["description"]) <= 120 else p["description"][:119] + "…"
        t.add_row(p["handle"], p["industry"], p["role"], "yes" if p["stored"] else "built-in", str(p["users"]), desc)
    if not items:
        t.caption = "no personas"
    return t


def _held_table(items: list[dict]) -> Any:
    from rich.table import Table

    t = Table(header_style="bold")
    for col in ("handle", "confidence", "discovered_at", "last_confirmed", "block"):
        t.add_column(col, overflow="fold")
    for p in items:
        t.add_row(p["handle"], f"{p['confidence']:.2f}", (p["discovered_at"] or "")[:19],
                  (p["last_confirmed"] or "")[:19], p["block"])
    if not items:
        t.caption = "this user holds no persona (bm persona assign HANDLE --user U)"
    return t


def _detect_table(items: list[dict]) -> Any:
    from rich.table import Table

    t = Table(header_style="bold")
    for col in ("handle", "confidence", "why"):
        t.add_column(col, overflow="fold" if col == "why" else "ellipsis", no_wrap=col != "why")
    for r in items:
        t.add_row(r["handle"], f"{r['confidence']:.3f}", r["why"])
    return t


# -- personas ------------------------------------------------------------------------------------------
@persona_app.command("list")
def persona_list(
    user: Annotated[Optional[str], option("--user", "-u", help="Only the personas this user holds.",
                                          check=name_check("user"))] = None,
    as_json: JsonOpt = False,
) -> None:
    """The personas available (stored and built-in starters), or those a user holds (--user).

    \b
    Examples:
      bm persona list
      bm persona list -u ann
    """
    with open_store(if_missing="empty") as mem:
        if user is not None:
            held = mem.personas.held(user)
            emit(held, as_json=as_json, jsonl=False, table=_held_table)
            return
        items = mem.personas.available()
    emit(items, as_json=as_json, jsonl=False, table=_personas_table)


@persona_app.command("show")
def persona_show(handle: HandleArg,
                 as_json: JsonOpt = False) -> None:
    """One persona in full, with the users holding it.

    \b
    Example:
      bm persona show qsr_real_estate --json
    """
    with open_store() as mem:
        out = {**mem.personas.get(handle), "holders": mem.personas.holders(handle)}
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title=f"persona {handle}"))


@persona_app.command("add")
def persona_add(
    file: Annotated[Optional[str], typer.Option("--file", "-f", help="A JSON or YAML file (or - for stdin): one persona, a list, or {personas: [...]}.")] = None,
    handle: Annotated[Optional[str], option("--handle", help="<industry>_<role> (default: made from --industry and --role).",
                                            check=by("brandmind.personas:check_handle"))] = None,
    industry: Annotated[Optional[str], typer.Option("--industry", help="e.g. QSR.")] = None,
    role: Annotated[Optional[str], typer.Option("--role", help="e.g. Real Estate.")] = None,
    description: Annotated[Optional[str], typer.Option("--description", "-d", help="Who these users are and what they do.")] = None,
    kpi: Annotated[Optional[List[str]], typer.Option("--kpi", help="A typical KPI (repeatable).")] = None,
    motivation: Annotated[Optional[List[str]], typer.Option("--motivation", help="A typical motivation (repeatable).")] = None,
    query: Annotated[Optional[List[str]], typer.Option("--query", "-q", help="A quintessential query (repeatable).")] = None,
    keyword: Annotated[Optional[List[str]], typer.Option("--keyword", "-k", help="A detection keyword (repeatable).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a persona (or replace the one with the same handle), from options or a file.

    \b
    Examples:
      bm persona add --industry QSR --role Operations -d "Restaurant operations leaders" --kpi "speed of service"
      bm persona add -f personas.yaml
    """
    from brandmind import personas
    from brandmind.errors import InvalidInput, UsageError

    flags = any(v for v in (handle, industry, role, description, kpi, motivation, query, keyword))
    if file is not None and flags:
        raise UsageError("give either --file or the persona options, not both", hint="see `bm persona add --help`")
    with store_for_writing() as mem:
        if file is not None:
            data = personas.read_structured(_read_file(file), name=file if file != "-" else "stdin")
            if isinstance(data, dict) and "personas" in data:
                data = data["personas"]
            items = data if isinstance(data, list) else [data]
            if not items:
                raise InvalidInput(f"{file} holds no persona", hint="give one persona object or a list of them")
            out: Any = mem.personas.define_many(items)
        else:
            if not flags:
                raise UsageError("nothing to add", hint="give --industry, --role and --description, or --file FILE")
            raw = {"industry": industry, "role": role, "description": description, "typical_kpis": kpi,
                   "typical_motivations": motivation, "quintessential_queries": query, "keywords": keyword}
            if handle:
                raw["handle"] = handle
            out = [mem.personas.define(raw)]
    emit(out if len(out) != 1 else out[0], as_json=as_json, jsonl=False,
         table=lambda o: _personas_table(o if isinstance(o, list) else [o]))


@persona_app.command("assign")
def persona_assign(
    handle: HandleArg,
    user: UserOpt = None,
    confidence: Annotated[float, option("--confidence", "-c", help="How sure, 0 to 1.",
                                        check=by("brandmind.personas:check_confidence"))] = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Record that a user holds a persona (again: confirms it); attaches its shared block.

    \b
    Example:
      bm persona assign qsr_real_estate -u ann --confidence 0.8
    """
    with store_for_writing() as mem:
        out = mem.personas.assign(user, handle, confidence)
    out.pop("persona", None)
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title="assigned"))


@persona_app.command("unassign")
def persona_unassign(
    handle: HandleArg,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The user no longer holds the persona; its shared block is detached from them.

    \b
    Example:
      bm persona unassign qsr_real_estate -u ann
    """
    with open_store() as mem:
        out = mem.personas.unassign(user, handle)
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title="unassigned"))


@persona_app.command("detect")
def persona_detect(
    text: Annotated[str, typer.Argument(help="A piece of conversation, or - to read stdin.")],
    k: Annotated[int, typer.Option("-k", help="How many personas to list.")] = 3,
    as_json: JsonOpt = False,
) -> None:
    """Rank personas for a piece of conversation, with a confidence from 0 to 1.

    \b
    Example:
      bm persona detect "I look for new restaurant sites in Dallas" -k 2
    """
    with open_store(if_missing="empty") as mem:
        out = mem.personas.detect(read_text_arg(text), k=k)
    emit(out, as_json=as_json, jsonl=False, table=_detect_table)


@persona_app.command("load-starters")
def persona_load_starters(as_json: JsonOpt = False) -> None:
    """Store the built-in starter personas (qsr_real_estate, tobacco_consumer_insights,
    retail_asset_management, cpg_retail_media) that are not stored yet.

    \b
    Example:
      bm persona load-starters
    """
    with store_for_writing() as mem:
        out = mem.personas.load_starters()
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title="starter personas"))


# -- the agent's persona document ----------------------------------------------------------------------
@doc_app.command("show")
def doc_show(agent: AgentDocOpt = "default", as_json: JsonOpt = False) -> None:
    """The agent's persona document.

    \b
    Example:
      bm persona doc show -a coach --json
    """
    with open_store() as mem:
        out = mem.personas.doc(agent)
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title=f"persona document of {agent}"))


def _traits(values: list[str]) -> Any:
    from brandmind.errors import UsageError

    pairs = [v.partition("=") for v in values]
    if all(sep for _, sep, _ in pairs):
        return {key.strip(): value.strip() for key, _, value in pairs}
    if any(sep for _, sep, _ in pairs):
        raise UsageError("--trait takes either all name=value or all plain traits",
                         hint="e.g. --trait tone=concise --trait pace=fast, or --trait curious --trait precise")
    return values


@doc_app.command("set")
def doc_set(
    agent: AgentDocOpt = "default",
    name: Annotated[Optional[str], typer.Option("--name", help="The persona's name (required for a new document).")] = None,
    version: Annotated[Optional[int], option("--version", help="Must be above the stored one (default: the next).",
                                             check=_doc_version)] = None,
    doc_id: Annotated[Optional[str], typer.Option("--id", help="Document id (default persona_<agent>).")] = None,
    description: Annotated[Optional[str], typer.Option("--description", "-d", help="Who the agent is.")] = None,
    goal: Annotated[Optional[List[str]], typer.Option("--goal", help="A goal (repeatable; replaces the stored goals).")] = None,
    norm: Annotated[Optional[List[str]], typer.Option("--norm", help="A norm (repeatable; replaces the stored norms).")] = None,
    trait: Annotated[Optional[List[str]], typer.Option("--trait", help="A trait, or name=value (repeatable; replaces the stored traits).")] = None,
    skill: Annotated[Optional[List[str]], typer.Option("--skill", help="A skill name (repeatable; replaces the stored skills).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a new version of the agent's persona document; options not given keep their
    stored values.

    \b
    Example:
      bm persona doc set --name Pi -d "Location analytics assistant" --goal "answer with data" --trait tone=concise
    """
    from brandmind.errors import UsageError

    raw: dict = {"id": doc_id, "name": name, "version": version, "description": description,
                 "goals": goal, "norms": norm, "traits": _traits(trait) if trait else None, "skills": skill}
    if all(v is None for v in raw.values()):
        raise UsageError("nothing to set", hint="give --name, --description, --goal, ... (see `bm persona doc set --help`)")
    with store_for_writing() as mem:
        out = mem.personas.put_doc({k: v for k, v in raw.items() if v is not None}, agent=agent, merge=True)
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title=f"persona document of {agent}"))


@doc_app.command("import")
def doc_import(
    file: Annotated[str, typer.Argument(help="A JSON or YAML persona document, or - for stdin.")],
    agent: AgentDocOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Replace the agent's persona document with the one in FILE (validated; its version,
    when given, must be above the stored one).

    \b
    Example:
      bm persona doc import persona.yaml -a coach
    """
    from brandmind import personas

    data = personas.read_structured(_read_file(file), name=file if file != "-" else "stdin")
    with store_for_writing() as mem:
        out = mem.personas.put_doc(data, agent=agent)
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title=f"persona document of {agent}"))


def _doc_version(value: int) -> int:
    from brandmind.errors import InvalidInput

    if value < 1:
        raise InvalidInput(f"persona document version must be a whole number of at least 1, got {value}",
                           hint="e.g. --version 2 (or leave it out to take the next one)")
    return value
