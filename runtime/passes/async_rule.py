"""The one rule for the async tensor-core path (TMA + mbarrier pipeline, warp specialization,
wgmma on sm_90 / tcgen05 on sm_100), per kernel: :func:`decide` -> :class:`AsyncDecision`.

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
"""

from __future__ import annotations

from math import prod
from typing import Optional

from tilegen.runtime.ir import BlockArgument, Operation, OpResult
from tilegen.runtime.layouts.kernel import OCCUPANCY_CAP_DROPPED, one_cta_reason
from tilegen.runtime.layouts.async_forms import (
    RING_PAD,
    TMEM_ROWS_AT_ONCE,
    PASS_THROUGH,
    chain_sides,
    deferred_dot,
    elementwise,
    fragment_chain,
    init_chain,
    init_in_tmem,
    operand_load,
    side_bytes,
    stored_view,
    uniform_tile,
    zero_tile,
)
from tilegen.runtime.layouts.attrs import BlockedLayout, unit_dims_view
from tilegen.runtime.layouts.decisions import VECTOR_WIDTH
from tilegen.runtime.records import dataclass
from tilegen.runtime.types import TileType

#: target sm -> the async path's tensor-core instruction
ASYNC_MMA = {90: "wgmma", 100: "tcgen05", 103: "tcgen05", 110: "tcgen05", 120: "mma.sync"}
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
#: bytes of an element key
_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "tf32": 4, "f8E4M3FN": 1, "f8E5M2": 1, "i8": 1}
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
#: the async path's deepest ring without a num_stages hint: tileiras's deepest for the corpus
#: GEMMs (matmul_f16 / matmul_int8: 11, bench/tileiras_pipelines.py)
ASYNC_MAX_STAGES = 11
#: shared memory beside the stages and the accumulator scratch (barriers, maps, slot)
SMEM_EXTRA = 1024
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
#: the general form's ring depth without a hint (FlashAttention-3's K/V pipeline is 2 deep)
GENERAL_STAGES = 2
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
#: the overlapped loop's ring depth without a hint: a stage is held until its last dot is
#: done, in the middle of the next iteration, so a third stage keeps the producer a stage ahead
OVERLAP_STAGES = 3
#: on a GEMM-form K loop that runs on a CTA pair (section 18: the ``num_cta_in_cga = 2`` hint,
#: ``tcgen05.mma.cta_group::2`` issued by the even CTA for both)
ASYNC_PAIR_ATTR = "nv_tileas.cta_pair"
#: the attribute the ``async`` stage puts on the kernel's final ``tiled_store`` when the
#: epilogue writes through TMA (registers -> the idle stage ring -> cp.async.bulk.tensor)
TMA_STORE_ATTR = "nv_tileas.tma_store"
#: the epilogue's plain ``tiled_store`` written straight from sm_100's TMEM rows, a column chunk
#: at a time (:func:`tmem_store_plan`; docs/pipelines.md section 44)
TMEM_STORE_ATTR = "nv_tileas.tmem_store"
#: on a dot operand's ``tiled_load`` TMA cannot describe (rows or base of no 16-byte
#: multiple): the producer warp group's threads copy it into the stage, this many elements a
#: copy (section 43)
THREAD_COPY_ATTR = "nv_tileas.thread_copied"
#: ops that touch memory (none may run before the async loop: the producer warp group runs the
#: kernel's prologue too, with the consumers' layouts)
_MEMORY_OPS = ("load", "store", "atomic", "gather", "scatter", "print", "assert")


@dataclass(frozen=True)
class AsyncDecision:
    """Why a kernel does or does not take the async path on its target."""

    kernel: str
    target: str
    eligible: bool
    taken: bool
    reason: str  # "" when taken
    mma: str = ""  # "wgmma" / "tcgen05" when eligible
    stages: int = 0
    tile: tuple = ()  # (M, N, K) of the dot
    elements: str = ""  # "f16 x f16 -> f32"
    stage_bytes: int = 0
    consumer_warps: int = 0
    producer_warps: int = 0
    consumer_regs: Optional[int] = None
    producer_regs: Optional[int] = None
    #: the epilogue's store goes through TMA; else why not (taken kernels only)
    tma_store: bool = False
    store_reason: str = ""
    #: no TMA store, but the plain store writes sm_100's TMEM rows by column chunks (section 44)
    tmem_store: bool = False
    #: the general form's last dot runs beside the next iteration's first (section 16)
    overlap: bool = False
    #: the GEMM form runs on a CTA pair (section 18); ``stage_bytes`` are then one CTA's
    cta_pair: bool = False
    #: why a kernel that asks for a CTA pair (``num_cta_in_cga`` 2) runs one CTA a tile block
    pair_declined: str = ""
    #: the consumers take the producer's registers under the kernel's ``.maxnreg``
    #: (``consumer_regs`` is their ``setmaxnreg.inc``; section 21)
    rebalance: bool = False
    #: the occupancy hint's ``.maxnreg`` is dropped: even rebalanced, the consumers could not
    #: hold their accumulators within it (section 21)
    cap_dropped: bool = False
    #: K loops the general form's ring feeds one after the other (section 23)
    chain: int = 1
    #: the rows of the tile block each CTA of a pair computes (passes/pair_rows.py, section
    #: 40); 0: one CTA a tile block
    pair_rows: int = 0
    #: the operands the producer warp group's threads copy, TMA being unable (section 43):
    #: ("A", bytes a copy), ...
    thread_copied: tuple = ()
    #: the general form's loop-invariant A operands (attention's Q) the producer copies by
    #: TMA once, before the first stage (section 50)
    kept_tma: int = 0

    @property
    def over_48k(self) -> bool:
        """Whether the stages take more than 48 KB of shared memory (one static ``.shared``
        array all the same, as tileiras declares its: docs/pipelines.md)."""
        return self.stages * self.stage_bytes > 48 * 1024

    def line(self) -> str:
        head = f"{self.kernel} [{self.target}]: "
        if self.taken:
            head += "async path"
        elif self.eligible:
            head += f"eligible, today's path: {self.reason}"
        else:
            head += f"today's path: {self.reason}"
        if self.eligible:
            m, n, k = self.tile
            head += (
                f"; {self.mma} {m}x{n}x{k} {self.elements}, {self.stages} stages x "
                f"{self.stage_bytes} B"
                f"{' (over 48 KB)' if self.over_48k else ''}, "
                f"{self.consumer_warps} consumer + {self.producer_warps} producer warps"
            )
            if self.consumer_regs:
                head += f", setmaxnreg {self.producer_regs}/{self.consumer_regs}"
            for name, nbytes in self.thread_copied:
                how = f"{nbytes}-byte cp.async" if nbytes >= 4 else "through registers"
                head += f"; {name} copied by the producer's threads ({how}: no TMA)"
            if self.overlap:
                head += "; the last dot overlaps the next iteration's first"
            if self.chain > 1:
                head += f"; a chain of {self.chain} K loops on one ring"
            if self.kept_tma:
                head += f"; {self.kept_tma} loop-invariant A operand(s) copied by TMA once"
            if self.cta_pair:
                head += (
                    "; a CTA pair ("
                    + (
                        "tcgen05.mma.cta_group::2"
                        if self.mma == "tcgen05"
                        else "B multicast by TMA to both CTAs"
                    )
                    + f", {m // 2} rows per CTA)"
                )
        if self.pair_declined and self.taken:
            head += f"; one CTA, not a pair: {self.pair_declined}"
        if self.pair_rows:
            head += f"; the tile block's rows divided between a CTA pair, {self.pair_rows} each"
        if self.cap_dropped:
            head += "; the occupancy hint's .maxnreg dropped (the accumulators do not fit it)"
        if self.taken:
            head += (
                "; TMA store" if self.tma_store else f"; st.global epilogue ({self.store_reason})"
            )
            if self.tmem_store and self.mma == "tcgen05":
                head += "; stored from the TMEM rows 32 columns at a time"
            elif self.tmem_store:
                head += "; stored from the wgmma fragment through the ring, coalesced"
        return head


