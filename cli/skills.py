"""bm skill add|list|show|remove|match|import: procedural memory (brandmind/skills.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, List, Optional

import typer

from .common import JsonlOpt, JsonOpt, by, checked, open_store, option, store_for_writing
from .output import emit, info, kv_table, wants_json

skill_app = typer.Typer(help="Skills (procedural memory): how to do things, matched to a task.",
                        no_args_is_help=True)


def _is_file(value: str) -> bool:
    try:
        return Path(value).is_file()
    except OSError:  # e.g. inline JSON longer than a file name may be
        return False


def _schema(value: str) -> Any:
    """--schema: inline JSON (starting with `{`), a file, or - for stdin."""
    from brandmind.errors import InvalidInput, NotFound

    if value == "-":
        text, where = sys.stdin.buffer.read().decode("utf-8", "replace"), "stdin"
    elif value.lstrip().startswith(("{", "[", '"')) and not _is_file(value):
        text, where = value, "--schema"
    else:
        path = Path(value)
        if not _is_file(value):
            raise NotFound(f"no such schema file: {value}",
                           hint='give a JSON Schema file, - for stdin, or inline JSON like \'{"type": "object"}\'')
        text, where = path.read_text(encoding="utf-8", errors="replace"), value
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"the input schema in {where} is not valid JSON ({exc.msg}, line {exc.lineno})",
                           hint='e.g. --schema \'{"type": "object", "properties": {"city": {"type": "string"}}}\'') from None
    except RecursionError:  # e.g. 200,000 nested brackets
        raise InvalidInput(f"the input schema in {where} is JSON nested too deeply to read",
                           hint='e.g. --schema \'{"type": "object", "properties": {"city": {"type": "string"}}}\'') from None


def _body(value: str) -> str:
    from brandmind.errors import InvalidInput, NotFound

    if value == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(value)
        if not path.is_file():
            raise NotFound(f"no such body file: {value}", hint="give a markdown file, or - to read stdin")
        data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the body is not valid UTF-8 (byte {exc.start})", hint="save it as UTF-8") from None


def _example(value: str) -> Any:
    """An --example: JSON when it parses as an object or list, else the text itself."""
    if value.lstrip().startswith(("{", "[")):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            pass
    return value


NameArg = Annotated[str, typer.Argument(help="Skill name, e.g. market-research.",
                                        callback=checked(by("brandmind.skills:check_name")))]


@skill_app.command("add")
def skill_add(
    name: Annotated[str, typer.Argument(help="Skill name: lowercase letters, digits, - and _ (e.g. market-research).",
                                        callback=checked(by("brandmind.skills:check_name")))],
    description: Annotated[Optional[str], typer.Option("--description", "-d", help="What it does and when to use it (required for a new skill).")] = None,
    schema: Annotated[Optional[str], typer.Option("--schema", help="Input JSON Schema (an object schema): inline JSON, a file, or -.")] = None,
    example: Annotated[Optional[List[str]], typer.Option("--example", "-e", help="An example task or input (repeatable; JSON objects allowed).")] = None,
    tag: Annotated[Optional[List[str]], option("--tag", "-t", help="A tag (repeatable).", check=_tag)] = None,
    version: Annotated[Optional[str], option("--version", "-v", help="e.g. 1.2.0 (default 0.1.0 for a new skill; never backwards).",
                                             check=by("brandmind.skills:check_version"))] = None,
    body: Annotated[Optional[str], typer.Option("--body", "-b", help="Markdown instructions: a file, or - for stdin.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a skill, or update one: options given replace those fields, the others stay.

    \b
    Example:
      bm skill add market-research -d "Research a market: size, competitors, trends" -t research --body steps.md
    """
    with store_for_writing() as mem:
        item = mem.skills.add(name, description=description,
                             input_schema=_schema(schema) if schema is not None else None,
                             examples=[_example(e) for e in example] if example else None,
                             tags=tag or None, version=version,
                             body=_body(body) if body is not None else None)
    if wants_json(as_json):
        print(json.dumps({"name": item["name"], "version": item["version"], "changed": item["changed"]}))
    else:
        info(f"{'stored' if item['changed'] else 'unchanged'}: {item['name']} {item['version']}")


