"""A from registers in sm_90a's async consumers: an A the IR converts f32 -> tf32
(docs/pipelines.md section 55).

The stage holds A as TMA copied it (f32, K-major column boxes, swizzled). Rounding it in place
reads and writes the whole tile once more before the wgmmas read it again. Here each warp reads
its own 16 rows of each m64 instance with ``ldmatrix.x4`` (b16 matrices of 8 rows x 16 bytes:
four 32-bit values a row), which leaves lane ``4 g + t`` holding exactly the wgmma tf32 A
fragment of one k8 step: (row g, col t), (g + 8, t), (g, t + 4), (g + 8, t + 4). The values
are converted in the registers and handed to ``wgmma ... {a0, a1, a2, a3}, b-desc``.

wgmma reads A's registers asynchronously: they may not be written until a ``wait_group``
retires the wgmma. The consumer keeps one stage's wgmmas in flight while it issues the next
(``wait_group 1``), so the loop is emitted twice over, each copy loading into its own set of
registers (:func:`fits` checks that two sets fit beside the accumulator).
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import Emitter
from tilegen.runtime.codegen.tma import swizzled_reg

#: registers the consumer's loop needs beside the accumulator and A's fragments (addresses,
#: the ring, the B^T copy's values)
_SLACK = 40


def fits(nq: int, K: int, acc_regs: int, budget: int) -> bool:
    """Whether two stages' A fragments (``nq`` m64 instances x ``K / 8`` steps x 4 registers
    each) fit in a consumer thread's ``budget`` beside ``acc_regs`` accumulator registers."""
    return 2 * nq * (K // 8) * 4 + acc_regs + _SLACK <= budget


class RegisterA:
    """The per-lane ``ldmatrix`` addresses of A's stage (loop-invariant, computed once) and the
    loads of one stage's fragments."""

    def __init__(self, em: Emitter, a, nq: int, groups: int, cvt: str) -> None:
        self.a, self.nq, self.cvt = a, nq, cvt
        K = a.tile[-1]
        self.steps = K * a.esz // 32  # k8 steps of 32 bytes
        self.per_box = min(self.steps, a.span // 32)  # k8 steps in one column box row
        _, lane, warp = em.tid()
        # lane 8 i + j gives row j of matrix i: rows 16 (warp % 4) + j + 8 (i % 2) of the
        # warp group's m64 instance, 16-byte chunk i / 2 of the k8 step
        row, h, t = em.new("b32"), em.new("b32"), em.new("b32")
        em.ins(f"and.b32 {row}, {lane}, 7")
        em.ins(f"shr.u32 {t}, {lane}, 3")
        em.ins(f"and.b32 {t}, {t}, 1")
        em.ins(f"mad.lo.s32 {row}, {t}, 8, {row}")
        em.ins(f"and.b32 {t}, {warp}, 3")
        em.ins(f"mad.lo.s32 {row}, {t}, 16, {row}")
        em.ins(f"shr.u32 {h}, {lane}, 4")
        lin = em.new("b32")  # row * span + 16 h: the step's logical offset, less 32 kk
        em.ins(f"shl.b32 {lin}, {h}, 4")
        em.ins(f"mad.lo.s32 {lin}, {row}, {a.span}, {lin}")
        wgoff = None
        if groups > 1:  # this warp group's rows: 64 nq (warp / 4) on
            wgoff = em.new("b32")
            em.ins(f"shr.u32 {wgoff}, {warp}, 2")
            em.ins(f"mul.lo.s32 {wgoff}, {wgoff}, {64 * nq * a.span}")
        # step kk of a box row is 32 kk bytes on: 16-byte chunk 2 kk + h, swizzled to
        # (2 kk + h) ^ x = 2 kk ^ (h ^ x), i.e. step 0's offset XOR 32 kk (every other term of
        # the address is a multiple of 128); one register holds step 0's, for the whole loop
        off = swizzled_reg(em, lin, a.span)
        self.off0 = em.new("b32")
        em.ins(f"add.s32 {self.off0}, {off}, {a.offset}")
        if wgoff is not None:
            em.ins(f"add.s32 {self.off0}, {self.off0}, {wgoff}")

    def load(self, em: Emitter, sbase: str) -> dict:
        """{(m64 instance q, k8 step s): four b32 registers}: the stage at ``sbase``'s A
        fragments, converted."""
        a = self.a
        first = em.new("b32")
        em.ins(f"add.s32 {first}, {sbase}, {self.off0}")
        addrs = [first]
        for kk in range(1, self.per_box):
            r = em.new("b32")
            em.ins(f"xor.b32 {r}, {first}, {32 * kk}")
            addrs.append(r)
        out = {}
        for s in range(self.steps):
            box, kk = divmod(s, self.per_box)
            for q in range(self.nq):
                imm = box * a.box_bytes + q * 64 * a.span
                regs = [em.new("b32") for _ in range(4)]
                at = f"{addrs[kk]}+{imm}" if imm else addrs[kk]
                em.ins(f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(regs)}}}, [{at}]")
                for r in regs:
                    em.ins(f"{self.cvt} {r}, {r}")
                out[(q, s)] = regs
        return out
