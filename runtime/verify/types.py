"""Dialect type verification (types_attrs.md section 2) and the type text used in diagnostics.

:func:`verify_type` returns the message for an invalid cuda_tile type, or None; the parser calls
it right after building a type and reports the message at the type's location. View types
(partition/strided/gather_scatter) delegate to ``runtime/verify/view_types.py`` when present.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.types import (
    DYNAMIC,
    FloatType,
    FunctionType,
    GatherScatterViewType,
    IndexType,
    IntegerType,
    NoneType,
    NvPointerType,
    OpaqueType,
    PartitionViewType,
    PointerType,
    StridedViewType,
    TensorViewType,
    TileType,
    TokenType,
    Type,
)

#: Tile element count limit (``maxTileNumElements``).
MAX_TILE_ELEMENTS = 1 << 24

#: ODS lists used by the parameter constraints of ptr/tile (``failed to verify 'pointeeType': ...``).
NUMBER_TYPE_LIST = (
    "f16 or bf16 or f32 or tf32 or f64 or f8E4M3FN or f8E5M2 or f8E8M0FNU or f4E2M1FN "
    "or i1 or i8 or i16 or i32 or i64"
)
_INT_WIDTHS = (1, 8, 16, 32, 64)


def is_number_type(t: Type) -> bool:
    """CudaTile_NumberType: AnyInt (no i4) or any cuda_tile float."""
    return (isinstance(t, IntegerType) and t.width in _INT_WIDTHS) or isinstance(t, FloatType)


def is_tile_element_type(t: Type) -> bool:
    """CudaTile_TileElementType: a number type, i4 or a pointer."""
    if isinstance(t, NvPointerType):  # nv_tileaa tiles of pointers (tile<8x!nv_tileaa.ptr<..>>)
        return True
    return is_number_type(t) or t == IntegerType(4) or isinstance(t, PointerType)


def verify_type(t: Type, explicit_dim_map: bool = False) -> Optional[str]:
    """The diagnostic for an invalid cuda_tile type (checked shallowly: nested types were
    verified when they were built), or None when ``t`` is valid. ``explicit_dim_map``: an empty
    ``dim_map`` means no mapping at all (bytecode stores it explicitly), not the identity."""
    if isinstance(t, PointerType):
        if not is_number_type(t.pointee):
            return f"failed to verify 'pointeeType': {NUMBER_TYPE_LIST}"
        return None
    if isinstance(t, TileType):
        if not is_tile_element_type(t.element):
            return f"failed to verify 'elementType': {NUMBER_TYPE_LIST} or Pointer type or i4"
        return verify_tile_shape(t.shape, t.element)
    if isinstance(t, TensorViewType):
        if not is_number_type(t.element):  # ODS parameter constraint, before verify()
            return f"failed to verify 'elementType': {NUMBER_TYPE_LIST}"
        return verify_tensor_view(t)
    if isinstance(t, (PartitionViewType, StridedViewType, GatherScatterViewType)):
        try:
            from tilegen.runtime.verify import view_types  # written by the views owner
        except ImportError:
            return None
        return view_types.verify_view_type(t, explicit_dim_map)
    return None


def verify_tile_shape(shape: tuple[int, ...], element: Type) -> Optional[str]:
    """The tile verifier of types_attrs.md 2.2 (also run for the tile implied by every view)."""
    if isinstance(element, FloatType) and element.name == "f4E2M1FN":
        if not any(d % 2 == 0 for d in shape):
            return "F4E2M1FN tiles must have an even number of elements"
    dims = ", ".join(str(d) for d in shape)
    if any(d <= 0 for d in shape):
        return f"all dimensions must be positive constants, got {dims}"
    if any(d & (d - 1) for d in shape):
        return f"all dimensions must be powers of two, got {dims}"
    n = 1
    for d in shape:
        n *= d
        if n > MAX_TILE_ELEMENTS:
            return f"tile would exceed the maximum of {MAX_TILE_ELEMENTS} elements"
    return None


def _dims(values: tuple[int, ...]) -> str:
    return "[" + ", ".join("?" if v == DYNAMIC else str(v) for v in values) + "]"


def verify_tensor_view(t: TensorViewType) -> Optional[str]:
    if len(t.shape) != len(t.strides):
        return (
            "expected shape and stride to be of same rank but got shape of rank "
            f"{len(t.shape)} and stride of rank {len(t.strides)}"
        )
    if any(d != DYNAMIC and d <= 0 for d in t.shape):
        return f"dimensions must have strictly positive constant sizes but got {_dims(t.shape)}"
    if any(s != DYNAMIC and s <= 0 for s in t.strides):
        return f"dimensions must have strictly positive constant strides but got {_dims(t.strides)}"
    return None


# --------------------------------------------------------------------------- type text


def format_type(t: Type) -> str:
    """The long (generic) form MLIR prints in diagnostics: ``!cuda_tile.tile<2xi32>``."""
    try:
        from tilegen.runtime.asm.type_syntax import format_type as asm_format_type

        return asm_format_type(t)
    except Exception:  # the parser/printer package is optional here
        return _long(t)


def _long(t: Type) -> str:
    if isinstance(
        t,
        (
            PointerType,
            TileType,
            TokenType,
            TensorViewType,
            PartitionViewType,
            StridedViewType,
            GatherScatterViewType,
        ),
    ):
        return "!cuda_tile." + _short(t)
    return _short(t)


def _short(t: Type) -> str:
    if isinstance(t, (IntegerType, FloatType)):
        return t.name
    if isinstance(t, IndexType):
        return "index"
    if isinstance(t, NoneType):
        return "none"
    if isinstance(t, PointerType):
        return f"ptr<{_short(t.pointee)}>"
    if isinstance(t, TileType):
        return "tile<" + "".join(f"{d}x" for d in t.shape) + _short(t.element) + ">"
    if isinstance(t, TokenType):
        return "token"
    if isinstance(t, TensorViewType):
        dims = "".join(("?" if d == DYNAMIC else str(d)) + "x" for d in t.shape)
        if not t.shape:
            return f"tensor_view<{_short(t.element)}>"
        strides = ",".join("?" if s == DYNAMIC else str(s) for s in t.strides)
        return f"tensor_view<{dims}{_short(t.element)}, strides=[{strides}]>"
    if isinstance(t, (PartitionViewType, StridedViewType, GatherScatterViewType)):
        parts = ["tile=(" + "x".join(str(d) for d in t.tile_shape) + ")"]
        if isinstance(t, StridedViewType):
            parts.append("traversal_strides=[" + ",".join(map(str, t.traversal_strides)) + "]")
        if t.padding_value is not None:
            parts.append(f"padding_value = {t.padding_value}")
        parts.append(_short(t.tensor_view))
        if isinstance(t, GatherScatterViewType):
            parts.append(f"sparse_dim={t.sparse_dim}")
        elif t.dim_map and list(t.dim_map) != list(range(len(t.dim_map))):
            parts.append("dim_map=[" + ", ".join(map(str, t.dim_map)) + "]")
        name = {PartitionViewType: "partition_view", StridedViewType: "strided_view"}.get(
            type(t), "gather_scatter_view"
        )
        return f"{name}<{', '.join(parts)}>"
    if isinstance(t, FunctionType):
        ins = ", ".join(_long(x) for x in t.inputs)
        outs = [_long(x) for x in t.results]
        res = (
            outs[0]
            if len(outs) == 1 and not isinstance(t.results[0], FunctionType)
            else ("(" + ", ".join(outs) + ")")
        )
        return f"({ins}) -> {res}"
    if isinstance(t, OpaqueType):
        return t.text
    return str(t)
