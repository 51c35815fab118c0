"""A general-form loop's loop-invariant A operand copied by TMA (docs/pipelines.md section 50).

Attention's Q is the A operand of the loop's first dot, loaded once before the loop. Today's
path loads it into registers with every consumer thread and writes it into a kept array
(``invariant_a.keep_invariant_a``). Where the async stage marked its load
(``async_general.kept_loads``: sm_90, wgmma), nothing is emitted at the load. Instead:

* thread 0 copies the tile by TMA into a kept array of its own once the maps are published,
  before the warp groups split (ahead of the ring's first stage, and with the registers of
  the prologue, not the producer's 32), completing on a barrier of its own (:func:`issue`);
* the consumers wait for that barrier once, before their loop (:func:`wait`);
* each dot reads A from the array through 128/64/32-byte swizzled descriptors
  (``wgmma_dot.wgmma_dot``), as it reads a staged K-major B.

wgmma_dot's accumulator layout (``wgmma_accumulator_layout``) wants A's rows permuted by 8-row
blocks (see ``wgmma_dot.wgmma_dot``). The copies place them so: one box of 8 rows per block,
each at the block's place (:func:`physical_block`). An 8-row box is one swizzle atom (8 rows of the
span), so each block keeps the swizzle pattern it would have in one box. Each box is
bounds-checked on its own, so rows past the array's end are zero-filled as a whole tile's
would be.
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import Emitter
from tilegen.runtime.codegen.pipeline import (
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait,
)
from tilegen.runtime.records import dataclass

#: rows of one copy: a swizzle atom (8 rows of the span)
BLOCK_ROWS = 8


@dataclass
class KeptTile:
    """One loop-invariant A operand copied by TMA: its staged operand (``async_loop._Operand``),
    the kept array and its barrier (shared addresses in registers), and, for a wgmma dot, the
    warp groups its rows are divided among (``WgmmaPlan.groups``; boxes of :data:`BLOCK_ROWS`
    rows); 0 for a tcgen05 or mma.sync dot (the rows in order, one box a column box)."""

    x: object
    region: str
    bar: str
    groups: int
    issued: bool = False  # (set by :func:`issue`; :func:`check_issued`)


def physical_block(b: int, groups: int) -> int:
    """Where wgmma_dot's A layout puts logical 8-row block ``b`` (rows 8 b ..): block
    ``w + 4 G h + 8 G q`` (w = 4 wg + wi) goes to ``2 wi + 8 wg + h + 8 G q``."""
    w, h, q = b % (4 * groups), (b // (4 * groups)) % 2, b // (8 * groups)
    wg, wi = divmod(w, 4)
    return 2 * wi + 8 * wg + h + 8 * groups * q


def stage(em: Emitter, op) -> None:
    """``tiled_load`` ``op`` (marked ``nv_tileas.async_kept``): no code; its tile is a
    :class:`~tilegen.runtime.codegen.memory.Staged` whose buffer is a new kept array (a
    :class:`~tilegen.runtime.codegen.mma_staging.StagedBox`), passed through the views to its dot;
    the loop's frame copies it (:func:`issue`)."""
    from tilegen.runtime.codegen.async_loop import _ALIGN, _Operand
    from tilegen.runtime.codegen.core import fail
    from tilegen.runtime.codegen.memory import Staged, StagePlan
    from tilegen.runtime.codegen.mma_staging import StagedBox
    from tilegen.runtime.codegen.tcgen05_dot import tcgen05_plan
    from tilegen.runtime.codegen.wgmma_layout import wgmma_plan
    from tilegen.runtime.layouts.decisions import mma_family
    from tilegen.runtime.layouts.staging import dot_paths

    res = op.results[0]
    paths = dot_paths(res, res.type.rank - 2) or []
    if not paths or any(p[2] != 0 or p[3] for p in paths):
        fail(op, "PTX backend: a load marked for a TMA copy no longer reaches dots' A only")
    chain = list(dict.fromkeys(c for p in paths for c in p[0]))
    dot = paths[0][1]
    plans = [wgmma_plan(p[1], em.num_warps, em.sm) for p in paths]
    x = _Operand(op, 0)
    groups = 0  # tcgen05: the rows in order (TMEM lane = row), one box
    if all(p is not None for p in plans) and len({p.groups for p in plans}) == 1:
        x.rows_box, groups = BLOCK_ROWS, plans[0].groups  # wgmma: wgmma_dot's row order
    elif any(
        tcgen05_plan(p[1], em.num_warps, em.sm) is None and mma_family(p[1]) != "mma.sync"
        for p in paths
    ):
        fail(op, "PTX backend: a load marked for a TMA copy feeds other than async dots")
    region = em.resident_region(x.bytes + 8, name="kept_tma", align=_ALIGN)
    bar = em.new("b32")
    em.ins(f"add.s32 {bar}, {region}, {x.bytes}")
    st = Staged(em, op, StagePlan(0, chain, dot, 0, False, None))
    st.pipe_buf = StagedBox(region, x.span, True, x.box_bytes)
    em.set(res, st)
    em.staged_chain.update(chain)
    for r in op.results[1:]:
        em.set(r, None)
    em.kept_tma.append(KeptTile(x, region, bar, groups))


def init_barriers(em: Emitter, kept: list) -> None:
    """Thread 0, before the barriers' init fence: one arrival (the producer's expect) each."""
    for k in kept:
        mbarrier_init(em, k.bar, 1)


def issue(em: Emitter, kept: list, gmaps: list) -> None:
    """Thread 0, the maps acquired (``async_loop._frame``): each kept tile's bytes expected on
    its barrier, then its copies - for wgmma an 8-row box per block of rows, at the block's
    place in wgmma_dot's layout; else one box a column box."""
    from tilegen.runtime.codegen import tma
    from tilegen.runtime.codegen.async_store import s32

    for k, g in zip(kept, gmaps):
        x, k.issued = k.x, True
        mbarrier_arrive_expect_tx(em, k.bar, x.bytes)
        idx = [s32(em, em.scalar(x.load, v)) for v in x.load.opdef.operand_group(x.load, "indices")]
        col, row, outer = idx[-1], idx[-2], idx[-3::-1]
        rows = x.tile[-2]
        for i, (c0, _) in enumerate(x.boxes):
            cc = col
            if c0:
                cc = em.new("b32")
                em.ins(f"add.s32 {cc}, {col}, {c0}")
            for b in range(rows // BLOCK_ROWS if k.groups else 1):
                dst = em.new("b32")
                at = i * x.box_bytes
                if k.groups:
                    at += physical_block(b, k.groups) * BLOCK_ROWS * x.span
                em.ins(f"add.s32 {dst}, {k.region}, {at}")
                r = row
                if b:
                    r = em.new("b32")
                    em.ins(f"add.s32 {r}, {row}, {b * BLOCK_ROWS}")
                tma.tma_load(em, dst, g, [cc, r] + outer, k.bar)


def wait(em: Emitter, kept: list) -> None:
    """The consumers, before their loop: every kept tile landed (its barrier's first phase)."""
    for k in kept:
        mbarrier_wait(em, k.bar, 0)


def check_issued(em: Emitter) -> None:
    """After the kernel's body: every marked load was copied by an async loop's producer (a
    load left unissued would be read uninitialized)."""
    from tilegen.runtime.codegen.core import fail

    for k in em.kept_tma:
        if not k.issued:
            fail(k.x.load, "PTX backend: a load marked for a TMA copy has no async loop to copy it")
