"""The pure merge rules (brandmind/merge.py), one table per function: (inputs, expected)."""
from __future__ import annotations

import pytest

from brandmind import merge

R = "r_a"
H1 = merge.hlc_key([1000, 0, "r_a"])
H2 = merge.hlc_key([1000, 1, "r_a"])
H3 = merge.hlc_key([1000, 1, "r_b"])
H4 = merge.hlc_key([2000, 0, "r_a"])


HLC_KEY = [
    (([5, 0, "r_a"], [5, 0, "r_b"]), True),        # equal wall and counter: by replica
    (([5, 1, "r_a"], [5, 0, "r_b"]), False),       # the counter before the replica
    (([5, 9, "r_z"], [6, 0, "r_a"]), True),        # the wall first
    (([99, 0, "r"], [100, 0, "r"]), True),         # numerically, not as text
    (([1, 12, "r"], [1, 3, "r"]), False),
]


@pytest.mark.parametrize("args,expected", HLC_KEY)
def test_hlc_key_sorts_like_the_tuple(args, expected):
    a, b = args
    assert (merge.hlc_key(a) < merge.hlc_key(b)) is expected
    assert (tuple(a) < tuple(b)) is expected


LWW = [
    ((None, None), None),
    (((H1, "x"), None), (H1, "x")),
    ((None, (H1, "x")), (H1, "x")),
    (((H1, "old"), (H2, "new")), (H2, "new")),
    (((H2, "new"), (H1, "old")), (H2, "new")),     # arrival order does not matter
    (((H2, "a"), (H3, "b")), (H3, "b")),           # same wall and counter: the replica breaks the tie
    (((H1, "a"), (H1, "a")), (H1, "a")),
]


@pytest.mark.parametrize("args,expected", LWW)
def test_lww(args, expected):
    assert merge.lww(*args) == expected


LATEST = [((None, H1), H1), ((H1, H2), H2), ((H2, H1), H2), ((H2, H2), H2)]


@pytest.mark.parametrize("args,expected", LATEST)
def test_latest(args, expected):
    assert merge.latest(*args) == expected


HLC_AFTER = [
    (((10, 0), [10, 0, R]), None),                 # seen already: the clock stays
    (((10, 0), [10, 1, R]), (10, 1)),
    (((10, 5), [11, 0, R]), (11, 0)),
    (((12, 0), [11, 9, R]), None),                 # ours is ahead
    (((0, 0), ["7", "2", R]), (7, 2)),
]


@pytest.mark.parametrize("args,expected", HLC_AFTER)
def test_hlc_receive_rule(args, expected):
    assert merge.hlc_after(*args) == expected


TOO_FAR = [
    (([1300, 0, R], 1000, 300), False),            # exactly the window: fine
    (([1301, 0, R], 1000, 300), True),
    (([500, 0, R], 1000, 300), False),             # behind: never held
    (([1301, 0, R], 1000, 1 << 62), False),        # accepted: no cap
]


@pytest.mark.parametrize("args,expected", TOO_FAR)
def test_too_far_ahead(args, expected):
    assert merge.too_far_ahead(*args) is expected


SAME_OP = [
    (({"hlc": [1, 0, R], "kind": "k"}, {"hlc": [1, 0, R], "kind": "k"}), True),
    (({"hlc": [1, 0, R], "kind": "k"}, {"hlc": (1, 0, R), "kind": "k"}), True),
    (({"hlc": [1, 0, R], "kind": "k"}, {"hlc": [1, 1, R], "kind": "k"}), False),
    (({"hlc": [1, 0, R], "kind": "k"}, {"hlc": [1, 0, R], "kind": "j"}), False),
]


@pytest.mark.parametrize("args,expected", SAME_OP)
def test_same_op(args, expected):
    assert merge.same_op(*args) is expected


CONTIGUOUS = [
    ((0, 1, set()), 1),
    ((0, 1, {2, 3, 5}), 3),                        # runs over what is stored, to the first gap
    ((0, 2, {1}), None),                           # does not extend the head
    ((4, 4, {5}), None),                           # stored already
    ((4, 5, {6, 7, 8}), 8),
]


@pytest.mark.parametrize("args,expected", CONTIGUOUS)
def test_contiguous_head(args, expected):
    head, seq, stored = args
    assert merge.contiguous_head(head, seq, stored.__contains__) == expected


IN_ORDER = [((0, 1), "apply"), ((3, 4), "apply"), ((3, 6), "hold"), ((3, 3), "done"), ((3, 1), "done")]


