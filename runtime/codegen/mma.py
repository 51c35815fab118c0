"""``nv_tileaa.dot``: the handler, which dispatches to wgmma (:mod:`wgmma_dot`), tcgen05
(:mod:`tcgen05_dot`) or the fma dot (:mod:`fma_dot`), and the ``mma.sync`` dot (sm_80+),
staged through shared memory.

A (M x K) is stored row-major, B (K x N) transposed (N x K, so each fragment register is one
32-bit word along K), C row-major. Warps form a ``wm x wn`` grid over the (16 x 8) MMA tiles of
C (8 x 8 for f64); each warp loads its fragments with ``ld.shared`` (the PTX ISA fragment
layouts: g = lane / 4, t = lane % 4), runs the K steps, and writes D back in place; the result
is then read in the result tile's own layout. The instruction per (A, B, C) element types and
target is a row of :data:`~tilegen.runtime.codegen.mma_rows.MMA_ROWS`. Operands cp.async-staged
or in a pipeline stage take :func:`_mma_sync_staged`.
"""

from __future__ import annotations

from tilegen.runtime.codegen import epilogue
from tilegen.runtime.codegen.core import ELEMENTS, Emitter, elem_key, fail, handles
from tilegen.runtime.codegen.exchange import Form, row_major
from tilegen.runtime.codegen.fma_dot import fma_dot
from tilegen.runtime.codegen.memory import cp_async_tile
from tilegen.runtime.codegen.mma_rows import (
    MmaRow,
    converted_regs,
    issue_mma,
    ldmatrix,
    select_row,
)
from tilegen.runtime.codegen.mma_staging import (
    StagedBox,
    add_offset,
    check_scratch,
    cp_async_commit_wait,
    dot_dims,
    ld_pitch,
    padded_pitch,
    raw_rows,
    round_up,
    scratch_cap,
    stage_b8_chunks,
    staged_layout,
    staged_of,
    transpose_bytes,
    unstage,
    write_strided,
)
from tilegen.runtime.codegen.mma_sync_lanes import (
    box_a_lanes,
    box_a_step,
    box_lanes,
    box_ldmatrix,
    lane_addresses,
    pad_guards,
    rows_lane_offset,
    staged_lane_offsets,
)
from tilegen.runtime.codegen.selection import conversion_ptx
from tilegen.runtime.codegen.smem_fields import write_fields
from tilegen.runtime.codegen.tcgen05_dot import tcgen05_dot, tcgen05_plan
from tilegen.runtime.codegen.wgmma_dot import wgmma_dot
from tilegen.runtime.codegen.wgmma_layout import wgmma_plan
from tilegen.runtime.layouts.kernel import register_cap
from tilegen.runtime.layouts.mma_choice import (
    SMEM_LIMIT,
    mma_sync_accumulator_layout,
    mma_sync_rows_fragment,
)


def _zero_fill(em: Emitter, rows: int, pitch: int, k0: int, esz: int, base: int) -> None:
    """Zero columns ``k0 .. pitch - 1`` of ``rows`` rows (``pitch`` elements each) of the
    scratch at byte ``base``: the K padding of a dot operand, spread over the CTA's threads."""
    tid, _, _ = em.tid()
    st = {1: "b8", 2: "b16", 4: "b32", 8: "b64"}[esz]
    width = pitch - k0
    total = rows * width
    T = em.num_threads
    for i0 in range(0, total, T):
        idx = em.lincomb(i0, [(1, tid)])
        r, c = em.new("b32"), em.new("b32")
        em.ins(f"div.u32 {r}, {idx}, {width}")
        em.ins(f"rem.u32 {c}, {idx}, {width}")
        flat = em.lincomb(k0, [(pitch, r), (1, c)])
        addr = em.smem_addr(flat, esz)
        guard = ""
        if i0 + T > total:
            p = em.new("pred")
            em.ins(f"setp.lt.u32 {p}, {idx}, {total}")
            guard = f"@{p} "
        em.ins(f"{guard}st.shared.{st} [{addr}+{base}], 0")


