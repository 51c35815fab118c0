"""``nv_tileaa.dot`` on tensor cores with ``mma.sync`` (sm_80+), staged through shared memory.

A (M x K) is stored row-major, B (K x N) transposed (N x K, so each fragment register is one
32-bit word along K), C row-major. Warps form a ``wm x wn`` grid over the (16 x 8) MMA tiles of
C (8 x 8 for f64); each warp loads its fragments with ``ld.shared`` (the PTX ISA fragment
layouts: g = lane / 4, t = lane % 4), runs the K steps, and writes D back in place; the result
is then read in the result tile's own layout. The instruction per (A, B, C) element types and
target is a row of :data:`MMA_ROWS`.
"""

from __future__ import annotations

from tilegen.runtime.records import dataclass

from tilegen.runtime.codegen import b8_transpose
from tilegen.runtime.codegen.core import ELEMENTS, Emitter, elem_key, fail, handles, load_reg
from tilegen.runtime.codegen.exchange import Form, row_major
from tilegen.runtime.codegen.selection import conversion_ptx
from tilegen.runtime.layouts.decisions import mma_family
from tilegen.runtime.layouts.kernel import register_cap
from tilegen.runtime.codegen.tcgen05_dot import (
    keep_fields,
    staged_fields,
    tcgen05_dot,
    tcgen05_plan,
)
from tilegen.runtime.layouts.mma_choice import (  # noqa: F401 (SMEM_LIMIT: used by control.py)
    LBO as _LBO,
    SMEM_LIMIT,
    mma_sync_accumulator_layout,
    mma_sync_rows_fragment,
    wgmma_accumulator_layout,
    wgmma_instruction,
)
from tilegen.runtime.layouts.mma_choice import wgmma_sbo as _wgmma_sbo
from tilegen.runtime.layouts.mma_select import MmaSelectError, select_mma


@dataclass(frozen=True)
class MmaRow:
    """One MMA instruction form and its fragment geometry."""

    shape: tuple[int, int, int]  # m, n, k
    ptx: str  # full opcode with types
    epr: int  # elements of A/B per fragment register
    a_regs: tuple[tuple[int, int], ...]  # (row, k) offset of each A register's first element
    b_regs: tuple[int, ...]  # k offset of each B register's first element
    c_regs: tuple[tuple[int, int], ...]  # (row, col) offset of each C register
    frag_cls: str  # register class of A/B fragments
    c_cls: str  # register class of C/D
    min_sm: int = 80
    ptx_isa: str = "7.0"
    #: "e4m3" / "e5m2": issue as two m16n8k16 f16 MMAs on unpacked fragments (spec/ptx/mma.yaml
    #: ``unpack_sm``: no 8-bit-float mma.sync in this target's hardware)
    unpack: str = ""


_A16 = ((0, 0), (8, 0), (0, 8), (8, 8))
_C16 = ((0, 0), (0, 1), (8, 0), (8, 1))


def _row16(ab: str, c: str, cc: str) -> MmaRow:
    return MmaRow(
        (16, 8, 16),
        f"mma.sync.aligned.m16n8k16.row.col.{c}.{ab}.{ab}.{c}",
        2,
        _A16,
        (0, 8),
        _C16,
        "b32",
        cc,
    )


def _row8bit(a: str, b: str, c: str, cc: str, sm: int = 80) -> MmaRow:
    return MmaRow(
        (16, 8, 32),
        f"mma.sync.aligned.m16n8k32.row.col.{c}.{a}.{b}.{c}",
        4,
        ((0, 0), (8, 0), (0, 16), (8, 16)),
        (0, 16),
        _C16,
        "b32",
        cc,
        sm,
        "8.4" if a.startswith("e") else "7.0",
    )


#: (A, B, C) element keys -> instruction row (signed/unsigned int8 resolved at selection)
MMA_ROWS: dict[tuple[str, str, str], MmaRow] = {
    ("f16", "f16", "f32"): _row16("f16", "f32", "f32"),
    ("bf16", "bf16", "f32"): _row16("bf16", "f32", "f32"),
    ("tf32", "tf32", "f32"): MmaRow(
        (16, 8, 8),
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
        1,
        ((0, 0), (8, 0), (0, 4), (8, 4)),
        (0, 4),
        _C16,
        "b32",
        "f32",
    ),
    ("f8E4M3FN", "f8E4M3FN", "f32"): _row8bit("e4m3", "e4m3", "f32", "f32", 89),
    ("f8E5M2", "f8E5M2", "f32"): _row8bit("e5m2", "e5m2", "f32", "f32", 89),
    ("f8E4M3FN", "f8E5M2", "f32"): _row8bit("e4m3", "e5m2", "f32", "f32", 89),
    ("f8E5M2", "f8E4M3FN", "f32"): _row8bit("e5m2", "e4m3", "f32", "f32", 89),
    ("i8", "i8", "i32"): _row8bit("s8", "s8", "s32", "b32"),
    ("f64", "f64", "f64"): MmaRow(
        (8, 8, 4),
        "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64",
        1,
        ((0, 0),),
        (0,),
        ((0, 0), (0, 1)),
        "f64",
        "f64",
    ),
}


#: fragment geometry per (mma.sync shape, A/B elements per fragment register)
GEOMETRY: dict[tuple[str, int], MmaRow] = {
    ("m16n8k16", 2): MMA_ROWS[("f16", "f16", "f32")],
    ("m16n8k8", 1): MMA_ROWS[("tf32", "tf32", "f32")],
    ("m16n8k32", 4): MMA_ROWS[("i8", "i8", "i32")],
    ("m8n8k4", 1): MMA_ROWS[("f64", "f64", "f64")],
}
C_CLASS = {"f32": "f32", "i32": "b32", "f64": "f64"}


def select_row(op, a: str, b: str, c: str, sm: int) -> MmaRow:
    """The instruction for this dot on ``sm``: the ``mma.sync`` row of spec/ptx/mma.yaml
    (runtime/layouts/mma_select.py) with its fragment geometry; tileiras's diagnostics for
    unsupported combinations."""
    signed = None
    if a == "i8":
        sa, sb = op.attributes.get("signedness_a"), op.attributes.get("signedness_b")
        signed = (sa is None or sa.value == 0, sb is None or sb.value == 0)  # 0 = signed
    try:
        spec = select_mma(a, b, c, sm, signed=signed)
    except MmaSelectError as e:
        fail(op, str(e))
    if spec.family == "fma":
        return None
    mnk = spec.mnk()
    epr = 1 if a == "f64" else (spec.k_width or 1)
    geo = GEOMETRY.get((spec.shape, epr)) if spec.family == "mma.sync" and mnk else None
    if geo is None or c not in C_CLASS:
        fail(op, f"PTX backend does not support dot of {a} x {b} -> {c} ({spec.family}) yet")
    unpack = ""
    if sm in spec.unpack_sm:
        unpack = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}[a]
    return MmaRow(
        mnk,
        spec.opcode(),
        geo.epr,
        geo.a_regs,
        geo.b_regs,
        geo.c_regs,
        geo.frag_cls,
        C_CLASS[c],
        spec.sm_min,
        spec.ptx_isa,
        unpack,
    )


def _halves(em: Emitter, kind: str, reg: str, cache: dict) -> tuple[str, str]:
    """The f16x2 values of an 8-bit-float fragment register: (bytes 0-1, bytes 2-3)."""
    if reg not in cache:
        lo, hi = em.new("b16"), em.new("b16")
        em.ins(f"mov.b32 {{{lo}, {hi}}}, {reg}")
        out = []
        for h in (lo, hi):
            r = em.new("b32")
            em.ins(f"cvt.rn.f16x2.{kind}x2 {r}, {h}")
            out.append(r)
        cache[reg] = tuple(out)
    return cache[reg]


def issue_mma(em: Emitter, row: MmaRow, d, a, b, c, cache: dict) -> None:
    """One ``row`` MMA: d = a b + c. Rows with ``unpack``: m16n8k32 on 8-bit floats as two
    m16n8k16 f16 MMAs. Relabelling k within a step consistently for A and B keeps the sum:
    f16 positions (2t, 2t+1, 2t+8, 2t+9) take 8-bit k (4t, 4t+1, 4t+2, 4t+3) of the first
    16 (registers a0, a1, b0), then of the next 16 (a2, a3, b1)."""
    if not row.unpack:
        em.ins(
            f"{row.ptx} {{{', '.join(d)}}}, {{{', '.join(a)}}}, {{{', '.join(b)}}}, "
            f"{{{', '.join(c)}}}"
        )
        return
    ha = [_halves(em, row.unpack, r, cache) for r in a]
    hb = [_halves(em, row.unpack, r, cache) for r in b]
    f16 = f"mma.sync.aligned.m16n8k16.row.col.{row.c_cls}.f16.f16.{row.c_cls}"
    mid = [em.new(row.c_cls) for _ in c]
    for dst, acc, (i, j), kb in ((mid, c, (0, 1), 0), (d, mid, (2, 3), 1)):
        aa = [ha[i][0], ha[j][0], ha[i][1], ha[j][1]]
        bb = [hb[kb][0], hb[kb][1]]
        em.ins(
            f"{f16} {{{', '.join(dst)}}}, {{{', '.join(aa)}}}, {{{', '.join(bb)}}}, "
            f"{{{', '.join(acc)}}}"
        )


