"""The async loop's epilogue store (docs/pipelines.md section 8, "TMA store"): the
``tiled_store`` the ``async`` stage marked after the loop, written by TMA from the idle stage
ring (store_staging.py places the registers there) or, on sm_100, from the TMEM rows by chunks;
the store's tensor map, foreseen and built by the prologue where it can be (:func:`store_guess`),
and the map slot freed once the copies have read their sources.
"""

from __future__ import annotations

from tilegen.runtime.codegen import cta_pair, tma, tmem_chunks
from tilegen.runtime.codegen.core import ELEMENTS, Emitter, elem_key, fail
from tilegen.runtime.codegen.store_staging import (
    layout_swizzled_refs,
    ring_refs,
    stmatrix_store,
    swizzle_fits,
    swizzled_refs,
    write_ring,
)
from tilegen.runtime.codegen.wgmma_fragment import fragment_elems, row_thread
from tilegen.runtime.layouts.async_forms import fragment_chain
from tilegen.runtime.layouts.mma_choice import TCGEN05_SMS

#: the attribute runtime/passes/async_rule.py puts on a tiled_store the epilogue writes by TMA
TMA_STORE_ATTR = "nv_tileas.tma_store"
#: ... on the plain tiled_store sm_100's consumers write from the TMEM rows by chunks
TMEM_STORE_ATTR = "nv_tileas.tmem_store"


def tma_store_of(loop):
    """The ``tiled_store`` after ``loop`` the ``async`` stage marked for a TMA store, or None."""
    return marked_after(loop, TMA_STORE_ATTR)


def marked_after(loop, attr: str):
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
        stmatrix_store(em, regs, M, N, base)
        refs, swizzled = [], True
    else:
        refs = swizzled_refs(em, fragment, esz, base) if fragment is not None else None
        swizzled = refs is not None
    if swizzled:
        pass
    elif fragment is not None:  # the loop's accumulator registers as they are (fragment_chain)
        kind, fm, fn = fragment[:3]
        if kind == "wgmma":
            th, offs = fragment_elems(em, fm, fn)
        else:  # tcgen05, M 128: thread 32 (w % 4) + lane holds that row, columns in order
            # (from column (w / 4) N / G)
            row, col, per = row_thread(em, fn, fragment[3], fm, "x2" in fragment[4:])
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
        write = lambda rs, rf, c0: write_ring(em, rs, rf, esz, sfx, fragment)  # noqa: E731
        tmem_chunks.store_by_chunks(em, pending, op, value, refs, write)
    else:
        pending = None
        write_ring(em, regs, refs, esz, sfx, fragment)
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
    *outer, row, col = (s32(em, em.scalar(op, v)) for v in od.operand_group(op, "indices"))
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
    from tilegen.runtime.codegen.async_loop import ASYNC_SYMBOL

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
    *outer, row, col = (s32(em, em.scalar(op, v)) for v in od.operand_group(op, "indices"))
    outer = outer[::-1]

    def write(regs: list, at: list, c0: int) -> None:
        b = c0 * esz // 128  # (a chunk lies within one box)
        shift = (b - b % slots) * box_bytes  # box b -> slot b % slots
        write_ring(em, regs, [(r, o - shift) for r, o in at], esz, sfx, ("rows",))
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
    map where it foresaw this box (:func:`store_guess`); only another box is built here."""
    from tilegen.runtime.codegen.async_loop import _slot_maps

    g = _slot_maps(em, em.symbol, st["slot_off"], st["nmaps"])[st["store_map"]]
    if st.get("store_built") == (box, swizzle):
        return g, False
    smap = em.new("b32")
    at = st["maps_off"] + st["store_map"] * tma.TENSORMAP_BYTES
    em.ins(f"add.s32 {smap}, {st['base']}, {at}")
    built = em.new_label("tma_store_map")
    em.ins(f"@!{st['t0']} bra {built}")
    tma.build_tensormap(em, smap, store_spec(em, op, box, swizzle))
    em.label(built)
    em.ins("bar.warp.sync -1")
    tma.publish_tensormap(em, g, smap)
    if st["share"]:  # (the release half of the slot's free covers this map too)
        em.ins(f"@{st['t0']} fence.acq_rel.gpu")
    return g, True


def store_spec(em: Emitter, op, box: tuple, swizzle: int) -> tma.TensorMapSpec:
    """The map of TMA store ``op``'s memref (its registers), for ``box`` and ``swizzle``."""
    od = op.opdef
    key = elem_key(od.operand_group(op, "value")[0].type)
    esz = ELEMENTS[key][1]
    mem = em.get(od.operand_group(op, "base")[0])
    dims = [s32(em, d) for d in reversed(mem.sizes)]
    dims = [em.mov("b32", x) if isinstance(x, int) else x for x in dims]
    strides = tuple(stride_bytes(em, s, esz) for s in reversed(mem.strides[:-1]))
    return tma.TensorMapSpec(key, esz, mem.ptr, tuple(dims), strides, box, swizzle)


def store_guess(em: Emitter, loop, store, pair: bool) -> tuple | None:
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


def stride_bytes(em: Emitter, st, esz: int) -> str:
    """A b64 register: stride ``st`` (elements: an int or a register) in bytes."""
    stb = em.new("b64")
    if isinstance(st, int):
        em.ins(f"mov.b64 {stb}, {st * esz}")
    elif em.reg_class(st) == "b64":
        em.ins(f"mul.lo.s64 {stb}, {st}, {esz}")
    else:
        em.ins(f"mul.wide.u32 {stb}, {st}, {esz}")
    return stb


def s32(em: Emitter, x):
    """Scalar ``x`` as a 32-bit operand (a b64 register's low word)."""
    if isinstance(x, int):
        return x
    if em.reg_class(x) == "b64":
        r = em.new("b32")
        em.ins(f"cvt.u32.u64 {r}, {x}")
        return r
    return x
