"""The one rule for the async tensor-core path (TMA + mbarrier pipeline, warp specialization,
wgmma on sm_90 / tcgen05 on sm_100), per kernel: :func:`decide` ->
:class:`~.async_decision.AsyncDecision`.

docs/pipelines.md section 2 is the rule in prose. A kernel qualifies when, in order:

1. the target has the instructions: sm_90 (wgmma) or sm_100/sm_103/sm_110 (tcgen05), and is
   not a family target (``sm_100f``: 48 KiB of static shared memory, too little for a ring);
2. the options allow it: ``use_tma``, ``warp_specialize``, ``pipelining`` (and ``num_stages``
   not 1), and ``use_wgmma`` on sm_90;
3. it has a K loop (a top-level ``scf.for``) whose dot accumulates into a loop-carried value,
   with A and B straight from ``tiled_load``s (or through an f32 -> tf32 ``fp_to_fp``) that :func:`~.k_loop_pipelining.plan_loop`
   accepts (TMA-describable: unit inner stride, 16-byte aligned base and strides, boxes of at
   most 256, rows a multiple of 16 bytes, no mask, zero padding, ``allow_tma`` not false);
4. the dot's element types are ones wgmma/tcgen05 take (f16, bf16, tf32, fp8, i8; not f64)
   and its tile is covered by the instruction shapes (sm_90: the layout stage laid it out for
   wgmma - M a multiple of 64 per warp group, N of 8, K of the instruction K; sm_100
   (``cta_group::1``): M 64 or 128, N a multiple of 16 (8 for M 64) up to 256, K of the instruction K);
5. two stages fit in shared memory.

Everything else keeps today's path unchanged. ``taken`` is whether the emitter lowers the
kernel through the async path; a kernel can be ``eligible`` by the rule while the emitter does
not lower it yet (its ``reason`` says so). The driver's ``async`` stage records the decisions
(``tilegen compile --emit=async-plan``).

This module holds the entry points (:func:`decide`, :func:`decide_kernel`,
:func:`after_codegen`) and the GEMM form's rule (shapes, operands, :func:`ring_stages`); the
rest is in ``async_decision`` (the record, what the parts share), ``async_registers`` (register
budgets), ``async_epilogue`` (the epilogue's store), ``async_general`` (several dots, chains)
and ``async_pair`` (the CTA pair).
"""

from __future__ import annotations

from math import prod
from typing import Optional

from tilegen.runtime.ir import BlockArgument, Operation, OpResult
from tilegen.runtime.layouts.kernel import OCCUPANCY_CAP_DROPPED
from tilegen.runtime.layouts.async_forms import (
    PASS_THROUGH,
    chain_sides,
    fragment_chain,
    init_chain,
    operand_load,
    uniform_tile,
    zero_tile,
)
from tilegen.runtime.passes.async_decision import (
    ASYNC_MAX_STAGES,
    ASYNC_MMA,
    ELEMENT_BYTES,
    SMEM_EXTRA,
    AsyncDecision,
    elem_key,
    loop_dot,
    shared_budget,
)
from tilegen.runtime.passes.async_epilogue import (
    registers_only,
    side_compact,
    store_unconverted,
    tma_store_plan,
    tmem_store_plan,
)
from tilegen.runtime.passes.async_general import (
    chain_reason,
    general_decision,
    general_loads,
    kept_loads,
)
from tilegen.runtime.passes.async_pair import cta_pair_wanted, pair_reason, pair_stage_bytes
from tilegen.runtime.passes.async_registers import (
    CONSUMER_SLACK,
    INIT_SLACK,
    accumulators_over_cap,
    consumer_registers,
    consumer_regs_inc,
    copier_registers,
    register_a,
)

#: dot element keys (A/B, accumulator) the async instructions take
ASYNC_ELEMENTS = {
    ("f16", "f32"),
    ("f16", "f16"),
    ("bf16", "f32"),
    ("f32", "f32"),  # tf32
    ("tf32", "f32"),
    ("f8E4M3FN", "f32"),
    ("f8E5M2", "f32"),
    ("i8", "i32"),
}
#: (instruction, A/B element) the emitter lowers through the async path (runtime/codegen/
#: async_loop.py); the rest of the rule's kernels keep today's path, and say so
LOWERED: frozenset = frozenset(
    {("wgmma", "f16"), ("wgmma", "bf16"), ("tcgen05", "f16"), ("tcgen05", "bf16")}
    # tf32 / 8-bit wgmma: B transposed into K-major B^T by the consumers (async_convert.py)
    | {("wgmma", e) for e in ("tf32", "f8E4M3FN", "f8E5M2", "i8")}
    # tcgen05 reads 8-bit B MN-major from the stage (tileiras's descriptors do the same)
    # and tf32 B MN-major through the 128B-base-32B swizzle, as tileiras's descriptor does
    | {("tcgen05", e) for e in ("tf32", "f8E4M3FN", "f8E5M2", "i8")}
    # sm_120: ldmatrix from the swizzled stages, mma.sync (async_mma_sync.py); tf32 and 8-bit
    # B loaded K x N transposed into B^T by the consumers (ldmatrix transposes 16-bit only)
    | {("mma.sync", e) for e in ("f16", "bf16", "tf32", "f8E4M3FN", "f8E5M2", "i8")}
)
#: why an eligible (instruction, element) pair keeps today's path, where LOWERED lacks it
NOT_LOWERED: dict = {}
#: A/B elements whose wgmma B is K-major only: the sm_90 consumers transpose B into two B^T
#: buffers (async_loop.py) that take shared memory beside the stages
TRANSPOSED_B = ("tf32", "f8E4M3FN", "f8E5M2", "i8")
#: the loop attributes the ``async`` stage sets for runtime/codegen/async_loop.py
ASYNC_ATTR = "nv_tileas.async_stages"
ASYNC_REGS_ATTR = "nv_tileas.async_producer_regs"
#: the consumers' ``setmaxnreg.inc`` (the scaled accumulate: two fragments live per thread)
ASYNC_CONSUMER_REGS_ATTR = "nv_tileas.async_consumer_regs"
#: on a scaled accumulate's 1 x N side vector load the producer copies by TMA into the stage,
#: and on every load of a general loop's stage
ASYNC_STAGED_ATTR = "nv_tileas.async_staged"
#: on a K loop the async path takes in its general form (several dots: section 13)
ASYNC_GENERAL_ATTR = "nv_tileas.async_general"
#: on a general-form K loop whose last dot the consumers issue beside the next iteration's
#: first (section 16: async_forms.deferred_dot)
ASYNC_OVERLAP_ATTR = "nv_tileas.async_overlap"
#: on the second and later K loops of a chain of general-form loops (section 23: cuTile splits
#: a causal attention loop at the diagonal); the ring, the maps and the producer are the first
#: loop's, which feeds them all in turn
ASYNC_CHAIN_ATTR = "nv_tileas.async_chained"
#: on a general-form loop's load of a loop-invariant dot A operand (attention's Q): the
#: producer copies it by TMA once, into the array the dot reads it from (section 50)
ASYNC_KEPT_ATTR = "nv_tileas.async_kept"
#: on a GEMM-form K loop that runs on a CTA pair (section 18: the ``num_cta_in_cga = 2`` hint,
#: ``tcgen05.mma.cta_group::2`` issued by the even CTA for both)
ASYNC_PAIR_ATTR = "nv_tileas.cta_pair"
#: the attribute the ``async`` stage puts on the kernel's final ``tiled_store`` when the
#: epilogue writes through TMA (registers -> the idle stage ring -> cp.async.bulk.tensor)
TMA_STORE_ATTR = "nv_tileas.tma_store"
#: the epilogue's plain ``tiled_store`` written straight from sm_100's TMEM rows, a column chunk
#: at a time (:func:`~.async_epilogue.tmem_store_plan`; docs/pipelines.md section 44)
TMEM_STORE_ATTR = "nv_tileas.tmem_store"
#: on a dot operand's ``tiled_load`` TMA cannot describe (rows or base of no 16-byte
#: multiple): the producer warp group's threads copy it into the stage, this many elements a
#: copy (section 43)
THREAD_COPY_ATTR = "nv_tileas.thread_copied"


