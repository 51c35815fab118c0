"""Reductions and scans along one axis of a laid-out tile (``nv_tileaa.reduce`` / ``scan``).

Reduce (Triton's scheme), for an input in layout ``L`` and a result in ``SliceLayout(axis, L)``:

1. in-thread: registers of one thread that share the result coordinate are combined pairwise;
2. across lanes: ``shfl.sync.bfly`` over each lane bit that moves along the axis *within* the
   tile (bits that only reach replicated copies, ``coord >= n``, are skipped, so no element is
   combined twice);
3. across warps (when warp bits move along the axis): each warp's partial goes to shared memory,
   ``bar.sync``, and every thread combines the partials of its result elements in warp order.

Every thread then holds the result for each register of the slice layout. The combiner region
is emitted inline per combination, its block arguments being (cur..., prev...) - the later
element first, as the interpreter orders them. The lane butterfly assumes the combiner is
commutative (as every reduction the frontend produces is).

Scan: the tile goes to shared memory as ``[line][axis]``; one thread per line runs the inclusive
scan serially in a PTX loop (backwards for ``reverse``); after ``bar.sync`` every thread reads its
registers back.
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import (
    WARP,
    Emitter,
    elem_info,
    fail,
    handles,
    is_tile,
    load_reg,
    store_reg,
)
from tilegen.runtime.codegen.exchange import Form, row_major, scratch_size
from tilegen.runtime.layouts.attrs import SliceLayout


# ----------------------------------------------------------------------------- regions
def run_region(em: Emitter, block, args) -> list:
    """Emit ``block`` with its arguments bound to ``args``; the terminator's operand values."""
    for a, v in zip(block.args, args):
        em.set(a, v)
    for op in block.ops[:-1]:
        em.emit_op(op)
    return [em.get(v) for v in block.ops[-1].operands]


def as_reg(em: Emitter, cls: str, v) -> str:
    """``v`` in a register of class ``cls`` (immediates are moved in)."""
    if isinstance(v, str) and v.startswith("%"):
        return v
    if cls == "pred":
        r = em.new("pred")
        em.ins(f"setp.ne.u32 {r}, {v}, 0")
        return r
    return em.mov(cls, v)


# ----------------------------------------------------------------------------- shuffles
def shfl_bfly(em: Emitter, cls: str, x: str, lanemask: int) -> str:
    """``x`` of the lane ``lane ^ lanemask`` (whole warp converged)."""

    def b32(v: str) -> str:
        r = em.new("b32")
        em.ins(f"shfl.sync.bfly.b32 {r}, {v}, {lanemask}, 31, -1")
        return r

    if cls in ("b32", "f32"):
        r = em.new(cls)
        em.ins(f"shfl.sync.bfly.b32 {r}, {x}, {lanemask}, 31, -1")
        return r
    if cls in ("b64", "f64"):
        lo, hi = em.new("b32"), em.new("b32")
        em.ins(f"mov.b64 {{{lo}, {hi}}}, {x}")
        lo, hi = b32(lo), b32(hi)
        r = em.new(cls)
        em.ins(f"mov.b64 {r}, {{{lo}, {hi}}}")
        return r
    if cls == "b16":
        w = em.new("b32")
        em.ins(f"cvt.u32.u16 {w}, {x}")
        w = b32(w)
        r = em.new("b16")
        em.ins(f"cvt.u16.u32 {r}, {w}")
        return r
    w = em.new("b32")
    em.ins(f"selp.u32 {w}, 1, 0, {x}")
    w = b32(w)
    r = em.new("pred")
    em.ins(f"setp.ne.u32 {r}, {w}, 0")
    return r


# ----------------------------------------------------------------------------- reduce
def _tree(em: Emitter, body, classes, vals: list) -> list:
    """Combine per-position value tuples pairwise (position order kept: (cur=later, prev))."""
    while len(vals) > 1:
        nxt = []
        for i in range(0, len(vals) - 1, 2):
            out = run_region(em, body, list(vals[i + 1]) + list(vals[i]))
            nxt.append(tuple(as_reg(em, c, v) for c, v in zip(classes, out)))
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def _regions(infos, count: int) -> tuple[list[int], int]:
    """Byte offsets of one shared array of ``count`` elements per operand; total bytes."""
    offs, total = [], 0
    for cls, esize, _ in infos:
        isize = scratch_size(cls, esize)
        total = (total + 7) // 8 * 8
        offs.append(total)
        total += count * isize
    return offs, total


def _smem_at(em: Emitter, off: int, index, isize: int) -> str:
    """Shared address ``scratch + off + index * isize`` (index: int or b32 register)."""
    base = em.smem_base()
    r = em.new("b32")
    if isinstance(index, int):
        em.ins(f"add.s32 {r}, {base}, {off + index * isize}")
        return r
    em.ins(f"mad.lo.s32 {r}, {index}, {isize}, {base}")
    if off:
        em.ins(f"add.s32 {r}, {r}, {off}")
    return r


