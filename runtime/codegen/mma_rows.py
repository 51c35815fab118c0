"""``mma.sync`` instruction forms: the rows (opcode and fragment geometry) per element types
and target, selected from spec/ptx/mma.yaml, and issuing them (8-bit floats unpacked into two
f16 MMAs where the target has no 8-bit-float ``mma.sync``); the ``ldmatrix`` opcode and the
tf32 conversion of fragment registers.
"""

from __future__ import annotations

from tilegen.runtime.records import dataclass

from tilegen.runtime.codegen.core import Emitter, fail
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


def ldmatrix(regs: list, trans: bool = False) -> str:
    """The ``ldmatrix .m8n8 .b16`` opcode reading ``len(regs)`` matrices."""
    return f"ldmatrix.sync.aligned.m8n8.x{len(regs)}{'.trans' if trans else ''}.shared.b16"


def converted_regs(em: Emitter, regs: list, cvt: str) -> list:
    """Fragment registers through conversion instruction ``cvt``
    (``selection.conversion_ptx``), in new b32 registers."""
    out = []
    for r in regs:
        n = em.new("b32")
        em.ins(f"{cvt} {n}, {r}")
        out.append(n)
    return out
