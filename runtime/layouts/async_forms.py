"""IR forms the async path's rule (runtime/passes/async_rule.py) and its emitter
(runtime/codegen/async_loop.py) both read, in one place: uniform and zero tiles, and the chain
from a K loop's result to the TMA store that lets the registers go out in the accumulator's
own order (docs/pipelines.md sections 11 and 12)."""

from __future__ import annotations

import math

from typing import Optional

from tilegen.runtime.ir import Operation, OpResult
from tilegen.runtime.layouts.attrs import BlockedLayout, unit_dims_view


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


def plus_zero_tile(v) -> bool:
    """Whether tile ``v`` is +0 everywhere (:func:`zero_tile`, not -0.0): what an MMA that
    overwrites its accumulator starts from."""
    if not zero_tile(v):
        return False
    op = _op(v)
    if op.name == "nv_tileaa.splat":
        op = _op(op.operands[0])
    value = op.attributes["value"]
    vals = getattr(value, "values", None)
    x = float(vals[0]) if vals is not None else float(getattr(value, "value", 0))
    return math.copysign(1.0, x) > 0


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


#: the most tcgen05 accumulator values a thread reads from tensor memory at once after the K
#: loop; a longer row (a 256 x 256 tile on one CTA: 256) is read by column chunks at the TMA
#: store (codegen/tmem_chunks.py), which may then stream the tile through the ring box by box
TMEM_ROWS_AT_ONCE = 128
#: bytes each row of the idle stage ring is padded by where the plain store's tile goes through
#: it to be stored coalesced (codegen/tmem_store.py), per element size: a warp's 32 TMEM rows
#: (16-byte vectors of f32, 4-byte pairs of 16-bit values, single bytes), or a wgmma fragment's
#: 8 rows of 4-byte pairs or 8-byte f32 pairs, then start in distinct banks
RING_PAD = {"rows": {4: 16, 2: 4, 1: 4}, "wgmma": {4: 32, 2: 16, 1: 4}}


def init_in_tmem(loop: Operation, warps: int) -> bool:
    """Whether sm_100's GEMM form writes the K loop's initial value (C, not uniform) into
    tensor memory before the loop, so the first MMA adds to it (codegen/async_tcgen05.py; docs/
    pipelines.md sections 33 and 37), 128 or 256 rows (or 64 on 4 warps): C comes by
    :func:`init_chain`, so the consumers load it in the rows' order whatever its layout
    (codegen/fragment_load.py; a column chunk at a time past ``TMEM_ROWS_AT_ONCE`` values a
    thread; half a row a thread at M 64, ``16x32bx2``), or 128 or 256 rows are laid out as
    the tcgen05 accumulator's rows (register k of a thread is column k of its TMEM row:
    ``tcgen05.st`` writes it as it is), at most ``TMEM_ROWS_AT_ONCE`` values a thread."""
    from tilegen.runtime.layouts.mma_choice import tcgen05_accumulator_layout

    t = loop.operands[3].type
    shape = tuple(getattr(t, "shape", ()))
    if len(shape) != 2 or shape[0] not in (64, 128, 256) or uniform_tile(loop.operands[3]):
        return False
    M, N = shape
    if N % 32 or (M == 256 and warps != 8) or (M == 64 and (warps != 4 or N % 64)):
        return False
    if init_chain(loop) is not None:  # (loaded in the rows' order whatever its layout)
        return True
    if M == 64:  # (half a row a thread: written by 16x32bx2 stores, as loaded)
        return False
    if M * N // (32 * warps) > TMEM_ROWS_AT_ONCE:
        return False
    return t.encoding == tcgen05_accumulator_layout(warps, N, M)


