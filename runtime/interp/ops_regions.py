"""Hand-written region ops: if / for / loop (with break and continue), reduce and scan.

reduce combines pairwise as a tree (element k with k + n/2, ...), scan runs sequentially; both
run their body once per step for all lanes at once (rank-0 block arguments bound to slices)."""

from __future__ import annotations

import numpy as np

from tilegen.runtime.attributes import ArrayAttr, FloatAttr, IntegerAttr
from tilegen.runtime import floats
from tilegen.runtime.interp.executor import Frame, attr, group, handler
from tilegen.runtime.interp.values import (
    InterpError,
    as_signed,
    as_unsigned,
    compute_dtype,
    element_of,
    from_bits,
    wrap_int,
)
from tilegen.runtime.ir import Block

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
    """Inclusive scan: the first element along the axis is itself, each later one combines
    with the running value. The identity is not folded in: with ``maxf`` (NaN-ignoring) a
    leading NaN stays NaN, as tileiras's PTX keeps it (lane 0 takes its own value) and as the
    nv_tileaa interpreter and tilegen's PTX do."""
    xs = [np.moveaxis(np.asarray(f.get(v)), attr(op, "dim"), 0) for v in op.operands]
    dim = attr(op, "dim")
    body = op.regions[0].blocks[0]
    n = xs[0].shape[0]
    order = range(n - 1, -1, -1) if attr(op, "reverse") else range(n)
    acc = None
    outs = [np.empty_like(x) for x in xs]
    for k in order:
        cur = [x[k] for x in xs]
        acc = cur if acc is None else _combine(f, body, cur, acc)
        for o, a in zip(outs, acc):
            o[k] = a
    return [np.array(np.moveaxis(o, 0, dim), order="C") for o in outs]
