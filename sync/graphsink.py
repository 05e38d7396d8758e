"""What goes between bm and a graph service (Zep, a self-hosted Graphiti): the
:class:`GraphSink` protocol a service implements, the records it carries, and the helpers
that name them (``fact_name``, ``idem_key``, ``harvest_id``).  ``sync/mirror.py`` drives a
sink as a sync remote.

GraphFact fields: ``text`` = the memory text (for a node-node edge: "source predicate
target"); ``name`` = the predicate in UPPER_SNAKE ("RELATES_TO" when there is none or the
fact is negated); ``source``/``target`` = subject/object, or for a plain memory the user and
its type (``fact``, ``preference``, ...); ``valid_at``/``invalid_at`` = valid_from/valid_to;
``created_at`` = recorded_at (system time learned); ``expired_at`` = retired_at.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Protocol

from brandmind.errors import BMError
from brandmind.ops import Kind

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
UPPER_RE = re.compile(r"[^A-Z0-9]+")
PREDICATE_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SKIP_META_KINDS = ("turn", "file")      # raw turns (beads carry them) and workspace file chunks
MEMORY_KINDS = (Kind.MEMORY_ADD, Kind.MEMORY_CONFIRM, Kind.MEMORY_RETIRE, Kind.MEMORY_FORGET)
EDGE_KINDS = (Kind.KG_EDGE, Kind.KG_EDGE_RETIRE)


def fact_name(predicate: str | None) -> str:
    """A predicate as Zep names edges: UPPER_SNAKE, "RELATES_TO" when empty."""
    name = UPPER_RE.sub("_", (predicate or "").upper()).strip("_")
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


def iso_of(ms: int | None) -> str | None:
    from brandmind.clock import iso

    return iso(ms) if ms is not None else None


def ms_of(value: str | None) -> int | None:
    if not value:
        return None
    from brandmind.clock import parse_time

    try:
        return parse_time(value, field="remote time")
    except BMError:
        return None

