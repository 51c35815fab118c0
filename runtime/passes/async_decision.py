"""The async rule's decision record (:class:`AsyncDecision`, one ``async-plan`` line a kernel:
:func:`report`) and what the rule's modules share: the targets' instructions, element sizes,
the ring's limits and the shared-memory budget (docs/pipelines.md section 8)."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.ir import Operation
from tilegen.runtime.records import dataclass

#: target sm -> the async path's tensor-core instruction
ASYNC_MMA = {90: "wgmma", 100: "tcgen05", 103: "tcgen05", 110: "tcgen05", 120: "mma.sync"}
#: bytes of an element key
ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "tf32": 4, "f8E4M3FN": 1, "f8E5M2": 1, "i8": 1}
#: the async path's deepest ring without a num_stages hint: tileiras's deepest for the corpus
#: GEMMs (matmul_f16 / matmul_int8: 11, bench/tileiras_pipelines.py)
ASYNC_MAX_STAGES = 11
#: shared memory beside the stages and the accumulator scratch (barriers, maps, slot)
SMEM_EXTRA = 1024
#: ops that touch memory (none may run before the async loop: the producer warp group runs the
#: kernel's prologue too, with the consumers' layouts)
MEMORY_OPS = ("load", "store", "atomic", "gather", "scatter", "print", "assert")


@dataclass(frozen=True)
class AsyncDecision:
    """Why a kernel does or does not take the async path on its target."""

    kernel: str
    target: str
    eligible: bool
    taken: bool
    reason: str  # "" when taken
    mma: str = ""  # "wgmma" / "tcgen05" when eligible
    stages: int = 0
    tile: tuple = ()  # (M, N, K) of the dot
    elements: str = ""  # "f16 x f16 -> f32"
    stage_bytes: int = 0
    consumer_warps: int = 0
    producer_warps: int = 0
    consumer_regs: Optional[int] = None
    producer_regs: Optional[int] = None
    #: the epilogue's store goes through TMA; else why not (taken kernels only)
    tma_store: bool = False
    store_reason: str = ""
    #: no TMA store, but the plain store writes sm_100's TMEM rows by column chunks (section 44)
    tmem_store: bool = False
    #: the general form's last dot runs beside the next iteration's first (section 16)
    overlap: bool = False
    #: the GEMM form runs on a CTA pair (section 18); ``stage_bytes`` are then one CTA's
    cta_pair: bool = False
    #: why a kernel that asks for a CTA pair (``num_cta_in_cga`` 2) runs one CTA a tile block
    pair_declined: str = ""
    #: the consumers take the producer's registers under the kernel's ``.maxnreg``
    #: (``consumer_regs`` is their ``setmaxnreg.inc``; section 21)
    rebalance: bool = False
    #: the occupancy hint's ``.maxnreg`` is dropped: even rebalanced, the consumers could not
    #: hold their accumulators within it (section 21)
    cap_dropped: bool = False
    #: K loops the general form's ring feeds one after the other (section 23)
    chain: int = 1
    #: the rows of the tile block each CTA of a pair computes (passes/pair_rows.py, section
    #: 40); 0: one CTA a tile block
    pair_rows: int = 0
    #: the operands the producer warp group's threads copy, TMA being unable (section 43):
    #: ("A", bytes a copy), ...
    thread_copied: tuple = ()
    #: the general form's loop-invariant A operands (attention's Q) the producer copies by
    #: TMA once, before the first stage (section 50)
    kept_tma: int = 0

    @property
    def over_48k(self) -> bool:
        """Whether the stages take more than 48 KB of shared memory (one static ``.shared``
        array all the same, as tileiras declares its: docs/pipelines.md)."""
        return self.stages * self.stage_bytes > 48 * 1024

    def line(self) -> str:
        head = f"{self.kernel} [{self.target}]: "
        if self.taken:
            head += "async path"
        elif self.eligible:
            head += f"eligible, today's path: {self.reason}"
        else:
            head += f"today's path: {self.reason}"
        if self.eligible:
            m, n, k = self.tile
            head += (
                f"; {self.mma} {m}x{n}x{k} {self.elements}, {self.stages} stages x "
                f"{self.stage_bytes} B"
                f"{' (over 48 KB)' if self.over_48k else ''}, "
                f"{self.consumer_warps} consumer + {self.producer_warps} producer warps"
            )
            if self.consumer_regs:
                head += f", setmaxnreg {self.producer_regs}/{self.consumer_regs}"
            for name, nbytes in self.thread_copied:
                how = f"{nbytes}-byte cp.async" if nbytes >= 4 else "through registers"
                head += f"; {name} copied by the producer's threads ({how}: no TMA)"
            if self.overlap:
                head += "; the last dot overlaps the next iteration's first"
            if self.chain > 1:
                head += f"; a chain of {self.chain} K loops on one ring"
            if self.kept_tma:
                head += f"; {self.kept_tma} loop-invariant A operand(s) copied by TMA once"
            if self.cta_pair:
                head += (
                    "; a CTA pair ("
                    + (
                        "tcgen05.mma.cta_group::2"
                        if self.mma == "tcgen05"
                        else "B multicast by TMA to both CTAs"
                    )
                    + f", {m // 2} rows per CTA)"
                )
        if self.pair_declined and self.taken:
            head += f"; one CTA, not a pair: {self.pair_declined}"
        if self.pair_rows:
            head += f"; the tile block's rows divided between a CTA pair, {self.pair_rows} each"
        if self.cap_dropped:
            head += "; the occupancy hint's .maxnreg dropped (the accumulators do not fit it)"
        if self.taken:
            head += (
                "; TMA store" if self.tma_store else f"; st.global epilogue ({self.store_reason})"
            )
            if self.tmem_store and self.mma == "tcgen05":
                head += "; stored from the TMEM rows 32 columns at a time"
            elif self.tmem_store:
                head += "; stored from the wgmma fragment through the ring, coalesced"
        return head


def elem_key(t) -> Optional[str]:
    """The element key of a tile type (``mma_choice.element_key``: "f16", "tf32", ...)."""
    from tilegen.runtime.layouts.mma_choice import element_key

    return element_key(t)


def loop_dot(loop: Operation) -> Optional[Operation]:
    """The K loop's one dot at the top of its body (the GEMM form), or None."""
    dots = [o for o in loop.regions[0].blocks[0].ops if o.name == "nv_tileaa.dot"]
    return dots[0] if len(dots) == 1 else None


def shared_budget(func, sm: int, stage: int, fixed: int = 64 * 1024) -> int:
    """Shared memory the stages and their neighbours may take: the share that lets the
    ``occupancy`` hint's CTAs fit on an SM (``targets.occupancy_shared``), where two stages
    still fit in it beside ``fixed`` bytes; else the CTA's whole opt-in (the hint then cannot
    be met by any ring)."""
    from tilegen.runtime.layouts.kernel import kernel_spec_int
    from tilegen.runtime.targets import occupancy_shared, shared_optin

    share = occupancy_shared(sm, kernel_spec_int(func, "occupancy"))
    if share - fixed - SMEM_EXTRA >= 2 * stage:
        return share
    return shared_optin(sm)


def report(decisions) -> str:
    """The ``async-plan`` artifact: one line per kernel."""
    return "".join(f"// async: {d.line()}\n" for d in decisions)
