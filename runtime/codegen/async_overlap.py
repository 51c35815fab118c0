"""The async general form's consumers with FlashAttention-3's intra-warpgroup overlap
(docs/pipelines.md section 16; the loop carries ``nv_tileas.async_overlap``, decided by
runtime/passes/async_rule.py from :func:`~tilegen.runtime.layouts.async_forms.deferred_dot`).

The body splits into part A (everything up to and around the first dot: attention's ``QK^T``
and softmax) and part B (the last dot and its accumulator operand: ``acc * alpha + P V``).
Iteration j issues its first dot, then part B of iteration j - 1 (from registers that
iteration left behind: P, alpha, V's stage), waits for the first dot alone
(``wgmma.wait_group 1``) and runs the rest of part A while the last dot of j - 1 runs; then it
waits for that dot, releases its stage and keeps this iteration's values for the next. After
the loop, part B runs once more for the last iteration. Part B's inputs are copied into
registers of their own only after the dot that read the previous ones completed (wgmma reads
its register operands asynchronously).

With two consumer warp groups the issues also take turns (FlashAttention-3's ping-pong): a
warp group issues its dots only after the other one issued its own (named barrier
:data:`PINGPONG` + its index: ``bar.sync`` to wait for its turn, ``bar.arrive`` on the
other's to hand it over), so one group's softmax runs while the other's dots do."""

from __future__ import annotations

from tilegen.runtime.codegen.control import copy_into
from tilegen.runtime.codegen.core import Emitter
from tilegen.runtime.codegen.pipeline import Ring, mbarrier_wait
from tilegen.runtime.codegen.uniform_select import _copy, _like, emit_ops
from tilegen.runtime.layouts.async_forms import deferred_dot

#: the ping-pong's named barriers: PINGPONG + warp group (0 and 1 are the CTA's and the
#: consumers' barriers)
PINGPONG = 2


class _Carry:
    """The registers part B of iteration j reads in iteration j + 1: one copy per value part A
    (or the block) makes, allocated at the first capture."""

    def __init__(self, em: Emitter, op, values: list):
        self.em, self.op, self.values = em, op, values
        self.regs: dict = {}

    def allocate(self) -> None:
        """Registers for every carried value (each made by the iteration emitted so far)."""
        for v in self.values:
            self.regs[v] = _like(self.em, self.em.get(v))

    def capture(self) -> None:
        for v in self.values:
            _copy(self.em, self.regs[v], self.em.get(v))

    def bind(self) -> dict:
        """Bind every carried value to its copy; returns what to restore."""
        em = self.em
        saved = {v: em.values.get(v) for v in self.values}
        for v in self.values:
            em.values[v] = self.regs[v]
        return saved


