"""``nv-tileas-pipeline-k-loops``: a tensor-core K loop becomes a TMA producer/consumer pipeline.

Input: nv_tileaa IR (with or without nv_tileas layouts). For every ``scf.for`` in a kernel
function's body that :func:`plan_loop` accepts (the rule of docs/pipelines.md, "When the pass
applies"), the loop is rewritten into nv_tileas async ops::

    %pipe = create_pipeline {producer_arrivals = 1, consumer_arrivals = 32 W}
            : !nv_tileas.async.pipeline<stages = S, shared, A, B>
    %r = agent_switch -> (loop results) {
      agent warps(4) regs(RP) {                    // producer warp group
        scf.for %k ... iter_args(%it = create_iterator %pipe) {
          %t = producer_acquire %pipe[%it]         // wait: stage empty
          producer_write %pipe[%it], %t {          // TMA: the loads land in the stage
            ...index math...; %a = tiled_load ...; %b = tiled_load ...; yield %a, %b }
          producer_commit %pipe[%it], %t           // full barrier, expected bytes
          scf.yield (inc_iter %it) }
        yield }
      %r = agent warps(W) regs(RC) -> (loop results) {   // the kernel's warps: consumers
        scf.for %k ... iter_args(<loop iter args>, %it = create_iterator %pipe) {
          %t = consumer_wait %pipe[%it]            // full barrier phase
          %a, %b = consumer_read %pipe[%it], %t
          ...the loop body, its dots as async.dot + async.wait...
          consumer_release %pipe[%it], %t          // empty barrier
          scf.yield <body yields>, (inc_iter %it) }
        yield <results> }
      yield %r }

The function gets ``nv_tileas.num_warps = W + producer warps``. Loads that are not dot operands,
or that TMA cannot describe, stay in the consumer. :func:`explain_loops` says why each loop was
or was not pipelined (tests and docs use it).
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import (
    DenseArrayAttr,
    FloatAttr,
    IntegerAttr,
)
from tilegen.runtime.ir import Block, BlockArgument, Operation, OpResult, Value
from tilegen.runtime.passes.registry import register
from tilegen.runtime.records import dataclass, field
from tilegen.runtime.rewrite.ir_utils import (
    clone_op,
    is_defined_outside,
    is_effect_free,
    loop_slice,
)
from tilegen.runtime.types import (
    I32,
    AsyncTokenType,
    NvMemRefType,
    PipelineConsumerTokenType,
    PipelineIteratorType,
    PipelineProducerTokenType,
    PipelineType,
    TileType,
)
from tilegen.runtime.targets import shared_optin
from tilegen.runtime.verify.hooks.nv_tileas import (
    MAX_REGS_RANGE,
    REGISTER_FILE,
    WARP_GROUP,
    payload_bytes,
)

PIPE = "nv_tileas.async.pipeline."
_PRODUCER_TOKEN = PipelineProducerTokenType()
_CONSUMER_TOKEN = PipelineConsumerTokenType()
_ASYNC_TOKEN = AsyncTokenType()
#: ops between a staged load and the dot that reads it (they stay in the consumer and read the
#: stage: free reinterpretations of the shared-memory tile, or conversions applied on the way)
CHAIN_OPS = (
    "nv_tileaa.view",
    "nv_tileaa.permute",
    "nv_tileaa.fp_to_fp",
    "nv_tileas.convert_layout",
)
#: loads that may stay in the consumer of a pipelined loop (reads; no op of the loop writes)
READ_OPS = ("nv_tileaa.tiled_load", "nv_tileaa.load", "nv_tileaa.gather_load")
#: dot attributes async.dot carries
ASYNC_DOT_ATTRS = ("signedness_a", "signedness_b", "propagate_nan")
#: (the dot's operand segments carry over: async.dot has nv_tileaa.dot's operands)
#: shared memory kept free of stage buffers (epilogue scratch, barriers, reductions)
SHARED_RESERVE = 16 * 1024
#: most stages the pass makes without a num_stages hint
MAX_STAGES = 8
#: TMA limits (PTX ISA / cuTensorMapEncodeTiled): box extents, rank, alignments in bytes
from tilegen.runtime.layouts.tma_rules import (  # noqa: E402 - re-exported
    TMA_ALIGN,
    TMA_MAX_BOX,
    TMA_MAX_RANK,
    _is_zero_splat,
    memref_reason,
    thread_copy_width,
    tma_describable,
)

#: targets whose async path copies an operand TMA cannot describe with the producer warp
#: group's threads (docs/pipelines.md section 43): wgmma, tcgen05 and sm_120's mma.sync
THREAD_COPY_SMS = (90, 100, 103, 110, 120)

#: the producer's register budget (tileiras: setmaxnreg.dec 32 in its producer warp group)
PRODUCER_REGS = 32
#: a producer whose threads copy operands (section 43; async_rule.decide_kernel): what the
#: consumers leave it, at most this many (one consumer warp group keeps 256 beside it)
THREAD_COPY_REGS = 96
#: ... and beside two consumer warp groups with no register cap, this many (the consumers
#: setmaxnreg.inc to what it leaves them: 232)
THREAD_COPY_MIN_REGS = 48


@dataclass
class StagedLoad:
    load: Operation
    #: ops of the loop body the load's operands need, in body order (cloned into the producer)
    slice: list = field(default_factory=list)
    #: elements per copy where the producer warp group's threads copy it (no TMA: rows or base
    #: of no 16-byte multiple; docs/pipelines.md section 43); 0: a TMA copy
    threads: int = 0


@dataclass
class LoopPlan:
    loop: Operation
    loads: list
    stages: int
    consumer_warps: int
    producer_warps: int
    producer_regs: Optional[int]
    consumer_regs: Optional[int]


# --------------------------------------------------------------------------- analysis


def _target_sm(op: Operation, option: int) -> Optional[int]:
    if option:
        return option
    cur = op
    while cur is not None:
        a = cur.attributes.get("nv_tileaa.compute_capability")
        if isinstance(a, IntegerAttr):
            return a.value
        cur = cur.parent_op
    return None


def _body(loop: Operation) -> Block:
    return loop.regions[0].blocks[0]


def _reaches_dot(v: Value, depth: int = 0) -> bool:
    """Whether ``v`` is (through chain ops) operand A or B of a dot."""
    for user, idx in v.uses:
        if user.name in ("nv_tileaa.dot", "nv_tileas.async.dot") and idx in (0, 1):
            return True
        if user.name in CHAIN_OPS and depth < 8 and _reaches_dot(user.results[0], depth + 1):
            return True
    return False


def tma_store_describable(store: Operation) -> Optional[str]:
    """None when a TMA store (``cp.async.bulk.tensor`` shared -> global) can write this
    ``tiled_store``'s tile, else why not: the load rule's memref conditions (unit inner stride,
    16-byte aligned base and strides, boxes of at most 256, rows a multiple of 16 bytes), no
    mask, a weak store (TMA orders nothing), not volatile. TMA clips the box at the tensor's
    bounds, as the bounded store does (docs/pipelines.md section 8)."""
    from tilegen.runtime.layouts.access import element_bytes

    od = store.opdef
    mt = od.operand_group(store, "base")[0].type
    tile = od.operand_group(store, "value")[0].type
    if not isinstance(mt, NvMemRefType):
        return "the store is not through a memref"
    if (
        not isinstance(tile, TileType)
        or tile.rank != mt.rank
        or not 2 <= tile.rank <= 5
        or any(n != 1 for n in tile.shape[:-2])
    ):
        return "the stored tile is not a 2-d tile (leading unit dims aside) of its memref's rank"
    if mt.stride_values[-1] != 1:
        return "the innermost dimension is not unit-stride"
    if any(d > TMA_MAX_BOX for d in tile.shape):
        return f"a tile extent exceeds TMA's box limit of {TMA_MAX_BOX}"
    if getattr(mt.element, "width", 8) < 8:
        return "i1 tiles are predicates in registers, not bytes TMA can copy"
    esize = element_bytes(mt.element)
    if tile.shape[-1] * esize % TMA_ALIGN:
        return f"the tile's inner extent is {tile.shape[-1] * esize} bytes, not a multiple of 16"
    if od.operand_group(store, "mask"):
        return "the store is masked"
    sem = store.attributes.get("mem_semantic")
    if sem is not None and str(getattr(sem, "value", sem)) not in ("0", "weak"):
        return "the store is not weak"
    if "volatile" in store.attributes:
        return "the store is volatile"
    return memref_reason(store, esize)


def _operand_slice(load: Operation, loop: Operation) -> Optional[list]:
    """The loop-body ops the load's operands are computed by (``ir_utils.loop_slice``)."""
    return loop_slice(load, loop)


