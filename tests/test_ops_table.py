"""The op rules table (brandmind/ops.py): every op kind has one rule, and every rule every hook.

A kind added to ``ops.Kind`` without its payload, its rule or one of its hooks (check,
apply, apply_log, owner, redact, export, import_) fails here, naming what is missing.
"""
from __future__ import annotations

import inspect
from enum import Enum

import pytest

import brandmind.exchange  # noqa: F401  (binds the export / import hooks)
import brandmind.projection  # noqa: F401  (binds the apply hooks, and through opcheck the checks)
from brandmind import ops
from brandmind.ops import HOOKS, PAYLOADS, RULES, Kind, Rule


def problems(kinds=Kind, rules=RULES) -> list[str]:
    """What the table lacks: a rule or payload of a kind, a hook of a rule."""
    out = []
    for kind in kinds:
        rule = rules.get(kind)
        if rule is None:
            out.append(f"{kind.value}: no rule")
            continue
        if PAYLOADS.get(kind) is None or rule.payload is not PAYLOADS[kind]:
            out.append(f"{kind.value}: no payload")
        for hook in HOOKS:
            fn = getattr(rule, hook, None)
            if not callable(fn) or not inspect.signature(fn).parameters:
                out.append(f"{kind.value}.{hook}")
    return out


def test_every_kind_has_one_rule_with_every_hook():
    assert problems() == []
    assert ops.missing() == []
    for kind, rule in RULES.items():
        assert isinstance(rule, Rule) and rule.kind is kind


@pytest.mark.parametrize("kind", list(Kind), ids=lambda k: k.value)
def test_each_hook_is_a_function_of_its_kind(kind):
    for hook in HOOKS:
        assert callable(getattr(RULES[kind], hook)), f"{kind.value} has no {hook} hook"


def test_a_kind_without_a_rule_or_a_hook_fails_the_check(monkeypatch):
    """What the test above catches: a new kind with no rule, a rule with a hook left out."""
    extended = Enum("Kind", [(k.name, k.value) for k in Kind] + [("THING_ADD", "thing.add")], type=str)
    assert problems(extended) == ["thing.add: no rule"]
    monkeypatch.setattr(RULES[Kind.MEMORY_ADD], "export", None)
    assert problems() == ["memory.add.export"]
    assert ops.missing() == ["memory.add.export"]


def test_kinds_are_their_stored_spelling():
    """A str enum: stored ops (plain strings) compare equal and find their rule."""
    assert Kind.MEMORY_ADD == "memory.add" and f"{Kind.KG_EDGE_RETIRE}" == "kg.edge.retire"
    assert str(Kind.USER_FORGET) == "user.forget"
    assert ops.rule("memory.add") is RULES[Kind.MEMORY_ADD]
    assert ops.rule("thing.add") is None  # an unknown kind: stored, not applied


def test_owner_and_redact_hooks():
    """What forgetting a user redacts (the rules that were memory._owned_by / _redacted)."""
    def op(kind, **p):
        return {"kind": kind.value, "payload": p}

    assert ops.owned_by(op(Kind.MEMORY_ADD, id="m_1", user="ann"), "ann")
    assert not ops.owned_by(op(Kind.MEMORY_ADD, id="m_1", user="bob"), "ann")
    assert not ops.owned_by(op(Kind.MEMORY_ADD, id="m_1", user="ann", redacted=True), "ann")
    assert ops.owned_by(op(Kind.BEAD_ADD, bead={"id": "b_1", "user": "ann"}), "ann")
    assert ops.owned_by(op(Kind.KG_EDGE, id="e_1", src="n_1", dst="n_2"), "ann", {"n_2"})
    assert ops.owned_by(op(Kind.KG_MENTION, node="n_1", memory="m_1"), "ann", {"n_1"})
    assert not ops.owned_by(op(Kind.SKILL_ADD, name="s", user="ann"), "ann")
    assert ops.redacted(op(Kind.BEAD_ADD, bead={"id": "b_1"})) == {"id": "b_1", "redacted": True}
    assert ops.redacted(op(Kind.KG_NODE, id="n_1", user="ann", name="Ann")) == \
        {"id": "n_1", "user": "ann", "redacted": True}
    assert ops.redacted(op(Kind.PERSONA_ASSIGN, user="ann", handle="a_b")) == {"redacted": True}
    assert ops.redacted(op(Kind.MEMORY_MERGE, into="m_1", ids=["m_2"])) == {"into": "m_1", "redacted": True}
    assert ops.redacted(op(Kind.BLOCK_UPDATE, id="k", scope="persona", user="ann", agent="x", update="AA==")) == \
        {"id": "k", "scope": "persona", "user": None, "agent": None, "update": "AA=="}
    assert ops.redacted(op(Kind.BLOCK_DEFINE, id="k", scope="user", user="ann")) == {"id": "k", "redacted": True}
