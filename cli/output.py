"""Rendering: rich tables on a terminal, JSON when asked or when stdout is a pipe."""
from __future__ import annotations

import json
import sys
from typing import Any, Iterable


def wants_json(as_json: bool, jsonl: bool = False) -> bool:
    return as_json or jsonl or not sys.stdout.isatty()


def dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2 if sys.stdout.isatty() else None) + "\n")


def emit_lines(items: Iterable[Any]) -> None:
    for item in items:
        sys.stdout.write(dump(item) + "\n")
        sys.stdout.flush()


def emit(obj: Any, *, as_json: bool, jsonl: bool, table: Any = None) -> None:
    """JSON (``--json`` or piped), JSON lines (``--jsonl``), or ``table(obj)`` on a terminal."""
    if jsonl and isinstance(obj, list):
        emit_lines(obj)
    elif wants_json(as_json, jsonl) or table is None:
        emit_json(obj)
    else:
        console().print(table(obj))


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def info(message: str) -> None:
    """A human note on stderr (never mixed into piped output)."""
    sys.stderr.write(message + "\n")


def memories_table(items: list[dict], *, scores: bool = False) -> Any:
    from rich.table import Table

    t = Table(show_lines=False, header_style="bold")
    if scores:
        t.add_column("score", justify="right")
    for col in ("id", "type", "scope", "ts", "text"):
        t.add_column(col, overflow="fold" if col == "text" else "ellipsis",
                     no_wrap=col != "text")
    for m in items:
        row = [m["id"], m["type"], m["scope"], (m["ts"] or "")[:19], m["text"]]
        if scores:
            row.insert(0, f"{m['score']:.4f}")
        t.add_row(*row)
    if not items:
        t.caption = "nothing found"
    return t


def explain_table(items: list[dict]) -> Any:
    """Recall results with each signal's contribution to the score (``bm recall --explain``)."""
    from rich.table import Table

    names = ["vector", "keyword", "speaker", "time", "graph", "recency", "importance", "neighbor", "episode"]
    used = [n for n in names if any(n in m.get("signals", {}) for m in items)]
    t = Table(show_lines=False, header_style="bold")
    t.add_column("score", justify="right")
    for n in used:
        t.add_column(n, justify="right")
    t.add_column("id", no_wrap=True)
    t.add_column("text", overflow="fold")
    for m in items:
        sig = m.get("signals", {})
        cells = [f"{sig[n]['score']:+.3f}" if n in sig else "" for n in used]
        t.add_row(f"{m['score']:.4f}", *cells, m["id"], m["text"])
    t.caption = ("each column is what that signal added to the score (weights: `bm config`); "
                 "--json shows the details") if items else "nothing found"
    return t


def beads_table(items: list[dict]) -> Any:
    from rich.table import Table

    t = Table(header_style="bold")
    for col in ("ts", "role", "speaker", "content"):
        t.add_column(col, overflow="fold" if col == "content" else "ellipsis", no_wrap=col != "content")
    for b in items:
        content = b["content"] if len(b["content"]) <= 500 else b["content"][:500] + f"… ({b['size']:,} bytes)"
        t.add_row((b["ts"] or "")[:19], b["role"], b.get("speaker") or "", content)
    return t


def kv_table(obj: dict, title: str | None = None) -> Any:
    from rich.table import Table

    t = Table(show_header=False, title=title, box=None)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    for key, value in obj.items():
        t.add_row(str(key), value if isinstance(value, str) else dump(value))
    return t
