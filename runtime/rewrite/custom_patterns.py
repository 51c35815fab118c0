"""Hand-written rewrite patterns, named by ``custom:`` rows in spec/lowerings/*.yaml.

Each is ``fn(op, rewriter) -> bool`` (True when it changed the IR). Behaviour follows NVIDIA's
cuda_tile canonicalizations (reference/canonicalization.md, sections 2.3 and 2.4).
"""

from __future__ import annotations

from typing import Optional, Sequence

from tilegen.runtime.attributes import DenseElementsAttr
from tilegen.runtime.ir import Block, Operation, Region, Value
from tilegen.runtime.rewrite import ir_utils as U
from tilegen.runtime.rewrite.rewriter import PatternRewriter
from tilegen.runtime.types import IntegerType, TileType

IF, YIELD, SELECT = "cuda_tile.if", "cuda_tile.yield", "cuda_tile.select"


# --------------------------------------------------------------------------- builders


def make_constant(rw: PatternRewriter, type, values: tuple, loc=None) -> Value:
    attr = DenseElementsAttr(type, values)
    return rw.create(U.CONSTANT, [], [type], {"value": attr}, loc).results[0]


def make_not(rw: PatternRewriter, v: Value, loc=None) -> Value:
    true = make_constant(rw, v.type, (1,), loc)
    return rw.create("cuda_tile.xori", [v, true], [v.type], {}, loc).results[0]


def shaped_condition(rw: PatternRewriter, cond: Value, like: TileType, loc) -> Value:
    """A scalar i1 ``cond`` reshaped to ``like``'s rank and broadcast to its shape."""
    if not like.shape:
        return cond
    ones = TileType((1,) * len(like.shape), IntegerType(1))
    v = rw.create("cuda_tile.reshape", [cond], [ones], {}, loc).results[0]
    full = TileType(like.shape, IntegerType(1))
    if ones != full:
        v = rw.create("cuda_tile.broadcast", [v], [full], {}, loc).results[0]
    return v


# --------------------------------------------------------------------------- select


def _expand(attr: DenseElementsAttr, n: int) -> Optional[list[tuple]]:
    """(value, exact bits or None) per element; a splat is repeated ``n`` times."""
    bits = attr.bits if attr.bits is not None else (None,) * len(attr.values)
    pairs = list(zip(attr.values, bits))
    if len(pairs) == n:
        return pairs
    return pairs * n if len(pairs) == 1 else None


def select_consts(op: Operation, rw: PatternRewriter) -> bool:
    """select of three constants -> one constant chosen element-wise."""
    attrs = [U.constant_attr(v) for v in op.operands]
    rtype = op.results[0].type
    if any(a is None for a in attrs) or not isinstance(rtype, TileType):
        return False
    n = rtype.num_elements
    cond, a, b = (_expand(x, n) for x in attrs)
    if cond is None or a is None or b is None:
        return False
    chosen = [x if c[0] else y for c, x, y in zip(cond, a, b)]
    if len({repr(p) for p in chosen}) == 1:
        chosen = chosen[:1]
    values = tuple(v for v, _ in chosen)
    bits = tuple(bt for _, bt in chosen)
    attr = DenseElementsAttr(rtype, values, None if all(bt is None for bt in bits) else bits)
    rw.set_insertion_point(op)
    new = rw.create(U.CONSTANT, [], [rtype], {"value": attr}, op.loc)
    rw.replace_op(op, new.results)
    return True


# --------------------------------------------------------------------------- if helpers


def _then(op: Operation) -> Block:
    return op.regions[0].blocks[0]


def _else(op: Operation) -> Optional[Block]:
    return op.regions[1].blocks[0] if len(op.regions) > 1 and op.regions[1].blocks else None


def _term(block: Optional[Block]) -> Optional[Operation]:
    return block.ops[-1] if block is not None and block.ops else None


def _yield(block: Optional[Block]) -> Optional[Operation]:
    t = _term(block)
    return t if t is not None and t.name == YIELD else None


def _exits(block: Optional[Block]) -> bool:
    t = _term(block)
    return t is not None and t.name in U.EXITING


def _set_yield(rw: PatternRewriter, block: Block, values: Sequence[Value], loc=None) -> None:
    old = _yield(block)
    if old is not None:
        loc = old.loc
        rw.erase_op(old)
    rw.set_insertion_point_to_end(block)
    rw.create(YIELD, list(values), [], {}, loc)


