"""kg node/link/show/neighbors, repair: list/rm/merge, and views: hubs/clusters."""
from __future__ import annotations

import json
from typing import Annotated, List, Optional

import typer

from .common import JsonOpt, UserOpt, date_option, open_store, option
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


# -- views: hubs and clusters ------------------------------------------------------------------------
AtOpt = Annotated[Optional[str], date_option("--at", help="The graph as it was true on this date (ISO 8601; world time, as `bm recall --as-of`); default now.")]


def _check_by(value: str) -> str:
    from brandmind.graphviews import check_by

    return check_by(value)


@kg_app.command("hubs")
def kg_hubs(
    limit: Annotated[int, typer.Option("--limit", "-k", help="At most this many entities.")] = 20,
    by: Annotated[str, option("--by", help="Rank by degree (edges) or weight (summed edge weights).", check=_check_by)] = "degree",
    at: AtOpt = None,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The most connected entities: degree (current edges touching it), distinct neighbours,
    weight (the edges' summed weights: a fact's confidence, a `kg link` its -w) and how many
    current memories mention it.

    Retired, ended and forgotten facts do not count.  JSON when piped: a list of {"id",
    "name", "type", "degree", "neighbors", "weight", "memories"}.

    \b
    Examples:
      bm kg hubs -u ann
      bm kg hubs -u ann --by weight --limit 5
      bm kg hubs -u ann --at 2024-01-01 | jq -r '.[].name'   # as it was then
    """
    from brandmind.errors import UsageError

    if limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}", hint="e.g. --limit 10")
    with open_store() as mem:
        found = mem.graph.hubs(user=user, at=at, limit=limit, by=by)
        if not found:
            _note_empty(mem, user, at)
    emit(found, as_json=as_json, jsonl=False, table=lambda rows: _hubs_table(rows, by))


def _note_empty(mem, user: Optional[str], at: Optional[str]) -> None:  # type: ignore[no-untyped-def]
    """On stderr: why a graph view found nothing (an unknown user, or no current edges)."""
    from .common import note_unknown_user

    name = mem.store.user(user)
    if not mem.admin.has_user(name) and not getattr(mem, "throwaway", False):
        note_unknown_user(mem, user)
        return
    when = f" on {at}" if at else ""
    info(f"note: user {name!r} has no current edges between entities{when}; add some with "
         f"`bm kg link Ann lives_in Lisbon -u {name}`, `bm remember --fact ...` or `bm ingest --extract`")


def _hubs_table(rows: list, by: str):  # type: ignore[no-untyped-def]
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
    for col in ("name", "type", "degree", "nbrs", "weight", "mems", "id"):
        t.add_column(col, overflow="fold" if col == "name" else "ellipsis", no_wrap=col != "name",
                     justify="right" if col in ("degree", "nbrs", "weight", "mems") else "left",
                     ratio=1 if col == "name" else None, min_width=10 if col == "name" else None)
    for h in rows:
        t.add_row(h["name"], h["type"], str(h["degree"]), str(h["neighbors"]), f"{h['weight']:.2f}",
                  str(h["memories"]), h["id"])
    t.caption = f"by {by}; degree: current edges, weight: their sum, mems: memories about it" if rows else "no hubs"
    return t


@kg_app.command("clusters")
def kg_clusters(
    limit: Annotated[int, typer.Option("--limit", "-k", help="At most this many clusters.")] = 20,
    min_size: Annotated[int, typer.Option("--min-size", "-m", help="Only clusters of at least this many entities.")] = 2,
    top: Annotated[int, typer.Option("--top", "-n", help="Entities and memories shown per cluster.")] = 5,
    at: AtOpt = None,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Communities of entities (Louvain, seeded: the same graph gives the same clusters),
    largest first, each with its best-connected entities and the memories whose facts link
    them.

    Entities are tied by their current edges and by the typed links between current memories
    (`bm memories link`; not contradicts).  JSON when piped: a list of {"cluster", "size",
    "edges", "weight", "entities": [{"id", "name", "type", "degree"}], "memories": [{"id",
    "text", "type", "ts"}], "memory_count"}.

    \b
    Examples:
      bm kg clusters -u ann
      bm kg clusters -u ann --min-size 5 --limit 3 --top 10
      bm kg clusters -u ann | jq -r '.[] | [.size, .entities[0].name] | @tsv'
    """
    from brandmind.errors import UsageError

    for flag, value in (("--limit", limit), ("--min-size", min_size), ("--top", top)):
        if value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}", hint=f"e.g. {flag} 5")
    with open_store() as mem:
        found = mem.graph.clusters(user=user, at=at, limit=limit, min_size=min_size, top=top)
        if not found:
            if mem.graph.hubs(user=user, at=at, limit=1):
                info(f"note: no cluster has {min_size} or more entities; try a smaller --min-size")
            else:
                _note_empty(mem, user, at)
    emit(found, as_json=as_json, jsonl=False, table=_clusters_table)


def _clusters_table(rows: list):  # type: ignore[no-untyped-def]
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("size", justify="right", no_wrap=True)
    t.add_column("top entities (degree inside) · memories", overflow="fold", ratio=1, min_width=20)
    for c in rows:
        cell = Text(", ".join(f"{e['name']} ({e['degree']})" for e in c["entities"]))
        more = c["size"] - len(c["entities"])
        if more > 0:
            cell.append(f" +{more} more", style="dim")
        for m in c["memories"]:
            cell.append(f"\n  {m['text'] if len(m['text']) <= 120 else m['text'][:119] + '…'}", style="dim")
        if c["memory_count"] > len(c["memories"]):
            cell.append(f"\n  +{c['memory_count'] - len(c['memories'])} more memories", style="dim")
        t.add_row(str(c["cluster"]), str(c["size"]), cell)
    t.caption = "clusters by size; --json for ids" if rows else "no clusters"
    return t