@pytest.mark.parametrize("args,expected", IN_ORDER)
def test_in_order(args, expected):
    assert merge.in_order(*args) == expected


FORGOTTEN_BEFORE = [
    ((H1, None), False),
    ((H1, H2), True),
    ((H2, H2), False),                             # the forget itself
    ((H4, H2), False),                             # the user's new life
]


@pytest.mark.parametrize("args,expected", FORGOTTEN_BEFORE)
def test_forgotten_before(args, expected):
    assert merge.forgotten_before(*args) is expected


BEAD_FORGOTTEN = [((None, H2), True), ((H1, H2), True), ((H2, H2), False), ((H4, H2), False)]


@pytest.mark.parametrize("args,expected", BEAD_FORGOTTEN)
def test_bead_forgotten(args, expected):
    assert merge.bead_forgotten(*args) is expected


EARLIER_ADD = [((None, H1), False), ((H2, H1), True), ((H1, H2), False), ((H1, H1), False)]


@pytest.mark.parametrize("args,expected", EARLIER_ADD)
def test_earlier_add(args, expected):
    assert merge.earlier_add(*args) is expected


EDGE_ENDS = [
    ({"src": "n_1", "dst": "n_2"}, ["n_1", "n_2"]),
    ({"src": "n_1", "dst": "n_2", "evidence": ["m_1"]}, ["n_1", "n_2", "m_1"]),
    ({"src": "n_1", "dst": "n_2", "evidence": ["m_1", "m_2"]}, ["n_1", "n_2"]),  # one of several: stays
    ({"src": "n_1", "dst": "n_2", "evidence": [{"bead": "b_1"}]}, ["n_1", "n_2"]),
    ({"src": "m_1", "dst": "m_2", "evidence": None}, ["m_1", "m_2"]),
]


@pytest.mark.parametrize("p,expected", EDGE_ENDS)
def test_edge_ends(p, expected):
    assert merge.edge_ends(p) == expected


BEAD_KEY = [
    (("b_2", None, False), True),
    (("b_1", "b_2", True), True),                  # the smaller id wins
    (("b_3", "b_2", True), False),
    (("b_3", "b_2", False), True),                 # the one it named is gone
]


@pytest.mark.parametrize("args,expected", BEAD_KEY)
def test_bead_key_wins(args, expected):
    assert merge.bead_key_wins(*args) is expected


def _row(retired_at=None, valid_to=None, by=None, reason=None):
    return {"retired_at": retired_at, "valid_to": valid_to, "superseded_by": by,
            "meta": {"retired_reason": reason} if reason else {}}


RETIRE = [
    ((_row(), {"retired_at": 50, "reason": "wrong"}), _row(50, reason="wrong")),
    ((_row(), {"retired_at": 50, "valid_to": 40, "by": "m_9", "reason": ""}), _row(50, 40, "m_9")),
    ((_row(50, reason="wrong"), {"retired_at": 30, "reason": "moved"}), _row(30, reason="moved")),
    ((_row(30, reason="moved"), {"retired_at": 50, "reason": "wrong"}), _row(30, reason="moved")),
    ((_row(30, reason="wrong"), {"retired_at": 30, "reason": "moved"}), _row(30, reason="moved")),  # tie: smaller reason
    ((_row(30, reason="moved"), {"retired_at": 30, "reason": "wrong"}), _row(30, reason="moved")),
    ((_row(30, reason="moved"), {"retired_at": 20}), _row(20)),                 # earliest has no reason
    ((_row(30, 40), {"retired_at": 35, "valid_to": None}), _row(30, 40)),       # valid_to only when given
    ((_row(30, 40), {"retired_at": 35, "valid_to": 45}), _row(30, 40)),
    ((_row(30, 40), {"retired_at": 35, "valid_to": 25}), _row(30, 25)),
    ((_row(30, by="m_5"), {"retired_at": 35, "by": "m_3"}), _row(30, by="m_3")),  # min id
    ((_row(30, by="m_3"), {"retired_at": 35, "by": "m_5"}), _row(30, by="m_3")),
    ((_row(30, by="m_3"), {"retired_at": 35, "by": None}), _row(30, by="m_3")),
]


@pytest.mark.parametrize("args,expected", RETIRE)
def test_merge_retire(args, expected):
    row, p = args
    assert merge.merge_retire(row, p) == expected