def _option_reason(options, sm: int) -> Optional[str]:
    if not options.use_tma:
        return "use_tma is off (--no-tma)"
    if not options.warp_specialize:
        return "warp_specialize is off (--no-warp-specialize)"
    if not options.pipelining:
        return "K-loop pipelining is off (--no-pipeline)"
    if options.num_stages == 1:
        return "num_stages is 1 (no pipeline)"
    if sm == 90 and not options.use_wgmma:
        return "use_wgmma is off (--no-wgmma): the sm_90 async path's consumers are wgmma"
    return None


def _shape_reason(
    dot: Operation, sm: int, mma: str, warps: int, pair: bool = False
) -> Optional[str]:
    """None when the instruction shapes cover the dot's tile on ``sm`` (one CTA's half of its
    rows with ``pair``), else why not."""
    a, b, c = (v.type for v in dot.operands[:3])
    if any(getattr(t, "rank", 0) != 2 for t in (a, b, c)):
        return f"the dot is rank {getattr(a, 'rank', 0)} (batched); the async path takes 2-d dots"
    ka, kc = elem_key(a), elem_key(c)
    if (ka, kc) not in ASYNC_ELEMENTS or elem_key(b) != ka:
        return f"{ka} x {elem_key(b)} -> {kc} dots have no {mma} instruction"
    M, K = a.shape
    M //= 2 if pair else 1
    N = b.shape[1]
    tk = 32 // ELEMENT_BYTES[ka]
    if mma == "mma.sync":  # (async_mma_sync.py: the accumulator layout, checked by _sync_lowering)
        return None
    if mma == "wgmma":
        from tilegen.runtime.layouts.decisions import mma_family

        if pair:  # the consumers' own m64 wgmmas on 128 rows (async_loop.async_for)
            return None if M % 64 == 0 and N % 8 == 0 and K % tk == 0 else "no wgmma shape"
        if mma_family(dot) != "wgmma":
            return (
                f"the layout stage did not lay this {M}x{N}x{K} dot out for wgmma "
                f"({mma_family(dot)}; wgmma needs M a multiple of 64 per warp group of the "
                f"{warps} warps, N of 8, K of {tk})"
            )
        return None
    if M not in (64, 128) and not (M == 256 and not pair and warps == 8):
        return (
            f"tcgen05 (cta_group::1) takes M 64 or 128, the tile has M {M} (M 256 as two MMAs "
            "with 8 warps)"
        )
    if N % (8 if M == 64 else 16) or not 8 <= N <= 256:
        return f"tcgen05 M{M} takes N a multiple of {8 if M == 64 else 16} up to 256, not {N}"
    if K % tk:
        return f"K {K} is not a multiple of the instruction K {tk}"
    return None


def _operands_staged(dot: Operation, plan) -> Optional[str]:
    staged = {id(s.load) for s in plan.loads}
    for i, name in ((0, "A"), (1, "B")):
        v = dot.operands[i]
        # (an f32 -> tf32 conversion of the dot's operand, after B's transpose if any: the
        # consumers round the staged f32 tile as they read it, async_convert.converted)
        if isinstance(v, OpResult) and v.op.name == "nv_tileaa.fp_to_fp":
            if elem_key(v.type) != "tf32":
                return f"operand {name} of the dot is converted to {elem_key(v.type)} in the loop"
            v = v.op.operands[0]  # f32 -> tf32: the tensor core reads the f32 stage as tf32
        if isinstance(v, OpResult) and v.op.name in PASS_THROUGH:
            load, transposed = operand_load(v)
            if load is None or load.name != "nv_tileaa.tiled_load":
                return f"operand {name} of the dot is not a tiled_load of the loop"
            if transposed and i == 0:
                return "operand A reaches the dot transposed (MN-major A is not lowered)"
            v = load.results[0]
        if isinstance(v, OpResult) and v.op.name == "nv_tileaa.tiled_load":
            if id(v.op) in staged:
                continue
            from tilegen.runtime.passes.k_loop_pipelining import tma_describable

            why = tma_describable(v.op) or "its indices depend on loop-carried values"
            return f"operand {name}'s load cannot be a TMA copy: {why}"
        return f"operand {name} of the dot is not a tiled_load of the loop"
    acc = dot.operands[2]
    if isinstance(acc, BlockArgument) and acc.owner is dot.parent:
        return None
    if not zero_tile(acc):
        return "the dot's accumulator is neither loop-carried nor a zero tile (a scaled partial product)"
    return None


