"""Custom verifier hooks: ``entry``, ``global`` and ``get_global``."""

from __future__ import annotations

from tilegen.runtime.ir import Operation, SymbolTable, nearest_symbol_table
from tilegen.runtime.types import FunctionType, PointerType, TileType
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook
from tilegen.runtime.verify.view_types import quoted


@hook("entry_signature")
def _entry_signature(op: Operation, ctx: VerifyContext) -> None:
    ftype = getattr(ctx.attr("function_type"), "value", None)
    if not isinstance(ftype, FunctionType):
        return
    if ftype.results:
        ctx.error("entry op must not return values")
        return
    for t in ftype.inputs:
        if isinstance(t, TileType) and t.rank != 0:
            ctx.error("entry op must have scalar types (rank 0 !cuda_tile.tile)")
            return


@hook("global")
def _global(op: Operation, ctx: VerifyContext) -> None:
    value_type = getattr(ctx.attr("value"), "type", None)
    if isinstance(value_type, TileType) and value_type.rank != 1:
        ctx.error("type must have rank 1")


@hook("get_global")
def _get_global(op: Operation, ctx: VerifyContext) -> None:
    ref = ctx.attr("name")
    name = getattr(ref, "root", None) or getattr(ref, "value", "")
    table_op = nearest_symbol_table(op)
    target = SymbolTable(table_op).lookup(name) if table_op is not None else None
    if target is None or target.name != "cuda_tile.global":
        ctx.error(f"'{name}' does not reference a valid global")
        return
    global_type = getattr(target.attributes.get("value"), "type", None)
    result = ctx.type("result")
    if not isinstance(global_type, TileType) or not isinstance(result, TileType):
        return
    ptr = result.element
    if isinstance(ptr, PointerType) and ptr.pointee != global_type.element:
        ctx.error(
            f"pointee type of result type {quoted(ptr)} does not match type "
            f"{quoted(global_type.element)} of the global @{name}"
        )


@hook("symbol_table", regions=True)
def _symbol_table(op: Operation, ctx: VerifyContext) -> None:
    """SymbolTable: every symbol defined directly in the body is unique."""
    seen: dict[str, Operation] = {}
    for region in op.regions:
        for block in region.blocks:
            for child in block.ops:
                name = getattr(child.attributes.get("sym_name"), "value", None)
                if not isinstance(name, str):
                    continue
                if name in seen:
                    d = ctx.error_at(
                        child.loc, f"redefinition of symbol named '{name}'", op_prefix=False
                    )
                    d.attach_note("see existing symbol definition here", seen[name].loc)
                    return
                seen[name] = child