def _new_if(
    rw: PatternRewriter, at: Operation, cond: Value, types, then_r: Region, else_r: Optional[Region]
) -> Operation:
    """A new ``if`` before ``at`` that takes the blocks of ``then_r`` / ``else_r``."""
    new = Operation(IF, [cond], list(types), {}, 2, at.loc)
    rw.take_region(then_r, new.regions[0])
    if else_r is not None:
        rw.take_region(else_r, new.regions[1])
    rw.set_insertion_point(at)
    return rw.insert(new)


def _rebuild_if(op: Operation, keep: list[int], rw: PatternRewriter) -> Operation:
    """Replace ``op`` by an ``if`` with only the results ``keep`` (yields trimmed)."""
    for block in (_then(op), _else(op)):
        y = _yield(block)
        if y is not None:
            _set_yield(rw, block, [y.operands[i] for i in keep])
    types = [op.results[i].type for i in keep]
    new = _new_if(rw, op, op.operands[0], types, op.regions[0], op.regions[1])
    for j, i in enumerate(keep):
        rw.replace_all_uses_with(op.results[i], new.results[j])
    rw.erase_op(op)
    return new


# --------------------------------------------------------------------------- if patterns


def if_remove_unused_results(op: Operation, rw: PatternRewriter) -> bool:
    used = [i for i, r in enumerate(op.results) if r.has_uses]
    if len(used) == len(op.results) or not (_yield(_then(op)) or _yield(_else(op))):
        return False
    _rebuild_if(op, used, rw)
    return True


def if_replace_yield_with_value(op: Operation, rw: PatternRewriter) -> bool:
    ty, ey = _yield(_then(op)), _yield(_else(op))
    if ty is None or ey is None or not op.results:
        return False
    cond = op.operands[0]
    changed = False
    for i, res in enumerate(op.results):
        if not res.has_uses:
            continue
        t, e = ty.operands[i], ey.operands[i]
        if t is e:
            rw.replace_all_uses_with(res, t)
        elif res.type == cond.type and U.is_const_bool(t, True) and U.is_const_bool(e, False):
            rw.replace_all_uses_with(res, cond)
        elif res.type == cond.type and U.is_const_bool(t, False) and U.is_const_bool(e, True):
            rw.set_insertion_point(op)
            rw.replace_all_uses_with(res, make_not(rw, cond, op.loc))
        else:
            continue
        changed = True
    return changed


def _inline_taken(op: Operation, block: Optional[Block], rw: PatternRewriter) -> None:
    if block is None:
        rw.erase_op(op)
        return
    term = _term(block)
    if term is not None and term.name == YIELD:
        values = list(term.operands)
        rw.erase_op(term)
        rw.inline_block_before(block, op)
        rw.replace_op(op, values)
        return
    rw.erase_block_ops_after(op)
    rw.inline_block_before(block, op)
    for r in op.results:
        for user, i in list(r.uses):  # only possible from erased code; be safe
            user.operands[i]._remove_use(user, i)
    rw.erase_op(op)


def if_remove_static_condition(op: Operation, rw: PatternRewriter) -> bool:
    cond = op.operands[0]
    if U.is_const_bool(cond, True):
        _inline_taken(op, _then(op), rw)
    elif U.is_const_bool(cond, False):
        if _else(op) is None and op.results:
            return False
        _inline_taken(op, _else(op), rw)
    else:
        return False
    return True


def if_convert_to_select(op: Operation, rw: PatternRewriter) -> bool:
    ty, ey = _yield(_then(op)), _yield(_else(op))
    if not op.results or (ty is None and ey is None):
        return False
    if (ty is None and not _exits(_then(op))) or (ey is None and not _exits(_else(op))):
        return False
    cond = op.operands[0]
    replace: dict[int, tuple[Optional[Value], Optional[Value]]] = {}
    for i, res in enumerate(op.results):
        if not isinstance(res.type, TileType):
            continue
        t = ty.operands[i] if ty is not None else None
        e = ey.operands[i] if ey is not None else None
        if all(v is None or U.is_defined_outside(v, op) for v in (t, e)):
            replace[i] = (t, e)
    if not replace:
        return False
    rw.set_insertion_point(op)
    for i, (t, e) in replace.items():
        if t is None or e is None or t is e:
            value = t if t is not None else e
        else:
            shaped = shaped_condition(rw, cond, op.results[i].type, op.loc)
            value = rw.create(SELECT, [shaped, t, e], [op.results[i].type], {}, op.loc).results[0]
        rw.replace_all_uses_with(op.results[i], value)
    _rebuild_if(op, [i for i in range(len(op.results)) if i not in replace], rw)
    return True


def if_remove_empty_else(op: Operation, rw: PatternRewriter) -> bool:
    eb = _else(op)
    if op.results or eb is None or len(eb.ops) != 1 or _yield(eb) is None:
        return False
    rw.erase_op(eb.ops[0])
    op.regions[1].blocks.clear()
    rw.modify_in_place(op)
    return True


