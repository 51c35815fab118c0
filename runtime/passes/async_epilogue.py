"""The async rule's epilogue: which ``tiled_store`` after the K loop the consumers write by
TMA through the idle stage ring (:func:`tma_store_plan`) or from their accumulator's own order
(:func:`tmem_store_plan`), whether the accumulator stays in registers up to it
(:func:`registers_only`), and the rewrites that store's tile and side vectors take
(:func:`store_unconverted`, :func:`side_compact`; docs/pipelines.md sections 8, 32, 36, 44)."""

from __future__ import annotations

from math import prod
from typing import Optional

from tilegen.runtime.ir import BlockArgument, Operation, OpResult
from tilegen.runtime.layouts.async_forms import (
    RING_PAD,
    TMEM_ROWS_AT_ONCE,
    chain_sides,
    elementwise,
    fragment_chain,
    init_chain,
    init_in_tmem,
    side_bytes,
    stored_view,
    uniform_tile,
)
from tilegen.runtime.layouts.attrs import BlockedLayout, unit_dims_view
from tilegen.runtime.layouts.decisions import VECTOR_WIDTH
from tilegen.runtime.passes.async_decision import ASYNC_MMA, MEMORY_OPS, loop_dot
from tilegen.runtime.types import TileType


def epilogue_store(func: Operation, loop: Operation) -> tuple:
    """(the one ``tiled_store`` after ``loop`` at the kernel's top level, of a tile that depends
    on the loop's result, None) or (None, why not): beside it only loads of row or column
    vectors."""
    ops = func.regions[0].blocks[0].ops
    after = ops[ops.index(loop) + 1 :]
    mem = [o for o in after if o.regions or any(w in o.name.split(".")[-1] for w in MEMORY_OPS)]
    stores = [o for o in mem if o.name == "nv_tileaa.tiled_store"]
    if len(stores) != 1 or not all(o is stores[0] or _vector_load(o) for o in mem):
        return None, "the epilogue is not one tiled_store (beside loads of row or column vectors)"
    store = stores[0]
    deps, todo = set(), [store.opdef.operand_group(store, "value")[0]]
    while todo:  # does the stored tile depend on the loop's result?
        v = todo.pop()
        if not isinstance(v, OpResult) or id(v.op) in deps:
            continue
        deps.add(id(v.op))
        todo.extend(v.op.operands)
    if id(loop) not in deps:
        return None, "the stored tile does not come from the K loop"
    return store, None


