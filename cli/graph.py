"""kg node/link/show/neighbors, and repair: list/rm/merge."""
from __future__ import annotations

import json
from typing import Annotated, List, Optional

import typer

from .common import JsonOpt, UserOpt, open_store
from .output import emit, info, kv_table, wants_json

kg_app = typer.Typer(help="The knowledge graph: typed nodes and edges linked to memories.", no_args_is_help=True)


@kg_app.command("node")
def kg_node(
    name: Annotated[str, typer.Argument(help="Node name, e.g. Ann.")],
    type: Annotated[Optional[str], typer.Option("--type", "-t", help="e.g. person, place, project (default: entity, which matches an existing node of any type).")] = None,
    label: Annotated[Optional[List[str]], typer.Option("--label", "-l", help="Repeatable.")] = None,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a node, or find the user's node of that name (and type): prints its id.

    A name that exists (case, spaces and a leading "the" aside) gives the existing node
    ("created": false), not a twin.  JSON when piped: {"id", "name", "type", "user", "created"}.

    \b
    Examples:
      bm kg node Lisbon --type place -u ann
      bm kg node Ann -t person -l family -u ann    # -l: a label (repeatable)
    """
    with open_store() as mem:
        node = mem.graph.add_node(name, type=type, user=user, labels=label or [])
    out = {k: node[k] for k in ("id", "name", "type", "user", "created")}
    if wants_json(as_json):
        print(json.dumps(out))
    else:
        print(node["id"])
        if not node["created"]:
            info(f"existing node {node['name']} ({node['type']})")


@kg_app.command("link")
def kg_link(
    src: Annotated[str, typer.Argument(help="Source node id or name.")],
    predicate: Annotated[str, typer.Argument(help="e.g. lives_in, works_at, uses; `mentions` links a node to a memory id.")],
    dst: Annotated[str, typer.Argument(help="Target node id or name (or a memory id with `mentions`). A name no node has is created.")],
    weight: Annotated[float, typer.Option("--weight", "-w", help="Strength of the link, 0 to 1 (recall's graph signal scales by it).")] = 1.0,
    evidence: Annotated[Optional[List[str]], typer.Option("--evidence", "-e", help="Memory or bead id (repeatable).")] = None,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Link two nodes; a name that no node has becomes a new node (type entity).

    Names are matched case-insensitively; the predicate is normalised ("lives in" is
    lives_in).  JSON when piped: the edge, with "created" listing the nodes it made.

    \b
    Examples:
      bm kg link Ann lives_in Lisbon -u ann        # makes Ann / Lisbon if new
      bm kg link Ann works_at Acme -w 0.6 -e m_01m8... -u ann
      bm kg link Ann mentions m_01m8... -u ann     # node -> memory
    """
    with open_store() as mem:
        edge = mem.graph.add_edge(src, dst, predicate, weight=weight, evidence=evidence or [], user=user)
    if wants_json(as_json):
        print(json.dumps(edge))
        return
    print(edge["id"] if "id" in edge else f"{edge['node']} mentions {edge['memory']}")
    for node in edge.get("created", []):
        info(f"created node {node['name']} ({node['id']})")


@kg_app.command("list")
def kg_list(
    type: Annotated[Optional[str], typer.Option("--type", "-t", help="Only nodes of this type, e.g. person.")] = None,
    name: Annotated[Optional[str], typer.Option("--name", "-n", help="Only nodes whose name contains this (case-insensitive).")] = None,
    limit: Annotated[int, typer.Option("--limit", "-k", help="At most this many nodes.")] = 100,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The user's graph nodes by name, with how many edges and mentions each has.

    \b
    Examples:
      bm kg list -u ann --type person
      bm kg list -u ann --name lis --limit 20      # names containing "lis"
    """
    from brandmind.errors import UsageError

    if limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}", hint="e.g. --limit 50")
    with open_store() as mem:
        nodes = mem.graph.list_nodes(user=user, type=type, name=name, limit=limit)
    emit(nodes, as_json=as_json, jsonl=False, table=_nodes_table)


def _nodes_table(nodes: list):  # type: ignore[no-untyped-def]
    from rich.table import Table

    t = Table(header_style="bold", caption=None if nodes else "no nodes")
    for col in ("id", "type", "name", "edges", "mentions"):
        t.add_column(col, overflow="fold" if col == "name" else "ellipsis", no_wrap=col != "name",
                     justify="right" if col in ("edges", "mentions") else "left")
    for n in nodes:
        t.add_row(n["id"], n["type"], n["name"], str(n["edges"]), str(n["mentions"]))
    return t


@kg_app.command("rm")
def kg_rm(
    ref: Annotated[str, typer.Argument(help="Node id or name.")],
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove a node with its edges and mentions (the facts that mention it stay).

    An op in the log: it syncs, and `bm rebuild` replays it.  Forget the facts
    themselves with `bm forget`.

    \b
    Examples:
      bm kg rm Lisbn -u ann                        # a misspelt node, by name
      bm kg rm n_01m8... -u ann                    # or by id
    """
    with open_store() as mem:
        result = mem.graph.remove_node(ref, user=user)
    if wants_json(as_json):
        print(json.dumps(result))
    else:
        print(result["removed"])
        info(f"removed node {result['name']} ({result['type']}) with {result['edges']} edge(s) and "
             f"{result['mentions']} mention(s)")


@kg_app.command("merge")
def kg_merge(
    ref: Annotated[str, typer.Argument(help="The node to merge away (id or name).")],
    into: Annotated[str, typer.Argument(help="The node to keep (id or name).")],
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Merge node FROM into node INTO: FROM's edges and mentions move to INTO, FROM goes.

    An op in the log: it syncs, and `bm rebuild` replays it; edges of FROM that
    arrive later from another device land on INTO.

    \b
    Examples:
      bm kg merge Lisboa Lisbon -u ann             # Lisboa's edges move to Lisbon
    """
    with open_store() as mem:
        result = mem.graph.merge_nodes(ref, into, user=user)
    if wants_json(as_json):
        print(json.dumps({k: v for k, v in result.items() if k != "node"}))
    else:
        print(result["into"])
        info(f"merged {result['merged']} into {result['name']} ({result['into']}): "
             f"{result['edges_moved']} edge(s), {result['mentions_moved']} mention(s) moved")


@kg_app.command("show")
def kg_show(ref: Annotated[str, typer.Argument(help="Node id or name.")], user: UserOpt = None,
            as_json: JsonOpt = False) -> None:
    """A node with its edges and linked memories.

    \b
    Examples:
      bm kg show Ann -u ann
      bm kg show n_01m8... --json | jq '.edges[].predicate'   # by id
    """
    with open_store() as mem:
        node = mem.graph.node(ref, user=user)
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

    \b
    Examples:
      bm kg neighbors Ann -u ann
      bm kg neighbors Ann --radius 2 -u ann --json | jq '.nodes[].id'
      bm kg neighbors m_01m8... -r 2 --include-retired   # around a memory
    """
    from brandmind.errors import UsageError

    if not 1 <= radius <= 3:
        raise UsageError(f"--radius must be 1, 2 or 3, got {radius}", hint="e.g. --radius 2")
    with open_store() as mem:
        result = mem.graph.neighbors(ref, radius, user=user, include_retired=include_retired)
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
