"""Which instruction family runs a ``dot`` and the accumulator layout that follows from it.

The layout stage decides once per dot (``nv_tileas.mma``, runtime/layouts/decisions.py):

* ``wgmma`` on sm_90 when :func:`wgmma_instruction` finds a form (f16/bf16/tf32/s8/fp8 with
  f32/s32 accumulators, num_warps a multiple of 4, M a multiple of 64 per warpgroup, N of 8, K
  of the instruction K, A and B within the shared budget) and wgmma is allowed;
* ``tcgen05`` on sm_100/sm_103/sm_110 when :func:`tcgen05_instruction` finds a form (f16/bf16
  with an f32 accumulator, M 64 or 128 with 4 or 8 warps or M 256 with 8, N a power of two up
  to 256, K a multiple of 16, A and B within the shared budget) and tcgen05 is allowed;
* else what spec/ptx/mma.yaml selects (runtime/layouts/mma_select.py): ``mma.sync`` or ``fma``.

The accumulator (C and the result) then gets the blocked layout that *is* the instruction's
fragment: :func:`wgmma_accumulator_layout` or :func:`mma_sync_accumulator_layout`
(docs/tensor_cores.md), or for tcgen05 :func:`tcgen05_accumulator_layout`, the rows the warps
read from tensor memory. Code generation reads the recorded family and builds its plan.
"""

from __future__ import annotations

import re
from typing import Optional

from tilegen.runtime.layouts.attrs import BlockedLayout
from tilegen.runtime.layouts.mma_select import MmaRow, MmaSelectError, select_mma
from tilegen.runtime.types import FloatType, IntegerType, NvPointerType, STORAGE_WIDTHS, TileType

#: bytes of static shared memory per CTA the dot paths may use
SMEM_LIMIT = 48 * 1024
#: a tcgen05 dot's A and B in the scratch (K-major, both written where neither is staged):
#: sm_100a's static shared memory goes to 227 KB; this leaves room for a K-loop ring beside
#: them (attention's 128 x 128 head-dim-128 dots: 64 KB; at 256 rows, 108 KB: its A is the
#: kept Q or P in tensor memory, codegen/tcgen05_dot.py, and a kernel over the budget is
#: caught once emitted)
TCGEN05_OPERANDS_LIMIT = 108 * 1024
#: a wgmma dot's A and B in the K-major scratch (today's path; the async path reads them from
#: its TMA stages instead): wgmma needs sm_90a, whose static shared memory goes past 48 KB,
#: up to half the SM's so that two CTAs still fit (codegen/control.pipeline_smem_cap)
WGMMA_SCRATCH = 113 * 1024
#: wgmma's leading-byte offset: a core matrix plus 16 bytes of padding, so that a warp storing
#: one row's K elements (lanes along K) spreads its core matrices over different banks
LBO = 144

WGMMA = "wgmma"
TCGEN05 = "tcgen05"
MMA_SYNC = "mma.sync"
FMA = "fma"


def element_key(t) -> Optional[str]:
    """'f32', 'i8', 'ptr', ... for an element (or scalar, or tile) type."""
    if isinstance(t, TileType):
        t = t.element
    if isinstance(t, FloatType):
        return t.name
    if isinstance(t, IntegerType):
        return f"i{t.width}"
    if isinstance(t, NvPointerType):
        return "ptr"
    return None


