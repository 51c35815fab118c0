"""Structured control flow: ``scf.for``, ``scf.if``, ``scf.while`` (and ``ub.poison``).

Conditions and bounds are CTA-uniform scalars (the frontend only branches on scalars), so a
plain ``@p bra`` keeps every thread together and ``bar.sync`` / ``shfl.sync`` inside a body stay
legal. Loop-carried values and ``if`` results live in fresh registers (a tile: one per layout
register; tokens: nothing); the yielded values are copied in at the end of each body, as a
parallel copy (a yield may permute the carried registers). Thread-invariant setup the emitter
caches (bases, coordinates) is hoisted to the kernel entry by core, so it is defined on every path.
"""

from __future__ import annotations

import re

from tilegen.runtime.codegen import tmem_resident
from tilegen.runtime.codegen.core import Emitter, Memref, elem_info, fail, handles, is_tile
from tilegen.runtime.codegen.reduce import run_region
from tilegen.runtime.codegen.regs import PREFIX
from tilegen.runtime.layouts.decisions import num_stages, prefetched
from tilegen.runtime.layouts.staging import index_slice
from tilegen.runtime.types import MemTokenType, TokenType


def _slots(em: Emitter, op, types) -> list:
    """Fresh registers for values of ``types``: a name, a list of names, or None (token)."""
    out = []
    for j, t in enumerate(types):
        if op.name == "scf.for" and is_tile(t):  # an accumulator kept in tensor memory
            tile = tmem_resident.slot(em, op, j)
            if tile is not None:
                out.append(tile)
                continue
        if _is_token(t):
            out.append(None)
            continue
        cls, _, _ = elem_info(op, t)
        if is_tile(t):
            out.append([em.new(cls) for _ in range(em.dist_of(op, t).nregs)])
        else:
            out.append(em.new(cls))
    return out


def _flat(slots, vals, op) -> list[tuple[str, object]]:
    """(destination register, source) pairs of a copy of ``vals`` into ``slots``."""
    pairs = []
    for s, v in zip(slots, vals):
        if s is None:
            continue
        if isinstance(v, Memref):
            fail(op, f"PTX backend does not support memrefs carried by '{op.name}' yet")
        if isinstance(s, list):
            if not isinstance(v, list) or len(v) != len(s):
                fail(op, f"PTX backend: '{op.name}' carries a tile it cannot place")
            pairs += list(zip(s, v))
        else:
            if isinstance(v, list):
                fail(op, f"PTX backend: '{op.name}' carries a tile it cannot place")
            pairs.append((s, v))
    return pairs


_CLASS = {p: c for c, p in PREFIX.items()}


def _class_from_name(reg: str) -> str:
    """Register class of a RegAlloc name (``%rd7`` -> b64)."""
    m = re.fullmatch(r"%([a-z]+)\d+", reg)
    return _CLASS.get(m.group(1), "b32") if m else "b32"


def _is_token(t) -> bool:
    return isinstance(t, (TokenType, MemTokenType))


def _move(em: Emitter, dst: str, src) -> None:
    cls = _class_from_name(dst)
    if cls == "pred" and not (isinstance(src, str) and src.startswith("%")):
        em.ins(f"setp.ne.u32 {dst}, {src}, 0")
    else:
        em.ins(f"mov.{cls} {dst}, {src}")


def copy_into(em: Emitter, op, slots, vals) -> None:
    """Parallel copy of ``vals`` into ``slots`` (sources that are also destinations are read
    before any destination is written)."""
    if any(isinstance(s, tmem_resident.TmemTile) for s in slots):
        slots, vals = tmem_resident.copy_into(em, slots, vals)
    pairs = [(d, s) for d, s in _flat(slots, vals, op) if d != s]
    dests = {d for d, _ in pairs}
    staged = []
    for d, s in pairs:
        if isinstance(s, str) and s in dests:
            t = em.new(_class_from_name(s))
            _move(em, t, s)
            s = t
        staged.append((d, s))
    for d, s in staged:
        _move(em, d, s)


def _bind(em: Emitter, values, slots) -> None:
    if any(isinstance(s, tmem_resident.TmemTile) for s in slots):
        slots = tmem_resident.bind_results(em, values[0].op, slots)
    for v, s in zip(values, slots):
        em.set(v, s)


# ----------------------------------------------------------------------------- K-loop pipelining


