"""What TMA can copy (docs/pipelines.md section 2): :func:`tma_describable`'s rule on a
``tiled_load``, read by the async stage (runtime/passes/async_rule.py, k_loop_pipelining.py)
and, before the layouts exist, by the CTA-size rule (layouts/kernel.py)."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import FloatAttr, IntegerAttr
from tilegen.runtime.ir import Operation, OpResult, Value
from tilegen.runtime.types import NvMemRefType, TileType

TMA_MAX_BOX = 256
TMA_MAX_RANK = 5
TMA_ALIGN = 16


def _is_zero_splat(v: Optional[Value]) -> bool:
    """``other`` of a TMA load: absent, or a splat of +0 (TMA fills out-of-bounds with zeros)."""
    if v is None:
        return True
    op = v.op if isinstance(v, OpResult) else None
    if op is not None and op.name == "nv_tileaa.splat":
        v = op.operands[0]
        op = v.op if isinstance(v, OpResult) else None
    if op is None or op.name != "arith.constant":
        return False
    a = op.attributes.get("value")
    if isinstance(a, IntegerAttr):
        return a.value == 0
    if isinstance(a, FloatAttr):
        return a.value == 0.0 and str(a.value)[0] != "-"
    return False


def tma_describable(load: Operation, aligned: bool = True) -> Optional[str]:
    """None when TMA can copy this ``tiled_load``'s tile, else why not (docs/pipelines.md);
    ``aligned=False``: the rule without the 16-byte alignment of base and strides (what the
    async path's producer threads copy instead: :func:`thread_copy_width`)."""
    from tilegen.runtime.layouts.access import element_bytes

    od = load.opdef
    base = od.operand_group(load, "base")[0]
    mt = base.type
    tile = load.results[0].type
    if not isinstance(mt, NvMemRefType):
        return "the load is not through a memref"
    if not isinstance(tile, TileType) or tile.rank != mt.rank:
        return "the tile and the memref differ in rank"
    if mt.rank > TMA_MAX_RANK:
        return f"rank {mt.rank} exceeds TMA's {TMA_MAX_RANK}"
    if mt.stride_values[-1] != 1:
        return "the innermost dimension is not unit-stride"
    if any(d > TMA_MAX_BOX for d in tile.shape):
        return f"a tile extent exceeds TMA's box limit of {TMA_MAX_BOX}"
    esize = element_bytes(mt.element)
    if tile.shape[-1] * esize % TMA_ALIGN:
        return f"the tile's inner extent is {tile.shape[-1] * esize} bytes, not a multiple of 16"
    if od.operand_group(load, "mask"):
        return "the load is masked"
    other = od.operand_group(load, "other")
    if not _is_zero_splat(other[0] if other else None):
        return "the padding value is not +0 (TMA fills with zeros)"
    if "volatile" in load.attributes:
        return "the load is volatile"
    return memref_reason(load, esize, aligned)


def thread_copy_width(load: Operation) -> int:
    """Elements per copy when the async path's producer warp group copies this ``tiled_load``
    with its threads (docs/pipelines.md section 43): a load TMA's rule refuses only for the
    16-byte alignment of its base or strides, staged for its dot (``cp_async_width``: the
    proven width; under 4 bytes the threads copy through registers). 0: it cannot be."""
    from tilegen.runtime.layouts.staging import cp_async_width

    if tma_describable(load, aligned=False) is not None:
        return 0
    return cp_async_width(load)


def memref_reason(op: Operation, esize: int, aligned: bool = True) -> Optional[str]:
    """The rule's memref half, shared by TMA loads and stores (``tma_store_describable``):
    no ``allow_tma = false`` hint for this target, a known origin, and base and strides known
    (``assume div_by``) to be 16-byte multiples; None when they hold, else why not."""
    from tilegen.runtime.layouts.access import analyze_memref_access

    hint = op.attributes.get("nv_tileaa.allow_tma")  # the conversion's false allow_tma hint
    if getattr(hint, "value", True) is False:
        return "its allow_tma optimization hint is false for this target"
    info = analyze_memref_access(op)
    if info is None:
        return "the access could not be analyzed"
    if "unknown memref origin" in info.limits:
        return "the memref's origin (base pointer, strides) is unknown"
    if not aligned:
        return None
    if info.limits.get("base alignment", 1) * esize < TMA_ALIGN:
        return "the base address is not known to be 16-byte aligned"
    for key, div in info.limits.items():
        if key.startswith("stride of dim") and div * esize % TMA_ALIGN:
            return f"the {key} is not known to be a multiple of 16 bytes"
    return None
