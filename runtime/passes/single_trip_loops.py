"""``nv-tileaa-single-trip-loops``: an ``scf.for`` whose constant bounds give exactly one
iteration is replaced by its body (the induction variable by the lower bound, the iteration
arguments by the initial values, the results by the yielded values). TileGym's attention
backward (dK dV) wraps its K loop in a loop over the query heads of a group, one head when the
group is 1: inlined, the K loop is at the kernel's top level, where the async path looks for it
(docs/pipelines.md section 24). ``cuda_tile``'s own canonicalization keeps such loops (NVIDIA's
does), so this runs on nv_tileaa, in the layouts stage."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.ir import Operation, Value
from tilegen.runtime.passes.registry import register
from tilegen.runtime.rewrite.rewriter import PatternRewriter


def _const(v: Value) -> Optional[int]:
    d = v.op if hasattr(v, "op") else None
    if d is None or d.name != "arith.constant":
        return None
    value = getattr(d.attributes.get("value"), "value", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def single_trip(loop: Operation) -> bool:
    """Whether ``loop`` runs its body exactly once, every bound a constant (non-negative, so
    a signed and an unsigned comparison agree) and nothing in the body leaving it early."""
    lb, ub, step = (_const(v) for v in loop.operands[:3])
    if lb is None or ub is None or step is None or lb < 0 or step <= 0:
        return False
    if not lb < ub <= lb + step:
        return False
    body = loop.regions[0].blocks[0]
    term = body.ops[-1] if body.ops else None
    if term is None or term.name != "scf.yield":
        return False
    for op in body.ops[:-1]:
        for inner in op.walk():
            if inner.name.endswith((".continue", ".break")):
                return False
    return True


def inline_single_trip(loop: Operation) -> None:
    rw = PatternRewriter()
    body = loop.regions[0].blocks[0]
    term = body.ops[-1]
    values = list(term.operands)
    rw.erase_op(term)
    args = [loop.operands[0]] + list(loop.operands[3:])
    rw.inline_block_before(body, loop, args)
    rw.replace_op(loop, values)


@register(
    "nv-tileaa-single-trip-loops",
    summary="replace scf.for loops with constant bounds and exactly one iteration by their body",
)
def _pass(root: Operation, options: dict) -> None:
    for op in list(root.walk()):
        if op.name == "scf.for" and op.regions and op.regions[0].blocks and single_trip(op):
            inline_single_trip(op)