def _thread_copied(dot: Operation, plan) -> tuple:
    """(("A" / "B", bytes a copy), ...) of the operands the producer's threads copy."""
    out = []
    for s in plan.loads:
        if s.threads:
            load = s.load.results[0]
            name = "A" if _staged_of(dot.operands[0]) is s.load else "B"
            out.append((name, s.threads * ELEMENT_BYTES.get(elem_key(load.type), 4)))
    return tuple(sorted(out))


def _staged_of(v) -> Optional[Operation]:
    """The tiled_load a dot operand reads (through tf32 conversion, views, a transpose)."""
    if isinstance(v, OpResult) and v.op.name == "nv_tileaa.fp_to_fp":
        v = v.op.operands[0]
    if isinstance(v, OpResult) and v.op.name in PASS_THROUGH:
        v = operand_load(v)[0]
        return v
    return v.op if isinstance(v, OpResult) else None


def scaled_chain(loop: Operation, dot: Operation, staged: set) -> Optional[str]:
    """None when ``loop``'s body is a *scaled accumulate* the async consumers lower, else why
    not. The form (the block-scaled GEMM's ``acc + dot(a, b, 0) * sa * sb``): the dot starts
    from zero, and the loop's one carried value is updated by elementwise ops on M x N tiles -
    the dot's result, the carried value, uniform tiles (splats, constants, broadcasts of one
    element) and broadcasts of *side vectors*. A side vector is an M x 1, 1 x N or 1 x 1 tile:
    a ``tiled_load`` of the loop (unmasked, uniform padding) or elementwise ops on such tiles
    of one shape; the consumers load them themselves, in the wgmma fragment's order
    (docs/pipelines.md section 12). Every M x N tile has the accumulator's layout."""
    body = loop.regions[0].blocks[0]
    res = dot.results[0]
    M, N = res.type.shape
    enc = res.type.encoding
    carried = body.args[1:]
    if len(carried) != 1 or len(loop.results) != 1:
        return "the loop carries more than one value beside the scaled dot"
    (acc,) = carried
    if acc.type != res.type:
        return "the loop-carried value is not the dot's result type"
    yielded = body.ops[-1].operands[0]
    if yielded is res or not isinstance(yielded, OpResult):
        return "the loop does not accumulate the scaled dot into its carried value"
    vectors = {(M, 1), (1, N), (1, 1)}
    side = set()  # ops whose result is a side vector

    def is_side(v) -> bool:
        return isinstance(v, OpResult) and (id(v.op) in side or uniform_tile(v))

    for op in body.ops:
        if id(op) in staged or op is dot or op is body.ops[-1]:
            continue
        if op.regions:
            return f"the loop body holds a region op ('{op.name}')"
        tiles = [r for r in op.results if getattr(r.type, "rank", 0)]
        if not tiles:
            if any(getattr(o.type, "rank", 0) for o in op.operands):
                return f"'{op.name}' in the loop reads a tile into a scalar"
            continue  # index math
        t = tiles[0].type
        shape = tuple(t.shape)
        if op.name == "nv_tileaa.tiled_load":
            if shape not in vectors:
                return f"a {'x'.join(map(str, shape))} tile is loaded beside the dot"
            group = op.opdef.operand_group
            if group(op, "mask") or not all(uniform_tile(o) for o in group(op, "other")):
                return "a side vector's load is masked or padded with a non-uniform tile"
            if len(op.results) > 1 and op.results[1].has_uses:
                return "a side vector load's token is used"
            side.add(id(op))
            continue
        if op.name in ("nv_tileaa.splat", "arith.constant") and uniform_tile(op.results[0]):
            continue
        if op.name == "nv_tileas.convert_layout" and shape in vectors:
            if not is_side(op.operands[0]):
                return "a layout conversion in the loop is not of a side vector"
            side.add(id(op))  # the consumers hold side vectors in the fragment's order anyway
            continue
        if op.name == "nv_tileaa.broadcast":
            src = op.operands[0]
            if uniform_tile(op.results[0]):  # of one element
                if shape in vectors:
                    side.add(id(op))
                continue
            if not is_side(src) or shape != (M, N) or t.encoding != enc:
                return "a broadcast in the loop is not of a side vector to the dot's tile"
            continue
        if not op.opdef.has_trait("Elementwise") or len(op.results) != 1:
            return f"the loop body computes more than a scaled accumulate ('{op.name}')"
        operands = [o for o in op.operands if getattr(o.type, "rank", 0)]
        if shape in vectors:  # on side vectors
            if not all(tuple(o.type.shape) == shape and is_side(o) for o in operands):
                return f"'{op.name}' in the loop mixes side vectors with other tiles"
            side.add(id(op))
            continue
        if shape != (M, N) or t.encoding != enc:
            return f"'{op.name}' in the loop is not on the dot's tile in its layout"
        if any(tuple(o.type.shape) != (M, N) or o.type.encoding != enc for o in operands):
            return f"'{op.name}' in the loop mixes tiles of other shapes or layouts"
    for v, what in ((res, "the dot's result"), (acc, "the carried value")):
        for u in v.users:
            if u is body.ops[-1] or not u.opdef.has_trait("Elementwise"):
                return f"{what} is used other than by the scaled accumulate ('{u.name}')"
    return None


def _kernel_name(func: Operation) -> str:
    a = func.attributes.get("sym_name")
    return getattr(a, "value", None) or "<kernel>"


