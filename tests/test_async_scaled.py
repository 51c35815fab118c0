"""The async path's scaled accumulate (docs/pipelines.md section 12): the block-scaled fp8 GEMM
(``acc + dot(a, b, 0) * sa * sb``, tests/cutile_kernels_async.py) on sm_90a - A and B by TMA
from a producer warp group, each stage's partial product by wgmma into a fragment of its own,
scaled into the accumulator by the consumers with the side vectors (the scales) they load in
the fragment's order; ptxas-clean, in SASS, and exact against NumPy in strict ptxsim, partial
tiles included; and on sm_100a, where a producer warp issues tcgen05 MMAs into two TMEM
buffers in turn and the consumers scale one while the other fills. Also: what the rule
refuses, with its reason."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime import driver
from tilegen.runtime.asm import print_module
from tilegen.runtime.options import CompileOptions
from tilegen.runtime.ptx.launch import run_ptx
from tilegen.runtime.ptxas import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_async_pipeline_e2e import sass_counts  # noqa: E402

PTXAS = find_ptxas()
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
NAME = "gemm_fp8_blockscaled"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """(the kernel's bytecode path, its cuda_tile text, the async kernels module)."""
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import cutile_kernels_async as cka

    out = tmp_path_factory.mktemp("async_scaled")
    path = Path(cka.export_bytecode(str(out), [NAME])[NAME])
    c = driver.compile_source(path, CompileOptions(target="sm_90a"), until="read")
    return path, print_module(c.module), cka


def _problem(cka, m: int, n: int, k: int, seed: int):
    """Arguments and the f64 reference of the block-scaled GEMM at M x N x K (128-wide K
    blocks; A's scales one per row and K block, B's one per K block and column)."""
    rng = np.random.default_rng(seed)
    kb = -(-k // 128)
    av, abits = cka._fp8_e4m3(rng.integers(-4, 5, size=(m, k)) * 0.5)
    bv, bbits = cka._fp8_e4m3(rng.integers(-4, 5, size=(k, n)) * 0.5)
    # SA's row stride must be a multiple of 16 bytes (the kernel assumes it): 4 columns
    sa = (2.0 ** rng.integers(-2, 3, size=(m, max(4, kb)))).astype(np.float32)
    sb = (2.0 ** rng.integers(-2, 3, size=(kb, n))).astype(np.float32)
    ref = np.zeros((m, n))
    for j in range(kb):
        part = av[:, j * 128 : (j + 1) * 128] @ bv[j * 128 : (j + 1) * 128, :]
        ref += part * sa[:, j : j + 1] * sb[j : j + 1, :]
    args = [abits, bbits, sa, sb, np.zeros((m, n), np.float32)]
    return args, ref, (-(-m // 128), -(-n // 128), 1)


#: SASS each target's async block-scaled GEMM shows (at least that many)
SASS = {
    "sm_90a": (("UTMALDG", 2), ("SYNCS", 4), ("QGMMA", 1), ("USETMAXREG", 2)),
    "sm_100a": (("UTMALDG", 2), ("SYNCS", 4), ("UTCQMMA", 1), ("LDTM", 1), ("USETMAXREG", 2)),
}


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_block_scaled_gemm_takes_the_async_path(tmp_path, kernel, target):
    path, _, cka = kernel
    c = driver.compile_source(path, CompileOptions(target=target))
    (d,) = c.async_plan
    assert d.taken, d.line()
    assert d.tile == (128, 128, 128) and d.elements == "f8E4M3FN x f8E4M3FN -> f32"
    # two consumer warp groups (sm_90a: 64 rows each, part and acc 64 registers each a
    # thread; sm_100a: a column half of the 128 TMEM rows each); the producer gives its
    # registers to them: launched at 168, producer 32, consumers 232 (the budget tileiras's
    # build of this kernel has)
    assert (d.consumer_warps, d.producer_warps) == (8, 4)
    assert (d.producer_regs, d.consumer_regs) == (32, 232)
    ptx = c.ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232" in ptx and ".reqntid 384, 1, 1" in ptx
    # A, B and B's 1 x 128 scale row come by TMA (the row in one unswizzled box, read by
    # the consumers from the stage); A's 128 x 1 scale column is no TMA box (4-byte rows):
    # each thread loads its own rows (two on sm_90a, one on sm_100a)
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster") == 3
    assert ptx.count("ld.global") == (2 if target == "sm_90a" else 1)
    assert "cp.async.cg" not in ptx and "__tilegen_pipe" not in ptx
    if target == "sm_100a":
        # a producer warp issues each stage's MMAs into one of two TMEM buffers (256
        # columns) while the consumers scale the other's
        assert ptx.count("tcgen05.mma.cta_group::1.kind::f8f6f4") == 4
        assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32" in ptx
        assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == 2
    counts, _ = sass_counts(tmp_path, ptx, target)  # asserts 0 spills
    for op, least in SASS[target]:
        assert counts.get(op, 0) >= least, (op, counts)
    assert "LDGSTS" not in counts and "HMMA" not in counts
    for m, n, k, seed in ((128, 128, 256, 0), (100, 208, 208, 3)):  # partial M, N and K tiles
        args, ref, grid = _problem(cka, m, n, k, seed)
        out = run_ptx(ptx, args, grid, strict_async=True)
        np.testing.assert_array_equal(out[4], ref.astype(np.float32))


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_side_vectors_computed_in_the_loop(tmp_path, kernel, target):
    """Elementwise ops on a side vector (here sa * sa, 128 x 1) run register by register in
    the fragment's row order before the broadcast."""
    _, text, cka = kernel
    text, n = re.subn(
        r"(%\w+) = broadcast (%\w+) : tile<128x1xf32>",
        r"%sq = mulf \2, \2 : tile<128x1xf32>\n\1 = broadcast %sq : tile<128x1xf32>",
        text,
    )
    assert n == 1
    c = driver.compile_source(text, CompileOptions(target=target), "sq.mlir", until="ptx")
    assert c.async_plan[0].taken, c.async_plan[0].line()
    sass_counts(tmp_path, c.ptx, target)  # ptxas accepts it, 0 spills
    args, _, grid = _problem(cka, 100, 208, 208, 5)
    from tilegen.runtime import floats

    ref = np.zeros((100, 208))

    a = floats.decode(args[0], "f8E4M3FN").astype(np.float64)
    b = floats.decode(args[1], "f8E4M3FN").astype(np.float64)
    sa, sb = args[2].astype(np.float64), args[3].astype(np.float64)
    for j in range(2):
        part = a[:, j * 128 : (j + 1) * 128] @ b[j * 128 : (j + 1) * 128, :]
        ref += part * (sa[:, j : j + 1] ** 2) * sb[j : j + 1, :]
    out = run_ptx(c.ptx, args, grid, strict_async=True)
    np.testing.assert_array_equal(out[4], ref.astype(np.float32))


@pytest.mark.parametrize(
    "old,new,options,reason",
    [
        (  # the dot does not start from zero
            r"(%\w+) = mmaf (%\w+), (%\w+), %\w+ :",
            "%one = constant <f32: 1.000000e+00> : tile<128x128xf32>\n\\1 = mmaf \\2, \\3, %one :",
            {},
            "the dot's accumulator is neither loop-carried nor a zero tile",
        ),
        (  # one warp group: the partial product and the accumulator would take 256 registers
            "",
            "",
            {"num_warps": 4},
            "a scaled accumulate holds two fragments of 128 registers per thread",
        ),
        (  # the carried value read by something other than the scaled sum
            r"(%\w+) = fma (%\w+), (%\w+), (%iterArg0)",
            "%t = permute \\4 [1, 0] : tile<128x128xf32> -> tile<128x128xf32>\n"
            "\\1 = fma \\2, \\3, %t",
            {},
            "the loop body computes more than a scaled accumulate ('nv_tileaa.permute')",
        ),
    ],
)
def test_what_the_scaled_form_refuses(kernel, old, new, options, reason):
    _, text, _ = kernel
    if old:
        text, n = re.subn(old, new, text)
        assert n == 1
    c = driver.compile_source(
        text,
        CompileOptions(target="sm_90a", **options),
        "refused.mlir",
        until="async",
    )
    (d,) = c.async_plan
    assert not d.taken
    assert reason in d.reason, d.reason


def test_tcgen05_takes_two_column_halves_only(kernel):
    path, _, _ = kernel
    options = CompileOptions(target="sm_100a", num_warps=4)
    c = driver.compile_source(path, options, until="async")
    (d,) = c.async_plan
    assert d.eligible and not d.taken
    assert "the emitter's tcgen05 scaled accumulate takes 8 warps" in d.reason


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_library_block_gemm_with_a_scalar_scale(tmp_path, target):
    """tests/cutile_kernels_lib.py's fp8_block_gemm: 128 x 64 tiles, B's scale one element per
    128 x 128 block (a 1 x 1 side tile) times A's 128 x 1 column, bf16 out - strict ptxsim."""
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    import cutile_kernels_lib as lib

    case = lib.cases()["fp8_block_gemm"]
    path = tmp_path / "fp8_block_gemm.tileirbc"
    path.write_bytes(lib.export_bytecode(case))
    c = driver.compile_source(path, CompileOptions(target=target), until="ptx")
    (d,) = c.async_plan
    assert d.taken and d.tile == (128, 64, 128), d.line()
    sass_counts(tmp_path, c.ptx, target)  # ptxas accepts it, 0 spills
    args, grid = case.make_args(np.random.default_rng(0))
    expected = case.reference(dict(args))
    arrays = [np.asarray(v) for _, v in args]
    out = run_ptx(c.ptx, arrays, tuple(grid) + (1,) * (3 - len(grid)), strict_async=True)
    assert case.mismatches({k: o for (k, _), o in zip(args, out)}, expected) == []


#: (A/B element, TM, TN, TK, problem M, N, K) variants of the block-scaled GEMM; each is taken
#: on sm_90a, and on sm_100a where the tcgen05 form covers it (8 warps: TM 128, TN 64 or 128)
VARIANTS = [
    ("e4m3", 128, 64, 128, 200, 136, 384),  # 8 warps, one m64n64 instance per warp group
    ("e4m3", 128, 128, 64, 128, 256, 200),  # a K tile of 64 (two scales per 128 columns of K)
    ("e4m3", 64, 128, 128, 100, 128, 256),  # 4 warps: one warp group of 64 rows
    ("e5m2", 128, 128, 128, 128, 128, 256),
    ("f16", 128, 128, 64, 72, 200, 136),  # 16-bit operands: B read N-major, no transpose
]


def _variant(cka, elem: str, tiles: tuple, tmp: Path) -> Path:
    """The block-scaled kernel exported with other tile constants / operand element type."""
    import cuda.tile as ct
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    case = cka.kernels()[NAME]
    params = list(case.params)
    if elem != "e4m3":
        dtype = {"e5m2": ct.float8_e5m2, "f16": ct.float16}[elem]
        params[0] = type(params[0])(**{**params[0].__dict__, "dtype": dtype})
        params[1] = type(params[1])(**{**params[1].__dict__, "dtype": dtype})
    params[-3:] = list(tiles)
    sig = KernelSignature(params, getattr(CallingConvention, case.calling_convention)())
    path = tmp / f"{NAME}_{elem}_{'x'.join(map(str, tiles))}.tileirbc"
    export_kernel(case.kernel, [sig], str(path), output_format="tileir_bytecode")
    return path


def _variant_problem(cka, elem: str, TM: int, TN: int, TK: int, m: int, n: int, k: int):
    from tilegen.runtime import floats

    rng = np.random.default_rng(m + n + k)
    kb = -(-k // TK)
    vals = rng.integers(-4, 5, size=(m, k)) * 0.5, rng.integers(-4, 5, size=(k, n)) * 0.5
    if elem == "f16":
        (av, abits), (bv, bbits) = (
            (v.astype(np.float16).astype(np.float64), v.astype(np.float16)) for v in vals
        )
    else:
        key = {"e4m3": "f8E4M3FN", "e5m2": "f8E5M2"}[elem]
        bits = [floats.encode(v, key) for v in vals]
        (av, abits), (bv, bbits) = ((floats.decode(b, key).astype(np.float64), b) for b in bits)
    sa = (2.0 ** rng.integers(-2, 3, size=(m, -(-kb // 4) * 4))).astype(np.float32)
    sb = (2.0 ** rng.integers(-2, 3, size=(kb, n))).astype(np.float32)
    ref = np.zeros((m, n))
    for j in range(kb):
        part = av[:, j * TK : (j + 1) * TK] @ bv[j * TK : (j + 1) * TK, :]
        ref += part * sa[:, j : j + 1] * sb[j : j + 1, :]
    args = [abits, bbits, sa, sb, np.zeros((m, n), np.float32)]
    return args, ref, (-(-m // TM), -(-n // TN), 1)


@needs_ptxas
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(map(str, v[:4])))
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_block_scaled_variants(tmp_path, kernel, variant, target):
    _, _, cka = kernel
    elem, TM, TN, TK, m, n, k = variant
    path = _variant(cka, elem, (TM, TN, TK), tmp_path)
    c = driver.compile_source(path, CompileOptions(target=target), until="ptx")
    (d,) = c.async_plan
    if target == "sm_100a" and TM != 128:
        assert not d.taken and "tcgen05 scaled accumulate takes 8 warps" in d.reason
        return
    assert d.taken and d.tile == (TM, TN, TK), d.line()
    counts, _ = sass_counts(tmp_path, c.ptx, target)  # 0 spills
    mma = {"sm_90a": "QGMMA" if elem != "f16" else "HGMMA", "sm_100a": "UTC"}[target]
    assert any(op.startswith(mma) for op in counts), counts
    args, ref, grid = _variant_problem(cka, elem, TM, TN, TK, m, n, k)
    out = run_ptx(c.ptx, args, grid, strict_async=True)
    np.testing.assert_array_equal(out[4], ref.astype(np.float32))