def init_chain(loop: Operation) -> Optional[list]:
    """The values from a ``tiled_load`` of an M x N tile to ``loop``'s initial value (C, as
    cuTile writes ``acc = ct.astype(ct.load(C, ...), ct.float32)``), when nothing else reads
    them: a single-use chain of ``convert_layout``\\ s and elementwise ops whose other operands
    are scalars or uniform tiles, of that shape throughout, from an unmasked load (its padding
    uniform) - of a batched array's (1, M, N) tile too, through a view dropping its leading
    unit dims. Register k then means one element all along, whatever order the registers are
    in, so the emitter may load C straight in the accumulator's own register order (codegen/
    fragment_load.py) and the conversions pass the registers through: no exchange, and no
    scratch beside the stage ring (docs/pipelines.md section 37). None otherwise."""
    v = loop.operands[3]
    shape = tuple(getattr(v.type, "shape", ()))
    if len(shape) != 2 or uniform_tile(v):
        return None
    chain = [v]
    while True:
        op = _op(v)
        vshape = tuple(getattr(v.type, "shape", ()))
        if (
            op is None
            or v.num_uses != 1
            or vshape[-2:] != shape
            or any(n != 1 for n in vshape[:-2])
        ):
            return None
        if op.name in ("nv_tileaa.view", "nv_tileaa.reshape") and len(vshape) == 2:
            src = op.operands[0]
            lead = tuple(getattr(src.type, "shape", ()))
            if len(lead) > 2 and lead[-2:] == shape and all(n == 1 for n in lead[:-2]):
                v = src  # (a batched array's (1, M, N) tile)
                chain.append(v)
                continue
            return None
        if len(vshape) != 2 and op.name != "nv_tileaa.tiled_load":
            return None
        if op.name == "nv_tileaa.tiled_load":
            group = op.opdef.operand_group
            if v is not op.results[0] or group(op, "mask"):
                return None
            if not all(uniform_tile(o) for o in group(op, "other")):
                return None
            return chain[::-1]
        tiles = [o for o in op.operands if getattr(o.type, "rank", 0)]
        varied = [o for o in tiles if not uniform_tile(o)]
        if len(varied) != 1 or not (op.name == "nv_tileas.convert_layout" or elementwise(op)):
            return None
        v = varied[0]
        chain.append(v)


def fragment_chain(
    loop: Operation,
    store: Optional[Operation],
    through_conversion: bool = False,
    result: int = 0,
) -> Optional[list]:
    """The values from ``loop``'s result to the tile the TMA ``store`` writes, when nothing but
    that store reads them in their layout: a single-use chain of elementwise ops on that one
    tile (other operands scalars, uniform tiles or :func:`side_vector` broadcasts) with the
    loop result's layout throughout. Register k then means the same element all along, whatever
    order the registers are in, so the loop can hand over its accumulator registers as they are
    and the store write them by position (no exchange into the layout stage's layout; a side
    vector is read in that order: codegen/fragment_sides.py); else None. ``through_conversion``:
    as the chain will be once the async stage drops a ``convert_layout`` that only feeds the
    store (``async_epilogue.store_unconverted``); the conversion's result ends the chain."""
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
        if through_conversion and user.name == "nv_tileas.convert_layout":
            r = user.results[0]
            value = store.opdef.operand_group(store, "value")[0]
            if r.num_uses == 1 and r.users[0] is store:
                return chain + [r] if value is r else None
            view = r.users[0] if r.num_uses == 1 else None
            if view is not None and stored_view(view, store):  # conversion, view, store
                return chain + [r, view.results[0]]
            return None
        if stored_view(user, store):  # the tile with leading unit dims (a 3-d store)
            r = user.results[0]
            lay = v.type.encoding
            if lay is None and r.type.encoding is None:  # (before the layout stage)
                return chain + [r]
            if not isinstance(lay, BlockedLayout) or r.type.encoding != unit_dims_view(
                lay, tuple(v.type.shape), tuple(r.type.shape)
            ):
                return None
            return chain + [r]
        others = [o for o in user.operands if o is not v and getattr(o.type, "rank", 0)]
        if not elementwise(user) or not all(
            uniform_tile(o) or side_vector(o, v.type) for o in others
        ):
            return None
        r = user.results[0]
        if r.type.shape != v.type.shape or r.type.encoding != v.type.encoding:
            return None
        v = r
        chain.append(v)


def side_vector(v, like) -> bool:
    """Whether tile ``v`` is a *side vector* beside a fragment chain of type ``like`` (M x N):
    a row (1 x N: a bias) or a column (M x 1: a per-row scale) broadcast to M x N in the
    chain's layout, read by nothing else - so the emitter may give it the accumulator's
    register order (codegen/fragment_sides.py)."""
    op = _op(v)
    if op is None or op.name != "nv_tileaa.broadcast" or v.num_uses != 1:
        return False
    shape, src = tuple(getattr(like, "shape", ())), op.operands[0].type
    if len(shape) != 2 or min(shape) < 2 or v.type.encoding != like.encoding:
        return False
    return tuple(v.type.shape) == shape and tuple(getattr(src, "shape", ())) in (
        (1, shape[1]),
        (shape[0], 1),
    )


def chain_sides(chain: list) -> list:
    """The side vector broadcasts (:func:`side_vector`) the ops of ``chain`` read, in order."""
    out = []
    for v in chain[1:]:
        for o in v.op.operands:
            if o not in chain and side_vector(o, v.type) and o.op not in out:
                out.append(o.op)
    return out