def decide_kernel(func: Operation, options) -> AsyncDecision:
    """The decision for one kernel function of a laid-out nv_tileaa module."""
    from tilegen.runtime.passes import k_loop_pipelining as klp

    sm = options.target.sm
    name, target = _kernel_name(func), str(options.target)

    def no(reason: str, **kw) -> AsyncDecision:
        return AsyncDecision(name, target, False, False, reason, **kw)

    mma = ASYNC_MMA.get(sm)
    if mma is None:
        return no(
            f"sm_{sm} has no async path (sm_90: wgmma, sm_100: tcgen05, sm_120: mma.sync from "
            "TMA stages)"
        )
    if options.target.suffix == "f":
        return no(
            f"{target} is a family target: 48 KiB of static shared memory, too little for the"
            f" stage ring (sm_{sm} or sm_{sm}a take the async path)"
        )
    why = _option_reason(options, sm)
    if why is not None:
        return no(why)
    loops = [
        o
        for o in func.regions[0].blocks[0].ops
        if o.name == "scf.for" and any(i.name == "nv_tileaa.dot" for i in o.walk())
    ]
    if not loops:
        return no("no K loop with a dot at the top level of the kernel")
    if len(loops) > 1:
        why = chain_reason(func, loops, sm)
        if why is not None:
            return no(
                f"{len(loops)} K loops with dots; the async path takes one, or a chain of "
                f"general-form loops ({why})"
            )
        return general_decision(func, loops[0], options, name, target, mma, loops)
    loop = loops[0]
    dot = loop_dot(loop)
    if dot is None:
        return general_decision(func, loop, options, name, target, mma)
    warps = klp._consumer_warps(func)
    pair, wanted, pair_why = False, cta_pair_wanted(func), ""
    if wanted:
        pair_why = pair_reason(func, loop, dot, options)
        pair = pair_why is None
    why = _shape_reason(dot, sm, mma, warps, pair)
    if why is not None:
        if wanted:
            why += f" (a CTA pair: {pair_why})"
        return no(why)
    plan = klp.plan_loop(loop, func, sm, options.num_stages or 0, pair)
    if isinstance(plan, str):
        return no(plan)
    why = _operands_staged(dot, plan)
    if why is not None:
        return no(why)
    copied = _thread_copied(dot, plan)
    if copied and not isinstance(dot.operands[2], BlockArgument):
        return no(
            f"operand {copied[0][0]}'s load cannot be a TMA copy (its rows or base are not known"
            " to be 16-byte multiples), and the producer's threads copy such operands only for"
            " a dot accumulating into the loop's value"
        )
    a, b, c = (v.type for v in dot.operands[:3])
    ka, kc = elem_key(a), elem_key(c)
    stage_bytes = sum(
        ELEMENT_BYTES.get(elem_key(s.load.results[0].type), 4) * prod(s.load.results[0].type.shape)
        for s in plan.loads
    )
    if pair:  # one CTA's half of A's rows; of B's columns on sm_100 (sm_90: B whole)
        stage_bytes = pair_stage_bytes(dot, sm)
    kw = dict(
        mma=mma,
        cta_pair=pair,
        pair_declined=pair_why if wanted and not pair else "",
        stages=plan.stages,
        tile=(a.shape[0], b.shape[1], a.shape[1]),
        elements=f"{ka} x {elem_key(b)} -> {kc}",
        stage_bytes=stage_bytes,
        consumer_warps=plan.consumer_warps,
        producer_warps=plan.producer_warps,
        consumer_regs=plan.consumer_regs,
        producer_regs=plan.producer_regs,
        thread_copied=copied,
    )
    if (mma, ka) not in LOWERED:
        reason = NOT_LOWERED.get(
            (mma, ka),
            f"the emitter does not lower the {mma} async path for {ka} yet (docs/pipelines.md)",
        )
        return AsyncDecision(name, target, True, False, reason, **kw)
    if ka == "i8" and mma == "tcgen05" and _unsigned(dot):
        reason = "tcgen05 kind::i8 with unsigned operands is not in spec/ptx/mma.yaml"
        return AsyncDecision(name, target, True, False, reason, **kw)
    hinted = bool(options.num_stages or klp._stages_hint(func))
    why, stages = _lowering(func, loop, dot, plan, warps, sm, hinted, pair)
    kw["stages"] = stages
    if why is not None:
        return AsyncDecision(name, target, True, False, why, **kw)
    if mma == "mma.sync":
        # no setmaxnreg on sm_120: its consumers take no registers from the producer (their
        # accumulator fits the launch's share), and ptxas's register allocation around the
        # producer's setmaxnreg.dec spilled the 128 x 128 f16 GEMM (194 registers without)
        kw.update(producer_regs=None, consumer_regs=None)
    elif plan.producer_regs:
        rows = a.shape[0] // 2 if pair else a.shape[0]
        acc = rows * b.shape[1] // (32 * plan.consumer_warps)
        scaled = not isinstance(dot.operands[2], BlockArgument)
        need = (2 if scaled else 1) * acc + CONSUMER_SLACK
        inc, dropped = consumer_registers(
            func, plan.consumer_warps, plan.producer_warps, plan.producer_regs, need
        )
        kw["cap_dropped"] = dropped
        if inc is not None:
            kw.update(consumer_regs=inc, rebalance=True)
        elif scaled:
            kw["consumer_regs"] = consumer_regs_inc(plan)
        elif mma == "wgmma" and register_a(dot, rows, plan, consumer_regs_inc(plan), acc):
            # uncapped, A's fragments need more than the launch's share (256 x 128 on two
            # warp groups): the consumers take the registers the producer gives back
            kw.update(consumer_regs=consumer_regs_inc(plan), rebalance=True)
        if copied:
            copier_registers(func, plan, kw, need, mma == "tcgen05")
    sides = staged_sides(loop, dot)
    kw["stage_bytes"] += sum(
        ELEMENT_BYTES.get(elem_key(o.results[0].type), 4) * prod(o.results[0].type.shape)
        for o in sides
    )
    ring_stage = pair_stage_bytes(dot, sm) if pair else stage_bytes_of(dot, sides)
    _, store_why = tma_store_plan(func, loop, kw["stages"], ring_stage, pair, sm, warps)
    kw.update(tma_store=store_why is None, store_reason=store_why or "")
    ring = kw["stages"] * ring_stage
    if store_why is not None and tmem_store_plan(func, loop, sm, warps, pair, ring) is not None:
        kw["tmem_store"] = True
    if pair and store_why is not None:
        reason = f"a CTA pair stores each CTA's rows by TMA, and here: {store_why}"
        return AsyncDecision(name, target, True, False, reason, **kw)
    return AsyncDecision(name, target, True, True, "", **kw)