class _PipeLoad:
    """One cp.async-staged load of a pipelined loop: its index slice, shared layout and place in
    a stage."""

    def __init__(self, load, plan, slice_ops, layout, off):
        self.load, self.plan, self.slice_ops = load, plan, slice_ops
        self.rows, self.cols, self.nbytes = layout
        self.off = off


def pipeline_smem_cap(sm: int, suffix: str, occupancy: "int | None" = None) -> int:
    """Shared memory (bytes, scratch included) a kernel with pipelined loops may take. Static
    ``.shared`` past 48 KB needs an ``a`` target where the target has one (``suffix``: the
    variant the user asked for; "" lets the kernel take ``a``, as codegen/emit.py
    ``_fit_static_shared`` does, and tileiras always does) or ptxas's extended shared memory
    (sm_80/86/89). Within that: the ``occupancy`` hint's share of the SM
    (``targets.occupancy_shared``; 1: the whole opt-in, as tileiras's 4-stage sm_80 GEMMs take
    106,496 B), and without a hint half the SM's, so that two CTAs still fit (what 4 warps at
    255 registers allow)."""
    from tilegen.runtime.targets import STATIC_SHARED_PLAIN, VARIANTS, occupancy_shared
    from tilegen.runtime.targets import shared_optin, static_shared_limit

    if suffix not in ("", "a") and sm in VARIANTS["a"]:
        return STATIC_SHARED_PLAIN
    share = occupancy_shared(sm, occupancy) if occupancy else shared_optin(sm) // 2 - 1024
    return min(static_shared_limit(sm, "a"), share)


