"""The async K loop (docs/pipelines.md): an ``scf.for`` the driver's ``async`` stage marked
(``nv_tileas.async_stages``, runtime/passes/async_rule.py) becomes a TMA + mbarrier pipeline fed
by a producer warp group, consumed with wgmma by the kernel's own warps (sm_90a).

Only the loop is replaced: the kernel's prologue runs as before on every thread (the rule
admits no memory access before the loop), and everything after it - the kernel's epilogue:
casts, elementwise ops, the store through its view, partial tiles - is emitted by the ordinary
handlers on the consumer warps alone (the producer warp group leaves after its last copy, and
``Emitter.barrier`` becomes the named barrier 1 over the consumer threads).

Shared memory (one ``.shared`` array, 1024-aligned): ``stages`` stage buffers (A's tile then
B's, each the TMA boxes of ``tma.column_boxes`` one after the other, swizzled), the full and
empty barriers, the claimed tensor-map slot and two device-built maps (``tma.build_tensormap``:
the contract of docs/pipelines.md section 4, so ``ct.launch`` runs the kernel unchanged).

This module holds the frame, the producer and the loop drivers, and sm_90a's wgmma consumers;
beside it: the accumulator's fragment (wgmma_fragment.py), sm_100a's tcgen05 consumers
(async_tcgen05.py), sm_120's mma.sync ones (async_mma_sync.py), the consumers' operand
conversions (async_convert.py) and the epilogue's TMA store (async_store.py, store_staging.py).
"""

from __future__ import annotations

from types import SimpleNamespace

from tilegen.runtime.codegen import async_copy, async_mma_sync, async_rs, async_scaled, cta_pair
from tilegen.runtime.codegen import tcgen05, tma
from tilegen.runtime.codegen import (
    async_convert,
    async_kept,
    async_store,
    async_tcgen05,
    b8_transpose,
    fragment_load,
    fragment_sides,
    wgmma_fragment,
)
from tilegen.runtime.codegen.core import Emitter, elem_key, fail
from tilegen.runtime.ir import OpResult
from tilegen.runtime.layouts.async_forms import (
    chain_sides,
    fragment_chain,
    init_in_tmem,
    uniform_tile,
)
from tilegen.runtime.layouts.kernel import kernel_spec_int, register_budget
from tilegen.runtime.layouts.mma_choice import TCGEN05_SMS
from tilegen.runtime.codegen.pipeline import (
    MAX_SMS,
    Ring,
    map_slots,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_init_fence,
    mbarrier_wait,
    setmaxnreg,
    wgmma_descriptor_at,
    wgmma_descriptor_parts,
)

#: the loop attribute the driver's ``async`` stage sets: the pipeline's stage count
ASYNC_ATTR = "nv_tileas.async_stages"
#: the loop attribute with the producer warp group's register budget (setmaxnreg.dec; the
#: consumers keep theirs, as tileiras's two-warp-group GEMMs do)
ASYNC_REGS_ATTR = "nv_tileas.async_producer_regs"
#: on a K loop the async path takes in its general form (async_general.general_loads)
ASYNC_GENERAL_ATTR = "nv_tileas.async_general"
#: on a general-form loop whose last dot overlaps the next iteration's first (async_overlap.py)
ASYNC_OVERLAP_ATTR = "nv_tileas.async_overlap"
#: the loop attribute with the consumers' setmaxnreg.inc (the scaled accumulate's two fragments)
ASYNC_CONSUMER_REGS_ATTR = "nv_tileas.async_consumer_regs"
#: on a side vector load the producer copies into the stage (async_rule.staged_sides)
ASYNC_STAGED_ATTR = "nv_tileas.async_staged"
#: on a GEMM-form loop that runs on a CTA pair (async_pair.pair_reason; section 18)
ASYNC_PAIR_ATTR = "nv_tileas.cta_pair"
#: on the second and later loops of a chain of general-form loops (async_general.chain_reason;
#: section 23): the first loop's ring, maps and producer serve them
ASYNC_CHAIN_ATTR = "nv_tileas.async_chained"
#: on a loop-invariant dot A operand's load the producer copies by TMA (async_kept.py)
ASYNC_KEPT_ATTR = "nv_tileas.async_kept"
ASYNC_SYMBOL = "tg_async"
_ALIGN = 1024
_ESZ = {"f16": 2, "bf16": 2, "f32": 4, "tf32": 4, "f8E4M3FN": 1, "f8E5M2": 1, "i8": 1}
#: A/B elements wgmma takes with B N-major (the transpose bit): the 16-bit ones; the others
#: (tf32, 8-bit) get B^T K-major from the consumers' transposing copy (docs/pipelines.md)
_TRANSPOSABLE = ("f16", "bf16")
#: B^T buffers of the sm_90 transposing consumers: iteration i writes buffer i % 3 while its
#: wgmmas of iteration i - 1 may still run (wait_group 1); buffer i % 3 was last read by the
#: wgmmas of iteration i - 3, which every warp group completed before the barrier of i - 1
BT_BUFFERS = 3
#: sm_120's (ldmatrix reads B^T into registers before the iteration ends): buffer i % 2 was
#: last read in iteration i - 2, which every consumer finished before the barrier of i - 1
BT_BUFFERS_SYNC = 2


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class _Operand:
    """One staged operand: its load, tile, boxes and place in a stage."""

    def __init__(self, load, offset: int, plain: bool = False, tile: tuple | None = None):
        self.load = load
        # ``tile``: this CTA's part of the load's tile (a CTA pair's half)
        self.tile = tuple(tile or load.results[0].type.shape)
        #: a CTA pair: (coordinate index, innermost first; elements per rank) of this CTA's part
        self.pair: tuple | None = None
        #: an sm_90 pair's B: CTA r copies K rows r K/2 .. of every column box and multicasts
        #: them into both CTAs (``pair`` shifts the row coordinate, ``half`` the destination)
        self.multicast = False
        self.half = 0  # bytes of half a column box (K/2 rows)
        self.elem = elem_key(load.results[0].type)
        self.esz = _ESZ[self.elem]
        self.boxes = tma.column_boxes(self.tile, self.esz)
        if plain:  # one unswizzled box (a side vector: a row the consumers read as it is)
            self.boxes = [(0, tma.TmaBox(self.tile, self.esz, 0))]
        self.offset = offset  # bytes into the stage
        self.bytes = self.esz
        for n in self.tile:
            self.bytes *= n
        self.span = self.boxes[0][1].swizzle  # swizzle span (bytes of one box row)
        self.box_bytes = self.boxes[0][1].bytes
        #: bytes the 128-byte swizzle moves as a unit: 32 for a tcgen05 MN-major tf32 B
        #: (128B_BASE32B, tileiras's descriptor), else 16
        self.atom = 16
        #: a dot's B staged N x K and transposed on its way (K-major, read as A is)
        self.kmajor = False
        #: elements a copy where the producer's threads copy it (no TMA; async_copy.py)
        self.threads = async_copy.width(load)
        #: rows of each box where fewer than the tile's (a kept A's 8-row blocks: async_kept)
        self.rows_box = 0


