"""``D = A @ B + C`` with ``wgmma.mma_async`` (sm_90a): operands written or cp.async-copied
into the no-swizzle layouts of :mod:`wgmma_layout` (or read from a TMA stage, or A from
registers), the wgmma chain, and the accumulator kept in registers where the layout stage
gave it the wgmma fragment layout.
"""

from __future__ import annotations

from tilegen.runtime.codegen import epilogue
from tilegen.runtime.codegen.core import ELEMENTS, Emitter, elem_key, fail
from tilegen.runtime.codegen.dist import dist
from tilegen.runtime.codegen.exchange import row_major
from tilegen.runtime.codegen.memory import cp_async_tile
from tilegen.runtime.codegen.mma_staging import (
    StagedBox,
    add_offset,
    check_scratch,
    cp_async_commit_wait,
    padded_pitch,
    raw_rows,
    round_up,
    stage_b8_chunks,
    staged_layout,
    staged_of,
    transpose_bytes,
    unstage,
    write_strided,
)
from tilegen.runtime.codegen.pipeline import wgmma_descriptor
from tilegen.runtime.codegen.smem_fields import write_fields
from tilegen.runtime.codegen.wgmma_layout import (
    NM_SBO,
    WgmmaPlan,
    nmajor_layout,
    nmajor_lbo,
    wgmma_a_fields,
)
from tilegen.runtime.layouts.mma_choice import LBO, wgmma_accumulator_layout, wgmma_sbo


def _descriptor(em: Emitter, addr: str, sbo: int, lbo: int = LBO) -> str:
    """A wgmma matrix descriptor (PTX ISA "Matrix Descriptor Format") for a no-swizzle layout
    at shared address ``addr`` (K-major: LBO along K, SBO along M/N; MN-major: the other way,
    ``wgmma_layout.nmajor_layout``): start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45,
    base offset 0, swizzle mode 0 (bits 62-63)."""
    if sbo >> 4 >= 1 << 14 or lbo >> 4 >= 1 << 14:
        raise ValueError("wgmma byte offset out of range")
    r, d = em.new("b32"), em.new("b64")
    em.ins(f"shr.u32 {r}, {addr}, 4")
    em.ins(f"and.b32 {r}, {r}, {0x3FFF}")
    em.ins(f"cvt.u64.u32 {d}, {r}")
    em.ins(f"or.b64 {d}, {d}, {((lbo >> 4) << 16) | ((sbo >> 4) << 32)}")
    return d


#: apply a dot's elementwise epilogue per wgmma instance (commit + wait each, as tileiras does)?
#: Measured off: on a 128 x 128 x 128 block-scaled fp8 GEMM step ptxas spills 160 bytes with it
#: and 116 without (one wait, ptxas schedules the 128-register partial product better); the
#: per-instance path stays for experiments (epilogue.py)
WGMMA_FUSED_EPILOGUE = False


