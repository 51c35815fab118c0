"""sm_120's consumers of the async GEMM form (docs/pipelines.md section 31): ``mma.sync`` on
fragments read by ``ldmatrix`` from the stages the producer warp group's TMA copies fill.

The stage holds A (M x K, K-major) and B (K x N, N-major; or B^T, N x K, K-major) in column
boxes of ``span`` = 32, 64 or 128 bytes a row, swizzled by their span (``tma.column_boxes``):
16-byte chunk ``c`` of row ``r`` of a box sits at chunk ``c ^ ((r span / 128) % (span / 16))``. The warps stand side by side along N, as in the
accumulator layout the layout stage gives the dot (``mma_sync_accumulator_layout``): warp ``w``
computes columns ``8 (W j + w) ..`` of every 16-row tile, so register k of the loop's value is
the same element it is on today's path, and the kernel's epilogue runs as it does there.

Each lane's address is a per-lane part computed once, at the kernel's entry, plus immediates:
A's rows are multiples of 16 apart and B's K rows multiples of 16, so the swizzle key ``x`` of
a row is the lane's own and chunk ``2 s + h`` (K step ``s``) lands at ``2 s ^ (x ^ h)``: one
register per K step of a box (up to four), one per 8-column group for B N-major.
"""

from __future__ import annotations

from tilegen.runtime.codegen import b8_transpose
from tilegen.runtime.codegen.async_convert import converted, transpose_b
from tilegen.runtime.codegen.core import Emitter, elem_key, fail
from tilegen.runtime.codegen.pipeline import Ring, mbarrier_arrive, mbarrier_wait
from tilegen.runtime.layouts.kernel import register_budget


def _lanes(em: Emitter):
    _, lane, warp = em.tid()
    return lane, warp


def _key(em: Emitter, row, span: int):
    """The swizzle key of ``row`` (a register) in a box of ``span``-byte rows:
    ``(row span / 128) % (span / 16)``."""
    x = em.new("b32")
    shift = {128: 0, 64: 1, 32: 2}[span]
    if shift:
        em.ins(f"shr.u32 {x}, {row}, {shift}")
        em.ins(f"and.b32 {x}, {x}, {span // 16 - 1}")
    else:
        em.ins(f"and.b32 {x}, {row}, 7")
    return x


