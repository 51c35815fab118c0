"""The async path in the real compile pipeline (docs/pipelines.md): the rule and its recorded
decisions (driver stage ``async``, ``tilegen compile --emit=async-plan``), the typed options that
switch it off, the fallback (today's code, unchanged), and the code of the kernels that take it
(runtime/codegen/async_loop.py): ptxas-clean with the async SASS, and run in the simulator's
strict async mode against the corpus's expected outputs and NumPy - with the kernel's own
epilogue, a non-zero initial accumulator and partial tiles.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from paths import CORPUS_OUT, needs_shared
from tilegen.runtime import driver
from tilegen.runtime.diagnostics import CompileError
from tilegen.runtime.options import CompileOptions
from tilegen.runtime.passes import async_decision
from tilegen.runtime.ptx.launch import run_ptx
from tilegen.runtime.ptxas import find_ptxas

pytestmark = needs_shared(CORPUS_OUT)


def _plan(kernel: str, target: str, **fields) -> async_decision.AsyncDecision:
    options = CompileOptions(target=target, **fields)
    c = driver.compile_source(CORPUS_OUT / f"{kernel}.tileirbc", options, until="async")
    assert c.stages[-1] == "async"
    (d,) = c.async_plan
    assert d.kernel.startswith(kernel) and d.target == target
    return d


@pytest.mark.parametrize("target,mma", [("sm_90a", "wgmma"), ("sm_100a", "tcgen05")])
def test_matmul_f16_is_eligible_with_its_plan(target, mma):
    d = _plan("matmul_f16", target)
    assert d.eligible and d.mma == mma
    assert d.tile == (64, 64, 32) and d.elements == "f16 x f16 -> f32"
    # 64x32 + 32x64 f16 per stage; 11 stages (the async path's cap, tileiras's ring): 88 KB in
    # one static array
    assert (d.stage_bytes, d.stages, d.over_48k) == (8192, 11, True)
    assert d.taken and d.reason == ""
    # the kernel's 4 warps consume, one producer warp group gives its registers away
    assert (d.consumer_warps, d.producer_warps, d.producer_regs, d.consumer_regs) == (
        4,
        4,
        32,
        256,
    )


def test_matmul_f16_on_sm120_takes_mma_sync_consumers_without_setmaxnreg():
    # (docs/pipelines.md section 31) 64 x 32 f16 A rows: the 64-byte swizzle
    d = _plan("matmul_f16", "sm_120")
    assert d.eligible and d.taken and d.mma == "mma.sync"
    assert (d.stage_bytes, d.stages) == (8192, 11)
    assert (d.consumer_warps, d.producer_warps, d.producer_regs) == (4, 4, None)


@pytest.mark.parametrize(
    "kernel,target,reason",
    [
        ("matmul_f16", "sm_80", "sm_80 has no async path"),
        ("matmul_f16", "sm_100f", "sm_100f is a family target: 48 KiB of static shared"),
        ("matmul_f64", "sm_90a", "f64 x f64 -> f64 dots have no wgmma instruction"),
        ("matmul_f64", "sm_100a", "f64 x f64 -> f64 dots have no tcgen05 instruction"),
        ("batched_matmul", "sm_90a", "did not lay this 32x32x32 dot out for wgmma (mma.sync"),
        (
            "batched_matmul",
            "sm_100a",
            "tcgen05 (cta_group::1) takes M 64 or 128, the tile has M 32",
        ),
        # (flash_attention: the general form takes it, tests/test_async_general.py and, on
        # sm_120, tests/test_async_sm120_general.py)
    ],
)
def test_what_falls_back_and_why(kernel, target, reason):
    d = _plan(kernel, target)
    assert not d.eligible and not d.taken
    assert reason in d.reason
    assert reason in d.line()


@pytest.mark.parametrize(
    "fields,reason",
    [
        ({"use_tma": False}, "use_tma is off (--no-tma)"),
        ({"warp_specialize": False}, "warp_specialize is off (--no-warp-specialize)"),
        ({"pipelining": False}, "K-loop pipelining is off (--no-pipeline)"),
        ({"num_stages": 1}, "num_stages is 1"),
        ({"use_wgmma": False}, "use_wgmma is off (--no-wgmma)"),
    ],
)
def test_options_switch_the_path_off(fields, reason):
    d = _plan("matmul_f16", "sm_90a", **fields)
    assert (d.eligible, d.reason) == (False, reason) or reason in d.reason
    assert not d.eligible


def test_a_num_stages_hint_is_honored_and_the_default_ring_is_deeper():
    assert _plan("matmul_f16", "sm_90a", num_stages=3).stages == 3
    assert _plan("matmul_f16", "sm_90a").stages == async_decision.ASYNC_MAX_STAGES
    # 16 KB stages: as many as fit beside the accumulator scratch and the two B^T buffers
    assert _plan("matmul_tf32", "sm_90a").stages == 11


def test_tf32_operands_through_their_conversion_qualify():
    d = _plan("matmul_tf32", "sm_90a")
    assert d.eligible and d.elements == "tf32 x tf32 -> f32" and d.stage_bytes == 16384


def test_unaligned_strides_are_copied_by_the_producer_threads():
    # the same matmul with A's row stride known only to be even: TMA cannot describe it, so
    # the producer warp group's threads copy A, 4 bytes a cp.async (docs/pipelines.md section
    # 43)
    text = (CORPUS_OUT / "matmul_f16.mlir").read_text()
    for needle in ("assume div_by<8>, %arg3 ", "assume div_by<8>, %assume_assume "):
        assert needle in text
        text = text.replace(needle, needle.replace("<8>", "<2>"))
    c = driver.compile_source(text, CompileOptions(target="sm_90a"), "m.mlir", until="async")
    (d,) = c.async_plan
    assert d.taken and d.thread_copied == (("A", 4),)
    assert "A copied by the producer's threads (4-byte cp.async: no TMA)" in d.line()


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_tf32_operands_of_unaligned_rows_are_copied_by_threads(target):
    # matmul_tf32 with A's and B's row strides known only as 4-byte multiples: the producer's
    # threads copy both by 4-byte cp.async (docs/pipelines.md section 43). On sm_100a, B
    # loaded K x N lands in 32-byte swizzle atoms (128B_ATOM_32B, the layout its MMAs read):
    # exact in strict ptxsim against the corpus; with 16-byte atoms instead, wrong sums
    text = (CORPUS_OUT / "matmul_tf32.mlir").read_text()
    for needle in (
        "div_by<4>, %arg3 ",
        "div_by<4>, %assume_assume ",
        "div_by<4>, %arg8 ",
        "div_by<4>, %assume_assume_11 ",
    ):
        assert needle in text
        text = text.replace(needle, needle.replace("<4>", "<1>"))
    c = driver.compile_source(text, CompileOptions(target=target), "m.mlir")
    (d,) = c.async_plan
    assert d.taken and d.thread_copied == (("A", 4), ("B", 4)), d.line()
    if find_ptxas() is not None:  # the PTX simulated is legal for its target, with no spills
        from tilegen.runtime.ptxas import assemble

        _, log = assemble(c.ptx, int(target[3:6].rstrip("a")), verbose=True)
        assert " 0 bytes spill stores" in log, log
    data = np.load(CORPUS_OUT / "matmul_tf32.npz")
    args = [data["arg__A"], data["arg__B"], np.zeros_like(data["arg__C"])]
    grid = tuple(int(x) for x in data["grid"]) + (1, 1)
    want = data["expected__C"]
    out = run_ptx(c.ptx, args, grid, strict_async=True)[2]
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
    atoms = re.findall(r"\tand\.b32 (%r\d+), (%r\d+), 96;\n", c.ptx)
    if target == "sm_90a":
        assert not atoms
        return
    assert atoms  # (B's chunks: bits [5, 7) XOR bits [7, 9))
    bad = re.sub(r"\tand\.b32 (%r\d+), (%r\d+), 96;\n", r"\tand.b32 \1, \2, 112;\n", c.ptx)
    bad = bad.replace(", 2;\n\tand.b32", ", 3;\n\tand.b32")  # (>> 3 & 112: 16-byte atoms)
    got = run_ptx(bad, args, grid, strict_async=True)[2]
    assert not np.allclose(got, want, rtol=1e-3, atol=1e-3)


def _tile_128_on_8_warps(n: int) -> str:
    text = (CORPUS_OUT / "matmul_f16.mlir").read_text()
    for old, new in (
        ("tile=(64x32)", "tile=(128x32)"),
        ("tile<64x32xf16>", "tile<128x32xf16>"),
        ("tile=(32x64)", f"tile=(32x{n})"),
        ("tile<32x64xf16>", f"tile<32x{n}xf16>"),
        ("tile<64x64xf32>", f"tile<128x{n}xf32>"),
        ("tile=(64x64)", f"tile=(128x{n})"),
    ):
        text = text.replace(old, new)
    return (
        "module attributes {tt.num_warps = 8 : i32} {\ncuda_tile.module @m {\n" + text + "\n}\n}\n"
    )


def test_eligible_kernels_the_emitter_does_not_lower_say_so():
    # a 128 x 32 tile on 8 warps: the rule's tcgen05 shapes cover it, the emitter's tcgen05
    # consumers take 4 warps, or 8 for N a multiple of 64 (a warp group per half of the
    # columns, docs/pipelines.md section 28): today's path, with the reason
    text = _tile_128_on_8_warps(32)
    c = driver.compile_source(text, CompileOptions(target="sm_100a"), "m.mlir", until="async")
    (d,) = c.async_plan
    assert d.eligible and not d.taken
    assert "the emitter's tcgen05 path takes 4 warps" in d.reason


def test_a_128_row_tcgen05_tile_on_8_warps_reads_column_halves():
    text = _tile_128_on_8_warps(64)
    c = driver.compile_source(text, CompileOptions(target="sm_100a"), "m.mlir", until="ptx")
    (d,) = c.async_plan
    assert d.taken and d.consumer_warps == 8, d.line()
    rng = np.random.default_rng(0)
    M, N, K = 256, 128, 96
    a = rng.integers(-3, 4, (M, K)).astype(np.float16)
    b = rng.integers(-3, 4, (K, N)).astype(np.float16)
    out = run_ptx(
        c.ptx, [a, b, np.zeros((M, N), np.float32)], (M // 128, N // 64, 1), strict_async=True
    )
    np.testing.assert_array_equal(out[2], a.astype(np.float64) @ b.astype(np.float64))


def test_fallback_ptx_is_todays_path_unchanged():
    src = CORPUS_OUT / "matmul_f16.tileirbc"
    off = driver.compile_source(src, CompileOptions(target="sm_90a", use_tma=False), until="ptx")
    old = driver.compile_source(src, CompileOptions(target="sm_90a", num_stages=1), until="ptx")
    assert "cp.async.bulk.tensor" not in off.ptx and "wgmma.mma_async" in off.ptx
    # a kernel the rule refuses compiles as before the async stage existed (no attributes)
    f64 = driver.compile_source(CORPUS_OUT / "matmul_f64.tileirbc", CompileOptions(target="sm_90a"))
    assert "cp.async.bulk.tensor" not in f64.ptx and "mbarrier" not in f64.ptx
    assert "cp.async.bulk.tensor" not in old.ptx


def test_options_are_typed_and_in_the_cache_key():
    base = CompileOptions(target="sm_90a")
    for name in ("use_tma", "warp_specialize"):
        assert getattr(base, name) is True
        other = CompileOptions(target="sm_90a", **{name: False})
        assert other.fingerprint() != base.fingerprint()
        assert f"{name}=False" in other.fingerprint()
        with pytest.raises(CompileError) as e:
            CompileOptions(**{name: "no"})
        assert e.value.exit_code == 1
        assert f"{name} must be True or False" in str(e.value.diagnostics[0].message)


@pytest.mark.parametrize("name", ["cta_pair", "overlap_mma"])
def test_rule_options_are_none_true_or_false(name):
    """``cta_pair`` and ``overlap_mma``: None (the default: docs/pipelines.md section 46's
    rules), True (wherever the form allows) or False; each its own cache key; ``--NAME`` and
    ``--no-NAME`` set them and exclude each other."""
    from tilegen.commands.options import _tri

    keys = {CompileOptions(target="sm_90a", **{name: v}).fingerprint() for v in (None, True, False)}
    assert len(keys) == 3 and getattr(CompileOptions(), name) is None
    with pytest.raises(CompileError) as e:
        CompileOptions(**{name: "yes"})
    assert e.value.exit_code == 1
    assert f"{name} must be None, True or False" in str(e.value.diagnostics[0].message)

    class Args:
        pass

    a = Args()
    setattr(a, name, False)
    setattr(a, f"no_{name}", False)
    assert _tri(a, name) is None
    setattr(a, name, True)
    assert _tri(a, name) is True
    setattr(a, name, False)
    setattr(a, f"no_{name}", True)
    assert _tri(a, name) is False
    flag = "--" + name.replace("_", "-")
    p = subprocess.run(
        [sys.executable, "-m", "tilegen.cli", "compile", "x.mlir", flag, "--no-" + flag[2:]],
        capture_output=True,
        text=True,
    )
    assert p.returncode != 0 and f"not allowed with argument {flag}" in p.stderr, p.stderr


def test_cli_emits_the_async_plan():
    from tilegen.cli import main

    out = io.StringIO()
    argv = [
        "compile",
        str(CORPUS_OUT / "matmul_f16.tileirbc"),
        "--gpu-name=sm_90a",
        "--emit=async-plan",
        "--no-warp-specialize",
    ]
    buf = io.BytesIO()

    class _Out:
        buffer = buf

        def write(self, s):
            out.write(s)

        def flush(self):
            pass

    with redirect_stdout(_Out()):
        assert main(argv) == 0
    text = buf.getvalue().decode()
    assert text.startswith("// async: matmul_f16")
    assert "[sm_90a]: today's path: warp_specialize is off (--no-warp-specialize)" in text


# ----------------------------------------------------------------------------- code

PTXAS = find_ptxas()
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
#: SASS of the async path per target: (opcode, least count)
ASYNC_SASS = {
    "sm_90a": (("UTMALDG", 2), ("SYNCS", 4), ("HGMMA", 2), ("USETMAXREG", 1)),
    "sm_100a": (("UTMALDG", 2), ("SYNCS", 4), ("UTCHMMA", 2), ("UTCBAR", 2), ("USETMAXREG", 1)),
}


def sass_counts(tmp_path: Path, ptx: str, target: str) -> tuple[dict, str]:
    """ptxas -v (asserting 0 spills) and cuobjdump -sass: opcode -> count, and the log."""
    src, cubin = tmp_path / "k.ptx", tmp_path / "k.cubin"
    src.write_text(ptx)
    p = subprocess.run(
        [PTXAS, "-v", f"-arch={target}", str(src), "-o", str(cubin)], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in p.stderr, p.stderr
    dump = subprocess.run(
        [str(Path(PTXAS).with_name("cuobjdump")), "-sass", str(cubin)],
        capture_output=True,
        text=True,
    ).stdout
    counts: dict = {}
    for line in dump.splitlines():
        if "/*" not in line or "*/" not in line:
            continue
        text = re.sub(r"^@!?U?P[T0-9]+\s+", "", line.split("*/", 1)[1].strip()).split(" ")[0]
        op = text.split(".")[0]
        if op:
            counts[op] = counts.get(op, 0) + 1
    return counts, p.stderr


def run_strict(ptx: str, args: list, grid) -> list:
    """The kernel in the simulator's strict async mode (TMA/mbarrier/proxy hazards are errors)."""
    return run_ptx(ptx, args, tuple(grid) + (1,) * (3 - len(grid)), strict_async=True)


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_matmul_f16_async_code_is_ptxas_clean_and_matches_the_corpus(tmp_path, target):
    c = driver.compile_source(CORPUS_OUT / "matmul_f16.tileirbc", CompileOptions(target=target))
    assert c.async_plan[0].taken
    ptx = c.ptx
    assert "cp.async.bulk.tensor.2d" in ptx and "tensormap.replace" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 32" in ptx and ".reqntid 256, 1, 1" in ptx
    assert "bar.sync 1, 128" in ptx  # the consumers' barrier once the producer left
    counts, _ = sass_counts(tmp_path, ptx, target)
    for op, least in ASYNC_SASS[target]:
        assert counts.get(op, 0) >= least, (op, counts)
    assert "HMMA" not in counts and "LDGSTS" not in counts  # no Ampere path left
    data = np.load(CORPUS_OUT / "matmul_f16.npz")
    args = [np.array(data[k]) for k in ("arg__A", "arg__B", "arg__C")]
    out = run_strict(ptx, args, [int(x) for x in data["grid"]])
    np.testing.assert_allclose(out[2], data["expected__C"], rtol=1e-4, atol=1e-5)


