"""Per-lane shared-memory addresses of ``mma.sync`` fragments: in the scratch (``ld.shared`` or
``ldmatrix``), in cp.async-staged buffers, with the warps stacked along M, and in a TMA stage's
swizzled boxes (:class:`~tilegen.runtime.codegen.mma_staging.StagedBox`); the guards of a
padded dot's D stores.
"""

from __future__ import annotations

from tilegen.runtime.codegen.async_mma_sync import _key, b_offsets, bt_offsets
from tilegen.runtime.codegen.core import Emitter
from tilegen.runtime.codegen.mma_rows import ldmatrix
from tilegen.runtime.codegen.mma_staging import StagedBox


def lane_addresses(em, lane, warp, M, N, K, esz, csz, row, wn, use_ldm):
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


def staged_lane_offsets(em, lane, warp, row, wn, esz, pa, pbk, b_kn, use_ldm, ldm_b, pair_b):
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


def pad_guards(em: Emitter, lane, warp, row, wn: int, M0: int, N0: int, M: int, N: int):
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


def rows_lane_offset(em: Emitter, lane, warp, W: int, pa: int) -> str:
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


def box_lanes(em: Emitter, box: StagedBox, W: int, reps_n: int, every: bool = False) -> list:
    """Each lane's byte offsets into a dot's B :class:`StagedBox` for ``ldmatrix`` (hoisted:
    computed once, in the consumers' set-up; ``async_mma_sync``'s addressing): B^T (K-major),
    one per K step of a box; B N-major, one per group of 8 columns the warp reads."""
    key = ("mma-box-lanes", box.span, box.kmajor, box.box_bytes, W, reps_n, every)
    if key not in em._smem_refs:
        with em.hoisted():
            w = None
            if every:  # (each warp reads every column)
                w = em.new("b32")
                em.ins(f"mov.b32 {w}, 0")
            if box.kmajor:  # (one offset: box_ldmatrix steps through a box by XOR)
                em._smem_refs[key] = bt_offsets(em, box.span, w, 1 if every else W, False)
            else:
                rows = box.box_bytes // box.span
                em._smem_refs[key] = b_offsets(em, 1 if every else W, reps_n, rows, box.span, w)
    return em._smem_refs[key]


def box_a_lanes(em: Emitter, box: StagedBox, W: int, by_rows: bool) -> str:
    """Each lane's address in an mma.sync dot's A :class:`StagedBox` (rows in order, K-major,
    swizzled; async_kept.py) for ``ldmatrix.x4`` of K step 0 (hoisted): the warps stacked along
    M read rows ``8 w + l % 8 + 8 W ((l / 8) % 2)`` (``rows_lane_offset``'s rows), else every
    warp rows ``l % 16``; chunk ``l / 16`` of the step, swizzled by the row. Step ``j`` of a
    box is this address XOR ``32 j`` (:func:`box_a_step`): the row's start has no bits below
    the span, so the swizzled chunk's bits are the address's own. Tiles further down start
    16 W (16) rows on, which keeps each row's swizzle key. One register, as the kept rows'."""
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


def box_a_step(em: Emitter, at: str, j: int) -> str:
    """K step ``j`` of a K-major box from a lane's address of step 0 (:func:`box_a_lanes`,
    ``bt_offsets(steps=False)`` added to a 1024-aligned box): its chunk pair, swizzled."""
    if not j:
        return at
    r = em.new("b32")
    em.ins(f"xor.b32 {r}, {at}, {32 * j}")
    return r


def box_ldmatrix(
    em: Emitter, box: StagedBox, regs: list, refs: list, rb: int, s: int, n0: int, step: int
) -> None:
    """B's fragments of K step ``s`` (``step`` bytes of K) for the warps' column group ``rb``
    (columns from ``n0``; with 4 ``regs`` also group rb + 1's, lanes 16-31 addressing it) out
    of ``box``: rows n, K-major, by ``ldmatrix``; K rows, N-major, by ``ldmatrix .trans``.
    ``refs``: :func:`box_lanes` added to the box's address."""
    if box.kmajor:
        bx, j = divmod(s, box.span // step)
        off = bx * box.box_bytes + n0 * box.span
        at = box_a_step(em, refs[0], j)  # (the box is 1024-aligned: step j by XOR)
        em.ins(f"{ldmatrix(regs)} {{{', '.join(regs)}}}, [{at}+{off}]")
    else:
        em.ins(f"{ldmatrix(regs, True)} {{{', '.join(regs)}}}, [{refs[rb]}+{s * 16 * box.span}]")
