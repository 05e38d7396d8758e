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
  graph nodes and is not the edge of a structured fact (``add_fact`` writes a memory AND an
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

GraphFact fields: ``text`` = the memory text (for a node-node edge: "source predicate
target"); ``name`` = the predicate in UPPER_SNAKE ("RELATES_TO" when there is none or the
fact is negated); ``source``/``target`` = subject/object, or for a plain memory the user and
its type (``fact``, ``preference``, ...); ``valid_at``/``invalid_at`` = valid_from/valid_to;
``created_at`` = recorded_at (system time learned); ``expired_at`` = retired_at.

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

Harvest (merge rules for remote-made facts):

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

import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Protocol

from brandmind.errors import BMError
from brandmind.ops import Kind

from .remote import seq_of

# -- what goes to a graph service ----------------------------------------------------------------


@dataclass(frozen=True)
class GraphFact:
    """One bm memory or kg edge, as the remote should hold it now."""
    local_id: str          # bm memory id (m_...) or kg edge id
    user: str
    text: str              # the fact sentence ("Ada works at Acme")
    name: str              # fact name / predicate, UPPER_SNAKE ("WORKS_AT"; "RELATES_TO" if none)
    source: str            # source node name (subject; the user's name/id when none)
    target: str            # target node name (object; for a plain memory: its type or the user)
    valid_at: str | None   # ISO-8601 UTC, world time true-from
    invalid_at: str | None  # world time true-to
    created_at: str | None  # system time recorded
    expired_at: str | None  # system time retired (None = current)
    embedding: list[float] | None = None   # precomputed (graphiti needs it; zep ignores)


@dataclass(frozen=True)
class GraphMessage:
    """One bead (a turn) for Zep thread messages / a graphiti episode."""
    local_id: str
    user: str
    role: str
    name: str | None
    content: str
    created_at: str


@dataclass(frozen=True)
class RemoteFact:
    """A fact as listed by the remote (for harvest)."""
    uuid: str
    user: str
    text: str
    name: str
    source: str
    target: str
    valid_at: str | None
    invalid_at: str | None
    created_at: str | None
    expired_at: str | None
    local_id: str | None   # the bm id it was pushed from (edge attribute `bm_id`), None = remote-made


@dataclass(frozen=True)
class RemoteHit:
    """A search result."""
    uuid: str
    text: str
    score: float
    kind: str              # "edge" | "node"
    valid_at: str | None
    invalid_at: str | None
    local_id: str | None


class GraphSink(Protocol):
    """A graph service.  Optional extras, read with ``getattr``:

    * ``keeps_history: bool`` (default False): retired facts are kept with ``expired_at`` /
      ``invalid_at`` (Graphiti) instead of deleted (Zep);
    * ``get_heads() -> dict[str, int]`` and ``put_heads(heads: dict[str, int]) -> None``: the
      service stores the mirrored version vector itself (else a local file holds it);
    * ``close() -> None``.
    """
    name: str              # the remote's configured name
    kind: str              # "zep" | "graphiti"

    def ping(self) -> None: ...                                   # one harmless round trip; raise RemoteDown

    def put_facts(self, facts: list[GraphFact], key: str) -> dict[str, str]: ...
    # upsert (same local_id again updates, never duplicates); returns local_id -> remote uuid;
    # `key` is an idempotency key derived from the op ids (Zep: Idempotency-Key header; batches <= 100)

    def put_messages(self, messages: list[GraphMessage], key: str) -> None: ...

    def delete_facts(self, user: str, remote_uuids: list[str], key: str) -> None: ...  # absent = fine

    def delete_user(self, user: str, key: str) -> None: ...                          # absent = fine

    def delete_messages(self, user: str, local_ids: list[str], key: str) -> None: ...  # absent = kept (noted)
    # the turns (bead ids) a put_messages wrote; absent ones are fine

    def list_facts(self, user: str) -> list[RemoteFact]: ...

    def search(self, user: str, query: str, limit: int, timeout: float) -> list[RemoteHit]: ...


# -- helpers ---------------------------------------------------------------------------------------------
_UPPER = re.compile(r"[^A-Z0-9]+")
_PREDICATE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SKIP_META_KINDS = ("turn", "file")      # raw turns (beads carry them) and workspace file chunks
MEMORY_KINDS = (Kind.MEMORY_ADD, Kind.MEMORY_CONFIRM, Kind.MEMORY_RETIRE, Kind.MEMORY_FORGET)
EDGE_KINDS = (Kind.KG_EDGE, Kind.KG_EDGE_RETIRE)


def fact_name(predicate: str | None) -> str:
    """A predicate as Zep names edges: UPPER_SNAKE, "RELATES_TO" when empty."""
    name = _UPPER.sub("_", (predicate or "").upper()).strip("_")
    if not name or not name[0].isalpha():
        return "RELATES_TO"
    return name[:64]


def idem_key(*parts: Any) -> str:
    """An idempotency key from the ids a call carries (same ids -> same key)."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return "bm-" + h[:40]


def harvest_id(remote_uuid: str, created_ms: int | None) -> str:
    """The memory id a remote-made fact becomes: like ``clock.new_id`` (sorts by time), with
    the random part replaced by a hash of the remote uuid, so every device picks the same."""
    from brandmind.clock import encode_id

    ms = max(0, int(created_ms or 0))
    r = int.from_bytes(hashlib.sha256(remote_uuid.encode("utf-8")).digest()[:8], "big") >> 4
    return encode_id("m", ms, r)


def _iso(ms: int | None) -> str | None:
    from brandmind.clock import iso

    return iso(ms) if ms is not None else None


def _ms(value: str | None) -> int | None:
    if not value:
        return None
    from brandmind.clock import parse_time

    try:
        return parse_time(value, field="remote time")
    except BMError:
        return None


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
    docstring for the rules).  ``mem`` is the open store whose ops are pushed: the translation
    reads its current state and keeps ``remote_map`` in its index."""

    accepts_pushes_for_others = True

    def __init__(self, sink: GraphSink, mem: Any) -> None:
        self.sink = sink
        self.mem = mem
        self.name = sink.name
        self.kind = sink.kind
        self.notes: list[str] = []   # what a push could not do on this remote (the round reports them)

    # -- heads ---------------------------------------------------------------------------------------------
    @property
    def heads_path(self) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.name)
        return Path(self.mem.config.paths.data_dir) / f"mirror_{safe}.json"

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
        row = self.mem.sql.conn.execute("SELECT remote_id FROM remote_map WHERE remote=? AND local_id=?",
                                        (self.name, local_id)).fetchone()
        return row[0] if row else None

    def local_for(self, remote_id: str) -> str | None:
        row = self.mem.sql.conn.execute("SELECT local_id FROM remote_map WHERE remote=? AND remote_id=?",
                                        (self.name, remote_id)).fetchone()
        return row[0] if row else None

    def mapping(self) -> dict[str, str]:
        return dict(self.mem.sql.conn.execute("SELECT local_id, remote_id FROM remote_map WHERE remote=?",
                                              (self.name,)).fetchall())

    def _map(self, rows: Iterable[tuple[str, str, str]]) -> None:
        rows = list(rows)
        if rows:
            with self.mem.sql.write():
                self.mem.sql.conn.executemany(
                    "INSERT OR REPLACE INTO remote_map(remote, local_id, remote_id, user_id) VALUES(?,?,?,?)",
                    [(self.name, local, remote, user) for local, remote, user in rows])

    def _unmap(self, local_ids: Iterable[str]) -> None:
        ids = list(local_ids)
        if ids:
            with self.mem.sql.write():
                self.mem.sql.conn.executemany("DELETE FROM remote_map WHERE remote=? AND local_id=?",
                                              [(self.name, i) for i in ids])

    def _unmap_user(self, user: str) -> None:
        with self.mem.sql.write():
            self.mem.sql.conn.execute("DELETE FROM remote_map WHERE remote=? AND user_id=?", (self.name, user))

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
            elif bead_id not in gone and self.mem.log.get_bead(bead_id) is None:
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
            if self.mem.log.get_bead(bead_id) is not None:
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
        row = self.mem.sql.conn.execute("SELECT remote_id, user_id FROM remote_map WHERE remote=? AND local_id=?",
                                        (self.name, local_id)).fetchone()
        if row is not None:
            plan.deletes.setdefault(row[1] or user or "", []).append((local_id, row[0]))

    def _put(self, plan: MirrorPlan, fact: GraphFact, op_id: str) -> None:
        plan.puts.append(fact)
        plan.put_ops[fact.local_id] = op_id

    def _plan_memory(self, plan: MirrorPlan, memory_id: str, op_id: str, history: bool, touched_retire: bool) -> None:
        rows = list(self.mem.sql.rows("SELECT * FROM memories WHERE id=?", (memory_id,)))
        if not rows:
            self._delete(plan, memory_id, None)
            return
        row = rows[0]
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
                         target=target, valid_at=_iso(row["valid_from"]), invalid_at=_iso(row["valid_to"]),
                         created_at=_iso(row["recorded_at"]), expired_at=_iso(row["retired_at"]),
                         embedding=self._embedding(row["text"]))

    def _embedding(self, text: str) -> list[float] | None:
        if not getattr(self.sink, "wants_embeddings", False):
            return None
        import numpy as np

        raw = self.mem.store.vector_for(text)
        return [float(x) for x in np.frombuffer(raw, dtype=np.float32)]

    def _plan_edge(self, plan: MirrorPlan, edge_id: str, op_id: str, history: bool, touched_retire: bool) -> None:
        rows = list(self.mem.sql.rows(
            "SELECT e.*, s.name AS src_name, s.user_id AS user_id, d.name AS dst_name FROM kg_edges e "
            "JOIN kg_nodes s ON s.id = e.src JOIN kg_nodes d ON d.id = e.dst WHERE e.id=?", (edge_id,)))
        if not rows:
            self._delete(plan, edge_id, None)
            return
        row = rows[0]
        evidence = json.loads(row["evidence"] or "[]")
        if len(evidence) == 1 and self.mem.sql.conn.execute(
                "SELECT 1 FROM memories WHERE id=? AND subject IS NOT NULL", (evidence[0],)).fetchone():
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
            source=row["src_name"], target=row["dst_name"], valid_at=_iso(row["valid_from"]),
            invalid_at=_iso(row["valid_to"]), created_at=_iso(row["recorded_at"]),
            expired_at=_iso(row["retired_at"]), embedding=self._embedding(text)), op_id)

    def _message(self, bead_id: str) -> GraphMessage | None:
        bead = self.mem.log.get_bead(bead_id)
        if bead is None:
            return None
        content = bead.get("content")
        if content is None and bead.get("blob"):
            content = self.mem.blobs.get(bead["blob"]).decode("utf-8")
        if not content:
            return None
        return GraphMessage(local_id=bead["id"], user=bead["user"], role=bead.get("role") or "user",
                            name=bead.get("speaker"), content=content, created_at=_iso(int(bead["ts"])) or "")

    # -- sink calls --------------------------------------------------------------------------------------------
    def apply(self, plan: MirrorPlan) -> None:
        """Run a plan against the sink, recording ``remote_map`` after each confirmed call."""
        sink = self.sink
        for user in plan.forget_users:
            sink.delete_user(user, idem_key(self.name, "delete_user", user, *plan.forget_users))
            self._unmap_user(user)
        for user, pairs in plan.deletes.items():
            uuids = list(dict.fromkeys(remote for _, remote in pairs))
            sink.delete_facts(user, uuids, idem_key(self.name, "delete_facts", user, *uuids))
            self._unmap(local for local, _ in pairs)
        deleter = getattr(sink, "delete_messages", None)
        if callable(deleter):
            for user, bead_ids in plan.forget_messages.items():
                deleter(user, bead_ids, idem_key(self.name, "delete_messages", user, *bead_ids))
        elif plan.forget_messages:
            kept = {b for ids in plan.forget_messages.values() for b in ids}
            self.notes.append(f"{self.kind} remote {self.name!r} may still hold {len(kept)} forgotten turn(s): "
                              f"it cannot delete a single message (forgetting the user deletes all of theirs)")
        self._map(plan.map_only)
        if plan.puts:
            key = idem_key(self.name, "put_facts", *sorted(f"{lid}@{op}" for lid, op in plan.put_ops.items()))
            got = sink.put_facts(plan.puts, key)
            users = {f.local_id: f.user for f in plan.puts}
            self._map((local, remote, users[local]) for local, remote in got.items() if local in users and remote)
        if plan.messages:
            sink.put_messages(plan.messages, idem_key(self.name, "put_messages", *(m.local_id for m in plan.messages)))

    # -- harvest -----------------------------------------------------------------------------------------------
    def users(self) -> list[str]:
        c = self.mem.sql.conn
        found = {r[0] for r in c.execute("SELECT DISTINCT user_id FROM memories")}
        found |= {r[0] for r in c.execute("SELECT DISTINCT user_id FROM kg_nodes")}
        found |= {r[0] for r in c.execute("SELECT DISTINCT user_id FROM remote_map WHERE remote=? "
                                          "AND user_id IS NOT NULL", (self.name,))}
        return sorted(u for u in found if u)

    def harvest(self, mem: Any | None = None, *, users: Iterable[str] | None = None) -> dict:
        """Bring back what the remote learned on its own (module docstring: merge rules).
        Returns ``{"imported": n, "retired": n, "users": n}``."""
        from brandmind import converge
        from brandmind.clock import now_millis

        mem = mem if mem is not None else self.mem
        if mem is not self.mem:
            raise BMError("harvest: a MirrorRemote harvests into the store it was made with",
                          hint="make the MirrorRemote with that store")
        c = mem.sql.conn
        sql = mem.sql
        ops: list[tuple[str, dict]] = []
        new_map: list[tuple[str, str, str]] = []
        texts: list[str] = []
        imported = retired = 0
        user_list = list(users) if users is not None else self.users()
        seen: set[str] = set()
        for user in user_list:
            for fact in self.sink.list_facts(user):
                if fact.local_id or not fact.uuid or not (fact.text or "").strip() or fact.uuid in seen:
                    continue  # pushed by bm (it comes back through op sync), nothing to keep, or listed twice
                seen.add(fact.uuid)
                known = self.local_for(fact.uuid)
                created = _ms(fact.created_at)
                mid = known or harvest_id(fact.uuid, created or _ms(fact.valid_at))
                ended = bool(fact.invalid_at or fact.expired_at)
                retired_at = _ms(fact.expired_at) or _ms(fact.invalid_at) or created or now_millis()
                retire = (Kind.MEMORY_RETIRE, {"id": mid, "user": user, "retired_at": retired_at,
                                            "valid_to": _ms(fact.invalid_at), "by": None,
                                            "reason": f"{self.kind}: invalidated"})
                row = c.execute("SELECT retired_at FROM memories WHERE id=?", (mid,)).fetchone()
                if row is not None:
                    if known is None:
                        new_map.append((mid, fact.uuid, user))
                    if ended and row[0] is None:
                        ops.append(retire)
                        retired += 1
                    continue
                if known is not None or converge.dead(sql, mid):
                    continue  # mapped to something gone here, or forgotten here: remove wins
                gone = converge.forgotten_at(sql, user)
                if gone is not None and (created or 0) <= int(gone.split(".")[0]):
                    continue  # from before the user was forgotten
                predicate = (fact.name or "").lower()
                structured = bool(_PREDICATE.match(predicate) and fact.source and fact.target
                                  and predicate != "relates_to")
                ts = _ms(fact.valid_at) or created or now_millis()
                payload = {
                    "id": mid, "text": fact.text.strip(), "type": "fact", "user": user, "agent": None,
                    "importance": 0.5, "meta": {}, "source": self.kind,
                    "provenance": [{"source": self.kind, "remote": self.name, "uuid": fact.uuid}],
                    "valid_from": _ms(fact.valid_at), "valid_to": _ms(fact.invalid_at), "ts": ts,
                    "recorded_at": created or ts,
                }
                if structured:
                    payload.update({"subject": fact.source, "predicate": predicate, "object": fact.target})
                ops.append((Kind.MEMORY_ADD, payload))
                texts.append(payload["text"])
                new_map.append((mid, fact.uuid, user))
                imported += 1
                if ended:
                    ops.append(retire)
        if ops:
            vecs = mem.store.embed_docs(texts) if texts else []
            with mem.log.write() as t:
                for kind, payload in ops:
                    t.append(kind, payload)
                for text, vec in zip(texts, vecs):
                    t.cache_vector(mem.sql.model, text, vec.tobytes())
            mem.store.catch_up()
        self._map(new_map)
        return {"imported": imported, "retired": retired, "users": len(user_list)}

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