#: matmul_f16 with an epilogue (x 2, rounded through f16) and a loop starting from 1.0
EPILOGUE = {
    "%cst_0_f32 = constant <f32: 0.000000e+00> : tile<64x64xf32>": (
        "%cst_0_f32 = constant <f32: 1.000000e+00> : tile<64x64xf32>\n"
        "  %cst_two = constant <f32: 2.000000e+00> : tile<64x64xf32>"
    ),
    "%2 = store_view_tko weak %for,": (
        "%e1 = mulf %for, %cst_two : tile<64x64xf32>\n"
        "  %e2 = ftof %e1 : tile<64x64xf32> -> tile<64x64xf16>\n"
        "  %e3 = ftof %e2 : tile<64x64xf16> -> tile<64x64xf32>\n"
        "  %2 = store_view_tko weak %e3,"
    ),
}


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_kernels_epilogue_initial_value_and_partial_tiles_stay_its_own(target):
    text = (CORPUS_OUT / "matmul_f16.mlir").read_text()
    for old, new in EPILOGUE.items():
        assert old in text
        text = text.replace(old, new)
    c = driver.compile_source(text, CompileOptions(target=target), "epi.mlir", until="ptx")
    assert c.async_plan[0].taken, c.async_plan[0].line()
    # partial tiles in M, N and K (TMA zero fill; the kernel's own bounds-checked store)
    M, N, K = 100, 72, 40
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    out = run_strict(c.ptx, [a, b, np.zeros((M, N), np.float32)], (2, 2))
    want = a.astype(np.float32) @ b.astype(np.float32) + 1.0
    want = (2 * want).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(out[2], want, rtol=2e-3, atol=2e-3)


