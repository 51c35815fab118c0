"""``nv-tileaa-single-trip-loops`` (docs/pipelines.md section 24): a loop with constant bounds
and exactly one iteration is replaced by its body. TileGym's dK dV wraps its K loop in a loop
over the query heads of a group (one head when the group is 1); inlined, the K loop is at the
kernel's top level and takes the async path."""

from __future__ import annotations

import numpy as np
import pytest

ct = pytest.importorskip(
    "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
)
tc = pytest.importorskip("tilegen.cutile")

f16, f32 = ct.float16, ct.float32


@ct.kernel
def grouped_attention(
    Q, K, V, O, G: ct.Constant[int], TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]
):
    """Non-causal attention summed over ``G`` query groups (``G`` 1: the outer loop runs once)."""
    i = ct.bid(0)
    out = ct.full((TM, D), 0.0, f32)
    for g in range(G):
        q = ct.load(Q, index=(g, i, 0), shape=(1, TM, D)).reshape((TM, D))
        m_i = ct.full((TM, 1), -1.0e30, f32)
        l_i = ct.full((TM, 1), 0.0, f32)
        acc = ct.full((TM, D), 0.0, f32)
        for j in range(ct.num_tiles(K, axis=1, shape=(D, TN))):
            k = ct.load(K, index=(0, j), shape=(D, TN))
            qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
            m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
            p = ct.exp(qk - m_new)
            alpha = ct.exp(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            v = ct.load(V, index=(j, 0), shape=(TN, D))
            acc = ct.mma(ct.astype(p, f16), v, acc * alpha)
            m_i = m_new
        out = out + acc / l_i
    ct.store(O, index=(i, 0), tile=ct.astype(out, O.dtype))


@ct.kernel
def single_trip_with_results(X, Out, STEP: ct.Constant[int]):
    """A loop of one iteration (0 to 3, step 4) carrying values read after it."""
    acc = ct.full((16,), 1, ct.int32)
    s = 5
    for j in range(0, 3, STEP):
        acc = acc * 2 + ct.load(X, index=(j,), shape=(16,)) + j
        s = s * 3
    ct.store(Out, index=(0,), tile=acc + s)


def _problem(G, S=256, D=64, TM=64, TN=64, seed=0):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((G, S, D)) * 0.3).astype(np.float16)
    kt = (rng.standard_normal((D, S)) * 0.3).astype(np.float16)
    v = rng.standard_normal((S, D)).astype(np.float16)
    want = np.zeros((S, D))
    for g in range(G):
        s = q[g].astype(np.float64) @ kt.astype(np.float64)
        p = np.exp(s - s.max(-1, keepdims=True))
        want += (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    return (q, kt, v, np.zeros((S, D), np.float16), G, TM, TN, D), want, (S // TM, 1, 1)


@pytest.mark.parametrize("G", [1, 2])
def test_a_group_of_one_puts_the_k_loop_at_the_top_level(G):
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    args, want, grid = _problem(G)
    m = tc.compile_kernel(grouped_attention, args, gpu_name="sm_90", emit="nv_tileas").module
    top = [op for op in m.walk() if op.name == "scf.for" and op.parent.parent_op.name != "scf.for"]
    assert len(top) == 1  # G 1: the K loop itself; G 2: the group loop
    nested = any(op.name == "nv_tileaa.dot" for op in top[0].regions[0].blocks[0].ops)
    assert nested == (G == 1)
    c = tc.compile_kernel(grouped_attention, args, gpu_name="sm_90")
    (d,) = c.async_plan
    assert d.taken == (G == 1), d.line()
    values = [v for _, v in _prepare(grouped_attention, args).runtime]
    out = run_ptx(c.ptx, values, grid, strict_async=True)
    np.testing.assert_allclose(np.asarray(out[3]).astype(np.float64), want, atol=2e-2 * G)


@pytest.mark.parametrize("backend", ["interp", "ptxsim"])
def test_a_single_trip_loop_keeps_its_results(backend):
    x = np.arange(64, dtype=np.int32) % 11
    out = np.zeros(16, np.int32)
    tc.launch((1, 1, 1), single_trip_with_results, (x, out, 4), backend=backend)
    np.testing.assert_array_equal(out, (2 + x[:16]) + 15)
