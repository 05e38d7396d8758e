"""The format of an S3 remote's objects (``sync/s3.py``): op segments and ``heads.json``.

``ops/<replica>/<first seq:012>-<last seq:012>.seg``: an immutable segment of one replica's
ops, canonical JSON ``{"format": 1, "replica", "ops": [...]}``, at most ``SEGMENT_OPS`` ops (a
format constant: readers find the segment holding a seq with one listing) and about
``SEGMENT_BYTES``.  ``heads.json``: ``{"format": 1, "heads": {replica: seq}}``, merged per
replica by max.  Pure functions only: no I/O.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from brandmind.oplog import dumps
from brandmind.ops import Kind

SEGMENT_OPS = 5000            # format constant: no segment holds more ops than this
SEGMENT_BYTES = 8 << 20       # about this much JSON per segment (one op may exceed it)
HEADS = "heads.json"
COMPACT = "compact.json"      # compaction's record (compact.py): base snapshot, floor per replica
SEG_RE = re.compile(r"^(\d{12})-(\d{12})\.seg$")
REPLICA_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


@dataclass(frozen=True)
class Segment:
    first: int
    last: int
    key: str  # relative to the prefix


def seg_name(replica: str, first: int, last: int) -> str:
    return f"ops/{replica}/{first:012d}-{last:012d}.seg"


def op_seq(op: dict) -> int:
    return int(op["id"].rsplit(":", 1)[1])


def op_replica(op: dict) -> str:
    return op["id"].rsplit(":", 1)[0]


def is_redaction(a: dict, b: dict) -> bool:
    """Whether payload ``a`` is ``b`` with content removed (marked ``redacted``, or some
    fields nulled: a forgotten user's edits of a shared block keep everything but the name)."""
    if a.get("redacted"):
        return True
    return all(k in b and (a[k] == b[k] or a[k] is None) for k in a)


def same_op(a: dict, b: dict) -> bool:
    """The same op, allowing one side to be a redaction of the other (a forget after the push)."""
    if a["id"] != b["id"] or list(a["hlc"]) != list(b["hlc"]) or a["kind"] != b["kind"]:
        return False
    pa, pb = a.get("payload") or {}, b.get("payload") or {}
    return pa == pb or is_redaction(pa, pb) or is_redaction(pb, pa)


def merge_heads(doc: dict | None, new: dict[str, int]) -> dict:
    heads = dict((doc or {}).get("heads") or {})
    for rep, n in new.items():
        heads[rep] = max(int(heads.get(rep, 0)), int(n))
    out = dict(doc or {})
    out["format"] = 1
    out["heads"] = dict(sorted(heads.items()))
    return out


def floor_of(doc: dict | None) -> dict[str, int]:
    """compact.json's floor: replica -> the seq up to which its segments may be gone (those
    ops are in the base snapshot's log)."""
    return {r: int(n) for r, n in ((doc or {}).get("floor") or {}).items() if REPLICA_RE.match(r)}


def coverage(floor: int, segs: Iterable[Segment]) -> int:
    """The highest seq reached without a gap from ``floor`` through ``segs``."""
    cov = floor
    for s in sorted(segs, key=lambda s: s.first):
        if s.first > cov + 1:
            break
        cov = max(cov, s.last)
    return cov


def chunks(replica: str, ops: list[dict], segment_ops: int, segment_bytes: int) -> Iterator[tuple[list[dict], bytes]]:
    """Segments of at most ``segment_ops`` ops, split in halves while the JSON is over
    ``segment_bytes`` (one op alone may be bigger); each with its canonical JSON."""
    def split(chunk: list[dict]) -> Iterator[tuple[list[dict], bytes]]:
        plain = dumps({"format": 1, "replica": replica, "ops": chunk})
        if len(plain) > segment_bytes and len(chunk) > 1:
            half = len(chunk) // 2
            yield from split(chunk[:half])
            yield from split(chunk[half:])
        else:
            yield chunk, plain

    for i in range(0, len(ops), segment_ops):
        yield from split(ops[i:i + segment_ops])


def blob_digests(ops: Iterable[dict]) -> list[str]:
    """The blobs the (unredacted) ``bead.add`` ops name, each once."""
    out = []
    for op in ops:
        p = op.get("payload") or {}
        if op.get("kind") == Kind.BEAD_ADD and not p.get("redacted"):
            digest = (p.get("bead") or {}).get("blob")
            if digest:
                out.append(digest)
    return list(dict.fromkeys(out))
