"""Executes a ``cuda_tile`` kernel on the CPU: ops the spec cannot declare, control flow, grid.

Ops with ``semantics.expr`` in the spec go to :mod:`tilegen.runtime.interp.elementwise`; the ops
marked ``kind: interpreter`` are handled here, one function each, registered in ``HANDLERS``.
Region bodies of reduce/scan run vectorized: their rank-0 block arguments are bound to whole
slices, so one pass through the body combines every lane at once.
"""

from __future__ import annotations

import itertools
import re
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional, TextIO

import numpy as np

from tilegen.runtime.attributes import ArrayAttr, FloatAttr, IntegerAttr, SymbolRefAttr
from tilegen.runtime.interp import floats
from tilegen.runtime.interp import mma as mma_mod
from tilegen.runtime.interp.elementwise import attr_value, evaluate, semantics_of
from tilegen.runtime.interp.memory import Heap, TensorView, TileView, view_load, view_store
from tilegen.runtime.interp.semlib import constant_tile
from tilegen.runtime.interp.values import (
    TOKEN,
    InterpError,
    as_signed,
    as_unsigned,
    compute_dtype,
    element_of,
    from_bits,
    storage_bytes,
    to_bits,
    wrap_int,
)
from tilegen.runtime.diagnostics import format_location
from tilegen.runtime.ir import Block, Operation, Region
from tilegen.runtime.types import (
    DYNAMIC,
    FloatType,
    GatherScatterViewType,
    PartitionViewType,
    StridedViewType,
    TensorViewType,
)


@dataclass
class Signal:
    """How a block ended: ``yield``, ``continue``, ``break`` or ``return`` with its operands."""

    kind: str
    values: list


@dataclass
class Machine:
    """State shared by every tile block of one launch."""

    heap: Heap
    grid: tuple[int, int, int] = (1, 1, 1)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    globals: dict[str, int] = field(default_factory=dict)
    ops_executed: int = 0
    #: stop with an error after this many executed ops (None: no limit), e.g. for runaway loops
    max_ops: Optional[int] = None
    #: when set, one line per executed op (block id, location, op, result summaries)
    trace: Optional[TextIO] = None


HANDLERS: dict[str, Callable] = {}
#: Ops handled by the launch itself rather than executed: module, entry (run_kernel) and
#: global (allocate_globals).
STRUCTURAL = ("cuda_tile.module", "cuda_tile.entry", "cuda_tile.global")


def handler(*names: str):
    def deco(fn):
        for n in names:
            HANDLERS["cuda_tile." + n] = fn
        return fn

    return deco


class Frame:
    """Execution of one tile block: SSA environment plus its block id."""

    def __init__(self, machine: Machine, block_id: tuple[int, int, int]):
        self.m = machine
        self.block_id = block_id
        self.env: dict = {}

    # ----- values
    def get(self, v):
        try:
            return self.env[v]
        except KeyError:
            raise InterpError(f"value used before it was defined ({v!r})") from None

    def run_block(self, block: Block, args: list) -> Signal:
        for a, v in zip(block.args, args):
            self.env[a] = v
        for op in block.ops:
            sig = self.run_op(op)
            if sig is not None:
                return sig
        return Signal("yield", [])  # implicit terminator of an empty block

    def run_region(self, region: Region, args: list) -> Signal:
        if not region.blocks:
            return Signal("yield", [])
        return self.run_block(region.blocks[0], args)

    def run_op(self, op: Operation) -> Optional[Signal]:
        self.m.ops_executed += 1
        if self.m.max_ops is not None and self.m.ops_executed > self.m.max_ops:
            raise InterpError(f"stopped after executing {self.m.max_ops} ops (--max-ops)", op)
        try:
            h = HANDLERS.get(op.name)
            if h is not None:
                res = h(self, op)
            else:
                sem = semantics_of(op.opdef)
                if sem is None or sem.expr is None:
                    raise InterpError(f"the interpreter has no semantics for '{op.name}'")
                res = evaluate(op, op.opdef, sem, [self.get(v) for v in op.operands])
        except InterpError as e:
            if e.op is None:
                e.op = op
            raise
        except (ArithmeticError, LookupError, TypeError, ValueError) as e:
            # an operand the op cannot take (ill-typed IR the verifier did not see, ...)
            raise InterpError(f"cannot execute: {type(e).__name__}: {e}", op) from e
        if self.m.trace is not None:
            self._trace(op, res.values if isinstance(res, Signal) else res)
        if isinstance(res, Signal):
            return res
        if res is not None:
            for r, v in zip(op.results, res):
                self.env[r] = v
        return None

    def _trace(self, op: Operation, res) -> None:
        parts = [_summary(v) for v in (res or [])]
        where = format_location(op.loc)
        self.m.trace.write(
            f"[{','.join(map(str, self.block_id))}] {where}: {op.name}"
            + (f" -> {'; '.join(parts)}" if parts else "")
            + "\n"
        )


