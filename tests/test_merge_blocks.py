"""The pure merge rules of core memory blocks (brandmind/merge.py, section "blocks"), one
table per function: (inputs, expected)."""
from __future__ import annotations

import pytest

from brandmind import merge

FIELDS = ("description", "limit", "read_only")


def define(explicit=(), **fields) -> dict:
    base = {"description": "default", "limit": 3000, "read_only": False}
    return {**base, **fields, "explicit": list(explicit)}


DECODE = [
    (b"\x00", {}),                                       # no client
    (b"\x01\x05\x03", {5: 3}),                           # one client
    (b"\x02\x01\x0a\x02\x00", {1: 10, 2: 0}),            # two
    (b"\x01\xac\x02\x81\x01", {300: 129}),               # varints over one byte
]


@pytest.mark.parametrize("data,expected", DECODE)
def test_decode_state_vector(data, expected):
    assert merge.decode_state_vector(data) == expected


@pytest.mark.parametrize("data", [b"", b"\x01", b"\x01\x05", b"\x01\x85"])
def test_a_truncated_state_vector_is_refused(data):
    with pytest.raises(ValueError):
        merge.decode_state_vector(data)


def test_decode_reads_what_pycrdt_writes():
    from pycrdt import Doc, Text

    doc = Doc(client_id=4242)
    doc.get("text", type=Text).insert(0, "hello")
    assert merge.decode_state_vector(doc.get_state()) == {4242: 5}


COVERS = [
    (({}, {}), True),
    (({1: 3}, {}), True),                # needs nothing
    (({1: 3}, {1: 3}), True),            # exactly
    (({1: 4}, {1: 3}), True),            # more
    (({1: 2}, {1: 3}), False),           # behind on a client
    (({1: 3}, {1: 3, 2: 1}), False),     # a client it has not seen
    (({1: 3, 2: 0}, {2: 0}), True),      # a zero clock is always covered
]


@pytest.mark.parametrize("args,expected", COVERS)
def test_covers(args, expected):
    assert merge.covers(*args) is expected


READY = [
    # (origin, seq, deps, high, have): applied?
    ((7, 1, {}, {}, {}), True),                      # the first update of an origin, needing nothing
    ((7, 2, {}, {}, {}), False),                     # seq 1 of that origin missing
    ((7, 2, {}, {7: 1}, {7: 4}), True),              # the next seq
    ((7, 3, {}, {7: 1}, {7: 4}), False),             # a gap in the origin's seqs
    ((7, 2, {}, {7: 2}, {7: 4}), False),             # applied already
    ((7, 1, {9: 2}, {}, {9: 1}), False),             # built on an edit of client 9 not here yet
    ((7, 1, {9: 2}, {9: 1}, {9: 2}), True),          # ... that is here now
    ((7, 2, {9: 2}, {7: 1}, {7: 3, 9: 5}), True),
]


@pytest.mark.parametrize("args,expected", READY)
def test_block_update_ready(args, expected):
    assert merge.block_update_ready(*args) is expected


DEFINITION = [
    # the first define's values when nobody set a field
    ([define()], {"description": "default", "limit": 3000, "read_only": False}),
    # a later explicit value wins (defines come in ascending HLC)
    ([define(), define(["limit"], limit=100)], {"description": "default", "limit": 100, "read_only": False}),
    # the last explicit value of each field, field by field
    ([define(["limit"], limit=100), define(["description"], description="d2", limit=9),
      define(["limit"], limit=50, description="ignored")],
     {"description": "d2", "limit": 50, "read_only": False}),
    # a later define that does not set a field does not reset it to its default
    ([define(["read_only"], read_only=True), define()], {"description": "default", "limit": 3000,
                                                         "read_only": True}),
    # an unknown field in explicit is ignored
    ([define(["colour"], colour="red")], {"description": "default", "limit": 3000, "read_only": False}),
]


@pytest.mark.parametrize("defs,expected", DEFINITION)
def test_block_definition_is_lww_per_field(defs, expected):
    assert merge.block_definition(defs, FIELDS) == expected
