"""Custom verifier hooks: ``mmaf``, ``mmai``, ``mmaf_scaled`` shapes and element-type combinations.

Spec use: ``{custom: mma_shapes}`` (all three), then ``{custom: mmaf_types, combos: {IN: [ACC..]}}``
for mmaf and ``{custom: mmaf_scaled}`` for the block-scaled variant.
"""

from __future__ import annotations

from tilegen.runtime.ir import Operation
from tilegen.runtime.types import FloatType, TileType
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook
from tilegen.runtime.verify.hooks.hints import rule_args
from tilegen.runtime.verify.view_types import quoted


def _shape(t: TileType) -> str:
    return ", ".join(str(d) for d in t.shape)


def _mismatch(a: str, ta: TileType, da: int, b: str, tb: TileType, db: int, lead: str) -> str:
    return (
        f"{lead}shape error: dim {da} of {a} ({ta.shape[da]}) and dim {db} of {b} "
        f"({tb.shape[db]}) must match, but got {a} shape ({_shape(ta)}) and {b} shape "
        f"({_shape(tb)})"
    )


@hook("mma_shapes")
def _mma_shapes(op: Operation, ctx: VerifyContext) -> None:
    lhs, rhs, acc = ctx.type("lhs"), ctx.type("rhs"), ctx.type("acc")
    if not all(isinstance(t, TileType) for t in (lhs, rhs, acc)):
        return
    if lhs.rank not in (2, 3):
        ctx.error("operands must be 2D or 3D tiles")
        return
    b = int(lhs.rank == 3)
    checks = []
    if b:
        checks += [("lhs", lhs, 0, "rhs", rhs, 0, ""), ("lhs", lhs, 0, "acc", acc, 0, "")]
    # NVIDIA's M/N/K messages carry a stray leading space after "op".
    checks += [
        ("lhs", lhs, b + 1, "rhs", rhs, b, " "),
        ("lhs", lhs, b, "acc", acc, b, " "),
        ("rhs", rhs, b + 1, "acc", acc, b + 1, " "),
    ]
    for a, ta, da, bn, tb, db, lead in checks:
        if ta.shape[da] != tb.shape[db]:
            ctx.error(_mismatch(a, ta, da, bn, tb, db, lead))
            return


@hook("mmaf_types")
def _mmaf_types(op: Operation, ctx: VerifyContext) -> None:
    combos: dict = rule_args(ctx, "mmaf_types").get("combos", {})
    lhs, acc = ctx.type("lhs"), ctx.type("acc")
    if not isinstance(lhs, TileType) or not isinstance(acc, TileType):
        return
    name = getattr(lhs.element, "name", None)
    if name not in combos:
        ctx.error(f"unsupported input element type: {quoted(lhs.element)}")
        return
    allowed = combos[name]
    if getattr(acc.element, "name", None) not in allowed:
        listed = ", ".join(f"'{a}'" for a in allowed)
        ctx.error(
            f"unsupported combination of element types. Input type {quoted(lhs.element)} "
            f"expects accumulator/result type to be one of {{{listed}}}, but got "
            f"{quoted(acc.element)}"
        )


@hook("mmaf_scaled")
def _mmaf_scaled(op: Operation, ctx: VerifyContext) -> None:
    lhs, rhs = ctx.type("lhs"), ctx.type("rhs")
    ls, rs = ctx.type("lhs_scale"), ctx.type("rhs_scale")
    if not all(isinstance(t, TileType) for t in (lhs, rhs, ls, rs)):
        return
    b = int(lhs.rank == 3)
    row, col = b, b + 1
    checks = []
    if b:
        checks += [("lhs", lhs, 0, "lhs_scale", ls, 0), ("rhs", rhs, 0, "rhs_scale", rs, 0)]
    checks += [
        ("lhs", lhs, row, "lhs_scale", ls, row),
        ("rhs", rhs, col, "rhs_scale", rs, col),
        ("lhs_scale", ls, col, "rhs_scale", rs, row),
    ]
    for a, ta, da, bn, tb, db in checks:
        if ta.shape[da] != tb.shape[db]:
            ctx.error(_mismatch(a, ta, da, bn, tb, db, ""))
            return
    data = getattr(lhs.element, "name", "")
    scale = getattr(ls.element, "name", "")
    if scale in ("f8E4M3FN", "fnv8E5M3FNU") and data != "f4E2M1FN":  # fnv8E5M3FNU: 13.4
        ctx.error(
            f"unsupported combination of element types. Scale type {quoted(ls.element)} expects "
            f"lhs and rhs element types to be {quoted(FloatType('f4E2M1FN'))}, but got "
            f"{quoted(lhs.element)}"
        )
        return
    if scale == "f8E8M0FNU" and data not in ("f8E4M3FN", "f8E5M2", "f4E2M1FN"):
        listed = ", ".join(quoted(FloatType(n)) for n in ("f8E4M3FN", "f8E5M2", "f4E2M1FN"))
        ctx.error(
            f"unsupported combination of element types. Scale type {quoted(ls.element)} expects "
            f"lhs and rhs element types to be one of {{{listed}}}, but got {quoted(lhs.element)}"
        )
        return
    k, sk = lhs.shape[col], ls.shape[col]
    if sk == 0 or k % sk:
        ctx.error(
            f"shape error: dim {col} of lhs_scale ({sk}) must be a divisor of dim {col} of lhs "
            f"({k}), but got lhs_scale shape ({_shape(ls)}) and lhs shape ({_shape(lhs)})"
        )
        return
    factor = k // sk
    prefix = "shape error: "
    if data in ("f8E4M3FN", "f8E5M2") and factor != 32:
        ctx.error(
            f"{prefix}f8 element type requires block scale factor of lhs_scale and rhs_scale to "
            f"be 32, but got {factor}"
        )
    elif data == "f4E2M1FN" and scale == "f8E4M3FN" and factor != 16:
        ctx.error(
            f"{prefix}f4E2M1FN element type with f8E4M3FN scales requires block scale factor of "
            f"lhs_scale and rhs_scale to be 16, but got {factor}"
        )
    elif data == "f4E2M1FN" and scale in ("f8E8M0FNU", "fnv8E5M3FNU") and factor not in (16, 32):
        ctx.error(
            f"{prefix}f4E2M1FN element type with {scale} scales requires block scale factor "
            f"of lhs_scale and rhs_scale to be 16 or 32, but got {factor}"
        )
