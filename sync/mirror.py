"""Mirror remotes: a graph service (Zep, a self-hosted Graphiti) kept up to date with a store.

A mirror holds the *graph*, not op streams.  Each service is a :class:`GraphSink` (a narrow
protocol: put/delete facts, put messages, delete a user, list, search); :class:`MirrorRemote`
wraps a sink in the :class:`~brandmind.sync.remote.Remote` protocol so the sync engine
(``sync_once``) drives it like any remote, and adds :meth:`MirrorRemote.harvest` (bring back
what the service learned on its own) and :meth:`MirrorRemote.search` (remote-assisted recall).

Mapping (push: op -> sink call, read from the LOCAL STORE'S CURRENT STATE of what each op
touches, never from the op payload, so a re-sent or late op cannot resurrect anything):

* ``memory.add`` / ``memory.confirm`` / ``memory.retire`` / ``memory.merge`` (every id it
  names) / ``memory.forget``  -> the memory row now:
    - gone (forgotten, its user forgotten)                -> ``delete_facts`` of what it became
    - a raw conversation turn (meta kind ``turn``: beads carry those) or a workspace file
      chunk (meta kind ``file``)                          -> nothing (not graph data)
    - retired (``retired_at`` set): a sink with ``keeps_history`` (Graphiti) gets it again
      with ``expired_at`` / ``invalid_at`` set (an upsert); any other sink (Zep) deletes the
      remote edge ("retired facts and forgets become deletions")
    - current, not yet mirrored                           -> ``put_facts``
    - current and already mirrored                        -> nothing (a memory's text, triple
      and start never change; confirmations and provenance are not graph data)
* ``kg.edge`` / ``kg.edge.retire`` -> the edge row now, by the same rules, when it joins two
  graph nodes and is not the edge of a structured fact (``Facts.add`` writes a memory AND an
  edge subject -predicate-> object with the memory as sole evidence: the memory is mirrored,
  its edge would be a duplicate).  Typed links between memories (``contradicts``, ...) are
  not mirrored.
* ``bead.add`` -> ``put_messages`` (the bead as it is now; a forgotten one is skipped).
* ``bead.forget`` (and a ``bead.add`` whose bead is gone here) -> ``delete_messages`` of
  that turn, for the user the op names (``bead.forget`` carries it since it was added; an
  older op, or a redacted add, names none: then for every user this store knows).  A sink
  without ``delete_messages`` (Zep: its API cannot delete one message of a thread) keeps
  the turn; the push leaves a note saying so in :attr:`MirrorRemote.notes` (the sync
  round's report carries it as ``notes``).
* ``user.forget`` -> ``delete_user`` (first, before anything else of the same push), and the
  user's rows in ``remote_map`` go.
* ``kg.node`` / ``kg.mention`` -> nothing of their own (nodes exist on the remote as the ends
  of edges); blocks, skills, personas, persona docs -> nothing (not graph data).

``remote_map`` (a device-local SQLite table, migration 0010) records local id -> remote id
per remote; deletions use it.  A sink's ``put_facts`` must itself be an upsert by
``local_id`` (Zep: the edge carries ``bm_id`` and the sink looks it up before adding;
Graphiti: uuids derived from the local id), so two devices mirroring the same service, or a
re-send after a crash between the sink's answer and the ``remote_map`` write, never
duplicate.  Idempotency keys are derived from the ids of the ops (and the local ids) a call
carries: a retried call sends the same key.

heads(): the version vector of ops mirrored so far.  A sink that can store it
(optional methods ``get_heads() -> dict`` / ``put_heads(dict)``: Graphiti keeps it in a
reserved group) holds it; otherwise it is ``<data_dir>/mirror_<name>.json`` on this device,
written atomically after the sink confirmed every call of the push.  ``pull()`` returns []
(no op streams there); what the service learned itself comes back through ``harvest``.

Harvest (bring back what the service learned on its own): sync/harvest.py has the merge
rules.  The sink protocol and the records it carries: sync/graphsink.py.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from brandmind.errors import BMError
from brandmind.ops import Kind
from brandmind.storage import remote_map

from .graphsink import (EDGE_KINDS, MEMORY_KINDS, SKIP_META_KINDS, GraphFact, GraphMessage, GraphSink, RemoteFact,
                        RemoteHit, fact_name, harvest_id, idem_key, iso_of)
from .handle import store_of
from .remote import seq_of

__all__ = ["GraphFact", "GraphMessage", "GraphSink", "MirrorPlan", "MirrorRemote", "RemoteFact", "RemoteHit",
           "fact_name", "harvest_id", "idem_key"]


@dataclass
class MirrorPlan:
    """What one push does, in order: forget users, delete facts, delete messages, put facts,
    put messages."""
    forget_users: list[str] = field(default_factory=list)
    deletes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # user -> [(local_id, remote_id)]
    forget_messages: dict[str, list[str]] = field(default_factory=dict)      # user -> [bead id]
    puts: list[GraphFact] = field(default_factory=list)
    put_ops: dict[str, str] = field(default_factory=dict)          # local_id -> first op id touching it
    messages: list[GraphMessage] = field(default_factory=list)
    map_only: list[tuple[str, str, str]] = field(default_factory=list)  # (local_id, remote_id, user)

    @property
    def empty(self) -> bool:
        return not (self.forget_users or self.deletes or self.forget_messages or self.puts or self.messages
                    or self.map_only)


# -- the Remote adapter ------------------------------------------------------------------------------------
class MirrorRemote:
    """A :class:`GraphSink` as a sync :class:`~brandmind.sync.remote.Remote` (see the module
    docstring for the rules).  ``store`` is the open store whose ops are pushed: the translation
    reads its current state and keeps ``remote_map`` in its index."""

    accepts_pushes_for_others = True

    def __init__(self, sink: GraphSink, store: Any) -> None:
        self.sink = sink
        self.store = store_of(store)  # a StoreHandle (sync/handle.py); a Memory gives its .store
        self.name = sink.name
        self.kind = sink.kind
        self.notes: list[str] = []   # what a push could not do on this remote (the round reports them)

    # -- heads ---------------------------------------------------------------------------------------------
    @property
    def heads_path(self) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.name)
        return Path(self.store.config.paths.data_dir) / f"mirror_{safe}.json"

    def _remote_heads(self) -> bool:
        return callable(getattr(self.sink, "get_heads", None)) and callable(getattr(self.sink, "put_heads", None))

    def heads(self) -> dict[str, int]:
        if self._remote_heads():
            return {str(r): int(h) for r, h in dict(self.sink.get_heads()).items() if int(h) > 0}
        try:
            data = json.loads(self.heads_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            raise BMError(f"cannot read {self.heads_path} (what was mirrored to {self.name!r})",
                          hint="delete the file: the next sync re-sends everything, which is harmless "
                               "(writes are upserts)") from None
        heads = data.get("heads") if isinstance(data, dict) else None
        return {str(r): int(h) for r, h in (heads or {}).items() if int(h) > 0}

    def _save_head(self, replica: str, head: int) -> None:
        if self._remote_heads():
            self.sink.put_heads({replica: head})
            return
        heads = self.heads()
        heads[replica] = max(head, heads.get(replica, 0))
        path = self.heads_path
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"remote": self.name, "kind": self.kind, "heads": dict(sorted(heads.items()))}, fh,
                      sort_keys=True, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    # -- the Remote protocol -------------------------------------------------------------------------------
    def push(self, replica: str, ops: list[dict]) -> int:
        head = self.heads().get(replica, 0)
        if any(not str(op["id"]).startswith(replica + ":") for op in ops):
            raise BMError(f"remote {self.name!r}: a push of {replica} holds another replica's ops",
                          hint="this is a bug in the sync engine")
        fresh = [op for op in ops if seq_of(op) > head]
        if not fresh:
            return head
        seqs = [seq_of(op) for op in fresh]
        if seqs[0] != head + 1 or seqs != list(range(seqs[0], seqs[0] + len(seqs))):
            raise BMError(f"remote {self.name!r}: ops {seqs[0]}..{seqs[-1]} of {replica} are not contiguous "
                          f"after head {head}", hint="this is a bug in the sync engine")
        plan = self.plan(fresh)
        self.apply(plan)
        self._save_head(replica, seqs[-1])
        return seqs[-1]

    def pull(self, replica: str, after: int, limit: int | None = None) -> list[dict]:
        return []  # a mirror holds no op streams (harvest brings back what it learned)

    def ping(self) -> None:
        self.sink.ping()

    def close(self) -> None:
        closer = getattr(self.sink, "close", None)
        if callable(closer):
            closer()

    # -- remote_map ----------------------------------------------------------------------------------------
    def mapped(self, local_id: str) -> str | None:
        return remote_map.remote_id(self.store.sql, self.name, local_id)

    def local_for(self, remote_id: str) -> str | None:
        return remote_map.local_id(self.store.sql, self.name, remote_id)

    def mapping(self) -> dict[str, str]:
        return remote_map.mapping(self.store.sql, self.name)

    def map_rows(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """Record (local id, remote id, user) rows in ``remote_map``."""
        remote_map.put(self.store.sql, self.name, rows)

    # -- translation -----------------------------------------------------------------------------------------
    def plan(self, ops: list[dict]) -> MirrorPlan:
        """The sink calls that bring the remote to the local state of what ``ops`` touch."""
        memories: dict[str, str] = {}   # id -> first op id touching it
        retired_by_op: set[str] = set()
        edges: dict[str, str] = {}
        beads: dict[str, str] = {}
        bead_users: dict[str, str] = {}           # bead id -> the user an op names
        forgotten_beads: list[str] = []
        forgets: list[str] = []
        for op in ops:
            kind, p = op["kind"], op.get("payload") or {}
            if kind in MEMORY_KINDS and p.get("id"):
                memories.setdefault(p["id"], op["id"])
                if kind == Kind.MEMORY_RETIRE:
                    retired_by_op.add(p["id"])
            elif kind == Kind.MEMORY_MERGE:
                for memory_id in [p.get("into"), *(p.get("ids") or [])]:
                    if memory_id:
                        memories.setdefault(memory_id, op["id"])
                        retired_by_op.add(memory_id)
            elif kind in EDGE_KINDS and p.get("id"):
                edges.setdefault(p["id"], op["id"])
                if kind == Kind.KG_EDGE_RETIRE:
                    retired_by_op.add(p["id"])
            elif kind == Kind.BEAD_ADD:
                bead_id = (p.get("bead") or {}).get("id") or p.get("id")
                if bead_id:
                    beads.setdefault(bead_id, op["id"])
                    user = (p.get("bead") or {}).get("user")
                    if isinstance(user, str) and user:
                        bead_users.setdefault(bead_id, user)
            elif kind == Kind.BEAD_FORGET and p.get("id"):
                if p["id"] not in forgotten_beads:
                    forgotten_beads.append(p["id"])
                if isinstance(p.get("user"), str) and p["user"]:
                    bead_users[p["id"]] = p["user"]
            elif kind == Kind.USER_FORGET and p.get("user"):
                if p["user"] not in forgets:
                    forgets.append(p["user"])
        plan = MirrorPlan(forget_users=forgets)
        history = bool(getattr(self.sink, "keeps_history", False))
        for memory_id, op_id in memories.items():
            self._plan_memory(plan, memory_id, op_id, history, memory_id in retired_by_op)
        for edge_id, op_id in edges.items():
            self._plan_edge(plan, edge_id, op_id, history, edge_id in retired_by_op)
        gone = list(forgotten_beads)
        for bead_id in beads:
            msg = self._message(bead_id)
            if msg is not None:
                plan.messages.append(msg)
            elif bead_id not in gone and self.store.log.get_bead(bead_id) is None:
                gone.append(bead_id)
        self._plan_gone_beads(plan, gone, bead_users)
        # a forgotten user's deletions are covered by deleting the user
        for user in forgets:
            plan.deletes.pop(user, None)
            plan.forget_messages.pop(user, None)
        return plan

    def _plan_gone_beads(self, plan: MirrorPlan, bead_ids: list[str], users: dict[str, str]) -> None:
        """Turns forgotten here leave the remote: for the user an op named, else (an older
        ``bead.forget``, a redacted add) for every user this store knows (absent = fine)."""
        everyone: list[str] | None = None
        for bead_id in bead_ids:
            if self.store.log.get_bead(bead_id) is not None:
                continue  # here again (cannot happen: remove wins), never deleted
            if bead_id in users:
                owners = [users[bead_id]]
            else:
                everyone = self.users() if everyone is None else everyone
                owners = everyone
            for user in owners:
                ids = plan.forget_messages.setdefault(user, [])
                if bead_id not in ids:
                    ids.append(bead_id)

    def _delete(self, plan: MirrorPlan, local_id: str, user: str | None) -> None:
        row = remote_map.remote_entry(self.store.sql, self.name, local_id)
        if row is not None:
            plan.deletes.setdefault(row[1] or user or "", []).append((local_id, row[0]))

    def _put(self, plan: MirrorPlan, fact: GraphFact, op_id: str) -> None:
        plan.puts.append(fact)
        plan.put_ops[fact.local_id] = op_id

    def _plan_memory(self, plan: MirrorPlan, memory_id: str, op_id: str, history: bool, touched_retire: bool) -> None:
        row = remote_map.memory_row(self.store.sql, memory_id)
        if row is None:
            self._delete(plan, memory_id, None)
            return
        meta = json.loads(row["meta"] or "{}")
        if meta.get("kind") in SKIP_META_KINDS:
            return
        mapped = self.mapped(memory_id)
        origin = self._origin_uuid(row)
        retired = row["retired_at"] is not None
        if origin is not None:  # harvested from this kind of service: never put back
            if mapped is None:
                plan.map_only.append((memory_id, origin, row["user_id"]))
            if retired and not history:
                plan.deletes.setdefault(row["user_id"], []).append((memory_id, origin))
            return
        if retired and not history:
            self._delete(plan, memory_id, row["user_id"])
            return
        if mapped is not None and not (history and touched_retire):
            return
        self._put(plan, self._memory_fact(row, meta), op_id)

    def _origin_uuid(self, row: dict) -> str | None:
        try:
            prov = json.loads(row["provenance"] or "[]")
        except ValueError:
            return None
        for entry in prov if isinstance(prov, list) else []:
            if isinstance(entry, dict) and entry.get("source") == self.kind and entry.get("uuid"):
                return str(entry["uuid"])
        return None

    def _memory_fact(self, row: dict, meta: dict) -> GraphFact:
        user = row["user_id"]
        structured = bool(row["subject"] and row["predicate"] and row["object"])
        if structured:
            name = "RELATES_TO" if meta.get("negated") else fact_name(row["predicate"])
            source, target = row["subject"], row["object"]
        else:
            name, source, target = "RELATES_TO", user, str(meta.get("topic") or row["type"])
        return GraphFact(local_id=row["id"], user=user, text=row["text"], name=name, source=source,
                         target=target, valid_at=iso_of(row["valid_from"]), invalid_at=iso_of(row["valid_to"]),
                         created_at=iso_of(row["recorded_at"]), expired_at=iso_of(row["retired_at"]),
                         embedding=self._embedding(row["text"]))

    def _embedding(self, text: str) -> list[float] | None:
        if not getattr(self.sink, "wants_embeddings", False):
            return None
        import numpy as np

        raw = self.store.vector_for(text)
        return [float(x) for x in np.frombuffer(raw, dtype=np.float32)]

    def _plan_edge(self, plan: MirrorPlan, edge_id: str, op_id: str, history: bool, touched_retire: bool) -> None:
        row = remote_map.edge_row(self.store.sql, edge_id)
        if row is None:
            self._delete(plan, edge_id, None)
            return
        evidence = json.loads(row["evidence"] or "[]")
        if len(evidence) == 1 and remote_map.is_structured_memory(self.store.sql, evidence[0]):
            return  # the edge of a structured fact: the memory is mirrored
        if row["retired_at"] is not None and not history:
            self._delete(plan, edge_id, row["user_id"])
            return
        if self.mapped(edge_id) is not None and not (history and touched_retire):
            return
        words = row["predicate"].replace("_", " ")
        text = f"{row['src_name']} {words} {row['dst_name']}"
        self._put(plan, GraphFact(
            local_id=edge_id, user=row["user_id"], text=text, name=fact_name(row["predicate"]),
            source=row["src_name"], target=row["dst_name"], valid_at=iso_of(row["valid_from"]),
            invalid_at=iso_of(row["valid_to"]), created_at=iso_of(row["recorded_at"]),
            expired_at=iso_of(row["retired_at"]), embedding=self._embedding(text)), op_id)

    def _message(self, bead_id: str) -> GraphMessage | None:
        bead = self.store.log.get_bead(bead_id)
        if bead is None:
            return None
        content = bead.get("content")
        if content is None and bead.get("blob"):
            content = self.store.blobs.get(bead["blob"]).decode("utf-8")
        if not content:
            return None
        return GraphMessage(local_id=bead["id"], user=bead["user"], role=bead.get("role") or "user",
                            name=bead.get("speaker"), content=content, created_at=iso_of(int(bead["ts"])) or "")

    # -- sink calls --------------------------------------------------------------------------------------------
    def apply(self, plan: MirrorPlan) -> None:
        """Run a plan against the sink, recording ``remote_map`` after each confirmed call."""
        sink = self.sink
        for user in plan.forget_users:
            sink.delete_user(user, idem_key(self.name, "delete_user", user, *plan.forget_users))
            remote_map.remove_user(self.store.sql, self.name, user)
        for user, pairs in plan.deletes.items():
            uuids = list(dict.fromkeys(remote for _, remote in pairs))
            sink.delete_facts(user, uuids, idem_key(self.name, "delete_facts", user, *uuids))
            remote_map.remove(self.store.sql, self.name, (local for local, _ in pairs))
        deleter = getattr(sink, "delete_messages", None)
        if callable(deleter):
            for user, bead_ids in plan.forget_messages.items():
                deleter(user, bead_ids, idem_key(self.name, "delete_messages", user, *bead_ids))
        elif plan.forget_messages:
            kept = {b for ids in plan.forget_messages.values() for b in ids}
            self.notes.append(f"{self.kind} remote {self.name!r} may still hold {len(kept)} forgotten turn(s): "
                              f"it cannot delete a single message (forgetting the user deletes all of theirs)")
        self.map_rows(plan.map_only)
        if plan.puts:
            key = idem_key(self.name, "put_facts", *sorted(f"{lid}@{op}" for lid, op in plan.put_ops.items()))
            got = sink.put_facts(plan.puts, key)
            users = {f.local_id: f.user for f in plan.puts}
            self.map_rows((local, remote, users[local]) for local, remote in got.items() if local in users and remote)
        if plan.messages:
            sink.put_messages(plan.messages, idem_key(self.name, "put_messages", *(m.local_id for m in plan.messages)))

    # -- harvest -----------------------------------------------------------------------------------------------
    def users(self) -> list[str]:
        """Every user this store knows (memories, graph nodes, rows mapped on this remote)."""
        return remote_map.users(self.store.sql, self.name)

    def harvest(self, store: Any | None = None, *, users: Iterable[str] | None = None) -> dict:
        """Bring back what the remote learned on its own (sync/harvest.py: the merge rules).
        Returns ``{"imported": n, "retired": n, "users": n}``."""
        from .harvest import harvest

        if store is not None and store_of(store) is not self.store:
            raise BMError("harvest: a MirrorRemote harvests into the store it was made with",
                          hint="make the MirrorRemote with that store")
        return harvest(self, self.store, users=users)

    # -- remote-assisted recall --------------------------------------------------------------------------------
    def search(self, user: str, query: str, limit: int = 10, timeout: float = 0.7) -> list[RemoteHit]:
        """The remote's edge and node search for ``user`` (raises RemoteDown on a timeout or an
        outage: the caller falls back to local recall); hits of facts that came from here or
        were harvested carry their local id."""
        hits = self.sink.search(user, query, limit, timeout)
        out = []
        for hit in hits:
            if hit.local_id is None and hit.kind == "edge":
                local = self.local_for(hit.uuid)
                if local is not None:
                    hit = replace(hit, local_id=local)
            out.append(hit)
        return out
