"""Custom verifier hooks: ``if``, ``for``, ``loop``, ``break``, ``continue``, ``return``."""

from __future__ import annotations

from typing import Optional, Sequence

from tilegen.runtime.ir import Operation, Region
from tilegen.runtime.types import TILE_VIEW_TYPES, FunctionType, TensorViewType, Type
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook
from tilegen.runtime.verify.view_types import quoted


def type_list(types: Sequence[Type]) -> str:
    """A type range as MLIR streams it into a diagnostic: quoted, comma separated."""
    return ", ".join(quoted(t) for t in types)


def _types(values) -> list[Type]:
    return [v.type for v in values]


def _unsupported_carried(t: Type) -> Optional[str]:
    if isinstance(t, TensorViewType):
        return "a tensor_view"
    if isinstance(t, TILE_VIEW_TYPES):
        return "a tile view"
    return None


# --------------------------------------------------------------------------- if


def _yield_types(region: Region) -> Optional[list[Type]]:
    """Operand types of the region's yield terminator (None when it ends otherwise)."""
    if not region.blocks or not region.blocks[0].ops:
        return None
    last = region.blocks[0].ops[-1]
    if last.name != "cuda_tile.yield":
        return None
    return _types(last.operands)


@hook("if")
def _if(op: Operation, ctx: VerifyContext) -> None:
    if not op.regions:
        ctx.error("must define then branch")
        return
    result_types = _types(op.results)
    for i, t in enumerate(result_types):
        what = _unsupported_carried(t)
        if what:
            ctx.error(f"result type {i} is {what}, which is not supported")
            return
    then_region = op.regions[0]
    if then_region.empty:
        ctx.error("must define then branch")
        return
    if _check_branch(ctx, then_region, "then", result_types):
        return
    else_region = op.regions[1] if len(op.regions) > 1 else None
    if else_region is None or else_region.empty:
        if result_types:
            ctx.error("has non-empty return type, must define else branch")
        return
    _check_branch(ctx, else_region, "else", result_types)


def _check_branch(ctx: VerifyContext, region: Region, name: str, result_types: list) -> bool:
    yielded = _yield_types(region)
    if yielded is None:
        return False
    if result_types and not yielded:
        ctx.error(
            f"has return type of {type_list(result_types)} but {name} branch does not yield "
            "anything"
        )
    elif not result_types and yielded:
        ctx.error(f"does not return a value, but {name} branch yields {type_list(yielded)}")
    elif yielded != result_types:
        ctx.error(
            f"type does not match yield type, {name} branch yields {type_list(yielded)} but op "
            f"result type is {type_list(result_types)}"
        )
    else:
        return False
    return True


# --------------------------------------------------------------------------- for / loop


def _verify_iter_values(ctx: VerifyContext, inits: list, iter_args: list) -> None:
    if len(iter_args) != len(inits):
        ctx.error(
            "mismatch in number of region iterator values and loop iterator inits: "
            f"{len(iter_args)} vs {len(inits)}"
        )
        return
    for i, (init, arg) in enumerate(zip(inits, iter_args)):
        what = _unsupported_carried(arg.type)
        if what:
            ctx.error(f"loop-carried value {i} is {what}, which is not supported")
            return
        if init.type != arg.type:
            ctx.error(
                f"init value {i} and region iter_value {i} have different type: "
                f"{quoted(init.type)} != {quoted(arg.type)}"
            )
            return
    for i, res in enumerate(ctx.op.results):
        what = _unsupported_carried(res.type)
        if what:
            ctx.error(f"result type {i} is {what}, which is not supported")
            return


def _body_args(op: Operation) -> list:
    if not op.regions or not op.regions[0].blocks:
        return []
    return list(op.regions[0].blocks[0].args)


