"""runtime/codegen/tcgen05_dot.py: a dot of its own on ``tcgen05.mma`` (sm_100a), the
accumulator in tensor memory and read back a row per thread (docs/pipelines.md section 15).
The layout stage's choice (runtime/layouts/mma_choice.py), exact results against NumPy in strict
ptxsim (f16, bf16, 4 and 8 warps, C added, C zero), ptxas-clean with UTCHMMA/LDTM in SASS, and
the mma.sync fallbacks (shapes tcgen05 does not take here, ``use_tcgen05=False``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.codegen.driver import assemble, find_ptxas
from tilegen.runtime.options import CompileOptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_codegen_wgmma import _operands, _src  # noqa: E402

PTXAS = find_ptxas()


def _sm100_src(et, m, n, k, warps=None, zero_c=False):
    src = _src(et, m, n, k, warps).replace("sm_90 =", "sm_100 =")
    if zero_c:  # C is a zero tile: the MMA's first K step overwrites D, nothing is added
        src = src.replace(
            "  %d = mmaf %x, %y, %w",
            f"  %w0 = constant <f32: 0.0> : tile<{m}x{n}xf32>\n  %d = mmaf %x, %y, %w0",
        )
    return src


def _run(et, m, n, k, warps=None, options=None, zero_c=False, seed=0):
    from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim

    src = _sm100_src(et, m, n, k, warps, zero_c)
    ptx = compile_to_ptx(parse_module(src, "mm.mlir"), "sm_100", options=options)
    a, b, c, ra, rb, rc = _operands(et, m, n, k, seed or m * 7 + n * 3 + k)
    args = [("a", a), ("b", b), ("c", c)]
    out = run_ptxsim(parse_module(src, "mm.mlir"), args, (1, 1, 1), "sm_100", options=options)
    ref = ra.astype(np.float64) @ rb.astype(np.float64) + (0 if zero_c else rc)
    np.testing.assert_array_equal(out["c"].astype(np.float64), ref)
    return ptx


TCGEN05_CASES = [
    ("f16", 128, 32, 16, None),
    ("f16", 128, 64, 64, None),
    ("f16", 128, 256, 32, None),  # a 256-column row per thread, 8 loads of x32
    ("bf16", 128, 128, 32, None),
    ("f16", 128, 64, 32, 8),  # two column halves
    ("bf16", 128, 256, 16, 8),
]


@pytest.mark.parametrize("et,m,n,k,warps", TCGEN05_CASES)
def test_tcgen05_dot_matches_numpy_in_strict_ptxsim(et, m, n, k, warps):
    ptx = _run(et, m, n, k, warps)
    assert ".target sm_100a" in ptx and "mma.sync" not in ptx
    # one MMA per 16 of K, one allocation, one commit per dot, one row read per thread
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 ", ptx)) == k // 16
    assert ptx.count("tcgen05.alloc.cta_group::1") == 1
    assert ptx.count("tcgen05.dealloc.cta_group::1") == 1
    assert ptx.count("tcgen05.commit.cta_group::1") == 1
    part = n // ((warps or 4) // 4)
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x") == -(-part // 32)
    assert "add.rn.f32" in ptx  # C added in registers


@pytest.mark.parametrize(
    "et,m,n,k,warps",
    [
        ("f16", 64, 64, 32, None),  # M 64: rows in lanes 0-15 of each warp's quarter
        ("bf16", 64, 32, 16, None),  # 16 columns a thread
        ("f16", 64, 128, 32, 8),  # and two warps' column halves
        ("f16", 256, 128, 32, 8),  # M 256: two M 128 MMAs a K step, a row a thread
        ("bf16", 256, 64, 16, 8),
    ],
)
def test_tcgen05_dots_of_64_and_256_rows(et, m, n, k, warps):
    ptx = _run(et, m, n, k, warps)
    assert ".target sm_100a" in ptx and "mma.sync" not in ptx
    blocks = max(1, m // 128)
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 ", ptx)) == blocks * k // 16
    if m == 64:  # two threads a row: each its half of the warp's columns
        part = n // ((warps or 4) // 4) // 2
        loads = re.findall(r"tcgen05\.ld\.sync\.aligned\.16x32bx2\.x(\d+)\.b32 .*, (\d+);", ptx)
        assert len(loads) == -(-part // 32) and all(int(h) == part for _, h in loads)
    else:
        assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x") == -(-n // 32)
    if PTXAS is not None and m == 64:  # (at 256 rows, D and C are 2 x 128 values a thread)
        _, log = assemble(ptx, 100, verbose=True)
        assert " 0 bytes spill stores" in log


KIND_CASES = [
    # (element, M, N, K, warps, kind, bytes an element)
    ("tf32", 128, 64, 32, None, "tf32", 4),
    ("f8E4M3FN", 128, 64, 128, None, "f8f6f4", 1),
    ("f8E5M2", 128, 64, 64, 8, "f8f6f4", 1),
    ("i8", 128, 64, 64, None, "i8", 1),
    ("i8", 256, 64, 64, 8, "i8", 1),  # two M 128 MMAs a K step
    ("f8E4M3FN", 64, 64, 32, None, "f8f6f4", 1),  # half a row a thread
]


@pytest.mark.parametrize("et,m,n,k,warps,kind,esz", KIND_CASES)
def test_tf32_fp8_and_i8_dots_run_on_tcgen05(et, m, n, k, warps, kind, esz):
    """Today's path takes tcgen05 for every kind, not only kind::f16: one MMA per 32 bytes of
    K (8 tf32, 32 8-bit elements) and 128-row block, an s32 accumulator for i8 (C added with
    ``add.s32``); exact in strict ptxsim, ptxas-clean."""
    ptx = _run(et, m, n, k, warps)
    assert "mma.sync" not in ptx
    mmas = re.findall(rf"tcgen05\.mma\.cta_group::1\.kind::{kind} ", ptx)
    assert len(mmas) == max(1, m // 128) * k * esz // 32
    assert ("add.s32" if et == "i8" else "add.rn.f32") in ptx
    if PTXAS is not None:
        _, log = assemble(ptx, 100, verbose=True)
        assert " 0 bytes spill stores" in log, log


def test_unsigned_i8_dot_on_tcgen05():
    """A u8 A operand: format 0 in the instruction descriptor (bits 7-9), not s8's 1."""
    from tilegen.runtime.codegen.tcgen05 import instruction_descriptor
    from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim

    m, n, k = 128, 64, 64
    src = _sm100_src("i8", m, n, k).replace("signed signed", "unsigned signed")
    ptx = compile_to_ptx(parse_module(src, "mm.mlir"), "sm_100")
    want = instruction_descriptor(  # (B staged N-major: the B-major bit)
        128, n, "i8", "s32", b_mn_major=True, unsigned=(True, False), saturate=True
    )
    assert f", {want}, " in ptx.replace("\t", " ")
    rs = np.random.RandomState(4)
    a, b = rs.randint(0, 200, (m, k)), rs.randint(-4, 5, (k, n))
    c = rs.randint(-4, 5, (m, n))
    args = [("a", a.astype(np.uint8)), ("b", b.astype(np.int8)), ("c", c.astype(np.int32))]
    out = run_ptxsim(parse_module(src, "mm.mlir"), args, (1, 1, 1), "sm_100")
    np.testing.assert_array_equal(out["c"], a @ b + c)


