"""IR forms the async path's rule (runtime/passes/async_rule.py) and its emitter
(runtime/codegen/async_loop.py) both read, in one place: uniform and zero tiles, and the chain
from a K loop's result to the TMA store that lets the registers go out in the accumulator's
own order (docs/pipelines.md sections 11 and 12)."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.ir import Operation, OpResult


def _op(v) -> Optional[Operation]:
    return v.op if isinstance(v, OpResult) else None


def uniform_tile(v) -> bool:
    """Whether tile ``v`` holds one value everywhere - a splat, a splat constant, or a
    broadcast of a one-element tile (a scalar operand, as cuTile writes ``acc * 0.5``) - so
    any register order will do."""
    op = _op(v)
    if op is None:
        return False
    if op.name == "nv_tileaa.splat":
        return True
    if op.name == "nv_tileaa.broadcast":
        shape = getattr(op.operands[0].type, "shape", None)
        return shape is not None and all(n == 1 for n in shape)
    value = op.attributes.get("value") if op.name == "arith.constant" else None
    return bool(getattr(value, "is_splat", False))


def zero_tile(v) -> bool:
    """Whether tile ``v`` is zero everywhere (a splat of a zero constant, or a zero constant)."""
    op = _op(v)
    if op is not None and op.name == "nv_tileaa.splat":
        v = op.operands[0]
        op = _op(v)
    value = op.attributes.get("value") if op is not None and op.name == "arith.constant" else None
    if value is None:
        return False
    vals = getattr(value, "values", None)
    if vals is not None:  # a dense (tile) constant
        return len(set(map(repr, vals))) == 1 and float(vals[0]) == 0.0
    return float(getattr(value, "value", 1)) == 0.0


def elementwise(op: Operation) -> bool:
    """An elementwise op of the spec (trait ``Elementwise``) with one result."""
    return len(op.results) == 1 and not op.regions and op.opdef.has_trait("Elementwise")


def fragment_chain(loop: Operation, store: Optional[Operation]) -> Optional[list]:
    """The values from ``loop``'s result to the tile the TMA ``store`` writes, when nothing but
    that store reads them in their layout: a single-use chain of elementwise ops on that one
    tile (other operands scalars or uniform tiles) with the loop result's layout throughout.
    Register k then means the same element all along, whatever order the registers are in, so
    the loop can hand over its accumulator registers as they are and the store write them by
    position (no exchange into the layout stage's layout); else None."""
    if store is None:
        return None
    v = loop.results[0]
    chain = [v]
    while True:
        if v.num_uses != 1:
            return None
        (user,) = v.users
        if user is store:
            return chain if store.opdef.operand_group(store, "value")[0] is v else None
        others = [o for o in user.operands if o is not v and getattr(o.type, "rank", 0)]
        if not elementwise(user) or not all(uniform_tile(o) for o in others):
            return None
        r = user.results[0]
        if r.type.shape != v.type.shape or r.type.encoding != v.type.encoding:
            return None
        v = r
        chain.append(v)
