"""K loops whose MMAs are waited for a step later (docs/pipelines.md section 42).

A pipelined K loop (control.py ``_pipelined_for``: ``S`` stage buffers filled by cp.async
``S - 1`` iterations ahead) used to wait for each iteration's MMAs where they were issued
(``wgmma.wait_group 0``; tcgen05: the commit's mbarrier), so the tensor core sat idle from
the end of MMA i until iteration i + 1 had woken, waited for its copies, met at the CTA
barrier and issued MMA i + 1. Here, where nothing in the loop reads the accumulator:

* iteration i issues MMA i and does not wait for it;
* it then waits for MMA i - 1, the last reader of the stage iteration i + S - 1 is copied
  into, and issues that copy;
* after the loop it waits for the last MMA before anything reads the result.

MMA i is queued behind MMA i - 1 while the loop goes on. With two stages the copy would wait
for MMA i - 1 and MMA i + 1 for the copy: at least three (:func:`deferral`; control.py gives
such a loop the third stage where it fits).

**Which loops** (:func:`deferred_dot`): the loop's only dot reads both operands from the
stages and accumulates into an iteration argument that nothing else uses: on sm_100a a
tcgen05 dot whose accumulator stays in tensor memory (tmem_resident.py), on sm_90a a wgmma
dot whose accumulator is in its fragment layout, written in place (``wgmma_dot.wgmma_dot``: the
loop's own registers, so the next iteration's wgmmas chain on registers still in flight, as
PTX allows for wgmmas of one shape).

**How they wait.** tcgen05 (:class:`Tcgen05Steps`): one thread issues and commits MMA i to
one of two mbarriers, every thread waits for the other (MMA i - 1's) before copying; the two
barriers' (address, parity) registers swap each iteration, and every commit is waited for
once, in the loop or after it, so their phases stay in step across loops. wgmma
(:class:`WgmmaSteps`): ``wgmma.wait_group 1`` leaves this iteration's group in flight (a
warp's wait sees its warp group's collective MMA done); with two warp groups a CTA barrier
then makes the other's MMA i - 1 done too before any warp copies.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.codegen.core import Emitter

#: the two barriers a tcgen05 K loop's MMAs commit to in turn
BARRIERS = "__tilegen_mma_done"


def deferred_dot(em: Emitter, loop, loads):
    """The dot whose MMAs pipelined K loop ``loop`` (``loads``: its staged loads) may wait for
    a step later (module docstring), or None."""
    from tilegen.runtime.codegen import tmem_resident
    from tilegen.runtime.codegen.wgmma_layout import wgmma_plan
    from tilegen.runtime.layouts.mma_choice import wgmma_accumulator_layout

    dots = [o for o in loop.walk() if o.name == "nv_tileaa.dot"]
    body = loop.regions[0].blocks[0]
    if len(dots) != 1 or dots[0].parent is not body:
        return None
    d = dots[0]
    staged = {(pl.plan.dot, pl.plan.idx) for pl in loads}
    if (d, 0) not in staged or (d, 1) not in staged:
        return None
    yields = list(body.ops[-1].operands)
    if d.results[0] not in yields or d.results[0].num_uses != 1:
        return None
    j = yields.index(d.results[0])
    arg = body.args[1 + j]
    if d.operands[2] is not arg or arg.num_uses != 1:  # a plain accumulation
        return None
    if em.sm >= 100 and tmem_resident._is_tcgen05(d):
        return d if (loop, j) in tmem_resident.plan_of(em).residents else None
    if em.sm == 90 and wgmma_plan(d, em.num_warps, em.sm) is not None:
        lay = wgmma_accumulator_layout(em.num_warps)
        ok = em.dist_of(d, arg.type).layout == em.dist_of(d, d.results[0].type).layout == lay
        return d if ok else None
    return None


class _Steps:
    """A loop's deferred MMAs: ``dot``; ``used``: the dot took the deferred form (set while
    the body is emitted; otherwise it waited where it issued and nothing is pending)."""

    def __init__(self, dot) -> None:
        self.dot = dot
        self.used = False

    def retire_previous(self, em: Emitter) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def retire_last(self, em: Emitter) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class WgmmaSteps(_Steps):
    """sm_90a: the dot commits its group and does not wait (``wgmma_dot.wgmma_dot``)."""

    def retire_previous(self, em: Emitter) -> None:
        """After iteration i's body: MMA i - 1 is done; with two warp groups, a barrier so
        that the other's is too before any warp copies over what it read."""
        if self.used:
            em.ins("wgmma.wait_group.sync.aligned 1")
            if em.num_warps > 4:
                em.barrier()

    def retire_last(self, em: Emitter) -> None:
        if self.used:
            em.ins("wgmma.wait_group.sync.aligned 0")