def test_zero_accumulator_adds_nothing():
    ptx = _run("f16", 128, 64, 32, zero_c=True)
    assert "add.rn.f32" not in ptx and "tcgen05.mma" in ptx


@pytest.mark.parametrize(
    "m,n,k,warps,why",
    [
        (32, 64, 32, None, "M 32"),
        (128, 32, 8, None, "K 8: not a multiple of 16"),
        (128, 32, 32, 8, "N 32 over two column halves"),
    ],
)
def test_shapes_tcgen05_does_not_take_stay_on_mma_sync(m, n, k, warps, why):
    ptx = _run("f16", m, n, k, warps)
    assert "tcgen05" not in ptx and "mma.sync.aligned" in ptx, why


def test_no_tcgen05_option_forces_mma_sync():
    ptx = _run("f16", 128, 64, 32, options=CompileOptions(target="sm_100", use_tcgen05=False))
    assert "tcgen05" not in ptx and "mma.sync.aligned" in ptx


def test_family_choice():
    from tilegen.runtime.layouts.attrs import BlockedLayout
    from tilegen.runtime.layouts.mma_choice import tcgen05_accumulator_layout

    # warp w reads TMEM lanes 32 (w % 4): rows by w % 4, column halves by w / 4
    assert tcgen05_accumulator_layout(8, 128) == BlockedLayout((1, 64), (32, 1), (4, 2), (0, 1))
    assert tcgen05_accumulator_layout(4, 64) == BlockedLayout((1, 64), (32, 1), (4, 1), (0, 1))


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
@pytest.mark.parametrize("et,n,warps", [("f16", 128, 8), ("bf16", 64, None)])
def test_tcgen05_dot_ptxas_clean_and_sass(tmp_path, et, n, warps):
    from tilegen.runtime.ptxsim import compile_to_ptx

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_async_pipeline_e2e import sass_counts

    ptx = compile_to_ptx(parse_module(_sm100_src(et, 128, n, 64, warps), "mm.mlir"), "sm_100")
    cubin, log = assemble(ptx, 100, verbose=True)
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log
    counts, _ = sass_counts(tmp_path, ptx, "sm_100a")
    assert counts.get("UTCHMMA", 0) == 4 and counts.get("LDTM", 0) >= 1, counts
    assert "HMMA" not in counts, counts


