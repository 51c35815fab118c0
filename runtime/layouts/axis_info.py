"""What a pointer-tile access provably allows: per dim of an integer or pointer tile, its
*contiguity* (it splits into runs of that many elements, each rising by one), *divisibility* (the
largest power of two dividing each run's first element: bytes for pointers) and *constancy*
(runs of that many equal elements) - Triton's AxisInfo, over the ops cuTile's gathers and
scatters are built from (``splat``, ``make_range``, ``broadcast``, unit-dim ``view``,
``addi`` / ``subi`` / ``muli``, extensions, ``addptr``, comparisons and boolean ops).

:func:`analyze_pointer_access` turns that into the vector width of an ``nv_tileaa.load`` /
``store`` / ``gather_load`` / ``scatter_store`` through a pointer tile: the widest power of two
(at most 16 bytes) that runs contiguously, starts aligned and is masked uniformly. The layout
stage records it (``nv_tileas.vector_width``) and anchors the access with that many elements a
thread; code generation then issues one ``ld.global.v*`` / ``st.global.v*`` per run
(runtime/codegen/memory.element_access). Each value is analysed once (a per-function memo), so
the analysis is linear in the IR.
"""

from __future__ import annotations

from math import gcd
from typing import Optional

from tilegen.runtime.attributes import IntegerAttr
from tilegen.runtime.ir import Operation, OpResult, Value
from tilegen.runtime.layouts.access import (
    MAX_VECTOR_BYTES,
    AccessInfo,
    _pow2_floor,
    _pow2_part,
    divisibility,
    element_bytes,
)
from tilegen.runtime.types import NvPointerType, TileType

_CAP = 1 << 20
_EXT = ("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast")
#: comparisons uniform over a run [k, k + v) of the left side against a right side constant
#: over it, when v divides both k and the right side (and mirrored)
#: (arith.cmpi's predicate numbers: eq 0, ne 1, slt 2, sle 3, sgt 4, sge 5, ult 6, ule 7,
#: ugt 8, uge 9)
_LEFT_RUN = (2, 5, 6, 9)  # slt, sge, ult, uge
_RIGHT_RUN = (3, 4, 7, 8)  # sle, sgt, ule, ugt


class Axis:
    """Per-dim (contiguity, divisibility, constancy) of one value."""

    __slots__ = ("contig", "div", "const")

    def __init__(self, contig, div, const):
        self.contig, self.div, self.const = tuple(contig), tuple(div), tuple(const)

    def __repr__(self) -> str:
        return f"Axis(contig={self.contig}, div={self.div}, const={self.const})"


def _shape(v: Value) -> tuple:
    t = v.type
    return tuple(t.shape) if isinstance(t, TileType) else ()


def _unknown(shape) -> Axis:
    return Axis([1] * len(shape), [1] * len(shape), [1] * len(shape))


def _uniform(shape, div: int) -> Axis:
    return Axis([1] * len(shape), [min(div, _CAP)] * len(shape), list(shape))


def _constant_value(v: Value) -> Optional[int]:
    """The integer ``v`` holds everywhere (a constant, splat or broadcast of one), else None."""
    op = v.op if isinstance(v, OpResult) else None
    while op is not None and op.name in ("nv_tileaa.splat", "nv_tileaa.broadcast") + _EXT:
        v = op.operands[0]
        op = v.op if isinstance(v, OpResult) else None
    if op is not None and op.name == "arith.constant":
        a = op.attributes.get("value")
        if isinstance(a, IntegerAttr):
            return a.value
        values = getattr(a, "values", None)
        if getattr(a, "is_splat", False) and values and isinstance(values[0], int):
            return values[0]
    return None


