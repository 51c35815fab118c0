"""Type verification: the invariants of cuda_tile types (types_attrs.md section 2), checked as a
type is built -- by the parser (``OpParser.verify_type``) and the bytecode reader -- and again
by the verifier (runtime/verify reuses these functions).

:func:`verify_type` returns the message for an invalid type, or None. Messages follow NVIDIA's
wording and order (types_attrs.md sec. 2.2-2.7) and print types as MLIR's diagnostics do
(:func:`quoted`). The view types (tensor_view, partition_view, strided_view,
gather_scatter_view) are checked by :func:`verify_view_type`.
"""

from __future__ import annotations

from typing import Optional, Sequence

from tilegen.runtime.asm.type_syntax import format_type
from tilegen.runtime.types import (
    FloatType,
    GatherScatterViewType,
    IntegerType,
    NvPointerType,
    PartitionViewType,
    PointerType,
    StridedViewType,
    TensorViewType,
    TileType,
    Type,
    DYNAMIC,
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
        return verify_tensor_view_shape(t)
    if isinstance(t, (PartitionViewType, StridedViewType, GatherScatterViewType)):
        return verify_view_type(t, explicit_dim_map)
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


def verify_tensor_view_shape(t: TensorViewType) -> Optional[str]:
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


_FLOAT_ONLY_PADDINGS = ("neg_zero", "nan", "pos_inf", "neg_inf")


def quoted(t: Type) -> str:
    """A type as MLIR's diagnostic streams it: ``'!cuda_tile.tile<4xf32>'``."""
    return f"'{format_type(t)}'"


def _list(values: Sequence[int]) -> str:
    return "[" + ", ".join("?" if v == DYNAMIC else str(v) for v in values) + "]"


def _is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


# --------------------------------------------------------------------------- tensor_view


def verify_tensor_view(t: TensorViewType) -> Optional[str]:
    """The ODS element constraint, then the tensor_view verifier."""
    if not is_number_type(t.element):
        return f"failed to verify 'elementType': {NUMBER_TYPE_LIST}"
    return verify_tensor_view_shape(t)


# --------------------------------------------------------------------------- tile views


def _tile_type_error(shape: Sequence[int], element: Type) -> Optional[str]:
    """The tile-type verifier applied to the tile a view loads/stores."""
    return verify_tile_shape(tuple(shape), element)


def _common_prefix(tile_shape: Sequence[int], tv: TensorViewType) -> Optional[str]:
    if not tile_shape:
        return "0-dimension tile shape is not supported"
    if tv.rank != len(tile_shape):
        return (
            "expected tensor_view rank and tile rank to match, got tensor_view of rank "
            f"{tv.rank} and tiles of rank {len(tile_shape)}"
        )
    return None


def _tile_dims(tile_shape: Sequence[int]) -> Optional[str]:
    if any(d <= 0 for d in tile_shape):
        return f"tile shape dimensions must have positive length but got {_list(tile_shape)}"
    if not all(_is_pow2(d) for d in tile_shape):
        return f"tile shape dimensions must have power of two length but got {_list(tile_shape)}"
    return None


def _padding(padding: Optional[str], element: Type) -> Optional[str]:
    if padding in _FLOAT_ONLY_PADDINGS and not isinstance(element, FloatType):
        return (
            f"padding_value {padding} can only be used with floating point element types, "
            f"got {quoted(element)}"
        )
    return None


def _partition_like(
    tile_shape: Sequence[int],
    tv: TensorViewType,
    dim_map: Sequence[int],
    padding: Optional[str],
    explicit: bool = False,
) -> Optional[str]:
    err = _common_prefix(tile_shape, tv)
    if err:
        return err
    rank = len(tile_shape)
    mapping = tuple(dim_map) if dim_map or explicit else tuple(range(rank))
    if len(mapping) != rank:
        return (
            f"expected dim_map to map exactly all {rank} dimensions of the tile, "
            f"got {len(mapping)} mappings"
        )
    err = _tile_dims(tile_shape)
    if err:
        return err
    seen: dict[int, int] = {}
    for tile_dim, target in enumerate(mapping):
        if target < 0:
            return f"target dimension must not be negative, got {target}"
        if target >= tv.rank:
            return (
                "target dimension is outside of tensor view dimensions, expected strictly "
                f"less than {tv.rank}, got {target}"
            )
        if target in seen:
            return (
                f"target dimension {target} mapped at least twice (for tile dimensions "
                f"{seen[target]} and {tile_dim})"
            )
        seen[target] = tile_dim
    return _tile_type_error(tile_shape, tv.element) or _padding(padding, tv.element)


def verify_partition_view(t: PartitionViewType, explicit_dim_map: bool = False) -> Optional[str]:
    """``explicit_dim_map``: an empty dim_map maps nothing (bytecode) instead of the identity."""
    return verify_tensor_view(t.tensor_view) or _partition_like(
        t.tile_shape, t.tensor_view, t.dim_map, t.padding_value, explicit_dim_map
    )


def verify_strided_view(t: StridedViewType, explicit_dim_map: bool = False) -> Optional[str]:
    err = verify_tensor_view(t.tensor_view) or _partition_like(
        t.tile_shape, t.tensor_view, t.dim_map, t.padding_value, explicit_dim_map
    )
    if err:
        return err
    if len(t.traversal_strides) != len(t.tile_shape):
        return f"expected {len(t.tile_shape)} traversal strides, got {len(t.traversal_strides)}"
    if any(s <= 0 for s in t.traversal_strides):
        return f"traversal strides must be strictly positive but got {_list(t.traversal_strides)}"
    return None


def verify_gather_scatter_view(t: GatherScatterViewType) -> Optional[str]:
    tv = t.tensor_view
    err = verify_tensor_view(tv) or _common_prefix(t.tile_shape, tv) or _tile_dims(t.tile_shape)
    if err:
        return err
    if t.sparse_dim >= tv.rank:
        return (
            "gather dimension is outside of tensor view dimensions, expected strictly less "
            f"than {tv.rank}, got {t.sparse_dim}"
        )
    return _tile_type_error(t.tile_shape, tv.element) or _padding(t.padding_value, tv.element)


def verify_view_type(t: Type, explicit_dim_map: bool = False) -> Optional[str]:
    """The first verifier failure of a view type, or None (non-view types always pass)."""
    if isinstance(t, TensorViewType):
        return verify_tensor_view(t)
    if isinstance(t, StridedViewType):
        return verify_strided_view(t, explicit_dim_map)
    if isinstance(t, PartitionViewType):
        return verify_partition_view(t, explicit_dim_map)
    if isinstance(t, GatherScatterViewType):
        return verify_gather_scatter_view(t)
    return None
