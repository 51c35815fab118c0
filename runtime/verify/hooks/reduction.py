"""Custom verifier hooks: ``reduce`` and ``scan`` (operands, identities, dim, body region).

Spec use: ``{custom: aggregate}`` (add ``same_result_types: true`` for scan) in the verify phase,
``{custom: aggregate_body}`` for the region, and ``{custom: aggregate_infer}`` last (the
InferTypeOpInterface check).
"""

from __future__ import annotations

from tilegen.runtime.attributes import FloatAttr, IntegerAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.types import FloatType, TileType
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook
from tilegen.runtime.verify.hooks.control_flow import type_list
from tilegen.runtime.verify.hooks.hints import rule_args
from tilegen.runtime.verify.view_types import quoted

_HALF_FLOATS = ("f16", "bf16")


def _identity_type(attr):
    if isinstance(attr, (IntegerAttr, FloatAttr)):
        return attr.type
    return getattr(attr, "type", None)


def _interchangeable(a, b) -> bool:
    return (
        isinstance(a, FloatType)
        and isinstance(b, FloatType)
        and {a.name, b.name} == set(_HALF_FLOATS)
    )


@hook("aggregate")
def _aggregate(op: Operation, ctx: VerifyContext) -> None:
    operands, results = op.operands, op.results
    if not operands:
        ctx.error("expect at least 1 operand")
        return
    if len(operands) != len(results):
        ctx.error("expect same number of operands and results")
        return
    identities = ctx.attr("identities")
    if identities is not None:
        values = getattr(identities, "values", ())
        if len(values) != len(operands):
            ctx.error(
                "expect identities to match the number of operands but got: "
                f"{len(operands)} operands and {len(values)} identities"
            )
            return
        for i, (v, ident) in enumerate(zip(operands, values)):
            if not isinstance(v.type, TileType):
                ctx.error(f"expected TileType for operand at index {i} but got: {quoted(v.type)}")
                return
            el, it = v.type.element, _identity_type(ident)
            if _interchangeable(el, it) or el == it:
                continue
            ctx.error(
                f"expect same type for operand at index: {i} and identity at index: {i} but "
                f"got: {quoted(el)} and {quoted(it) if it is not None else 'none'}"
            )
            return
    first = operands[0].type
    if not isinstance(first, TileType):
        ctx.error(f"expected TileType for first operand but got: {quoted(first)}")
        return
    dim = getattr(ctx.attr("dim"), "value", 0)
    if dim < 0 or dim >= first.rank:
        ctx.error(f"dimension ({dim}) is out of bound [0, {first.rank})")
        return
    if rule_args(ctx, "aggregate").get("same_result_types"):
        for i, (v, r) in enumerate(zip(operands, results)):
            if v.type != r.type:
                ctx.error(f"expect same type for operand at index: {i} and result at index: {i}")
                return


@hook("aggregate_infer")
def _aggregate_infer(op: Operation, ctx: VerifyContext) -> None:
    """InferTypeOpInterface: scan keeps operand types, reduce drops ``dim``."""
    keep = bool(rule_args(ctx, "aggregate").get("same_result_types"))
    dim = getattr(ctx.attr("dim"), "value", 0)
    inferred = []
    for v in op.operands:
        t = v.type
        if not isinstance(t, TileType):
            return
        if keep:
            inferred.append(t)
        else:
            shape = tuple(d for i, d in enumerate(t.shape) if i != dim)
            inferred.append(TileType(shape, t.element))
    declared = [r.type for r in op.results]
    if inferred != declared:
        ctx.error(
            f"inferred type(s) {type_list(inferred)} are incompatible with return type(s) of "
            f"operation {type_list(declared)}"
        )
        ctx.error("failed to infer returned types")


@hook("aggregate_body", regions=True)
def _aggregate_body(op: Operation, ctx: VerifyContext) -> None:
    n = len(op.operands)
    if not op.regions or not op.regions[0].blocks:
        return
    block = op.regions[0].blocks[0]
    if not block.ops:
        ctx.error("expect non-empty block")
        return
    args = [a.type for a in block.args]
    if len(args) != 2 * n:
        ctx.error(f"expect {2 * n} block arguments but got: {len(args)}")
        return
    for i, t in enumerate(args):
        if not (isinstance(t, TileType) and t.rank == 0):
            ctx.error(f"expect 0-rank tile type at index: {i} but got: {quoted(t)}")
            return
    for i in range(0, 2 * n - 1, 2):
        if args[i].element != args[i + 1].element:
            ctx.error(
                f"expect same element type for block argument at index: {i} and {i + 1} but "
                f"got: {quoted(args[i].element)} and {quoted(args[i + 1].element)}"
            )
            return
    for i, v in enumerate(op.operands):
        if isinstance(v.type, TileType) and v.type.element != args[2 * i].element:
            ctx.error(
                f"expect same type for operand at index: {i} and block argument at index: "
                f"{2 * i} but got: {quoted(v.type.element)} and {quoted(args[2 * i].element)}"
            )
            return
    term = block.ops[-1]
    if len(term.operands) != n:
        ctx.error(
            f"expect number of terminators operands ({len(term.operands)}) to match number of "
            f"operands ({n})"
        )
        return
    for i, (v, y) in enumerate(zip(op.operands, term.operands)):
        if not isinstance(v.type, TileType) or not isinstance(y.type, TileType):
            ctx.error(
                "expected TileType for operand and terminator types but got: "
                f"{quoted(v.type)} and {quoted(y.type)}"
            )
            return
        if v.type.element != y.type.element:
            ctx.error(
                f"expect same type for operand at index: {i} and terminator argument at index: "
                f"{i} but got: {quoted(v.type.element)} and {quoted(y.type.element)}"
            )
            return
    for inner in block.ops[:-1]:
        if inner.opdef is None or not inner.opdef.has_trait("Pure"):
            ctx.error_at(
                inner.loc,
                f"'{inner.name}' op only pure operations are allowed inside '{op.name}'",
                op_prefix=False,
            )
            return
