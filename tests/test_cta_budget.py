"""A CTA's size and budgets (docs/pipelines.md section 21, docs/layouts.md "CTA size"):

* cuTile's ``num_worker_warps`` hint sizes the CTA;
* a dot-free kernel whose largest tile would take over 64 registers a thread on 4 warps gets 8
  or 16 (TileGym's silu_and_mul at hidden 11008 spilled 3.6 KB on 128 threads);
* under an ``occupancy`` hint, a warp-specialised kernel's consumers take the producer's
  registers within the hint's ``.maxnreg`` (tileiras: ``.maxnreg 128``, producer 32, consumers
  224), its ring fits the hint's share of shared memory, and where even rebalanced consumers
  cannot hold their accumulators the hint's cap is dropped (ptxas refused such kernels with
  C7602 "Insufficient registers").
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.ptxas import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

ct = pytest.importorskip(
    "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
)
tc = pytest.importorskip("tilegen.cutile")


def _ptxas(ptx: str, sm: int) -> tuple:
    """(registers, spill store bytes, spill load bytes) from ``ptxas -v``."""
    from codegen_status import parse_ptxas_v

    from tilegen.runtime.codegen.driver import assemble

    _, log = assemble(ptx, sm, verbose=True)
    return parse_ptxas_v(log)


needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (nvidia-cuda-nvcc)")


def _threads(ptx: str) -> int:
    return int(re.search(r"\.reqntid (\d+)", ptx).group(1))


def _run_strict(kernel, args, grid, gpu_name="sm_90") -> list:
    """The kernel's PTX in the simulator's strict async mode; the arrays after the launch."""
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    ptx = tc.compile_kernel(kernel, args, gpu_name=gpu_name).ptx
    values = [v for _, v in _prepare(kernel, args).runtime]
    return run_ptx(ptx, values, tuple(grid) + (1,) * (3 - len(grid)), strict_async=True)


# ----------------------------------------------------------------------------- CTA size


@ct.kernel
def silu_mul(a, b, c, TILE: ct.Constant[int]):
    row = ct.bid(0)
    x = ct.load(a, index=(row, 0), shape=(1, TILE)).astype(ct.float32)
    y = ct.load(b, index=(row, 0), shape=(1, TILE)).astype(ct.float32)
    ct.store(c, index=(row, 0), tile=(x / (1.0 + ct.exp(-x)) * y).astype(c.dtype))


@ct.kernel
def row_norm(a, c, TILE: ct.Constant[int]):
    x = ct.load(a, index=(ct.bid(0), 0), shape=(8, TILE)).astype(ct.float32)
    s = ct.sum(x * x, axis=1, keepdims=True)
    m = ct.max(x, axis=1, keepdims=True)
    ct.store(c, index=(ct.bid(0), 0), tile=(x / ct.sqrt(s) + m).astype(c.dtype))


@pytest.mark.parametrize("tile,threads", [(4096, 128), (8192, 128), (16384, 256)])
def test_whole_row_elementwise_tile_widens_the_cta(tile, threads):
    """4 warps hold 16384 f32 elements at 128 a thread (ptxas spilled 912 B); 8 warps hold 64."""
    args = tuple(np.zeros((8, tile), np.float16) for _ in range(3)) + (tile,)
    ptx = tc.compile_kernel(silu_mul, args, gpu_name="sm_90").ptx
    assert _threads(ptx) == threads
    if find_ptxas() is not None:
        assert _ptxas(ptx, 90)[1] == 0


@pytest.mark.parametrize("gpu_name", ["sm_80", "sm_90"])
def test_widened_reduction_matches_numpy(gpu_name):
    """An 8 x 2048 f32 row reduction on 8 warps and 8 x 4096 on 16: the cross-warp sums and
    maxima of a wider CTA, in the simulator."""
    rng = np.random.default_rng(0)
    for tile, threads in ((2048, 256), (4096, 512)):
        a = rng.standard_normal((16, tile)).astype(np.float16)
        c = np.zeros_like(a)
        assert _threads(tc.compile_kernel(row_norm, (a, c, tile), gpu_name=gpu_name).ptx) == threads
        tc.launch((2,), row_norm, (a, c, tile), backend="ptxsim", gpu_name=gpu_name)
        x = a.astype(np.float32).reshape(2, 8, tile)
        want = x / np.sqrt((x * x).sum(2, keepdims=True)) + x.max(2, keepdims=True)
        np.testing.assert_allclose(c.astype(np.float32), want.reshape(16, tile), atol=4e-3)


def test_num_worker_warps_hint_sizes_the_cta():
    args = (np.zeros((16, 256), np.float16), np.zeros((16, 256), np.float16), 256)
    assert _threads(tc.compile_kernel(row_norm, args).ptx) == 128
    k = row_norm.replace_hints(num_worker_warps=8)  # (cuTile 1.7 refuses 16 below 13.5)
    assert _threads(tc.compile_kernel(k, args).ptx) == 256


# ----------------------------------------------------------------------------- occupancy


def _gemm(occupancy: int):
    @ct.kernel(occupancy=occupancy)
    def gemm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        bm, bn = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, dtype=ct.float32)
        for k in range(ct.cdiv(A.shape[1], TK)):
            a = ct.load(A, index=(bm, k), shape=(TM, TK))
            b = ct.load(B, index=(k, bn), shape=(TK, TN))
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(bm, bn), tile=acc.astype(C.dtype))

    return gemm


def _gemm_args(M: int, N: int, K: int, tiles: tuple, seed: int = 0):
    rng = np.random.default_rng(seed)
    A = rng.integers(-2, 3, (M, K)).astype(np.float16)
    B = rng.integers(-2, 3, (K, N)).astype(np.float16)
    return (A, B, np.zeros((M, N), np.float16)) + tiles


def _plan(kernel, args):
    c = tc.compile_kernel(kernel, args, gpu_name="sm_90", emit="nv_tileas")
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.passes import async_rule

    (d,) = async_rule.decide(c.module, CompileOptions(target="sm_90"))
    return d


def _async_bytes(ptx: str) -> int:
    return int(re.search(r"\.shared \.align \d+ \.b8 tg_async\[(\d+)\]", ptx).group(1))


def test_occupancy_2_gemm_rebalances_registers_and_fits_two_ctas():
    from tilegen.runtime.targets import occupancy_shared

    kernel = _gemm(2)
    args = _gemm_args(256, 256, 512, (128, 128, 64))
    d = _plan(kernel, args)
    assert d.taken and d.rebalance and not d.cap_dropped, d.line()
    assert (d.producer_regs, d.consumer_regs) == (32, 224), d.line()
    ptx = tc.compile_kernel(kernel, args, gpu_name="sm_90").ptx
    assert ".maxnreg 128" in ptx and _threads(ptx) == 256
    assert "setmaxnreg.inc.sync.aligned.u32 224" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 32" in ptx
    # two CTAs' rings fit on an SM (tileiras: 107,648 B); one CTA's alone took 164 KB
    assert _async_bytes(ptx) <= occupancy_shared(90, 2) < 2 * 64 * 1024
    one = tc.compile_kernel(_gemm(1), args, gpu_name="sm_90").ptx
    assert _async_bytes(one) > occupancy_shared(90, 2) and ".maxnreg" not in one
    if find_ptxas() is not None:
        regs, spill_st, _ = _ptxas(ptx, 90)
        assert regs <= 128 and spill_st == 0  # was 376 B of spills with the cap alone


def test_occupancy_2_gemm_matches_numpy_in_strict_ptxsim():
    kernel = _gemm(2)
    args = _gemm_args(128, 128, 256, (64, 64, 64), seed=1)
    d = _plan(kernel, args)
    assert d.taken and d.rebalance, d.line()
    out = _run_strict(kernel, args, (2, 2))
    want = args[0].astype(np.float64) @ args[1].astype(np.float64)
    np.testing.assert_array_equal(out[2].astype(np.float64), want)


@needs_ptxas
def test_occupancy_cap_dropped_where_consumers_cannot_hold_their_accumulators():
    """A 256 x 128 tile on two consumer warp groups needs 128 accumulator registers a thread;
    occupancy 2's share of 384 threads is 80, 104 after the producer's registers: the cap goes
    (ptxas: "Insufficient registers (80)" before)."""
    kernel = _gemm(2)
    args = _gemm_args(256, 256, 512, (256, 128, 64))
    d = _plan(kernel, args)
    assert d.taken and d.cap_dropped and d.rebalance and d.consumer_regs == 232, d.line()
    ptx = tc.compile_kernel(kernel, args, gpu_name="sm_90").ptx
    assert ".maxnreg" not in ptx and _threads(ptx) == 384
    assert _ptxas(ptx, 90)[1] == 0
    # an explicit cap stays: the user's own .maxnreg is not second-guessed
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.passes import async_rule

    c = tc.compile_kernel(kernel, args, gpu_name="sm_90", emit="nv_tileas")
    (func,) = [o for o in c.module.walk() if "nv_tileaa.kernel_spec" in o.attributes]
    from tilegen.runtime.attributes import IntegerAttr
    from tilegen.runtime.types import I32

    func.set_attr("nvvm.maxnreg", IntegerAttr(96, I32))
    (d,) = async_rule.decide(c.module, CompileOptions(target="sm_90"))
    assert not d.cap_dropped and d.rebalance and d.consumer_regs == 128, d.line()


def test_attention_general_form_rebalances_under_occupancy():
    """The general form (attention) also hands the producer's registers to its consumers under
    an occupancy cap. At occupancy 2 this 128 x 64 (d 64) attention runs as tileiras builds it
    (docs/pipelines.md section 28): one consumer warp group, 256 threads at ``.maxnreg 128``,
    the consumers at 224 and no spills (two groups at 384 threads got 104 each and spilled).
    It still matches NumPy in strict ptxsim."""
    import cutile_kernels_async as cka

    case = cka.kernels()["attention_causal_fwd"]
    pr = cka.problems()["attention_causal_fwd"]
    kernel = case.kernel.replace_hints(occupancy=2)
    args = tuple(pr.args.values()) + (128, 64, 64)
    d = _plan(kernel, args)
    assert d.taken and d.rebalance and d.consumer_regs == 224, d.line()
    assert d.consumer_warps == 4, d.line()
    ptx = tc.compile_kernel(kernel, args, gpu_name="sm_90").ptx
    assert ".maxnreg 128" in ptx and "setmaxnreg.inc.sync.aligned.u32 224" in ptx
    if find_ptxas() is not None:
        assert _ptxas(ptx, 90)[1] == 0
    out = _run_strict(kernel, args, pr.grid[:2])
    np.testing.assert_allclose(
        out[3].astype(np.float64),
        pr.expected["Out"].astype(np.float64),
        rtol=pr.rtol,
        atol=pr.atol,
    )


def test_paired_256_wide_tile_takes_two_consumer_warp_groups_per_cta():
    """``num_ctas=2`` on a 256 x 256 tile (TileGym matmul's sm_90 config): each CTA of the pair
    holds 128 x 256 on two consumer warp groups (the CTA was sized for one, the pair refused it,
    and the fallback spilled 6.9 KB); exact in strict ptxsim."""
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    @ct.kernel(num_ctas=2)
    def gemm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        bm, bn = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0, dtype=ct.float32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(bm, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
            b = ct.load(B, index=(k, bn), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(bm, bn), tile=ct.astype(acc, C.dtype))

    args = _gemm_args(512, 256, 192, (256, 256, 64))
    d = _plan(gemm, args)
    assert d.taken and d.cta_pair and d.consumer_warps == 8, d.line()
    ptx = tc.compile_kernel(gemm, args, gpu_name="sm_90").ptx
    assert _threads(ptx) == 384 and ".reqnctapercluster 2, 1, 1" in ptx
    if find_ptxas() is not None:
        assert _ptxas(ptx, 90)[1] == 0
    values = [v for _, v in _prepare(gemm, args).runtime]
    out = run_ptx(ptx, values, (2, 1, 1), strict_async=True)
    want = args[0].astype(np.float64) @ args[1].astype(np.float64)
    np.testing.assert_array_equal(out[2].astype(np.float64), want)


# ----------------------------------------------------------------------------- shared memory


@ct.kernel
def attention(Q, K, V, O, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]):
    q = ct.load(Q, index=(ct.bid(0), 0), shape=(TM, D))
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
    ct.store(O, index=(ct.bid(0), 0), tile=(acc / l_i).astype(O.dtype))


def _attention_args(S: int, D: int, TM: int, TN: int):
    rng = np.random.default_rng(0)
    q, k = ((rng.standard_normal((S, D)) * 0.3).astype(np.float16) for _ in range(2))
    v = rng.standard_normal((S, D)).astype(np.float16)
    s = q.astype(np.float64) @ k.astype(np.float64).T
    p = np.exp(s - s.max(1, keepdims=True))
    ref = p / p.sum(1, keepdims=True) @ v.astype(np.float64)
    return (q, k, v, np.zeros((S, D), np.float16), TM, TN, D), ref


@pytest.mark.parametrize("occupancy", [None, 1, 2])
def test_attention_128_rows_head_dim_128_fits(occupancy):
    """TileGym's sm_90 attention tile (128 x 128, head dim 128): a dot whose A is kept (Q) and
    whose B is a TMA stage (K^T) writes nothing to the scratch, which no longer reserves 72 KB
    for them (242,048 B of shared memory were refused); under occupancy 2 the consumers still
    take the producer's registers (ptxas spilled 352 B), as they do with no hint at all (368 B
    on 168 registers before)."""
    kernel = attention if occupancy is None else attention.replace_hints(occupancy=occupancy)
    args, ref = _attention_args(256, 128, 128, 128)
    d = _plan(kernel, args)
    assert d.taken and d.rebalance and d.consumer_regs == 232, d.line()
    ptx = tc.compile_kernel(kernel, args, gpu_name="sm_90").ptx
    scratch = re.search(r"__tilegen_smem\[(\d+)\]", ptx)
    assert scratch is None or int(scratch.group(1)) <= 32768  # was 73,728 (Q and K^T's)
    if find_ptxas() is not None:
        assert _ptxas(ptx, 90)[1] == 0
    out = _run_strict(kernel, args, (2,))
    np.testing.assert_allclose(out[3].astype(np.float64), ref, atol=2e-3)


@ct.kernel
def split_qk(Q, K, O, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]):
    q = ct.load(Q, index=(ct.bid(0), 0), shape=(TM, D))
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for j in range(K.shape[0] // TN):
        k = ct.load(K, index=(0, j), shape=(D, TN), order=(1, 0))
        s = ct.mma(q, k, ct.zeros((TM, TN), dtype=ct.float32))
        if j >= ct.bid(0):  # a runtime bound: loop_split makes two loops, each with its dot
            s = s * 2.0
        acc = acc + s
    ct.store(O, index=(ct.bid(0), 0), tile=acc)


def test_loop_copies_share_one_kept_operand():
    """The loops loop_split makes of one K loop keep their loop-invariant A (Q) in one array,
    not one per copy (MLA prefill's 128-row Q was kept twice)."""
    rng = np.random.default_rng(2)
    Q = (rng.standard_normal((128, 64)) * 0.5).astype(np.float16)
    K = (rng.standard_normal((256, 64)) * 0.5).astype(np.float16)
    args = (Q, K, np.zeros((128, 64), np.float32), 64, 64, 64)
    ptx = tc.compile_kernel(split_qk, args, gpu_name="sm_90").ptx
    assert re.findall(r"__tilegen_keep\d+\[(\d+)\]", ptx) == ["9216"]
    tc.launch((2,), split_qk, args, backend="ptxsim")
    q, k = Q.astype(np.float64), K.astype(np.float64)
    want = [
        sum(
            q[64 * b : 64 * b + 64] @ k[64 * j : 64 * j + 64].T * (2.0 if j >= b else 1.0)
            for j in range(4)
        )
        for b in range(2)
    ]
    np.testing.assert_allclose(args[2], np.concatenate(want), rtol=1e-3, atol=1e-3)


def test_128_by_256_gemm_tile_takes_two_consumer_warp_groups():
    """TileGym's 128 x 256 GEMM tile on sm_90: one warp group would hold 256 accumulator
    registers a thread (today's path, 1.5 KB of stack); two of 64 rows hold 128 each on the async
    path (tileiras: one group, 255 registers and 1.8 KB of stack). Exact in strict ptxsim."""
    kernel = _gemm(1)
    args = _gemm_args(256, 512, 128, (128, 256, 64))
    d = _plan(kernel, args)
    assert d.taken and d.consumer_warps == 8 and d.tile == (128, 256, 64), d.line()
    ptx = tc.compile_kernel(kernel, args, gpu_name="sm_90").ptx
    assert _threads(ptx) == 384 and "wgmma.mma_async.sync.aligned.m64n256k16" in ptx
    if find_ptxas() is not None:
        assert _ptxas(ptx, 90)[1] == 0
    out = _run_strict(kernel, args, (2, 2))
    want = args[0].astype(np.float64) @ args[1].astype(np.float64)
    np.testing.assert_array_equal(out[2].astype(np.float64), want)


# ----------------------------------------------------------------------------- C7602


@ct.kernel
def one_wide_dot(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    a = ct.load(A, index=(ct.bid(0), 0), shape=(TM, TK))
    b = ct.load(B, index=(0, 0), shape=(TK, TN))
    acc = ct.mma(a, b, ct.full((TM, TN), 0, dtype=ct.float32))
    ct.store(C, index=(ct.bid(0), 0), tile=acc.astype(C.dtype))


@needs_ptxas
def test_occupancy_cap_an_instruction_cannot_fit_under_is_dropped():
    """A 64 x 256 wgmma holds 128 accumulator registers in one instruction: under ``occupancy=8``
    (``.maxnreg 64`` at 128 threads) ptxas refuses it (C7602). tileiras compiles such kernels at
    255 registers; tilegen assembles again without the hint's cap and says so in the log."""
    A = np.zeros((64, 64), np.float16)
    B = np.zeros((64, 256), np.float16)
    C = np.zeros((64, 256), np.float16)
    kernel = one_wide_dot.replace_hints(occupancy=8)
    c = tc.compile_kernel(kernel, (A, B, C, 64, 256, 64), gpu_name="sm_90", emit="cubin")
    assert c.cubin and ".maxnreg" not in c.ptx
    assert "occupancy hint's .maxnreg dropped" in c.ptxas_log
    # at occupancy 2 the cap (255 -> none at 128 threads) never bound: nothing dropped
    c2 = tc.compile_kernel(
        one_wide_dot.replace_hints(occupancy=2),
        (A, B, C, 64, 256, 64),
        gpu_name="sm_90",
        emit="cubin",
    )
    assert "dropped" not in (c2.ptxas_log or "")


def test_drop_occupancy_caps_strips_only_the_hints_caps():
    from tilegen.runtime.layouts.kernel import OCCUPANCY_CAP_MARK
    from tilegen.runtime.ptxas import drop_occupancy_caps

    ptx = f".entry a()\n.maxnreg 64 {OCCUPANCY_CAP_MARK}\n{{\n}}\n.entry b()\n.maxnreg 40\n{{\n}}\n"
    fatal = "ptxas fatal   : (C7602) Insufficient registers (64) to compile instruction"
    out = drop_occupancy_caps(ptx, fatal)
    assert out is not None and ".maxnreg 64" not in out and ".maxnreg 40\n" in out
    assert drop_occupancy_caps(ptx, "ptxas error : something else") is None
    assert drop_occupancy_caps(ptx.replace(OCCUPANCY_CAP_MARK, ""), fatal) is None
