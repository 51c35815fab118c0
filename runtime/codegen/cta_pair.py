"""A CTA pair (docs/pipelines.md sections 18-19): the GEMM form of the async path for a
kernel whose ``num_cta_in_cga`` hint is 2 and whose tile has 256 rows. On sm_90 (section 19)
each CTA runs its own wgmmas on its 128 rows and the whole of B: CTA r copies B's column boxes
r, r + 2, ... by TMA multicast into both CTAs, and a stage is free once both CTAs' consumers
arrived on both CTAs' empty barriers. On sm_100, as follows.

The kernel is launched with ``.reqnctapercluster 2`` and ``.blocksareclusters`` (the grid
counts clusters, so cuTile's grid is unchanged and the tile block id is ``%clusterid``). Each
CTA of the pair stages 128 rows of A and half of B's columns; the even CTA's thread 0 issues
``tcgen05.mma.cta_group::2`` (M 256), which reads both CTAs' stages and writes 128 accumulator
rows into each CTA's tensor memory. A stage's full barrier is the even CTA's: its producer
expects both CTAs' bytes, and both producers' TMA copies (``.cta_group::2``) complete there.
The MMAs' commits arrive on both CTAs' empty and done barriers (``.multicast::cluster``). Each
CTA then reads its own rows and stores them with its own TMA store."""

from __future__ import annotations

#: the CTA pair's mask for multicast commits
PAIR_MASK = 0b11


def group(pair: bool) -> str:
    """The ``.cta_group`` modifier of every tcgen05 instruction of the kernel."""
    return "cta_group::2" if pair else "cta_group::1"


def rank(em) -> str:
    """A b32 register with this CTA's rank in the pair (0: the even CTA, which issues)."""
    r = em.new("b32")
    em.ins(f"mov.u32 {r}, %cluster_ctarank")
    return r


def is_leader(em, rank_reg: str) -> str:
    p = em.new("pred")
    em.ins(f"setp.eq.u32 {p}, {rank_reg}, 0")
    return p


def cluster_sync(em) -> None:
    """Every thread of both CTAs: barriers initialised and TMEM allocated in both before any
    remote arrival (the CTA's own ``bar.sync`` is subsumed)."""
    em.ins("barrier.cluster.arrive.release.aligned")
    em.ins("barrier.cluster.wait.acquire.aligned")


def leader_address(em, addr: str) -> str:
    """The shared::cluster address of the even CTA's barrier at this CTA's offset ``addr``."""
    r = em.new("b32")
    em.ins(f"mapa.shared::cluster.u32 {r}, {addr}, 0")
    return r


def arrive_leader(em, pred: str, base: str, off: int) -> None:
    """Thread ``pred`` arrives on the even CTA's barrier at ``base + off`` (after
    its CTA's barrier: the arrival releases what every thread of the CTA wrote, tcgen05.st
    included once fenced by ``tcgen05.fence::before_thread_sync``)."""
    r = em.new("b32")
    em.ins(f"add.s32 {r}, {base}, {off}")
    r = leader_address(em, r)
    em.ins(f"@{pred} mbarrier.arrive.release.cluster.shared::cluster.b64 _, [{r}]")


def wait_both(em, addr: str) -> None:
    """The even CTA's issuer waits for phase 0 of its barrier ``addr`` (both CTAs arrived:
    :func:`arrive_leader`), acquiring at cluster scope, then orders its tcgen05 ops after."""
    done = em.new("pred")
    top = em.new_label("pair_wait")
    em.label(top)
    em.ins(f"mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 {done}, [{addr}], 0")
    em.ins(f"@!{done} bra {top}")
    em.ins("tcgen05.fence::after_thread_sync")


def commit(em, barrier: str, pair: bool) -> None:
    """``tcgen05.commit`` of the thread's MMAs to ``barrier``: on a pair, to the barrier at
    that offset in both CTAs."""
    g = group(pair)
    if not pair:
        em.ins(f"tcgen05.commit.{g}.mbarrier::arrive::one.shared::cluster.b64 [{barrier}]")
        return
    m = em.new("b16")
    em.ins(f"mov.b16 {m}, {PAIR_MASK}")
    em.ins(
        f"tcgen05.commit.{g}.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 "
        f"[{barrier}], {m}"
    )


def shifted(em, coords: list, x, offsets: dict) -> list:
    """A staged operand's TMA coordinates (innermost first) moved to this CTA's part
    (``x.pair``: the coordinate and its step per rank; ``offsets`` caches rank * step)."""
    if x.pair is None:
        return coords
    k, step = x.pair
    off = offsets.get(id(x))
    if off is None:
        raise ValueError("the pair offsets are computed before the producer loop")
    moved = em.new("b32")
    em.ins(f"add.s32 {moved}, {coords[k]}, {off}")
    return coords[:k] + [moved] + coords[k + 1 :]


def offsets(em, staged: list, rank_reg: str) -> dict:
    """rank * step per staged operand with a pair part (before the producer loop)."""
    out = {}
    for x in staged:
        if x.pair is not None:
            r = em.new("b32")
            em.ins(f"mul.lo.s32 {r}, {rank_reg}, {x.pair[1]}")
            out[id(x)] = r
    return out


def release_both(em, addr: str, pred, peer: str, lane0: str) -> None:
    """sm_90: lane 0 of every consumer warp (and ``pred``, None: always) releases the stage at
    this CTA's offset ``addr`` in both CTAs (the other CTA's multicast writes this CTA's stage
    too): the empty barriers count ``release_count`` arrivals. One lane suffices: the stage's
    reads were the warp group's wgmmas, finished once ``wgmma.wait_group`` returns in any of
    its warps, and the consumers wrote nothing the other CTA reads - which is also why the
    arrivals are ``.release.cta`` (the default), as tileiras's. (A tf32 operand the consumers
    round in place is written before their ``fence.proxy.async`` and barrier, and read back
    by the wgmmas that ``wait_group`` retired: those writes are done before any release.)
    Each consumer thread's ``.release.cluster`` arrival in both CTAs put ``MEMBAR.ALL.GPU``
    before each: on an H200 the pair ran at a third of the speed of the same kernel without
    it (docs/pipelines.md section 46)."""
    at = lane0
    if pred is not None:
        at = em.new("pred")
        em.ins(f"and.pred {at}, {pred}, {lane0}")
    em.ins(f"@{at} mbarrier.arrive.shared::cta.b64 _, [{addr}]")
    r = em.new("b32")
    em.ins(f"mapa.shared::cluster.u32 {r}, {addr}, {peer}")
    em.ins(f"@{at} mbarrier.arrive.shared::cluster.b64 _, [{r}]")


def release_count(consumer_threads: int) -> int:
    """The arrivals that free a stage of an sm_90 pair: lane 0 of each consumer warp of both
    CTAs (:func:`release_both`)."""
    return 2 * (consumer_threads // 32)


def lane0(em) -> str:
    """A predicate: this thread is lane 0 of its warp."""
    lane, p = em.new("b32"), em.new("pred")
    em.ins(f"mov.u32 {lane}, %laneid")
    em.ins(f"setp.eq.u32 {p}, {lane}, 0")
    return p
