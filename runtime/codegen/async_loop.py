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

The accumulator lives in the wgmma fragment of each consumer warp group (A's rows in natural
order); the loop's initial value comes in, and its result goes out, through the scratch buffer
in whatever layout the layout stage gave the loop's value.
"""

from __future__ import annotations

from types import SimpleNamespace

from tilegen.runtime.codegen import async_copy, async_mma_sync, async_rs, async_scaled, cta_pair
from tilegen.runtime.codegen import tcgen05, tma
from tilegen.runtime.codegen import (
    async_kept,
    b8_transpose,
    fragment_load,
    fragment_sides,
    tmem_chunks,
)
from tilegen.runtime.codegen.core import ELEMENTS, Emitter, elem_key, fail
from tilegen.runtime.codegen.selection import conversion_ptx
from tilegen.runtime.codegen.tma import swizzled_reg as _swizzled
from tilegen.runtime.ir import OpResult
from tilegen.runtime.layouts.async_forms import (
    chain_sides,
    fragment_chain,
    init_in_tmem,
    plus_zero_tile,
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
#: on a K loop the async path takes in its general form (async_rule.general_loads)
ASYNC_GENERAL_ATTR = "nv_tileas.async_general"
#: on a general-form loop whose last dot overlaps the next iteration's first (async_overlap.py)
ASYNC_OVERLAP_ATTR = "nv_tileas.async_overlap"
#: the loop attribute with the consumers' setmaxnreg.inc (the scaled accumulate's two fragments)
ASYNC_CONSUMER_REGS_ATTR = "nv_tileas.async_consumer_regs"
#: on a side vector load the producer copies into the stage (async_rule.staged_sides)
ASYNC_STAGED_ATTR = "nv_tileas.async_staged"
#: on a GEMM-form loop that runs on a CTA pair (async_rule._pair_reason; section 18)
ASYNC_PAIR_ATTR = "nv_tileas.cta_pair"
#: on the second and later loops of a chain of general-form loops (async_rule._chain_reason;
#: section 23): the first loop's ring, maps and producer serve them
ASYNC_CHAIN_ATTR = "nv_tileas.async_chained"
#: on a loop-invariant dot A operand's load the producer copies by TMA (async_kept.py)
ASYNC_KEPT_ATTR = "nv_tileas.async_kept"
ASYNC_SYMBOL = "tg_async"
#: the attribute runtime/passes/async_rule.py puts on a tiled_store the epilogue writes by TMA
TMA_STORE_ATTR = "nv_tileas.tma_store"
#: ... on the plain tiled_store sm_100's consumers write from the TMEM rows by chunks
TMEM_STORE_ATTR = "nv_tileas.tmem_store"
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
    f32 stage), views dropping leading unit dims and B's transpose (async_rule.operand_load)."""
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
    store = _tma_store_of(op)  # the epilogue's TMA store (async_rule.tma_store_plan marked it)
    # or its plain store, from the TMEM rows by chunks (async_rule.tmem_store_plan marked it)
    direct = _marked_after(op, TMEM_STORE_ATTR)
    # sm_100a: an A the IR converts to tf32 reaches the MMAs from tensor memory (async_rs.py)
    tmem_a = 0
    if tc and _converted(em, dot.operands[0]):
        occ = kernel_spec_int(em.func, "occupancy") or 1
        tmem_a = async_rs.tmem_a_columns(em, a, M, N, pair, scaled, occ)
    fr = _frame(em, op, staged, stages, stage_bytes, locals())
    base, bar, t0, tid = fr.base, fr.bar, fr.t0, fr.tid
    slot_off, share, maps_off, nmaps = fr.slot_off, fr.share, fr.maps_off, fr.nmaps
    lb, ub, step, ty, iv_cls = fr.lb, fr.ub, fr.step, fr.ty, fr.iv_cls
    tmem_off, done_off, tbar_off, tcols = fr.tmem_off, fr.done_off, fr.tbar_off, fr.tcols
    init_off = fr.init_off  # (an sm_100 pair from C: _tcgen05_consumer)
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
    if store is not None or direct is not None:  # what tma_store_epilogue needs
        # the side vectors of the chain to the store take the ring's last bytes
        # (async_rule.sides_reserve; fragment_sides.py), the store's tile the rest
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
        _release_tmem(em, t0, store, slot_off, share, tcols)
        chain = fragment_chain(op, store)
        if chain is not None:
            _hand_over(em, chain, ("rows", M, N, order.groups))
            em.set(op.results[0], acc)
            return
        em.set(op.results[0], _from_rows(em, op, acc, order))
        return
    if tc:
        res = _tcgen05_consumer(em, op, locals())
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

    acc = _to_fragment(em, op, op.operands[3].type, init, M, N, acc_int)
    cls = "b32" if acc_int else "f32"
    part = [em.new(cls) for _ in acc] if scaled else None  # the stage's partial product
    chain = async_scaled.scaled_slice(body, dot) if scaled else None
    order = async_scaled.WgmmaOrder(em, M, N) if scaled else None
    ring = Ring(stages)
    ring.start(em, 0)
    iv = em.mov(iv_cls, lb)
    top, end = em.new_label("async_consume"), em.new_label("async_consumed")
    wg_ins, wg_imms = _wgmma_form(dot, W, N, ab, pair, kmajor)
    round_a, round_b = (_converted(em, dot.operands[i]) for i in (0, 1))
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
            _round_tf32(em, sbase, a, tid, nthreads, round_a)
        if lanes is not None:  # 8-bit B^T of this stage, a warp an atom at a time
            b8_transpose.emit(em, lanes, sbase, btbase)
        elif bt is not None:  # B^T of this stage into this iteration's buffer, for the async proxy
            _transpose_b(em, b, sbase, bt, btbase, tid, nthreads, round_b)
        elif round_b:  # (B^T staged K-major: rounded in place as A is)
            _round_tf32(em, sbase, b, tid, nthreads, round_b)
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
    res = _from_fragment(em, op, op.results[0].type, acc, M, N, acc_int)
    em.set(op.results[0], res)


def _general_for(em: Emitter, op, stages: int) -> None:
    """The general form (docs/pipelines.md section 13; async_rule.general_loads): the producer
    warp group copies every marked load of the body (dots' B operands, as loaded) into the
    stage ring by TMA; the consumer warps run the body as today's path emits it - loop-invariant
    A operands kept in shared memory once (``mma.keep_invariant_a``), A from registers, each
    dot's B read from the stage through swizzled descriptors (``mma.StagedBox``) - waiting for
    the stage's full barrier before it and arriving on its empty barrier after it (every dot
    has waited for its wgmmas by then)."""
    from tilegen.runtime.codegen.control import _bind, _slots, copy_into
    from tilegen.runtime.codegen.mma import keep_invariant_a

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
    from tilegen.runtime.codegen.mma import keep_invariant_a

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
    from tilegen.runtime.codegen.mma import StagedBox

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
    from tilegen.runtime.codegen.mma import keep_invariant_a

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
    """The consumers' per-box synchronisation (docs/pipelines.md section 27): each staged
        load waits for its own full barrier where it stands in the body, and every consumer thread
        arrives on its empty barrier after the last op that may read it (:func:`box_readers`), so
        the producer refills a box (attention's K) while the rest of the iteration (the softmax, the
        second dot) still runs. Returns (op -> (before, after) for ``Emitter.op_hooks``, the releases
    due at the iteration's end)."""
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
    :func:`_store_guess` foresees its box) while its claim of the slot is on its way
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
    guess = _store_guess(em, op, store, pair) if store is not None else None
    if guess is not None:
        spec = lambda m: tma.build_tensormap(em, m, _store_spec(em, store, *guess))  # noqa: E731
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
    if guess is not None or share:
        # the store's map, acquired and fetched long before the epilogue; the release half
        # of the slot's free where its maps are shared (tma.release_slot)
        stored = em.new_label("async_store_map")
        em.ins(f"@!{t0} bra {stored}")
        if share:
            tma.maps_in_place(em)
        if guess is not None:
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
        mmas = _tcgen05_stage(dot, facts["ab"], a, b, facts["M"], N, facts["K"], facts["acc_int"])
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
    rule admits no other dependence, async_rule._chain_reason); the consumers emit them again
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
    idx = [_s32(em, em.scalar(x.load, v)) for v in od.operand_group(x.load, "indices")]
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


def _release_tmem(em: Emitter, t0, store, slot_off: int, share: bool, tcols: int) -> None:
    """After the consumers' last TMEM read (every MMA done, so every copy landed): thread 0
    frees the map slot (unless the TMA store still needs it), warp 0 the TMEM columns."""
    if store is None:
        _free_slot(em, t0, slot_off, share)
    em.barrier()
    tcgen05.dealloc_columns(em, None, 0, f"{ASYNC_SYMBOL}+{slot_off + 8}", tcols)  # warp 0


def _from_rows(em: Emitter, op, acc: list, order) -> list:
    """Registers in TMEM row order (:class:`~.async_scaled.RowsOrder`) -> the loop result in
    the layout the layout stage gave it (through the scratch buffer, row-major f32)."""

    M, N = order.M, order.N
    cls = em.reg_class(acc[0])
    _scratch_from_start(em, M * N * 4)
    at = em.new("b32")
    em.ins(f"mad.lo.s32 {at}, {order.row}, {N}, {order.col}")
    at = em.smem_addr(at, 4)
    for c, r in enumerate(acc):
        em.ins(f"st.shared.{cls} [{at}+{4 * c}], {r}")
    em.barrier()
    return _scratch_to_layout(em, op, op.results[0].type, cls, M, N)