class Tcgen05Steps(_Steps):
    """sm_100a: thread 0 commits MMA i to ``cur`` (``tcgen05_dot``); ``prev`` (parity ``pp``)
    is MMA i - 1's barrier while ``pending`` (a predicate) says there was one."""

    def __init__(self, em: Emitter, dot) -> None:
        from tilegen.runtime.codegen.pipeline import mbarrier_init, mbarrier_init_fence
        from tilegen.runtime.codegen.tcgen05_dot import tensor_memory

        super().__init__(dot)
        tm = tensor_memory(em)
        regs = getattr(tm, "steps", None)
        if regs is None:  # once per kernel: two barriers and their (address, parity) pairs
            em.pre.insert(0, f"\t.shared .align 8 .b8 {BARRIERS}[16];")
            em.resident_bytes += 16
            with em.hoisted():
                regs = [em.new("b32") for _ in range(4)]
                cur, prev, pc, pp = regs
                em.ins(f"mov.u32 {cur}, {BARRIERS}")
                em.ins(f"add.u32 {prev}, {cur}, 8")
                skip = em.new_label("mma_done_init")
                em.ins(f"@!{tm.t0} bra {skip}")
                mbarrier_init(em, cur, 1)
                mbarrier_init(em, prev, 1)
                mbarrier_init_fence(em)  # (the loop's barrier before the first use publishes)
                em.pre.append(f"{skip}:")
                em.ins(f"mov.b32 {pc}, 0")
                em.ins(f"mov.b32 {pp}, 0")
            tm.steps = regs
        self.cur, self.prev, self.pc, self.pp = regs
        self.pending = em.new("pred")  # an MMA of this loop not yet waited for
        em.ins(f"setp.ne.u32 {self.pending}, 0, 0")

    def _wait_prev(self, em: Emitter) -> None:
        from tilegen.runtime.codegen.pipeline import mbarrier_wait

        skip = em.new_label("mma_prev")
        em.ins(f"@!{self.pending} bra {skip}")
        mbarrier_wait(em, self.prev, self.pp)
        em.ins(f"xor.b32 {self.pp}, {self.pp}, 1")
        em.label(skip)

    def retire_previous(self, em: Emitter) -> None:
        """After iteration i's body: wait for MMA i - 1, then MMA i's barrier is the
        previous one."""
        if not self.used:
            return
        self._wait_prev(em)
        for a, b in ((self.cur, self.prev), (self.pc, self.pp)):
            t = em.new("b32")
            em.ins(f"mov.b32 {t}, {a}")
            em.ins(f"mov.b32 {a}, {b}")
            em.ins(f"mov.b32 {b}, {t}")
        em.ins(f"setp.eq.u32 {self.pending}, 0, 0")

    def retire_last(self, em: Emitter) -> None:
        """After the loop: the last MMA is done before anything reads D."""
        if self.used:
            self._wait_prev(em)
            em.ins("tcgen05.fence::after_thread_sync")


def deferral(em: Emitter, loop, loads, stages: int) -> Optional[_Steps]:
    """How pipelined K loop ``loop`` (``stages`` stage buffers) waits for its MMAs a step
    later, or None (they are waited for where they are issued). Emits the loop's set-up."""
    d = deferred_dot(em, loop, loads)
    if stages < 3 or d is None:
        return None
    return Tcgen05Steps(em, d) if em.sm >= 100 else WgmmaSteps(d)