class _KMajor:
    """B^T (N rows of K elements, K contiguous) in a buffer laid out like a K-major A stage:
    128-byte column boxes of N rows, each swizzled by its row width (``tma.column_boxes``)."""

    def __init__(self, rows: int, k: int, esz: int, count: int = BT_BUFFERS):
        self.count = count  # buffers, used in turn
        boxes = tma.column_boxes((rows, k), esz)
        self.span = boxes[0][1].swizzle
        self.box_bytes = boxes[0][1].bytes
        self.bytes = _align(rows * k * esz, _ALIGN)

    def offset(self, row: int, kbyte: int) -> int:
        return (kbyte // self.span) * self.box_bytes + row * self.span + kbyte % self.span

    def advance(self, em: Emitter, at: str, end: str) -> None:
        """The next buffer's address into register ``at`` (``end``: past the last buffer)."""
        wrap = em.new("pred")
        em.ins(f"add.s32 {at}, {at}, {self.bytes}")
        em.ins(f"setp.eq.u32 {wrap}, {at}, {end}")
        em.ins(f"@{wrap} sub.s32 {at}, {at}, {self.count * self.bytes}")


def _staged_load(v):
    """The staged ``tiled_load`` a dot operand reads: through an f32 -> tf32 conversion (the
    f32 stage), views dropping leading unit dims and B's transpose (async_forms.operand_load)."""
    from tilegen.runtime.layouts.async_forms import PASS_THROUGH, operand_load

    op = getattr(v, "op", None)
    if op is not None and op.name == "nv_tileaa.fp_to_fp":  # f32 -> tf32: the f32 stage
        v = op.operands[0]
        op = getattr(v, "op", None)
    if op is not None and op.name in PASS_THROUGH:
        op = operand_load(v)[0]
    if op is None or op.name != "nv_tileaa.tiled_load":
        return None
    return op


def async_for(em: Emitter, op, stages: int) -> None:
    """Emit the marked K loop ``op`` as the warp-specialized TMA pipeline."""
    body = op.regions[0].blocks[0]
    if ASYNC_GENERAL_ATTR in op.attributes:
        return _general_for(em, op, stages)
    dots = [o for o in body.ops if o.name == "nv_tileaa.dot"]
    if len(dots) != 1:
        fail(op, "PTX backend: the async K loop needs exactly one dot")
    dot = dots[0]
    # the block-scaled form (async_rule.scaled_chain): the dot starts from zero each stage and
    # the body's elementwise ops scale it into the carried value, in the fragment's order
    scaled = dot.operands[2] is not body.args[1]
    la, lb_ = _staged_load(dot.operands[0]), _staged_load(dot.operands[1])
    if la is None or lb_ is None:
        fail(op, "PTX backend: the async K loop's dot operands are not tiled_loads")
    # a CTA pair (section 18): each CTA stages half of A's rows and half of B's columns
    # (sm_100: half of B's columns; sm_90: all of B, half of it copied here and multicast)
    pair = ASYNC_PAIR_ATTR in op.attributes
    split_b = pair and em.sm in TCGEN05_SMS
    # B loaded N x K and transposed reaches the MMAs K-major (as A); else N-major, K x N.
    # Tiles may carry leading unit dims (a (1, M, K) load of a batched array).
    kmajor = _transposed(lb_)
    ta, tb = tuple(la.results[0].type.shape), tuple(lb_.results[0].type.shape)
    la_, lb_lead = ta[:-2], tb[:-2]
    (ra, ca), (rb, cb) = ta[-2:], tb[-2:]
    a = _Operand(la, 0, tile=la_ + (ra // 2, ca) if pair else None)
    half_b = lb_lead + ((rb // 2, cb) if kmajor else (rb, cb // 2))
    b = _Operand(lb_, _align(a.bytes, _ALIGN), tile=half_b if split_b else None)
    b.kmajor = kmajor
    if pair:
        a.pair = (1, a.tile[-2])
        if split_b:  # this CTA's half of B's columns: rows of B^T, columns of B
            b.pair = (1, b.tile[-2]) if kmajor else (0, b.tile[-1])
        else:  # half of every box's rows (K rows of B, N rows of B^T), multicast
            b.multicast, b.pair = True, (1, rb // 2)
            b.half = b.box_bytes // 2
    M, K = a.tile[-2:]
    N = rb if kmajor else cb
    W = em.num_warps
    G = W // 4
    nq = M // (64 * G)  # m64 instances per warp group: rows 64 (nq wg + q) ..
    nthreads = W * 32
    ab = elem_key(dot.operands[0].type)  # the MMA's A/B element (tf32 for an f32 stage)
    acc_int = elem_key(dot.operands[2].type) == "i32"
    tc = em.sm in TCGEN05_SMS  # tcgen05 consumers (sm_100a), else wgmma (sm_90a)
    sync = em.sm == 120  # mma.sync consumers reading the stages by ldmatrix (section 31)
    # wgmma reads tf32 / 8-bit B K-major only: the consumers transpose each stage's B into one
    # of BT_BUFFERS B^T buffers (in turn) before the MMAs; so do sm_120's for 8-bit B, which
    # ldmatrix cannot transpose (async_mma_sync.py)
    count = BT_BUFFERS_SYNC if sync else BT_BUFFERS
    bt = None if tc or ab in _TRANSPOSABLE or kmajor else _KMajor(N, K, a.esz, count)
    if tc and ab == "tf32" and b.span == 128 and not kmajor:
        b.atom = 32
    # the scaled accumulate's side vectors the producer copies too (1 x N rows), 128-aligned
    sides, end = [], b.offset + b.bytes
    for o in body.ops:
        if ASYNC_STAGED_ATTR in o.attributes:
            sides.append(_Operand(o, _align(end, 128), plain=True))
            end = sides[-1].offset + sides[-1].bytes
    staged = [a, b] + sides
    stage_bytes = _align(end, _ALIGN)
    # the epilogue's TMA store (async_epilogue.tma_store_plan marked it), or its plain store, from
    # the TMEM rows by chunks (async_epilogue.tmem_store_plan marked it)
    store = async_store.tma_store_of(op)
    direct = async_store.marked_after(op, async_store.TMEM_STORE_ATTR)
    # sm_100a: an A the IR converts to tf32 reaches the MMAs from tensor memory (async_rs.py)
    tmem_a = 0
    if tc and async_convert.converted(em, dot.operands[0]):
        occ = kernel_spec_int(em.func, "occupancy") or 1
        tmem_a = async_rs.tmem_a_columns(em, a, M, N, pair, scaled, occ)
    fr = _frame(em, op, staged, stages, stage_bytes, locals())
    base, bar, t0, tid = fr.base, fr.bar, fr.t0, fr.tid
    slot_off, share, maps_off, nmaps = fr.slot_off, fr.share, fr.maps_off, fr.nmaps
    lb, ub, step, ty, iv_cls = fr.lb, fr.ub, fr.step, fr.ty, fr.iv_cls
    tmem_off, done_off, tbar_off, tcols = fr.tmem_off, fr.done_off, fr.tbar_off, fr.tcols
    init_off = fr.init_off  # (an sm_100 pair from C: async_tcgen05.tcgen05_consumer)
    tc_scaled, consumer, bt_off, sym = fr.tc_scaled, fr.consumer, fr.bt_off, em.symbol

    # ---- consumers: the kernel's warps
    em.label(consumer)
    inc = op.attributes.get(ASYNC_CONSUMER_REGS_ATTR)
    if inc is not None:
        setmaxnreg(em, True, inc.value)
    # set-up hoisted from here on (thread-derived addresses) is the consumers', not live
    # across the producer's setmaxnreg.dec
    em.hoist_from_here()
    em.producer_threads = 128
    em.barrier_threads = nthreads
    if store is not None or direct is not None:  # what async_store.tma_store_epilogue needs
        # the side vectors of the chain to the store take the ring's last bytes
        # (async_epilogue.sides_reserve; fragment_sides.py), the store's tile the rest
        chained = fragment_chain(op, store or direct)
        side_at = fragment_sides.offsets(
            chain_sides(chained) if chained else [], stages * stage_bytes
        )
        em.async_store = dict(
            base=base,
            maps_off=maps_off,
            slot_off=slot_off,
            share=share,
            nmaps=nmaps,
            ring_bytes=min(side_at.values(), default=stages * stage_bytes),
            store_map=len(staged),
            store_built=fr.store_built,
            t0=t0,
            pair=pair,
            sides=side_at,
        )
    # C, the initial value, loaded in the accumulator's register order (fragment_load.py):
    # sm_90's wgmma fragment; sm_100's TMEM rows, where C is written into TMEM before the loop
    # (over 128 values a thread, tcgen05's consumers load and write C a chunk at a time)
    chunks = None
    if sync:  # sm_120: the mma.sync fragment is the dot's own (blocked) layout
        fragment_load.mark(em, op, ("layout", dot.results[0].type.encoding))
    elif not tc:  # (a pair's CTA: its own rows of C, rank M on)
        fragment_load.mark(em, op, ("wgmma", M, N) + (("pair",) if pair else ()))
    elif pair and not tc_scaled:  # (a pair's CTA: its own rows of C in its TMEM rows)
        if not uniform_tile(op.operands[3]) and fragment_chain(op, store) is not None:
            fragment_load.mark(em, op, ("rows", M, N, 2 if M == 64 else G, "pair"))
    elif not tc_scaled:
        if init_in_tmem(op, W) and fragment_chain(op, store or direct) is not None:
            rows = ("rows", M, N, G if M == 128 else 1)
            if M == 64:  # (half a row a thread: 16x32bx2)
                rows = ("rows", M, N, 2, "x2")
            fragment_load.mark(em, op, rows)
            chunks = fragment_load.by_chunks(em, op, M * N // (32 * W))
    skip = {id(x.op) for x in chunks or ()}
    for o in em.deferred:  # the prologue's loads and tiles: the consumers' (async_prologue)
        if id(o) not in skip:
            em.emit_op(o)
    init = None if chunks else em.get(op.operands[3])
    if sync:
        em.set(op.results[0], async_mma_sync.consumer(em, op, locals()))
        if store is None:  # every copy landed: thread 0 frees the map slot
            _free_slot(em, t0, slot_off, share)
        # (the B^T buffers right after the stages are idle too)
        _ring_scratch(em, op, stages * stage_bytes + (bt.count * bt.bytes if bt else 0))
        return
    if tc_scaled:
        acc, order = async_scaled.tcgen05_consumer(em, op, locals())
        async_tcgen05.release_tmem(em, t0, store, slot_off, share, tcols)
        chain = fragment_chain(op, store)
        if chain is not None:
            _hand_over(em, chain, ("rows", M, N, order.groups))
            em.set(op.results[0], acc)
            return
        em.set(op.results[0], async_tcgen05.from_rows(em, op, acc, order))
        return
    if tc:
        res = async_tcgen05.tcgen05_consumer(em, op, locals())
        em.set(op.results[0], res)
        return
    peer = lane0 = None
    if pair:  # sm_90: a stage is free once both CTAs' consumers are done with its B
        peer = em.new("b32")
        em.ins(f"xor.b32 {peer}, {cta_pair.rank(em)}, 1")
        lane0 = cta_pair.lane0(em)

    def release(addr: str, pred: str) -> None:
        if peer is None:
            em.ins(f"@{pred} mbarrier.arrive.shared::cta.b64 _, [{addr}]")
        else:
            cta_pair.release_both(em, addr, pred, peer, lane0)

    acc = wgmma_fragment.to_fragment(em, op, op.operands[3].type, init, M, N, acc_int)
    cls = "b32" if acc_int else "f32"
    part = [em.new(cls) for _ in acc] if scaled else None  # the stage's partial product
    chain = async_scaled.scaled_slice(body, dot) if scaled else None
    order = async_scaled.WgmmaOrder(em, M, N) if scaled else None
    ring = Ring(stages)
    ring.start(em, 0)
    iv = em.mov(iv_cls, lb)
    top, end = em.new_label("async_consume"), em.new_label("async_consumed")
    wg_ins, wg_imms = _wgmma_form(dot, W, N, ab, pair, kmajor)
    round_a, round_b = (async_convert.converted(em, dot.operands[i]) for i in (0, 1))
    btbase = btend = None
    # one stage's wgmmas stay in flight while the next stage's are issued (wait_group 1): the
    # previous stage is released one iteration late, the last one after the loop
    prev, have_prev = em.new("b32"), em.new("pred")
    em.ins(f"mov.b32 {prev}, 0")
    em.ins(f"setp.ne.u32 {have_prev}, 0, 0")
    lanes = None
    if bt is not None:  # B^T buffers in turn
        btbase, btend = em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {btbase}, {base}, {bt_off}")
        em.ins(f"add.s32 {btend}, {btbase}, {bt.count * bt.bytes}")
        regs = inc.value if inc is not None else register_budget(em.func, nthreads + 128)
        lanes = b8_transpose.setup(
            em, b, bt, W, b8_transpose.batch_for(regs, len(acc) * (2 if scaled else 1))
        )
    p = em.new("pred")
    em.ins(f"setp.eq.u32 {p}, 0, 0")
    _, _, warp = em.tid()
    wgoff = 0
    if G > 1:
        wg = em.new("b32")
        em.ins(f"shr.u32 {wg}, {warp}, 2")
        wgoff = em.new("b32")
        em.ins(f"mul.lo.s32 {wgoff}, {wg}, {64 * nq * a.span}")
    zero_d = None
    if scaled:  # scale-d false: the first K step of each instance overwrites the partial product
        zero_d = em.new("pred")
        em.ins(f"setp.ne.u32 {zero_d}, 0, 0")
    # A the IR converts to tf32: read into registers and converted there (async_rs.py), a
    # wgmma group per column box of A so that each group's fragments stay put while its
    # wgmmas run (the loop twice over where a stage is one box)
    regs_a = None
    if round_a and not scaled:
        budget = inc.value if inc is not None else register_budget(em.func, nthreads + 128)
        # (one warp group's m64n256 beside the consumers' B^T copy: from registers, A spilled
        # 8-12 B where a side vector joins the store - fuzzer seed 1712008, a 64 x 256 x 64
        # staged in two parts - so it stays in the stage; docs/pipelines.md section 55)
        wide = bt is not None and G == 1 and nq == 1 and N == 256
        if async_rs.fits(nq, K, len(acc), budget) and not wide:
            regs_a = async_rs.RegisterA(em, a, nq, G, round_a)

    def one_stage() -> None:
        if scaled:  # the side vectors' loads go out before the wait: they land under the MMAs
            em.values[body.args[0]] = iv
            async_scaled.side_vectors(em, chain, order)
        mbarrier_wait(em, bar(0, ring.stage), ring.phase)
        sbase = stage_address(em, ring.stage, stage_bytes)
        if sides:  # the staged side vectors, before the stage goes back
            async_scaled.staged_vectors(em, sides, order, sbase)
        abase = sbase
        if G > 1:  # this warp group's 64 rows of A
            abase = em.new("b32")
            em.ins(f"add.s32 {abase}, {sbase}, {wgoff}")
        if round_a and regs_a is None:  # f32 -> tf32 of A in place: the IR's conversion
            async_convert.round_tf32(em, sbase, a, tid, nthreads, round_a)
        if lanes is not None:  # 8-bit B^T of this stage, a warp an atom at a time
            b8_transpose.emit(em, lanes, sbase, btbase)
        elif bt is not None:  # B^T of this stage into this iteration's buffer, for the async proxy
            async_convert.transpose_b(em, b, sbase, bt, btbase, tid, nthreads, round_b)
        elif round_b:  # (B^T staged K-major: rounded in place as A is)
            async_convert.round_tf32(em, sbase, b, tid, nthreads, round_b)
        if (round_a and regs_a is None) or round_b or bt is not None:
            em.ins("fence.proxy.async.shared::cta")
            em.barrier()
        tk = 32 // a.esz  # every wgmma K step is 32 bytes
        per = N // 2  # fragment registers of one m64nN instance
        # one descriptor per operand and stage; each K step (and m64 instance) adds its byte
        # offset / 16 to the start-address field (bits 0-13: shared addresses stay below 256 KB)
        if regs_a is None:
            da0 = wgmma_descriptor_parts(em, abase, 16, 8 * a.span, a.span)
        else:  # A's ldmatrix addresses in this stage
            addrs = regs_a.addresses(em, sbase)
        if kmajor:  # B^T from the stage: K-major, as A
            sb0 = em.new("b32")
            em.ins(f"add.s32 {sb0}, {sbase}, {b.offset}")
            db0 = wgmma_descriptor_parts(em, sb0, 16, 8 * b.span, b.span)
        elif bt is None:  # B N-major from the stage (transpose bit)
            sb0 = em.new("b32")
            em.ins(f"add.s32 {sb0}, {sbase}, {b.offset}")
            db0 = wgmma_descriptor_parts(em, sb0, K * b.span, 8 * b.span, b.span)
        else:  # B^T K-major, as A
            db0 = wgmma_descriptor_parts(em, btbase, 16, 8 * bt.span, bt.span)
        moved = lambda parts, off: wgmma_descriptor_at(em, parts, off)  # noqa: E731

        # A from registers: a wgmma group per column box of A, its fragments loaded just before
        # (async_rs.py); else the stage's K steps in one group
        groups = regs_a.groups if regs_a is not None else 1
        steps = K // tk // groups
        for g in range(groups):
            frags = regs_a.load(em, addrs, g) if regs_a is not None else None
            em.ins("wgmma.fence.sync.aligned")
            # K steps outermost: consecutive wgmmas write different accumulators (m64
            # instances), as tileiras and CUTLASS issue them
            for kk in range(g * steps, (g + 1) * steps):
                for q in range(nq):
                    dregs = ", ".join((part or acc)[q * per : (q + 1) * per])
                    kb = kk * 32  # K byte offset in A's rows
                    if frags is not None:  # A's fragment of this step, in registers
                        da = "{" + ", ".join(frags[(q, kk)]) + "}"
                    else:
                        off = (kb // a.span) * a.box_bytes + kb % a.span + q * 64 * a.span
                        da = moved(da0, off)
                    if kmajor:
                        db = moved(db0, (kb // b.span) * b.box_bytes + kb % b.span)
                    else:
                        db = moved(db0, kk * tk * b.span if bt is None else bt.offset(0, kb))
                    d_in = zero_d if scaled and kk == 0 else p
                    em.ins(f"{wg_ins} {{{dregs}}}, {da}, {db}, {d_in}{wg_imms}")
            em.ins("wgmma.commit_group.sync.aligned")
            if scaled:  # the partial product is needed now: wait, free the stage, scale it in
                em.ins("wgmma.wait_group.sync.aligned 0")
                em.ins(f"mbarrier.arrive.shared::cta.b64 _, [{bar(1, ring.stage)}]")
                async_scaled.scaled_update(em, body, chain, dot, part, acc, order)
                continue
            # the group before this one is done (its A registers free); after a stage's first
            # group, that is the previous stage's last: free that stage
            em.ins("wgmma.wait_group.sync.aligned 1")
            if g == 0:
                release(bar(1, prev), have_prev)
                em.ins(f"mov.b32 {prev}, {ring.stage}")
                em.ins(f"setp.eq.u32 {have_prev}, 0, 0")
        if bt is not None:
            bt.advance(em, btbase, btend)
        ring.advance(em)
        em.ins(f"add.{ty} {iv}, {iv}, {step}")

    em.label(top)
    # (one group a stage: two copies of the loop, so that consecutive groups' A registers differ)
    for _ in range(2 if regs_a is not None and regs_a.groups % 2 else 1):
        stop = em.new("pred")
        em.ins(f"setp.ge.{ty} {stop}, {iv}, {ub}")
        em.ins(f"@{stop} bra {end}")
        one_stage()
    em.ins(f"bra {top}")
    em.label(end)
    if not scaled:
        em.ins("wgmma.wait_group.sync.aligned 0")  # the last stage's wgmmas
        release(bar(1, prev), have_prev)
    if regs_a is not None:  # the last stages' ldmatrix reads, before the ring is scratch
        em.barrier()
    # every copy landed (the consumers saw every full barrier): thread 0 frees the map slot
    # (after the epilogue's TMA store instead, when there is one)
    if store is None:
        _free_slot(em, t0, slot_off, share)
    _ring_scratch(em, op, bt_off + (bt.count * bt.bytes if bt else 0))
    chain = fragment_chain(op, store or direct)
    if chain is not None:  # the registers stay in fragment order up to the (TMA) store
        _hand_over(em, chain, ("wgmma", M, N))
        em.set(op.results[0], acc)
        return
    res = wgmma_fragment.from_fragment(em, op, op.results[0].type, acc, M, N, acc_int)
    em.set(op.results[0], res)


def _general_for(em: Emitter, op, stages: int) -> None:
    """The general form (docs/pipelines.md section 13; async_general.general_loads): the producer
    warp group copies every marked load of the body (dots' B operands, as loaded) into the
    stage ring by TMA; the consumer warps run the body as today's path emits it - loop-invariant
    A operands kept in shared memory once (``invariant_a.keep_invariant_a``), A from registers,
    each dot's B read from the stage through swizzled descriptors (``mma_staging.StagedBox``) -
    waiting for the stage's full barrier before it and arriving on its empty barrier after it
    (every dot has waited for its wgmmas by then)."""
    from tilegen.runtime.codegen.control import _bind, _slots, copy_into
    from tilegen.runtime.codegen.invariant_a import keep_invariant_a

    if ASYNC_CHAIN_ATTR in op.attributes:  # a later loop of a chain (section 23)
        return _chained_for(em, op)
    staged, stage_bytes = _general_staged(op)
    block = op.parent.ops
    chain = [
        (o, _general_staged(o)[0])
        for o in block[block.index(op) + 1 :]
        if o.name == "scf.for" and ASYNC_CHAIN_ATTR in o.attributes
    ]
    nthreads = 32 * em.num_warps
    facts = dict(bt=None, tc=False, scaled=False, sides=[], store=None, nthreads=nthreads, N=0)
    facts["chain"] = chain
    facts["pair"] = staged[0].multicast  # (the rows divided between a pair: K, V multicast)
    from tilegen.runtime.codegen.async_overlap import box_sides

    overlapped = [lp for lp in [op] + [o for o, _ in chain] if ASYNC_OVERLAP_ATTR in lp.attributes]
    if all(box_sides(lp) is not None for lp in overlapped):  # each load its own barriers
        facts["boxes"] = len(staged)  # (_box_hooks; async_overlap.consumers)
    facts["kept"] = list(em.kept_tma)  # (loop-invariant A operands copied by TMA)
    _keep_before_split(em, op, chain, nthreads)
    fr = _frame(em, op, staged, stages, stage_bytes, facts)
    base, bar, t0 = fr.base, fr.bar, fr.t0
    lb, ub, step, ty, iv_cls = fr.lb, fr.ub, fr.step, fr.ty, fr.iv_cls

    # ---- consumers: the kernel's warps run the body
    em.label(fr.consumer)
    inc = op.attributes.get(ASYNC_CONSUMER_REGS_ATTR)
    if inc is not None:  # the producer's registers, under an occupancy cap (section 21)
        setmaxnreg(em, True, inc.value)
    em.producer_threads = 128
    em.barrier_threads = nthreads
    rows = sync_consumers(op)
    if rows:  # (their fragments' lane addresses: section 48)
        em.hoist_from_here()
    keep_invariant_a(em, op, rows=rows)  # loop-invariant A operands (attention's Q): once, here
    async_kept.wait(em, facts["kept"])  # (or copied by the producer: landed)
    slots = _slots(em, op, [r.type for r in op.results])
    copy_into(em, op, slots, [em.get(v) for v in op.operands[3:]])

    ring = Ring(stages)
    ring.start(em, 0)
    if ASYNC_OVERLAP_ATTR in op.attributes:  # FA3's overlap: section 16 (a chain's: 24)
        from tilegen.runtime.codegen import async_overlap

        bufs_of = lambda sbase: _boxes(em, staged, sbase)  # noqa: E731
        async_overlap.consumers(em, op, fr, slots, stage_bytes, bufs_of, stages, ring)
    else:
        _consume(em, op, slots, staged, fr, ring, stage_bytes, (lb, ub, step, ty, iv_cls))
    if chain:  # the later loops continue on this ring (_chained_for)
        em.async_chain = SimpleNamespace(fr=fr, ring=ring, stage_bytes=stage_bytes, left=len(chain))
        _bind(em, op.results, slots)
        return
    # every copy landed (the consumers saw every full barrier): thread 0 frees the map slot
    _free_slot(em, t0, fr.slot_off, fr.share)
    _ring_scratch(em, op, stages * stage_bytes)
    _bind(em, op.results, slots)


def sync_consumers(loop) -> bool:
    """Whether general-form loop ``loop``'s dots are mma.sync's (sm_120, section 48): their
    B read by ``ldmatrix`` from the stage, their loop-invariant A kept row-major."""
    from tilegen.runtime.layouts.decisions import mma_family

    return any(mma_family(o) == "mma.sync" for o in loop.walk() if o.name == "nv_tileaa.dot")


def _keep_before_split(em: Emitter, op, chain: list, nthreads: int) -> None:
    """The loop-invariant A operands of the loop and its chain (attention's Q), written into
    their kept arrays by the consumer threads before the warp groups split (section 24): their
    registers die there, not at the consumers' ``setmaxnreg``, so the prologue's register cap
    does not hold them (the frame's CTA-wide barrier orders the writes). The producer warp
    group, which runs the prologue too, skips them: its warps would address rows past the
    tile."""
    from tilegen.runtime.codegen.invariant_a import keep_invariant_a

    tid, _, _ = em.tid()
    mine = em.new("pred")
    em.ins(f"setp.lt.u32 {mine}, {tid}, {nthreads}")
    skip = em.new_label("async_keep")
    em.ins(f"@!{mine} bra {skip}")
    written: set = set()
    for loop in [op] + [o for o, _ in chain]:
        keep_invariant_a(em, loop, sync=False, start=op, written=written, rows=sync_consumers(loop))
    em.label(skip)


def _general_staged(op) -> tuple:
    """(the staged loads of general-form loop ``op`` as :class:`_Operand` in stage order, the
    stage's bytes)."""
    staged, end = [], 0
    for o in op.regions[0].blocks[0].ops:
        if ASYNC_STAGED_ATTR in o.attributes:
            staged.append(_Operand(o, _align(end, _ALIGN)))
            end = staged[-1].offset + staged[-1].bytes
    if not staged:
        fail(op, "PTX backend: the general async loop stages no load")
    if _multicast(op, staged):  # each CTA copies half of every box's rows into both
        for x in staged:
            x.multicast, x.pair = True, (1, x.tile[-2] // 2)
            x.half = x.box_bytes // 2
    return staged, _align(end, _ALIGN)


#: the rows of a staged tile each CTA of a pair copies at least, in 8-row swizzle atoms
_MULTICAST_ROWS = 16


def _multicast(op, staged: list) -> bool:
    """Whether general-form loop ``op``'s stages are shared by the two CTAs of a kernel whose
    rows are divided between them (passes/pair_rows.py: sm_90, where nothing else puts a
    general-form kernel on a cluster): every staged load is the same in both CTAs (no index
    reads the CTA's rank) and has rows to halve. Each CTA then copies half of every box's rows
    by TMA multicast into both (as an sm_90 GEMM pair's B, section 19)."""
    from tilegen.runtime.layouts.kernel import CLUSTER_RANK_OP as RANK_OP
    from tilegen.runtime.layouts.kernel import PAIR_ROWS_ATTR

    func = op
    while func is not None and func.name != "nv_tileaa.func":
        func = func.parent_op
    if func is None or PAIR_ROWS_ATTR not in func.attributes:
        return False
    for x in staged:
        if x.tile[-2] % (2 * _MULTICAST_ROWS) or x.boxes[0][1].swizzle != 128:
            return False
        idx = x.load.opdef.operand_group(x.load, "indices")
        if any(_reads(v, RANK_OP) for v in idx):
            return False
    return True


def _reads(v, name: str, depth: int = 32) -> bool:
    """Whether scalar ``v`` is computed from an op named ``name`` (within ``depth`` ops)."""
    o = getattr(v, "op", None)
    if o is None or depth == 0:
        return False
    return o.name == name or any(_reads(u, name, depth - 1) for u in o.operands)


def _boxes(em: Emitter, staged: list, sbase) -> dict:
    """Each staged load's box in the stage at ``sbase``."""
    from tilegen.runtime.codegen.mma_staging import StagedBox

    bufs = {}
    for x in staged:
        r = em.new("b32")
        em.ins(f"add.s32 {r}, {sbase}, {x.offset}")
        bufs[x.load] = StagedBox(r, x.span, _transposed(x.load), x.box_bytes)
    return bufs


def _consume(em: Emitter, op, slots, staged: list, fr, ring, stage_bytes: int, bounds) -> None:
    """The consumers' loop over ``op``: each iteration waits for its stage's full barrier,
    runs the body on the staged boxes (today's path otherwise) and frees the stage."""
    from tilegen.runtime.codegen.control import run_staged_body

    lb, ub, step, ty, iv_cls = bounds
    iv = em.mov(iv_cls, lb)
    top, done = loop_head(em, "async_body", ty, iv, ub)
    split = getattr(fr, "boxes", 1) > 1
    if not split:
        mbarrier_wait(em, fr.bar(0, ring.stage), ring.phase)
    sbase = em.new("b32")
    em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {stage_bytes}, {fr.base}")
    bufs = _boxes(em, staged, sbase)
    if split:
        saved = em.op_hooks
        hooks, late = _box_hooks(em, op, staged, fr, ring)
        em.op_hooks = {**saved, **hooks}
        try:
            run_staged_body(em, op, slots, iv, bufs)  # (a mask skipped where all true)
        finally:
            em.op_hooks = saved
        late()
    else:
        run_staged_body(em, op, slots, iv, bufs)
        fr.release(fr.bar(1, ring.stage))
    ring.advance(em)
    em.ins(f"add.{ty} {iv}, {iv}, {step}")
    em.ins(f"bra {top}")
    em.label(done)


def _chained_for(em: Emitter, op) -> None:
    """A later loop of a chain (section 23): the consumers go on on the first loop's ring
    (its stage and phase where that loop left them); the producer already copies this loop's
    stages after the first's. The last loop frees the map slot."""
    from tilegen.runtime.codegen.control import _bind, _slots, copy_into
    from tilegen.runtime.codegen.invariant_a import keep_invariant_a

    st = getattr(em, "async_chain", None)
    if st is None:
        fail(op, "PTX backend: a chained async loop without the loop that starts its chain")
    staged, _ = _general_staged(op)
    keep_invariant_a(em, op, rows=sync_consumers(op))  # (Q: the first loop's region, kept
    # once: resident_by_value)
    slots = _slots(em, op, [r.type for r in op.results])
    copy_into(em, op, slots, [em.get(v) for v in op.operands[3:]])
    if ASYNC_OVERLAP_ATTR in op.attributes:  # each loop overlaps its dots (section 24)
        from tilegen.runtime.codegen import async_overlap

        bufs_of = lambda sbase: _boxes(em, staged, sbase)  # noqa: E731
        stages = st.ring.stages
        async_overlap.consumers(
            em, op, st.fr, slots, st.stage_bytes, bufs_of, stages, st.ring, _bounds(em, op)
        )
    else:
        _consume(em, op, slots, staged, st.fr, st.ring, st.stage_bytes, _bounds(em, op))
    st.left -= 1
    if not st.left:
        _free_slot(em, st.fr.t0, st.fr.slot_off, st.fr.share)
        _ring_scratch(em, op, st.ring.stages * st.stage_bytes)
        em.async_chain = None
    _bind(em, op.results, slots)


def _ring_scratch(em: Emitter, op, idle: int) -> None:
    """The consumers are past the loop ``op``: the stage ring's first ``idle`` bytes (stages
    and B^T buffers; not the barriers, map slot and maps after them, nor the side vectors at
    the ring's end) take the scratch claims from here on (``Emitter.scratch_into_ring``)."""
    sides = (getattr(em, "async_store", None) or {}).get("sides")
    if sides:
        idle = min(idle, min(sides.values()))
    if op.parent_op is em.func:
        em.scratch_into_ring(ASYNC_SYMBOL, idle)


def _hand_over(em: Emitter, chain: list, kind: tuple) -> None:
    """The loop's registers stay in their own order (``kind``) along ``chain`` to the TMA
    store, and so do the side vectors its ops read (fragment_sides.py)."""
    sides = [o.results[0] for o in chain_sides(chain)]
    em.fragment_order = dict.fromkeys(list(chain) + sides, kind)


def stage_address(em: Emitter, stage, stage_bytes: int) -> str:
    """The shared address of ring stage ``stage``, from the array's symbol moved in afresh, for
    the GEMM form's wgmma consumers: computed from the prologue's copy of that address, every
    descriptor built from it stayed in vector registers (an ``R2UR`` before each HGMMA); from
    the symbol itself ptxas keeps them in uniform registers (f16 GEMM sm_90: R2UR 47 -> 18,
    SASS 672 -> 640). The general form's boxes (attention) did worse with it (R2UR 11 -> 40)
    and the producer's copies too, so they keep the prologue's address."""
    sym, r = em.new("b32"), em.new("b32")
    em.ins(f"mov.u32 {sym}, {ASYNC_SYMBOL}")
    em.ins(f"mad.lo.s32 {r}, {stage}, {stage_bytes}, {sym}")
    return r


def _free_slot(em: Emitter, t0, slot_off: int, share: bool) -> None:
    """Thread 0 (predicate ``t0``) gives this CTA's tensor-map slot back (every copy landed)."""
    skip = em.new_label("async_free")
    em.ins(f"@!{t0} bra {skip}")
    sl = em.new("b32")
    em.ins(f"ld.shared.u32 {sl}, [{ASYNC_SYMBOL}+{slot_off}]")
    tma.release_slot(em, f"{em.symbol}_slots", sl, share)
    em.label(skip)


def loop_head(em: Emitter, name: str, ty: str, iv, ub) -> tuple:
    """(top, end) labels of one side's copy of the K loop: ``top:`` then leave for ``end`` once
    the induction variable ``iv`` reaches ``ub`` (``ty``: the compare type)."""
    top, end = em.new_label(name), em.new_label(name + "_end")
    em.label(top)
    stop = em.new("pred")
    em.ins(f"setp.ge.{ty} {stop}, {iv}, {ub}")
    em.ins(f"@{stop} bra {end}")
    return top, end


def _transposed(load) -> bool:
    """Whether a staged load reaches its dot transposed (a permute in between: B^T, K-major)."""
    from tilegen.runtime.layouts.staging import chain_to_dot

    res = load.results[0]
    found = chain_to_dot(res, res.type.rank - 2)
    return bool(found and found[3])


#: ops a staged tile passes through to its dot without being read (memory.StagePlan.chain)
PASS_THROUGH = frozenset({"nv_tileaa.view", "nv_tileaa.permute", "nv_tileaa.reshape"})


def box_reader_ops(load, body) -> list:
    """The top-level ops of loop body ``body`` that may read staged load ``load``'s box: the
    dots its value reaches through views and permutes, and any other op it reaches (which reads
    the box into registers; followed on). An op nested in a region counts as the top-level op
    around it; the yield is among them where the value reaches the next iteration. (A dot has
    read its operands once it is emitted: the general form's dots wait for their MMAs.)"""
    pos = {id(o) for o in body.ops}

    def top(o):
        while id(o) not in pos:
            o = o.parent_op
        return o

    out, work, seen = {}, [load], set()
    while work:
        o = work.pop()
        for r in o.results:
            for u in r.users:
                if id(u) in seen:
                    continue
                seen.add(id(u))
                t = top(u)
                if u.name in PASS_THROUGH and t is u:
                    work.append(u)
                    continue
                out[id(t)] = t
                if u.name != "nv_tileaa.dot":
                    work.append(u)
    return list(out.values())


def box_readers(op, staged: list) -> list:
    """For each staged load of general-form loop ``op``: the index in the body of the last
    top-level op that may read its box (:func:`box_reader_ops`; the load's own index where
    nothing does)."""
    body = op.regions[0].blocks[0]
    pos = {id(o): i for i, o in enumerate(body.ops)}
    return [
        max([pos[id(x.load)]] + [pos[id(t)] for t in box_reader_ops(x.load, body)]) for x in staged
    ]


def _box_hooks(em: Emitter, op, staged: list, fr, ring) -> dict:
    """The consumers' per-box synchronisation (docs/pipelines.md section 27): each staged load
    waits for its own full barrier where it stands in the body, and every consumer thread
    arrives on its empty barrier after the last op that may read it (:func:`box_readers`), so
    the producer refills a box (attention's K) while the rest of the iteration (the softmax,
    the second dot) still runs. Returns (op -> (before, after) for ``Emitter.op_hooks``, the
    releases due at the iteration's end)."""
    body = op.regions[0].blocks[0]
    hooks: dict = {}
    late: list = []

    def add(o, before=None, after=None) -> None:
        b0, a0 = hooks.get(o, ([], []))
        hooks[o] = (b0 + ([before] if before else []), a0 + ([after] if after else []))

    for b, (x, last) in enumerate(zip(staged, box_readers(op, staged))):
        add(x.load, before=lambda b=b: mbarrier_wait(em, fr.bar(0, ring.stage, b), ring.phase))
        release = lambda b=b: fr.release(fr.bar(1, ring.stage, b))  # noqa: E731
        if last >= len(body.ops) - 1:  # read by the yield: released at the iteration's end
            late.append(release)
        else:
            add(body.ops[last], after=release)
    return {o: (_run(bs), _run(as_)) for o, (bs, as_) in hooks.items()}, _run(late)


def _run(fns: list):
    def go() -> None:
        for f in fns:
            f()

    return go


class Frame(SimpleNamespace):
    """What :func:`_frame` leaves the consumers: ``base`` (the shared array's address), ``bar(i,
    stage)`` (the stage's full, i = 0, or empty, i = 1, barrier), ``t0`` (thread 0), ``tid``,
    the map slot (``slot_off``, ``share``, ``maps_off``, ``nmaps``), the loop bounds (``lb``,
    ``ub``, ``step``, ``ty``, ``iv_cls``), the TMEM bookkeeping (``tmem_off``, ``done_off``,
    ``tbar_off``, ``tcols``, ``tc_scaled``), the consumers' label, the B^T buffers'
    offset, ``release(addr)`` (the consumers' arrival on an empty barrier: in both CTAs of
    an sm_90 pair) and ``store_built`` (the (box, swizzle) of the TMA store's map the prologue
    built, published and acquired, or None)."""


def _frame(em: Emitter, op, staged: list, stages: int, stage_bytes: int, facts: dict) -> "Frame":
    """The pipeline's frame, shared by every form of the async loop: the one ``.shared`` array
    (the stage ring, the B^T buffers of sm_90's transposing consumers, the full and empty
    barriers, the map slot, TMEM bookkeeping on sm_100a, the device-built maps), thread 0's
    set-up (barriers, claimed slot, maps) and warp 0's publication, then the producer warp
    group: its last warp group's first warp copies each stage's ``staged`` operands by TMA
    (and, for sm_100a's scaled accumulate, its second warp issues the MMAs) and returns;
    where an operand is copied by threads (async_copy.py), all 128 producer threads copy it
    and the first of them issues the TMA copies. ``facts``:
    the caller's (``bt``, ``tc``, ``scaled``, ``sides``, ``store``, ``nthreads``, ``N``
    and, for the issuer, the dot). Thread 0 builds every map (the store's too, where
    :func:`async_store.store_guess` foresees its box) while its claim of the slot is on its way
    (``tma.claim_slot``'s ``meanwhile``). Returns what the consumers need (:class:`Frame`)."""
    body = op.regions[0].blocks[0]
    bt, tc, scaled = facts["bt"], facts["tc"], facts["scaled"]
    sides, store, nthreads, N = facts["sides"], facts["store"], facts["nthreads"], facts["N"]
    pair = facts.get("pair", False)
    nb = facts.get("boxes", 1)  # barriers per stage and side: one, or one per staged load
    bt_off = stages * stage_bytes
    bar_off = bt_off + (bt.count * bt.bytes if bt else 0)
    slot_off = bar_off + 16 * stages * nb
    tmem_off, done_off = slot_off + 8, slot_off + 16  # sm_100: TMEM address, MMAs-done barrier
    tbar_off = slot_off + 24  # sm_100 scaled accumulate: the two TMEM buffers' barriers
    tc_scaled = tc and scaled
    # sm_100 pair from C: both CTAs wrote their rows of C into TMEM (the even CTA's barrier)
    # (or A's two TMEM buffers' barriers: async_rs.TmemA)
    tmem_a = facts.get("tmem_a", 0)
    init_off = tbar_off + (async_scaled.TMEM_BARRIER_BYTES if tc_scaled else 16 if tmem_a else 0)
    pair_init = tc and pair and not uniform_tile(op.operands[3])
    bounds_off = init_off + 8 * pair_init  # the loop's bounds, for each role (_split_bounds)
    maps_off = _align(bounds_off + 24, 128)
    tall = tc and not pair and facts.get("M") == 256  # two M 128 accumulators
    tcols = tcgen05.columns(2 * N + 4 * tmem_a if tc_scaled or tall else N + 2 * tmem_a)
    kept = facts.get("kept", [])
    kept_at = len(staged) + (store is not None)  # (their maps after the store's)
    nmaps = kept_at + len(kept)
    total = maps_off + nmaps * tma.TENSORMAP_BYTES
    em.need_isa("9.0" if pair else "8.6" if tc else "8.3")  # .blocksareclusters / tcgen05 / ...
    em.need_target_suffix("a")
    base = em.new("b32")
    em.pre.insert(0, f"\t.shared .align {_ALIGN} .b8 {ASYNC_SYMBOL}[{total}];")
    em.ins(f"mov.u32 {base}, {ASYNC_SYMBOL}")
    em.async_smem = total
    tid, _, _ = em.tid()
    threads = nthreads + 128
    slots = map_slots(threads, total + em.smem_bytes)
    sym = em.symbol
    em.globals += [
        f".global .align 128 .b8 {sym}_tmaps[{slots * nmaps * tma.TENSORMAP_BYTES * MAX_SMS}];",
        f".global .align 8 .b64 {sym}_slots[{tma.slot_words(slots, MAX_SMS)}];",
    ]
    lb, ub, step = (em.scalar(op, v) for v in op.operands[:3])
    iv_cls = em.reg_class(lb) or em.reg_class(ub) or "b32"
    ty = ("u" if "unsignedCmp" in op.attributes else "s") + ("64" if iv_cls == "b64" else "32")

    def bar(i: int, s, b: int = 0) -> str:
        """Stage ``s``'s full (i = 0) or empty (1) barrier (of staged load ``b``)."""
        r = em.new("b32")
        em.ins(f"mad.lo.s32 {r}, {s}, {8 * nb}, {base}")
        em.ins(f"add.s32 {r}, {r}, {bar_off + 8 * (stages * nb * i + b)}")
        return r

    # a stage is empty once every consumer thread arrived (wgmma), or once the MMAs' commit
    # arrived (tcgen05) - and, for staged side vectors on sm_100a, every consumer thread read them
    empty_count = (1 + (nthreads if sides else 0)) if tc else nthreads
    if pair and not tc:  # sm_90: both CTAs' consumer warps read each stage's B halves
        empty_count = cta_pair.release_count(nthreads)
    # ---- thread 0: barriers, tensor maps (claimed per-SM slot); then every thread syncs
    t0 = em.new("pred")
    em.ins(f"setp.eq.u32 {t0}, {tid}, 0")
    skip = em.new_label("async_init")
    em.ins(f"@!{t0} bra {skip}")
    for s in range(stages * nb):
        mbarrier_init(em, f"{ASYNC_SYMBOL}+{bar_off + 8 * s}", async_copy.full_count(staged))
        # empty: every consumer thread arrives (wgmma), or the MMAs' tcgen05.commit
        mbarrier_init(em, f"{ASYNC_SYMBOL}+{bar_off + 8 * (stages * nb + s)}", empty_count)
    if tc:
        mbarrier_init(em, f"{ASYNC_SYMBOL}+{done_off}", 1)
    if pair_init:  # each CTA's thread 0 arrives once its consumers wrote C
        mbarrier_init(em, f"{ASYNC_SYMBOL}+{init_off}", 2)
    if tc_scaled:
        for i in range(2):  # TMEM buffer i: full (the issuer's commit), empty (the consumers)
            mbarrier_init(em, f"{ASYNC_SYMBOL}+{tbar_off + 8 * i}", 1)
            mbarrier_init(em, f"{ASYNC_SYMBOL}+{tbar_off + 16 + 8 * i}", nthreads)
    async_kept.init_barriers(em, kept)
    for i in range(2 if tmem_a else 0):  # A's TMEM buffer i: the MMAs' commit once they read it
        mbarrier_init(em, f"{ASYNC_SYMBOL}+{tbar_off + 8 * i}", 1)
    mbarrier_init_fence(em)
    for i in range(2 if tmem_a else 0):  # (free at first: the first phase completes now)
        em.ins(f"mbarrier.arrive.shared::cta.b64 _, [{ASYNC_SYMBOL}+{tbar_off + 8 * i}]")
    # the maps (copied operands have none; the epilogue's TMA store's where the prologue
    # foresees its box) are built while the slot's claim is on its way
    built = [
        (i, lambda m, x=x: _build_map(em, x, m)) for i, x in enumerate(staged) if not x.threads
    ]
    guess = async_store.store_guess(em, op, store, pair) if store is not None else None
    if guess is not None:
        spec = lambda m: tma.build_tensormap(  # noqa: E731
            em, m, async_store.store_spec(em, store, *guess)
        )
        built.append((len(staged), spec))
    built += [(kept_at + i, lambda m, x=k.x: _build_map(em, x, m)) for i, k in enumerate(kept)]

    def build_maps() -> None:
        for i, build in built:
            m = em.new("b32")
            em.ins(f"add.s32 {m}, {base}, {maps_off + i * tma.TENSORMAP_BYTES}")
            build(m)

    share = _shared_maps(staged, store if guess is not None else None, kept)
    slot, hit = tma.claim_slot(em, f"{sym}_slots", slots, "async_claim", build_maps, share)
    em.ins(f"st.shared.u32 [{ASYNC_SYMBOL}+{slot_off}], {slot}")
    if share:  # warp 0 publishes only maps the slot does not hold yet
        h = em.new("b32")
        em.ins(f"selp.u32 {h}, 1, 0, {hit}")
        em.ins(f"st.shared.u32 [{ASYNC_SYMBOL}+{slot_off + 4}], {h}")
    bounds = lambda lb=lb, ub=ub, step=step: (lb, ub, step)  # noqa: E731
    if any(x.threads for x in staged):  # (producer threads copying: _split_bounds)
        bounds = _split_bounds(em, (lb, ub, step), iv_cls, bounds_off)
    em.label(skip)
    w0 = em.new("pred")
    em.ins(f"setp.lt.u32 {w0}, {tid}, 32")
    skip_pub = em.new_label("async_publish")
    em.ins(f"@!{w0} bra {skip_pub}")
    em.ins("bar.warp.sync -1")
    published = em.new_label("async_published")
    if share:  # (one word for the whole warp: a uniform branch)
        h, held = em.new("b32"), em.new("pred")
        em.ins(f"ld.shared.u32 {h}, [{ASYNC_SYMBOL}+{slot_off + 4}]")
        em.ins(f"setp.ne.u32 {held}, {h}, 0")
        em.ins(f"@{held} bra.uni {published}")
    gmaps = _slot_maps(em, sym, slot_off, nmaps)
    for i, _ in built:
        src = em.new("b32")
        em.ins(f"add.s32 {src}, {base}, {maps_off + i * tma.TENSORMAP_BYTES}")
        tma.publish_tensormap(em, gmaps[i], src)
    em.label(published)
    if tc:  # warp 0 allocates the accumulator's TMEM columns (of each CTA of a pair)
        g = cta_pair.group(pair)
        em.ins(
            f"tcgen05.alloc.{g}.sync.aligned.shared::cta.b32 [{ASYNC_SYMBOL}+{tmem_off}], {tcols}"
        )
        em.ins(f"tcgen05.relinquish_alloc_permit.{g}.sync.aligned")
    em.label(skip_pub)
    if em.ring_ready(bar_off):  # the prologue's scratch was in the stages: generic -> async
        em.ins("fence.proxy.async.shared::cta")
    if pair:  # both CTAs' barriers exist before any remote arrival
        cta_pair.cluster_sync(em)
    else:
        em.ins("bar.sync 0")
    gmaps = _slot_maps(em, sym, slot_off, nmaps)
    if guess is not None:  # the store's map, acquired and fetched long before the epilogue
        stored = em.new_label("async_store_map")
        em.ins(f"@!{t0} bra {stored}")
        tma.acquire_tensormap(em, gmaps[len(staged)])
        tma.prefetch_tensormap(em, gmaps[len(staged)])
        em.label(stored)
    if kept:  # thread 0 copies the loop-invariant A operands, before the warp groups split
        issued = em.new_label("async_kept")
        em.ins(f"@!{t0} bra {issued}")
        for g in gmaps[kept_at:]:
            tma.acquire_tensormap(em, g)
        async_kept.issue(em, kept, gmaps[kept_at:])
        em.label(issued)
    if share:  # the release half of the slot's free (tma.release_slot), after thread 0's
        # copies: its GPU-scope membar delays none of them
        fenced = em.new_label("async_fenced")
        em.ins(f"@!{t0} bra {fenced}")
        tma.maps_in_place(em)
        em.label(fenced)
    gmaps = gmaps[: len(staged)]
    peer = lane0 = None
    if pair and not tc:  # sm_90: a stage is free once both CTAs' consumers are done with it
        peer = em.new("b32")
        em.ins(f"xor.b32 {peer}, {cta_pair.rank(em)}, 1")
        lane0 = cta_pair.lane0(em)

    def release(addr: str) -> None:
        """Every consumer thread: done with the stage (or box) whose empty barrier is at
        ``addr``; in both CTAs (lane 0 of each warp) where the other CTA's copies write this
        CTA's stages too."""
        if peer is None:
            em.ins(f"mbarrier.arrive.shared::cta.b64 _, [{addr}]")
        else:
            cta_pair.release_both(em, addr, None, peer, lane0)

    regs = op.attributes.get(ASYNC_REGS_ATTR)

    # ---- producer warp group (after the consumers): one thread issues the copies
    prod = em.new("pred")
    em.ins(f"setp.ge.u32 {prod}, {tid}, {nthreads}")
    consumer = em.new_label("async_consumer")
    em.ins(f"@!{prod} bra {consumer}")
    if regs is not None:
        setmaxnreg(em, False, regs.value)
        # the maps' addresses from the slot again, not live across the register drop
        gmaps = _slot_maps(em, sym, slot_off, nmaps)[: len(staged)]
    plb, pub, pstep = bounds()  # (the producer's own: the Frame keeps the consumers')
    if tc_scaled:  # the second warp issues the MMAs (the consumers scale meanwhile)
        a, b, dot = facts["a"], facts["b"], facts["dot"]
        mmas = async_tcgen05.tcgen05_stage(
            dot, facts["ab"], a, b, facts["M"], N, facts["K"], facts["acc_int"]
        )
        async_scaled.tcgen05_issuer(em, locals())
    out = em.new_label("async_producer_done")
    leader = em.new("pred")
    copiers = ptid = None
    if any(x.threads for x in staged):
        # every producer thread copies the operands TMA cannot (async_copy.py); the first
        # issues the TMA copies
        copiers = async_copy.Arrivals(em, async_copy.lagged(staged))
        ptid = em.new("b32")
        em.ins(f"sub.u32 {ptid}, {tid}, {nthreads}")
        em.ins(f"setp.eq.u32 {leader}, {ptid}, 0")
        acquired = em.new_label("async_acquired")
        em.ins(f"@!{leader} bra {acquired}")
    else:  # one elected lane of the producer's first warp issues (elect.sync, as tileiras)
        em.ins(f"setp.lt.u32 {leader}, {tid}, {nthreads + 32}")
        em.ins(f"@!{leader} bra {out}")
        elected = em.new("b32")
        em.ins(f"elect.sync {elected}|{leader}, -1")
        em.ins(f"@!{leader} bra {out}")
    for g, x in zip(gmaps, staged):
        if x.threads:
            continue
        tma.acquire_tensormap(em, g)
        tma.prefetch_tensormap(em, g)
    if copiers is not None:
        em.label(acquired)
    shifts, lead = {}, None
    cast, halves = None, {}
    if pair:  # this CTA's rows of A and columns of B; the even CTA's barriers
        rk = cta_pair.rank(em)
        lead = cta_pair.is_leader(em, rk)
        every = staged + [x for _, more in facts.get("chain", ()) for x in more]
        shifts = cta_pair.offsets(em, every, rk)
        if not tc:
            cast = em.new("b16")
            em.ins(f"mov.b16 {cast}, {cta_pair.PAIR_MASK}")
            for x in every:
                if x.multicast:
                    halves[id(x)] = em.new("b32")
                    em.ins(f"mul.lo.s32 {halves[id(x)]}, {rk}, {x.half}")
    ring = Ring(stages)
    ring.start(em, 0)
    produce = dict(
        ring=ring,
        bar=bar,
        base=base,
        stage_bytes=stage_bytes,
        gmaps=gmaps,
        pair=pair,
        tc=tc,
        lead=lead,
        shifts=shifts,
        cast=cast,
        halves=halves,
        dot=facts.get("dot"),
        boxes=nb,
        copiers=copiers,
        ptid=ptid,
        leader=leader,
    )
    _produce(em, op, staged, produce, (plb, pub, pstep, ty, iv_cls))
    for later, later_staged in facts.get("chain", ()):  # a chain: its loops in turn (section 23)
        producer_scalars(em, op, later)
        _produce(em, later, later_staged, produce, _bounds(em, later))
    if pair and not tc:  # sm_90: the other CTA's consumers release this CTA's stages too
        _producer_tail(em, ring, bar, stages, nb)
    em.label(out)
    em.ins("ret")
    return Frame(
        base=base,
        bar=bar,
        t0=t0,
        store_built=guess,
        tid=tid,
        slot_off=slot_off,
        share=share,
        maps_off=maps_off,
        nmaps=nmaps,
        lb=lb,
        ub=ub,
        step=step,
        ty=ty,
        iv_cls=iv_cls,
        tmem_off=tmem_off,
        done_off=done_off,
        tbar_off=tbar_off,
        init_off=init_off,
        tcols=tcols,
        tc_scaled=tc_scaled,
        consumer=consumer,
        bt_off=bt_off,
        boxes=nb,
        release=release,
    )


#: on a kernel whose general-form async loops did not fit in shared memory once emitted: it was
#: emitted on today's path instead, and the attribute says why (docs/pipelines.md section 23)
ASYNC_FALLBACK_ATTR = "nv_tileas.async_fallback"


#: on a kernel whose general-form ring was emitted with fewer stages than the async stage chose
#: (:func:`fewer_general_stages`): the stages it has
ASYNC_REFITTED_ATTR = "nv_tileas.async_refitted"


def fewer_general_stages(func) -> bool:
    """One stage fewer for ``func``'s general-form loops, whose emitted ring, kept operands and
    scratch outgrew shared memory: where the consumers release each staged load on its own
    (not the overlap of section 16, which holds a stage for an iteration) one stage still
    refills K while the rest of the iteration runs (docs/pipelines.md section 27), which beats
    today's path. False where no loop can lose one."""
    from tilegen.runtime.attributes import IntegerAttr
    from tilegen.runtime.types import I32

    loops = [o for o in func.walk() if o.name == "scf.for" and ASYNC_ATTR in o.attributes]
    if not loops or any(
        ASYNC_GENERAL_ATTR not in lp.attributes
        or ASYNC_OVERLAP_ATTR in lp.attributes
        or lp.attributes[ASYNC_ATTR].value < 2
        for lp in loops
    ):
        return False
    for lp in loops:
        lp.set_attr(ASYNC_ATTR, IntegerAttr(lp.attributes[ASYNC_ATTR].value - 1, I32))
    func.set_attr(ASYNC_REFITTED_ATTR, IntegerAttr(loops[0].attributes[ASYNC_ATTR].value, I32))
    return True


def strip_general_async(func) -> bool:
    """Take the async stage's marks off ``func``'s general-form loops (and their staged
    loads), so the emitter lowers them on today's path; False when there are none (the GEMM
    form's stage may have rewritten the epilogue: it is not undone)."""
    from tilegen.runtime.layouts.kernel import OCCUPANCY_CAP_DROPPED

    loops = [o for o in func.walk() if o.name == "scf.for" and ASYNC_ATTR in o.attributes]
    if not loops or any(ASYNC_GENERAL_ATTR not in lp.attributes for lp in loops):
        return False
    names = (ASYNC_ATTR, ASYNC_GENERAL_ATTR, ASYNC_REGS_ATTR, ASYNC_CONSUMER_REGS_ATTR)
    names += (ASYNC_OVERLAP_ATTR, ASYNC_CHAIN_ATTR, ASYNC_STAGED_ATTR)
    for lp in loops:
        for o in lp.walk():
            for name in names:
                if name in o.attributes:
                    o.remove_attr(name)
    for o in func.walk():  # (a loop-invariant A copied by TMA: loaded by the threads again)
        if ASYNC_KEPT_ATTR in o.attributes:
            o.remove_attr(ASYNC_KEPT_ATTR)
    if OCCUPANCY_CAP_DROPPED in func.attributes:
        func.remove_attr(OCCUPANCY_CAP_DROPPED)
    return True


def producer_scalars(em: Emitter, first, later) -> None:
    """In the producer: the scalar ops between chain loops ``first`` and ``later`` that depend
    on values from before ``first`` alone (the later loop's bounds, its loads' indices; the
    rule admits no other dependence, async_general.chain_reason); the consumers emit them again
    where they stand."""
    ops = first.parent.ops
    have = {id(r) for o in ops[: ops.index(first)] for r in o.results}
    for o in ops[ops.index(first) + 1 : ops.index(later)]:
        if o.name == "scf.for" or o.regions or any(getattr(r.type, "rank", 0) for r in o.results):
            continue
        if all(id(v) in have or not isinstance(v, OpResult) for v in o.operands):
            em.emit_op(o)
            have.update(id(r) for r in o.results)


def _bounds(em: Emitter, op) -> tuple:
    """(lb, ub, step, comparison type, induction register class) of the scf.for ``op``."""
    lb, ub, step = (em.scalar(op, v) for v in op.operands[:3])
    iv_cls = em.reg_class(lb) or em.reg_class(ub) or "b32"
    ty = ("u" if "unsignedCmp" in op.attributes else "s") + ("64" if iv_cls == "b64" else "32")
    return lb, ub, step, ty, iv_cls


def _produce(em: Emitter, op, staged: list, p: dict, bounds: tuple) -> None:
    """The producer's loop over ``op``'s iterations: each waits for its stage of the ring to be
    empty, expects the stage's bytes on its full barrier and copies ``staged`` by TMA with the
    maps ``p["gmaps"]`` (in ``staged``'s order); the ring continues from where it stands."""
    ring, bar, base, stage_bytes = p["ring"], p["bar"], p["base"], p["stage_bytes"]
    pair, tc, lead = p["pair"], p["tc"], p["lead"]
    lb, ub, step, ty, iv_cls = bounds
    body = op.regions[0].blocks[0]
    iv = em.mov(iv_cls, lb)
    top, end = loop_head(em, "async_produce", ty, iv, ub)
    em.values[body.args[0]] = iv
    from tilegen.runtime.rewrite.ir_utils import loop_slice

    need = set()  # the loads' index math: the ops their operands are computed by, no others
    for x in staged:
        need.update(id(o) for o in loop_slice(x.load, op) or ())
    for o in body.ops:
        if id(o) not in need or any(getattr(r.type, "rank", 0) for r in o.results):
            continue  # (tiles, the loads' padding splats: TMA fills with zeros itself)
        em.emit_op(o)
    lap = em.new("b32")
    em.ins(f"xor.b32 {lap}, {ring.phase}, 1")
    sbase = em.new("b32")
    em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {stage_bytes}, {base}")
    if p.get("boxes", 1) > 1:  # each load into its box once its last reader freed it
        for b, (x, g) in enumerate(zip(staged, p["gmaps"])):
            mbarrier_wait(em, bar(1, ring.stage, b), lap)
            full = bar(0, ring.stage, b)
            mbarrier_arrive_expect_tx(em, full, x.bytes)
            _copy(em, x, g, sbase, full, p)
        ring.advance(em)
        em.ins(f"add.{ty} {iv}, {iv}, {step}")
        em.ins(f"bra {top}")
        em.label(end)
        return
    mbarrier_wait(em, bar(1, ring.stage), lap)
    full = bar(0, ring.stage)
    copiers = p.get("copiers")
    if copiers is not None:  # every producer thread: the first issues the TMA copies
        tma_ops = [(x, g) for x, g in zip(staged, p["gmaps"]) if not x.threads]
        if tma_ops:
            issued = em.new_label("async_issued")
            em.ins(f"@!{p['leader']} bra {issued}")
            mbarrier_arrive_expect_tx(em, full, sum(x.bytes for x, _ in tma_ops))
            for x, g in tma_ops:
                _copy(em, x, g, sbase, full, p)
            em.label(issued)
        for x in staged:
            if x.threads:
                async_copy.copy(em, x, sbase, p["ptid"])
        copiers.stage_copied(full)
        ring.advance(em)
        em.ins(f"add.{ty} {iv}, {iv}, {step}")
        em.ins(f"bra {top}")
        em.label(end)
        copiers.done()
        return
    if pair and tc:  # the even CTA expects both CTAs' copies on its full barrier
        em.ins(
            f"@{lead} mbarrier.arrive.expect_tx.shared::cta.b64 _, [{full}], "
            f"{2 * sum(x.bytes for x in staged)}"
        )
        full = cta_pair.leader_address(em, full)
    else:
        mbarrier_arrive_expect_tx(em, full, sum(x.bytes for x in staged))
    for x, g in zip(staged, p["gmaps"]):
        _copy(em, x, g, sbase, full, p)
    ring.advance(em)
    em.ins(f"add.{ty} {iv}, {iv}, {step}")
    em.ins(f"bra {top}")
    em.label(end)


def _producer_tail(em: Emitter, ring, bar, stages: int, nb: int) -> None:
    """The producer's thread, after its last copy: wait until the last ``stages`` stages are
    released, as if to refill them. Their releases include the other CTA's consumers' arrivals
    on this CTA's empty barriers, and a CTA must outlive every access its cluster makes to its
    shared memory (the thread keeps it alive; CUTLASS's ``producer_tail``). Positions before
    the first stage's first fill pass at once (the parity of the phase before phase 0)."""
    for _ in range(stages):
        lap = em.new("b32")
        em.ins(f"xor.b32 {lap}, {ring.phase}, 1")
        for b in range(nb):
            mbarrier_wait(em, bar(1, ring.stage, b), lap)
        ring.advance(em)


def _copy(em: Emitter, x: "_Operand", g, sbase, full, p: dict) -> None:
    """The TMA copies of staged load ``x`` (map ``g``) into the stage at ``sbase``, completing
    on barrier ``full`` (a pair's: this CTA's rows or columns, into both CTAs where
    multicast)."""
    pair, tc, shifts, cast, halves = (p[k] for k in ("pair", "tc", "shifts", "cast", "halves"))
    od = x.load.opdef
    idx = [async_store.s32(em, em.scalar(x.load, v)) for v in od.operand_group(x.load, "indices")]
    col, outer = idx[-1], idx[-2::-1]  # coordinates innermost first
    for i, (c0, box) in enumerate(x.boxes):
        dst = em.new("b32")
        em.ins(f"add.s32 {dst}, {sbase}, {x.offset + i * x.box_bytes}")
        cc = col
        if c0:
            cc = em.new("b32")
            em.ins(f"add.s32 {cc}, {col}, {c0}")
        coords = cta_pair.shifted(em, [cc] + outer, x, shifts)
        if x.multicast:  # this CTA's half of the box's rows, into both CTAs
            moved = em.new("b32")
            em.ins(f"add.s32 {moved}, {dst}, {halves[id(x)]}")
            tma.tma_load(em, moved, g, coords, full, multicast=cast)
            continue
        tma.tma_load(em, dst, g, coords, full, pair and tc)


def _split_bounds(em: Emitter, bounds: tuple, cls: str, off: int):
    """The K loop's bounds that are registers (a trip count computed from the kernel's
    arguments), written by thread 0 into the frame at ``off`` before the roles split; returns
    a function the producer calls after its ``setmaxnreg.dec`` for its own copies. Live into
    the producer's loop, the consumers' register had to fit the producer's allocation too:
    ptxas spilled it (4 B) where the producer's threads copy both operands (fuzz seeds 722894,
    735031). Only there, and only the producer's: a bound loaded from shared memory is not
    uniform to ptxas, and wgmma consumers' descriptors would leave the uniform registers
    (sm_90 f16 GEMM: R2UR 17 -> 50)."""
    size = 8 if cls == "b64" else 4
    kept = [i for i, x in enumerate(bounds) if isinstance(x, str) and x.startswith("%")]
    for i in kept:
        em.ins(f"st.shared.b{8 * size} [{ASYNC_SYMBOL}+{off + 8 * i}], {bounds[i]}")

    def reload() -> tuple:
        out = list(bounds)
        for i in kept:
            out[i] = em.new(cls)
            em.ins(f"ld.shared.b{8 * size} {out[i]}, [{ASYNC_SYMBOL}+{off + 8 * i}]")
        return tuple(out)

    return reload


def _wgmma_form(
    dot, warps: int, N: int, ab: str, pair: bool = False, kmajor: bool = False
) -> tuple:
    """(instruction, trailing immediates) of the consumers' wgmma: 16-bit types read B N-major
    (imm-trans-b 1) or, staged as B^T (``kmajor``), K-major (0); tf32 / 8-bit ones K-major B^T
    (spec/ptx/mma.yaml's row, no transpose immediates: wgmma has none for them). A CTA pair's
    dot is laid out for its whole tile, not for the m64 wgmmas each CTA issues on its rows:
    the row comes from the types alone."""
    if ab in _TRANSPOSABLE:
        tnsp = 0 if kmajor else 1
        return f"wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{ab}.{ab}", f", 1, 1, 0, {tnsp}"
    from tilegen.runtime.codegen.wgmma_layout import wgmma_form, wgmma_plan

    if pair:
        row, imms = wgmma_form(dot)
        return row.ptx.format(n=N), imms
    plan = wgmma_plan(dot, warps, 90)
    if plan is None:
        fail(dot, "PTX backend: the async K loop's dot was not laid out for wgmma")
    return plan.row.ptx.format(n=N), plan.imms


def _build_map(em: Emitter, x: _Operand, smem_map: str) -> None:
    """The operand's CUtensorMap (its memref's rank, innermost first) from the memref's
    registers: the sizes, the byte strides of the outer dims (the innermost is unit-stride)."""
    mem = em.get(x.load.opdef.operand_group(x.load, "base")[0])
    dims = [async_store.s32(em, d) for d in reversed(mem.sizes)]
    dims = [em.mov("b32", d) if isinstance(d, int) else d for d in dims]
    strides = tuple(async_store.stride_bytes(em, st, x.esz) for st in reversed(mem.strides[:-1]))
    box = x.boxes[0][1].box[::-1]
    if x.multicast:  # half of the box's rows a copy (an sm_90 pair's B, K and V)
        box = box[:1] + (box[1] // 2,) + box[2:]
    if x.rows_box:  # a block of rows a copy (a kept A in wgmma_dot's row order)
        box = box[:1] + (x.rows_box,) + box[2:]
    spec = tma.TensorMapSpec(x.elem, x.esz, mem.ptr, tuple(dims), strides, box, x.span, x.atom)
    tma.build_tensormap(em, smem_map, spec)


def _slot_maps(em: Emitter, sym: str, slot_off: int, nmaps: int = 2) -> list:
    """Global addresses of the ``nmaps`` maps of this CTA's claimed slot (A, B, the store's)."""
    slot, gbase, off = em.new("b32"), em.new("b64"), em.new("b64")
    em.ins(f"ld.shared.u32 {slot}, [{ASYNC_SYMBOL}+{slot_off}]")
    em.ins(f"mov.u64 {gbase}, {sym}_tmaps")
    em.ins(f"mul.wide.u32 {off}, {slot}, {nmaps * tma.TENSORMAP_BYTES}")
    em.ins(f"add.s64 {gbase}, {gbase}, {off}")
    out = []
    for i in range(nmaps):
        g = em.new("b64")
        em.ins(f"add.s64 {g}, {gbase}, {i * tma.TENSORMAP_BYTES}")
        out.append(g)
    return out


def _shared_maps(staged: list, store, kept: list) -> bool:
    """Whether the CTAs of a launch may share the maps the prologue builds (tma.claim_slot's
    ``share``): the compile asks for it (``CompileOptions.share_maps``) and every such map's
    memref - the TMA-copied operands', the kept A's, the store's where the prologue builds it -
    is the same in every tile block (``ir_utils.launch_uniform``: not offset by the block id)."""
    from tilegen.runtime.options import current
    from tilegen.runtime.rewrite.ir_utils import launch_uniform

    if not current().share_maps:
        return False
    loads = [x.load for x in staged if not x.threads] + [k.x.load for k in kept]
    bases = [op.opdef.operand_group(op, "base")[0] for op in loads]
    if store is not None:
        bases.append(store.opdef.operand_group(store, "base")[0])
    return all(launch_uniform(b) for b in bases)
