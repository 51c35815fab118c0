"""Hand-written memory ops: tensor and tile views, view and pointer loads/stores (padding,
masks, ``inbounds`` promises), atomics (rmw, cas, view reductions) and multimem views."""

from __future__ import annotations

import numpy as np

from tilegen.runtime import floats
from tilegen.runtime.interp.executor import Frame, attr, group, handler, scalar
from tilegen.runtime.interp.memory import Heap, TensorView, TileView, view_load, view_store
from tilegen.runtime.interp.values import (
    TOKEN,
    InterpError,
    as_signed,
    as_unsigned,
    compute_dtype,
    element_of,
    to_bits,
    wrap_int,
)
from tilegen.runtime.types import (
    DYNAMIC,
    FloatType,
    GatherScatterViewType,
    PartitionViewType,
    StridedViewType,
    TensorViewType,
)

# --------------------------------------------------------------------------- views


@handler("make_tensor_view")
def _make_tensor_view(f: Frame, op):
    t: TensorViewType = op.results[0].type
    dyn_shape = [scalar(f.get(v)) for v in group(op, "dynamicShape")]
    dyn_strides = [scalar(f.get(v)) for v in group(op, "dynamicStrides")]
    shape = [dyn_shape.pop(0) if d == DYNAMIC else d for d in t.shape]
    strides = [dyn_strides.pop(0) if s == DYNAMIC else s for s in t.strides]
    base = int(np.asarray(f.get(op.operands[0])).reshape(()))
    return [TensorView(base, t.element, tuple(shape), tuple(strides))]


def _tile_view(op, tv: TensorView):
    t = op.results[0].type
    if isinstance(t, PartitionViewType):
        return TileView(
            "partition", tv, tuple(t.tile_shape), tuple(t.dim_map), (), -1, t.padding_value
        )
    if isinstance(t, StridedViewType):
        return TileView(
            "strided",
            tv,
            tuple(t.tile_shape),
            tuple(t.dim_map),
            tuple(t.traversal_strides),
            -1,
            t.padding_value,
        )
    if isinstance(t, GatherScatterViewType):
        return TileView(
            "gather_scatter", tv, tuple(t.tile_shape), (), (), t.sparse_dim, t.padding_value
        )
    raise InterpError(f"unsupported view type {t}")


@handler("make_partition_view", "make_strided_view", "make_gather_scatter_view")
def _make_view(f: Frame, op):
    return [_tile_view(op, f.get(op.operands[0]))]


@handler("get_tensor_shape")
def _tensor_shape(f: Frame, op):
    v = f.get(op.operands[0])
    tv = v.tensor if isinstance(v, TileView) else v
    return [np.array(n, dtype=compute_dtype(r.type)) for n, r in zip(tv.shape, op.results)]


@handler("get_index_space_shape")
def _index_space(f: Frame, op):
    v: TileView = f.get(op.operands[0])
    return [
        np.array(n, dtype=compute_dtype(r.type)) for n, r in zip(v.index_space_shape(), op.results)
    ]


def _check_inbounds(op, view: TileView, idx: list) -> None:
    """``inbounds = [true, ...]`` promises the tile stays inside the tensor along that dim."""
    flags = attr(op, "inbounds")
    if not isinstance(flags, tuple) or not any(flags):
        return
    for i in view.out_of_bounds_dims(idx):
        if i < len(flags) and flags[i]:
            at = [int(np.asarray(x).reshape(-1)[0]) for x in idx]
            raise InterpError(
                f"tile at index {at} leaves the tensor along dimension {i}, which is marked inbounds"
            )


@handler("load_view_tko")
def _load_view(f: Frame, op):
    view = f.get(op.operands[0])
    idx = [f.get(v) for v in group(op, "index")]
    _check_inbounds(op, view, idx)
    tile = view_load(f.m.heap, view, idx)
    return [tile.astype(compute_dtype(op.results[0].type)), TOKEN]


@handler("store_view_tko")
def _store_view(f: Frame, op):
    tile = f.get(group(op, "tile")[0])
    view = f.get(group(op, "view")[0])
    idx = [f.get(v) for v in group(op, "index")]
    _check_inbounds(op, view, idx)
    view_store(f.m.heap, view, idx, np.asarray(tile))
    return [TOKEN]


def _mask(f: Frame, op, shape) -> np.ndarray:
    m = group(op, "mask")
    if not m:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(np.asarray(f.get(m[0]), dtype=bool), shape)


@handler("load_ptr_tko")
def _load_ptr(f: Frame, op):
    ptrs = np.asarray(f.get(op.operands[0]))
    rt = op.results[0].type
    mask = _mask(f, op, ptrs.shape)
    pad = group(op, "paddingValue")
    out = (
        np.broadcast_to(np.asarray(f.get(pad[0])), ptrs.shape).copy()
        if pad
        else np.zeros(ptrs.shape, dtype=compute_dtype(rt))
    )
    out = out.astype(compute_dtype(rt))
    if mask.any():
        out[mask] = f.m.heap.load(ptrs[mask], element_of(rt))
    return [out, TOKEN]


@handler("store_ptr_tko")
def _store_ptr(f: Frame, op):
    ptrs = np.asarray(f.get(group(op, "destination")[0]))
    vt = group(op, "value")[0]
    vals = np.broadcast_to(np.asarray(f.get(vt)), ptrs.shape)
    mask = _mask(f, op, ptrs.shape)
    if mask.any():
        f.m.heap.store(ptrs[mask], vals[mask], element_of(vt.type))
    return [TOKEN]


# --------------------------------------------------------------------------- atomics


