"""What a global access provably allows: divisibility of index values and the vector width of
a ``tiled_load`` / ``tiled_store`` through a memref (docs/layouts.md, "Anchors").

The layout stage (runtime/passes/layout_assignment.py) runs this analysis once per access and
records its answer on the op (``nv_tileas.vector_width``, runtime/layouts/decisions.py); code
generation reads the recorded width.
"""

from __future__ import annotations

from math import gcd
from typing import Optional

from tilegen.runtime.attributes import DenseArrayAttr, DivByAttr, IntegerAttr
from tilegen.runtime.ir import Operation, OpResult, Value
from tilegen.runtime.types import DYNAMIC, FloatType, IntegerType, NvMemRefType, TileType

MAX_VECTOR_BYTES = 16
_DIV_CAP = 1 << 20


def _is_tile(t) -> bool:
    return isinstance(t, TileType) and t.rank >= 1


def _pow2_part(n: int) -> int:
    if n == 0:
        return _DIV_CAP
    n = abs(n)
    return min(n & -n, _DIV_CAP)


def divisibility(v: Value, depth: int = 0) -> int:
    """The largest power of two known to divide integer/pointer value ``v`` (1 if unknown)."""
    op = v.op if isinstance(v, OpResult) else None
    if op is None or depth > 32:
        return 1
    name = op.name
    if name == "arith.constant":
        a = op.attributes.get("value")
        return _pow2_part(a.value) if isinstance(a, IntegerAttr) else 1
    if name in ("nv_tileaa.assume", "cuda_tile.assume"):
        pred = op.attributes.get("predicate")
        inner = divisibility(op.operands[0], depth + 1)
        if isinstance(pred, DivByAttr) and pred.every is None:
            return max(inner, _pow2_part(pred.divisor))
        return inner
    if name == "arith.muli":
        d = divisibility(op.operands[0], depth + 1) * divisibility(op.operands[1], depth + 1)
        return min(d, _DIV_CAP)
    if name in ("arith.addi", "arith.subi"):
        return gcd(divisibility(op.operands[0], depth + 1), divisibility(op.operands[1], depth + 1))
    if name in ("arith.extsi", "arith.extui", "arith.index_cast", "arith.trunci"):
        return divisibility(op.operands[0], depth + 1)
    return 1


def element_bytes(t) -> int:
    """Bytes of one element of scalar type ``t`` (pointers: 8)."""
    if isinstance(t, (IntegerType, FloatType)):
        return max(1, t.width // 8)
    return 8  # pointers


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


class AccessInfo:
    """Why an access got its vector width (for reports and tests)."""

    def __init__(self, op: Operation, order: tuple[int, ...], vec: int, limits: dict):
        self.op, self.order, self.vec, self.limits = op, order, vec, limits

    def __repr__(self) -> str:
        return f"AccessInfo({self.op.name}, order={self.order}, vec={self.vec}, {self.limits})"


def analyze_memref_access(op: Operation) -> Optional[AccessInfo]:
    """Order and vector width of a ``tiled_load``/``tiled_store`` through a memref."""
    od = op.opdef
    base = od.operand_group(op, "base")[0]
    mtype = base.type
    if not isinstance(mtype, NvMemRefType):
        return None
    tile = op.results[0].type if op.name == "nv_tileaa.tiled_load" else None
    if tile is None:
        tile = od.operand_group(op, "value")[0].type
    if not _is_tile(tile) or tile.rank != mtype.rank:
        return None
    strides = mtype.stride_values
    unit = [d for d in range(mtype.rank) if strides[d] == 1]
    if not unit:
        order = tuple(reversed(range(tile.rank)))
        return AccessInfo(op, order, 1, {"no unit-stride dim": 1})
    cd = unit[-1]
    rest = sorted(
        (d for d in range(tile.rank) if d != cd),
        key=lambda d: (-(strides[d] if strides[d] != DYNAMIC else _DIV_CAP), -d),
    )
    order = (cd,) + tuple(rest)
    ebytes = element_bytes(mtype.element)
    limits = {"16 bytes": MAX_VECTOR_BYTES // ebytes, "tile extent": tile.shape[cd]}
    mk = base.op if isinstance(base, OpResult) else None
    if mk is None or mk.name != "nv_tileaa.make_memref":
        limits["unknown memref origin"] = 1
    else:
        mod = mk.opdef
        ptr_align = divisibility(mod.operand_group(mk, "base")[0])
        limits["base alignment"] = max(1, ptr_align // ebytes)
        offset = mod.operand_group(mk, "offset")
        if offset:
            limits["memref offset"] = divisibility(offset[0])
        dyn_strides = iter(mod.operand_group(mk, "strides"))
        dyn_sizes = iter(mod.operand_group(mk, "sizes"))
        sizes = {}
        for d in range(mtype.rank):
            sizes[d] = mtype.shape[d] if mtype.shape[d] != DYNAMIC else next(dyn_sizes, None)
        for d in range(mtype.rank):
            s = strides[d] if mtype.strides else DYNAMIC
            if s == DYNAMIC:
                sv = next(dyn_strides, None)
                div = divisibility(sv) if sv is not None else 1
            else:
                div = _pow2_part(s)
            if d != cd:
                limits[f"stride of dim {d}"] = div
        in_bounds = op.attributes.get("in_bounds")
        masked = True
        if isinstance(in_bounds, DenseArrayAttr) and len(in_bounds.values) > cd:
            masked = not in_bounds.values[cd]
        if masked:
            size = sizes[cd]
            limits["extent of dim %d" % cd] = (
                _pow2_part(size) if isinstance(size, int) else divisibility(size) if size else 1
            )
    indices = od.operand_group(op, "indices")
    if len(indices) > cd:
        limits["start index"] = divisibility(indices[cd])
    if od.operand_group(op, "mask"):
        limits["mask"] = 1
    vec = _pow2_floor(min(limits.values()))
    return AccessInfo(op, order, vec, limits)
