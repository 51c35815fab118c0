"""The tcgen05 accumulator read back by column chunks at the TMA store (docs/pipelines.md
section 32).

The async GEMM form on sm_100 reads its accumulator from tensor memory after the K loop: thread
t takes its row, ``N`` (or ``N / 2`` on 8 warps of 128 rows) f32 values, into registers, and the
TMA store writes them by position into the idle stage ring. Past 128 values a thread (a 256 x
256 tile on one CTA: 256), that whole row does not fit beside the epilogue. Here the loop leaves
the accumulator in tensor memory (:class:`Pending`, ``Emitter.tmem_rows``; the chain's values are
empty lists meanwhile), and the store reads it ``CHUNK`` columns at a time: each chunk is loaded
(``tcgen05.ld.32x32b.x32``, the next chunk's load in flight while this one is used), given the
loop's uniform initial value, run through the epilogue chain (``fragment_chain``: the same
elementwise handlers, on the chunk's registers) and written to its place in the ring. Then the
columns are freed and the ring goes out as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilegen.runtime.codegen import fragment_sides
from tilegen.runtime.codegen.core import Emitter
from tilegen.runtime.layouts.async_forms import TMEM_ROWS_AT_ONCE as ROWS_AT_ONCE

#: the columns of one chunk: one ``tcgen05.ld.32x32b.x32``
CHUNK = 32


@dataclass
class Pending:
    """A tcgen05 accumulator left in tensor memory for the store: the fragment chain from the
    loop's result to the stored tile, this thread's TMEM address of its row (``lane_base``),
    whether the loop ran (``ran``: else TMEM holds nothing and the result is ``init``), the
    uniform initial value (None: C was written into TMEM before the loop), the register class, the thread's columns, and the allocation's address
    and columns (to free)."""

    chain: list
    lane_base: str
    ran: str
    init: str
    cls: str
    per: int
    taddr: str
    tcols: int
    #: row vectors beside the chain, read chunk by chunk (codegen/fragment_sides.py)
    sides: dict = field(default_factory=dict)
    #: the allocation's ``.cta_group`` (a CTA pair's: ``cta_group::2``)
    group: str = "cta_group::1"
    #: the initial value is +0: the MMAs' sum is the result as it is (no add), and a loop of
    #: no iteration leaves +0 in TMEM
    zero: bool = False
    #: M 64 on 4 warps: half a row a thread (``16x32bx2``: lanes 16 .. 31 read the columns
    #: ``split`` further); 0: a row (``32x32b``)
    split: int = 0


def lane_base(em: Emitter, warp: str, taddr: str, N: int, tall: bool, wide: bool) -> str:
    """This thread's TMEM address of its row: lane 32 (w % 4) + lane, at column 0 (4 warps),
    ``(w / 4) N`` (``tall``: the second accumulator of a 256-row tile) or ``(w / 4) N / 2``
    (``wide``: the second half of 128 rows' columns)."""
    at = em.new("b32")
    if tall or wide:
        wq, wh = em.new("b32"), em.new("b32")
        em.ins(f"and.b32 {wq}, {warp}, 3")
        em.ins(f"shr.u32 {wh}, {warp}, 2")
        em.ins(f"shl.b32 {at}, {wq}, 21")  # (32 (w % 4)) << 16: the TMEM lane field
        em.ins(f"mad.lo.s32 {at}, {wh}, {N if tall else N // 2}, {at}")
    else:
        em.ins(f"shl.b32 {at}, {warp}, 21")
    em.ins(f"add.s32 {at}, {at}, {taddr}")
    return at


def store_rows(em: Emitter, lane_base: str, regs: list, split: int = 0, at: int = 0) -> None:
    """Write a thread's row ``regs`` (the accumulator's rows layout: register k is column k)
    into TMEM at ``lane_base`` (from column ``at``), ``CHUNK`` columns a ``tcgen05.st``; then
    make the writes visible to the thread that issues the MMAs after the consumers' barrier.
    ``split``: half a row a thread of an M 64 accumulator (``16x32bx2``: lanes 16 .. 31 write
    the columns ``split`` further)."""
    shape = f"16x32bx2.x{{}}.b32 [{{}}], {split}," if split else "32x32b.x{}.b32 [{}],"
    for c0 in range(0, len(regs), CHUNK):
        dst = em.new("b32")
        em.ins(f"add.s32 {dst}, {lane_base}, {at + c0}")
        part = regs[c0 : c0 + CHUNK]
        em.ins(f"tcgen05.st.sync.aligned.{shape.format(len(part), dst)} {{{', '.join(part)}}}")
    em.ins("tcgen05.wait::st.sync.aligned")
    em.ins("tcgen05.fence::before_thread_sync")


def store_by_chunks(em: Emitter, p: Pending, store, value, refs: list, write) -> None:
    """Read ``p``'s accumulator ``CHUNK`` columns at a time, run each chunk through the chain to
    ``value`` (the stored tile) and ``write(registers, refs, first column)`` it (``refs``: the
    ring places of all of the thread's columns, in order); then fence the TMEM reads for the barrier that
    follows (:func:`release`)."""
    for c0, regs in chunks(em, p, store, value):
        write(regs, refs[c0 : c0 + CHUNK], c0)


def chunks(em: Emitter, p: Pending, store, value):
    """Yield (first column, the stored tile's registers) per ``CHUNK`` columns of ``p``'s
    accumulator: each chunk read from TMEM (the next one in flight while the caller writes this
    one), given the initial value and run through the chain to ``value``; after the last, the
    TMEM reads are fenced for the barrier that follows (:func:`release`)."""
    first, rest = p.chain[0], p.chain[1:]
    add = "s32" if p.cls == "b32" else "rn.f32"

    def load(c0: int) -> list:
        regs = [em.new("b32") for _ in range(CHUNK)]
        src = em.new("b32")
        em.ins(f"add.s32 {src}, {p.lane_base}, {c0}")
        dst = ", ".join(regs)
        if p.split:
            em.ins(f"tcgen05.ld.sync.aligned.16x32bx2.x{CHUNK}.b32 {{{dst}}}, [{src}], {p.split}")
        else:
            em.ins(f"tcgen05.ld.sync.aligned.32x32b.x{CHUNK}.b32 {{{dst}}}, [{src}]")
        return regs

    # no iteration: TMEM holds nothing and the result is the initial value; the columns get
    # the additive identity (-0.0: x + -0.0 is x for every x; 0 for integers) and the chunks
    # below add the initial value as usual (``ran`` is uniform: the warps stay converged).
    # (No initial value: C was written into TMEM before the loop, and TMEM holds the result.)
    if p.init is not None:
        filled = em.new_label("tmem_chunks_filled")
        em.ins(f"@{p.ran} bra {filled}")
        z = em.mov("b32", "0" if p.cls == "b32" or p.zero else "0x80000000")
        shape = (
            f"16x32bx2.x{CHUNK}.b32 [{{}}], {p.split},"
            if p.split
            else f"32x32b.x{CHUNK}.b32 [{{}}],"
        )
        for c0 in range(0, p.per, CHUNK):
            dst = em.new("b32")
            em.ins(f"add.s32 {dst}, {p.lane_base}, {c0}")
            zeros = ", ".join([z] * CHUNK)
            em.ins(f"tcgen05.st.sync.aligned.{shape.format(dst)} {{{zeros}}}")
        em.ins("tcgen05.wait::st.sync.aligned")
        em.label(filled)
    cur = load(0)
    em.ins("tcgen05.wait::ld.sync.aligned")
    for c0 in range(0, p.per, CHUNK):
        nxt = load(c0 + CHUNK) if c0 + CHUNK < p.per else None  # in flight meanwhile
        vals = []
        for r in cur:  # the initial value plus the sum
            y = em.new(p.cls)
            em.ins(f"mov.b32 {y}, {r}")
            if p.init is None or p.zero:
                vals.append(y)
                continue
            x = em.new(p.cls)
            em.ins(f"add.{add} {x}, {p.init}, {y}")
            vals.append(x)
        em.set(first, vals)
        if p.sides:
            fragment_sides.chunk(em, p, c0, CHUNK)
        for v in rest:  # the epilogue's own handlers, on this chunk's registers
            em.emit_op(v.op)
        yield c0, em.tile(store, value)
        if nxt is not None:
            em.ins("tcgen05.wait::ld.sync.aligned")
            cur = nxt
    em.ins("tcgen05.fence::before_thread_sync")


def store_rounds(em: Emitter, p: Pending, store, value, groups: list):
    """A plain store of ``p``'s accumulator (async_epilogue.tmem_store_plan; docs/pipelines.md
    section 44): (registers by index, the ``groups`` of register indices they complete) per
    chunk, register k being column k of the thread's row; after the last, the consumers meet
    and warp 0 frees the columns."""
    left = list(groups)
    for c0, regs in chunks(em, p, store, value):
        out = {c0 + i: r for i, r in enumerate(regs)}
        done = [g for g in left if all(k in out for k in g)]
        left = [g for g in left if not all(k in out for k in g)]
        yield out, done
    if left:
        from tilegen.runtime.codegen.core import fail

        fail(store, "PTX backend: a store's vector crosses two chunks of tensor memory")
    em.barrier()  # every consumer's last TMEM read is behind it
    tid, _, _ = em.tid()
    w0 = em.new("pred")
    em.ins(f"setp.lt.u32 {w0}, {tid}, 32")
    freed = em.new_label("tmem_chunks_freed")
    em.ins(f"@!{w0} bra {freed}")
    release(em, p)
    em.label(freed)


def release(em: Emitter, p: Pending) -> None:
    """Free the columns: warp 0, after the consumers' barrier that follows the last read."""
    em.ins(f"tcgen05.dealloc.{p.group}.sync.aligned.b32 {p.taddr}, {p.tcols}")
