"""Reductions and scans along one axis of a laid-out tile (``nv_tileaa.reduce`` / ``scan``).

Reduce (Triton's scheme), for an input in layout ``L`` and a result in ``SliceLayout(axis, L)``:

1. in-thread: registers of one thread that share the result coordinate (a *group*) are combined
   pairwise;
2. across lanes: ``shfl.sync.bfly`` over each lane bit that moves along the axis *within* the
   tile (bits that only reach replicated copies, ``coord >= n``, are skipped, so no element is
   combined twice). With several groups per thread the first steps are *packed*
   (:func:`_pack_steps` weighs it): the lanes of a pair swap half of their groups - one shuffle
   serves two groups - and each keeps the other half, so after ``p`` steps a lane holds
   ``groups / 2**p`` partials, which ones chosen by its lane bits (the flat index of each held
   result element travels along, selected the same way);
3. across warps (when warp bits move along the axis): each warp's partials go to shared memory as
   ``[element][warp]``, ``bar.sync``; with one group per thread every thread combines the
   partials of its element in warp order (vector loads), else one thread per result element does
   it and writes ``[element]``, ``bar.sync``, and every thread reads its results (vector loads
   where the flat indices are static and contiguous). Packed lanes without a warp step gather
   their results the same way.

Every thread then holds the result for each register of the slice layout. The combiner region
is emitted inline per combination, its block arguments being (cur..., prev...) - the later
element first, as the interpreter orders them. The lane butterfly assumes the combiner is
commutative (as every reduction the frontend produces is).

Scan (:func:`scan`) is parallel: a serial scan of each thread's contiguous run, a Hillis-Steele
scan of the runs' totals over the lanes along the axis (``shfl.sync.up``, ``down`` for
``reverse``), the warps' totals through shared memory, then the totals of earlier repetitions of
the CTA tile along the axis. It calls the combiner as (later, earlier) only, so an associative
one suffices. Non-power-of-two extents fall back to :func:`_scan_serial` (the tile through shared
memory, one thread per line).
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
from tilegen.runtime.codegen.exchange import (
    Form,
    GroupExchange,
    claim_scratch,
    flats,
    row_major,
    scratch_size,
    shfl,
)
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
    return shfl(em, cls, x, "bfly", lanemask)


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


def _smem_at(em: Emitter, off: int, index, isize: int, base=None) -> str:
    """Shared address ``base + off + index * isize`` (index: int or b32 register; base: the
    scratch's register unless given)."""
    base = base or em.smem_base()
    r = em.new("b32")
    if isinstance(index, int):
        em.ins(f"add.s32 {r}, {base}, {off + index * isize}")
        return r
    em.ins(f"mad.lo.s32 {r}, {index}, {isize}, {base}")
    if off:
        em.ins(f"add.s32 {r}, {r}, {off}")
    return r


def select(em: Emitter, cls: str, p: str, a, b) -> str:
    """``p ? a : b`` in a register of class ``cls``."""
    if a == b:
        return as_reg(em, cls, a)
    if cls == "pred":
        r = em.mov("pred", b)
        em.ins(f"@{p} mov.pred {r}, {a}")
        return r
    r = em.new(cls)
    em.ins(f"selp.{cls} {r}, {a}, {b}, {p}")
    return r


def lane_bit(em: Emitter, b: int) -> str:
    """A predicate: bit ``b`` of the lane id is set."""
    _, lane, _ = em.tid()
    t, p = em.new("b32"), em.new("pred")
    em.ins(f"and.b32 {t}, {lane}, {1 << b}")
    em.ins(f"setp.ne.u32 {p}, {t}, 0")
    return p


_VEC_TYPES = {"b32", "f32", "b64", "f64"}


def _ld_run(em: Emitter, cls: str, addr: str, count: int, isize: int, pred=None) -> list:
    """``count`` consecutive elements from the shared address ``addr`` (aligned to
    ``count * isize`` bytes when ``count`` > 1): vector loads where the class allows."""
    if count in (2, 4) and cls in _VEC_TYPES and count * isize <= 16:
        regs = [em.new(cls) for _ in range(count)]
        guard = f"@{pred} " if pred else ""
        em.ins(f"{guard}ld.shared.v{count}.{cls} {{{', '.join(regs)}}}, [{addr}]")
        return regs
    out = []
    for i in range(count):
        a = addr
        if i:
            a = em.new("b32")
            em.ins(f"add.s32 {a}, {addr}, {i * isize}")
        out.append(load_reg(em, cls, "shared", a, pred))
    return out


def _vec_width(cls: str, isize: int, count: int) -> int:
    """The widest vector (elements) that loads ``count`` consecutive elements in one go."""
    if cls not in _VEC_TYPES:
        return 1
    w = 1
    while w * 2 <= count and w * 2 * isize <= 16 and count % (w * 2) == 0 and w < 4:
        w *= 2
    return w


def _aligned_regions(infos, count: int) -> tuple[list[int], int]:
    """Like :func:`_regions`, each array aligned to 16 bytes (vector loads)."""
    offs, total = [], 0
    for cls, esize, _ in infos:
        total = (total + 15) // 16 * 16
        offs.append(total)
        total += count * scratch_size(cls, esize)
    return offs, (total + 15) // 16 * 16


def _words(cls: str) -> int:
    """Instructions one shuffle of a ``cls`` value costs (64-bit: two, narrow: conversions)."""
    return {"b32": 1, "f32": 1, "b64": 4, "f64": 4}.get(cls, 3)


def _pack_steps(g: int, m: int, nops: int, sw: int, cw: int, gather: bool) -> int:
    """How many lane steps fold the ``g`` per-thread groups onto the lanes (0: plain butterfly
    per group). A packed step exchanges half the groups with one shuffle each and keeps the
    other half (two selects per operand); the groups left after ``p`` steps are then the lane's
    own, so the result is gathered through shared memory (``gather``: a cost the cross-warp
    stage pays anyway otherwise)."""
    best, best_cost = 0, m * g * (sw + cw)
    for p in range(1, m + 1):
        if g % (1 << p):
            break
        cost = sum((g >> i) * (sw + cw + 2 * nops) for i in range(1, p + 1))
        cost += (m - p) * (g >> p) * (sw + cw)
        if gather:
            cost += 24 + nops * ((g >> p) + g)
        if cost < best_cost:
            best, best_cost = p, cost
    return best


def _rows_apart(d, others: list, warp_bits: list) -> bool:
    """Whether the warps outside ``warp_bits`` each hold rows (coordinates off the axis) no
    other warp holds: every such warp bit moves along a dim off the axis, inside the tile (no
    warp is a replica of another)."""
    nbits = d.root.num_threads().bit_length() - 6
    for b in range(nbits):
        if b in warp_bits:
            continue
        base = d.base(WARP << b)
        if not any(0 < base[r] < d.pshape[r] for r in others):
            return False
    return True


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
    isizes = [scratch_size(cls, esize) for cls, esize, _ in infos]
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
        part[key] = tuple(as_reg(em, c, v) for c, v in zip(classes, _tree(em, body, classes, vals)))

    lane_bits = [b for b in range(5) if 0 < d.base(1 << b)[ra] < n]
    warp_bits = [
        b for b in range(d.root.num_threads().bit_length() - 6) if 0 < d.base(WARP << b)[ra] < n
    ]
    if warp_bits and warp_bits != list(range(warp_bits[0], warp_bits[0] + len(warp_bits))):
        fail(op, "PTX backend does not support this reduce layout yet")

    # result registers -> groups; the flat (row-major) index of each group's element
    if rdist is None:
        keys = [next(iter(part))] if len(part) == 1 else None
        if keys is None:
            fail(op, "PTX backend: rank-0 reduce result spans several groups")
        nflat = 1
    else:
        keys, first = [], {}
        for k in range(rdist.nregs):
            key = tuple(rdist.raw[k][r] % rdist.pshape[r] for r in others)
            if key not in part:
                fail(op, "PTX backend: reduce result layout does not match its input")
            keys.append(key)
            first.setdefault(key, k)
        nflat = 1
        for s in out_t.shape:
            nflat *= s
    form = row_major(out_t.shape) if rdist is not None else Form(0, ())
    flat_cache: dict = {}

    def flat_of(key):
        if key not in flat_cache:
            flat_cache[key] = form.emit(em, rdist, first[key]) if rdist is not None else 0
        return flat_cache[key]

    # (2) across lanes: fold groups onto lane bits (packed steps), then a butterfly per group
    g = len(part)
    nops = len(classes)
    packable = rdist is not None and all(key in first for key in part)
    p = 0
    if packable and g > 1 and lane_bits:
        sw = sum(_words(c) for c in classes)
        cw = max(1, len(body.ops) - 1)
        p = _pack_steps(g, len(lane_bits), nops, sw, cw, gather=not warp_bits)
    held = [(part[key], key) for key in part]  # (values, key or flat)
    if p:
        held = [(vals, flat_of(key)) for vals, key in held]
        for b in lane_bits[:p]:
            q = lane_bit(em, b)
            nxt = []
            for j in range(0, len(held), 2):
                (v0, f0), (v1, f1) = held[j], held[j + 1]
                send = [select(em, c, q, x0, x1) for c, x0, x1 in zip(classes, v0, v1)]
                keep = [select(em, c, q, x1, x0) for c, x0, x1 in zip(classes, v0, v1)]
                recv = [shfl_bfly(em, c, x, 1 << b) for c, x in zip(classes, send)]
                out = run_region(em, body, recv + keep)
                f = f0 if f0 == f1 else select(em, "b32", q, f1, f0)
                nxt.append((tuple(as_reg(em, c, v) for c, v in zip(classes, out)), f))
            held = nxt
    for b in lane_bits[p:]:
        for i, (vals, tag) in enumerate(held):
            other = [shfl_bfly(em, c, x, 1 << b) for c, x in zip(classes, vals)]
            out = run_region(em, body, other + list(vals))
            held[i] = (tuple(as_reg(em, c, v) for c, v in zip(classes, out)), tag)

    def lane_guard() -> str:
        rest = lane_bits[p:]
        if not rest:
            return ""
        _, lane, _ = em.tid()
        t, pr = em.new("b32"), em.new("pred")
        em.ins(f"and.b32 {t}, {lane}, {sum(1 << b for b in rest)}")
        em.ins(f"setp.eq.u32 {pr}, {t}, 0")
        return f"@{pr} "

    def store(guard, off, isize, cls, x, index) -> None:
        r, st = store_reg(em, cls, x)
        em.ins(f"{guard}st.shared.{st} [{_smem_at(em, off, index, isize)}], {r}")

    def gather(offs) -> dict:
        """Every thread reads the final value of each of its result groups from ``offs``."""
        out: dict = {}
        fl = {key: flat_of(key) for key in dict.fromkeys(keys)}
        done = set()
        if all(isinstance(f, int) for f in fl.values()):
            byflat = {f: key for key, f in fl.items()}
            for f in sorted(byflat):
                if f in done:
                    continue
                w = 4
                while w > 1 and not (f % w == 0 and all(f + i in byflat for i in range(w))):
                    w //= 2
                cols = []
                for (cls, _, _), off, isize in zip(infos, offs, isizes):
                    ww = _vec_width(cls, isize, w)
                    vals = []
                    for s0 in range(0, w, ww):
                        vals += _ld_run(em, cls, _smem_at(em, off, f + s0, isize), ww, isize)
                    cols.append(vals)
                for i in range(w):
                    out[byflat[f + i]] = tuple(col[i] for col in cols)
                    done.add(f + i)
            return out
        for key, f in fl.items():
            out[key] = tuple(
                load_reg(em, cls, "shared", _smem_at(em, off, f, isize))
                for (cls, _, _), off, isize in zip(infos, offs, isizes)
            )
        return out

    if not warp_bits:
        if p:
            base = claim_scratch(em, op, _aligned_regions(infos, nflat)[1])
            offs = [base + o for o in _aligned_regions(infos, nflat)[0]]
            guard = lane_guard()
            for vals, f in held:
                for (cls, _, _), off, isize, x in zip(infos, offs, isizes, vals):
                    store(guard, off, isize, cls, x, f)
            em.barrier()
            part = gather(offs)
        else:
            part = {tag: vals for vals, tag in held}
    else:
        # (3) across warps: partials to smem as [flat][warp]
        nw = 1 << len(warp_bits)
        _, lane, warp = em.tid()
        wa = em.new("b32")
        em.ins(f"shr.u32 {wa}, {warp}, {warp_bits[0]}")
        em.ins(f"and.b32 {wa}, {wa}, {nw - 1}")
        two = rdist is not None and (p or g > 1)
        a_offs, a_size = _aligned_regions(infos, nflat * nw)
        b_offs, b_size = _aligned_regions(infos, nflat) if two else ([], 0)
        # in a loop, warps that share their rows among themselves only: a double-buffered
        # region of the exchange's own and a barrier of each group's warps (GroupExchange)
        group = None
        if not two and d.root.num_threads() == em.num_threads and _rows_apart(d, others, warp_bits):
            group = GroupExchange.of(em, op, a_size, warp_bits)
        xbase = None
        if group is not None:
            xbase = group.buffer()
        else:
            base = claim_scratch(em, op, a_size + b_size)
            a_offs = [base + o for o in a_offs]
            b_offs = [base + a_size + o for o in b_offs]
        if not p:
            held = [(vals, flat_of(key)) for vals, key in held]
        guard = lane_guard()
        for vals, f in held:
            slot = em.lincomb(0, [(nw, f), (1, wa)])
            for (cls, _, _), off, isize, x in zip(infos, a_offs, isizes, vals):
                r, st = store_reg(em, cls, x)
                em.ins(f"{guard}st.shared.{st} [{_smem_at(em, off, slot, isize, xbase)}], {r}")
        if group is not None:
            group.sync()
        else:
            em.barrier()

        def combine_warps(f, pred=None) -> tuple:
            slot = em.lincomb(0, [(nw, f)])
            cols = []
            for (cls, _, _), off, isize in zip(infos, a_offs, isizes):
                ww = _vec_width(cls, isize, nw)
                vals = []
                for s0 in range(0, nw, ww):
                    addr = _smem_at(em, off, em.lincomb(s0, [(1, slot)]), isize, xbase)
                    vals += _ld_run(em, cls, addr, ww, isize, pred)
                cols.append(vals)
            per_warp = [tuple(col[j] for col in cols) for j in range(nw)]
            return tuple(
                as_reg(em, c, v) for c, v in zip(classes, _tree(em, body, classes, per_warp))
            )

        if not two:
            part = {}
            for key in dict.fromkeys(keys):
                part[key] = combine_warps(flat_of(key))
            if group is not None:
                group.done()
        else:
            # one thread per result element combines the warps' partials, all read the results
            tid, _, _ = em.tid()
            nt = em.num_threads
            for c0 in range(0, nflat, nt):
                f = em.lincomb(c0, [(1, tid)])
                pr = None
                if c0 + nt > nflat:
                    pr = em.new("pred")
                    em.ins(f"setp.lt.u32 {pr}, {f}, {nflat}")
                vals = combine_warps(f, pr)
                for (cls, _, _), off, isize, x in zip(infos, b_offs, isizes, vals):
                    store(f"@{pr} " if pr else "", off, isize, cls, x, f)
            em.barrier()
            part = gather(b_offs)

    for i, res in enumerate(op.results):
        if rdist is None:
            em.set(res, part[keys[0]][i])
        else:
            em.set(res, [part[key][i] for key in keys])


# ----------------------------------------------------------------------------- scan
def _shfl(em: Emitter, cls: str, x: str, mode: str, b, c: int) -> str:
    """``shfl.sync.{mode}`` of a value of any register class (``b``: int or b32 register)."""
    return shfl(em, cls, x, mode, b, c)


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


@handles("nv_tileaa.scan")
def scan(em: Emitter, op) -> None:
    """Parallel inclusive scan along ``axis`` (positions: in-thread < lane < warp < repetition).

    1. in-thread: each thread's contiguous run along the axis is scanned serially;
    2. lanes: the runs' totals get a Hillis-Steele scan (``shfl.sync.up``/``down`` over the lane
       digits along the axis); each element then takes the previous lane's inclusive total;
    3. warps: each warp's total goes to shared memory, every thread folds the totals of the
       warps before its own;
    4. repetitions (tiles longer than the CTA along the axis): the folded total of each earlier
       repetition is combined in.
    ``reverse`` mirrors every level. Copies (lanes, warps or registers past the tile along the
    axis) compute the same values as their originals; the combiner is called as (later,
    earlier), so it need only be associative."""
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
    shape = tuple(in_t.shape)
    n = shape[axis]
    lay = d.root
    ra = d.kept[axis]
    spt, tpw, wpc = lay.size_per_thread[ra], lay.threads_per_warp[ra], lay.warps_per_cta[ra]
    if not all(_pow2(x) for x in (n, spt, tpw, wpc)):
        return _scan_serial(em, op, reverse)
    infos = [elem_info(op, v.type) for v in op.operands]
    classes = [i[0] for i in infos]
    isizes = [scratch_size(cls, esize) for cls, esize, _ in infos]
    tiles = [em.tile(op, v) for v in op.operands]
    cta = spt * tpw * wpc
    lv = min(tpw, max(1, n // spt))  # lanes along the axis that hold distinct positions
    wv = min(wpc, max(1, n // (spt * tpw)))  # warps likewise
    nrep = max(1, n // cta)
    others = [r for r in range(lay.rank) if r != ra]

    def stride(radices) -> int:
        s = 1
        for dd in lay.order:
            if dd == ra:
                return s
            s *= radices[dd]
        return s

    ls, ws = stride(lay.threads_per_warp), stride(lay.warps_per_cta)

    # registers: group (off-axis raw) -> rep -> within -> register
    groups: dict = {}
    for k in range(d.nregs):
        raw = d.raw[k]
        key = tuple(raw[r] % d.pshape[r] for r in others)
        pos = raw[ra] % n
        groups.setdefault(key, {}).setdefault(pos // cta, {})[pos % cta] = k
    vals = [list(t) for t in tiles]  # operand -> register -> value

    def get(k):
        return [as_reg(em, c, v[k]) for c, v in zip(classes, vals)]

    def put(k, xs):
        for c, v, x in zip(classes, vals, xs):
            v[k] = as_reg(em, c, x)

    def combine(later, earlier):
        out = run_region(em, body, list(later) + list(earlier))
        return [as_reg(em, c, x) for c, x in zip(classes, out)]

    def sel(p, a, b):
        return [select(em, c, p, x, y) for c, x, y in zip(classes, a, b)]

    # (1) in-thread runs; totals[key][rep]
    totals: dict = {}
    for key, reps in groups.items():
        for rep, byw in reps.items():
            ks = [byw[w] for w in sorted(byw, reverse=reverse)]
            acc = get(ks[0])
            put(ks[0], acc)
            for k in ks[1:]:
                acc = combine(get(k), acc)
                put(k, acc)
            totals.setdefault(key, {})[rep] = acc

    def rank_of(src: str, shift: int, count: int) -> str:
        r = em.new("b32")
        em.ins(f"shr.u32 {r}, {src}, {shift.bit_length() - 1}")
        em.ins(f"and.b32 {r}, {r}, {count - 1}")
        if reverse:
            em.ins(f"xor.b32 {r}, {r}, {count - 1}")
        return r

    def ge(r: str, v: int) -> str:
        p = em.new("pred")
        em.ins(f"setp.ge.u32 {p}, {r}, {v}")
        return p

    _, lane, warp = em.tid()
    mode, clamp = ("down", 31) if reverse else ("up", 0)

    # (2) lanes
    if lv > 1:
        rl = rank_of(lane, ls, lv)
        for key, reps in groups.items():
            for rep, byw in reps.items():
                x = totals[key][rep]
                s = 1
                while s < lv:
                    y = [_shfl(em, c, v, mode, s * ls, clamp) for c, v in zip(classes, x)]
                    x = sel(ge(rl, s), combine(x, y), x)
                    s *= 2
                totals[key][rep] = x  # inclusive up to this lane
                ks = list(byw.values())
                if len(ks) == 1:
                    put(ks[0], x)
                    continue
                ex = [_shfl(em, c, v, mode, ls, clamp) for c, v in zip(classes, x)]
                first = ge(rl, 1)
                for k in ks:
                    put(k, sel(first, combine(get(k), ex), get(k)))

    # (3) warps
    rw = None
    chunk_total: dict = {}
    if wv > 1:
        rw = rank_of(warp, ws, wv)
        lines = 1
        for i, s in enumerate(shape):
            if i != axis:
                lines *= s
        lanes_in = [
            ln for ln in range(WARP) if lv == 1 or (ln // ls) % lv == (0 if reverse else lv - 1)
        ]
        unit = _line_form(shape, axis, 1)
        line_of = {key: flats(d, unit)[:WARP, _first_reg(reps)] for key, reps in groups.items()}
        lst, rst, qst = _totals_layout(
            line_of, lanes_in, nrep, wv, lines, [(c, i) for (c, _, _), i in zip(infos, isizes)]
        )
        lform = _line_form(shape, axis, lst)
        offs, size = _aligned_regions(infos, lines * nrep * wv)
        base = claim_scratch(em, op, size)
        offs = [base + o for o in offs]
        qw = em.new("b32")
        em.ins(f"shr.u32 {qw}, {warp}, {ws.bit_length() - 1}")
        em.ins(f"and.b32 {qw}, {qw}, {wv - 1}")
        guard = ""
        if lv > 1:
            last = em.new("pred")
            em.ins(f"setp.eq.u32 {last}, {rl}, {lv - 1}")
            guard = f"@{last} "
        line_at = {}
        for key, reps in groups.items():
            line_at[key] = lform.emit(em, d, _first_reg(reps))
            for rep in reps:
                slot = em.lincomb(rep * rst, [(1, line_at[key]), (qst, qw)])
                for (cls, _, _), off, isize, x in zip(infos, offs, isizes, totals[key][rep]):
                    r, st = store_reg(em, cls, x)
                    em.ins(f"{guard}st.shared.{st} [{_smem_at(em, off, slot, isize)}], {r}")
        em.barrier()
        for key, reps in groups.items():
            for rep, byw in reps.items():
                slot = em.lincomb(rep * rst, [(1, line_at[key])])
                cols = []
                for (cls, _, _), off, isize in zip(infos, offs, isizes):
                    w = _vec_width(cls, isize, wv) if qst == 1 else 1
                    col = []
                    for s0 in range(0, wv, w):
                        addr = _smem_at(em, off, em.lincomb(s0 * qst, [(1, slot)]), isize)
                        col += _ld_run(em, cls, addr, w, isize)
                    cols.append(col)
                per = [[col[j] for col in cols] for j in range(wv)]
                if reverse:
                    per.reverse()
                folds = [per[0]]
                for j in range(1, wv):
                    folds.append(combine(per[j], folds[-1]))
                chunk_total[(key, rep)] = folds[-1]
                pre = folds[0]
                for j in range(1, wv - 1):
                    pre = sel(ge(rw, j + 1), folds[j], pre)
                first_warp = ge(rw, 1)
                for k in byw.values():
                    put(k, sel(first_warp, combine(get(k), pre), get(k)))

    # (4) repetitions along the axis
    if nrep > 1:
        src = None
        if wv == 1 and lv > 1:
            q = em.new("b32")
            em.ins(f"shr.u32 {q}, {lane}, {ls.bit_length() - 1}")
            em.ins(f"and.b32 {q}, {q}, {lv - 1}")
            src = em.new("b32")
            em.ins(f"mul.lo.s32 {src}, {q}, {ls}")
            em.ins(f"sub.s32 {src}, {lane}, {src}")
            if not reverse:
                em.ins(f"add.s32 {src}, {src}, {(lv - 1) * ls}")
        for key, reps in groups.items():
            order = sorted(reps, reverse=reverse)
            pre = None
            for rep in order:
                if pre is not None:
                    for k in reps[rep].values():
                        put(k, combine(get(k), pre))
                if rep == order[-1]:
                    break
                if wv > 1:
                    tot = chunk_total[(key, rep)]
                elif src is not None:
                    tot = [
                        _shfl(em, c, v, "idx", src, 31) for c, v in zip(classes, totals[key][rep])
                    ]
                else:
                    tot = totals[key][rep]
                pre = tot if pre is None else combine(tot, pre)

    for i, res in enumerate(op.results):
        em.set(res, vals[i])


def _first_reg(reps: dict) -> int:
    """The first register of a scan group (its line is the group's)."""
    return next(iter(next(iter(reps.values())).values()))


def _line_form(shape, axis: int, stride: int) -> Form:
    """Row-major index of a line (the coordinates off ``axis``) times ``stride``."""
    mults, m = [0] * len(shape), stride
    for i in reversed(range(len(shape))):
        if i != axis:
            mults[i] = m
            m *= shape[i]
    return Form(0, tuple(mults))


def _totals_layout(line_of: dict, lanes: list, nrep: int, wv: int, lines: int, kinds) -> tuple:
    """(line, repetition, warp) strides of a scan's per-warp totals in shared memory: of
    ``[line][rep][warp]``, ``[rep][line][warp]`` and ``[rep][warp][line]``, the one whose stores
    (by ``lanes``) and loads (vectors along the warps where they are contiguous) take warp 0 the
    fewest wavefronts (runtime/smem_banks.py), then the fewest loads. ``line_of``: per group,
    each lane's line; ``kinds``: (register class, scratch element size) per operand."""
    import numpy as np

    from tilegen.runtime.smem_banks import warp_wavefronts

    sel = np.array(lanes)
    best = None
    for lst, rst, qst in (
        (nrep * wv, wv, 1),
        (wv, lines * wv, 1),
        (1, lines * wv, lines),
    ):
        waves = loads = 0
        for lo in line_of.values():
            for rep in range(nrep):
                at = lo * lst + rep * rst
                for cls, isize in kinds:
                    waves += warp_wavefronts(at[sel] * isize, isize, sel)
                    w = _vec_width(cls, isize, wv) if qst == 1 else 1
                    for s0 in range(0, wv, w):
                        waves += warp_wavefronts((at + s0 * qst) * isize, w * isize)
                        loads += 1
        if best is None or (waves, loads) < best[0]:
            best = ((waves, loads), (lst, rst, qst))
    return best[1]


def _scan_serial(em: Emitter, op, reverse: bool) -> None:
    """Fallback: the tile through shared memory as ``[line][axis]``, one thread per line runs
    the inclusive scan serially (backwards for ``reverse``)."""
    axis = op.attributes["axis"].value
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