def _align(n: int, a: int = 16) -> int:
    return (n + a - 1) // a * a


def _write(em: Emitter, regs, d, mults, base: int, esz: int, st: str) -> None:
    from tilegen.runtime.codegen.exchange import Form

    form = Form(0, tuple(mults))
    for k in range(d.nregs):
        em.ins(f"st.shared.{st} {em.smem_ref(d, form, k, esz, base)}, {regs[k]}")


def _lane_addresses(em, lane, warp, M, N, K, esz, csz, row, wn, use_ldm):
    """Per-lane shared addresses of the A, B and C fragments (computed once per kernel)."""
    tm, tn, _ = row.shape
    g, t = em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {g}, {lane}, 2")
    em.ins(f"and.b32 {t}, {lane}, 3")
    wmi, wni = em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {wmi}, {warp}, {wn.bit_length() - 1}")
    em.ins(f"and.b32 {wni}, {warp}, {wn - 1}")
    # C (wmi*tm + g)*N + wni*tn + 2t
    rC = em.lincomb(0, [(tm * N, wmi), (N, g), (tn, wni), (2, t)])
    aC = em.smem_addr(rC, csz)
    if use_ldm:
        # A: lane l addresses row (l % 16), bytes 16 * (l / 16); B: row (l % 8), 16 * (l / 8 % 2)
        l16, h16, l8, h8 = (em.new("b32") for _ in range(4))
        em.ins(f"and.b32 {l16}, {lane}, 15")
        em.ins(f"shr.u32 {h16}, {lane}, 4")
        em.ins(f"and.b32 {l8}, {lane}, 7")
        em.ins(f"shr.u32 {h8}, {lane}, 3")
        em.ins(f"and.b32 {h8}, {h8}, 1")
        rA = em.lincomb(0, [(tm * K * esz, wmi), (K * esz, l16), (16, h16)])
        rB = em.lincomb(0, [(tn * K * esz, wni), (K * esz, l8), (16, h8)])
        return em.smem_addr(rA, 1), em.smem_addr(rB, 1), aC
    # A (wmi*tm + g)*K + t*epr; B (wni*tn + g)*K + t*epr
    rA = em.lincomb(0, [(tm * K, wmi), (K, g), (row.epr, t)])
    rB = em.lincomb(0, [(tn * K, wni), (K, g), (row.epr, t)])
    return em.smem_addr(rA, esz), em.smem_addr(rB, esz), aC


def _raw_rows(base: int, K: int, pitch: int) -> int:
    """Rows of an 8-bit B's raw copy that fit the shared memory from byte ``base``: all K, else
    the largest power of two dividing K (the copy is then made and transposed in chunks), or 0
    when not even 8 rows fit."""
    kc = K
    while kc >= 8 and (K % kc or _align(base) + kc * pitch > SMEM_LIMIT):
        kc //= 2
    return kc if kc >= 8 else 0


def _stage_b8_chunks(
    em: Emitter, st, kc: int, K: int, N: int, pitch: int, fr, fc, raw_off: int, dst: str, acc: int
) -> None:
    """Copy 8-bit B (K x N, row-major in memory) ``kc`` rows at a time into the raw buffer at
    scratch byte ``raw_off`` and transpose each chunk into its place at ``dst`` (the caller has
    waited for and fenced its other copies; each chunk: cp.async, commit, wait, barrier,
    transpose, and a barrier before the next chunk overwrites the buffer)."""
    import copy

    from tilegen.runtime.codegen.memory import cp_async_tile

    lead = len(st.starts) - 2
    raw = _plus(em, em.smem_base(), raw_off)
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
        _transpose_bytes(em, raw, pitch, kc, N, fr, fc, dst, k0, acc)