def side_bytes(op: Operation) -> int:
    """Bytes a side vector's source takes in shared memory (16-aligned): its elements at their
    register size (predicates as bytes, 16-bit values as 2)."""
    t = op.operands[0].type
    width = getattr(t.element, "width", 64)
    size = 2 if width == 8 else max(1, width // 8)  # (codegen/exchange.scratch_size)
    return -(-max(t.shape) * size // 16) * 16


def stored_view(op: Operation, store: Operation) -> bool:
    """Whether ``op`` is a ``view`` that only puts leading unit dims on a 2-d tile, whose
    result only ``store`` stores (a batched GEMM's ``(1, M, N)`` tile of a 3-d array)."""
    if op.name != "nv_tileaa.view":
        return False
    src, r = op.operands[0].type, op.results[0].type
    shape = tuple(getattr(r, "shape", ()))
    if getattr(src, "rank", 0) != 2 or len(shape) < 3 or any(n != 1 for n in shape[:-2]):
        return False
    if tuple(src.shape) != shape[-2:] or op.results[0].num_uses != 1:
        return False
    return op.results[0].users[0] is store and (
        store.opdef.operand_group(store, "value")[0] is op.results[0]
    )


def deferred_dot(loop: Operation) -> Optional[tuple]:
    """FlashAttention-3's intra-warpgroup overlap (docs/pipelines.md section 16): the loop's last
    dot may run beside the next iteration's first when the body splits in two - part B, the
    last dot and the ops that build only its accumulator operand (``acc * alpha``), and part A,
    everything else - such that the last dot's result goes straight to the ``scf.yield``, the
    iteration argument it replaces is read by part B alone, part A reads nothing part B makes,
    and part B is elementwise ops, broadcasts and views on registers. Returns (the last dot,
    part B's ops in body order, the yield position), or None."""
    body = loop.regions[0].blocks[0]
    ops = list(body.ops)
    dots = [o for o in ops if o.name == "nv_tileaa.dot"]
    if len(dots) < 2 or ops[-1].name != "scf.yield":
        return None
    last = dots[-1]
    res = last.results[0]
    yield_op = ops[-1]
    if res.num_uses != 1 or next(iter(res.users)) is not yield_op:
        return None
    k = list(yield_op.operands).index(res)
    part_b = {id(last): last}
    for o in reversed(ops[: ops.index(last)]):  # what builds only the accumulator operand
        if o.regions or o.name == "nv_tileaa.dot" or len(o.results) != 1:
            continue
        r = o.results[0]
        if not r.has_uses or not all(id(u) in part_b for u in r.users):
            continue
        if o is not _op(last.operands[2]) and not any(
            id(u) in part_b and u is not last for u in r.users
        ):
            continue  # feeds the last dot's A or B operand (P, V): part A
        if not (elementwise(o) or o.name in ("nv_tileaa.broadcast", "nv_tileaa.view")):
            return None
        part_b[id(o)] = o
    acc = body.args[1 + k]
    if not acc.has_uses or not all(id(u) in part_b for u in acc.users):
        return None
    for o in ops:
        if id(o) in part_b or o is yield_op:
            continue
        if any(id(getattr(v, "op", None)) in part_b for v in o.operands):
            return None
    return last, [o for o in ops if id(o) in part_b], k


#: ops between a staged load and its dot that the consumers read through (:func:`operand_load`)
PASS_THROUGH = ("nv_tileaa.view", "nv_tileaa.reshape", "nv_tileaa.permute")


def operand_load(v) -> tuple:
    """(the ``tiled_load`` dot operand ``v`` comes from, whether it arrives transposed), seen
    through the views and reshapes that drop leading unit dims (a ``(1, M, K)`` load of a
    batched array) and a permute of the last two dims (B loaded N x K: K-major, ``x @ W^T``);
    (None, False) for anything else. (An f32 -> tf32 conversion is seen through by the
    caller.)"""
    from tilegen.runtime.layouts.staging import chain_to_dot

    chain = []
    while isinstance(v, OpResult) and v.op.name in PASS_THROUGH:
        chain.append(v.op)
        v = v.op.operands[0]
    if not isinstance(v, OpResult) or v.op.name != "nv_tileaa.tiled_load" or not chain:
        return (v.op if isinstance(v, OpResult) else None), False
    found = chain_to_dot(v, v.type.rank - 2)
    if found is None:
        return None, False
    ops = found[0]
    if found[4]:  # (the f32 -> tf32 conversion after the chain, seen through by the caller)
        ops = ops[:-1] if ops and ops[-1].name == "nv_tileaa.fp_to_fp" else None
    if ops != chain[::-1]:
        return None, False
    return v.op, found[3]
