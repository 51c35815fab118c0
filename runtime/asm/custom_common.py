"""Helpers shared by the custom op syntax hooks (``custom_*.py``)."""

from __future__ import annotations

from typing import Callable, Optional

from tilegen.runtime.attributes import Attribute, DenseArrayAttr, IntegerAttr
from tilegen.runtime.ir import Block, Operation, Region
from tilegen.runtime.opdef import lookup_enum
from tilegen.runtime.types import I32, Type

ParseFn = Callable[..., None]
PrintFn = Callable[..., None]

SEGMENTS = "operandSegmentSizes"


def type_text(t: Type) -> str:
    from tilegen.runtime.asm.type_syntax import format_type

    return format_type(t)


def parse_tile_type(p) -> Type:
    """A type in ``custom<CudaTileType>`` position: ``expected valid keyword`` when none starts."""
    t = p.parse_optional_type()
    if t is None:
        p.error("expected valid keyword")
    return t


def parse_type_list(p) -> list[Type]:
    """``T (, T)*`` with at least one type."""
    out = [parse_tile_type(p)]
    while p.parse_optional_punct(","):
        out.append(parse_tile_type(p))
    return out


def segments(*sizes: int) -> DenseArrayAttr:
    return DenseArrayAttr(I32, tuple(sizes))


def enum_keyword(enum_name: str, attr: Optional[Attribute]) -> Optional[str]:
    if attr is None:
        return None
    e = lookup_enum(enum_name)
    return e.keyword(attr.value) if e is not None else str(attr.value)


def i32_enum(enum_name: str, keyword: str) -> Optional[IntegerAttr]:
    e = lookup_enum(enum_name)
    v = e.value(keyword) if e is not None else None
    return None if v is None else IntegerAttr(v, I32)


def keywords(enum_name: str) -> list[str]:
    e = lookup_enum(enum_name)
    return e.keywords if e is not None else []


def ensure_terminator(region: Region, name: str, loc) -> None:
    """MLIR's SingleBlockImplicitTerminator: append ``name`` unless the block already ends in a
    terminator (an empty region gets one block)."""
    block = region.blocks[0] if region.blocks else region.append(Block())
    last = block.ops[-1] if block.ops else None
    if last is None or last.opdef is None or not last.opdef.has_trait("Terminator"):
        block.append(Operation(name, loc=loc))


def elides_terminator(region: Region, name: str) -> bool:
    """True when the region's last op is an operand-free ``name`` (printed implicitly)."""
    if not region.blocks or not region.blocks[-1].ops:
        return False
    last = region.blocks[-1].ops[-1]
    return last.name == name and not last.operands and not last.attributes


def print_attr_dict_plain(pr, op: Operation, elided) -> None:
    pr.print_optional_attr_dict(op, elided=tuple(elided) + (SEGMENTS,))


def print_attr_dict_kw(pr, op: Operation, elided) -> None:
    pr.print_optional_attr_dict_with_keyword(op, elided=tuple(elided) + (SEGMENTS,))