def consumers(
    em: Emitter, op, fr, slots, stage_bytes: int, bufs_of, stages: int, ring=None, bounds=None
) -> None:
    """The consumer loop of the overlapped general form (module docstring). ``fr``: the
    pipeline's frame (async_loop.Frame); ``bufs_of(sbase)``: the staged loads' buffers in the
    stage at ``sbase`` (``stage_bytes`` apart); ``slots``: the loop-carried registers (the
    caller binds the results to them). A loop of a chain (section 24) goes on on the chain's
    ``ring`` with its own ``bounds`` (lb, ub, step, type, register class); its last iteration's
    stage is released before it returns."""
    from tilegen.runtime.codegen.async_loop import loop_head

    body = op.regions[0].blocks[0]
    last, part_b, k = deferred_dot(op)
    in_b = {id(o) for o in part_b}
    ops = body.ops[:-1]
    first = next(o for o in ops if o.name == "nv_tileaa.dot")
    cut = ops.index(first) + 1
    a1 = [o for o in ops[:cut] if id(o) not in in_b]
    a2 = [o for o in ops[cut:] if id(o) not in in_b]
    acc = body.args[1 + k]
    made = set(body.args) | {r for o in ops for r in o.results}
    carried, seen = [], set()
    for o in part_b:
        for v in o.operands:
            if v in made and v is not acc and id(getattr(v, "op", None)) not in in_b:
                if v not in seen:
                    seen.add(v)
                    carried.append(v)
    carry = _Carry(em, op, carried)
    yields = body.ops[-1].operands
    lb, ub, step, ty, iv_cls = bounds or (fr.lb, fr.ub, fr.step, fr.ty, fr.iv_cls)
    bar = fr.bar
    # each staged load on its own barriers (docs/pipelines.md section 27): part A's (K^T) waited
    # at the top and released once part A is done, part B's (V) waited before part B and
    # released with it, one iteration later
    sides = box_sides(op) if getattr(fr, "boxes", 1) > 1 else None
    a_boxes = [b for b, side in enumerate(sides or ()) if side == "a"]
    b_boxes = [b for b, side in enumerate(sides or ()) if side == "b"]

    def arrive(stage, boxes) -> None:
        for b in boxes:
            fr.release(bar(1, stage, b))

    turns = _PingPong(em) if em.num_warps == 8 else None
    if ring is None:
        ring = Ring(stages)
        ring.start(em, 0)
    iv = em.mov(iv_cls, lb)
    prev = em.new("pred")  # an iteration ran: its part B is pending
    em.ins(f"setp.ne.u32 {prev}, 0, 0")
    held = em.new("b32")  # the stage that iteration's part B reads
    em.ins(f"mov.b32 {held}, 0")
    held_phase = em.new("b32")  # (its lap's parity: part B's boxes are waited for late)
    em.ins(f"mov.b32 {held_phase}, 0")

    def wait_b() -> None:
        for b in b_boxes:
            mbarrier_wait(em, bar(0, held, b), held_phase)

    def part_b_of_previous() -> list:
        """Part B of the previous iteration (its dot committed, not waited for); the new
        accumulator registers."""
        saved = carry.bind()
        em.values[acc] = slots[k]
        em.wgmma_deferred.add(last)
        try:
            for o in part_b:
                em.emit_op(o)
        finally:
            em.wgmma_deferred.discard(last)
        out = em.get(last.results[0])
        for v, x in saved.items():
            if x is None:
                em.values.pop(v, None)
            else:
                em.values[v] = x
        return out

    top, done = loop_head(em, "async_body", ty, iv, ub)
    if sides is None:
        mbarrier_wait(em, bar(0, ring.stage), ring.phase)
    for b in a_boxes:
        mbarrier_wait(em, bar(0, ring.stage, b), ring.phase)
    sbase = em.new("b32")
    em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {stage_bytes}, {fr.base}")
    saved_bufs = getattr(em, "pipe_bufs", {})
    em.pipe_bufs, em._pipelining = {**saved_bufs, **bufs_of(sbase)}, True
    try:
        em.set(body.args[0], iv)
        for a, s in zip(body.args[1:], slots):
            em.set(a, s)
        if turns is not None:
            turns.wait()
        em.wgmma_deferred.add(first)  # committed; waited for below
        try:
            for o in a1:
                em.emit_op(o)
        finally:
            em.wgmma_deferred.discard(first)
        # part A's rest and the capture go to a buffer first: part B, emitted before them,
        # reads the carried registers the capture allocates
        body_lines, em.body = em.body, []
        em._sink = em.body
        try:
            emit_ops(em, op, a2)
            later = em.body
        finally:
            em.body = body_lines
            em._sink = em.body
        carry.allocate()
        nob, join = em.new_label("overlap_first"), em.new_label("overlap_join")
        em.ins(f"@!{prev} bra {nob}")
        wait_b()
        new_acc = part_b_of_previous()  # noqa: F841 (registers read below)
        if turns is not None:
            turns.hand_over()
        em.ins("wgmma.wait_group.sync.aligned 1")  # the first dot is done
        em.ins(f"bra.uni {join}")
        em.label(nob)
        if turns is not None:
            turns.hand_over()
        em.ins("wgmma.wait_group.sync.aligned 0")
        em.label(join)
        em.body.extend(later)
        arrive(ring.stage, a_boxes)  # part A is done with them
        done_b = em.new_label("overlap_released")
        em.ins(f"@!{prev} bra {done_b}")
        em.ins("wgmma.wait_group.sync.aligned 0")  # the previous iteration's last dot is done
        if sides is None:
            fr.release(bar(1, held))
        arrive(held, b_boxes)
        copy_into(em, op, [slots[k]], [new_acc])
        em.label(done_b)
        carry.capture()
        em.ins(f"mov.b32 {held}, {ring.stage}")
        em.ins(f"mov.b32 {held_phase}, {ring.phase}")
        em.ins(f"setp.eq.u32 {prev}, 0, 0")
        rest = [i for i in range(len(slots)) if i != k]
        copy_into(em, op, [slots[i] for i in rest], [em.get(yields[i]) for i in rest])
    finally:
        em.pipe_bufs, em._pipelining = saved_bufs, False
    ring.advance(em)
    em.ins(f"add.{ty} {iv}, {iv}, {step}")
    em.ins(f"bra {top}")
    em.label(done)
    if turns is not None:
        turns.finish()
    # the last iteration's part B
    skip = em.new_label("overlap_none")
    em.ins(f"@!{prev} bra {skip}")
    wait_b()
    out = part_b_of_previous()
    em.ins("wgmma.wait_group.sync.aligned 0")
    if sides is None:
        fr.release(bar(1, held))
    arrive(held, b_boxes)
    copy_into(em, op, [slots[k]], [out])
    em.label(skip)


