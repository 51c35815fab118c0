"""Custom verifier hooks: debug-info consistency of functions and modules (types_attrs.md sec. 4).

``function_debuginfo`` (a function's own location), ``function_body_debuginfo`` (region phase:
every nested op's scope against the function's) and ``module_debuginfo`` (module-level non-function
ops must not carry a scope).
"""

from __future__ import annotations

from typing import Iterator, Optional

from tilegen.runtime.attributes import (
    Attribute,
    CallSiteLoc,
    DILexicalBlockAttr,
    DILocAttr,
    DISubprogramAttr,
    FusedLoc,
    Location,
    NameLoc,
)
from tilegen.runtime.ir import Operation
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook


def di_loc(loc) -> Optional[DILocAttr]:
    """The DILoc a location carries (through call-site callers, fused parts and names)."""
    if isinstance(loc, DILocAttr):
        return loc
    if isinstance(loc, CallSiteLoc):
        return di_loc(loc.caller)
    if isinstance(loc, FusedLoc):
        for sub in loc.locations:
            found = di_loc(sub)
            if found is not None:
                return found
        return None
    if isinstance(loc, NameLoc):
        return di_loc(loc.child)
    return None


def subprogram_of(scope) -> Optional[DISubprogramAttr]:
    if isinstance(scope, DISubprogramAttr):
        return scope
    if isinstance(scope, DILexicalBlockAttr):
        return subprogram_of(scope.scope)
    return None


def show(attr: Attribute) -> str:
    """An attribute or location as diagnostics print it (full form, no aliases)."""
    try:
        from tilegen.runtime.asm.printer import OpPrinter

        printer = OpPrinter()
        if isinstance(attr, Location) and not isinstance(attr, DILocAttr):
            return printer.format_location(attr)
        return printer.format_attribute(attr)
    except Exception:  # the printer is optional for the verifier
        return _fallback(attr)


def _fallback(attr: Attribute) -> str:
    if isinstance(attr, DISubprogramAttr):
        return (
            f'#cuda_tile.di_subprogram<file = #cuda_tile.di_file<"{attr.file.name}" in '
            f'"{attr.file.directory}">, line = {attr.line}, name = "{attr.name}", '
            f'linkageName = "{attr.linkage_name}">'
        )
    if isinstance(attr, DILexicalBlockAttr):
        return f"#cuda_tile.di_lexical_block<scope = {_fallback(attr.scope)}, line = {attr.line}>"
    if isinstance(attr, DILocAttr):
        src = attr.source
        return (
            f'#cuda_tile.di_loc<loc("{src.file}":{src.line}:{src.col}) in {_fallback(attr.scope)}>'
        )
    return f"loc({attr})"


def _symbol(fn: Operation) -> str:
    return getattr(fn.attributes.get("sym_name"), "value", "")


@hook("function_debuginfo")
def _function_debuginfo(op: Operation, ctx: VerifyContext) -> None:
    if isinstance(op.loc, CallSiteLoc):
        ctx.error(
            f"invalid function debug info location: {show(op.loc)}. Function location must not "
            "be a CallSiteLoc."
        )
        return
    loc = di_loc(op.loc)
    if loc is None:
        return
    sp = loc.scope
    if not isinstance(sp, DISubprogramAttr):
        ctx.error(
            f"invalid function debug info scope: {show(sp)}. Function location must have "
            "cuda_tile.di_subprogram debug info scope."
        )
        return
    if sp.linkage_name != _symbol(op):
        ctx.error(
            f'invalid function debug info scope: {show(sp)}. Function name "{_symbol(op)}" does '
            f'not match subprogram scope linkage name "{sp.linkage_name}".'
        )


def _post_order(op: Operation) -> Iterator[Operation]:
    for region in op.regions:
        for block in region.blocks:
            for child in block.ops:
                yield from _post_order(child)
    yield op


@hook("function_body_debuginfo", regions=True)
def _function_body_debuginfo(op: Operation, ctx: VerifyContext) -> None:
    loc = di_loc(op.loc)
    fn_sp = subprogram_of(loc.scope) if loc is not None else None
    for inner in _post_order(op):
        inner_loc = di_loc(inner.loc)
        sp = subprogram_of(inner_loc.scope) if inner_loc is not None else None
        if sp is None:
            continue
        if fn_sp is None:
            ctx.error_at(
                inner.loc,
                f"'{inner.name}' op invalid operation debug info scope: {show(sp)}. Operation "
                "has debug info scope, but function debug info scope is undefined.",
                op_prefix=False,
            )
            return
        if sp != fn_sp:
            ctx.error_at(
                inner.loc,
                f"invalid operation debug info scope: {show(sp)}. Operation debug info scope "
                f"does not match function debug info scope: {show(fn_sp)}.",
                op_prefix=False,
            )
            return


@hook("module_debuginfo")
def _module_debuginfo(op: Operation, ctx: VerifyContext) -> None:
    for region in op.regions:
        for block in region.blocks:
            for child in block.ops:
                if child.opdef is not None and child.opdef.has_trait("FunctionOpInterface"):
                    continue
                loc = di_loc(child.loc)
                if loc is not None:
                    ctx.error_at(
                        child.loc,
                        f"'{child.name}' op invalid operation debug info scope: {show(loc)}. "
                        "Global variables must not have scope.",
                        op_prefix=False,
                    )
                    return
