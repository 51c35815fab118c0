"""Structured control flow: ``scf.for``, ``scf.if``, ``scf.while`` (and ``ub.poison``).

Conditions and bounds are CTA-uniform scalars (the frontend only branches on scalars), so a
plain ``@p bra`` keeps every thread together and ``bar.sync`` / ``shfl.sync`` inside a body stay
legal. Loop-carried values and ``if`` results live in fresh registers (a tile: one per layout
register; tokens: nothing); the yielded values are copied in at the end of each body, as a
parallel copy (a yield may permute the carried registers). Thread-invariant setup the emitter
caches (bases, coordinates) is hoisted to the kernel entry by core, so it is defined on every path.
"""

from __future__ import annotations

import re

from tilegen.runtime.codegen.core import Emitter, Memref, elem_info, fail, handles, is_tile
from tilegen.runtime.codegen.reduce import run_region
from tilegen.runtime.codegen.regs import PREFIX
from tilegen.runtime.types import MemTokenType, TokenType


def _slots(em: Emitter, op, types) -> list:
    """Fresh registers for values of ``types``: a name, a list of names, or None (token)."""
    out = []
    for t in types:
        if _is_token(t):
            out.append(None)
            continue
        cls, _, _ = elem_info(op, t)
        if is_tile(t):
            out.append([em.new(cls) for _ in range(em.dist_of(op, t).nregs)])
        else:
            out.append(em.new(cls))
    return out


def _flat(slots, vals, op) -> list[tuple[str, object]]:
    """(destination register, source) pairs of a copy of ``vals`` into ``slots``."""
    pairs = []
    for s, v in zip(slots, vals):
        if s is None:
            continue
        if isinstance(v, Memref):
            fail(op, f"PTX backend does not support memrefs carried by '{op.name}' yet")
        if isinstance(s, list):
            if not isinstance(v, list) or len(v) != len(s):
                fail(op, f"PTX backend: '{op.name}' carries a tile it cannot place")
            pairs += list(zip(s, v))
        else:
            if isinstance(v, list):
                fail(op, f"PTX backend: '{op.name}' carries a tile it cannot place")
            pairs.append((s, v))
    return pairs


_CLASS = {p: c for c, p in PREFIX.items()}


def _class_from_name(reg: str) -> str:
    """Register class of a RegAlloc name (``%rd7`` -> b64)."""
    m = re.fullmatch(r"%([a-z]+)\d+", reg)
    return _CLASS.get(m.group(1), "b32") if m else "b32"


def _is_token(t) -> bool:
    return isinstance(t, (TokenType, MemTokenType))


def _move(em: Emitter, dst: str, src) -> None:
    cls = _class_from_name(dst)
    if cls == "pred" and not (isinstance(src, str) and src.startswith("%")):
        em.ins(f"setp.ne.u32 {dst}, {src}, 0")
    else:
        em.ins(f"mov.{cls} {dst}, {src}")


def copy_into(em: Emitter, op, slots, vals) -> None:
    """Parallel copy of ``vals`` into ``slots`` (sources that are also destinations are read
    before any destination is written)."""
    pairs = [(d, s) for d, s in _flat(slots, vals, op) if d != s]
    dests = {d for d, _ in pairs}
    staged = []
    for d, s in pairs:
        if isinstance(s, str) and s in dests:
            t = em.new(_class_from_name(s))
            _move(em, t, s)
            s = t
        staged.append((d, s))
    for d, s in staged:
        _move(em, d, s)


def _bind(em: Emitter, values, slots) -> None:
    for v, s in zip(values, slots):
        em.set(v, s)


@handles("scf.for")
def for_(em: Emitter, op) -> None:
    lb, ub, step = (em.scalar(op, v) for v in op.operands[:3])
    inits = [em.get(v) for v in op.operands[3:]]
    body = op.regions[0].blocks[0]
    iv_t = op.operands[0].type
    cls, esize, _ = elem_info(op, iv_t)
    if cls not in ("b32", "b64"):
        fail(op, f"PTX backend does not support '{op.name}' over {iv_t} yet")
    ty = ("u" if "unsignedCmp" in op.attributes else "s") + str(8 * esize)
    slots = _slots(em, op, [r.type for r in op.results])
    copy_into(em, op, slots, inits)
    iv = em.mov(cls, lb)
    top, end = em.new_label("for_body"), em.new_label("for_end")
    p = em.new("pred")
    em.ins(f"setp.ge.{ty} {p}, {iv}, {ub}")
    em.ins(f"@{p} bra {end}")
    em.label(top)
    copy_into(em, op, slots, run_region(em, body, [iv] + slots))
    em.ins(f"add.{ty} {iv}, {iv}, {step}")
    q = em.new("pred")
    em.ins(f"setp.lt.{ty} {q}, {iv}, {ub}")
    em.ins(f"@{q} bra {top}")
    em.label(end)
    _bind(em, op.results, slots)


@handles("scf.if")
def if_(em: Emitter, op) -> None:
    cond = em.scalar(op, op.operands[0])
    if not (isinstance(cond, str) and cond.startswith("%")):
        cond_reg = em.new("pred")
        em.ins(f"setp.ne.u32 {cond_reg}, {cond}, 0")
        cond = cond_reg
    slots = _slots(em, op, [r.type for r in op.results])
    has_else = len(op.regions) > 1 and op.regions[1].blocks
    other, end = em.new_label("if_else"), em.new_label("if_end")
    em.ins(f"@!{cond} bra {other if has_else else end}")
    copy_into(em, op, slots, run_region(em, op.regions[0].blocks[0], []))
    if has_else:
        em.ins(f"bra.uni {end}")
        em.label(other)
        copy_into(em, op, slots, run_region(em, op.regions[1].blocks[0], []))
    elif op.results:
        fail(op, "PTX backend: 'scf.if' with results needs an else region")
    em.label(end)
    _bind(em, op.results, slots)


@handles("scf.while")
def while_(em: Emitter, op) -> None:
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    carried = _slots(em, op, [a.type for a in before.args])
    results = _slots(em, op, [r.type for r in op.results])
    copy_into(em, op, carried, [em.get(v) for v in op.operands])
    top, end = em.new_label("while_top"), em.new_label("while_end")
    em.label(top)
    vals = run_region(em, before, carried)
    cond, vals = vals[0], vals[1:]
    copy_into(em, op, results, vals)
    em.ins(f"@!{cond} bra {end}")
    copy_into(em, op, carried, run_region(em, after, results))
    em.ins(f"bra.uni {top}")
    em.label(end)
    _bind(em, op.results, results)


@handles("scf.yield", "scf.condition")
def terminator(em: Emitter, op) -> None:
    """Read by the parent op (:func:`run_region`); never emitted alone."""
    fail(op, f"PTX backend: '{op.name}' outside its parent op")


@handles("ub.poison")
def poison(em: Emitter, op) -> None:
    """An undefined value (an exit path that does not set a loop result): zero registers."""
    (res,) = op.results
    t = res.type
    if _is_token(t):
        em.set(res, None)
        return
    cls, _, _ = elem_info(op, t)
    zero = {"pred": None, "f32": "0f00000000", "f64": "0d0000000000000000"}.get(cls, "0")

    def one():
        if cls == "pred":
            r = em.new("pred")
            em.ins(f"setp.ne.u32 {r}, 0, 0")
            return r
        return em.mov(cls, zero)

    if is_tile(t):
        em.set(res, [one() for _ in range(em.dist_of(op, t).nregs)])
    else:
        em.set(res, one())
