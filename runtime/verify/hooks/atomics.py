"""Custom verifier hooks: ``atomic_cas_tko``, ``atomic_rmw_tko``, ``atomic_red_view_tko``.

Spec use: ``{custom: atomic_pointee, value: arg, mask_message: ...}`` checks that the pointer tile's
pointee equals the value's element type and that an optional mask matches the value's shape;
``{custom: atomic_rmw_mode, value: arg}`` checks the RMW mode against the element type.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.ir import Operation
from tilegen.runtime.types import (
    FloatType,
    GatherScatterViewType,
    IntegerType,
    PartitionViewType,
    PointerType,
    StridedViewType,
    TileType,
    Type,
)
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook
from tilegen.runtime.verify.hooks.hints import rule_args
from tilegen.runtime.verify.hooks.memory import enum_keyword
from tilegen.runtime.verify.view_types import quoted

_INT_MODES = ("and", "or", "xor", "add", "max", "min", "umax", "umin")


def _shape_text(shape) -> str:
    return ", ".join(str(d) for d in shape)


def rmw_mode_error(mode: Optional[str], element: Type) -> Optional[str]:
    """Whether RMW ``mode`` can operate on ``element`` (NVIDIA's verifyAtomicRMWMode)."""
    if mode in _INT_MODES:
        if not (isinstance(element, IntegerType) and element.width in (32, 64)):
            return f"'{mode}' works only with integers i32 and i64"
    elif mode == "addf":
        if not (isinstance(element, FloatType) and element.name in ("f16", "bf16", "f32", "f64")):
            return f"'{mode}' works only with floats f16, bf16, f32, and f64"
    elif mode == "xchg":
        width = element.width if isinstance(element, (IntegerType, FloatType)) else None
        if width not in (32, 64):
            return f"'{mode}' works only with integers or float of 32 or 64 bitwidth"
    return None


@hook("atomic_pointee")
def _atomic_pointee(op: Operation, ctx: VerifyContext) -> None:
    args = rule_args(ctx, "atomic_pointee")
    name = args.get("value", "val")
    ptrs, value = ctx.type("pointers"), ctx.type(name)
    if not isinstance(ptrs, TileType) or not isinstance(value, TileType):
        return
    pointee = ptrs.element.pointee if isinstance(ptrs.element, PointerType) else ptrs.element
    if pointee != value.element:
        ctx.error(
            f"expected pointee type ({quoted(pointee)}) to match element type of '{name}' "
            f"({quoted(value.element)})"
        )
        return
    if args.get("width_32_64"):
        el = value.element
        width = el.width if isinstance(el, (IntegerType, FloatType)) else None
        if width not in (32, 64):
            ctx.error("expect only float or integer types with 32 or 64 bit")
            return
    mask = ctx.type("mask")
    if isinstance(mask, TileType) and mask.shape != value.shape:
        ctx.error(args["mask_message"])


@hook("atomic_rmw_mode")
def _atomic_rmw_mode(op: Operation, ctx: VerifyContext) -> None:
    value = ctx.type(rule_args(ctx, "atomic_rmw_mode").get("value", "arg"))
    mode = enum_keyword(ctx.attr("mode"), "AtomicRMWMode")
    if isinstance(value, TileType):
        err = rmw_mode_error(mode, value.element)
        if err:
            ctx.error(err)


@hook("atomic_red_view")
def _atomic_red_view(op: Operation, ctx: VerifyContext) -> None:
    view = ctx.type("view")
    if isinstance(view, GatherScatterViewType):
        ctx.error("gather_scatter_view is not supported; use partition_view instead")
        return
    if not isinstance(view, (PartitionViewType, StridedViewType)):
        ctx.error("view operand must be a TileView type")
        return
    if view.padding_value is not None:
        ctx.error("views with padding_value are not supported for atomic reductions")
        return
    value = ctx.type("value")
    if not isinstance(value, TileType):
        return
    tile = view.tile_type
    if tile.element != value.element:
        ctx.error(
            f"view element type ({quoted(tile.element)}) must match value element type "
            f"({quoted(value.element)})"
        )
        return
    if tile.shape != value.shape:
        ctx.error(
            f"view tile shape {_shape_text(tile.shape)} must match value shape "
            f"{_shape_text(value.shape)} for element-wise atomic operations"
        )
        return
    mode = enum_keyword(ctx.attr("mode"), "AtomicRMWMode")
    if mode == "xchg":
        ctx.error("atomic_red_view_tko op cannot use xchg operation")
        return
    err = rmw_mode_error(mode, value.element)
    if err:
        ctx.error(err)
        return
    if enum_keyword(ctx.attr("memory_ordering_semantics"), "MemoryOrderingSemantics") != "relaxed":
        ctx.error("only 'relaxed' memory ordering is supported for view-based atomic reductions")
        return
    if enum_keyword(ctx.attr("memory_scope"), "MemoryScope") == "sys":
        ctx.error(
            "memory scope 'sys' is not supported for view-based atomic reductions; use "
            "'tl_blk' or 'device' for TMA compatibility"
        )
        return
    indices = ctx.operands("index")
    rank = tile.rank
    if len(indices) != rank:
        ctx.error(
            f"expected {rank} index operand(s) for view with tile rank {rank}, got {len(indices)}"
        )
        return
    for i, idx in enumerate(indices):
        t = idx.type
        if isinstance(t, TileType) and t.rank != 0:
            ctx.error(
                f"index operand {i} must be a scalar tile (rank 0), got shape {_shape_text(t.shape)}"
            )
            return
        if isinstance(t, TileType) and not isinstance(t.element, IntegerType):
            ctx.error(
                f"index operand {i} must be a scalar integer tile, got element type "
                f"{quoted(t.element)}"
            )
            return
