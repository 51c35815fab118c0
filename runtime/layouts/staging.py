"""Which dot operands travel by ``cp.async`` and which K loops prefetch them (docs/codegen.md,
"Dot operands by cp.async, K-loop pipelining").

The layout stage decides, and records on the IR (runtime/layouts/decisions.py):

* :func:`cp_async_width`: a ``tiled_load`` whose tile's only use is operand A or B of a ``dot``
  in the same block (directly or through :func:`chain_to_dot`) is *staged*: not loaded into
  registers, but copied by the dot straight into its shared-memory operand buffer, this many
  elements per ``cp.async`` (under 4 bytes: through registers, a chunk at a time);
* :func:`pipeline_loads`: an ``scf.for`` that writes no memory and whose body has staged loads
  with indices computed only from the induction variable and loop-invariant values (through
  pure ops) prefetches those loads ``num_stages - 1`` iterations ahead.

Code generation builds the copies from these decisions; where shared memory does not hold the
stage buffers it may pipeline fewer stages or loads, never more.
"""

from __future__ import annotations

import math
from typing import Optional

from tilegen.runtime.ir import Operation
from tilegen.runtime.layouts.access import analyze_memref_access
from tilegen.runtime.layouts.mma_choice import element_key, key_bytes
from tilegen.runtime.types import NvMemRefType, TileType

