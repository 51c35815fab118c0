"""Dot epilogues fused into the dot, chunk by chunk, to keep accumulators' live ranges short.

A block-scaled GEMM step is ``acc = acc + dot(a, b, 0) * scale``: emitted op by op, the whole
partial product (one register per accumulator element) is live beside the loop-carried ``acc``,
twice the accumulator's registers (a 128 x 128 f32 tile: 256 a thread, past the 255 limit). The
tensor-core instructions produce the result in independent chunks (a wgmma instance, an
``mma.sync`` tile), so the elementwise ops that consume the dot's result register by register
are applied to each chunk as soon as it is final: then only one chunk of the partial product is
live at a time (tileiras does the same per wgmma instance).

:func:`plan` finds, after a dot in its block, the *chain*: elementwise ops (selection rows) of the
dot's shape and layout whose tile operands are the dot's result, earlier chain results, or
values available before the chain, and the *hoisted* pure ops (constants, splats, broadcasts,
views, layout conversions and elementwise ops that do not depend on the dot) standing between
them, which are emitted before the dot. Chain and hoisted ops are then skipped when the emitter
reaches them (:func:`done`).
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.codegen.core import Emitter, elem_key, is_tile

#: pure ops that may be emitted ahead of their place in the block
_HOISTABLE = {
    "arith.constant",
    "nv_tileaa.splat",
    "nv_tileaa.broadcast",
    "nv_tileaa.view",
    "nv_tileaa.expand_dims",
    "nv_tileas.convert_layout",
}


def done(em: Emitter, op) -> bool:
    """Whether ``op`` was already emitted by a fused dot epilogue (its handler returns)."""
    return op in getattr(em, "fused_ops", ())


def _elementwise(op) -> bool:
    from tilegen.runtime.codegen.elementwise import _is_elementwise

    return _is_elementwise(op)


class Plan:
    """The ops fused into one dot: ``hoist`` (emitted before it) and ``chain`` (per chunk)."""

    def __init__(self, dot, hoist: list, chain: list):
        self.dot, self.hoist, self.chain = dot, hoist, chain
        self.vals: dict = {}  # chain result -> {register index: register}

    def __bool__(self) -> bool:
        return bool(self.chain)


#: fuse only when the dot's result takes more registers a thread than this: below it, the
#: partial product and the accumulator fit beside each other and ptxas schedules the unfused
#: code better (measured: a 128 x 64 fp8 GEMM step, 64 registers a thread, needs 204 registers
#: unfused and 228 fused on sm_100; at 128 x 128, 128 registers, fusing saves 500 bytes of
#: spills there)
MIN_REGS = 96


def plan(em: Emitter, dot) -> Optional[Plan]:
    """The epilogue of ``dot`` that can run per chunk (None when there is none, or when the
    result is small enough not to need it: :data:`MIN_REGS`)."""
    from tilegen.runtime.codegen.selection import select

    block = getattr(dot, "parent", None)
    d = dot.results[0]
    if block is None or not is_tile(d.type) or d.type.encoding is None:
        return None
    if em.dist_of(dot, d.type).nregs <= MIN_REGS:
        return None
    ops = block.ops
    try:
        i = ops.index(dot)
    except ValueError:
        return None
    chain, hoist = [], []
    inside = {d}
    hoisted: set = set()
    for op in ops[i + 1 :]:
        uses_chain = any(v in inside for v in op.operands)
        if uses_chain:
            res = op.results[0] if len(op.results) == 1 else None
            ok = (
                _elementwise(op)
                and res is not None
                and is_tile(res.type)
                and res.type.shape == d.type.shape
                and res.type.encoding == d.type.encoding
                and all(
                    v in inside
                    or v in hoisted
                    or (
                        v in em.values
                        and (not is_tile(v.type) or v.type.encoding == d.type.encoding)
                    )
                    for v in op.operands
                )
                and all(not is_tile(v.type) or v.type.shape == d.type.shape for v in op.operands)
                # an op with no selection row for this target is not fused: the elementwise
                # handler reports it (or its ``via`` row's own) with a located message
                and select(op, sm=em.sm) is not None
            )
            if not ok:
                break
            chain.append(op)
            inside.add(res)
            continue
        pure = op.name in _HOISTABLE or (_elementwise(op) and not op.regions)
        if not pure or any(
            v not in em.values and v not in hoisted for v in op.operands if not _is_token(v)
        ):
            break
        hoist.append(op)
        hoisted.update(op.results)
    if not chain:
        return None
    return Plan(dot, hoist, chain)


def _is_token(v) -> bool:
    from tilegen.runtime.types import TokenType, MemTokenType

    return isinstance(v.type, (TokenType, MemTokenType))


def _needed(chain, hoist) -> set:
    """Hoisted ops the chain (transitively) reads."""
    by_result = {r: op for op in hoist for r in op.results}
    need: set = set()
    work = [v for op in chain for v in op.operands]
    while work:
        v = work.pop()
        op = by_result.get(v)
        if op is not None and op not in need:
            need.add(op)
            work.extend(op.operands)
    return need


def begin(em: Emitter, p: Plan) -> None:
    """Emit the hoisted ops (before the dot's own instructions)."""
    needed = _needed(p.chain, p.hoist)
    p.hoist = [op for op in p.hoist if op in needed]
    for op in p.hoist:
        em.emit_op(op)
    fused = getattr(em, "fused_ops", None)
    if fused is None:
        fused = em.fused_ops = set()
    fused.update(p.hoist)


def chunk(em: Emitter, p: Plan, regs: dict) -> None:
    """Apply the chain to the dot result registers ``regs`` ({register index: register}) that
    have just become final."""
    from tilegen.runtime.codegen.elementwise import apply
    from tilegen.runtime.codegen.selection import keys, select

    d = p.dot.results[0]
    for op in p.chain:
        row = select(op, sm=em.sm)
        src, rkey = keys(op)
        akeys = [elem_key(v.type) for v in op.operands]
        out = p.vals.setdefault(op.results[0], {})
        for k in regs:
            args = []
            for v in op.operands:
                if v is d:
                    args.append(regs[k])
                elif v in p.vals:
                    args.append(p.vals[v][k])
                elif is_tile(v.type):
                    args.append(em.tile(op, v)[k])
                else:
                    from tilegen.runtime.codegen.elementwise import _regs

                    args.append(_regs(em, op, v))
            out[k] = apply(em, op, row, src, rkey, args, akeys)


def finish(em: Emitter, p: Plan, nregs: int) -> None:
    """Set the chain's results (every register produced) and mark the chain done."""
    for op in p.chain:
        vals = p.vals.get(op.results[0], {})
        em.set(op.results[0], [vals[k] for k in range(nregs)])
    em.fused_ops.update(p.chain)