@hook("for_regions", regions=True)
def _for_regions(op: Operation, ctx: VerifyContext) -> None:
    args = _body_args(op)
    if not args:
        ctx.error("expected at least one block argument for induction variable")
        return
    lower = ctx.operand("lowerBound")
    if lower is not None and args[0].type != lower.type:
        ctx.error(
            "expected induction variable to be same type as bounds and step: "
            f"{quoted(args[0].type)} vs {quoted(lower.type)}"
        )
        return
    _verify_iter_values(ctx, ctx.operands("initValues"), args[1:])


@hook("loop_regions", regions=True)
def _loop_regions(op: Operation, ctx: VerifyContext) -> None:
    _verify_iter_values(ctx, ctx.operands("initValues"), _body_args(op))


# --------------------------------------------------------------------------- break / continue


def _enclosing_loop(ctx: VerifyContext, loops: tuple[str, ...]) -> Optional[Operation]:
    """The loop an early exit belongs to, reached only through ``if`` ops; else report."""
    cur = ctx.op
    while True:
        parent = cur.parent_op
        if parent is None:
            return None
        if parent.name in loops:
            return parent
        if parent.name != "cuda_tile.if":
            chain = "', '".join(loops + ("cuda_tile.if",))
            diag = ctx.error(f"can only be nested within a ancestor chain of '{chain}' operations")
            diag.attach_note("see unexpected ancestor operation", parent.loc)
            return None
        cur = parent


@hook("break")
def _break(op: Operation, ctx: VerifyContext) -> None:
    loop = _enclosing_loop(ctx, ("cuda_tile.loop",))
    if loop is None:
        return
    mine, expected = _types(op.operands), _types(loop.results)
    if mine != expected:
        ctx.error(
            "operand types must correspond to the parent loop result types: "
            f"({type_list(mine)}) vs ({type_list(expected)})"
        )


@hook("continue")
def _continue(op: Operation, ctx: VerifyContext) -> None:
    loop = _enclosing_loop(ctx, ("cuda_tile.for", "cuda_tile.loop"))
    if loop is None:
        return
    mine = _types(op.operands)
    if loop.name == "cuda_tile.loop":
        expected, what = _types(loop.operands), ("loop", "iter_values")
    else:
        expected, what = _types(loop.results), ("for", "return types")
    if mine != expected:
        ctx.error_at(  # NVIDIA reports this one without the op prefix
            op.loc,
            f"`{what[0]}` is missing a valid terminator. `continue` op should have operand "
            f"types that match the parent loop {what[1]}: ({type_list(expected)}), but found: "
            f"({type_list(mine)})",
            op_prefix=False,
        )


# --------------------------------------------------------------------------- return


def _function_type(fn: Operation) -> Optional[FunctionType]:
    attr = fn.attributes.get("function_type")
    t = getattr(attr, "value", None)
    return t if isinstance(t, FunctionType) else None


def _symbol(fn: Operation) -> str:
    return getattr(fn.attributes.get("sym_name"), "value", "")


@hook("return")
def _return(op: Operation, ctx: VerifyContext) -> None:
    parent = op.parent_op
    while parent is not None and parent.name == "cuda_tile.if":
        parent = parent.parent_op
    n = len(op.operands)
    if parent is not None and parent.name in ("cuda_tile.entry", "cuda_tile.testing$func"):
        ftype = _function_type(parent)
        results = list(ftype.results) if ftype else []
        if n != len(results):
            ctx.error(
                f"has {n} operands, but enclosing function (@{_symbol(parent)}) returns "
                f"{len(results)}"
            )
            return
        if parent.name == "cuda_tile.entry":
            if n:
                ctx.error(f"has {n} operands, but entry function must return 0 operands")
            return
        for i, (v, t) in enumerate(zip(op.operands, results)):
            if v.type != t:
                ctx.error_at(
                    op.loc,
                    f"type of return operand {i} ({quoted(v.type)}) doesn't match function "
                    f"result type ({quoted(t)}) in function @{_symbol(parent)}",
                    op_prefix=False,
                )
                return
        return
    ctx.error(
        "must be used within a cuda_tile.testing$func, cuda_tile.entry, or cuda_tile.if operation"
    )
