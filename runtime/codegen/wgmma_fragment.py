"""The async K loop's accumulator registers (docs/pipelines.md): which element of the tile
each register of sm_90's wgmma fragment and of sm_100's TMEM row order holds, and the wgmma
fragment's moves through the scratch buffer.

The accumulator lives in the wgmma fragment of each consumer warp group (A's rows in natural
order); the loop's initial value comes in (:func:`to_fragment`), and its result goes out
(:func:`from_fragment`), through the scratch buffer in whatever layout the layout stage gave the
loop's value (tcgen05's consumers move theirs the same way: async_tcgen05.py).
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import Emitter


def scratch_from_start(em: Emitter, nbytes: int) -> None:
    """Claim the scratch buffer's first ``nbytes`` for a write at its start: behind a barrier
    where an earlier claim (an exchange before the loop: C's layout change, say) may still be
    read by a slower warp (fuzz seed 602780)."""
    if em.scratch_in_use() > 0:
        em.barrier()
    em.need_smem(nbytes)


def scratch_to_layout(em: Emitter, op, t, cls: str, M: int, N: int) -> list:
    """The M x N tile the consumers just wrote row-major (4-byte elements) into the scratch
    buffer (and met at the barrier), read back in the layout of ``t``; then the barrier again
    (the scratch may be reused)."""
    from tilegen.runtime.codegen.exchange import row_major

    d = em.dist_of(op, t)
    form = row_major((M, N))
    out = []
    for k in range(d.nregs):
        r = em.new(cls)
        em.ins(f"ld.shared.{cls} {r}, {em.smem_ref(d, form, k, 4)}")
        out.append(r)
    em.barrier()
    return out


def warp_row(em: Emitter, M: int, within) -> str:
    """Register: row ``within`` (a register: the row inside the warp's 16) of m64 instance 0
    of this thread's warp: 16 warp + 64 (nq - 1) wg + within (16 warp = 64 wg + 16 (warp % 4))."""
    _, _, warp = em.tid()
    nq = M // (16 * em.num_warps)
    row = em.new("b32")
    em.ins(f"mad.lo.s32 {row}, {warp}, 16, {within}")
    if nq > 1:
        wg = em.new("b32")
        em.ins(f"shr.u32 {wg}, {warp}, 2")
        em.ins(f"mad.lo.s32 {row}, {wg}, {64 * (nq - 1)}, {row}")
    return row


def fragment_thread(em: Emitter, M: int) -> tuple:
    """(r0, g, t): this thread's first fragment row and its lane's group and quad index."""
    _, lane, _ = em.tid()
    g, t = em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {g}, {lane}, 2")
    em.ins(f"and.b32 {t}, {lane}, 3")
    return warp_row(em, M, g), g, t


def row_thread(em: Emitter, N: int, groups: int, M: int = 128, x2: bool = False) -> tuple:
    """(row, first column, columns) of a thread of tcgen05 row order over ``groups`` column
    groups: row 32 (w % 4) + lane, columns (w / 4) N / groups .. of it. ``M`` 64: a CTA pair's
    M 128 accumulator (section 18), thread t holds row t % 64, columns (t / 64) N / 2 ...;
    ``M`` 256: one CTA's two accumulators (8 warps), thread t holds row t."""
    tid, lane, warp = em.tid()
    row, col = em.new("b32"), em.new("b32")
    if x2:  # one CTA's M 64 read by 16x32bx2: row 16 w + l % 16, columns (l / 16) N / 2 ..
        em.ins(f"and.b32 {row}, {lane}, 15")
        em.ins(f"mad.lo.s32 {row}, {warp}, 16, {row}")
        em.ins(f"shr.u32 {col}, {lane}, 4")
        em.ins(f"mul.lo.s32 {col}, {col}, {N // 2}")
        return row, col, N // 2
    if M == 256:  # one CTA's 256 rows in two accumulators (async_tcgen05._tall_stage): row t
        em.ins(f"mov.u32 {row}, {tid}")
        em.ins(f"mov.u32 {col}, 0")
        return row, col, N
    if M == 64:
        em.ins(f"and.b32 {row}, {tid}, 63")
        em.ins(f"shr.u32 {col}, {tid}, 6")
        em.ins(f"mul.lo.s32 {col}, {col}, {N // groups}")
        return row, col, N // groups
    em.ins(f"and.b32 {row}, {warp}, 3")
    em.ins(f"mad.lo.s32 {row}, {row}, 32, {lane}")
    em.ins(f"shr.u32 {col}, {warp}, 2")
    em.ins(f"mul.lo.s32 {col}, {col}, {N // groups}")
    return row, col, N // groups


def fragment_elems(em: Emitter, M: int, N: int, pitch: int = 0) -> tuple:
    """(register with this thread's base element index, [element offset of each wgmma fragment
    register]) in the row-major M x N tile (rows ``pitch`` elements apart: default N). Register
    (instance q, index 4 j + 2 h + s) holds row 64 (nq wg + q) + 16 (w % 4) + 8 h + g, column
    8 j + 2 t + s (nq instances per warp group; g = lane / 4, t = lane % 4)."""
    nq = M // (16 * em.num_warps)
    pitch = pitch or N
    r0, g, t = fragment_thread(em, M)
    th = em.new("b32")
    em.ins(f"mad.lo.s32 {th}, {r0}, {pitch}, 0")
    em.ins(f"mad.lo.s32 {th}, {t}, 2, {th}")
    offs = [
        (64 * q + 8 * h) * pitch + 8 * j + s
        for q in range(nq)
        for j in range(N // 8)
        for h in range(2)
        for s in range(2)
    ]
    return th, offs


def _fragment_addrs(em: Emitter, M: int, N: int):
    """Per wgmma fragment register: (address register, byte offset) of its element in the
    row-major M x N f32 scratch tile (see :func:`fragment_elems`)."""
    th, offs = fragment_elems(em, M, N)
    addr = em.smem_addr(th, 4)
    return [(addr, 4 * e) for e in offs]


def to_fragment(em: Emitter, op, t, init, M: int, N: int, acc_int: bool = False) -> list:
    """The loop's initial accumulator (any layout) -> this thread's wgmma fragment registers
    (f32, or b32 for an i32 accumulator). A uniform tile (every register the same, as a splat
    of the usual zero is) is moved straight into the fragment, without the exchange."""
    from tilegen.runtime.codegen.exchange import row_major

    cls = "b32" if acc_int else "f32"
    count = M // (16 * em.num_warps) * (N // 8) * 4  # as _fragment_addrs lists them
    if init and all(r == init[0] for r in init):
        return [em.mov(cls, init[0]) for _ in range(count)]
    if getattr(em, "fragment_order", {}).get(op.operands[3], ())[:3] == ("wgmma", M, N):
        assert len(init) == count, (len(init), count)  # C loaded in fragment order
        return list(init) if len(set(init)) == count else [em.mov(cls, r) for r in init]
    scratch_from_start(em, M * N * 4)
    d = em.dist_of(op, t)
    form = row_major((M, N))
    for k in range(d.nregs):
        em.ins(f"st.shared.{cls} {em.smem_ref(d, form, k, 4)}, {init[k]}")
    em.barrier()
    acc = []
    where = _fragment_addrs(em, M, N)
    for i in range(0, len(where), 2):  # (s = 0, 1): two neighbouring columns, 8-byte aligned
        addr, off = where[i]
        pair = [em.new(cls), em.new(cls)]
        em.ins(f"ld.shared.v2.{cls} {{{pair[0]}, {pair[1]}}}, [{addr}+{off}]")
        acc += pair
    em.barrier()
    return acc


def from_fragment(em: Emitter, op, t, acc: list, M: int, N: int, acc_int: bool = False) -> list:
    """This thread's fragment registers -> the loop result in the layout the layout stage gave
    it (through the scratch buffer)."""

    cls = "b32" if acc_int else "f32"
    scratch_from_start(em, M * N * 4)
    where = _fragment_addrs(em, M, N)
    for i in range(0, len(where), 2):  # (s = 0, 1): two neighbouring columns, 8-byte aligned
        addr, off = where[i]
        em.ins(f"st.shared.v2.{cls} [{addr}+{off}], {{{acc[i]}, {acc[i + 1]}}}")
    em.barrier()
    return scratch_to_layout(em, op, t, cls, M, N)
