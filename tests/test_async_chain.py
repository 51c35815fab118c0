"""A chain of general-form K loops on one ring (docs/pipelines.md section 23): cuTile splits a
causal attention loop at the diagonal (the tiles below it unmasked, the ones across it masked),
so TileGym's causal FMHA has two K loops with dots. The async stage takes them as one chain:
the first loop's producer warp group copies the stages of every loop in turn, and the consumers
go on from the first loop's stage and phase into the next. Where the emitted kernel does not fit
in shared memory, it is emitted on today's path and the decision says why."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.options import CompileOptions

ct = pytest.importorskip(
    "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
)
tc = pytest.importorskip("tilegen.cutile")

f16, f32 = ct.float16, ct.float32
NEG = -1.0e30


@ct.kernel
def causal_split(Q, K, V, O, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]):
    i = ct.bid(0)
    q = ct.load(Q, index=(i, 0), shape=(TM, D))
    m_i = ct.full((TM, 1), NEG, f32)
    l_i = ct.full((TM, 1), 0.0, f32)
    acc = ct.full((TM, D), 0.0, f32)
    rows = i * TM + ct.arange(TM, dtype=ct.int32)
    below = (i * TM) // TN  # K tiles wholly below the diagonal
    end = ((i + 1) * TM) // TN  # ... and those across it
    for j in range(0, below):
        k = ct.load(K, index=(0, j), shape=(D, TN), order=(1, 0))
        qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
        m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
        p = ct.exp(qk - m_new)
        alpha = ct.exp(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.load(V, index=(j, 0), shape=(TN, D))
        acc = ct.mma(ct.astype(p, f16), v, acc * alpha)
        m_i = m_new
    for j in range(below, end):
        k = ct.load(K, index=(0, j), shape=(D, TN), order=(1, 0))
        qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
        cols = j * TN + ct.arange(TN, dtype=ct.int32)
        qk = ct.where(ct.reshape(rows, (TM, 1)) >= ct.reshape(cols, (1, TN)), qk, NEG)
        m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
        p = ct.exp(qk - m_new)
        alpha = ct.exp(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.load(V, index=(j, 0), shape=(TN, D))
        acc = ct.mma(ct.astype(p, f16), v, acc * alpha)
        m_i = m_new
    ct.store(O, index=(i, 0), tile=ct.astype(acc / l_i, O.dtype))


def _problem(S, D, TM, TN, seed=0):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((S, D)) * 0.3).astype(np.float16)
    k = (rng.standard_normal((S, D)) * 0.3).astype(np.float16)
    v = rng.standard_normal((S, D)).astype(np.float16)
    s = q.astype(np.float64) @ k.astype(np.float64).T
    s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    return (q, k, v, np.zeros((S, D), np.float16), TM, TN, D), want, (S // TM, 1, 1)


def _strict(ptx, args, grid):
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    return run_ptx(
        ptx, [v for _, v in _prepare(causal_split, args).runtime], grid, strict_async=True
    )


def _async_case(name: str, gpu: str, options=None):
    """(compiled kernel, problem, args, kernel) of tests/cutile_kernels_async's ``name`` at
    128 x 64 tiles, head dim 64."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cutile_kernels_async as cka

    case, pr = cka.kernels()[name], cka.problems()[name]
    args = tuple(pr.args.values()) + (128, 64, 64)
    return (
        tc.compile_kernel(case.kernel, args, gpu_name=gpu, options=options),
        pr,
        args,
        case.kernel,
    )


def _strict_out(kernel, c, args, grid, index: int) -> np.ndarray:
    """Output ``index`` of ``c`` run in the strict simulator, as float64."""
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    values = [v for _, v in _prepare(kernel, args).runtime]
    return np.asarray(run_ptx(c.ptx, values, grid, strict_async=True)[index]).astype(np.float64)


