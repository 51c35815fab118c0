"""The TMA / mbarrier / warp-specialization / tcgen05 PTX of runtime/codegen/{tma,pipeline,
tcgen05}.py (docs/pipelines.md, "Code").

* the warp-specialized GEMM kernel assembles with ptxas for sm_90a (wgmma consumers) and
  sm_100a (tcgen05), with host-passed and device-built tensor maps, 0 spills, and its SASS
  holds TMA loads (UTMALDG), mbarrier ops (SYNCS), register re-balancing (USETMAXREG) and
  HGMMA / UTCHMMA + UTCBAR;
* the sm_90 kernel runs in tilegen's SIMT simulator (tensor maps given as tileiras's hidden
  params) and matches NumPy exactly on full, partial and multi-lap (K tiles > stages) shapes;
* descriptors and swizzles agree with tileiras's constants and the simulator's swizzle.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.codegen import tcgen05, tma
from tilegen.runtime.codegen.driver import assemble, find_ptxas
from tilegen.runtime.codegen.pipeline import GemmConfig, PtxBuilder, wgmma_descriptor, ws_gemm_ptx

PTXAS = find_ptxas()
CUOBJDUMP = str(Path(PTXAS).with_name("cuobjdump")) if PTXAS else None
needs_ptxas = pytest.mark.skipif(
    PTXAS is None or not Path(CUOBJDUMP or "").is_file(), reason="ptxas/cuobjdump not installed"
)


def _sass_mix(cubin: bytes, tmp_path) -> Counter:
    f = tmp_path / "k.cubin"
    f.write_bytes(cubin)
    out = subprocess.run([CUOBJDUMP, "-sass", str(f)], capture_output=True, text=True).stdout
    return Counter(re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)", out))


@needs_ptxas
@pytest.mark.parametrize("maps", ["param", "device"])
@pytest.mark.parametrize(
    "sm,bm,bn,elem",
    [(90, 128, 128, "f16"), (90, 64, 256, "bf16"), (100, 128, 128, "f16"), (100, 128, 256, "bf16")],
)
def test_ws_gemm_assembles_with_the_async_sass(tmp_path, sm, bm, bn, elem, maps):
    cfg = GemmConfig(sm=sm, bm=bm, bn=bn, elem=elem, maps=maps, stages=4)
    cubin, log = assemble(ws_gemm_ptx(cfg), sm, verbose=True)
    assert f"for 'sm_{sm}a'" in log, log
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log
    mix = _sass_mix(cubin, tmp_path)
    a_boxes, b_boxes = len(cfg.a_copies()), len(cfg.b_copies())
    assert mix["UTMALDG"] == a_boxes + b_boxes, mix
    assert mix["SYNCS"] > 0 and mix["USETMAXREG"] == 2, mix
    if sm == 90:
        assert mix["HGMMA"] == cfg.bk // 16 and "serialized" not in log, mix
    else:
        assert mix["UTCHMMA"] == cfg.bk // 16 and mix["UTCBAR"] == 2, mix
    if maps == "device":
        assert mix["ATOMG"] > 0  # the per-SM slot claim / release


def _run_sim(cfg: GemmConfig, m: int, n: int, k: int, seed: int = 0):
    from tilegen.runtime.ptx.launch import run_ptx

    rng = np.random.default_rng(seed)
    dt = np.float16
    a = rng.integers(-3, 4, (m, k)).astype(dt)
    b = rng.integers(-3, 4, (k, n)).astype(dt)
    c = np.zeros((m, n), np.float32)
    maps = [
        {"array": 0, "box": [cfg.bm, cfg.bk], "swizzle": 128},
        {"array": 1, "box": [cfg.bk, 64], "swizzle": 128},
    ]
    grid = (-(-m // cfg.bm), -(-n // cfg.bn), 1)
    out = run_ptx(ws_gemm_ptx(cfg), [a, b, c], grid, tensor_maps=maps)
    return out[2], a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize(
    "m,n,k,stages,bm,bn",
    [
        (128, 128, 128, 2, 128, 128),  # one lap
        (128, 128, 512, 2, 128, 128),  # 8 K tiles through 2 stages: 4 laps, parity flips
        (100, 200, 300, 3, 128, 128),  # partial tiles in M, N and K (TMA zero fill)
        (70, 130, 200, 2, 64, 128),  # one consumer warp group, partial everything
        (192, 192, 192, 4, 192, 192),  # three consumer warp groups, N = 192
    ],
)
def test_sm90_ws_gemm_runs_in_the_simulator(m, n, k, stages, bm, bn):
    cfg = GemmConfig(sm=90, bm=bm, bn=bn, stages=stages)
    got, ref = _run_sim(cfg, m, n, k)
    assert np.array_equal(got, ref.astype(np.float32))


def test_descriptors_match_tileiras():
    # tileiras's sm_100 matmul_f16 (64x64 f32 accumulator, f16 operands, B N-major)
    assert tcgen05.instruction_descriptor(64, 64, "f16", "f32") == 68222992
    # its B operand descriptor's high word: 128-byte swizzle, SBO 1024, version bit
    assert tcgen05.smem_descriptor_hi(1024, 128) == 0x40004040
    # sm_90 wgmma descriptors of the same kernel: A 64-byte swizzle (LBO 16, SBO 512) and
    # B 128-byte swizzle (SBO 1024)
    em = PtxBuilder()
    wgmma_descriptor(em, "%r0", 16, 512, 64)
    wgmma_descriptor(em, "%r0", 0, 1024, 128)
    movs = [ln for ln in em.lines if "mov.b64" in ln]
    assert f"{0x80000020}" in movs[0] and f"{0x40000040}" in movs[1], movs
    assert "or.b32 %r1, %r1, 65536" in "\n".join(em.lines)  # LBO 16 -> 1 << 16


def test_swizzle_agrees_with_the_simulator():
    from tilegen.runtime.ptx.sim.tensor_ops import swizzle

    addrs = np.arange(0, 4096, 2)
    for span in tma.SWIZZLES:
        assert [tma.swizzle_address(int(a), span) for a in addrs] == list(swizzle(addrs, span))
        # a bijection on every 8-row pattern
        assert len({tma.swizzle_address(int(a), span) for a in addrs}) == len(addrs)


@pytest.mark.parametrize(
    "tile,esize,want",
    [
        ((64, 32), 2, [(0, ((64, 32), 64))]),  # tileiras's matmul_f16 A box: 64-byte swizzle
        ((32, 64), 2, [(0, ((32, 64), 128))]),  # its B box: 128-byte swizzle
        ((64, 32), 1, [(0, ((64, 32), 32))]),  # matmul_int8 A: 32-byte swizzle
        ((64, 128), 2, [(0, ((64, 64), 128)), (64, ((64, 64), 128))]),  # 256-byte rows: 2 columns
        ((8, 8), 2, [(0, ((8, 8), 0))]),  # 16-byte rows: no swizzle
    ],
)
def test_column_boxes(tile, esize, want):
    got = [(c, (b.box, b.swizzle)) for c, b in tma.column_boxes(tile, esize)]
    assert got == want


def test_rows_that_are_no_multiple_of_128_bytes_are_refused():
    with pytest.raises(ValueError, match="192-byte tile row"):
        tma.column_boxes((8, 96), 2)


def test_config_checks():
    with pytest.raises(ValueError, match="bm must be 128"):
        GemmConfig(sm=100, bm=64).check()
    with pytest.raises(ValueError, match="two stages"):
        GemmConfig(stages=1).check()
    # ptxas refuses these ("Insufficient registers"): the check says so first
    for bm, bn in ((192, 256), (256, 192), (256, 256)):
        with pytest.raises(ValueError, match="over ptxas's cap"):
            GemmConfig(bm=bm, bn=bn).check()


def test_tcgen05_instruction_descriptor_fields():
    d = tcgen05.instruction_descriptor(128, 256, "bf16", "f32", b_mn_major=False)
    assert (d >> 24) & 0x1F == 8 and (d >> 17) & 0x3F == 32
    assert (d >> 7) & 7 == 1 and (d >> 10) & 7 == 1 and (d >> 4) & 3 == 1
    assert (d >> 16) & 1 == 0
    with pytest.raises(ValueError):
        tcgen05.instruction_descriptor(32, 64)


def test_device_maps_claim_and_free_a_slot_per_resident_cta():
    from tilegen.runtime.codegen.pipeline import map_slots, smem_layout

    # 197 KB of stages: one CTA per SM, one slot; a small tile: as many as fit (6 by shared
    # memory), never more than 32 (one bitmap word)
    assert map_slots(384, smem_layout(GemmConfig(stages=6))[-1]) == 1
    assert map_slots(256, smem_layout(GemmConfig(bm=64, bn=64, stages=2))[-1]) == 6
    assert map_slots(32, 0) == 32
    ptx = ws_gemm_ptx(GemmConfig(maps="device", bm=64, bn=64, stages=2))
    # a b64 word a slot, 6 an SM
    assert ".global .align 8 .b64 tilegen_ws_gemm_slots[1536];" in ptx
    assert "atom.acquire.gpu.global.cas.b64" in ptx and "st.relaxed.gpu.global.b64" in ptx
    assert ptx.count("tensormap.cp_fenceproxy.global.shared::cta") == 2
    assert ptx.count("fence.proxy.tensormap::generic.acquire.gpu") == 2
    # the slot is freed after the consumer loop (every copy through the maps completed)
    assert ptx.index("$L__consumed") < ptx.rindex("st.relaxed.gpu.global.b64")


def _claim_kernel(slots: int, share: bool) -> str:
    """One thread a CTA claims a slot of its SM's ``words`` (tma.claim_slot, %smid being the
    CTA's index in the simulator), writing work of its own meanwhile (``marks``), then the slot
    (``out``) and whether it held this launch's maps (``hits``)."""
    em = PtxBuilder()
    words, out, hits, marks = (em.new("b64") for _ in range(4))
    arrays = ("words", "out", "hits", "marks")  # (each as cuTile passes it: pointer, size, stride)
    for reg, name in zip((words, out, hits, marks), arrays):
        em.ins(f"ld.param.u64 {reg}, [{name}]")
        em.ins(f"cvta.to.global.u64 {reg}, {reg}")
    cta, off = em.new("b32"), em.new("b64")
    em.ins(f"mov.u32 {cta}, %ctaid.x")
    em.ins(f"mul.wide.u32 {off}, {cta}, 4")
    for reg in (out, hits, marks):
        em.ins(f"add.s64 {reg}, {reg}, {off}")

    def meanwhile() -> None:
        em.ins(f"st.global.u32 [{marks}], 7")

    slot, hit = tma.claim_slot(em, words, slots, "claim", meanwhile, share)
    em.ins(f"st.global.u32 [{out}], {slot}")
    if hit is not None:
        h = em.new("b32")
        em.ins(f"selp.u32 {h}, 1, 0, {hit}")
        em.ins(f"st.global.u32 [{hits}], {h}")
    em.ins("ret")
    body = "\n".join(em.declarations() + em.lines)
    return (
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        ".visible .entry claim("
        + ", ".join(f".param .u64 {a}, .param .u32 {a}_n, .param .u32 {a}_s" for a in arrays)
        + ") .reqntid 1\n"
        f"{{\n{body}\n}}\n"
    )


