"""Masks that are all true in most iterations: a causal mask ``select(rows >= cols, s, -inf)``
in an attention loop keeps every element except near the diagonal (docs/pipelines.md section
17), a bound mask ``select(cols < n, x, 0)`` every element except in the last tile.
:func:`maskable` finds the ``select``s of a loop body whose condition compares two integer
tiles built from ``make_range``, constants, splats, broadcasts, views, ``addi``/``subi`` and
multiplication by a constant; :func:`all_true` emits, per iteration, one uniform predicate:
every element of that comparison holds. The body is then emitted twice (async_overlap.py): as
written, and with each such ``select`` replaced by its true operand, taken when the predicate
holds (:func:`emit_unswitched`, for every loop: control.py, async_loop.py, async_overlap.py).

The bounds are computed in 64 bits, and the predicate also requires every intermediate bound
to fit in 32 bits, where the tile's own i32 arithmetic then cannot have wrapped: a kernel
whose indices overflow keeps the masked copy."""

from __future__ import annotations

import copy
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
        vals = getattr(value, "values", None)
        if vals is not None and getattr(value, "is_splat", False) and len(vals):
            x = vals[0]  # a splat tile constant
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
    if op.name == "nv_tileaa.make_range" or _constant(v) is not None:
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
        c = _constant(v)
        if c is not None:
            return c, c
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


#: op name parts that touch memory: an unswitched span holds none (a load's handler issues
#: prefetches and keeps per-loop state; emitted twice, today's path ran wrong)
_MEMORY = ("load", "store", "atomic", "gather", "scatter", "print", "assert")


def _touches_memory(op) -> bool:
    return any(w in op.name.split(".")[-1] for w in _MEMORY) or any(
        _touches_memory(o) for r in op.regions for b in r.blocks for o in b.ops
    )


def unswitched_span(ops: list) -> tuple:
    """(first, end): the ops of a loop body to emit twice. Between the first dot and the last
    when there are two or more (attention's softmax; a dot in both copies made ptxas
    serialize the loop's wgmmas), after the only dot, or all of them; then narrowed to the
    ops around the maskable ``select``s that touch no memory."""
    dots = [i for i, o in enumerate(ops) if o.name == "nv_tileaa.dot"]
    first = dots[0] + 1 if dots else 0
    end = dots[-1] if len(dots) > 1 else len(ops)
    sel = [i for i, o in enumerate(ops) if first <= i < end and o in maskable(ops[first:end])]
    if not sel:
        return first, first
    for i in range(first, sel[0]):
        if _touches_memory(ops[i]):
            first = i + 1
    for i in range(sel[-1] + 1, end):
        if _touches_memory(ops[i]):
            return first, i
    return first, end


def _like(em: Emitter, x):
    """Fresh registers shaped as value ``x`` (a register, a list, a staged load)."""
    from tilegen.runtime.codegen.control import _class_from_name
    from tilegen.runtime.codegen.mma_staging import StagedBox

    if isinstance(x, str) and x.startswith("%"):
        return em.new(_class_from_name(x))
    if isinstance(x, list):
        return [_like(em, r) for r in x]
    if hasattr(x, "pipe_buf") and isinstance(x.pipe_buf, StagedBox):
        y = copy.copy(x)
        box = x.pipe_buf
        y.pipe_buf = StagedBox(em.new("b32"), box.span, box.kmajor, box.box_bytes)
        return y
    return x  # an immediate: nothing to copy


def _copy(em: Emitter, dst, src) -> None:
    from tilegen.runtime.codegen.control import _move
    from tilegen.runtime.codegen.mma_staging import StagedBox

    if isinstance(dst, list):
        for d, s in zip(dst, src):
            _copy(em, d, s)
    elif isinstance(dst, str) and dst != src:
        _move(em, dst, src)
    elif hasattr(dst, "pipe_buf") and isinstance(dst.pipe_buf, StagedBox):
        em.ins(f"mov.b32 {dst.pipe_buf.addr}, {src.pipe_buf.addr}")