def _rmw(mode: str, old: np.ndarray, arg: np.ndarray, t) -> np.ndarray:
    """The values an atomic read-modify-write stores (arrays of element type ``t``)."""
    et = element_of(t)
    if mode == "xchg":
        return arg
    if mode == "addf":
        return floats.to_compute(old.astype(np.float64) + arg.astype(np.float64), et.name)
    if mode in ("umax", "umin"):
        a, b = as_unsigned(old, et), as_unsigned(arg, et)
        return wrap_int(np.maximum(a, b) if mode == "umax" else np.minimum(a, b), et)
    a, b = as_signed(old, et), as_signed(arg, et)
    ops = {
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "xor": np.bitwise_xor,
        "add": np.add,
        "max": np.maximum,
        "min": np.minimum,
    }
    if mode not in ops:
        raise InterpError(f"unknown atomic mode '{mode}'")
    with np.errstate(over="ignore"):
        return wrap_int(ops[mode](a, b), et)


#: integer atomic modes whose effect on one address is a prefix scan of its updates
_SCANS = {
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "add": np.add,
    "max": np.maximum,
    "min": np.minimum,
    "umax": np.maximum,
    "umin": np.minimum,
}


def _rounds(addrs: np.ndarray) -> np.ndarray:
    """For each access, how many earlier accesses (row-major) hit the same address."""
    n = addrs.size
    order = np.argsort(addrs, kind="stable")
    s = addrs[order]
    first = np.ones(n, dtype=bool)
    first[1:] = s[1:] != s[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - start
    return rank


def _atomic_apply(heap: Heap, ptrs, args, mask, mode: str, t, cmp=None) -> np.ndarray:
    """Atomics of one op, as if performed one element at a time in row-major order.

    Accesses to distinct addresses are independent, so they run vectorized in rounds: round k
    performs every address's k-th access. ``cmp`` given: compare-and-swap (bitwise compare).
    """
    et = element_of(t)
    shape = np.shape(ptrs)
    old = np.zeros(shape, dtype=compute_dtype(et)).reshape(-1)
    live = np.nonzero(np.broadcast_to(mask, shape).reshape(-1))[0]
    if live.size == 0:
        return old.reshape(shape)
    p_all = np.asarray(ptrs).reshape(-1)[live]
    a_all = np.broadcast_to(np.asarray(args), shape).reshape(-1)[live]
    c_all = None if cmp is None else np.broadcast_to(np.asarray(cmp), shape).reshape(-1)[live]
    rank = _rounds(p_all)
    uniq = np.unique(p_all)
    if c_all is None and mode in _SCANS and rank.max() + 1 > uniq.size:
        # few hot addresses (a histogram, a global counter): one prefix scan per address
        signed = mode not in ("umax", "umin")
        for u in uniq:
            sel = np.nonzero(p_all == u)[0]
            pu = p_all[sel[:1]]
            cur = heap.load(pu, et)
            vals = as_signed(a_all[sel], et) if signed else as_unsigned(a_all[sel], et)
            start = as_signed(cur, et) if signed else as_unsigned(cur, et)
            with np.errstate(over="ignore"):
                acc = _SCANS[mode].accumulate(np.concatenate([start, vals]))
            old[live[sel]] = wrap_int(acc[:-1], et)
            heap.store(pu, wrap_int(acc[-1:], et), et)
        return old.reshape(shape)
    for k in range(int(rank.max()) + 1):
        sel = rank == k
        p = p_all[sel]
        cur = heap.load(p, et)
        old[live[sel]] = cur
        if c_all is None:
            new = _rmw(mode, cur, a_all[sel], et)
        else:
            same = to_bits(cur, et) == to_bits(c_all[sel], et)
            new = np.where(same, a_all[sel], cur)
        heap.store(p, np.asarray(new), et)
    return old.reshape(shape)


@handler("atomic_rmw_tko")
def _atomic_rmw(f: Frame, op):
    ptrs = np.asarray(f.get(op.operands[0]))
    argv = group(op, "arg")[0]
    mask = _mask(f, op, ptrs.shape)
    old = _atomic_apply(f.m.heap, ptrs, f.get(argv), mask, attr(op, "mode"), argv.type)
    return [old, TOKEN]


@handler("atomic_cas_tko")
def _atomic_cas(f: Frame, op):
    ptrs = np.asarray(f.get(op.operands[0]))
    cmpv, valv = group(op, "cmp")[0], group(op, "val")[0]
    mask = _mask(f, op, ptrs.shape)
    old = _atomic_apply(f.m.heap, ptrs, f.get(valv), mask, "xchg", valv.type, cmp=f.get(cmpv))
    return [old, TOKEN]


@handler("atomic_red_view_tko")
def _atomic_red_view(f: Frame, op):
    view: TileView = f.get(group(op, "view")[0])
    valv = group(op, "value")[0]
    vals = np.asarray(f.get(valv))
    addrs, inb = view.addresses([f.get(v) for v in group(op, "index")])
    _atomic_apply(f.m.heap, addrs, vals, inb, attr(op, "mode"), valv.type)
    return [TOKEN]


# multimem views: the interpreter models one device, so every view has a single copy


@handler("multimem_load_reduce_view_tko")
def _multimem_load(f: Frame, op):
    return _load_view(f, op)


@handler("multimem_store_view_tko")
def _multimem_store(f: Frame, op):
    return _store_view(f, op)


@handler("multimem_reduce_view_tko")
def _multimem_reduce(f: Frame, op):
    view: TileView = f.get(group(op, "view")[0])
    tv = group(op, "tile")[0]
    addrs, inb = view.addresses([f.get(v) for v in group(op, "index")])
    mode = attr(op, "reduction")
    if mode == "add" and isinstance(element_of(tv.type), FloatType):
        mode = "addf"
    _atomic_apply(f.m.heap, addrs, np.asarray(f.get(tv)), inb, mode, tv.type)
    return [TOKEN]