def test_a_claim_guesses_slot_0_free_with_this_launchs_maps():
    """A slot's word: bit 0 held, bit 1 maps inside, the rest the %gridid of the launch that
    built them. The first atom.cas guesses slot 0 free and holding this launch's maps, a second
    one slot 1 at the same time (one round trip when either is: a hit; both, and slot 1 is
    given back); a free word with other maps is taken with what the exchange
    returned (a miss: the CTA builds), a held one sends the claim to the next slot. The work
    given as ``meanwhile`` runs between the first exchange and the test of its result."""
    from tilegen.runtime.ptx.launch import run_ptx

    ptx = _claim_kernel(4, share=True)
    lines = ptx.splitlines()
    cas = [i for i, ln in enumerate(lines) if "atom.acquire.gpu.global.cas.b64" in ln]
    mark = next(i for i, ln in enumerate(lines) if "st.global.u32" in ln and ", 7;" in ln)
    test = next(i for i in range(cas[0], len(lines)) if "setp.eq.u64" in lines[i])
    assert cas[0] < cas[1] < mark < test  # (slots 0 and 1 guessed at once, then the work)
    gridid = 5
    ours, other = gridid << 2 | 2, 9 << 2 | 2  # free words naming a launch's maps
    cases = [  # (SM 0's four words, the slot taken, hit)
        ((0, 0, 0, 0), 0, 0),  # never used: a miss
        ((ours, 0, 0, 0), 0, 1),
        ((ours, ours, 0, 0), 0, 1),  # both first guesses right: slot 1 given back
        ((other | 1, ours, 0, 0), 1, 1),  # slot 0 held by another launch's CTA
        ((ours | 1, ours, other, 0), 1, 1),  # slot 0 held by a CTA of this launch
        ((other | 1, ours | 1, other, 0), 2, 0),  # slot 1 held by a CTA of this launch
    ]
    for words, slot, hit in cases:
        w = np.zeros(4 * 256, np.uint64)
        w[:4] = words
        got, out, hits, marks = run_ptx(
            ptx,
            [w, np.zeros(1, np.uint32), np.zeros(1, np.uint32), np.zeros(1, np.uint32)],
            (1,),
            gridid=gridid,
        )
        assert (out[0], hits[0], marks[0]) == (slot, hit, 7), words
        want = w.copy()
        want[slot] = ours | 1  # held, and naming this launch's maps from now on
        assert (got == want).all(), words


def test_a_claim_without_sharing_marks_only_held():
    from tilegen.runtime.ptx.launch import run_ptx

    ptx = _claim_kernel(4, share=False)
    assert "%gridid" not in ptx
    w = np.zeros(4 * 256, np.uint64)
    w[:2] = (1, 0)
    got, out, _, _ = run_ptx(
        ptx, [w, np.zeros(1, np.uint32), np.zeros(1, np.uint32), np.zeros(1, np.uint32)], (1,)
    )
    assert out[0] == 1 and list(got[:3]) == [1, 1, 0]
