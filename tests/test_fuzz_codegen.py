"""A short fixed run of bench/fuzz_codegen.py (the PTX backend's differential fuzzer): random
cuda_tile kernels, interpreter vs the PTX simulator, and ptxas (no spills) on each.

The seeds cover every generated feature (dots mma/fma, loops, ifs, reduce/scan, masked loads and
stores with padding, shape ops, casts, compare + select, directed rounding, math, 1-8 warps,
sm_80) plus the seeds of the bugs the fuzzer found (see the seed comments)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import fuzz_codegen  # noqa: E402

from kernelgen import PTXAS  # noqa: E402

COVER = [0, 1, 2, 18, 23, 24, 27, 32, 55, 85, 93, 102, 110, 112, 129, 133, 153, 164, 165]
COVER += [241, 259, 305, 311]
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
}


@pytest.mark.parametrize("seed", COVER + sorted(FOUND))
def test_fuzz_seed(seed):
    status, detail, kernel = fuzz_codegen.run_kernel(
        seed, check_ptxas=PTXAS is not None, timeout=30
    )
    assert status == "ok", f"seed {seed}: {status}\n{detail}\n{kernel.text}"


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