def _writes_memory(loop: Operation) -> Optional[Operation]:
    for op in _body(loop).ops:
        for inner in op.walk():
            if inner.name in READ_OPS or inner.name.startswith(("scf.", "nv_tileaa.dot")):
                continue
            terminator = inner.opdef is not None and inner.opdef.has_trait("Terminator")
            if not is_effect_free(inner) and not terminator:
                return inner
    return None


def _consumer_warps(func: Operation) -> int:
    from tilegen.runtime.layouts.decisions import num_warps

    return num_warps(func)  # the layout stage's CTA size


def _stage_count(loop: Operation, payload, sm: int, hint: int) -> tuple[int, int]:
    """(stages, most that fit): the hint (option or kernel_spec num_stages) or as many as fit
    beside the reserve, at most MAX_STAGES."""
    stage = payload_bytes(payload)
    fit = (shared_optin(sm) - SHARED_RESERVE) // max(1, stage)
    return (min(hint, fit) if hint else min(MAX_STAGES, fit)), fit


def _stages_hint(func: Operation) -> int:
    from tilegen.runtime.layouts.kernel import enclosing_int_attr, kernel_spec_int

    for n in (kernel_spec_int(func, "num_stages"), enclosing_int_attr(func, "tt.num_stages")):
        if n:
            return n
    return 0


