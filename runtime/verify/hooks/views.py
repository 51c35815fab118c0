"""Custom verifier hooks: view construction, view shape queries and view loads/stores."""

from __future__ import annotations

from tilegen.runtime.ir import Operation
from tilegen.runtime.types import DYNAMIC, PointerType, TensorViewType, TileType
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook
from tilegen.runtime.verify.hooks.hints import rule_args
from tilegen.runtime.verify.view_types import quoted, verify_view_indices, view_index_rank


@hook("make_tensor_view")
def _make_tensor_view(op: Operation, ctx: VerifyContext) -> None:
    base = ctx.operand("base").type
    result = ctx.result("result").type
    if not isinstance(base, TileType) or not isinstance(result, TensorViewType):
        return  # the type constraints already reported this
    pointee = base.element.pointee if isinstance(base.element, PointerType) else base.element
    if result.element != pointee:
        ctx.error(
            f"expected pointer to {quoted(result.element)} to build tensor_view of this type, "
            f"got {quoted(pointee)}"
        )
        return
    if _ptr_attr_mismatch(ctx, getattr(base.element, "ptr_attr", None), result.ptr_attr):
        return
    for what, dims, group in (
        ("shape", result.shape, "dynamicShape"),
        ("stride", result.strides, "dynamicStrides"),
    ):
        expected = sum(1 for d in dims if d == DYNAMIC)
        got = len(ctx.operands(group))
        if expected != got:
            ctx.error(f"expected {expected} dynamic {what} operands, got {got}")
            return
    common = None
    for what, group in (("shape", "dynamicShape"), ("stride", "dynamicStrides")):
        values = ctx.operands(group)
        if values and common is None:
            common = values[0].type
        for i, v in enumerate(values):
            if v.type != common:
                ctx.error(
                    f"expected dynamic {what} index {i} to be of the same type as the other "
                    f"dynamic values ({quoted(common)}), got {quoted(v.type)}"
                )
                return


def _ptr_attr_mismatch(ctx: VerifyContext, base: str | None, result: str | None) -> bool:
    """13.4: the tensor_view carries exactly the base pointer's ptr_attr (tileirdisasm wording)."""
    if base == result:
        return False
    spell = "#cuda_tile.ptr_attr<{}>".format
    if result is None:
        ctx.error(f"tensor_view must preserve ptr_attr from base pointer ({spell(base)})")
    elif base is None:
        ctx.error("pointer base without ptr_attr cannot produce tensor_view with ptr_attr")
    else:
        ctx.error(
            f"ptr_attr mismatch between base pointer ({spell(base)}) and result tensor_view "
            f"({spell(result)})"
        )
    return True


def ptr_attr_of(t) -> str | None:
    """The PtrAttr keyword a pointer tile, tensor_view or tile view carries (13.4), else None."""
    if isinstance(t, TileType):
        t = t.element
    t = getattr(t, "tensor_view", t)
    return getattr(t, "ptr_attr", None)


@hook("no_multicast")
def _no_multicast(op: Operation, ctx: VerifyContext) -> None:
    """``{custom: no_multicast, operand: NAME, message: TEXT}``: the operand's pointer / view must
    not be ``ptr_attr<multicast>`` (13.5; tileirdisasm's per-op wording in ``message``)."""
    args = rule_args(ctx, "no_multicast")
    if ptr_attr_of(ctx.type(args["operand"])) == "multicast":
        ctx.error(args["message"])


@hook("multicast_required")
def _multicast_required(op: Operation, ctx: VerifyContext) -> None:
    """``{custom: multicast_required, operand: NAME}``: multimem ops (13.5) need a view of a
    ``ptr_attr<multicast>`` pointer."""
    kw = ptr_attr_of(ctx.type(rule_args(ctx, "multicast_required")["operand"]))
    if kw != "multicast":
        ctx.error(f"expected a multicast pointer, but got {kw or 'none'}")


@hook("make_tile_view")
def _make_tile_view(op: Operation, ctx: VerifyContext) -> None:
    """make_partition_view / make_strided_view / make_gather_scatter_view."""
    source = ctx.operand("tensor_view").type
    expected = getattr(ctx.result("result").type, "tensor_view", None)
    if expected is not None and source != expected:
        ctx.error(
            f"expected the type of the provided tensor_view value ({quoted(source)}) to be the "
            f"same as the view's tensor_view type ({quoted(expected)})"
        )


@hook("get_tensor_shape")
def _get_tensor_shape(op: Operation, ctx: VerifyContext) -> None:
    src = ctx.operand("src").type
    if isinstance(src, TensorViewType) and len(op.results) != src.rank:
        ctx.error(f"expected {src.rank} results due to tensor rank, but got {len(op.results)}")


@hook("get_index_space_shape")
def _get_index_space_shape(op: Operation, ctx: VerifyContext) -> None:
    rank = view_index_rank(ctx.operand("src").type)
    if rank is not None and len(op.results) != rank:
        ctx.error(
            f"expected {rank} results due to view index space rank, but got {len(op.results)}"
        )


@hook("view_load_store")
def _view_load_store(op: Operation, ctx: VerifyContext) -> None:
    """load_view_tko / store_view_tko: index count, tile type, the view's index rules, inbounds."""
    view = ctx.operand("view").type
    rank = view_index_rank(view)
    if rank is None:
        return
    indices = [v.type for v in ctx.operands("index")]
    if len(indices) != rank:
        ctx.error(f"expected {rank} index operands (based on view type), got {len(indices)}")
        return
    tile = ctx.type("tile")
    expected = view.tile_type
    if tile != expected:
        ctx.error(
            f"expected tile type to be {quoted(expected)} (based on view type), got {quoted(tile)}"
        )
        return
    err = verify_view_indices(view, indices)
    if err:
        ctx.error(err)
        return
    inbounds = ctx.attr("inbounds")
    if inbounds is not None and len(getattr(inbounds, "values", ())) != len(indices):
        ctx.error(
            f"inbounds size ({len(inbounds.values)}) must match the number of index dimensions "
            f"({len(indices)})"
        )
