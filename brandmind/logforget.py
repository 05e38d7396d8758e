"""Remove wins in the op log: forgetting redacts the ops that carried what was forgotten, and
ops it covers that arrive later are stored redacted (brandmind/merge.py rule 4).

Every function works in the caller's LMDB write transaction (``LogTxn``), through the log's
forget marks (``OpLog``: ``fu``/``fm``/``fn``/``fb`` in the ``sync`` database, each the HLC key
of the latest forget of a user, memory, node or bead):

- :func:`remove_wins`: the payload a received op is stored with (redacted when its memory,
  bead, user or graph node was forgotten after it was stamped);
- :func:`forget_memory_in_log`, :func:`forget_bead_in_log`, :func:`forget_nodes_in_log`,
  :func:`forget_user_in_log`: a forget (made here, or received) redacts what it covers;
- :func:`forget_late_node` / :func:`flush_late_nodes`: a node of a forgotten user that
  arrives after the forget takes its earlier edges and mentions with it.

What an op carries of a user, and what it becomes redacted, are its rule's ``owner`` and
``redact`` hooks (brandmind/ops.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import merge
from .ops import REFUSED, Kind, owned_by, redacted

if TYPE_CHECKING:  # pragma: no cover
    from .oplog import LogTxn

_ENDS = {Kind.KG_EDGE: ("src", "dst"), Kind.KG_MENTION: ("node",), Kind.KG_NODE: ("id",)}


def _mark(t: "LogTxn", what: str, name: str, hk: str) -> None:
    """Keep the latest forget of ``name`` (a forget mark only grows: commutes)."""
    old = t.forget_mark(what, name)
    new = merge.latest(old, hk)
    if new != old:
        t.set_forget_mark(what, name, new)


def owner_of(op: dict) -> str | None:
    """The user an op names (a bead's user for ``bead.add``), if any."""
    p = op["payload"]
    if op["kind"] == Kind.BEAD_ADD:
        bead = p.get("bead")
        return bead.get("user") if isinstance(bead, dict) else None
    user = p.get("user")
    return user if isinstance(user, str) else None


def graph_ends(op: dict) -> tuple:
    """The node ids a graph op hangs on (an edge's ends, a mention's node, a node itself)."""
    return tuple(op["payload"].get(key) for key in _ENDS.get(op["kind"], ()))


def remove_wins(t: "LogTxn", op: dict, hk: str) -> dict:
    """The payload to store: redacted when its memory, bead, user or node was forgotten after it."""
    kind, p = op["kind"], op["payload"]
    if p.get("redacted"):
        return p
    if kind == Kind.MEMORY_ADD and isinstance(p.get("id"), str) and t.forget_mark("memory", p["id"]):
        return {"id": p["id"], "redacted": True}
    if kind == Kind.BEAD_ADD and isinstance(p.get("bead"), dict) and isinstance(p["bead"].get("id"), str) \
            and t.forget_mark("bead", p["bead"]["id"]):
        return {"id": p["bead"]["id"], "redacted": True}
    user = owner_of(op)
    if user is not None and merge.forgotten_before(hk, t.forget_mark("user", user)) and owned_by(op, user):
        return redacted(op)
    for end in graph_ends(op):
        if isinstance(end, str) and merge.forgotten_before(hk, t.forget_mark("node", end)):
            return redacted(op)
    return p


def forgets_received(t: "LogTxn", op: dict, hk: str) -> None:
    """What a received op does to the log besides being stored: a forget redacts what it
    covers; a node of a user forgotten after it was stamped takes its edges and mentions
    with it; a memory's add is indexed for a forget arriving later."""
    kind, p = op["kind"], op["payload"]
    if kind == Kind.KG_NODE and isinstance(p.get("user"), str):
        gone = t.forget_mark("user", p["user"])
        if merge.forgotten_before(hk, gone):  # a forgotten user's node arrived after the forget
            forget_late_node(t, p["id"], gone)
    if p.get("redacted") or REFUSED in p:
        return
    if kind == Kind.MEMORY_ADD:
        t.note_memory_add(p["id"], op["id"])
    elif kind == Kind.MEMORY_FORGET:
        forget_memory_in_log(t, p["id"], hk)
    elif kind == Kind.KG_NODE_REMOVE:
        forget_nodes_in_log(t, {p["id"]}, hk)
    elif kind == Kind.BEAD_FORGET:
        blob = forget_bead_in_log(t, p["id"], hk)
        if blob:
            t.dead_blobs.append(blob)
    elif kind == Kind.USER_FORGET:
        forget_user_in_log(t, op)


def forget_memory_in_log(t: "LogTxn", memory_id: str, hk: str, add_op: str | None = None) -> None:
    """A ``memory.forget``: later adds of the id are stored redacted; the add here is redacted."""
    _mark(t, "memory", memory_id, hk)
    add_op = add_op or t.memory_add_op(memory_id)
    if add_op:
        t.redact(add_op, {"id": memory_id, "redacted": True})


def forget_bead_in_log(t: "LogTxn", bead_id: str, hk: str) -> str | None:
    """A ``bead.forget``: the bead leaves the LMDB projections, the op that added it is
    redacted, and an add of it arriving later is stored redacted (remove wins).  Returns
    the digest of the bead's blob, for the caller to delete once no bead holds it."""
    _mark(t, "bead", bead_id, hk)
    bead = t.get_bead(bead_id)
    if bead is not None:
        t.forget_bead(bead)
    add_op = t.bead_add_op(bead_id)
    if add_op is None:  # a bead stored before the op index existed: look for its add
        add_op = next((op_id for op_id, o in t.iter_ops() if o["kind"] == Kind.BEAD_ADD
                       and not o["payload"].get("redacted") and o["payload"]["bead"].get("id") == bead_id), None)
    if add_op is not None:
        t.redact(add_op, {"id": bead_id, "redacted": True})
    return bead.get("blob") if bead else None


def forget_nodes_in_log(t: "LogTxn", node_ids: set[str], hk: str) -> None:
    """``kg.node.remove`` (bm kg rm, or a node a forget left unnamed): the nodes' adds are
    redacted (their names leave the log), and so are their edges and mentions stamped
    before ``hk``, here now or arriving later (remove wins)."""
    for node in node_ids:
        _mark(t, "node", node, hk)
    for op_id, o in list(t.iter_ops()):
        if o["payload"].get("redacted") or not merge.forgotten_before(merge.hlc_key(o["hlc"]), hk):
            continue
        ends = graph_ends(o)
        if (o["kind"] == Kind.KG_NODE and ends[0] in node_ids) or (
                o["kind"] in (Kind.KG_EDGE, Kind.KG_MENTION) and node_ids.intersection(ends)):
            t.redact(op_id, redacted(o))


def forget_user_in_log(t: "LogTxn", op: dict) -> int:
    """A ``user.forget``: redact every earlier op carrying the user's content (memories,
    beads, graph nodes and the edges and mentions of those, their persona assignments,
    their blocks), and remember the forget for ops of theirs that arrive later.
    Returns how many ops were redacted."""
    user = op["payload"]["user"]
    forgotten_at = merge.hlc_key(op["hlc"])
    _mark(t, "user", user, forgotten_at)
    earlier = [o for _, o in t.iter_ops() if merge.forgotten_before(merge.hlc_key(o["hlc"]), forgotten_at)]
    # the user's nodes made before the forget (also those redacted by an earlier forget)
    nodes = {o["payload"]["id"] for o in earlier if o["kind"] == Kind.KG_NODE and o["payload"].get("user") == user}
    for node in nodes:
        _mark(t, "node", node, forgotten_at)
    n = 0
    for old in earlier:
        if owned_by(old, user, nodes):  # (False for what is redacted already)
            t.redact(old["id"], redacted(old))
            n += 1
    return n


def forget_late_node(t: "LogTxn", node_id: str, forgotten_at: str) -> None:
    """A node of a forgotten user that arrived after the forget: the edges and mentions of it
    stamped before the forget are redacted too (as if it had been here at the forget).  Ops
    arriving later are checked against its mark at once; the ones here already are found by
    one scan of the log per batch (``LogTxn.batch``: :func:`flush_late_nodes` at its end)."""
    _mark(t, "node", node_id, forgotten_at)
    t.late_nodes[node_id] = merge.latest(t.late_nodes.get(node_id), forgotten_at)
    if not t.batch:
        flush_late_nodes(t)


def flush_late_nodes(t: "LogTxn") -> None:
    late, t.late_nodes = t.late_nodes, {}
    if not late:
        return
    for _, o in t.iter_ops():
        if o["payload"].get("redacted") or o["kind"] not in (Kind.KG_MENTION, Kind.KG_EDGE):
            continue
        hk = merge.hlc_key(o["hlc"])
        if any(isinstance(end, str) and end in late and merge.forgotten_before(hk, late[end])
               for end in graph_ends(o)):
            t.redact(o["id"], redacted(o))
