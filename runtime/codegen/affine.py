"""Registers known to be another register plus a constant (docs/codegen.md "Affine registers").

A tile's registers differ by constants where they come from ``make_range`` (a thread's base
coordinate plus the register's offset in the layout), and stay so through ``addi``/``subi`` with
a value uniform over the tile, ``muli`` by a constant, a sign or zero extension of small values
and ``addptr`` of a uniform pointer. The emitter records that fact for each such register:
``(base register, constant, small)``, base None for a constant. Each register is still computed
(``add r, base, c``), so every other consumer reads it as before; a load or store through a
pointer with a fact addresses ``[base+c]`` instead, and ptxas drops the per-register adds and
keeps one 64-bit base where it kept a 64-bit address per element (a gather of a 1 x 8192 row:
128 address registers a thread, which spilled).

``small`` marks values known to lie in [0, 2^31) (a coordinate, below a tile's 2^24 elements,
plus a range's start or a constant below :data:`SMALL`): only they extend from 32 to 64 bits as
``extend(base) + c``; everything else is modular arithmetic, exact in any width.
"""

from __future__ import annotations

from typing import Optional

#: a fact: (base register or None for a constant, constant, small)
Fact = tuple

#: a constant or a range's start below this keeps a small coordinate below 2^31 (2^24 + 2^30)
SMALL = 1 << 30


def fact(em, x) -> Optional[Fact]:
    """The fact known for register (or immediate) ``x``, or None."""
    if isinstance(x, int):
        return (None, x, 0 <= x < SMALL)
    if isinstance(x, str):
        f = em.affine.get(x)
        if f is not None:
            return f
        if x.lstrip("-").isdigit():
            v = int(x)
            return (None, v, 0 <= v < SMALL)
    return None


def record(em, r: str, base: Optional[str], c: int, small: bool) -> None:
    if isinstance(r, str) and r.startswith("%"):
        em.affine[r] = (base, c, small)


def _uniform(regs: list) -> bool:
    return all(x == regs[0] for x in regs)


def _materialize(em, cls: str, base: Optional[str], c: int, small: bool) -> str:
    """A register holding ``base + c`` (``c`` when base is None), with its fact."""
    if base is None:
        r = em.mov(cls, c)
    elif c == 0:
        if base not in em.affine:
            record(em, base, base, 0, small)
        return base
    else:
        r = em.new(cls)
        em.ins(f"add.s{cls[1:]} {r}, {base}, {c}")
    record(em, r, base, c, small)
    return r


def _wrap(c: int, bits: int) -> int:
    """``c`` as a signed ``bits``-bit constant (the width's modular arithmetic)."""
    c &= (1 << bits) - 1
    return c - (1 << bits) if c >> (bits - 1) else c


_CLS = {32: "b32", 64: "b64"}


def elementwise(em, op, ins: list, akeys: list, rkey: str) -> Optional[list]:
    """The result registers of integer ``op`` over tiles ``ins`` computed from facts (one
    instruction for the base, one add per register), or None to emit it as usual."""
    name = op.name
    if name not in _OPS or rkey not in ("i32", "i64"):
        return None
    bits = int(rkey[1:])
    cls = _CLS[bits]
    if name in ("arith.extsi", "arith.extui"):
        if akeys[0] != "i32" or bits != 64:
            return None
        facts = [fact(em, x) for x in ins[0]]
        if any(f is None or not f[2] for f in facts):
            return None
        memo: dict = {}
        out = []
        for base, c, _ in facts:
            if base is not None and base not in memo:
                memo[base] = em.new("b64")
                em.ins(f"cvt.{'s' if name == 'arith.extsi' else 'u'}64.s32 {memo[base]}, {base}")
            out.append(_materialize(em, "b64", memo.get(base), c, True))
        return out
    if len(ins) != 2 or any(k != rkey for k in akeys):
        return None
    x, y = ins
    fx = [fact(em, r) for r in x]
    if name != "arith.subi" and any(f is None for f in fx):
        x, y = y, x  # the operand with facts first (add and mul commute)
        fx = [fact(em, r) for r in x]
    if any(f is None for f in fx):
        return None
    if name == "arith.muli":
        if not _uniform(y):
            return None
        fu = fact(em, y[0])
        if fu is None or fu[0] is not None:
            return None  # a runtime multiplier: the offsets would not be constants
        m = fu[1]
        memo: dict = {}
        out = []
        for base, c, _small in fx:
            if base is not None and base not in memo:
                memo[base] = em.new(cls)
                em.ins(f"mul.lo.s{bits} {memo[base]}, {base}, {m}")
            out.append(_materialize(em, cls, memo.get(base), _wrap(c * m, bits), False))
        return out
    # addi / subi: the other operand's register (or its own fact's base) joins the base; one
    # instruction per distinct pair of bases (a broadcast row offset: one per row)
    sign = -1 if name == "arith.subi" else 1
    memo = {}
    out = []
    for (bx, cx, _small), yk in zip(fx, y):
        fy = fact(em, yk)
        if fy is None:
            if not (isinstance(yk, str) and yk.startswith("%")):
                return None
            fy = (yk, 0, False)
        by, cy = fy[0], fy[1]
        if by is None:
            nb = bx
        elif bx is None and sign > 0:
            nb = by
        else:
            key = (bx, by)
            if key not in memo:
                r = em.new(cls)
                if bx is None:  # 0 - by
                    em.ins(f"neg.s{bits} {r}, {by}")
                else:
                    em.ins(f"{'add' if sign > 0 else 'sub'}.s{bits} {r}, {bx}, {by}")
                memo[key] = r
            nb = memo[key]
        out.append(_materialize(em, cls, nb, _wrap(cx + sign * cy, bits), False))
    return out


_OPS = frozenset({"arith.addi", "arith.subi", "arith.muli", "arith.extsi", "arith.extui"})


def addptr(em, ptrs: list, offs: list, esize: int) -> Optional[list]:
    """``addptr`` of a uniform pointer and 64-bit offsets with facts: one base pointer, one add
    per register (``[base+c]`` for the loads and stores that read them)."""
    if not _uniform(ptrs) or not isinstance(ptrs[0], str) or not ptrs[0].startswith("%"):
        return None
    facts = [fact(em, o) for o in offs]
    if any(f is None for f in facts):
        return None
    p = ptrs[0]
    memo: dict = {}
    out = []
    for base, c, _ in facts:
        if base is None:
            nb = p
        else:
            if base not in memo:
                memo[base] = em.new("b64")
                if esize == 1:
                    em.ins(f"add.s64 {memo[base]}, {p}, {base}")
                else:
                    em.ins(f"mad.lo.s64 {memo[base]}, {base}, {esize}, {p}")
            nb = memo[base]
        out.append(_materialize(em, "b64", nb, _wrap(c * esize, 64), False))
    return out


def address(em, p) -> Optional[str]:
    """``[base+c]`` for a pointer register with a fact (c a non-negative 32-bit immediate)."""
    f = fact(em, p) if isinstance(p, str) else None
    if f is None or f[0] is None or not 0 <= f[1] < (1 << 31):
        return None
    return f"[{f[0]}+{f[1]}]" if f[1] else f"[{f[0]}]"
