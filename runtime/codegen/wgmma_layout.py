"""How a dot runs on ``wgmma.mma_async`` (:class:`WgmmaPlan`: instruction, warpgroups, N
chunks) and the no-swizzle shared-memory layouts its descriptors read: A K-major with its rows
permuted (:func:`wgmma_a_fields`), B N-major (:func:`nmajor_layout`, also tcgen05's).
"""

from __future__ import annotations

from tilegen.runtime.records import dataclass

from tilegen.runtime.codegen.core import ELEMENTS, elem_key, fail
from tilegen.runtime.codegen.mma_rows import C_CLASS
from tilegen.runtime.layouts.decisions import mma_family
from tilegen.runtime.layouts.mma_choice import (
    LBO,  # byte distance between core matrices adjacent along K (the descriptor's LBO)
    signedness,
    wgmma_instruction,
    wgmma_sbo,
)
from tilegen.runtime.layouts.mma_select import MmaSelectError, select_mma

#: trailing immediates of wgmma per A element type (imm-scale-a/b, imm-trans-a/b)
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


#: N-major B (16-bit elements, ``imm-trans-b`` = 1): the no-swizzle MN-major canonical layout,
#: core matrices of 8 K-rows x 16 bytes (8 N elements), 128 contiguous bytes each; 8-column
#: groups along N at SBO = 144 bytes (16 of padding: a warp's cp.async chunks of 4 rows x 8
#: groups land on distinct banks), 8-row groups along K at LBO = N / 8 * 144 (PTX ISA "Leading /
#: Stride Dimension Byte Offset", MN-major interleave). Global rows (K) copy into it as they are,
#: so B = K x N row-major (attention's K^T tile and V) is staged by cp.async, no transpose.
NM_SBO = 144


def nmajor_lbo(N: int, esz: int = 2) -> int:
    """LBO of N-major B: the distance between 8-row groups of K, ``N / (16 / esz)`` column
    groups :data:`NM_SBO` bytes apart."""
    return N // (16 // esz) * NM_SBO


def nmajor_layout(K: int, N: int, esz: int = 2):
    """(row fields, column fields, bytes) of N-major B for ``mma_staging.staged_layout``: 16
    bytes of N (8 16-bit, 16 8-bit elements) a core-matrix row (tcgen05 reads 8-bit B so
    too)."""
    lbo = nmajor_lbo(N, esz)
    nb = 4 - (esz.bit_length() - 1)  # bits of n within a core-matrix row
    return ((0, 3, 16), (3, None, lbo)), ((0, nb, esz), (nb, None, NM_SBO)), K // 8 * lbo


def wgmma_a_fields(K: int, esz: int, G: int) -> tuple:
    """(A's row fields, K fields) of ``wgmma_dot.wgmma_dot``'s K-major A layout (rows permuted,
    see there)."""
    sbo = wgmma_sbo(K, esz)
    lg = G.bit_length() - 1
    kb = 4 - (esz.bit_length() - 1)  # bits of k within a 16-byte core-matrix row
    kf = ((0, kb, esz), (kb, None, LBO))
    a_rows = (
        (0, 3, 16),
        (3, 2, 2 * sbo),
        (5, lg, 8 * sbo),
        (5 + lg, 1, sbo),
        (6 + lg, None, 8 * G * sbo),
    )
    return a_rows, kf
