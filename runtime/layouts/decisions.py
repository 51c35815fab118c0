"""The layout stage's decisions as attributes on the IR: the boundary between
``nv-tileas-assign-layouts`` (which writes them) and code generation (which reads them).

Each decision is made once, by the pass, and printed with the IR (``tilegen-opt
--pass-pipeline=...nv-tileas-assign-layouts``), so what codegen will do is visible and testable
as text; codegen never recomputes an analysis of the pass. docs/layouts.md has the table.

=====================  ===========================  ============================================
attribute              on                           meaning
=====================  ===========================  ============================================
``nv_tileas.num_warps``  ``nv_tileaa.func``          CTA size in warps (``.reqntid`` = 32 x it)
``nv_tileas.vector_width``  ``tiled_load/_store``    elements per vector access the analysis
                                                     proved aligned and uniformly masked
``nv_tileas.mma``       ``nv_tileaa.dot``            ``"wgmma"``, ``"mma.sync"`` or ``"fma"``
``nv_tileas.cp_async``  ``tiled_load``               staged for its dot: elements per cp.async
``nv_tileas.num_stages``  ``scf.for``                pipelined K loop: stage buffers asked for
``nv_tileas.prefetch``  ``tiled_load`` in that loop  prefetched ``num_stages - 1`` iterations ahead
=====================  ===========================  ============================================

Layouts themselves ride on the tile types (``encoding``); the accumulator of a tensor-core dot
carries its instruction's fragment layout there.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import IntegerAttr, StringAttr, UnitAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.layouts.kernel import kernel_num_warps
from tilegen.runtime.types import I32

NUM_WARPS = "nv_tileas.num_warps"
VECTOR_WIDTH = "nv_tileas.vector_width"
MMA = "nv_tileas.mma"
CP_ASYNC = "nv_tileas.cp_async"
NUM_STAGES = "nv_tileas.num_stages"
PREFETCH = "nv_tileas.prefetch"

ALL = (NUM_WARPS, VECTOR_WIDTH, MMA, CP_ASYNC, NUM_STAGES, PREFETCH)


def set_int(op: Operation, name: str, value: int) -> None:
    op.set_attr(name, IntegerAttr(int(value), I32))


def set_str(op: Operation, name: str, value: str) -> None:
    op.set_attr(name, StringAttr(value))


def set_unit(op: Operation, name: str) -> None:
    op.set_attr(name, UnitAttr())


def clear(op: Operation) -> None:
    """Drop every decision from ``op`` (the pass re-decides from scratch)."""
    for name in ALL:
        op.remove_attr(name)


def _int(op: Operation, name: str) -> Optional[int]:
    a = op.attributes.get(name)
    return a.value if isinstance(a, IntegerAttr) else None


# ----------------------------------------------------------------------------- readers


def num_warps(func: Operation) -> int:
    """The CTA size of kernel ``func`` in warps: the layout stage's ``nv_tileas.num_warps``
    (IR written with layouts by hand may leave it out: then what the kernel asks for)."""
    n = _int(func, NUM_WARPS)
    return n if n is not None else kernel_num_warps(func)


def vector_width(op: Operation) -> int:
    """Elements per vector access of a tiled load/store (1 when nothing was proven)."""
    return _int(op, VECTOR_WIDTH) or 1


def mma_family(op: Operation) -> Optional[str]:
    """``wgmma``, ``mma.sync`` or ``fma`` for a dot (None: not decided)."""
    a = op.attributes.get(MMA)
    return a.value if isinstance(a, StringAttr) else None


def cp_async_width(op: Operation) -> int:
    """Elements per cp.async of a load staged for its dot; 0 when it is not staged."""
    return _int(op, CP_ASYNC) or 0


def num_stages(loop: Operation) -> int:
    """Stage buffers of a pipelined ``scf.for`` (0: not pipelined)."""
    return _int(loop, NUM_STAGES) or 0


def prefetched(op: Operation) -> bool:
    """Whether a staged load of a pipelined loop is prefetched across iterations."""
    return PREFETCH in op.attributes
