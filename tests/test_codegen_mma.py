"""runtime/codegen/mma.py: dot on tensor cores (mma.sync; wgmma on sm_90 where the shape allows,
see tests/test_codegen_wgmma.py), checked with ptxas (0 spills, HMMA-class
instructions present in the cubin's PTX) and by running the PTX in the SIMT simulator."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.codegen.driver import find_ptxas

PTXAS = find_ptxas()

SRC = """
cuda_tile.module @m {{
entry @mm(%a: tile<ptr<{et}>>, %a1: tile<i32>, %a2: tile<i32>, %a3: tile<i32>, %a4: tile<i32>,
          %b: tile<ptr<{et}>>, %b1: tile<i32>, %b2: tile<i32>, %b3: tile<i32>, %b4: tile<i32>,
          %c: tile<ptr<{ct}>>, %c1: tile<i32>, %c2: tile<i32>, %c3: tile<i32>, %c4: tile<i32>) {{
  %0 = make_token : token
  %ta = make_tensor_view %a, shape = [%a1, %a2], strides = [%a3, 1] : tile<i32> -> tensor_view<?x?x{et}, strides=[?,1]>
  %tb = make_tensor_view %b, shape = [%b1, %b2], strides = [%b3, 1] : tile<i32> -> tensor_view<?x?x{et}, strides=[?,1]>
  %tc = make_tensor_view %c, shape = [%c1, %c2], strides = [%c3, 1] : tile<i32> -> tensor_view<?x?x{ct}, strides=[?,1]>
  %z = constant <i32: 0> : tile<i32>
  %pa = make_partition_view %ta : partition_view<tile=({m}x{k}), tensor_view<?x?x{et}, strides=[?,1]>>
  %pb = make_partition_view %tb : partition_view<tile=({k}x{n}), tensor_view<?x?x{et}, strides=[?,1]>>
  %pc = make_partition_view %tc : partition_view<tile=({m}x{n}), tensor_view<?x?x{ct}, strides=[?,1]>>
  %x, %t1 = load_view_tko weak %pa[%z, %z] token = %0 : partition_view<tile=({m}x{k}), tensor_view<?x?x{et}, strides=[?,1]>>, tile<i32> -> tile<{m}x{k}x{et}>, token
  %y, %t2 = load_view_tko weak %pb[%z, %z] token = %0 : partition_view<tile=({k}x{n}), tensor_view<?x?x{et}, strides=[?,1]>>, tile<i32> -> tile<{k}x{n}x{et}>, token
  %w, %t3 = load_view_tko weak %pc[%z, %z] token = %0 : partition_view<tile=({m}x{n}), tensor_view<?x?x{ct}, strides=[?,1]>>, tile<i32> -> tile<{m}x{n}x{ct}>, token
  %d = {op} %x, %y, %w{sg} : tile<{m}x{k}x{et}>, tile<{k}x{n}x{et}>, tile<{m}x{n}x{ct}>
  %s = store_view_tko weak %d, %pc[%z, %z] token = %0 : tile<{m}x{n}x{ct}>, partition_view<tile=({m}x{n}), tensor_view<?x?x{ct}, strides=[?,1]>>, tile<i32> -> token
  return
}}
}}
"""

NP = {"f16": np.float16, "f64": np.float64, "i8": np.int8, "i32": np.int32, "f32": np.float32}


def _src(et, ct, m, n, k):
    op = "mmai" if et.startswith("i") else "mmaf"
    sg = " signed signed" if op == "mmai" else ""
    return SRC.format(et=et, ct=ct, m=m, n=n, k=k, op=op, sg=sg)


CASES = [
    ("f16", "f32", 16, 8, 16),
    ("f16", "f32", 64, 64, 32),
    ("f16", "f32", 32, 64, 64),
    ("i8", "i32", 64, 64, 32),
    ("f64", "f64", 32, 32, 16),
    ("f64", "f64", 8, 8, 4),
    ("f32", "f32", 64, 32, 16),  # no tensor-core form: the fma loop
    ("f32", "f32", 16, 8, 8),
]


@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
@pytest.mark.parametrize("et,ct,m,n,k", CASES)
def test_dot_matches_numpy_in_ptxsim(sm, et, ct, m, n, k):
    _matches_numpy(sm, et, ct, m, n, k, m * n + k)


def _matches_numpy(sm, et, ct, m, n, k, seed):
    """``c = a @ b + c`` of small integers run in ptxsim, exactly as NumPy computes it."""
    from tilegen.runtime.ptxsim import run_ptxsim

    rs = np.random.RandomState(seed)
    a = rs.randint(-4, 5, (m, k)).astype(NP[et])
    b = rs.randint(-4, 5, (k, n)).astype(NP[et])
    c = rs.randint(-4, 5, (m, n)).astype(NP[ct])
    out = run_ptxsim(
        parse_module(_src(et, ct, m, n, k), "mm.mlir"),
        [("a", a), ("b", b), ("c", c)],
        (1, 1, 1),
        sm,
    )
    ref = a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)
    np.testing.assert_array_equal(out["c"].astype(np.float64), ref)


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found (install nvidia-cuda-nvcc)")
@pytest.mark.parametrize("sm", ["sm_80", "sm_90", "sm_100", "sm_120"])
@pytest.mark.parametrize("et,ct", [("f16", "f32"), ("i8", "i32"), ("f64", "f64")])
def test_dot_ptxas_clean_with_mma(tmp_path, sm, et, ct):
    from tilegen.runtime.ptxsim import compile_to_ptx

    ptx = compile_to_ptx(parse_module(_src(et, ct, 64, 32, 32), "mm.mlir"), sm)
    if sm == "sm_90" and et != "f64":  # wgmma (tests/test_codegen_wgmma.py), sm_90a
        assert re.search(r"\bwgmma\.mma_async\.sync\.aligned\.m64n32k\d+\.", ptx)
        assert ".target sm_90a" in ptx
        sm = "sm_90a"
    elif sm == "sm_100" and et != "f64":  # tcgen05, M 64 (tests/test_codegen_tcgen05_dot.py)
        kind = "f16" if et == "f16" else "i8"
        assert f"tcgen05.mma.cta_group::1.kind::{kind}" in ptx and ".target sm_100a" in ptx
        sm = "sm_100a"
    else:
        assert re.search(r"\bmma\.sync\.aligned\.m\d+n\d+k\d+\.row\.col\.", ptx)
    f = tmp_path / "k.ptx"
    f.write_text(ptx)
    p = subprocess.run(
        [PTXAS, "-v", f"-arch={sm}", str(f), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in p.stderr, p.stderr


def test_a_256x256_dot_takes_the_arch_specific_shared_memory():
    """A dot whose operands alone take 64 KB of staging (256 x 256 x 64 f16): over the 48 KB of
    static shared memory a plain target has. On sm_120 and sm_90 it builds for the ``a`` target,
    whose static limit is larger; on sm_80 (no ``a`` target) through ptxas's extended shared
    memory, as tileiras builds its sm_80 GEMMs; each matches NumPy. A dot over sm_80's
    166,912 B stops with a located message."""
    from tilegen.runtime.ptxsim import PtxSimRunError, compile_to_ptx, run_ptxsim

    with pytest.raises(PtxSimRunError) as e:
        compile_to_ptx(parse_module(_src("f16", "f32", 256, 512, 128), "mm.mlir"), "sm_80")
    assert e.value.diagnostics[0].message == (
        "PTX backend: dot staging needs 196608 bytes of shared memory (limit 166912)"
    )
    assert e.value.diagnostics[0].loc is not None
    src = _src("f16", "f32", 256, 256, 64)
    rs = np.random.RandomState(7)
    a = rs.randint(-4, 5, (256, 64)).astype(np.float16)
    b = rs.randint(-4, 5, (64, 256)).astype(np.float16)
    c = rs.randint(-4, 5, (256, 256)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c
    # sm_120: mma.sync with 64 KB of staging; sm_90: wgmma's K-major scratch, 72 KB
    for sm, inst, target in (
        ("sm_120", "mma.sync.aligned", "sm_120a"),
        ("sm_90", "wgmma.mma_async", "sm_90a"),
        ("sm_80", "mma.sync.aligned", "sm_80"),
    ):
        ptx = compile_to_ptx(parse_module(src, "mm.mlir"), sm)
        assert re.search(rf"^\.target {target}$", ptx, re.M) and inst in ptx
        if PTXAS is not None:
            from tilegen.runtime.codegen.driver import assemble

            assemble(ptx, int(sm[3:]))
        out = run_ptxsim(
            parse_module(src, "mm.mlir"), [("a", a), ("b", b), ("c", c)], (1, 1, 1), sm
        )
        np.testing.assert_array_equal(out["c"].astype(np.float64), ref)


def test_fp8_dot_on_sm80_is_tileiras_diagnostic():
    from tilegen.runtime.ptxsim import PtxSimRunError, compile_to_ptx

    src = _src("f8E4M3FN", "f32", 16, 8, 32)
    with pytest.raises(PtxSimRunError) as e:
        compile_to_ptx(parse_module(src, "mm.mlir"), "sm_80")
    assert e.value.diagnostics[0].message == (
        "Incompatibility with architecture 'sm_80': unsupported type 'f8E4M3FN'"
    )


@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
@pytest.mark.parametrize("m,n,k,ashape", [(16, 64, 64, (16, 64)), (16, 8, 64, (13, 70))])
def test_staged_rows_with_more_chunks_than_threads(monkeypatch, sm, m, n, k, ashape):
    """bench/fuzz_codegen.py seed 201002: an f64 dot on one warp whose rows are 64 elements with
    8-byte cp.async chunks (alignment of the dynamic row stride not proven) has 64 chunks a row
    for 32 threads; cp_async_tile copied only chunks 0..31 of each row."""
    from tilegen.runtime.ptxsim import run_ptxsim
    from tilegen.runtime.ptx.sim import tensor_ops

    monkeypatch.setattr(tensor_ops, "STRICT_CP_ASYNC", True)
    src = _src("f64", "f64", m, n, k).replace(
        ") {{\n  %0".replace("{{", "{"), f") optimization_hints=<{sm} = {{num_warps = 1}}> {{\n  %0"
    )
    assert "num_warps = 1" in src
    rs = np.random.RandomState(1)
    a = rs.randint(-4, 5, ashape).astype(np.float64)
    b = rs.randint(-4, 5, (k, n)).astype(np.float64)
    c = rs.randint(-4, 5, (m, n)).astype(np.float64)
    out = run_ptxsim(parse_module(src, "mm.mlir"), [("a", a), ("b", b), ("c", c)], (1, 1, 1), sm)
    ap = np.zeros((m, k))
    r, q = min(m, ashape[0]), min(k, ashape[1])
    ap[:r, :q] = a[:r, :q]
    np.testing.assert_array_equal(out["c"], ap @ b + c)


@pytest.mark.parametrize(
    "et,m,n,k,sm",
    [
        ("f32", 64, 64, 32, "sm_90"),  # unrolled: K x 32 results = 1,024 fma
        ("f32", 64, 64, 64, "sm_80"),  # a loop of 8 K steps an iteration
        ("f32", 16, 8, 2, "sm_80"),  # K of no 4-element multiple: scalar loads
        ("f64", 32, 32, 16, "sm_90"),  # (f64: DMMA where it can; 8 x 8 x 4 below)
    ],
)
def test_fma_dot_loads_each_row_once_per_k_vector(et, m, n, k, sm):
    """The dot without tensor cores (f32 x f32) runs outer products: per 16 bytes of K, one
    ``ld.shared.v4`` for each of a thread's A rows and B columns, not two scalar loads per
    ``fma`` (tileiras 13.5: 1,024 FFMA beside 96 LDS for 64 x 64 x 32); and the result is
    exact."""
    from tilegen.runtime.ptxsim import compile_to_ptx

    ptx = compile_to_ptx(parse_module(_src(et, et, m, n, k), "mm.mlir"), sm)
    fmas = len(re.findall(r"\bfma\.rn\.f(32|64)\b", ptx))
    loads = len(re.findall(r"\bld\.shared\b", ptx))
    if fmas:  # (an f64 dot on sm_90 is DMMA)
        vec = 16 // (4 if et == "f32" else 8) if k % (16 // (4 if et == "f32" else 8)) == 0 else 1
        assert ("ld.shared.v" in ptx) == (vec > 1)
        if vec > 1:
            assert loads * 2 <= fmas, (loads, fmas)
    _matches_numpy(sm, et, et, m, n, k, k)