# --------------------------------------------------------------------------- helpers


def _summary(v) -> str:
    """A short description of a value for --trace."""
    if isinstance(v, np.ndarray) or isinstance(v, np.generic):
        a = np.asarray(v)
        if a.size == 1:
            return f"{a.dtype}{list(a.shape)} {a.reshape(-1)[0].item()}"
        if a.dtype.kind in "fiub" and a.size:
            with np.errstate(all="ignore"):
                return f"{a.dtype}{list(a.shape)} min={a.min().item()} max={a.max().item()}"
        return f"{a.dtype}{list(a.shape)}"
    return type(v).__name__ if not isinstance(v, str) else v


def scalar(v) -> int:
    return int(np.asarray(v).reshape(()).astype(np.int64))


def group(op: Operation, name: str) -> list:
    return op.opdef.operand_group(op, name)


def attr(op: Operation, name: str):
    return attr_value(op.opdef, op, name)


# --------------------------------------------------------------------------- tokens, grid, misc


@handler(
    "make_token",
    "join_tokens",
    "gdc_wait_tko",
    "gdc_launch_dependents_tko",
    "memory_fence_alias_tko",
)
def _token(f: Frame, op):
    return [TOKEN for _ in op.results]


@handler("get_tile_block_id")
def _block_id(f: Frame, op):
    return [np.array(i, dtype=compute_dtype(r.type)) for i, r in zip(f.block_id, op.results)]


@handler("get_num_tile_blocks")
def _num_blocks(f: Frame, op):
    return [np.array(n, dtype=compute_dtype(r.type)) for n, r in zip(f.m.grid, op.results)]


@handler("return", "yield", "continue", "break")
def _terminator(f: Frame, op):
    return Signal(op.mnemonic, [f.get(v) for v in op.operands])


@handler("assert")
def _assert(f: Frame, op):
    cond = np.asarray(f.get(op.operands[0]))
    if not cond.all():
        raise InterpError(f"assertion failed: {attr(op, 'message')}")
    return []


_CONV = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|j|z|t|L)?([diuoxXeEfFgGaAcsSpn%])")


def format_printf(fmt: str, args: list, types: list) -> str:
    """printf-style formatting; a tile argument prints as ``[e0, e1, ...]``."""
    it = iter(zip(args, types))

    def one(flags: str, conv: str, x, t) -> str:
        et = element_of(t)
        if conv in "diu":
            v = int(as_unsigned(x, et)) if conv == "u" else int(as_signed(x, et))
            return ("%" + flags + "d") % v
        if conv in "oxX":
            return ("%" + flags + conv) % int(as_unsigned(x, et))
        if conv in "eEfFgG":
            return ("%" + flags + conv) % float(x)
        if conv in "aA":
            return float(x).hex()
        if conv == "c":
            return chr(int(x))
        if conv == "p":
            return hex(int(x))
        return str(x)

    def repl(m: re.Match) -> str:
        flags, _, conv = m.groups()
        if conv == "%":
            return "%"
        try:
            x, t = next(it)
        except StopIteration:
            raise InterpError("print has fewer arguments than conversions") from None
        arr = np.asarray(x)
        if arr.ndim == 0:
            return one(flags, conv, arr, t)
        return "[" + ", ".join(one(flags, conv, e, t) for e in arr.reshape(-1)) + "]"

    return _CONV.sub(repl, fmt)


