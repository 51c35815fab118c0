"""``nv-tileaa-loop-counters`` (docs/pipelines.md section 24): a loop-carried counter stepped by
an invariant (TileGym's Gemma attention indexes K and V by ``cnt``, ``cnt += 1``) is read in the
body as ``init + (iv - lb) / step * c``, so the loads it indexes can be issued ahead: the async
path takes such loops (it refused them: "its indices depend on loop-carried values")."""

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
def counted_attention(Q, K, V, O, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]):
    """Non-causal attention whose K / V tiles are indexed by a counter, as Gemma's are."""
    i = ct.bid(0)
    q = ct.load(Q, index=(i, 0), shape=(TM, D))
    m_i = ct.full((TM, 1), -1.0e30, f32)
    l_i = ct.full((TM, 1), 0.0, f32)
    acc = ct.full((TM, D), 0.0, f32)
    n = K.shape[1]
    cnt = 0
    for _ in range(0, n, TN):
        k = ct.load(K, index=(0, cnt), shape=(D, TN))
        qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
        m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
        p = ct.exp(qk - m_new)
        alpha = ct.exp(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.load(V, index=(cnt, 0), shape=(TN, D))
        acc = ct.mma(ct.astype(p, f16), v, acc * alpha)
        m_i = m_new
        cnt += 1
    ct.store(O, index=(i, 0), tile=ct.astype(acc / l_i, O.dtype))


@ct.kernel
def gemma_form_attention(
    Q, K, V, O, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]
):
    """Gemma's form: the running max and sum are 1-d tiles (``(TM,)``, not ``(TM, 1)``) and a
    counter indexes K and V."""
    i = ct.bid(0)
    q = ct.load(Q, index=(i, 0), shape=(TM, D))
    m_i = ct.full((TM,), -1.0e30, f32)
    l_i = ct.full((TM,), 0.0, f32)
    acc = ct.full((TM, D), 0.0, f32)
    cnt = 0
    for _ in range(0, K.shape[1], TN):
        k = ct.load(K, index=(0, cnt), shape=(D, TN))
        qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
        m_new = ct.maximum(m_i, ct.max(qk, axis=1))
        p = ct.exp(qk - m_new[:, None])
        alpha = ct.exp(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1)
        v = ct.load(V, index=(cnt, 0), shape=(TN, D))
        acc = ct.mma(ct.astype(p, f16), v, acc * alpha[:, None])
        m_i = m_new
        cnt += 1
    ct.store(O, index=(i, 0), tile=ct.astype(acc / l_i[:, None], O.dtype))


@ct.kernel
def counters_after_the_loop(X, Out, lo: int, hi: int, STEP: ct.Constant[int]):
    """Counters with another start, increment and step, read in the body and after the loop."""
    a = lo * 3
    b = 7
    acc = ct.full((16,), 0, ct.int32)
    for j in range(lo, hi, STEP):
        x = ct.load(X, index=(a,), shape=(16,))
        acc = acc + x * b + j
        a += 2
        b += 5
    ct.store(Out, index=(0,), tile=acc + a * 1000 + b)


def _attention_problem(S=256, D=64, TM=64, TN=64, seed=0):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((S, D)) * 0.3).astype(np.float16)
    kt = (rng.standard_normal((D, S)) * 0.3).astype(np.float16)
    v = rng.standard_normal((S, D)).astype(np.float16)
    s = q.astype(np.float64) @ kt.astype(np.float64)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    return (q, kt, v, np.zeros((S, D), np.float16), TM, TN, D), want, (S // TM, 1, 1)


def _counters_want(x, lo, hi, step):
    a, b, acc = lo * 3, 7, np.zeros(16, np.int64)
    for j in range(lo, hi, step):
        acc += x[16 * a : 16 * a + 16].astype(np.int64) * b + j
        a += 2
        b += 5
    return (acc + a * 1000 + b).astype(np.int32)


def test_the_pass_reads_counters_from_the_induction_variable():
    from tilegen.runtime.rewrite.ir_utils import loop_slice

    args, _, _ = _attention_problem()
    c = tc.compile_kernel(counted_attention, args, gpu_name="sm_90", emit="nv_tileas")
    (loop,) = [op for op in c.module.walk() if op.name == "scf.for"]
    body = loop.regions[0].blocks[0]
    loads = [op for op in body.ops if op.name == "nv_tileaa.tiled_load"]
    assert len(loads) == 2
    for load in loads:  # computed from the induction variable and invariants only
        assert loop_slice(load, loop) is not None
    # lb 0, step TN, start 0, increment 1: the counter is iv / TN, one division (by a constant)
    made = [op.name for op in body.ops[:3]]
    assert made[0] == "arith.divui" and "arith.subi" not in made and "arith.addi" not in made
    (counter,) = [a for a in body.args[1:] if a.type == body.args[0].type]
    assert [op.name for op in counter.users] == ["arith.addi"]  # read by its increment alone


@pytest.mark.parametrize("gpu,TM", [("sm_90", 64), ("sm_100", 128)])  # (tcgen05: M 128)
def test_counter_indexed_attention_takes_the_async_path(gpu, TM):
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    args, want, grid = _attention_problem(TM=TM)
    c = tc.compile_kernel(counted_attention, args, gpu_name=gpu)
    (d,) = c.async_plan
    assert d.taken, d.line()
    assert "cp.async.bulk.tensor" in c.ptx
    values = [v for _, v in _prepare(counted_attention, args).runtime]
    out = run_ptx(c.ptx, values, grid, strict_async=True)
    np.testing.assert_allclose(np.asarray(out[3]).astype(np.float64), want, atol=2e-2)


@pytest.mark.parametrize("backend", ["interp", "ptxsim"])
@pytest.mark.parametrize("lo,hi,step", [(1, 11, 3), (0, 0, 2), (2, 9, 1)])
def test_counters_with_any_start_step_and_increment(backend, lo, hi, step):
    x = np.arange(16 * 64, dtype=np.int32) % 97
    out = np.zeros(16, np.int32)
    tc.launch((1, 1, 1), counters_after_the_loop, (x, out, lo, hi, step), backend=backend)
    np.testing.assert_array_equal(out, _counters_want(x, lo, hi, step))


def test_running_stats_as_1d_tiles_stay_in_the_accumulator_rows():
    """The running max meets QK^T's row max (a slice of the wgmma layout): the slice's layout
    wins over the loop-carried value's, so the running statistics are carried in it and the
    consumers' loop exchanges nothing through shared memory (it held two round trips an
    iteration each for the max and the sum, behind the consumers' ``bar.sync 1``)."""
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    args, want, grid = _attention_problem(TM=128)
    c = tc.compile_kernel(gemma_form_attention, args, gpu_name="sm_90")
    (d,) = c.async_plan
    assert d.taken, d.line()
    top = re.search(r"^\$L__async_body_(\d+):", c.ptx, re.M)
    end = re.search(r"^\$L__async_body_end_\d+:", c.ptx[top.end() :], re.M)
    loop = c.ptx[top.end() : top.end() + end.start()]
    assert loop.count("wgmma.mma_async") >= 2
    # (the named barriers 2 / 3 that order the two warp groups' MMAs stay)
    assert "bar.sync 1," not in loop and "st.shared" not in loop and "ld.shared" not in loop
    values = [v for _, v in _prepare(gemma_form_attention, args).runtime]
    out = run_ptx(c.ptx, values, grid, strict_async=True)
    np.testing.assert_allclose(np.asarray(out[3]).astype(np.float64), want, atol=2e-2)