def plan_loop(
    loop: Operation, func: Operation, sm: Optional[int], stages_option: int = 0, pair: bool = False
):
    """A :class:`LoopPlan`, or the reason (str) the loop keeps today's code path. ``pair``: the
    loop runs on a CTA pair, each CTA staging about half of the payload (the async rule sizes
    its ring: this gate only keeps out what cannot fit)."""
    if sm is None or sm < 90:
        return f"the target (sm_{sm}) has no TMA (sm_90 or newer)"
    if loop.name != "scf.for" or loop.parent is not func.regions[0].blocks[0]:
        return "not an scf.for at the top level of the kernel"
    if any(not is_defined_outside(v, loop) for v in loop.operands[:3]):
        return "the loop bounds are not loop-invariant"
    writer = _writes_memory(loop)
    if writer is not None:
        return f"the loop writes memory ('{writer.name}')"
    staged = []
    why_not = []
    for op in _body(loop).ops:
        if op.name != "nv_tileaa.tiled_load" or not _reaches_dot(op.results[0]):
            continue
        if len(op.results) > 1 and op.results[1].has_uses:
            why_not.append("a dot operand load's token is used")
            continue
        why = tma_describable(op)
        threads = 0
        if why is not None and not pair and sm in THREAD_COPY_SMS:
            threads = thread_copy_width(op)
            why = None if threads else why
        if why is None and not is_defined_outside(op.opdef.operand_group(op, "base")[0], loop):
            why = "the memref is defined in the loop"
        sl = _operand_slice(op, loop) if why is None else None
        if why is None and sl is None:
            why = "the load's indices depend on loop-carried values"
        if why is not None:
            why_not.append(why)
            continue
        staged.append(StagedLoad(op, sl, threads))
    if not staged:
        return "no dot operand is a TMA-describable tiled_load" + (
            f" ({why_not[0]})" if why_not else ""
        )
    payload = tuple(
        TileType(s.load.results[0].type.shape, s.load.results[0].type.element) for s in staged
    )
    stages, fit = _stage_count(loop, payload, sm, stages_option or _stages_hint(func))
    per_cta = payload_bytes(payload) // (2 if pair else 1)
    if stages < 2 and 2 * per_cta <= shared_optin(sm) - 1024:
        # two stages fit beside the barriers and maps alone (the async rule sizes the ring
        # against what else the kernel needs: sm_120's 99 KB and 48 KB stages of 128 x 256)
        stages = 2
    if stages < 2:
        return f"two stages of {payload_bytes(payload)} bytes do not fit in shared memory"
    warps = _consumer_warps(func)
    regs_p = regs_c = None
    producer = 1
    if warps % WARP_GROUP == 0:
        # setmaxnreg moves registers between whole warp groups: a producer warp group gives
        # its registers to the consumers (tileiras's split)
        producer = WARP_GROUP
        regs_p = PRODUCER_REGS
        left = REGISTER_FILE - producer * 32 * regs_p
        regs_c = min(MAX_REGS_RANGE[1], left // (warps * 32) // 8 * 8)
    return LoopPlan(loop, staged, stages, warps, producer, regs_p, regs_c)


def kernel_functions(root: Operation) -> list[Operation]:
    return [o for o in root.walk() if o.name == "nv_tileaa.func" and "kernel" in o.attributes]


def explain_loops(root: Operation, compute_capability: int = 0, num_stages: int = 0) -> list:
    """[(loop, LoopPlan | reason)] for every scf.for at the top level of a kernel."""
    out = []
    for func in kernel_functions(root):
        sm = _target_sm(func, compute_capability)
        body = func.regions[0].blocks[0]
        for op in list(body.ops):
            if op.name == "scf.for":
                out.append((op, plan_loop(op, func, sm, num_stages)))
    return out


# --------------------------------------------------------------------------- rewriting


def _i32(v: int) -> IntegerAttr:
    return IntegerAttr(v, I32)


def _pipe_op(name: str, operands, result_types=(), attributes=None, regions=0, loc=None):
    return Operation(
        PIPE + name, list(operands), list(result_types), attributes or {}, regions, loc
    )


def _dead_cleanup(block: Block) -> None:
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.ops)):
            if op.regions or op.opdef is None or op.opdef.has_trait("Terminator"):
                continue
            if all(not r.has_uses for r in op.results) and is_effect_free(op):
                op.erase()
                changed = True