def _scratch_from_start(em: Emitter, nbytes: int) -> None:
    """Claim the scratch buffer's first ``nbytes`` for a write at its start: behind a barrier
    where an earlier claim (an exchange before the loop: C's layout change, say) may still be
    read by a slower warp (fuzz seed 602780)."""
    if em.scratch_in_use() > 0:
        em.barrier()
    em.need_smem(nbytes)


def _scratch_to_layout(em: Emitter, op, t, cls: str, M: int, N: int) -> list:
    """The M x N tile the consumers just wrote row-major (4-byte elements) into the scratch
    buffer (and met at the barrier), read back in the layout of ``t``; then the barrier again
    (the scratch may be reused)."""
    from tilegen.runtime.codegen.exchange import row_major

    d = em.dist_of(op, t)
    form = row_major((M, N))
    out = []
    for k in range(d.nregs):
        r = em.new(cls)
        em.ins(f"ld.shared.{cls} {r}, {em.smem_ref(d, form, k, 4)}")
        out.append(r)
    em.barrier()
    return out


def _tcgen05_consumer(em: Emitter, op, v: dict) -> list:
    """sm_100a: consumer thread 0 issues tcgen05.mma per stage into the TMEM accumulator
    (M 128: TMEM lane = row; M 64: 16 lanes of each warp's quarter) and commits each stage's MMAs to its empty barrier, the last to
    the done barrier; then warp w reads rows 32 w .. (tcgen05.ld), adds the loop's initial
    value (kept in the scratch buffer meanwhile) and the result goes to its layout."""
    from tilegen.runtime.codegen.exchange import row_major

    a, b, K, N, M = v["a"], v["b"], v["K"], v["N"], v["M"]
    base, stages, stage_bytes, bar = v["base"], v["stages"], v["stage_bytes"], v["bar"]
    lb, ub, step, ty, iv_cls = v["lb"], v["ub"], v["step"], v["ty"], v["iv_cls"]
    tid, t0 = v["tid"], v["t0"]
    acc_int, dot = v["acc_int"], v["dot"]
    pair = v.get("pair", False)
    cls = "b32" if acc_int else "f32"
    init = v["init"]
    # a pair with M 64 per CTA: thread t holds half of row t % 64 (cta_pair.py)
    half = pair and M == 64
    # one CTA's 256 rows (8 warps): two M 128 MMAs a K step into TMEM columns 0 .. N and
    # N .. 2 N; thread t reads row t (warp w: lanes 32 (w % 4) .., columns (w / 4) N ..)
    tall = not pair and M == 256
    # one CTA's 128 rows on 8 warps (N over 128): warp w reads lanes 32 (w % 4) .., columns
    # (w / 4) N / 2 .. (a thread holds half a row: the scaled form's column halves)
    wide = M == 128 and em.num_warps == 8  # (a pair's N 256 too: section 30)
    # one CTA's 64 rows on 4 warps: rows 16 w .. in TMEM lanes 32 w .. 32 w + 15; read by
    # 16x32bx2 loads, lane l takes row 16 w + l % 16, columns (l / 16) N / 2 .. (as tileiras)
    single64 = M == 64 and not pair and em.num_warps == 4
    # (the store: by TMA, or a plain one from the TMEM rows by chunks, async_rule)
    direct = v["direct"]
    store = v["store"] or direct
    chain = fragment_chain(op, store) if M == 128 or half or tall or single64 else None
    rows = None  # thread t's row of the result, in registers (row-major order): see below
    per = N // 2 if half or wide else N
    uniform = chain is not None and init and all(r == init[0] for r in init)
    # C, the initial value, in the accumulator's rows (init_in_tmem): written into TMEM before
    # the loop, the MMAs add to it, and the rows read back are the result as they are
    # (a pair: each CTA its own rows, then the even CTA's issuer waits for both, below)
    in_tmem = not uniform and chain is not None and (pair or init_in_tmem(op, em.num_warps))
    if single64 and (uniform or in_tmem):  # (else C waits in the scratch: 32x32b loads of
        per = N // 2  # lanes 0 .. 15)
    # a row of more than 128 accumulators a thread: read back by column chunks at the store
    # (and C written by chunks: init is None, fragment_load.into_tmem); so is a row of 128
    # beside a row vector (a bias) under 8 warps' 168 registers: the vector's 128 elements
    # would be live beside the 128 accumulators (fuzzer seed 170014 spilled 16 B)
    rows_at_once = tmem_chunks.ROWS_AT_ONCE - (em.num_warps == 8 and _row_side(chain))
    chunked = (uniform or in_tmem) and per > rows_at_once and M in (128, 256) and not half
    # a plain store's rows go out a chunk at a time too: no scratch, 32 values a thread live
    # (async_rule.tmem_store_plan admits the rows' layout and a chain to it only)
    chunked = chunked or (direct is not None and chain is not None and (uniform or in_tmem))
    # a zero initial value (+0, as a GEMM from zero starts): the first MMA overwrites D (it
    # accumulates from +0) and the rows read back are the result as they are: no register
    # holds the zeros meanwhile and no add follows (a loop of no iteration writes the zeros
    # into TMEM first, below)
    zero = uniform and plus_zero_tile(op.operands[3])
    if uniform and not zero:
        # a uniform initial value and a TMA-stored result: thread t keeps row t itself (the
        # initial value now, the sum once the MMAs ran) and the store writes it by position
        # (chunked: the store reads it from TMEM part by part, tmem_chunks)
        rows = None if chunked else [em.mov(cls, init[0]) for _ in range(per)]
    elif zero:
        rows = None if chunked else []
    elif in_tmem:
        rows = []
    elif pair:  # async_rule admits only the registers-only form for a pair
        fail(op, "PTX backend: this accumulator must reach a TMA store in registers")
    else:
        _scratch_from_start(em, M * N * 4)
        d = em.dist_of(op, op.operands[3].type)
        form = row_major((M, N))
        for k in range(d.nregs):  # the initial value waits in the scratch buffer
            em.ins(f"st.shared.{cls} {em.smem_ref(d, form, k, 4)}, {init[k]}")
        em.barrier()
    taddr = em.new("b32")
    em.ins(f"ld.shared.u32 {taddr}, [{ASYNC_SYMBOL}+{v['tmem_off']}]")
    if in_tmem:
        _, _, warp = em.tid()
        at = tmem_chunks.lane_base(em, warp, taddr, N, tall, wide)
        if init is None:
            fragment_load.into_tmem(em, op, ("rows", M, N, 2 if wide else 1), at, per)
        else:  # (M 64: half a row a thread, the other half N / 2 columns on)
            tmem_chunks.store_rows(em, at, init, N // 2 if single64 else 0)
        em.barrier()  # (the issuer's tcgen05.fence::after_thread_sync follows it)
        if pair:  # this CTA's rows are in: its thread 0 tells the even CTA's issuer
            cta_pair.arrive_leader(em, t0, base, v["init_off"])
    skip = em.new_label("async_issued")
    # f32 -> tf32 operands: A into tensor memory where it fits (async_rs.TmemA), else rounded in
    # place (the IR's conversion) as B is, by every consumer thread per stage before thread 0
    # issues; otherwise only thread 0 runs the loop
    tmem_a = v["tmem_a"]
    conv = [(a, _converted(em, dot.operands[0])), (b, _converted(em, dot.operands[1]))]
    rnd = [(x, c) for x, c in conv[1 if tmem_a else 0 :] if c]
    everyone = bool(rnd or tmem_a)
    if everyone and pair:
        fail(op, "PTX backend: a CTA pair's operands must reach the MMA as they are staged")
    issuer = t0
    if pair:  # the even CTA's thread 0 issues for both
        issuer = em.new("pred")
        em.ins(f"and.pred {issuer}, {t0}, {cta_pair.is_leader(em, cta_pair.rank(em))}")
    if not everyone:
        em.ins(f"@!{issuer} bra {skip}")
    if in_tmem and pair:  # both CTAs' rows of C are in TMEM before the first MMA
        cta_pair.wait_both(em, f"{ASYNC_SYMBOL}+{v['init_off']}")
    ring = Ring(stages)
    ring.start(em, 0)
    iv = em.mov(iv_cls, lb)
    acc_in = em.new("pred")
    # the first MMA overwrites D, or adds to the initial value in TMEM
    em.ins(f"setp.{'eq' if in_tmem else 'ne'}.u32 {acc_in}, 0, 0")
    mmas = _tcgen05_stage(dot, v["ab"], a, b, M, N, K, acc_int, pair)
    if tall:
        mmas = _tall_stage(dot, v["ab"], a, b, N, K, acc_int)
    in_tm = async_rs.TmemA(em, a, N, conv[0][1], tall) if tmem_a else None
    top, end = loop_head(em, "async_issue", ty, iv, ub)

    def one_stage(j: int) -> None:
        """One stage; A in TMEM buffer ``j`` (the loop's two copies take one each)."""
        mbarrier_wait(em, bar(0, ring.stage), ring.phase)
        sbase = em.new("b32")
        em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {stage_bytes}, {base}")
        issued = tbar = None
        if everyone:
            for x, cvt in rnd:
                _round_tf32(em, sbase, x, tid, em.barrier_threads, cvt)
            if rnd:
                em.ins("fence.proxy.async.shared::cta")
            if in_tm is not None:  # this thread's row of A into buffer j, before the barrier
                tbar = em.new("b32")
                em.ins(f"add.s32 {tbar}, {base}, {v['tbar_off'] + 8 * j}")
                in_tm.store(em, sbase, taddr, j, tbar)
                em.ins("tcgen05.fence::before_thread_sync")
            em.barrier()
            issued = em.new_label("async_stage_issued")
            em.ins(f"@!{t0} bra {issued}")
        em.ins("tcgen05.fence::after_thread_sync")
        if in_tm is not None:
            a_col = em.new("b32")
            em.ins(f"add.s32 {a_col}, {taddr}, {in_tm.column(j)}")
            mmas(em, sbase, taddr, acc_in, tid, a_col=a_col)
        else:
            mmas(em, sbase, taddr, acc_in, tid)
        cta_pair.commit(em, bar(1, ring.stage), pair)
        if tbar is not None:  # buffer j is free once these MMAs complete
            cta_pair.commit(em, tbar, pair)
        if issued is not None:
            em.label(issued)
        ring.advance(em)
        em.ins(f"add.{ty} {iv}, {iv}, {step}")

    one_stage(0)
    if in_tm is not None:  # the loop's second copy: buffer 1
        stop = em.new("pred")
        em.ins(f"setp.ge.{ty} {stop}, {iv}, {ub}")
        em.ins(f"@{stop} bra {end}")
        one_stage(1)
    em.ins(f"bra {top}")
    em.label(end)
    if everyone:
        em.ins(f"@!{t0} bra {skip}")
    done = em.new("b32")
    em.ins(f"add.s32 {done}, {base}, {v['done_off']}")
    cta_pair.commit(em, done, pair)
    em.label(skip)
    done = em.new("b32")
    em.ins(f"add.s32 {done}, {base}, {v['done_off']}")
    mbarrier_wait(em, done, 0)
    em.ins("tcgen05.fence::after_thread_sync")
    if v["store"] is None:  # every copy landed: thread 0 frees the map slot
        _free_slot(em, t0, v["slot_off"], v["share"])
    # no iteration: TMEM holds nothing; the result is the initial value
    ran = em.new("pred")
    em.ins(f"setp.lt.{ty} {ran}, {lb}, {ub}")
    if chunked:
        _, lane, warp = em.tid()
        lane_base = tmem_chunks.lane_base(em, warp, taddr, N, tall, wide)
        groups = 2 if wide or single64 else 1
        _hand_over(em, chain, ("rows", M, N, groups) + (("x2",) if single64 else ()))
        em.tmem_rows = tmem_chunks.Pending(  # (init None: TMEM holds C, tmem_chunks)
            chain, lane_base, ran, None if in_tmem else init[0], cls, per, taddr, v["tcols"]
        )
        em.tmem_rows.group = cta_pair.group(pair)
        em.tmem_rows.zero = zero
        em.tmem_rows.split = N // 2 if single64 else 0  # (16x32bx2: half a row a thread)
        return []  # (the registers come chunk by chunk: tma_store_epilogue)
    nomma = em.new_label("async_nomma")
    if not (in_tmem or zero):  # (TMEM holds the initial value then)
        em.ins(f"@!{ran} bra {nomma}")
    _, lane, warp = em.tid()
    row, lane_base = em.new("b32"), em.new("b32")
    # M 128: TMEM lane = row; M 64: rows 16 w .. in lanes 32 w .. 32 w + 15 of each quarter
    em.ins(f"mad.lo.s32 {row}, {warp}, {32 if M in (128, 256) or half else 16}, {lane}")
    live = None
    if M == 64 and not half:
        live = em.new("pred")
        em.ins(f"setp.lt.u32 {live}, {lane}, 16")
    wh = None
    if tall or wide:  # warp w: lanes 32 (w % 4) .., the second accumulator's columns (tall)
        wq, wh = em.new("b32"), em.new("b32")  # or the second half of the columns (wide)
        em.ins(f"and.b32 {wq}, {warp}, 3")
        em.ins(f"shr.u32 {wh}, {warp}, 2")
        em.ins(f"shl.b32 {lane_base}, {wq}, 21")
        em.ins(f"mad.lo.s32 {lane_base}, {wh}, {N if tall else N // 2}, {lane_base}")
        if wide:  # row 32 (w % 4) + lane
            em.ins(f"mad.lo.s32 {row}, {wq}, 32, {lane}")
    else:
        em.ins(f"shl.b32 {lane_base}, {warp}, 21")  # (32 w) << 16: the TMEM lane field
    em.ins(f"add.s32 {lane_base}, {lane_base}, {taddr}")
    terms = [(N, row)] + ([(N // 2, wh)] if wide else [])
    rowaddr = None if rows is not None else em.smem_addr(em.lincomb(0, terms), 4)
    add = "s32" if acc_int else "rn.f32"
    x2 = single64 and rows is not None
    if x2:
        live = None
    if zero:  # no iteration: TMEM holds nothing, so the zeros go there (the branch is uniform)
        filled = em.new_label("async_ran")
        em.ins(f"@{ran} bra {filled}")
        z = em.mov("b32", "0")
        tmem_chunks.store_rows(em, lane_base, [z] * per, N // 2 if x2 else 0)
        em.label(filled)
    for chunk in range(per // 32):
        regs = [em.new("b32") for _ in range(32)]
        src = em.new("b32")
        em.ins(f"add.s32 {src}, {lane_base}, {32 * chunk}")
        dst = ", ".join(regs)
        if x2:  # (lanes 16 .. 31 take the columns N / 2 on)
            em.ins(f"tcgen05.ld.sync.aligned.16x32bx2.x32.b32 {{{dst}}}, [{src}], {N // 2}")
        else:
            em.ins(f"tcgen05.ld.sync.aligned.32x32b.x32.b32 {{{dst}}}, [{src}]")
        em.ins("tcgen05.wait::ld.sync.aligned")
        if in_tmem or zero:
            for r in regs:
                rows.append(em.new(cls))
                em.ins(f"mov.b32 {rows[-1]}, {r}")
            continue
        if rows is not None:
            for i, r in enumerate(regs):
                x, y = rows[32 * chunk + i], em.new(cls)
                em.ins(f"mov.b32 {y}, {r}")
                em.ins(f"add.{add} {x}, {x}, {y}")
            continue
        for i, r in enumerate(regs):
            x, y = em.new(cls), em.new(cls)
            off = 4 * (32 * chunk + i)
            g = f"@{live} " if live else ""
            em.ins(f"{g}ld.shared.{cls} {x}, [{rowaddr}+{off}]")
            em.ins(f"mov.b32 {y}, {r}")
            em.ins(f"add.{'s32' if acc_int else 'rn.f32'} {x}, {x}, {y}")
            em.ins(f"{g}st.shared.{cls} [{rowaddr}+{off}], {x}")
    em.ins("tcgen05.fence::before_thread_sync")
    em.label(nomma)
    em.barrier()
    skip3 = em.new_label("async_dealloc")
    w0 = em.new("pred")
    em.ins(f"setp.lt.u32 {w0}, {tid}, 32")
    em.ins(f"@!{w0} bra {skip3}")
    g = cta_pair.group(pair)
    em.ins(f"tcgen05.dealloc.{g}.sync.aligned.b32 {taddr}, {v['tcols']}")
    em.label(skip3)
    if rows is not None:
        _hand_over(em, chain, ("rows", M, N, 2 if half or wide or x2 else 1) + (("x2",) * x2))
        return rows
    return _scratch_to_layout(em, op, op.results[0].type, cls, M, N)


def _tcgen05_stage(
    dot, ab: str, a: "_Operand", b: "_Operand", M: int, N: int, K: int, acc_int, pair=False
):
    """A function emitting one stage's ``tcgen05.mma``s (one per 32-byte K step) from the stage
    at ``sbase`` into the TMEM accumulator at ``taddr``: ``acc_in`` (a predicate) says whether
    the first adds to D; it is set true after it (``tid == tid``). ``pair``: M is one CTA's
    rows; the MMAs are the pair's (M 2 x 128, ``cta_group::2``), B's stage half of N."""
    kind = tcgen05.kind(ab)
    unsigned = (False, False)
    if ab == "i8":
        from tilegen.runtime.layouts.mma_choice import signedness

        sa, sb = signedness(dot) or (True, True)
        unsigned = (not sa, not sb)
    kmajor = getattr(b, "kmajor", False)  # B^T staged N x K (K-major, as A)
    idesc = tcgen05.instruction_descriptor(
        2 * M if pair else M,
        N,
        ab,
        "s32" if acc_int else "f32",
        b_mn_major=not kmajor,
        b_elem=elem_key(dot.operands[1].type),
        unsigned=unsigned,
        saturate=ab == "i8",
    )

    def emit(em: Emitter, sbase, taddr, acc_in, tid, b_base=None, a_col=None) -> None:
        tk = 32 // a.esz  # every MMA K step is 32 bytes (K 16 f16, 8 tf32, 32 8-bit)
        # one descriptor per operand and stage, stepped through its low word (as wgmma's);
        # ``b_base``: the stage of B when A's rows start elsewhere (_tall_stage); ``a_col``:
        # A in tensor memory from that address (async_rs.TmemA), a 32-bit column an element
        sb0 = em.new("b32")
        em.ins(f"add.s32 {sb0}, {b_base or sbase}, {b.offset}")
        # B MN-major: atoms of 8 K rows (4 with the 32-byte-atom swizzle of a tf32 B) at SBO
        sbo = (4 if b.atom == 32 else 8) * b.span
        pa = wgmma_descriptor_parts(em, sbase, 16, 0, 0)[0] if a_col is None else None
        pb = wgmma_descriptor_parts(em, sb0, 16 if kmajor else K * b.span, 0, 0)[0]
        ha = tcgen05.smem_descriptor_hi(8 * a.span, a.span)
        hb = (
            tcgen05.smem_descriptor_hi(8 * b.span, b.span)
            if kmajor
            else tcgen05.smem_descriptor_hi(sbo, b.span, b.atom)
        )
        for kk in range(K // tk):
            kb = kk * 32
            a_off = (kb // a.span) * a.box_bytes + kb % a.span
            b_off = (kb // b.span) * b.box_bytes + kb % b.span if kmajor else kk * tk * b.span
            if a_col is None:
                da = wgmma_descriptor_at(em, (pa, ha), a_off)
            else:
                da = a_col
                if kk:
                    da = em.new("b32")
                    em.ins(f"add.s32 {da}, {a_col}, {kk * tk * a.esz // 4}")
                da = f"[{da}]"
            db = wgmma_descriptor_at(em, (pb, hb), b_off)
            em.ins(
                f"tcgen05.mma.{cta_pair.group(pair)}.kind::{kind} [{taddr}], {da}, {db}, "
                f"{idesc}, {acc_in}"
            )
            em.ins(f"setp.eq.u32 {acc_in}, 0, 0")

    return emit


def _tall_stage(dot, ab: str, a: "_Operand", b: "_Operand", N: int, K: int, acc_int):
    """One stage's MMAs for a 256-row tile on one CTA: per K step, rows 0-127 of A into TMEM
    columns 0 .. N and rows 128-255 (128 rows further into each of A's column boxes) into
    N .. 2 N, both M 128 ``cta_group::1``."""
    half = _tcgen05_stage(dot, ab, a, b, 128, N, K, acc_int)

    def emit(em: Emitter, sbase, taddr, acc_in, tid, a_col=None) -> None:
        # the first MMA of each accumulator overwrites it: acc_in is false until after the
        # second accumulator's first K step; ``a_col``: A's rows in tensor memory (rows
        # 128 .. K columns on, async_rs.TmemA)
        second, t2 = em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {second}, {sbase}, {128 * a.span}")
        em.ins(f"add.s32 {t2}, {taddr}, {N}")
        keep = em.new("pred")
        em.ins(f"mov.pred {keep}, {acc_in}")
        a2 = None
        if a_col is not None:
            a2 = em.new("b32")
            em.ins(f"add.s32 {a2}, {a_col}, {K}")
        half(em, sbase, taddr, acc_in, tid, a_col=a_col)
        half(em, second, t2, keep, tid, b_base=sbase, a_col=a2)

    return emit


def _tma_store_of(loop):
    """The ``tiled_store`` after ``loop`` the ``async`` stage marked for a TMA store, or None."""
    return _marked_after(loop, TMA_STORE_ATTR)


def _marked_after(loop, attr: str):
    """The op after ``loop`` in its block that carries ``attr``, or None."""
    ops = loop.parent.ops
    return next((o for o in ops[ops.index(loop) + 1 :] if attr in o.attributes), None)


def tma_store_epilogue(em: Emitter, op) -> None:
    """The marked ``tiled_store`` (docs/pipelines.md section 8, "TMA store"): every consumer
    thread writes its registers row-major into the idle stage ring (generic proxy), fences them
    for the async proxy and meets the others at the consumers' barrier; warp 0 builds and
    publishes the output's tensor map (the slot's third), and thread 0 issues one
    ``cp.async.bulk.tensor.2d.global.shared::cta`` at the store's indices (TMA clips the box at
    the tensor's bounds, as the bounded store does), commits the bulk group, waits for it and
    frees the map slot."""
    from tilegen.runtime.codegen.core import ELEMENTS
    from tilegen.runtime.codegen.exchange import row_major

    st = getattr(em, "async_store", None)
    if st is None:
        fail(op, "PTX backend: a TMA store outside an async K loop's kernel")
    od = op.opdef
    value = od.operand_group(op, "value")[0]
    lead = tuple(value.type.shape[:-2])  # leading unit dims (a batched GEMM's 3-d store)
    M, N = value.type.shape[-2:]
    pair = st.get("pair", False)
    M //= 2 if pair else 1  # a CTA pair: each CTA stores its own 128 rows
    key = elem_key(value.type)
    cls, esz, sfx = ELEMENTS[key]
    if cls == "pred":
        fail(op, "PTX backend: no TMA store of i1 tiles")
    regs = em.tile(op, value)
    base = st["base"]  # the stage ring: idle now, 1024-aligned
    if em.ring_scratch is not None and em.ring_scratch.used:
        em.barrier()  # (an exchange since the loop used the ring: its readers are done)
    else:
        ring_idle(em)
    fragment = getattr(em, "fragment_order", {}).get(value)
    matrix = fragment is not None and fragment[0] == "wgmma" and esz == 2 and (N * 2) % 128 == 0
    if matrix:  # four 8x8 matrices a store (tileiras's STSM)
        _stmatrix_store(em, regs, M, N, base)
        refs, swizzled = [], True
    else:
        refs = _swizzled_refs(em, fragment, esz, base) if fragment is not None else None
        swizzled = refs is not None
    if swizzled:
        pass
    elif fragment is not None:  # the loop's accumulator registers as they are (fragment_chain)
        kind, fm, fn = fragment[:3]
        if kind == "wgmma":
            th, offs = _fragment_elems(em, fm, fn)
        else:  # tcgen05, M 128: thread 32 (w % 4) + lane holds that row, columns in order
            # (from column (w / 4) N / G)
            row, col, per = _row_thread(em, fn, fragment[3], fm, "x2" in fragment[4:])
            th = em.new("b32")
            em.ins(f"mad.lo.s32 {th}, {row}, {fn}, {col}")
            offs = list(range(per))
        at = em.new("b32")
        em.ins(f"mad.lo.s32 {at}, {th}, {esz}, {base}")
        refs = [(at, esz * e) for e in offs]
    elif not lead and swizzle_fits(em.dist_of(op, value.type), esz) is not None:
        # the value's own layout in 128-byte swizzled column boxes (sm_120's mma.sync fragment)
        refs = layout_swizzled_refs(em, em.dist_of(op, value.type), M, esz, base)
        swizzled = True
    else:  # the value's own layout: each register at its row-major place in the ring
        refs = []
        d = em.dist_of(op, value.type)
        form = row_major(lead + (M, N))
        wraps = any(
            m and d.wraps(d.kept[i], k) for k in range(d.nregs) for i, m in enumerate(form.mults)
        )
        if not wraps:  # a per-thread base and one immediate a register
            refs = ring_refs(em, d, form.mults, esz, base)
        else:
            em.need_smem(M * N * esz)  # (the ring's bytes: smem_base is the ring's then)
            delta = em.new("b32")
            em.ins(f"sub.s32 {delta}, {base}, {em.smem_base()}")
            moved: dict = {}
            for k in range(d.nregs):
                reg, imm = em.smem_ref(d, form, k, esz)[1:-1].split("+")
                if reg not in moved:
                    moved[reg] = em.new("b32")
                    em.ins(f"add.s32 {moved[reg]}, {reg}, {delta}")
                refs.append((moved[reg], int(imm)))
    pending = em.tmem_rows
    if pending is not None and pending.chain[-1] is value:  # read from TMEM by chunks
        em.tmem_rows = None
        if swizzled and M * N * esz > st["ring_bytes"]:  # box by box through the ring
            _streamed_store(em, op, pending, refs, M, N, lead)
            return
        write = lambda rs, rf, c0: _write_ring(em, rs, rf, esz, sfx, fragment)  # noqa: E731
        tmem_chunks.store_by_chunks(em, pending, op, value, refs, write)
    else:
        pending = None
        _write_ring(em, regs, refs, esz, sfx, fragment)
    tma.fence_proxy_async(em)  # generic writes -> the bulk copy's async-proxy reads
    em.barrier()
    tid, _, _ = em.tid()
    w0 = em.new("pred")
    em.ins(f"setp.lt.u32 {w0}, {tid}, 32")
    done = em.new_label("tma_store_done")
    em.ins(f"@!{w0} bra {done}")
    if pending is not None:  # every consumer's last TMEM read is behind the barrier
        tmem_chunks.release(em, pending)
    t0 = st["t0"]
    box = ((128 // esz, M) if swizzled else (N, M)) + lead
    g, fresh = _store_map(em, op, st, box, 128 if swizzled else 0)
    em.ins(f"@!{t0} bra {done}")
    if fresh:
        tma.acquire_tensormap(em, g)
    *outer, row, col = (_s32(em, em.scalar(op, v)) for v in od.operand_group(op, "indices"))
    outer = outer[::-1]  # the leading dims' coordinates, innermost first
    if pair:
        moved = em.new("b32")
        em.ins(f"mad.lo.s32 {moved}, {cta_pair.rank(em)}, {M}, {row}")
        row = moved
    if not swizzled:
        tma.tma_store(em, g, [col, row] + outer, base)
    else:  # one copy per 128-byte column box
        for b in range(N * esz // 128):
            cb, src = col, base
            if b:
                cb, src = em.new("b32"), em.new("b32")
                em.ins(f"add.s32 {cb}, {col}, {b * 128 // esz}")
                em.ins(f"add.s32 {src}, {base}, {b * M * 128}")
            tma.tma_store(em, g, [cb, row] + outer, src)
    tma.bulk_commit(em)
    _store_done(em, op, st, done)


def swizzle_fits(d, esz: int) -> list | None:
    """The 16-byte chunk steps of a 2-d tile's registers where it can be written into
    128-byte-swizzled column boxes with one address register a step (:func:`
    layout_swizzled_refs`), or None: 16- or 32-bit elements, rows of whole 128-byte columns,
    every register's row offset a multiple of 8 (its rows' swizzle key is its thread's) and
    no register wrapping; no thread's element straddles a 16-byte chunk."""
    if esz not in (2, 4) or len(d.kept) != 2 or (d.shape[1] * esz) % 128:
        return None
    rk, ck = d.kept
    if any(d.raw[k][rk] % 8 or d.wraps(rk, k) or d.wraps(ck, k) for k in range(d.nregs)):
        return None
    inner = max(d.base(t)[ck] * esz % 16 for t in range(d.root.num_threads()))
    if any(inner + d.raw[k][ck] * esz % 16 + esz > 16 for k in range(d.nregs)):
        return None
    return sorted({d.raw[k][ck] * esz // 16 for k in range(d.nregs)})


def layout_swizzled_refs(em: Emitter, d, M: int, esz: int, base: str) -> list:
    """(address register, offset) of each register of ``d`` (:func:`swizzle_fits`) in
    ``N * esz / 128`` boxes of M 128-byte rows at ``base``, chunk ``c`` of row ``r`` at chunk
    ``c ^ (r % 8)`` (the TMA store's 128-byte swizzle): the thread's byte column T and row
    base are registers; for each chunk step v of its registers, chunk T / 16 + v's box and
    swizzled place is one register, each register's row offset and bytes in its chunk an
    immediate. Rows 8 apart share the key, so a warp's stores spread over the banks."""
    rk, ck = d.kept
    bases = em.base(d)
    rb, cb = bases[rk], bases[ck]
    t = em.new("b32")  # the thread's byte column
    em.ins(f"mul.lo.s32 {t}, {cb}, {esz}" if not isinstance(cb, int) else f"mov.b32 {t}, 0")
    key, t16, rowbase = em.new("b32"), em.new("b32"), em.new("b32")
    if isinstance(rb, int):
        em.ins(f"mov.b32 {key}, 0")
        em.ins(f"mov.b32 {rowbase}, {base}")
    else:
        em.ins(f"and.b32 {key}, {rb}, 7")
        em.ins(f"mad.lo.s32 {rowbase}, {rb}, 128, {base}")
    inner = em.new("b32")
    em.ins(f"and.b32 {inner}, {t}, 15")
    em.ins(f"add.s32 {rowbase}, {rowbase}, {inner}")
    em.ins(f"shr.u32 {t16}, {t}, 4")
    addr = {}
    for v in swizzle_fits(d, esz):
        c, x, a = em.new("b32"), em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {c}, {t16}, {v}")
        em.ins(f"and.b32 {x}, {c}, 7")
        em.ins(f"xor.b32 {x}, {x}, {key}")
        em.ins(f"shr.u32 {c}, {c}, 3")
        em.ins(f"mul.lo.s32 {a}, {c}, {M * 128}")
        em.ins(f"mad.lo.s32 {a}, {x}, 16, {a}")
        em.ins(f"add.s32 {a}, {a}, {rowbase}")
        addr[v] = a
    refs = []
    for k in range(d.nregs):
        r, b = d.raw[k][rk], d.raw[k][ck] * esz
        refs.append((addr[b // 16], r * 128 + b % 16))
    return refs


def ring_refs(em: Emitter, d, mults: tuple, esz: int, base: str) -> list:
    """(address register, byte offset) of each register of distribution ``d`` (coordinates that
    do not wrap) in a tile at shared address ``base``, element (c_0, ..) at ``sum(m_i c_i)``:
    one per-thread address, an immediate a register."""
    bases = em.base(d)
    tp = em.lincomb(0, [(m, bases[d.kept[i]]) for i, m in enumerate(mults)])
    at = em.new("b32")
    if isinstance(tp, int):
        em.ins(f"add.s32 {at}, {base}, {tp * esz}")
    else:
        em.ins(f"mad.lo.s32 {at}, {tp}, {esz}, {base}")
    return [
        (at, sum(m * d.raw[k][d.kept[i]] for i, m in enumerate(mults)) * esz)
        for k in range(d.nregs)
    ]


def ring_idle(em: Emitter) -> None:
    """Before the consumers' first write into the stage ring after the K loop (a side vector,
    the TMA store's staging): where another consumer warp may still be reading the stages
    (:func:`_ring_read_by_others`), the consumers meet first, once."""
    st = em.async_store
    if st.get("idle") or not _ring_read_by_others(em):
        return
    em.barrier()
    st["idle"] = True


def _ring_read_by_others(em: Emitter) -> bool:
    """Whether, when a consumer warp leaves the K loop, another consumer warp may still be
    reading the stages the TMA store's staging then overwrites. tcgen05's MMAs read them for
    every consumer, and each waited for their commit; a warp's ``wgmma.wait_group`` retires
    its own warp group's wgmmas only (two consumer warp groups: not the other's); mma.sync
    consumers (sm_120) read them by ``ldmatrix``, each warp on its own."""
    if 100 <= em.sm < 120:
        return False
    warps = em.barrier_threads // 32 if em.barrier_threads else em.num_warps
    return warps > (4 if em.sm == 90 else 1)


def _store_done(em: Emitter, op, st: dict, done: str) -> None:
    """Thread 0, after the store's last bulk copy: wait until the copies have read their
    sources (the staged tile, and the map: once ``wait_group.read`` returns, a map the copies
    used may be rewritten, as CUTLASS's ``tma_desc_wait_group`` relies on) and free the map
    slot; then ``done``, where the other threads join. The copies' global writes complete on
    their own: nothing in the kernel reads them, and the grid's end makes them visible (tileiras
    waits the same way)."""
    tma.bulk_wait_read(em, 0)
    sl = em.new("b32")
    em.ins(f"ld.shared.u32 {sl}, [{ASYNC_SYMBOL}+{st['slot_off']}]")
    tma.release_slot(em, f"{em.symbol}_slots", sl, st["share"])
    em.label(done)
    for r in op.results:
        em.set(r, None)


def _streamed_store(em: Emitter, op, p, refs: list, M: int, N: int, lead: tuple) -> None:
    """The TMA store of a tile larger than the stage ring, read from TMEM by chunks
    (``tmem_chunks``): its 128-byte column boxes (``M`` rows each) go through the ring's
    ``slots`` box slots in turn. Once a box's chunks are written, the consumers fence and meet,
    and thread 0 copies the box out (a bulk group each); before a slot is written again, thread 0
    waits until the copy that read it last is done reading and the consumers meet again."""
    st = em.async_store
    od = op.opdef
    value = od.operand_group(op, "value")[0]
    _, esz, sfx = ELEMENTS[elem_key(value.type)]
    base, t0 = st["base"], st["t0"]
    box_bytes = M * 128
    slots = st["ring_bytes"] // box_bytes
    nbox = N * esz // 128
    tid, _, _ = em.tid()
    w0 = em.new("pred")
    em.ins(f"setp.lt.u32 {w0}, {tid}, 32")
    mapped = em.new_label("tma_store_mapped")
    em.ins(f"@!{w0} bra {mapped}")
    g, fresh = _store_map(em, op, st, (128 // esz, M) + lead, 128)
    em.ins(f"@!{t0} bra {mapped}")
    if fresh:
        tma.acquire_tensormap(em, g)
    em.label(mapped)
    *outer, row, col = (_s32(em, em.scalar(op, v)) for v in od.operand_group(op, "indices"))
    outer = outer[::-1]

    def write(regs: list, at: list, c0: int) -> None:
        b = c0 * esz // 128  # (a chunk lies within one box)
        shift = (b - b % slots) * box_bytes  # box b -> slot b % slots
        _write_ring(em, regs, [(r, o - shift) for r, o in at], esz, sfx, ("rows",))
        if ((c0 + len(regs)) * esz) % 128:
            return  # the box has more chunks
        tma.fence_proxy_async(em)
        em.barrier()
        issued = em.new_label("tma_store_box")
        em.ins(f"@!{t0} bra {issued}")
        cb, src = em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {cb}, {col}, {b * 128 // esz}")
        em.ins(f"add.s32 {src}, {base}, {b % slots * box_bytes}")
        tma.tma_store(em, g, [cb, row] + outer, src)
        tma.bulk_commit(em)
        if slots <= b + 1 < nbox:  # the next box reuses a slot: its last copy has read it
            tma.bulk_wait_read(em, slots - 1)
        em.label(issued)
        if slots <= b + 1 < nbox:
            em.barrier()

    tmem_chunks.store_by_chunks(em, p, op, value, refs, write)
    em.barrier()  # every consumer's last TMEM read is behind it
    done = em.new_label("tma_store_done")
    em.ins(f"@!{w0} bra {done}")
    tmem_chunks.release(em, p)
    em.ins(f"@!{t0} bra {done}")
    _store_done(em, op, st, done)


def _store_map(em: Emitter, op, st: dict, box: tuple, swizzle: int) -> tuple:
    """Warp 0 (thread 0 writing, the warp publishing): the output's tensor map, built in its
    place in the ring's map area and copied to the slot's map. Returns (its global address,
    whether thread 0 still has to acquire it). The prologue built, published and acquired the
    map where it foresaw this box (:func:`_store_guess`); only another box is built here."""
    g = _slot_maps(em, em.symbol, st["slot_off"], st["nmaps"])[st["store_map"]]
    if st.get("store_built") == (box, swizzle):
        return g, False
    smap = em.new("b32")
    at = st["maps_off"] + st["store_map"] * tma.TENSORMAP_BYTES
    em.ins(f"add.s32 {smap}, {st['base']}, {at}")
    built = em.new_label("tma_store_map")
    em.ins(f"@!{st['t0']} bra {built}")
    tma.build_tensormap(em, smap, _store_spec(em, op, box, swizzle))
    em.label(built)
    em.ins("bar.warp.sync -1")
    tma.publish_tensormap(em, g, smap)
    if st["share"]:  # (the release half of the slot's free covers this map too)
        em.ins(f"@{st['t0']} fence.acq_rel.gpu")
    return g, True


def _store_spec(em: Emitter, op, box: tuple, swizzle: int) -> tma.TensorMapSpec:
    """The map of TMA store ``op``'s memref (its registers), for ``box`` and ``swizzle``."""
    od = op.opdef
    key = elem_key(od.operand_group(op, "value")[0].type)
    esz = ELEMENTS[key][1]
    mem = em.get(od.operand_group(op, "base")[0])
    dims = [_s32(em, d) for d in reversed(mem.sizes)]
    dims = [em.mov("b32", x) if isinstance(x, int) else x for x in dims]
    strides = tuple(_stride_bytes(em, s, esz) for s in reversed(mem.strides[:-1]))
    return tma.TensorMapSpec(key, esz, mem.ptr, tuple(dims), strides, box, swizzle)


def _store_guess(em: Emitter, loop, store, pair: bool) -> tuple | None:
    """The (box, swizzle) the epilogue's TMA store will most likely ask for, where the prologue
    can build that map already (the store's memref is emitted before the loop): the 128-byte
    swizzled column boxes of a tile the accumulator's registers reach as they are (the wgmma
    fragment, the TMEM rows), whose rows are whole 128-byte columns; on sm_120 (mma.sync
    consumers, the tile staged in its own layout) one unswizzled box. None otherwise; the
    epilogue builds the map it needs whenever the guess was wrong (:func:`_store_map`)."""
    od = store.opdef
    value = od.operand_group(store, "value")[0]
    if od.operand_group(store, "base")[0] not in em.values:
        return None
    key = elem_key(value.type)
    cls, esz, _ = ELEMENTS[key]
    *lead, M, N = value.type.shape
    if cls == "pred":
        return None
    rows = M // 2 if pair else M  # (a CTA pair: each CTA stores its own rows)
    if em.sm == 120:  # the tile in its own layout: swizzled boxes where it fits
        if not lead and swizzle_fits(em.dist_of(store, value.type), esz) is not None:
            return (128 // esz, rows), 128
        return (N, rows) + tuple(lead), 0
    if (N * esz) % 128 or fragment_chain(loop, store) is None:
        return None
    # tcgen05: each of the rows' column groups (two at 64 rows, 16x32bx2 loads; one a warp group
    # at 128; one for 256 rows, two accumulators) must fill whole 128-byte columns, else the
    # tile goes out as one unswizzled box
    groups = {64: 2, 128: max(em.num_warps // 4, 1)}.get(rows, 1)
    if em.sm in TCGEN05_SMS and (N // groups * esz) % 128:
        return (N, rows) + tuple(lead), 0
    if em.sm not in TCGEN05_SMS and esz not in (2, 4):  # (wgmma fragments of 16 / 32 bits)
        return None
    return (128 // esz, rows) + tuple(lead), 128


def _write_ring(em: Emitter, regs: list, refs: list, esz: int, sfx: str, fragment) -> None:
    """Store ``regs`` at their ring places ``refs`` ((address register, offset) each): two
    16-bit neighbours as one b32, runs of 32-bit neighbours as v2 / v4 stores."""
    k = 0
    while k < len(refs):  # two 16-bit neighbours in a row: one 32-bit store
        (reg, imm), nxt = refs[k], refs[k + 1] if k + 1 < len(refs) else None
        if esz == 2 and imm % 4 == 0 and nxt == (reg, imm + 2):
            both = em.new("b32")
            em.ins(f"mov.b32 {both}, {{{regs[k]}, {regs[k + 1]}}}")
            em.ins(f"st.shared.b32 [{reg}+{imm}], {both}")
            k += 2
            continue
        # 32-bit neighbours (registers in position order: their address registers are 8- or,
        # for TMEM rows, 16-byte aligned) go out as v2 / v4 stores
        n = 1
        while esz == 4 and fragment is not None and n < 4 and k + n < len(refs):
            if refs[k + n] != (reg, imm + 4 * n):
                break
            n += 1
        v = 4 if n == 4 and imm % 16 == 0 and fragment[0] == "rows" else 2 if n >= 2 else 1
        if v > 1 and imm % (4 * v) == 0:
            vals = ", ".join(regs[k : k + v])
            em.ins(f"st.shared.v{v}.{sfx} [{reg}+{imm}], {{{vals}}}")
            k += v
            continue
        em.ins(f"st.shared.{sfx} [{reg}+{imm}], {regs[k]}")
        k += 1


def _stride_bytes(em: Emitter, st, esz: int) -> str:
    stb = em.new("b64")
    if isinstance(st, int):
        em.ins(f"mov.b64 {stb}, {st * esz}")
    elif em.reg_class(st) == "b64":
        em.ins(f"mul.lo.s64 {stb}, {st}, {esz}")
    else:
        em.ins(f"mul.wide.u32 {stb}, {st}, {esz}")
    return stb


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
    from tilegen.runtime.codegen.mma import wgmma_form, wgmma_plan

    if pair:
        row, imms = wgmma_form(dot)
        return row.ptx.format(n=N), imms
    plan = wgmma_plan(dot, warps, 90)
    if plan is None:
        fail(dot, "PTX backend: the async K loop's dot was not laid out for wgmma")
    return plan.row.ptx.format(n=N), plan.imms


def _divmod(em: Emitter, x, d: int) -> tuple:
    q, r = em.new("b32"), em.new("b32")
    if d & (d - 1) == 0:
        em.ins(f"shr.u32 {q}, {x}, {d.bit_length() - 1}")
        em.ins(f"and.b32 {r}, {x}, {d - 1}")
    else:
        em.ins(f"div.u32 {q}, {x}, {d}")
        em.ins(f"rem.u32 {r}, {x}, {d}")
    return q, r


def _converted(em: Emitter, v) -> str | None:
    """The conversion instruction of a dot operand that is an f32 -> tf32 ``fp_to_fp`` of its
    staged load (``selection.conversion_ptx``), else None: the MMA must see the rounded value,
    as today's path converts its fragments, not the f32 bits TMA staged (the tensor core would
    truncate them)."""
    op = getattr(v, "op", None)
    if op is None or op.name != "nv_tileaa.fp_to_fp":
        return None
    return conversion_ptx(op, em.sm)


def _round_tf32(em: Emitter, sbase, x: "_Operand", tid, nthreads: int, cvt: str) -> None:
    """Round every f32 of operand ``x``'s stage in place to tf32 by ``cvt`` (16-byte chunks per
    thread; the swizzle permutes whole chunks, so any chunk order covers the tile)."""
    chunks = x.bytes // 16
    for j in range(-(-chunks // nthreads)):
        u = em.new("b32")
        em.ins(f"add.s32 {u}, {tid}, {j * nthreads}")
        skip = None
        if (j + 1) * nthreads > chunks:
            skip = em.new_label("async_rna")
            g = em.new("pred")
            em.ins(f"setp.ge.u32 {g}, {u}, {chunks}")
            em.ins(f"@{g} bra {skip}")
        addr = em.new("b32")
        em.ins(f"mad.lo.s32 {addr}, {u}, 16, {sbase}")
        vals = [em.new("b32") for _ in range(4)]
        em.ins(f"ld.shared.v4.b32 {{{', '.join(vals)}}}, [{addr}+{x.offset}]")
        for r in vals:
            em.ins(f"{cvt} {r}, {r}")
        em.ins(f"st.shared.v4.b32 [{addr}+{x.offset}], {{{', '.join(vals)}}}")
        if skip is not None:
            em.label(skip)


def _transpose_b(
    em: Emitter, b: "_Operand", sbase, bt: _KMajor, dbase, tid, nthreads: int, cvt=None
):
    """Every consumer thread copies its share of the stage's B (K x N, N contiguous, TMA
    column boxes) into B^T (``bt``: N x K, K contiguous). 8-bit: units of 4 K rows x 4 columns
    (four ``ld.shared.b32``, a 4 x 4 byte transpose in eight ``prmt``, four ``st.shared.b32``);
    32-bit: units of one K row x 4 columns (``ld.shared.v4.b32``, four ``st.shared.b32``),
    rounded to tf32 on the way by ``cvt`` (an instruction) when given."""
    K, N = b.tile[-2:]
    esz = b.esz
    if esz not in (1, 4):
        fail(b.load, f"PTX backend: no B transpose for {esz}-byte elements")
    rows = 4 if esz == 1 else 1  # K rows per unit
    kunits = K // rows
    units = kunits * (N // 4)
    for j in range(-(-units // nthreads)):
        skip = None
        u = em.new("b32")
        em.ins(f"add.s32 {u}, {tid}, {j * nthreads}")
        if (j + 1) * nthreads > units:
            skip = em.new_label("async_bt")
            g = em.new("pred")
            em.ins(f"setp.ge.u32 {g}, {u}, {units}")
            em.ins(f"@{g} bra {skip}")
        if esz == 1 and kunits % 4 == 0 and (N // 4) % 8 == 0:
            n4, k0 = _bank_spread(em, u, kunits)
        else:
            n4, k0 = _divmod(em, u, kunits)
        # source: K row rows * k0 (+ r), byte 4 esz n4 of B's column boxes
        nb = em.new("b32")
        em.ins(f"shl.b32 {nb}, {n4}, {(4 * esz).bit_length() - 1}")
        col, within = _divmod(em, nb, b.span)
        src0 = em.new("b32")
        em.ins(f"mul.lo.s32 {src0}, {col}, {b.box_bytes}")
        em.ins(f"mad.lo.s32 {src0}, {k0}, {rows * b.span}, {src0}")
        em.ins(f"add.s32 {src0}, {src0}, {within}")
        em.ins(f"add.s32 {src0}, {src0}, {b.offset}")
        if esz == 1:
            vals = []
            for r in range(4):
                o = src0
                if r:
                    o = em.new("b32")
                    em.ins(f"add.s32 {o}, {src0}, {r * b.span}")
                a = em.new("b32")
                em.ins(f"add.s32 {a}, {sbase}, {_swizzled(em, o, b.span)}")
                x = em.new("b32")
                em.ins(f"ld.shared.b32 {x}, [{a}]")
                vals.append(x)
            t = [em.new("b32") for _ in range(4)]
            em.ins(f"prmt.b32 {t[0]}, {vals[0]}, {vals[1]}, 0x5140")
            em.ins(f"prmt.b32 {t[1]}, {vals[0]}, {vals[1]}, 0x7362")
            em.ins(f"prmt.b32 {t[2]}, {vals[2]}, {vals[3]}, 0x5140")
            em.ins(f"prmt.b32 {t[3]}, {vals[2]}, {vals[3]}, 0x7362")
            cols = [em.new("b32") for _ in range(4)]  # column 4 n4 + i: K bytes 4 k0 .. + 3
            em.ins(f"prmt.b32 {cols[0]}, {t[0]}, {t[2]}, 0x5410")
            em.ins(f"prmt.b32 {cols[1]}, {t[0]}, {t[2]}, 0x7632")
            em.ins(f"prmt.b32 {cols[2]}, {t[1]}, {t[3]}, 0x5410")
            em.ins(f"prmt.b32 {cols[3]}, {t[1]}, {t[3]}, 0x7632")
        else:
            a = em.new("b32")
            em.ins(f"add.s32 {a}, {sbase}, {_swizzled(em, src0, b.span)}")
            cols = [em.new("b32") for _ in range(4)]
            em.ins(f"ld.shared.v4.b32 {{{', '.join(cols)}}}, [{a}]")
            if cvt:  # f32 -> tf32 on the way
                for r in cols:
                    em.ins(f"{cvt} {r}, {r}")
        # destination: row 4 n4 + i of B^T at K byte 4 k0 (four 8-bit K values / one f32)
        kb = em.new("b32")
        em.ins(f"shl.b32 {kb}, {k0}, 2")
        kcol, kin = _divmod(em, kb, bt.span)
        dst0 = em.new("b32")
        em.ins(f"mul.lo.s32 {dst0}, {kcol}, {bt.box_bytes}")
        em.ins(f"mad.lo.s32 {dst0}, {n4}, {4 * bt.span}, {dst0}")
        em.ins(f"add.s32 {dst0}, {dst0}, {kin}")
        for i, v in enumerate(cols):
            o = dst0
            if i:
                o = em.new("b32")
                em.ins(f"add.s32 {o}, {dst0}, {i * bt.span}")
            a = em.new("b32")
            em.ins(f"add.s32 {a}, {dbase}, {_swizzled(em, o, bt.span)}")
            em.ins(f"st.shared.b32 [{a}], {v}")
        if skip is not None:
            em.label(skip)


def _bank_spread(em: Emitter, u, kunits: int) -> tuple:
    """(n4, k0) of 8-bit transpose unit ``u``: a warp's 32 units are 4 K-row groups x 8 column
    groups (u's bits 0-1: k0, bits 2-4: n4, the rest both in turn). Under the 128-byte
    swizzle this costs 2-way bank conflicts on the loads and 4-way on the stores, where one
    column group per warp (32 K-row groups) cost 16-way conflicts on the loads."""
    lo, kl = _divmod(em, u, 4)
    rest, nl = _divmod(em, lo, 8)
    nh, kh = _divmod(em, rest, kunits // 4)
    k0, n4 = em.new("b32"), em.new("b32")
    em.ins(f"mad.lo.s32 {k0}, {kh}, 4, {kl}")
    em.ins(f"mad.lo.s32 {n4}, {nh}, 8, {nl}")
    return n4, k0


def _s32(em: Emitter, x):
    if isinstance(x, int):
        return x
    if em.reg_class(x) == "b64":
        r = em.new("b32")
        em.ins(f"cvt.u32.u64 {r}, {x}")
        return r
    return x


def _build_map(em: Emitter, x: _Operand, smem_map: str) -> None:
    """The operand's CUtensorMap (its memref's rank, innermost first) from the memref's
    registers: the sizes, the byte strides of the outer dims (the innermost is unit-stride)."""
    mem = em.get(x.load.opdef.operand_group(x.load, "base")[0])
    dims = [_s32(em, d) for d in reversed(mem.sizes)]
    dims = [em.mov("b32", d) if isinstance(d, int) else d for d in dims]
    strides = tuple(_stride_bytes(em, st, x.esz) for st in reversed(mem.strides[:-1]))
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


def _warp_row(em: Emitter, M: int, within) -> str:
    """Register: row ``within`` (a register: the row inside the warp's 16) of m64 instance 0
    of this thread's warp: 16 warp + 64 (nq - 1) wg + within (16 warp = 64 wg + 16 (warp % 4))."""
    _, _, warp = em.tid()
    nq = M // (16 * em.num_warps)
    row = em.new("b32")
    em.ins(f"mad.lo.s32 {row}, {warp}, 16, {within}")
    if nq > 1:
        wg = em.new("b32")
        em.ins(f"shr.u32 {wg}, {warp}, 2")
        em.ins(f"mad.lo.s32 {row}, {wg}, {64 * (nq - 1)}, {row}")
    return row


def _fragment_thread(em: Emitter, M: int) -> tuple:
    """(r0, g, t): this thread's first fragment row and its lane's group and quad index."""
    _, lane, _ = em.tid()
    g, t = em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {g}, {lane}, 2")
    em.ins(f"and.b32 {t}, {lane}, 3")
    return _warp_row(em, M, g), g, t


def _swizzled_chunk(em: Emitter, chunk, key, rowbase) -> str:
    """Register: ``rowbase`` plus 16-byte chunk ``chunk`` of a 128-byte row under the 128-byte
    swizzle, ``key`` being the row's index mod 8 (chunk ``chunk ^ key``)."""
    x = em.new("b32")
    em.ins(f"xor.b32 {x}, {chunk}, {key}")
    em.ins(f"shl.b32 {x}, {x}, 4")
    em.ins(f"add.s32 {x}, {x}, {rowbase}")
    return x


def _stmatrix_store(em: Emitter, regs: list, M: int, N: int, base) -> None:
    """16-bit wgmma fragment registers -> the 128-byte-swizzled boxes of :func:`_swizzled_refs`
    with ``stmatrix.m8n8.x4``: the fragment of rows 8 h .. 8 h + 7 and columns 8 j .. 8 j + 7 of
    an m64 instance is exactly an m8n8 matrix fragment (lane 4 g + t: row g, columns 2 t and
    2 t + 1 in one b32), so one instruction stores four of them, (j, 0), (j, 1), (j + 1, 0),
    (j + 1, 1), with lane 8 m + i giving the address of row i of matrix m."""
    _, lane, _ = em.tid()
    nq = M // (16 * em.num_warps)
    i, m, hh, dj = (em.new("b32") for _ in range(4))
    em.ins(f"and.b32 {i}, {lane}, 7")
    em.ins(f"shr.u32 {m}, {lane}, 3")
    em.ins(f"and.b32 {hh}, {m}, 1")
    em.ins(f"shr.u32 {dj}, {m}, 1")
    row = _warp_row(em, M, i)  # + 8 hh: this lane's row of instance 0
    em.ins(f"mad.lo.s32 {row}, {hh}, 8, {row}")
    rowaddr = em.new("b32")
    em.ins(f"mad.lo.s32 {rowaddr}, {row}, 128, {base}")
    chunk = {}
    for c0 in range(0, min(8, N // 8), 2):  # chunk (c0 + dj) of the row, swizzled by row % 8 = i
        c = em.new("b32")
        em.ins(f"add.s32 {c}, {dj}, {c0}")
        chunk[c0] = _swizzled_chunk(em, c, i, rowaddr)

    def packed(q: int, j: int, h: int) -> str:
        k = ((q * (N // 8) + j) * 2 + h) * 2
        r = em.new("b32")
        em.ins(f"mov.b32 {r}, {{{regs[k]}, {regs[k + 1]}}}")
        return r

    for q in range(nq):
        for j0 in range(0, N // 8, 2):
            four = [packed(q, j0 + dj_, h) for dj_ in range(2) for h in range(2)]
            imm = j0 // 8 * M * 128 + 64 * q * 128
            em.ins(
                f"stmatrix.sync.aligned.m8n8.x4.shared.b16 [{chunk[j0 % 8]}+{imm}], "
                f"{{{', '.join(four)}}}"
            )


def _row_side(chain) -> bool:
    """Whether fragment ``chain`` (None: none) reads a row vector (1 x N) beside the
    accumulator (async_forms.chain_sides)."""
    if chain is None:
        return False
    return any(o.operands[0].type.shape[0] == 1 for o in chain_sides(chain))


def _row_thread(em: Emitter, N: int, groups: int, M: int = 128, x2: bool = False) -> tuple:
    """(row, first column, columns) of a thread of tcgen05 row order over ``groups`` column
    groups: row 32 (w % 4) + lane, columns (w / 4) N / groups .. of it. ``M`` 64: a CTA pair's
    M 128 accumulator (section 18), thread t holds row t % 64, columns (t / 64) N / 2 ...;
    ``M`` 256: one CTA's two accumulators (8 warps), thread t holds row t."""
    tid, lane, warp = em.tid()
    row, col = em.new("b32"), em.new("b32")
    if x2:  # one CTA's M 64 read by 16x32bx2: row 16 w + l % 16, columns (l / 16) N / 2 ..
        em.ins(f"and.b32 {row}, {lane}, 15")
        em.ins(f"mad.lo.s32 {row}, {warp}, 16, {row}")
        em.ins(f"shr.u32 {col}, {lane}, 4")
        em.ins(f"mul.lo.s32 {col}, {col}, {N // 2}")
        return row, col, N // 2
    if M == 256:  # one CTA's 256 rows in two accumulators (_tall_stage): thread t, row t
        em.ins(f"mov.u32 {row}, {tid}")
        em.ins(f"mov.u32 {col}, 0")
        return row, col, N
    if M == 64:
        em.ins(f"and.b32 {row}, {tid}, 63")
        em.ins(f"shr.u32 {col}, {tid}, 6")
        em.ins(f"mul.lo.s32 {col}, {col}, {N // groups}")
        return row, col, N // groups
    em.ins(f"and.b32 {row}, {warp}, 3")
    em.ins(f"mad.lo.s32 {row}, {row}, 32, {lane}")
    em.ins(f"shr.u32 {col}, {warp}, 2")
    em.ins(f"mul.lo.s32 {col}, {col}, {N // groups}")
    return row, col, N // groups


def _swizzled_refs(em: Emitter, fragment: tuple, esz: int, base) -> list | None:
    """(address register, offset) of each accumulator register in the stage ring laid out as
    ``N * esz / 128`` TMA boxes of 128-byte rows with the 128-byte swizzle (box b at
    ``base + b * M * 128``; in it, 16-byte chunk c of row r sits at chunk ``c ^ (r % 8)``):
    the warp's stores then spread over all banks, where unswizzled rows 256 bytes apart hit
    the same ones. None where the layout does not fit: rows not a multiple of 128 bytes, or a
    wgmma fragment of other than 16- or 32-bit elements (whose pairs never straddle a chunk)."""
    kind, M, N = fragment[:3]
    groups = fragment[3] if kind == "rows" else 1
    if (N * esz) % 128 or (kind == "wgmma" and esz not in (2, 4)) or (N // groups * esz) % 128:
        return None
    refs, cache = [], {}

    def chunk_addr(chunk: int, key, rowbase):
        if chunk not in cache:
            cache[chunk] = _swizzled_chunk(em, key, chunk, rowbase)
        return cache[chunk]

    rowbase = em.new("b32")
    if kind == "wgmma" and esz == 4:
        # row r0 + 64 q + 8 h (r % 8 = g); column 8 j + 2 t + s is byte 32 (j % 4) + 8 t + 4 s
        # of box j / 4's row: chunk 2 (j % 4) + t / 2 (swizzled: ^ g), byte 8 (t % 2) + 4 s in it
        r0, g, t = _fragment_thread(em, M)
        th, tl = em.new("b32"), em.new("b32")
        em.ins(f"shr.u32 {th}, {t}, 1")
        em.ins(f"and.b32 {tl}, {t}, 1")
        em.ins(f"mad.lo.s32 {rowbase}, {r0}, 128, {base}")
        em.ins(f"mad.lo.s32 {rowbase}, {tl}, 8, {rowbase}")
        chunks = []
        for jj in range(4):
            c = em.new("b32")
            em.ins(f"add.s32 {c}, {th}, {2 * jj}")
            chunks.append(_swizzled_chunk(em, c, g, rowbase))
        for q in range(M // (16 * em.num_warps)):
            for j in range(N // 8):
                for h in range(2):
                    for s in range(2):
                        off = j // 4 * M * 128 + (64 * q + 8 * h) * 128 + 4 * s
                        refs.append((chunks[j % 4], off))
        return refs
    if kind == "wgmma":  # row r0 + 64 q + 8 h (r % 8 = g), bytes 16 j + 4 t + 2 s
        r0, g, t = _fragment_thread(em, M)
        em.ins(f"mad.lo.s32 {rowbase}, {r0}, 128, {base}")
        em.ins(f"mad.lo.s32 {rowbase}, {t}, 4, {rowbase}")
        for q in range(M // (16 * em.num_warps)):
            for j in range(N // 8):
                for h in range(2):
                    for s in range(2):
                        off = j // 8 * M * 128 + (64 * q + 8 * h) * 128 + 2 * s
                        refs.append((chunk_addr(j % 8, g, rowbase), off))
        return refs
    # tcgen05 rows: thread 32 (w % 4) + lane holds that row, columns (w / 4) N / G .. in order
    # (whole 128-byte boxes: box (w / 4) N esz / 128 G ..)
    _, lane, _ = em.tid()
    row, col, per = _row_thread(em, N, groups, M, "x2" in fragment[4:])
    key = em.new("b32")
    em.ins(f"and.b32 {key}, {lane}, 7")
    em.ins(f"mad.lo.s32 {rowbase}, {row}, 128, {base}")
    box = em.new("b32")
    em.ins(f"mul.lo.s32 {box}, {col}, {esz * M}")  # (col esz / 128) boxes of M 128 bytes
    em.ins(f"add.s32 {rowbase}, {rowbase}, {box}")
    for c in range(per):
        x = c * esz
        refs.append((chunk_addr(x % 128 >> 4, key, rowbase), x // 128 * M * 128 + (x & 15)))
    return refs


def _fragment_elems(em: Emitter, M: int, N: int, pitch: int = 0) -> tuple:
    """(register with this thread's base element index, [element offset of each wgmma fragment
    register]) in the row-major M x N tile (rows ``pitch`` elements apart: default N). Register
    (instance q, index 4 j + 2 h + s) holds row 64 (nq wg + q) + 16 (w % 4) + 8 h + g, column
    8 j + 2 t + s (nq instances per warp group; g = lane / 4, t = lane % 4)."""
    nq = M // (16 * em.num_warps)
    pitch = pitch or N
    r0, g, t = _fragment_thread(em, M)
    th = em.new("b32")
    em.ins(f"mad.lo.s32 {th}, {r0}, {pitch}, 0")
    em.ins(f"mad.lo.s32 {th}, {t}, 2, {th}")
    offs = [
        (64 * q + 8 * h) * pitch + 8 * j + s
        for q in range(nq)
        for j in range(N // 8)
        for h in range(2)
        for s in range(2)
    ]
    return th, offs


def _fragment_addrs(em: Emitter, M: int, N: int):
    """Per wgmma fragment register: (address register, byte offset) of its element in the
    row-major M x N f32 scratch tile (see :func:`_fragment_elems`)."""
    th, offs = _fragment_elems(em, M, N)
    addr = em.smem_addr(th, 4)
    return [(addr, 4 * e) for e in offs]


def _to_fragment(em: Emitter, op, t, init, M: int, N: int, acc_int: bool = False) -> list:
    """The loop's initial accumulator (any layout) -> this thread's wgmma fragment registers
    (f32, or b32 for an i32 accumulator). A uniform tile (every register the same, as a splat
    of the usual zero is) is moved straight into the fragment, without the exchange."""
    from tilegen.runtime.codegen.exchange import row_major

    cls = "b32" if acc_int else "f32"
    count = M // (16 * em.num_warps) * (N // 8) * 4  # as _fragment_addrs lists them
    if init and all(r == init[0] for r in init):
        return [em.mov(cls, init[0]) for _ in range(count)]
    if getattr(em, "fragment_order", {}).get(op.operands[3], ())[:3] == ("wgmma", M, N):
        assert len(init) == count, (len(init), count)  # C loaded in fragment order
        return list(init) if len(set(init)) == count else [em.mov(cls, r) for r in init]
    _scratch_from_start(em, M * N * 4)
    d = em.dist_of(op, t)
    form = row_major((M, N))
    for k in range(d.nregs):
        em.ins(f"st.shared.{cls} {em.smem_ref(d, form, k, 4)}, {init[k]}")
    em.barrier()
    acc = []
    where = _fragment_addrs(em, M, N)
    for i in range(0, len(where), 2):  # (s = 0, 1): two neighbouring columns, 8-byte aligned
        addr, off = where[i]
        pair = [em.new(cls), em.new(cls)]
        em.ins(f"ld.shared.v2.{cls} {{{pair[0]}, {pair[1]}}}, [{addr}+{off}]")
        acc += pair
    em.barrier()
    return acc


def _from_fragment(em: Emitter, op, t, acc: list, M: int, N: int, acc_int: bool = False) -> list:
    """This thread's fragment registers -> the loop result in the layout the layout stage gave
    it (through the scratch buffer)."""

    cls = "b32" if acc_int else "f32"
    _scratch_from_start(em, M * N * 4)
    where = _fragment_addrs(em, M, N)
    for i in range(0, len(where), 2):  # (s = 0, 1): two neighbouring columns, 8-byte aligned
        addr, off = where[i]
        em.ins(f"st.shared.v2.{cls} [{addr}+{off}], {{{acc[i]}, {acc[i + 1]}}}")
    em.barrier()
    return _scratch_to_layout(em, op, t, cls, M, N)