def emit_unswitched(em: Emitter, loop, ops: list) -> None:
    """Emit ``ops`` (a loop body's :func:`unswitched_span`, or the overlap's part A after the
    first dot); where a mask of theirs is all true in most iterations (:func:`maskable`:
    attention's causal mask), emit them twice behind the iteration's predicate: as written,
    and with each such ``select`` (and the mask's own computation) replaced by its true
    operand; the values used after them end in the first copy's registers."""
    selects = maskable(ops)
    inside = {id(o) for o in ops}

    fresh: set = set()

    def scalar(v):
        """The register of scalar ``v``: the body's scalar ops it needs are emitted here first
        (em.values may still hold another copy's registers, the producer's)."""
        o = getattr(v, "op", None)
        if o is not None and id(o) in inside and id(o) not in fresh:
            if any(getattr(r.type, "rank", 0) for r in o.results):
                return em.scalar(loop, v)  # not a scalar: fails with a located message
            for w in o.operands:
                scalar(w)
            em.emit_op(o)
            fresh.add(id(o))
        return em.scalar(loop, v)

    pred = all_true(em, selects, scalar) if selects else None
    if pred is None:
        for o in ops:
            em.emit_op(o)
        return
    made = [r for o in ops for r in o.results]  # (in order: the copies' order is the PTX's)
    body = loop.regions[0].blocks[0]
    used_after = [r for r in made if any(id(u) not in inside or u is body.ops[-1] for u in r.users)]
    # the copy without the mask falls through (most iterations); the masked copy, taken by
    # the few iterations the mask cuts, moves its values into the first copy's registers
    masked, join = em.new_label("mask_kept"), em.new_label("mask_join")
    em.ins(f"@!{pred} bra {masked}")
    replaced = {id(o) for o in selects}
    # the masks' own computation, unused once the selects are gone (a replaced select still
    # uses its true operand: it becomes the select's value)
    dead = set(replaced)

    def live_use(r, u) -> bool:
        if id(u) not in dead:
            return True
        return id(u) in replaced and u.operands[1] is r

    for o in reversed(ops):
        if id(o) not in dead and not o.regions and o.results:
            if all(r.has_uses for r in o.results) and not any(
                live_use(r, u) for r in o.results for u in r.users
            ):
                dead.add(id(o))
    for o in ops:
        if id(o) in replaced:  # every element takes the true operand
            em.set(o.results[0], em.get(o.operands[1]))
        elif id(o) not in dead:
            em.emit_op(o)
    kept = {v: em.get(v) for v in used_after if v in em.values}
    em.ins(f"bra.uni {join}")
    em.label(masked)
    for o in ops:
        em.emit_op(o)
    for v, regs in kept.items():
        _copy(em, regs, em.get(v))
        em.values[v] = regs
    em.label(join)


#: registers a thread needs beside twice the loop's dot results to unswitch (section 17)
UNSWITCH_SLACK = 32


def unswitch_fits(em: Emitter, loop) -> bool:
    """Whether the registers allow two copies of the span: about twice the loop body's dot
    results per thread plus :data:`UNSWITCH_SLACK` within the kernel's register budget (its
    ``.maxnreg``, else one CTA's share). Attention on sm_80 (4 warps, 2 x 128 + 32 > 255)
    spilled 140 bytes unswitched, 16 without; with 8 warps (2 x 64 + 32 = 160) sm_90a and
    sm_100a stay within 168 registers and spill nothing."""
    from math import prod

    from tilegen.runtime.layouts.kernel import register_budget

    threads = em.num_threads
    acc = sum(
        prod(o.results[0].type.shape) // threads
        for o in loop.regions[0].blocks[0].ops
        if o.name == "nv_tileaa.dot"
    )
    budget = register_budget(em.func, threads + getattr(em, "producer_threads", 0))
    return 2 * acc + UNSWITCH_SLACK <= budget


def _rescales_late(em: Emitter, ops: list) -> list:
    """``ops`` with each rescale of an accumulator kept in tensor memory (``mulf(acc, alpha)``,
    tmem_resident.py; its one user is the dot that accumulates into it) moved to just before
    that dot: the softmax's P is then cast to 16 bits before the 32-column chunks of the
    accumulator are loaded and scaled, so a thread does not hold P in 32 bits beside them
    (causal attention 128 x 128 on 4 warps: 44 bytes of spills at 224 registers, none
    after)."""
    plan = em.tmem_plan
    if plan is None or not plan.rescales or not any(o in plan.rescales for o in ops):
        return ops
    out = list(ops)
    for m in [o for o in ops if o in plan.rescales]:
        users = m.results[0].users
        if len(users) != 1 or users[0] not in out:
            continue
        out.remove(m)
        out.insert(out.index(users[0]), m)
    return out


def emit_ops(em: Emitter, loop, ops: list) -> None:
    """Emit ``ops`` of ``loop``'s body in order, the :func:`unswitched_span` of them through
    :func:`emit_unswitched` where :func:`unswitch_fits`."""
    ops = _rescales_late(em, ops)
    first, end = unswitched_span(ops) if unswitch_fits(em, loop) else (0, 0)
    for o in ops[:first]:
        em.emit_op(o)
    emit_unswitched(em, loop, ops[first:end])
    for o in ops[end:]:
        em.emit_op(o)
