"""Custom verifier hooks: memory ordering/scope rules and ``alloca``.

Spec use::

    verify:
    - {custom: memory_model, access: load, orderings: [weak, relaxed, acquire]}
    - {custom: atomic_memory_ordering, orderings: [relaxed, acquire, release, acq_rel]}
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import Attribute, EnumAttr, IntegerAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.opdef import lookup_enum
from tilegen.runtime.types import FLOAT_WIDTHS, FloatType, IntegerType, PointerType, TileType
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook
from tilegen.runtime.verify.hooks.hints import rule_args
from tilegen.runtime.verify.view_types import quoted


def enum_keyword(attr: Optional[Attribute], enum: str) -> Optional[str]:
    """The keyword of an enum attribute stored either as EnumAttr or as a plain i32."""
    if attr is None:
        return None
    value = attr.value if isinstance(attr, (EnumAttr, IntegerAttr)) else None
    if value is None:
        return None
    definition = lookup_enum(enum)
    kw = definition.keyword(value) if definition is not None else None
    return kw if kw is not None else str(value)


def _one_of(words: list[str]) -> str:
    """``a, b, or c`` (the wording of the load/store ordering diagnostics)."""
    if len(words) <= 2:
        return " or ".join(words)
    return ", ".join(words[:-1]) + ", or " + words[-1]


@hook("memory_model")
def _memory_model(op: Operation, ctx: VerifyContext) -> None:
    """Allowed orderings of a load/store; weak takes no scope, the others require one."""
    args = rule_args(ctx, "memory_model")
    access = args.get("access", "load")
    allowed = list(args.get("orderings", ()))
    ordering = enum_keyword(ctx.attr("memory_ordering_semantics"), "MemoryOrderingSemantics")
    if ordering is None:
        return
    if allowed and ordering not in allowed:
        ctx.error(f"expect one of: {_one_of(allowed)}, but got: {ordering}")
        return
    has_scope = ctx.attr("memory_scope") is not None
    if ordering == "weak":
        if has_scope:
            ctx.error(f"weak {access} must not have memory scope")
    elif not has_scope:
        ctx.error(f"memory scope is required for {ordering} {access}")


@hook("atomic_memory_ordering")
def _atomic_memory_ordering(op: Operation, ctx: VerifyContext) -> None:
    allowed = list(rule_args(ctx, "atomic_memory_ordering").get("orderings", ()))
    ordering = enum_keyword(ctx.attr("memory_ordering_semantics"), "MemoryOrderingSemantics")
    if ordering is not None and ordering not in allowed:
        ctx.error("memory ordering semantics must be one of: " + ", ".join(allowed))


def natural_size_bytes(t) -> int:
    """Byte size alloca alignment must cover (i1 counts one byte, sub-byte types zero)."""
    if isinstance(t, IntegerType):
        return 1 if t.width == 1 else t.width // 8
    if isinstance(t, FloatType):
        return FLOAT_WIDTHS[t.name] // 8
    return 0


@hook("alloca")
def _alloca(op: Operation, ctx: VerifyContext) -> None:
    align_attr = ctx.attr("alignment")
    alignment = getattr(align_attr, "value", 0)
    if not (alignment > 0 and alignment & (alignment - 1) == 0):
        ctx.error("'alignment' must be power of two")
        return
    result = ctx.type("result")
    ptr = result.element if isinstance(result, TileType) else None
    if not isinstance(ptr, PointerType):
        return
    size = natural_size_bytes(ptr.pointee)
    if alignment < size:
        ctx.error(
            f"'alignment' ({alignment}) must be at least the natural size ({size} bytes) for "
            f"element type {quoted(ptr.pointee)}"
        )