@pytest.mark.parametrize("target", ["sm_100a", "sm_90a"])
def test_k_loop_on_todays_path_in_strict_ptxsim(tmp_path, target):
    """The cuTile 128x128x64 GEMM without warp specialization: a K loop of tcgen05 (sm_100a)
    or wgmma (sm_90a) dots whose A is copied by cp.async. Strict ptxsim once fed the MMA the
    copies' poison: its async-proxy reads did not publish what the barrier after the copies'
    wait made visible. Without that barrier strict mode names the other warp's copy."""
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import cutile_kernels_async as cka

    from tilegen.runtime import driver
    from tilegen.runtime.ptx.launch import run_ptx
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    path = cka.export_bytecode(str(tmp_path))["gemm_f16_128x128x64"]
    pr = cka.problems()["gemm_f16_128x128x64"]
    c = driver.compile_source(Path(path), CompileOptions(target=target, warp_specialize=False))
    assert ("tcgen05.mma" if target == "sm_100a" else "wgmma.mma_async") in c.ptx
    assert "cp.async.cg" in c.ptx or "cp.async.ca" in c.ptx
    if target == "sm_100a":  # B (K x N) staged by cp.async in the MN-major layout, read so
        from tilegen.runtime.codegen.tcgen05 import instruction_descriptor

        idesc = instruction_descriptor(128, 128, "f16", "f32", b_mn_major=True)
        assert re.search(rf"kind::f16 \[%r\d+\], %rd\d+, %rd\d+, {idesc},", c.ptx)
    args = [np.asarray(v) for v in pr.args.values()]
    out = run_ptx(c.ptx, args, pr.grid, strict_async=True)
    np.testing.assert_allclose(out[2], pr.expected["C"], rtol=pr.rtol, atol=pr.atol)
    # every barrier between the copies' wait and the MMA, planted out
    i = re.search(r"cp\.async\.wait_group \d+;\n", c.ptx).end()
    j = re.search(r"(tcgen05\.mma|wgmma\.mma_async)", c.ptx[i:]).start() + i
    assert "bar.sync 0;" in c.ptx[i:j]
    bad = c.ptx[:i] + c.ptx[i:j].replace("\tbar.sync 0;\n", "") + c.ptx[j:]
    with pytest.raises(PtxSimError, match="with no barrier in between"):
        run_ptx(bad, args, pr.grid, strict_async=True)


_WAIT = r"\$L__wait_\d+:\n\tmbarrier\.try_wait[^\n]*\n\t@!%p\d+ bra \$L__wait_\d+;\n"


