"""``nv-tileaa-loop-counters``: a loop-carried integer that a loop only steps by an invariant
(``cnt = cnt + c`` each iteration: TileGym's Gemma attention indexes its K and V tiles so) is
read in the body as a function of the induction variable instead,
``init + (iv - lb) / step * c``: the loads it indexes then depend on the induction variable
and invariants only, so the K-loop pipeliner and the async path (TMA copies issued by a
producer that runs ahead) can compute their indices for any iteration (docs/pipelines.md
section 24). The counter stays carried (the loop's result may be used after it); nothing in the
body reads it any more."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.ir import BlockArgument, Operation, OpResult, Value
from tilegen.runtime.passes.registry import register
from tilegen.runtime.rewrite import ir_utils as U
from tilegen.runtime.rewrite.rewriter import PatternRewriter
from tilegen.runtime.types import TileType


def _const(v: Value) -> Optional[int]:
    """The value of an integer constant (``arith.constant`` or ``cuda_tile.constant``)."""
    d = U.defined_by(v, "arith.constant")
    if d is not None:
        value = getattr(d.attributes.get("value"), "value", None)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return U.constant_int(v)


def _step_of(arg: BlockArgument, y: Value, loop: Operation) -> Optional[tuple]:
    """(the increment, the ``addi`` op) when ``y`` is ``arg + c`` with ``c`` defined outside
    ``loop``, else None."""
    if not isinstance(y, OpResult) or y.op.name != "arith.addi" or y.op.parent is not arg.block:
        return None
    lhs, rhs = y.op.operands
    for a, c in ((lhs, rhs), (rhs, lhs)):
        if a is arg and U.is_defined_outside(c, loop):
            return c, y.op
    return None


def counters_to_iv(loop: Operation) -> int:
    """Rewrite the counters of one ``scf.for``; returns how many."""
    body = loop.regions[0].blocks[0]
    iv = body.args[0]
    lb, _, step = loop.operands[:3]
    inits = loop.operands[3:]
    term = body.ops[-1] if body.ops else None
    if term is None or term.name != "scf.yield" or isinstance(iv.type, TileType):
        return 0
    rw = PatternRewriter()
    done = 0
    for k, arg in enumerate(body.args[1:]):
        if arg.type != iv.type or k >= len(term.operands):
            continue
        found = _step_of(arg, term.operands[k], loop)
        if found is None:
            continue
        inc, add = found
        uses = [(op, i) for op, i in arg.uses if op is not add]
        if not uses:
            continue
        rw.set_insertion_point_to_start(body)
        loc = loop.loc
        ty = iv.type

        def emit(name: str, a: Value, b: Value) -> Value:
            return rw.create(name, [a, b], [ty], {}, loc).results[0]

        n = iv if _const(lb) == 0 else emit("arith.subi", iv, lb)
        if _const(step) != 1:  # (iv - lb) >= 0 and step > 0: unsigned division
            n = emit("arith.divui", n, step)
        if _const(inc) != 1:
            n = emit("arith.muli", n, inc)
        if _const(inits[k]) != 0:
            n = emit("arith.addi", inits[k], n)
        for op, i in uses:
            op.set_operand(i, n)
        done += 1
    return done


@register(
    "nv-tileaa-loop-counters",
    summary="read loop-carried counters (stepped by an invariant) as functions of the "
    "induction variable, so loads they index can be issued ahead",
)
def _pass(root: Operation, options: dict) -> None:
    for op in list(root.walk()):
        if op.name == "scf.for" and op.regions and op.regions[0].blocks:
            counters_to_iv(op)