def key_bytes(key: str) -> int:
    """Storage bytes of an element key ('tf32' is stored in 4)."""
    if key == "ptr":
        return 8
    if key.startswith("i"):
        return max(1, int(key[1:]) // 8)
    return max(1, STORAGE_WIDTHS[key] // 8)


def wgmma_sbo(K: int, esz: int) -> int:
    """Byte distance between 8-row groups of a K-major operand (the descriptor's SBO): the
    group's K / (16 / esz) core matrices, LBO apart."""
    return K * esz // 16 * LBO


def signedness(op) -> Optional[tuple[bool, bool]]:
    if element_key(op.operands[0].type) != "i8":
        return None
    sa, sb = op.attributes.get("signedness_a"), op.attributes.get("signedness_b")
    return (sa is None or sa.value == 0, sb is None or sb.value == 0)  # 0 = signed


def wgmma_instruction(op, num_warps: int, sm: Optional[int]) -> Optional[tuple[MmaRow, int]]:
    """(spec/ptx/mma.yaml row, instruction K) when ``dot`` ``op`` can run on
    ``wgmma.mma_async`` on ``sm`` with ``num_warps``, else None."""
    if sm != 90 or op.name != "nv_tileaa.dot" or len(op.operands) != 3:
        return None
    a, b, c = (v.type for v in op.operands)
    if any(getattr(t, "rank", 0) != 2 for t in (a, b, c)):
        return None
    ka, kb, kc = element_key(a), element_key(b), element_key(c)
    if kc not in ("f32", "i32") or ka is None or kb is None:
        return None
    try:
        row = select_mma(ka, kb, kc, 90, signed=signedness(op), family="wgmma")
    except MmaSelectError:
        return None
    m = re.fullmatch(r"m64nNk(\d+)", row.shape)
    if m is None or num_warps % 4 or num_warps < 4:
        return None
    tk, groups = int(m.group(1)), num_warps // 4
    M, K = a.shape
    N = b.shape[1]
    esz = key_bytes(ka)
    if M % (64 * groups) or N % 8 or K % tk or tk * esz != 32:
        return None
    if (M + N) // 8 * wgmma_sbo(K, esz) > WGMMA_SCRATCH:
        return None
    return row, tk


#: targets whose dots may run on tcgen05 (cta_group::1, accumulator in tensor memory)
TCGEN05_SMS = (100, 103, 110)


def tcgen05_instruction(op, num_warps: int, sm: Optional[int]) -> Optional[MmaRow]:
    """The spec/ptx/mma.yaml tcgen05 row when ``dot`` ``op`` can run on ``tcgen05.mma`` as a
    dot of its own (runtime/codegen/tcgen05_dot.py) on ``sm`` with ``num_warps``, else None:
    the element types of spec/ptx/mma.yaml's tcgen05 rows (kind::f16, tf32, f8f6f4, i8); M 128 (TMEM lane = row) with 4 warps (a row each) or 8 (two column
    halves), M 256 with 8 warps (two M 128 MMAs a K step, the second's rows N columns further;
    warps 4-7 read them), or M 64 with 4 or 8 warps (half a row a thread); N a power of two
    from 32 per column part (16 at M 64) to 256, K a multiple of one MMA's K (32 bytes), A and
    B within the shared budget."""
    if sm not in TCGEN05_SMS or op.name != "nv_tileaa.dot" or len(op.operands) != 3:
        return None
    a, b, c = (v.type for v in op.operands)
    if any(getattr(t, "rank", 0) != 2 for t in (a, b, c)):
        return None
    ka, kb, kc = element_key(a), element_key(b), element_key(c)
    if ka is None or kb != ka or kc is None or num_warps not in (4, 8):
        return None
    try:
        row = select_mma(ka, kb, kc, sm, signed=signedness(op), family="tcgen05")
    except MmaSelectError:
        return None
    M, K = a.shape
    N = b.shape[1]
    esz = key_bytes(ka)
    tk = 32 // esz  # one MMA's K: 16 f16, 8 tf32, 32 8-bit
    if M == 256 and num_warps != 8:
        return None
    if M == 64:  # a row in lanes 0-15 of each warp's quarter: two threads a row
        if K % tk or N & (N - 1) or not 16 * num_warps // 4 <= N <= 256:
            return None
    else:
        halves = num_warps // 4 // (M // 128) if M in (128, 256) else 0
        if not halves or K % tk or N & (N - 1) or not 32 * halves <= N <= 256:
            return None
    if (M + N) // 8 * wgmma_sbo(K, esz) > TCGEN05_OPERANDS_LIMIT:
        return None
    return row


def tcgen05_accumulator_layout(num_warps: int, n: int, m: int = 128) -> BlockedLayout:
    """The rows of a tcgen05 accumulator as the warps read them (``tcgen05.ld .32x32b``): warp
    w may read TMEM lanes 32 (w % 4) ..; with M 128, thread (lane, w) holds row 32 (w % 4) +
    lane, columns n / h (w / 4) .. of the h = num_warps / 4 column parts; with M 256 (8
    warps), row 32 w + lane, all n columns (rows 128 .. are the second MMA's, n TMEM columns
    further); with M 64 (rows 16 w .. in lanes 32 (w % 4) .. 32 (w % 4) + 15), thread (lane, w)
    holds row 16 (w % 4) + lane % 16 and the half lane / 16 of the warp's columns (``16x32bx2``).
    With M 128 and 256 a row's reductions stay in one thread (a softmax's max and sum)."""
    h = num_warps // 4
    if m == 256:
        return BlockedLayout((1, n), (32, 1), (8, 1), (0, 1))
    if m == 64:  # tcgen05.ld.16x32bx2: lanes t % 16, the halves t / 16 of the warp's columns
        return BlockedLayout((1, n // (2 * h)), (16, 2), (4, h), (0, 1))
    return BlockedLayout((1, n // h), (32, 1), (4, h), (0, 1))


def choose_dot_family(
    op, num_warps: int, sm: Optional[int], wgmma: bool = True, tcgen05: bool = True
) -> Optional[str]:
    """``wgmma``, ``tcgen05``, ``mma.sync`` or ``fma`` for ``dot`` ``op``; None when
    spec/ptx/mma.yaml has no instruction for its types on ``sm`` (code generation reports
    tileiras's diagnostic)."""
    if op.name != "nv_tileaa.dot" or len(op.operands) < 3:
        return None
    if wgmma and wgmma_instruction(op, num_warps, sm) is not None:
        return WGMMA
    if tcgen05 and tcgen05_instruction(op, num_warps, sm) is not None:
        return TCGEN05
    keys = [element_key(v.type) for v in op.operands[:3]]
    if sm is None or None in keys:
        return None
    try:
        row = select_mma(*keys, sm, signed=signedness(op))
    except MmaSelectError:
        return None
    return row.family


def wgmma_accumulator_layout(num_warps: int) -> BlockedLayout:
    """The blocked layout that is the ``wgmma`` m64nN accumulator fragment once codegen permutes
    the rows of A in shared memory (docs/tensor_cores.md): thread (lane, warp) holds rows
    8 warp + g (+ 8 num_warps r) and column pairs 8 j + 2t, 2t + 1."""
    return BlockedLayout((1, 2), (8, 4), (num_warps, 1), (1, 0))


def mma_sync_accumulator_layout(op, num_warps: int) -> Optional[BlockedLayout]:
    """The blocked layout that *is* the ``mma.sync`` accumulator fragment layout for ``dot``
    ``op`` (rows g and g + 8 of each 16-row MMA tile in registers, column pairs 2t, 2t + 1 per
    lane, warps side by side along N), or None when the shape does not fit it (the dot then
    stages its accumulator through shared memory)."""
    if op is None or op.name != "nv_tileaa.dot" or len(op.operands) < 3:
        return None
    c = op.operands[2].type
    if not isinstance(c, TileType) or c.rank != 2:
        return None
    m, n = c.shape
    rows = 8 if isinstance(c.element, FloatType) and c.element.name == "f64" else 16
    if m % rows or n % (8 * num_warps):
        return None
    return BlockedLayout((1, 2), (8, 4), (1, num_warps), (1, 0))


def mma_sync_rows_fragment(num_warps: int) -> BlockedLayout:
    """The layout :func:`mma_sync_rows_layout` gives (code generation's test of it)."""
    return BlockedLayout((1, 2), (8, 4), (num_warps, 1), (1, 0))


def mma_sync_rows_layout(op, num_warps: int) -> Optional[BlockedLayout]:
    """The mma.sync accumulator with the warps *stacked along M* (FlashAttention-2's split),
    for a dot of an attention chain (:func:`in_dot_chain`), or None where it does not apply:
    thread (lane, warp) holds rows 8 warp + g + 8 num_warps r and column pairs 8 j + 2t,
    2t + 1 - the blocked layout of :func:`wgmma_accumulator_layout`. Code generation pairs
    logical rows r = 2 i and 2 i + 1 of a warp as the rows g and g + 8 of its MMA tile i (A's
    rows read in that order), so each warp owns whole rows: the row reductions stay in the
    warp, and P, the softmax's output in this layout, is the next dot's A fragment in
    registers (codegen/mma.py ``_mma_sync_staged``). f16 / bf16 into f32, M a multiple of 16
    warps."""
    if op is None or op.name != "nv_tileaa.dot" or len(op.operands) != 3:
        return None
    a, b, c = (v.type for v in op.operands)
    if not all(isinstance(t, TileType) and t.rank == 2 for t in (a, b, c)):
        return None
    keys = (element_key(a), element_key(b), element_key(c))
    if keys[0] not in ("f16", "bf16") or keys[1] != keys[0] or keys[2] != "f32":
        return None
    (m, k), n = a.shape, b.shape[1]
    if m % (16 * num_warps) or n % 8 or k % 16 or not in_dot_chain(op):
        return None
    return mma_sync_rows_fragment(num_warps)


def _same_shape_elementwise(op, shape) -> bool:
    from tilegen.runtime.layouts.async_forms import elementwise

    t = op.results[0].type if len(op.results) == 1 else None
    return (
        isinstance(t, TileType)
        and tuple(t.shape) == tuple(shape)
        and (elementwise(op) or (op.dialect in ("arith", "math") and not op.regions))
    )


def _reaches_a(v, depth: int = 0) -> bool:
    """``v`` reaches a dot's A operand through same-shape elementwise ops."""
    for user, i in v.uses:
        if user.name == "nv_tileaa.dot" and i == 0:
            return True
        if depth < 12 and _same_shape_elementwise(user, v.type.shape):
            if _reaches_a(user.results[0], depth + 1):
                return True
    return False


def _from_dot(v, depth: int = 0) -> bool:
    """``v`` is a dot's result through same-shape elementwise ops."""
    op = getattr(v, "op", None)
    if op is None:
        return False
    if op.name == "nv_tileaa.dot":
        return True
    if depth >= 12 or not _same_shape_elementwise(op, v.type.shape):
        return False
    return any(
        isinstance(o.type, TileType) and o.type.shape == v.type.shape and _from_dot(o, depth + 1)
        for o in op.operands
    )


def in_dot_chain(op) -> bool:
    """Whether dot ``op`` is one of attention's chain: its result reaches another dot's A
    (``Q K^T`` -> softmax -> ``P V``), or its A is another dot's result."""
    return _reaches_a(op.results[0]) or _from_dot(op.operands[0])


def accumulator_layout(op, num_warps: int, family: Optional[str]) -> Optional[BlockedLayout]:
    """The accumulator layout of ``dot`` ``op`` running on ``family``: the wgmma fragment, else
    the mma.sync fragment where the shape fits it (fma dots too: their accumulator is read and
    written in that layout), else None (C keeps its layout and is staged through shared
    memory)."""
    if op is None or op.name != "nv_tileaa.dot":
        return None
    if family == WGMMA:
        return wgmma_accumulator_layout(num_warps)
    if family == TCGEN05:
        m, n = op.operands[2].type.shape
        return tcgen05_accumulator_layout(num_warps, n, m)
    if family == MMA_SYNC:
        rows = mma_sync_rows_layout(op, num_warps)
        if rows is not None:
            return rows
    return mma_sync_accumulator_layout(op, num_warps)
