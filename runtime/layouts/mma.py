"""Tensor-core layouts of the nv_tileas stage (docs/tensor_cores.md).

* :class:`MmaLayout` -- the accumulator / result layout of ``mma.sync`` (version 2): the CTA's
  warps form a ``warps_per_cta`` = (wm, wn) grid (warp id = wi_m * wn + wi_n); each warp computes
  ``instr_shape`` = (m, n) blocks, m16n8 (f16/bf16/tf32/8-bit/fp8) or m8n8 (f64). The CTA tile
  (m * wm, n * wn) is repeated over larger tiles (more registers) and wraps over smaller ones.
* :class:`DotOperandLayout` -- the A (``op_idx`` 0, M x K) or B (``op_idx`` 1, K x N) operand
  of a dot whose result has layout ``parent``. ``k_width`` consecutive K elements share one
  32-bit register: 2 for f16/bf16, 4 for s8/u8/e4m3/e5m2, 1 for tf32 and f64; the instruction's
  K is ``8 * k_width`` for m16n8 (16, 32, 8) and 4 for m8n8 f64. A is replicated over the
  warps along N, B over the warps along M.

Register numbering (what ``element_of(tid, reg, shape)`` enumerates), with ``slots`` the
fragment elements of one instruction in PTX order (register by register, lowest bits first):

* result:   reg = (rm * reps_n + rn) * slots + slot  (slots: 4 for m16n8, 2 for m8n8)
* A:        reg = (rm * reps_k + rk) * slots + slot  (slots: 4 * k_width, 1 for f64)
* B:        reg = (rn * reps_k + rk) * slots + slot  (slots: 2 * k_width, 1 for f64)

so instruction (rm, rn, rk) of a tile dot reads A registers ``a.instr_regs(rm, rk, shape)``,
B registers ``b.instr_regs(rn, rk, shape)`` and accumulates into
``acc.instr_regs(rm, rn, shape)``; consecutive groups of ``k_width`` A/B registers (and pairs
of f16 accumulator registers) are packed into one PTX register, first element in the low bits.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from tilegen.runtime.layouts.attrs import (
    WARP_SIZE,
    DistributedLayout,
    LayoutError,
    SharedLayout,
    _pow2,
)
from tilegen.runtime.records import dataclass

INSTR_SHAPES = ((16, 8), (8, 8))


def _lane(lane: int) -> tuple[int, int]:
    return lane >> 2, lane & 3  # groupID, threadID_in_group


def acc_slot(instr: tuple[int, int], lane: int, slot: int) -> tuple[int, int]:
    """(row, col) in the m x n result block of accumulator fragment element ``slot``."""
    g, t = _lane(lane)
    if instr[0] == 8:
        return g, 2 * t + slot
    return g + 8 * (slot >> 1), 2 * t + (slot & 1)


def a_slot(instr: tuple[int, int], k_width: int, lane: int, slot: int) -> tuple[int, int]:
    """(row, col) in the m x k A block of A fragment element ``slot``."""
    g, t = _lane(lane)
    if instr[0] == 8:
        return g, t
    r, i = divmod(slot, k_width)
    return g + 8 * (r & 1), k_width * t + (r >> 1) * 4 * k_width + i


def b_slot(instr: tuple[int, int], k_width: int, lane: int, slot: int) -> tuple[int, int]:
    """(row, col) in the k x n B block of B fragment element ``slot``."""
    g, t = _lane(lane)
    if instr[0] == 8:
        return t, g
    r, i = divmod(slot, k_width)
    return k_width * t + r * 4 * k_width + i, g


def _check_tid_reg(layout: DistributedLayout, tid: int, reg: int, nregs: int) -> None:
    if not 0 <= tid < layout.num_threads():
        raise LayoutError(f"thread id {tid} out of range [0, {layout.num_threads()})")
    if not 0 <= reg < nregs:
        raise LayoutError(f"register index {reg} out of range [0, {nregs})")


class _Owners:
    """``owners`` by inverting ``element_of`` (cached per shape)."""

    def owners(self, coord: tuple[int, ...], shape: tuple[int, ...]) -> list[tuple[int, int]]:
        table = _inverse(self, tuple(shape))
        if len(coord) != 2 or not all(0 <= c < s for c, s in zip(coord, shape)):
            raise LayoutError(f"coordinate {tuple(coord)} outside tile {tuple(shape)}")
        return list(table.get(tuple(coord), []))


@lru_cache(maxsize=64)
def _inverse(layout, shape: tuple[int, ...]) -> dict:
    out: dict = {}
    for tid in range(layout.num_threads()):
        for reg in range(layout.regs_per_thread(shape)):
            out.setdefault(layout.element_of(tid, reg, shape), []).append((tid, reg))
    return out


@dataclass(frozen=True)
class MmaLayout(_Owners, DistributedLayout):
    version: int
    warps_per_cta: tuple[int, int]
    instr_shape: tuple[int, int] = (16, 8)

    def __post_init__(self):
        err = self.validate()
        if err:
            raise LayoutError(err)

    def validate(self) -> Optional[str]:
        if self.version != 2:
            return f"mma layout version {self.version} is not supported (only 2: mma.sync)"
        if tuple(self.instr_shape) not in INSTR_SHAPES:
            return f"mma layout instrShape {list(self.instr_shape)} must be [16, 8] or [8, 8]"
        if len(self.warps_per_cta) != 2 or not all(_pow2(w) for w in self.warps_per_cta):
            return (
                f"mma layout warpsPerCTA must be two powers of two, got {list(self.warps_per_cta)}"
            )
        return None

    rank = 2

    @property
    def num_warps(self) -> int:
        return self.warps_per_cta[0] * self.warps_per_cta[1]

    def num_threads(self) -> int:
        return WARP_SIZE * self.num_warps

    def cta_tile(self) -> tuple[int, int]:
        return (
            self.instr_shape[0] * self.warps_per_cta[0],
            self.instr_shape[1] * self.warps_per_cta[1],
        )

    def slots(self) -> int:
        """Accumulator elements per thread per instruction (4 for m16n8, 2 for m8n8)."""
        return self.instr_shape[0] * self.instr_shape[1] // WARP_SIZE

    def reps(self, shape: tuple[int, ...]) -> tuple[int, int]:
        cta = self.cta_tile()
        return max(1, shape[0] // cta[0]), max(1, shape[1] // cta[1])

    def regs_per_thread(self, shape: tuple[int, ...]) -> int:
        rm, rn = self.reps(shape)
        return rm * rn * self.slots()

    def warp_coords(self, tid: int) -> tuple[int, int]:
        return divmod(tid // WARP_SIZE, self.warps_per_cta[1])

    def element_of(self, tid: int, reg: int, shape: tuple[int, ...]) -> tuple[int, ...]:
        _check_tid_reg(self, tid, reg, self.regs_per_thread(shape))
        rm_n, rn_n = self.reps(shape)
        inst, slot = divmod(reg, self.slots())
        rm, rn = divmod(inst, rn_n)
        wm, wn = self.warp_coords(tid)
        r, c = acc_slot(self.instr_shape, tid % WARP_SIZE, slot)
        cta = self.cta_tile()
        row = rm * cta[0] + wm * self.instr_shape[0] + r
        col = rn * cta[1] + wn * self.instr_shape[1] + c
        return row % shape[0], col % shape[1]

    def instr_regs(self, rm: int, rn: int, shape: tuple[int, ...]) -> list[int]:
        """Registers (in PTX fragment order) of result instruction block (rm, rn)."""
        _, rn_n = self.reps(shape)
        base = (rm * rn_n + rn) * self.slots()
        return list(range(base, base + self.slots()))

    def format_asm(self) -> str:
        w, i = self.warps_per_cta, self.instr_shape
        return (
            f"#nv_tileas.mma<{{versionMajor = {self.version}, warpsPerCTA = [{w[0]}, {w[1]}], "
            f"instrShape = [{i[0]}, {i[1]}]}}>"
        )


@dataclass(frozen=True)
class DotOperandLayout(_Owners, DistributedLayout):
    op_idx: int
    parent: MmaLayout
    k_width: int

    def __post_init__(self):
        if self.op_idx not in (0, 1):
            raise LayoutError(f"dot operand opIdx must be 0 (A) or 1 (B), got {self.op_idx}")
        if not isinstance(self.parent, MmaLayout):
            raise LayoutError("dot operand parent must be an mma layout")
        allowed = (1,) if self.parent.instr_shape[0] == 8 else (1, 2, 4)
        if self.k_width not in allowed:
            raise LayoutError(
                f"dot operand kWidth {self.k_width} not in {list(allowed)} for instrShape "
                f"{list(self.parent.instr_shape)}"
            )

    rank = 2

    def num_threads(self) -> int:
        return self.parent.num_threads()

    @property
    def instr_k(self) -> int:
        return 4 if self.parent.instr_shape[0] == 8 else 8 * self.k_width

    def block(self) -> tuple[int, int]:
        """The operand block one instruction reads: (m, k) for A, (k, n) for B."""
        m, n = self.parent.instr_shape
        return (m, self.instr_k) if self.op_idx == 0 else (self.instr_k, n)

    def slots(self) -> int:
        b = self.block()
        return b[0] * b[1] // WARP_SIZE

    def reps(self, shape: tuple[int, ...]) -> tuple[int, int]:
        """(repetitions along the non-K dim, along K)."""
        cta = self.parent.cta_tile()
        if self.op_idx == 0:
            return max(1, shape[0] // cta[0]), max(1, shape[1] // self.instr_k)
        return max(1, shape[1] // cta[1]), max(1, shape[0] // self.instr_k)

    def regs_per_thread(self, shape: tuple[int, ...]) -> int:
        r, k = self.reps(shape)
        return r * k * self.slots()

    def element_of(self, tid: int, reg: int, shape: tuple[int, ...]) -> tuple[int, ...]:
        _check_tid_reg(self, tid, reg, self.regs_per_thread(shape))
        _, rk_n = self.reps(shape)
        inst, slot = divmod(reg, self.slots())
        ro, rk = divmod(inst, rk_n)
        wm, wn = self.parent.warp_coords(tid)
        lane = tid % WARP_SIZE
        m, n = self.parent.instr_shape
        cta = self.parent.cta_tile()
        if self.op_idx == 0:
            r, c = a_slot(self.parent.instr_shape, self.k_width, lane, slot)
            row, col = ro * cta[0] + wm * m + r, rk * self.instr_k + c
        else:
            r, c = b_slot(self.parent.instr_shape, self.k_width, lane, slot)
            row, col = rk * self.instr_k + r, ro * cta[1] + wn * n + c
        return row % shape[0], col % shape[1]

    def instr_regs(self, r_outer: int, rk: int, shape: tuple[int, ...]) -> list[int]:
        """Registers (in PTX fragment order) of operand block (rm or rn, rk); groups of
        ``k_width`` consecutive ones pack into one 32-bit PTX register (f64: one each)."""
        _, rk_n = self.reps(shape)
        base = (r_outer * rk_n + rk) * self.slots()
        return list(range(base, base + self.slots()))

    def format_asm(self) -> str:
        return (
            f"#nv_tileas.dot_op<{{opIdx = {self.op_idx}, parent = {self.parent.format_asm()}, "
            f"kWidth = {self.k_width}}}>"
        )


def k_width_for(elem_bits: int) -> int:
    """Elements of one operand type per 32-bit register (f64: 1)."""
    if elem_bits not in (8, 16, 32, 64):
        raise LayoutError(f"no mma operand packing for {elem_bits}-bit elements")
    return max(1, 32 // elem_bits)


def ldmatrix_shared_layout(
    elem_bits: int, shape: tuple[int, int], order: tuple[int, int] = (1, 0)
) -> SharedLayout:
    """A bank-conflict-free swizzled shared layout for staging an mma operand tile that is
    read back with ldmatrix (8 rows x 16 bytes per 8x8 matrix, rows along ``order[1]``).

    XOR-swizzles 16-byte chunks of each contiguous row (``vec`` = 16 bytes of elements) so that
    the 8 rows of any 8x8 matrix fall into the 8 distinct 16-byte bank groups of a 128-byte
    line: ``per_phase`` rows share a 128-byte line, ``max_phase`` distinct phases cycle."""
    if elem_bits not in (8, 16, 32, 64):
        raise LayoutError(f"no ldmatrix staging layout for {elem_bits}-bit elements")
    if len(shape) != 2 or not all(_pow2(d) for d in shape):
        raise LayoutError(f"staging tile shape {list(shape)} must be two powers of two")
    if sorted(order) != [0, 1]:
        raise LayoutError(f"order must be a permutation of [0, 1], got {list(order)}")
    elem_bytes = elem_bits // 8
    row_bytes = shape[order[0]] * elem_bytes
    vec = max(1, 16 // elem_bytes)
    per_phase = max(1, 128 // row_bytes)
    chunks = max(1, row_bytes // 16)  # 16-byte chunks per row
    max_phase = max(1, min(8 // per_phase, chunks))
    return SharedLayout(vec, per_phase, max_phase, tuple(order))
