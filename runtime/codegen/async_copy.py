"""The async path's thread copies (docs/pipelines.md section 43): a dot operand TMA cannot
describe - its rows or base are not known to be 16-byte multiples - copied into its stage by
the producer warp group's 128 threads instead, in the layout TMA would have written (column
boxes of at most 128-byte rows, swizzled by the row's width), so the consumers read it as they
read any stage.

The copy is ``memory.cp_async_tile``'s: ``cp.async`` chunks of the proven width (4, 8 or 16
bytes; src-size zero-fills what lies out of bounds, as TMA does), or under 4 bytes 16-byte
chunks through registers. The stage's full barrier then counts the 128 threads besides the TMA
issuer: each thread makes its writes visible to the async proxy (``cp.async.wait_group``,
``fence.proxy.async``) before it arrives, one stage late so that its copies stay in flight
while it issues the next stage's."""

from __future__ import annotations

from types import SimpleNamespace

from tilegen.runtime.codegen.core import Emitter

#: the attribute the async rule puts on a load the producer's threads copy (elements a copy)
THREAD_COPY_ATTR = "nv_tileas.thread_copied"
#: the producer warp group's threads
COPIERS = 128


def width(load) -> int:
    """Elements per copy of a load the producer's threads copy; 0: a TMA copy."""
    a = load.attributes.get(THREAD_COPY_ATTR)
    return a.value if a is not None else 0


def full_count(staged: list) -> int:
    """Arrivals a stage's full barrier waits for: the TMA issuer's ``expect_tx`` (when any
    operand is a TMA copy) and every producer thread (when any is copied by threads)."""
    tma = any(not x.threads for x in staged)
    return int(tma) + (COPIERS if any(x.threads for x in staged) else 0)


def lagged(staged: list) -> bool:
    """Whether the threads arrive a stage late: their copies are ``cp.async`` (in flight after
    issue); copies through registers are complete when stored."""
    return any(x.threads * x.esz >= 4 for x in staged if x.threads)


class Arrivals:
    """The producer threads' arrivals on the full barriers: now, or a stage late."""

    def __init__(self, em: Emitter, late: bool):
        self.em, self.late = em, late
        if late:
            self.prev, self.have = em.new("b32"), em.new("pred")
            em.ins(f"mov.b32 {self.prev}, 0")
            em.ins(f"setp.ne.u32 {self.have}, 0, 0")

    def stage_copied(self, full: str) -> None:
        """The thread issued its copies of the stage whose full barrier is ``full``."""
        em = self.em
        if not self.late:
            em.ins("fence.proxy.async.shared::cta")
            em.ins(f"mbarrier.arrive.shared::cta.b64 _, [{full}]")
            return
        em.ins("cp.async.commit_group")
        em.ins("cp.async.wait_group 1")  # the previous stage's copies landed
        em.ins("fence.proxy.async.shared::cta")
        em.ins(f"@{self.have} mbarrier.arrive.shared::cta.b64 _, [{self.prev}]")
        em.ins(f"mov.b32 {self.prev}, {full}")
        em.ins(f"setp.eq.u32 {self.have}, 0, 0")

    def done(self) -> None:
        """After the thread's last stage: its copies landed, then its last arrival."""
        if not self.late:
            return
        em = self.em
        em.ins("cp.async.wait_group 0")
        em.ins("fence.proxy.async.shared::cta")
        em.ins(f"@{self.have} mbarrier.arrive.shared::cta.b64 _, [{self.prev}]")


def copy(em: Emitter, x, sbase: str, ptid: str) -> None:
    """Producer thread ``ptid`` (0-127)'s part of staged operand ``x``'s copy into the stage at
    ``sbase`` (1024-aligned): element (r, c) of the tile at TMA's place for it, box
    ``c // per`` (``per`` elements a box row), row ``r``, swizzled by the box's span (in
    32-byte atoms for sm_100's tf32 B loaded K x N, as its map says)."""
    from tilegen.runtime.codegen.memory import Staged, cp_async_tile

    box = x.boxes[0][1]
    per = box.box[-1]
    lg = per.bit_length() - 1
    rows = ((0, None, per * x.esz),)
    cols = ((0, lg, x.esz), (lg, None, x.box_bytes))
    st = Staged(em, x.load, SimpleNamespace(vec=x.threads, transposed=False, convert=None))
    buf = em.new("b32")
    em.ins(f"add.s32 {buf}, {sbase}, {x.offset}")
    cp_async_tile(
        em, st, rows, cols, buf, threads=(ptid, COPIERS), swizzle=box.swizzle, atom=x.atom
    )
