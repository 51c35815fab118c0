"""CTA pairs on sm_100 (docs/pipelines.md section 18) and the simulator's clusters.

A GEMM whose ``num_ctas=2`` hint asks for clusters of two runs on a CTA pair: each CTA stages
128 rows of A and half of B's columns, the even CTA's thread issues
``tcgen05.mma.cta_group::2`` (M 256) for both, the commits arrive on both CTAs' barriers and
each CTA stores its own rows. ptxsim runs a cluster's CTAs side by side (``.reqnctapercluster``,
``.blocksareclusters``, ``mapa``, ``barrier.cluster``, ``cta_group::2``); tileiras's own
2-CTA kernels run in it exactly, which is what the simulator's model of the pair is checked
against."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime import driver
from tilegen.runtime.options import CompileOptions
from tilegen.runtime.ptx.launch import run_ptx
from tilegen.runtime.ptx.sim.cta import PtxSimError
from tilegen.runtime.ptxas import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="module")
def pair_kernels(tmp_path_factory):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import cutile_kernels_async as cka

    out = tmp_path_factory.mktemp("pair")
    return {k: Path(v) for k, v in cka.export_pair_bytecode(str(out)).items()}


def _problem(name: str, seed: int = 0, k_steps: int = 3):
    """(args, reference C, grid in tile blocks): cutile_kernels_async.pair_problem."""
    import cutile_kernels_async as cka

    pr = cka.pair_problem(name, seed, k_steps)
    return list(pr.args.values()), pr.expected["C"].astype(np.float64), pr.grid


def _compile(path: Path, target: str = "sm_100a", **kw):
    return driver.compile_source(path, CompileOptions(target=target, **kw), until="ptx")


def _check(ptx: str, name: str, strict: bool = False) -> None:
    args, ref, grid = _problem(name)
    out = run_ptx(ptx, args, grid, strict_async=strict)[2]
    np.testing.assert_array_equal(out.astype(np.float64), ref)


def test_pair_gemm_matches_numpy_in_strict_ptxsim(pair_kernels):
    c = _compile(pair_kernels["pair_f16"])
    d = c.async_plan[0]
    assert d.taken and d.cta_pair and d.tma_store, d.line()
    assert "a CTA pair (tcgen05.mma.cta_group::2" in d.line()
    ptx = c.ptx
    assert ".reqnctapercluster 2, 1, 1" in ptx and ".blocksareclusters" in ptx
    assert "%clusterid.x" in ptx and "%ctaid" not in ptx  # a tile block is a cluster
    assert "tcgen05.alloc.cta_group::2" in ptx and "tcgen05.dealloc.cta_group::2" in ptx
    assert re.search(r"tcgen05\.mma\.cta_group::2\.kind::f16 ", ptx)
    assert "tcgen05.mma.cta_group::1" not in ptx
    # the MMAs' commits reach both CTAs' empty and done barriers
    assert ptx.count(".multicast::cluster.b64") == 2
    # both CTAs' copies complete on the even CTA's full barrier
    assert ptx.count("mbarrier::complete_tx::bytes.cta_group::2") == 2
    assert "mapa.shared::cluster.u32" in ptx and "barrier.cluster.wait" in ptx
    _check(ptx, "pair_f16", strict=True)


@pytest.mark.parametrize(
    "name", ["pair_bf16", "pair_e4m3", "pair_i8", "pair_f16_n64", "pair_f16_half", "pair_f16_m128"]
)
def test_pair_gemm_forms_match_numpy(pair_kernels, name):
    """bf16, fp8 (f16 out), i8 (s32 accumulator), N 64, an epilogue of its own, and the M 128
    pair (64 rows per CTA; thread t reads TMEM lane t: half of row t % 64)."""
    c = _compile(pair_kernels[name])
    d = c.async_plan[0]
    assert d.cta_pair, d.line()
    import cutile_kernels_async as cka

    rows = cka.PAIR_SHAPES[name][2] // 2
    assert f"{rows} rows per CTA" in d.line()
    if rows == 64:  # the pair's M 128 in the instruction descriptor, N whole
        from tilegen.runtime.codegen.tcgen05 import instruction_descriptor

        assert f", {instruction_descriptor(128, 128)}, " in c.ptx
    _check(c.ptx, name)


@pytest.mark.parametrize("name", ["pair_f16", "pair_f16_m128"])
def test_a_pair_loop_of_no_iteration_gives_plus_zero(pair_kernels, name):
    """K = 0: no MMA runs, so TMEM holds nothing; each CTA writes +0 into its own rows before
    reading them back (the zero initial value is read back as it is, docs/pipelines.md
    section 38), 128 and 64 rows a CTA."""
    from tilegen.runtime.ptxas import assemble

    c = _compile(pair_kernels[name])
    if find_ptxas() is not None:  # (the simulated PTX is legal PTX for sm_100a)
        assert assemble(c.ptx, 100)[0][:4] == b"\x7fELF"
    args, ref, grid = _problem(name, 0, 0)
    assert args[0].shape[1] == 0 and not ref.any()
    out = run_ptx(c.ptx, args, grid, strict_async=True)[2]
    np.testing.assert_array_equal(out.astype(np.float64), ref)
    assert not np.signbit(out).any()


def _assembled(ptx: str, arch: str, tmp_path: Path) -> tuple[str, str, str]:
    """(ptxas -v stderr, SASS, ELF dump) of ``ptx`` on ``arch``; ptxas must accept it with no
    spills; skips where cuobjdump is missing."""
    ptxas = Path(find_ptxas())
    src, cubin = tmp_path / "k.ptx", tmp_path / "k.cubin"
    src.write_text(ptx)
    p = subprocess.run(
        [str(ptxas), "-v", f"-arch={arch}", str(src), "-o", str(cubin)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in p.stderr, p.stderr
    cuobjdump = ptxas.with_name("cuobjdump")
    if not cuobjdump.exists():
        pytest.skip("cuobjdump is not installed (nvidia-cuda-cuobjdump)")
    dump = [
        subprocess.run([str(cuobjdump), f, str(cubin)], capture_output=True, text=True).stdout
        for f in ("-sass", "-elf")
    ]
    return p.stderr, dump[0], dump[1]


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed (the nvcc wheel)")
def test_pair_gemm_sass(pair_kernels, tmp_path):
    """ptxas: no spills; SASS has the pair's instructions (tileiras's 2-CTA GEMM has the same
    kinds: UTCHMMA.2CTA, UTMALDG.2D.2CTA, UTCBAR.2CTA.MULTICAST, UCGABAR)."""
    _, sass, elf = _assembled(_compile(pair_kernels["pair_f16"]).ptx, "sm_100a", tmp_path)
    for mnemonic in ("UTCHMMA.2CTA", "UTMALDG.2D.2CTA", "UTCBAR.2CTA.MULTICAST", "UCGABAR_WAIT"):
        assert mnemonic in sass, mnemonic
    assert "EIATTR_BLOCKS_ARE_CLUSTERS" in elf and "EIATTR_CTA_PER_CLUSTER" in elf


def test_when_there_is_no_pair(pair_kernels):
    # a second store would run in both CTAs
    d = driver.compile_source(
        pair_kernels["pair_f16_flag"], CompileOptions(target="sm_100a"), until="async"
    ).async_plan[0]
    # (the CTA-size rule sees it too: one CTA of two consumer warp groups, not one group
    # holding 256 rows of accumulators)
    assert d.taken and not d.cta_pair and d.consumer_warps == 8, d.line()
    # the option: one CTA per 256-row tile, two consumer warp groups (section 20)
    for target in ("sm_90a", "sm_100a"):
        opts = CompileOptions(target=target, cta_pair=False)
        d = driver.compile_source(pair_kernels["pair_f16"], opts, until="async").async_plan[0]
        assert d.taken and not d.cta_pair and d.consumer_warps == 8, d.line()
    # sm_120 has no MMA pairs: the tile block's rows are divided between the cluster's two
    # CTAs instead, as tileiras does (nv-tileaa-split-pair-rows, section 40)
    c = driver.compile_source(pair_kernels["pair_f16"], CompileOptions(target="sm_120"))
    d = c.async_plan[0]
    assert not d.cta_pair and d.pair_rows == 128 and ".blocksareclusters" in c.ptx, d.line()
    _check(c.ptx, "pair_f16", strict=True)


def test_planted_pair_bugs_are_caught(pair_kernels):
    """The strict simulator on the pair's PTX with one thing wrong each."""
    ptx = _compile(pair_kernels["pair_f16"]).ptx
    args, _, grid = _problem("pair_f16")
    both = re.search(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], (\d+);", ptx)
    # the even CTA expects one CTA's bytes: the other's copy delivers more than expected
    half = ptx.replace(
        both.group(0), both.group(0).replace(both.group(1), str(int(both.group(1)) // 2))
    )
    with pytest.raises(PtxSimError, match="deliver more bytes than expected"):
        run_ptx(half, [a.copy() for a in args], grid, strict_async=True)
    # the copies without .cta_group::2 cannot signal the even CTA's barrier
    plain = ptx.replace("mbarrier::complete_tx::bytes.cta_group::2", "mbarrier::complete_tx::bytes")
    with pytest.raises(PtxSimError, match="in another CTA than its destination"):
        run_ptx(plain, [a.copy() for a in args], grid, strict_async=True, assemble=False)
    # the MMAs' done commit only to the issuing CTA: the other never reads its rows
    k = ptx.rindex(".multicast::cluster.b64")
    start = ptx.rindex("tcgen05.commit", 0, k)
    end = ptx.index(";", k)
    line = ptx[start:end]
    one = line.replace(".multicast::cluster", "").rsplit(",", 1)[0]
    lone = ptx[:start] + one + ptx[end:]
    with pytest.raises(PtxSimError, match="deadlock"):
        run_ptx(lone, [a.copy() for a in args], grid, strict_async=True)


# ------------------------------------------------------------------------- sm_90: multicast


@pytest.mark.parametrize(
    "name,strict",
    [
        ("pair_f16", True),
        ("pair_bf16", False),
        ("pair_f16_m128", True),
        ("pair_e4m3", True),
        ("pair_i8", False),
        ("pair_f16_n64", False),
        ("pair_f16_half", False),
    ],
)
def test_sm90_pair_gemm_matches_numpy(pair_kernels, name, strict):
    """sm_90 (section 19): each CTA's wgmmas on its rows and the whole of B, each of whose
    column boxes the two CTAs copy half of (K rows r K/2 ..) by TMA multicast into both; a
    stage is free once both CTAs' consumers arrived on both CTAs' empty barriers. fp8 and i8
    transpose B as the one-CTA consumers do. (These tiles fit one CTA, which the rule prefers
    on sm_90: ``cta_pair=True`` asks for the pair.)"""
    c = _compile(pair_kernels[name], "sm_90a", cta_pair=True)
    d = c.async_plan[0]
    assert d.taken and d.cta_pair and "B multicast by TMA to both CTAs" in d.line(), d.line()
    ptx = c.ptx
    assert ".reqnctapercluster 2, 1, 1" in ptx and ".blocksareclusters" in ptx
    boxes = 2 if name in ("pair_f16", "pair_bf16", "pair_f16_m128", "pair_f16_half") else 1
    assert ptx.count("mbarrier::complete_tx::bytes.multicast::cluster") == boxes
    # the release in the other CTA: CTA scope, as tileiras's (cluster scope cost a GPU-wide
    # membar a thread and stage on hardware)
    assert re.search(r"mbarrier\.arrive\.shared::cluster\.b64 _, \[%r\d+\]", ptx)
    assert "arrive.release.cluster" not in ptx
    # the empty barriers count lane 0 of both CTAs' 4 consumer warps
    assert re.findall(r"mbarrier\.init\.shared::cta\.b64 \[[^\]]*\], (\d+);", ptx)[1] == "8"
    assert "mov.u32 %r" in ptx and "%laneid" in ptx
    assert "wgmma.mma_async" in ptx and "tcgen05" not in ptx
    # the producer's tail: after its last copy it waits for the last release of every stage
    # (the other CTA's consumers arrive on this CTA's empty barriers: the CTA must outlive
    # them), one wait a stage
    end = re.search(r"\$L__async_producer_done_\d+:", ptx).start()
    tail = ptx[ptx.rindex("cp.async.bulk.tensor", 0, end) : end]
    assert tail.count("mbarrier.try_wait.parity") == d.stages
    _check(ptx, name, strict=strict)


def test_sm90_pair_without_the_remote_release_deadlocks(pair_kernels):
    """Each consumer thread releases the stage in both CTAs; with the release in the other
    CTA planted out, a K loop longer than the ring can never refill a stage."""
    ptx = _compile(pair_kernels["pair_f16"], "sm_90a", cta_pair=True).ptx
    lone = re.sub(
        r"\n\t@%p\d+ mbarrier\.arrive\.shared::cluster\.b64 _, \[%r\d+\];",
        "",
        ptx,
    )
    assert lone != ptx
    args, _, grid = _problem("pair_f16", k_steps=10)
    with pytest.raises(PtxSimError, match="deadlock: mbarrier waits can never complete"):
        run_ptx(lone, args, grid, strict_async=True)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed (the nvcc wheel)")
def test_sm90_pair_sass(pair_kernels, tmp_path):
    log, sass, _ = _assembled(
        _compile(pair_kernels["pair_f16"], "sm_90a", cta_pair=True).ptx, "sm_90a", tmp_path
    )
    assert "wgmma" not in log  # no serialization warning
    for mnemonic in ("UTMALDG.2D.MULTICAST", "HGMMA.64x128x16", "UCGABAR_WAIT", "UTMASTG"):
        assert mnemonic in sass, mnemonic
    # two GPU-scope membars, both in the prologue: the tensor maps' publish and the fence that
    # makes the map slot's free a release (tma.maps_in_place); none at the stage releases
    assert sass.count("MEMBAR.ALL.GPU") == 2, sass.count("MEMBAR.ALL.GPU")


# ------------------------------------------------------------------------- the simulator

_CLUSTER_PTX = r"""
.version 9.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
.reqntid 64, 1, 1
.reqnctapercluster 2, 1, 1
.blocksareclusters
{
  .shared .align 4 .b32 slot[1];
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  .reg .pred %p<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %cluster_ctarank;
  mov.u32 %r3, %clusterid.x;
  mov.u32 %r4, %ctaid.x;
  mov.u32 %r5, %nclusterid.x;
  setp.eq.u32 %p1, %r1, 0;
  mad.lo.u32 %r6, %r3, 100, %r2;
  @%p1 st.shared.u32 [slot], %r6;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  xor.b32 %r7, %r2, 1;
  mov.u32 %r8, slot;
  mapa.shared::cluster.u32 %r9, %r8, %r7;
  ld.shared::cluster.u32 %r10, [%r9];
  mul.lo.u32 %r11, %r4, 64;
  add.u32 %r11, %r11, %r1;
  mul.wide.u32 %rd2, %r11, 16;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v4.u32 [%rd3], {%r3, %r4, %r10, %r5};
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  ret;
}
"""


@pytest.mark.parametrize("strict", [False, True])
def test_cluster_registers_distributed_shared_memory_and_barriers(strict):
    """Three clusters of two CTAs (``.blocksareclusters``: the grid counts clusters): each CTA
    reads its peer's shared variable through ``mapa`` after the cluster barrier."""
    out = run_ptx(_CLUSTER_PTX, [np.zeros((6 * 64, 4), np.uint32)], (3, 1, 1), strict_async=strict)
    rows = out[0][::64]
    for cta, (cluster, ctaid, peer, nclusters) in enumerate(rows):
        assert (cluster, ctaid, nclusters) == (cta // 2, cta, 3)
        assert peer == 100 * (cta // 2) + (cta % 2 ^ 1)  # the peer's rank and cluster


def test_cluster_errors():
    args = [np.zeros((6 * 64, 4), np.uint32)]
    grid_in_ctas = _CLUSTER_PTX.replace(".blocksareclusters\n", "")
    with pytest.raises(PtxSimError, match=r"grid \(3, 1, 1\) is not a multiple of its cluster"):
        run_ptx(grid_in_ctas, args, (3, 1, 1))
    bad = _CLUSTER_PTX.replace("xor.b32 %r7, %r2, 1;", "add.u32 %r7, %r2, 2;")
    with pytest.raises(PtxSimError, match="rank 2 is outside the cluster of 2 CTAs"):
        run_ptx(bad, args, (3, 1, 1))
    # thread 0 waits without arriving
    lone = _CLUSTER_PTX.replace(
        "  barrier.cluster.arrive.release.aligned;\n  barrier.cluster.wait.acquire.aligned;\n  xor",
        "  @!%p1 barrier.cluster.arrive.release.aligned;\n"
        "  barrier.cluster.wait.acquire.aligned;\n  xor",
        1,
    )
    with pytest.raises(PtxSimError, match="barrier.cluster.wait without a barrier.cluster.arrive"):
        run_ptx(lone, args, (3, 1, 1), assemble=False)


def test_tileiras_pair_kernels_run_exactly(pair_kernels, tmp_path):
    """tileiras's own kernels for the 2-CTA hint - sm_100 M 256 pairs, M 128 pairs (64 rows per
    CTA, the accumulator's second column half in TMEM lanes 64..127) and sm_90's B multicast -
    match NumPy exactly in strict ptxsim: the simulator's model of clusters is the hardware's as
    tileiras uses it."""
    import ptx_corpus

    wb = ptx_corpus.wheel_bin()
    if wb is None or not (wb / "tileiras").exists():
        pytest.skip("tileiras is not installed (nvidia-cuda-tileiras)")
    from tilegen.runtime.ptx.nv_host import tensor_maps

    tileiras = ptx_corpus._toolchain(tmp_path, wb)
    for name, arch, marker in (
        ("pair_f16", "sm_100", "tcgen05.mma.cta_group::2"),
        ("pair_f16_m128", "sm_100", "tcgen05.mma.cta_group::2"),
        ("pair_f16", "sm_90", "bytes.multicast::cluster"),
    ):
        stem = tmp_path / f"{name}.{arch}"
        env = {"TILEGEN_CAPTURE": str(stem), "TILEGEN_REAL_PTXAS": str(wb / "ptxas")}
        r = subprocess.run(
            [
                str(tileiras),
                f"--gpu-name={arch}",
                "-o",
                str(tmp_path / f"{name}.{arch}.cubin"),
                str(pair_kernels[name]),
            ],
            capture_output=True,
            text=True,
            env=dict(os.environ, **env),
        )
        assert r.returncode == 0, r.stderr
        ptx = Path(f"{stem}.ptx").read_text()
        assert marker in ptx and ".blocksareclusters" in ptx
        maps = tensor_maps(Path(f"{stem}.host.o"), ptx, [2, 2, 2])
        args, ref, grid = _problem(name)
        out = run_ptx(ptx, args, grid, tensor_maps=maps, strict_async=True)[2]
        np.testing.assert_array_equal(out.astype(np.float64), ref)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("name", ["tall_f16", "tall_e4m3"])
def test_256_row_tiles_on_one_cta(pair_kernels, target, name):
    """Without the hint a 256-row tile runs on one CTA with two consumer warp groups of 128
    rows (8 warps: docs/layouts.md "CTA size"): wgmma on sm_90; on sm_100 two M 128 tcgen05
    accumulators in TMEM columns 0 .. N and N .. 2 N, thread t reading row t. Before, 4 warps
    fell to mma.sync with over a kilobyte of stack (tileiras spills here too)."""
    c = _compile(pair_kernels[name], target)
    d = c.async_plan[0]
    assert d.taken and not d.cta_pair and d.consumer_warps == 8, d.line()
    assert ".reqntid 384, 1, 1" in c.ptx and ".blocksareclusters" not in c.ptx
    if target == "sm_100a":
        n = 128
        mmas = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::\w+ \[(%r\d+)\]", c.ptx)
        assert len(set(mmas)) == 2  # the two accumulators
        assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32" in c.ptx
        assert f", {2 * n};" in c.ptx  # 2 N columns
    _check(c.ptx, name, strict=name == "tall_f16")
    if find_ptxas() is not None:
        from tilegen.runtime.ptxas import assemble

        _, log = assemble(c.ptx, int(target[3:-1]), verbose=True)
        assert "0 bytes spill stores" in log, log