class AxisInfo:
    """The analysis over one function (memoised per value)."""

    def __init__(self):
        self._memo: dict = {}

    def get(self, v: Value) -> Axis:
        key = id(v)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._compute(v)
        return hit

    def _compute(self, v: Value) -> Axis:
        shape = _shape(v)
        op = v.op if isinstance(v, OpResult) else None
        if not shape:  # a scalar: uniform, divisible as its facts say
            if isinstance(v.type, NvPointerType) or op is not None:
                return _uniform((), divisibility(v))
            return _uniform((), 1)
        if op is None:
            return _unknown(shape)
        name = op.name
        if name == "arith.constant":
            c = _constant_value(v)
            return _uniform(shape, _pow2_part(c)) if c is not None else _unknown(shape)
        if name == "nv_tileaa.splat":
            return _uniform(
                shape,
                (
                    self.get(op.operands[0]).div[0]
                    if _shape(op.operands[0])
                    else divisibility(op.operands[0])
                ),
            )
        if name == "nv_tileaa.make_range":
            start = op.attributes.get("start")
            s = start.value if isinstance(start, IntegerAttr) else None
            return Axis([shape[0]], [_pow2_part(s) if s is not None else 1], [1])
        if name == "nv_tileaa.broadcast":
            src = op.operands[0]
            a, ss = self.get(src), _shape(src)
            if len(ss) != len(shape):
                return _unknown(shape)
            return Axis(
                [1 if ss[d] == 1 and shape[d] > 1 else a.contig[d] for d in range(len(shape))],
                a.div,
                [shape[d] if ss[d] == 1 else a.const[d] for d in range(len(shape))],
            )
        if name in ("nv_tileaa.view", "nv_tileaa.expand_dims"):
            return self._view(op.operands[0], shape)
        if name in _EXT:
            a = self.get(op.operands[0])
            return a if len(a.contig) == len(shape) else _unknown(shape)
        if name in ("arith.addi", "arith.subi", "nv_tileaa.addptr"):
            return self._add(op, shape, name)
        if name == "arith.muli":
            return self._mul(op, shape)
        if name == "arith.cmpi":
            return self._cmp(op, shape)
        if name in ("arith.andi", "arith.ori", "arith.xori", "arith.select"):
            parts = [self.get(x) for x in op.operands]
            return Axis(
                [1] * len(shape),
                [1] * len(shape),
                [_gcds(p.const[d] for p in parts) for d in range(len(shape))],
            )
        return _unknown(shape)

    def _view(self, src: Value, shape) -> Axis:
        """A view that only inserts or removes unit dims keeps each remaining dim's facts."""
        ss = _shape(src)
        a = self.get(src)
        kept_src = [d for d in range(len(ss)) if ss[d] != 1]
        kept_res = [d for d in range(len(shape)) if shape[d] != 1]
        if [ss[d] for d in kept_src] != [shape[d] for d in kept_res]:
            return _unknown(shape)
        contig, div, const = [1] * len(shape), [1] * len(shape), list(shape)
        for s, r in zip(kept_src, kept_res):
            contig[r], div[r], const[r] = a.contig[s], a.div[s], a.const[s]
        # a unit dim: its one element's divisibility is any kept dim's (or the scalar's)
        unit_div = min(a.div) if a.div else 1
        for r in range(len(shape)):
            if shape[r] == 1:
                div[r] = unit_div
        return Axis(contig, div, const)

    def _add(self, op: Operation, shape, name: str) -> Axis:
        a, b = self.get(op.operands[0]), self.get(op.operands[1])
        scale = 1
        if name == "nv_tileaa.addptr":  # offsets count elements; divisibility counts bytes
            pt = op.operands[0].type
            pt = pt.element if isinstance(pt, TileType) else pt
            scale = element_bytes(getattr(pt, "pointee", None))
        n = len(shape)
        if len(a.contig) != n or len(b.contig) != n:
            return _unknown(shape)
        contig, div, const = [], [], []
        for d in range(n):
            if name == "arith.subi":
                contig.append(gcd(a.contig[d], b.const[d]))
            else:
                contig.append(max(gcd(a.contig[d], b.const[d]), gcd(a.const[d], b.contig[d])))
            div.append(min(gcd(a.div[d], b.div[d] * scale), _CAP))
            const.append(gcd(a.const[d], b.const[d]))
        return Axis(contig, div, const)

    def _mul(self, op: Operation, shape) -> Axis:
        x, y = op.operands[0], op.operands[1]
        a, b = self.get(x), self.get(y)
        n = len(shape)
        if len(a.contig) != n or len(b.contig) != n:
            return _unknown(shape)
        contig = [1] * n
        if _constant_value(y) == 1:
            contig = list(a.contig)
        elif _constant_value(x) == 1:
            contig = list(b.contig)
        return Axis(
            contig,
            [min(a.div[d] * b.div[d], _CAP) for d in range(n)],
            [gcd(a.const[d], b.const[d]) for d in range(n)],
        )

    def _cmp(self, op: Operation, shape) -> Axis:
        a, b = self.get(op.operands[0]), self.get(op.operands[1])
        n = len(shape)
        if len(a.contig) != n or len(b.contig) != n:
            return _unknown(shape)
        pred = op.attributes.get("predicate")
        p = pred.value if isinstance(pred, IntegerAttr) else None
        const = []
        for d in range(n):
            k = gcd(a.const[d], b.const[d])
            div = gcd(a.div[d], b.div[d])
            if p in _LEFT_RUN and b.const[d] > 1:
                k = max(k, gcd(gcd(a.contig[d], b.const[d]), div))
            if p in _RIGHT_RUN and a.const[d] > 1:
                k = max(k, gcd(gcd(b.contig[d], a.const[d]), div))
            const.append(k)
        return Axis([1] * n, [1] * n, const)


