"""The scratch after an async K loop lives in the loop's idle stage ring
(``Emitter.scratch_into_ring``, docs/pipelines.md section 22): once every consumer is past the
loop (a proxy fence and the consumers' barrier), the stage buffers take the epilogue's layout
exchanges, so a 128 x 128 f32 accumulator's 64 KB exchange needs no shared memory of its own.
TileGym's 128 x 128 head-dim-128 FMHA went from 233,856 B (over sm_90a's 232,448) to 201,088 B;
a GEMM whose epilogue goes through the scratch keeps seven stages instead of five."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.ptxas import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))

ct = pytest.importorskip(
    "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
)
tc = pytest.importorskip("tilegen.cutile")

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (nvidia-cuda-nvcc)")


@ct.kernel
def attention(Q, K, V, O, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]):
    bm = ct.bid(0)
    q = ct.load(Q, index=(bm, 0), shape=(TM, D))
    m_i = ct.full((TM, 1), -1.0e30, dtype=ct.float32)
    l_i = ct.full((TM, 1), 0.0, dtype=ct.float32)
    acc = ct.full((TM, D), 0.0, dtype=ct.float32)
    for j in range(ct.cdiv(K.shape[0], TN)):
        k = ct.load(K, index=(0, j), shape=(D, TN), order=(1, 0))
        qk = ct.mma(q, k, ct.full((TM, TN), 0.0, dtype=ct.float32))
        m_ij = ct.maximum(m_i, ct.max(qk, axis=-1, keepdims=True))
        p = ct.exp(qk - m_ij)
        alpha = ct.exp(m_i - m_ij)
        l_i = l_i * alpha + ct.sum(p, axis=-1, keepdims=True)
        v = ct.load(V, index=(j, 0), shape=(TN, D))
        acc = ct.mma(p.astype(ct.float16), v, acc * alpha)
        m_i = m_ij
    # (TileGym's FMHA reshapes the f32 accumulator before its cast: a 64 KB exchange at 128 x 128)
    acc = (acc / l_i).reshape((1, TM, D))
    ct.store(O, index=(0, bm, 0), tile=acc.astype(O.dtype))


@ct.kernel
def gemm_reshaped(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(bm, k), shape=(TM, TK))
        b = ct.load(B, index=(k, bn), shape=(TK, TN))
        acc = ct.mma(a, b, acc)
    # (two halves of the rows: not a view that only adds a unit dim, which the 3-d TMA store
    # would take from the registers as they are; this one goes through an exchange)
    out = ct.astype(acc.reshape((2, TM // 2, TN)), C.dtype)
    ct.store(C, index=(0, bm, bn), tile=out)


def _shared(ptx: str) -> dict:
    return {n: int(b) for n, b in re.findall(r"\.shared \.align \d+ \.b8 (\w+)\[(\d+)\]", ptx)}


def _strict(kernel, args, grid, ptx) -> list:
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    values = [v for _, v in _prepare(kernel, args).runtime]
    return run_ptx(ptx, values, grid, strict_async=True)


def _attention_args(TM, TN, D, S, seed=0):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((S, D)) * 0.3).astype(np.float16)
    k = (rng.standard_normal((S, D)) * 0.3).astype(np.float16)
    v = rng.standard_normal((S, D)).astype(np.float16)
    s = q.astype(np.float64) @ k.astype(np.float64).T
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    return (q, k, v, np.zeros((1, S, D), np.float16), TM, TN, D), want


def test_attention_epilogue_exchange_runs_in_the_ring_and_matches():
    args, want = _attention_args(64, 64, 64, 256)
    c = tc.compile_kernel(attention, args, gpu_name="sm_90")
    assert c.async_plan and c.async_plan[0].taken
    assert "%tgring" in c.ptx
    # the reshape's 64 x 64 f32 exchange (16 KB) is not in the kernel's own scratch
    assert _shared(c.ptx).get("__tilegen_smem", 0) < 64 * 64 * 4
    # the consumers meet (after the proxy fence) before anything writes the idle ring
    assert re.search(r"fence\.proxy\.async\.shared::cta;\s*\n\s*bar\.sync 1, 128;", c.ptx)
    out = _strict(attention, args, (4, 1, 1), c.ptx)
    np.testing.assert_allclose(np.asarray(out[3]).reshape(want.shape), want, atol=2e-3)


@needs_ptxas
def test_tilegym_sized_attention_fits_sm90a():
    """128 x 128 tiles, head dim 128: two 64 KB stages, Q kept (32 KB) and the 64 KB
    epilogue exchange, which now shares the ring."""
    args, _ = _attention_args(128, 128, 128, 256)
    c = tc.compile_kernel(attention, args, gpu_name="sm_90", emit="cubin")
    sizes = _shared(c.ptx)
    assert "%tgring" in c.ptx and sum(sizes.values()) <= 232448
    assert sizes["tg_async"] >= 2 * 65536 and sizes.get("__tilegen_smem", 0) < 65536


@needs_ptxas
def test_gemm_epilogue_in_the_ring_keeps_more_stages():
    """The reshape keeps the accumulator from reaching the store in registers, so its exchange
    goes through the scratch: beside a 64 KB scratch five 32 KB stages fit, in the ring seven."""
    rng = np.random.default_rng(1)
    M = N = 128
    K = 256
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    args = (a, b, np.zeros((2, M // 2, N), np.float32), 128, 128, 64)
    c = tc.compile_kernel(gemm_reshaped, args, gpu_name="sm_90", emit="cubin")
    assert c.async_plan[0].taken and c.async_plan[0].stages == 7
    assert "%tgring" in c.ptx and "__tilegen_smem" not in c.ptx
    assert sum(_shared(c.ptx).values()) <= 232448
    out = _strict(gemm_reshaped, args, (1, 1, 1), c.ptx)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(np.asarray(out[2]).reshape(M, N), want, rtol=1e-4, atol=1e-4)


def test_epilogue_larger_than_the_ring_keeps_its_own_scratch():
    """Two stages of 64 x 64 x 16 tiles (8 KB) cannot hold the 16 KB exchange: the kernel is
    emitted again with the scratch beside the ring, and still matches."""
    from tilegen.runtime.options import CompileOptions

    rng = np.random.default_rng(2)
    M = N = 64
    K = 64
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    args = (a, b, np.zeros((2, M // 2, N), np.float32), 64, 64, 16)
    c = tc.compile_kernel(
        gemm_reshaped, args, gpu_name="sm_90", options=CompileOptions(num_stages=2)
    )
    assert c.async_plan[0].taken and c.async_plan[0].stages == 2
    assert "%tgring" not in c.ptx and _shared(c.ptx)["__tilegen_smem"] >= M * N * 4
    out = _strict(gemm_reshaped, args, (1, 1, 1), c.ptx)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(np.asarray(out[2]).reshape(M, N), want, rtol=1e-4, atol=1e-4)


def _folded_q_attention():
    """Causal attention whose Q rows come folded two to a row, (TM / 2, 2 D), and are
    reshaped to (TM, D) before the loop: a reshape of non-unit dims, an exchange through the
    scratch in the prologue. (TileGym's 3-d Q box reshaped to 2-d no longer needs one: its
    view keeps the load's registers, section 24.)"""
    f16, f32 = ct.float16, ct.float32

    @ct.kernel
    def folded_q(
        Q2, K, V, Out, qk_scale, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]
    ):
        i = ct.bid(0)
        q = ct.reshape(ct.load(Q2, index=(i, 0), shape=(TM // 2, 2 * D)), (TM, D))
        m_i = ct.full((TM, 1), -1.0e30, f32)
        l_i = ct.full((TM, 1), 0.0, f32)
        acc = ct.full((TM, D), 0.0, f32)
        rows = i * TM + ct.arange(TM, dtype=ct.int32)
        for j in range((i + 1) * (TM // TN)):
            k = ct.load(K, index=(0, j), shape=(D, TN))
            qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
            cols = j * TN + ct.arange(TN, dtype=ct.int32)
            qk = ct.where(rows[:, None] >= cols[None, :], qk * qk_scale, -1.0e30)
            m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
            p = ct.exp(qk - m_new)
            alpha = ct.exp(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            v = ct.load(V, index=(j, 0), shape=(TN, D))
            acc = ct.mma(ct.astype(p, f16), v, acc * alpha)
            m_i = m_new
        ct.store(Out, index=(i, 0), tile=ct.astype(acc / l_i, f16))

    return folded_q


def test_prologue_exchange_runs_in_the_ring_before_the_frame():
    """A reshape of Q before the loop is exchanged through the scratch: that scratch lives in
    the not-yet-used stage ring (``Emitter.scratch_before_ring``), the frame's CTA-wide barrier
    (after a proxy fence) ordering its last reads before the producer's first copy; the kernel
    keeps only a small scratch of its own."""
    seq, d = 256, 128
    rng = np.random.default_rng(4)
    q = (rng.standard_normal((seq, d)) * 0.5).astype(np.float16)
    kt = (rng.standard_normal((d, seq)) * 0.5).astype(np.float16)
    v = rng.standard_normal((seq, d)).astype(np.float16)
    scale = 1.0 / np.sqrt(d)
    s_ = q.astype(np.float64) @ kt.astype(np.float64) * scale
    s_ = np.where(np.tril(np.ones((seq, seq), bool)), s_, -np.inf)
    p_ = np.exp(s_ - s_.max(-1, keepdims=True))
    want = (p_ / p_.sum(-1, keepdims=True)) @ v.astype(np.float64)
    kernel = _folded_q_attention()
    args = (q.reshape(seq // 2, 2 * d), kt, v, np.zeros_like(q), np.float32(scale), 128, 128, d)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_90")
    assert c.async_plan[0].taken
    sizes = _shared(c.ptx)
    assert sizes["__tilegen_smem"] < 128 * d * 2  # the reshape's 32 KB is not the kernel's own
    assert re.search(r"fence\.proxy\.async\.shared::cta;\s*\n\s*bar\.sync 0;", c.ptx)
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    values = [x for _, x in _prepare(kernel, args).runtime]
    out = run_ptx(c.ptx, values, (seq // 128, 1, 1), strict_async=True)
    np.testing.assert_allclose(np.asarray(out[3]).astype(np.float64), want, atol=2e-2)
