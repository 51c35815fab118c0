"""Index computations used by several consumers are recomputed in each consumer's layout
(``LayoutAssigner._recompute``, docs/pipelines.md section 24): attention backward's LSE / Delta
gathers read ``m * TM + arange`` whose ``arange`` the causal mask laid out first; the gathers'
pointers and masks went through shared memory every iteration (12 ``bar.sync`` in dK dV's
consumer loop)."""

from __future__ import annotations

import re

import numpy as np
import pytest

ct = pytest.importorskip(
    "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
)
tc = pytest.importorskip("tilegen.cutile")

f16, f32 = ct.float16, ct.float32


@ct.kernel
def masked_gathers(
    Q, K, LSE, Delta, Out, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]
):
    """dK dV's shape: per K tile, a loop over Q tiles with a causal mask and two gathers of
    per-row statistics at the same indices; Q read as loaded and transposed."""
    i = ct.bid(0)
    k = ct.load(K, index=(i, 0), shape=(TN, D))
    offs = ct.arange(TM, dtype=ct.int32)
    acc = ct.full((TN, D), 0.0, f32)
    for m in range(ct.num_tiles(Q, axis=0, shape=(TM, D))):
        q = ct.load(Q, index=(m, 0), shape=(TM, D))
        cols = m * TM + ct.arange(TM, dtype=ct.int32)
        rows = m * TM + offs
        lse = ct.gather(LSE, rows)
        delta = ct.gather(Delta, rows)
        qk = ct.mma(k, ct.permute(q, (1, 0)), ct.full((TN, TM), 0.0, f32))
        keep = (i * TN + ct.arange(TN, dtype=ct.int32))[:, None] <= cols[None, :]
        p = ct.where(keep, ct.exp2(qk - lse[None, :]) * delta[None, :], 0.0)
        acc = ct.mma(ct.astype(p, f16), q, acc)
    ct.store(Out, index=(i, 0), tile=ct.astype(acc, f16))


