"""The async rule's general form (docs/pipelines.md section 13: K loops of several dots,
flash attention's): which loads the producer stages (:func:`general_loads`) or copies once
(:func:`kept_loads`), chains of such loops (:func:`chain_reason`, section 23), the overlap of
the last dot with the next iteration's first (section 16) and the decision
(:func:`general_decision`)."""

from __future__ import annotations

from math import prod
from typing import Optional

from tilegen.runtime.ir import Operation, OpResult
from tilegen.runtime.layouts.async_forms import deferred_dot
from tilegen.runtime.passes.async_decision import (
    ASYNC_MAX_STAGES,
    ASYNC_MMA,
    ELEMENT_BYTES,
    MEMORY_OPS,
    SMEM_EXTRA,
    AsyncDecision,
    elem_key,
    loop_dot,
    shared_budget,
)
from tilegen.runtime.passes.async_registers import (
    consumer_inc,
    consumer_registers,
    resident_registers,
)

#: the general form's ring depth without a hint (FlashAttention-3's K/V pipeline is 2 deep)
GENERAL_STAGES = 2
#: the overlapped loop's ring depth without a hint: a stage is held until its last dot is
#: done, in the middle of the next iteration, so a third stage keeps the producer a stage ahead
OVERLAP_STAGES = 3
#: registers a consumer thread needs beside the overlap's tiles (addresses, the softmax's
#: temporaries): attention_causal_fwd with 8 warps needs 2 x 64 + 32 = 160 of its 168 and does
#: not spill; with 4 warps 2 x 128 + 32 > 255, and ptxas spilled 436 bytes (section 16)
OVERLAP_SLACK = 32


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
        if ELEMENT_BYTES.get(elem_key(res.type)) != 2:
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
        if op.regions or any(w in op.name.split(".")[-1] for w in MEMORY_OPS if w != "load"):
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
        if not paths or ELEMENT_BYTES.get(elem_key(res.type)) != 2:
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


def chain_reason(func: Operation, loops: list, sm: int) -> Optional[str]:
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
            if op.regions or any(w in op.name.split(".")[-1] for w in MEMORY_OPS):
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
        if loop_dot(lp) is not None:
            return "a loop of one dot (the GEMM form) in the chain"
        why, loads = general_loads(func, lp, sm, first=loops[0])
        if why is not None:
            return why
        staged.append([(id(o.opdef.operand_group(o, "base")[0]), o.results[0].type) for o in loads])
    if any(s != staged[0] for s in staged[1:]):
        return "the loops stage different loads"
    return None


def general_decision(
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
        -(-(ELEMENT_BYTES[elem_key(o.results[0].type)] * _prod(o.results[0].type.shape)) // 1024)
        * 1024
        for o in loads
    )
    hint = options.num_stages or klp._stages_hint(func)
    fit = (shared_budget(func, options.target.sm, stage) - 64 * 1024 - SMEM_EXTRA) // stage
    loops = loops or [loop]
    chain = len(loops)
    overlap = all(_overlap(func, lp, options, mma, warps) for lp in loops)
    stages = min(hint or (OVERLAP_STAGES if overlap else GENERAL_STAGES), fit, ASYNC_MAX_STAGES)
    dots = [o for o in loop.walk() if o.name == "nv_tileaa.dot"]
    acc = sum(prod(d.results[0].type.shape) // (32 * warps) for d in dots)
    kept = resident_registers(loop, 32 * warps)  # in tensor memory, read back after the loop
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
            f"{elem_key(d.operands[0].type)} x {elem_key(d.operands[1].type)} -> "
            f"{elem_key(d.results[0].type)}"
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
        inc = max(launch, consumer_inc(launch, warps, 4, klp.PRODUCER_REGS))
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
            keys = (elem_key(a), elem_key(b), elem_key(c))
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
                span = tma.column_boxes(t.shape, ELEMENT_BYTES[elem_key(t)])[0][1].swizzle
            except ValueError:
                span = 0
            if span not in (32, 64, 128):
                return (
                    f"the sm_120 consumers read staged rows of 32, 64 or n x 128 bytes, not "
                    f"{t.shape[-1] * ELEMENT_BYTES[elem_key(t)]}"
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
                kept[id(a)] = ELEMENT_BYTES[elem_key(a.type)] * prod(a.type.shape)
    return sum(kept.values())


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
