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

import copy

from tilegen.runtime.codegen.control import _slots, copy_into
from tilegen.runtime.codegen.core import Emitter
from tilegen.runtime.codegen.mma import StagedBox
from tilegen.runtime.codegen.pipeline import Ring, mbarrier_wait
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


def _like(em: Emitter, x):
    """Fresh registers shaped as value ``x`` (a register, a list, a staged load)."""
    from tilegen.runtime.codegen.control import _class_from_name

    if isinstance(x, str) and x.startswith("%"):
        return em.new(_class_from_name(x))
    if isinstance(x, list):
        return [_like(em, r) for r in x]
    if hasattr(x, "pipe_buf") and isinstance(x.pipe_buf, StagedBox):
        y = copy.copy(x)
        box = x.pipe_buf
        y.pipe_buf = StagedBox(em.new("b32"), box.span, box.kmajor, box.box_bytes)
        return y
    return x  # an immediate: nothing to copy


def _copy(em: Emitter, dst, src) -> None:
    from tilegen.runtime.codegen.control import _move

    if isinstance(dst, list):
        for d, s in zip(dst, src):
            _copy(em, d, s)
    elif isinstance(dst, str) and dst != src:
        _move(em, dst, src)
    elif hasattr(dst, "pipe_buf") and isinstance(dst.pipe_buf, StagedBox):
        em.ins(f"mov.b32 {dst.pipe_buf.addr}, {src.pipe_buf.addr}")


def consumers(em: Emitter, op, fr, slots, stage_bytes: int, bufs_of, stages: int) -> None:
    """The consumer loop of the overlapped general form (module docstring). ``fr``: the
    pipeline's frame (async_loop.Frame); ``bufs_of(sbase)``: the staged loads' buffers in the
    stage at ``sbase`` (``stage_bytes`` apart); ``slots``: the loop-carried registers (the
    caller binds the results to them)."""
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
    bar, ty, step = fr.bar, fr.ty, fr.step

    turns = _PingPong(em) if em.num_warps == 8 else None
    ring = Ring(stages)
    ring.start(em, 0)
    iv = em.mov(fr.iv_cls, fr.lb)
    prev = em.new("pred")  # an iteration ran: its part B is pending
    em.ins(f"setp.ne.u32 {prev}, 0, 0")
    held = em.new("b32")  # the stage that iteration's part B reads
    em.ins(f"mov.b32 {held}, 0")

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

    top, done = loop_head(em, "async_body", ty, iv, fr.ub)
    mbarrier_wait(em, bar(0, ring.stage), ring.phase)
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
            emit_unswitched(em, op, a2)
            later = em.body
        finally:
            em.body = body_lines
            em._sink = em.body
        carry.allocate()
        nob, join = em.new_label("overlap_first"), em.new_label("overlap_join")
        em.ins(f"@!{prev} bra {nob}")
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
        done_b = em.new_label("overlap_released")
        em.ins(f"@!{prev} bra {done_b}")
        em.ins("wgmma.wait_group.sync.aligned 0")  # the previous iteration's last dot is done
        em.ins(f"mbarrier.arrive.shared::cta.b64 _, [{bar(1, held)}]")
        copy_into(em, op, [slots[k]], [new_acc])
        em.label(done_b)
        carry.capture()
        em.ins(f"mov.b32 {held}, {ring.stage}")
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
    out = part_b_of_previous()
    em.ins("wgmma.wait_group.sync.aligned 0")
    em.ins(f"mbarrier.arrive.shared::cta.b64 _, [{bar(1, held)}]")
    copy_into(em, op, [slots[k]], [out])
    em.label(skip)


def emit_unswitched(em: Emitter, loop, ops: list) -> None:
    """Emit ``ops`` (part A after the first dot); where a mask of theirs is all true in most
    iterations (uniform_select.py: attention's causal mask), emit them twice behind the
    iteration's predicate: as written, and with each such ``select`` replaced by its true
    operand; the values used after them end in the first copy's registers."""
    from tilegen.runtime.codegen.uniform_select import all_true, maskable

    selects = maskable(ops)
    inside = {id(o) for o in ops}

    fresh: set = set()

    def scalar(v):
        """The register of scalar ``v``: the body's scalar ops it needs are emitted here first
        (em.values may still hold another copy's registers, the producer's)."""
        o = getattr(v, "op", None)
        if o is not None and id(o) in inside and id(o) not in fresh:
            if any(getattr(r.type, "rank", 0) for r in o.results):
                return em.scalar(loop, v)  # not a scalar: fails with a located message
            for w in o.operands:
                scalar(w)
            em.emit_op(o)
            fresh.add(id(o))
        return em.scalar(loop, v)

    pred = all_true(em, selects, scalar) if selects else None
    if pred is None:
        for o in ops:
            em.emit_op(o)
        return
    made = {r for o in ops for r in o.results}
    body = loop.regions[0].blocks[0]
    used_after = [
        r
        for r in made
        if any(id(u) not in inside or u is body.ops[-1] for u in r.users) and r in made
    ]
    fast, join = em.new_label("mask_free"), em.new_label("mask_join")
    em.ins(f"@{pred} bra {fast}")
    for o in ops:
        em.emit_op(o)
    kept = {v: em.get(v) for v in used_after if v in em.values}
    em.ins(f"bra.uni {join}")
    em.label(fast)
    replaced = {id(o) for o in selects}
    # the masks' own computation, unused once the selects are gone (a replaced select still
    # uses its true operand: it becomes the select's value)
    dead = set(replaced)

    def live_use(r, u) -> bool:
        if id(u) not in dead:
            return True
        return id(u) in replaced and u.operands[1] is r

    for o in reversed(ops):
        if id(o) not in dead and not o.regions and o.results:
            if all(r.has_uses for r in o.results) and not any(
                live_use(r, u) for r in o.results for u in r.users
            ):
                dead.add(id(o))
    for o in ops:
        if id(o) in replaced:  # every element takes the true operand
            em.set(o.results[0], em.get(o.operands[1]))
        elif id(o) not in dead:
            em.emit_op(o)
    for v, regs in kept.items():
        _copy(em, regs, em.get(v))
        em.values[v] = regs
    em.label(join)


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


def staged_body(em: Emitter, op, slots, iv, bufs: dict) -> None:
    """One iteration of the general form's body without the overlap (``control.
    run_staged_body``'s work), the part between the first dot and the last through
    :func:`emit_unswitched` (the dots themselves once: ptxas serialized every wgmma of a
    body whose second dot was in both copies)."""
    from tilegen.runtime.codegen.control import copy_into

    body = op.regions[0].blocks[0]
    ops = body.ops[:-1]
    dots = [i for i, o in enumerate(ops) if o.name == "nv_tileaa.dot"]
    cut = dots[0] + 1 if dots else 0
    end = dots[-1] if len(dots) > 1 else len(ops)
    saved = getattr(em, "pipe_bufs", {})
    em.pipe_bufs, em._pipelining = {**saved, **bufs}, True
    try:
        em.set(body.args[0], iv)
        for a, s in zip(body.args[1:], slots):
            em.set(a, s)
        for o in ops[:cut]:
            em.emit_op(o)
        emit_unswitched(em, op, ops[cut:end])
        for o in ops[end:]:
            em.emit_op(o)
        copy_into(em, op, slots, [em.get(v) for v in body.ops[-1].operands])
    finally:
        em.pipe_bufs, em._pipelining = saved, False
