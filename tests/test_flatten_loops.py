"""``nv-tileaa-flatten-loops`` (docs/pipelines.md section 26): a loop nest whose outer body is
index arithmetic around one inner loop carrying the outer loop's values becomes one loop.
Grouped-query attention backward (dK dV over the query heads of a group) then has its dots'
loop at the kernel's top level and takes the async path."""

from __future__ import annotations

import numpy as np
import pytest

ct = pytest.importorskip(
    "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
)
tc = pytest.importorskip("tilegen.cutile")

f16, f32, i32 = ct.float16, ct.float32, ct.int32


@ct.kernel
def nest(X, Out, lo: int, hi: int, G: int):
    """Dynamic bounds, non-unit steps, index arithmetic in the outer body."""
    acc = ct.full((16,), 0, i32)
    for g in range(1, G, 2):
        base = g * 3 + 1
        for j in range(lo, hi, 3):
            acc = acc + ct.load(X, index=(j % 4,), shape=(16,)) * (base + j)
    ct.store(Out, index=(0,), tile=acc)


@ct.kernel
def nest_dependent(X, Out, G: int):
    """The inner bounds depend on the outer variable: not flattened."""
    acc = ct.full((16,), 0, i32)
    for g in range(G):
        for j in range(g, G):
            acc = acc + ct.load(X, index=(j % 4,), shape=(16,)) * (g + 1)
    ct.store(Out, index=(0,), tile=acc)


def _loops(kernel, args, gpu="sm_90") -> list:
    m = tc.compile_kernel(kernel, args, gpu_name=gpu, emit="nv_tileas").module
    return [op for op in m.walk() if op.name == "scf.for"]


@pytest.mark.parametrize("lo,hi,G", [(0, 10, 6), (-4, 7, 4), (5, 2, 6), (0, 9, 1), (2, 3, 9)])
def test_a_flattened_nest_matches_the_interpreter(lo, hi, G):
    x = (np.arange(64, dtype=np.int32) % 13) - 6
    args = (x, np.zeros(16, np.int32), lo, hi, G)
    assert len(_loops(nest, args)) == 1  # one loop left
    want = np.zeros(16, np.int32)
    tc.launch((1, 1, 1), nest, (x, want, lo, hi, G), backend="interp")
    out = np.zeros(16, np.int32)
    tc.launch((1, 1, 1), nest, (x, out, lo, hi, G), backend="ptxsim")
    np.testing.assert_array_equal(out, want)
    ref = np.zeros(16, np.int64)
    for g in range(1, G, 2):
        for j in range(lo, hi, 3):
            k = j % 4
            ref += x[16 * k : 16 * k + 16].astype(np.int64) * (g * 3 + 1 + j)
    np.testing.assert_array_equal(out, ref.astype(np.int32))


def test_inner_bounds_on_the_outer_variable_stay_nested():
    x = np.arange(64, dtype=np.int32) % 5
    args = (x, np.zeros(16, np.int32), 5)
    assert len(_loops(nest_dependent, args)) == 2
    out = np.zeros(16, np.int32)
    tc.launch((1, 1, 1), nest_dependent, (x, out, 5), backend="ptxsim")
    ref = sum(x[16 * (j % 4) : 16 * (j % 4) + 16] * (g + 1) for g in range(5) for j in range(g, 5))
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_grouped_attention_backward_takes_the_async_path(gpu):
    """tests/cutile_kernels_async.attention_bwd_dkdv_gqa: TileGym's dK dV over a group of 2
    query heads (LICM leaves a gather's ``splat(base)`` in the outer body): one loop, the
    async path, dK and dV as NumPy's in the strict simulator."""
    import sys
    from pathlib import Path

    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cutile_kernels_async as cka

    name = "attention_bwd_dkdv_gqa"
    case, pr = cka.kernels()[name], cka.problems()[name]
    args = tuple(pr.args.values()) + tuple(case.params[-4:])
    assert len(_loops(case.kernel, args, gpu)) == 1
    c = tc.compile_kernel(case.kernel, args, gpu_name=gpu)
    (d,) = c.async_plan
    assert d.taken, d.line()
    from tilegen.runtime.ptxas import find_ptxas

    if find_ptxas() is not None:  # the simulated PTX is what ptxas takes, without spills
        from tilegen.runtime.codegen.driver import assemble

        _, log = assemble(c.ptx, int(gpu[3:]), verbose=True)
        assert " 0 bytes spill stores" in log, log
    values = [v for _, v in _prepare(case.kernel, args).runtime]
    out = run_ptx(c.ptx, values, pr.grid, strict_async=True)
    for i, key in ((4, "dK"), (5, "dV")):
        np.testing.assert_allclose(
            np.asarray(out[i]).astype(np.float64),
            pr.expected[key].astype(np.float64),
            rtol=pr.rtol,
            atol=pr.atol,
        )