def _stacked(em: Emitter, op, row: MmaRow) -> bool:
    """Whether mma.sync dot ``op`` has its warps stacked along M (``mma_sync_rows_layout``:
    C and the result in that layout, several warps - on one the two layouts are one - and 16-bit
    operands read by ``ldmatrix``)."""
    c, res = op.operands[2], op.results[0]
    lay = em.dist_of(op, res.type).layout
    esz = ELEMENTS[elem_key(op.operands[0].type)][1]
    return (
        em.num_warps > 1
        and esz == 2
        and row.frag_cls == "b32"
        and row.shape[2] * esz == 32
        and em.dist_of(op, c.type).layout == lay == mma_sync_rows_fragment(em.num_warps)
    )


def _epilogue_chunk(em: Emitter, ep, kmap: dict, row: MmaRow, m0: int, n0: int, cregs) -> None:
    """The epilogue plan ``ep`` applied to MMA tile (m0, n0)'s finished registers ``cregs``."""
    epilogue.chunk(em, ep, {kmap[(m0 + dm, n0 + dn)]: r for (dm, dn), r in zip(row.c_regs, cregs)})


def _mma_sync_staged(em: Emitter, op, row: MmaRow, a_st, b_st) -> None:
    """The mma.sync dot with A and/or B cp.async-staged (``memory.Staged``): A row-major M x K
    (pitch K esz + 16), B row-major K x N (pitch N esz + 16; fragments by ``ldmatrix .trans``
    for 16-bit types, ``ld.shared`` otherwise), copied by ``cp.async`` right here (then
    ``commit_group``, ``wait_group 0``, ``bar.sync``) or, in a pipelined K loop, already waiting
    in that loop's stage buffer (``Staged.pipe_buf``; control.py issued the copies and the
    barrier). Register operands keep the old layouts (A row-major, B^T N x K)."""

    a, b, c = op.operands[0], op.operands[1], op.operands[2]
    res = op.results[0]
    ka, kc = elem_key(a.type), elem_key(c.type)
    ep = None
    acc_layout = mma_sync_accumulator_layout(op, em.num_warps)
    if em.dist_of(op, c.type).layout == em.dist_of(op, res.type).layout == acc_layout:
        ep = epilogue.plan(em, op)  # applied per MMA tile as its K steps complete
        if ep:
            epilogue.begin(em, ep)
    em.need_isa(row.ptx_isa)
    M0, K = a.type.shape
    N = b.type.shape[1]
    tm, tn, tk = row.shape
    if N % tn or K % tk:
        fail(
            op, f"PTX backend does not support a {M0}x{N}x{K} dot with {row.ptx.split('.')[3]} yet"
        )
    M = -(-M0 // tm) * tm  # rows past M0: padding whose results are never stored
    esz = ELEMENTS[ka][1]
    csz = ELEMENTS[kc][1]
    W = em.num_warps
    dc, dr = em.dist_of(op, c.type), em.dist_of(op, res.type)
    # the warps stacked along M (mma_sync_rows_layout: attention's chain): rows r = 2 i, 2 i + 1
    # of a warp are its MMA tile i's rows g and g + 8, every warp reads all of B
    by_rows = _stacked(em, op, row)
    in_regs = by_rows or dc.layout == dr.layout == mma_sync_accumulator_layout(op, W)
    # B in a TMA stage of sm_120's general async form (StagedBox: swizzled column boxes)
    box = b_st.pipe_buf if b_st is not None and isinstance(b_st.pipe_buf, StagedBox) else None
    if box is not None:  # (K-major where this dot reads the tile transposed: one load may be
        # read both ways, attention's backward Q and dO)
        box = StagedBox(box.addr, box.span, b_st.transposed, box.box_bytes)
    if box is not None and (esz != 2 or tk * esz != 32 or not in_regs):
        fail(
            op,
            "PTX backend: an mma.sync dot reads its B from a TMA stage only with 16-bit "
            "operands into the accumulator's registers (async_general._sync_general_reason)",
        )
    kept_a = em.resident_a.get(op) if a_st is None else None  # (keep_invariant_a's rows)
    # A copied by TMA (async_kept.py): its rows in order in swizzled column boxes
    box_a = a_st.pipe_buf if a_st is not None and isinstance(a_st.pipe_buf, StagedBox) else None
    if box_a is not None and (esz != 2 or tk * esz != 32):
        fail(op, "PTX backend: an mma.sync dot reads A copied by TMA only by ldmatrix")
    pa = ld_pitch(K, esz, False)  # (A from registers too: written at the padded pitch)
    # A in the rows layout (P = softmax(Q K^T) as f16): the C fragment of one MMA is the A
    # fragment of the next, no shared memory
    a_regs = (
        by_rows
        and a_st is None
        and kept_a is None
        and esz == 2
        and em.dist_of(op, a.type).layout == dr.layout
    )
    b_kn = b_st is not None and not b_st.transposed  # else B^T (N x K)
    # 8-bit B row-major: copied as is (raw), then transposed into B^T (N x K) in the scratch
    b8 = b_kn and esz == 1
    praw = padded_pitch(N, 1)
    kchunk = K
    if b8 and b_st.pipe_buf is None:
        before = (0 if a_st is not None and a_st.pipe_buf is not None else M * pa) + 32
        before += N * padded_pitch(K, 1) + (0 if in_regs else M * N * csz)
        kchunk = raw_rows(before, K, praw)
        if not kchunk:  # no room for even a chunk of the raw copy: B through registers
            unstage(em, b)
            if a_st is None:
                return dot(em, op)
            b_st, b_kn, b8 = None, False, False
    size_raw = kchunk * praw if b8 and b_st.pipe_buf is None else 0
    if b8:
        b_kn = False
    pbk = K * esz if b_st is None else ld_pitch(N, esz, True) if b_kn else ld_pitch(K, esz, False)
    # scratch: operands not in a pipeline stage buffer, then C if it is not in registers
    size_a = 0 if (a_st is not None and a_st.pipe_buf is not None) or kept_a or a_regs else M * pa
    b_in_pipe = b_st is not None and b_st.pipe_buf is not None and not b8
    size_b = 0 if b_in_pipe else (K if b_kn else N) * pbk
    off_b = round_up(size_a)
    off_c = round_up(off_b + size_b)
    total = off_c if in_regs else off_c + M * N * csz
    off_raw = round_up(total)
    total = off_raw + size_raw
    cap = max(SMEM_LIMIT, scratch_cap(em))
    if total > cap and all(x is None or x.pipe_buf is None for x in (a_st, b_st)):
        unstage(em, a)  # the padded layouts do not fit: the register path's might
        unstage(em, b)
        return dot(em, op)
    check_scratch(em, op, total)
    em.need_smem(total)
    st_ab = {1: "b8", 2: "b16", 4: "b32", 8: "f64"}[esz]
    st_c = {"f32": "f32", "b32": "b32", "f64": "f64"}[row.c_cls]
    writes = (a_st is None and kept_a is None and not a_regs) or b_st is None or not in_regs
    copies = any(s is not None and s.pipe_buf is None for s in (a_st, b_st))
    if writes or copies:
        em.barrier()
    if a_st is None and kept_a is None and not a_regs:  # (runs along K packed into words)
        fields = (((0, None, pa),), ((0, None, esz),))
        write_fields(em, em.tile(op, a), em.dist_of(op, a.type), fields, 1, 0, esz)
    elif a_st is not None and a_st.pipe_buf is None:
        f = staged_layout(op, 0, W, em.sm, a_st.transposed, a_st.convert)
        cp_async_tile(em, a_st, f[0], f[1], em.smem_base(), 0)
    if b_st is None:
        write_strided(em, em.tile(op, b), em.dist_of(op, b.type), (1, K), off_b, esz, st_ab)
    elif b_st.pipe_buf is None and kchunk == K:  # (8-bit B in chunks: below)
        f = staged_layout(op, 1, W, em.sm, b_st.transposed, b_st.convert)
        cp_async_tile(em, b_st, f[0], f[1], em.smem_base(), off_raw if b8 else off_b)
    if not in_regs:
        write_strided(em, em.tile(op, c), dc, row_major((M, N)).mults, off_c, csz, st_c)
    if copies:
        here = [a_st] + ([b_st] if kchunk == K else [])  # (B's chunks wait below)
        cp_async_commit_wait(em, *(x for x in here if x is not None and x.pipe_buf is None))
    if writes or copies:
        em.barrier()
    if b8 and kchunk != K:  # raw K x N bytes in chunks -> B^T rows n (pitch pbk)
        dst = add_offset(em, em.smem_base(), off_b)
        fr, fc = ((0, None, 1),), ((0, None, pbk),)
        stage_b8_chunks(em, b_st, kchunk, K, N, praw, fr, fc, off_raw, dst, M * N // em.num_threads)
        em.barrier()
    elif b8:  # raw K x N bytes -> B^T rows n (pitch pbk)
        raw = (
            b_st.pipe_buf if b_st.pipe_buf is not None else add_offset(em, em.smem_base(), off_raw)
        )
        dst = add_offset(em, em.smem_base(), off_b)
        fr, fc = ((0, None, 1),), ((0, None, pbk),)
        transpose_bytes(em, raw, praw, K, N, fr, fc, dst, 0, M * N // em.num_threads)
        em.barrier()
    kmap = {dc.raw[k]: k for k in range(dc.nregs)} if in_regs else None
    c_in = em.tile(op, c)
    out = [None] * dr.nregs
    tiles_m, tiles_n = M // tm, N // tn
    wn = 1 if by_rows else W if in_regs else min(W, tiles_n)
    wm = W if by_rows else 1 if in_regs else min(W // wn, tiles_m)
    active = wm * wn
    reps_m, reps_n = tiles_m // wm, tiles_n // wn
    _, lane, warp = em.tid()
    use_ldm = row.frag_cls == "b32" and tk * esz == 32
    ldm_b = use_ldm and (not b_kn or esz == 2)  # ldmatrix .trans moves 16-bit elements only
    # today's path: column groups rb, rb + 1 of B by one ldmatrix.x4, where the kernel sets no
    # register cap, and in a chain (attention) only for a dot of fewer than 128 accumulators a
    # thread whose A is not in registers (P V keeps P live): elsewhere the second group's
    # fragments tipped kernels that spill further (fuzz seeds 950099 and 950623 under a cap,
    # 1600044's P V)
    pair_b = (
        box is None
        and ldm_b
        and reps_n % 2 == 0
        and register_cap(em.func, em.num_threads) is None
        and not (by_rows and (a_regs or dr.nregs >= 128))
    )
    key = ("mma-staged-lanes", M, N, K, esz, wm, wn, use_ldm, ldm_b, row.epr, tm, tn, pa, pbk, b_kn)
    key += (by_rows, pair_b)
    if key not in em._smem_refs:
        with em.hoisted():
            rA, rB = staged_lane_offsets(
                em, lane, warp, row, wn, esz, pa, pbk, b_kn, use_ldm, ldm_b, pair_b
            )
            if by_rows:  # lane l: row 8 w + l % 8 + 8 W ((l / 8) % 2), 16-byte chunk l / 16
                rA = rows_lane_offset(em, lane, warp, W, pa)
            em._smem_refs[key] = (rA, rB)
    rA, rB = em._smem_refs[key]

    def scratch_addr(tag, rel, esize=1):
        """Absolute address from the scratch base (only referenced when the scratch is)."""
        k2 = (tag,) + key + (esize,)
        if k2 not in em._smem_refs:
            with em.hoisted():
                em._smem_refs[k2] = em.smem_addr(rel, esize)
        return em._smem_refs[k2]

    aC = None
    if not in_regs:
        k3 = ("mma-staged-c",) + key + (csz,)
        if k3 not in em._smem_refs:
            with em.hoisted():
                g, t = em.new("b32"), em.new("b32")
                em.ins(f"shr.u32 {g}, {lane}, 2")
                em.ins(f"and.b32 {t}, {lane}, 3")
                wmi, wni = em.new("b32"), em.new("b32")
                em.ins(f"shr.u32 {wmi}, {warp}, {wn.bit_length() - 1}")
                em.ins(f"and.b32 {wni}, {warp}, {wn - 1}")
                rC = em.lincomb(0, [(tm * N, wmi), (N, g), (tn, wni), (2, t)])
                em._smem_refs[k3] = em.smem_addr(rC, csz)
        aC = em._smem_refs[k3]
    skip = None
    if active < W:
        skip = em.new_label("mma_skip")
        p = em.new("pred")
        em.ins(f"setp.ge.u32 {p}, {warp}, {active}")
        em.ins(f"@{p} bra {skip}")
    # fragment bases: scratch operands from the hoisted addresses, stage buffers per iteration
    if box_a is not None:  # the lane's swizzled chunk of K step 0 (box_a_step: the others)
        aA = box_a_lanes(em, box_a, W, by_rows)
    elif a_st is not None and a_st.pipe_buf is not None:
        aA, oA = add_offset(em, a_st.pipe_buf, rA), 0
    elif kept_a is not None:
        aA, oA = add_offset(em, kept_a, rA), 0
    elif a_regs:  # (the fragments are registers of A)
        aA, oA = None, 0
    else:
        aA, oA = scratch_addr("A", rA), 0
    if box is not None:  # per-lane swizzled chunks of this iteration's boxes
        aB = [add_offset(em, box.addr, r) for r in box_lanes(em, box, W, reps_n, by_rows)]
    elif b_in_pipe:
        aB, oB = add_offset(em, b_st.pipe_buf, rB), 0
    else:
        aB, oB = scratch_addr("B", rB), off_b
    fld = "f64" if row.frag_cls == "f64" else "b32"
    ksteps = K // tk
    unpacked: dict = {}  # fragment register -> its f16x2 halves (row.unpack)
    keep = pad_guards(em, lane, warp, row, wn, M0, N, M, N) if M != M0 else None

    def converted(regs, st):
        """Fragments of an operand staged before its f32 -> tf32 conversion, converted."""
        if st is None or not st.convert:
            return regs
        return converted_regs(em, regs, conversion_ptx(st.convert, em.sm))

    amap = None
    if a_regs:  # (register k of A at its raw coordinate)
        da = em.dist_of(op, a.type)
        amap = {da.raw[k]: r for k, r in enumerate(em.tile(op, a))}
    crow = (lambda dm: dm // 8 * 8 * W) if by_rows else (lambda dm: dm)  # noqa: E731
    # B from a TMA stage, the warps stacked along M: column groups rb, rb + 1 read by one
    # ldmatrix.x4 (lanes 16-31 at the next 8 columns: async_mma_sync.bt_offsets / b_offsets)
    # and their MMAs interleaved, as tileiras reads B (docs/pipelines.md section 49)
    # (today's path too where pair_b: lanes 16-31 address the second, staged_lane_offsets)
    npair = (reps_n % 2 == 0 and box is not None and by_rows) or pair_b
    step = 2 if npair else 1
    groups = [tuple(range(g, g + step)) for g in range(0, reps_n, step)]
    for ra in range(reps_m):
        m0 = ra * wm * tm
        afr = []
        for s in range(ksteps):
            regs = [em.new(row.frag_cls) for _ in row.a_regs]
            if amap is not None:  # (dm, dk): the halves at columns dk, dk + 1 of K step s
                for r, (dm, dk) in zip(regs, row.a_regs):
                    lo, hi = (amap[(m0 + crow(dm), s * tk + dk + e)] for e in (0, 1))
                    em.ins(f"mov.b32 {r}, {{{lo}, {hi}}}")
            elif box_a is not None:  # (rows m0 ..; K step s in its box)
                bx, j = divmod(s, box_a.span // (tk * esz))
                off = bx * box_a.box_bytes + m0 * box_a.span
                at = box_a_step(em, aA, j)
                em.ins(f"{ldmatrix(regs)} {{{', '.join(regs)}}}, [{at}+{off}]")
            elif use_ldm:
                off = oA + m0 * pa + s * tk * esz
                em.ins(
                    f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(regs)}}}, [{aA}+{off}]"
                )
            else:
                for r, (dm, dk) in zip(regs, row.a_regs):
                    off = oA + (m0 + dm) * pa + (s * tk + dk) * esz
                    em.ins(f"ld.shared.{fld} {r}, [{aA}+{off}]")
            afr.append(converted(regs, a_st))
        for grp in groups:
            acc = {}
            for rb in grp:
                n0 = rb * wn * tn
                cregs = []
                for dm, dn in row.c_regs:
                    if in_regs:
                        cregs.append(c_in[kmap[(m0 + crow(dm), n0 + dn)]])
                        continue
                    r = em.new(row.c_cls)
                    off = off_c + ((m0 + dm) * N + n0 + dn) * csz
                    em.ins(f"ld.shared.{st_c} {r}, [{aC}+{off}]")
                    cregs.append(r)
                acc[rb] = cregs

            def load_b(regs, s, rb):
                """B's fragments of K step ``s`` for column group ``rb`` (with 4 ``regs``,
                from a TMA stage: group rb + 1's too)."""
                n0 = rb * wn * tn
                if box is not None:
                    box_ldmatrix(em, box, regs, aB, rb, s, n0, tk * esz)
                elif b_kn:  # (ldmatrix .trans)
                    off = oB + s * tk * pbk + n0 * esz
                    em.ins(f"{ldmatrix(regs, True)} {{{', '.join(regs)}}}, [{aB}+{off}]")
                else:
                    off = oB + n0 * pbk + s * tk * esz
                    em.ins(f"{ldmatrix(regs)} {{{', '.join(regs)}}}, [{aB}+{off}]")

            for s in range(ksteps):
                got = {}
                if len(grp) == 2:  # both groups' fragments of step s by one ldmatrix.x4
                    regs = [em.new(row.frag_cls) for _ in range(4)]
                    load_b(regs, s, grp[0])
                    got = {grp[0]: regs[:2], grp[1]: regs[2:]}
                for rb in grp:
                    n0 = rb * wn * tn
                    if rb in got:
                        bregs = got[rb]
                    elif ldm_b or box is not None:
                        bregs = [em.new(row.frag_cls) for _ in row.b_regs]
                        load_b(bregs, s, rb)
                    else:
                        bregs = [em.new(row.frag_cls) for _ in row.b_regs]
                        for r, dk in zip(bregs, row.b_regs):
                            if b_kn:
                                off = oB + (s * tk + dk) * pbk + n0 * esz
                            else:
                                off = oB + n0 * pbk + (s * tk + dk) * esz
                            em.ins(f"ld.shared.{fld} {r}, [{aB}+{off}]")
                    bregs = converted(bregs, b_st)
                    dregs = [em.new(row.c_cls) for _ in acc[rb]]
                    issue_mma(em, row, dregs, afr[s], bregs, acc[rb], unpacked)
                    acc[rb] = dregs
            for rb in grp:
                n0, cregs = rb * wn * tn, acc[rb]
                if in_regs and ep:
                    _epilogue_chunk(em, ep, kmap, row, m0, n0, cregs)
                for (dm, dn), r in zip(row.c_regs, cregs):
                    if in_regs:
                        out[kmap[(m0 + crow(dm), n0 + dn)]] = r
                        continue
                    guard = keep(m0 + dm, n0 + dn) if keep is not None else ""
                    if guard is None:  # a padding row in every lane
                        continue
                    off = off_c + ((m0 + dm) * N + n0 + dn) * csz
                    em.ins(f"{guard}st.shared.{st_c} [{aC}+{off}], {r}")
    if skip is not None:
        em.label(skip)
    if in_regs:
        em.set(res, out)
        if ep:
            epilogue.finish(em, ep, dr.nregs)
        return
    em.barrier()
    form = row_major((M, N))
    cls = ELEMENTS[kc][0]
    for k in range(dr.nregs):
        r = em.new(cls)
        em.ins(f"ld.shared.{st_c} {r}, {em.smem_ref(dr, form, k, csz, off_c)}")
        out[k] = r
    em.set(res, out)


@handles("nv_tileaa.dot")
def dot(em: Emitter, op) -> None:
    """``nv_tileaa.dot`` on wgmma, tcgen05 or the fma dot where those take it, else on
    ``mma.sync``: cp.async-staged operands by :func:`_mma_sync_staged`, register operands
    through the scratch (module docstring)."""
    a, b, c = op.operands[0], op.operands[1], op.operands[2]
    res = op.results[0]
    if len(op.operands) > 3:
        fail(op, "PTX backend does not support block-scaled dot yet")
    if a.type.rank not in (2, 3):
        fail(op, f"PTX backend does not support a rank-{a.type.rank} dot yet")
    plan = wgmma_plan(op, em.num_warps, em.sm)
    if plan is not None:
        return wgmma_dot(em, op, plan)
    tc = tcgen05_plan(op, em.num_warps, em.sm)
    if tc is not None:
        return tcgen05_dot(em, op, tc)
    ka, kb, kc = elem_key(a.type), elem_key(b.type), elem_key(c.type)
    row = select_row(op, ka, kb, kc, em.sm)
    if row is None:
        return fma_dot(em, op)
    for v, i in ((a, 0), (b, 1)):
        st = staged_of(em, v)
        if (
            st is not None
            and not isinstance(st.pipe_buf, StagedBox)
            and staged_layout(op, i, em.num_warps, em.sm, st.transposed, st.convert) is None
        ):
            unstage(em, v)
    a_st, b_st = staged_of(em, a), staged_of(em, b)
    if a_st is not None or b_st is not None or _stacked(em, op, row):  # (warps along M: there)
        return _mma_sync_staged(em, op, row, a_st, b_st)
    ep = None
    acc_layout = mma_sync_accumulator_layout(op, em.num_warps)
    if em.dist_of(op, c.type).layout == em.dist_of(op, res.type).layout == acc_layout:
        ep = epilogue.plan(em, op)  # applied per MMA tile as its K steps complete
        if ep:
            epilogue.begin(em, ep)
    em.need_isa(row.ptx_isa)
    nb, M0, N0, K0 = dot_dims(op)
    tm, tn, tk = row.shape
    # shapes below (or not a multiple of) the instruction's are padded: rows of A past M and
    # columns of B past N only feed rows / columns of D that are never stored, so their
    # shared memory is left as it is; K padding is zero-filled (it feeds every result)
    M, N, K = -(-M0 // tm) * tm, -(-N0 // tn) * tn, -(-K0 // tk) * tk
    esz = ELEMENTS[ka][1]
    csz = ELEMENTS[kc][1]
    W = em.num_warps
    da, db, dc = em.dist_of(op, a.type), em.dist_of(op, b.type), em.dist_of(op, c.type)
    dr = em.dist_of(op, res.type)

    # accumulator in registers when the layout stage gave C and D the MMA fragment layout
    in_regs = dc.layout == dr.layout == mma_sync_accumulator_layout(op, W)
    # a batched (rank-3) dot: batch slices one after the other in each buffer
    off_b = round_up(nb * M * K * esz)
    off_c = round_up(off_b + nb * N * K * esz)
    total = off_c if in_regs else off_c + nb * M * N * csz
    check_scratch(em, op, total)
    em.need_smem(total)
    st_ab = {1: "b8", 2: "b16", 4: "b32", 8: "f64"}[esz]
    st_c = {"f32": "f32", "b32": "b32", "f64": "f64"}[row.c_cls]
    rank3 = a.type.rank == 3
    abatch, bbatch, cbatch = ((M * K,), (N * K,), (M * N,)) if rank3 else ((), (), ())
    em.barrier()
    write_strided(em, em.tile(op, a), da, abatch + (K, 1), 0, esz, st_ab)
    write_strided(
        em, em.tile(op, b), db, bbatch + (1, K), off_b, esz, st_ab
    )  # B[.., k, n] at n K + k
    if K != K0:
        _zero_fill(em, nb * M, K, K0, esz, 0)
        _zero_fill(em, nb * N, K, K0, esz, off_b)
    if not in_regs:
        write_strided(em, em.tile(op, c), dc, cbatch + (N, 1), off_c, csz, st_c)
    em.barrier()
    kmap = {dc.raw[k]: k for k in range(dc.nregs)} if in_regs else None
    c_in = em.tile(op, c)
    out = [None] * dr.nregs

    # warp grid over the MMA tiles
    tiles_m, tiles_n = M // tm, N // tn
    wn = W if in_regs else min(W, tiles_n)
    wm = 1 if in_regs else min(W // wn, tiles_m)
    active = wm * wn
    reps_m, reps_n = tiles_m // wm, tiles_n // wn
    _, lane, warp = em.tid()
    skip = None
    if active < W:
        skip = em.new_label("mma_skip")
        p = em.new("pred")
        em.ins(f"setp.ge.u32 {p}, {warp}, {active}")
        em.ins(f"@{p} bra {skip}")
    # ldmatrix moves a whole 8x8 b16 (16-byte rows) matrix per four lanes' registers: usable
    # when a K step is 32 bytes (f16/bf16 k16, 8-bit k32, tf32 k8)
    use_ldm = row.frag_cls == "b32" and tk * esz == 32
    key = ("mma-lanes", M, N, K, esz, csz, wm, wn, use_ldm, row.epr, tm, tn)
    if key not in em._smem_refs:
        with em.hoisted():
            em._smem_refs[key] = lane_addresses(em, lane, warp, M, N, K, esz, csz, row, wn, use_ldm)
    aA, aB, aC = em._smem_refs[key]
    fld = "f64" if row.frag_cls == "f64" else "b32"
    ksteps = K // tk
    unpacked: dict = {}  # fragment register -> its f16x2 halves (row.unpack)
    keep = pad_guards(em, lane, warp, row, wn, M0, N0, M, N) if (M, N) != (M0, N0) else None
    for bi in range(nb):
        oa, ob, oc = bi * M * K * esz, off_b + bi * N * K * esz, off_c + bi * M * N * csz
        for ra in range(reps_m):
            m0 = ra * wm * tm
            afr = []
            for s in range(ksteps):
                regs = [em.new(row.frag_cls) for _ in row.a_regs]
                if use_ldm:
                    off = oa + (m0 * K + s * tk) * esz
                    em.ins(
                        f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(regs)}}}, "
                        f"[{aA}+{off}]"
                    )
                else:
                    for r, (dm, dk) in zip(regs, row.a_regs):
                        off = oa + ((m0 + dm) * K + s * tk + dk) * esz
                        em.ins(f"ld.shared.{fld} {r}, [{aA}+{off}]")
                afr.append(regs)
            for rb in range(reps_n):
                n0 = rb * wn * tn
                cregs = []
                for dm, dn in row.c_regs:
                    if in_regs:
                        cregs.append(c_in[kmap[(m0 + dm, n0 + dn)]])
                        continue
                    r = em.new(row.c_cls)
                    off = oc + ((m0 + dm) * N + n0 + dn) * csz
                    em.ins(f"ld.shared.{st_c} {r}, [{aC}+{off}]")
                    cregs.append(r)
                for s in range(ksteps):
                    bregs = [em.new(row.frag_cls) for _ in row.b_regs]
                    if use_ldm:
                        off = ob + (n0 * K + s * tk) * esz
                        em.ins(f"{ldmatrix(bregs)} {{{', '.join(bregs)}}}, [{aB}+{off}]")
                    else:
                        for r, dk in zip(bregs, row.b_regs):
                            off = ob + (n0 * K + s * tk + dk) * esz
                            em.ins(f"ld.shared.{fld} {r}, [{aB}+{off}]")
                    dregs = [em.new(row.c_cls) for _ in cregs]
                    issue_mma(em, row, dregs, afr[s], bregs, cregs, unpacked)
                    cregs = dregs
                if in_regs and ep:
                    _epilogue_chunk(em, ep, kmap, row, m0, n0, cregs)
                for (dm, dn), r in zip(row.c_regs, cregs):
                    if in_regs:
                        out[kmap[(m0 + dm, n0 + dn)]] = r
                        continue
                    guard = keep(m0 + dm, n0 + dn) if keep is not None else ""
                    if guard is None:  # a padding row or column in every lane
                        continue
                    off = oc + ((m0 + dm) * N + n0 + dn) * csz
                    em.ins(f"{guard}st.shared.{st_c} [{aC}+{off}], {r}")
    if skip is not None:
        em.label(skip)
    if in_regs:
        em.set(res, out)
        if ep:
            epilogue.finish(em, ep, dr.nregs)
        return
    em.barrier()
    form = Form(0, cbatch + (N, 1))
    cls = ELEMENTS[kc][0]
    for k in range(dr.nregs):
        r = em.new(cls)
        em.ins(f"ld.shared.{st_c} {r}, {em.smem_ref(dr, form, k, csz, off_c)}")
        out[k] = r
    em.set(res, out)
