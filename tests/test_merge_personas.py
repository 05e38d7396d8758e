"""The merge rules of personas and skills (brandmind/merge.py, "personas and skills"), as
tables of cases: persona definitions LWW by HLC, persona documents highest (version, HLC),
assignments held iff the latest assign is later than the latest unassign, skills the
highest (version, HLC) among the adds after the latest remove."""
from __future__ import annotations

import itertools

import pytest

from brandmind import merge

H1, H2, H3, H4 = (f"{ms:015d}.00000000.r1" for ms in (1, 2, 3, 4))


@pytest.mark.parametrize("stored, new, wins", [
    (None, H1, True),    # nothing stored: the define lands
    (H1, H2, True),      # later HLC wins
    (H2, H1, False),     # earlier HLC loses
    (H2, H2, False),     # the same op again changes nothing
])
def test_persona_definition_is_last_writer_wins_by_hlc(stored, new, wins):
    assert merge.persona_define_wins(stored, new) is wins


@pytest.mark.parametrize("stored, version, hlc, wins", [
    (None, 1, H1, True),
    ((1, H2), 2, H1, True),     # a higher version wins whatever its HLC
    ((2, H1), 1, H2, False),    # a lower version loses whatever its HLC
    ((2, H1), 2, H2, True),     # equal versions: the later HLC
    ((2, H2), 2, H1, False),
    ((2, H2), 2, H2, False),    # the same op again
])
def test_persona_document_is_the_highest_version_then_hlc(stored, version, hlc, wins):
    assert merge.persona_doc_wins(stored, version, hlc) is wins


@pytest.mark.parametrize("assign, unassign, held", [
    (None, None, False),
    (H1, None, True),
    (None, H1, False),
    (H2, H1, True),     # assigned again after the unassign
    (H1, H2, False),    # unassigned after the assign
])
def test_assignment_is_held_iff_the_latest_assign_is_after_the_latest_unassign(assign, unassign, held):
    assert merge.persona_held(assign, unassign) is held


def _fold(ops: list[tuple]) -> dict | None:
    row = None
    for op in ops:
        row = merge.persona_unassign(row, op[1]) if op[0] == "un" else merge.persona_assign(row, *op[1:])
    return row


ASSIGNS = [("as", H1, 0.5, 100, 200), ("as", H3, 0.9, 300, 150), ("un", H2), ("as", H2, 0.7, 50, 400), ("un", H4)]


def test_assignment_fields_merge_the_same_in_every_order():
    """confidence of the latest assign by HLC, discovered_at min, last_confirmed max, both
    HLCs max: any order (and applying an op twice) gives the same row."""
    expected = {"confidence": 0.9, "discovered_at": 50, "last_confirmed": 400, "assign_hlc": H3, "unassign_hlc": H4}
    for order in itertools.permutations(ASSIGNS):
        assert _fold(list(order) + list(order[:2])) == expected, order
    assert not merge.persona_held(expected["assign_hlc"], expected["unassign_hlc"])


V1, V2, V3 = (merge.version_key(v) for v in ("1.0.0", "2.0.0", "3.0.0"))


@pytest.mark.parametrize("adds, removed, hlc, vkey, keep, dropped", [
    ([], None, H2, V1, True, []),                       # the first add
    ([], H3, H2, V3, False, []),                        # a later remove wins over it
    ([], H2, H2, V3, False, []),                        # ... and at the same HLC
    ([], H1, H2, V1, True, []),                         # an add after the remove revives it
    ([(H3, V2)], None, H2, V1, False, []),              # a later add of a higher version hides it
    ([(H3, V2)], None, H2, V2, False, []),              # ... or of the same version
    ([(H3, V1)], None, H2, V2, True, []),               # a later add of a lower version does not
    ([(H1, V1)], None, H2, V1, True, [H1]),             # it hides an earlier add of a lower-or-equal version
    ([(H1, V3)], None, H2, V1, True, []),               # not one of a higher version
    ([(H2, V1)], None, H2, V1, False, []),              # applied already
])
def test_skill_add_is_kept_only_while_it_can_become_visible(adds, removed, hlc, vkey, keep, dropped):
    assert merge.skill_add(adds, removed, hlc, vkey) == (keep, dropped)


@pytest.mark.parametrize("removed, hlc, wins", [(None, H1, True), (H1, H2, True), (H2, H1, False), (H2, H2, False)])
def test_skill_remove_keeps_the_latest(removed, hlc, wins):
    assert merge.skill_remove_wins(removed, hlc) is wins


@pytest.mark.parametrize("adds, visible", [
    ([], None),
    ([(H1, V1)], H1),
    ([(H1, V2), (H2, V1)], H1),     # the highest version, even if older
    ([(H1, V2), (H2, V2)], H2),     # equal versions: the later HLC
    ([(H3, V1), (H2, V3), (H1, V3)], H2),
])
def test_the_visible_skill_is_the_highest_version_then_hlc(adds, visible):
    assert merge.skill_visible(adds) == visible


def test_skill_versions_sort_like_semver():
    order = ["0.1.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta.2", "1.0.0-beta.11",
             "1.0.0", "1.0.1", "1.2", "1.10.0", "2.0.0.1"]
    keys = [merge.version_key(v) for v in order]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert merge.version_key("1.0") == merge.version_key("1.0.0") == merge.version_key("1.0.0+build.5")
