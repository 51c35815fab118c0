"""Dot operands staged through shared memory: which layout a cp.async-staged operand is
copied into per dot family (:func:`staged_layout`), a TMA stage's boxes (:class:`StagedBox`),
padded pitches, the cp.async wait, 8-bit B copied raw and transposed, register tiles written
to the scratch, and the scratch's size limit.
"""

from __future__ import annotations

import copy

from tilegen.runtime.records import dataclass

from tilegen.runtime.codegen import b8_transpose
from tilegen.runtime.codegen.core import ELEMENTS, CodegenError, Emitter, elem_key, fail
from tilegen.runtime.codegen.exchange import Form
from tilegen.runtime.codegen.memory import Staged, cp_async_tile, materialize
from tilegen.runtime.codegen.mma_rows import select_row
from tilegen.runtime.codegen.smem_fields import fields_emit, fields_static
from tilegen.runtime.codegen.tcgen05_dot import staged_fields, tcgen05_plan
from tilegen.runtime.codegen.wgmma_layout import nmajor_layout, wgmma_a_fields, wgmma_plan
from tilegen.runtime.layouts.mma_choice import SMEM_LIMIT, wgmma_sbo
from tilegen.runtime.targets import VARIANTS, static_shared_limit


@dataclass(frozen=True)
class StagedBox:
    """A dot's B operand a TMA copy put into a pipeline stage (the async path's general loop,
    runtime/codegen/async_loop.py): ``addr`` (b32 shared address), the tile as loaded in
    128-byte-wide column boxes (``box_bytes`` each), swizzled by ``span`` (tma.column_boxes):
    K x N, N-major (read with the transpose bit), or, ``kmajor``, N x K (B^T, K-major, as
    wgmma reads B by default)."""

    addr: str
    span: int
    kmajor: bool = False
    box_bytes: int = 0


def staged_of(em: Emitter, v):
    """The :class:`~tilegen.runtime.codegen.memory.Staged` tile value ``v`` is, else None."""
    x = em.values.get(v)
    return x if isinstance(x, Staged) else None


def unstage(em: Emitter, v) -> None:
    """A staged operand the dot's path cannot copy with cp.async: load it into registers."""
    st = staged_of(em, v)
    if st is not None:
        if st.pipe_buf is not None:
            raise AssertionError("pipelined operand on a path without cp.async staging")
        em.set(v, materialize(em, st))


def padded_pitch(n: int, esz: int, wide: bool = False) -> int:
    """Row pitch of a cp.async-staged operand: 16 bytes of padding, so that the 8 rows an
    ldmatrix (or a fragment ld.shared of A or B^T, 8 rows x 4 threads of 4 bytes) reads fall
    into different banks; 32 bytes (``wide``) where rows must lie 8 banks apart: f64
    fragments (4 rows x 4 threads a phase of 8-byte loads) and 32-bit B read K x N by
    ``ld.shared`` (4 K rows x 8 threads): :func:`ld_pitch`."""
    return n * esz + (32 if wide else 16)


def ld_pitch(n: int, esz: int, kn: bool) -> int:
    """:func:`padded_pitch` of an operand mma.sync reads by ``ld.shared`` or ``ldmatrix``: rows of
    ``n`` elements, ``kn`` for B K x N (else A or B^T, K contiguous)."""
    return padded_pitch(n, esz, esz == 8 or (kn and esz == 4))


