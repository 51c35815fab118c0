"""``nv-tileaa-split-select-conditions``: a tile ``select`` whose condition is the ``andi`` of
two i1 tiles (``where(cols < n & cols <= rows, s, -inf)``: attention's boundary and causal
masks together) becomes two nested selects, ``select(a, select(b, x, y), y)``, the same value
element by element. Each select then reads one comparison: the emitter's predicates die at
their ``selp`` instead of three tiles of them living at once (a 128-column row of them spilled
280 bytes at the 224 registers of sm_100's one-warp-group attention, where the nested form
spills none; each comparison is moved next to its select for the same reason), and
runtime/codegen/uniform_select.py can drop each mask where it is all true."""

from __future__ import annotations

from tilegen.runtime.ir import Operation, OpResult
from tilegen.runtime.passes.registry import register
from tilegen.runtime.rewrite.rewriter import PatternRewriter
from tilegen.runtime.types import TileType


def split_select(op: Operation, rw: PatternRewriter) -> bool:
    """Rewrite one ``arith.select`` (see the module); False where it does not apply."""
    cond, x, y = op.operands
    if not isinstance(cond, OpResult) or cond.op.name != "arith.andi" or cond.num_uses != 1:
        return False
    if not isinstance(cond.type, TileType) or not isinstance(op.results[0].type, TileType):
        return False
    a, b = cond.op.operands
    if a.type != cond.type or b.type != cond.type:  # (both i1 tiles of the select's shape)
        return False
    rw.set_insertion_point(op)
    inner = rw.create("arith.select", [b, x, y], [op.results[0].type], {}, op.loc)
    op.set_operand(0, a)
    op.set_operand(1, inner.results[0])
    and_op = cond.op
    if not and_op.results[0].has_uses:
        rw.erase_op(and_op)
    # each comparison computed just before the select that reads it (where it is that
    # select's alone and in its block): one tile of predicates lives at a time
    for c, user in ((b, inner), (a, op)):
        _sink(c, user, rw)
    return True


#: ops a condition is computed by that may move down to their one user
_SINKABLE = ("arith.cmpi", "arith.cmpf", "arith.andi", "arith.ori", "arith.xori")
_SINKABLE += ("nv_tileaa.broadcast", "nv_tileaa.view", "nv_tileaa.reshape")


def _sink(v, user: Operation, rw: PatternRewriter) -> None:
    """Move the op defining ``v`` just before ``user`` where ``user`` is its only user in the
    same block, and the ops defining its operands likewise (a comparison and the broadcast of
    its result): so the predicates are computed where they are read."""
    d = v.op if isinstance(v, OpResult) else None
    if d is None or d.name not in _SINKABLE or d.parent is not user.parent:
        return
    if len(d.results) != 1 or v.num_uses != 1:
        return
    rw.move_op_before(d, user)
    for operand in d.operands:
        _sink(operand, d, rw)


@register(
    "nv-tileaa-split-select-conditions",
    summary="select(a & b, x, y) on tiles -> select(a, select(b, x, y), y)",
)
def _pass(root: Operation, options: dict) -> None:
    rw = PatternRewriter()
    for op in list(root.walk()):
        if op.name == "arith.select" and len(op.operands) == 3:
            while split_select(op, rw):  # (a & b & c: split again)
                pass
