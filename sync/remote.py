"""What a sync remote is (:class:`Remote`), and two that live in this process:
:class:`MemoryRemote` (a dict, with fault injection, for tests) and :class:`PeerRemote`
(another local store used as a remote: relays A -> B -> C).  ``sync/s3.py`` has the S3 one.
:class:`ObjectRemote` is what a remote that stores named objects (S3) offers besides the
op streams: snapshots (snapshot.py) are made and read through it.

A remote keeps one append-only stream of ops per replica.  ``heads()`` says how far each
stream is stored without a gap; ``push`` appends ops of one replica (idempotent: ops it
has already are skipped when they are the same op, a different op under a stored id is a
:class:`~brandmind.errors.SyncConflict`); ``pull`` reads a stream in seq order.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol, runtime_checkable

from brandmind.errors import BMError, SyncConflict
from brandmind.replication import CLASH_HINT

from .handle import store_of


@runtime_checkable
class Remote(Protocol):
    name: str
    accepts_pushes_for_others: bool

    def heads(self) -> dict[str, int]:
        """replica -> highest contiguous seq stored remotely."""
        ...

    def push(self, replica: str, ops: list[dict]) -> int:
        """Store ops of one replica, contiguous, starting at ``heads()[replica] + 1`` or
        overlapping what is stored (idempotent); returns the replica's new head."""
        ...

    def pull(self, replica: str, after: int, limit: int | None = None) -> list[dict]:
        """The replica's ops with seq > ``after``, in seq order (at most ``limit``)."""
        ...


@runtime_checkable
class ObjectRemote(Protocol):
    """A remote holding named, encrypted objects under its prefix (S3: ``sync/s3.py``).
    Names (``rel``) are relative to the prefix; bodies are sealed by the caller with
    ``keyring.seal(rel, plain)`` and opened with ``keyring.open(rel, body, where=...)``."""
    name: str
    keyring: Any  # brandmind.crypto.Keyring

    def where(self, rel: str) -> str:
        """The object's full address, for messages (``s3://bucket/prefix/rel``)."""
        ...

    def get(self, rel: str) -> tuple[bytes, str] | None:
        """(body, etag), or None when the object does not exist."""
        ...

    def put(self, rel: str, body: bytes, **cond: str) -> str:
        """Write (``IfNoneMatch="*"`` / ``IfMatch=etag`` conditions); returns the etag."""
        ...

    def delete(self, rel: str) -> None:
        """Delete an object (absent is fine)."""
        ...

    def read_doc(self, rel: str) -> tuple[dict | None, str | None]:
        """An encrypted JSON document and its etag ((None, None) when absent)."""
        ...

    def cas(self, rel: str, merge: Callable[[dict | None], dict]) -> dict:
        """Compare-and-swap a shared JSON document: ``merge(current)`` until it sticks."""
        ...

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Any]:
        """``map`` over a few threads, results in order."""
        ...

    def pull_blobs(self, ops: Iterable[dict]) -> None:
        """Fetch into the local blob store the blobs the beads of ``ops`` name."""
        ...


class RemoteDown(BMError):
    """A remote could not be reached or failed a request (transient: try again later)."""


def seq_of(op: dict) -> int:
    return int(str(op["id"]).rpartition(":")[2])


def _same(a: dict, b: dict) -> bool:
    """The same op (a redaction of it counts as the same: payloads are not compared)."""
    return a["id"] == b["id"] and list(a["hlc"]) == list(b["hlc"]) and a["kind"] == b["kind"]


@dataclass
class Faults:
    """Fault injection for :class:`MemoryRemote`, drawn from one seeded random source.

    ``fail``               chance that a request fails before doing anything
    ``fail_after_commit``  chance that a push stores its ops and then fails (the answer is lost)
    ``partial``            chance that a push stores only a prefix of its ops, then fails
    ``drop``               chance that each op of a pull answer is left out
    ``duplicate``          chance that each op of a pull answer comes twice
    ``reorder``            shuffle every pull answer (within one origin too)
    ``stale_heads``        chance that ``heads()`` reports an older head for a replica
    """

    seed: int = 0
    fail: float = 0.0
    fail_after_commit: float = 0.0
    partial: float = 0.0
    drop: float = 0.0
    duplicate: float = 0.0
    reorder: bool = False
    stale_heads: float = 0.0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def hit(self, chance: float) -> bool:
        return chance > 0 and self.rng.random() < chance