@handler("print_tko", "print")
def _print(f: Frame, op):
    args = group(op, "args")
    text = format_printf(attr(op, "str"), [f.get(v) for v in args], [v.type for v in args])
    f.m.stdout.write(text)
    return [TOKEN for _ in op.results]


# --------------------------------------------------------------------------- globals


def allocate_globals(machine: Machine, module: Operation) -> None:
    for region in module.regions:
        for block in region.blocks:
            for g in block.ops:
                if g.name != "cuda_tile.global":
                    continue
                value = g.attributes.get("value")
                t = value.type
                arr = constant_tile(value, t)
                name = g.attributes["sym_name"].value
                machine.globals[name] = machine.heap.alloc_array(arr, t.element, name=f"@{name}")


@handler("get_global")
def _get_global(f: Frame, op):
    ref = op.attributes.get("name")
    name = ref.root if isinstance(ref, SymbolRefAttr) else getattr(ref, "value", str(ref))
    if name not in f.m.globals:
        raise InterpError(f"unknown global @{name}")
    return [np.array(f.m.globals[name], dtype=np.uint64)]


@handler("alloca")
def _alloca(f: Frame, op):
    t = op.results[0].type
    n = attr(op, "num_elem")
    align = attr(op, "alignment") or 16
    addr = f.m.heap.alloc(
        int(n) * storage_bytes(element_of(t).pointee), align=int(align), name="alloca"
    )
    return [np.array(addr, dtype=np.uint64)]


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


# --------------------------------------------------------------------------- control flow


@handler("if")
def _if(f: Frame, op):
    cond = bool(np.asarray(f.get(op.operands[0])).reshape(()))
    region = op.regions[0] if cond else (op.regions[1] if len(op.regions) > 1 else None)
    if region is None or not region.blocks:
        return []
    sig = f.run_region(region, [])
    if sig.kind == "yield":
        return sig.values
    return sig  # continue / break / return leave the enclosing loop or kernel


@handler("for")
def _for(f: Frame, op):
    lb, ub, step = (f.get(v) for v in op.operands[:3])
    it_t = op.operands[0].type
    unsigned = bool(attr(op, "unsignedCmp"))
    conv = (
        (lambda x: int(as_unsigned(x, it_t))) if unsigned else (lambda x: int(as_signed(x, it_t)))
    )
    i, hi, st = conv(lb), conv(ub), conv(step)
    if st <= 0:
        raise InterpError(f"for loop step must be positive, got {st}")
    iters = [f.get(v) for v in group(op, "initValues")]
    body = op.regions[0].blocks[0]
    dt = compute_dtype(it_t)
    while i < hi:
        iv = wrap_int(np.array(i, dtype=np.uint64 if unsigned else np.int64), element_of(it_t))
        sig = f.run_block(body, [np.asarray(iv, dtype=dt)] + iters)
        if sig.kind == "return":
            return sig
        if sig.kind == "break":
            return sig.values
        iters = sig.values
        i += st
    return iters


@handler("loop")
def _loop(f: Frame, op):
    iters = [f.get(v) for v in group(op, "initValues")]
    body = op.regions[0].blocks[0]
    while True:
        sig = f.run_block(body, iters)
        if sig.kind == "break":
            return sig.values
        if sig.kind == "return":
            return sig
        iters = sig.values