def box_sides(op) -> "list | None":
    """For each staged load of overlapped loop ``op`` (async_loop._general_staged's order):
    "a" when only part A reads it (attention's K^T), "b" when only the last dot does (V), so
    each can be released on its own; None when one is read by both, or by nothing."""
    from tilegen.runtime.codegen.async_loop import _general_staged, box_reader_ops

    found = deferred_dot(op)
    if found is None:
        return None
    last = found[0]
    staged, _ = _general_staged(op)
    body = op.regions[0].blocks[0]
    out = []
    for x in staged:
        readers = {id(t) for t in box_reader_ops(x.load, body)}
        if not readers or id(body.ops[-1]) in readers:  # (the yield: the next iteration)
            return None
        if readers == {id(last)}:
            out.append("b")
        elif id(last) in readers:
            return None
        else:
            out.append("a")
    return out


class _PingPong:
    """The two consumer warp groups' turns at issuing (named barriers PINGPONG + group, 256
    threads: the waiting group's ``bar.sync`` and the other group's ``bar.arrive``; immediate
    ids under a group predicate, as ptxas reserves all 16 barriers for a register id). Group 1
    arrives once first, so group 0 starts; group 0 takes that extra arrival after the loop, so
    every barrier ends complete."""

    def __init__(self, em: Emitter):
        self.em = em
        _, _, warp = em.tid()
        self.first = em.new("pred")  # warp group 0
        em.ins(f"setp.lt.u32 {self.first}, {warp}, 4")
        em.ins(f"@!{self.first} bar.arrive {PINGPONG}, 256")

    def wait(self) -> None:
        self.em.ins(f"@{self.first} bar.sync {PINGPONG}, 256")
        self.em.ins(f"@!{self.first} bar.sync {PINGPONG + 1}, 256")

    def hand_over(self) -> None:
        self.em.ins(f"@{self.first} bar.arrive {PINGPONG + 1}, 256")
        self.em.ins(f"@!{self.first} bar.arrive {PINGPONG}, 256")

    def finish(self) -> None:
        self.em.ins(f"@{self.first} bar.sync {PINGPONG}, 256")
