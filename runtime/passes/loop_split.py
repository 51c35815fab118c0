"""``loop-split`` (reference/canonicalization.md 3.2): split a ``for`` at the point where an
``if`` on ``cmpi iv, invariant`` changes outcome, so each copy runs one branch unconditionally."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import DenseElementsAttr, EnumAttr, IntegerAttr
from tilegen.runtime.ir import Operation, Value
from tilegen.runtime.passes.registry import FUNCTIONS, register
from tilegen.runtime.records import dataclass
from tilegen.runtime.rewrite import ir_utils as U
from tilegen.runtime.rewrite.custom_patterns import _else, _inline_taken, _then
from tilegen.runtime.rewrite.rewriter import PatternRewriter

FOR, IF, CMPI = "cuda_tile.for", "cuda_tile.if", "cuda_tile.cmpi"
HINT = "cuda_tile.loop_split"
_LT, _LE, _GT, _GE = 2, 3, 4, 5
_SWAP = {_LT: _GT, _LE: _GE, _GT: _LT, _GE: _LE}
_UNSIGNED, _SIGNED = 0, 1
_POSITIVE_INF = 3
_HEAVY = {
    "cuda_tile." + n
    for n in (
        "load_ptr_tko",
        "store_ptr_tko",
        "load_view_tko",
        "store_view_tko",
        "mmaf",
        "mmai",
        "reduce",
        "if",
        "for",
    )
}


@dataclass
class _Split:
    cmp: Operation
    bound: Value
    predicate: int  # normalized: iv PRED bound


def _hint(op: Optional[Operation]) -> Optional[int]:
    a = op.attributes.get(HINT) if op is not None else None
    return a.value if isinstance(a, IntegerAttr) else None


def _function(op: Operation) -> Optional[Operation]:
    cur = op.parent_op
    while cur is not None and cur.name not in FUNCTIONS:
        cur = cur.parent_op
    return cur


def _heavy_enough(if_op: Operation, threshold: int) -> bool:
    for block in (_then(if_op), _else(if_op)):
        if block is None:
            continue
        if len(block.ops) - 1 >= threshold:
            return True
        if any(inner.name in _HEAVY for op in block.ops for inner in op.walk()):
            return True
    return False


def _wants_split(if_op: Operation, for_op: Operation, default: int) -> bool:
    for where in (if_op, for_op, _function(for_op)):
        h = _hint(where)
        if h is not None:
            threshold = h
            break
    else:
        threshold = default
    if threshold <= 0:
        return False
    return threshold == 1 or _heavy_enough(if_op, threshold)


def _candidate(for_op: Operation, default: int) -> Optional[_Split]:
    body = for_op.regions[0].blocks[0]
    iv = body.args[0]
    signed = "unsignedCmp" not in for_op.attributes
    for op in for_op.walk():
        if op.name != IF or op is for_op:
            continue
        cmp = U.defined_by(op.operands[0], CMPI)
        if cmp is None:
            continue
        sign = cmp.attributes.get("signedness")
        if not isinstance(sign, EnumAttr) or (sign.value == _SIGNED) != signed:
            continue
        pred = getattr(cmp.attributes.get("comparison_predicate"), "value", None)
        if pred not in _SWAP:
            continue
        lhs, rhs = cmp.operands
        if lhs is iv and U.is_defined_outside(rhs, for_op):
            bound = rhs
        elif rhs is iv and U.is_defined_outside(lhs, for_op):
            bound, pred = lhs, _SWAP[pred]
        else:
            continue
        if _wants_split(op, for_op, default):
            return _Split(cmp, bound, pred)
    return None


def _const(rw: PatternRewriter, like: Value, value: int, loc) -> Value:
    attr = DenseElementsAttr(like.type, (value,))
    return rw.create(U.CONSTANT, [], [like.type], {"value": attr}, loc).results[0]


def _split_point(rw: PatternRewriter, for_op: Operation, split: _Split, signed: bool) -> Value:
    lb, _ub, step = for_op.operands[:3]
    loc = for_op.loc
    t = lb.type
    s = split.bound
    if split.predicate in (_GT, _LE):
        one = _const(rw, s, 1, loc)
        s = rw.create("cuda_tile.addi", [s, one], [t], {}, loc).results[0]
    if not U.is_const_int(step, 1):
        sign = EnumAttr("Signedness", _SIGNED if signed else _UNSIGNED)
        d = rw.create("cuda_tile.subi", [s, lb], [t], {}, loc).results[0]
        d = rw.create(
            "cuda_tile.divi",
            [d, step],
            [t],
            {"signedness": sign, "rounding": EnumAttr("RoundingMode", _POSITIVE_INF)},
            loc,
        ).results[0]
        d = rw.create("cuda_tile.muli", [d, step], [t], {}, loc).results[0]
        s = rw.create("cuda_tile.addi", [lb, d], [t], {}, loc).results[0]
    return s


def _specialize(copy: Operation, cmp_index: list[int], outcome: bool, rw: PatternRewriter) -> None:
    """In one loop copy: the cmpi becomes a constant; ifs directly in the body on it are
    replaced by the taken branch."""
    cmp = _at(copy, cmp_index)
    body = copy.regions[0].blocks[0]
    rw.set_insertion_point_to_start(body)
    i1 = cmp.results[0]
    attr = DenseElementsAttr(i1.type, (1 if outcome else 0,))
    const = rw.create(U.CONSTANT, [], [i1.type], {"value": attr}, cmp.loc).results[0]
    rw.replace_all_uses_with(i1, const)
    rw.erase_op(cmp)
    for op in list(body.ops):
        if op.parent is body and op.name == IF and op.operands[0] is const:
            _inline_taken(op, _then(op) if outcome else _else(op), rw)


def _path(root: Operation, target: Operation) -> list[int]:
    """Indices locating ``target`` in ``root``'s walk order (stable across clones)."""
    for i, op in enumerate(root.walk()):
        if op is target:
            return [i]
    raise ValueError("op not nested in root")