# --------------------------------------------------------------------------- reduce / scan


def _identities(op) -> list:
    """The reduce/scan identities as rank-0 tiles."""
    ids = op.attributes.get("identities")
    out = []
    for a in ids.values if isinstance(ids, ArrayAttr) else ids:
        if isinstance(a, FloatAttr):
            if a.bits is not None:
                out.append(from_bits(np.array(a.bits, dtype=np.uint64), a.type).reshape(()))
            else:
                out.append(floats.to_compute(np.array(a.value, dtype=np.float64), a.type.name))
        elif isinstance(a, IntegerAttr):
            mask = np.uint64((1 << 64) - 1)
            out.append(wrap_int(np.array(a.value & int(mask), dtype=np.uint64), a.type).reshape(()))
        else:
            raise InterpError(f"unsupported reduction identity {a}")
    return out


def _combine(f: Frame, body: Block, cur: list, prev: list) -> list:
    args = []
    for c, p in zip(cur, prev):
        args += [c, p]
    sig = f.run_block(body, args)
    return [np.asarray(v) for v in sig.values]


@handler("reduce")
def _reduce(f: Frame, op):
    xs = [np.asarray(f.get(v)) for v in op.operands]
    dim = attr(op, "dim")
    ids = _identities(op)
    body = op.regions[0].blocks[0]
    xs = [np.moveaxis(x, dim, 0) for x in xs]
    n = xs[0].shape[0]
    p2 = 1
    while p2 < n:
        p2 *= 2
    if p2 != n:  # pad with identities to a power of two
        xs = [
            np.concatenate([x, np.broadcast_to(i.astype(x.dtype), (p2 - n,) + x.shape[1:])])
            for x, i in zip(xs, ids)
        ]
    while xs[0].shape[0] > 1:  # pairwise tree: element k combines with element k + half
        h = xs[0].shape[0] // 2
        new = _combine(f, body, [x[h:] for x in xs], [x[:h] for x in xs])
        xs = [np.broadcast_to(v, (h,) + x.shape[1:]) for v, x in zip(new, xs)]
    out = []
    for x, r in zip(xs, op.results):
        val = x[0] if n else np.broadcast_to(ids[len(out)], tuple(r.type.shape))
        out.append(np.array(val, dtype=compute_dtype(r.type), order="C"))
    return out


@handler("scan")
def _scan(f: Frame, op):
    xs = [np.moveaxis(np.asarray(f.get(v)), attr(op, "dim"), 0) for v in op.operands]
    dim = attr(op, "dim")
    ids = _identities(op)
    body = op.regions[0].blocks[0]
    n = xs[0].shape[0]
    order = range(n - 1, -1, -1) if attr(op, "reverse") else range(n)
    acc = [np.broadcast_to(i.astype(x.dtype), x.shape[1:]) for i, x in zip(ids, xs)]
    outs = [np.empty_like(x) for x in xs]
    for k in order:
        acc = _combine(f, body, [x[k] for x in xs], acc)
        for o, a in zip(outs, acc):
            o[k] = a
    return [np.array(np.moveaxis(o, 0, dim), order="C") for o in outs]


# --------------------------------------------------------------------------- mma


@handler("mmaf", "mmai", "mmaf_scaled")
def _mma(f: Frame, op):
    return [mma_mod.mma(op, [f.get(v) for v in op.operands], attr)]


# --------------------------------------------------------------------------- launch


def run_kernel(
    machine: Machine, entry: Operation, flat_args: list, max_blocks: Optional[int] = None
) -> None:
    """Run ``entry`` once per tile block of ``machine.grid`` (x fastest)."""
    body = entry.regions[0].blocks[0]
    gx, gy, gz = machine.grid
    count = 0
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                frame = Frame(machine, (x, y, z))
                frame.run_block(body, flat_args)
                count += 1
                if max_blocks is not None and count >= max_blocks:
                    return
