"""A converted outside the stage in the async consumers: an A the IR converts f32 -> tf32 goes
to the MMA from registers on sm_90a (:class:`RegisterA`) and from tensor memory on sm_100a
(:class:`TmemA`) (docs/pipelines.md section 55).

The stage holds A as TMA copied it (f32, K-major column boxes, swizzled). Rounding it in place
reads and writes the whole tile once more before the wgmmas read it again. Here each warp reads
its own 16 rows of each m64 instance with ``ldmatrix.x4`` (b16 matrices of 8 rows x 16 bytes:
four 32-bit values a row), which leaves lane ``4 g + t`` holding exactly the wgmma tf32 A
fragment of one k8 step: (row g, col t), (g + 8, t), (g, t + 4), (g + 8, t + 4). The values
are converted in the registers and handed to ``wgmma ... {a0, a1, a2, a3}, b-desc``.

wgmma reads A's registers asynchronously: they may not be written until a ``wait_group``
retires the wgmma. Each 128-byte column box of A (four k8 steps) is loaded, multiplied and
committed as a wgmma group of its own, followed by ``wait_group 1``: the registers a group loads
were last read by the group two back, which that wait retired. Where a stage is one box, the
loop is emitted twice over so that the two copies' groups alternate (:func:`fits` checks that
two boxes' fragments fit beside the accumulator).
"""

from __future__ import annotations

from tilegen.runtime.codegen import tcgen05
from tilegen.runtime.codegen.core import Emitter
from tilegen.runtime.codegen.pipeline import mbarrier_wait
from tilegen.runtime.codegen.tma import swizzled_reg

#: tensor memory columns of an SM, shared by its CTAs
TMEM_COLUMNS = 512

#: registers the consumer's loop needs beside the accumulator and A's fragments (addresses,
#: the ring, the B^T copy's values)
_SLACK = 40


def fits(nq: int, K: int, acc_regs: int, budget: int) -> bool:
    """Whether two column boxes' A fragments (``nq`` m64 instances x up to 4 k8 steps x 4
    registers each) fit in a consumer thread's ``budget`` beside ``acc_regs`` accumulator
    registers (f32 A: a 128-byte box is 32 columns)."""
    return 2 * nq * min(K // 8, 4) * 4 + acc_regs + _SLACK <= budget


class RegisterA:
    """The per-lane ``ldmatrix`` addresses of A's stage (loop-invariant, computed once) and the
    loads of one stage's fragments."""

    def __init__(self, em: Emitter, a, nq: int, groups: int, cvt: str) -> None:
        self.a, self.nq, self.cvt = a, nq, cvt
        K = a.tile[-1]
        self.steps = K * a.esz // 32  # k8 steps of 32 bytes
        self.per_box = min(self.steps, a.span // 32)  # k8 steps in one column box row
        self.groups = self.steps // self.per_box  # column boxes: a wgmma group each
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

    def addresses(self, em: Emitter, sbase: str) -> list:
        """Each k8 step's lane address within a box row of the stage at ``sbase``."""
        first = em.new("b32")
        em.ins(f"add.s32 {first}, {sbase}, {self.off0}")
        addrs = [first]
        for kk in range(1, self.per_box):
            r = em.new("b32")
            em.ins(f"xor.b32 {r}, {first}, {32 * kk}")
            addrs.append(r)
        return addrs

    def load(self, em: Emitter, addrs: list, box: int) -> dict:
        """{(m64 instance q, k8 step s): four b32 registers}: column box ``box``'s A fragments
        (steps ``s`` of the whole tile), converted."""
        a = self.a
        out = {}
        for kk in range(self.per_box):
            s = box * self.per_box + kk
            for q in range(self.nq):
                imm = box * a.box_bytes + q * 64 * a.span
                regs = [em.new("b32") for _ in range(4)]
                at = f"{addrs[kk]}+{imm}" if imm else addrs[kk]
                em.ins(f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(regs)}}}, [{at}]")
                for r in regs:
                    em.ins(f"{self.cvt} {r}, {r}")
                out[(q, s)] = regs
        return out


def tmem_a_columns(em: Emitter, a, M: int, N: int, pair: bool, scaled: bool, occ: int) -> int:
    """The tensor memory columns of one buffer of A (its K) where sm_100a's consumers write an A
    the IR converts into tensor memory, else 0. It applies to an M 128 tile on 4 warps (thread
    ``t`` holds row ``t``, TMEM lane ``t``) or on 8 (the wide form: warp groups ``h`` 0 and 1
    each store half of every row, thread ``t`` row ``t % 128``), A staged in 128-byte swizzled
    column boxes, K a power of two up to 128 (one ``tcgen05.st`` shape), and two buffers
    beside the accumulator within the SM's columns at ``occ`` CTAs an SM. A 256-row tile on 8
    warps (two accumulators, ``async_tcgen05._tall_stage``) keeps both halves of its rows in
    each buffer: thread ``t`` stores row ``t``, lane ``t % 128``, at column ``K (t / 128)`` of
    it. Pairs and the scaled accumulate keep A in the stage."""
    K = a.tile[-1]
    tall = M == 256 and em.num_warps == 8  # (two accumulators: A's rows in two halves)
    if pair or scaled or a.esz != 4 or a.span != 128:
        return 0
    if not tall and (M != 128 or em.num_warps not in (4, 8)):
        return 0
    used = 2 * N + 4 * K if tall else N + 2 * K
    if K & (K - 1) or K > 128 or tcgen05.columns(used) * occ > TMEM_COLUMNS:
        return 0
    return K