@pytest.mark.parametrize(
    "gpu,S,D,TM,TN",
    [
        ("sm_90", 256, 64, 64, 64),  # the first CTA's first loop runs no iteration
        ("sm_90", 256, 64, 64, 32),  # two masked iterations a CTA: the ring wraps mid-chain
        ("sm_100", 256, 64, 128, 64),  # tcgen05 consumers
    ],
)
def test_chain_of_two_loops_runs_on_one_ring(gpu, S, D, TM, TN):
    args, want, grid = _problem(S, D, TM, TN)
    c = tc.compile_kernel(causal_split, args, gpu_name=gpu)
    (d,) = c.async_plan
    assert d.taken and d.chain == 2 and "a chain of 2 K loops on one ring" in d.line()
    assert c.ptx.count(".shared .align 1024 .b8 tg_async[") == 1  # one ring for both loops
    assert len(re.findall(r"^\$L__async_produce_\d+:", c.ptx, re.M)) == 2  # the producer's two
    assert len(re.findall(r"^\$L__async_body_\d+:", c.ptx, re.M)) == 2  # ... and consumers' loops
    out = _strict(c.ptx, args, grid)
    np.testing.assert_allclose(np.asarray(out[3]).astype(np.float64), want, atol=2e-3)
    from tilegen.runtime.ptxas import find_ptxas

    if find_ptxas() is not None:  # the simulated PTX is what ptxas takes, without spills
        from tilegen.runtime.codegen.driver import assemble

        _, log = assemble(c.ptx, int(gpu[3:]), verbose=True)
        assert " 0 bytes spill stores" in log


def test_kept_q_is_written_once_before_the_warp_groups_split():
    """Where the producer does not copy Q (here: the loops overlap their dots, section 16; also
    a pair's divided rows and sm_120), Q (the loop-invariant A of both loops' QK^T) goes into
    its kept array once, by the consumer threads, before the split (section 24): its registers
    die before the consumers' ``setmaxnreg``, and the producer warp group, which runs the
    prologue too, skips the writes (its warps would address rows past the tile)."""
    from tilegen.runtime.options import CompileOptions

    args, want, grid = _problem(256, 64, 64, 32)
    opts = CompileOptions(overlap_mma=True)
    c = tc.compile_kernel(causal_split, args, gpu_name="sm_90", options=opts)
    (d,) = c.async_plan
    assert d.overlap and not d.kept_tma, d.line()
    p = c.ptx
    guard = re.search(r"setp\.lt\.u32 (%p\d+), %tgtid, 128;\n\t@!\1 bra (\$L__async_keep_\d+);", p)
    assert guard, "the kept-Q writes are not guarded to the consumer threads"
    start, end = guard.end(), p.index(guard.group(2) + ":")
    split = re.search(r"^\$L__async_consumer_\d+:", p, re.M).start()
    assert end < split
    assert p[start:end].count("st.shared.v4.b32") == 64 * 64 * 2 // 16 // 128  # once: 4 a thread
    consumers = p[split:]
    assert "st.shared" not in consumers[: consumers.index("mbarrier.try_wait")]
    out = _strict(c.ptx, args, grid)
    np.testing.assert_allclose(np.asarray(out[3]).astype(np.float64), want, atol=2e-3)


def test_each_loop_of_a_chain_overlaps_its_dots():
    """Section 24: the loops of a chain each run FA3's overlap (the last dot beside the next
    iteration's first, section 16) on the chain's ring, with the two consumer warp groups'
    ping-pong (named barriers 2 and 3) at 128 rows; the held stage of a loop's last iteration
    is released before the next loop starts (2 K tiles of 32 a diagonal: the ring of 3 wraps
    inside and across the loops)."""
    args, want, grid = _problem(512, 64, 128, 32)
    overlap = CompileOptions(overlap_mma=True)  # (off by default since section 46)
    c = tc.compile_kernel(causal_split, args, gpu_name="sm_90", options=overlap)
    (d,) = c.async_plan
    assert d.taken and d.chain == 2 and d.overlap and d.stages == 3, d.line()
    assert len(re.findall(r"^\$L__overlap_none_\d+:", c.ptx, re.M)) == 2  # each loop's last B
    assert "bar.arrive 3, 256" in c.ptx  # the ping-pong
    out = _strict(c.ptx, args, grid)
    np.testing.assert_allclose(np.asarray(out[3]).astype(np.float64), want, atol=2e-3)
    from tilegen.runtime.ptxas import find_ptxas

    if find_ptxas() is not None:
        from tilegen.runtime.codegen.driver import assemble

        _, log = assemble(c.ptx, 90, verbose=True)
        assert " 0 bytes spill stores" in log