def _elem_key(t) -> Optional[str]:
    from tilegen.runtime.layouts.mma_choice import element_key

    return element_key(t)


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


def _loop_dot(loop: Operation) -> Optional[Operation]:
    dots = [o for o in loop.regions[0].blocks[0].ops if o.name == "nv_tileaa.dot"]
    return dots[0] if len(dots) == 1 else None


def _shape_reason(
    dot: Operation, sm: int, mma: str, warps: int, pair: bool = False
) -> Optional[str]:
    """None when the instruction shapes cover the dot's tile on ``sm`` (one CTA's half of its
    rows with ``pair``), else why not."""
    a, b, c = (v.type for v in dot.operands[:3])
    if any(getattr(t, "rank", 0) != 2 for t in (a, b, c)):
        return f"the dot is rank {getattr(a, 'rank', 0)} (batched); the async path takes 2-d dots"
    ka, kc = _elem_key(a), _elem_key(c)
    if (ka, kc) not in ASYNC_ELEMENTS or _elem_key(b) != ka:
        return f"{ka} x {_elem_key(b)} -> {kc} dots have no {mma} instruction"
    M, K = a.shape
    M //= 2 if pair else 1
    N = b.shape[1]
    tk = 32 // _BYTES[ka]
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
            if _elem_key(v.type) != "tf32":
                return f"operand {name} of the dot is converted to {_elem_key(v.type)} in the loop"
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
            out.append((name, s.threads * _BYTES.get(_elem_key(load.type), 4)))
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
        why = _chain_reason(func, loops, sm)
        if why is not None:
            return no(
                f"{len(loops)} K loops with dots; the async path takes one, or a chain of "
                f"general-form loops ({why})"
            )
        return _general_decision(func, loops[0], options, name, target, mma, loops)
    loop = loops[0]
    dot = _loop_dot(loop)
    if dot is None:
        return _general_decision(func, loop, options, name, target, mma)
    warps = klp._consumer_warps(func)
    pair, wanted, pair_why = False, cta_pair_wanted(func), ""
    if wanted:
        pair_why = _pair_reason(func, loop, dot, options)
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
    ka, kc = _elem_key(a), _elem_key(c)
    stage_bytes = sum(
        _BYTES.get(_elem_key(s.load.results[0].type), 4) * prod(s.load.results[0].type.shape)
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
        elements=f"{ka} x {_elem_key(b)} -> {kc}",
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
        elif mma == "wgmma" and _register_a(dot, rows, plan, consumer_regs_inc(plan), acc):
            # uncapped, A's fragments need more than the launch's share (256 x 128 on two
            # warp groups): the consumers take the registers the producer gives back
            kw.update(consumer_regs=consumer_regs_inc(plan), rebalance=True)
        if copied:
            _copier_registers(func, plan, kw, need, mma == "tcgen05")
    sides = staged_sides(loop, dot)
    kw["stage_bytes"] += sum(
        _BYTES.get(_elem_key(o.results[0].type), 4) * prod(o.results[0].type.shape) for o in sides
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


def _register_a(dot, rows: int, plan, inc: int, acc: int) -> bool:
    """Whether sm_90a's consumers take A from registers (an A converted f32 -> tf32:
    codegen/async_rs.py) only with ``inc`` registers, not with the launch's share."""
    from tilegen.runtime.codegen import async_rs
    from tilegen.runtime.passes.k_loop_pipelining import REGISTER_FILE

    src = getattr(dot.operands[0], "op", None)
    if src is None or src.name != "nv_tileaa.fp_to_fp":
        return False
    nq = rows // (16 * plan.consumer_warps)  # m64 instances per warp group
    K = dot.operands[0].type.shape[-1]
    share = min(255, REGISTER_FILE // (32 * (plan.consumer_warps + plan.producer_warps)))
    share = share // 8 * 8
    return async_rs.fits(nq, K, acc, inc) and not async_rs.fits(nq, K, acc, share)


def consumer_regs_inc(plan) -> int:
    """The consumers' ``setmaxnreg.inc``: what the producer warp group gives back (launched at
    ptxas's per-thread share of the register file, it drops to ``producer_regs``) spread over
    the consumer threads, in steps of 8 (tileiras's block-scaled GEMM: 384 threads launched at
    168, producer 32, consumers 232)."""
    from tilegen.runtime.passes.k_loop_pipelining import MAX_REGS_RANGE, REGISTER_FILE

    consumers, producers = 32 * plan.consumer_warps, 32 * plan.producer_warps
    launch = min(255, REGISTER_FILE // (consumers + producers)) // 8 * 8
    return _inc(launch, plan.consumer_warps, plan.producer_warps, plan.producer_regs)


def _inc(launch: int, consumer_warps: int, producer_warps: int, producer_regs: int) -> int:
    """The consumers' ``setmaxnreg.inc`` when every thread is launched at ``launch`` registers
    and the producer warp group drops to ``producer_regs``."""
    from tilegen.runtime.passes.k_loop_pipelining import MAX_REGS_RANGE

    consumers, producers = 32 * consumer_warps, 32 * producer_warps
    freed = (launch - producer_regs) * producers
    return min(MAX_REGS_RANGE[1], launch + freed // consumers) // 8 * 8


#: registers a warp-specialised consumer thread needs beside its accumulators (addresses,
#: loop counters, the epilogue's temporaries)
CONSUMER_SLACK = 32
#: more of them where C, the initial value, is loaded before the loop (sm_120)
INIT_SLACK = 16


def _copier_registers(func, plan, kw: dict, need: int, tmem: bool = False) -> None:
    """The producer's ``setmaxnreg.dec`` where its threads copy operands (section 43): they
    hold a stage's chunks in flight in registers, so the producer keeps what the consumers
    leave it (at most ``THREAD_COPY_REGS``): under a register cap, what their inc leaves of
    the cap, at least ``THREAD_COPY_MIN_REGS`` where the consumers keep ``need`` beside it (32
    spilled the copies of fuzz seeds 640356 and 641350 at occupancy 2); uncapped,
    ``THREAD_COPY_REGS`` beside one consumer warp group (which keeps the launch's 255), and
    beside two the consumers inc to what ``THREAD_COPY_MIN_REGS`` leaves - or, where their
    accumulator is in tensor memory (``tmem``) and ``need`` fits what ``THREAD_COPY_REGS``
    leaves (208), to that: two 8-warp kernels whose producer copied both operands spilled
    its loop's trip count at 48 to 80 registers (fuzz seeds 722894, 727545: 4 B), and a
    256 x 256 one 16 B (725396)."""
    from tilegen.runtime.layouts.kernel import register_cap
    from tilegen.runtime.passes import k_loop_pipelining as klp

    cw, pw = plan.consumer_warps, plan.producer_warps
    if kw.get("rebalance"):
        cap = None if kw.get("cap_dropped") else register_cap(func, 32 * (cw + pw), False)
        total = (cap or klp.REGISTER_FILE // (32 * (cw + pw))) * 32 * (cw + pw)
        total = min(total, klp.REGISTER_FILE)
        spare = (total - 32 * cw * kw["consumer_regs"]) // (32 * pw)
        narrow = len(kw["thread_copied"]) == 2 and all(w == 4 for _, w in kw["thread_copied"])
        if narrow and cap is not None and spare < klp.THREAD_COPY_REGS:
            if "nvvm.maxnreg" not in func.attributes:
                # both operands copied 4 bytes at a time: at the occupancy hint's share (48
                # at occupancy 2) the copies spilled 336 B, and 96 beside the consumers'
                # 160 still 16 B (fuzzer seed 1714324); the hint's cap is dropped, as where
                # the consumers cannot fit it (tileiras launches such kernels at 255)
                launch = min(255, klp.REGISTER_FILE // (32 * (cw + pw))) // 8 * 8
                inc = max(launch, _inc(launch, cw, pw, plan.producer_regs))
                kw.update(cap_dropped=True, consumer_regs=inc)
                total = launch * 32 * (cw + pw)
                spare = (total - 32 * cw * inc) // (32 * pw)
        if spare < klp.THREAD_COPY_MIN_REGS:
            inc = (total - 32 * pw * klp.THREAD_COPY_MIN_REGS) // (32 * cw) // 8 * 8
            if inc >= need:
                kw["consumer_regs"], spare = inc, klp.THREAD_COPY_MIN_REGS
    elif cw == klp.WARP_GROUP:
        spare = klp.THREAD_COPY_REGS
    else:
        spare = klp.THREAD_COPY_MIN_REGS
        roomy = (klp.REGISTER_FILE - 32 * pw * klp.THREAD_COPY_REGS) // (32 * cw) // 8 * 8
        # (a row of more than TMEM_ROWS_AT_ONCE accumulators is read by chunks: tmem_chunks)
        if tmem and roomy >= min(need, TMEM_ROWS_AT_ONCE + CONSUMER_SLACK):
            spare = klp.THREAD_COPY_REGS
        left = klp.REGISTER_FILE - 32 * pw * spare
        inc = min(klp.MAX_REGS_RANGE[1], left // (32 * cw) // 8 * 8)
        kw.update(consumer_regs=inc, rebalance=True)
    spare = spare // 8 * 8
    kw["producer_regs"] = max(plan.producer_regs, min(klp.THREAD_COPY_REGS, spare))


def consumer_registers(
    func, consumer_warps: int, producer_warps: int, producer_regs: int, need: int
) -> tuple:
    """(the consumers' ``setmaxnreg.inc`` under the kernel's register cap, or None where it has
    none; whether the occupancy hint's cap is dropped; the inc is then the uncapped one). With a cap (``nvvm.maxnreg`` or the
    ``occupancy`` hint's share of the register file) every thread launches at it; the producer
    warp group gives its registers back and the consumers take them, as tileiras's
    occupancy-2 GEMM does (``.maxnreg 128``, producer 32, consumers 224). Where even that
    leaves the consumers fewer than ``need`` registers (their accumulators and
    :data:`CONSUMER_SLACK`), an occupancy hint's cap is dropped: ptxas would refuse the kernel
    (C7602 "Insufficient registers") or spill the accumulators. An explicit ``nvvm.maxnreg``
    stays."""
    from tilegen.runtime.layouts.kernel import register_cap
    from tilegen.runtime.passes.k_loop_pipelining import REGISTER_FILE

    threads = 32 * (consumer_warps + producer_warps)
    cap = register_cap(func, threads, honor_dropped=False)
    if cap is None:
        return None, False
    inc = _inc(cap, consumer_warps, producer_warps, producer_regs)
    if inc >= need or "nvvm.maxnreg" in func.attributes:
        return max(inc, cap), False
    # uncapped, every thread launches at its share of the register file; the consumers still
    # take what the producer gives back
    launch = min(255, REGISTER_FILE // threads) // 8 * 8
    return max(launch, _inc(launch, consumer_warps, producer_warps, producer_regs)), True


def stage_bytes_of(dot, sides: tuple = ()) -> int:
    """Bytes of one stage as the emitter lays it out: A's and B's boxes, each 1024-aligned, then
    the staged side vectors (``sides``), each 128-aligned, the stage 1024-aligned."""
    from tilegen.runtime.layouts.access import element_bytes

    a, b = dot.operands[0].type, dot.operands[1].type
    esz = _BYTES[_elem_key(a)]
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


def epilogue_store(func: Operation, loop: Operation) -> tuple:
    """(the one ``tiled_store`` after ``loop`` at the kernel's top level, of a tile that depends
    on the loop's result, None) or (None, why not): beside it only loads of row or column
    vectors."""
    ops = func.regions[0].blocks[0].ops
    after = ops[ops.index(loop) + 1 :]
    mem = [o for o in after if o.regions or any(w in o.name.split(".")[-1] for w in _MEMORY_OPS)]
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
    if not isinstance(_loop_dot(loop).operands[2], BlockArgument):
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
        and _registers_only(func, loop, sm, shape[0], warps)
    )


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
    esz = _BYTES[_elem_key(a)]
    stage = stage_bytes_of(dot, tuple(staged_sides(loop, dot)))
    if pair:
        M, stage = M // 2, pair_stage_bytes(dot, sm)
    if ASYNC_MMA.get(sm) == "mma.sync":
        return _sync_lowering(func, loop, dot, plan, warps, sm, hinted, stage)
    from tilegen.runtime.targets import shared_optin

    # sm_90 tf32 / 8-bit B loaded K x N: three K-major B^T buffers the consumers transpose each
    # stage's B into (async_loop.BT_BUFFERS: one stage's wgmmas stay in flight over the next
    # transpose). B loaded N x K and transposed is staged K-major already: no buffers
    transposing = _elem_key(a) in TRANSPOSED_B and not _b_kmajor(dot)
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
    regs_only = _registers_only(func, loop, sm, M, 0 if pair else warps, fragment=pair)
    # (an initial value written into TMEM but converted into the accumulator's layout first:
    # the conversion's exchange needs the scratch, since the consumers load C after the
    # producer has started filling the ring - unless the consumers load C in the rows' order,
    # codegen/fragment_load.py, as sm_90 loads it in the fragment's)
    if regs_only and _converted_init(loop) and init_chain(loop) is None:
        regs_only = False
    for scratch in (0, M * N * 4) if regs_only else (M * N * 4,):
        stages = 0
        if scratch and in_ring:
            fit = (_shared_budget(func, sm, stage, bt) - SMEM_EXTRA - bt) // stage
            stages = min(cap, fit)
        if stages * stage + bt < scratch or not stages:
            fit = _shared_budget(func, sm, stage, scratch + bt) - scratch - SMEM_EXTRA - bt
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
    esz = _BYTES[_elem_key(a)]
    # an initial value that is not uniform reaches the registers through the kernel's own
    # scratch after the warp groups split (the ring is live by then): room for it beside -
    # unless the consumers load C in the fragment's layout (init_chain; fragment_load.py)
    direct = uniform_tile(loop.operands[3]) or init_chain(loop) is not None
    scratch = 0 if direct else M * N * 4
    kmajor = _b_kmajor(dot)
    # tf32 / 8-bit B loaded K x N: two B^T buffers the consumers transpose each stage's B into
    # (async_loop.BT_BUFFERS_SYNC; ldmatrix transposes 16-bit elements only)
    transposed = _elem_key(a) in TRANSPOSED_B and not kmajor
    bt = 2 * (-(-(K * N * esz) // 1024) * 1024) if transposed else 0
    fit = (_shared_budget(func, sm, stage, scratch + bt) - scratch - bt - SMEM_EXTRA) // stage
    stages = min(plan.stages if hinted else ASYNC_MAX_STAGES, fit)
    if _elem_key(c) not in ("f32", "i32"):
        return f"the sm_120 consumers accumulate in f32 or i32, not {_elem_key(c)}", stages
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


#: the memory ops a CTA pair must not run twice (each CTA runs the whole kernel but the loop's
#: half and the TMA store's half)
_WRITES = ("store", "atomic", "scatter", "print", "assert")


def pair_stage_bytes(dot: Operation, sm: int) -> int:
    """One CTA's stage on a pair: 128 rows of A, and half of B (sm_100) or all of it (sm_90,
    where the halves the two CTAs copy are multicast to both)."""
    a, b = dot.operands[0].type, dot.operands[1].type
    esz = _BYTES[_elem_key(a)]
    (M, K), N = a.shape, b.shape[1]
    return (M // 2 * K + K * (N // 2 if sm >= 100 else N)) * esz


def cta_pair_wanted(func: Operation) -> bool:
    """Whether the kernel's hints ask for clusters of two CTAs (``num_cta_in_cga = 2``)."""
    from tilegen.runtime.layouts.kernel import kernel_spec_int

    return kernel_spec_int(func, "num_cta_in_cga") == 2


def _pair_reason(func: Operation, loop: Operation, dot: Operation, options) -> Optional[str]:
    """None when the GEMM form runs on a CTA pair (docs/pipelines.md sections 18-19), else why
    not. Each CTA holds 128 rows of A and of the accumulator. On sm_100 the even CTA's thread
    issues ``tcgen05.mma.cta_group::2`` (M 256) and each CTA stages half of B's columns; on
    sm_90 each CTA runs its own wgmmas on the whole of B, which the two CTAs copy half each
    and multicast to both. So the M x N tile must be 256 rows, its accumulator must stay in
    registers up to a TMA store (:func:`_registers_only`: each CTA stores its own rows), and
    nothing else in the kernel may write memory (both CTAs run it)."""
    sm = options.target.sm
    if sm not in (90, 100):
        return f"sm_{sm} has no CTA pairs here (sm_90: TMA multicast, sm_100: cta_group::2)"
    a, b = dot.operands[0].type, dot.operands[1].type
    if getattr(a, "rank", 0) != 2 or getattr(b, "rank", 0) != 2:
        return "the dot is not 2-d"
    M, N = a.shape[0], b.shape[1]
    why = one_cta_reason(sm, M, N, options.cta_pair)
    if why is not None:
        return why
    if M not in (128, 256):
        return f"the pair takes 128 or 256-row tiles (64 or 128 rows per CTA), not {M}"
    if sm == 90:
        K = a.shape[1]
        if K % 16:
            return f"the sm_90 pair multicasts B in two halves of K rows, multiples of 8: not K {K}"
    elif N not in (64, 128, 256):
        return (
            f"the pair takes N 64, 128 or 256 (a thread holds a row of N accumulators, half of "
            f"one of 256 on 8 warps; B's halves a multiple of 32 columns), not {N}"
        )
    if not isinstance(dot.operands[2], BlockArgument):
        return "the pair takes the plain GEMM form (the dot accumulates into the loop's value)"
    if sm != 90 and any(_converted_operand(v) for v in dot.operands[:2]):
        # (sm_90: each CTA's consumers round their own stage; sm_100's MMAs read both CTAs')
        return "the pair's operands reach the dot as staged (no f32 -> tf32 rounding)"
    from tilegen.runtime.layouts.tma_rules import tma_describable

    for name, v in zip("AB", dot.operands[:2]):  # (the pair's halves and multicast are TMA's)
        if getattr(v, "op", None) is not None and v.op.name == "nv_tileaa.fp_to_fp":
            v = v.op.operands[0]
        load = operand_load(v)[0]
        why = tma_describable(load) if load is not None else "it is not a tiled_load"
        if why is not None:
            return (
                f"the pair stages its operands by TMA, and operand {name}'s load cannot be: {why}"
            )
    # (each CTA loads its own rows of C in its fragment's / TMEM rows' order, fragment_load.py)
    if not _registers_only(func, loop, sm, 128, fragment=True):
        return (
            "the pair keeps each CTA's rows in registers up to the kernel's TMA store: a "
            "uniform initial value or C as loaded, and elementwise ops from the "
            "loop to one tiled_store"
        )
    store, _ = tma_store_plan(func, loop, 1 << 20, 1 << 20)
    tiles = [o.results[0].type for o in loop.walk() if o.name == "nv_tileaa.tiled_load"]
    tiles.append(store.opdef.operand_group(store, "value")[0].type)
    if any(t.rank < 2 or any(n != 1 for n in t.shape[:-2]) for t in tiles):
        # (a batch's (1, M, N) tiles: leading unit dims, the pair's boxes and halves 2-d)
        return "the pair takes 2-d loads and stores, or a batch's with leading unit dims"
    for op in func.walk():
        if op is not store and any(w in op.name.split(".")[-1] for w in _WRITES):
            return f"'{op.name}' would run in both CTAs of the pair"
    return None


def _converted_operand(v) -> bool:
    return isinstance(v, OpResult) and v.op.name == "nv_tileaa.fp_to_fp"


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


def _registers_only(
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
    chain = fragment_chain(loop, store, through_conversion=True)  # (_store_unconverted's)
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


def general_loads(func: Operation, loop: Operation, sm: int, first=None) -> tuple:
    """(why the async path's *general* form cannot take ``loop``, or None; the loads the
    producer copies). The form (docs/pipelines.md section 13; flash attention's two dots):
    wgmma (sm_90); every dot of the body is at its top level and laid out for wgmma; every
    ``tiled_load`` of the body is a dot's B operand of 16-bit elements as loaded (N-major,
    through views only) that TMA can copy (the operands' rule), from a memref defined before
    the loop, at indices from the induction variable and invariants; the loop writes no
    memory; and nothing before the loop writes memory (the producer warp group runs the
    kernel's prologue too: its loads only repeat reads). The body then runs on the consumer
    warps as today's path emits it, each dot reading its B from the stage."""
    from tilegen.runtime.layouts.decisions import mma_family
    from tilegen.runtime.layouts.staging import dot_paths
    from tilegen.runtime.passes.k_loop_pipelining import (
        _operand_slice,
        _writes_memory,
        is_defined_outside,
        tma_describable,
    )

    mma = ASYNC_MMA.get(sm)
    if mma is None:
        return "the general async loop (several dots) is lowered for wgmma and tcgen05 only", []
    body = loop.regions[0].blocks[0]
    dots = [o for o in loop.walk() if o.name == "nv_tileaa.dot"]
    if any(d.parent is not body for d in dots):
        return "a dot of the K loop is nested in a region", []
    for d in dots:
        if mma_family(d) != mma or getattr(d.operands[0].type, "rank", 0) != 2:
            why = f"the layout stage did not lay every dot of the loop out for {mma}"
            if mma == "tcgen05":  # runtime/layouts/mma_choice.tcgen05_instruction
                why += (
                    " (a tcgen05 dot takes f16/bf16/tf32/fp8 -> f32 or i8 -> i32, M 64 or 128"
                    " with 4 or 8 warps or"
                    " M 256 with 8, N a power of two up to 256)"
                )
            return why, []
    writer = _writes_memory(loop)
    if writer is not None:
        return f"the loop writes memory ('{writer.name}')", []
    loads = []
    for op in body.ops:
        if op.name != "nv_tileaa.tiled_load":
            if op.regions and any(
                "load" in o.name or "gather" in o.name for o in op.walk() if o is not op
            ):
                return f"a load of the loop is nested in '{op.name}'", []
            continue
        res = op.results[0]
        paths = dot_paths(res, res.type.rank - 2)  # (dQ's K: read as loaded and transposed)
        if not paths or any(p[2] != 1 or p[4] for p in paths):
            return "a load of the loop is not a dot's B operand (as loaded or transposed)", []
        if _BYTES.get(_elem_key(res.type)) != 2:
            return "a staged B operand of the loop is not 16-bit", []
        if len(op.results) > 1 and op.results[1].has_uses:
            return "a staged load's token is used", []
        why = tma_describable(op)
        base = op.opdef.operand_group(op, "base")[0]
        if why is None and not is_defined_outside(base, loop):
            why = "the memref is defined in the loop"
        if why is None and _operand_slice(op, loop) is None:
            why = "its indices depend on loop-carried values"
        if why is not None:
            return f"a B operand's load cannot be a TMA copy: {why}", []
        loads.append(op)
    if not loads:
        return "no load of the loop to stage", []
    for op in func.regions[0].blocks[0].ops:  # (a chain: before its first loop)
        if op is (first or loop):
            break
        if op.regions or any(w in op.name.split(".")[-1] for w in _MEMORY_OPS if w != "load"):
            return f"'{op.name}' runs before the K loop (the producer would run it too)", []
    return None, loads


def kept_loads(func: Operation, loops: list, sm: int, loads: list) -> list:
    """The loads the producer of general-form ``loops`` (one loop, or a chain's) copies by TMA
    once, before the first stage (docs/pipelines.md section 50): each load of the function's
    top block before the first loop whose tile reaches nothing but the target's async dots
    (wgmma, tcgen05, sm_120's mma.sync) of the loops' bodies, as their A operand as loaded
    (through views dropping unit dims only), 16-bit, of rows a multiple of 64, that TMA can
    copy - where every load the loop stages (``loads``) is a TMA copy too (no producer threads
    copying). Where the rows are divided between a pair's CTAs (section 40), each copies its
    own (the load's indices say which), never multicast."""
    from tilegen.runtime.layouts.decisions import mma_family
    from tilegen.runtime.layouts.staging import dot_paths
    from tilegen.runtime.layouts.tma_rules import tma_describable

    mma = ASYNC_MMA.get(sm)
    if mma is None:
        return []
    if any(tma_describable(ld) is not None for ld in loads):
        return []
    top = func.regions[0].blocks[0].ops
    if any(lp not in top for lp in loops):
        return []
    bodies = {id(lp.regions[0].blocks[0]) for lp in loops}
    out = []
    for op in top[: top.index(loops[0])]:
        if op.name != "nv_tileaa.tiled_load":
            continue
        res = op.results[0]
        paths = dot_paths(res, res.type.rank - 2)
        if not paths or _BYTES.get(_elem_key(res.type)) != 2:
            continue
        if len(op.results) > 1 and op.results[1].has_uses:
            continue
        if any(
            idx != 0
            or transposed
            or convert is not None
            or id(dot.parent) not in bodies
            or mma_family(dot) != mma
            or dot.operands[0].type.shape[0] % 64
            for _, dot, idx, transposed, convert in paths
        ):
            continue
        if tma_describable(op) is None:
            out.append(op)
    return out


def _chain_reason(func: Operation, loops: list, sm: int) -> Optional[str]:
    """Why the K loops ``loops`` (in order) cannot run as one chain of the general form, or
    None: each qualifies on its own, nothing but scalar and tile arithmetic runs between them
    (the consumers alone run it), the later loops' bounds and the scalars their bodies use are
    computed before the first loop or from such values by scalar arithmetic between the loops
    (the producer, which leaves the kernel's flow at the first loop, computes them too:
    ``async_loop.producer_scalars``), and every loop
    stages the same loads - the same memrefs, tile types, in the same order - so one stage
    layout and one set of tensor maps serve them all."""
    top = func.regions[0].blocks[0].ops
    at = [top.index(lp) for lp in loops]
    for a, b in zip(at, at[1:]):
        for op in top[a + 1 : b]:
            if op.regions or any(w in op.name.split(".")[-1] for w in _MEMORY_OPS):
                return f"'{op.name}' runs between them"
    before = {id(r) for op in top[: at[0]] for r in op.results}
    # scalar arithmetic between the loops on values from before the first: the producer
    # computes it too (async_loop.producer_scalars)
    for op in top[at[0] + 1 : at[-1]]:
        if op in loops or op.regions or any(getattr(r.type, "rank", 0) for r in op.results):
            continue
        if all(not isinstance(v, OpResult) or id(v) in before for v in op.operands):
            before.update(id(r) for r in op.results)
    for lp in loops[1:]:
        for v in lp.operands[:3]:
            if isinstance(v, OpResult) and id(v) not in before:
                return "a later loop's bounds depend on the loops before it"
        inside = {id(o) for o in lp.walk()}
        for o in lp.walk():  # the scalars its loads' indices may use (the producer's)
            for v in o.operands:
                if (
                    isinstance(v, OpResult)
                    and not getattr(v.type, "rank", 0)
                    and id(v.op) not in inside
                    and id(v) not in before
                ):
                    return "a later loop uses a scalar that depends on the loops before it"
    staged = []
    for lp in loops:
        if _loop_dot(lp) is not None:
            return "a loop of one dot (the GEMM form) in the chain"
        why, loads = general_loads(func, lp, sm, first=loops[0])
        if why is not None:
            return why
        staged.append([(id(o.opdef.operand_group(o, "base")[0]), o.results[0].type) for o in loads])
    if any(s != staged[0] for s in staged[1:]):
        return "the loops stage different loads"
    return None


def _shared_budget(func, sm: int, stage: int, fixed: int = 64 * 1024) -> int:
    """Shared memory the stages and their neighbours may take: the share that lets the
    ``occupancy`` hint's CTAs fit on an SM (``targets.occupancy_shared``), where two stages
    still fit in it beside ``fixed`` bytes; else the CTA's whole opt-in (the hint then cannot
    be met by any ring)."""
    from tilegen.runtime.layouts.kernel import kernel_spec_int
    from tilegen.runtime.targets import occupancy_shared, shared_optin

    share = occupancy_shared(sm, kernel_spec_int(func, "occupancy"))
    if share - fixed - SMEM_EXTRA >= 2 * stage:
        return share
    return shared_optin(sm)


def _general_decision(
    func, loop, options, name: str, target: str, mma: str, loops: Optional[list] = None
) -> AsyncDecision:
    """The decision for a K loop that is not one dot's (section 13); ``loops``: the loops of a
    chain it is the first of (section 23; each overlaps its dots where every one can, section
    24: the last iteration's held stage is released before the next loop starts)."""
    from math import prod as _prod

    from tilegen.runtime.passes import k_loop_pipelining as klp
    from tilegen.runtime.targets import shared_optin

    why, loads = general_loads(func, loop, options.target.sm)
    warps = klp._consumer_warps(func)
    if why is None and mma == "mma.sync":
        why = _sync_general_reason(loops or [loop], warps)
    if why is not None:
        return AsyncDecision(name, target, False, False, why)
    stage = sum(
        -(-(_BYTES[_elem_key(o.results[0].type)] * _prod(o.results[0].type.shape)) // 1024) * 1024
        for o in loads
    )
    hint = options.num_stages or klp._stages_hint(func)
    fit = (_shared_budget(func, options.target.sm, stage) - 64 * 1024 - SMEM_EXTRA) // stage
    loops = loops or [loop]
    chain = len(loops)
    overlap = all(_overlap(func, lp, options, mma, warps) for lp in loops)
    stages = min(hint or (OVERLAP_STAGES if overlap else GENERAL_STAGES), fit, ASYNC_MAX_STAGES)
    dots = [o for o in loop.walk() if o.name == "nv_tileaa.dot"]
    acc = sum(prod(d.results[0].type.shape) // (32 * warps) for d in dots)
    kept = _resident_registers(loop, 32 * warps)  # in tensor memory, read back after the loop
    need = max((2 if overlap else 1) * (acc - kept), kept) + OVERLAP_SLACK
    inc, dropped = consumer_registers(func, warps, 4, klp.PRODUCER_REGS, need)
    occ_fit = 0
    if not overlap and inc is not None and not dropped:  # the hint's CTAs fit in registers
        occ_fit = _occupancy_stages(func, options.target.sm, loops, stage)
    if occ_fit:  # one stage of boxes released one by one, and the hint's CTAs on each SM
        stages = min(hint or GENERAL_STAGES, occ_fit, ASYNC_MAX_STAGES)
    elif stages < 1 and not overlap:  # one stage beside the kept A and 16 KB (section 49;
        # the emitter steps back to today's path where the body's scratch outgrows that)
        tight = shared_optin(options.target.sm) - _kept_bytes(loops) - 16 * 1024 - SMEM_EXTRA
        stages = min(hint or 1, tight // stage, 1)
    kw = dict(
        mma=mma,
        stages=stages,
        tile=tuple(dots[0].operands[0].type.shape) + (dots[0].operands[1].type.shape[1],),
        elements=" ; ".join(
            f"{_elem_key(d.operands[0].type)} x {_elem_key(d.operands[1].type)} -> "
            f"{_elem_key(d.results[0].type)}"
            for d in dots
        ),
        stage_bytes=stage,
        consumer_warps=warps,
        producer_warps=4,
        producer_regs=klp.PRODUCER_REGS,
        store_reason="the general form keeps the kernel's own epilogue",
        overlap=overlap,
        chain=chain,
        kept_tma=0 if overlap else len(kept_loads(func, loops, options.target.sm, loads)),
    )
    if warps % 4:
        return AsyncDecision(
            name, target, True, False, f"{warps} warps: not whole warp groups", **kw
        )
    if stages < (2 if overlap else 1):  # (one stage: its loads are released one by one)
        why = "two stages do not fit in shared memory beside 64 KB for the body"
        if not overlap:
            why = (
                "one stage does not fit in shared memory beside the loop-invariant A operands "
                "and 16 KB for the body"
            )
        return AsyncDecision(name, target, True, False, why, **kw)
    launch = min(255, klp.REGISTER_FILE // (32 * (warps + 4))) // 8 * 8
    if inc is None and launch < 248:  # no cap: the consumers still take the producer's share
        inc = max(launch, _inc(launch, warps, 4, klp.PRODUCER_REGS))
    if inc is not None:
        kw.update(consumer_regs=inc, rebalance=True)
    return AsyncDecision(name, target, True, True, "", cap_dropped=dropped, **kw)


def _sync_general_reason(loops: list, warps: int) -> Optional[str]:
    """Why sm_120's mma.sync consumers cannot run the general form of ``loops`` (section 48),
    or None: each dot f16 / bf16 into f32 laid out as an mma.sync fragment, the warps side by
    side along N or stacked along M (``mma_choice.mma_sync_rows_layout``: A, P, from
    registers; a loop-invariant A kept once; B read by ``ldmatrix`` from the stage:
    ``mma._mma_sync_staged``), and
    each staged load of rows swizzled in 32-, 64- or 128-byte boxes. The registers are
    sm_90's: the producer warp group drops to 32, the consumers take the rest."""
    from tilegen.runtime.codegen import tma
    from tilegen.runtime.layouts.mma_choice import (
        mma_sync_accumulator_layout,
        mma_sync_rows_fragment,
    )

    for loop in loops:
        for d in (o for o in loop.walk() if o.name == "nv_tileaa.dot"):
            a, b, c = (v.type for v in d.operands[:3])
            keys = (_elem_key(a), _elem_key(b), _elem_key(c))
            if keys[0] != keys[1] or keys[0] not in ("f16", "bf16") or keys[2] != "f32":
                return f"sm_120's general form takes f16 / bf16 dots into f32, not {keys}"
            fragments = (mma_sync_accumulator_layout(d, warps), mma_sync_rows_fragment(warps))
            if c.encoding not in fragments or d.results[0].type.encoding != c.encoding:
                return (
                    f"the layout stage did not lay a {a.shape[0]}x{b.shape[1]} dot's "
                    f"accumulator out as an mma.sync fragment of {warps} warps (side by side "
                    "along N, or stacked along M)"
                )
        for op in loop.walk():
            if op.name != "nv_tileaa.tiled_load":  # (each the dot's B: general_loads)
                continue
            t = op.results[0].type
            try:
                span = tma.column_boxes(t.shape, _BYTES[_elem_key(t)])[0][1].swizzle
            except ValueError:
                span = 0
            if span not in (32, 64, 128):
                return (
                    f"the sm_120 consumers read staged rows of 32, 64 or n x 128 bytes, not "
                    f"{t.shape[-1] * _BYTES[_elem_key(t)]}"
                )
    return None


def _occupancy_stages(func, sm: int, loops: list, stage: int) -> int:
    """Stages of ``stage`` bytes that fit in the ``occupancy`` hint's share of shared memory
    (2 or more CTAs an SM) beside the loops' loop-invariant dot A operands (kept in shared
    memory: attention's Q) and 16 KB, for the general form whose consumers release each staged
    load on its own (docs/pipelines.md section 27): one stage then still refills K while the
    softmax and the second dot run, and the other CTAs hide the rest. 0 where none fits or
    there is no such hint. (Only asked where the hint's register cap holds: otherwise a second
    CTA would not fit anyway, and a second stage is worth more.)"""
    from tilegen.runtime.layouts.kernel import kernel_spec_int
    from tilegen.runtime.targets import occupancy_shared

    occ = kernel_spec_int(func, "occupancy")
    if not occ or occ < 2:
        return 0
    room = occupancy_shared(sm, occ) - _kept_bytes(loops) - 16 * 1024 - SMEM_EXTRA
    return max(0, room // stage)


def _kept_bytes(loops: list) -> int:
    """Bytes of the loops' loop-invariant dot A operands (attention's Q), which the general
    form keeps in shared memory beside the ring."""
    kept: dict = {}
    for lp in loops:
        inside = {id(r) for o in lp.walk() for r in o.results}
        for d in (o for o in lp.walk() if o.name == "nv_tileaa.dot"):
            a = d.operands[0]
            if id(a) not in inside:  # defined outside (a chain's loops share it)
                kept[id(a)] = _BYTES[_elem_key(a.type)] * prod(a.type.shape)
    return sum(kept.values())


def _resident_registers(loop, threads: int) -> int:
    """Registers a thread does not hold for the loop's accumulators that stay in tensor
    memory (codegen/tmem_resident.py's rule)."""
    from tilegen.runtime.codegen.tmem_resident import resident_dot

    out = 0
    for j in range(len(loop.results)):
        found = resident_dot(loop, j, threads)
        if found is not None:
            out += prod(found[0].results[0].type.shape) // threads
    return out


#: registers a consumer thread needs beside the overlap's tiles (addresses, the softmax's
#: temporaries): attention_causal_fwd with 8 warps needs 2 x 64 + 32 = 160 of its 168 and does
#: not spill; with 4 warps 2 x 128 + 32 > 255, and ptxas spilled 436 bytes (section 16)
OVERLAP_SLACK = 32


def _overlap(func, loop, options, mma: str, warps: int) -> bool:
    """Whether the general form's consumers overlap the last dot with the next iteration's
    first (section 16): asked for (``overlap_mma=True``; by default, None, it is off: on an
    H200 causal attention at d 64, the one gpu-check shape where it fit the registers, ran
    14-16% faster without it, section 46), wgmma (the tcgen05 dots share one TMEM allocation,
    so each waits for the one before), the loop splits (``deferred_dot``), and the registers
    fit: while the last dot runs, the first one's result, the last one's old and new
    accumulators and two P tiles are live, about twice the dots' accumulator registers per
    consumer thread; with :data:`OVERLAP_SLACK` that must fit the kernel's register budget
    (its ``.maxnreg``, else one CTA's share)."""
    from tilegen.runtime.layouts.kernel import register_budget

    if mma != "wgmma" or options.overlap_mma is not True or deferred_dot(loop) is None:
        return False
    acc = sum(
        prod(d.results[0].type.shape) // (32 * warps)
        for d in loop.walk()
        if d.name == "nv_tileaa.dot"
    )
    threads = 32 * (warps + 4)
    return 2 * acc + OVERLAP_SLACK <= register_budget(func, threads)


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


def _accumulators_over_cap(func: Operation) -> bool:
    """Whether a kernel on today's path carries more registers of K loop values (the dots'
    accumulators, a thread's share at the layout stage's CTA size) than the ``occupancy`` hint's
    register cap leaves beside :data:`CONSUMER_SLACK`: the hint's cap is then dropped, as
    :func:`consumer_registers` drops it on the async path. ptxas would spill them inside the
    loop (fuzzer seed 170108: sm_120, 256 x 128 f32 accumulators on 8 warps under occupancy
    2's 128 registers, 472 bytes). An explicit ``nvvm.maxnreg`` stays."""
    from tilegen.runtime.layouts.decisions import NUM_WARPS
    from tilegen.runtime.layouts.kernel import register_cap

    warps = func.attributes.get(NUM_WARPS)
    if warps is None or "nvvm.maxnreg" in func.attributes:
        return False
    threads = 32 * warps.value
    cap = register_cap(func, threads, honor_dropped=False)
    if cap is None:
        return False
    need = 0
    for loop in func.regions[0].blocks[0].ops:
        if loop.name != "scf.for" or not any(o.name == "nv_tileaa.dot" for o in loop.walk()):
            continue
        bits = 0
        for v in loop.results:
            t = v.type
            width = getattr(getattr(t, "element", None), "width", 32)
            bits += prod(getattr(t, "shape", ())) * max(32, width)
        need = max(need, -(-bits // (32 * threads)))
    return need > 0 and need + CONSUMER_SLACK > cap


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
        if not d.taken and _accumulators_over_cap(func):
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
            if _loop_dot(loop) is None:  # the general form: the loads it stages
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
                d.rebalance or not isinstance(_loop_dot(loop).operands[2], BlockArgument)
            ):
                loop.set_attr(ASYNC_CONSUMER_REGS_ATTR, IntegerAttr(d.consumer_regs, I32))
            for side in staged_sides(loop, _loop_dot(loop)):
                side.set_attr(ASYNC_STAGED_ATTR, UnitAttr())
            if d.tma_store:
                dot = _loop_dot(loop)
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
                _store_unconverted(store)
                chain = fragment_chain(loop, store)
                for side in chain_sides(chain) if chain else ():
                    _side_compact(side)
            elif d.tmem_store:
                sm, warps = options.target.sm, d.consumer_warps
                ring = d.stages * stage_bytes_of(
                    _loop_dot(loop), staged_sides(loop, _loop_dot(loop))
                )
                store = tmem_store_plan(func, loop, sm, warps, False, ring)
                store.set_attr(TMEM_STORE_ATTR, UnitAttr())
                for side in chain_sides(fragment_chain(loop, store)):
                    _side_compact(side)
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


def _store_unconverted(store: Operation) -> None:
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


def _side_compact(broadcast: Operation) -> None:
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


def report(decisions) -> str:
    """The ``async-plan`` artifact: one line per kernel."""
    return "".join(f"// async: {d.line()}\n" for d in decisions)


__all__ = ["ASYNC_MMA", "AsyncDecision", "decide", "decide_kernel", "report"]
