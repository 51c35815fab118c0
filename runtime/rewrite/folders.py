"""Op folders, named by ``fold:`` in spec/ops. A folder returns the op's replacement values,
:data:`IN_PLACE` after changing the op itself, or None when it does not apply."""

from __future__ import annotations

from tilegen.runtime.ir import Operation
from tilegen.runtime.rewrite import ir_utils as U
from tilegen.runtime.rewrite.pattern import IN_PLACE

_EQUAL, _NOT_EQUAL = 0, 1


def select(op: Operation):
    """NVIDIA's SelectOp::fold, tried in order (first hit wins)."""
    cond, a, b = op.operands
    if a is b:
        return [a]
    if U.is_const_bool(cond, True):
        return [a]
    if U.is_const_bool(cond, False):
        return [b]
    if U.is_const_bool(a, True) and U.is_const_bool(b, False) and cond.type == op.results[0].type:
        return [cond]
    cmp = U.defined_by(cond, "cuda_tile.cmpi")
    if cmp is not None and {id(v) for v in cmp.operands} == {id(a), id(b)} and a is not b:
        pred = cmp.attributes.get("comparison_predicate")
        if getattr(pred, "value", None) == _EQUAL:
            return [b]
        if getattr(pred, "value", None) == _NOT_EQUAL:
            return [a]
    inner = U.is_not_of(cond)
    if inner is not None:
        op.set_operand(0, inner)
        op.set_operand(1, b)
        op.set_operand(2, a)
        return IN_PLACE
    lhs = U.defined_by(a, "cuda_tile.select")
    if lhs is not None and lhs.operands[0] is cond:
        op.set_operand(1, lhs.operands[1])
        return IN_PLACE
    rhs = U.defined_by(b, "cuda_tile.select")
    if rhs is not None and rhs.operands[0] is cond:
        op.set_operand(2, rhs.operands[2])
        return IN_PLACE
    return None


def assume(op: Operation):
    """``assume P, (assume P, x)`` -> the inner assume."""
    inner = U.defined_by(op.operands[0], "cuda_tile.assume")
    if inner is not None and inner.attributes.get("predicate") == op.attributes.get("predicate"):
        return [inner.results[0]]
    return None


def if_not_condition(op: Operation):
    """``if (xori c, true) {A} else {B}`` -> ``if c {B} else {A}`` (in place)."""
    if len(op.regions) < 2 or not op.regions[1].blocks:
        return None
    inner = U.is_not_of(op.operands[0])
    if inner is None:
        return None
    op.set_operand(0, inner)
    op.regions[0], op.regions[1] = op.regions[1], op.regions[0]
    return IN_PLACE
