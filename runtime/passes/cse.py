"""``cse``: common subexpression elimination of side-effect-free ops, scoped by dominance
(a value computed in an enclosing block is visible in nested regions; isolated ops start
fresh)."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.ir import Block, Operation
from tilegen.runtime.passes.registry import register
from tilegen.runtime.rewrite import ir_utils as U
from tilegen.runtime.rewrite.rewriter import PatternRewriter


def _key(op: Operation) -> Optional[tuple]:
    if op.regions or not op.results or not U.is_effect_free(op) or U.has_trait(op, "Terminator"):
        return None
    attrs = tuple(sorted((k, U.attr_key(v)) for k, v in op.attributes.items()))
    return (op.name, tuple(id(v) for v in op.operands), attrs, tuple(r.type for r in op.results))


def _cse_block(block: Block, scope: list[dict], rw: PatternRewriter) -> None:
    table: dict = {}
    scope.append(table)
    for op in list(block.ops):
        key = _key(op)
        if key is not None:
            found = next((t[key] for t in reversed(scope) if key in t), None)
            if found is not None:
                rw.replace_op(op, found.results)
                continue
            table[key] = op
        for region in op.regions:
            inner = [] if U.has_trait(op, "IsolatedFromAbove") else scope
            for b in region.blocks:
                _cse_block(b, inner, rw)
    scope.pop()


@register("cse", summary="eliminate common subexpressions")
def cse(op: Operation, options: dict) -> None:
    rw = PatternRewriter()
    for region in op.regions:
        for block in region.blocks:
            _cse_block(block, [], rw)
