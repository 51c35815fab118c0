"""The async path's plain store from the accumulator's own order, coalesced through the idle
stage ring (async_epilogue.tmem_store_plan; docs/pipelines.md sections 44 and 45).

A thread of the tcgen05 accumulator's rows holds one row of the tile, so stored as it is, each
warp store instruction writes 32 rows: 32 sectors for 32 elements, where a row's 32 neighbours
take one or two. Here each chunk of 32 columns the store reads from tensor memory
(``tmem_chunks.chunks``: the epilogue's ops run on it) goes into the idle stage ring, row-major,
the rows padded so a warp's 32 rows fall in distinct banks; the consumers meet (warp 0 frees the
columns), and every thread reads the tile back with a warp's 32 lanes on 32 consecutive columns
of a row, and stores it (the ordinary ``memory.Access`` addressing and bounds, in that layout).
tileiras does the same through ``STSM`` / ``LDS.128``. Where the padded tile does not fit in
the ring (256 x 256 f32), the rows are stored as they are (``tmem_chunks.store_rounds``).

sm_90's wgmma consumers do the same with their fragment registers (a warp's store otherwise
wrote 8 rows of 4 lanes, the layout stage's layout, after an exchange through the ring all the
same): written whole into the ring, rows padded, and read back coalesced.
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import ELEMENTS, Emitter, elem_key
from tilegen.runtime.codegen.store_staging import ring_refs, write_ring
from tilegen.runtime.codegen.wgmma_fragment import fragment_elems, row_thread
from tilegen.runtime.layouts.async_forms import RING_PAD
from tilegen.runtime.layouts.attrs import BlockedLayout
from tilegen.runtime.types import TileType


def _pad(kind: tuple, esz: int) -> int:
    return RING_PAD["wgmma" if kind[0] == "wgmma" else "rows"].get(esz, 0)


def _pitch(kind: tuple, N: int, esz: int) -> int:
    """A ring row's elements: ``N`` and the padding."""
    return N + _pad(kind, esz) // esz


def _fits(em: Emitter, value, kind: tuple) -> bool:
    """Whether the stored tile, its rows padded, fits in the ring's bytes before the side
    vectors (the async loop's ``Emitter.async_store``)."""
    st = getattr(em, "async_store", None)
    key = elem_key(value.type)
    if st is None or key not in ELEMENTS or ELEMENTS[key][0] == "pred":
        return False
    esz = ELEMENTS[key][1]
    M, N = value.type.shape[-2:]
    if not _pad(kind, esz) or N % 32:
        return False
    return M * _pitch(kind, N, esz) * esz <= st["ring_bytes"]


def _coalesced(t: TileType, warps: int) -> TileType:
    """``t`` laid out with a warp's 32 lanes on 32 consecutive columns of a row and the warps on
    rows (leading unit dims kept)."""
    lead = len(t.shape) - 2
    lay = BlockedLayout(
        (1,) * (lead + 2),
        (1,) * lead + (1, 32),
        (1,) * lead + (warps, 1),
        tuple(range(lead + 1, -1, -1)),
    )
    return TileType(t.shape, t.element, lay)


def store(em: Emitter, op, value) -> bool:
    """``tiled_store`` ``op`` of ``value`` (marked ``nv_tileas.tmem_store``), the end of the
    async loop's chain in its accumulator's own order: sm_100's TMEM rows left in tensor memory
    (``Emitter.tmem_rows``), or sm_90's wgmma fragment registers. Whether it stored it: an
    sm_100 tile the ring cannot hold is left to the ordinary store (its rows as they are,
    ``memory._store_rounds``)."""
    from tilegen.runtime.codegen import memory, tmem_chunks
    from tilegen.runtime.codegen.async_store import ring_idle

    kind = getattr(em, "fragment_order", {}).get(value)
    p = em.tmem_rows
    rows = kind is not None and kind[0] == "rows" and p is not None and p.chain[-1] is value
    if not (rows or (kind is not None and kind[0] == "wgmma")) or not _fits(em, value, kind):
        if kind is not None and kind[0] == "wgmma":  # (async_epilogue checked the ring's bytes)
            from tilegen.runtime.codegen.core import fail

            fail(op, "PTX backend: the wgmma fragment's tile does not fit in the stage ring")
        return False
    mem, indices, in_bounds = memory._tiled_operands(em, op)
    cls, esz, sfx = ELEMENTS[elem_key(value.type)]
    M, N = value.type.shape[-2:]
    pitch = _pitch(kind, N, esz)
    base = em.async_store["base"]
    if em.ring_scratch is not None and em.ring_scratch.used:
        em.barrier()  # (an exchange since the loop used the ring: its readers are done)
    else:
        ring_idle(em)  # (sm_90: the other warp group's wgmmas may still read the stages)
    at = em.new("b32")
    if rows:  # each thread's row, a chunk at a time from TMEM, into the ring
        em.tmem_rows = None
        row, col, per = row_thread(em, N, kind[3], M, "x2" in kind[4:])
        th = em.new("b32")
        em.ins(f"mad.lo.s32 {th}, {row}, {pitch}, {col}")
        em.ins(f"mad.lo.s32 {at}, {th}, {esz}, {base}")
        refs = [(at, esz * e) for e in range(per)]
        for c0, regs in tmem_chunks.chunks(em, p, op, value):
            write_ring(em, regs, refs[c0 : c0 + len(regs)], esz, sfx, kind)
    else:  # the fragment's registers, each at its place
        th, offs = fragment_elems(em, M, N, pitch)
        em.ins(f"mad.lo.s32 {at}, {th}, {esz}, {base}")
        write_ring(em, em.tile(op, value), [(at, esz * e) for e in offs], esz, sfx, kind)
    em.barrier()  # the tile is in the ring (and every TMEM read is done)
    if rows:
        tid, _, _ = em.tid()
        w0 = em.new("pred")
        em.ins(f"setp.lt.u32 {w0}, {tid}, 32")
        freed = em.new_label("tmem_store_freed")
        em.ins(f"@!{w0} bra {freed}")
        tmem_chunks.release(em, p)
        em.label(freed)
    # read back coalesced and store
    t2 = _coalesced(value.type, em.barrier_threads // 32)
    d = em.dist_of(op, t2)
    acc = memory.Access(em, op, mem, indices, t2, in_bounds)
    opcode = memory.st_opcode(em, op, memory._space(mem.type))
    kt = memory.mem_types(op, mem.element)
    mults = (0,) * (len(d.kept) - 2) + (pitch, 1)  # (leading unit dims: no offset)
    for k, (src, off) in enumerate(ring_refs(em, d, mults, esz, base)):
        r = em.new(cls)
        em.ins(f"ld.shared.{sfx} {r}, [{src}+{off}]")
        memory.store_group(em, opcode, kt, acc.pred(k), [r], acc.addr(k))
    return True
