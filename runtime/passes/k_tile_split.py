"""``nv-tileaa-split-k-tiles``: a GEMM's K loop whose K tile is too deep for two pipeline stages
in shared memory iterates over parts of that tile instead (docs/pipelines.md section 35).

A 256 x 256 x 128 bf16 tile stages 128 KB of A and B an iteration: two stages do not fit in
sm_100's 227 KB (nor a 128 x 128 x 128 f16 tile's two 64 KB stages in sm_120's 99 KB), so the
async path refused such kernels and today's path spilled. tileiras stages a part of the K tile
at a time. Here the loop ``for k: acc = dot(A[:, k], B[k, :], acc)`` becomes::

    for kk in [S lb, S ub):  k = kk / S;  r = kk % S
        acc = dot(A[:, k][:, r part], B[k, :][r part, :], acc)

each load reading its K extent ``TK / S`` at the original index plus ``r TK / S`` (same elements,
same zero fill out of bounds). The parts run in K order, so the tensor cores see the same
sequence of MMA instructions, accumulating in the same order. ``S`` (:func:`split_factor`): on
the async targets, the smallest power of two that fits three stages, keeping each part's K rows
at least 32 bytes; on ``mma.sync`` targets before sm_90, K rows of at most 128 bytes where the
accumulator is large; on the async targets where an operand cannot be a TMA copy (today's path),
K tiles of at most 64 elements (deeper tiles spilled in both cases).

The loop qualifies when it is the GEMM form the async path takes: one iteration argument, the
dot accumulating into it and yielded, its operands each a ``tiled_load`` of the body (through
views dropping unit dims, a 2-d transpose and an f32 -> tf32 conversion), nothing else in the
body but scalar index arithmetic and splats, constant lower bound >= 0 and step 1.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import IntegerAttr
from tilegen.runtime.ir import BlockArgument, Operation, OpResult, Value
from tilegen.runtime.passes.registry import register
from tilegen.runtime.rewrite.rewriter import PatternRewriter
from tilegen.runtime.types import TileType

#: ops between a staged load and the dot that keep the K extent's elements in order
_CHAIN = ("nv_tileaa.view", "nv_tileaa.permute", "nv_tileaa.fp_to_fp")
#: the fewest bytes of one K row of a part (the async path's smallest K box)
MIN_K_BYTES = 32
#: ``mma.sync`` targets: the deepest K row staged at once, where the accumulator takes at
#: least ``MMA_SYNC_ACC_REGS`` registers a thread (:func:`split_factor`)
MMA_SYNC_K_BYTES = 128
MMA_SYNC_ACC_REGS = 128
#: async targets whose loop keeps today's path (an operand TMA cannot copy): the deepest K
#: tile, in elements
NO_TMA_K = 64


def _const(v: Value) -> Optional[int]:
    d = v.op if isinstance(v, OpResult) else None
    if d is None or d.name != "arith.constant":
        return None
    value = getattr(d.attributes.get("value"), "value", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _operand_chain(v: Value, kd: int) -> Optional[tuple]:
    """(the load, the ops from it to the dot operand ``v`` in order, the load's K dim) when
    ``v`` (whose K dim is ``kd``) is a ``tiled_load``'s result through :data:`_CHAIN` ops."""
    chain = []
    while isinstance(v, OpResult) and v.op.name in _CHAIN:
        op = v.op
        src = op.operands[0]
        if v.num_uses != 1 or not isinstance(src.type, TileType):
            return None
        if op.name == "nv_tileaa.permute":
            perm = getattr(op.attributes.get("permutation"), "values", None)
            if src.type.rank != 2 or list(perm or ()) != [1, 0]:
                return None
            kd = 1 - kd
        elif op.name == "nv_tileaa.view":  # only leading unit dims added or dropped
            a, b = tuple(src.type.shape), tuple(v.type.shape)
            lo, hi = (a, b) if len(a) >= len(b) else (b, a)
            if len(lo) - len(hi) < 0 or lo[len(lo) - len(hi) :] != hi:
                return None
            if any(n != 1 for n in lo[: len(lo) - len(hi)]):
                return None
            kd += src.type.rank - v.type.rank
        chain.append(op)
        v = src
    if not isinstance(v, OpResult) or v.op.name != "nv_tileaa.tiled_load" or v.num_uses != 1:
        return None
    if v is not v.op.results[0]:
        return None
    seg = _segments(v.op)
    if seg["mask"][1] or seg["indices"][1] != v.type.rank:
        return None  # (a mask would need splitting too; one index per dim)
    if seg["other"][1]:
        pad = v.op.operands[seg["other"][0]]
        if not isinstance(pad, OpResult) or pad.op.name != "nv_tileaa.splat":
            return None
    return v.op, chain[::-1], kd


def _gemm_loop(loop: Operation) -> Optional[tuple]:
    """(the dot, [(load, chain, K dim) of A, of B]) when ``loop`` is the GEMM form (module
    docstring), else None."""
    if loop.name != "scf.for" or "unsignedCmp" in loop.attributes or len(loop.results) != 1:
        return None
    lb, step = _const(loop.operands[0]), _const(loop.operands[2])
    if lb is None or lb < 0 or step != 1:
        return None
    body = loop.regions[0].blocks[0]
    ops = body.ops
    if not ops or ops[-1].name != "scf.yield":
        return None
    dots = [o for o in ops if o.name == "nv_tileaa.dot"]
    if len(dots) != 1:
        return None
    dot = dots[0]
    if dot.operands[2] is not body.args[1] or ops[-1].operands[0] is not dot.results[0]:
        return None
    if body.args[1].num_uses != 1:
        return None
    sides = [_operand_chain(dot.operands[0], 1), _operand_chain(dot.operands[1], 0)]
    if None in sides:
        return None
    staged = {id(s[0]) for s in sides} | {id(o) for s in sides for o in s[1]}
    for op in ops[:-1]:
        if op is dot or id(op) in staged:
            continue
        if op.regions or op.name.endswith(("load", "store", "atomic_rmw", "print", "assert")):
            return None
        if any(isinstance(r.type, TileType) for r in op.results) and op.name != "nv_tileaa.splat":
            return None
    return dot, sides


def _bytes(t: TileType) -> int:
    from tilegen.runtime.layouts.access import element_bytes

    n = element_bytes(t.element)
    for d in t.shape:
        n *= d
    return n


def split_factor(func: Operation, dot: Operation, sides: list, sm: int) -> int:
    """How many parts each K tile is staged in.

    * The async targets (TMA stages): 1 where two stages of the whole tile fit the target's
      shared memory, else the smallest power of two that fits three stages (1 where none does,
      its parts' K rows kept at least :data:`MIN_K_BYTES` bytes). On sm_90 the first of
      these whose ring also leaves the epilogue its room (:func:`_epilogue_room`), where one
      does.
    * ``mma.sync`` targets before sm_90 (cp.async stages, today's path): K rows of at most
      :data:`MMA_SYNC_K_BYTES` bytes where the accumulator takes at least
      :data:`MMA_SYNC_ACC_REGS` registers a thread; deeper tiles spilled (fuzzer seeds 20027,
      40072, 50066, 50162: 128 x 128 x 128 f16 on 4 warps, 88-552 bytes) where tileiras's
      builds did not.
    * The async targets where an operand TMA cannot copy (today's path): K tiles of at most
      :data:`NO_TMA_K` elements."""
    from tilegen.runtime.layouts.access import element_bytes
    from tilegen.runtime.layouts.tma_rules import tma_describable
    from tilegen.runtime.passes.async_decision import ASYNC_MMA, SMEM_EXTRA
    from tilegen.runtime.targets import shared_optin

    tk = sides[0][0].results[0].type.shape[sides[0][2]]
    esz = min(element_bytes(load.results[0].type.element) for load, _, _ in sides)
    if sm not in ASYNC_MMA:
        from tilegen.runtime.layouts.kernel import default_num_warps

        m, n = dot.results[0].type.shape[-2:]
        regs = m * n // (32 * default_num_warps(func))
        if regs < MMA_SYNC_ACC_REGS or tk * esz <= MMA_SYNC_K_BYTES:
            return 1
        return tk * esz // MMA_SYNC_K_BYTES
    if any(tma_describable(load) for load, _, _ in sides):
        # today's path (no TMA copy: rows that are not 16-byte multiples, mostly, which
        # cp.async cannot copy either, so the tile goes through registers): K tiles over 64
        # elements spilled (fuzzer seeds 81056, 80015, 90769, ...: 40-336 bytes)
        return max(1, tk // NO_TMA_K)
    budget = shared_optin(sm) - SMEM_EXTRA
    stage = sum(_bytes(load.results[0].type) for load, _, _ in sides)
    bt = _transposed_b_bytes(dot, sm)
    parts = [1] if 2 * stage + bt <= budget else []
    s = 2
    while tk % s == 0 and tk // s * esz >= MIN_K_BYTES:
        if 3 * (stage // s) + bt // s <= budget:
            parts.append(s)
        s *= 2
    epilogue = _epilogue_room(func, dot, sm, stage, bt)
    # the first part count whose ring leaves the epilogue its room; else the first that fits
    return next((s for s in parts if epilogue(s)), parts[0] if parts else 1)


def _epilogue_room(func: Operation, dot: Operation, sm: int, stage: int, bt: int):
    """A test of a part count ``s``: whether the async rule's ring of stages of ``stage / s``
    bytes (beside ``bt / s`` of B^T buffers) takes two beside what the epilogue needs - the
    accumulator's scratch buffer, or a ring that holds the TMA store's tile
    (async_rule.ring_stages); a CTA pair's ring (its CTA's stage) must hold the tile, since
    the pair stores by TMA. Fuzzer seeds 1800281 (sm_90a 128 x 256 x 128 i8 from C: two 48 KB
    stages and 96 KB of B^T buffers left no room for the 128 KB tile) and 2000950 (the same
    on a pair of 256 x 256) fell back to today's path and spilled; in halves, seven 24 KB
    stages hold the tile. Always true but on sm_90 (``mma.sync`` targets have rules of their
    own; sm_100's epilogue through TMEM rows depends on the layout stage's accumulator
    layout, not there yet)."""
    from tilegen.runtime.layouts.kernel import _may_pair, default_num_warps
    from tilegen.runtime.passes import k_loop_pipelining as klp
    from tilegen.runtime.passes.async_decision import ASYNC_MAX_STAGES, ASYNC_MMA
    from tilegen.runtime.passes.async_pair import pair_stage_bytes
    from tilegen.runtime.passes.async_rule import ring_stages

    if ASYNC_MMA.get(sm) != "wgmma":
        return lambda s: True
    loop = dot.parent_op
    pair = _may_pair(func, sm, dot, loop)
    M, N = dot.results[0].type.shape[-2:]
    if pair:
        M, stage = M // 2, pair_stage_bytes(dot, sm)
    warps = default_num_warps(func)  # (the layout stage's CTA size)
    cap = klp._stages_hint(func) or ASYNC_MAX_STAGES

    def fits(s: int) -> bool:
        stages, scratch = ring_stages(func, loop, sm, M, N, warps, pair, stage // s, bt // s, cap)
        return stages >= 2 and not (pair and scratch)

    return fits


def _transposed_b_bytes(dot: Operation, sm: int) -> int:
    """Bytes of the B^T buffers the consumers transpose a tf32 or 8-bit B loaded K x N into
    beside the stages: sm_120's two tiles' worth (codegen/async_mma_sync.py), sm_90a's three
    (async_loop.BT_BUFFERS; fuzzer seed 1709732: a 64 x 256 x 64 tf32 tile's 192 KB of them
    were not counted, the K tile was not split, and the GEMM fell back to today's path,
    spilling); 0 elsewhere."""
    from tilegen.runtime.layouts.async_forms import operand_load
    from tilegen.runtime.layouts.mma_choice import element_key
    from tilegen.runtime.passes.async_decision import ASYNC_MMA
    from tilegen.runtime.passes.async_rule import TRANSPOSED_B

    v = dot.operands[1]
    if getattr(v, "op", None) is not None and v.op.name == "nv_tileaa.fp_to_fp":
        v = v.op.operands[0]  # (f32 -> tf32: the f32 stage)
    load, kmajor = operand_load(v)
    mma = ASYNC_MMA.get(sm)
    if mma not in ("mma.sync", "wgmma") or load is None or kmajor:
        return 0
    if element_key(dot.operands[1].type) not in TRANSPOSED_B:
        return 0
    return (2 if mma == "mma.sync" else 3) * _bytes(load.results[0].type)


def split(loop: Operation, sides: list, s: int) -> None:
    """Rewrite ``loop`` to iterate over ``s`` parts of each K tile (module docstring)."""
    rw = PatternRewriter()
    loc = loop.loc
    body = loop.regions[0].blocks[0]
    iv = body.args[0]
    ty = iv.type

    def const(value: int) -> Value:
        return rw.create(
            "arith.constant", [], [ty], {"value": IntegerAttr(value, ty)}, loc
        ).results[0]

    def op(name: str, *xs: Value) -> Value:
        return rw.create(name, list(xs), [ty], {}, loc).results[0]

    rw.set_insertion_point(loop)
    lb = const(_const(loop.operands[0]) * s)
    ub = _const(loop.operands[1])
    ub = const(ub * s) if ub is not None else op("arith.muli", loop.operands[1], const(s))
    loop.set_operands([lb, ub] + list(loop.operands[2:]))
    uses = [(user, i) for user, i in iv.uses]
    rw.set_insertion_point_to_start(body)
    n = const(s)
    k, r = op("arith.divui", iv, n), op("arith.remui", iv, n)
    for user, i in uses:  # the body's index math sees the original tile index
        user.set_operand(i, k)
    for load, chain, kd in sides:
        t = load.results[0].type
        part = t.shape[kd] // s
        rw.set_insertion_point(load)
        seg = _segments(load)
        first, _ = seg["indices"]
        moved = op("arith.addi", load.operands[first + kd], op("arith.muli", r, const(part)))
        load.set_operand(first + kd, moved)
        at, n = seg["other"]
        if n:  # the zero fill: a splat of the part's shape
            pad = load.operands[at]
            shape = list(t.shape)
            shape[kd] = part
            new_t = TileType(tuple(shape), t.element, t.encoding)
            fresh = rw.create("nv_tileaa.splat", list(pad.op.operands), [new_t], {}, loc)
            load.set_operand(at, fresh.results[0])
        _retype(load.results[0], kd, part)
        for c in chain:  # the K dim along the chain (as _operand_chain tracked it)
            src = c.operands[0]
            ckd = _k_dim_after(c, src, kd)
            _retype(c.results[0], ckd, part)
            kd = ckd


def _segments(load: Operation) -> dict:
    """{operand group name: (first operand, count)} of a ``tiled_load``."""
    od = load.opdef
    return {d.name: seg for d, seg in zip(od.operands, od.operand_segments(load))}


def _k_dim_after(op: Operation, src: Value, kd: int) -> int:
    if op.name == "nv_tileaa.permute":
        return 1 - kd
    if op.name == "nv_tileaa.view":
        return kd - (src.type.rank - op.results[0].type.rank)
    return kd


def _retype(v: Value, kd: int, part: int) -> None:
    t = v.type
    shape = list(t.shape)
    shape[kd] = part
    v.type = TileType(tuple(shape), t.element, t.encoding)


@register(
    "nv-tileaa-split-k-tiles",
    options={"compute-capability": (int, 0)},
    summary="stage a GEMM loop's K tile in parts where two stages of it do not fit",
)
def _pass(root: Operation, options: dict) -> None:
    from tilegen.runtime.passes.k_loop_pipelining import kernel_functions

    sm = options.get("compute-capability", 0)
    if sm < 80:
        return
    for func in kernel_functions(root):
        if not func.regions or not func.regions[0].blocks:
            continue
        for loop in list(func.regions[0].blocks[0].ops):
            found = _gemm_loop(loop) if loop.name == "scf.for" else None
            if found is None:
                continue
            s = split_factor(func, found[0], found[1], sm)
            if s > 1:
                split(loop, found[1], s)