def _pipeline_plan(em: Emitter, op):
    """(loads, stages, stage bytes, read by wgmma or tcgen05?) when the layout stage pipelined scf.for ``op``
    (``nv_tileas.num_stages``, its loads marked ``nv_tileas.prefetch``; runtime/layouts/
    staging.py says which), else None. Here only what shared memory holds is settled: loads
    whose dot path has no cp.async layout (``mma_staging.staged_layout``) stay per-iteration,
    and the stages are lowered while they do not fit 48 KB beside the estimated scratch (or
    emit.py's retry budget)."""
    from tilegen.runtime.codegen.memory import stage_plan
    from tilegen.runtime.codegen.mma_staging import staged_layout
    from tilegen.runtime.codegen.wgmma_layout import wgmma_plan
    from tilegen.runtime.layouts.decisions import mma_family

    stages = num_stages(op)
    if stages < 2 or getattr(em, "pipe_budget", None) == 0 or getattr(em, "_pipelining", False):
        return None
    body = op.regions[0].blocks[0]
    loads, off, wg = [], 0, False
    budget = getattr(em, "pipe_budget", None)
    for ld in body.ops:
        sp = stage_plan(ld) if prefetched(ld) else None
        if sp is None:
            continue
        dot = sp.dot
        lay = staged_layout(dot, sp.idx, em.num_warps, em.sm, sp.transposed, sp.convert)
        if lay is None:
            continue
        slice_ops = index_slice(ld, op)
        if slice_ops is None:
            continue
        size = (lay[2] + 127) // 128 * 128
        if budget is not None and 2 * (off + size) > budget:
            continue  # (emit.py's retry) the two-stage buffers must fit the budget
        loads.append(_PipeLoad(ld, sp, slice_ops, lay, off))
        off += size
        # wgmma and tcgen05 read the stage through the async proxy (a fence after the copies)
        wg = wg or mma_family(dot) == "tcgen05" or wgmma_plan(dot, em.num_warps, em.sm) is not None
    if not loads:
        return None
    # the stage buffers sit beside the scratch: leave room for what the body's dots and
    # exchanges still stage there (their old-path A + B at most, 8 KB at least)
    from tilegen.runtime.codegen.core import ELEMENTS, elem_key

    planned = {(pl.plan.dot, pl.plan.idx) for pl in loads}
    from tilegen.runtime.codegen.deferred_mma import deferred_dot

    # (a loop whose MMAs run a step behind stages nothing else and needs a third stage more
    # than the margin; emit.py's retry still fits any scratch after it)
    reserve = max(em.smem_bytes, 8192 if deferred_dot(em, op, loads) is None else 0)
    for o in op.walk():
        if o.name == "nv_tileaa.dot" and o.operands[0].type.rank == 2:
            (M, K), N = o.operands[0].type.shape, o.operands[1].type.shape[1]
            esz = ELEMENTS.get(elem_key(o.operands[0].type), ("", 4))[1]
            row = max(K * esz + 16, K * esz * 9 // 8)
            rows = (M if (o, 0) not in planned else 0) + (N if (o, 1) not in planned else 0)
            reserve = max(reserve, rows * row + 256)
    from tilegen.runtime.layouts.kernel import kernel_spec_int

    occupancy = kernel_spec_int(em.func, "occupancy")
    suffix = "a" if wg else em.user_suffix
    cap = pipeline_smem_cap(em.sm, suffix, occupancy)
    limit = cap - reserve if budget is None else budget
    while stages >= 2 and stages * off > limit:
        stages -= 1
    if stages < 2 and budget is None and not occupancy:
        # no hint: two stages beat a second CTA (sm_120's 128 x 64 x 64 GEMM: 2 x 27 KB)
        whole = pipeline_smem_cap(em.sm, suffix, 1)
        if 2 * off <= whole - reserve:
            stages, cap = 2, whole
    if stages < 2:
        return None
    em.pipe_cap = max(getattr(em, "pipe_cap", 0), cap)
    return loads, stages, off, wg


def _issue(em: Emitter, body, plan_loads, iv_value, buf: str, stage_off: int, guard) -> None:
    """cp.async every planned load of the iteration whose induction variable is ``iv_value``
    into the stage at ``buf + stage_off`` (guarded), re-emitting the loads' index slices."""
    from tilegen.runtime.codegen.memory import Staged, cp_async_tile

    iv = body.args[0]
    saved = {iv: em.values.get(iv, _MISSING)}
    em.set(iv, iv_value)
    for pl in plan_loads:
        for o in pl.slice_ops:
            for r in o.results:
                saved.setdefault(r, em.values.get(r, _MISSING))
            em.emit_op(o)
        st = Staged(em, pl.load, pl.plan)
        cp_async_tile(em, st, pl.rows, pl.cols, buf, stage_off + pl.off, guard)
    for v, x in saved.items():
        if x is _MISSING:
            em.values.pop(v, None)
        else:
            em.values[v] = x


_MISSING = object()


def run_staged_body(em: Emitter, op, slots, iv, bufs: dict) -> None:
    """One iteration of scf.for ``op``'s body with its staged loads already in shared memory
    (``bufs``: load -> its buffer there; nothing nested is pipelined), the yielded values
    copied into the loop's ``slots``."""
    saved = getattr(em, "pipe_bufs", {})
    em.pipe_bufs, em._pipelining = {**saved, **bufs}, True
    try:
        copy_into(em, op, slots, loop_body(em, op, [iv] + slots))
    finally:
        em.pipe_bufs, em._pipelining = saved, False


def loop_body(em: Emitter, op, args) -> list:
    """Emit one iteration of scf.for ``op``'s body with its arguments bound to ``args``; the
    yielded values. A mask all true in most iterations (uniform_select.py) is skipped behind a
    per-iteration predicate: the ops of :func:`~.uniform_select.unswitched_span` are emitted
    twice."""
    from tilegen.runtime.codegen.uniform_select import emit_ops

    body = op.regions[0].blocks[0]
    for a, v in zip(body.args, args):
        em.set(a, v)
    emit_ops(em, op, body.ops[:-1])
    return [em.get(v) for v in body.ops[-1].operands]


def _pipelined_for(em: Emitter, op, plan) -> None:
    """scf.for with its dot operands prefetched ``S - 1`` iterations ahead (docs/codegen.md,
    "K-loop pipelining"): S stage buffers; the prologue issues iterations 0 .. S-2 (one
    ``cp.async`` group each); every iteration waits for its own group (``wait_group S-2``),
    ``bar.sync`` (all copies visible, and every warp is done reading the stage the previous
    iteration used), issues iteration i + S - 1 into that freed stage and commits (an empty
    group past the end), then runs the body with the dots reading the current stage."""
    loads, S, SB, wg = plan
    lb, ub, step = (em.scalar(op, v) for v in op.operands[:3])
    inits = [em.get(v) for v in op.operands[3:]]
    body = op.regions[0].blocks[0]
    iv_t = op.operands[0].type
    cls, esize, _ = elem_info(op, iv_t)
    if cls not in ("b32", "b64"):
        fail(op, f"PTX backend does not support '{op.name}' over {iv_t} yet")
    ty = ("u" if "unsignedCmp" in op.attributes else "s") + str(8 * esize)
    region = em.pipe_region(S * SB)
    slots = _slots(em, op, [r.type for r in op.results])
    copy_into(em, op, slots, inits)

    def ahead(base, j):
        """(iv of ``j`` iterations after ``base``, predicate: it runs)."""
        x = em.new(cls)
        if isinstance(step, int):
            em.ins(f"add.{ty} {x}, {base}, {j * step}")
        else:
            em.ins(f"mad.lo.{ty} {x}, {step}, {j}, {base}")
        p = em.new("pred")
        em.ins(f"setp.lt.{ty} {p}, {x}, {ub}")
        return x, p

    from tilegen.runtime.codegen import deferred_mma

    # (the MMAs of iteration i run while it copies; the copy after them)
    defer = deferred_mma.deferral(em, op, loads, S) if wg else None
    lb_r = em.mov(cls, lb)
    for j in range(S - 1):  # prologue
        x, p = ahead(lb_r, j)
        _issue(em, body, loads, x, region, j * SB, p)
        em.ins("cp.async.commit_group")
    iv = em.mov(cls, lb)
    stage = em.mov("b32", 0)
    top, end = em.new_label("for_body"), em.new_label("for_end")
    p = em.new("pred")
    em.ins(f"setp.ge.{ty} {p}, {iv}, {ub}")
    em.ins(f"@{p} bra {end}")
    em.label(top)
    em.ins(f"cp.async.wait_group {S - 2}")
    if wg:  # cp.async writes (generic proxy) before wgmma's / tcgen05's async-proxy reads
        em.ins("fence.proxy.async.shared::cta")
    em.barrier()

    def ahead_copies():
        """Copy iteration i + S - 1 into the stage iteration i - 1 read."""
        x, q = ahead(iv, S - 1)
        nxt = em.new("b32")
        em.ins(f"add.s32 {nxt}, {stage}, {(S - 1) * SB}")
        w = em.new("pred")
        em.ins(f"setp.ge.u32 {w}, {nxt}, {S * SB}")
        em.ins(f"@{w} sub.s32 {nxt}, {nxt}, {S * SB}")
        nbuf = em.new("b32")
        em.ins(f"add.s32 {nbuf}, {region}, {nxt}")
        _issue(em, body, loads, x, nbuf, 0, q)
        em.ins("cp.async.commit_group")

    if defer is None:
        ahead_copies()
    cur = em.new("b32")
    em.ins(f"add.s32 {cur}, {region}, {stage}")
    bufs = {}
    for pl in loads:
        r = em.new("b32")
        em.ins(f"add.s32 {r}, {cur}, {pl.off}")
        bufs[pl.load] = r
    em.mma_defer = defer
    try:
        run_staged_body(em, op, slots, iv, bufs)
    finally:
        em.mma_defer = None
    if defer is not None:  # MMA i - 1 is done: its stage takes iteration i + S - 1
        defer.retire_previous(em)
        ahead_copies()
    em.ins(f"add.s32 {stage}, {stage}, {SB}")
    w2 = em.new("pred")
    em.ins(f"setp.ge.u32 {w2}, {stage}, {S * SB}")
    em.ins(f"@{w2} mov.u32 {stage}, 0")
    em.ins(f"add.{ty} {iv}, {iv}, {step}")
    q2 = em.new("pred")
    em.ins(f"setp.lt.{ty} {q2}, {iv}, {ub}")
    em.ins(f"@{q2} bra {top}")
    em.label(end)
    if defer is not None:
        defer.retire_last(em)
    # drain (only empty groups or skipped copies can remain) and free the stages for reuse
    em.ins("cp.async.wait_all")
    em.barrier()
    _bind(em, op.results, slots)
    _scratch_into_stages(em, op)


def _scratch_into_stages(em: Emitter, op) -> None:
    """Past the last pipelined loop of the kernel's top level, the scratch claims from here on
    (the epilogue's exchanges) live in the idle stage buffers (``Emitter.scratch_into_ring``;
    emit.py emits the kernel again without where they outgrow them): the stages need not
    leave room for them."""
    from tilegen.runtime.codegen.core import PIPE_SYMBOL

    if op.parent_op is not em.func or em.producer_warps:
        return
    block = op.parent.ops
    for later in block[block.index(op) + 1 :]:
        if any(o.name == "scf.for" and num_stages(o) >= 2 for o in later.walk()):
            return
    # (the stages were written by cp.async and read by mma.sync, wgmma or tcgen05, whose
    # reads are complete: the barrier orders them before the claims; no proxy fence)
    em.scratch_into_ring(PIPE_SYMBOL, em.pipe_bytes, fence=False)


@handles("scf.for")
def for_(em: Emitter, op) -> None:
    stages = op.attributes.get("nv_tileas.async_stages")  # the driver's async stage chose it
    if stages is not None:
        from tilegen.runtime.codegen.async_loop import async_for

        return async_for(em, op, stages.value)
    from tilegen.runtime.codegen.invariant_a import keep_invariant_a

    keep_invariant_a(em, op, rows=True)  # loop-invariant A operands: written once, here
    plan = _pipeline_plan(em, op)
    if plan is not None:
        return _pipelined_for(em, op, plan)
    lb, ub, step = (em.scalar(op, v) for v in op.operands[:3])
    inits = [em.get(v) for v in op.operands[3:]]
    iv_t = op.operands[0].type
    cls, esize, _ = elem_info(op, iv_t)
    if cls not in ("b32", "b64"):
        fail(op, f"PTX backend does not support '{op.name}' over {iv_t} yet")
    ty = ("u" if "unsignedCmp" in op.attributes else "s") + str(8 * esize)
    slots = _slots(em, op, [r.type for r in op.results])
    copy_into(em, op, slots, inits)
    iv = em.mov(cls, lb)
    top, end = em.new_label("for_body"), em.new_label("for_end")
    p = em.new("pred")
    em.ins(f"setp.ge.{ty} {p}, {iv}, {ub}")
    em.ins(f"@{p} bra {end}")
    em.label(top)
    copy_into(em, op, slots, loop_body(em, op, [iv] + slots))
    em.ins(f"add.{ty} {iv}, {iv}, {step}")
    q = em.new("pred")
    em.ins(f"setp.lt.{ty} {q}, {iv}, {ub}")
    em.ins(f"@{q} bra {top}")
    em.label(end)
    _bind(em, op.results, slots)


@handles("scf.if")
def if_(em: Emitter, op) -> None:
    cond = em.scalar(op, op.operands[0])
    if not (isinstance(cond, str) and cond.startswith("%")):
        cond_reg = em.new("pred")
        em.ins(f"setp.ne.u32 {cond_reg}, {cond}, 0")
        cond = cond_reg
    slots = _slots(em, op, [r.type for r in op.results])
    has_else = len(op.regions) > 1 and op.regions[1].blocks
    other, end = em.new_label("if_else"), em.new_label("if_end")
    em.ins(f"@!{cond} bra {other if has_else else end}")
    copy_into(em, op, slots, run_region(em, op.regions[0].blocks[0], []))
    if has_else:
        em.ins(f"bra.uni {end}")
        em.label(other)
        copy_into(em, op, slots, run_region(em, op.regions[1].blocks[0], []))
    elif op.results:
        fail(op, "PTX backend: 'scf.if' with results needs an else region")
    em.label(end)
    _bind(em, op.results, slots)


@handles("scf.while")
def while_(em: Emitter, op) -> None:
    before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
    carried = _slots(em, op, [a.type for a in before.args])
    results = _slots(em, op, [r.type for r in op.results])
    copy_into(em, op, carried, [em.get(v) for v in op.operands])
    top, end = em.new_label("while_top"), em.new_label("while_end")
    em.label(top)
    vals = run_region(em, before, carried)
    cond, vals = vals[0], vals[1:]
    copy_into(em, op, results, vals)
    em.ins(f"@!{cond} bra {end}")
    copy_into(em, op, carried, run_region(em, after, results))
    em.ins(f"bra.uni {top}")
    em.label(end)
    _bind(em, op.results, results)


@handles("scf.yield", "scf.condition")
def terminator(em: Emitter, op) -> None:
    """Read by the parent op (:func:`run_region`); never emitted alone."""
    fail(op, f"PTX backend: '{op.name}' outside its parent op")


@handles("ub.poison")
def poison(em: Emitter, op) -> None:
    """An undefined value (an exit path that does not set a loop result): zero registers."""
    (res,) = op.results
    t = res.type
    if _is_token(t):
        em.set(res, None)
        return
    cls, _, _ = elem_info(op, t)
    zero = {"pred": None, "f32": "0f00000000", "f64": "0d0000000000000000"}.get(cls, "0")

    def one():
        if cls == "pred":
            r = em.new("pred")
            em.ins(f"setp.ne.u32 {r}, 0, 0")
            return r
        return em.mov(cls, zero)

    if is_tile(t):
        em.set(res, [one() for _ in range(em.dist_of(op, t).nregs)])
    else:
        em.set(res, one())
