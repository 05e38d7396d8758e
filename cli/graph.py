"""kg node/link/show."""
from __future__ import annotations

import json
from typing import Annotated, List, Optional

import typer

from .common import JsonOpt, UserOpt, open_store
from .output import emit, kv_table

kg_app = typer.Typer(help="The knowledge graph: typed nodes and edges linked to memories.", no_args_is_help=True)


@kg_app.command("node")
def kg_node(
    name: Annotated[str, typer.Argument(help="Node name, e.g. Ann.")],
    type: Annotated[str, typer.Option("--type", "-t", help="e.g. person, place, project.")] = "entity",
    label: Annotated[Optional[List[str]], typer.Option("--label", "-l", help="Repeatable.")] = None,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a node and print its id."""
    with open_store() as mem:
        node = mem.kg_add_node(name, type=type, user=user, labels=label or [])
    print(json.dumps({"id": node["id"]}) if as_json else node["id"])


@kg_app.command("link")
def kg_link(
    src: Annotated[str, typer.Argument(help="Source node id or name.")],
    predicate: Annotated[str, typer.Argument(help="e.g. lives_in, works_at, uses; `mentions` links a node to a memory id.")],
    dst: Annotated[str, typer.Argument(help="Target node id or name (or a memory id with `mentions`).")],
    weight: Annotated[float, typer.Option("--weight", "-w")] = 1.0,
    evidence: Annotated[Optional[List[str]], typer.Option("--evidence", "-e", help="Memory or bead id (repeatable).")] = None,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Link two nodes: bm kg link Ann lives_in Lisbon."""
    with open_store() as mem:
        edge = mem.kg_link(src, dst, predicate, weight=weight, evidence=evidence or [], user=user)
    print(json.dumps(edge) if as_json else edge["id"] if "id" in edge else f"{edge['node']} mentions {edge['memory']}")


@kg_app.command("show")
def kg_show(ref: Annotated[str, typer.Argument(help="Node id or name.")], user: UserOpt = None,
            as_json: JsonOpt = False) -> None:
    """A node with its edges and linked memories."""
    with open_store() as mem:
        node = mem.kg_node(ref, user=user)
    emit(node, as_json=as_json, jsonl=False, table=lambda n: kv_table(n, title=f"{n['name']} ({n['type']})"))


@kg_app.command("neighbors")
def kg_neighbors(
    ref: Annotated[str, typer.Argument(help="Node id or name, or a memory id.")],
    radius: Annotated[int, typer.Option("--radius", "-r", help="Hops: 1, 2 or 3.")] = 1,
    include_retired: Annotated[bool, typer.Option("--include-retired", help="Also retired or ended edges and facts.")] = False,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What is within RADIUS hops of a node or memory: graph edges, typed links and mentions.

    bm kg neighbors Ann --radius 2 --json
    """
    from brandmind.errors import UsageError

    if not 1 <= radius <= 3:
        raise UsageError(f"--radius must be 1, 2 or 3, got {radius}", hint="e.g. --radius 2")
    with open_store() as mem:
        result = mem.neighbors(ref, radius, user=user, include_retired=include_retired)
    emit(result, as_json=as_json, jsonl=False, table=_neighbors_table)


def _neighbors_table(result: dict):  # type: ignore[no-untyped-def]
    from rich.console import Group
    from rich.table import Table

    root = result["root"]
    nodes = Table(header_style="bold", title=f"{root.get('name') or root.get('text')} ({root['id']})")
    for col in ("hops", "kind", "id", "name / text"):
        nodes.add_column(col, overflow="fold" if col == "name / text" else "ellipsis", no_wrap=col != "name / text")
    for n in result["nodes"]:
        nodes.add_row(str(n["hops"]), n["kind"], n["id"], n.get("name") or n.get("text") or "")
    edges = Table(header_style="bold")
    for col in ("src", "predicate", "dst", "weight", "valid from", "valid to"):
        edges.add_column(col, no_wrap=True)
    for e in result["edges"]:
        edges.add_row(e["src"], e["predicate"], e["dst"], "" if e.get("weight") is None else f"{e['weight']:.2f}",
                      (e.get("valid_from") or "")[:10], (e.get("valid_to") or "")[:10])
    if result["truncated"]:
        edges.caption = "truncated: too many neighbours"
    return Group(nodes, edges)
