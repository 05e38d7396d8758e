"""Rendering: rich tables on a terminal, JSON when asked or when stdout is a pipe."""
from __future__ import annotations

import json
import sys
import threading
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


class _Terminal(threading.local):
    """The client's terminal, for a command the daemon runs for it (cli/serve.py): tables get
    its width and colours, not the daemon's."""
    env: dict | None = None
    columns: int | None = None

    def set(self, env: dict, columns: int | None) -> None:
        self.env, self.columns = dict(env), columns

    def clear(self) -> None:
        self.env = self.columns = None

    def options(self) -> dict:
        env = self.env
        if env is None:
            return {}
        term = env.get("TERM", "")
        if "NO_COLOR" in env or term in ("", "dumb"):
            colors = None
        elif env.get("COLORTERM") in ("truecolor", "24bit"):
            colors = "truecolor"
        else:
            colors = "256" if "256" in term else "standard"
        return {"width": self.columns or int(env.get("COLUMNS") or 80), "color_system": colors}


terminal = _Terminal()


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, **terminal.options())


def info(message: str) -> None:
    """A human note on stderr (never mixed into piped output)."""
    sys.stderr.write(message + "\n")


def memories_table(items: list[dict], *, scores: bool = False) -> Any:
    """Memories as a table that fits an 80-column terminal: the id whole (to copy), the
    text taking what is left, with its type, scope and date on a dim second line."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, expand=False)
    if scores:
        t.add_column("score", justify="right", no_wrap=True)
    t.add_column("id", no_wrap=True, min_width=8)
    t.add_column("memory", overflow="fold", ratio=1, min_width=20)
    for m in items:
        about = " · ".join(x for x in (m.get("type"), m.get("scope"), (m.get("ts") or "")[:16].replace("T", " ")) if x)
        cell = Text(m["text"])
        cell.append("\n" + about, style="dim")
        row = [m["id"], cell]
        if scores:
            row.insert(0, f"{m['score']:.3f}")
        t.add_row(*row)
    if not items:
        t.caption = "nothing found"
    return t


def explain_table(items: list[dict]) -> Any:
    """Recall results with each signal's contribution to the score (``bm recall --explain``),
    on a dim line under the text so that the table fits an 80-column terminal."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    names = ["vector", "keyword", "speaker", "time", "graph", "recency", "importance", "neighbor", "episode", "access"]
    t = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
    t.add_column("score", justify="right", no_wrap=True)
    t.add_column("id", no_wrap=True, min_width=8)
    t.add_column("memory · what each signal added", overflow="fold", ratio=1, min_width=20)
    for m in items:
        sig = m.get("signals", {})
        cell = Text(m["text"])
        cell.append("\n" + "  ".join(f"{n}={sig[n]['score']:+.3f}" for n in names if n in sig), style="dim")
        t.add_row(f"{m['score']:.4f}", m["id"], cell)
    t.caption = ("score is the sum of what each signal added (weights: `bm config`); "
                 "--json shows the details") if items else "nothing found"
    return t


def beads_table(items: list[dict]) -> Any:
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
    for col in ("ts", "role", "speaker", "content"):
        t.add_column(col, overflow="fold" if col == "content" else "ellipsis", no_wrap=col != "content",
                     ratio=1 if col == "content" else None, min_width=20 if col == "content" else None)
    for b in items:
        content = b["content"] if len(b["content"]) <= 500 else b["content"][:500] + f"… ({b['size']:,} bytes)"
        t.add_row((b["ts"] or "")[:16].replace("T", " "), b["role"], b.get("speaker") or "", content)
    return t


def kv_table(obj: dict, title: str | None = None) -> Any:
    from rich.table import Table

    t = Table(show_header=False, title=title, box=None)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    for key, value in obj.items():
        t.add_row(str(key), value if isinstance(value, str) else dump(value))
    return t