def _a_fragments(em: Emitter, regs, d, W: int) -> dict:
    """{(m64 instance q, k16 step s): the 4 b32 registers of wgmma's A fragment} for a 16-bit
    A held in the accumulator layout ``d`` (``wgmma_accumulator_layout``): register k of ``d``
    at raw (row, col) is fragment element (rows 8 W rm: h = rm & 1, q = rm >> 1; col 8 j + e)
    -> register 2 (j % 2) + h of step j // 2, half e (PTX ISA, wgmma .m64nNk16 A and D
    fragments: a0..a7 = rows g / g + 8, cols 2t, 2t + 1 and 8 more)."""
    halves: dict = {}
    for k in range(d.nregs):
        rr, rc = d.raw[k]
        rm = rr // (8 * W)
        h, q = rm & 1, rm >> 1
        j, e = rc // 8, rc % 2
        words = halves.setdefault((q, j // 2), [[None, None] for _ in range(4)])
        words[2 * (j % 2) + h][e] = regs[k]
    out = {}
    for key, words in halves.items():
        packed = []
        for lo, hi in words:
            r = em.new("b32")
            em.ins(f"mov.b32 {r}, {{{lo}, {hi}}}")
            packed.append(r)
        out[key] = packed
    return out


def wgmma_dot(em: Emitter, op, plan: WgmmaPlan) -> None:
    """``D = A @ B + C`` with ``wgmma.mma_async`` (sm_90a).

    Shared memory, no-swizzle K-major canonical layout (8 x 16-byte core matrices, each 128
    contiguous bytes; along K at LBO = 144, 16 bytes of padding against bank conflicts; along
    M/N at SBO = K esz / 16 * LBO): B (K x N) is stored as
    N x K. A's rows are *permuted*: logical row m = g + 8 w + 32 G h + 64 G q (g = m % 8,
    w = warp in [0, 4G), h one bit, q the rest) goes to physical row 64 (q G + wg) + 16 wi +
    8 h + g (wg, wi = divmod(w, 4)), so warp wi of warpgroup wg finds, in its wgmma accumulator
    fragment (rows 16 wi + g + 8 h), the logical rows 8 w + g + 32 G h: exactly the blocked
    layout ``wgmma_accumulator_layout`` (spt (1, 2), tpw (8, 4), wpc (4G, 1)). With that layout
    on C and D (the layout stage's choice) the accumulator stays in registers; otherwise it is
    staged through shared memory. Protocol: st.shared, ``fence.proxy.async.shared::cta``,
    bar.sync, ``wgmma.fence``, the chain over (q, N chunk, K step), ``commit_group``,
    ``wait_group 0``."""

    a, b, c = op.operands[0], op.operands[1], op.operands[2]
    lay0 = wgmma_accumulator_layout(em.num_warps)
    ep = None
    if (
        WGMMA_FUSED_EPILOGUE
        and em.dist_of(op, c.type).layout == em.dist_of(op, op.results[0].type).layout == lay0
    ):
        ep = epilogue.plan(em, op)  # applied per wgmma instance as it completes
        if ep:
            epilogue.begin(em, ep)
    for v, i in ((a, 0), (b, 1)):  # what does not copy into the K-major layouts
        st = staged_of(em, v)
        if (
            st is not None
            and not isinstance(st.pipe_buf, StagedBox)
            and staged_layout(op, i, em.num_warps, em.sm, st.transposed, st.convert) is None
        ):
            unstage(em, v)
    a_st, b_st = staged_of(em, a), staged_of(em, b)
    res = op.results[0]
    row = plan.row
    em.need_isa(row.ptx_isa)
    em.need_target_suffix("a")
    M, K = a.type.shape
    N = b.type.shape[1]
    W, G = em.num_warps, plan.groups
    esz, csz, tk = plan.esz, plan.csz, plan.tk
    dc = em.dist_of(op, c.type)
    da = None if a_st is not None else em.dist_of(op, a.type)
    db = None if b_st is not None else em.dist_of(op, b.type)
    dr = em.dist_of(op, res.type)
    lay = wgmma_accumulator_layout(W)
    in_regs = dc.layout == dr.layout == lay
    sbo = wgmma_sbo(K, esz)
    # 8-bit B row-major: copied as is (raw), then transposed into the K-major layout; 16-bit
    # B row-major: copied as is into the N-major layout (bn), read with imm-trans-b
    b8 = b_st is not None and not b_st.transposed and esz == 1
    bn = b_st is not None and not b_st.transposed and esz == 2
    kept_a = em.resident_a.get(op)  # written before the loop (keep_invariant_a)
    # A in the accumulator's own layout (attention's P = exp(QK^T - m) as f16): handed to
    # wgmma in registers, the m64nNk16 C fragment being the A fragment of the next MMA
    a_regs = (
        a_st is None and kept_a is None and esz == 2 and da.layout == wgmma_accumulator_layout(W)
    )
    # the scratch holds only what this dot writes there: A unless it is kept, in registers or
    # in a pipeline stage; B unless it is in a stage (a kept Q and a TMA-staged K^T: nothing)
    a_here = (a_st is None and kept_a is None and not a_regs) or (
        a_st is not None and a_st.pipe_buf is None
    )
    b_here = b_st is None or b_st.pipe_buf is None or b8
    off_b = M // 8 * sbo if a_here else 0
    off_c = round_up(off_b + N // 8 * sbo) if b_here else off_b
    total = off_c if in_regs else off_c + M * N * csz
    praw = padded_pitch(N, 1)
    off_raw = round_up(total)
    kchunk = raw_rows(off_raw, K, praw) if b8 and b_st.pipe_buf is None else K
    if b8 and not kchunk:
        unstage(em, b)  # no room for even a chunk of the raw copy: B through registers
        b_st, b8 = None, False
        db = em.dist_of(op, b.type)
    if b8 and b_st.pipe_buf is None:
        total = off_raw + kchunk * praw
    check_scratch(em, op, total)
    em.need_smem(max(total, 16))  # (the descriptors' base is the scratch's, even when empty)
    a_rows, kf = wgmma_a_fields(K, esz, G)
    b_rows = ((0, 3, 16), (3, None, sbo))
    st_c = {"f32": "f32", "b32": "b32"}[plan.c_cls]
    # what this dot writes to shared memory itself (else no barrier around it: the staged
    # operands' stage was made visible by the loop's own wait + barrier)
    writes = (
        (a_st is None and kept_a is None and not a_regs)
        or (a_st is not None and a_st.pipe_buf is None)
        or b_st is None
        or b8
        or (b_st is not None and b_st.pipe_buf is None)
        or not in_regs
    )
    if writes:
        em.barrier()
    if a_st is None and kept_a is None and not a_regs:
        write_fields(em, em.tile(op, a), da, (a_rows, kf), 1, 0, esz)
    elif a_st is not None and a_st.pipe_buf is None:  # cp.async straight into the K-major layout
        cp_async_tile(em, a_st, a_rows, kf, em.smem_base())
    if b_st is None:
        write_fields(em, em.tile(op, b), db, (kf, b_rows), 0, off_b, esz)  # B[k, n]: row n
    elif b8 and b_st.pipe_buf is None:
        if kchunk == K:  # else copied in chunks below
            cp_async_tile(em, b_st, ((0, None, praw),), ((0, None, 1),), em.smem_base(), off_raw)
    elif bn and b_st.pipe_buf is None:  # B as loaded: N-major
        rows_n, cols_n, _ = nmajor_layout(K, N)
        cp_async_tile(em, b_st, rows_n, cols_n, em.smem_base(), off_b)
    elif b_st.pipe_buf is None:  # B^T loaded as such (a permuted tile): rows n, K-major
        cp_async_tile(em, b_st, b_rows, kf, em.smem_base(), off_b)
    copies = any(x is not None and x.pipe_buf is None for x in (a_st, b_st))
    if b8 and kchunk != K:
        copies = a_st is not None and a_st.pipe_buf is None
    dl = dist(lay, (M, N))
    cform = row_major((M, N))
    if not in_regs:
        write_strided(em, em.tile(op, c), dc, cform.mults, off_c, csz, st_c)
    if copies:
        here = [a_st] + ([] if b8 and kchunk != K else [b_st])  # (B's chunks wait below)
        cp_async_commit_wait(em, *(x for x in here if x is not None and x.pipe_buf is None))
    if b8 and kchunk != K:  # raw K x N bytes in chunks -> B's K-major layout (rows n)
        dst = add_offset(em, em.smem_base(), off_b)
        stage_b8_chunks(
            em, b_st, kchunk, K, N, praw, kf, b_rows, off_raw, dst, M * N // em.num_threads
        )
    elif b8:  # raw K x N bytes -> B's K-major layout (rows n)
        if b_st.pipe_buf is None:
            em.barrier()
        raw = (
            b_st.pipe_buf if b_st.pipe_buf is not None else add_offset(em, em.smem_base(), off_raw)
        )
        dst = add_offset(em, em.smem_base(), off_b)
        transpose_bytes(em, raw, praw, K, N, kf, b_rows, dst, 0, M * N // em.num_threads)
    # generic-proxy writes -> async-proxy (wgmma) reads: proxy fence, then the CTA barrier
    if writes:
        em.ins("fence.proxy.async.shared::cta")
        em.barrier()
    # accumulator registers per (q, chunk): wgmma fragment index 4 j + 2 h + s
    nq = M // (64 * G)
    acc = {(q, ci): [None] * (n // 2) for q in range(nq) for ci, (_, n) in enumerate(plan.chunks)}
    where = []  # per register of dl: (q, chunk, index)
    c_in = em.tile(op, c) if in_regs else None
    fused = bool(ep) and in_regs
    if op in em.wgmma_deferred and (fused or not in_regs):
        fail(op, "PTX backend: an overlapped wgmma dot must keep its accumulator in registers")
    inits: dict = {}  # (q, chunk) -> the copies of C into that instance's registers
    # a K loop's accumulation waited for a step later (deferred_mma.py): the wgmmas write
    # the loop's own registers (C, used by nothing else), so the next iteration's chain on
    # them while these are in flight
    defer = em.mma_defer
    if defer is None or defer.dot is not op or not in_regs or fused or writes:
        defer = None
    for k in range(dl.nregs):
        rr, rc = dl.raw[k]
        rm = rr // (8 * W)
        h, q = rm & 1, rm >> 1
        ci = next(i for i, (n0, n) in enumerate(plan.chunks) if n0 <= rc < n0 + n)
        j, s = (rc - plan.chunks[ci][0]) // 8, rc % 2
        idx = 4 * j + 2 * h + s
        if defer is not None:  # in place
            r = c_in[k]
        elif in_regs:
            r = em.new(plan.c_cls)
            inits.setdefault((q, ci), []).append(f"mov.{plan.c_cls} {r}, {c_in[k]}")
        else:
            r = em.new(plan.c_cls)
            em.ins(f"ld.shared.{st_c} {r}, {em.smem_ref(dl, cform, k, csz, off_c)}")
        acc[(q, ci)][idx] = r
        where.append((q, ci, idx))
    if not fused:  # fused: each instance's registers start right before it (live ranges)
        for lines in inits.values():
            for line in lines:
                em.ins(line)
    key = ("wgmma-desc", M, N, K, esz, G, bn, kept_a, off_b)
    b_sbo, b_lbo = (NM_SBO, nmajor_lbo(N)) if bn else (sbo, LBO)
    if key not in em._smem_refs:
        with em.hoisted():
            _, _, warp = em.tid()
            base = em.smem_base()
            wg = 0
            if G > 1:
                wg = em.new("b32")
                em.ins(f"shr.u32 {wg}, {warp}, 2")
            pa = em.smem_addr(em.lincomb(0, [(8 * sbo, wg)]), 1)
            if kept_a is not None:  # the kept copy's array instead of the scratch
                pa = em.lincomb(0, [(1, pa), (1, kept_a)])
                r = em.new("b32")
                em.ins(f"sub.s32 {r}, {pa}, {em.smem_base()}")
                pa = r
            pb = em.new("b32")
            em.ins(f"add.s32 {pb}, {base}, {off_b}")
            p = em.new("pred")
            em.ins(f"mov.pred {p}, -1")
            em._smem_refs[key] = (_descriptor(em, pa, sbo), _descriptor(em, pb, b_sbo, b_lbo), p)
    desc_a, desc_b, scale_d = em._smem_refs[key]
    # A copied by TMA into 128-byte-wide column boxes, rows in this layout's order
    # (async_kept.py): K-major, swizzled by the box's span; warp group wg at row 64 wg
    boxed_a = a_st.pipe_buf if a_st is not None else None
    if isinstance(boxed_a, StagedBox):
        start = boxed_a.addr
        if G > 1:
            _, _, warp = em.tid()
            wg = em.new("b32")
            em.ins(f"shr.u32 {wg}, {warp}, 2")
            start = em.lincomb(0, [(1, start), (64 * boxed_a.span, wg)])
        desc_a = wgmma_descriptor(em, start, 16, 8 * boxed_a.span, boxed_a.span)
    elif a_st is not None and a_st.pipe_buf is not None:  # this iteration's pipeline stage
        wgo = 0
        if G > 1:
            _, _, warp = em.tid()
            wg = em.new("b32")
            em.ins(f"shr.u32 {wg}, {warp}, 2")
            wgo = em.lincomb(0, [(8 * sbo, wg)])
        desc_a = _descriptor(em, add_offset(em, a_st.pipe_buf, wgo), sbo)
    boxed = b_st.pipe_buf if b_st is not None and isinstance(b_st.pipe_buf, StagedBox) else None
    if boxed is not None:  # TMA's swizzled column boxes: start, LBO (next box), SBO (8 rows)
        if esz != 2:
            fail(op, "PTX backend: a TMA-staged wgmma B operand must be 16-bit")
        if boxed.kmajor != b_st.transposed:  # a box two dots read, one of them transposed
            boxed = StagedBox(boxed.addr, boxed.span, b_st.transposed, boxed.box_bytes)
        span = boxed.span
        lbo = 16 if boxed.kmajor else K * span
        desc_b = wgmma_descriptor(em, boxed.addr, lbo, 8 * span, span)
    elif b_st is not None and b_st.pipe_buf is not None and not b8:
        desc_b = _descriptor(em, b_st.pipe_buf, b_sbo, b_lbo)
    imms = plan.imms[: plan.imms.rindex(",")] + ", 1" if bn else plan.imms
    a_frag = None
    if a_regs:  # no imm-trans-a with A in registers
        imms = ", 1, 1, " + imms[-1]
        a_frag = _a_fragments(em, em.tile(op, a), da, W)
    if not fused:
        em.ins("wgmma.fence.sync.aligned")

    def issue(q: int, ci: int, s: int) -> None:
        n0, n = plan.chunks[ci]
        step = s * tk * esz // 16 * LBO
        rb = em.new("b64")
        if a_frag is not None:
            ra = "{" + ", ".join(a_frag[(q, s)]) + "}"
        elif isinstance(boxed_a, StagedBox):  # rows 64 (q G + wg); K bytes in column boxes
            ra = em.new("b64")
            kb, span = s * tk * esz, boxed_a.span
            a_off = q * G * 64 * span + kb // span * boxed_a.box_bytes + kb % span
            em.ins(f"add.s64 {ra}, {desc_a}, {a_off >> 4}")
        else:
            ra = em.new("b64")
            em.ins(f"add.s64 {ra}, {desc_a}, {(q * G * 8 * sbo + step) >> 4}")
        b_off = n0 // 8 * b_sbo + (s * tk // 8 * b_lbo if bn else step)
        if boxed is not None and boxed.kmajor:  # rows n; K bytes in column boxes
            kb = s * tk * esz
            b_off = n0 * boxed.span + kb // boxed.span * boxed.box_bytes + kb % boxed.span
        elif boxed is not None:  # K rows of span bytes; column boxes K span apart
            b_off = n0 * esz // 128 * K * boxed.span + s * tk * boxed.span
        em.ins(f"add.s64 {rb}, {desc_b}, {b_off >> 4}")
        dregs = ", ".join(acc[(q, ci)])
        em.ins(f"{row.opcode(n)} {{{dregs}}}, {ra}, {rb}, {scale_d}{imms}")

    if not fused:  # K steps outermost: consecutive wgmmas write different accumulators
        for s in range(K // tk):  # (as tileiras and CUTLASS issue them)
            for q in range(nq):
                for ci in range(len(plan.chunks)):
                    issue(q, ci, s)
    for q in range(nq) if fused else ():
        for ci in range(len(plan.chunks)):
            for line in inits.get((q, ci), ()):
                em.ins(line)
            em.ins("wgmma.fence.sync.aligned")
            for s in range(K // tk):
                issue(q, ci, s)
            # this instance's partial result, consumed before the next one starts
            em.ins("wgmma.commit_group.sync.aligned")
            em.ins("wgmma.wait_group.sync.aligned 0")
            regs = {k: acc[w[:2]][w[2]] for k, w in enumerate(where) if w[:2] == (q, ci)}
            epilogue.chunk(em, ep, regs)
    if not fused:
        em.ins("wgmma.commit_group.sync.aligned")
        if defer is not None:  # (the loop waits: deferred_mma.WgmmaSteps)
            defer.used = True
        elif op not in em.wgmma_deferred:  # else the caller waits (async_overlap.py)
            em.ins("wgmma.wait_group.sync.aligned 0")
    if in_regs:
        em.set(res, [acc[(q, ci)][idx] for q, ci, idx in where])
        if fused:
            epilogue.finish(em, ep, len(where))
        return
    for k, (q, ci, idx) in enumerate(where):
        em.ins(f"st.shared.{st_c} {em.smem_ref(dl, cform, k, csz, off_c)}, {acc[(q, ci)][idx]}")
    em.barrier()
    cls = ELEMENTS[elem_key(c.type)][0]
    out = []
    for k in range(dr.nregs):
        r = em.new(cls)
        em.ins(f"ld.shared.{st_c} {r}, {em.smem_ref(dr, cform, k, csz, off_c)}")
        out.append(r)
    em.set(res, out)