def test_merge_retire_commutes():
    ps = [{"retired_at": 50, "reason": "b", "by": "m_7", "valid_to": 60},
          {"retired_at": 40, "reason": "a", "valid_to": 70}, {"retired_at": 40, "reason": "c", "by": "m_2"}]
    results = set()
    for order in ([0, 1, 2], [2, 1, 0], [1, 0, 2], [2, 0, 1]):
        row = _row()
        for i in order:
            row = merge.merge_retire(row, ps[i])
        results.add(repr(row))
    assert len(results) == 1


EDGE_RETIRE = [
    (({"retired_at": None, "valid_to": None}, {"retired_at": 5}), {"retired_at": 5, "valid_to": None}),
    (({"retired_at": 3, "valid_to": None}, {"retired_at": 5, "valid_to": 9}), {"retired_at": 3, "valid_to": 9}),
    (({"retired_at": 7, "valid_to": 8}, {"retired_at": 5, "valid_to": 9}), {"retired_at": 5, "valid_to": 8}),
    (({"retired_at": 7, "valid_to": 8}, {"retired_at": 9, "valid_to": None}), {"retired_at": 7, "valid_to": 8}),
    (({"retired_at": 7, "valid_to": 8}, {"retired_at": 9, "valid_to": 2}), {"retired_at": 7, "valid_to": 2}),
]


@pytest.mark.parametrize("args,expected", EDGE_RETIRE)
def test_merge_edge_retire(args, expected):
    assert merge.merge_edge_retire(*args) == expected


CONFIRM = [
    (({"confirmations": 0, "updated_at": 10}, {"ts": 5}), {"confirmations": 1, "updated_at": 10}),
    (({"confirmations": 2, "updated_at": 10}, {"ts": 15, "count": 3}), {"confirmations": 5, "updated_at": 15}),
    (({"confirmations": 1, "updated_at": 10}, {"ts": "12", "count": "2"}), {"confirmations": 3, "updated_at": 12}),
]


@pytest.mark.parametrize("args,expected", CONFIRM)
def test_merge_confirm(args, expected):
    assert merge.merge_confirm(*args) == expected


A, B, C = {"bead": "b_1"}, {"bead": "b_2"}, {"bead": "b_3"}
KA, KB, KC = merge.canon(A), merge.canon(B), merge.canon(C)
PROVENANCE = [
    # (column, extras, entries, hk) -> (column, changed extras)
    (([A], {}, [], H1), ([A], {})),
    (([A], {}, [A], H1), ([A], {})),                                        # its own entry: nothing
    (([A], {}, [B], H2), ([A, B], {KB: (H2, 0)})),
    (([A, B], {KB: (H2, 0)}, [C], H1), ([A, C, B], {KC: (H1, 0)})),          # ordered by the HLC that brought it
    (([A, B], {KB: (H2, 0)}, [B], H1), ([A, B], {KB: (H1, 0)})),             # an earlier op brings it first
    (([A, B], {KB: (H2, 0)}, [B], H4), ([A, B], {})),                        # a later one: nothing
    (([A], {}, [C, B], H2), ([A, C, B], {KC: (H2, 0), KB: (H2, 1)})),         # then by position
]


@pytest.mark.parametrize("args,expected", PROVENANCE)
def test_merge_provenance(args, expected):
    assert merge.merge_provenance(*args) == expected


def test_merge_provenance_commutes():
    ops = [([B, C], H2), ([C], H1), ([A, B], H4)]
    results = set()
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0]):
        column, extras = [A], {}
        for i in order:
            column, changed = merge.merge_provenance(column, extras, *ops[i])
            extras.update(changed)
        results.add(merge.canon(column))
    assert results == {merge.canon([A, C, B])}


MERGE_PARTS = [
    (({"into": "m_1", "ts": 9, "provenance": [A]}, []), []),
    (({"into": "m_1", "ts": 9, "provenance": [A]}, ["m_2"]),
     [("m_2", "retire", {"id": "m_2", "retired_at": 9, "by": "m_1", "reason": "merged"}),
      ("m_1", "merge_into", {"id": "m_1", "count": 1, "ts": 9, "provenance": [A]})]),
    (({"into": "m_1", "ts": "9"}, ["m_2", "m_3"]),
     [("m_2", "retire", {"id": "m_2", "retired_at": 9, "by": "m_1", "reason": "merged"}),
      ("m_3", "retire", {"id": "m_3", "retired_at": 9, "by": "m_1", "reason": "merged"}),
      ("m_1", "merge_into", {"id": "m_1", "count": 2, "ts": 9, "provenance": []})]),
]


@pytest.mark.parametrize("args,expected", MERGE_PARTS)
def test_merge_parts(args, expected):
    assert merge.merge_parts(*args) == expected