def _branches(op: Operation, negated: bool) -> tuple[Optional[Block], Optional[Block]]:
    t, e = _then(op), _else(op)
    return (e, t) if negated else (t, e)


def _merge_branch(
    rw: PatternRewriter,
    prev: Operation,
    nxt: Operation,
    pb: Optional[Block],
    nb: Optional[Block],
    region: Region,
) -> None:
    """Build one side of the combined if in ``region`` from ``pb`` (first if) and ``nb``."""
    block = region.append(Block())
    if pb is not None and _exits(pb):
        rw.inline_block_at_end(pb, block)
        return
    p_vals: list[Value] = []
    if pb is not None:
        py = _yield(pb)
        p_vals = list(py.operands) if py is not None else []
        if py is not None:
            rw.erase_op(py)
        rw.inline_block_at_end(pb, block)
    if nb is not None:
        for r, v in zip(prev.results, p_vals):
            for user, i in list(r.uses):
                if _inside(user, nb):
                    user.set_operand(i, v)
        ny = _yield(nb)
        if ny is None and _exits(nb):
            rw.inline_block_at_end(nb, block)
            return
        n_vals = list(ny.operands) if ny is not None else []
        if ny is not None:
            rw.erase_op(ny)
        rw.inline_block_at_end(nb, block)
    else:
        n_vals = []
    rw.set_insertion_point_to_end(block)
    rw.create(YIELD, p_vals + n_vals, [], {}, nxt.loc)


def _inside(op: Operation, block: Block) -> bool:
    cur: Optional[Operation] = op
    while cur is not None:
        if cur.parent is block:
            return True
        cur = cur.parent_op
    return False


def if_combine(op: Operation, rw: PatternRewriter) -> bool:
    """Merge ``op`` into the ``if`` right before it when both test the same (or negated)
    condition."""
    block = op.parent
    idx = block.ops.index(op)
    if idx == 0 or block.ops[idx - 1].name != IF:
        return False
    prev = block.ops[idx - 1]
    pc, nc = prev.operands[0], op.operands[0]
    if pc is nc:
        negated = False
    elif U.is_not_of(nc) is pc or U.is_not_of(pc) is nc:
        negated = True
    else:
        return False
    pt, pe = _then(prev), _else(prev)
    nt, ne = _branches(op, negated)
    if pt is not None and _exits(pt) and pe is not None and _exits(pe):
        return False
    types = [r.type for r in prev.results] + [r.type for r in op.results]
    new = Operation(IF, [pc], types, {}, 2, prev.loc)
    _merge_branch(rw, prev, op, pt, nt, new.regions[0])
    if pe is not None or ne is not None:
        _merge_branch(rw, prev, op, pe, ne, new.regions[1])
    rw.set_insertion_point(prev)
    rw.insert(new)
    for old, res in zip(prev.results + op.results, new.results):
        rw.replace_all_uses_with(old, res)
    for dead in (op, prev):
        for b in (_then(dead), _else(dead)):
            if b is not None:
                b.ops.clear()
        rw.erase_op(dead)
    return True


def if_combine_nested(op: Operation, rw: PatternRewriter) -> bool:
    """``if a { if b { X } }`` -> ``if (andi a, b) { X }`` (result-less, no else branches)."""
    if op.results or _else(op) is not None:
        return False
    tb = _then(op)
    if len(tb.ops) != 2 or tb.ops[0].name != IF or _yield(tb) is None or _yield(tb).operands:
        return False
    inner = tb.ops[0]
    if inner.results or _else(inner) is not None:
        return False
    rw.set_insertion_point(op)
    both = rw.create(
        "cuda_tile.andi", [op.operands[0], inner.operands[0]], [op.operands[0].type], {}, inner.loc
    ).results[0]
    _new_if(rw, op, both, [], inner.regions[0], None)
    rw.erase_op(op)
    return True


def if_move_terminator_to_parent(op: Operation, rw: PatternRewriter) -> bool:
    """Both branches exit: keep the then branch in a result-less if, inline the else after."""
    eb = _else(op)
    if not (_exits(_then(op)) and _exits(eb)):
        return False
    rw.erase_block_ops_after(op)
    new = _new_if(rw, op, op.operands[0], [], op.regions[0], None)
    rw.set_insertion_point_after(new)
    rw.inline_block_before(eb, op)
    for r in op.results:
        for user, i in list(r.uses):
            user.operands[i]._remove_use(user, i)
    op.regions[1].blocks.clear()
    rw.erase_op(op)
    return True
