"""tcgen05: sm_100 tensor-core MMA with the accumulator in tensor memory (docs/pipelines.md).

PTX forms (PTX ISA 8.6+, ``.target sm_100a``; assembled by ptxas in the tests):

* ``tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], ncols`` (one warp; the TMEM
  address lands in shared ``slot``), ``tcgen05.relinquish_alloc_permit``, ``tcgen05.dealloc``;
* ``tcgen05.mma.cta_group::1.kind::f16 [tmem], adesc, bdesc, idesc, enable_input_d`` (one
  thread), ``tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [mbar]`` -
  the barrier completes when every MMA the thread issued before it completed;
* ``tcgen05.ld.sync.aligned.32x32b.xN.b32`` (warp w of a warp group reads TMEM lanes
  32 (w % 4) ..: accumulator rows), ``tcgen05.wait::ld``, ``tcgen05.fence::before/after_thread_sync``.

The instruction descriptor and the shared-memory descriptors were checked against tileiras's
sm_100 PTX for the corpus matmul (``68222992`` = M 64, N 64, f32 D, f16 A/B, B MN-major).
"""

from __future__ import annotations

#: A/B element -> (tcgen05.mma kind, format code in instruction descriptor bits 7-9 / 10-12);
#: i8 is the signed code (u8 is 0)
KIND_FORMAT = {
    "f16": ("f16", 0),
    "bf16": ("f16", 1),
    "tf32": ("tf32", 2),
    "f8E4M3FN": ("f8f6f4", 0),
    "f8E5M2": ("f8f6f4", 1),
    "i8": ("i8", 1),
}
#: kind::f16 A/B formats (kept for callers of the f16-only form)
AB_FORMAT = {"f16": 0, "bf16": 1}
#: D format (bits 4-5)
D_FORMAT = {"f16": 0, "f32": 1, "s32": 2, "i32": 2}
#: sm_100 shared-memory descriptor swizzle field (bits 61-63)
SWIZZLE_MODE = {0: 0, 128: 2, 64: 4, 32: 6}


def kind(ab: str) -> str:
    """The ``tcgen05.mma`` kind of an A/B element (``f16``, ``tf32``, ``f8f6f4``, ``i8``)."""
    return KIND_FORMAT[ab][0]


def instruction_descriptor(
    m: int,
    n: int,
    ab: str = "f16",
    d: str = "f32",
    a_mn_major=False,
    b_mn_major=True,
    b_elem: str = "",
    unsigned: tuple = (False, False),
    saturate: bool = False,
) -> int:
    """The 32-bit instruction descriptor of a dense tcgen05.mma (kind::f16, tf32, f8f6f4, i8):
    D format in bits 4-5, A/B formats in 7-9/10-12, A/B major-ness in 15/16 (1: MN-major),
    N >> 3 in 17-22, M >> 4 in 24-28. ``b_elem`` (default ``ab``) for mixed 8-bit floats;
    ``unsigned`` per operand for kind::i8 (u8 is format 0); ``saturate`` sets bit 3 (kind::i8:
    the s32 accumulator saturates, as wgmma's ``.satfinite`` and tileiras's descriptor do)."""
    if m == 256:  # cta_group::2 (a CTA pair: 128 rows in each)
        if n % 16 or not 32 <= n <= 256:
            raise ValueError(f"no cta_group::2 kind::{kind(ab)} MMA of shape {m}x{n}")
    elif m not in (64, 128) or n % 8 or not 8 <= n <= 256:
        raise ValueError(f"no cta_group::1 kind::{kind(ab)} MMA of shape {m}x{n}")
    fa = KIND_FORMAT[ab][1]
    fb = KIND_FORMAT[b_elem or ab][1]
    if ab == "i8":
        fa, fb = (0 if unsigned[0] else 1), (0 if unsigned[1] else 1)
    return (
        (int(saturate) << 3)
        | (D_FORMAT[d] << 4)
        | (fa << 7)
        | (fb << 10)
        | (int(a_mn_major) << 15)
        | (int(b_mn_major) << 16)
        | ((n >> 3) << 17)
        | ((m >> 4) << 24)
    )


