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
