"""The GEMM form's prologue, split between the warp groups (docs/pipelines.md section 29).

The producer warp group needs only scalars from the kernel's prologue: the K loop's bounds, the
staged loads' indices and the memrefs its tensor maps describe. What reads memory or holds a tile
before the loop (``C`` loaded as the initial accumulator, a bias row, their conversions) is the
consumers' alone: the emitter defers those ops into the consumers' branch, after the warp groups
split (``async_loop.async_for``), so the producer neither repeats the reads nor runs their
layout exchanges (its warps would address rows past the tile) and the tiles are not live across
``setmaxnreg``. :func:`prologue_reason` is the rule (``async_rule`` applies it);
:func:`consumer_prologue` the split both share.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.codegen.core import is_tile
from tilegen.runtime.ir import OpResult

#: what must not run before the K loop: the consumers alone would run it (once per consumer
#: thread, not per CTA), and no rule here orders it against the producer's copies
WRITES = ("store", "atomic", "scatter", "print", "assert")
#: what reads memory: the consumers alone run it
READS = ("load", "gather")


def _kind(op) -> str:
    return op.name.split(".")[-1]


def consumer_prologue(block, loop) -> list:
    """The ops of ``block`` (the kernel's top level) before ``loop`` that read memory or hold a
    tile, and those computed from them: the consumers' part of the prologue, in order."""
    out, mine = [], set()
    for op in block.ops:
        if op is loop:
            break
        own = any(w in _kind(op) for w in READS) or any(is_tile(r.type) for r in op.results)
        if own or any(isinstance(v, OpResult) and id(v.op) in mine for v in op.operands):
            mine.add(id(op))
            out.append(op)
    return out


def prologue_reason(block, loop) -> Optional[str]:
    """Why the prologue before ``loop`` cannot be split between the warp groups, or None: no
    region and nothing that writes memory runs before the loop, and no scalar the producer
    may need (the loop's bounds, anything its body uses) comes from the consumers' part."""
    for op in block.ops:
        if op is loop:
            break
        if op.regions or any(w in _kind(op) for w in WRITES):
            return f"'{op.name}' runs before the K loop (the producer would run it too)"
    theirs = {id(r): o for o in consumer_prologue(block, loop) for r in o.results}
    used = list(loop.operands[:3]) + [v for o in loop.walk() if o is not loop for v in o.operands]
    for v in used:
        if id(v) in theirs and not is_tile(v.type):
            name = theirs[id(v)].name
            return f"the K loop uses a scalar of '{name}', which reads memory before the loop"
    return None