def _last_stage_user(body: Block, reads: list[Value]) -> int:
    """Index in ``body`` of the last op reading the stage (directly or through chain ops)."""
    frontier = list(reads)
    last = -1
    index = {id(o): i for i, o in enumerate(body.ops)}
    seen = set()
    while frontier:
        v = frontier.pop()
        for user, _ in v.uses:
            if id(user) in seen:
                continue
            seen.add(id(user))
            top = user
            while top.parent is not body and top.parent_op is not None:
                top = top.parent_op
            last = max(last, index.get(id(top), -1))
            if user.name in CHAIN_OPS:
                frontier.extend(user.results)
    return last


def _to_async_dots(body: Block, reads: list[Value]) -> None:
    """Dots of the consumer body that read a stage become async.dot + async.wait."""
    staged = set()
    frontier = list(reads)
    while frontier:
        v = frontier.pop()
        staged.add(id(v))
        for user, _ in v.uses:
            if user.name in CHAIN_OPS:
                frontier.extend(user.results)
    for op in list(body.ops):
        if op.name != "nv_tileaa.dot":
            continue
        if not (id(op.operands[0]) in staged or id(op.operands[1]) in staged):
            continue
        attrs = dict(op.attributes)
        if any(k not in ASYNC_DOT_ATTRS + ("operandSegmentSizes",) for k in attrs):
            continue
        i = body.ops.index(op)
        new = Operation(
            "nv_tileas.async.dot",
            list(op.operands),
            [op.results[0].type, _ASYNC_TOKEN],
            attrs,
            0,
            op.loc,
        )
        wait = Operation("nv_tileas.async.wait", [new.results[1]], [], {}, 0, op.loc)
        body.insert(i, new)
        body.insert(i + 1, wait)
        op.results[0].replace_all_uses_with(new.results[0])
        op.erase()


