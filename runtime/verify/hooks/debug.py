"""Custom verifier hooks: ``print_tko`` format strings and ``assume`` predicates."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import BoundedAttr, DivByAttr, SameElementsAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.types import IntegerType, PointerType, TensorViewType, TileType, Type
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook

#: Characters that end a printf conversion (``%S`` is CUDA's wide string).
_CONVERSION_ENDS = "diuoxXeEfFgGaAcsSpn%"
_DIV_BY_LIMIT = 1 << 62
_U64 = (1 << 64) - 1


def count_conversions(fmt: str) -> Optional[int]:
    """Number of printf conversions in ``fmt`` (``%%`` excluded); None if one is unterminated."""
    count, pos = 0, 0
    while pos < len(fmt):
        if fmt[pos] != "%":
            pos += 1
            continue
        end = next((i for i in range(pos + 1, len(fmt)) if fmt[i] in _CONVERSION_ENDS), None)
        if end is None:
            return None
        if end == pos + 1 and fmt[end] == "%":
            pos += 2
            continue
        count += 1
        pos += 1
    return count


@hook("print_tko")
def _print_tko(op: Operation, ctx: VerifyContext) -> None:
    fmt = getattr(ctx.attr("str"), "value", "")
    expected = count_conversions(fmt)
    if expected is None:
        ctx.error("found unterminated format expression")
        return
    got = len(ctx.operands("args"))
    if expected != got:
        ctx.error(f"incorrect number of operands: expected {expected}, found {got}")


# --------------------------------------------------------------------------- assume


def _div_by(p: DivByAttr, t: Type) -> Optional[str]:
    name = "'cuda_tile.div_by'"
    divisor = p.divisor & _U64
    if not (divisor > 0 and divisor & (divisor - 1) == 0):
        return f"{name} divisor must be a power of 2"
    if (p.every is None) != (p.along is None):
        return f"{name} 'every'/'along' must be used in combination"
    if divisor > _DIV_BY_LIMIT:
        return f"{name} divisor is too large"
    if isinstance(t, TensorViewType):
        if p.every is not None:
            return (
                f"{name} 'every'/'along' cannot be used if the constrained value is a tensor_view"
            )
        return None
    invalid = f"{name} is valid only for tile of integer/pointer or tensor_view values"
    if not isinstance(t, TileType):
        return invalid
    if t.rank == 0 and p.every is not None:
        return f"{name} 'every'/'along' cannot be used if the constrained value is a 0D tile"
    if not isinstance(t.element, (PointerType, IntegerType)):
        return invalid
    if p.every is None:
        return None
    if p.along < 0 or p.along >= t.rank:
        return f"{name} every_dim ({p.along}) must be >= 0 and < tile rank ({t.rank})"
    size = t.shape[p.along]
    if p.every < 0 or p.every > size:
        return (
            f"expected {name} every_dim to be within 0 and the size of the respective "
            f"dimension ({size})"
        )
    return None


def _same_elements(p: SameElementsAttr, t: Type) -> Optional[str]:
    name = "'cuda_tile.same_elements'"
    if not isinstance(t, TileType) or not isinstance(t.element, (PointerType, IntegerType)):
        return f"{name} is valid only for tile of integer/pointer values"
    if len(p.values) != t.rank:
        return (
            f"expected number of values in {name} ({len(p.values)}) to match rank of "
            f"constrained tile ({t.rank})"
        )
    for i, (v, size) in enumerate(zip(p.values, t.shape)):
        if v < 0 or v > size:
            return (
                f"expected {name} value {i} to be within 0 and the size of the respective "
                f"dimension ({size})"
            )
    return None


def _bounded(p: BoundedAttr, t: Type) -> Optional[str]:
    name = "'cuda_tile.bounded'"
    if not isinstance(t, TileType) or not isinstance(t.element, IntegerType):
        return f"{name} is valid only for tile of integer values"
    lo, hi = -(1 << (t.element.width - 1)), (1 << (t.element.width - 1)) - 1
    if p.lb is not None and not lo <= p.lb <= hi:
        return f"{name} expects lower bound to be within [{lo}, {hi}]"
    if p.ub is not None and not lo <= p.ub <= hi:
        return f"{name} expects upper bound to be within [{lo}, {hi}]"
    if p.lb is not None and p.ub is not None and p.lb > p.ub:
        return f"{name} expects lower bound to be less than or equal to upper bound"
    return None


@hook("assume")
def _assume(op: Operation, ctx: VerifyContext) -> None:
    pred = ctx.attr("predicate")
    t = ctx.type("result")
    check = {DivByAttr: _div_by, SameElementsAttr: _same_elements, BoundedAttr: _bounded}
    fn = check.get(type(pred))
    err = fn(pred, t) if fn is not None else None
    if err:
        ctx.error(err)
