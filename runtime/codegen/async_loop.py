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

from tilegen.runtime.codegen import tcgen05, tma
from tilegen.runtime.codegen.core import Emitter, fail
from tilegen.runtime.codegen.pipeline import (
    MAX_SMS,
    Ring,
    map_slots,
    mbarrier_arrive,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_init_fence,
    mbarrier_wait,
    setmaxnreg,
    wgmma_descriptor,
)

#: the loop attribute the driver's ``async`` stage sets: the pipeline's stage count
ASYNC_ATTR = "nv_tileas.async_stages"
#: the loop attribute with the producer warp group's register budget (setmaxnreg.dec; the
#: consumers keep theirs, as tileiras's two-warp-group GEMMs do)
ASYNC_REGS_ATTR = "nv_tileas.async_producer_regs"
ASYNC_SYMBOL = "tg_async"
_ALIGN = 1024
_ESZ = {"f16": 2, "bf16": 2}


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class _Operand:
    """One staged operand: its load, tile, boxes and place in a stage."""

    def __init__(self, load, offset: int):
        self.load = load
        self.tile = tuple(load.results[0].type.shape)
        self.elem = load.results[0].type.element.name
        self.esz = _ESZ[self.elem]
        self.boxes = tma.column_boxes(self.tile, self.esz)
        self.offset = offset  # bytes into the stage
        self.bytes = self.tile[0] * self.tile[1] * self.esz
        self.span = self.boxes[0][1].swizzle  # swizzle span (bytes of one box row)
        self.box_bytes = self.boxes[0][1].bytes


def _staged_load(v):
    op = getattr(v, "op", None)
    if op is None or op.name != "nv_tileaa.tiled_load":
        return None
    return op