def test_chain_that_outgrows_shared_memory_loses_stages(monkeypatch):
    """256 x 64 tiles with head dim 128: five 32 KB stages fit beside Q (256 x 128, 64 KB,
    copied by TMA: section 50). With the rule's estimate forced open and six stages asked
    for, the ring outgrows sm_90a's 232,448 B once emitted. The chain's consumers release
    each staged load on its own (docs/pipelines.md section 27), so the kernel is emitted
    again with a stage fewer until it fits, rather than on today's path; the decision says
    how many it got, and the result holds. (One CTA a tile block: with the pair, each CTA
    keeps 128 rows of Q; docs/pipelines.md section 40.)"""
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.passes import async_general

    args, want, grid = _problem(512, 128, 256, 64)
    opts = CompileOptions(num_stages=5, cta_pair=False)
    c = tc.compile_kernel(causal_split, args, gpu_name="sm_90", options=opts)
    (d,) = c.async_plan
    assert d.taken and d.stages == 5 and d.kept_tma == 1, d.line()  # (Q unpadded: they fit)
    monkeypatch.setattr(async_general, "shared_budget", lambda *a, **k: 1 << 30)
    opts = CompileOptions(num_stages=6, cta_pair=False)
    (chosen,) = tc.compile_kernel(
        causal_split, args, gpu_name="sm_90", options=opts, emit="async-plan"
    ).async_plan
    assert chosen.taken and chosen.stages == 6  # what the async stage chose
    c = tc.compile_kernel(causal_split, args, gpu_name="sm_90", options=opts)
    (d,) = c.async_plan
    assert d.taken and 1 <= d.stages < 6, d.line()
    assert "cp.async.bulk.tensor" in c.ptx
    out = _strict(c.ptx, args, grid)[3].astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=2e-2, atol=2e-2)
    from tilegen.runtime.ptxas import find_ptxas

    if find_ptxas() is not None:
        from tilegen.runtime.codegen.driver import assemble

        assemble(c.ptx, 90)  # (raises on a ptxas error)


def test_loops_that_stage_different_loads_are_not_chained():
    from tilegen.runtime.passes.async_general import chain_reason  # noqa: F401 (the rule's name)

    @ct.kernel
    def two_sources(
        Q, K, K2, V, O, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]
    ):
        i = ct.bid(0)
        q = ct.load(Q, index=(i, 0), shape=(TM, D))
        acc = ct.full((TM, D), 0.0, f32)
        for j in range(0, 2):
            k = ct.load(K, index=(0, j), shape=(D, TN), order=(1, 0))
            p = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
            v = ct.load(V, index=(j, 0), shape=(TN, D))
            acc = ct.mma(ct.astype(p, f16), v, acc)
        for j in range(2, 4):
            k = ct.load(K2, index=(0, j), shape=(D, TN), order=(1, 0))
            p = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
            v = ct.load(V, index=(j, 0), shape=(TN, D))
            acc = ct.mma(ct.astype(p, f16), v, acc)
        ct.store(O, index=(i, 0), tile=ct.astype(acc, O.dtype))

    rng = np.random.default_rng(1)
    q, k, k2, v = (rng.standard_normal((256, 64)).astype(np.float16) for _ in range(4))
    args = (q, k, k2, v, np.zeros((256, 64), np.float16), 64, 64, 64)
    c = tc.compile_kernel(two_sources, args, gpu_name="sm_90")
    (d,) = c.async_plan
    assert not d.taken and "the loops stage different loads" in d.reason