@pytest.fixture(scope="module")
def cutile_gemm(tmp_path_factory):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import cutile_kernels_async as cka

    out = tmp_path_factory.mktemp("async_e2e")
    return cka.export_bytecode(str(out))["gemm_f16_128x128x64"], cka.problems()


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_cutile_128x128x64_gemm_takes_the_async_path(tmp_path, cutile_gemm, target):
    path, problems = cutile_gemm
    c = driver.compile_source(Path(path), CompileOptions(target=target))
    d = c.async_plan[0]
    # as many 32 KB stages as fit (the accumulator never goes through a scratch buffer, so
    # none is reserved): 7, tileiras's 230 KB of shared memory for this kernel
    assert d.taken and d.tile == (128, 128, 64) and d.stages == 7
    counts, log = sass_counts(tmp_path, c.ptx, target)
    assert counts.get("UTMALDG", 0) >= 3  # A, and B in two 128-byte column boxes
    # zero-initialised and stored by TMA: the accumulator (wgmma fragment / the tcgen05.ld
    # rows) goes to the stage ring as it is, with no scratch exchange
    assert "__tilegen_smem[" not in c.ptx and "ld.shared.f32" not in c.ptx
    pr = problems["gemm_f16_128x128x64"]
    args = [np.asarray(v) for v in pr.args.values()]
    out = run_strict(c.ptx, args, pr.grid)
    np.testing.assert_allclose(out[2], pr.expected["C"], rtol=pr.rtol, atol=pr.atol)