def _at(root: Operation, path: list[int]) -> Operation:
    for i, op in enumerate(root.walk()):
        if i == path[0]:
            return op
    raise IndexError(path)


def split_loop(for_op: Operation, split: _Split) -> None:
    rw = PatternRewriter()
    signed = "unsignedCmp" not in for_op.attributes
    lb, ub = for_op.operands[0], for_op.operands[1]
    loc = for_op.loc
    sign = {"signedness": EnumAttr("Signedness", _SIGNED if signed else _UNSIGNED)}
    rw.set_insertion_point(for_op)
    s = _split_point(rw, for_op, split, signed)
    upper = rw.create("cuda_tile.mini", [s, ub], [s.type], dict(sign), loc).results[0]
    lower = rw.create("cuda_tile.maxi", [s, lb], [s.type], dict(sign), loc).results[0]
    cmp_path = _path(for_op, split.cmp)
    first = rw.insert(U.clone_op(for_op, {}))
    first.set_operand(1, upper)
    second = rw.insert(U.clone_op(for_op, {}))
    second.set_operand(0, lower)
    for i, r in enumerate(first.results):
        second.set_operand(3 + i, r)
    true_first = split.predicate in (_LT, _LE)
    _specialize(first, cmp_path, true_first, rw)
    _specialize(second, cmp_path, not true_first, rw)
    for old, new in zip(for_op.results, second.results):
        rw.replace_all_uses_with(old, new)
    rw.erase_op(for_op)


@register(
    "loop-split",
    anchors=FUNCTIONS,
    options={"split-threshold": (int, 1)},
    summary="split for loops at the iteration where an if on the induction variable flips",
)
def loop_split(fn: Operation, options: dict) -> None:
    fors = [op for op in _post_order(fn) if op.name == FOR]
    for for_op in fors:
        if for_op.parent is None:
            continue
        split = _candidate(for_op, options["split-threshold"])
        if split is not None:
            split_loop(for_op, split)


def _post_order(op: Operation):
    for region in op.regions:
        for block in region.blocks:
            for child in list(block.ops):
                yield from _post_order(child)
    yield op
