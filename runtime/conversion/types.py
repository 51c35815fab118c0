"""The type converter: cuda_tile types -> nv_tileaa types (the spec's ``types:`` table)."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.types import (
    FunctionType,
    MemTokenType,
    NvMemRefType,
    NvPointerType,
    PointerType,
    TensorViewType,
    TileType,
    TILE_VIEW_TYPES,
    TokenType,
    Type,
)

#: address space of every cuda_tile pointer (global memory)
GLOBAL_SPACE = 1


class TypeConversionError(ValueError):
    """A type with no nv_tileaa form."""


def convert_element(t: Type) -> Type:
    if isinstance(t, PointerType):
        return NvPointerType(convert_element(t.pointee), GLOBAL_SPACE)
    return t


def convert_type(t: Type) -> Type:
    """The nv_tileaa form of ``t``; types already legal are returned unchanged."""
    if isinstance(t, TileType):
        element = convert_element(t.element)
        return element if not t.shape else TileType(t.shape, element)
    if isinstance(t, PointerType):
        return convert_element(t)
    if isinstance(t, TokenType):
        return MemTokenType()
    if isinstance(t, TensorViewType):
        return NvMemRefType(t.shape, convert_element(t.element), GLOBAL_SPACE, t.strides)
    if isinstance(t, TILE_VIEW_TYPES):
        return convert_type(t.tensor_view)
    if isinstance(t, FunctionType):
        return FunctionType(
            tuple(convert_type(x) for x in t.inputs), tuple(convert_type(x) for x in t.results)
        )
    return t


def convert_types(types) -> list[Type]:
    return [convert_type(t) for t in types]


def is_legal_type(t: Type) -> bool:
    """True when ``t`` needs no conversion (ub.poison's dynamic legality)."""
    return convert_type(t) == t


def tile_shape_of_view(t: Type) -> Optional[tuple[int, ...]]:
    """The tile shape a partition / strided / gather-scatter view loads and stores."""
    return tuple(t.tile_shape) if isinstance(t, TILE_VIEW_TYPES) else None
