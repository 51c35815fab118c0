"""Masks that are all true in most iterations: a causal mask ``select(rows >= cols, s, -inf)``
in an attention loop keeps every element except near the diagonal (docs/pipelines.md section
17). :func:`maskable` finds the ``select``s of a loop body whose condition compares two integer
tiles built from ``make_range``, splats, broadcasts, views, ``addi``/``subi`` and
multiplication by a constant; :func:`all_true` emits, per iteration, one uniform predicate:
every element of that comparison holds. The body is then emitted twice (async_overlap.py): as
written, and with each such ``select`` replaced by its true operand, taken when the predicate
holds.

The bounds are computed in 64 bits, and the predicate also requires every intermediate bound
to fit in 32 bits, where the tile's own i32 arithmetic then cannot have wrapped: a kernel
whose indices overflow keeps the masked copy."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.codegen.core import Emitter

#: arith.cmpi predicates handled: slt, sle, sgt, sge (MLIR's numbering)
_SLT, _SLE, _SGT, _SGE = 2, 3, 4, 5
_SHAPES = ("nv_tileaa.broadcast", "nv_tileaa.view", "nv_tileaa.expand_dims", "nv_tileaa.reshape")
_I32 = (-(2**31), 2**31 - 1)


def _op(v):
    return getattr(v, "op", None)


def _tile(v) -> bool:
    return bool(getattr(v.type, "rank", 0))


def _int_tile(v) -> bool:
    el = getattr(getattr(v, "type", None), "element", None)
    return getattr(el, "width", None) == 32 and type(el).__name__ == "IntegerType"


def _constant(v) -> Optional[int]:
    """An integer constant scalar, or a splat of one."""
    op = _op(v)
    if op is not None and op.name == "nv_tileaa.splat":
        return _constant(op.operands[0])
    if op is not None and op.name == "arith.constant":
        value = op.attributes.get("value")
        x = getattr(value, "value", None)
        if isinstance(x, int) and not isinstance(x, bool):
            return x
    return None


def _understood(v, depth: int = 0) -> bool:
    """Whether :func:`_bounds` can bound integer tile (or scalar) ``v``."""
    if depth > 16:
        return False
    if not _tile(v):
        return True  # a scalar: its register is its bound
    op = _op(v)
    if op is None:
        return False
    if op.name == "nv_tileaa.make_range":
        return True
    if op.name == "nv_tileaa.splat":
        return not _tile(op.operands[0])
    if op.name in _SHAPES:
        return _understood(op.operands[0], depth + 1)
    if op.name in ("arith.addi", "arith.subi"):
        return all(_understood(x, depth + 1) for x in op.operands[:2])
    if op.name == "arith.muli":
        a, b = op.operands[:2]
        return (_constant(b) is not None and _understood(a, depth + 1)) or (
            _constant(a) is not None and _understood(b, depth + 1)
        )
    return False


def maskable(ops) -> list:
    """The ``arith.select``s of ``ops`` whose condition :func:`all_true` can decide."""
    out = []
    for op in ops:
        if op.name != "arith.select" or not _tile(op.results[0]):
            continue
        cond = _op(op.operands[0])
        if cond is None or cond.name != "arith.cmpi":
            continue
        pred = getattr(cond.attributes.get("predicate"), "value", None)
        a, b = cond.operands[:2]
        if pred in (_SLT, _SLE, _SGT, _SGE) and _int_tile(a) and _int_tile(b):
            if _understood(a) and _understood(b):
                out.append(op)
    return out


class _Bounds:
    """Emits 64-bit bounds of integer tiles and collects the 'fits in i32' checks."""

    def __init__(self, em: Emitter, scalar):
        self.em, self.scalar = em, scalar
        self.checks: list = []

    def wide(self, x):
        if isinstance(x, int):
            return x
        em = self.em
        r = em.new("b64")
        em.ins(f"cvt.s64.s32 {r}, {x}")
        return r

    def op2(self, kind: str, x, y):
        if isinstance(x, int) and isinstance(y, int):
            return {"add": x + y, "sub": x - y, "mul": x * y}[kind]
        em = self.em
        r = em.new("b64")
        em.ins(f"{kind}.{'lo.' if kind == 'mul' else ''}s64 {r}, {x}, {y}")
        return r

    def fits(self, lo, hi) -> None:
        """``lo`` >= i32 min and ``hi`` <= i32 max (a static failure: no fast copy)."""
        for x, bound, cmp in ((lo, _I32[0], "ge"), (hi, _I32[1], "le")):
            if isinstance(x, int):
                if not (x >= bound if cmp == "ge" else x <= bound):
                    self.checks.append(False)
                continue
            p = self.em.new("pred")
            self.em.ins(f"setp.{cmp}.s64 {p}, {x}, {bound}")
            self.checks.append(p)

    def of(self, v) -> tuple:
        if not _tile(v):
            x = self.wide(self.scalar(v))
            return x, x
        op = _op(v)
        if op.name == "nv_tileaa.make_range":
            lo, hi = op.attributes["start"].value, op.attributes["end"].value - 1
            return lo, hi
        if op.name == "nv_tileaa.splat":
            x = self.wide(self.scalar(op.operands[0]))
            return x, x
        if op.name in _SHAPES:
            return self.of(op.operands[0])
        a, b = op.operands[:2]
        if op.name == "arith.muli":
            c, t = (_constant(b), a) if _constant(b) is not None else (_constant(a), b)
            lo, hi = self.of(t)
            lo, hi = self.op2("mul", lo, c), self.op2("mul", hi, c)
            lo, hi = (lo, hi) if c >= 0 else (hi, lo)
        else:
            (alo, ahi), (blo, bhi) = self.of(a), self.of(b)
            if op.name == "arith.addi":
                lo, hi = self.op2("add", alo, blo), self.op2("add", ahi, bhi)
            else:
                lo, hi = self.op2("sub", alo, bhi), self.op2("sub", ahi, blo)
        self.fits(lo, hi)
        return lo, hi


def all_true(em: Emitter, selects: list, scalar) -> Optional[str]:
    """A uniform predicate register: in this iteration every element of every condition of
    ``selects`` (from :func:`maskable`) is true; None where a bound is statically out of
    range. ``scalar(v)``: the register (or int) of scalar ``v``, emitting what it needs."""
    b = _Bounds(em, scalar)
    terms = []
    for sel in selects:
        cond = _op(sel.operands[0])
        pred = cond.attributes["predicate"].value
        (alo, ahi), (blo, bhi) = b.of(cond.operands[0]), b.of(cond.operands[1])
        # every a op b: sge min a >= max b, sgt min a > max b, sle max a <= min b, ...
        x, y, cmp = {
            _SGE: (alo, bhi, "ge"),
            _SGT: (alo, bhi, "gt"),
            _SLE: (ahi, blo, "le"),
            _SLT: (ahi, blo, "lt"),
        }[pred]
        terms.append((x, y, cmp))
    if any(c is False for c in b.checks):
        return None
    out = em.new("pred")
    em.ins(f"setp.eq.u32 {out}, 0, 0")
    for x, y, cmp in terms:
        if isinstance(x, int) and isinstance(y, int):
            if not {"ge": x >= y, "gt": x > y, "le": x <= y, "lt": x < y}[cmp]:
                return None
            continue
        if isinstance(x, int):  # an immediate goes second: flip the comparison
            x, y, cmp = y, x, {"ge": "le", "gt": "lt", "le": "ge", "lt": "gt"}[cmp]
        p = em.new("pred")
        em.ins(f"setp.{cmp}.s64 {p}, {x}, {y}")
        em.ins(f"and.pred {out}, {out}, {p}")
    for p in b.checks:
        em.ins(f"and.pred {out}, {out}, {p}")
    return out
