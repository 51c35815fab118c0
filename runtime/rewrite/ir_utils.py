"""Small IR queries the patterns and the driver share (constants, effects, scopes, cloning)."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import DenseElementsAttr
from tilegen.runtime.ir import Block, BlockArgument, Operation, OpResult, Region, Value
from tilegen.runtime.types import IntegerType, TileType, Type

CONSTANT = "cuda_tile.constant"
#: terminators that leave the enclosing if (and its parent block)
EXITING = ("cuda_tile.return", "cuda_tile.break", "cuda_tile.continue")
_EFFECT_FREE_TRAITS = ("Pure", "ConstantLike", "NoMemoryEffect")


def has_trait(op: Operation, trait: str) -> bool:
    return op.opdef is not None and op.opdef.has_trait(trait)


def defining_op(v: Value) -> Optional[Operation]:
    return v.op if isinstance(v, OpResult) else None


def defined_by(v: Value, name: str) -> Optional[Operation]:
    d = defining_op(v)
    return d if d is not None and d.name == name else None


def constant_attr(v: Value) -> Optional[DenseElementsAttr]:
    d = defined_by(v, CONSTANT)
    attr = d.attributes.get("value") if d is not None else None
    return attr if isinstance(attr, DenseElementsAttr) else None


def attr_key(attr) -> str:
    """An equality key for attributes that tells ``-0.0`` from ``0.0`` (dataclass ``==`` does
    not) and never raises on NaN or unhashable content."""
    return repr(attr)


def constant_key(op: Operation) -> tuple:
    return (attr_key(op.attributes.get("value")), op.results[0].type if op.results else None)


def _element(t: Type) -> Optional[Type]:
    return t.element if isinstance(t, TileType) else None


def constant_int(v: Value) -> Optional[int]:
    """The integer value of a constant with one distinct element (splat or single element)."""
    attr = constant_attr(v)
    if attr is None or not isinstance(_element(v.type), IntegerType) or len(set(attr.values)) != 1:
        return None
    if len(attr.values) != 1 and not (attr.is_splat or len(attr.values) == 1):
        return None
    return int(attr.values[0])


def launch_uniform(v: Value) -> bool:
    """Whether ``v`` is the same in every tile block of a launch: made from the kernel's
    arguments and constants by ops without effects or regions that read nothing of the program
    they run in (the ``PerProgram`` trait: the block id, a cluster rank)."""
    stack, seen = [v], set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, BlockArgument):
            region = v.block.parent
            owner = region.parent if region is not None else None
            if owner is None or not has_trait(owner, "FunctionOpInterface"):
                return False  # a loop's or a branch's value
            continue
        op = defining_op(v)
        if op is None or op.regions or has_trait(op, "PerProgram"):
            return False
        if not any(has_trait(op, t) for t in _EFFECT_FREE_TRAITS):
            return False
        stack.extend(op.operands)
    return True


def is_const_bool(v: Value, value: bool) -> bool:
    el = _element(v.type)
    attr = constant_attr(v)
    if attr is None or el != IntegerType(1) or len(attr.values) != 1:
        return False
    return bool(attr.values[0]) == value


def is_const_int(v: Value, value: int) -> bool:
    el = _element(v.type)
    return isinstance(el, IntegerType) and el.width > 1 and constant_int(v) == value


def is_not_of(v: Value) -> Optional[Value]:
    """``p`` when ``v`` is ``xori p, true`` (either operand order)."""
    d = defined_by(v, "cuda_tile.xori")
    if d is None:
        return None
    if is_const_bool(d.operands[1], True):
        return d.operands[0]
    if is_const_bool(d.operands[0], True):
        return d.operands[1]
    return None


def is_effect_free(op: Operation, memo: Optional[dict] = None) -> bool:
    """Whether ``op`` (with everything nested in it) has no memory effects. ``memo``: answers
    kept between calls while the IR does not change (the caller clears it on every rewrite), so
    asking for each of n nested region ops costs O(n), not O(n^2)."""
    if memo is not None:
        hit = memo.get(id(op))
        if hit is not None:
            return hit[1]
    if any(has_trait(op, t) for t in _EFFECT_FREE_TRAITS):
        result = True
    elif has_trait(op, "RecursiveMemoryEffects"):
        result = all(
            inner is op or (inner.name not in EXITING and is_effect_free(inner, memo))
            for region in op.regions
            for block in region.blocks
            for inner in block.ops
        )
    else:
        result = False
    if memo is not None:
        memo[id(op)] = (op, result)  # the op is held, so its id is not reused meanwhile
    return result


def is_trivially_dead(op: Operation, memo: Optional[dict] = None) -> bool:
    if has_trait(op, "Terminator") or any(r.has_uses for r in op.results):
        return False
    return is_effect_free(op, memo)


def isolated_region(op: Operation) -> Optional[Region]:
    """The region of the closest ancestor that is IsolatedFromAbove (constants live there)."""
    block = op.parent
    while block is not None and block.parent is not None:
        region = block.parent
        owner = region.parent
        if owner is None or has_trait(owner, "IsolatedFromAbove") or owner.name == "builtin.module":
            return region
        block = owner.parent
    return None


def is_defined_outside(v: Value, op: Operation) -> bool:
    """True when ``v`` is defined outside every region of ``op``."""
    if isinstance(v, BlockArgument):
        owner = v.block.parent_op
    else:
        owner = v.op
    while owner is not None:
        if owner is op:
            return False
        owner = owner.parent_op
    return True


def block_of(region: Region) -> Optional[Block]:
    return region.blocks[0] if region.blocks else None


def clone_op(op: Operation, mapping: dict[int, Value]) -> Operation:
    """A deep copy of ``op``; operands are remapped through ``mapping`` (id(value) -> value),
    which is extended with the clone's results and block arguments."""
    new = Operation(
        op.name,
        [mapping.get(id(v), v) for v in op.operands],
        [r.type for r in op.results],
        dict(op.attributes),
        0,
        op.loc,
        opdef=op.opdef,
        properties=dict(op.properties),
    )
    for old, res in zip(op.results, new.results):
        mapping[id(old)] = res
    for region in op.regions:
        new_region = new.add_region(Region())
        for block in region.blocks:
            nb = new_region.append(Block())
            for a in block.args:
                mapping[id(a)] = nb.add_argument(a.type, a.loc)
            for inner in block.ops:
                nb.append(clone_op(inner, mapping))
    return new


def loop_slice(op: Operation, loop: Operation) -> Optional[list]:
    """The ops of ``loop``'s body that ``op``'s operands are computed by (pure, region-free, in
    body order), or None when they depend on anything but the induction variable and values
    defined outside the loop (a loop-carried value: a load so indexed cannot be issued ahead)."""
    body = loop.regions[0].blocks[0]
    iv = body.args[0]
    need: list[Operation] = []
    seen: set = set()
    stack = list(op.operands)
    while stack:
        v = stack.pop()
        if v is iv or is_defined_outside(v, loop):
            continue
        if isinstance(v, BlockArgument):
            return None  # a loop-carried value
        d = v.op
        if id(d) in seen:
            continue
        if d.parent is not body or d.regions or not is_effect_free(d):
            return None
        seen.add(id(d))
        need.append(d)
        stack.extend(d.operands)
    order = {id(o): i for i, o in enumerate(body.ops)}
    return sorted(need, key=lambda o: order[id(o)])
