"""The async rule's register budgets: the consumers' ``setmaxnreg.inc`` and the producer's
``.dec`` under the kernel's register cap (docs/pipelines.md sections 21 and 43), and whether
today's path drops the occupancy hint's cap for its accumulators."""

from __future__ import annotations

from math import prod

from tilegen.runtime.ir import Operation
from tilegen.runtime.layouts.async_forms import TMEM_ROWS_AT_ONCE

#: registers a warp-specialised consumer thread needs beside its accumulators (addresses,
#: loop counters, the epilogue's temporaries)
CONSUMER_SLACK = 32
#: more of them where C, the initial value, is loaded before the loop (sm_120)
INIT_SLACK = 16


def register_a(dot, rows: int, plan, inc: int, acc: int) -> bool:
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
    return consumer_inc(launch, plan.consumer_warps, plan.producer_warps, plan.producer_regs)


def consumer_inc(launch: int, consumer_warps: int, producer_warps: int, producer_regs: int) -> int:
    """The consumers' ``setmaxnreg.inc`` when every thread is launched at ``launch`` registers
    and the producer warp group drops to ``producer_regs``."""
    from tilegen.runtime.passes.k_loop_pipelining import MAX_REGS_RANGE

    consumers, producers = 32 * consumer_warps, 32 * producer_warps
    freed = (launch - producer_regs) * producers
    return min(MAX_REGS_RANGE[1], launch + freed // consumers) // 8 * 8


def copier_registers(func, plan, kw: dict, need: int, tmem: bool = False) -> None:
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
                inc = max(launch, consumer_inc(launch, cw, pw, plan.producer_regs))
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
    none; whether the occupancy hint's cap is dropped; the inc is then the uncapped one). With
    a cap (``nvvm.maxnreg`` or the ``occupancy`` hint's share of the register file) every
    thread launches at it; the producer warp group gives its registers back and the consumers
    take them, as tileiras's occupancy-2 GEMM does (``.maxnreg 128``, producer 32, consumers
    224). Where even that leaves the consumers fewer than ``need`` registers (their
    accumulators and :data:`CONSUMER_SLACK`), an occupancy hint's cap is dropped: ptxas would
    refuse the kernel (C7602 "Insufficient registers") or spill the accumulators. An explicit
    ``nvvm.maxnreg`` stays."""
    from tilegen.runtime.layouts.kernel import register_cap
    from tilegen.runtime.passes.k_loop_pipelining import REGISTER_FILE

    threads = 32 * (consumer_warps + producer_warps)
    cap = register_cap(func, threads, honor_dropped=False)
    if cap is None:
        return None, False
    inc = consumer_inc(cap, consumer_warps, producer_warps, producer_regs)
    if inc >= need or "nvvm.maxnreg" in func.attributes:
        return max(inc, cap), False
    # uncapped, every thread launches at its share of the register file; the consumers still
    # take what the producer gives back
    launch = min(255, REGISTER_FILE // threads) // 8 * 8
    return max(launch, consumer_inc(launch, consumer_warps, producer_warps, producer_regs)), True


def resident_registers(loop, threads: int) -> int:
    """Registers a thread does not hold for the loop's accumulators that stay in tensor
    memory (codegen/tmem_resident.py's rule)."""
    from tilegen.runtime.codegen.tmem_resident import resident_dot

    out = 0
    for j in range(len(loop.results)):
        found = resident_dot(loop, j, threads)
        if found is not None:
            out += prod(found[0].results[0].type.shape) // threads
    return out


def accumulators_over_cap(func: Operation) -> bool:
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
