"""8-bit B^T by ldmatrix.trans / prmt / stmatrix (runtime/codegen/b8_transpose.py,
docs/pipelines.md section 51): fp8 and int8 GEMMs with B loaded K x N on sm_90a (wgmma) and
sm_120 (mma.sync), whose consumers transpose each stage's B. Over tiles that exercise every
swizzle span (32, 64, 128 bytes), column boxes, and more or fewer warps than K atoms: exact
results in the strict simulator, every ldmatrix / stmatrix phase one shared-memory wavefront
(the simulator's bank statistics, runtime/ptx/sim/banks.py), and ptxas's SASS for the GPU
case.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilegen.runtime import driver
from tilegen.runtime.codegen import b8_transpose
from tilegen.runtime.options import CompileOptions
from tilegen.runtime.ptx.launch import run_ptx
from test_async_pipeline_e2e import needs_ptxas, run_strict, sass_counts

_GEMM = """entry @b8(%a: tile<ptr<{e}>>, %a0: tile<i32>, %a1: tile<i32>, %as0: tile<i32>, \
%as1: tile<i32>, %b: tile<ptr<{e}>>, %b0: tile<i32>, %b1: tile<i32>, %bs0: tile<i32>, \
%bs1: tile<i32>, %c: tile<ptr<{o}>>, %c0: tile<i32>, %c1: tile<i32>, %cs0: tile<i32>, \
%cs1: tile<i32>) optimization_hints=<{sm} = {{num_warps = {w}}}> {{
  %t0 = make_token : token
  %pa = assume div_by<16>, %a : tile<ptr<{e}>>
  %pb = assume div_by<16>, %b : tile<ptr<{e}>>
  %pc = assume div_by<16>, %c : tile<ptr<{o}>>
  %sa = assume div_by<16>, %as0 : tile<i32>
  %sb = assume div_by<16>, %bs0 : tile<i32>
  %sc = assume div_by<4>, %cs0 : tile<i32>
  %va = make_tensor_view %pa, shape = [%a0, %a1], strides = [%sa, 1] : tile<i32> -> \
tensor_view<?x?x{e}, strides=[?,1]>
  %vb = make_tensor_view %pb, shape = [%b0, %b1], strides = [%sb, 1] : tile<i32> -> \
tensor_view<?x?x{e}, strides=[?,1]>
  %vc = make_tensor_view %pc, shape = [%c0, %c1], strides = [%sc, 1] : tile<i32> -> \
tensor_view<?x?x{o}, strides=[?,1]>
  %x, %y, %z = get_tile_block_id : tile<i32>
  %pva = make_partition_view %va : {pa}
  %steps:2 = get_index_space_shape %pva : {pa} -> tile<i32>
  %zero = constant <{o}: 0{dot}> : tile<{tm}x{tn}x{o}>
  %c0_i32 = constant <i32: 0> : tile<i32>
  %c1_i32 = constant <i32: 1> : tile<i32>
  %pvb = make_partition_view %vb : {pb}
  %acc = for %k in (%c0_i32 to %steps#1, step %c1_i32) : tile<i32> iter_values(%it = %zero) \
-> (tile<{tm}x{tn}x{o}>) {{
    %ta, %ka = load_view_tko weak %pva[%x, %k] token = %t0 : {pa}, tile<i32> -> \
tile<{tm}x{tk}x{e}>, token
    %tb, %kb = load_view_tko weak %pvb[%k, %y] token = %t0 : {pb}, tile<i32> -> \
tile<{tk}x{tn}x{e}>, token
    %d = {mma} %ta, %tb, %it{signs} : tile<{tm}x{tk}x{e}>, tile<{tk}x{tn}x{e}>, tile<{tm}x{tn}x{o}>
    continue %d : tile<{tm}x{tn}x{o}>
  }}
  %pvc = make_partition_view %vc : {pc}
  %done = store_view_tko weak %acc, %pvc[%x, %y] token = %t0 : tile<{tm}x{tn}x{o}>, {pc}, \
tile<i32> -> token
  return
}}
"""


def _gemm(target: str, tm: int, tn: int, tk: int, warps: int, elem: str = "e4m3") -> str:
    e, o = ("f8E4M3FN", "f32") if elem == "e4m3" else ("i8", "i32")

    def pv(shape: str, el: str, pad: bool = True) -> str:
        p = "padding_value = zero, " if pad else ""
        return f"partition_view<tile=({shape}), {p}tensor_view<?x?x{el}, strides=[?,1]>>"

    return _GEMM.format(
        e=e,
        o=o,
        sm={"sm_90a": "sm_90", "sm_120": "sm_120"}[target],
        w=warps,
        tm=tm,
        tn=tn,
        tk=tk,
        pa=pv(f"{tm}x{tk}", e),
        pb=pv(f"{tk}x{tn}", e),
        pc=pv(f"{tm}x{tn}", o, False),
        mma="mmaf" if elem == "e4m3" else "mmai",
        signs="" if elem == "e4m3" else " signed signed",
        dot=".000000e+00" if o == "f32" else "",
    )


#: small integers (exact in e4m3, and summed exactly in f32): their e4m3 codes
_E4M3 = {0: 0x00, 1: 0x38, 2: 0x40, 3: 0x44, -1: 0xB8, -2: 0xC0, -3: 0xC4}


def _inputs(M: int, N: int, K: int, elem: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    va, vb = rng.integers(-3, 4, (M, K)), rng.integers(-3, 4, (K, N))
    if elem == "e4m3":
        code = np.vectorize(_E4M3.get)
        a, b, out = code(va).astype(np.uint8), code(vb).astype(np.uint8), np.float32
    else:
        a, b, out = va.astype(np.int8), vb.astype(np.int8), np.int32
    return a, b, np.zeros((M, N), out), (va @ vb).astype(out)


#: (target, TM, TN, TK, warps): the spans of B's rows (TN bytes) and of B^T's (TK bytes) -
#: 32, 64, 128, two column boxes - and warps <= or > the K atoms (TK / 16)
CASES = [
    ("sm_90a", 128, 128, 128, 4),  # the GPU check's fp8 GEMM tile: 128-byte spans both ways
    ("sm_90a", 64, 64, 64, 4),  # 64-byte spans
    ("sm_90a", 64, 64, 32, 4),  # B^T rows of 32 bytes; more warps than K atoms
    ("sm_90a", 128, 256, 64, 8),  # B in two column boxes; 8 warps over 4 K atoms
    ("sm_120", 128, 128, 128, 4),
    ("sm_120", 64, 64, 32, 4),
]


@needs_ptxas
@pytest.mark.parametrize("target,tm,tn,tk,warps", CASES)
def test_b8_transpose_is_exact_and_free_of_bank_conflicts(target, tm, tn, tk, warps):
    c = driver.compile_source(
        _gemm(target, tm, tn, tk, warps), CompileOptions(target=target), "b8.mlir", until="ptx"
    )
    assert c.async_plan[0].taken, c.async_plan[0].line()
    ptx = c.ptx
    # the atoms replaced the unit-per-thread copy: no ld.shared.b32 of B's bytes is left
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
    assert "ld.shared.b32" not in ptx
    per_warp = (tk // 16) * (tn // 32) // warps
    assert ptx.count("m8n8.x4.trans.shared.b16") == per_warp
    # partial tiles along M and N, a K loop of three steps, the last one zero-filled
    M, N, K = 2 * tm - 24, 2 * tn - 16, 3 * tk - 16
    a, b, cc, want = _inputs(M, N, K, "e4m3")
    out = run_strict(ptx, [a, b, cc], (2, 2))
    np.testing.assert_array_equal(out[2], want)
    # every ldmatrix / stmatrix phase (8 rows of 16 bytes) one wavefront: no bank conflicts
    lines: dict = {}
    run_ptx(ptx, [a, b, cc], (2, 2, 1), bank_stats=lines)
    mats = {n: r for n, r in lines.items() if "matrix" in r["op"]}
    assert any(r["op"].startswith("ldmatrix.sync.aligned.m8n8.x4.trans") for r in mats.values())
    assert any(r["op"].startswith("stmatrix") for r in mats.values())
    conflicted = {n: r for n, r in mats.items() if r["wavefronts"] != r["phases"]}
    assert not conflicted, conflicted


@needs_ptxas
def test_int8_gemm_takes_the_atoms_too():
    c = driver.compile_source(
        _gemm("sm_90a", 128, 128, 64, 4, "i8"), CompileOptions(target="sm_90a"), "b8.mlir"
    )
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in c.ptx
    a, b, cc, want = _inputs(200, 240, 176, "i8", seed=1)
    out = run_strict(c.ptx, [a, b, cc], (2, 2))
    np.testing.assert_array_equal(out[2], want)


@needs_ptxas
def test_fewer_atoms_than_warps_keeps_the_unit_copy():
    """A 32 x 32 byte B tile is 2 atoms for 4 warps: the unit-per-thread copy, still exact."""
    c = driver.compile_source(
        _gemm("sm_90a", 64, 32, 32, 4), CompileOptions(target="sm_90a"), "b8.mlir"
    )
    assert c.async_plan[0].taken
    assert "ld.shared.b32" in c.ptx and "m8n8.x4.trans" not in c.ptx
    a, b, cc, want = _inputs(100, 48, 80, "e4m3")
    out = run_strict(c.ptx, [a, b, cc], (2, 2))
    np.testing.assert_array_equal(out[2], want)


def test_atom_plan_covers_each_atom_once():
    """Every warp's atoms, shifted by its first atom, cover the tile's atoms exactly once, and
    no shift reaches outside its swizzle span (the XOR) or into a span (the add)."""
    for K, N, span, tspan, warps in [(128, 128, 128, 128, 4), (64, 256, 128, 64, 8)]:
        box, tbox = K * span, N * tspan
        plan = b8_transpose.atoms(K, N, span, box, tspan, tbox, warps)
        assert len(plan) * warps == (K // 16) * (N // 32)
        for a in plan:
            assert a.src_xor % 32 == 0 and a.src_xor < span and a.src_add % span == 0
            assert a.dst_xor % 16 == 0 and a.dst_xor < tspan and a.dst_add % tspan == 0
    assert b8_transpose.atoms(32, 32, 32, 1024, 32, 1024, 4) is None  # 2 atoms, 4 warps
    assert b8_transpose.atoms(128, 128, 128, 1 << 14, 128, 1 << 14, 3) is None


@needs_ptxas
def test_the_gpu_checks_fp8_gemm_in_sass(tmp_path):
    """sm_90a, 128 x 128 x 128 (bench/gpu_perf_cases.py's e4m3 tile): a consumer warp's 8
    atoms are 8 LDSM.16.MT88.4 and 8 STSM (beside the epilogue's), no LDS of B's bytes, and
    0 spills."""
    c = driver.compile_source(
        _gemm("sm_90a", 128, 128, 128, 4), CompileOptions(target="sm_90a"), "b8.mlir"
    )
    counts, _ = sass_counts(tmp_path, c.ptx, "sm_90a")
    assert counts.get("LDSM", 0) == 8, counts
    assert counts.get("STSM", 0) >= 8 and counts.get("QGMMA", 0) >= 8, counts
    assert counts.get("PRMT", 0) == 32, counts


# ----------------------------------------------------------------------------- today's path
_SM = {"sm_80": "sm_80", "sm_89": "sm_89", "sm_90a": "sm_90", "sm_120": "sm_120"}

#: (target, TM, TN, TK, warps, element, options): cp.async staging, B's raw K x N copy turned
#: into B^T by b8_transpose.raw_copy - st.shared.b32 before sm_90, stmatrix from sm_90 on
#: (wgmma's core matrices on sm_90a, mma.sync's padded rows on sm_120)
TODAY = [
    ("sm_80", 128, 128, 64, 4, "i8", {}),
    ("sm_80", 128, 256, 64, 8, "i8", {}),  # 8 warps over 4 K atoms
    ("sm_80", 64, 32, 32, 4, "i8", {}),  # 2 atoms, 4 warps: a guarded round
    ("sm_89", 128, 128, 64, 4, "e4m3", {}),
    ("sm_90a", 128, 128, 64, 4, "e4m3", {"use_tma": False}),
    ("sm_120", 64, 128, 64, 4, "i8", {"use_tma": False}),
]


@needs_ptxas
@pytest.mark.parametrize("target,tm,tn,tk,warps,elem,opts", TODAY)
def test_todays_path_moves_atoms_without_bank_conflicts(target, tm, tn, tk, warps, elem, opts):
    """No byte stores are left; exact in the strict simulator over partial tiles and three K
    steps; no shared-memory access of the kernel takes more than one wavefront a phase (the
    byte copy this replaces took 5.6x the wavefronts at 128 x 128 x 64: 46,080 excess)."""
    src = _gemm("sm_90a", tm, tn, tk, warps, elem).replace("sm_90 = ", f"{_SM[target]} = ")
    c = driver.compile_source(src, CompileOptions(target=target, **opts), "b8.mlir", until="ptx")
    ptx = c.ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
    assert "st.shared.b8" not in ptx
    assert ("stmatrix" in ptx) == (target != "sm_80" and target != "sm_89")
    M, N, K = 2 * tm - 24, 2 * tn - 16, 3 * tk - 16
    a, b, cc, want = _inputs(M, N, K, elem, seed=3)
    out = run_strict(ptx, [a, b, cc], (2, 2))
    np.testing.assert_array_equal(out[2], want)
    lines: dict = {}
    run_ptx(ptx, [a, b, cc], (2, 2, 1), bank_stats=lines)
    conflicted = {n: r for n, r in lines.items() if r["wavefronts"] != r["phases"]}
    assert not conflicted, conflicted


def test_todays_path_swaps_rows_where_that_clears_the_conflicts():
    """B^T rows 16 K bytes (+16 padding) apart: without the upper lanes' row swap every store
    of an atom is 2-way (8 wavefronts for 4 phases), with it one a phase; both store forms."""
    for K in (32, 64, 128):
        fr, fc = ((0, None, 1),), ((0, None, K + 16),)
        for kind in ("b32", "stmatrix"):
            assert b8_transpose._raw_dst_cost(kind, False, fr, fc, 0) == 8
            assert b8_transpose._raw_dst_cost(kind, True, fr, fc, 0) == 4
    # where B^T's K bytes are not contiguous 4 at a time, the byte copy stays
    assert b8_transpose._raw_fits(144, 64, 128, ((0, None, 2),), ((0, None, 80),), 0, 80, 4) is None
    assert (
        b8_transpose._raw_fits(144, 64, 128, ((0, None, 1),), ((0, None, 80),), 0, 80, 4) == "b32"
    )
    assert (
        b8_transpose._raw_fits(144, 64, 128, ((0, None, 1),), ((0, None, 80),), 0, 90, 4)
        == "stmatrix"
    )