def rewrite_loop(plan: LoopPlan, func: Operation) -> Operation:
    """Replace ``plan.loop`` by the pipeline; returns the agent_switch."""
    loop = plan.loop
    outer = loop.parent
    loc = loop.loc
    old_body = _body(loop)
    loads = [s.load for s in plan.loads]
    payload = tuple(TileType(l.results[0].type.shape, l.results[0].type.element) for l in loads)
    pipe_t = PipelineType(plan.stages, "shared", payload)
    prod_it = PipelineIteratorType("producer", plan.stages, "shared", payload)
    cons_it = PipelineIteratorType("consumer", plan.stages, "shared", payload)
    lb, ub, step = loop.operands[:3]
    inits = loop.operands[3:]
    result_types = [r.type for r in loop.results]

    pipe = _pipe_op(
        "create_pipeline",
        [],
        [pipe_t],
        {
            "producer_arrivals": _i32(1),
            "consumer_arrivals": _i32(plan.consumer_warps * 32),
        },
        loc=loc,
    )
    outer.insert(outer.ops.index(loop), pipe)
    p = pipe.results[0]
    switch = _pipe_op(
        "agent_switch",
        [],
        result_types,
        {"num_agents_per_group": DenseArrayAttr(I32, (1, 1))},
        1,
        loc,
    )
    outer.insert(outer.ops.index(loop), switch)
    sblock = switch.regions[0].block

    def agent(warps: int, regs: Optional[int], types) -> Operation:
        attrs = {"num_warps": _i32(warps)}
        if regs is not None:
            attrs["max_regs"] = _i32(regs)
        a = _pipe_op("agent", [], types, attrs, 1, loc)
        sblock.append(a)
        return a

    def new_loop(block: Block, iter_inits, iter_types) -> Operation:
        attrs = dict(loop.attributes)
        f = Operation("scf.for", [lb, ub, step, *iter_inits], list(iter_types), attrs, 1, loc)
        b = f.regions[0].block
        b.add_argument(old_body.args[0].type, old_body.args[0].loc)
        for t in iter_types:
            b.add_argument(t)
        block.append(f)
        return f

    # ---- producer agent
    prod = agent(plan.producer_warps, plan.producer_regs, [])
    pb = prod.regions[0].block
    it0 = _pipe_op("create_iterator", [p], [prod_it], loc=loc)
    pb.append(it0)
    pf = new_loop(pb, [it0.results[0]], [prod_it])
    pfb = _body(pf)
    it = pfb.args[1]
    acq = _pipe_op("producer_acquire", [p, it], [_PRODUCER_TOKEN], loc=loc)
    pfb.append(acq)
    write = _pipe_op("producer_write", [p, it, acq.results[0]], [], {}, 1, loc)
    pfb.append(write)
    wb = write.regions[0].block
    mapping = {id(old_body.args[0]): pfb.args[0]}
    cloned: set = set()
    yielded = []
    for s in plan.loads:
        for op in s.slice:
            if id(op) not in cloned:
                cloned.add(id(op))
                wb.append(clone_op(op, mapping))
        new_load = clone_op(s.load, mapping)
        wb.append(new_load)
        yielded.append(new_load.results[0])
    wb.append(_pipe_op("yield", yielded, loc=loc))
    pfb.append(_pipe_op("producer_commit", [p, it, acq.results[0]], loc=loc))
    nxt = _pipe_op("inc_iter", [it], [prod_it], loc=loc)
    pfb.append(nxt)
    pfb.append(Operation("scf.yield", [nxt.results[0]], [], {}, 0, loc))
    pb.append(_pipe_op("yield", [], loc=loc))

    # ---- consumer agent: the original loop body, reading its staged operands from the stages
    cons = agent(plan.consumer_warps, plan.consumer_regs, result_types)
    cb = cons.regions[0].block
    ci0 = _pipe_op("create_iterator", [p], [cons_it], loc=loc)
    cb.append(ci0)
    cf = new_loop(cb, [*inits, ci0.results[0]], [*result_types, cons_it])
    cfb = _body(cf)
    cit = cfb.args[-1]
    wait = _pipe_op("consumer_wait", [p, cit], [_CONSUMER_TOKEN], loc=loc)
    read = _pipe_op(
        "consumer_read", [p, cit, wait.results[0]], [l.results[0].type for l in loads], loc=loc
    )
    cfb.append(wait)
    cfb.append(read)
    for old, new in zip(old_body.args, cfb.args):
        old.replace_all_uses_with(new)
    old_yield = old_body.ops[-1]
    for op in list(old_body.ops[:-1]):
        old_body.ops.remove(op)
        cfb.append(op)
    for l, v in zip(loads, read.results):
        l.results[0].replace_all_uses_with(v)
        l.erase()
    _to_async_dots(cfb, list(read.results))
    last = _last_stage_user(cfb, list(read.results))
    if last >= 0 and cfb.ops[last].name == "nv_tileas.async.dot":  # released once it completed
        last = max(cfb.ops.index(u) for u, _ in cfb.ops[last].results[1].uses)
    release = _pipe_op("consumer_release", [p, cit, wait.results[0]], loc=loc)
    cfb.insert(max(last, cfb.ops.index(read)) + 1, release)
    cnext = _pipe_op("inc_iter", [cit], [cons_it], loc=loc)
    cfb.append(cnext)
    cfb.append(Operation("scf.yield", [*old_yield.operands, cnext.results[0]], [], {}, 0, loc))
    old_yield.erase()
    _dead_cleanup(cfb)
    cb.append(_pipe_op("yield", cf.results[: len(result_types)], loc=loc))
    sblock.append(_pipe_op("yield", cons.results, loc=loc))

    for old, new in zip(loop.results, switch.results):
        old.replace_all_uses_with(new)
    loop.erase()
    func.set_attr("nv_tileas.num_warps", _i32(plan.consumer_warps + plan.producer_warps))
    return switch


def pipeline_k_loops(root: Operation, compute_capability: int = 0, num_stages: int = 0) -> list:
    """Rewrite every loop :func:`plan_loop` accepts; returns the agent_switch ops made."""
    made = []
    for loop, plan in explain_loops(root, compute_capability, num_stages):
        if isinstance(plan, LoopPlan):
            func = loop.parent_op
            made.append(rewrite_loop(plan, func))
    return made


@register(
    "nv-tileas-pipeline-k-loops",
    options={"num-stages": (int, 0), "compute-capability": (int, 0)},
    summary="turn tensor-core K loops into TMA producer/consumer pipelines (docs/pipelines.md)",
)
def _pass(op: Operation, options: dict) -> None:
    pipeline_k_loops(op, options.get("compute-capability", 0), options.get("num-stages", 0))
