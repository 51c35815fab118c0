"""Hand-written ``nv_tileaa`` ops: what the spec's ``semantics:`` cannot declare.

Pointers, memrefs and memory (memrefs are :class:`TensorView` s over the same heap, so tiled
accesses reuse the cuda_tile view machinery), tokens, grid queries, ``dot``, ``reduce`` /
``scan``, functions and terminators. Elementwise and shape ops (``addf`` .. ``splat``) run from
their spec ``semantics`` in :mod:`tilegen.runtime.interp.elementwise`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tilegen.runtime.attributes import SymbolRefAttr
from tilegen.runtime import floats
from tilegen.runtime.interp import mma as mma_mod
from tilegen.runtime.interp.executor import HANDLERS, Frame, Signal, attr, group
from tilegen.runtime.interp.memory import TensorView, TileView, view_load, view_store
from tilegen.runtime.interp.ops_core import format_printf
from tilegen.runtime.interp.ops_memory import _atomic_apply
from tilegen.runtime.interp.values import (
    TOKEN,
    InterpError,
    compute_dtype,
    element_of,
    storage_bytes,
)
from tilegen.runtime.types import DYNAMIC, FloatType, NvMemRefType, TileType


def nv(*names: str) -> Callable:
    """Register a handler for ``nv_tileaa.<name>``."""

    def deco(fn):
        for n in names:
            HANDLERS["nv_tileaa." + n] = fn
        return fn

    return deco


def _int(v) -> int:
    return int(np.asarray(v).reshape(()).astype(np.int64))


def _shape(t) -> tuple[int, ...]:
    return tuple(t.shape) if isinstance(t, TileType) else ()


# --------------------------------------------------------------------------- tokens, grid, misc


@nv("create_mem_token", "join_mem_token")
def _token(f: Frame, op):
    return [TOKEN for _ in op.results]


@nv("get_program_id")
def _program_id(f: Frame, op):
    return [np.array(f.block_id[attr(op, "dim")], dtype=compute_dtype(op.results[0].type))]


@nv("get_num_programs")
def _num_programs(f: Frame, op):
    return [np.array(f.m.grid[attr(op, "dim")], dtype=compute_dtype(op.results[0].type))]


@nv("return", "yield")
def _terminator(f: Frame, op):
    return Signal(op.mnemonic, [f.get(v) for v in op.operands])


@nv("optimization_barrier")
def _identity(f: Frame, op):
    return [f.get(v) for v in op.operands]


@nv("pragma", "message", "mark_for_reuse")
def _no_effect(f: Frame, op):
    return []


@nv("assert")
def _assert(f: Frame, op):
    if not np.asarray(f.get(op.operands[0])).all():
        raise InterpError(f"assertion failed: {attr(op, 'message')}")
    return []


@nv("print")
def _print(f: Frame, op):
    args = group(op, "args")
    f.m.stdout.write(
        format_printf(attr(op, "format"), [f.get(v) for v in args], [v.type for v in args])
    )
    return [TOKEN for _ in op.results]


@nv("get_global")
def _get_global(f: Frame, op):
    ref = op.attributes.get("name")
    name = ref.root if isinstance(ref, SymbolRefAttr) else getattr(ref, "value", str(ref))
    if name not in f.m.globals:
        raise InterpError(f"unknown global @{name}")
    return [np.array(f.m.globals[name], dtype=np.uint64)]


# --------------------------------------------------------------------------- pointers, memrefs


@nv("addptr")
def _addptr(f: Frame, op):
    """``base + offset * sizeof(pointee)`` (offsets count elements), broadcast to the result."""
    size = storage_bytes(element_of(op.results[0].type).pointee)
    base = np.asarray(f.get(op.operands[0])).astype(np.uint64)
    off = np.asarray(f.get(op.operands[1])).astype(np.int64)
    addr = base.astype(np.int64) + off * size
    return [np.broadcast_to(addr, _shape(op.results[0].type)).astype(np.uint64)]


@nv("make_memref")
def _make_memref(f: Frame, op):
    """A :class:`TensorView`: dynamic sizes/strides from operands, static ones from the type;
    ``offset`` (elements) moves the base."""
    t: NvMemRefType = op.results[0].type
    sizes = iter(_int(f.get(v)) for v in group(op, "sizes"))
    strides = iter(_int(f.get(v)) for v in group(op, "strides"))
    shape = tuple(next(sizes) if d == DYNAMIC else d for d in t.shape)
    st = tuple(next(strides) if s == DYNAMIC else s for s in t.stride_values)
    base = _int(f.get(group(op, "base")[0]))
    off = group(op, "offset")
    if off:
        base += _int(f.get(off[0])) * storage_bytes(t.element)
    return [TensorView(base, t.element, shape, st)]


@nv("get_dim_size")
def _dim_size(f: Frame, op):
    src = f.get(op.operands[0])
    shape = src.shape if isinstance(src, (TensorView, np.ndarray)) else ()
    return [np.array(shape[attr(op, "dim")], dtype=compute_dtype(op.results[0].type))]


# --------------------------------------------------------------------------- memory


def _mask(f: Frame, op, shape) -> np.ndarray:
    m = group(op, "mask")
    if not m:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(np.asarray(f.get(m[0]), dtype=bool), shape)


def _fill(f: Frame, op, shape, t) -> np.ndarray:
    other = group(op, "other")
    if other:
        return np.broadcast_to(np.asarray(f.get(other[0])), shape).astype(compute_dtype(t))
    return np.zeros(shape, dtype=compute_dtype(t))


def _memref_tile(mr: TensorView, shape: tuple) -> TileView:
    """The tile of ``shape`` whose origin is given in elements (indices are element offsets)."""
    return TileView("gather_scatter", mr, shape)


def _check_in_bounds(op, tile: TileView, idx: list) -> None:
    """``in_bounds = [true, ...]`` is a promise: a tile leaving the memref there is an error."""
    facts = attr(op, "in_bounds") or ()
    bad = [d for d in tile.out_of_bounds_dims(idx) if d < len(facts) and facts[d]]
    if bad:
        raise InterpError(
            f"tile at {[_int(i) for i in idx]} leaves the memref along dimension(s) {bad} "
            "marked in_bounds"
        )


def _ptr_addresses(f: Frame, op, base, shape) -> np.ndarray:
    """Addresses of a pointer (tile) access; pointer-based indices are element offsets."""
    ptrs = np.asarray(base).astype(np.int64)
    idx = group(op, "indices")
    if idx:
        size = storage_bytes(element_of(op.operands[0].type).pointee)
        ptrs = ptrs + np.asarray(f.get(idx[0])).astype(np.int64) * size
    return np.broadcast_to(ptrs, shape).astype(np.uint64)


def _memref_addresses(f: Frame, op, mr: TensorView, shape) -> tuple[np.ndarray, np.ndarray]:
    """(addresses, in-bounds) of a memref access at per-axis (tile or scalar) indices."""
    idx = [np.asarray(f.get(v)).astype(np.int64) for v in group(op, "indices")]
    if len(idx) != mr.rank:
        raise InterpError(f"{len(idx)} indices for a rank-{mr.rank} memref")
    n = storage_bytes(mr.element)
    inb = np.ones(shape, dtype=bool)
    lin = np.zeros(shape, dtype=np.int64)
    for d, c in enumerate(idx):
        c = np.broadcast_to(c, shape)
        inb &= (c >= 0) & (c < mr.shape[d])
        lin = lin + c * mr.strides[d]
    return (np.int64(mr.base) + lin * n).astype(np.uint64), inb


@nv("load", "gather_load")
def _load(f: Frame, op):
    """Pointer (tile) or memref at per-lane indices; masked-off lanes read ``other`` (or 0)."""
    rt = op.results[0].type
    shape = _shape(rt)
    base = f.get(op.operands[0])
    if isinstance(base, TensorView):  # lanes outside the memref read ``other`` (as padding)
        addrs, inb = _memref_addresses(f, op, base, shape)
        live = _mask(f, op, shape) & inb
    else:
        addrs, live = _ptr_addresses(f, op, base, shape), _mask(f, op, shape)
    out = _fill(f, op, shape, rt).copy()
    if live.any():
        out[live] = f.m.heap.load(addrs[live], element_of(rt))
    return [out] + [TOKEN] * (len(op.results) - 1)


@nv("store", "scatter_store")
def _store(f: Frame, op):
    vv = group(op, "value")[0]
    base = f.get(op.operands[0])
    val = np.asarray(f.get(vv))
    shape = val.shape
    if isinstance(base, TensorView):  # lanes outside the memref are dropped
        addrs, inb = _memref_addresses(f, op, base, shape)
        live = _mask(f, op, shape) & inb
    else:
        shape = np.broadcast_shapes(shape, np.shape(base))
        addrs, live = _ptr_addresses(f, op, base, shape), _mask(f, op, shape)
        val = np.broadcast_to(val, shape)
    if live.any():
        f.m.heap.store(addrs[live], val[live], element_of(vv.type))
    return [TOKEN for _ in op.results]


def _tiled(f: Frame, op, shape) -> tuple[TileView, list]:
    mr = f.get(op.operands[0])
    if not isinstance(mr, TensorView):
        raise InterpError("tiled access needs a memref base")
    idx = [f.get(v) for v in group(op, "indices")]
    tile = _memref_tile(mr, shape)
    _check_in_bounds(op, tile, idx)
    return tile, idx


@nv("tiled_load")
def _tiled_load(f: Frame, op):
    """Elements outside the memref read as ``other`` (zero without it); a mask keeps the rest."""
    rt = op.results[0].type
    shape = _shape(rt)
    tile, idx = _tiled(f, op, shape)
    out = view_load(f.m.heap, tile, idx)
    fill = _fill(f, op, shape, rt)
    addrs, inb = tile.addresses(idx)
    out = np.where(inb & _mask(f, op, shape), out, fill)
    return [out.astype(compute_dtype(rt))] + [TOKEN] * (len(op.results) - 1)


@nv("tiled_store")
def _tiled_store(f: Frame, op):
    val = np.asarray(f.get(group(op, "value")[0]))
    tile, idx = _tiled(f, op, val.shape)
    if group(op, "mask"):
        addrs, inb = tile.addresses(idx)
        live = inb & _mask(f, op, val.shape)
        if live.any():
            f.m.heap.store(addrs[live], val[live], tile.tensor.element)
    else:
        view_store(f.m.heap, tile, idx, val)
    return [TOKEN for _ in op.results]


@nv("atomic_rmw", "atomic_cas", "tiled_atomic_rmw")
def _atomic(f: Frame, op):
    vv = group(op, "val" if op.mnemonic == "atomic_cas" else "value")[0]
    val = np.asarray(f.get(vv))
    base = f.get(op.operands[0])
    shape = val.shape
    if op.mnemonic == "tiled_atomic_rmw":
        tile, idx = _tiled(f, op, shape)
        addrs, live = tile.addresses(idx)
    elif isinstance(base, TensorView):
        addrs, live = _memref_addresses(f, op, base, shape)
    else:
        shape = np.broadcast_shapes(shape, np.shape(base))
        addrs, live = _ptr_addresses(f, op, base, shape), np.ones(shape, dtype=bool)
    live = live & _mask(f, op, shape)
    if op.mnemonic == "atomic_cas":
        cmp = f.get(group(op, "cmp")[0])
        old = _atomic_apply(f.m.heap, addrs, val, live, "xchg", vv.type, cmp=cmp)
    else:
        old = _atomic_apply(f.m.heap, addrs, val, live, attr(op, "rmw_mode"), vv.type)
    return [old] + [TOKEN] * (len(op.results) - 1)


# --------------------------------------------------------------------------- dot, reduce, scan


def _combine(f: Frame, body, cur: list, prev: list) -> list:
    """Run a combiner: block arguments are every ``cur`` value, then every ``prev`` value (the
    conversion's (a0, a1, .., b0, b1, ..) order; cuda_tile interleaves them)."""
    sig = f.run_block(body, list(cur) + list(prev))
    return [np.asarray(v) for v in sig.values]


@nv("dot")
def _dot(f: Frame, op):
    """``c + a @ b``; ``input_precision = "tf32"`` rounds f32 inputs to tf32 first."""
    args = [f.get(v) for v in op.operands]
    types = [element_of(v.type) for v in op.operands[:3]]
    if attr(op, "input_precision") == "tf32":
        for i in (0, 1):
            if isinstance(types[i], FloatType) and types[i].name == "f32":
                args[i] = floats.to_compute(np.asarray(args[i]).astype(np.float64), "tf32")
                types[i] = FloatType("tf32")
    scales = [f.get(v) for v in group(op, "sfa") + group(op, "sfb")]
    return [
        mma_mod.dot(
            *args[:3],
            types,
            (attr(op, "signedness_a"), attr(op, "signedness_b")),
            scales or None,
        )
    ]


@nv("reduce")
def _reduce(f: Frame, op):
    """The same pairwise tree as cuda_tile.reduce (element k with k + half of the power-of-two
    padded length); lanes paired with padding pass through, so no identity is needed."""
    axis = attr(op, "axis")
    body = op.regions[0].blocks[0]
    xs = [np.moveaxis(np.asarray(f.get(v)), axis, 0) for v in op.operands]
    n = xs[0].shape[0]
    if n == 0:
        raise InterpError("reduce of an empty axis")
    p2 = 1
    while p2 < n:
        p2 *= 2
    while n > 1:
        h = p2 // 2
        k = n - h  # lanes 0..k-1 combine with k+h; lanes k..h-1 meet padding
        new = _combine(f, body, [x[h:n] for x in xs], [x[:k] for x in xs])
        xs = [
            np.concatenate([np.broadcast_to(v, (k,) + x.shape[1:]).astype(x.dtype), x[k:h]])
            for v, x in zip(new, xs)
        ]
        n, p2 = h, h
    return [np.array(x[0], dtype=compute_dtype(r.type)) for x, r in zip(xs, op.results)]


@nv("scan")
def _scan(f: Frame, op):
    """Inclusive scan (lane k combines lane k with the running value), optionally reversed."""
    axis = attr(op, "axis")
    if attr(op, "inclusive") is False:
        raise InterpError("exclusive nv_tileaa.scan has no identity to start from")
    body = op.regions[0].blocks[0]
    xs = [np.moveaxis(np.asarray(f.get(v)), axis, 0) for v in op.operands]
    n = xs[0].shape[0]
    outs = [np.empty_like(x) for x in xs]
    acc = None
    for k in range(n - 1, -1, -1) if attr(op, "reverse") else range(n):
        cur = [x[k] for x in xs]
        acc = cur if acc is None else _combine(f, body, cur, acc)
        for o, a in zip(outs, acc):
            o[k] = a
    return [np.array(np.moveaxis(o, 0, axis), order="C") for o in outs]