def stage_bytes_of(dot, sides: tuple = ()) -> int:
    """Bytes of one stage as the emitter lays it out: A's and B's boxes, each 1024-aligned, then
    the staged side vectors (``sides``), each 128-aligned, the stage 1024-aligned."""
    from tilegen.runtime.layouts.access import element_bytes

    a, b = dot.operands[0].type, dot.operands[1].type
    esz = ELEMENT_BYTES[elem_key(a)]
    (M, K), N = a.shape, b.shape[1]
    n = -(-(M * K * esz) // 1024) * 1024 + -(-(K * N * esz) // 1024) * 1024
    for o in sides:
        t = o.results[0].type
        n += -(-(prod(t.shape) * element_bytes(t.element)) // 128) * 128
    return -(-n // 1024) * 1024


def staged_sides(loop: Operation, dot: Operation) -> list:
    """The side vector loads of a scaled accumulate the producer copies by TMA with A and B
    (``nv_tileas.async_staged``): 1 x N rows TMA can describe (as the operands' rule: unit
    inner stride, 16-byte aligned base and strides, zero padding), the memref defined before
    the loop, the indices from the induction variable and invariants. The consumers read them
    from the stage (tileiras stages its block-scaled GEMM's scale row the same way); an M x 1
    column (4-byte rows) is no TMA box: the consumers load it themselves."""
    from tilegen.runtime.passes.k_loop_pipelining import (
        _operand_slice,
        is_defined_outside,
        tma_describable,
    )

    if isinstance(dot.operands[2], BlockArgument):
        return []
    N = dot.results[0].type.shape[1]
    out = []
    for op in loop.regions[0].blocks[0].ops:
        if op.name != "nv_tileaa.tiled_load" or tuple(op.results[0].type.shape) != (1, N):
            continue
        if any(u is dot or u.name == "nv_tileaa.fp_to_fp" for u in op.results[0].users):
            continue  # an operand of the dot
        base = op.opdef.operand_group(op, "base")[0]
        if tma_describable(op) is None and is_defined_outside(base, loop):
            if _operand_slice(op, loop) is not None:
                out.append(op)
    return out


def _b_kmajor(dot) -> bool:
    """Whether the dot's B is staged K-major (loaded N x K and transposed), seen through an
    f32 -> tf32 conversion (fuzzer seed 1701416: a converted B^T was counted three B^T
    buffers it does not need, and the GEMM fell back to today's path, spilling)."""
    vb = dot.operands[1]
    if getattr(vb, "op", None) is not None and vb.op.name == "nv_tileaa.fp_to_fp":
        vb = vb.op.operands[0]
    return operand_load(vb)[1]


def _lowering(
    func, loop, dot, plan, warps: int, sm: int, hinted: bool = False, pair: bool = False
) -> tuple:
    """(why the emitter cannot lower this eligible loop, or None; the stage count it uses).
    ``pair``: one CTA of a pair, with half of A's rows and half of B's columns."""
    a, b, c = (v.type for v in dot.operands[:3])
    (M, K), N = a.shape, b.shape[1]
    esz = ELEMENT_BYTES[elem_key(a)]
    stage = stage_bytes_of(dot, tuple(staged_sides(loop, dot)))
    if pair:
        M, stage = M // 2, pair_stage_bytes(dot, sm)
    if ASYNC_MMA.get(sm) == "mma.sync":
        return _sync_lowering(func, loop, dot, plan, warps, sm, hinted, stage)
    from tilegen.runtime.targets import shared_optin

    # sm_90 tf32 / 8-bit B loaded K x N: three K-major B^T buffers the consumers transpose each
    # stage's B into (async_loop.BT_BUFFERS: one stage's wgmmas stay in flight over the next
    # transpose). B loaded N x K and transposed is staged K-major already: no buffers
    transposing = elem_key(a) in TRANSPOSED_B and not _b_kmajor(dot)
    bt = 3 * (-(-(K * N * esz) // 1024) * 1024) if sm < 100 and transposing else 0
    # a num_stages hint is honored as the pass took it; otherwise as many stages as fit, up to
    # ASYNC_MAX_STAGES (the pass's own cap is for its IR, not for this path's smem budget)
    cap = plan.stages if hinted else ASYNC_MAX_STAGES
    stages, scratch = ring_stages(func, loop, sm, M, N, warps, pair, stage, bt, cap)
    scaled = not isinstance(dot.operands[2], BlockArgument)
    if scaled and sm >= 100 and (warps != 8 or M != 128 or N not in (64, 128)):
        # a thread holds N / 2 columns of the partial product, the sum and a 1 x N side vector
        return (
            f"the emitter's tcgen05 scaled accumulate takes 8 warps (two column halves of the "
            f"128 TMEM rows), M 128 and N 64 or 128, not {warps} warps, {M}x{N}",
            stages,
        )
    tall = sm >= 100 and not scaled and M == 256 and warps == 8 and not pair
    if tall and (N % 32 or (N > 128 and scratch)):
        # (over 128 columns, the TMA store reads the accumulators by chunks: tmem_chunks)
        return (
            "the emitter's two-accumulator tcgen05 form (M 256, 8 warps) takes N a multiple "
            "of 32, over 128 only with a uniform initial value and the result stored by TMA "
            "from registers, within the stage ring",
            stages,
        )
    wide = sm >= 100 and not scaled and warps == 8 and M == 128 and N % 64 == 0
    if (
        sm >= 100
        and not scaled
        and not tall
        and not wide
        and (warps != 4 or M not in (64, 128) or N % 32)
    ):
        return (
            f"the emitter's tcgen05 path takes 4 warps, M 64 or 128 and N a multiple of 32 "
            f"(8 warps: M 128 and N a multiple of 64), not {warps} warps, {M}x{N}",
            stages,
        )
    if warps % 4 or M % (16 * warps):
        return (
            f"the emitter takes M a multiple of 64 per warp group ({warps} warps), not {M}",
            stages,
        )
    if sm < 100 and M // (16 * warps) * N // 2 > 128:
        return (
            f"{M // (16 * warps) * N // 2} accumulator registers per thread (at most 128)",
            stages,
        )
    nb = N // 2 if pair and sm >= 100 else N  # B's columns in a stage
    if N > 256 or (nb * esz > 128 and nb * esz % 128):
        return f"the emitter takes N up to 256 in whole 128-byte column boxes, not {N}", stages
    if K * esz not in (32, 64) and K * esz % 128:
        return f"the emitter takes K rows of 32, 64 or n x 128 bytes, not {K * esz}", stages
    if stages < 2:
        return "two stages and the accumulator scratch do not fit in shared memory", stages
    loads = {id(s.load) for s in plan.loads}
    tf32 = _passed_through(dot)  # views and B's transpose between a load and the dot
    if scaled:  # the block-scaled form: a fresh partial product per stage, scaled into acc
        if sm >= 100 and not uniform_tile(loop.operands[3]):
            return "the tcgen05 scaled accumulate starts from a uniform tile", stages
        if sm < 100 and 2 * (M // (16 * warps) * N // 2) > 128:
            return (
                f"a scaled accumulate holds two fragments of {M // (16 * warps) * N // 2} "
                f"registers per thread (at most 64 each: {warps} warps are too few)",
                stages,
            )
        why = scaled_chain(loop, dot, loads | tf32)
        return (why, stages) if why is not None else (_before_loop(func, loop), stages)
    why = _body_reason(loop, dot, loads, tf32)
    return (why if why is not None else _before_loop(func, loop)), stages


def ring_stages(
    func, loop, sm: int, M: int, N: int, warps: int, pair: bool, stage: int, bt: int, cap: int
) -> tuple:
    """(the stages of ``stage`` bytes the GEMM form's ring takes, at most ``cap``; the bytes of
    the accumulator's scratch buffer beside it) on ``sm`` beside ``bt`` bytes of B^T buffers:
    as many stages as fit beside the accumulator's scratch buffer unless the registers never go
    through it (sm_90: a uniform initial value goes straight into the registers, and the
    result's exchange after the loop waits in the idle stage ring when the ring holds it:
    Emitter.scratch_into_ring; sm_100's tcgen05 consumers keep the initial value in the
    scratch over the loop). ``M``: one CTA's rows; ``warps``: the consumer warps. The K split
    (k_tile_split.split_factor) asks it too, with a part's ``stage`` and ``bt``. A CTA
    ``pair``, which stores by TMA from the ring, takes the whole opt-in where an ``occupancy``
    hint's share leaves the tile out of the ring (fuzzer seeds 1600603, 1600952: 256 x 256
    with occupancy 2, which no SM holds twice; tileiras takes 230,640 and 165,056 B)."""
    from tilegen.runtime.targets import shared_optin

    in_ring = sm < 100 and uniform_tile(loop.operands[3])
    regs_only = registers_only(func, loop, sm, M, 0 if pair else warps, fragment=pair)
    # (an initial value written into TMEM but converted into the accumulator's layout first:
    # the conversion's exchange needs the scratch, since the consumers load C after the
    # producer has started filling the ring - unless the consumers load C in the rows' order,
    # codegen/fragment_load.py, as sm_90 loads it in the fragment's)
    if regs_only and _converted_init(loop) and init_chain(loop) is None:
        regs_only = False
    for scratch in (0, M * N * 4) if regs_only else (M * N * 4,):
        stages = 0
        if scratch and in_ring:
            fit = (shared_budget(func, sm, stage, bt) - SMEM_EXTRA - bt) // stage
            stages = min(cap, fit)
        if stages * stage + bt < scratch or not stages:
            fit = shared_budget(func, sm, stage, scratch + bt) - scratch - SMEM_EXTRA - bt
            stages = min(cap, fit // stage)
        if scratch or tma_store_plan(func, loop, stages, stage, pair, sm, warps)[0] is not None:
            break
        if tmem_store_plan(func, loop, sm, warps, pair, stages * stage) is not None:
            break  # (no TMA store: st.global through the ring, codegen/tmem_store.py)
        if pair:  # (a pair stores by TMA: a ring of the whole opt-in, past an occupancy hint)
            whole = min(cap, (shared_optin(sm) - SMEM_EXTRA - bt) // stage)
            plan = tma_store_plan(func, loop, whole, stage, pair, sm, warps)[0]
            if whole > stages and plan is not None:
                return whole, 0
    return stages, scratch


def _body_reason(loop, dot, loads: set, passed: set) -> Optional[str]:
    """Why the GEMM form's loop body is more than its staged loads, their index math and the
    dot accumulating into the loop's one value, or None (``passed``: the views, transposes and
    f32 -> tf32 conversions between a staged load and the dot)."""
    body = loop.regions[0].blocks[0]
    if len(loop.results) != 1 or body.ops[-1].operands[0] is not dot.results[0]:
        return "the loop carries more than the dot's accumulator"
    for op in body.ops:
        if id(op) in loads or op is dot or op is body.ops[-1]:
            continue
        if id(op) in passed and (op.name == "nv_tileaa.fp_to_fp" or op.name in PASS_THROUGH):
            continue  # f32 -> tf32 of a staged operand (the tensor core reads the f32 stage),
            # or a view or transpose of one (the consumers read the stage in its own order)
        tiles = any(getattr(r.type, "rank", 0) for r in op.results)
        if op.regions or (tiles and op.name != "nv_tileaa.splat"):
            return f"the loop body computes more than the loads' indices ('{op.name}')"
    return None


def _passed_through(dot) -> set:
    """The ops between the dot's A / B and their staged loads (views, B's transpose, f32 ->
    tf32 conversions), by id."""
    out = {id(v.op) for v in dot.operands[:2] if isinstance(v, OpResult)}
    for v in dot.operands[:2]:
        if isinstance(v, OpResult) and v.op.name == "nv_tileaa.fp_to_fp":
            v = v.op.operands[0]  # (f32 -> tf32 after B's transpose)
        while isinstance(v, OpResult) and v.op.name in PASS_THROUGH:
            out.add(id(v.op))
            v = v.op.operands[0]
    return out


def _sync_lowering(func, loop, dot, plan, warps: int, sm: int, hinted: bool, stage: int) -> tuple:
    """``_lowering`` for sm_120's mma.sync consumers (async_mma_sync.py): 16-bit A and B (or
    8-bit, B loaded N x K) into an f32 / i32 accumulator the layout stage laid out as the mma.sync
    fragment (warps side by side along N), rows of A, B (N-major) or B^T of whole 128-byte swizzle boxes, the body the GEMM
    form's; as many stages as fit, at most ``ASYNC_MAX_STAGES``."""
    from tilegen.runtime.layouts.mma_choice import mma_sync_accumulator_layout

    a, b, c = (v.type for v in dot.operands[:3])
    (M, K), N = a.shape, b.shape[1]
    esz = ELEMENT_BYTES[elem_key(a)]
    # an initial value that is not uniform reaches the registers through the kernel's own
    # scratch after the warp groups split (the ring is live by then): room for it beside -
    # unless the consumers load C in the fragment's layout (init_chain; fragment_load.py)
    direct = uniform_tile(loop.operands[3]) or init_chain(loop) is not None
    scratch = 0 if direct else M * N * 4
    kmajor = _b_kmajor(dot)
    # tf32 / 8-bit B loaded K x N: two B^T buffers the consumers transpose each stage's B into
    # (async_loop.BT_BUFFERS_SYNC; ldmatrix transposes 16-bit elements only)
    transposed = elem_key(a) in TRANSPOSED_B and not kmajor
    bt = 2 * (-(-(K * N * esz) // 1024) * 1024) if transposed else 0
    fit = (shared_budget(func, sm, stage, scratch + bt) - scratch - bt - SMEM_EXTRA) // stage
    stages = min(plan.stages if hinted else ASYNC_MAX_STAGES, fit)
    if elem_key(c) not in ("f32", "i32"):
        return f"the sm_120 consumers accumulate in f32 or i32, not {elem_key(c)}", stages
    lay = mma_sync_accumulator_layout(dot, warps)
    res = dot.results[0].type
    if lay is None or res.encoding != lay or c.encoding != lay:
        return (
            f"the layout stage did not lay this {M}x{N}x{K} dot's accumulator out as the "
            f"mma.sync fragment of {warps} warps side by side (M a multiple of 16, N of "
            f"{8 * warps})",
            stages,
        )
    from tilegen.runtime.layouts.kernel import register_budget

    acc = M * N // (32 * warps)
    if acc > 128:  # (256 x 256 on 8 warps spilled 912 B; today's path 288)
        return f"{acc} accumulator registers per thread (at most 128)", stages
    budget = register_budget(func, 32 * (warps + 4))  # (the producer warp group's threads too)
    # (C loaded before the loop leaves ptxas less room: fuzzer seed 5129, 256 x 128 on 8
    # warps from C, spilled 28 B at 168 registers where the zero-initialized one fits)
    slack = CONSUMER_SLACK + (0 if uniform_tile(loop.operands[3]) else INIT_SLACK)
    if acc + slack > budget:  # (an occupancy hint's cap: no setmaxnreg here)
        return (
            f"{acc} accumulator registers per thread and the loop's fragments do not fit the "
            f"{budget} registers a thread may use",
            stages,
        )
    rows = (K * esz,) if kmajor else (K * esz, N * esz)
    if any(n not in (32, 64) and n % 128 for n in rows):
        return (
            f"the sm_120 consumers read rows of 32, 64 or n x 128 bytes: K {K}"
            + ("" if kmajor else f", N {N} (B loaded K x N)"),
            stages,
        )
    if stages < 2:
        return "two stages do not fit in shared memory", stages
    loads = {id(s.load) for s in plan.loads}
    why = _body_reason(loop, dot, loads, _passed_through(dot))
    return (why if why is not None else _before_loop(func, loop)), stages


def _converted_init(loop: Operation) -> bool:
    """Whether the loop's initial value goes through a ``convert_layout`` on its way from
    memory (section 33: its exchange needs shared memory of its own)."""
    todo, seen = [loop.operands[3]], set()
    while todo:
        v = todo.pop()
        if not isinstance(v, OpResult) or id(v.op) in seen:
            continue
        seen.add(id(v.op))
        if v.op.name == "nv_tileas.convert_layout":
            return True
        todo.extend(o for o in v.op.operands if getattr(o.type, "rank", 0))
    return False


def _before_loop(func, loop) -> Optional[str]:
    """Why the kernel's prologue cannot be split between the warp groups, or None
    (``async_prologue.prologue_reason``: the consumers alone run what reads memory or holds a
    tile; the producer computes the scalars)."""
    from tilegen.runtime.codegen.async_prologue import prologue_reason

    return prologue_reason(func.regions[0].blocks[0], loop)


def after_codegen(decisions: list, root: Operation) -> list:
    """``decisions`` with the kernels the emitter put back on today's path (their general-form
    ring did not fit in shared memory once emitted: ``nv_tileas.async_fallback``) marked not
    taken, with the emitter's reason, and the stages of those it emitted with fewer
    (``nv_tileas.async_refitted``)."""
    from tilegen.runtime.passes.k_loop_pipelining import kernel_functions
    from tilegen.runtime.records import replace

    why, refit = {}, {}
    for func in kernel_functions(root):
        a = func.attributes.get("nv_tileas.async_fallback")
        if a is not None:
            why[_kernel_name(func)] = a.value
        a = func.attributes.get("nv_tileas.async_refitted")
        if a is not None:
            refit[_kernel_name(func)] = a.value
    out = []
    for d in decisions:
        if d.taken and d.kernel in why:
            reason = f"the emitted async loop did not fit ({why[d.kernel]}), so today's path"
            d = replace(d, taken=False, reason=reason)
        elif d.taken and d.kernel in refit:  # fewer stages than chosen, once emitted
            d = replace(d, stages=refit[d.kernel])
        out.append(d)
    return out


def _unsigned(dot: Operation) -> bool:
    from tilegen.runtime.layouts.mma_choice import signedness

    return signedness(dot) not in (None, (True, True))


def decide(root: Operation, options, annotate: bool = False) -> list:
    """[:class:`AsyncDecision`] for every kernel of a laid-out nv_tileaa module; ``annotate``
    marks each taken kernel's K loop for the emitter (``nv_tileas.async_stages``)."""
    from tilegen.runtime.attributes import IntegerAttr, UnitAttr
    from tilegen.runtime.passes.k_loop_pipelining import kernel_functions
    from tilegen.runtime.layouts.kernel import PAIR_ROWS_ATTR
    from tilegen.runtime.records import replace
    from tilegen.runtime.types import I32

    out = []
    for func in kernel_functions(root):
        if annotate:  # the decisions are this stage's own: none comes in with the IR
            for op in func.walk():
                for name in _DECISION_ATTRS:
                    if name in op.attributes:
                        op.remove_attr(name)
        d = decide_kernel(func, options)
        if not d.taken and accumulators_over_cap(func):
            d = replace(d, cap_dropped=True)
        rows = func.attributes.get(PAIR_ROWS_ATTR)
        if rows is not None:
            d = replace(d, pair_rows=rows.value)
        out.append(d)
        if annotate and d.cap_dropped:
            func.set_attr(OCCUPANCY_CAP_DROPPED, UnitAttr())
        if annotate and d.taken:
            loops = [
                o
                for o in func.regions[0].blocks[0].ops
                if o.name == "scf.for" and any(i.name == "nv_tileaa.dot" for i in o.walk())
            ]
            loop = loops[0]
            if loop_dot(loop) is None:  # the general form: the loads it stages
                for k, lp in enumerate(loops):  # (a chain: every loop, section 23)
                    lp.set_attr(ASYNC_ATTR, IntegerAttr(d.stages, I32))
                    lp.set_attr(ASYNC_GENERAL_ATTR, UnitAttr())
                    if d.producer_regs:  # (a producer without setmaxnreg has none)
                        lp.set_attr(ASYNC_REGS_ATTR, IntegerAttr(d.producer_regs, I32))
                    if d.rebalance:
                        lp.set_attr(ASYNC_CONSUMER_REGS_ATTR, IntegerAttr(d.consumer_regs, I32))
                    if d.overlap:
                        lp.set_attr(ASYNC_OVERLAP_ATTR, UnitAttr())
                    if k:
                        lp.set_attr(ASYNC_CHAIN_ATTR, IntegerAttr(k, I32))
                    first = loop if k else None
                    staged = general_loads(func, lp, options.target.sm, first)[1]
                    for ld in staged:
                        ld.set_attr(ASYNC_STAGED_ATTR, UnitAttr())
                    if d.kept_tma and not k:
                        for ld in kept_loads(func, loops, options.target.sm, staged):
                            ld.set_attr(ASYNC_KEPT_ATTR, UnitAttr())
                continue
            loop.set_attr(ASYNC_ATTR, IntegerAttr(d.stages, I32))
            if d.thread_copied:
                plan = klp_plan(loop, func, options)
                for s_ in plan.loads:
                    if s_.threads:
                        s_.load.set_attr(THREAD_COPY_ATTR, IntegerAttr(s_.threads, I32))
            if d.cta_pair:
                loop.set_attr(ASYNC_PAIR_ATTR, UnitAttr())
            if d.producer_regs:
                loop.set_attr(ASYNC_REGS_ATTR, IntegerAttr(d.producer_regs, I32))
            if d.producer_regs and (
                d.rebalance or not isinstance(loop_dot(loop).operands[2], BlockArgument)
            ):
                loop.set_attr(ASYNC_CONSUMER_REGS_ATTR, IntegerAttr(d.consumer_regs, I32))
            for side in staged_sides(loop, loop_dot(loop)):
                side.set_attr(ASYNC_STAGED_ATTR, UnitAttr())
            if d.tma_store:
                dot = loop_dot(loop)
                sides = staged_sides(loop, dot)
                ring_stage = d.stage_bytes if d.cta_pair else stage_bytes_of(dot, sides)
                store, _ = tma_store_plan(
                    func,
                    loop,
                    d.stages,
                    ring_stage,
                    d.cta_pair,
                    options.target.sm,
                    d.consumer_warps,
                )
                store.set_attr(TMA_STORE_ATTR, IntegerAttr(1, I32))
                store_unconverted(store)
                chain = fragment_chain(loop, store)
                for side in chain_sides(chain) if chain else ():
                    side_compact(side)
            elif d.tmem_store:
                sm, warps = options.target.sm, d.consumer_warps
                ring = d.stages * stage_bytes_of(loop_dot(loop), staged_sides(loop, loop_dot(loop)))
                store = tmem_store_plan(func, loop, sm, warps, False, ring)
                store.set_attr(TMEM_STORE_ATTR, UnitAttr())
                for side in chain_sides(fragment_chain(loop, store)):
                    side_compact(side)
    return out


#: every attribute the stage writes (docs/pipelines.md section 8's table)
_DECISION_ATTRS = (
    OCCUPANCY_CAP_DROPPED,
    ASYNC_CHAIN_ATTR,
    ASYNC_ATTR,
    ASYNC_REGS_ATTR,
    ASYNC_CONSUMER_REGS_ATTR,
    ASYNC_GENERAL_ATTR,
    ASYNC_OVERLAP_ATTR,
    ASYNC_PAIR_ATTR,
    ASYNC_STAGED_ATTR,
    ASYNC_KEPT_ATTR,
    TMA_STORE_ATTR,
    TMEM_STORE_ATTR,
    THREAD_COPY_ATTR,
)


def klp_plan(loop: Operation, func: Operation, options):
    """The K loop's plan (k_loop_pipelining.plan_loop) as the rule made it."""
    from tilegen.runtime.passes import k_loop_pipelining as klp

    return klp.plan_loop(loop, func, options.target.sm, options.num_stages or 0, False)


__all__ = ["after_codegen", "decide", "decide_kernel"]
