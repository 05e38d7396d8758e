"""init, export, import, rebuild, reindex, stats, doctor, config."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import JsonOpt, open_input, open_store, progress_bar, store_for_writing
from .output import console, emit, emit_json, info, kv_table, wants_json


def init(as_json: JsonOpt = False) -> None:
    """Create the store (under BM_HOME, or the XDG data directory). Safe to re-run.

    Optional: the first write (remember, ingest, beads add, block set, import, ...)
    creates the store too.

    \b
    Example:
      BM_HOME=./agent-memory bm init
    """
    with open_store(create=True) as mem:
        stats = mem.admin.stats()
    out = {"store": stats["store"], "replica": stats["replica"], "model": stats["model"],
           "config": str(mem.config.paths.config_file)}
    if wants_json(as_json):
        emit_json(out)
    else:
        info(f"bm store ready at {out['store']} (embedder {out['model']})")


def export(
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write (default stdout).")] = None,
) -> None:
    """Write the whole store as JSONL (beads, memories, graph), one record a line.

    \b
    Example:
      bm export > backup.jsonl
    """
    from brandmind.exchange import export_lines

    with open_store() as mem:
        if output is None:
            for line in export_lines(mem):
                sys.stdout.write(line + "\n")
            return
        tmp = output.with_name(output.name + ".tmp")
        try:
            with tmp.open("w", encoding="utf-8") as fh:
                for line in export_lines(mem):
                    fh.write(line + "\n")
            tmp.replace(output)
        except OSError as exc:
            from brandmind.errors import InvalidInput

            tmp.unlink(missing_ok=True)
            raise InvalidInput(f"cannot write {output}: {exc.strerror or exc}",
                               hint="give a path in an existing, writable directory, or omit -o for stdout") from None
        info(f"exported to {output}")


def import_(
    path: Annotated[str, typer.Argument(help="A `bm export` JSONL file, or - for stdin.")],
    as_json: JsonOpt = False,
) -> None:
    """Add the records of a `bm export` file (records already present are skipped).

    \b
    Example:
      bm export > backup.jsonl && BM_HOME=./copy bm import backup.jsonl
    """
    from brandmind.exchange import import_lines

    with open_input(path) as fh, store_for_writing() as mem:
        counts = import_lines(mem, fh)
    if wants_json(as_json):
        print(json.dumps(counts))
    else:
        info("imported " + ", ".join(f"{v} {k}(s)" for k, v in counts.items() if v))


def rebuild(as_json: JsonOpt = False) -> None:
    """Rebuild every index (beads, memories, vectors, keywords, graph) from the op log.

    \b
    Example:
      bm doctor || bm rebuild
    """
    with open_store(check_model=False, repair=True) as mem, progress_bar("rebuilding") as bar:
        result = mem.admin.rebuild(progress=bar)
    if wants_json(as_json):
        print(json.dumps(result))
    else:
        info(f"rebuilt from {result['ops']} ops: {result['memories']} memories, {result['beads']} beads")
        if result.get("skipped"):
            info(f"skipped {result['skipped']} op(s) that cannot be applied; `bm doctor` lists them")


def reindex(as_json: JsonOpt = False) -> None:
    """Re-embed every memory with the configured embedder (after changing `embedder`).

    \b
    Example:
      bm config set embedder ollama && bm reindex
    """
    with open_store(check_model=False) as mem, progress_bar("re-embedding") as bar:
        result = mem.admin.reindex(progress=bar)
    if wants_json(as_json):
        print(json.dumps(result))
    else:
        info(f"re-embedded {result['memories']} memories with {result['model']} ({result['dim']}-d)")


def stats(as_json: JsonOpt = False) -> None:
    """Counts (in all, and per user), sizes and the embedding model of the store.

    \b
    Example:
      bm stats --json | jq .per_user
    """
    with open_store(check_model=False) as mem:
        out = mem.admin.stats()
    emit(out, as_json=as_json, jsonl=False, table=_stats_table)


def _stats_table(stats: dict):  # type: ignore[no-untyped-def]
    from rich import box
    from rich.console import Group
    from rich.table import Table

    per_user = stats.get("per_user") or {}
    rest = {k: v for k, v in stats.items() if k not in ("per_user", "users")}
    users = Table(title="per user", header_style="bold", box=box.SIMPLE_HEAD)
    for col in ("user", "memories", "beads"):
        users.add_column(col, justify="left" if col == "user" else "right", overflow="fold")
    for name, counts in per_user.items():
        users.add_row(name, f"{counts['memories']:,}", f"{counts['beads']:,}")
    if not per_user:
        users.caption = "no users yet: nothing stored"
    return Group(kv_table(rest, title="bm store"), users)


def doctor(as_json: JsonOpt = False) -> None:
    """Check the store, the model, the sqlite-vec extension and the disk; exit 1 if anything fails.

    \b
    Example:
      bm doctor --json | jq '.[] | select(.ok | not)'
    """
    from brandmind.errors import BMError

    try:
        with open_store(check_model=False) as mem:
            checks = mem.admin.doctor()
    except BMError as exc:
        checks = [{"check": "store", "ok": False, "detail": exc.message, "hint": exc.hint}]
    if wants_json(as_json):
        emit_json(checks)
    else:
        con = console()
        for c in checks:
            mark = "[green]ok[/]  " if c["ok"] else "[red]FAIL[/]"
            con.print(f"{mark} {c['check']}: {c['detail']}" + ("" if c["ok"] else f"  [dim]→ {c['hint']}[/]"))
    if not all(c["ok"] for c in checks):
        bad = next(c for c in checks if not c["ok"])
        raise BMError(f"doctor: {bad['check']}: {bad['detail']}", hint=bad["hint"])


config_app = typer.Typer(help="Show or change settings (TOML file; BM_* variables override it).")


@config_app.callback(invoke_without_command=True)
def config_show(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Show the effective settings and where they live.

    \b
    Examples:
      bm config
      bm config set user ann
    """
    if ctx.invoked_subcommand is not None:
        return
    from brandmind.config import Config

    cfg = Config.load()
    out = {**cfg.as_dict(), "config_file": str(cfg.paths.config_file),
           "data_dir": str(cfg.paths.data_dir), "cache_dir": str(cfg.paths.cache_dir)}
    emit(out, as_json=as_json, jsonl=False, table=lambda o: kv_table(o, title="bm config"))


@config_app.command("get")
def config_get(key: Annotated[str, typer.Argument(help="A setting's name, as `bm config` lists them.")]) -> None:
    """Print one setting's value, as it is (not JSON, also when piped).

    \b
    Example:
      bm config get embedder
    """
    from brandmind.config import DEFAULTS, Config
    from brandmind.errors import ConfigError

    if key not in DEFAULTS:
        raise ConfigError(f"unknown config key {key!r}", hint="known keys: " + ", ".join(sorted(DEFAULTS)))
    print(Config.load().as_dict()[key])


@config_app.command("set")
def config_set(key: Annotated[str, typer.Argument(help="A setting's name, as `bm config` lists them.")],
               value: Annotated[str, typer.Argument(help="Its new value (checked like the config file's).")],
               as_json: JsonOpt = False) -> None:
    """Change one setting in the config file; prints {"key", "value"} as JSON when piped.

    \b
    Example:
      bm config set embedder ollama
    """
    from brandmind.config import resolve_paths, write_config_value

    stored = write_config_value(resolve_paths(), key, value)
    if wants_json(as_json):
        emit_json({"key": key, "value": stored})
    else:
        info(f"{key} = {stored!r}")