@skill_app.command("list")
def skill_list(
    tag: Annotated[Optional[str], typer.Option("--tag", "-t", help="Only skills with this tag.")] = None,
    full: Annotated[bool, typer.Option("--full", help="With schema, examples, body, source and meta.")] = False,
    as_json: JsonOpt = False,
    jsonl: JsonlOpt = False,
) -> None:
    """Every skill, by name.

    \b
    Example:
      bm skill list --tag research
    """
    with open_store(if_missing="empty") as mem:
        items = mem.skills.list(tag=tag, full=full)
    emit(items, as_json=as_json, jsonl=jsonl, table=_table)


@skill_app.command("show")
def skill_show(name: NameArg, as_json: JsonOpt = False) -> None:
    """One skill with its schema, examples and body.

    \b
    Example:
      bm skill show market-research --json | jq -r .body
    """
    with open_store() as mem:
        item = mem.skills.get(name)
    emit(item, as_json=as_json, jsonl=False, table=lambda s: kv_table(s, title=s["name"]))


@skill_app.command("remove")
def skill_remove(name: NameArg, as_json: JsonOpt = False) -> None:
    """Remove a skill (adding it again later revives it).

    \b
    Example:
      bm skill remove market-research
    """
    with open_store() as mem:
        item = mem.skills.remove(name)
    if wants_json(as_json):
        print(json.dumps({"removed": item["name"]}))
    else:
        info(f"removed {item['name']}")


@skill_app.command("match")
def skill_match(
    query: Annotated[str, typer.Argument(help="The task (- reads stdin).")],
    k: Annotated[int, typer.Option("-k", help="How many skills.")] = 5,
    as_json: JsonOpt = False,
    jsonl: JsonlOpt = False,
) -> None:
    """The skills that best fit a task: embedding similarity fused with keyword overlap.

    \b
    Example:
      bm skill match "find sites for a new drive-thru in Austin" -k 3 --json
    """
    from .common import read_text_arg

    with open_store(if_missing="empty") as mem:
        items = mem.skills.match(read_text_arg(query), k=k)
    emit(items, as_json=as_json, jsonl=jsonl, table=lambda r: _table(r, scores=True))


@skill_app.command("import")
def skill_import(
    folder: Annotated[str, typer.Argument(help="A folder with SKILL.md, or with skill subfolders that each hold one.")],
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Report bad SKILL.md files and import the others.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Import agent skills in the SKILL.md format (YAML front matter with name and
    description, then markdown instructions).  A bad file stops the import (nothing is
    stored) unless --skip-bad; unchanged skills are skipped.

    \b
    Example:
      bm skill import ~/.claude/skills --skip-bad
    """
    with store_for_writing() as mem:
        report = mem.skills.import_dir(folder, skip_bad=skip_bad)
    if wants_json(as_json):
        print(json.dumps(report, ensure_ascii=False))
    else:
        info(f"added {len(report['added'])}, updated {len(report['updated'])}, "
             f"unchanged {len(report['unchanged'])}, bad {len(report['bad'])}")
        for bad in report["bad"]:
            info(f"  skipped {bad['path']}: {bad['reason']}")


def _tag(value: str) -> list[str]:
    from brandmind.skills import check_tags

    return check_tags([value])


def _table(items: list[dict], *, scores: bool = False) -> Any:
    from rich.table import Table

    t = Table(header_style="bold")
    if scores:
        t.add_column("score", justify="right")
    for col in ("name", "version", "tags", "description"):
        t.add_column(col, overflow="fold" if col == "description" else "ellipsis", no_wrap=col != "description")
    for s in items:
        row = [s["name"], s["version"], ", ".join(s["tags"]), s["description"]]
        if scores:
            row.insert(0, f"{s['score']:.4f}")
        t.add_row(*row)
    if not items:
        t.caption = "no skills" if not scores else "no skills (add some with `bm skill add` or `bm skill import`)"
    return t