#: ops that may write memory or synchronize (no staged load moves past them; no pipelined loop
#: contains them)
SIDE_EFFECTS = ("store", "atomic", "scatter", "print", "assert", "call", "barrier")
#: ops an index computation may consist of, to be re-emitted for a prefetched iteration
PURE_INDEX_OPS = (
    "arith.",
    "nv_tileaa.assume",
    "nv_tileaa.get_dim_size",
    "nv_tileaa.get_program_id",
    "nv_tileaa.get_num_programs",
)
#: element types a staged copy can carry (no i1: predicates are not bytes in registers)
_STAGEABLE = {"i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "tf32", "f8E4M3FN", "f8E5M2"}


def _group(op: Operation, name: str) -> list:
    return list(op.opdef.operand_group(op, name))


def is_zero_splat(v) -> bool:
    """Whether ``v`` is a splat of the constant +0 (cp.async's zero fill is that padding)."""
    op = getattr(v, "op", None)
    if op is None or op.name != "nv_tileaa.splat":
        return False
    c = getattr(op.operands[0], "op", None)
    if c is None or c.name != "arith.constant":
        return False
    a = c.attributes.get("value")
    x = getattr(a, "value", None)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return x == 0 and math.copysign(1.0, x) > 0 if isinstance(x, float) else x == 0


def chain_to_dot(res, lead: int):
    """Follow single uses of the loaded tile ``res`` through a view dropping its ``lead``
    leading unit dims, a permute swapping the last two dims, an f32 -> tf32 ``fp_to_fp``, to a
    dot operand: (chain ops, dot, operand index, transposed, conversion) or None."""
    chain, transposed, convert, v = [], False, None, res
    while True:
        if v.num_uses != 1:
            return None
        user, idx = v.uses[0]
        if user.name == "nv_tileaa.dot":
            if idx not in (0, 1) or len(user.operands) != 3 or v.type.rank != 2:
                return None
            return chain, user, idx, transposed, convert
        out = user.results[0] if user.results else None
        if out is None or len(user.results) != 1:
            return None
        if user.name in ("nv_tileaa.view", "nv_tileaa.reshape"):
            if tuple(out.type.shape) != tuple(v.type.shape)[-2:] or any(
                d != 1 for d in tuple(v.type.shape)[:-2]
            ):
                return None
        elif user.name == "nv_tileaa.permute":
            perm = [int(x) for x in user.attributes["permutation"].values]
            r = len(perm)
            if r < 2 or perm != list(range(r - 2)) + [r - 1, r - 2] or convert:
                return None
            transposed = not transposed
        elif user.name == "nv_tileaa.fp_to_fp":
            if (element_key(v.type), element_key(out.type)) != ("f32", "tf32") or convert:
                return None
            convert = user  # (its instruction: selection.conversion_ptx)
        else:
            return None
        chain.append(user)
        v = out


def dot_paths(res, lead: int) -> Optional[list]:
    """Every path of uses of the loaded tile ``res`` to a dot operand, each as
    :func:`chain_to_dot` gives one (chain ops, dot, operand index, transposed, conversion): a
    tile some dots read as loaded and others transposed (the attention backward's K: ``QK^T``
    and ``dS K``). None when a use leads anywhere else."""
    out: list = []
    stack = [(res, [], False)]
    while stack:
        v, chain, transposed = stack.pop()
        if not v.has_uses:
            return None
        for user, idx in v.uses:
            if user.name == "nv_tileaa.dot":
                if idx not in (0, 1) or len(user.operands) != 3 or v.type.rank != 2:
                    return None
                out.append((chain, user, idx, transposed, None))
                continue
            out_v = user.results[0] if len(user.results) == 1 else None
            if out_v is None:
                return None
            if user.name in ("nv_tileaa.view", "nv_tileaa.reshape"):
                if tuple(out_v.type.shape) != tuple(v.type.shape)[-2:] or any(
                    d != 1 for d in tuple(v.type.shape)[:-2]
                ):
                    return None
                stack.append((out_v, chain + [user], transposed))
            elif user.name == "nv_tileaa.permute":
                perm = [int(x) for x in user.attributes["permutation"].values]
                r = len(perm)
                if r < 2 or perm != list(range(r - 2)) + [r - 1, r - 2]:
                    return None
                stack.append((out_v, chain + [user], not transposed))
            else:
                return None
    return out or None


def _enum(op: Operation, name: str) -> int:
    a = op.attributes.get(name)
    return 0 if a is None else a.value


def cp_async_width(op: Operation) -> int:
    """Elements per ``cp.async`` when ``tiled_load`` ``op`` can be staged for its dot, else 0:
    a weak load through a global memref whose last dim has unit stride, leading tile dims of
    extent 1, no mask, zero (or no) padding, its tile used only by a dot later in the same block
    (through :func:`chain_to_dot`) with no memory writes in between, power-of-two tile dims.
    The width is the elements per chunk proven aligned by ``analyze_memref_access``, at most 16
    bytes (a chunk straddling the end of the last dim is fine: src-size copies its in-bounds
    part and zero-fills the rest); under 4 bytes (a row pitch of no 4-byte multiple) the copy
    goes through registers, a 16-byte chunk at a time (``memory.cp_async_tile``)."""
    if op.name != "nv_tileaa.tiled_load":
        return 0
    t = op.results[0].type
    if not isinstance(t, TileType) or t.rank < 2 or any(d != 1 for d in t.shape[:-2]):
        return 0
    found = chain_to_dot(op.results[0], t.rank - 2)
    if found is None:
        return 0
    chain, user = found[0], found[1]
    if user.parent is not op.parent or op.parent is None:
        return 0
    if any(c.parent is not op.parent for c in chain):
        return 0
    if _enum(op, "mem_semantic") != 0 or "volatile" in op.attributes or _group(op, "mask"):
        return 0
    other = _group(op, "other")
    if other and not is_zero_splat(other[0]):
        return 0
    mt = _group(op, "base")[0].type
    if not isinstance(mt, NvMemRefType) or getattr(mt, "address_space", 1) != 1:
        return 0
    key = element_key(mt.element)
    if key not in _STAGEABLE or mt.stride_values[-1] != 1:
        return 0
    if mt.rank != t.rank or any(s & (s - 1) for s in t.shape):
        return 0
    ops = op.parent.ops
    i, j = ops.index(op), ops.index(user)
    for mid in ops[i + 1 : j]:
        if mid.regions or any(w in mid.name for w in SIDE_EFFECTS):
            return 0
    info = analyze_memref_access(op)
    if info is None or info.order[0] != t.rank - 1:
        return 0
    esz = key_bytes(key)
    lim = [v for k, v in info.limits.items() if not k.startswith("extent of dim")]
    vec = 1
    while vec * 2 <= min(lim + [16 // esz, t.shape[-1]]):
        vec *= 2
    return vec


def index_slice(load: Operation, loop: Operation) -> Optional[list[Operation]]:
    """The ops of ``loop``'s body that compute ``load``'s indices (to be re-emitted for a
    prefetched iteration), or None when an index depends on anything but the induction
    variable and loop-invariant values through pure ops, or the memref is defined in the
    loop."""
    body = loop.regions[0].blocks[0]
    iv = body.args[0]
    inner = {r for o in loop.walk() if o is not loop for r in o.results}
    inner.update(body.args)
    if _group(load, "base")[0] in inner:
        return None
    need = _group(load, "indices")
    seen: set = set()
    while need:
        v = need.pop()
        if v is iv or v not in inner or v in seen:
            continue
        seen.add(v)
        d = getattr(v, "op", None)
        if d is None or d.parent is not body or d.regions or not d.name.startswith(PURE_INDEX_OPS):
            return None
        need += list(d.operands)
    return [o for o in body.ops if any(r in seen for r in o.results)]


def through_registers(op: Operation, width: int) -> bool:
    """Whether a staged load's copy of ``width`` elements a chunk is synchronous (under 4
    bytes: no cp.async; ``memory.cp_async_tile`` copies it through registers)."""
    mt = _group(op, "base")[0].type
    return width * key_bytes(element_key(mt.element)) < 4


def pipeline_loads(loop: Operation, staged) -> list[Operation]:
    """The loads of ``scf.for`` ``loop``'s body to prefetch across iterations: those in
    ``staged`` (loads with a cp.async width) whose :func:`index_slice` exists; none when the
    loop writes memory. ``staged`` holds only asynchronous copies: a copy through registers
    stalls its warp until the loads land, so prefetching it would buy no overlap for a stage
    buffer of shared memory."""
    for o in loop.walk():
        if o is not loop and any(w in o.name for w in SIDE_EFFECTS):
            return []
    body = loop.regions[0].blocks[0]
    return [ld for ld in body.ops if ld in staged and index_slice(ld, loop) is not None]