class MemoryRemote:
    """An in-process remote: ``streams[replica][seq] = op`` (JSON copies)."""

    def __init__(self, name: str = "memory", *, accepts_pushes_for_others: bool = True,
                 faults: Faults | None = None) -> None:
        self.name = name
        self.accepts_pushes_for_others = accepts_pushes_for_others
        self.faults = faults
        self.streams: dict[str, dict[int, str]] = {}
        self.requests = 0
        self.failures = 0

    # -- helpers -----------------------------------------------------------------------------
    def _fail(self, what: str) -> None:
        self.failures += 1
        raise RemoteDown(f"remote {self.name!r}: injected failure {what}",
                         hint="transient: the next sync retries (nothing is lost)")

    def _maybe_fail(self, what: str) -> None:
        self.requests += 1
        if self.faults is not None and self.faults.hit(self.faults.fail):
            self._fail(what)

    def head(self, replica: str) -> int:
        stream = self.streams.get(replica, {})
        n = 0
        while n + 1 in stream:
            n += 1
        return n

    def all_ops(self) -> list[dict]:
        return [json.loads(raw) for r in sorted(self.streams) for _, raw in sorted(self.streams[r].items())]

    # -- the Remote protocol ----------------------------------------------------------------------
    def heads(self) -> dict[str, int]:
        self._maybe_fail("in heads")
        out = {}
        for replica in self.streams:
            head = self.head(replica)
            if head and self.faults is not None and self.faults.hit(self.faults.stale_heads):
                head = self.faults.rng.randrange(0, head)
            if head:
                out[replica] = head
        return out

    def push(self, replica: str, ops: list[dict]) -> int:
        self._maybe_fail(f"before pushing {len(ops)} op(s) of {replica}")
        stream = self.streams.setdefault(replica, {})
        head = self.head(replica)
        seqs = [seq_of(op) for op in ops]
        if any(not str(op["id"]).startswith(replica + ":") for op in ops):
            raise BMError(f"remote {self.name!r}: a push of {replica} holds another replica's ops",
                          hint="this is a bug in the sync engine")
        if seqs and (seqs != list(range(seqs[0], seqs[0] + len(seqs))) or seqs[0] > head + 1):
            raise BMError(f"remote {self.name!r}: ops {seqs[0]}..{seqs[-1]} of {replica} are not contiguous "
                          f"after head {head}", hint="this is a bug in the sync engine")
        keep = len(ops)
        if ops and self.faults is not None and self.faults.hit(self.faults.partial):
            keep = self.faults.rng.randrange(0, len(ops))
        for op, seq in zip(ops[:keep], seqs[:keep]):
            stored = stream.get(seq)
            if stored is not None:
                if not _same(json.loads(stored), op):
                    raise SyncConflict(f"two devices share replica id {replica}: op {op['id']} differs from "
                                       f"the one on remote {self.name!r}",
                                       hint=CLASH_HINT)
                continue
            stream[seq] = json.dumps(op, sort_keys=True)
        if keep < len(ops):
            self._fail(f"after storing {keep} of {len(ops)} op(s) of {replica}")
        if self.faults is not None and self.faults.hit(self.faults.fail_after_commit):
            self._fail(f"after storing {len(ops)} op(s) of {replica} (the answer was lost)")
        return self.head(replica)

    def pull(self, replica: str, after: int, limit: int | None = None) -> list[dict]:
        self._maybe_fail(f"pulling {replica}")
        stream = self.streams.get(replica, {})
        out = []
        seq = after + 1
        while seq in stream and (limit is None or len(out) < limit):
            out.append(json.loads(stream[seq]))
            seq += 1
        f = self.faults
        if f is not None and out:
            noisy = []
            for op in out:
                if f.hit(f.drop):
                    continue
                noisy.append(op)
                if f.hit(f.duplicate):
                    noisy.append(json.loads(json.dumps(op)))
            if f.reorder:
                f.rng.shuffle(noisy)
            out = noisy
        return out


class PeerRemote:
    """Another local store as a remote (it relays every replica's ops: A -> B -> C)."""

    accepts_pushes_for_others = True

    def __init__(self, store: Any, *, name: str | None = None, now_ms: Any = None) -> None:
        self.store = store_of(store)  # a StoreHandle (sync/handle.py); a Memory gives its .store
        self.name = name or f"peer:{self.store.log.replica}"
        self.now_ms = now_ms  # a callable giving the peer's clock (tests of skewed clocks)

    def heads(self) -> dict[str, int]:
        return self.store.log.version_vector()

    def push(self, replica: str, ops: list[dict]) -> int:
        if ops:
            self.store.receive_ops(ops, now_ms=self.now_ms() if self.now_ms else None)
        return self.store.log.version_vector().get(replica, 0)

    def pull(self, replica: str, after: int, limit: int | None = None) -> list[dict]:
        return self.store.log.ops_of(replica, after, limit)
