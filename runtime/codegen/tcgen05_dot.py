"""A ``dot`` of its own on tcgen05 (sm_100a; the layout stage's ``tcgen05`` family,
runtime/layouts/mma_choice.py ``tcgen05_instruction``).

``D = A @ B + C`` with ``tcgen05.mma.cta_group::1`` into tensor memory, wherever the dot sits:
in today's path, or in the body of the async path's general loop (docs/pipelines.md section
15), where B comes from a TMA stage (``mma_staging.StagedBox``).

* **Operands.** A (M = 128 x K) and B are read through shared-memory descriptors: the no-swizzle
  K-major canonical layout wgmma uses (8 x 16-byte core matrices, LBO = 144 along K, SBO = K / 8
  x 144 per 8 rows), rows in order (TMEM lane = row, no permutation). A and B held in registers
  are written there; a cp.async-staged one is copied there directly (:func:`staged_fields`);
  a loop-invariant A (attention's Q) once before the loop (``invariant_a.keep_invariant_a``); a TMA
  stage is read where it landed (128-byte swizzle, N-major with the MN-major bit, or K-major).
* **Tensor memory.** One allocation per kernel (:func:`tensor_memory`, in the kernel's
  prologue: warp 0 allocates the widest dot's columns, thread 0 initialises the MMA barrier)
  serves every dot: each dot is complete, read and waited for (``tcgen05.wait::ld``) before
  the next one issues. Warp 0 frees it at the kernel's return (:func:`release`).
* **Protocol.** Operand writes, ``fence.proxy.async``, ``tcgen05.fence::before_thread_sync``,
  the CTA barrier; thread 0 issues the K steps (the first overwrites D) and commits them to the
  MMA barrier; every thread waits for its phase (a parity register flipped per dot), reads its
  row (``tcgen05.ld.32x32b``, warp w: lanes 32 (w % 4) ..; 8 warps take column halves) and adds
  C in registers unless C is a zero tile.

The result is in :func:`~tilegen.runtime.layouts.mma_choice.tcgen05_accumulator_layout`: a
row per thread, so a softmax's row reductions stay in the thread.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Optional

from tilegen.runtime.codegen import tcgen05, tmem_resident
from tilegen.runtime.codegen.core import Emitter, elem_key, fail
from tilegen.runtime.codegen.pipeline import (
    mbarrier_init,
    mbarrier_init_fence,
    mbarrier_wait,
    wgmma_descriptor_at,
    wgmma_descriptor_parts,
)
from tilegen.runtime.codegen.smem_fields import write_fields
from tilegen.runtime.codegen.wgmma_layout import NM_SBO, nmajor_layout, nmajor_lbo
from tilegen.runtime.layouts.async_forms import zero_tile
from tilegen.runtime.layouts.decisions import mma_family
from tilegen.runtime.layouts.mma_choice import (
    LBO,
    TCGEN05,
    signedness,
    key_bytes,
    tcgen05_accumulator_layout,
    tcgen05_instruction,
    wgmma_sbo,
)
from tilegen.runtime.records import dataclass

#: the kernel's tcgen05 bookkeeping: the MMA barrier (8 bytes), then the TMEM address
SYMBOL = "__tilegen_tmem"


@dataclass(frozen=True)
class Tcgen05Plan:
    """How one dot runs on ``tcgen05.mma`` (kind::f16, tf32, f8f6f4 or i8; D in tensor
    memory: f32, s32 for i8)."""

    row: object  # the spec/ptx/mma.yaml row
    M: int
    N: int
    K: int
    esz: int
    halves: int  # column parts of a row (M 128 with 8 warps: 2)
    ab: str
    blocks: int = 1  # 128-row blocks (M 256: two MMAs a K step, D blocks N columns apart)


def tcgen05_plan(op, num_warps: int, sm) -> Optional[Tcgen05Plan]:
    """The plan of ``dot`` ``op`` when the layout stage laid it out for tcgen05, else None."""
    if mma_family(op) != TCGEN05:
        return None
    row = tcgen05_instruction(op, num_warps, sm)
    if row is None:
        fail(op, f"PTX backend: this dot was laid out for tcgen05, which sm_{sm} cannot run here")
    a, b = op.operands[0].type, op.operands[1].type
    M, K = a.shape
    blocks = max(1, M // 128)
    ab = elem_key(a)
    halves = num_warps // 4 // blocks
    return Tcgen05Plan(row, M, b.shape[1], K, key_bytes(ab), halves, ab, blocks)


def _rows(K: int, esz: int) -> tuple:
    """(row fields, K fields) of the K-major no-swizzle layout, rows in order."""
    sbo = wgmma_sbo(K, esz)
    kb = 4 - (esz.bit_length() - 1)  # bits of k within a 16-byte core-matrix row
    return ((0, 3, 16), (3, None, sbo)), ((0, kb, esz), (kb, None, LBO))


def staged_fields(plan: Tcgen05Plan, idx: int, transposed: bool, convert) -> Optional[tuple]:
    """(row fields, column fields, bytes) a cp.async-staged operand is copied into, or None:
    that operand comes through registers. A as loaded and B^T (rows n): K-major; B as loaded
    (K x N, N-major in memory), 16- and 8-bit: the no-swizzle MN-major layout
    (``wgmma_layout.nmajor_layout``), read as it is (the instruction descriptor's B-major bit, as
    tileiras's kind::f16, f8f6f4 and i8 descriptors set it for an N-major B)."""
    if convert:
        return None
    if idx == 1 and not transposed and plan.esz in (1, 2):
        return nmajor_layout(plan.K, plan.N, plan.esz)
    if transposed != (idx == 1):
        return None
    rows, kf = _rows(plan.K, plan.esz)
    n = plan.M if idx == 0 else plan.N
    return rows, kf, n // 8 * wgmma_sbo(plan.K, plan.esz)


def keep_fields(plan: Tcgen05Plan) -> tuple:
    """(bytes, dim fields) of a loop-invariant A kept in shared memory (``keep_invariant_a``)."""
    rows, kf = _rows(plan.K, plan.esz)
    return plan.M // 8 * wgmma_sbo(plan.K, plan.esz), (rows, kf)


def _columns(em: Emitter) -> int:
    """TMEM columns for the kernel: the widest tcgen05 dot's D (N, both blocks at M 256) and
    the accumulators kept in tensor memory (tmem_resident.py), a power of two >= 32."""
    return tmem_resident.plan_of(em).columns


def _allocates_later(em: Emitter) -> bool:
    """Whether an async K loop of the GEMM or scaled form allocates TMEM columns of its own
    (runtime/codegen/async_loop.py): the kernel's allocation keeps its permit for it."""
    from tilegen.runtime.codegen.async_loop import ASYNC_ATTR, ASYNC_GENERAL_ATTR

    return any(
        o.name == "scf.for"
        and ASYNC_ATTR in o.attributes
        and ASYNC_GENERAL_ATTR not in o.attributes
        for o in em.func.walk()
    )


def tensor_memory(em: Emitter) -> SimpleNamespace:
    """The kernel's TMEM and MMA barrier, set up in its prologue on first use: ``taddr`` (b32),
    ``bar`` (the barrier's shared address), ``phase`` (the parity the next wait expects),
    ``off``/``on`` (constant predicates for enable-input-d)."""
    if em.tmem is not None:
        return em.tmem
    em.need_isa("8.6")
    em.need_target_suffix("a")
    ncols = _columns(em)
    tid, _, warp = em.tid()
    em.pre.insert(0, f"\t.shared .align 8 .b8 {SYMBOL}[16];")
    em.resident_bytes += 16
    with em.hoisted():
        bar = em.new("b32")
        em.ins(f"mov.u32 {bar}, {SYMBOL}")
        t0, w0 = em.new("pred"), em.new("pred")
        em.ins(f"setp.eq.u32 {t0}, {tid}, 0")
        em.ins(f"setp.eq.u32 {w0}, {warp}, 0")
        skip = em.new_label("tmem_init")
        em.ins(f"@!{t0} bra {skip}")
        mbarrier_init(em, bar, 1)
        mbarrier_init_fence(em)
        em.pre.append(f"{skip}:")
        skip = em.new_label("tmem_alloc")
        em.ins(f"@!{w0} bra {skip}")
        em.ins(f"tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [{SYMBOL}+8], {ncols}")
        if not _allocates_later(em):
            em.ins("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned")
        em.pre.append(f"{skip}:")
        em.ins("bar.sync 0")
        taddr, phase = em.new("b32"), em.new("b32")
        em.ins(f"ld.shared.u32 {taddr}, [{SYMBOL}+8]")
        em.ins(f"mov.b32 {phase}, 0")
        off, on = em.new("pred"), em.new("pred")
        em.ins(f"setp.ne.u32 {off}, 0, 0")
        em.ins(f"setp.eq.u32 {on}, 0, 0")
    em.tmem = SimpleNamespace(
        taddr=taddr, bar=bar, phase=phase, t0=t0, w0=w0, off=off, on=on, ncols=ncols
    )
    return em.tmem


def release(em: Emitter) -> None:
    """At the kernel's return: once every thread's last TMEM read is done, warp 0 frees the
    columns."""
    tm = em.tmem
    em.ins("tcgen05.fence::before_thread_sync")
    em.barrier()
    skip = em.new_label("tmem_free")
    em.ins(f"@!{tm.w0} bra {skip}")
    em.ins("tcgen05.fence::after_thread_sync")
    em.ins(f"tcgen05.dealloc.cta_group::1.sync.aligned.b32 {tm.taddr}, {tm.ncols}")
    em.label(skip)


def tcgen05_dot(em: Emitter, op, plan: Tcgen05Plan) -> None:
    """Emit ``dot`` ``op`` on tcgen05 (module docstring)."""
    from tilegen.runtime.codegen.memory import cp_async_tile
    from tilegen.runtime.codegen.mma_staging import (
        StagedBox,
        cp_async_commit_wait,
        staged_of,
        unstage,
    )

    a, b, c = op.operands[0], op.operands[1], op.operands[2]
    res = op.results[0]
    M, N, K, esz = plan.M, plan.N, plan.K, plan.esz
    for v, i in ((a, 0), (b, 1)):  # what does not copy into the K-major layout
        st = staged_of(em, v)
        if isinstance(getattr(st, "pipe_buf", None), StagedBox):
            continue  # a TMA stage: read where it landed
        if st is not None and staged_fields(plan, i, st.transposed, st.convert) is None:
            unstage(em, v)
    a_st, b_st = staged_of(em, a), staged_of(em, b)
    kept_a = em.resident_a.get(op)
    boxed = b_st.pipe_buf if b_st is not None and isinstance(b_st.pipe_buf, StagedBox) else None
    if boxed is not None and boxed.kmajor != b_st.transposed:  # one box, two dots' reads
        boxed = StagedBox(boxed.addr, boxed.span, b_st.transposed, boxed.box_bytes)
    # B as loaded (K x N): in the MN-major layout (``staged_fields``)
    b_rows = b_st is not None and boxed is None and not b_st.transposed
    dl = em.dist_of(op, res.type)
    lay = tcgen05_accumulator_layout(em.num_warps, N, M)
    if dl.layout != lay or em.dist_of(op, c.type).layout != lay:
        fail(op, "PTX backend: a tcgen05 dot's accumulator must be in its TMEM row layout")
    tm = tensor_memory(em)
    em.need_isa(plan.row.ptx_isa)
    rows, kf = _rows(K, esz)
    sbo = wgmma_sbo(K, esz)
    off_b = M // 8 * sbo
    kept = em.get(c)
    resident = kept if isinstance(kept, tmem_resident.TmemTile) else None
    a_regs = a_st is None and kept_a is None
    a_tmem = _a_in_tmem(em, op, plan, resident) if a_regs else None
    b_regs = b_st is None
    writes = (a_regs and not a_tmem) or b_regs
    writes = writes or any(x is not None and x.pipe_buf is None for x in (a_st, b_st))
    b_bytes = K // 8 * nmajor_lbo(N, esz) if b_rows else N // 8 * sbo
    if writes:  # A's region, and B's after it where B is written too (not read from a stage)
        b_written = b_regs or (b_st is not None and b_st.pipe_buf is None)
        em.need_smem(off_b + b_bytes if b_written else off_b)
        em.barrier()  # earlier readers of the scratch are done
    if a_tmem:  # P into tensor memory (each warp its own lanes, block and column part)
        col, block_stride = a_tmem
        warp_stride = block_stride if plan.blocks == 2 else K // 2 // plan.halves
        a_dl = em.dist_of(op, a.type)
        part = K // (plan.halves if plan.blocks == 1 else 1)
        tmem_resident.store_packed(em, a_dl, em.tile(op, a), part, warp_stride, col)
    elif a_regs:
        write_fields(em, em.tile(op, a), em.dist_of(op, a.type), (rows, kf), 1, 0, esz)
    elif a_st is not None and a_st.pipe_buf is None:
        cp_async_tile(em, a_st, rows, kf, em.smem_base())
    if b_regs:  # B[k, n] at row n, K-major
        write_fields(em, em.tile(op, b), em.dist_of(op, b.type), (kf, rows), 0, off_b, esz)
    elif b_st.pipe_buf is None:
        fields = staged_fields(plan, 1, b_st.transposed, None)
        cp_async_tile(em, b_st, *fields[:2], em.smem_base(), off_b)
    cp_async_commit_wait(em, *(x for x in (a_st, b_st) if x is not None and x.pipe_buf is None))
    if writes:
        em.ins("fence.proxy.async.shared::cta")
    defer = em.mma_defer
    if defer is not None and defer.dot is op and resident is not None and not writes:
        # (the loop's barrier after the copies' wait is the one before the issue)
        skip = em.new_label("tc_issued")
        em.ins(f"@!{tm.t0} bra {skip}")
        em.ins("tcgen05.fence::after_thread_sync")
        _issue(em, op, plan, a_st, b_st, kept_a, boxed, off_b, sbo, resident, a_tmem, b_rows)
        em.ins(
            "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 "
            f"[{defer.cur}]"
        )
        em.label(skip)
        defer.used = True
        em.set(res, resident)
        return
    # every thread's earlier TMEM reads and shared writes, then one thread issues
    em.ins("tcgen05.fence::before_thread_sync")
    em.barrier()
    skip = em.new_label("tc_issued")
    em.ins(f"@!{tm.t0} bra {skip}")
    em.ins("tcgen05.fence::after_thread_sync")
    _issue(em, op, plan, a_st, b_st, kept_a, boxed, off_b, sbo, resident, a_tmem, b_rows)
    em.ins(f"tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [{tm.bar}]")
    em.label(skip)
    mbarrier_wait(em, tm.bar, tm.phase)
    em.ins(f"xor.b32 {tm.phase}, {tm.phase}, 1")
    em.ins("tcgen05.fence::after_thread_sync")
    if resident is not None:  # the accumulator stays where the MMAs wrote it
        em.set(res, resident)
        return
    em.set(res, _read_rows(em, op, plan, dl, c))


def _a_in_tmem(em: Emitter, op, plan: Tcgen05Plan, resident) -> Optional[tuple]:
    """(first column, columns between its 128-row blocks) where A, in registers, goes in
    tensor memory, or None (shared memory). A 256-row dot into a resident accumulator keeps
    it in the scratch, which holds no live value then, each warp in its own block's columns;
    another dot the kernel's plan gave the P region (``tmem_resident.plan_of``) there. A is
    16-bit and in the accumulator's row layout either way."""
    a = op.operands[0]
    lay = tcgen05_accumulator_layout(em.num_warps, plan.K, plan.M)
    if plan.esz != 2 or plan.M == 64 or em.dist_of(op, a.type).layout != lay:
        return None
    tp = tmem_resident.plan_of(em)
    if resident is not None and plan.blocks == 2:
        block = tp.scratch // plan.blocks
        return (0, block) if plan.K // 2 <= block else None
    if op in tp.p_dots and tp.p_col is not None:
        return tp.p_col, plan.K // 2
    return None


def _issue(
    em: Emitter,
    op,
    plan: Tcgen05Plan,
    a_st,
    b_st,
    kept_a,
    boxed,
    off_b,
    sbo,
    resident,
    a_src,
    b_mn: bool = False,
) -> None:
    """Thread 0: the K steps' ``tcgen05.mma`` (32 bytes of K each; the first overwrites D
    unless D is a resident accumulator), one per 128-row block (block b: A's rows 16 SBO
    further, D ``b N`` columns further); A from tensor memory where ``a_src`` (its first
    column, the column distance between its blocks) is given; ``b_mn``: B in the no-swizzle
    MN-major layout (``wgmma_layout.nmajor_layout``: 8 K rows of 16 bytes a core matrix, 16-byte
    groups of N 144 bytes apart, 8-row groups of K ``N / (16 / esz) x 144``)."""
    from tilegen.runtime.codegen.mma_staging import StagedBox, add_offset

    tm = em.tmem
    K, esz = plan.K, plan.esz
    # A copied by TMA (async_kept.py): its rows in order in swizzled column boxes
    boxed_a = a_st.pipe_buf if a_st is not None else None
    boxed_a = boxed_a if isinstance(boxed_a, StagedBox) else None
    if kept_a is not None:
        pa = kept_a
    elif boxed_a is not None:
        pa = None
    elif a_st is not None and a_st.pipe_buf is not None:
        pa = a_st.pipe_buf
    else:
        pa = em.smem_base() if a_src is None else None
    da = None
    if pa is not None:
        da = (wgmma_descriptor_parts(em, pa, LBO, 0, 0)[0], tcgen05.smem_descriptor_hi(sbo, 0))
    elif boxed_a is not None:
        span = boxed_a.span
        da = (
            wgmma_descriptor_parts(em, boxed_a.addr, 16, 0, 0)[0],
            tcgen05.smem_descriptor_hi(8 * span, span),
        )
    b_mn = b_mn or (boxed is not None and not boxed.kmajor)
    if boxed is not None:  # TMA's 128-byte swizzled column boxes
        span = boxed.span
        lbo = 16 if boxed.kmajor else boxed.box_bytes
        db = (
            wgmma_descriptor_parts(em, boxed.addr, lbo, 0, 0)[0],
            tcgen05.smem_descriptor_hi(8 * span, span),
        )
    elif b_mn:  # (LBO: along K; SBO: along N)
        pb = b_st.pipe_buf if b_st.pipe_buf is not None else add_offset(em, em.smem_base(), off_b)
        db = (
            wgmma_descriptor_parts(em, pb, nmajor_lbo(plan.N, plan.esz), 0, 0)[0],
            tcgen05.smem_descriptor_hi(NM_SBO, 0),
        )
    else:
        pb = b_st.pipe_buf if b_st is not None and b_st.pipe_buf is not None else None
        pb = pb if pb is not None else add_offset(em, em.smem_base(), off_b)
        db = (wgmma_descriptor_parts(em, pb, LBO, 0, 0)[0], tcgen05.smem_descriptor_hi(sbo, 0))
    sa, sb = signedness(op) or (True, True)
    idesc = tcgen05.instruction_descriptor(
        min(plan.M, 128),
        plan.N,
        plan.ab,
        "s32" if plan.ab == "i8" else "f32",
        b_mn_major=b_mn,
        unsigned=(not sa, not sb),
        saturate=plan.ab == "i8",  # (as mma.sync's and wgmma's .satfinite)
    )
    dcol = resident.col if resident is not None else 0
    dst = [add_offset(em, tm.taddr, dcol + blk * plan.N) for blk in range(plan.blocks)]
    for s in range(K * esz // 32):
        kb = 32 * s
        if b_mn and boxed is None:  # 32 bytes of K: 32 / esz rows, in groups of 8
            b_off = kb // esz // 8 * nmajor_lbo(plan.N, esz)
        elif boxed is None:
            b_off = 2 * s * LBO
        elif boxed.kmajor:  # rows n; K bytes in column boxes
            b_off = kb // boxed.span * boxed.box_bytes + kb % boxed.span
        else:  # K rows of span bytes
            b_off = 16 * s * boxed.span
        rb = wgmma_descriptor_at(em, db, b_off)
        enable = tm.on if s or resident is not None else tm.off
        for blk in range(plan.blocks):
            if a_src is not None:  # 16 elements of K: 8 columns
                ra = f"[{add_offset(em, tm.taddr, a_src[0] + blk * a_src[1] + 8 * s)}]"
            elif boxed_a is not None:  # rows 128 blk; K bytes in column boxes
                span = boxed_a.span
                a_off = 128 * span * blk + kb // span * boxed_a.box_bytes + kb % span
                ra = wgmma_descriptor_at(em, da, a_off)
            else:
                ra = wgmma_descriptor_at(em, da, 2 * s * LBO + 16 * sbo * blk)
            em.ins(f"{plan.row.ptx} [{dst[blk]}], {ra}, {rb}, {idesc}, {enable}")


def _read_rows(em: Emitter, op, plan: Tcgen05Plan, dl, c) -> list:
    """Every thread's part of its row from TMEM (``tcgen05.ld.32x32b``; M 64: ``16x32bx2``,
    threads 16-31 the second half of the warp's columns), plus C."""
    warp_part = plan.N // plan.halves  # the columns of a warp (M 64: of a thread pair)
    split = warp_part // 2 if plan.M == 64 else 0
    part = split or warp_part
    chunk = min(32, part)
    cin = None if zero_tile(c) else em.tile(op, c)
    by_col = tmem_resident.by_column(dl, part)  # column in the thread's part -> registers
    cls, add = ("b32", "add.s32") if plan.ab == "i8" else ("f32", "add.rn.f32")
    out = [None] * dl.nregs
    for c0 in range(0, part, chunk):
        # each chunk is used (C added) before the next one loads: C and D are never both
        # whole in registers
        regs = tmem_resident.load_chunk(em, warp_part, 0, c0, chunk, split)
        for i, reg in enumerate(regs):
            for k in by_col.get(c0 + i, ()):
                r = em.new(cls)
                em.ins(f"mov.b32 {r}, {reg}")
                if cin is not None:
                    s = em.new(cls)
                    em.ins(f"{add} {s}, {cin[k]}, {r}")
                    r = s
                out[k] = r
    return out