@handles("nv_tileaa.reduce")
def reduce_(em: Emitter, op) -> None:
    axis = op.attributes["axis"].value
    body = op.regions[0].blocks[0]
    in_t = op.operands[0].type
    if not is_tile(in_t):
        fail(op, "PTX backend does not support reductions of scalars yet")
    d = em.dist_of(op, in_t)
    for v in op.operands[1:]:
        if v.type.encoding != in_t.encoding or tuple(v.type.shape) != tuple(in_t.shape):
            fail(op, "PTX backend does not support reduce operands in different layouts yet")
    infos = [elem_info(op, v.type) for v in op.operands]
    classes = [i[0] for i in infos]
    tiles = [em.tile(op, v) for v in op.operands]
    ra, n = d.kept[axis], in_t.shape[axis]
    others = [r for r in range(d.root.rank) if r != ra]
    out_t = op.results[0].type
    rdist = None
    if is_tile(out_t):
        if out_t.encoding != SliceLayout(axis, in_t.encoding):
            fail(op, f"PTX backend does not support reduce results in layout {out_t.encoding} yet")
        rdist = em.dist_of(op, out_t)

    # (1) in-thread: unique elements grouped by their coordinate off the axis
    groups: dict = {}
    for k in range(d.nregs):
        raw = d.raw[k]
        key = tuple(raw[r] % d.pshape[r] for r in others)
        groups.setdefault(key, {}).setdefault(raw[ra] % n, k)
    part = {}
    for key, bypos in groups.items():
        vals = [tuple(t[bypos[p]] for t in tiles) for p in sorted(bypos)]
        part[key] = _tree(em, body, classes, vals)

    # (2) across lanes
    lane_bits = [b for b in range(5) if 0 < d.base(1 << b)[ra] < n]
    for b in lane_bits:
        for key, vals in part.items():
            other = tuple(shfl_bfly(em, c, x, 1 << b) for c, x in zip(classes, vals))
            out = run_region(em, body, list(other) + list(vals))
            part[key] = tuple(as_reg(em, c, v) for c, v in zip(classes, out))

    # result registers -> groups
    if rdist is None:
        keys = [next(iter(part))] if len(part) == 1 else None
        if keys is None:
            fail(op, "PTX backend: rank-0 reduce result spans several groups")
    else:
        keys = []
        for k in range(rdist.nregs):
            key = tuple(rdist.raw[k][r] % rdist.pshape[r] for r in others)
            if key not in part:
                fail(op, "PTX backend: reduce result layout does not match its input")
            keys.append(key)

    # (3) across warps
    warp_bits = [
        b for b in range(d.root.num_threads().bit_length() - 6) if 0 < d.base(WARP << b)[ra] < n
    ]
    if warp_bits:
        nw = 1 << len(warp_bits)
        if warp_bits != list(range(warp_bits[0], warp_bits[0] + len(warp_bits))):
            fail(op, "PTX backend does not support this reduce layout yet")
        nflat = 1
        for s in out_t.shape if rdist is not None else ():
            nflat *= s
        offs, total = _regions(infos, nflat * nw)
        em.need_smem(total)
        _, lane, warp = em.tid()
        wa = em.new("b32")
        em.ins(f"shr.u32 {wa}, {warp}, {warp_bits[0]}")
        em.ins(f"and.b32 {wa}, {wa}, {nw - 1}")
        guard = ""
        if lane_bits:
            lm = sum(1 << b for b in lane_bits)
            t, p = em.new("b32"), em.new("pred")
            em.ins(f"and.b32 {t}, {lane}, {lm}")
            em.ins(f"setp.eq.u32 {p}, {t}, 0")
            guard = f"@{p} "
        form = row_major(out_t.shape) if rdist is not None else Form(0, ())
        flats = {}
        for k, key in enumerate(keys):
            if key not in flats:
                flats[key] = form.emit(em, rdist, k) if rdist is not None else 0
        em.barrier()
        for key, f in flats.items():
            slot = em.lincomb(0, [(nw, f), (1, wa)])
            for (cls, esize, _), off, x in zip(infos, offs, part[key]):
                isize = scratch_size(cls, esize)
                r, st = store_reg(em, cls, x)
                em.ins(f"{guard}st.shared.{st} [{_smem_at(em, off, slot, isize)}], {r}")
        em.barrier()
        for key, f in flats.items():
            vals = []
            for j in range(nw):
                slot = em.lincomb(j, [(nw, f)])
                vals.append(
                    tuple(
                        load_reg(
                            em,
                            cls,
                            "shared",
                            _smem_at(em, off, slot, scratch_size(cls, esize)),
                        )
                        for (cls, esize, _), off in zip(infos, offs)
                    )
                )
            part[key] = _tree(em, body, classes, vals)

    for i, res in enumerate(op.results):
        if rdist is None:
            em.set(res, part[keys[0]][i])
        else:
            em.set(res, [part[key][i] for key in keys])


