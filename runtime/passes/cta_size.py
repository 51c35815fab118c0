"""CTA sizing: how many warps tileiras gives a kernel that does not say (no ``tt.num_warps``).

The rule (:func:`choose_num_warps`)::

    8 warps  if the target is sm_90 or newer and the kernel gets a TMA load pipeline,
    4 warps  otherwise (seed 002's default: "4 (1 warp group)").

A kernel gets a TMA load pipeline when (a) it does work that tileiras stages through shared
memory -- a ``reduce``, a ``dot`` (mma) or an atomic -- and (b) at least one of its
``tiled_load`` ops through a memref is TMA-able: base pointer 16-byte aligned, a unit-stride
dim whose tile extent is at least 16 bytes, every other stride a multiple of 16 bytes, and no
padding value other than zero / NaN (the only out-of-bounds fills the TMA unit has).

Evidence (tileiras 13.5, ``nvidia-cuda-tileiras`` 13.5.37, all 33 cuTile corpus kernels):

* ``.reqntid`` in ``corpus/cutile/out/ptx/*.sm_90.ptx`` and ``EIATTR_REQNTID`` in the cubins of
  ``tileiras --gpu-name=sm_{80,90,100,120}``: every kernel is 128 threads on sm_80 (no TMA there;
  even matmul_f16 is 128 on sm_80 and 256 on sm_90/sm_100); on sm_90/100/120 exactly the kernels
  whose PTX holds ``cp.async.bulk.tensor`` (and mbarriers) are 256 threads: the 7 mma kernels,
  atomics, layernorm, newer_ops, print_kernel, reduce_cols_loop, reduce_rows, reshape_expand.
  The 8 warps are a TMA producer warp group plus a consumer warp group.
* ``tileiras --remarks=all``: ``RemarkMemoryLoadInstructionSelected`` says "TMA Load
  instruction" vs "Global-memory load instruction" per load. Kernels with no reduce / mma /
  atomic never attempt TMA (no ``RemarkMemoryTmaLoadFailed`` either, e.g. vec_add, transpose2d,
  scan_cumsum). Among the rest, softmax is refused ("software-implemented TMA padding is not
  profitable for this tile": its load pads with -inf) and stays at 128 threads; newer_ops' load
  through an ``assume div_by<4>`` pointer is refused ("base pointer not 16-byte aligned") but its
  three other loads take TMA, so it is 256.
* No corpus kernel carries ``tt.num_warps`` and the ``optimization_hints`` hold only
  ``occupancy``, so the size is tileiras's own choice; an explicit ``num_warps`` (kernel_spec /
  ``tt.num_warps``) still wins -- see :func:`choose_num_warps`'s ``respect_hint``.

tests/test_cta_size.py checks the rule against tileiras for every corpus kernel. Not wired into
``nv-tileas-assign-layouts`` yet (runtime/layouts/kernel.kernel_num_warps).
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import FloatAttr, IntegerAttr
from tilegen.runtime.ir import Operation, OpResult
from tilegen.runtime.layouts.access import divisibility, element_bytes
from tilegen.runtime.layouts.kernel import enclosing_int_attr, kernel_spec_int
from tilegen.runtime.types import DYNAMIC, NvMemRefType, TileType

DEFAULT_NUM_WARPS = 4
TMA_NUM_WARPS = 8
TMA_MIN_SM = 90
TMA_ALIGN = 16  # bytes: global address, global strides and the box's inner extent

#: ops whose presence makes tileiras consider a TMA (producer/consumer) pipeline
STAGED_OPS = frozenset(
    {
        "nv_tileaa.reduce",
        "nv_tileaa.dot",
        "nv_tileaa.atomic_rmw",
        "nv_tileaa.atomic_cas",
        "nv_tileaa.tiled_atomic_rmw",
    }
)


def _sm(func: Operation) -> Optional[int]:
    cc = kernel_spec_int(func, "compute_capability")
    return cc if cc is not None else enclosing_int_attr(func, "nv_tileaa.compute_capability")


def explicit_num_warps(func: Operation) -> Optional[int]:
    """``tt.num_warps`` on the function or an enclosing op, if the producer gave one."""
    return enclosing_int_attr(func, "tt.num_warps")


def _is_zero_or_nan_splat(v) -> bool:
    op = v.op if isinstance(v, OpResult) else None
    if op is None:
        return False
    if op.name == "nv_tileaa.splat":
        return _is_zero_or_nan_splat(op.operands[0])
    if op.name == "arith.constant":
        a = op.attributes.get("value")
        if isinstance(a, IntegerAttr):
            return a.value == 0
        if isinstance(a, FloatAttr):
            x = a.value
            return x == 0.0 or x != x
        values = getattr(a, "values", None)  # dense splat
        if values:
            return all((x == 0 or x != x) for x in values)
    return False


def tma_load_reason(op: Operation) -> Optional[str]:
    """None when ``op`` (a ``nv_tileaa.tiled_load``) is TMA-able, else why not (the wording of
    tileiras's ``RemarkMemoryTmaLoadFailed`` where there is one)."""
    od = op.opdef
    base = od.operand_group(op, "base")[0]
    mtype = base.type
    tile = op.results[0].type
    if not isinstance(mtype, NvMemRefType) or not isinstance(tile, TileType):
        return "not a load through a memref"
    if od.operand_group(op, "mask"):
        return "masked load"
    other = od.operand_group(op, "other")
    if other and not _is_zero_or_nan_splat(other[0]):
        return "software-implemented TMA padding is not profitable for this tile"
    ebytes = element_bytes(mtype.element)
    mk = base.op if isinstance(base, OpResult) else None
    if mk is None or mk.name != "nv_tileaa.make_memref":
        return "unknown memref origin"
    mod = mk.opdef
    if divisibility(mod.operand_group(mk, "base")[0]) % TMA_ALIGN:
        return "base pointer not 16-byte aligned"
    offset = mod.operand_group(mk, "offset")
    if offset and (divisibility(offset[0]) * ebytes) % TMA_ALIGN:
        return "base pointer not 16-byte aligned"
    strides = mtype.stride_values
    unit = [d for d in range(mtype.rank) if strides[d] == 1]
    if not unit or tile.rank != mtype.rank:
        return "no unit-stride dim"
    cd = unit[-1]
    if tile.shape[cd] * ebytes < TMA_ALIGN:
        return "leading tile dimension not 16-byte aligned"
    dyn = iter(mod.operand_group(mk, "strides"))
    for d in range(mtype.rank):
        s = strides[d]
        if s == DYNAMIC:
            sv = next(dyn, None)
            div = divisibility(sv) if sv is not None else 1
        else:
            div = s
        if d != cd and (div * ebytes) % TMA_ALIGN:
            return f"stride of dim {d} not 16-byte aligned"
    return None


def uses_tma(func: Operation, sm: Optional[int] = None) -> bool:
    """Whether tileiras would give ``func`` (a ``nv_tileaa.func``) a TMA load pipeline."""
    sm = _sm(func) if sm is None else sm
    if sm is None or sm < TMA_MIN_SM:
        return False
    ops = list(func.walk())
    if not any(op.name in STAGED_OPS for op in ops):
        return False
    return any(op.name == "nv_tileaa.tiled_load" and tma_load_reason(op) is None for op in ops)


def choose_num_warps(func: Operation, sm: Optional[int] = None, respect_hint: bool = True) -> int:
    """Warps per CTA for the ``nv_tileaa.func`` ``func`` on ``sm_<sm>`` (default: the target
    recorded in its kernel_spec / module). An explicit ``tt.num_warps`` wins when
    ``respect_hint``; otherwise 8 with a TMA load pipeline on sm_90+, else 4."""
    if respect_hint:
        hint = explicit_num_warps(func)
        if hint is not None:
            return hint
    return TMA_NUM_WARPS if uses_tma(func, sm) else DEFAULT_NUM_WARPS


__all__ = [
    "DEFAULT_NUM_WARPS",
    "TMA_NUM_WARPS",
    "choose_num_warps",
    "explicit_num_warps",
    "tma_load_reason",
    "uses_tma",
]
