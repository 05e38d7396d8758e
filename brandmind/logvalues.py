"""How ops and beads are kept as LMDB values: compact JSON, deflated with a preset dictionary.

An op or a bead is a few hundred bytes of JSON whose keys and envelope repeat in every value
(``{"hlc":[…],"id":"r_…","kind":"memory.add","payload":{…}}``).  Deflate alone saves little
on values this small; with a preset dictionary of those repeating parts it takes an op from
~690 to ~300 bytes and a bead from ~480 to ~240 (measured on LoCoMo turns).

A stored value is either

* plain JSON (starts with ``{`` or ``[``): every value written before this format, and any
  value the dictionary does not make shorter; or
* ``PACKED_V1`` (one byte, 0x01, which JSON never starts with) + raw deflate with
  ``DICTIONARY_V1``; or
* ``PACKED_AFTER`` (0x03; ops only) + raw deflate with ``DICTIONARY_V1`` followed by the plain
  JSON of the op before it in its replica's stream (seq - 1), which is itself never a
  ``PACKED_AFTER`` value: a turn's ``memory.add`` repeats its ``bead.add``'s text, speaker,
  thread, ids and time, and costs ~65 instead of ~250 bytes (a stream of ingested turns
  averages 180 bytes an op against 296).  brandmind/logtxn.py chooses it and reads it (``op_in``), and re-packs the op
  after one whose value it rewrites (a forget) on its own first.

The dictionary is part of the file format: never edit it.  A better one gets a new marker
byte and both stay readable.  Compression runs in the write transaction (~20 us an op);
reading inflates (~5 us).  Forgetting is unchanged: a redacted op is rewritten whole, and
brandmind/lmdbscrub.py zeroes the freed pages whatever their bytes.
"""
from __future__ import annotations

import json
import zlib
from typing import Any

import orjson

PACKED_V1 = 0x01
PACKED_AFTER = 0x03  # 0x02 is logtxn.BEAD_REF (the beads database)
_LEVEL, _WBITS, _MEMLEVEL = 6, -15, 8  # memLevel 9 costs ~8x more per value (allocation)

# The repeating parts of ops and beads, most frequent last (deflate reaches the end of a
# preset dictionary with the shortest distances).  FROZEN: values on disk depend on it.
DICTIONARY_V1 = (
    b'"kind":"kg.node","kind":"kg.edge","kind":"kg.mention","kind":"kg.edge.retire",'
    b'"kind":"block.update","kind":"block.define","kind":"skill.add","kind":"persona.define",'
    b'"kind":"memory.forget","kind":"memory.retire","kind":"memory.confirm","kind":"memory.merge",'
    b'"kind":"bead.forget","kind":"user.forget","subject","predicate","object","edge","node",'
    b'"name","label","block","limit","value","persona","skill","tags","description","retired_at",'
    b'"recorded_at","valid_at","invalid_at","confidence","fact","facts","memory":"m_","memories",'
    b'"source":"extract","source":"remember","type":"fact","type":"preference","type":"decision",'
    b'"agent":"","blob":"","role":"assistant","role":"tool","role":"system","tool":"",'
    b'"meta":{},"meta":{"dia_id":"D","session":},"spans":[],"provenance":[],'
    b'{"content":"","id":"b_","importance":0.5,"key":"default\\u001fid\\u001f\\u001fs",'
    b'"role":"user","size":,"source":"ingest","spans":[],"speaker":"","thread":"","ts":,"turn_id":"s",'
    b'"user":"default"}}}'
    b'{"hlc":[17,0,"r_"],"id":"r_:","kind":"bead.add","payload":{"bead":{"content":"","id":"b_",'
    b'"importance":0.5,"key":"default\\u001fid\\u001f","meta":{"dia_id":"D:","session":},"role":"user",'
    b'"size":,"source":"ingest","spans":[],"speaker":"","thread":"","ts":17,"turn_id":"s","user":"default"}}}'
    b'{"hlc":[17,0,"r_"],"id":"r_:","kind":"memory.add","payload":{"agent":null,"id":"m_",'
    b'"importance":0.5,"meta":{"episode":"20T00:00:00.000Z","kind":"turn","role":"user","speaker":"",'
    b'"thread":""},"provenance":[{"bead":"b_","meta":{"dia_id":"D:","session":},"turn_id":"s"}],'
    b'"source":"ingest","text":"","ts":17,"type":"episode","user":"default","valid_from":null,'
    b'"valid_to":null}}'
)


def dumps(obj: Any) -> bytes:
    """Compact JSON with sorted keys (orjson: sync moves ops by the hundred thousand; what
    it cannot encode, e.g. an int beyond 64 bits, goes through the stdlib encoder)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


def pack(obj: Any) -> bytes:
    """The stored form of an op or a bead: packed when that is shorter, else plain JSON."""
    raw = dumps(obj)
    co = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEMLEVEL, zlib.Z_DEFAULT_STRATEGY, DICTIONARY_V1)
    packed = co.compress(raw) + co.flush()
    return bytes((PACKED_V1,)) + packed if len(packed) + 1 < len(raw) else raw


def pack_after(obj: Any, before: bytes) -> bytes:
    """The ``PACKED_AFTER`` form of an op whose replica's previous op is ``before`` (its plain
    JSON, :func:`plain`)."""
    co = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, _MEMLEVEL, zlib.Z_DEFAULT_STRATEGY, DICTIONARY_V1 + before)
    return bytes((PACKED_AFTER,)) + co.compress(dumps(obj)) + co.flush()


def plain(raw: bytes | memoryview, before: bytes | None = None) -> bytes:
    """The JSON bytes of a stored value, packed or not (damage raises ValueError).  ``before``:
    the plain JSON of the op before it, which a ``PACKED_AFTER`` value is read with."""
    if raw[:1] == b"\x03":
        if before is None:
            raise ValueError("a value packed after the op before it is read without that op")
        return _inflate(raw, DICTIONARY_V1 + before)
    if raw[:1] == b"\x01":
        return _inflate(raw, DICTIONARY_V1)
    return bytes(raw)


def _inflate(raw: bytes | memoryview, zdict: bytes) -> bytes:
    d = zlib.decompressobj(_WBITS, zdict)
    try:
        out = d.decompress(bytes(raw[1:])) + d.flush()
    except zlib.error as exc:
        raise ValueError(f"a packed value is damaged: {exc}") from None
    if not d.eof or d.unused_data:
        raise ValueError("a packed value is damaged: it ends early or runs on")
    return out


def loads(raw: bytes | memoryview | str, before: bytes | None = None) -> Any:
    """The object of a stored value (packed or plain JSON; ``before``: see :func:`plain`)."""
    if not isinstance(raw, str):
        raw = plain(raw, before)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)  # e.g. an int beyond 64 bits; real damage still raises here