def tmem_store_plan(
    func: Operation,
    loop: Operation,
    sm: int,
    warps: int,
    pair: bool = False,
    ring: Optional[int] = None,
) -> Optional[Operation]:
    """The epilogue's plain ``tiled_store`` (:func:`epilogue_store`, no mask) that the consumers
    write from their accumulator's own order, coalesced through the idle stage ring
    (codegen/tmem_store.py; docs/pipelines.md sections 44 and 45), or None. Where TMA cannot
    store the tile (a row stride of no 16-byte multiple: an LM head's 32,001 columns), the
    registers otherwise went through a scratch buffer the size of the tile (64 KB at 128 x 128
    f32) to the layout the layout stage gave the result, a 1 x N side vector (a bias) was
    loaded whole beside a whole row of accumulators (fuzz seed 704626 spilled 128 B), and a
    warp's stores wrote 32 rows (sm_100) or 8 (sm_90) at a time. The rule: one CTA (no pair),
    the GEMM form (no scaled accumulate), a :func:`fragment_chain` from the loop's result to
    the store, and
    * sm_100: 4 warps and 64 or 128 rows (64: half a row a thread, ``16x32bx2``) or 8 warps
      and 128 or 256, a uniform initial value or one written into TMEM (:func:`init_in_tmem`),
      the loop result in the TMEM rows' layout (``tcgen05_accumulator_layout``); the
      accumulator is read from TMEM a column chunk at a time;
    * sm_90: a uniform initial value or one loaded in the wgmma fragment's order
      (:func:`init_chain`), and the tile, its rows padded, within ``ring`` bytes less the side
      vectors' (the registers go into the ring whole)."""
    from tilegen.runtime.layouts.mma_choice import tcgen05_accumulator_layout

    mma = ASYNC_MMA.get(sm)
    if pair or mma not in ("tcgen05", "wgmma") or len(loop.results) != 1:
        return None
    if not isinstance(loop_dot(loop).operands[2], BlockArgument):
        return None  # (the scaled accumulate: async_scaled.py)
    t = loop.results[0].type
    shape = tuple(getattr(t, "shape", ()))
    if len(shape) != 2:
        return None
    M, N = shape
    uniform = uniform_tile(loop.operands[3])
    if mma == "tcgen05":
        if (M, warps) not in ((64, 4), (128, 4), (128, 8), (256, 8)) or (
            M * N // (32 * warps)
        ) % 32:
            return None
        if t.encoding != tcgen05_accumulator_layout(warps, N, M):
            return None
        if not uniform and not init_in_tmem(loop, warps):
            return None
    elif N % 32 or not (uniform or init_chain(loop) is not None):
        return None
    store, _ = epilogue_store(func, loop)
    if store is None or store.opdef.operand_group(store, "mask"):
        return None
    if fragment_chain(loop, store) is None:
        return None
    if mma == "wgmma" and ring is not None:
        from tilegen.runtime.layouts.access import element_bytes

        value = store.opdef.operand_group(store, "value")[0]
        esz = element_bytes(store.opdef.operand_group(store, "base")[0].type.element)
        pad = RING_PAD["wgmma"].get(esz, 16)
        if M * (N + pad // esz) * esz > ring - sides_reserve(loop, store):
            return None
        if value.type.shape[-2:] != (M, N):
            return None
    return store


def tma_store_plan(
    func: Operation,
    loop: Operation,
    stages: int,
    stage_bytes: int,
    pair: bool = False,
    sm: int = 0,
    warps: int = 4,
) -> tuple:
    """(the ``tiled_store`` the epilogue writes through TMA, None) or (None, why not). The rule
    (docs/pipelines.md section 8): after the async loop, the kernel's top level holds exactly
    one memory op, a ``tiled_store`` of a tile that depends on the loop's result, which
    :func:`~.k_loop_pipelining.tma_store_describable` accepts, and whose tile fits in the stage
    ring (idle once the loop is done: it stages the tile for the copy) - or, where sm_100's
    consumers read the accumulator by chunks (:func:`_streams`, on ``sm`` with ``warps``), two
    of its 128-byte column boxes do (section 32)."""
    from tilegen.runtime.layouts.access import element_bytes
    from tilegen.runtime.passes.k_loop_pipelining import tma_store_describable

    store, why = epilogue_store(func, loop)
    if store is None:
        return None, why
    why = tma_store_describable(store)
    if why is not None:
        return None, why
    tile = store.opdef.operand_group(store, "value")[0].type
    mt = store.opdef.operand_group(store, "base")[0].type
    nbytes = prod(tile.shape) * element_bytes(mt.element) // (2 if pair else 1)  # (a CTA's rows)
    ring = stages * stage_bytes - sides_reserve(loop, store)
    if nbytes > ring and not (
        not pair
        and len(tile.shape) >= 2
        and (tile.shape[-1] * element_bytes(mt.element)) % 128 == 0
        and 2 * tile.shape[-2] * 128 <= ring
        and _streams(func, loop, sm, warps)
    ):
        return None, f"the {nbytes}-byte tile does not fit in the {ring}-byte ring"
    return store, None


def _vector_load(op: Operation) -> bool:
    """A ``tiled_load`` of a row or column vector (at most one dim over 1): an epilogue's bias
    or scale, beside the TMA store."""
    if op.name != "nv_tileaa.tiled_load" or op.regions:
        return False
    shape = getattr(op.results[0].type, "shape", ())
    return sum(n > 1 for n in shape) <= 1


def sides_reserve(loop: Operation, store: Operation) -> int:
    """Bytes at the end of the stage ring that hold the side vectors of the loop's fragment
    chain to the TMA ``store`` (async_forms.chain_sides; codegen/fragment_sides.py): the store
    stages its tile in the rest."""
    chain = fragment_chain(loop, store, through_conversion=True)
    return sum(side_bytes(o) for o in chain_sides(chain)) if chain else 0


def _streams(func: Operation, loop: Operation, sm: int, warps: int) -> bool:
    """Whether sm_100's consumers read the loop's accumulator from tensor memory by column
    chunks at the TMA store (codegen/tmem_chunks.py): the registers-only form whose thread row
    holds more than ``TMEM_ROWS_AT_ONCE`` values (a 256 x 256 tile on 8 warps: 256). The store
    may then go through the ring box by box."""
    if sm < 100 or ASYNC_MMA.get(sm) != "tcgen05" or len(loop.results) != 1:
        return False
    shape = getattr(loop.results[0].type, "shape", ())
    if len(shape) != 2 or shape[0] not in (128, 256):
        return False
    per = shape[0] * shape[1] // (32 * warps)
    return (
        per > TMEM_ROWS_AT_ONCE
        and (uniform_tile(loop.operands[3]) or init_in_tmem(loop, warps))
        and registers_only(func, loop, sm, shape[0], warps)
    )


def registers_only(
    func: Operation, loop: Operation, sm: int, M: int, tmem_warps: int = 0, fragment=False
) -> bool:
    """Whether the emitter keeps the accumulator out of the scratch buffer: a uniform initial
    value goes straight into the registers (or, with ``tmem_warps`` - one CTA of that many
    warps - a non-uniform one into tensor memory on sm_100, :func:`init_in_tmem`, or loaded
    in the wgmma fragment's order on sm_90, :func:`init_chain`, also by each CTA of a pair:
    ``fragment``, on sm_100 into its TMEM rows), the result reaches
    the TMA store by :func:`fragment_chain` (sm_100: the TMEM row order of M = 128), and nothing
    else after the loop holds a tile that is not uniform (which a layout exchange might stage
    there)."""
    if sm >= 100 and M not in (128, 256) and not (M == 64 and (tmem_warps == 4 or fragment)):
        return False  # (M 64 on one CTA of 4 warps: 16x32bx2 loads, codegen/async_tcgen05.py;
        # or a pair's 64-row half: M is one CTA's rows where ``fragment``)
    in_tmem = sm >= 100 and tmem_warps and init_in_tmem(loop, tmem_warps)
    # (sm_90, one CTA: C loaded straight in the wgmma fragment's order, codegen/fragment_load;
    # a pair's CTA: its own rows of C, into its fragment or, on sm_100, its TMEM rows)
    in_fragment = ASYNC_MMA.get(sm) in ("wgmma", "tcgen05") and (tmem_warps or fragment)
    in_fragment = in_fragment and (sm < 100 or fragment) and init_chain(loop) is not None
    if not uniform_tile(loop.operands[3]) and not (in_tmem or in_fragment):
        return False
    store, _ = tma_store_plan(func, loop, 1 << 20, 1 << 20)  # (the ring's size checked later)
    chain = fragment_chain(loop, store, through_conversion=True)  # (store_unconverted's)
    if chain is None and tmem_warps:  # (or st.global from the TMEM rows)
        store = tmem_store_plan(func, loop, sm, tmem_warps)
        chain = fragment_chain(loop, store)
    if chain is None:
        return False
    ops = func.regions[0].blocks[0].ops
    inside = {id(v.op) for v in chain[1:]} | {id(store)} | {id(o) for o in chain_sides(chain)}
    for op in ops[ops.index(loop) + 1 :]:
        if id(op) in inside:
            continue
        if any(_wide(r) and not uniform_tile(r) for r in op.results):
            return False
    return True


def _wide(v) -> bool:
    """A tile with more than one dim over 1 (a row or column vector's exchanges are small: the
    idle ring holds them)."""
    return sum(n > 1 for n in getattr(v.type, "shape", ())) > 1


def store_unconverted(store: Operation) -> None:
    """A TMA-stored tile is written row-major into the stage ring from whatever layout its
    registers have (async_store.tma_store_epilogue), so a ``convert_layout`` that only fed the
    store (to the plain store's vectorised layout) is a wasted exchange through shared memory:
    the store reads the conversion's source instead, and the conversion goes."""
    value = store.opdef.operand_group(store, "value")[0]
    user = store
    view = value.op if isinstance(value, OpResult) and stored_view(value.op, store) else None
    if view is not None:  # a 3-d store's (1, M, N) view: the view reads the source instead
        user, value = view, view.operands[0]
    conv = value.op if isinstance(value, OpResult) else None
    if conv is None or conv.name != "nv_tileas.convert_layout" or value.num_uses != 1:
        return
    src = conv.operands[0]
    if view is not None:
        if not isinstance(src.type.encoding, BlockedLayout):
            return
        r = view.results[0]
        lay = unit_dims_view(src.type.encoding, tuple(src.type.shape), tuple(r.type.shape))
        if lay is None:
            return
        r.type = TileType(r.type.shape, r.type.element, lay)
    index = next(i for i, v in enumerate(user.operands) if v is value)
    user.set_operand(index, src)
    conv.erase()


#: ops a side vector passes through on its way from its load to the broadcast
_SIDE_PATH = ("nv_tileas.convert_layout", "nv_tileaa.view", "nv_tileaa.reshape")


def side_compact(broadcast: Operation) -> None:
    """A side vector (async_forms.side_vector) is read in the accumulator's register order from
    shared memory whatever its own layout (codegen/fragment_sides.py), but the layout stage
    gave it the accumulator layout's slice: a TMEM row's slice holds the whole vector in every
    thread (128 loads and registers a thread beside 128 accumulators), a wgmma-like one copies
    it over the rows. So the vector's path from its ``tiled_load`` to the broadcast - single-use
    casts, views and conversions of the vector alone - takes a compact layout instead (element
    i in thread i / v, no copies), and its conversions go. Anything else on the path: only the
    conversions right before the broadcast go (their exchange is wasted)."""
    path, v = [], broadcast.operands[0]
    while isinstance(v, OpResult) and v.num_uses == 1:
        op = v.op
        tiles = [o for o in op.operands if getattr(o.type, "rank", 0)]
        if op.name not in _SIDE_PATH and not (elementwise(op) and len(tiles) == 1):
            break
        path.append(op)
        v = tiles[0]
    load = v.op if isinstance(v, OpResult) and v.num_uses == 1 else None
    enc = broadcast.results[0].type.encoding
    if load is not None and load.name == "nv_tileaa.tiled_load" and isinstance(enc, BlockedLayout):
        group = load.opdef.operand_group
        other = group(load, "other")
        if not group(load, "mask") and all(uniform_tile(o) and o.num_uses == 1 for o in other):
            warps = prod(enc.warps_per_cta)
            for o in other:
                _retype(o, _compact(o.type.shape, warps))
            _retype(load.results[0], _compact(load.results[0].type.shape, warps))
            width = load.attributes.get(VECTOR_WIDTH)
            if width is not None:  # (the new layout's run of elements a thread, at most)
                from tilegen.runtime.attributes import IntegerAttr
                from tilegen.runtime.types import I32

                each = max(load.results[0].type.shape) // (32 * warps)
                load.set_attr(VECTOR_WIDTH, IntegerAttr(max(1, min(width.value, each)), I32))
            for op in reversed(path):
                if op.name == "nv_tileas.convert_layout":
                    op.results[0].replace_all_uses_with(op.operands[0])
                    op.erase()
                else:
                    _retype(op.results[0], _compact(op.results[0].type.shape, warps))
            return
    # no compact path: drop the conversions between the last casts and the broadcast
    between, v = [], broadcast.operands[0]
    while isinstance(v, OpResult) and v.num_uses == 1 and v.op.name != "nv_tileas.convert_layout":
        tiles = [o for o in v.op.operands if getattr(o.type, "rank", 0)]
        if not elementwise(v.op) or len(tiles) != 1:
            return
        between.append(v.op)
        v = tiles[0]
    conv = v.op if isinstance(v, OpResult) and v.num_uses == 1 else None
    if conv is None or conv.name != "nv_tileas.convert_layout":
        return
    src = conv.operands[0]
    for op in between:
        _retype(op.results[0], src.type.encoding)
    conv.results[0].replace_all_uses_with(src)
    conv.erase()


def _compact(shape, warps: int) -> BlockedLayout:
    """A vector's layout without copies: element i in thread i / v (v = its size / threads,
    at least 1), along its one dim over 1."""
    n, dim = len(shape), max(range(len(shape)), key=lambda i: shape[i])
    each = max(1, shape[dim] // (32 * warps))
    one = lambda k: tuple(k if i == dim else 1 for i in range(n))  # noqa: E731
    order = (dim,) + tuple(i for i in reversed(range(n)) if i != dim)
    return BlockedLayout(one(each), one(32), one(warps), order)


def _retype(v, encoding) -> None:
    v.type = TileType(v.type.shape, v.type.element, encoding)
