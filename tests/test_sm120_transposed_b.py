"""sm_120's async GEMM consumers (runtime/codegen/async_mma_sync.py) for operands ldmatrix
cannot transpose: tf32 and 8-bit B loaded K x N are copied by the consumers into B^T buffers
each stage (async_convert.transpose_b; 8-bit B by b8_transpose.py) and read K-major; tf32
fragments are rounded (cvt.rn) as they are read (docs/pipelines.md section 37). Text kernels
of tests/test_codegen_pipeline.py, from C, run with 0, 1 and 3 K steps against NumPy in the
strict simulator."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tilegen.runtime.ptxas import find_ptxas  # noqa: E402

pytestmark = pytest.mark.skipif(
    not Path(find_ptxas() or "/nonexistent").exists(), reason="ptxas is not installed"
)


@pytest.mark.parametrize(
    "et,ct,m,n,k,bt",
    [
        ("tf32", "f32", 128, 128, 32, False),  # B K x N: transposed (and rounded) by the consumers
        ("tf32", "f32", 64, 64, 32, True),  # B^T from the stage: rounded as ldmatrix reads it
        ("i8", "i32", 128, 128, 64, False),  # ldmatrix .trans, prmt, stmatrix
    ],
)
def test_sm120_consumers_transpose_b(et, ct, m, n, k, bt):
    import test_codegen_pipeline as tp
    import test_tmem_chunks as tc

    ptx = tc.assembled(tp._compile(None, et, ct, m, n, k, "sm_120a", bt=bt, tma=True), 120)
    assert "cp.async.bulk.tensor.2d.shared::cta.global" in ptx and "mma.sync.aligned" in ptx
    # B^T read K-major, two 8-column groups an ldmatrix.x4 (docs/pipelines.md section 49)
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x2" not in ptx
    assert ("cvt.rn.tf32.f32" in ptx) == (et == "tf32")
    # the transposing copy in the consumers' loop: tf32 by st.shared.b32, 8-bit B a warp an
    # atom at a time (ldmatrix .trans, stmatrix: section 51); none for B^T from the stage
    loop = re.split(r"\$L__async_mma_\d+:", ptx)[1]
    assert ("st.shared.b32" in loop) == (et == "tf32" and not bt)
    assert ("m8n8.x4.trans" in loop) == ("stmatrix" in loop) == (et == "i8")
    assert ".trans" not in ptx or et == "i8"
    _check_runs(ptx, et, ct, m, n, k, bt)


def test_sm90_tf32_b_transposed_before_its_conversion(tmp_path):
    # B loaded N x K, transposed, then converted to tf32 (the order cuTile writes): the rule
    # saw the conversion only under the transpose, and took today's path; the stage's B^T is
    # now rounded in place before the wgmmas read it; A's fragments are read by ldmatrix and
    # converted in registers (docs/pipelines.md section 55)
    import test_codegen_pipeline as tp
    import test_tmem_chunks as tc

    ptx = tc.assembled(
        tp._compile(None, "tf32", "f32", 64, 64, 32, "sm_90a", bt=True, tma=True), 90
    )
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx
    # the loop twice over (two sets of A registers): in each, B^T's 8 KB rounded in place
    # (512 chunks of 4 f32 over 128 consumer threads) and A's 4 k8 steps, an ldmatrix.x4 each
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 2 * 4
    assert ptx.count("cvt.rn.tf32.f32") == 2 * ((64 * 32 * 4 // 16 // 128) * 4 + 4 * 4)
    _check_runs(ptx, "tf32", "f32", 64, 64, 32, True)


def _check_runs(ptx: str, et, ct, m, n, k, bt) -> None:
    import test_codegen_pipeline as tp

    for nk in (0, 1, 3):
        ktot = max(k * nk, 16)
        a, b, c = tp._operands(et, ct, m, n, ktot, 7 + nk, bt)
        out = tp._launch(ptx, a, b, c, nk, k * nk, strict_async=True)
        want = tp._ref(a, b, c, k * nk, bt) if nk else c.astype(np.float64)
        np.testing.assert_array_equal(out.astype(np.float64), want)


@pytest.mark.parametrize(
    "target,m,n,bt",
    [("sm_120a", 128, 128, False), ("sm_120a", 64, 64, True), ("sm_90a", 64, 64, True)],
)
def test_tf32_operands_are_rounded_not_truncated(target, m, n, bt):
    # every A and B element 1 + 3 2^-12: tf32 keeps 10 mantissa bits, and cvt.rna rounds it to
    # 1 + 2^-10 where the tensor core, reading the staged f32 bits, would truncate it to 1
    import test_codegen_pipeline as tp
    import test_tmem_chunks as tc

    k, nk = 32, 2
    sm = int(re.sub(r"\D", "", target))
    ptx = tc.assembled(tp._compile(None, "tf32", "f32", m, n, k, target, bt=bt, tma=True), sm)
    assert "cp.async.bulk.tensor" in ptx
    x = np.float32(1 + 3 * 2.0**-12)
    a = np.full((m, k * nk), x, np.float32)
    b = np.full((n, k * nk) if bt else (k * nk, n), x, np.float32)
    c = np.zeros((m, n), np.float32)
    out = tp._launch(ptx, a, b, c, nk, k * nk, strict_async=True)
    r = np.float64(1 + 2.0**-10)  # cvt.rn.tf32.f32 of x
    np.testing.assert_allclose(out, np.full((m, n), k * nk * r * r), rtol=1e-6)
