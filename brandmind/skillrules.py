"""How the skill ops apply to SQLite (called from brandmind/projection.py; the merge
decisions are the pure ``merge.skill_*`` functions, the tables brandmind/storage/skills.py).

``skill.add`` carries the whole skill; ``skill.remove`` {name, ts}.  The visible skill of a
name is, among its adds stamped after its latest remove (by HLC), the one with the highest
version, ties broken by the later HLC.  So a remove wins over every earlier add, a later add
revives the skill (at any version), and two replicas updating concurrently converge on the
higher version.  Adds that can never be visible again (an add with a higher-or-equal
version and a later HLC exists, or a remove came after it) are dropped from ``skill_adds``;
what is kept depends only on the set of ops, not on their order, so replicas and
``bm rebuild`` agree.
"""
from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from . import merge
from .clock import hlc_key
from .ops import Kind
from .storage import skills as store

if TYPE_CHECKING:  # pragma: no cover
    from .sqlstore import SQLStore

KINDS = (Kind.SKILL_ADD, Kind.SKILL_REMOVE)
FIELDS = ("name", "description", "input_schema", "examples", "tags", "version", "body", "meta")


def content_hash(skill: dict) -> str:
    """What "unchanged" means for a re-import: every field but source."""
    canon = json.dumps({k: skill.get(k) for k in FIELDS}, ensure_ascii=False, sort_keys=True,
                       separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def apply_op(sql: "SQLStore", op: dict) -> None:
    """``skill.add`` / ``skill.remove`` (merge rule in the module doc)."""
    p = op["payload"]
    name, hlc = p["name"], hlc_key(op["hlc"])
    removed = store.removed_at(sql, name)
    if op["kind"] == Kind.SKILL_REMOVE:
        if not merge.skill_remove_wins(removed, hlc):
            return
        store.set_removed(sql, name, hlc)
    else:
        kept = [(h, merge.version_key(a["version"])) for h, a in store.adds(sql, name)]
        keep, unreachable = merge.skill_add(kept, removed, hlc, merge.version_key(p["version"]))
        if not keep:
            return
        for h in unreachable:
            store.drop_add(sql, name, h)
        store.put_add(sql, name, hlc, p, op["id"])
    _refresh_visible(sql, name)


def _refresh_visible(sql: "SQLStore", name: str) -> None:
    adds = dict(store.adds(sql, name))
    best = merge.skill_visible((h, merge.version_key(a["version"])) for h, a in adds.items())
    old = store.visible_stamp(sql, name)
    if old is not None:
        if best is not None and old[1] == best:
            return
        store.drop_visible(sql, old[0])
    if best is not None:
        store.put_visible(sql, adds[best], content_hash=content_hash(adds[best]), hlc=best)