def _gcds(xs) -> int:
    out = 0
    for x in xs:
        out = gcd(out, x)
    return out or 1


def analyze_pointer_access(op: Operation, info: AxisInfo) -> Optional[AccessInfo]:
    """Order and vector width of a load / store / gather / scatter through a pointer tile
    (None: through a memref, or not a tile)."""
    od = op.opdef
    base = od.operand_group(op, "base")[0]
    bt = base.type
    if not isinstance(bt, TileType) or not isinstance(bt.element, NvPointerType):
        return None
    loading = op.name in ("nv_tileaa.load", "nv_tileaa.gather_load")
    t = op.results[0].type if loading else od.operand_group(op, "value")[0].type
    if not isinstance(t, TileType) or t.rank == 0 or tuple(t.shape) != tuple(bt.shape):
        return None
    ptr = info.get(base)
    ebytes = element_bytes(bt.element.pointee)
    indices = od.operand_group(op, "indices")
    if indices:  # pointer plus element offsets: as addptr
        off = info.get(indices[0])
        if len(off.contig) != t.rank:
            return None
        ptr = Axis(
            [
                max(gcd(p, ok), gcd(pk, o))
                for p, ok, pk, o in zip(ptr.contig, off.const, ptr.const, off.contig)
            ],
            [min(gcd(p, o * ebytes), _CAP) for p, o in zip(ptr.div, off.div)],
            [gcd(p, o) for p, o in zip(ptr.const, off.const)],
        )
    # the dim that runs longest (the last one on a tie) goes first
    cd = max(range(t.rank), key=lambda d: (ptr.contig[d], d))
    rest = tuple(d for d in reversed(range(t.rank)) if d != cd)
    order = (cd,) + rest
    limits = {
        "16 bytes": MAX_VECTOR_BYTES // ebytes,
        "tile extent": t.shape[cd],
        "contiguity": ptr.contig[cd],
        "alignment": max(1, ptr.div[cd] // ebytes),
    }
    if getattr(t.element, "width", 8) < 8 or ebytes > 8:
        limits["element width"] = 1  # i1 / sub-byte tiles move one element at a time
    mask = od.operand_group(op, "mask")
    if mask:
        limits["mask"] = info.get(mask[0]).const[cd] if _shape(mask[0]) else t.shape[cd]
    vec = _pow2_floor(min(limits.values()))
    return AccessInfo(op, order, vec, limits)


__all__ = ["Axis", "AxisInfo", "analyze_pointer_access"]