@pytest.mark.parametrize("target", ["sm_100a", "sm_90a"])
def test_k_loop_mmas_wait_a_step_later(tmp_path, target):
    """The cuTile 128x128x64 GEMM without warp specialization (docs/pipelines.md section 42):
    its accumulator is read by nothing in the loop, so iteration i issues its MMAs, waits for
    MMA i - 1 and only then copies iteration i + 2 into the stage MMA i - 1 read (three
    stages): the tensor core has the next MMAs queued when one step's finish. sm_100a commits
    to two mbarriers in turn; sm_90a's wgmmas write the loop's own registers (no copy of C)
    and ``wait_group 1`` retires the previous step's. Exact in strict ptxsim. Planted out, the
    wait in the loop lets a copy overwrite a stage an MMA may still read (strict ptxsim names
    it), and the wait after it lets the epilogue read the accumulator while the last MMAs write
    it (sm_100a: named; strict ptxsim once missed it, a commit's tracked MMAs growing with
    later ones; sm_90a: the sums come out wrong)."""
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import cutile_kernels_async as cka

    from tilegen.runtime import driver
    from tilegen.runtime.ptx.launch import run_ptx
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    path = cka.export_bytecode(str(tmp_path))["gemm_f16_128x128x64"]
    pr = cka.problems()["gemm_f16_128x128x64"]
    opts = CompileOptions(target=target, warp_specialize=False)
    ptx = driver.compile_source(Path(path), opts).ptx
    assert "cp.async.wait_group 1;" in ptx  # three stages
    if PTXAS is not None:  # ptxas-clean, no spills
        _, log = assemble(ptx, int(target[3:-1]), verbose=True)
        assert " 0 bytes spill stores" in log and "C7511" not in log, log
    top = re.search(r"^\$L__for_body_\d+:", ptx, re.M).end()
    end = re.search(r"^\$L__for_end_\d+:", ptx, re.M).start()
    body = ptx[top:end]
    mma = "tcgen05.mma" if target == "sm_100a" else "wgmma.mma_async"
    if target == "sm_100a":
        issued = re.search(r"tcgen05\.commit[^\n]*\];", body)
        waits = list(re.finditer(_WAIT, body))
        assert issued and len(waits) == 1 and body.count("tcgen05.commit") == 1, body
        wait = waits[0]
        after = list(re.finditer(_WAIT, ptx))[-1]
    else:
        issued = re.search(r"wgmma\.commit_group\.sync\.aligned;", body)
        wait = re.search(r"\twgmma\.wait_group\.sync\.aligned 1;\n", body)
        assert issued and wait and "wait_group.sync.aligned 0" not in body, body
        assert not re.search(r"mov\.f32 %f\d+, %f\d+;", body)  # C is not copied
        after = re.search(r"\twgmma\.wait_group\.sync\.aligned 0;\n", ptx[end:])
    # the MMAs, their commit, the wait for the previous step's, then the copies
    assert body.index(mma) < issued.start() < wait.start()
    assert wait.start() < body.index("cp.async.cg.shared.global")
    assert "bar.sync" in body[: body.index(mma)]
    args = [np.asarray(v) for v in pr.args.values()]
    out = run_ptx(ptx, args, pr.grid, strict_async=True)
    np.testing.assert_allclose(out[2], pr.expected["C"], rtol=pr.rtol, atol=pr.atol)
    at = top + wait.start()
    with pytest.raises(PtxSimError, match="may still be reading"):
        run_ptx(ptx[:at] + ptx[top + wait.end() :], args, pr.grid, strict_async=True)
    at, to = (
        (after.start(), after.end())
        if target == "sm_100a"
        else (
            end + after.start(),
            end + after.end(),
        )
    )
    assert at > end
    bad = ptx[:at] + ptx[to:]
    if target == "sm_100a":
        msg = "reads tensor memory while tcgen05.mma .* is still writing it"
        with pytest.raises(PtxSimError, match=msg):
            run_ptx(bad, args, pr.grid, strict_async=True)
    else:
        got = run_ptx(bad, args, pr.grid, strict_async=True)[2]
        assert not np.allclose(got, pr.expected["C"], rtol=pr.rtol, atol=pr.atol)


@pytest.mark.parametrize(
    "ab,out,tm,tn,tk,sizes",
    [
        ("e4m3", "f16", 128, 64, 64, dict(M=128, N=64, K=13)),  # fuzz seed 341527's kernel
        ("i8", "i32", 128, 128, 128, dict(M=128, N=128, K=99)),  # seed 342321's
    ],
)
def test_8bit_b_staged_mn_major(ab, out, tm, tn, tk, sizes, tmp_path):
    """8-bit B loaded K x N (rows a 16-byte multiple; A's are not, so today's path) goes into
    the K loop's stages by cp.async in the no-swizzle MN-major layout (16 bytes of N a
    core-matrix row; ``use_tma=False``: the async path's producer threads copy A now, section
    43 of docs/pipelines.md) and the MMAs read it there (the B-major bit, as tileiras's kind::f8f6f4
    and kind::i8 descriptors for an N-major B): no transpose, no byte stores. (A first form
    copied B's rows and transposed them in shared memory; its MMAs once read the stage
    instead of the transposed copy, which strict ptxsim showed as wrong sums.)"""
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import fuzz_async as fa

    from tilegen.runtime.codegen.tcgen05 import instruction_descriptor

    params = dict(ab=ab, out=out, TM=tm, TN=tn, TK=tk, BT=0, INIT=0, EPI=0)
    cfg = fa.Config(0, "gemm", "sm_100a", params, {}, sizes, aligned=False)
    o = fa.check(cfg, str(tmp_path), use_tma=False)
    assert o.status == "ok" and o.path == "today", f"{o.status}: {o.detail}\n{o.plan}"
    kind, key = ("i8", "i8") if ab == "i8" else ("f8f6f4", "f8E4M3FN")
    assert f"tcgen05.mma.cta_group::1.kind::{kind}" in o.ptx and "mma.sync" not in o.ptx
    assert "cp.async.cg.shared.global" in o.ptx and "st.shared.b8" not in o.ptx
    idesc = instruction_descriptor(
        tm, tn, key, "s32" if ab == "i8" else "f32", b_mn_major=True, saturate=ab == "i8"
    )
    assert re.search(rf"kind::{kind} \[%r\d+\], %rd\d+, %rd\d+, {idesc},", o.ptx)
