"""mbarrier pipelines and warp specialization (docs/pipelines.md, "Code").

The PTX of an nv_tileas pipeline: a ring of ``stages`` stage buffers, each with a *full*
barrier (1 arrival - the producer's ``arrive.expect_tx`` - plus the TMA transaction bytes) and
an *empty* barrier (the consumers' arrivals). The producer waits on empty[s] with the parity of
the previous lap (a fresh barrier counts its phase -1 as complete, so the first lap does not
wait), announces the bytes and issues the copies; consumers wait on full[s] with the current
lap's parity, compute, and arrive on empty[s]. The lap parity flips when the stage index wraps.

:func:`ws_gemm_ptx` puts it together for a GEMM tile (the form the pass's IR lowers to once
codegen reads it; tests assemble it with ptxas and run it in the simulator): cuTile's launch ABI
(each array as pointer, shape per dim, stride per dim), one producer warp group that gives its
registers away (``setmaxnreg.dec``), consumer warp groups that take them (``setmaxnreg.inc``)
and run wgmma (sm_90) or tcgen05.mma (sm_100, runtime/codegen/tcgen05.py).

The emitter protocol is Emitter's (runtime/codegen/core.py): ``ins``, ``new``, ``new_label``,
``label``, ``need_isa``; :class:`PtxBuilder` is a standalone one.
"""

from __future__ import annotations


from tilegen.runtime.codegen import tma
from tilegen.runtime.records import dataclass

#: the suspend-time hint of mbarrier.try_wait (ns); tileiras uses the same order of magnitude
TRY_WAIT_HINT = 10000000
#: SMs the per-SM tensor-map slot arrays cover (%smid < 256 on every GPU tilegen targets)
MAX_SMS = 256
#: shared memory of one SM (sm_90/sm_100: 228 KB) and the 1 KB the driver reserves per CTA
SM_SHARED = 233472
CTA_RESERVED_SHARED = 1024


