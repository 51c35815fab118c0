"""Custom verifier hooks of the shape ops: checks that relate dimensions one by one."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.ir import Operation
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook


def _dims(shape) -> str:
    return ", ".join(str(d) for d in shape)


@hook("broadcast")
def _broadcast(op: Operation, ctx: VerifyContext) -> None:
    src, res = ctx.type("source"), ctx.type("result")
    if any(s != r and s != 1 for s, r in zip(src.shape, res.shape)):
        ctx.error(
            "expects the shape of source tile to be compatible with that of the result tile, "
            f"but got: {_dims(src.shape)} and {_dims(res.shape)}"
        )


@hook("cat")
def _cat(op: Operation, ctx: VerifyContext) -> None:
    lhs, rhs, res = ctx.type("lhs"), ctx.type("rhs"), ctx.type("result")
    dim = ctx.attr("dim").value
    rank = lhs.rank
    if not 0 <= dim < rank:
        ctx.error(f"expect dim to be [0, {rank}), but got: {dim}")
        return
    want = lhs.shape[dim] + rhs.shape[dim]
    if res.shape[dim] != want:
        ctx.error(f"invalid concat at position {dim}, expected: {want} but got: {res.shape[dim]}")
        return
    for i in range(rank):
        if i == dim:
            continue
        for name, other in (("rhs", rhs), ("result", res)):
            if lhs.shape[i] != other.shape[i]:
                ctx.error(
                    f"expect lhs and {name} shapes to match at non-concat position {i}, "
                    f"expected: {lhs.shape[i]} but got: {other.shape[i]}"
                )
                return


def _constant_index(value) -> Optional[int]:
    """The value of a scalar index produced by ``cuda_tile.constant``, else None."""
    owner = getattr(value, "op", None)
    if owner is None or owner.name != "cuda_tile.constant":
        return None
    attr = owner.attributes.get("value")
    values = getattr(attr, "values", ())
    return values[0] if len(values) == 1 and isinstance(values[0], int) else None


def _warn_index_bounds(ctx: VerifyContext, what: str, big, small) -> None:
    """NVIDIA warns (only) about constant indices outside ``[0, big/small)`` per dimension."""
    for i, v in enumerate(ctx.operands("indices")):
        c = _constant_index(v)
        if c is None or i >= len(big.shape):
            continue
        limit = big.shape[i] // small.shape[i] - 1
        if c < 0:
            ctx.warning(
                f"{what} index {i} has negative value {c}, which may cause undefined behavior",
                op_prefix=False,
            )
        elif c > limit:
            ctx.warning(
                f"{what} index {i} value {c} may be out of bounds (max valid index: {limit})",
                op_prefix=False,
            )


@hook("extract")
def _extract(op: Operation, ctx: VerifyContext) -> None:
    src, res = ctx.type("source"), ctx.type("result")
    if src.element != res.element:
        ctx.error("source and result element type do not match")
        return
    for i, (s, r) in enumerate(zip(src.shape, res.shape)):
        if s % r:
            ctx.error(
                f"source dimension {i} size ({s}) must be evenly divisible by result "
                f"dimension {i} size ({r})"
            )
            return
    n = len(ctx.operands("indices"))
    if n != src.rank:
        ctx.error(f"expected {src.rank} indices, but got {n}")
        return
    _warn_index_bounds(ctx, "extract", src, res)


@hook("insert")
def _insert(op: Operation, ctx: VerifyContext) -> None:
    src, res = ctx.type("source"), ctx.type("result")
    if src.rank != res.rank:
        ctx.error("source and result must have the same rank")
        return
    if src.element != res.element:
        ctx.error("source and result element type do not match")
        return
    for i, (s, r) in enumerate(zip(src.shape, res.shape)):
        if r % s:
            ctx.error(
                f"result dimension {i} size ({r}) must be evenly divisible by source "
                f"dimension {i} size ({s})"
            )
            return
    n = len(ctx.operands("indices"))
    if n != res.rank:
        ctx.error(f"expected {res.rank} indices, but got {n}")
        return
    _warn_index_bounds(ctx, "insert", res, src)


@hook("iota")
def _iota(op: Operation, ctx: VerifyContext) -> None:
    res = ctx.type("result")
    width = res.element.width
    if width < 64 and res.shape[0] > (1 << width):
        ctx.error(
            f"the number of elements {res.shape[0]} exceeds the maximum value of element type "
            f"'{res.element.name}'"
        )


@hook("permute")
def _permute(op: Operation, ctx: VerifyContext) -> None:
    src, res = ctx.type("source"), ctx.type("result")
    perm = list(ctx.attr("permutation").values)
    if src.rank < 2:
        ctx.error(f"expects at least rank 2, but got: {src.rank}")
        return
    if len(perm) != src.rank:
        ctx.error(
            f"expect permutation size ({len(perm)}) to equal the rank of the source ({src.rank})"
        )
        return
    if len(set(perm)) != len(perm):
        ctx.error("expect permutation elements to be unique")
        return
    for i, p in enumerate(perm):
        if not 0 <= p < src.rank:
            ctx.error(f"permutation element at index {i} ({p}) is out of bound [0, {src.rank})")
            return
    for i, p in enumerate(perm):
        if res.shape[i] != src.shape[p]:
            ctx.error(
                f"result shape invalid at index {i}, expected: {src.shape[p]}, "
                f"but got: {res.shape[i]}"
            )
            return