def _transpose_bytes(
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
    sums as :func:`_write_fields`; rows numbered from ``row_off``, a multiple of a power of
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
    d_thr = em.lincomb(
        0, [(1, _fields_emit(em, tr, fr, limit_r)), (1, _fields_emit(em, tc, fc, C))]
    )
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
            off = _fields_static(r0 + row_off, fr) + _fields_static(c0 + j, fc)
            em.ins(f"{guard}st.shared.b8 [{da}+{off}], {b}")


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


def _pad_guards(em: Emitter, lane, warp, row, wn: int, M0: int, N0: int, M: int, N: int):
    """For a padded dot: ``keep(m, n)`` -> the predicate guard ("@%p " or "") under which a
    lane stores its D fragment element at static offset (m, n) (its row g + warp row + m,
    column 2t + warp column + n), or None when no lane holds a real element there."""
    tm, tn, _ = row.shape
    g, t = em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {g}, {lane}, 2")
    em.ins(f"and.b32 {t}, {lane}, 3")
    wmi, wni = em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {wmi}, {warp}, {wn.bit_length() - 1}")
    em.ins(f"and.b32 {wni}, {warp}, {wn - 1}")
    rrow = em.lincomb(0, [(tm, wmi), (1, g)])
    rcol = em.lincomb(0, [(tn, wni), (2, t)])
    preds: dict = {}

    def lt(reg, n, hi):
        """Predicate reg < n ("" when always true, None when never)."""
        if n <= 0:
            return None
        if n >= hi:
            return ""
        k = (reg, n)
        if k not in preds:
            p = em.new("pred")
            em.ins(f"setp.lt.u32 {p}, {reg}, {n}")
            preds[k] = p
        return preds[k]

    def keep(m, n):
        pr, pc = lt(rrow, M0 - m, M - m), lt(rcol, N0 - n, N - n)
        if pr is None or pc is None:
            return None
        if not pr or not pc:
            return f"@{pr or pc} " if (pr or pc) else ""
        k = ("and", pr, pc)
        if k not in preds:
            q = em.new("pred")
            em.ins(f"and.pred {q}, {pr}, {pc}")
            preds[k] = q
        return f"@{preds[k]} "

    return keep


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


def _staged(em: Emitter, v):
    from tilegen.runtime.codegen.memory import Staged

    x = em.values.get(v)
    return x if isinstance(x, Staged) else None


def _unstage(em: Emitter, v) -> None:
    """A staged operand the dot's path cannot copy with cp.async: load it into registers."""
    from tilegen.runtime.codegen.memory import materialize

    st = _staged(em, v)
    if st is not None:
        if st.pipe_buf is not None:
            raise AssertionError("pipelined operand on a path without cp.async staging")
        em.set(v, materialize(em, st))


def _pitch(n: int, esz: int, wide: bool = False) -> int:
    """Row pitch of a cp.async-staged operand: 16 bytes of padding, so that the 8 rows an
    ldmatrix (or a fragment ld.shared of A or B^T, 8 rows x 4 threads of 4 bytes) reads fall
    into different banks; 32 bytes (``wide``) where rows must lie 8 banks apart: f64
    fragments (4 rows x 4 threads a phase of 8-byte loads) and 32-bit B read K x N by
    ``ld.shared`` (4 K rows x 8 threads): :func:`_ld_pitch`."""
    return n * esz + (32 if wide else 16)


def _ld_pitch(n: int, esz: int, kn: bool) -> int:
    """:func:`_pitch` of an operand mma.sync reads by ``ld.shared`` or ``ldmatrix``: rows of
    ``n`` elements, ``kn`` for B K x N (else A or B^T, K contiguous)."""
    return _pitch(n, esz, esz == 8 or (kn and esz == 4))


def staged_layout(op, idx: int, num_warps: int, sm: int, transposed=False, convert=None):
    """(row fields, column fields, bytes) of the shared buffer a cp.async-staged operand ``idx``
    (0 = A, 1 = B) of dot ``op`` is copied into (see ``memory.cp_async_tile``), or None where
    the dot's path has no layout that global rows copy into. Rows/columns are those of the tile
    in memory; ``transposed``: the operand is that tile transposed (a permute in between).
    wgmma: A (K-major core matrices, rows permuted as in :func:`wgmma_dot`), B^T (rows n,
    K-major), no conversion. mma.sync: A row-major (M x K); B row-major (K x N, read with
    ``ldmatrix .trans`` for 16-bit types, ``ld.shared`` for 32/64-bit ones; 8-bit B has no
    transposing load and stays on the register path) or, transposed, N x K like the register
    path's B^T; tf32 conversions (``convert``) are applied to the fragments. Nothing for the fma
    dot."""
    from tilegen.runtime.codegen.core import CodegenError

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
            return _nmajor_layout(K, N)  # read with imm-trans-b, as copied
        if idx == 1 and not transposed and not convert and plan.esz == 1:
            pb = _pitch(N, 1)  # copied as is, transposed into B's K-major layout by the dot
            return ((0, None, pb),), ((0, None, 1),), K * pb
        if convert or transposed != (idx == 1):
            return None
        sbo = _wgmma_sbo(K, plan.esz)
        a_rows, kf = _a_fields(K, plan.esz, plan.groups)
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
        pa = _ld_pitch(K, esz, False)
        return ((0, None, pa),), ((0, None, esz),), -(-M // tm) * tm * pa
    if transposed:  # B^T rows n, K contiguous
        pb = _ld_pitch(K, esz, False)
        return ((0, None, pb),), ((0, None, esz),), N * pb
    if esz == 2 and tk * esz != 32:
        return None
    pb = _ld_pitch(N, esz, True)  # 8-bit: copied as is, transposed in shared memory by the dot
    return ((0, None, pb),), ((0, None, esz),), K * pb


def _staged_lane_offsets(em, lane, warp, row, wn, esz, pa, pbk, b_kn, use_ldm, ldm_b, pair_b):
    """Per-lane byte offsets (from each operand buffer's start) of the A and B fragments when an
    operand is cp.async-staged: A row-major with pitch ``pa``; B row-major K x N with pitch
    ``pbk`` (``b_kn``) or N x K with pitch ``pbk``."""
    tm, tn, _ = row.shape
    g, t = em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {g}, {lane}, 2")
    em.ins(f"and.b32 {t}, {lane}, 3")
    wmi, wni = em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {wmi}, {warp}, {wn.bit_length() - 1}")
    em.ins(f"and.b32 {wni}, {warp}, {wn - 1}")
    l16, h16, l8, h8 = (em.new("b32") for _ in range(4))
    em.ins(f"and.b32 {l16}, {lane}, 15")
    em.ins(f"shr.u32 {h16}, {lane}, 4")
    em.ins(f"and.b32 {l8}, {lane}, 7")
    em.ins(f"shr.u32 {h8}, {lane}, 3")
    em.ins(f"and.b32 {h8}, {h8}, 1")
    if use_ldm:
        rA = em.lincomb(0, [(tm * pa, wmi), (pa, l16), (16, h16)])
    else:
        rA = em.lincomb(0, [(tm * pa, wmi), (pa, g), (row.epr * esz, t)])
    # ``pair_b``: lanes 16-31 address the next column group (n + wn tn), which an ldmatrix.x4
    # reads beside this one
    if b_kn and ldm_b:  # ldmatrix .trans: lane l addresses k row (l % 8) + 8 (l / 8 % 2)
        pair = [(wn * tn * esz, h16)] if pair_b else []
        rB = em.lincomb(0, [(pbk, l8), (8 * pbk, h8), (tn * esz, wni)] + pair)
    elif b_kn:  # b_i = (k = t + dk, n = g)
        rB = em.lincomb(0, [(pbk, t), (tn * esz, wni), (esz, g)])
    elif ldm_b:
        pair = [(wn * tn * pbk, h16)] if pair_b else []
        rB = em.lincomb(0, [(tn * pbk, wni), (pbk, l8), (16, h8)] + pair)
    else:
        rB = em.lincomb(0, [(tn * pbk, wni), (pbk, g), (row.epr * esz, t)])
    return rA, rB


def _plus(em: Emitter, base: str, off) -> str:
    if isinstance(off, int) and off == 0:
        return base
    r = em.new("b32")
    em.ins(f"add.s32 {r}, {base}, {off}")
    return r


def cp_async_commit_wait(em: Emitter, *staged) -> None:
    """Wait for the cp.async copies of the ``staged`` operands just issued (none when every one
    of them was copied through registers: ``Staged.asynchronous``)."""
    if not any(st is not None and st.asynchronous for st in staged):
        return
    em.ins("cp.async.commit_group")
    em.ins("cp.async.wait_group 0")


#: the fma dot's K loop is unrolled where K times a thread's results is at most this many
#: ``fma``s (tileiras unrolls a 64 x 64 x 32 f32 tile's 1,024); else it steps 2 vectors of K
FMA_UNROLL = 1024
#: registers the fma dot's results and its loaded vectors may take (else narrower vectors)
FMA_REGISTERS = 200
#: below a register cap (``.maxnreg``), what the rest of the kernel keeps besides them
FMA_SLACK = 64


def scratch_cap(em: Emitter) -> int:
    """Bytes of shared memory a dot's staging may take: on a target with an arch-specific
    variant (sm_90a, sm_100a, sm_120a: emit.py's ``_fit_static_shared`` then builds for it, as
    tileiras always does) that variant's static limit; on one without (sm_80, 86, 89) the
    static limit ptxas's extended shared memory allows (``targets.static_shared_limit``). Only
    the dots that do not fit 48 KB take more (a 256 x 256 tile's operands)."""
    from tilegen.runtime.targets import VARIANTS, static_shared_limit

    return static_shared_limit(em.sm, "a" if em.sm in VARIANTS["a"] else "")


def _check_scratch(em: Emitter, op, total: int) -> None:
    cap = max(SMEM_LIMIT, scratch_cap(em))
    if total > cap:
        fail(op, f"PTX backend: dot staging needs {total} bytes of shared memory (limit {cap})")


def _dims(op):
    """(batch, M, N, K) of a rank-2 or rank-3 (batched) dot."""
    a, b = op.operands[0].type, op.operands[1].type
    if a.rank == 3:
        return a.shape[0], a.shape[1], b.shape[2], a.shape[2]
    return 1, a.shape[0], b.shape[1], a.shape[1]


def _fma_scalar_loop(em: Emitter, op, accs: list, fa, fb, dr, K: int, esz: int, off_b: int):
    """The fma dot's K loop for results that fill the registers by themselves: per K step
    and result register, two ``ld.shared`` and an ``fma.rn``."""
    cls, st = ELEMENTS[elem_key(op.results[0].type)][0], "f64" if esz == 8 else "b32"
    refs_a = [em.smem_ref(dr, fa, k, esz) for k in range(dr.nregs)]
    refs_b = [em.smem_ref(dr, fb, k, esz, off_b) for k in range(dr.nregs)]
    kk = em.new("b32")
    em.ins(f"mov.u32 {kk}, 0")
    loop = em.new_label("fma_dot")
    em.label(loop)
    for k in range(dr.nregs):
        (ba, ia), (bb, ib) = (ref[1:-1].split("+") for ref in (refs_a[k], refs_b[k]))
        pa, pb = em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {pa}, {ba}, {kk}")
        em.ins(f"add.s32 {pb}, {bb}, {kk}")
        x, y = em.new(cls), em.new(cls)
        em.ins(f"ld.shared.{st} {x}, [{pa}+{ia}]")
        em.ins(f"ld.shared.{st} {y}, [{pb}+{ib}]")
        em.ins(f"fma.rn.{cls} {accs[k]}, {x}, {y}, {accs[k]}")
    p = em.new("pred")
    em.ins(f"add.s32 {kk}, {kk}, {esz}")
    em.ins(f"setp.lt.u32 {p}, {kk}, {K * esz}")
    em.ins(f"@{p} bra {loop}")
    em.set(op.results[0], accs)


def fma_dot(em: Emitter, op) -> None:
    """A dot without tensor cores (f32 x f32, as tileiras does it; also rank-3 batched dots):
    A row-major and B transposed (per batch) in shared memory, K contiguous in both, each row
    padded by 16 bytes (rows of a warp's loads in distinct banks); then each thread runs the K
    reduction for its own result registers as outer products: per 16 bytes of K, one
    ``ld.shared.v4`` (``v2`` for f64) for each of its A rows and B columns, and an ``fma.rn``
    per result register and K step. Unrolled where K times the thread's results is at most
    :data:`FMA_UNROLL`, else a loop of two such vectors an iteration."""
    from tilegen.runtime.codegen.exchange import Form

    a, b, c = op.operands[0], op.operands[1], op.operands[2]
    _unstage(em, a)
    _unstage(em, b)
    res = op.results[0]
    key = elem_key(res.type)
    if key not in ("f32", "f64") or elem_key(a.type) != key or elem_key(b.type) != key:
        fail(op, f"PTX backend does not support this dot without tensor cores yet")
    nb, M, N, K = _dims(op)
    esz = ELEMENTS[key][1]
    cls = ELEMENTS[key][0]
    vec = 16 // esz if K % (16 // esz) == 0 else 1
    Kp = K + 16 // esz if vec > 1 else K + 1  # (a row of 16-byte multiples stays aligned)
    off_b = _align(nb * M * Kp * esz)
    total = off_b + nb * N * Kp * esz
    _check_scratch(em, op, total)
    em.need_smem(total)
    st = "f64" if esz == 8 else "b32"
    da, db, dr = em.dist_of(op, a.type), em.dist_of(op, b.type), em.dist_of(op, res.type)
    batch = (M * Kp,) if a.type.rank == 3 else ()
    bbatch = (N * Kp,) if a.type.rank == 3 else ()
    em.barrier()
    _write(em, em.tile(op, a), da, batch + (Kp, 1), 0, esz, st)
    _write(em, em.tile(op, b), db, bbatch + (1, Kp), off_b, esz, st)  # B[.., k, n]: n Kp + k
    em.barrier()
    c_in = em.tile(op, c)
    accs = []
    for k in range(dr.nregs):
        r = em.new(cls)
        em.ins(f"mov.{cls} {r}, {c_in[k]}")
        accs.append(r)
    # result (.., m, n): A row at (batch) + m Kp, B^T row at off_b + (batch) + n Kp (elements);
    # a thread's registers share few rows and columns: each is loaded once per K vector
    fa, fb = Form(0, batch + (Kp, 0)), Form(0, bbatch + (0, Kp))
    rows, cols = {}, {}
    ra = [rows.setdefault(em.smem_ref(dr, fa, k, esz), len(rows)) for k in range(dr.nregs)]
    rb = [cols.setdefault(em.smem_ref(dr, fb, k, esz, off_b), len(cols)) for k in range(dr.nregs)]
    # the fewer of the thread's rows and columns stay loaded across a K vector; the others are
    # loaded one at a time, each right before its fmas (live: the kept vectors, one more, the
    # results); narrower vectors where the kept ones would not fit beside the results
    keep_a = len(rows) <= len(cols)
    kept, streamed = (rows, cols) if keep_a else (cols, rows)
    ki, si = (ra, rb) if keep_a else (rb, ra)
    from tilegen.runtime.layouts.kernel import register_cap

    words = esz // 4
    cap = register_cap(em.func, em.num_threads)  # (an occupancy hint's .maxnreg)
    budget = FMA_REGISTERS if cap is None else min(FMA_REGISTERS, cap - FMA_SLACK)
    while vec > 1 and (len(kept) + 1) * vec * words + dr.nregs * words > budget:
        vec //= 2
    if (len(kept) + 1) * words + dr.nregs * words > budget:
        # results alone fill the registers: each fma's two scalars loaded right before it (the
        # fewest live values), a K step at a time
        return _fma_scalar_loop(em, op, accs, fa, fb, dr, K, esz, off_b)
    users: dict = {}
    for k in range(dr.nregs):
        users.setdefault(si[k], []).append(k)
    split = [tuple(r[1:-1].split("+")) for r in kept], [tuple(r[1:-1].split("+")) for r in streamed]
    refs = split[0] + split[1]
    vt = "" if vec == 1 else f".v{vec}"
    ty = "f64" if esz == 8 else "f32"

    def load(shift: dict, ref: tuple, k0: int) -> list:
        base, imm = ref
        regs = [em.new(cls) for _ in range(vec)]
        dst = regs[0] if vec == 1 else "{" + ", ".join(regs) + "}"
        em.ins(f"ld.shared{vt}.{ty} {dst}, [{shift.get(base, base)}+{int(imm) + k0 * esz}]")
        return regs

    def step(shift: dict, k0: int) -> None:
        """The K vector at element ``k0`` (``shift``: a base register -> its moved copy)."""
        held = [load(shift, ref, k0) for ref in split[0]]
        for s_idx, ref in enumerate(split[1]):
            vals = load(shift, ref, k0)
            for j in range(vec):
                for k in users.get(s_idx, ()):
                    x, y = held[ki[k]][j], vals[j]
                    if not keep_a:
                        x, y = y, x
                    em.ins(f"fma.rn.{cls} {accs[k]}, {x}, {y}, {accs[k]}")

    if K * dr.nregs <= FMA_UNROLL:
        for k0 in range(0, K, vec):
            step({}, k0)
        em.set(res, accs)
        return
    per = 2 * vec if K % (2 * vec) == 0 else vec
    kk = em.new("b32")
    em.ins(f"mov.u32 {kk}, 0")
    loop = em.new_label("fma_dot")
    em.label(loop)
    shift = {}
    for base in dict.fromkeys(b for b, _ in refs):
        moved = em.new("b32")
        em.ins(f"add.s32 {moved}, {base}, {kk}")
        shift[base] = moved
    for k0 in range(0, per, vec):
        step(shift, k0)
    p = em.new("pred")
    em.ins(f"add.s32 {kk}, {kk}, {per * esz}")
    em.ins(f"setp.lt.u32 {p}, {kk}, {K * esz}")
    em.ins(f"@{p} bra {loop}")
    em.set(res, accs)


# ----------------------------------------------------------------------------- wgmma (sm_90a)
#: _LBO: byte distance between core matrices adjacent along K (the descriptor's LBO; see
#: runtime/layouts/mma_choice.py)
_WG_IMMS = {"f16": ", 1, 1, 0, 0", "bf16": ", 1, 1, 0, 0", "tf32": ", 1, 1"}


@dataclass(frozen=True)
class WgmmaPlan:
    """How one dot runs on ``wgmma.mma_async`` (A and B K-major in shared memory, no swizzle)."""

    row: object  # the spec/ptx/mma.yaml row (runtime/layouts/mma_select.MmaRow)
    tk: int  # the instruction's K
    groups: int  # warpgroups; each owns M / groups rows (interleaved, see wgmma_dot)
    chunks: tuple[tuple[int, int], ...]  # (n0, n) per instruction along N (n <= 256)
    imms: str  # trailing immediates (imm-scale-a/b, imm-trans-a/b)
    esz: int
    csz: int
    c_cls: str


def wgmma_form(op) -> tuple:
    """(spec/ptx/mma.yaml wgmma row, trailing immediates) for ``dot`` ``op``'s element types,
    whatever its shape (the async path's CTA pair issues m64 wgmmas on one CTA's rows)."""
    from tilegen.runtime.layouts.mma_choice import signedness

    a, b, c = (v.type for v in op.operands)
    ka, kb, kc = elem_key(a), elem_key(b), elem_key(c)
    try:
        row = select_mma(ka, kb, kc, 90, signed=signedness(op), family="wgmma")
    except MmaSelectError as e:
        fail(op, f"PTX backend: {e}")
    return row, _WG_IMMS.get(ka, "" if ka == "i8" else ", 1, 1")


def wgmma_plan(op, num_warps: int, sm) -> "WgmmaPlan | None":
    """How ``dot`` ``op`` runs on wgmma when the layout stage chose that (``nv_tileas.mma`` =
    ``"wgmma"``; runtime/layouts/mma_choice.py ``wgmma_instruction`` says when it can), else
    None (``mma.sync`` / fma). The accumulator layout the stage gave is the wgmma fragment."""
    if mma_family(op) != "wgmma":
        return None
    found = wgmma_instruction(op, num_warps, sm)
    if found is None:
        fail(op, f"PTX backend: this dot was laid out for wgmma, which sm_{sm} cannot run here")
    row, tk = found
    a, b, c = (v.type for v in op.operands)
    ka, kc = elem_key(a), elem_key(c)
    N = b.shape[1]
    chunks = tuple((n0, min(256, N - n0)) for n0 in range(0, N, 256))
    imms = _WG_IMMS.get(ka, "" if ka == "i8" else ", 1, 1")
    esz = ELEMENTS[ka][1]
    return WgmmaPlan(row, tk, num_warps // 4, chunks, imms, esz, ELEMENTS[kc][1], C_CLASS[kc])


def _fields_static(x: int, fields) -> int:
    out = 0
    for lo, width, mult in fields:
        v = x >> lo
        if width is not None:
            v &= (1 << width) - 1
        out += v * mult
    return out


def _fields_emit(em: Emitter, x, fields, limit: int):
    """``sum(mult * bits(x)[lo:lo+width])`` for a b32 register (or int) ``x`` < ``limit``."""
    if isinstance(x, int):
        return _fields_static(x, fields)
    terms = []
    for lo, width, mult in fields:
        if width == 0 or (limit - 1) >> lo == 0:
            continue
        if lo == 0 and (width is None or (limit - 1) >> width == 0):
            terms.append((mult, x))
            continue
        r = x
        if lo:
            r = em.new("b32")
            em.ins(f"shr.u32 {r}, {x}, {lo}")
        if width is not None and (limit - 1) >> (lo + width):
            m = em.new("b32")
            em.ins(f"and.b32 {m}, {r}, {(1 << width) - 1}")
            r = m
        terms.append((mult, r))
    return em.lincomb(0, terms)


def _pack_words(em: Emitter, regs, esz: int) -> list:
    """32-bit words of consecutive elements (``esz`` bytes each, first in the low bits)."""
    if esz == 4:
        return list(regs)
    words = []
    if esz == 2:
        for i in range(0, len(regs), 2):
            w = em.new("b32")
            em.ins(f"mov.b32 {w}, {{{regs[i]}, {regs[i + 1]}}}")
            words.append(w)
        return words
    for i in range(0, len(regs), 4):  # bytes held in the low half of b16 registers
        lo, hi, w = em.new("b32"), em.new("b32"), em.new("b32")
        em.ins(f"mov.b32 {lo}, {{{regs[i]}, {regs[i + 1]}}}")
        em.ins(f"mov.b32 {hi}, {{{regs[i + 2]}, {regs[i + 3]}}}")
        em.ins(f"prmt.b32 {w}, {lo}, {hi}, 0x6420")
        words.append(w)
    return words


def _write_fields(
    em: Emitter, regs, d, dim_fields, kdim: int, byte_off: int, esz: int, base=None
) -> None:
    """Store every register of a tile with layout ``d`` at the shared byte address
    ``byte_off + sum_i F_i(coord_i)``, each ``F_i`` a sum of bit fields times constants (so
    ``F(base + raw) = F(base) + F(raw)``: the thread part is computed once, each register's
    part is an immediate; registers whose coordinates wrap are addressed at run time). Runs of
    registers consecutive along result dim ``kdim`` (K, contiguous within a 16-byte core-matrix
    row) are packed into 32-bit words and stored with one ``st.shared[.v2/.v4].b32`` (f64:
    one ``st.shared.f64`` a register)."""
    st = {1: "b8", 2: "b16", 4: "b32", 8: "f64"}[esz]
    key = ("wg-fields", d.layout, d.shape, dim_fields)
    if key not in em._smem_refs:  # the thread's byte offset, computed once
        with em.hoisted():
            bases = em.base(d)
            parts = []
            for i, fields in enumerate(dim_fields):
                rd = d.kept[i]
                lim = d.max_base[rd] + 1
                parts.append((1, _fields_emit(em, bases[rd], fields, lim)))
            em._smem_refs[key] = em.as_index(em.lincomb(0, parts), "b32")
    off = em._smem_refs[key]
    thr = em.new("b32")  # in the scratch, or another shared array (``base``)
    start = em.smem_base() if base is None else base
    em.ins(f"add.s32 {thr}, {start}, {off}")
    rk = d.kept[kdim]
    spt = d.root.size_per_thread[rk]
    vec = 1
    while vec * 2 <= min(spt, 16 // esz):
        vec *= 2
    if vec * esz < 4 or esz == 8:
        vec = 1
    k = 0
    while k < d.nregs:
        if any(d.wraps(rd, k) for rd in d.kept):
            parts = []
            for i, fields in enumerate(dim_fields):
                x = em.coord(d, k, i)
                parts.append((1, _fields_emit(em, x, fields, d.shape[i])))
            rel = em.as_index(em.lincomb(0, parts), "b32")
            if isinstance(rel, int):  # (from ``start``: the scratch, or the ``base`` array)
                em.ins(f"st.shared.{st} [{start}+{rel + byte_off}], {regs[k]}")
            else:
                addr = em.new("b32")
                em.ins(f"add.s32 {addr}, {start}, {rel}")
                em.ins(f"st.shared.{st} [{addr}+{byte_off}], {regs[k]}")
            k += 1
            continue
        static = sum(_fields_static(d.raw[k][rd], fields) for rd, fields in zip(d.kept, dim_fields))
        run = 1
        if vec > 1 and d.raw[k][rk] % vec == 0 and k + vec <= d.nregs:
            want = list(d.raw[k])
            ok = True
            for i in range(1, vec):
                want[rk] += 1
                if tuple(d.raw[k + i]) != tuple(want) or any(d.wraps(rd, k + i) for rd in d.kept):
                    ok = False
                    break
            run = vec if ok else 1
        if run == 1:
            em.ins(f"st.shared.{st} [{thr}+{static + byte_off}], {regs[k]}")
        else:
            words = _pack_words(em, regs[k : k + run], esz)
            v = f".v{len(words)}" if len(words) > 1 else ""
            src = f"{{{', '.join(words)}}}" if len(words) > 1 else words[0]
            em.ins(f"st.shared{v}.b32 [{thr}+{static + byte_off}], {src}")
        k += run


def _descriptor(em: Emitter, addr: str, sbo: int, lbo: int = _LBO) -> str:
    """A wgmma matrix descriptor (PTX ISA "Matrix Descriptor Format") for a no-swizzle layout
    at shared address ``addr`` (K-major: LBO along K, SBO along M/N; MN-major: the other way,
    :func:`_nmajor_layout`): start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45,
    base offset 0, swizzle mode 0 (bits 62-63)."""
    if sbo >> 4 >= 1 << 14 or lbo >> 4 >= 1 << 14:
        raise ValueError("wgmma byte offset out of range")
    r, d = em.new("b32"), em.new("b64")
    em.ins(f"shr.u32 {r}, {addr}, 4")
    em.ins(f"and.b32 {r}, {r}, {0x3FFF}")
    em.ins(f"cvt.u64.u32 {d}, {r}")
    em.ins(f"or.b64 {d}, {d}, {((lbo >> 4) << 16) | ((sbo >> 4) << 32)}")
    return d


#: N-major B (16-bit elements, ``imm-trans-b`` = 1): the no-swizzle MN-major canonical layout,
#: core matrices of 8 K-rows x 16 bytes (8 N elements), 128 contiguous bytes each; 8-column
#: groups along N at SBO = 144 bytes (16 of padding: a warp's cp.async chunks of 4 rows x 8
#: groups land on distinct banks), 8-row groups along K at LBO = N / 8 * 144 (PTX ISA "Leading /
#: Stride Dimension Byte Offset", MN-major interleave). Global rows (K) copy into it as they are,
#: so B = K x N row-major (attention's K^T tile and V) is staged by cp.async, no transpose.
_NM_SBO = 144


def _nmajor_lbo(N: int, esz: int = 2) -> int:
    return N // (16 // esz) * _NM_SBO


def _nmajor_layout(K: int, N: int, esz: int = 2):
    """(row fields, column fields, bytes) of N-major B for :func:`staged_layout`: 16 bytes of
    N (8 16-bit, 16 8-bit elements) a core-matrix row (tcgen05 reads 8-bit B so too)."""
    lbo = _nmajor_lbo(N, esz)
    nb = 4 - (esz.bit_length() - 1)  # bits of n within a core-matrix row
    return ((0, 3, 16), (3, None, lbo)), ((0, nb, esz), (nb, None, _NM_SBO)), K // 8 * lbo


#: apply a dot's elementwise epilogue per wgmma instance (commit + wait each, as tileiras does)?
#: Measured off: on a 128 x 128 x 128 block-scaled fp8 GEMM step ptxas spills 160 bytes with it
#: and 116 without (one wait, ptxas schedules the 128-register partial product better); the
#: per-instance path stays for experiments (epilogue.py)
WGMMA_FUSED_EPILOGUE = False


def _a_fields(K: int, esz: int, G: int) -> tuple:
    """(A's row fields, K fields) of wgmma_dot's K-major A layout (rows permuted, see there)."""
    sbo = _wgmma_sbo(K, esz)
    lg = G.bit_length() - 1
    kb = 4 - (esz.bit_length() - 1)  # bits of k within a 16-byte core-matrix row
    kf = ((0, kb, esz), (kb, None, _LBO))
    a_rows = (
        (0, 3, 16),
        (3, 2, 2 * sbo),
        (5, lg, 8 * sbo),
        (5 + lg, 1, sbo),
        (6 + lg, None, 8 * G * sbo),
    )
    return a_rows, kf


def _outside(v, loop) -> bool:
    """``v`` is defined outside ``loop`` (not by an op or block nested in it)."""
    block = v.op.parent if hasattr(v, "op") else getattr(v, "block", None)
    while block is not None:
        owner = block.parent_op if hasattr(block, "parent_op") else None
        if owner is loop:
            return False
        block = owner.parent if owner is not None else None
    return True


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


def _before(v, op) -> bool:
    """``v`` is defined before ``op`` in program order (in ``op``'s block ahead of it, or in a
    block enclosing it): its registers exist where ``op`` starts."""
    block = v.op.parent if hasattr(v, "op") else getattr(v, "block", None)
    at = v.op if hasattr(v, "op") else None
    while block is not None and block is not op.parent:
        at = block.parent_op if hasattr(block, "parent_op") else None
        block = at.parent if at is not None else None
    if block is None:  # not nested in op's block: an enclosing scope's value
        return True
    return at is None or block.ops.index(at) < block.ops.index(op)


def keep_invariant_a(
    em: Emitter, loop, sync: bool = True, start=None, written=None, rows: bool = False
) -> None:
    """Before ``loop``: the A operand of each wgmma dot of its body that is defined outside it
    and held in registers (attention's Q tile) is written once into a ``.shared`` array of its
    own, in the layout wgmma_dot reads (:func:`_a_fields`), instead of into the scratch in
    every iteration; the dot then reads it there (``Emitter.resident_a``), and a dot that
    writes nothing to shared memory needs no barrier either. ``start``: write only the A
    operands defined before that op (the first loop of an async chain, written before the
    warp groups split, section 24); ``sync=False``: the caller's barrier orders the writes
    (they end with the proxy fence); ``written``: the regions this straight-line run wrote
    already (a chain's loops share Q's: one write); ``rows``: mma.sync dots' A operands too,
    kept row-major at :func:`_pitch` for ``ldmatrix`` (sm_120's general async form, whose dots
    read B from the stage: ``_mma_sync_staged``)."""
    body = loop.regions[0].blocks[0] if loop.regions and loop.regions[0].blocks else None
    kept = proxied = 0
    for op in body.ops if body is not None else ():
        if op.name != "nv_tileaa.dot" or op in em.resident_a:
            continue
        plan = wgmma_plan(op, em.num_warps, em.sm)
        tc = tcgen05_plan(op, em.num_warps, em.sm) if plan is None else None
        a = op.operands[0]
        sync_rows = rows and plan is None and tc is None and _kept_rows(em, op)
        if (plan is None and tc is None and not sync_rows) or not _outside(a, loop):
            continue
        if _staged(em, a) is not None or (start is not None and not _before(a, start)):
            continue
        M, K = a.type.shape
        if sync_rows:  # row-major, the pitch ldmatrix reads (_mma_sync_staged)
            nbytes, fields, esz = sync_rows
        elif tc is not None:  # rows in order (TMEM lane = row)
            nbytes, fields = keep_fields(tc)
            esz = tc.esz
        else:
            nbytes, fields = M // 8 * _wgmma_sbo(K, plan.esz), _a_fields(K, plan.esz, plan.groups)
            esz = plan.esz
        d = em.dist_of(op, a.type)
        # one array per kept value and layout: the loops loop_split makes of one loop (each
        # with its own dot) share it; each still writes it (the copies may sit on paths that
        # do not all pass the first), after the earlier loop's dots have waited
        key = (a, d.layout, nbytes, esz, repr(fields))
        region = em.resident_by_value.get(key)
        if region is None:
            region = em.resident_by_value[key] = em.resident_region(nbytes)
        em.resident_a[op] = region
        if written is not None:
            if region in written:
                continue
            written.add(region)
        _write_fields(em, em.tile(op, a), d, fields, 1, 0, esz, base=region)
        kept += 1
        proxied += not sync_rows  # (wgmma / tcgen05 read it through the async proxy)
    if proxied:
        em.ins("fence.proxy.async.shared::cta")
    if kept and sync:
        em.barrier()


def _kept_rows(em: Emitter, op):
    """(bytes, fields, element size) of mma.sync dot ``op``'s A kept row-major at
    :func:`_pitch` (its rows padded to the instruction's M), or None where the dot does not
    read A by ``ldmatrix`` (``_mma_sync_staged``'s ``use_ldm``)."""
    a, b, c = op.operands[:3]
    if a.type.rank != 2 or len(op.operands) != 3:
        return None
    try:
        row = select_row(op, elem_key(a.type), elem_key(b.type), elem_key(c.type), em.sm)
    except CodegenError:
        return None
    esz = ELEMENTS[elem_key(a.type)][1]
    if row is None or row.frag_cls != "b32" or row.shape[2] * esz != 32:
        return None
    M, K = a.type.shape
    pa = _pitch(K, esz)
    return -(-M // row.shape[0]) * row.shape[0] * pa, (((0, None, pa),), ((0, None, esz),)), esz


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
    from tilegen.runtime.codegen.dist import dist
    from tilegen.runtime.codegen.exchange import row_major

    from tilegen.runtime.codegen import epilogue

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
        st = _staged(em, v)
        if (
            st is not None
            and not isinstance(st.pipe_buf, StagedBox)
            and staged_layout(op, i, em.num_warps, em.sm, st.transposed, st.convert) is None
        ):
            _unstage(em, v)
    a_st, b_st = _staged(em, a), _staged(em, b)
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
    sbo = _wgmma_sbo(K, esz)
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
    off_c = _align(off_b + N // 8 * sbo) if b_here else off_b
    total = off_c if in_regs else off_c + M * N * csz
    praw = _pitch(N, 1)
    off_raw = _align(total)
    kchunk = _raw_rows(off_raw, K, praw) if b8 and b_st.pipe_buf is None else K
    if b8 and not kchunk:
        _unstage(em, b)  # no room for even a chunk of the raw copy: B through registers
        b_st, b8 = None, False
        db = em.dist_of(op, b.type)
    if b8 and b_st.pipe_buf is None:
        total = off_raw + kchunk * praw
    _check_scratch(em, op, total)
    em.need_smem(max(total, 16))  # (the descriptors' base is the scratch's, even when empty)
    a_rows, kf = _a_fields(K, esz, G)
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
        _write_fields(em, em.tile(op, a), da, (a_rows, kf), 1, 0, esz)
    elif a_st is not None and a_st.pipe_buf is None:  # cp.async straight into the K-major layout
        from tilegen.runtime.codegen.memory import cp_async_tile

        cp_async_tile(em, a_st, a_rows, kf, em.smem_base())
    if b_st is None:
        _write_fields(em, em.tile(op, b), db, (kf, b_rows), 0, off_b, esz)  # B[k, n]: row n
    elif b8 and b_st.pipe_buf is None:
        if kchunk == K:  # else copied in chunks below
            from tilegen.runtime.codegen.memory import cp_async_tile

            cp_async_tile(em, b_st, ((0, None, praw),), ((0, None, 1),), em.smem_base(), off_raw)
    elif bn and b_st.pipe_buf is None:  # B as loaded: N-major
        from tilegen.runtime.codegen.memory import cp_async_tile

        rows_n, cols_n, _ = _nmajor_layout(K, N)
        cp_async_tile(em, b_st, rows_n, cols_n, em.smem_base(), off_b)
    elif b_st.pipe_buf is None:  # B^T loaded as such (a permuted tile): rows n, K-major
        from tilegen.runtime.codegen.memory import cp_async_tile

        cp_async_tile(em, b_st, b_rows, kf, em.smem_base(), off_b)
    copies = any(x is not None and x.pipe_buf is None for x in (a_st, b_st))
    if b8 and kchunk != K:
        copies = a_st is not None and a_st.pipe_buf is None
    dl = dist(lay, (M, N))
    cform = row_major((M, N))
    if not in_regs:
        _write(em, em.tile(op, c), dc, cform.mults, off_c, csz, st_c)
    if copies:
        here = [a_st] + ([] if b8 and kchunk != K else [b_st])  # (B's chunks wait below)
        cp_async_commit_wait(em, *(x for x in here if x is not None and x.pipe_buf is None))
    if b8 and kchunk != K:  # raw K x N bytes in chunks -> B's K-major layout (rows n)
        dst = _plus(em, em.smem_base(), off_b)
        _stage_b8_chunks(
            em, b_st, kchunk, K, N, praw, kf, b_rows, off_raw, dst, M * N // em.num_threads
        )
    elif b8:  # raw K x N bytes -> B's K-major layout (rows n)
        if b_st.pipe_buf is None:
            em.barrier()
        raw = b_st.pipe_buf if b_st.pipe_buf is not None else _plus(em, em.smem_base(), off_raw)
        dst = _plus(em, em.smem_base(), off_b)
        _transpose_bytes(em, raw, praw, K, N, kf, b_rows, dst, 0, M * N // em.num_threads)
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
    b_sbo, b_lbo = (_NM_SBO, _nmajor_lbo(N)) if bn else (sbo, _LBO)
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
        from tilegen.runtime.codegen.pipeline import wgmma_descriptor

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
        desc_a = _descriptor(em, _plus(em, a_st.pipe_buf, wgo), sbo)
    boxed = b_st.pipe_buf if b_st is not None and isinstance(b_st.pipe_buf, StagedBox) else None
    if boxed is not None:  # TMA's swizzled column boxes: start, LBO (next box), SBO (8 rows)
        from tilegen.runtime.codegen.pipeline import wgmma_descriptor

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
        step = s * tk * esz // 16 * _LBO
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


def converted_regs(em: Emitter, regs: list, cvt: str) -> list:
    """Fragment registers through conversion instruction ``cvt``
    (``selection.conversion_ptx``), in new b32 registers."""
    out = []
    for r in regs:
        n = em.new("b32")
        em.ins(f"{cvt} {n}, {r}")
        out.append(n)
    return out


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


def _rows_lane_offset(em: Emitter, lane, warp, W: int, pa: int) -> str:
    """Lane ``l``'s byte offset into A (row-major at pitch ``pa``) for ``ldmatrix.x4`` of MMA
    tile 0 with the warps stacked along M (``mma_sync_rows_layout``): logical row
    ``8 warp + l % 8 + 8 W ((l / 8) % 2)``, 16-byte chunk ``l / 16``."""
    r8, h8, h16 = _lane_bits(em, lane)
    return em.lincomb(0, [(8 * pa, warp), (pa, r8), (8 * W * pa, h8), (16, h16)])


def _lane_bits(em: Emitter, lane) -> tuple:
    """(``l % 8``, ``(l / 8) % 2``, ``l / 16``) of lane ``l``: an ``ldmatrix.x4`` lane's row in
    its 8 x 8 matrix, and which of the four matrices it addresses."""
    r8, h8, h16 = (em.new("b32") for _ in range(3))
    em.ins(f"and.b32 {r8}, {lane}, 7")
    em.ins(f"shr.u32 {h8}, {lane}, 3")
    em.ins(f"and.b32 {h8}, {h8}, 1")
    em.ins(f"shr.u32 {h16}, {lane}, 4")
    return r8, h8, h16


def _box_lanes(em: Emitter, box: StagedBox, W: int, reps_n: int, every: bool = False) -> list:
    """Each lane's byte offsets into a dot's B :class:`StagedBox` for ``ldmatrix`` (hoisted:
    computed once, in the consumers' set-up; ``async_mma_sync``'s addressing): B^T (K-major),
    one per K step of a box; B N-major, one per group of 8 columns the warp reads."""
    from tilegen.runtime.codegen.async_mma_sync import b_offsets, bt_offsets

    key = ("mma-box-lanes", box.span, box.kmajor, box.box_bytes, W, reps_n, every)
    if key not in em._smem_refs:
        with em.hoisted():
            w = None
            if every:  # (each warp reads every column)
                w = em.new("b32")
                em.ins(f"mov.b32 {w}, 0")
            if box.kmajor:  # (one offset: _box_ldmatrix steps through a box by XOR)
                em._smem_refs[key] = bt_offsets(em, box.span, w, 1 if every else W, False)
            else:
                rows = box.box_bytes // box.span
                em._smem_refs[key] = b_offsets(em, 1 if every else W, reps_n, rows, box.span, w)
    return em._smem_refs[key]


def _box_a_lanes(em: Emitter, box: StagedBox, W: int, by_rows: bool) -> str:
    """Each lane's address in an mma.sync dot's A :class:`StagedBox` (rows in order, K-major,
    swizzled; async_kept.py) for ``ldmatrix.x4`` of K step 0 (hoisted): the warps stacked along
    M read rows ``8 w + l % 8 + 8 W ((l / 8) % 2)`` (``_rows_lane_offset``'s rows), else every
    warp rows ``l % 16``; chunk ``l / 16`` of the step, swizzled by the row. Step ``j`` of a
    box is this address XOR ``32 j`` (:func:`_box_a_step`): the row's start has no bits below
    the span, so the swizzled chunk's bits are the address's own. Tiles further down start
    16 W (16) rows on, which keeps each row's swizzle key. One register, as the kept rows'."""
    from tilegen.runtime.codegen.async_mma_sync import _key

    key = ("mma-box-a-lanes", box.addr, box.span, W, by_rows)
    if key not in em._smem_refs:
        with em.hoisted():
            _, lane, warp = em.tid()
            r8, h8, h = _lane_bits(em, lane)
            row = em.new("b32")
            if by_rows:
                em.ins(f"mad.lo.s32 {row}, {warp}, 8, {r8}")
                em.ins(f"mad.lo.s32 {row}, {h8}, {8 * W}, {row}")
            else:  # (row l % 16)
                em.ins(f"mad.lo.s32 {row}, {h8}, 8, {r8}")
            y = em.new("b32")
            em.ins(f"xor.b32 {y}, {_key(em, row, box.span)}, {h}")
            em.ins(f"shl.b32 {y}, {y}, 4")
            at = em.new("b32")
            em.ins(f"mad.lo.s32 {at}, {row}, {box.span}, {box.addr}")
            em.ins(f"or.b32 {at}, {at}, {y}")
            em._smem_refs[key] = at
    return em._smem_refs[key]


def _box_a_step(em: Emitter, at: str, j: int) -> str:
    """K step ``j`` of a K-major box from a lane's address of step 0 (:func:`_box_a_lanes`,
    ``bt_offsets(steps=False)`` added to a 1024-aligned box): its chunk pair, swizzled."""
    if not j:
        return at
    r = em.new("b32")
    em.ins(f"xor.b32 {r}, {at}, {32 * j}")
    return r


def ldmatrix(regs: list, trans: bool = False) -> str:
    """The ``ldmatrix .m8n8 .b16`` opcode reading ``len(regs)`` matrices."""
    return f"ldmatrix.sync.aligned.m8n8.x{len(regs)}{'.trans' if trans else ''}.shared.b16"


def _box_ldmatrix(
    em: Emitter, box: StagedBox, regs: list, refs: list, rb: int, s: int, n0: int, step: int
) -> None:
    """B's fragments of K step ``s`` (``step`` bytes of K) for the warps' column group ``rb``
    (columns from ``n0``; with 4 ``regs`` also group rb + 1's, lanes 16-31 addressing it) out
    of ``box``: rows n, K-major, by ``ldmatrix``; K rows, N-major, by ``ldmatrix .trans``.
    ``refs``: :func:`_box_lanes` added to the box's address."""
    if box.kmajor:
        bx, j = divmod(s, box.span // step)
        off = bx * box.box_bytes + n0 * box.span
        at = _box_a_step(em, refs[0], j)  # (the box is 1024-aligned: step j by XOR)
        em.ins(f"{ldmatrix(regs)} {{{', '.join(regs)}}}, [{at}+{off}]")
    else:
        em.ins(f"{ldmatrix(regs, True)} {{{', '.join(regs)}}}, [{refs[rb]}+{s * 16 * box.span}]")


def _epilogue_chunk(em: Emitter, ep, kmap: dict, row: MmaRow, m0: int, n0: int, cregs) -> None:
    """The epilogue plan ``ep`` applied to MMA tile (m0, n0)'s finished registers ``cregs``."""
    from tilegen.runtime.codegen import epilogue

    epilogue.chunk(em, ep, {kmap[(m0 + dm, n0 + dn)]: r for (dm, dn), r in zip(row.c_regs, cregs)})


def _mma_sync_staged(em: Emitter, op, row: MmaRow, a_st, b_st) -> None:
    """The mma.sync dot with A and/or B cp.async-staged (``memory.Staged``): A row-major M x K
    (pitch K esz + 16), B row-major K x N (pitch N esz + 16; fragments by ``ldmatrix .trans``
    for 16-bit types, ``ld.shared`` otherwise), copied by ``cp.async`` right here (then
    ``commit_group``, ``wait_group 0``, ``bar.sync``) or, in a pipelined K loop, already waiting
    in that loop's stage buffer (``Staged.pipe_buf``; control.py issued the copies and the
    barrier). Register operands keep the old layouts (A row-major, B^T N x K)."""
    from tilegen.runtime.codegen.memory import cp_async_tile

    from tilegen.runtime.codegen import epilogue

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
    pa = _ld_pitch(K, esz, False)  # (A from registers too: written at the padded pitch)
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
    praw = _pitch(N, 1)
    kchunk = K
    if b8 and b_st.pipe_buf is None:
        before = (0 if a_st is not None and a_st.pipe_buf is not None else M * pa) + 32
        before += N * _pitch(K, 1) + (0 if in_regs else M * N * csz)
        kchunk = _raw_rows(before, K, praw)
        if not kchunk:  # no room for even a chunk of the raw copy: B through registers
            _unstage(em, b)
            if a_st is None:
                return dot(em, op)
            b_st, b_kn, b8 = None, False, False
    size_raw = kchunk * praw if b8 and b_st.pipe_buf is None else 0
    if b8:
        b_kn = False
    pbk = K * esz if b_st is None else _ld_pitch(N, esz, True) if b_kn else _ld_pitch(K, esz, False)
    # scratch: operands not in a pipeline stage buffer, then C if it is not in registers
    size_a = 0 if (a_st is not None and a_st.pipe_buf is not None) or kept_a or a_regs else M * pa
    b_in_pipe = b_st is not None and b_st.pipe_buf is not None and not b8
    size_b = 0 if b_in_pipe else (K if b_kn else N) * pbk
    off_b = _align(size_a)
    off_c = _align(off_b + size_b)
    total = off_c if in_regs else off_c + M * N * csz
    off_raw = _align(total)
    total = off_raw + size_raw
    cap = max(SMEM_LIMIT, scratch_cap(em))
    if total > cap and all(x is None or x.pipe_buf is None for x in (a_st, b_st)):
        _unstage(em, a)  # the padded layouts do not fit: the register path's might
        _unstage(em, b)
        return dot(em, op)
    _check_scratch(em, op, total)
    em.need_smem(total)
    st_ab = {1: "b8", 2: "b16", 4: "b32", 8: "f64"}[esz]
    st_c = {"f32": "f32", "b32": "b32", "f64": "f64"}[row.c_cls]
    writes = (a_st is None and kept_a is None and not a_regs) or b_st is None or not in_regs
    copies = any(s is not None and s.pipe_buf is None for s in (a_st, b_st))
    if writes or copies:
        em.barrier()
    if a_st is None and kept_a is None and not a_regs:  # (runs along K packed into words)
        fields = (((0, None, pa),), ((0, None, esz),))
        _write_fields(em, em.tile(op, a), em.dist_of(op, a.type), fields, 1, 0, esz)
    elif a_st is not None and a_st.pipe_buf is None:
        f = staged_layout(op, 0, W, em.sm, a_st.transposed, a_st.convert)
        cp_async_tile(em, a_st, f[0], f[1], em.smem_base(), 0)
    if b_st is None:
        _write(em, em.tile(op, b), em.dist_of(op, b.type), (1, K), off_b, esz, st_ab)
    elif b_st.pipe_buf is None and kchunk == K:  # (8-bit B in chunks: below)
        f = staged_layout(op, 1, W, em.sm, b_st.transposed, b_st.convert)
        cp_async_tile(em, b_st, f[0], f[1], em.smem_base(), off_raw if b8 else off_b)
    if not in_regs:
        _write(em, em.tile(op, c), dc, row_major((M, N)).mults, off_c, csz, st_c)
    if copies:
        here = [a_st] + ([b_st] if kchunk == K else [])  # (B's chunks wait below)
        cp_async_commit_wait(em, *(x for x in here if x is not None and x.pipe_buf is None))
    if writes or copies:
        em.barrier()
    if b8 and kchunk != K:  # raw K x N bytes in chunks -> B^T rows n (pitch pbk)
        dst = _plus(em, em.smem_base(), off_b)
        fr, fc = ((0, None, 1),), ((0, None, pbk),)
        _stage_b8_chunks(
            em, b_st, kchunk, K, N, praw, fr, fc, off_raw, dst, M * N // em.num_threads
        )
        em.barrier()
    elif b8:  # raw K x N bytes -> B^T rows n (pitch pbk)
        raw = b_st.pipe_buf if b_st.pipe_buf is not None else _plus(em, em.smem_base(), off_raw)
        dst = _plus(em, em.smem_base(), off_b)
        fr, fc = ((0, None, 1),), ((0, None, pbk),)
        _transpose_bytes(em, raw, praw, K, N, fr, fc, dst, 0, M * N // em.num_threads)
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
            rA, rB = _staged_lane_offsets(
                em, lane, warp, row, wn, esz, pa, pbk, b_kn, use_ldm, ldm_b, pair_b
            )
            if by_rows:  # lane l: row 8 w + l % 8 + 8 W ((l / 8) % 2), 16-byte chunk l / 16
                rA = _rows_lane_offset(em, lane, warp, W, pa)
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
    if box_a is not None:  # the lane's swizzled chunk of K step 0 (_box_a_step: the others)
        aA = _box_a_lanes(em, box_a, W, by_rows)
    elif a_st is not None and a_st.pipe_buf is not None:
        aA, oA = _plus(em, a_st.pipe_buf, rA), 0
    elif kept_a is not None:
        aA, oA = _plus(em, kept_a, rA), 0
    elif a_regs:  # (the fragments are registers of A)
        aA, oA = None, 0
    else:
        aA, oA = scratch_addr("A", rA), 0
    if box is not None:  # per-lane swizzled chunks of this iteration's boxes
        aB = [_plus(em, box.addr, r) for r in _box_lanes(em, box, W, reps_n, by_rows)]
    elif b_in_pipe:
        aB, oB = _plus(em, b_st.pipe_buf, rB), 0
    else:
        aB, oB = scratch_addr("B", rB), off_b
    fld = "f64" if row.frag_cls == "f64" else "b32"
    ksteps = K // tk
    unpacked: dict = {}  # fragment register -> its f16x2 halves (row.unpack)
    keep = _pad_guards(em, lane, warp, row, wn, M0, N, M, N) if M != M0 else None

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
    # (today's path too where pair_b: lanes 16-31 address the second, _staged_lane_offsets)
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
                at = _box_a_step(em, aA, j)
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
                    _box_ldmatrix(em, box, regs, aB, rb, s, n0, tk * esz)
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
        st = _staged(em, v)
        if (
            st is not None
            and not isinstance(st.pipe_buf, StagedBox)
            and staged_layout(op, i, em.num_warps, em.sm, st.transposed, st.convert) is None
        ):
            _unstage(em, v)
    a_st, b_st = _staged(em, a), _staged(em, b)
    if a_st is not None or b_st is not None or _stacked(em, op, row):  # (warps along M: there)
        return _mma_sync_staged(em, op, row, a_st, b_st)
    from tilegen.runtime.codegen import epilogue

    ep = None
    acc_layout = mma_sync_accumulator_layout(op, em.num_warps)
    if em.dist_of(op, c.type).layout == em.dist_of(op, res.type).layout == acc_layout:
        ep = epilogue.plan(em, op)  # applied per MMA tile as its K steps complete
        if ep:
            epilogue.begin(em, ep)
    em.need_isa(row.ptx_isa)
    nb, M0, N0, K0 = _dims(op)
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
    off_b = _align(nb * M * K * esz)
    off_c = _align(off_b + nb * N * K * esz)
    total = off_c if in_regs else off_c + nb * M * N * csz
    _check_scratch(em, op, total)
    em.need_smem(total)
    st_ab = {1: "b8", 2: "b16", 4: "b32", 8: "f64"}[esz]
    st_c = {"f32": "f32", "b32": "b32", "f64": "f64"}[row.c_cls]
    rank3 = a.type.rank == 3
    abatch, bbatch, cbatch = ((M * K,), (N * K,), (M * N,)) if rank3 else ((), (), ())
    em.barrier()
    _write(em, em.tile(op, a), da, abatch + (K, 1), 0, esz, st_ab)
    _write(em, em.tile(op, b), db, bbatch + (1, K), off_b, esz, st_ab)  # B[.., k, n] at n K + k
    if K != K0:
        _zero_fill(em, nb * M, K, K0, esz, 0)
        _zero_fill(em, nb * N, K, K0, esz, off_b)
    if not in_regs:
        _write(em, em.tile(op, c), dc, cbatch + (N, 1), off_c, csz, st_c)
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
            em._smem_refs[key] = _lane_addresses(
                em, lane, warp, M, N, K, esz, csz, row, wn, use_ldm
            )
    aA, aB, aC = em._smem_refs[key]
    fld = "f64" if row.frag_cls == "f64" else "b32"
    ksteps = K // tk
    unpacked: dict = {}  # fragment register -> its f16x2 halves (row.unpack)
    keep = _pad_guards(em, lane, warp, row, wn, M0, N0, M, N) if (M, N) != (M0, N0) else None
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


__all__ = ["MMA_ROWS", "MmaRow", "WgmmaPlan", "select_row", "load_reg", "wgmma_plan"]
