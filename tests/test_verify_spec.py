"""The ``verify:`` rules in spec/ops name real operands/results/attributes, known kinds and hooks;
the schema rejects malformed rules; dialect types are verified with NVIDIA's texts."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tilegen.runtime.opdef import all_ops as _all_ops
from tilegen.runtime.types import (
    DYNAMIC,
    F32,
    FloatType,
    IntegerType,
    PointerType,
    TensorViewType,
    TileType,
)
from tilegen.runtime.verify.hooks import HOOKS
from tilegen.runtime.verify.rules import RULE_KINDS, TRANSFORMS
from tilegen.runtime.verify.types import verify_type

REPO = Path(__file__).resolve().parent.parent


def all_ops():
    """cuda_tile's ops (other dialects' verifiers are their owners' to test)."""
    return [o for o in _all_ops() if o.dialect == "cuda_tile"]


NAME_KEYS = ("attr", "value", "lhs", "rhs", "from", "to", "element", "rank")


def _names_in(obj):
    """Every operand/result/attribute name a rule or condition refers to."""
    if isinstance(obj, list):
        for x in obj:
            yield from _names_in(x)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if k in NAME_KEYS and isinstance(v, str):
                yield v
            elif k in ("values", "same_type") and isinstance(v, list):
                yield from v
            elif k in ("when", "if", "then", "not"):
                yield from _names_in(v)


def _rule_refs():
    for op in all_ops():
        known = {v.name for v in (*op.operands, *op.results)} | op.attr_names
        for rule in op.verify or ():
            if "custom" in rule:
                yield op, "custom", rule["custom"], known
                continue
            ((kind, args),) = rule.items()
            names = list(args) if isinstance(args, list) else list(_names_in(args))
            for n in names:
                yield op, kind, n, known
            if kind not in names:
                yield op, kind, None, known


def test_rule_kinds_and_hooks_exist():
    bad = []
    for op, kind, name, _ in _rule_refs():
        if kind == "custom":
            if name not in HOOKS:
                bad.append((op.name, name))
        elif kind not in RULE_KINDS:
            bad.append((op.name, kind))
    assert not bad


def test_rule_names_refer_to_op_fields():
    bad = [
        (op.name, kind, n)
        for op, kind, n, known in _rule_refs()
        if kind != "custom" and n is not None and n not in known
    ]
    assert not bad


def test_types_match_with_transforms_exist():
    for op in all_ops():
        for rule in op.verify or ():
            if "types_match_with" in rule:
                assert rule["types_match_with"]["transform"] in TRANSFORMS, op.name


def _rule_validator():
    schema = json.loads((REPO / "spec/schema/ops.schema.json").read_text())
    rule_schema = {"$defs": schema["$defs"], "$ref": "#/$defs/verify_rule"}
    return jsonschema.Draft202012Validator(rule_schema)


@pytest.mark.parametrize(
    "rule",
    [
        {"same_type": ["lhs"]},
        {"same_tpye": ["lhs", "rhs"]},
        {"attr_in": {"attr": "rounding_mode", "in": ["zero"]}},
        {"width_relation": {"lhs": "a", "rhs": "b", "relation": "<=", "message": "m"}},
        {"forbid": {"when": {"attr": "x", "bogus": 1}, "message": "m"}},
        {"types_match_with": {"from": "a", "to": "b", "transform": "nope", "summary": "s"}},
    ],
)
def test_schema_rejects_malformed_rules(rule):
    assert list(_rule_validator().iter_errors(rule))


def test_schema_accepts_spec_rules():
    v = _rule_validator()
    for op in all_ops():
        for rule in op.verify or ():
            assert not list(v.iter_errors(rule)), (op.name, rule)


# --------------------------------------------------------------------------- verify_type


@pytest.mark.parametrize(
    "t,msg",
    [
        (TileType((1, 0, 2), F32), "all dimensions must be positive constants, got 1, 0, 2"),
        (TileType((3, 5, 9), F32), "all dimensions must be powers of two, got 3, 5, 9"),
        (TileType((1024, 1024, 1024), F32), "tile would exceed the maximum of 16777216 elements"),
        (
            TileType((), FloatType("f4E2M1FN")),
            "F4E2M1FN tiles must have an even number of elements",
        ),
        (
            TileType((3, 3, 3), FloatType("f4E2M1FN")),
            "F4E2M1FN tiles must have an even number of elements",
        ),
        (
            PointerType(IntegerType(4)),
            "failed to verify 'pointeeType': f16 or bf16 or f32 or tf32 or f64 or f8E4M3FN or "
            "f8E5M2 or f8E8M0FNU or f4E2M1FN or i1 or i8 or i16 or i32 or i64",
        ),
        (
            TensorViewType(F32, (4, 0), (DYNAMIC, 1)),
            "dimensions must have strictly positive constant sizes but got [4, 0]",
        ),
        (
            TensorViewType(F32, (4,), (1, 1)),
            "expected shape and stride to be of same rank but got shape of rank 1 and stride of rank 2",
        ),
    ],
)
def test_verify_type_messages(t, msg):
    assert verify_type(t) == msg


@pytest.mark.parametrize(
    "t",
    [
        TileType((), F32),
        TileType((64,), IntegerType(4)),
        TileType((2, 1), FloatType("f4E2M1FN")),
        TileType((4,), PointerType(F32)),
        TensorViewType(F32, (DYNAMIC, 32), (DYNAMIC, 1)),
    ],
)
def test_verify_type_accepts(t):
    assert verify_type(t) is None
