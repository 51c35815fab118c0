"""Kernel-level facts the layout stage reads from attributes the conversion carried over:
``nv_tileaa.kernel_spec`` entries, enclosing integer attributes, the CTA size and stage count
asked for (``num_warps`` / ``tt.num_warps``, ``num_stages`` / ``tt.num_stages``)."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import DictAttr, IntegerAttr
from tilegen.runtime.ir import Operation

DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 2


def kernel_spec_int(func: Operation, key: str) -> Optional[int]:
    """Integer ``key`` of the function's folded ``nv_tileaa.kernel_spec`` (None if absent)."""
    spec = func.attributes.get("nv_tileaa.kernel_spec")
    if isinstance(spec, DictAttr):
        for k, v in spec.items:
            if k == key and isinstance(v, IntegerAttr):
                return v.value
    return None


def enclosing_int_attr(op: Operation, name: str) -> Optional[int]:
    """Integer attribute ``name`` on ``op`` or the nearest enclosing op carrying it."""
    p = op
    while p is not None:
        a = p.attributes.get(name)
        if isinstance(a, IntegerAttr):
            return a.value
        p = p.parent_op
    return None


def kernel_num_warps(func: Operation) -> int:
    """The CTA size the kernel asks for: ``kernel_spec.num_warps``, else ``tt.num_warps``,
    else :data:`DEFAULT_NUM_WARPS` (seed 002's default: 128 threads)."""
    for n in (kernel_spec_int(func, "num_warps"), enclosing_int_attr(func, "tt.num_warps")):
        if n is not None:
            return n
    return DEFAULT_NUM_WARPS


def kernel_num_stages(func: Operation) -> int:
    """The K-loop stage count the kernel asks for: ``kernel_spec.num_stages``, else
    ``tt.num_stages``, else :data:`DEFAULT_NUM_STAGES` (1 means no pipelining)."""
    for n in (kernel_spec_int(func, "num_stages"), enclosing_int_attr(func, "tt.num_stages")):
        if n is not None:
            return n
    return DEFAULT_NUM_STAGES


def target_sm(op: Operation) -> Optional[int]:
    """The compute capability the module around ``op`` was converted for (None if unknown)."""
    return enclosing_int_attr(op, "nv_tileaa.compute_capability")
