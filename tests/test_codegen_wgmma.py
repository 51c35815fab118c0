"""runtime/codegen/wgmma_dot.py on sm_90: ``wgmma.mma_async`` with shared-memory descriptors (A rows
permuted so the accumulator fragment is a blocked layout, kept in registers), run in the SIMT
simulator against NumPy exactly, assembled by ptxas for sm_90a (0 spills, HGMMA-class SASS), and
the mma.sync fallbacks (shapes wgmma does not take, other targets, ``CompileOptions(use_wgmma=False)``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.codegen.driver import assemble, find_ptxas

PTXAS = find_ptxas()
CUOBJDUMP = str(Path(PTXAS).with_name("cuobjdump")) if PTXAS else None

SRC = """
cuda_tile.module @m {{
entry @mm(%a: tile<ptr<{st}>>, %a1: tile<i32>, %a2: tile<i32>, %a3: tile<i32>, %a4: tile<i32>,
          %b: tile<ptr<{st}>>, %b1: tile<i32>, %b2: tile<i32>, %b3: tile<i32>, %b4: tile<i32>,
          %c: tile<ptr<{ct}>>, %c1: tile<i32>, %c2: tile<i32>, %c3: tile<i32>, %c4: tile<i32>){hints} {{
  %0 = make_token : token
  %ta = make_tensor_view %a, shape = [%a1, %a2], strides = [%a3, 1] : tile<i32> -> tensor_view<?x?x{st}, strides=[?,1]>
  %tb = make_tensor_view %b, shape = [%b1, %b2], strides = [%b3, 1] : tile<i32> -> tensor_view<?x?x{st}, strides=[?,1]>
  %tc = make_tensor_view %c, shape = [%c1, %c2], strides = [%c3, 1] : tile<i32> -> tensor_view<?x?x{ct}, strides=[?,1]>
  %z = constant <i32: 0> : tile<i32>
  %pa = make_partition_view %ta : partition_view<tile=({m}x{k}), tensor_view<?x?x{st}, strides=[?,1]>>
  %pb = make_partition_view %tb : partition_view<tile=({k}x{n}), tensor_view<?x?x{st}, strides=[?,1]>>
  %pc = make_partition_view %tc : partition_view<tile=({m}x{n}), tensor_view<?x?x{ct}, strides=[?,1]>>
  %x0, %t1 = load_view_tko weak %pa[%z, %z] token = %0 : partition_view<tile=({m}x{k}), tensor_view<?x?x{st}, strides=[?,1]>>, tile<i32> -> tile<{m}x{k}x{st}>, token
  %y0, %t2 = load_view_tko weak %pb[%z, %z] token = %0 : partition_view<tile=({k}x{n}), tensor_view<?x?x{st}, strides=[?,1]>>, tile<i32> -> tile<{k}x{n}x{st}>, token
  %w, %t3 = load_view_tko weak %pc[%z, %z] token = %0 : partition_view<tile=({m}x{n}), tensor_view<?x?x{ct}, strides=[?,1]>>, tile<i32> -> tile<{m}x{n}x{ct}>, token
{conv}  %d = {op} %x, %y, %w{sg} : tile<{m}x{k}x{et}>, tile<{k}x{n}x{et}>, tile<{m}x{n}x{ct}>
  %s = store_view_tko weak %d, %pc[%z, %z] token = %0 : tile<{m}x{n}x{ct}>, partition_view<tile=({m}x{n}), tensor_view<?x?x{ct}, strides=[?,1]>>, tile<i32> -> token
  return
}}
}}
"""


def _src(et, m, n, k, warps=None):
    ct = "i32" if et == "i8" else "f32"
    st = "f32" if et == "tf32" else et
    op = "mmai" if et == "i8" else "mmaf"
    if et == "tf32":
        conv = (
            f"  %x = ftof %x0 : tile<{m}x{k}xf32> -> tile<{m}x{k}xtf32>\n"
            f"  %y = ftof %y0 : tile<{k}x{n}xf32> -> tile<{k}x{n}xtf32>\n"
        )
    else:
        conv = ""
    src = SRC.format(
        st=st,
        et=et,
        ct=ct,
        m=m,
        n=n,
        k=k,
        op=op,
        sg=" signed signed" if op == "mmai" else "",
        conv=conv,
        hints=f" optimization_hints=<sm_90 = {{num_warps = {warps}}}>" if warps else "",
    )
    if et != "tf32":
        src = src.replace("%x0,", "%x,").replace("%y0,", "%y,")
    return src


def _fp8_bits(v: np.ndarray, e5m2: bool) -> np.ndarray:
    """Small integers -> e4m3 / e5m2 bit patterns (exact)."""
    mbits, bias = (2, 15) if e5m2 else (3, 7)
    out = np.zeros(v.shape, np.uint8)
    for idx, x in np.ndenumerate(v):
        if x == 0:
            continue
        s, a = (0x80 if x < 0 else 0), abs(int(x))
        e = a.bit_length() - 1
        mant = (a - (1 << e)) << mbits >> e
        out[idx] = s | ((e + bias) << mbits) | mant
    return out


def _operands(et, m, n, k, seed):
    rs = np.random.RandomState(seed)
    a = rs.randint(-4, 5, (m, k))
    b = rs.randint(-4, 5, (k, n))
    c = rs.randint(-4, 5, (m, n))
    if et == "f16":
        return a.astype(np.float16), b.astype(np.float16), c.astype(np.float32), a, b, c
    if et == "bf16":
        bits = lambda x: (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # noqa
        return bits(a), bits(b), c.astype(np.float32), a, b, c
    if et == "tf32":
        return a.astype(np.float32), b.astype(np.float32), c.astype(np.float32), a, b, c
    if et == "i8":
        return a.astype(np.int8), b.astype(np.int8), c.astype(np.int32), a, b, c
    e5 = et == "f8E5M2"
    return _fp8_bits(a, e5), _fp8_bits(b, e5), c.astype(np.float32), a, b, c


def _run(et, m, n, k, warps=None, sm="sm_90", options=None):
    from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim

    src = _src(et, m, n, k, warps)
    ptx = compile_to_ptx(parse_module(src, "mm.mlir"), sm, options=options)
    a, b, c, ra, rb, rc = _operands(et, m, n, k, m * 7 + n * 3 + k)
    args = [("a", a), ("b", b), ("c", c)]
    out = run_ptxsim(parse_module(src, "mm.mlir"), args, (1, 1, 1), sm, options=options)
    ref = ra.astype(np.float64) @ rb.astype(np.float64) + rc
    np.testing.assert_array_equal(out["c"].astype(np.float64), ref)
    return ptx


WGMMA_CASES = [
    ("f16", 64, 8, 16, None),
    ("f16", 64, 64, 32, None),
    ("f16", 128, 32, 64, None),
    ("f16", 64, 512, 16, None),  # N > 256: two instructions along N
    ("f16", 128, 32, 32, 8),  # two warpgroups
    ("f16", 256, 16, 16, 8),
    ("bf16", 64, 32, 32, None),
    ("tf32", 64, 32, 16, None),
    ("tf32", 128, 16, 8, None),
    ("i8", 64, 64, 64, None),
    ("i8", 64, 8, 32, None),
    ("f8E4M3FN", 64, 32, 64, None),
    ("f8E5M2", 64, 16, 32, None),
]


@pytest.mark.parametrize("et,m,n,k,warps", WGMMA_CASES)
def test_wgmma_dot_matches_numpy_in_ptxsim(et, m, n, k, warps):
    ptx = _run(et, m, n, k, warps)
    assert ".target sm_90a" in ptx
    assert "fence.proxy.async.shared::cta" in ptx and "wgmma.fence.sync.aligned" in ptx
    assert "wgmma.commit_group.sync.aligned" in ptx and "wgmma.wait_group.sync.aligned 0" in ptx
    assert "mma.sync" not in ptx
    tk = {"tf32": 8, "i8": 32, "f8E4M3FN": 32, "f8E5M2": 32}.get(et, 16)
    ninstr = -(-n // 256)
    want = (m // (64 * ((warps or 4) // 4))) * ninstr * (k // tk)
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k\d+", ptx)) == want


def test_wgmma_accumulator_staged_through_shared_memory(monkeypatch):
    """C/D without the wgmma accumulator layout: staged through shared memory."""
    from tilegen.runtime.layouts.mma_choice import mma_sync_accumulator_layout
    from tilegen.runtime.passes import layout_assignment as la

    monkeypatch.setattr(
        la, "accumulator_layout", lambda op, w, family: mma_sync_accumulator_layout(op, w)
    )
    ptx = _run("f16", 64, 32, 32)
    assert "wgmma.mma_async" in ptx


@pytest.mark.parametrize(
    "et,m,n,k,sm",
    [
        ("f16", 32, 32, 32, "sm_90"),  # M not a multiple of 64: mma.sync
        ("f16", 64, 64, 32, "sm_80"),
        ("i8", 64, 64, 64, "sm_120"),
        ("f16", 32, 64, 32, "sm_100"),  # M 32: no tcgen05 form (M 64, 128, 256)
    ],
)
def test_mma_sync_fallback(et, m, n, k, sm):
    ptx = _run(et, m, n, k, sm=sm)
    assert "wgmma" not in ptx and "mma.sync.aligned" in ptx
    assert f".target {sm}\n" in ptx


def test_no_wgmma_option_forces_mma_sync(monkeypatch):
    from tilegen.runtime.options import CompileOptions

    ptx = _run("f16", 64, 64, 32, options=CompileOptions(use_wgmma=False))
    assert "wgmma" not in ptx and "mma.sync.aligned" in ptx and ".target sm_90\n" in ptx


@pytest.mark.skipif(PTXAS is None or not Path(CUOBJDUMP or "").is_file(), reason="no ptxas")
@pytest.mark.parametrize(
    "et,m,n,k,warps,sass",
    [
        ("f16", 64, 64, 32, None, "HGMMA.64x64x16.F32"),
        ("f16", 128, 32, 32, 8, "HGMMA.64x32x16.F32"),
        ("tf32", 64, 32, 16, None, "HGMMA.64x32x8.F32.TF32"),
        ("i8", 64, 64, 64, None, "IGMMA.64x64x32.S8.S8"),
        ("f8E4M3FN", 64, 32, 64, None, "QGMMA.64x32x32.F32.E4M3.E4M3"),
    ],
)
def test_wgmma_ptxas_clean_and_sass(tmp_path, et, m, n, k, warps, sass):
    from tilegen.runtime.ptxsim import compile_to_ptx

    ptx = compile_to_ptx(parse_module(_src(et, m, n, k, warps), "mm.mlir"), "sm_90")
    cubin, log = assemble(ptx, 90, verbose=True)
    assert "for 'sm_90a'" in log, log
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log
    assert "serialized" not in log, log  # ptxas warns when it must serialize wgmma
    f = tmp_path / "k.cubin"
    f.write_bytes(cubin)
    out = subprocess.run([CUOBJDUMP, "-sass", str(f)], capture_output=True, text=True).stdout
    assert sass in out, sorted(set(re.findall(r"\b[HIQ]GMMA[.\w]*", out)))


def _aligned_src(et, m, n, k):
    """The kernel with 16-byte divisibility assumed for A/B (pointer, row stride, row extent):
    the loads get K-contiguous vectors, so the operand stores pack runs along K."""
    st = "f32" if et == "tf32" else et
    s = _src(et, m, n, k)
    pre = "  %0 = make_token : token\n"
    extra = "".join(
        f"  %{v}_ = assume div_by<16>, %{v} : tile<{ty}>\n"
        for v, ty in (
            ("a", f"ptr<{st}>"),
            ("b", f"ptr<{st}>"),
            ("a2", "i32"),
            ("a3", "i32"),
            ("b2", "i32"),
            ("b3", "i32"),
        )
    )
    s = s.replace(pre, pre + extra)
    for x in "ab":
        s = s.replace(
            f"make_tensor_view %{x}, shape = [%{x}1, %{x}2], strides = [%{x}3, 1]",
            f"make_tensor_view %{x}_, shape = [%{x}1, %{x}2_], strides = [%{x}3_, 1]",
        )
    return s


@pytest.mark.parametrize("et", ["f16", "bf16", "tf32", "i8", "f8E4M3FN"])
def test_wgmma_vectorized_operand_stores(et, monkeypatch):
    from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim
    from tilegen.runtime.options import CompileOptions

    # the register path (A is otherwise cp.async-staged: tests/test_codegen_pipeline.py)
    options = CompileOptions(use_cp_async=False)
    m, n, k = 64, 32, 64
    src = _aligned_src(et, m, n, k)
    ptx = compile_to_ptx(parse_module(src, "mm.mlir"), "sm_90", options=options)
    assert "st.shared.v4.b32" in ptx and "wgmma.mma_async" in ptx
    if PTXAS is not None:
        _, log = assemble(ptx, 90, verbose=True)
        assert "0 bytes spill stores, 0 bytes spill loads" in log, log
    a, b, c, ra, rb, rc = _operands(et, m, n, k, 5)
    out = run_ptxsim(
        parse_module(src, "mm.mlir"),
        [("a", a), ("b", b), ("c", c)],
        (1, 1, 1),
        "sm_90",
        options=options,
    )
    np.testing.assert_array_equal(out["c"].astype(np.float64), ra.astype(np.float64) @ rb + rc)


def test_operand_stores_with_lanes_along_k_are_bank_conflict_free():
    """LBO = 144 (16 bytes of padding): a warp storing 32 K-consecutive f16 of one A row (the
    layout the loads of the corpus matmuls get) touches each bank once."""
    from tilegen.runtime.codegen.dist import dist
    from tilegen.runtime.codegen.smem_fields import fields_static
    from tilegen.runtime.layouts.attrs import BlockedLayout
    from tilegen.runtime.layouts.mma_choice import LBO, wgmma_sbo

    K, esz = 32, 2
    sbo = wgmma_sbo(K, esz)
    kf = ((0, 3, esz), (3, None, LBO))
    rows = ((0, 3, 16), (3, 2, 2 * sbo), (5, 0, 8 * sbo), (5, 1, sbo), (6, None, 8 * sbo))
    d = dist(BlockedLayout((1, 1), (1, 32), (4, 1), (1, 0)), (64, K))
    for reg in range(d.nregs):
        for w in range(4):
            banks = {}
            for lane in range(32):
                row, col = d.coord(32 * w + lane, reg)
                addr = fields_static(row, rows) + fields_static(col, kf)
                banks.setdefault(addr // 4 % 32, set()).add(addr // 4)
            assert max(len(v) for v in banks.values()) == 1


@pytest.mark.parametrize("strict", [False, True])
def test_a_wgmma_result_lands_at_its_wait_in_the_strict_mode(strict):
    """ptxsim's strict async mode lands a wgmma's accumulator when ``wgmma.wait_group`` retires
    its group, as the hardware does (the fast mode lands it at issue): with the wait taken out,
    the stores after the MMA read the accumulator's old registers (C), not A @ B + C."""
    from tilegen.runtime.ptx.launch import run_ptx
    from tilegen.runtime.ptxsim import compile_to_ptx

    et, m, n, k = "f16", 64, 32, 32
    ptx = compile_to_ptx(parse_module(_src(et, m, n, k), "mm.mlir"), "sm_90")
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == 1
    bad = ptx.replace("wgmma.wait_group.sync.aligned 0;", "")
    a, b, c, ra, rb, rc = _operands(et, m, n, k, 5)
    want = ra.astype(np.float64) @ rb.astype(np.float64) + rc

    def launch(text):
        return run_ptx(text, [a, b, c.copy()], (1, 1, 1), file="<wgmma>", strict_async=strict)[2]

    np.testing.assert_array_equal(launch(ptx).astype(np.float64), want)
    out = launch(bad).astype(np.float64)
    if strict:
        np.testing.assert_array_equal(out, rc)  # the accumulator had not landed
    else:
        np.testing.assert_array_equal(out, want)