def async_for(em: Emitter, op, stages: int) -> None:
    """Emit the marked K loop ``op`` as the warp-specialized TMA pipeline."""
    body = op.regions[0].blocks[0]
    dots = [o for o in body.ops if o.name == "nv_tileaa.dot"]
    if len(dots) != 1:
        fail(op, "PTX backend: the async K loop needs exactly one dot")
    dot = dots[0]
    la, lb_ = _staged_load(dot.operands[0]), _staged_load(dot.operands[1])
    if la is None or lb_ is None:
        fail(op, "PTX backend: the async K loop's dot operands are not tiled_loads")
    a = _Operand(la, 0)
    b = _Operand(lb_, _align(a.bytes, _ALIGN))
    M, K = a.tile
    N = b.tile[1]
    W = em.num_warps
    G = W // 4
    nq = M // (64 * G)  # m64 instances per warp group: rows 64 (nq wg + q) ..
    nthreads = W * 32
    stage_bytes = _align(b.offset + b.bytes, _ALIGN)
    bar_off = stages * stage_bytes
    slot_off = bar_off + 16 * stages
    tmem_off, done_off = slot_off + 8, slot_off + 16  # sm_100: TMEM address, MMAs-done barrier
    maps_off = _align(slot_off + 24, 128)
    tc = em.sm >= 100  # tcgen05 consumers (sm_100a), else wgmma (sm_90a)
    total = maps_off + 2 * tma.TENSORMAP_BYTES
    em.need_isa("8.6" if tc else "8.3")  # tcgen05 / tensormap.replace
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
        f".global .align 128 .b8 {sym}_tmaps[{slots * 2 * tma.TENSORMAP_BYTES * MAX_SMS}];",
        f".global .align 4 .b32 {sym}_slots[{MAX_SMS}];",
    ]
    lb, ub, step = (em.scalar(op, v) for v in op.operands[:3])
    iv_cls = em.reg_class(lb) or em.reg_class(ub) or "b32"
    ty = ("u" if "unsignedCmp" in op.attributes else "s") + ("64" if iv_cls == "b64" else "32")

    def bar(i: int, s) -> str:
        r = em.new("b32")
        em.ins(f"mad.lo.s32 {r}, {s}, 8, {base}")
        em.ins(f"add.s32 {r}, {r}, {bar_off + 8 * stages * i}")
        return r

    # ---- thread 0: barriers, tensor maps (claimed per-SM slot); then every thread syncs
    t0 = em.new("pred")
    em.ins(f"setp.eq.u32 {t0}, {tid}, 0")
    skip = em.new_label("async_init")
    em.ins(f"@!{t0} bra {skip}")
    for s in range(stages):
        mbarrier_init(em, f"{ASYNC_SYMBOL}+{bar_off + 8 * s}", 1)
        # empty: every consumer thread arrives (wgmma), or the MMAs' tcgen05.commit
        mbarrier_init(em, f"{ASYNC_SYMBOL}+{bar_off + 8 * (stages + s)}", 1 if tc else nthreads)
    if tc:
        mbarrier_init(em, f"{ASYNC_SYMBOL}+{done_off}", 1)
    mbarrier_init_fence(em)
    slot = tma.claim_slot(em, f"{sym}_slots", slots, "async_claim")
    em.ins(f"st.shared.u32 [{ASYNC_SYMBOL}+{slot_off}], {slot}")
    for i, x in enumerate((a, b)):
        m = em.new("b32")
        em.ins(f"add.s32 {m}, {base}, {maps_off + i * tma.TENSORMAP_BYTES}")
        _build_map(em, x, m)
    em.label(skip)
    w0 = em.new("pred")
    em.ins(f"setp.lt.u32 {w0}, {tid}, 32")
    skip_pub = em.new_label("async_publish")
    em.ins(f"@!{w0} bra {skip_pub}")
    em.ins("bar.warp.sync -1")
    gmaps = _slot_maps(em, sym, slot_off)
    for i, g in enumerate(gmaps):
        src = em.new("b32")
        em.ins(f"add.s32 {src}, {base}, {maps_off + i * tma.TENSORMAP_BYTES}")
        tma.publish_tensormap(em, g, src)
    if tc:  # warp 0 allocates the accumulator's TMEM columns
        em.ins(
            f"tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [{ASYNC_SYMBOL}+{tmem_off}], {tcgen05.columns(N)}"
        )
        em.ins("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned")
    em.label(skip_pub)
    em.ins("bar.sync 0")
    gmaps = _slot_maps(em, sym, slot_off)

    regs = op.attributes.get(ASYNC_REGS_ATTR)

    # ---- producer warp group (after the consumers): one thread issues the copies
    prod = em.new("pred")
    em.ins(f"setp.ge.u32 {prod}, {tid}, {nthreads}")
    consumer = em.new_label("async_consumer")
    em.ins(f"@!{prod} bra {consumer}")
    if regs is not None:
        setmaxnreg(em, False, regs.value)
    leader = em.new("pred")
    em.ins(f"setp.eq.u32 {leader}, {tid}, {nthreads}")
    out = em.new_label("async_producer_done")
    em.ins(f"@!{leader} bra {out}")
    for g in gmaps:
        tma.acquire_tensormap(em, g)
        tma.prefetch_tensormap(em, g)
    ring = Ring(stages)
    ring.start(em, 0)
    iv = em.mov(iv_cls, lb)
    top, end = em.new_label("async_produce"), em.new_label("async_produced")
    em.label(top)
    stop = em.new("pred")
    em.ins(f"setp.ge.{ty} {stop}, {iv}, {ub}")
    em.ins(f"@{stop} bra {end}")
    em.values[body.args[0]] = iv
    for o in body.ops:  # the loads' index math (the rule admits only scalar ops beside them)
        if o in (la, lb_, dot) or o.name == "scf.yield":
            continue
        if any(getattr(r.type, "rank", 0) for r in o.results):
            continue  # tiles (the loads' padding splats): TMA fills with zeros itself
        em.emit_op(o)
    lap = em.new("b32")
    em.ins(f"xor.b32 {lap}, {ring.phase}, 1")
    mbarrier_wait(em, bar(1, ring.stage), lap)
    full = bar(0, ring.stage)
    mbarrier_arrive_expect_tx(em, full, a.bytes + b.bytes)
    sbase = em.new("b32")
    em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {stage_bytes}, {base}")
    for x, g in ((a, gmaps[0]), (b, gmaps[1])):
        od = x.load.opdef
        row, col = (_s32(em, em.scalar(x.load, v)) for v in od.operand_group(x.load, "indices"))
        for i, (c0, box) in enumerate(x.boxes):
            dst = em.new("b32")
            em.ins(f"add.s32 {dst}, {sbase}, {x.offset + i * x.box_bytes}")
            cc = col
            if c0:
                cc = em.new("b32")
                em.ins(f"add.s32 {cc}, {col}, {c0}")
            tma.tma_load(em, dst, g, [cc, row], full)
    ring.advance(em)
    em.ins(f"add.{ty} {iv}, {iv}, {step}")
    em.ins(f"bra {top}")
    em.label(end)
    em.label(out)
    em.ins("ret")

    # ---- consumers: the kernel's warps
    em.label(consumer)
    em.producer_threads = 128
    em.barrier_threads = nthreads
    init = em.get(op.operands[3])
    if tc:
        res = _tcgen05_consumer(em, op, locals())
        em.set(op.results[0], res)
        return
    acc = _to_fragment(em, op, op.operands[3].type, init, M, N)
    ring = Ring(stages)
    ring.start(em, 0)
    iv = em.mov(iv_cls, lb)
    top, end = em.new_label("async_consume"), em.new_label("async_consumed")
    p = em.new("pred")
    em.ins(f"setp.eq.u32 {p}, {tid}, {tid}")
    _, _, warp = em.tid()
    wgoff = 0
    if G > 1:
        wg = em.new("b32")
        em.ins(f"shr.u32 {wg}, {warp}, 2")
        wgoff = em.new("b32")
        em.ins(f"mul.lo.s32 {wgoff}, {wg}, {64 * nq * a.span}")
    em.label(top)
    stop = em.new("pred")
    em.ins(f"setp.ge.{ty} {stop}, {iv}, {ub}")
    em.ins(f"@{stop} bra {end}")
    mbarrier_wait(em, bar(0, ring.stage), ring.phase)
    sbase = em.new("b32")
    em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {stage_bytes}, {base}")
    abase = sbase
    if G > 1:  # this warp group's 64 rows of A
        abase = em.new("b32")
        em.ins(f"add.s32 {abase}, {sbase}, {wgoff}")
    em.ins("wgmma.fence.sync.aligned")
    ty_ab = a.elem
    per = N // 2  # fragment registers of one m64nN instance
    for q in range(nq):
        dregs = ", ".join(acc[q * per : (q + 1) * per])
        for kk in range(K // 16):
            kb = kk * 16 * a.esz  # K byte offset in A's rows
            a_off = (kb // a.span) * a.box_bytes + kb % a.span + q * 64 * a.span
            b_off = b.offset + kk * 16 * b.span  # 16 K rows of B's (column-box) rows
            sa, sb = em.new("b32"), em.new("b32")
            em.ins(f"add.s32 {sa}, {abase}, {a_off}")
            em.ins(f"add.s32 {sb}, {sbase}, {b_off}")
            da = wgmma_descriptor(em, sa, 16, 8 * a.span, a.span)
            db = wgmma_descriptor(em, sb, K * b.span, 8 * b.span, b.span)
            em.ins(
                f"wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{ty_ab}.{ty_ab} {{{dregs}}}, "
                f"{da}, {db}, {p}, 1, 1, 0, 1"
            )
    em.ins("wgmma.commit_group.sync.aligned")
    em.ins("wgmma.wait_group.sync.aligned 0")
    mbarrier_arrive(em, bar(1, ring.stage))
    ring.advance(em)
    em.ins(f"add.{ty} {iv}, {iv}, {step}")
    em.ins(f"bra {top}")
    em.label(end)
    # every copy landed (the consumers saw every full barrier): thread 0 frees the map slot
    skip = em.new_label("async_free")
    em.ins(f"@!{t0} bra {skip}")
    sl = em.new("b32")
    em.ins(f"ld.shared.u32 {sl}, [{ASYNC_SYMBOL}+{slot_off}]")
    tma.release_slot(em, f"{sym}_slots", sl, slots)
    em.label(skip)
    res = _from_fragment(em, op, op.results[0].type, acc, M, N)
    em.set(op.results[0], res)


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
    em.need_smem(M * N * 4)
    d = em.dist_of(op, op.operands[3].type)
    form = row_major((M, N))
    for k in range(d.nregs):  # the initial value waits in the scratch buffer
        em.ins(f"st.shared.f32 {em.smem_ref(d, form, k, 4)}, {v['init'][k]}")
    em.barrier()
    taddr = em.new("b32")
    em.ins(f"ld.shared.u32 {taddr}, [{ASYNC_SYMBOL}+{v['tmem_off']}]")
    skip = em.new_label("async_issued")
    em.ins(f"@!{t0} bra {skip}")
    ring = Ring(stages)
    ring.start(em, 0)
    iv = em.mov(iv_cls, lb)
    acc_in = em.new("pred")
    em.ins(f"setp.ne.u32 {acc_in}, {tid}, {tid}")  # the first MMA overwrites D
    idesc = tcgen05.instruction_descriptor(M, N, a.elem)
    top, end = em.new_label("async_issue"), em.new_label("async_issue_end")
    em.label(top)
    stop = em.new("pred")
    em.ins(f"setp.ge.{ty} {stop}, {iv}, {ub}")
    em.ins(f"@{stop} bra {end}")
    mbarrier_wait(em, bar(0, ring.stage), ring.phase)
    em.ins("tcgen05.fence::after_thread_sync")
    sbase = em.new("b32")
    em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {stage_bytes}, {base}")
    for kk in range(K // 16):
        kb = kk * 16 * a.esz
        a_off = (kb // a.span) * a.box_bytes + kb % a.span
        b_off = b.offset + kk * 16 * b.span
        sa, sb = em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {sa}, {sbase}, {a_off}")
        em.ins(f"add.s32 {sb}, {sbase}, {b_off}")
        da = tcgen05.smem_descriptor(em, sa, 16, 8 * a.span, a.span)
        db = tcgen05.smem_descriptor(em, sb, K * b.span, 8 * b.span, b.span)
        em.ins(f"tcgen05.mma.cta_group::1.kind::f16 [{taddr}], {da}, {db}, {idesc}, {acc_in}")
        em.ins(f"setp.eq.u32 {acc_in}, {tid}, {tid}")
    mb = bar(1, ring.stage)
    em.ins(f"tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [{mb}]")
    ring.advance(em)
    em.ins(f"add.{ty} {iv}, {iv}, {step}")
    em.ins(f"bra {top}")
    em.label(end)
    done = em.new("b32")
    em.ins(f"add.s32 {done}, {base}, {v['done_off']}")
    em.ins(f"tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [{done}]")
    em.label(skip)
    done = em.new("b32")
    em.ins(f"add.s32 {done}, {base}, {v['done_off']}")
    mbarrier_wait(em, done, 0)
    em.ins("tcgen05.fence::after_thread_sync")
    skip2 = em.new_label("async_free")
    em.ins(f"@!{t0} bra {skip2}")  # every copy landed: thread 0 frees the map slot
    sl = em.new("b32")
    em.ins(f"ld.shared.u32 {sl}, [{ASYNC_SYMBOL}+{v['slot_off']}]")
    tma.release_slot(em, f"{em.symbol}_slots", sl, v["slots"])
    em.label(skip2)
    # no iteration: TMEM holds nothing; the result is the initial value
    ran = em.new("pred")
    em.ins(f"setp.lt.{ty} {ran}, {lb}, {ub}")
    nomma = em.new_label("async_nomma")
    em.ins(f"@!{ran} bra {nomma}")
    _, lane, warp = em.tid()
    row, lane_base = em.new("b32"), em.new("b32")
    # M 128: TMEM lane = row; M 64: rows 16 w .. in lanes 32 w .. 32 w + 15 of each quarter
    em.ins(f"mad.lo.s32 {row}, {warp}, {32 if M == 128 else 16}, {lane}")
    live = None
    if M == 64:
        live = em.new("pred")
        em.ins(f"setp.lt.u32 {live}, {lane}, 16")
    em.ins(f"shl.b32 {lane_base}, {warp}, 21")  # (32 w) << 16: the TMEM lane field
    em.ins(f"add.s32 {lane_base}, {lane_base}, {taddr}")
    rowaddr = em.smem_addr(em.lincomb(0, [(N, row)]), 4)
    for chunk in range(N // 32):
        regs = [em.new("b32") for _ in range(32)]
        src = em.new("b32")
        em.ins(f"add.s32 {src}, {lane_base}, {32 * chunk}")
        em.ins(f"tcgen05.ld.sync.aligned.32x32b.x32.b32 {{{', '.join(regs)}}}, [{src}]")
        em.ins("tcgen05.wait::ld.sync.aligned")
        for i, r in enumerate(regs):
            x, y = em.new("f32"), em.new("f32")
            off = 4 * (32 * chunk + i)
            g = f"@{live} " if live else ""
            em.ins(f"{g}ld.shared.f32 {x}, [{rowaddr}+{off}]")
            em.ins(f"mov.b32 {y}, {r}")
            em.ins(f"add.rn.f32 {x}, {x}, {y}")
            em.ins(f"{g}st.shared.f32 [{rowaddr}+{off}], {x}")
    em.ins("tcgen05.fence::before_thread_sync")
    em.label(nomma)
    em.barrier()
    skip3 = em.new_label("async_dealloc")
    w0 = em.new("pred")
    em.ins(f"setp.lt.u32 {w0}, {tid}, 32")
    em.ins(f"@!{w0} bra {skip3}")
    em.ins(f"tcgen05.dealloc.cta_group::1.sync.aligned.b32 {taddr}, {tcgen05.columns(N)}")
    em.label(skip3)
    d = em.dist_of(op, op.results[0].type)
    out = []
    for k in range(d.nregs):
        r = em.new("f32")
        em.ins(f"ld.shared.f32 {r}, {em.smem_ref(d, form, k, 4)}")
        out.append(r)
    em.barrier()
    return out


def _s32(em: Emitter, x):
    if isinstance(x, int):
        return x
    if em.reg_class(x) == "b64":
        r = em.new("b32")
        em.ins(f"cvt.u32.u64 {r}, {x}")
        return r
    return x


def _build_map(em: Emitter, x: _Operand, smem_map: str) -> None:
    """The operand's CUtensorMap (2-d, innermost first) from its memref's registers."""
    mem = em.get(x.load.opdef.operand_group(x.load, "base")[0])
    dims = [_s32(em, mem.sizes[1]), _s32(em, mem.sizes[0])]
    dims = [em.mov("b32", d) if isinstance(d, int) else d for d in dims]
    st = mem.strides[0]
    stb = em.new("b64")
    if isinstance(st, int):
        em.ins(f"mov.b64 {stb}, {st * x.esz}")
    elif em.reg_class(st) == "b64":
        em.ins(f"mul.lo.s64 {stb}, {st}, {x.esz}")
    else:
        em.ins(f"mul.wide.u32 {stb}, {st}, {x.esz}")
    box = x.boxes[0][1]
    spec = tma.TensorMapSpec(x.elem, x.esz, mem.ptr, tuple(dims), (stb,), box.box[::-1], x.span)
    tma.build_tensormap(em, smem_map, spec)


def _slot_maps(em: Emitter, sym: str, slot_off: int) -> list:
    slot, gbase, off = em.new("b32"), em.new("b64"), em.new("b64")
    em.ins(f"ld.shared.u32 {slot}, [{ASYNC_SYMBOL}+{slot_off}]")
    em.ins(f"mov.u64 {gbase}, {sym}_tmaps")
    em.ins(f"mul.wide.u32 {off}, {slot}, {2 * tma.TENSORMAP_BYTES}")
    em.ins(f"add.s64 {gbase}, {gbase}, {off}")
    out = []
    for i in range(2):
        g = em.new("b64")
        em.ins(f"add.s64 {g}, {gbase}, {i * tma.TENSORMAP_BYTES}")
        out.append(g)
    return out


def _fragment_addrs(em: Emitter, M: int, N: int):
    """Per wgmma fragment register (instance q, index 4 j + 2 h + s): the scratch byte address
    of its element of the row-major M x N f32 tile: row 64 (nq wg + q) + 16 (w % 4) + 8 h + g,
    column 8 j + 2 t + s (nq instances per warp group)."""
    _, lane, warp = em.tid()
    nq = M // (16 * em.num_warps)
    g, t, r0 = em.new("b32"), em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {g}, {lane}, 2")
    em.ins(f"and.b32 {t}, {lane}, 3")
    em.ins(f"mad.lo.s32 {r0}, {warp}, 16, {g}")  # 16 warp = 64 wg + 16 (warp % 4)
    if nq > 1:
        wg = em.new("b32")
        em.ins(f"shr.u32 {wg}, {warp}, 2")
        em.ins(f"mad.lo.s32 {r0}, {wg}, {64 * (nq - 1)}, {r0}")
    th = em.new("b32")
    em.ins(f"mad.lo.s32 {th}, {r0}, {N}, 0")
    em.ins(f"mad.lo.s32 {th}, {t}, 2, {th}")
    addr = em.smem_addr(th, 4)
    out = []
    for q in range(nq):
        for j in range(N // 8):
            for h in range(2):
                for s in range(2):
                    out.append((addr, 4 * ((64 * q + 8 * h) * N + 8 * j + s)))
    return out


def _to_fragment(em: Emitter, op, t, init, M: int, N: int) -> list:
    """The loop's initial accumulator (any layout) -> this thread's wgmma fragment registers."""
    from tilegen.runtime.codegen.exchange import row_major

    em.need_smem(M * N * 4)
    d = em.dist_of(op, t)
    form = row_major((M, N))
    for k in range(d.nregs):
        em.ins(f"st.shared.f32 {em.smem_ref(d, form, k, 4)}, {init[k]}")
    em.barrier()
    acc = []
    for addr, off in _fragment_addrs(em, M, N):
        r = em.new("f32")
        em.ins(f"ld.shared.f32 {r}, [{addr}+{off}]")
        acc.append(r)
    em.barrier()
    return acc


def _from_fragment(em: Emitter, op, t, acc: list, M: int, N: int) -> list:
    """This thread's fragment registers -> the loop result in the layout the layout stage gave
    it (through the scratch buffer)."""
    from tilegen.runtime.codegen.exchange import row_major

    for (addr, off), r in zip(_fragment_addrs(em, M, N), acc):
        em.ins(f"st.shared.f32 [{addr}+{off}], {r}")
    em.barrier()
    d = em.dist_of(op, t)
    form = row_major((M, N))
    out = []
    for k in range(d.nregs):
        r = em.new("f32")
        em.ins(f"ld.shared.f32 {r}, {em.smem_ref(d, form, k, 4)}")
        out.append(r)
    em.barrier()
    return out