def map_slots(threads: int, smem_bytes: int) -> int:
    """Tensor-map slots per SM: the most CTAs of this kernel that can be resident on one SM
    (by threads and shared memory; at most 32, one bit each in the SM's b32 bitmap word), so a
    CTA always finds a free slot."""
    by_smem = SM_SHARED // (smem_bytes + CTA_RESERVED_SHARED)
    return max(1, min(32, 2048 // threads, by_smem))


class PtxBuilder:
    """A minimal emitter: virtual registers per class, labels, instructions, ISA floor."""

    _PREFIX = {"b32": "%r", "b64": "%rd", "pred": "%p", "f32": "%f", "b16": "%h"}
    _DECL = {"b32": ".b32", "b64": ".b64", "pred": ".pred", "f32": ".f32", "b16": ".b16"}

    def __init__(self):
        self.lines: list[str] = []
        self.counts: dict[str, int] = {k: 0 for k in self._PREFIX}
        self._labels = 0
        self.isa = (8, 0)

    def ins(self, text: str) -> None:
        self.lines.append("\t" + text + ";")

    def raw(self, text: str) -> None:
        self.lines.append(text)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def new_label(self, prefix: str = "L") -> str:
        self._labels += 1
        return f"$L__{prefix}_{self._labels}"

    def new(self, cls: str) -> str:
        self.counts[cls] += 1
        return f"{self._PREFIX[cls]}{self.counts[cls]}"

    def need_isa(self, version: str) -> None:
        major, minor = (int(x) for x in version.split("."))
        self.isa = max(self.isa, (major, minor))

    def declarations(self) -> list[str]:
        return [
            f"\t.reg {self._DECL[c]} \t{p}<{self.counts[c] + 1}>;"
            for c, p in self._PREFIX.items()
            if self.counts[c]
        ]


# --------------------------------------------------------------------------- mbarriers


def mbarrier_init(em, addr, count: int) -> None:
    em.ins(f"mbarrier.init.shared::cta.b64 [{addr}], {count}")


def mbarrier_init_fence(em) -> None:
    """Make barrier initialisation visible to the async proxy (TMA complete_tx) and the cluster."""
    em.ins("fence.mbarrier_init.release.cluster")


def mbarrier_wait(em, addr, parity) -> None:
    """Spin until the phase of ``addr`` with ``parity`` (a b32 register or 0/1) completed."""
    done = em.new("pred")
    top = em.new_label("wait")
    em.label(top)
    em.ins(f"mbarrier.try_wait.parity.shared::cta.b64 {done}, [{addr}], {parity}, {TRY_WAIT_HINT}")
    em.ins(f"@!{done} bra {top}")


def mbarrier_arrive(em, addr) -> None:
    em.ins(f"mbarrier.arrive.shared::cta.b64 _, [{addr}]")


def mbarrier_arrive_expect_tx(em, addr, nbytes) -> None:
    em.ins(f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [{addr}], {nbytes}")


def setmaxnreg(em, inc: bool, regs: int) -> None:
    """Re-balance registers between warp groups (sm_90a/sm_100a; PTX ISA 8.0): every warp of the
    warp group executes it."""
    em.need_isa("8.0")
    em.ins(f"setmaxnreg.{'inc' if inc else 'dec'}.sync.aligned.u32 {regs}")


@dataclass
class Ring:
    """Stage bookkeeping of one side: the stage index and lap parity registers."""

    stages: int
    stage: str = ""
    phase: str = ""

    def start(self, em, phase: int = 0) -> None:
        self.stage, self.phase = em.new("b32"), em.new("b32")
        em.ins(f"mov.b32 {self.stage}, 0")
        em.ins(f"mov.b32 {self.phase}, {phase}")

    def advance(self, em) -> None:
        """stage += 1; on wrap stage = 0 and the parity flips."""
        wrap = em.new("pred")
        em.ins(f"add.s32 {self.stage}, {self.stage}, 1")
        em.ins(f"setp.eq.s32 {wrap}, {self.stage}, {self.stages}")
        em.ins(f"@{wrap} mov.b32 {self.stage}, 0")
        em.ins(f"@{wrap} xor.b32 {self.phase}, {self.phase}, 1")


# --------------------------------------------------------------------------- GEMM kernels


def cfg_slots(cfg: "GemmConfig") -> int:
    return map_slots(cfg.threads, smem_layout(cfg)[-1])


def smem_layout(cfg: "GemmConfig") -> tuple[int, int, int, int]:
    """(bytes per stage, barrier offset, tensor-map offset, total) of the kernel's shared memory:
    1024-aligned stages, full/empty/done barriers and the TMEM address slot, then (device maps)
    two 128-byte maps."""
    align = 1024
    stage_bytes = (cfg.stage_bytes + align - 1) // align * align
    bar_off = cfg.stages * stage_bytes
    extra = 8 * (2 * cfg.stages + 1) + 8
    maps_off = (bar_off + extra + 8 + 127) // 128 * 128
    total = maps_off + (2 * tma.TENSORMAP_BYTES if cfg.maps == "device" else 0)
    return stage_bytes, bar_off, maps_off, total


@dataclass(frozen=True)
class GemmConfig:
    """A warp-specialized TMA GEMM tile: C[bm x bn] (f32) += A[bm x bk] @ B[bk x bn] over K."""

    bm: int = 128
    bn: int = 128
    bk: int = 64
    stages: int = 4
    elem: str = "f16"
    sm: int = 90
    #: "param": the maps are hidden kernel params (tileiras's convention: the host fills them);
    #: "device": the kernel builds them (tensormap.replace) in per-SM global slots
    maps: str = "param"
    producer_regs: int = 40
    consumer_regs: int = 232
    name: str = "tilegen_ws_gemm"

    @property
    def consumer_groups(self) -> int:
        return self.bm // 64 if self.sm == 90 else 1

    @property
    def threads(self) -> int:
        return 128 * (self.consumer_groups + 1)

    @property
    def elem_bytes(self) -> int:
        return 2

    def a_copies(self):
        return tma.column_boxes((self.bm, self.bk), self.elem_bytes)

    def b_copies(self):
        return tma.column_boxes((self.bk, self.bn), self.elem_bytes)

    @property
    def a_bytes(self) -> int:
        return self.bm * self.bk * self.elem_bytes

    @property
    def b_bytes(self) -> int:
        return self.bk * self.bn * self.elem_bytes

    @property
    def stage_bytes(self) -> int:
        return self.a_bytes + self.b_bytes

    def check(self) -> None:
        if self.sm == 90 and (self.bm % 64 or not 64 <= self.bm <= 256):
            raise ValueError("sm_90: bm must be 64, 128, 192 or 256 (one warp group per 64 rows)")
        if self.sm == 100 and self.bm != 128:
            raise ValueError("sm_100: bm must be 128 (one tcgen05.mma M=128, cta_group::1)")
        if self.bn % 64 or not 64 <= self.bn <= 256:
            raise ValueError("bn must be a multiple of 64 in [64, 256]")
        if self.bk * self.elem_bytes != 128:
            raise ValueError("bk must fill one 128-byte swizzle row (64 16-bit elements)")
        if self.stages < 2:
            raise ValueError("a pipeline needs two stages at least")
        if self.sm == 90:
            # ptxas caps every thread at 65536 / .maxntid registers (rounded down to 8) before
            # setmaxnreg rebalances: a consumer's bn/2 f32 accumulators plus ~24 addressing
            # registers must fit under that cap (measured against ptxas for every bm x bn).
            cap = (65536 // self.threads) & ~7
            if self.bn // 2 + 24 > cap:
                raise ValueError(
                    f"sm_90: a {self.bm}x{self.bn} tile needs {self.bn // 2 + 24} registers per "
                    f"consumer thread, over ptxas's cap of {cap} for {self.threads} threads"
                )


def _abi_params(cfg: GemmConfig) -> tuple[list[str], list[str]]:
    """The entry's parameter declarations (cuTile's flattening: pointer, shapes, strides per
    array, i32 index type) and the hidden tensor-map params of the "param" convention."""
    decl = []
    for arr in ("a", "b", "c"):
        decl.append(f".param .u64 .ptr .global .align 16 {cfg.name}_{arr}")
        for what in ("size0", "size1", "stride0", "stride1"):
            decl.append(f".param .u32 {cfg.name}_{arr}_{what}")
    hidden = []
    if cfg.maps == "param":
        hidden = [f".param .align 64 .b8 {cfg.name}_tmap_{x}[128]" for x in ("a", "b")]
    return decl, hidden


def ws_gemm_ptx(cfg: GemmConfig) -> str:
    """The PTX of one warp-specialized TMA GEMM kernel (grid: (ceil(M/bm), ceil(N/bn)))."""
    cfg.check()
    from tilegen.runtime.codegen import tcgen05

    em = PtxBuilder()
    n = cfg.name
    S = cfg.stages
    stage_bytes, bar_off, maps_off, smem_bytes = smem_layout(cfg)
    slots = cfg_slots(cfg)

    def p(name):
        r = em.new("b32")
        em.ins(f"ld.param.u32 {r}, [{n}_{name}]")
        return r

    smem = em.new("b32")
    em.ins(f"mov.u32 {smem}, {n}_smem")
    tid = em.new("b32")
    em.ins(f"mov.u32 {tid}, %tid.x")
    wg = em.new("b32")
    em.ins(f"shr.u32 {wg}, {tid}, 7")
    m_size, k_size = p("a_size0"), p("a_size1")
    n_size = p("b_size1")
    bx, by = em.new("b32"), em.new("b32")
    em.ins(f"mov.u32 {bx}, %ctaid.x")
    em.ins(f"mov.u32 {by}, %ctaid.y")
    m0, n0 = em.new("b32"), em.new("b32")
    em.ins(f"mul.lo.s32 {m0}, {bx}, {cfg.bm}")
    em.ins(f"mul.lo.s32 {n0}, {by}, {cfg.bn}")
    ktiles = em.new("b32")
    em.ins(f"add.s32 {ktiles}, {k_size}, {cfg.bk - 1}")
    em.ins(f"shr.u32 {ktiles}, {ktiles}, {(cfg.bk).bit_length() - 1}")

    def full(stage):
        a = em.new("b32")
        em.ins(f"mad.lo.s32 {a}, {stage}, 8, {smem}")
        em.ins(f"add.s32 {a}, {a}, {bar_off}")
        return a

    def empty(stage):
        a = em.new("b32")
        em.ins(f"mad.lo.s32 {a}, {stage}, 8, {smem}")
        em.ins(f"add.s32 {a}, {a}, {bar_off + 8 * S}")
        return a

    done_bar = f"{n}_smem+{bar_off + 16 * S}"
    tmem_slot = f"{n}_smem+{bar_off + 16 * S + 8}"

    # ---- barriers (thread 0), tensor maps, TMEM
    t0 = em.new("pred")
    em.ins(f"setp.eq.u32 {t0}, {tid}, 0")
    skip = em.new_label("init")
    em.ins(f"@!{t0} bra {skip}")
    empty_count = 1 if cfg.sm == 100 else 128 * cfg.consumer_groups
    for s in range(S):
        mbarrier_init(em, f"{n}_smem+{bar_off + 8 * s}", 1)
        mbarrier_init(em, f"{n}_smem+{bar_off + 8 * (S + s)}", empty_count)
    mbarrier_init(em, done_bar, 1)
    mbarrier_init_fence(em)
    em.label(skip)
    if cfg.maps == "device":
        _build_maps(em, cfg, tid, maps_off)
    if cfg.sm == 100:
        tcgen05.alloc_columns(em, wg, cfg.consumer_groups, tmem_slot, tcgen05.columns(cfg.bn))
    em.ins("bar.sync 0")
    tmaps = _map_addresses(em, cfg, maps_off)

    # ---- producer warp group (the last one): one thread issues the copies
    prod = em.new("pred")
    em.ins(f"setp.eq.u32 {prod}, {wg}, {cfg.consumer_groups}")
    consumer = em.new_label("consumer")
    em.ins(f"@!{prod} bra {consumer}")
    setmaxnreg(em, False, cfg.producer_regs)
    leader = em.new("pred")
    em.ins(f"setp.eq.u32 {leader}, {tid}, {128 * cfg.consumer_groups}")
    out = em.new_label("producer_done")
    em.ins(f"@!{leader} bra {out}")
    for t in tmaps:
        if cfg.maps == "device":
            tma.acquire_tensormap(em, t)
        tma.prefetch_tensormap(em, t)
    ring = Ring(S)
    ring.start(em, 0)
    kt = em.new("b32")
    em.ins(f"mov.b32 {kt}, 0")
    top, end = em.new_label("produce"), em.new_label("produced")
    em.label(top)
    stop = em.new("pred")
    em.ins(f"setp.ge.s32 {stop}, {kt}, {ktiles}")
    em.ins(f"@{stop} bra {end}")
    lap = em.new("b32")
    em.ins(f"xor.b32 {lap}, {ring.phase}, 1")
    mbarrier_wait(em, empty(ring.stage), lap)
    fb = full(ring.stage)
    mbarrier_arrive_expect_tx(em, fb, cfg.stage_bytes)
    base = em.new("b32")
    em.ins(f"mad.lo.s32 {base}, {ring.stage}, {stage_bytes}, {smem}")
    k0 = em.new("b32")
    em.ins(f"mul.lo.s32 {k0}, {kt}, {cfg.bk}")
    for col, box in cfg.a_copies():
        dst = em.new("b32")
        em.ins(f"add.s32 {dst}, {base}, {col * cfg.bm * cfg.elem_bytes}")
        tma.tma_load(em, dst, tmaps[0], [k0, m0], fb)
    for col, box in cfg.b_copies():
        dst, nc = em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {dst}, {base}, {cfg.a_bytes + col * cfg.bk * cfg.elem_bytes}")
        em.ins(f"add.s32 {nc}, {n0}, {col}")
        tma.tma_load(em, dst, tmaps[1], [nc, k0], fb)
    ring.advance(em)
    em.ins(f"add.s32 {kt}, {kt}, 1")
    em.ins(f"bra {top}")
    em.label(end)
    em.label(out)
    done = em.new_label("exit")
    if cfg.sm == 100:
        em.ins(f"bra {done}")
    else:
        em.ins("ret")

    # ---- consumers
    em.label(consumer)
    setmaxnreg(em, True, cfg.consumer_regs)
    ctx = _ConsumerCtx(
        cfg,
        smem,
        stage_bytes,
        full,
        empty,
        ktiles,
        tid,
        wg,
        m0,
        n0,
        m_size,
        n_size,
        done_bar,
        tmem_slot,
        maps_off,
    )
    if cfg.sm == 90:
        _wgmma_consumer(em, ctx)
    else:
        tcgen05.consumer(em, ctx)
    em.label(done)
    if cfg.sm == 100:
        em.ins("bar.sync 0")
        tcgen05.dealloc_columns(em, wg, cfg.consumer_groups, tmem_slot, tcgen05.columns(cfg.bn))
    em.ins("ret")

    decl, hidden = _abi_params(cfg)
    target = f"sm_{cfg.sm}a"
    isa = "8.6" if cfg.sm == 100 else f"{em.isa[0]}.{em.isa[1]}"
    if cfg.sm == 100:
        isa = max(isa, "8.6")
    head = [
        f".version {isa}",
        f".target {target}",
        ".address_size 64",
        "",
    ]
    if cfg.maps == "device":
        head += [
            f".global .align 128 .b8 {n}_tmaps[{slots * 2 * tma.TENSORMAP_BYTES * MAX_SMS}];",
            f".global .align 8 .b64 {n}_slots[{tma.slot_words(cfg_slots(cfg), MAX_SMS)}];",
            "",
        ]
    params = ",\n\t".join(decl + hidden)
    out_lines = head + [
        f".visible .entry {n}(\n\t{params}\n)",
        f".reqntid {cfg.threads}",
        "{",
        f"\t.shared .align 1024 .b8 {n}_smem[{smem_bytes}];",
        *em.declarations(),
        *em.lines,
        "}",
        "",
    ]
    return "\n".join(out_lines)


def _map_slot_addr(cfg: GemmConfig, maps_off: int) -> str:
    """Where the claimed slot number lives (shared, just below the maps)."""
    return f"{cfg.name}_smem+{maps_off - 8}"


def _build_maps(em, cfg: GemmConfig, tid, maps_off: int) -> None:
    """Device-built maps: lane 0 of warp 0 claims a per-SM global slot and writes both maps in
    shared memory (tensormap.replace), then warp 0 copies them to the slot with the release
    proxy fence (``.sync.aligned``: the whole warp)."""
    n = cfg.name
    w0 = em.new("pred")
    em.ins(f"setp.lt.u32 {w0}, {tid}, 32")
    skip = em.new_label("maps")
    em.ins(f"@!{w0} bra {skip}")
    l0 = em.new("pred")
    em.ins(f"setp.eq.u32 {l0}, {tid}, 0")
    built = em.new_label("built")
    em.ins(f"@!{l0} bra {built}")
    slot, _ = tma.claim_slot(em, f"{n}_slots", cfg_slots(cfg))
    em.ins(f"st.shared.u32 [{_map_slot_addr(cfg, maps_off)}], {slot}")
    for i, (x, sizes, tile) in enumerate(
        (
            ("a", ("a_size1", "a_size0"), (cfg.bm, cfg.bk)),
            ("b", ("b_size1", "b_size0"), (cfg.bk, cfg.bn)),
        )
    ):
        ptr = em.new("b64")
        em.ins(f"ld.param.u64 {ptr}, [{n}_{x}]")
        dims = []
        for d in sizes:
            r = em.new("b32")
            em.ins(f"ld.param.u32 {r}, [{n}_{d}]")
            dims.append(r)
        st, stb = em.new("b32"), em.new("b64")
        em.ins(f"ld.param.u32 {st}, [{n}_{x}_stride0]")
        em.ins(f"mul.wide.u32 {stb}, {st}, {cfg.elem_bytes}")
        (_, box), *_ = tma.column_boxes(tile, cfg.elem_bytes)
        spec = tma.TensorMapSpec(
            cfg.elem, cfg.elem_bytes, ptr, tuple(dims), (stb,), box.box[::-1], box.swizzle
        )
        tma.build_tensormap(em, f"{n}_smem+{maps_off + i * tma.TENSORMAP_BYTES}", spec)
    em.label(built)
    em.ins("bar.warp.sync -1")
    for i, g in enumerate(_slot_maps(em, cfg, maps_off)):
        src = em.new("b32")
        em.ins(f"mov.u32 {src}, {n}_smem")
        em.ins(f"add.s32 {src}, {src}, {maps_off + i * tma.TENSORMAP_BYTES}")
        tma.publish_tensormap(em, g, src)
    em.label(skip)


def _slot_maps(em, cfg: GemmConfig, maps_off: int) -> list[str]:
    """Global addresses of the two maps of this CTA's claimed slot."""
    slot, base, off = em.new("b32"), em.new("b64"), em.new("b64")
    em.ins(f"ld.shared.u32 {slot}, [{_map_slot_addr(cfg, maps_off)}]")
    em.ins(f"mov.u64 {base}, {cfg.name}_tmaps")
    em.ins(f"mul.wide.u32 {off}, {slot}, {2 * tma.TENSORMAP_BYTES}")
    em.ins(f"add.s64 {base}, {base}, {off}")
    out = []
    for i in range(2):
        g = em.new("b64")
        em.ins(f"add.s64 {g}, {base}, {i * tma.TENSORMAP_BYTES}")
        out.append(g)
    return out


def _map_addresses(em, cfg: GemmConfig, maps_off: int) -> list[str]:
    """Generic addresses of the A and B maps: the hidden params, or this CTA's global slot."""
    if cfg.maps == "device":
        return _slot_maps(em, cfg, maps_off)
    out = []
    for x in ("a", "b"):
        r = em.new("b64")
        em.ins(f"mov.u64 {r}, {cfg.name}_tmap_{x}")
        em.ins(f"cvta.param.u64 {r}, {r}")
        out.append(r)
    return out


def release_map_slot(em, cfg: GemmConfig, tid, maps_off: int) -> None:
    """Thread 0 frees the slot once every copy through its maps completed (the consumers
    saw every full barrier)."""
    if cfg.maps != "device":
        return
    l0 = em.new("pred")
    em.ins(f"setp.eq.u32 {l0}, {tid}, 0")
    skip = em.new_label("free")
    em.ins(f"@!{l0} bra {skip}")
    slot = em.new("b32")
    em.ins(f"ld.shared.u32 {slot}, [{_map_slot_addr(cfg, maps_off)}]")
    tma.release_slot(em, f"{cfg.name}_slots", slot)
    em.label(skip)


@dataclass
class _ConsumerCtx:
    cfg: GemmConfig
    smem: str
    stage_bytes: int
    full: object
    empty: object
    ktiles: str
    tid: str
    wg: str
    m0: str
    n0: str
    m_size: str
    n_size: str
    done_bar: str
    tmem_slot: str
    maps_off: int


def wgmma_descriptor(em, start, lbo: int, sbo: int, swizzle: int) -> str:
    """A wgmma shared-memory matrix descriptor (sm_90): start >> 4 in bits 0-13, LBO >> 4 in
    16-29, SBO >> 4 in 32-45, layout type in 62-63 (1: 128B, 2: 64B, 3: 32B swizzle)."""
    return wgmma_descriptor_at(em, wgmma_descriptor_parts(em, start, lbo, sbo, swizzle), 0)


def wgmma_descriptor_parts(em, start, lbo: int, sbo: int, swizzle: int) -> tuple:
    """(low word register, high word constant) of :func:`wgmma_descriptor`: a K loop steps the
    start address through the low word alone (:func:`wgmma_descriptor_at`)."""
    mode = {0: 0, 128: 1, 64: 2, 32: 3}[swizzle]
    hi = (sbo >> 4) | (mode << 30)
    lo = em.new("b32")
    em.ins(f"shr.u32 {lo}, {start}, 4")
    em.ins(f"and.b32 {lo}, {lo}, 16383")
    if lbo:
        em.ins(f"or.b32 {lo}, {lo}, {(lbo >> 4) << 16}")
    return lo, hi


def wgmma_descriptor_at(em, parts: tuple, offset: int) -> str:
    """The descriptor of ``parts`` with its start address ``offset`` bytes further (a 32-bit add
    on the low word: shared addresses stay below 256 KB, so the 14-bit field never carries)."""
    lo, hi = parts
    if offset:
        moved = em.new("b32")
        em.ins(f"add.s32 {moved}, {lo}, {offset >> 4}")
        lo = moved
    d = em.new("b64")
    em.ins(f"mov.b64 {d}, {{{lo}, {hi}}}")
    return d


def _wgmma_consumer(em, c: _ConsumerCtx) -> None:
    """Consumer warp group ``wg`` (rows 64 wg .. of the tile): wait full[s], wgmma over the
    stage, release it, and store the f32 accumulator with bounds checks."""
    cfg = c.cfg
    nacc = cfg.bn // 2
    acc = [em.new("f32") for _ in range(nacc)]
    for r in acc:
        em.ins(f"mov.f32 {r}, 0f00000000")
    ring = Ring(cfg.stages)
    ring.start(em, 0)
    kt = em.new("b32")
    em.ins(f"mov.b32 {kt}, 0")
    rowoff = em.new("b32")
    em.ins(f"mul.lo.s32 {rowoff}, {c.wg}, {64 * 128}")  # 64 rows x 128-byte A rows
    one = em.new("pred")
    em.ins(f"setp.eq.u32 {one}, {c.tid}, {c.tid}")
    top, end = em.new_label("consume"), em.new_label("consumed")
    em.label(top)
    stop = em.new("pred")
    em.ins(f"setp.ge.s32 {stop}, {kt}, {c.ktiles}")
    em.ins(f"@{stop} bra {end}")
    mbarrier_wait(em, c.full(ring.stage), ring.phase)
    base = em.new("b32")
    em.ins(f"mad.lo.s32 {base}, {ring.stage}, {c.stage_bytes}, {c.smem}")
    em.ins("wgmma.fence.sync.aligned")
    ty = {"f16": "f16", "bf16": "bf16"}[cfg.elem]
    regs = ", ".join(acc)
    for kk in range(cfg.bk // 16):
        a_start, b_start = em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {a_start}, {base}, {rowoff}")
        em.ins(f"add.s32 {a_start}, {a_start}, {kk * 32}")
        em.ins(f"add.s32 {b_start}, {base}, {cfg.a_bytes + kk * 16 * 128}")
        da = wgmma_descriptor(em, a_start, 16, 1024, 128)
        db = wgmma_descriptor(em, b_start, cfg.bk * 128, 1024, 128)
        em.ins(
            f"wgmma.mma_async.sync.aligned.m64n{cfg.bn}k16.f32.{ty}.{ty} {{{regs}}}, {da}, {db}, "
            f"{one}, 1, 1, 0, 1"
        )
    em.ins("wgmma.commit_group.sync.aligned")
    em.ins("wgmma.wait_group.sync.aligned 0")
    mbarrier_arrive(em, c.empty(ring.stage))
    ring.advance(em)
    em.ins(f"add.s32 {kt}, {kt}, 1")
    em.ins(f"bra {top}")
    em.label(end)
    release_map_slot(em, cfg, c.tid, c.maps_off)
    _store_accumulator(em, c, acc)


def _store_accumulator(em, c: _ConsumerCtx, acc: list[str]) -> None:
    """Fragment register 4j + q of warp w (of the warp group) holds row 16w + g + 8(q >> 1),
    column 8j + 2t + (q & 1) (g = lane / 4, t = lane % 4)."""
    cfg = c.cfg
    n = cfg.name
    lane, warp, g, t = (em.new("b32") for _ in range(4))
    em.ins(f"and.b32 {lane}, {c.tid}, 31")
    em.ins(f"shr.u32 {warp}, {c.tid}, 5")
    em.ins(f"and.b32 {warp}, {warp}, 3")
    em.ins(f"shr.u32 {g}, {lane}, 2")
    em.ins(f"and.b32 {t}, {lane}, 3")
    row0 = em.new("b32")
    em.ins(f"mad.lo.s32 {row0}, {c.wg}, 64, {c.m0}")
    em.ins(f"mad.lo.s32 {row0}, {warp}, 16, {row0}")
    em.ins(f"add.s32 {row0}, {row0}, {g}")
    col0 = em.new("b32")
    em.ins(f"mad.lo.s32 {col0}, {t}, 2, {c.n0}")
    cptr, cst = em.new("b64"), em.new("b32")
    em.ins(f"ld.param.u64 {cptr}, [{n}_c]")
    em.ins(f"cvta.to.global.u64 {cptr}, {cptr}")
    em.ins(f"ld.param.u32 {cst}, [{n}_c_stride0]")
    for j in range(cfg.bn // 8):
        for q in range(4):
            row, col = em.new("b32"), em.new("b32")
            em.ins(f"add.s32 {row}, {row0}, {8 * (q >> 1)}")
            em.ins(f"add.s32 {col}, {col0}, {8 * j + (q & 1)}")
            ok, ok2 = em.new("pred"), em.new("pred")
            em.ins(f"setp.lt.s32 {ok}, {row}, {c.m_size}")
            em.ins(f"setp.lt.s32 {ok2}, {col}, {c.n_size}")
            em.ins(f"and.pred {ok}, {ok}, {ok2}")
            idx, addr = em.new("b32"), em.new("b64")
            em.ins(f"mad.lo.s32 {idx}, {row}, {cst}, {col}")
            em.ins(f"mul.wide.s32 {addr}, {idx}, 4")
            em.ins(f"add.s64 {addr}, {cptr}, {addr}")
            em.ins(f"@{ok} st.global.f32 [{addr}], {acc[4 * j + q]}")
