"""A short fixed run of bench/fuzz_codegen.py (the PTX backend's differential fuzzer): random
cuda_tile kernels, interpreter vs the PTX simulator, and ptxas (no spills) on every one.

The seeds cover every generated feature (dots mma/fma, loops, ifs, reduce/scan, masked loads and
stores with padding, shape ops, casts, compare + select, directed rounding, math, 1-8 warps,
sm_80; grids of several blocks, view indices computed in i32 and i64 from the block id and
scalar parameters, i64 offsets of 2^33, pointer-tile loads with i64 offsets, scalar parameters
of every type anywhere in the signature) plus the seeds of the bugs the fuzzer found (see the
seed comments)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import fuzz_codegen  # noqa: E402

from kernelgen import PTXAS  # noqa: E402

COVER = [0, 1, 2, 18, 23, 24, 27, 32, 55, 85, 93, 102, 110, 112, 129, 133, 153, 164, 165]
COVER += [241, 259, 305, 311]
# index math and scalar parameters: i16/f64 scalars (3), i32/i64/f32 scalars on 2 blocks (4),
# a dot with i64/f64 scalars (39), pointer loads with i64 offsets and i32/i64 scalars (40)
COVER += [3, 4, 39, 40]
# a loop body with a mask all true in some iterations (emitted twice: uniform_select.py), on
# sm_90 (5029, 5038) and sm_80 (5111)
COVER += [5029, 5038, 5111]
FOUND = {
    104: "f64 fma rounding<negative_inf>: the simulator rounded f64 directed modes to nearest",
    827: "f32 x - x under rounding<negative_inf> must be -0 (simulator gave +0)",
    1368: "f64 subf rounding<zero> (simulator)",
    100528: "f64 fma through longdouble rounded twice (simulator)",
    101467: "f64 fma double rounding (simulator)",
    167: "exti signed i8 -> i16 zero-extended (selection row)",
    780: "exti signed i8 -> i16 after a reduce (selection row)",
    325: "f16 -> bf16 emitted cvt.rn.f32.f32 (ptxas rejects)",
    431: "f16 -> bf16 -> f16 (ptxas)",
    201002: "f64 dot on one warp: cp.async rows of more chunks than threads half-copied",
    208260: "maxf scan over -0/+0 (maxnum may return either zero: compared sign-agnostic)",
    1035: "maxf scan over NaN padding: identity placement unspecified (compared NaN-agnostic)",
    363: "minf scan over NaN padding (same)",
    # before the index-width fix (runtime/codegen/core.py, "index values") 417 of the first 628
    # seeds of the index-math generator failed ptxas (add/mul.wide/setp "Arguments mismatch")
    0: "i64 view index: add.s32 of a b32 and a b64 register (ptxas)",
    1: "i64 pointer offsets and a 2^33 intermediate (ptxas)",
    116: "i64 view indices: setp.lt.u32 against a b64 bound, mul.wide.s32 of a b64 (ptxas)",
    139816703: "a dot's fused epilogue with an f64 -> bf16 ftof, which had no selection row: "
    "an internal error (the epilogue now fuses only selectable ops; f64 -> bf16 has a row)",
    # refused with a located message before spec/ptx/selection.yaml had the rows
    691614861: "uitofp i1 -> f64",
    691614907: "uitofp i1 -> f16",
    691615719: "uitofp i1 -> f64",
    691615838: "uitofp i64 -> bf16 (f32 rounded to odd first)",
    691616648: "sitofp i32 -> bf16",
    7348: "an f64 dot's A written from registers into the staged layout: KeyError 8 (an "
    "internal error; write_fields stores f64 one register a st.shared.f64)",
}


@pytest.mark.parametrize("seed", sorted(set(COVER) | set(FOUND)))
def test_fuzz_seed(seed):
    status, detail, kernel = fuzz_codegen.run_kernel(
        seed, check_ptxas=PTXAS is not None, timeout=30
    )
    assert status == "ok", f"seed {seed}: {status}\n{detail}\n{kernel.text}"


def _features(text: str, grid) -> set:
    sig = text.split("(", 1)[1].split(")")[0].split(", ")
    out = {f"scalar {a.split('<')[1][:-1]}" for a in sig if a.startswith("%s")}
    if sig[0].startswith("%s"):
        out.add("scalar first")
    if "load_ptr_tko" in text and "xi64>" in text:
        out.add("pointer load, i64 offsets")
    if "8589934592" in text:
        out.add("i64 offset 2^33")
    if "tile<i64> -> tile<" in text and "load_view_tko" in text:
        out.add("i64 view index")
    if grid[0] > 1:
        out.add("grid")
    return out


def test_generator_covers_index_math_and_scalar_parameters():
    """The coverage the seeds above rely on is what the generator makes (first 60 seeds)."""
    seen = set()
    for seed in range(60):
        g = fuzz_codegen.Gen(seed)
        k = g.generate()
        seen |= _features(k.text, k.grid)
    want = {f"scalar {e}" for e in ("i16", "i32", "i64", "f32", "f64")}
    want |= {"scalar first", "pointer load, i64 offsets", "i64 offset 2^33", "i64 view index"}
    assert want | {"grid"} <= seen, sorted(want | {"grid"} - seen)


def test_a_seed_keeps_its_ops_under_index_math():
    """Index math draws from its own stream: seed 104's ops (a FOUND bug) are still generated."""
    k = fuzz_codegen.Gen(104).generate()
    assert "fma" in k.text and "rounding<negative_inf>" in k.text


def test_compare_tolerances():
    import numpy as np

    a = np.array([1.0, -0.0, np.nan], np.float32)
    assert fuzz_codegen.compare(a, a.copy(), 0.0) is None
    assert fuzz_codegen.compare(a, np.array([1.0, 0.0, np.nan], np.float32), 0.0)
    assert fuzz_codegen.compare(a, np.array([1.0001, 0.0, np.nan], np.float32), 1e-3) is None
    assert (
        fuzz_codegen.compare(a, np.array([1.0, -0.0, 2.0], np.float32), 0.0, nan_amb=True) is None
    )
    assert fuzz_codegen.compare(np.arange(3), np.array([0, 1, 3]), 0.0)


@pytest.mark.parametrize("seed", [929115725, 1000634])
def test_a_scan_does_not_fold_its_identity_into_the_first_element(seed):
    """A NaN-ignoring ``minf``/``maxf`` scan whose first element is NaN: combining the identity
    into it would give the identity (minnum(+inf, NaN) = +inf), keeping it gives NaN.
    tileiras's PTX keeps it (lane 0 selects its own value, no identity), and so do tilegen's
    PTX and both interpreters. Seed 929115725: a reverse minf scan over NaN padding; seed
    1000634: a maxf scan over inf / inf of +inf padding, through ``cmpf ordered`` into an i1
    output (the interpreter folded the identity in until 2026-11-29)."""
    status, detail, kernel = fuzz_codegen.run_kernel(seed, check_ptxas=False, timeout=30)
    assert status == "ok", f"{status}\n{detail}"
    assert "scan" in kernel.text
