"""bm fs ls|cat|write|append|rm|mv|find|index: the user's workspace (brandmind/workspace.py)."""
from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Optional

import typer

from .common import JsonlOpt, JsonOpt, UserOpt, open_store, store_for_writing
from .output import emit, info, wants_json

fs_app = typer.Typer(
    help="The user's workspace of files: /.profile and /notes are indexed for recall; /drafts and /system are not. "
         "Kept in the data directory, or encrypted on S3 with `bm config set workspace s3://BUCKET/PREFIX`.",
    no_args_is_help=True)

PathArg = Annotated[str, typer.Argument(help="Workspace path, e.g. /notes/ideas.md.")]


def _content(text: str) -> bytes:
    """TEXT as given (its bytes, even undecodable ones), or all of stdin for `-`."""
    if text == "-":
        return sys.stdin.buffer.read()
    return text.encode("utf-8", "surrogateescape")


def _done(report: dict, as_json: bool, message: str) -> None:
    if wants_json(as_json):
        print(json.dumps(report, ensure_ascii=False))
    else:
        info(message)


def _written(r: dict) -> str:
    note = f", {r['chunks']} chunk(s) indexed" if r["indexed"] else " (not indexed)"
    return f"wrote {r['path']} ({r['size']:,} bytes{note})"


@fs_app.command("ls")
def fs_ls(path: Annotated[str, typer.Argument(help="Folder or file [default: /].")] = "/",
          user: UserOpt = None, as_json: JsonOpt = False, jsonl: JsonlOpt = False) -> None:
    """List a folder of the workspace.

    \b
    Example:
      bm fs ls /notes -u ann
    """
    with open_store(if_missing="empty") as mem:
        items = mem.workspace(user).ls(path)
    emit(items, as_json=as_json, jsonl=jsonl, table=_table)


@fs_app.command("cat")
def fs_cat(path: PathArg, user: UserOpt = None,
           as_json: Annotated[bool, typer.Option("--json", help="Print {path, text|base64} instead of the raw content.")] = False) -> None:
    """Print a file (its bytes as they are, also when piped; --json wraps them).

    \b
    Example:
      bm fs cat /notes/lisbon.md -u ann
    """
    with open_store() as mem:
        ws = mem.workspace(user)
        norm = ws.path(path)
        data = ws.cat(norm)
    if as_json:
        out: dict = {"path": norm, "size": len(data)}
        try:
            out["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            import base64

            out["base64"] = base64.b64encode(data).decode("ascii")
        print(json.dumps(out, ensure_ascii=False))
        return
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


@fs_app.command("write")
def fs_write(path: PathArg, text: Annotated[str, typer.Argument(help="The content, or - to read stdin.")],
             user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Create or replace a file (atomically); notes and profile files are re-indexed.

    \b
    Examples:
      bm fs write /notes/lisbon.md "Ann moved to Lisbon in May"
      cat plan.md | bm fs write /drafts/plan.md -
    """
    data = _content(text)
    with store_for_writing() as mem:
        report = mem.workspace(user).write(path, data)
    _done(report, as_json, _written(report))


@fs_app.command("append")
def fs_append(path: PathArg, text: Annotated[str, typer.Argument(help="The text to add, or - to read stdin.")],
              user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Add to the end of a file (created if missing); re-indexed like write.

    \b
    Example:
      bm fs append /notes/ideas.md "- a bar with live jazz" -u ann
    """
    data = _content(text)
    with store_for_writing() as mem:
        report = mem.workspace(user).append(path, data)
    _done(report, as_json, _written(report).replace("wrote", "appended to", 1))


@fs_app.command("rm")
def fs_rm(path: PathArg,
          recursive: Annotated[bool, typer.Option("--recursive", "-r", help="Remove a folder and everything in it.")] = False,
          user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Remove a file (a folder only with -r); its indexed chunks are forgotten.

    \b
    Example:
      bm fs rm /drafts -r -u ann
    """
    with open_store() as mem:
        report = mem.workspace(user).rm(path, recursive=recursive)
    _done(report, as_json, f"removed {report['removed']} ({len(report['files'])} file(s), "
                           f"{report['forgotten_chunks']} chunk(s) forgotten)")


@fs_app.command("mv")
def fs_mv(src: Annotated[str, typer.Argument(help="File or folder to move.")],
          dst: Annotated[str, typer.Argument(help="New path, or an existing folder to move it into.")],
          force: Annotated[bool, typer.Option("--force", "-f", help="Replace an existing file at DST.")] = False,
          user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Move or rename; the index follows (e.g. /drafts -> /notes gets indexed).

    \b
    Example:
      bm fs mv /drafts/plan.md /notes/ -u ann
    """
    with open_store() as mem:
        report = mem.workspace(user).mv(src, dst, force=force)
    _done(report, as_json, f"moved {report['from']} -> {report['to']}")


@fs_app.command("find")
def fs_find(
    pattern: Annotated[str, typer.Argument(help="Glob over file names and paths (case-insensitive), e.g. '*.md' or '/notes/*'.")] = "*",
    grep: Annotated[Optional[str], typer.Option("--grep", "-g", help="Also search the files' text for this (case-insensitive); prints matching lines.")] = None,
    path: Annotated[str, typer.Option("--in", help="Folder to search [default: /].")] = "/",
    user: UserOpt = None, as_json: JsonOpt = False, jsonl: JsonlOpt = False,
) -> None:
    """Find files by name (glob) and/or by text (--grep).

    \b
    Examples:
      bm fs find '*.md'
      bm fs find --grep lisbon
      bm fs find '/notes/*' -g budget
    """
    with open_store(if_missing="empty") as mem:
        items = mem.workspace(user).find(pattern, grep=grep, path=path)
    emit(items, as_json=as_json, jsonl=jsonl, table=_grep_table if grep is not None else _table)


@fs_app.command("index")
def fs_index(full: Annotated[bool, typer.Option("--full", help="Re-hash every file, not only those whose size or time changed.")] = False,
             user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Re-index notes and profile files changed on disk behind bm's back.

    \b
    Example:
      bm fs index --full -u ann
    """
    with open_store() as mem:
        report = mem.workspace(user).index(full=full)
    _done(report, as_json, f"re-indexed {len(report['indexed'])} file(s) ({report['chunks']} chunk(s)), "
                           f"dropped {len(report['removed'])}, {len(report['unchanged'])} unchanged")


def _table(items: list[dict]) -> Any:
    from rich.table import Table

    t = Table(header_style="bold")
    for col in ("type", "size", "modified", "path"):
        t.add_column(col, justify="right" if col == "size" else "left", no_wrap=col != "path",
                     overflow="fold" if col == "path" else "ellipsis")
    for e in items:
        t.add_row(e["type"], f"{e['size']:,}" if e["type"] == "file" else "", (e["modified"] or "")[:19],
                  e["path"] + ("/" if e["type"] == "dir" else ""))
    if not items:
        t.caption = "nothing here"
    return t


def _grep_table(items: list[dict]) -> Any:
    from rich.table import Table

    t = Table(header_style="bold")
    t.add_column("path", overflow="fold", ratio=1)
    t.add_column("line", justify="right")
    t.add_column("text", overflow="fold", ratio=2)
    for m in items:
        t.add_row(m["path"], str(m["line"]), m["text"])
    if not items:
        t.caption = "no match"
    return t