def test_gather_indices_are_recomputed_not_exchanged():
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    rng = np.random.default_rng(0)
    S, D, TM, TN = 256, 64, 128, 128
    q = (rng.standard_normal((S, D)) * 0.3).astype(np.float16)
    k = (rng.standard_normal((S, D)) * 0.3).astype(np.float16)
    lse = (rng.standard_normal(S) * 0.1).astype(np.float32)
    delta = (rng.standard_normal(S) * 0.5 + 1).astype(np.float32)
    args = (q, k, lse, delta, np.zeros((S, D), np.float16), TM, TN, D)
    c = tc.compile_kernel(masked_gathers, args, gpu_name="sm_90")
    (d,) = c.async_plan
    assert d.taken, d.line()
    top = re.search(r"^\$L__async_body_\d+:", c.ptx, re.M)
    end = re.search(r"^\$L__async_body_end_\d+:", c.ptx[top.end() :], re.M)
    loop = c.ptx[top.end() : top.end() + end.start()]
    # one exchange is left: the two gathered vectors into the rows of QK^T (it was 6)
    assert loop.count("bar.sync 1,") == 2, loop.count("bar.sync 1,")
    assert "st.shared.b64" not in loop and "st.shared.u8" not in loop  # pointers, masks
    values = [v for _, v in _prepare(masked_gathers, args).runtime]
    out = np.asarray(run_ptx(c.ptx, values, (S // TN, 1, 1), strict_async=True)[4])
    qf, kf = q.astype(np.float64), k.astype(np.float64)
    want = np.zeros((S, D))
    for i in range(S // TN):
        kt = kf[i * TN : (i + 1) * TN]
        s = kt @ qf.T
        keep = np.arange(i * TN, (i + 1) * TN)[:, None] <= np.arange(S)[None, :]
        p = np.where(keep, np.exp2(s - lse[None, :]) * delta[None, :], 0.0)
        want[i * TN : (i + 1) * TN] = p.astype(np.float16).astype(np.float64) @ qf
    np.testing.assert_allclose(out.astype(np.float64), want, atol=2e-2 * np.abs(want).max())


def _band_problem(seed: int, S: int, D: int, TM: int, TN: int, W: int) -> tuple:
    """Q, K^T, V and the kernel's arguments for a band-masked attention (rows attend to the
    columns in ``(row - W, row]``), and NumPy's result."""
    rng = np.random.default_rng(seed)
    q, v = ((rng.standard_normal((S, D)) * 0.5).astype(np.float16) for _ in range(2))
    kt = (rng.standard_normal((D, S)) * 0.5).astype(np.float16)
    args = (q, kt, v, np.zeros((S, D), np.float16), W, TM, TN, D)
    s = q.astype(np.float64) @ kt.astype(np.float64)
    r, col = np.arange(S)[:, None], np.arange(S)[None, :]
    s = np.where((col > r) | (col < r - W), -np.inf, s)
    p = np.exp2(s - s.max(1, keepdims=True))
    return args, (p / p.sum(1, keepdims=True)) @ v.astype(np.float64)


def _strict_out(kernel, ptx: str, args, grid) -> np.ndarray:
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    values = [x for _, x in _prepare(kernel, args).runtime]
    return np.asarray(run_ptx(ptx, values, grid, strict_async=True)[3]).astype(np.float64)


@ct.kernel
def banded(
    Q,
    K,
    V,
    Out,
    W: ct.Constant[int],
    TM: ct.Constant[int],
    TN: ct.Constant[int],
    D: ct.Constant[int],
):
    """Attention with a band mask (the attention sink's form): the column indices
    ``j * TN + arange(TN)[None, :]`` meet three comparisons in ``Q K^T``'s layout."""
    i = ct.bid(0)
    q = ct.load(Q, index=(i, 0), shape=(TM, D))
    rows = (i * TM + ct.arange(TM, dtype=ct.int32))[:, None]
    offs = ct.arange(TN, dtype=ct.int32)[None, :]
    m_i = ct.full((TM, 1), -1.0e30, f32)
    l_i = ct.full((TM, 1), 0.0, f32)
    acc = ct.full((TM, D), 0.0, f32)
    for j in range(ct.num_tiles(K, axis=1, shape=(D, TN))):
        cols = j * TN + offs
        qk = ct.mma(q, ct.load(K, index=(0, j), shape=(D, TN)), ct.full((TM, TN), 0.0, f32))
        mask = (cols > rows) | (cols >= K.shape[1]) | (cols < rows - W)
        qk = qk + ct.where(mask, -1.0e6, 0.0)
        m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
        p = ct.exp2(qk - m_new)
        alpha = ct.exp2(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, f16), ct.load(V, index=(j, 0), shape=(TN, D)), acc * alpha)
        m_i = m_new
    ct.store(Out, index=(i, 0), tile=ct.astype(acc / l_i, f16))


def test_column_indices_are_recomputed_in_a_row_per_thread_layout():
    """sm_100a, 256-row tcgen05 dots (a row of QK^T a thread): each comparison gets the column
    indices computed in its layout (through the view's slice), not a whole-row exchange per
    use (TileGym's attention sink: 712 B of stack and 11 BAR -> 0 and 5)."""
    S, D, TM, TN, W = 512, 64, 256, 128, 96
    args, want = _band_problem(1, S, D, TM, TN, W)
    c = tc.compile_kernel(banded, args, gpu_name="sm_100")
    assert c.async_plan[0].taken
    top = re.search(r"^\$L__async_body_\d+:", c.ptx, re.M)
    end = re.search(r"^\$L__async_body_end_\d+:", c.ptx[top.end() :], re.M)
    loop = c.ptx[top.end() : top.end() + end.start()]
    # the consumers' CTA barriers are the two MMAs' issues: no exchange through shared memory
    assert loop.count("bar.sync 1,") == 2 and "st.shared" not in loop, loop.count("bar.sync 1,")
    out = _strict_out(banded, c.ptx, args, (S // TM, 1, 1))
    np.testing.assert_allclose(out, want, atol=2e-3)


@ct.kernel
def windowed(
    Q,
    K,
    V,
    Out,
    W: ct.Constant[int],
    TM: ct.Constant[int],
    TN: ct.Constant[int],
    D: ct.Constant[int],
):
    """Gemma's causal sliding window, as TileGym writes it: the causal compare of the rows with
    each tile's columns, then ``cols - rows`` compared twice with the window."""
    i = ct.bid(0)
    q = ct.load(Q, index=(i, 0), shape=(TM, D))
    offs_m = i * TM + ct.arange(TM, dtype=ct.int32)
    offs_n = ct.arange(TN, dtype=ct.int32)
    m_i = ct.full((TM, 1), -1.0e30, f32)
    l_i = ct.full((TM, 1), 0.0, f32)
    acc = ct.full((TM, D), 0.0, f32)
    for j in range(ct.num_tiles(K, axis=1, shape=(D, TN))):
        curr_n = j * TN
        qk = ct.mma(q, ct.load(K, index=(0, j), shape=(D, TN)), ct.full((TM, TN), 0.0, f32))
        qk = ct.where(offs_m[:, None] >= (curr_n + offs_n[None, :]), qk, -1.0e6)
        qk_offset = curr_n + offs_n[None, :] - offs_m[:, None]
        qk = ct.where((qk_offset >= -W) & (qk_offset <= W), qk, -1.0e6)
        m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
        p = ct.exp2(qk - m_new)
        alpha = ct.exp2(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, f16), ct.load(V, index=(j, 0), shape=(TN, D)), acc * alpha)
        m_i = m_new
    ct.store(Out, index=(i, 0), tile=ct.astype(acc / l_i, f16))


def test_window_differences_are_recomputed_not_exchanged():
    """sm_90a (wgmma's layouts), 256 x 128 tiles: ``cols - rows`` is recomputed in ``Q K^T``'s
    layout from the broadcasts, whose 1 x 128 and 256 x 1 sources are converted instead of the
    256 x 128 difference (two 128 KB exchanges each iteration, which kept TileGym's Gemma
    window at 256 x 128 off the async path)."""
    S, D, TM, TN, W = 512, 64, 256, 128, 96
    args, want = _band_problem(2, S, D, TM, TN, W)
    ir = tc.compile_kernel(windowed, args, gpu_name="sm_90", emit="nv_tileas").module
    (loop,) = [o for o in ir.walk() if o.name == "scf.for"]
    converted = [
        tuple(o.results[0].type.shape) for o in loop.walk() if o.name == "nv_tileas.convert_layout"
    ]
    assert (TM, TN) not in converted, converted
    c = tc.compile_kernel(windowed, args, gpu_name="sm_90")
    assert c.async_plan[0].taken
    from tilegen.runtime.ptxas import find_ptxas

    if find_ptxas() is not None:  # the PTX the simulator runs assembles (its spills: section 27)
        from tilegen.runtime.codegen.driver import assemble

        assemble(c.ptx, 90)
    out = _strict_out(windowed, c.ptx, args, (S // TM, 1, 1))
    np.testing.assert_allclose(out, want, atol=2e-3)