def smem_descriptor_hi(sbo: int, swizzle: int, atom: int = 16) -> int:
    """High word of an sm_100 shared-memory descriptor: SBO >> 4 in bits 32-45, the fixed
    version bit 46, the swizzle mode in 61-63 (1: 128B_BASE32B, the 128-byte swizzle of 32-byte
    atoms, for ``atom`` 32)."""
    mode = 1 if atom == 32 else SWIZZLE_MODE[swizzle]
    return (sbo >> 4) | (1 << 14) | (mode << 29)


def smem_descriptor(em, start, lbo: int, sbo: int, swizzle: int, atom: int = 16) -> str:
    lo = em.new("b32")
    em.ins(f"shr.u32 {lo}, {start}, 4")
    em.ins(f"and.b32 {lo}, {lo}, 16383")
    if lbo:
        em.ins(f"or.b32 {lo}, {lo}, {(lbo >> 4) << 16}")
    d = em.new("b64")
    em.ins(f"mov.b64 {d}, {{{lo}, {smem_descriptor_hi(sbo, swizzle, atom)}}}")
    return d


def columns(n: int) -> int:
    """TMEM columns to allocate for an N-wide f32 accumulator: a power of two >= 32."""
    c = 32
    while c < n:
        c *= 2
    return c


def alloc_columns(em, wg, consumer_wg: int, slot: str, ncols: int) -> None:
    """Warp 0 of the consumer warp group allocates ``ncols`` TMEM columns (address -> ``slot``)."""
    em.need_isa("8.6")
    w = em.new("b32")
    em.ins(f"mov.u32 {w}, %tid.x")
    em.ins(f"shr.u32 {w}, {w}, 5")
    p = em.new("pred")
    em.ins(f"setp.eq.u32 {p}, {w}, 0")
    skip = em.new_label("alloc")
    em.ins(f"@!{p} bra {skip}")
    em.ins(f"tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [{slot}], {ncols}")
    em.ins("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned")
    em.label(skip)


def dealloc_columns(em, wg, consumer_wg: int, slot: str, ncols: int) -> None:
    w = em.new("b32")
    em.ins(f"mov.u32 {w}, %tid.x")
    em.ins(f"shr.u32 {w}, {w}, 5")
    p = em.new("pred")
    em.ins(f"setp.eq.u32 {p}, {w}, 0")
    skip = em.new_label("dealloc")
    em.ins(f"@!{p} bra {skip}")
    t = em.new("b32")
    em.ins(f"ld.shared.u32 {t}, [{slot}]")
    em.ins(f"tcgen05.dealloc.cta_group::1.sync.aligned.b32 {t}, {ncols}")
    em.label(skip)


