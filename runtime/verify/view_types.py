"""The TileView interface's index checks used by the view load/store ops
(``verify_view_indices``); the view *type* verifiers (``verify_view_type`` and the per-view
checks, NVIDIA's wording and order, types_attrs.md sec. 2.4-2.7) live in
runtime/asm/type_verify.py, beside the parser that runs them, and are re-exported here.
"""

from __future__ import annotations

from typing import Optional, Sequence

from tilegen.runtime.asm.type_verify import (  # noqa: F401
    quoted,
    verify_gather_scatter_view,
    verify_partition_view,
    verify_strided_view,
    verify_tensor_view,
    verify_view_type,
)
from tilegen.runtime.types import (
    GatherScatterViewType,
    PartitionViewType,
    StridedViewType,
    TileType,
    Type,
)

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
