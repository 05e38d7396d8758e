"""Harvest: bring back what a graph service (Zep, Graphiti) learned on its own, as local ops
(``MirrorRemote.harvest``, run by a sync round before it pushes: sync/engine.py).

Merge rules for remote-made facts:

* every remote fact of a local user with no ``local_id`` (not pushed by bm) and not yet in
  ``remote_map`` becomes a local memory through the op log (``memory.add``, then applied
  like any op): type ``fact``, source = the sink kind, provenance ``[{"source": kind,
  "remote": name, "uuid": uuid}]``, the triple from the edge (name lower-cased when it is
  a valid predicate), world and system times from the remote fields, and an id derived
  from the remote uuid (``m_`` + the remote's created time + a hash of the uuid), so two
  devices harvesting the same fact write the same memory (the projection keeps one row per
  id: they converge after syncing);
* a remote fact that is invalidated (``invalid_at``/``expired_at`` set) retires the local
  memory (``memory.retire``: retired_at = expired_at, else invalid_at; valid_to =
  invalid_at; reason "<kind>: invalidated"): deterministic, so retires from two devices agree;
* a remote fact that disappeared does nothing (absence is not a remove); a memory forgotten
  here (tombstoned), or stamped before its user was forgotten, is not brought back;
* no reconciliation with the local facts (a remote fact that restates a local one is a
  second memory; the service does its own contradiction handling, which arrives as
  invalidations).
* A harvested memory is mapped to its remote uuid and never put back to the remote it came
  from (a retire of it follows the rules above: Zep deletes the remote edge).
"""
from __future__ import annotations

from typing import Any, Iterable

from brandmind import converge
from brandmind.clock import now_millis
from brandmind.ops import Kind
from brandmind.storage import remote_map

from .graphsink import PREDICATE_RE, RemoteFact, harvest_id, ms_of


class _Harvest:
    """What one harvest collects: ops to append, rows to map, texts to embed."""

    def __init__(self, remote: Any, store: Any) -> None:
        self.remote, self.store = remote, store
        self.ops: list[tuple[str, dict]] = []
        self.new_map: list[tuple[str, str, str]] = []
        self.texts: list[str] = []
        self.imported = self.retired = 0
        self.seen: set[str] = set()

    def fact(self, user: str, fact: RemoteFact) -> None:
        """Apply the merge rules (module docstring) to one listed fact."""
        if fact.local_id or not fact.uuid or not (fact.text or "").strip() or fact.uuid in self.seen:
            return  # pushed by bm (it comes back through op sync), nothing to keep, or listed twice
        self.seen.add(fact.uuid)
        sql, kind = self.store.sql, self.remote.kind
        known = self.remote.local_for(fact.uuid)
        created = ms_of(fact.created_at)
        mid = known or harvest_id(fact.uuid, created or ms_of(fact.valid_at))
        ended = bool(fact.invalid_at or fact.expired_at)
        retired_at = ms_of(fact.expired_at) or ms_of(fact.invalid_at) or created or now_millis()
        retire = (Kind.MEMORY_RETIRE, {"id": mid, "user": user, "retired_at": retired_at,
                                    "valid_to": ms_of(fact.invalid_at), "by": None,
                                    "reason": f"{kind}: invalidated"})
        exists, was_retired = remote_map.memory_state(sql, mid)
        if exists:
            if known is None:
                self.new_map.append((mid, fact.uuid, user))
            if ended and was_retired is None:
                self.ops.append(retire)
                self.retired += 1
            return
        if known is not None or converge.dead(sql, mid):
            return  # mapped to something gone here, or forgotten here: remove wins
        gone = converge.forgotten_at(sql, user)
        if gone is not None and (created or 0) <= int(gone.split(".")[0]):
            return  # from before the user was forgotten
        payload = self.memory(user, fact, mid, created)
        self.ops.append((Kind.MEMORY_ADD, payload))
        self.texts.append(payload["text"])
        self.new_map.append((mid, fact.uuid, user))
        self.imported += 1
        if ended:
            self.ops.append(retire)

    def memory(self, user: str, fact: RemoteFact, mid: str, created: int | None) -> dict:
        """The ``memory.add`` payload a remote-made fact becomes."""
        kind = self.remote.kind
        predicate = (fact.name or "").lower()
        structured = bool(PREDICATE_RE.match(predicate) and fact.source and fact.target
                          and predicate != "relates_to")
        ts = ms_of(fact.valid_at) or created or now_millis()
        payload = {
            "id": mid, "text": fact.text.strip(), "type": "fact", "user": user, "agent": None,
            "importance": 0.5, "meta": {}, "source": kind,
            "provenance": [{"source": kind, "remote": self.remote.name, "uuid": fact.uuid}],
            "valid_from": ms_of(fact.valid_at), "valid_to": ms_of(fact.invalid_at), "ts": ts,
            "recorded_at": created or ts,
        }
        if structured:
            payload.update({"subject": fact.source, "predicate": predicate, "object": fact.target})
        return payload

    def commit(self) -> None:
        """Append the ops (with the new memories' vectors cached), apply them, map the rows."""
        store = self.store
        if self.ops:
            vecs = store.embed_docs(self.texts) if self.texts else []
            with store.write() as t:
                for kind, payload in self.ops:
                    t.append(kind, payload)
                for text, vec in zip(self.texts, vecs):
                    t.cache_vector(store.sql.model, text, vec.tobytes())
            store.catch_up()
        self.remote.map_rows(self.new_map)


def harvest(remote: Any, store: Any, *, users: Iterable[str] | None = None) -> dict:
    """Bring back what ``remote`` (a MirrorRemote) learned on its own into ``store`` (a
    StoreHandle).  Returns ``{"imported": n, "retired": n, "users": n}``."""
    run = _Harvest(remote, store)
    user_list = list(users) if users is not None else remote.users()
    for user in user_list:
        for fact in remote.sink.list_facts(user):
            run.fact(user, fact)
    run.commit()
    return {"imported": run.imported, "retired": run.retired, "users": len(user_list)}
