"""The sync planner (sync/plan.py): a pure function, tested with a table of cases."""
from __future__ import annotations

import pytest

from brandmind.sync.plan import Plan, plan

ME, B, C = "r_me", "r_b", "r_c"

# (name, local vv, remote heads, push_others, expected push, expected pull)
CASES = [
    ("both empty", {}, {}, False, {}, {}),
    ("new store, empty remote: nothing to do", {}, {}, True, {}, {}),
    ("first push of our ops", {ME: 5}, {}, False, {ME: (0, 5)}, {}),
    ("remote is behind on our stream", {ME: 9}, {ME: 4}, False, {ME: (4, 9)}, {}),
    ("in sync", {ME: 3, B: 2}, {ME: 3, B: 2}, False, {}, {}),
    ("pull another replica's ops", {ME: 3}, {ME: 3, B: 7}, False, {}, {B: 0}),
    ("pull the rest of a stream", {ME: 3, B: 2}, {ME: 3, B: 7}, False, {}, {B: 2}),
    ("push and pull at once", {ME: 4, B: 1}, {ME: 2, B: 6, C: 1}, False, {ME: (2, 4)}, {B: 1, C: 0}),
    ("S3 takes only our own stream", {ME: 1, B: 5}, {}, False, {ME: (0, 1)}, {}),
    ("a relay takes the others' too", {ME: 1, B: 5}, {B: 2}, True, {ME: (0, 1), B: (2, 5)}, {}),
    ("a relay that is ahead on one stream, behind on another", {B: 5, C: 1}, {B: 2, C: 4}, True,
     {B: (2, 5)}, {C: 1}),
    ("restore: the remote has our own ops and we have none", {}, {ME: 12}, False, {}, {ME: 0}),
    ("restore after a partial loss", {ME: 4}, {ME: 12}, True, {}, {ME: 4}),
    ("zero and negative heads are no heads", {ME: 0, B: -3}, {C: 0}, True, {}, {}),
    ("junk values are ignored", {ME: "x", B: 2}, {"": 4, C: None}, True, {B: (0, 2)}, {}),
]


@pytest.mark.parametrize("name, local, remote, others, push, pull", CASES, ids=[c[0] for c in CASES])
def test_plan_table(name, local, remote, others, push, pull):
    got = plan(local, remote, ME, push_others=others)
    assert got == Plan(push=push, pull=pull), name
    # pure: the inputs are not changed
    assert plan(local, remote, ME, push_others=others) == got


def test_plan_counts_and_emptiness():
    p = plan({ME: 10, B: 3}, {ME: 4}, ME, push_others=True)
    assert p.push_count() == 6 + 3 and not p.empty
    assert plan({ME: 1}, {ME: 1}, ME, push_others=True).empty


def test_plan_applied_twice_converges():
    """Executing a plan (copying the planned ranges) leaves nothing to do the second time."""
    local, remote = {ME: 7, B: 3}, {B: 5, C: 2}
    p = plan(local, remote, ME, push_others=True)
    for replica, (_after, upto) in p.push.items():
        remote[replica] = upto
    for replica in p.pull:
        local[replica] = remote[replica]
    assert plan(local, remote, ME, push_others=True).empty