class TmemA:
    """sm_100a: A in two tensor memory buffers (columns ``N + j K``, beside the accumulator),
    written by the consumers in turn. Each thread reads its row (on 8 warps, warp group
    ``h``'s half of it: chunks ``4 h ..`` of a single box, else boxes ``h K / 64 ..``) of the
    stage's A with
    ``ld.shared.v4`` (16-byte chunk ``c`` of a 128-byte box row ``t`` is chunk ``c ^ t % 8``:
    eight rows a phase, conflict-free), converts it and stores it by ``tcgen05.st.32x32b``
    into its own TMEM lane. Buffer ``j``'s mbarrier (count 1, pre-arrived once) completes a
    phase when the MMAs that last read the buffer complete (the issuer's ``tcgen05.commit``);
    the consumers wait for it before storing."""

    def __init__(self, em: Emitter, a, N: int, cvt: str, tall: bool = False) -> None:
        self.a, self.N, self.cvt, self.tall = a, N, cvt, tall
        self.K = a.tile[-1]
        # (8 warps, M 128: each warp group stores half of a row; M 256: a row each)
        self.halves = 1 if tall else em.num_warps // 4
        tid, _, warp = em.tid()
        row = tid
        if tall:  # warp group h: rows 128 h .., in lanes 32 (w % 4) .. at column K h
            h, quarter = em.new("b32"), em.new("b32")
            em.ins(f"shr.u32 {h}, {tid}, 7")
            em.ins(f"and.b32 {quarter}, {warp}, 3")
            self.lanes_tall = em.new("b32")
            em.ins(f"shl.b32 {self.lanes_tall}, {quarter}, 21")
            em.ins(f"mad.lo.s32 {self.lanes_tall}, {h}, {self.K}, {self.lanes_tall}")
        if self.halves > 1:
            row = em.new("b32")
            em.ins(f"and.b32 {row}, {tid}, 127")
        off = em.new("b32")  # row t's chunk 0: 128 t + 16 (t % 8), in A's first box
        em.ins(f"and.b32 {off}, {row}, 7")
        em.ins(f"shl.b32 {off}, {off}, 4")
        em.ins(f"mad.lo.s32 {off}, {row}, 128, {off}")
        if a.offset:
            em.ins(f"add.s32 {off}, {off}, {a.offset}")
        self.lanes = em.new("b32")  # the warp's TMEM lanes 32 (w % 4) ..: (32 w) << 16
        if self.halves > 1:
            # warp group h: chunks 4 h .. of a single box (x16 at column 16 h), else boxes
            # h K / 64 .. (whole)
            h, quarter = em.new("b32"), em.new("b32")
            em.ins(f"shr.u32 {h}, {tid}, 7")
            em.ins(f"and.b32 {quarter}, {warp}, 3")
            em.ins(f"shl.b32 {self.lanes}, {quarter}, 21")
            if self.K == 32:
                em.ins(f"mad.lo.s32 {self.lanes}, {h}, 16, {self.lanes}")
                x = em.new("b32")
                em.ins(f"shl.b32 {x}, {h}, 6")
                em.ins(f"xor.b32 {off}, {off}, {x}")
            else:
                boxes = self.K // 64
                em.ins(f"mad.lo.s32 {self.lanes}, {h}, {32 * boxes}, {self.lanes}")
                em.ins(f"mad.lo.s32 {off}, {h}, {boxes * a.box_bytes}, {off}")
        elif tall:
            em.ins(f"mov.b32 {self.lanes}, {self.lanes_tall}")
        else:
            em.ins(f"shl.b32 {self.lanes}, {warp}, 21")
        self.off0 = off
        self.phase = [em.mov("b32", "0") for _ in range(2)]

    def column(self, j: int) -> int:
        """Buffer ``j``'s first column (after the two accumulators of a 256-row tile, whose
        buffers hold both halves of its rows)."""
        if self.tall:
            return 2 * self.N + 2 * j * self.K
        return self.N + j * self.K

    def store(self, em: Emitter, sbase: str, taddr: str, j: int, bar: str) -> None:
        """Every consumer thread: its row of the stage at ``sbase``'s A, converted, into buffer
        ``j`` once buffer ``j``'s barrier (at ``bar``) completed the phase due, box by box."""
        a = self.a
        first = em.new("b32")
        em.ins(f"add.s32 {first}, {sbase}, {self.off0}")
        # a thread's chunks of a box: 8, or 4 where two warp groups share a single box
        chunks = 4 if self.halves > 1 and self.K == 32 else 8
        boxes = self.K // 32 // (self.halves if self.K > 32 else 1)
        addrs = [first]  # chunk c: the stage's low 10 bits are 0, so (row's chunk 0) ^ 16 c
        for c in range(1, chunks):
            r = em.new("b32")
            em.ins(f"xor.b32 {r}, {first}, {16 * c}")
            addrs.append(r)
        dst = em.new("b32")
        em.ins(f"add.s32 {dst}, {taddr}, {self.lanes}")
        for box in range(boxes):
            regs = []
            for c in range(chunks):
                four = [em.new("b32") for _ in range(4)]
                imm = box * a.box_bytes
                at = f"{addrs[c]}+{imm}" if imm else addrs[c]
                em.ins(f"ld.shared.v4.b32 {{{', '.join(four)}}}, [{at}]")
                regs += four
            for r in regs:
                em.ins(f"{self.cvt} {r}, {r}")
            if box == 0:  # the MMAs that read buffer j two stages back are done
                mbarrier_wait(em, bar, self.phase[j])
                em.ins(f"xor.b32 {self.phase[j]}, {self.phase[j]}, 1")
            at = em.new("b32")
            em.ins(f"add.s32 {at}, {dst}, {self.column(j) + 32 * box}")
            shape = f"32x32b.x{len(regs)}"
            em.ins(f"tcgen05.st.sync.aligned.{shape}.b32 [{at}], {{{', '.join(regs)}}}")
        em.ins("tcgen05.wait::st.sync.aligned")