# ----------------------------------------------------------------------------- scan
@handles("nv_tileaa.scan")
def scan(em: Emitter, op) -> None:
    axis = op.attributes["axis"].value
    if "inclusive" in op.attributes and not op.attributes["inclusive"].value:
        fail(op, "PTX backend does not support exclusive scans yet")
    reverse = "reverse" in op.attributes and bool(getattr(op.attributes["reverse"], "value", 1))
    body = op.regions[0].blocks[0]
    in_t = op.operands[0].type
    if not is_tile(in_t):
        fail(op, "PTX backend does not support scans of scalars yet")
    for v in list(op.operands) + list(op.results):
        if v.type.encoding != in_t.encoding or tuple(v.type.shape) != tuple(in_t.shape):
            fail(op, "PTX backend does not support scans across layouts yet")
    d = em.dist_of(op, in_t)
    infos = [elem_info(op, v.type) for v in op.operands]
    tiles = [em.tile(op, v) for v in op.operands]
    shape = tuple(in_t.shape)
    n = shape[axis]
    lines = 1
    for i, s in enumerate(shape):
        if i != axis:
            lines *= s
    # flat = line * n + position, line row-major over the other dims
    mults, s = [0] * len(shape), n
    for i in reversed(range(len(shape))):
        if i != axis:
            mults[i] = s
            s *= shape[i]
    mults[axis] = 1
    form = Form(0, tuple(mults))
    offs, total = _regions(infos, lines * n)
    em.need_smem(total)
    isizes = [scratch_size(cls, esize) for cls, esize, _ in infos]

    em.barrier()
    for k in range(d.nregs):
        p = em.canonical(d, k)
        if p == "0":
            continue
        guard = f"@{p} " if p else ""
        for (cls, _, _), off, isize, t in zip(infos, offs, isizes, tiles):
            r, st = store_reg(em, cls, t[k])
            em.ins(f"{guard}st.shared.{st} {em.smem_ref(d, form, k, isize, off)}, {r}")
    em.barrier()

    if n > 1:
        tid, _, _ = em.tid()
        line = em.mov("b32", tid)
        head, done = em.new_label("scan_line"), em.new_label("scan_done")
        loop = em.new_label("scan_step")
        em.label(head)
        p = em.new("pred")
        em.ins(f"setp.ge.u32 {p}, {line}, {lines}")
        em.ins(f"@{p} bra {done}")
        first = em.new("b32")
        em.ins(f"mul.lo.s32 {first}, {line}, {n}")
        if reverse:
            em.ins(f"add.s32 {first}, {first}, {n - 1}")
        accs = []
        for (cls, _, _), off, isize in zip(infos, offs, isizes):
            accs.append(load_reg(em, cls, "shared", _smem_at(em, off, first, isize)))
        i = em.mov("b32", 1)
        pos = em.mov("b32", first)
        em.label(loop)
        em.ins(f"add.s32 {pos}, {pos}, {-1 if reverse else 1}")
        addrs = [_smem_at(em, off, pos, isize) for off, isize in zip(offs, isizes)]
        cur = [load_reg(em, cls, "shared", a) for (cls, _, _), a in zip(infos, addrs)]
        out = run_region(em, body, cur + accs)
        for (cls, _, _), acc, v, a in zip(infos, accs, out, addrs):
            em.ins(f"mov.{cls} {acc}, {v}")
            r, st = store_reg(em, cls, acc)
            em.ins(f"st.shared.{st} [{a}], {r}")
        em.ins(f"add.s32 {i}, {i}, 1")
        q = em.new("pred")
        em.ins(f"setp.lt.u32 {q}, {i}, {n}")
        em.ins(f"@{q} bra {loop}")
        em.ins(f"add.s32 {line}, {line}, {em.num_threads}")
        em.ins(f"bra {head}")
        em.label(done)
        em.barrier()

    for res, (cls, _, _), off, isize in zip(op.results, infos, offs, isizes):
        out = []
        for k in range(d.nregs):
            ref = em.smem_ref(d, form, k, isize, off)
            out.append(load_reg(em, cls, "shared", ref[1:-1]))
        em.set(res, out)


@handles("nv_tileaa.yield")
def yield_(em: Emitter, op) -> None:
    """Terminators are read by their parent op (:func:`run_region`); never emitted alone."""
    fail(op, "PTX backend: 'nv_tileaa.yield' outside a reduce/scan region")
