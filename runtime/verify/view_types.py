"""Verifiers of the view types (tensor_view, partition_view, strided_view, gather_scatter_view).

Each check returns the first failure message (NVIDIA's wording and order, types_attrs.md sec. 2.4-2.7)
or None. ``verify_view_type`` is what the type verifier calls; ``verify_view_indices`` is the
TileView interface's index check used by the view load/store ops.
"""

from __future__ import annotations

from typing import Optional, Sequence

from tilegen.runtime.types import (
    DYNAMIC,
    FloatType,
    GatherScatterViewType,
    PartitionViewType,
    StridedViewType,
    TensorViewType,
    TileType,
    Type,
)
from tilegen.runtime.verify.types import (
    NUMBER_TYPE_LIST,
    format_type,
    is_number_type,
    verify_tile_shape,
)
from tilegen.runtime.verify.types import verify_tensor_view as _verify_tensor_view_shape

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
    return _verify_tensor_view_shape(t)


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


# --------------------------------------------------------------------------- TileView interface


def view_index_rank(t: Type) -> Optional[int]:
    """Number of index operands a TileView takes (its tile rank); None for non-views."""
    if isinstance(t, (PartitionViewType, StridedViewType, GatherScatterViewType)):
        return len(t.tile_shape)
    return None


def verify_view_indices(t: Type, index_types: Sequence[Type]) -> Optional[str]:
    """The view's own index rules (the op checks the count first)."""
    if isinstance(t, GatherScatterViewType):
        return _gather_scatter_indices(t, index_types)
    if not index_types:
        return None
    for it in index_types:
        if not isinstance(it, TileType):
            return f"expected index type to be a tile type, got {quoted(it)}"
        if it.rank != 0:
            return f"expected index type to be a scalar tile, got {quoted(it)}"
    first = index_types[0]
    for i, it in enumerate(index_types):
        if it != first:
            return (
                f"expected index type {i} to be the same as other index types "
                f"({quoted(first)}), got {quoted(it)}"
            )
    return None


def _gather_scatter_indices(t: GatherScatterViewType, index_types: Sequence[Type]) -> Optional[str]:
    if not index_types:
        return None
    sd = t.sparse_dim
    if sd >= len(index_types):
        return f"gather/scatter dimension {sd} is out of range for index count {len(index_types)}"
    sparse = index_types[sd]
    if not isinstance(sparse, TileType):
        return f"expected index at sparse_dim position {sd} to be a tile type for GatherScatterView"
    if sparse.rank != 1:
        return (
            f"expected index at sparse_dim position {sd} to be a 1D tensor for "
            f"GatherScatterView, got rank {sparse.rank}"
        )
    if sparse.shape[0] != t.tile_shape[sd]:
        return (
            f"expected gather/scatter index size ({sparse.shape[0]}) to match tile shape at "
            f"gather/scatter dimension {sd} ({t.tile_shape[sd]})"
        )
    common: Optional[Type] = None
    for i, it in enumerate(index_types):
        if i == sd:
            continue
        if not isinstance(it, TileType) or it.rank != 0:
            return f"expected index {i} to be a scalar tile for GatherScatterView"
        if common is None:
            common = it
        elif it != common:
            return (
                f"expected scalar index {i} to have the same type as other scalar indices "
                f"({quoted(common)}), got {quoted(it)}"
            )
    return None