def staged_layout(op, idx: int, num_warps: int, sm: int, transposed=False, convert=None):
    """(row fields, column fields, bytes) of the shared buffer a cp.async-staged operand ``idx``
    (0 = A, 1 = B) of dot ``op`` is copied into (see ``memory.cp_async_tile``), or None where
    the dot's path has no layout that global rows copy into. Rows/columns are those of the tile
    in memory; ``transposed``: the operand is that tile transposed (a permute in between).
    wgmma: A (K-major core matrices, rows permuted as in ``wgmma_dot.wgmma_dot``), B^T (rows n,
    K-major), no conversion. mma.sync: A row-major (M x K); B row-major (K x N, read with
    ``ldmatrix .trans`` for 16-bit types, ``ld.shared`` for 32/64-bit ones; 8-bit B has no
    transposing load and stays on the register path) or, transposed, N x K like the register
    path's B^T; tf32 conversions (``convert``) are applied to the fragments. Nothing for the fma
    dot."""
    a, b, c = (v.type for v in op.operands[:3])
    if a.rank != 2 or len(op.operands) != 3:
        return None
    M, K = a.shape
    N = b.shape[1]
    tc = tcgen05_plan(op, num_warps, sm)
    if tc is not None:
        return staged_fields(tc, idx, transposed, convert)
    plan = wgmma_plan(op, num_warps, sm)
    if plan is not None:
        if idx == 1 and not transposed and not convert and plan.esz == 2:
            return nmajor_layout(K, N)  # read with imm-trans-b, as copied
        if idx == 1 and not transposed and not convert and plan.esz == 1:
            pb = padded_pitch(N, 1)  # copied as is, transposed into B's K-major layout by the dot
            return ((0, None, pb),), ((0, None, 1),), K * pb
        if convert or transposed != (idx == 1):
            return None
        sbo = wgmma_sbo(K, plan.esz)
        a_rows, kf = wgmma_a_fields(K, plan.esz, plan.groups)
        if idx == 1:
            return ((0, 3, 16), (3, None, sbo)), kf, N // 8 * sbo
        return a_rows, kf, M // 8 * sbo
    try:
        row = select_row(op, elem_key(a), elem_key(b), elem_key(c), sm)
    except CodegenError:
        return None
    if row is None:
        return None
    esz = ELEMENTS[elem_key(a)][1] if not convert else 4
    tm, tn, tk = row.shape
    if N % tn or K % tk:  # padded along N or K: the register path
        return None
    if idx == 0:  # rows past M (padding to the instruction's M) are left unwritten
        if transposed:
            return None
        pa = ld_pitch(K, esz, False)
        return ((0, None, pa),), ((0, None, esz),), -(-M // tm) * tm * pa
    if transposed:  # B^T rows n, K contiguous
        pb = ld_pitch(K, esz, False)
        return ((0, None, pb),), ((0, None, esz),), N * pb
    if esz == 2 and tk * esz != 32:
        return None
    pb = ld_pitch(N, esz, True)  # 8-bit: copied as is, transposed in shared memory by the dot
    return ((0, None, pb),), ((0, None, esz),), K * pb


def cp_async_commit_wait(em: Emitter, *staged) -> None:
    """Wait for the cp.async copies of the ``staged`` operands just issued (none when every one
    of them was copied through registers: ``Staged.asynchronous``)."""
    if not any(st is not None and st.asynchronous for st in staged):
        return
    em.ins("cp.async.commit_group")
    em.ins("cp.async.wait_group 0")


def add_offset(em: Emitter, base: str, off) -> str:
    """Shared address ``base + off`` in a new register (``base`` itself where ``off`` is 0)."""
    if isinstance(off, int) and off == 0:
        return base
    r = em.new("b32")
    em.ins(f"add.s32 {r}, {base}, {off}")
    return r


def round_up(n: int, a: int = 16) -> int:
    """``n`` rounded up to a multiple of ``a``."""
    return (n + a - 1) // a * a


def write_strided(em: Emitter, regs, d, mults, base: int, esz: int, st: str) -> None:
    """Store tile ``regs`` (layout ``d``) into the scratch at byte ``base``, element strides
    ``mults`` (``st.shared.<st>`` a register)."""
    form = Form(0, tuple(mults))
    for k in range(d.nregs):
        em.ins(f"st.shared.{st} {em.smem_ref(d, form, k, esz, base)}, {regs[k]}")


def scratch_cap(em: Emitter) -> int:
    """Bytes of shared memory a dot's staging may take: on a target with an arch-specific
    variant (sm_90a, sm_100a, sm_120a: emit.py's ``_fit_static_shared`` then builds for it, as
    tileiras always does) that variant's static limit; on one without (sm_80, 86, 89) the
    static limit ptxas's extended shared memory allows (``targets.static_shared_limit``). Only
    the dots that do not fit 48 KB take more (a 256 x 256 tile's operands)."""
    return static_shared_limit(em.sm, "a" if em.sm in VARIANTS["a"] else "")


def check_scratch(em: Emitter, op, total: int) -> None:
    """Refuse dot ``op`` when its staging needs more than :func:`scratch_cap` bytes."""
    cap = max(SMEM_LIMIT, scratch_cap(em))
    if total > cap:
        fail(op, f"PTX backend: dot staging needs {total} bytes of shared memory (limit {cap})")


def dot_dims(op):
    """(batch, M, N, K) of a rank-2 or rank-3 (batched) dot."""
    a, b = op.operands[0].type, op.operands[1].type
    if a.rank == 3:
        return a.shape[0], a.shape[1], b.shape[2], a.shape[2]
    return 1, a.shape[0], b.shape[1], a.shape[1]


def raw_rows(base: int, K: int, pitch: int) -> int:
    """Rows of an 8-bit B's raw copy that fit the shared memory from byte ``base``: all K, else
    the largest power of two dividing K (the copy is then made and transposed in chunks), or 0
    when not even 8 rows fit."""
    kc = K
    while kc >= 8 and (K % kc or round_up(base) + kc * pitch > SMEM_LIMIT):
        kc //= 2
    return kc if kc >= 8 else 0


def stage_b8_chunks(
    em: Emitter, st, kc: int, K: int, N: int, pitch: int, fr, fc, raw_off: int, dst: str, acc: int
) -> None:
    """Copy 8-bit B (K x N, row-major in memory) ``kc`` rows at a time into the raw buffer at
    scratch byte ``raw_off`` and transpose each chunk into its place at ``dst`` (the caller has
    waited for and fenced its other copies; each chunk: cp.async, commit, wait, barrier,
    transpose, and a barrier before the next chunk overwrites the buffer)."""

    lead = len(st.starts) - 2
    raw = add_offset(em, em.smem_base(), raw_off)
    for k0 in range(0, K, kc):
        if k0:
            em.barrier()
        sub = copy.copy(st)
        sub.shape = (kc, N)
        starts = list(st.starts)
        x = starts[lead]
        starts[lead] = x + k0 if isinstance(x, int) else em.lincomb(k0, [(1, x)])
        sub.starts = starts
        cp_async_tile(em, sub, ((0, None, pitch),), ((0, None, 1),), em.smem_base(), raw_off)
        cp_async_commit_wait(em, sub)
        em.barrier()
        transpose_bytes(em, raw, pitch, kc, N, fr, fc, dst, k0, acc)


def transpose_bytes(
    em: Emitter,
    src: str,
    pitch: int,
    R: int,
    C: int,
    fr,
    fc,
    dst: str,
    row_off: int = 0,
    acc: int = 0,
) -> None:
    """Move the R x C byte matrix at shared ``src`` (row pitch ``pitch``) to the transposed
    layout at shared ``dst``: element (r, c) lands at ``dst + F_c(c) + F_r(r)`` (bit-field
    sums as ``smem_fields.write_fields``; rows numbered from ``row_off``, a multiple of a power of
    two above R). Each thread loads 4-byte words of a row (``ld.shared.b32``)
    and stores their bytes (``st.shared.b8``): 8-bit B operands, copied row-major by cp.async,
    become the K-major / N x K layouts the tensor-core paths read (there is no transposing
    load for 8-bit elements before sm_100's ``ldmatrix .b8``). Where whole 16 x 32 atoms tile
    it, a warp moves an atom at a time instead (``b8_transpose.raw_copy``: ``ldmatrix .trans``,
    ``prmt``, ``stmatrix`` or ``st.shared.b32``); ``acc``: the accumulators a thread holds."""
    if b8_transpose.raw_copy(em, src, pitch, R, C, fr, fc, dst, row_off, acc):
        return
    tid, _, _ = em.tid()
    T = em.num_threads
    words = C // 4
    if words <= T:
        lg = words.bit_length() - 1
        rows_per = T // words
        steps = [(i * rows_per, 0) for i in range(-(-R // rows_per))]
        limit_r = min(rows_per, R)
    else:
        lg = None
        steps = [((i * T) // words, (i * T) % words * 4) for i in range(R * words // T)]
        limit_r = 1
    tr, tc = 0, em.new("b32")
    if lg is not None:
        tr = em.new("b32")
        em.ins(f"shr.u32 {tr}, {tid}, {lg}")
        em.ins(f"and.b32 {tc}, {tid}, {words - 1}")
        em.ins(f"shl.b32 {tc}, {tc}, 2")
    else:
        em.ins(f"shl.b32 {tc}, {tid}, 2")
    s_thr = em.lincomb(0, [(pitch, tr), (1, tc)])
    d_thr = em.lincomb(0, [(1, fields_emit(em, tr, fr, limit_r)), (1, fields_emit(em, tc, fc, C))])
    sa = em.new("b32")
    em.ins(
        f"add.s32 {sa}, {src}, {s_thr}"
        if not isinstance(s_thr, int) or s_thr
        else f"mov.b32 {sa}, {src}"
    )
    da = em.new("b32")
    em.ins(
        f"add.s32 {da}, {dst}, {d_thr}"
        if not isinstance(d_thr, int) or d_thr
        else f"mov.b32 {da}, {dst}"
    )
    guard = ""
    if lg is not None and R * words < T:
        p = em.new("pred")
        em.ins(f"setp.lt.u32 {p}, {tid}, {R * words}")
        guard = f"@{p} "
    for r0, c0 in steps:
        if lg is not None and r0 + rows_per > R and not guard:  # a last, partial step
            p = em.new("pred")
            em.ins(f"setp.lt.u32 {p}, {tr}, {R - r0}")
            guard = f"@{p} "
        w = em.new("b32")
        em.ins(f"{guard}ld.shared.b32 {w}, [{sa}+{r0 * pitch + c0}]")
        for j in range(4):
            b = w
            if j:
                b = em.new("b32")
                em.ins(f"shr.u32 {b}, {w}, {8 * j}")
            off = fields_static(r0 + row_off, fr) + fields_static(c0 + j, fc)
            em.ins(f"{guard}st.shared.b8 [{da}+{off}], {b}")