def test_later_bounds_computed_between_the_loops():
    """tests/cutile_kernels_async.attention_causal_split computes the second loop's upper bound
    after the first loop (cuTile emits it where the source has it): scalar arithmetic on values
    from before the chain, which the producer computes too (async_loop.producer_scalars)."""
    c, pr, args, kernel = _async_case("attention_causal_split", "sm_90")
    (d,) = c.async_plan
    assert d.taken and d.chain == 2
    got = _strict_out(kernel, c, args, pr.grid, 3)
    np.testing.assert_allclose(got, pr.expected["Out"].astype(np.float64), atol=2e-2)


@pytest.mark.parametrize("name", ["attention_causal_fwd", "attention_causal_split"])
def test_head_dim_128_attention_takes_tcgen05_on_sm100(name):
    """128 x 128 x 128 dots take 64 KB of K-major A and B: the layout stage now gives them
    tcgen05 (mma_choice.TCGEN05_OPERANDS_LIMIT), and in the general async form P . V claims
    only A's 32 KB of scratch (B is read from the stage), so the kernel fits sm_100a."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cutile_kernels_async as cka

    heads, seq, d = 1, 256, 128
    q, kt, v, scale, want = cka.causal_attention_inputs(heads, seq, d, 3)
    kernel = cka.kernels()[name].kernel
    args = (q, kt, v, np.zeros_like(q), scale, 128, 128, d)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_100")
    (dec,) = c.async_plan
    assert dec.taken and dec.mma == "tcgen05", dec.line()
    assert "tcgen05.mma" in c.ptx and "mma.sync" not in c.ptx
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    values = [x for _, x in _prepare(kernel, args).runtime]
    out = run_ptx(c.ptx, values, (seq // 128, heads, 1), strict_async=True)
    np.testing.assert_allclose(np.asarray(out[3]).astype(np.float64), want, atol=2e-2)


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_gemma_form_runs_as_a_chain(gpu):
    """tests/cutile_kernels_async.attention_causal_gemma_form (TileGym Gemma's form: 1-d
    running statistics, K/V indexed by a loop-carried counter, two loops) takes the async path
    as a chain (section 24; it was refused: the indices depended on loop-carried values), on
    sm_90 with each loop overlapped, and matches in the strict simulator."""
    overlap = CompileOptions(overlap_mma=True)  # (off by default since section 46)
    c, pr, args, kernel = _async_case("attention_causal_gemma_form", gpu, overlap)
    (d,) = c.async_plan
    assert d.taken and d.chain == 2, d.line()
    assert d.overlap == (gpu == "sm_90")
    got = _strict_out(kernel, c, args, pr.grid, 3)
    np.testing.assert_allclose(got, pr.expected["Out"].astype(np.float64), atol=2e-2)


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_a_stage_read_by_two_dots_one_transposed(gpu):
    """tests/cutile_kernels_async.attention_bwd_dq (TileGym's dQ): K is read by ``QK^T``
    transposed and by ``dS K`` as loaded. One TMA box serves both (section 24: each dot reads
    it with its own major-ness); the async rule refused the loop ("a load of the loop is not a
    dot's B operand"). Strict simulator, three dots an iteration."""
    c, pr, args, kernel = _async_case("attention_bwd_dq", gpu)
    (d,) = c.async_plan
    assert d.taken, d.line()
    ptx = c.ptx
    start = re.search(r"^\$L__async_produce_\d+:", ptx, re.M).end()
    loop = ptx[start : re.search(r"^\$L__async_produce_end_\d+:", ptx, re.M).start()]
    assert loop.count("cp.async.bulk.tensor") == 2  # K and V: one copy each an iteration
    # Q and dO (128 x 64), loop-invariant A operands: copied once before the loop (section
    # 50), in 8-row boxes (wgmma_dot's row order) on sm_90, in one box on sm_100
    assert ptx.count("cp.async.bulk.tensor") == 2 + 2 * (16 if gpu == "sm_90" else 1)
    got = _strict_out(kernel, c, args, pr.grid, 4)
    want = pr.expected["dQ"].astype(np.float64)
    np.testing.assert_allclose(got, want, atol=5e-3 * np.abs(want).max())
