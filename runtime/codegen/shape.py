"""Shape ops as element exchanges (``exchange``): splat, broadcast, view (reshape), permute,
convert_layout, extract_slice, cat, extract, make_range."""

from __future__ import annotations

from tilegen.runtime.attributes import IntegerAttr
from tilegen.runtime.codegen import affine
from tilegen.runtime.codegen.epilogue import done
from tilegen.runtime.codegen.core import (
    Emitter,
    elem_info,
    fail,
    handles,
    is_tile,
    load_reg,
    store_reg,
)
from tilegen.runtime.codegen.exchange import (
    Form,
    claim_scratch,
    scratch_size,
    exchange,
    read_scalar,
    row_major,
)
from tilegen.runtime.ir import OpResult


def const_int(v):
    """The value of an integer constant SSA value, else None."""
    op = v.op if isinstance(v, OpResult) else None
    while op is not None and op.name in ("nv_tileaa.assume",):
        v = op.operands[0]
        op = v.op if isinstance(v, OpResult) else None
    if op is not None and op.name == "arith.constant":
        a = op.attributes.get("value")
        if isinstance(a, IntegerAttr):
            return a.value
    return None


def _size(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _same(em: Emitter, op, src, form_w: Form, form_r: Form, size: int):
    """One-source exchange of ``src`` into ``op``'s result."""
    res = op.results[0]
    cls, esize, _ = elem_info(op, res.type)
    sd = em.dist_of(op, src.type)
    rd = em.dist_of(op, res.type)
    regs = exchange(em, cls, esize, [(em.tile(op, src), sd, form_w)], rd, form_r, size, op)
    em.set(res, regs)


@handles("nv_tileaa.splat")
def splat(em: Emitter, op) -> None:
    if done(em, op):  # emitted ahead of a fused dot epilogue
        return
    res = op.results[0]
    x = em.scalar(op, op.operands[0])
    if not is_tile(res.type):
        em.set(res, x)
        return
    d = em.dist_of(op, res.type)
    em.set(res, [x] * d.nregs)


@handles("nv_tileaa.broadcast")
def broadcast(em: Emitter, op) -> None:
    if done(em, op):  # emitted ahead of a fused dot epilogue
        return
    src, res = op.operands[0], op.results[0]
    if not is_tile(src.type):
        return splat(em, op)
    kind = getattr(em, "fragment_order", {}).get(res)
    if kind is not None:  # a side vector beside the async loop's registers (async_forms)
        from tilegen.runtime.codegen import fragment_sides

        return fragment_sides.broadcast(em, op, kind)
    ss, rs = tuple(src.type.shape), tuple(res.type.shape)
    w = row_major(ss)
    # read: the source coordinate is 0 along broadcast dims
    r = Form(0, tuple(m if ss[i] == rs[i] else 0 for i, m in enumerate(w.mults)))
    _same(em, op, src, w, r, _size(ss))


@handles("nv_tileaa.view", "nv_tileaa.expand_dims", "nv_tileas.convert_layout")
def view(em: Emitter, op) -> None:
    if done(em, op):  # emitted ahead of a fused dot epilogue
        return
    src, res = op.operands[0], op.results[0]
    if not is_tile(src.type) or not is_tile(res.type):
        if not is_tile(src.type) and not is_tile(res.type):
            em.set(res, em.get(src))
            return
        if not is_tile(src.type):  # scalar / 0-d -> tile of one element
            return splat(em, op)
        # tile of one element -> 0-d
        cls, esize, _ = elem_info(op, src.type)
        d = em.dist_of(op, src.type)
        em.set(
            res,
            read_scalar(
                em, cls, esize, [(em.tile(op, src), d, row_major(src.type.shape))], 0, 1, op
            ),
        )
        return
    if res in getattr(em, "fragment_order", {}):  # unit dims on a fragment (async_forms)
        em.set(res, em.get(src))
        return
    n = _size(res.type.shape)
    _same(em, op, src, row_major(src.type.shape), row_major(res.type.shape), n)


@handles("nv_tileaa.permute")
def permute(em: Emitter, op) -> None:
    src, res = op.operands[0], op.results[0]
    perm = [int(x) for x in op.attributes["permutation"].values]
    rs = tuple(res.type.shape)
    r = row_major(rs)
    # result dim i is source dim perm[i]: write each source element at its result position
    mults = [0] * len(perm)
    for i, p in enumerate(perm):
        mults[p] = r.mults[i]
    _same(em, op, src, Form(0, tuple(mults)), r, _size(rs))


def _sub(em: Emitter, op, src, offs, res) -> None:
    """``res`` = the sub-tile of ``src`` at per-dim offsets ``offs`` (SSA values, leading dims;
    the rest 0); the result's dims are the source's last ``res.rank`` dims."""
    ss = tuple(src.type.shape)
    w = row_major(ss)
    lead = len(ss) - len(res.type.shape)  # dims indexed away (extract)
    rmults = w.mults[lead:]
    static = [const_int(v) for v in offs]
    cls, esize, _ = elem_info(op, res.type)
    sd, rd = em.dist_of(op, src.type), em.dist_of(op, res.type)
    if all(s is not None for s in static):
        r = Form(sum(m * o for m, o in zip(w.mults, static)), rmults)
        em.set(res, exchange(em, cls, esize, [(em.tile(op, src), sd, w)], rd, r, _size(ss), op))
        return
    # dynamic offsets: through shared memory, the offset added at run time
    isize = scratch_size(cls, esize)
    base = claim_scratch(em, op, _size(ss) * isize) // isize
    src_regs = em.tile(op, src)
    for j in range(sd.nregs):
        idx = w.shifted(base).emit(em, sd, j)
        r_, st = store_reg(em, cls, src_regs[j])
        em.ins(f"st.shared.{st} [{em.smem_addr(idx, isize)}], {r_}")
    em.barrier()
    off = em.lincomb(base, [(m, em.scalar(op, v)) for m, v in zip(w.mults, offs)])
    out = []
    for k in range(rd.nregs):
        terms = [(m, em.coord(rd, k, i)) for i, m in enumerate(rmults)]
        idx = em.lincomb(0, terms + [(1, off)])
        out.append(load_reg(em, cls, "shared", em.smem_addr(idx, isize)))
    em.set(res, out)


@handles("nv_tileaa.extract_slice")
def extract_slice(em: Emitter, op) -> None:
    _sub(em, op, op.operands[0], op.operands[1:], op.results[0])


@handles("nv_tileaa.cat")
def cat(em: Emitter, op) -> None:
    a, b = op.operands[0], op.operands[1]
    res = op.results[0]
    dim = op.attributes["dim"].value
    rs = tuple(res.type.shape)
    r = row_major(rs)
    shift = [0] * len(rs)
    shift[dim] = a.type.shape[dim]
    wa = r
    wb = row_major(rs, shift=shift)
    cls, esize, _ = elem_info(op, res.type)
    writes = [
        (em.tile(op, a), em.dist_of(op, a.type), wa),
        (em.tile(op, b), em.dist_of(op, b.type), wb),
    ]
    em.set(res, exchange(em, cls, esize, writes, em.dist_of(op, res.type), r, _size(rs), op))


@handles("nv_tileaa.extract")
def extract(em: Emitter, op) -> None:
    src, res = op.operands[0], op.results[0]
    idx = op.operands[1:]
    if is_tile(res.type):  # leading indices: a sub-tile
        return _sub(em, op, src, idx, res)
    ss = tuple(src.type.shape)
    w = row_major(ss)
    cls, esize, _ = elem_info(op, src.type)
    static = [const_int(v) for v in idx]
    if all(s is not None for s in static):
        index = w.at(static)
    else:
        index = em.lincomb(0, [(m, em.scalar(op, v)) for m, v in zip(w.mults, idx)])
    d = em.dist_of(op, src.type)
    em.set(res, read_scalar(em, cls, esize, [(em.tile(op, src), d, w)], index, _size(ss), op))


@handles("nv_tileaa.make_range")
def make_range(em: Emitter, op) -> None:
    res = op.results[0]
    start = op.attributes.get("start")
    start = start.value if start is not None else 0
    cls, _, _ = elem_info(op, res.type)
    d = em.dist_of(op, res.type)
    out = []
    wide: dict = {}  # 32-bit base coordinate -> its 64-bit copy (codegen/affine.py)
    for k in range(d.nregs):
        c = em.coord(d, k, 0)
        if isinstance(c, int):
            out.append(em.mov(cls, c + start))
            affine.record(em, out[-1], None, c + start, 0 <= c + start < affine.SMALL)
            continue
        f = affine.fact(em, c)
        if cls == "b64":
            r = em.new("b64")
            em.ins(f"cvt.u64.u32 {r}, {c}")
            if start:
                em.ins(f"add.s64 {r}, {r}, {start}")
            if f is not None and f[0] is not None:
                if f[0] not in wide:
                    wide[f[0]] = em.new("b64")
                    em.ins(f"cvt.u64.u32 {wide[f[0]]}, {f[0]}")
                affine.record(em, r, wide[f[0]], f[1] + start, f[2] and 0 <= start < affine.SMALL)
        elif cls == "b32":
            r = c
            if start:
                r = em.new("b32")
                em.ins(f"add.s32 {r}, {c}, {start}")
                if f is not None:
                    affine.record(em, r, f[0], f[1] + start, f[2] and 0 <= start < affine.SMALL)
        else:
            fail(op, f"PTX backend does not support make_range of {res.type.element} yet")
        out.append(r)
    em.set(res, out)
