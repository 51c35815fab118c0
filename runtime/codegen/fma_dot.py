"""A dot without tensor cores (f32 x f32, as tileiras does it; also rank-3 batched dots):
operands through shared memory, the K reduction as per-thread outer products of ``fma.rn``.
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import ELEMENTS, Emitter, elem_key, fail
from tilegen.runtime.codegen.exchange import Form
from tilegen.runtime.codegen.mma_staging import (
    check_scratch,
    dot_dims,
    round_up,
    unstage,
    write_strided,
)
from tilegen.runtime.layouts.kernel import register_cap

#: the fma dot's K loop is unrolled where K times a thread's results is at most this many
#: ``fma``s (tileiras unrolls a 64 x 64 x 32 f32 tile's 1,024); else it steps 2 vectors of K
FMA_UNROLL = 1024
#: registers the fma dot's results and its loaded vectors may take (else narrower vectors)
FMA_REGISTERS = 200
#: below a register cap (``.maxnreg``), what the rest of the kernel keeps besides them
FMA_SLACK = 64


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
    a, b, c = op.operands[0], op.operands[1], op.operands[2]
    unstage(em, a)
    unstage(em, b)
    res = op.results[0]
    key = elem_key(res.type)
    if key not in ("f32", "f64") or elem_key(a.type) != key or elem_key(b.type) != key:
        fail(op, f"PTX backend does not support this dot without tensor cores yet")
    nb, M, N, K = dot_dims(op)
    esz = ELEMENTS[key][1]
    cls = ELEMENTS[key][0]
    vec = 16 // esz if K % (16 // esz) == 0 else 1
    Kp = K + 16 // esz if vec > 1 else K + 1  # (a row of 16-byte multiples stays aligned)
    off_b = round_up(nb * M * Kp * esz)
    total = off_b + nb * N * Kp * esz
    check_scratch(em, op, total)
    em.need_smem(total)
    st = "f64" if esz == 8 else "b32"
    da, db, dr = em.dist_of(op, a.type), em.dist_of(op, b.type), em.dist_of(op, res.type)
    batch = (M * Kp,) if a.type.rank == 3 else ()
    bbatch = (N * Kp,) if a.type.rank == 3 else ()
    em.barrier()
    write_strided(em, em.tile(op, a), da, batch + (Kp, 1), 0, esz, st)
    write_strided(em, em.tile(op, b), db, bbatch + (1, Kp), off_b, esz, st)  # B[.., k, n]: n Kp + k
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