@pytest.mark.parametrize("tiles", [(64, 64, 32), (128, 128, 64)])
@pytest.mark.parametrize("gpu,mma", [("sm_90", "wgmma.mma_async"), ("sm_100", "tcgen05.mma")])
def test_cutile_launch_on_ptxsim_runs_the_async_path(monkeypatch, gpu, mma, tiles):
    """``tilegen.cutile.launch(..., backend="ptxsim")``: a cuTile GEMM with its own epilogue
    (x 0.5, stored as f16) takes the async path and needs nothing new from the launcher."""
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    import tilegen.runtime.ptx.launch as launch_mod
    from tilegen.cutile import launch

    import cutile_kernels_async as cka

    mm = cka.gemm_epilogue_kernel()
    seen = []
    real = launch_mod.run_ptx

    def spy(ptx, *args, **kw):
        seen.append(ptx)
        return real(ptx, *args, **kw)

    monkeypatch.setattr(launch_mod, "run_ptx", spy)
    rng = np.random.default_rng(0)
    tm, tn, tk = tiles
    a = rng.uniform(-1, 1, (200, 96)).astype(np.float16)  # a partial tile in M
    b = rng.uniform(-1, 1, (96, 128)).astype(np.float16)
    c = np.zeros((200, 128), np.float16)
    grid = (-(-200 // tm), 128 // tn, 1)
    launch(grid, mm, (a, b, c, tm, tn, tk), backend="ptxsim", gpu_name=gpu)
    (ptx,) = seen
    assert "cp.async.bulk.tensor" in ptx and mma in ptx
    assert "st.shared.b16" not in ptx  # f16 pairs: one store each, or four 8x8 matrices
    if gpu == "sm_90":  # the wgmma fragment is four m8n8 fragments a stmatrix
        assert (
            ptx.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == tm * tn // 128 // 8
        )  # 8 elements a thread each
    else:
        assert "st.shared.b32" in ptx
    # the accumulator's registers go to 128-byte swizzled boxes, one copy each (a 64-row tcgen05
    # accumulator keeps the layout stage's layout and the unswizzled box)
    swizzled = gpu == "sm_90" or tm == 128
    boxes = ptx.count("cp.async.bulk.tensor.2d.global.shared::cta")
    assert boxes == (tn * 2 // 128 if swizzled else 1)
    want = (0.5 * (a.astype(np.float32) @ b.astype(np.float32))).astype(np.float16)
    np.testing.assert_allclose(c.astype(np.float32), want.astype(np.float32), atol=1e-3)


@pytest.mark.parametrize("warps,threads", [(4, 256), (8, 384)])
def test_128_row_tiles_on_one_or_two_consumer_warp_groups(warps, threads):
    """matmul_f16 with 128 x 64 tiles: 4 warps issue two m64 wgmmas each K step, 8 warps one
    per warp group (plus the producer warp group); partial tiles everywhere."""
    text = (CORPUS_OUT / "matmul_f16.mlir").read_text()
    for old, new in (
        ("tile=(64x32)", "tile=(128x32)"),
        ("tile<64x32xf16>", "tile<128x32xf16>"),
        ("tile<64x64xf32>", "tile<128x64xf32>"),
        ("tile=(64x64)", "tile=(128x64)"),
    ):
        assert old in text
        text = text.replace(old, new)
    if warps != 4:  # the CTA size from the module's tt.num_warps
        head = f"module attributes {{tt.num_warps = {warps} : i32}} {{\ncuda_tile.module @m {{\n"
        text = head + text + "\n}\n}\n"
    c = driver.compile_source(text, CompileOptions(target="sm_90a"), "m128.mlir", until="ptx")
    d = c.async_plan[0]
    assert d.taken and d.consumer_warps == warps and d.tile == (128, 64, 32)
    assert f".reqntid {threads}, 1, 1" in c.ptx
    M, N, K = 200, 72, 80
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    out = run_strict(c.ptx, [a, b, np.zeros((M, N), np.float32)], (2, 2))
    np.testing.assert_allclose(out[2], a.astype(np.float32) @ b.astype(np.float32), atol=1e-4)


@pytest.mark.parametrize(
    "value,arch,target,taken",
    [
        ("false", "sm_90", "sm_90a", False),
        ("false", "sm_90", "sm_100a", True),  # a hint for another target does not apply
        ("true", "sm_90", "sm_90a", True),
        ("false", "sm_100", "sm_100a", False),
        ("false", "default", "sm_90a", False),
    ],
)
def test_the_allow_tma_hint_is_carried_and_honored(value, arch, target, taken):
    text = (CORPUS_OUT / "matmul_f16.mlir").read_text()
    old = "%loopIdx] token = %0 :"
    assert old in text
    hint = f"%loopIdx] token = %0 optimization_hints = <{arch} = {{allow_tma = {value}}}> :"
    c = driver.compile_source(text.replace(old, hint), CompileOptions(target=target), "h.mlir")
    (d,) = c.async_plan
    assert d.taken is taken
    if not taken:
        assert d.reason == (
            "operand A's load cannot be a TMA copy: its allow_tma optimization hint is false "
            "for this target"
        )
        assert "cp.async.bulk.tensor" not in c.ptx


def test_num_warps_option_is_typed_and_in_the_cache_key():
    """``CompileOptions(num_warps=N)`` (``tilegen compile --num-warps N``, the layout pass's
    ``num-warps``; tests/test_k_loop_pipelining.py has what it does to the async GEMM)."""
    assert CompileOptions(num_warps=8).fingerprint() != CompileOptions().fingerprint()
    for bad, code in (("8", 1), (True, 1), (3, 2), (64, 2)):
        with pytest.raises(CompileError) as e:
            CompileOptions(num_warps=bad)
        assert e.value.exit_code == code


def test_wgmma_k_steps_are_outermost():
    # a consumer warp group holding two m64 instances (matmul_f16's 128 rows on sm_90a) issues
    # each K step into both instances before the next step, as tileiras and CUTLASS do: no
    # wgmma waits on the one just before it through its accumulator
    import test_tmem_chunks as tc

    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.ptxsim import compile_to_ptx

    module = parse_module(tc._source("f16", "f32", 128, "0.0", 128), "mm.mlir")
    ptx = compile_to_ptx(module, "sm_90a", options=CompileOptions(use_tma=True))
    first = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\S* \{(%f\d+),", ptx)
    assert len(first) == 8 and len(set(first)) == 2, first  # 4 K steps x 2 instances
    assert all(x != y for x, y in zip(first, first[1:])), first


def test_the_async_stages_attributes_are_printed_after_it(tmp_path, capsys):
    # --print-ir-after-all shows the IR after the async stage: the decisions the emitter reads
    from tilegen.cli import main

    src = CORPUS_OUT / "matmul_f16.tileirbc"
    args = ["compile", str(src), "--gpu-name=sm_90a", "--emit=ptx", "-o", str(tmp_path / "k.ptx")]
    assert main(args + ["--print-ir-after-all"]) == 0
    dumps = capsys.readouterr().err.split("// -----// IR Dump After ")
    (after,) = [d for d in dumps if d.startswith("nv-tileas-async ")]
    assert "nv_tileas.async_stages = 11" in after and "nv_tileas.tma_store = 1" in after
    assert not any("nv_tileas.async_stages" in d for d in dumps if d is not after)
