"""``nv-tileaa-flatten-loops``: a loop nest ``for i: for j: body`` whose outer body is index
arithmetic (scalars, and splats, broadcasts and ranges of them) around the inner loop, and whose
iteration arguments go straight through the inner loop, becomes one loop ``for t in [0, n_i n_j): i = lb_i + t / n_j * step_i,
j = lb_j + t % n_j * step_j; body``.

TileGym's attention backward (dK dV) with grouped queries loops over the query heads of a
group around its loop over Q tiles; dK and dV are carried through both. Flattened, the dots'
loop is at the kernel's top level, where the async path takes it (TMA stages, a producer warp
group, tcgen05 or wgmma consumers: docs/pipelines.md section 26) and where the K-loop pipeliner
prefetches across the head boundary. The head index is recomputed each iteration from the flat
induction variable (one division, one remainder); the inner bounds must not depend on the outer
induction variable. It runs on nv_tileaa after ``nv-tileaa-single-trip-loops`` (a group of one is
inlined first)."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import IntegerAttr
from tilegen.runtime.ir import Operation, Value
from tilegen.runtime.passes.registry import register
from tilegen.runtime.rewrite import ir_utils as U
from tilegen.runtime.rewrite.rewriter import PatternRewriter
from tilegen.runtime.types import IntegerType, TileType

#: tile ops an outer body may hold beside scalar ``arith``: index tiles built from scalars
#: (LICM hoists ``splat(base)`` out of the inner loop into it), recomputed each flat iteration
_INDEX_TILE_OPS = frozenset(
    {"nv_tileaa.splat", "nv_tileaa.broadcast", "nv_tileaa.make_range", "nv_tileaa.view"}
)


def _index_op(op: Operation) -> bool:
    """Index arithmetic: a splat / broadcast / range / view, or an ``arith`` op whose tile
    operands (if any) are such tiles; nothing with regions or touching memory."""
    if op.regions:
        return False
    if op.name in _INDEX_TILE_OPS:
        return True
    return op.dialect == "arith" and all(
        not isinstance(v.type, TileType)
        or getattr(getattr(v, "op", None), "name", None) in _INDEX_TILE_OPS
        for v in op.operands
    )


def _leaves_early(op: Operation) -> bool:
    return any(o.name.endswith((".continue", ".break")) for o in op.walk())


def flattenable(outer: Operation) -> Optional[Operation]:
    """The inner loop when ``outer`` can be flattened with it (module docstring), else None."""
    if outer.name != "scf.for" or "unsignedCmp" in outer.attributes:
        return None
    body = outer.regions[0].blocks[0]
    if not body.ops or body.ops[-1].name != "scf.yield":
        return None
    loops = [o for o in body.ops[:-1] if o.name == "scf.for"]
    if len(loops) != 1:
        return None
    inner = loops[0]
    if "unsignedCmp" in inner.attributes or _leaves_early(inner):
        return None
    iv = body.args[0]
    if not isinstance(iv.type, IntegerType) or inner.operands[0].type != iv.type:
        return None
    if any(not _index_op(o) for o in body.ops[:-1] if o is not inner):
        return None
    # the carried values go straight through the inner loop
    args = body.args[1:]
    if list(inner.operands[3:]) != list(args) or any(a.num_uses != 1 for a in args):
        return None
    if list(body.ops[-1].operands) != list(inner.results):
        return None
    if any(r.num_uses != 1 for r in inner.results):
        return None
    # the inner bounds are invariant in the outer loop
    if not all(U.is_defined_outside(v, outer) for v in inner.operands[:3]):
        return None
    return inner


def _const(v: Value) -> Optional[int]:
    d = v.op if hasattr(v, "op") else None
    if d is None or d.name != "arith.constant":
        return None
    value = getattr(d.attributes.get("value"), "value", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _constant(rw: PatternRewriter, ty, value: int, loc) -> Value:
    attrs = {"value": IntegerAttr(value, ty)}
    return rw.create("arith.constant", [], [ty], attrs, loc).results[0]


def _trip_count(rw: PatternRewriter, lb: Value, ub: Value, step: Value, loc) -> Value:
    """``max(0, ceildiv(ub - lb, step))`` (signed bounds, a positive step), folded when all
    three are constants."""
    ty = lb.type
    lo, hi, st = (_const(v) for v in (lb, ub, step))
    if None not in (lo, hi, st) and st > 0:
        return _constant(rw, ty, max(0, -(-(hi - lo) // st)), loc)

    def op(name, *xs) -> Value:
        return rw.create(name, list(xs), [ty], {}, loc).results[0]

    n = op("arith.ceildivsi", op("arith.subi", ub, lb), step)
    return op("arith.maxsi", n, _constant(rw, ty, 0, loc))


def flatten(outer: Operation, inner: Operation) -> None:
    """Rewrite ``outer`` and ``inner`` into one loop (module docstring); the inner loop op
    becomes the flat loop, moved before ``outer``, which is erased."""
    rw = PatternRewriter()
    loc = outer.loc
    obody, ibody = outer.regions[0].blocks[0], inner.regions[0].blocks[0]
    ty = obody.args[0].type
    lb0, ub0, st0 = outer.operands[:3]
    lb1, ub1, st1 = inner.operands[:3]
    rw.set_insertion_point(outer)
    n0 = _trip_count(rw, lb0, ub0, st0, loc)
    n1 = _trip_count(rw, lb1, ub1, st1, loc)
    c0, c1 = _const(n0), _const(n1)
    if c0 is not None and c1 is not None:
        total = _constant(rw, ty, c0 * c1, loc)
    else:
        total = rw.create("arith.muli", [n0, n1], [ty], {}, loc).results[0]
    zero, one = _constant(rw, ty, 0, loc), _constant(rw, ty, 1, loc)
    rw.move_op_before(inner, outer)
    inner.set_operands([zero, total, one] + list(outer.operands[3:]))
    # at the top of the flat body: the two induction variables from t
    t = ibody.args[0]
    old_uses = [(op, i) for op, i in t.uses]
    rw.set_insertion_point_to_start(ibody)

    def op(name, *xs) -> Value:
        return rw.create(name, list(xs), [ty], {}, loc).results[0]

    def scaled(q: Value, lb: Value, step: Value) -> Value:
        v = q if _const(step) == 1 else op("arith.muli", q, step)
        return v if _const(lb) == 0 else op("arith.addi", lb, v)

    i = scaled(op("arith.divui", t, n1), lb0, st0)
    j = scaled(op("arith.remui", t, n1), lb1, st1)
    for user, k in old_uses:
        user.set_operand(k, j)
    # the outer body's index arithmetic, after them (on i instead of the outer variable)
    obody.args[0].replace_all_uses_with(i)
    anchor = j.op
    for o in list(obody.ops[:-1]):
        rw.move_op_before(o, ibody.ops[ibody.ops.index(anchor) + 1])
        anchor = o
    rw.erase_op(obody.ops[-1])  # the outer yield: its uses of the inner results go with it
    rw.replace_op(outer, list(inner.results))


@register(
    "nv-tileaa-flatten-loops",
    summary="flatten a loop nest whose outer body is index arithmetic around one inner loop "
    "that carries the outer loop's values (grouped-query attention backward) into one loop",
)
def _pass(root: Operation, options: dict) -> None:
    for op in list(root.walk()):
        if op.name == "scf.for" and op.regions and op.regions[0].blocks and op.parent is not None:
            inner = flattenable(op)
            if inner is not None:
                flatten(op, inner)
