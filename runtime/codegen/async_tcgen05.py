"""The async K loop's sm_100a consumers (docs/pipelines.md): thread 0 issues each stage's
``tcgen05.mma``s into the TMEM accumulator and commits them to the stage's empty barrier; the
rows read back by ``tcgen05.ld`` go to the store as they are, by chunks, or through the scratch
buffer into the loop result's layout; then warp 0 frees the TMEM columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilegen.runtime.codegen import async_rs, cta_pair, fragment_load, tcgen05, tmem_chunks
from tilegen.runtime.codegen.async_convert import converted, round_tf32
from tilegen.runtime.codegen.core import Emitter, elem_key, fail
from tilegen.runtime.codegen.pipeline import (
    Ring,
    mbarrier_wait,
    wgmma_descriptor_at,
    wgmma_descriptor_parts,
)
from tilegen.runtime.codegen.wgmma_fragment import scratch_from_start, scratch_to_layout
from tilegen.runtime.layouts.async_forms import (
    chain_sides,
    fragment_chain,
    init_in_tmem,
    plus_zero_tile,
)

if TYPE_CHECKING:
    from tilegen.runtime.codegen.async_loop import _Operand


def release_tmem(em: Emitter, t0, store, slot_off: int, share: bool, tcols: int) -> None:
    """After the consumers' last TMEM read (every MMA done, so every copy landed): thread 0
    frees the map slot (unless the TMA store still needs it), warp 0 the TMEM columns."""
    from tilegen.runtime.codegen.async_loop import ASYNC_SYMBOL, _free_slot

    if store is None:
        _free_slot(em, t0, slot_off, share)
    em.barrier()
    tcgen05.dealloc_columns(em, None, 0, f"{ASYNC_SYMBOL}+{slot_off + 8}", tcols)  # warp 0


def from_rows(em: Emitter, op, acc: list, order) -> list:
    """Registers in TMEM row order (:class:`~.async_scaled.RowsOrder`) -> the loop result in
    the layout the layout stage gave it (through the scratch buffer, row-major f32)."""

    M, N = order.M, order.N
    cls = em.reg_class(acc[0])
    scratch_from_start(em, M * N * 4)
    at = em.new("b32")
    em.ins(f"mad.lo.s32 {at}, {order.row}, {N}, {order.col}")
    at = em.smem_addr(at, 4)
    for c, r in enumerate(acc):
        em.ins(f"st.shared.{cls} [{at}+{4 * c}], {r}")
    em.barrier()
    return scratch_to_layout(em, op, op.results[0].type, cls, M, N)


def tcgen05_consumer(em: Emitter, op, v: dict) -> list:
    """sm_100a: consumer thread 0 issues tcgen05.mma per stage into the TMEM accumulator
    (M 128: TMEM lane = row; M 64: 16 lanes of each warp's quarter) and commits each stage's
    MMAs to its empty barrier, the last to the done barrier; then warp w reads rows 32 w ..
    (tcgen05.ld), adds the loop's initial value (kept in the scratch buffer meanwhile) and the
    result goes to its layout."""
    from tilegen.runtime.codegen.async_loop import ASYNC_SYMBOL, _free_slot, _hand_over, loop_head
    from tilegen.runtime.codegen.exchange import row_major

    a, b, K, N, M = v["a"], v["b"], v["K"], v["N"], v["M"]
    base, stages, stage_bytes, bar = v["base"], v["stages"], v["stage_bytes"], v["bar"]
    lb, ub, step, ty, iv_cls = v["lb"], v["ub"], v["step"], v["ty"], v["iv_cls"]
    tid, t0 = v["tid"], v["t0"]
    acc_int, dot = v["acc_int"], v["dot"]
    pair = v.get("pair", False)
    cls = "b32" if acc_int else "f32"
    init = v["init"]
    # a pair with M 64 per CTA: thread t holds half of row t % 64 (cta_pair.py)
    half = pair and M == 64
    # one CTA's 256 rows (8 warps): two M 128 MMAs a K step into TMEM columns 0 .. N and
    # N .. 2 N; thread t reads row t (warp w: lanes 32 (w % 4) .., columns (w / 4) N ..)
    tall = not pair and M == 256
    # one CTA's 128 rows on 8 warps (N over 128): warp w reads lanes 32 (w % 4) .., columns
    # (w / 4) N / 2 .. (a thread holds half a row: the scaled form's column halves)
    wide = M == 128 and em.num_warps == 8  # (a pair's N 256 too: section 30)
    # one CTA's 64 rows on 4 warps: rows 16 w .. in TMEM lanes 32 w .. 32 w + 15; read by
    # 16x32bx2 loads, lane l takes row 16 w + l % 16, columns (l / 16) N / 2 .. (as tileiras)
    single64 = M == 64 and not pair and em.num_warps == 4
    # (the store: by TMA, or a plain one from the TMEM rows by chunks, async_epilogue)
    direct = v["direct"]
    store = v["store"] or direct
    chain = fragment_chain(op, store) if M == 128 or half or tall or single64 else None
    rows = None  # thread t's row of the result, in registers (row-major order): see below
    per = N // 2 if half or wide else N
    uniform = chain is not None and init and all(r == init[0] for r in init)
    # C, the initial value, in the accumulator's rows (init_in_tmem): written into TMEM before
    # the loop, the MMAs add to it, and the rows read back are the result as they are
    # (a pair: each CTA its own rows, then the even CTA's issuer waits for both, below)
    in_tmem = not uniform and chain is not None and (pair or init_in_tmem(op, em.num_warps))
    if single64 and (uniform or in_tmem):  # (else C waits in the scratch: 32x32b loads of
        per = N // 2  # lanes 0 .. 15)
    # a row of more than 128 accumulators a thread: read back by column chunks at the store
    # (and C written by chunks: init is None, fragment_load.into_tmem); so is a row of 128
    # beside a row vector (a bias) under 8 warps' 168 registers: the vector's 128 elements
    # would be live beside the 128 accumulators (fuzzer seed 170014 spilled 16 B)
    rows_at_once = tmem_chunks.ROWS_AT_ONCE - (em.num_warps == 8 and _row_side(chain))
    chunked = (uniform or in_tmem) and per > rows_at_once and M in (128, 256) and not half
    # a plain store's rows go out a chunk at a time too: no scratch, 32 values a thread live
    # (async_epilogue.tmem_store_plan admits the rows' layout and a chain to it only)
    chunked = chunked or (direct is not None and chain is not None and (uniform or in_tmem))
    # a zero initial value (+0, as a GEMM from zero starts): the first MMA overwrites D (it
    # accumulates from +0) and the rows read back are the result as they are: no register
    # holds the zeros meanwhile and no add follows (a loop of no iteration writes the zeros
    # into TMEM first, below)
    zero = uniform and plus_zero_tile(op.operands[3])
    if uniform and not zero:
        # a uniform initial value and a TMA-stored result: thread t keeps row t itself (the
        # initial value now, the sum once the MMAs ran) and the store writes it by position
        # (chunked: the store reads it from TMEM part by part, tmem_chunks)
        rows = None if chunked else [em.mov(cls, init[0]) for _ in range(per)]
    elif zero:
        rows = None if chunked else []
    elif in_tmem:
        rows = []
    elif pair:  # async_pair admits only the registers-only form for a pair
        fail(op, "PTX backend: this accumulator must reach a TMA store in registers")
    else:
        scratch_from_start(em, M * N * 4)
        d = em.dist_of(op, op.operands[3].type)
        form = row_major((M, N))
        for k in range(d.nregs):  # the initial value waits in the scratch buffer
            em.ins(f"st.shared.{cls} {em.smem_ref(d, form, k, 4)}, {init[k]}")
        em.barrier()
    taddr = em.new("b32")
    em.ins(f"ld.shared.u32 {taddr}, [{ASYNC_SYMBOL}+{v['tmem_off']}]")
    if in_tmem:
        _, _, warp = em.tid()
        at = tmem_chunks.lane_base(em, warp, taddr, N, tall, wide)
        if init is None:
            fragment_load.into_tmem(em, op, ("rows", M, N, 2 if wide else 1), at, per)
        else:  # (M 64: half a row a thread, the other half N / 2 columns on)
            tmem_chunks.store_rows(em, at, init, N // 2 if single64 else 0)
        em.barrier()  # (the issuer's tcgen05.fence::after_thread_sync follows it)
        if pair:  # this CTA's rows are in: its thread 0 tells the even CTA's issuer
            cta_pair.arrive_leader(em, t0, base, v["init_off"])
    skip = em.new_label("async_issued")
    # f32 -> tf32 operands: A into tensor memory where it fits (async_rs.TmemA), else rounded in
    # place (the IR's conversion) as B is, by every consumer thread per stage before thread 0
    # issues; otherwise only thread 0 runs the loop
    tmem_a = v["tmem_a"]
    conv = [(a, converted(em, dot.operands[0])), (b, converted(em, dot.operands[1]))]
    rnd = [(x, c) for x, c in conv[1 if tmem_a else 0 :] if c]
    everyone = bool(rnd or tmem_a)
    if everyone and pair:
        fail(op, "PTX backend: a CTA pair's operands must reach the MMA as they are staged")
    issuer = t0
    if pair:  # the even CTA's thread 0 issues for both
        issuer = em.new("pred")
        em.ins(f"and.pred {issuer}, {t0}, {cta_pair.is_leader(em, cta_pair.rank(em))}")
    if not everyone:
        em.ins(f"@!{issuer} bra {skip}")
    if in_tmem and pair:  # both CTAs' rows of C are in TMEM before the first MMA
        cta_pair.wait_both(em, f"{ASYNC_SYMBOL}+{v['init_off']}")
    ring = Ring(stages)
    ring.start(em, 0)
    iv = em.mov(iv_cls, lb)
    acc_in = em.new("pred")
    # the first MMA overwrites D, or adds to the initial value in TMEM
    em.ins(f"setp.{'eq' if in_tmem else 'ne'}.u32 {acc_in}, 0, 0")
    mmas = tcgen05_stage(dot, v["ab"], a, b, M, N, K, acc_int, pair)
    if tall:
        mmas = _tall_stage(dot, v["ab"], a, b, N, K, acc_int)
    in_tm = async_rs.TmemA(em, a, N, conv[0][1], tall) if tmem_a else None
    top, end = loop_head(em, "async_issue", ty, iv, ub)

    def one_stage(j: int) -> None:
        """One stage; A in TMEM buffer ``j`` (the loop's two copies take one each)."""
        mbarrier_wait(em, bar(0, ring.stage), ring.phase)
        sbase = em.new("b32")
        em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {stage_bytes}, {base}")
        issued = tbar = None
        if everyone:
            for x, cvt in rnd:
                round_tf32(em, sbase, x, tid, em.barrier_threads, cvt)
            if rnd:
                em.ins("fence.proxy.async.shared::cta")
            if in_tm is not None:  # this thread's row of A into buffer j, before the barrier
                tbar = em.new("b32")
                em.ins(f"add.s32 {tbar}, {base}, {v['tbar_off'] + 8 * j}")
                in_tm.store(em, sbase, taddr, j, tbar)
                em.ins("tcgen05.fence::before_thread_sync")
            em.barrier()
            issued = em.new_label("async_stage_issued")
            em.ins(f"@!{t0} bra {issued}")
        em.ins("tcgen05.fence::after_thread_sync")
        if in_tm is not None:
            a_col = em.new("b32")
            em.ins(f"add.s32 {a_col}, {taddr}, {in_tm.column(j)}")
            mmas(em, sbase, taddr, acc_in, tid, a_col=a_col)
        else:
            mmas(em, sbase, taddr, acc_in, tid)
        cta_pair.commit(em, bar(1, ring.stage), pair)
        if tbar is not None:  # buffer j is free once these MMAs complete
            cta_pair.commit(em, tbar, pair)
        if issued is not None:
            em.label(issued)
        ring.advance(em)
        em.ins(f"add.{ty} {iv}, {iv}, {step}")

    one_stage(0)
    if in_tm is not None:  # the loop's second copy: buffer 1
        stop = em.new("pred")
        em.ins(f"setp.ge.{ty} {stop}, {iv}, {ub}")
        em.ins(f"@{stop} bra {end}")
        one_stage(1)
    em.ins(f"bra {top}")
    em.label(end)
    if everyone:
        em.ins(f"@!{t0} bra {skip}")
    done = em.new("b32")
    em.ins(f"add.s32 {done}, {base}, {v['done_off']}")
    cta_pair.commit(em, done, pair)
    em.label(skip)
    done = em.new("b32")
    em.ins(f"add.s32 {done}, {base}, {v['done_off']}")
    mbarrier_wait(em, done, 0)
    em.ins("tcgen05.fence::after_thread_sync")
    if v["store"] is None:  # every copy landed: thread 0 frees the map slot
        _free_slot(em, t0, v["slot_off"], v["share"])
    # no iteration: TMEM holds nothing; the result is the initial value
    ran = em.new("pred")
    em.ins(f"setp.lt.{ty} {ran}, {lb}, {ub}")
    if chunked:
        _, lane, warp = em.tid()
        lane_base = tmem_chunks.lane_base(em, warp, taddr, N, tall, wide)
        groups = 2 if wide or single64 else 1
        _hand_over(em, chain, ("rows", M, N, groups) + (("x2",) if single64 else ()))
        em.tmem_rows = tmem_chunks.Pending(  # (init None: TMEM holds C, tmem_chunks)
            chain, lane_base, ran, None if in_tmem else init[0], cls, per, taddr, v["tcols"]
        )
        em.tmem_rows.group = cta_pair.group(pair)
        em.tmem_rows.zero = zero
        em.tmem_rows.split = N // 2 if single64 else 0  # (16x32bx2: half a row a thread)
        return []  # (the registers come chunk by chunk: async_store.tma_store_epilogue)
    nomma = em.new_label("async_nomma")
    if not (in_tmem or zero):  # (TMEM holds the initial value then)
        em.ins(f"@!{ran} bra {nomma}")
    _, lane, warp = em.tid()
    row, lane_base = em.new("b32"), em.new("b32")
    # M 128: TMEM lane = row; M 64: rows 16 w .. in lanes 32 w .. 32 w + 15 of each quarter
    em.ins(f"mad.lo.s32 {row}, {warp}, {32 if M in (128, 256) or half else 16}, {lane}")
    live = None
    if M == 64 and not half:
        live = em.new("pred")
        em.ins(f"setp.lt.u32 {live}, {lane}, 16")
    wh = None
    if tall or wide:  # warp w: lanes 32 (w % 4) .., the second accumulator's columns (tall)
        wq, wh = em.new("b32"), em.new("b32")  # or the second half of the columns (wide)
        em.ins(f"and.b32 {wq}, {warp}, 3")
        em.ins(f"shr.u32 {wh}, {warp}, 2")
        em.ins(f"shl.b32 {lane_base}, {wq}, 21")
        em.ins(f"mad.lo.s32 {lane_base}, {wh}, {N if tall else N // 2}, {lane_base}")
        if wide:  # row 32 (w % 4) + lane
            em.ins(f"mad.lo.s32 {row}, {wq}, 32, {lane}")
    else:
        em.ins(f"shl.b32 {lane_base}, {warp}, 21")  # (32 w) << 16: the TMEM lane field
    em.ins(f"add.s32 {lane_base}, {lane_base}, {taddr}")
    terms = [(N, row)] + ([(N // 2, wh)] if wide else [])
    rowaddr = None if rows is not None else em.smem_addr(em.lincomb(0, terms), 4)
    add = "s32" if acc_int else "rn.f32"
    x2 = single64 and rows is not None
    if x2:
        live = None
    if zero:  # no iteration: TMEM holds nothing, so the zeros go there (the branch is uniform)
        filled = em.new_label("async_ran")
        em.ins(f"@{ran} bra {filled}")
        z = em.mov("b32", "0")
        tmem_chunks.store_rows(em, lane_base, [z] * per, N // 2 if x2 else 0)
        em.label(filled)
    for chunk in range(per // 32):
        regs = [em.new("b32") for _ in range(32)]
        src = em.new("b32")
        em.ins(f"add.s32 {src}, {lane_base}, {32 * chunk}")
        dst = ", ".join(regs)
        if x2:  # (lanes 16 .. 31 take the columns N / 2 on)
            em.ins(f"tcgen05.ld.sync.aligned.16x32bx2.x32.b32 {{{dst}}}, [{src}], {N // 2}")
        else:
            em.ins(f"tcgen05.ld.sync.aligned.32x32b.x32.b32 {{{dst}}}, [{src}]")
        em.ins("tcgen05.wait::ld.sync.aligned")
        if in_tmem or zero:
            for r in regs:
                rows.append(em.new(cls))
                em.ins(f"mov.b32 {rows[-1]}, {r}")
            continue
        if rows is not None:
            for i, r in enumerate(regs):
                x, y = rows[32 * chunk + i], em.new(cls)
                em.ins(f"mov.b32 {y}, {r}")
                em.ins(f"add.{add} {x}, {x}, {y}")
            continue
        for i, r in enumerate(regs):
            x, y = em.new(cls), em.new(cls)
            off = 4 * (32 * chunk + i)
            g = f"@{live} " if live else ""
            em.ins(f"{g}ld.shared.{cls} {x}, [{rowaddr}+{off}]")
            em.ins(f"mov.b32 {y}, {r}")
            em.ins(f"add.{'s32' if acc_int else 'rn.f32'} {x}, {x}, {y}")
            em.ins(f"{g}st.shared.{cls} [{rowaddr}+{off}], {x}")
    em.ins("tcgen05.fence::before_thread_sync")
    em.label(nomma)
    em.barrier()
    skip3 = em.new_label("async_dealloc")
    w0 = em.new("pred")
    em.ins(f"setp.lt.u32 {w0}, {tid}, 32")
    em.ins(f"@!{w0} bra {skip3}")
    g = cta_pair.group(pair)
    em.ins(f"tcgen05.dealloc.{g}.sync.aligned.b32 {taddr}, {v['tcols']}")
    em.label(skip3)
    if rows is not None:
        _hand_over(em, chain, ("rows", M, N, 2 if half or wide or x2 else 1) + (("x2",) * x2))
        return rows
    return scratch_to_layout(em, op, op.results[0].type, cls, M, N)


def tcgen05_stage(
    dot, ab: str, a: "_Operand", b: "_Operand", M: int, N: int, K: int, acc_int, pair=False
):
    """A function emitting one stage's ``tcgen05.mma``s (one per 32-byte K step) from the stage
    at ``sbase`` into the TMEM accumulator at ``taddr``: ``acc_in`` (a predicate) says whether
    the first adds to D; it is set true after it (``tid == tid``). ``pair``: M is one CTA's
    rows; the MMAs are the pair's (M 2 x 128, ``cta_group::2``), B's stage half of N."""
    kind = tcgen05.kind(ab)
    unsigned = (False, False)
    if ab == "i8":
        from tilegen.runtime.layouts.mma_choice import signedness

        sa, sb = signedness(dot) or (True, True)
        unsigned = (not sa, not sb)
    kmajor = getattr(b, "kmajor", False)  # B^T staged N x K (K-major, as A)
    idesc = tcgen05.instruction_descriptor(
        2 * M if pair else M,
        N,
        ab,
        "s32" if acc_int else "f32",
        b_mn_major=not kmajor,
        b_elem=elem_key(dot.operands[1].type),
        unsigned=unsigned,
        saturate=ab == "i8",
    )

    def emit(em: Emitter, sbase, taddr, acc_in, tid, b_base=None, a_col=None) -> None:
        tk = 32 // a.esz  # every MMA K step is 32 bytes (K 16 f16, 8 tf32, 32 8-bit)
        # one descriptor per operand and stage, stepped through its low word (as wgmma's);
        # ``b_base``: the stage of B when A's rows start elsewhere (_tall_stage); ``a_col``:
        # A in tensor memory from that address (async_rs.TmemA), a 32-bit column an element
        sb0 = em.new("b32")
        em.ins(f"add.s32 {sb0}, {b_base or sbase}, {b.offset}")
        # B MN-major: atoms of 8 K rows (4 with the 32-byte-atom swizzle of a tf32 B) at SBO
        sbo = (4 if b.atom == 32 else 8) * b.span
        pa = wgmma_descriptor_parts(em, sbase, 16, 0, 0)[0] if a_col is None else None
        pb = wgmma_descriptor_parts(em, sb0, 16 if kmajor else K * b.span, 0, 0)[0]
        ha = tcgen05.smem_descriptor_hi(8 * a.span, a.span)
        hb = (
            tcgen05.smem_descriptor_hi(8 * b.span, b.span)
            if kmajor
            else tcgen05.smem_descriptor_hi(sbo, b.span, b.atom)
        )
        for kk in range(K // tk):
            kb = kk * 32
            a_off = (kb // a.span) * a.box_bytes + kb % a.span
            b_off = (kb // b.span) * b.box_bytes + kb % b.span if kmajor else kk * tk * b.span
            if a_col is None:
                da = wgmma_descriptor_at(em, (pa, ha), a_off)
            else:
                da = a_col
                if kk:
                    da = em.new("b32")
                    em.ins(f"add.s32 {da}, {a_col}, {kk * tk * a.esz // 4}")
                da = f"[{da}]"
            db = wgmma_descriptor_at(em, (pb, hb), b_off)
            em.ins(
                f"tcgen05.mma.{cta_pair.group(pair)}.kind::{kind} [{taddr}], {da}, {db}, "
                f"{idesc}, {acc_in}"
            )
            em.ins(f"setp.eq.u32 {acc_in}, 0, 0")

    return emit


def _tall_stage(dot, ab: str, a: "_Operand", b: "_Operand", N: int, K: int, acc_int):
    """One stage's MMAs for a 256-row tile on one CTA: per K step, rows 0-127 of A into TMEM
    columns 0 .. N and rows 128-255 (128 rows further into each of A's column boxes) into
    N .. 2 N, both M 128 ``cta_group::1``."""
    half = tcgen05_stage(dot, ab, a, b, 128, N, K, acc_int)

    def emit(em: Emitter, sbase, taddr, acc_in, tid, a_col=None) -> None:
        # the first MMA of each accumulator overwrites it: acc_in is false until after the
        # second accumulator's first K step; ``a_col``: A's rows in tensor memory (rows
        # 128 .. K columns on, async_rs.TmemA)
        second, t2 = em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {second}, {sbase}, {128 * a.span}")
        em.ins(f"add.s32 {t2}, {taddr}, {N}")
        keep = em.new("pred")
        em.ins(f"mov.pred {keep}, {acc_in}")
        a2 = None
        if a_col is not None:
            a2 = em.new("b32")
            em.ins(f"add.s32 {a2}, {a_col}, {K}")
        half(em, sbase, taddr, acc_in, tid, a_col=a_col)
        half(em, second, t2, keep, tid, b_base=sbase, a_col=a2)

    return emit


def _row_side(chain) -> bool:
    """Whether fragment ``chain`` (None: none) reads a row vector (1 x N) beside the
    accumulator (async_forms.chain_sides)."""
    if chain is None:
        return False
    return any(o.operands[0].type.shape[0] == 1 for o in chain_sides(chain))