def _chunk_regs(em: Emitter, key, half, row_bytes, span: int) -> list:
    """Per K step ``j`` of a box (``span / 32`` of them): ``row_bytes + ((2 j ^ (key ^ half))
    << 4)``."""
    y = em.new("b32")
    em.ins(f"xor.b32 {y}, {key}, {half}")
    out = []
    for j in range(span // 32):
        t = em.new("b32")
        em.ins(f"xor.b32 {t}, {y}, {2 * j}")
        em.ins(f"shl.b32 {t}, {t}, 4")
        r = em.new("b32")
        em.ins(f"add.s32 {r}, {t}, {row_bytes}")
        out.append(r)
    return out


def _a_offsets(em: Emitter, span: int) -> list:
    """ldmatrix.x4 of a 16 x 16 A tile: lane l reads row l % 16, chunk l / 16 (of the K step)."""
    lane, _ = _lanes(em)
    r16, h, rb = (em.new("b32") for _ in range(3))
    em.ins(f"and.b32 {r16}, {lane}, 15")
    em.ins(f"shr.u32 {h}, {lane}, 4")
    em.ins(f"mul.lo.s32 {rb}, {r16}, {span}")
    return _chunk_regs(em, _key(em, r16, span), h, rb, span)


def bt_offsets(em: Emitter, span: int, warp=None, W: int = 1, steps: bool = True) -> list:
    """ldmatrix of B^T (N x K, K-major): lane l reads row 8 w + l % 8 + 8 W (l / 16) of the
    warps' columns, chunk (l / 8) % 2 of the K step: .x2 reads the warp's 8 columns (lanes
    0-15), .x4 the warp's next 8 too, ``W`` groups on (``warp``: w, default the lane's own;
    rows 8 apart share their swizzle key). One offset per K step of a box, or, ``steps=False``,
    K step 0's alone: the row's start has no bits below the span, so step ``j``'s is that
    offset XOR ``32 j``, in a box 1024-aligned (``mma_sync_lanes.box_ldmatrix``)."""
    lane, own = _lanes(em)
    warp = own if warp is None else warp
    h, r8, rb, up = (em.new("b32") for _ in range(4))
    em.ins(f"shr.u32 {h}, {lane}, 3")
    em.ins(f"and.b32 {h}, {h}, 1")
    em.ins(f"and.b32 {r8}, {lane}, 7")
    em.ins(f"shr.u32 {up}, {lane}, 4")  # (lanes 16-31: the next group's rows)
    em.ins(f"mul.lo.s32 {up}, {up}, {8 * W}")
    em.ins(f"shl.b32 {rb}, {warp}, 3")  # the warp's first column: row 8 w of B^T
    em.ins(f"add.s32 {rb}, {rb}, {r8}")
    em.ins(f"add.s32 {rb}, {rb}, {up}")
    em.ins(f"mul.lo.s32 {rb}, {rb}, {span}")
    if not steps:
        y = em.new("b32")
        em.ins(f"xor.b32 {y}, {_key(em, r8, span)}, {h}")
        em.ins(f"shl.b32 {y}, {y}, 4")
        em.ins(f"or.b32 {y}, {y}, {rb}")
        return [y]
    return _chunk_regs(em, _key(em, r8, span), h, rb, span)


def b_offsets(em: Emitter, W: int, reps: int, K: int, span: int, warp=None) -> list:
    """ldmatrix.trans of B (K x N, N-major) for the warp's 8 columns of group j (columns
    8 (W j + w) ..): lane l reads K row l % 16 of group j, lanes 16-31 of group j + 1 (.x2
    reads group j, lanes 0-15; .x4 both); the 16-byte chunk is the columns' place in their
    box, swizzled by the row (``warp``: w, default the lane's own)."""
    lane, own = _lanes(em)
    warp = own if warp is None else warp
    r16, up = em.new("b32"), em.new("b32")
    em.ins(f"and.b32 {r16}, {lane}, 15")
    em.ins(f"shr.u32 {up}, {lane}, 4")  # (lanes 16-31: the next group's columns)
    em.ins(f"mad.lo.s32 {up}, {up}, {W}, {warp}")
    key = _key(em, r16, span)
    out = []
    per_box = span // 16  # 8-column groups (16 bytes of 16-bit elements) in a box
    for j in range(reps):
        c, cc, bx = em.new("b32"), em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {c}, {up}, {W * j}")
        em.ins(f"and.b32 {cc}, {c}, {per_box - 1}")
        em.ins(f"shr.u32 {bx}, {c}, {per_box.bit_length() - 1}")
        em.ins(f"xor.b32 {cc}, {cc}, {key}")
        em.ins(f"shl.b32 {cc}, {cc}, 4")
        r = em.new("b32")
        em.ins(f"mad.lo.s32 {r}, {bx}, {K * span}, {cc}")
        em.ins(f"mad.lo.s32 {r}, {r16}, {span}, {r}")
        out.append(r)
    return out


def consumer(em: Emitter, op, v: dict) -> list:
    """The consumers' K loop of the GEMM form on sm_120: per stage, wait for its full barrier,
    read A and B with ``ldmatrix`` and accumulate with ``mma.sync`` into the loop's registers,
    arrive on its empty barrier. Returns the result's registers (the accumulator layout's)."""
    from tilegen.runtime.codegen.mma_rows import converted_regs, issue_mma, ldmatrix, select_row
    from tilegen.runtime.layouts.mma_choice import mma_sync_accumulator_layout

    dot, a, b = v["dot"], v["a"], v["b"]
    M, K = a.tile[-2:]
    N = v["N"]
    base, stage_bytes, bar = v["base"], v["stage_bytes"], v["bar"]
    lb, ub, step, ty, iv_cls = v["lb"], v["ub"], v["step"], v["ty"], v["iv_cls"]
    W = em.num_warps
    res = op.results[0]
    dr = em.dist_of(op, res.type)
    if dr.layout != mma_sync_accumulator_layout(dot, W):
        fail(op, "PTX backend: the sm_120 async loop's value is not in the mma.sync layout")
    row = select_row(
        dot,
        elem_key(dot.operands[0].type),
        elem_key(dot.operands[1].type),
        elem_key(dot.operands[2].type),
        em.sm,
    )
    tm, tn, tk = row.shape
    esz = a.esz
    # 8-bit B loaded K x N: the consumers transpose each stage's B into a B^T buffer first
    # (``bt``: async_convert.transpose_b, as sm_90's do; ldmatrix transposes 16-bit elements only)
    bt = v["bt"]
    kmajor = b.kmajor or bt is not None
    if row.frag_cls != "b32" or tk * esz != 32 or row.unpack or (esz != 2 and not kmajor):
        fail(op, "PTX backend: the sm_120 async loop takes 16-bit operands, or others with B^T")
    # tf32 from an f32 stage: the fragments rounded (cvt.rna) as ldmatrix reads them (B's on
    # its way into B^T where the consumers transpose it), as today's path converts its own
    round_a, round_b = (converted(em, dot.operands[i]) for i in (0, 1))
    reps_m, reps_n, ksteps = M // tm, N // (tn * W), K // tk
    pairs = reps_n % 2 == 0  # B of two column groups an ldmatrix.x4, as tileiras reads it
    bspan = b.span if bt is None else bt.span  # (the rows ldmatrix reads B from)
    if a.span not in (32, 64, 128) or bspan not in (32, 64, 128):
        fail(op, "PTX backend: the sm_120 async loop reads swizzled boxes of 32-128 bytes")
    a_steps = a.span // (tk * esz)  # K steps in one box of A (of B^T)
    # (in the consumers' branch, not hoisted to the kernel's entry: nothing the producer does
    # not need stays live across its setmaxnreg.dec)
    pa = _a_offsets(em, a.span)
    pb = bt_offsets(em, bspan, None, W) if kmajor else b_offsets(em, W, reps_n, K, b.span)
    btbase = btend = lanes = None
    if bt is not None:  # the B^T buffers, in turn
        btbase, btend = em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {btbase}, {base}, {v['bt_off']}")
        em.ins(f"add.s32 {btend}, {btbase}, {bt.count * bt.bytes}")
        budget = register_budget(em.func, em.num_threads + em.producer_threads)
        lanes = b8_transpose.setup(em, b, bt, W, b8_transpose.batch_for(budget, dr.nregs))
    kmap = {dr.raw[k]: k for k in range(dr.nregs)}
    init = v["init"]
    acc = []
    for k in range(dr.nregs):  # the loop's registers, from its initial value
        r = em.new(row.c_cls)
        em.ins(f"mov.{'b32' if row.c_cls == 'b32' else 'f32'} {r}, {init[k]}")
        acc.append(r)
    ring = Ring(v["stages"])
    ring.start(em, 0)
    iv = em.mov(iv_cls, lb)
    top, end = em.new_label("async_mma"), em.new_label("async_mma_done")
    em.label(top)
    stop = em.new("pred")
    em.ins(f"setp.ge.{ty} {stop}, {iv}, {ub}")
    em.ins(f"@{stop} bra {end}")
    full = bar(0, ring.stage)
    mbarrier_wait(em, full, ring.phase)
    sbase = em.new("b32")
    em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {stage_bytes}, {base}")
    boff = b.offset
    if bt is not None:  # this stage's B into this iteration's B^T buffer, then every read of it
        if lanes is not None:  # 8-bit: a warp an atom at a time
            b8_transpose.emit(em, lanes, sbase, btbase)
        else:
            transpose_b(em, b, sbase, bt, btbase, v["tid"], v["nthreads"], round_b)
        em.barrier()
        boff = 0
    sa, sb = [], []
    for r in pa:
        x = em.new("b32")
        em.ins(f"add.s32 {x}, {sbase}, {r}")
        sa.append(x)
    for r in pb:
        x = em.new("b32")
        em.ins(f"add.s32 {x}, {sbase if bt is None else btbase}, {r}")
        sb.append(x)
    unpacked: dict = {}
    for ra in range(reps_m):
        afr = []
        for s in range(ksteps):
            regs = [em.new("b32") for _ in row.a_regs]
            box, j = divmod(s, a_steps)
            off = a.offset + box * a.box_bytes + ra * tm * a.span
            em.ins(
                f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(regs)}}}, "
                f"[{sa[j]}+{off}]"
            )
            afr.append(converted_regs(em, regs, round_a) if round_a else regs)
        for g in range(0, reps_n, 2 if pairs else 1):
            grp = (g, g + 1) if pairs else (g,)
            cregs = {
                rb: [acc[kmap[(ra * tm + dm, rb * W * tn + dn)]] for dm, dn in row.c_regs]
                for rb in grp
            }
            for s in range(ksteps):
                # column groups g (and g + 1: one ldmatrix.x4, lanes 16-31 at its columns)
                regs = [em.new("b32") for _ in range(2 * len(grp))]
                if kmajor:  # B^T rows n: the A-like K-major read
                    box, j = divmod(s, bspan // (tk * esz))
                    box_bytes = b.box_bytes if bt is None else bt.box_bytes
                    off = boff + box * box_bytes + g * W * tn * bspan
                    em.ins(f"{ldmatrix(regs)} {{{', '.join(regs)}}}, [{sb[j]}+{off}]")
                    if round_b and bt is None:
                        regs = converted_regs(em, regs, round_b)
                else:
                    off = b.offset + s * tk * b.span
                    em.ins(f"{ldmatrix(regs, True)} {{{', '.join(regs)}}}, [{sb[g]}+{off}]")
                for i, rb in enumerate(grp):
                    bregs = regs[2 * i : 2 * i + 2]
                    issue_mma(em, row, cregs[rb], afr[s], bregs, cregs[rb], unpacked)
    # every read of the stage is in registers now: the producer may refill it
    mbarrier_arrive(em, bar(1, ring.stage))
    if bt is not None:
        bt.advance(em, btbase, btend)
    ring.advance(em)
    em.ins(f"add.{ty} {iv}, {iv}, {step}")
    em.ins(f"bra {top}")
    em.label(end)
    return acc