def consumer(em, c) -> None:
    """The sm_100 consumer warp group: thread 0 issues tcgen05.mma per stage into the TMEM
    accumulator and commits each stage's MMAs to its empty barrier (the stage is free once
    they completed) and the last ones to the done barrier; then all four warps read their 32
    accumulator rows with tcgen05.ld and store them."""
    from tilegen.runtime.codegen.pipeline import Ring, mbarrier_wait, release_map_slot

    cfg = c.cfg
    n = cfg.name
    taddr = em.new("b32")
    em.ins(f"ld.shared.u32 {taddr}, [{c.tmem_slot}]")
    issuer = em.new("pred")
    em.ins(f"setp.eq.u32 {issuer}, {c.tid}, 0")
    skip = em.new_label("mma_done")
    em.ins(f"@!{issuer} bra {skip}")
    ring = Ring(cfg.stages)
    ring.start(em, 0)
    kt = em.new("b32")
    em.ins(f"mov.b32 {kt}, 0")
    acc_in = em.new("pred")
    em.ins(f"setp.ne.u32 {acc_in}, {c.tid}, {c.tid}")  # the first MMA overwrites D
    idesc = instruction_descriptor(cfg.bm, cfg.bn, cfg.elem)
    top, end = em.new_label("issue"), em.new_label("issued")
    em.label(top)
    stop = em.new("pred")
    em.ins(f"setp.ge.s32 {stop}, {kt}, {c.ktiles}")
    em.ins(f"@{stop} bra {end}")
    mbarrier_wait(em, c.full(ring.stage), ring.phase)
    em.ins("tcgen05.fence::after_thread_sync")
    base = em.new("b32")
    em.ins(f"mad.lo.s32 {base}, {ring.stage}, {c.stage_bytes}, {c.smem}")
    for kk in range(cfg.bk // 16):
        a_start, b_start = em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {a_start}, {base}, {kk * 32}")
        em.ins(f"add.s32 {b_start}, {base}, {cfg.a_bytes + kk * 16 * 128}")
        da = smem_descriptor(em, a_start, 16, 1024, 128)
        db = smem_descriptor(em, b_start, cfg.bk * 128, 1024, 128)
        em.ins(f"tcgen05.mma.cta_group::1.kind::f16 [{taddr}], {da}, {db}, {idesc}, {acc_in}")
        em.ins(f"setp.eq.u32 {acc_in}, {c.tid}, {c.tid}")
    em.ins(
        f"tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 "
        f"[{c.empty(ring.stage)}]"
    )
    ring.advance(em)
    em.ins(f"add.s32 {kt}, {kt}, 1")
    em.ins(f"bra {top}")
    em.label(end)
    em.ins(f"tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [{c.done_bar}]")
    em.label(skip)
    mbarrier_wait(em, c.done_bar, 0)
    em.ins("tcgen05.fence::after_thread_sync")
    release_map_slot(em, cfg, c.tid, c.maps_off)
    # epilogue: warp w reads TMEM lanes (rows) 32w .. 32w + 31, 32 columns at a time
    warp, lane = em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {warp}, {c.tid}, 5")
    em.ins(f"and.b32 {lane}, {c.tid}, 31")
    row = em.new("b32")
    em.ins(f"mad.lo.s32 {row}, {warp}, 32, {c.m0}")
    em.ins(f"add.s32 {row}, {row}, {lane}")
    cptr, cst = em.new("b64"), em.new("b32")
    em.ins(f"ld.param.u64 {cptr}, [{n}_c]")
    em.ins(f"cvta.to.global.u64 {cptr}, {cptr}")
    em.ins(f"ld.param.u32 {cst}, [{n}_c_stride0]")
    rok = em.new("pred")
    em.ins(f"setp.lt.s32 {rok}, {row}, {c.m_size}")
    lane_base = em.new("b32")
    em.ins(f"shl.b32 {lane_base}, {warp}, 21")  # (32 w) << 16: the TMEM lane field
    em.ins(f"add.s32 {lane_base}, {lane_base}, {taddr}")
    for chunk in range(cfg.bn // 32):
        regs = [em.new("b32") for _ in range(32)]
        src = em.new("b32")
        em.ins(f"add.s32 {src}, {lane_base}, {32 * chunk}")
        em.ins(f"tcgen05.ld.sync.aligned.32x32b.x32.b32 {{{', '.join(regs)}}}, [{src}]")
        em.ins("tcgen05.wait::ld.sync.aligned")
        for i, r in enumerate(regs):
            col = em.new("b32")
            em.ins(f"add.s32 {col}, {c.n0}, {32 * chunk + i}")
            ok = em.new("pred")
            em.ins(f"setp.lt.s32 {ok}, {col}, {c.n_size}")
            em.ins(f"and.pred {ok}, {ok}, {rok}")
            idx, addr = em.new("b32"), em.new("b64")
            em.ins(f"mad.lo.s32 {idx}, {row}, {cst}, {col}")
            em.ins(f"mul.wide.s32 {addr}, {idx}, 4")
            em.ins(f"add.s64 {addr}, {cptr}, {addr}")
            em.ins(f"@{ok} st.global.b32 [{addr}], {r}")
    em.ins("tcgen05.fence::before_thread_sync")
