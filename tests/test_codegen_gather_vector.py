"""Gathers and scatters through pointer tiles move whole vectors where the indices run
contiguously (runtime/layouts/axis_info.py; docs/codegen.md "Vector gathers"): the layout stage
proves runs of contiguous, aligned, uniformly masked elements from ``make_range`` / ``splat`` /
``broadcast`` / ``addi`` / ``muli`` / ``addptr`` and the bounds comparisons, records the width
and anchors the access with that many elements a thread; code generation issues one
``ld.global.v4`` / ``st.global.v4`` a run. Everything else stays one access an element."""

from __future__ import annotations

import re

import numpy as np
import pytest

ct = pytest.importorskip(
    "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
)
tc = pytest.importorskip("tilegen.cutile")


def _accesses(ptx: str) -> tuple[list, list]:
    loads = re.findall(r"ld\.global((?:\.v\d)?)\.\w+", ptx)
    stores = re.findall(r"st\.global((?:\.v\d)?)\.\w+", ptx)
    return loads, stores


@ct.kernel
def row_twice(X, Y, T: ct.Constant[int]):
    row = ct.bid(0)
    cols = ct.arange(T, dtype=ct.int32)
    x = ct.gather(X, (row, cols), padding_value=0)
    ct.scatter(Y, (row, cols), x + x)


@pytest.mark.parametrize(
    "dtype,n,tile,vector",
    [
        (np.float16, 1024, 1024, True),  # 8 halves a thread: one 16-byte vector
        (np.float32, 512, 512, True),
        (np.float16, 1024, 2048, True),  # half the tile masked off: whole vectors at a time
        (np.float16, 1001, 1024, False),  # a row not a multiple of 16: no aligned runs
        (np.int8, 2048, 2048, True),
    ],
)
@pytest.mark.parametrize("backend_gpu", [("ptxsim", "sm_90"), ("ptxsim", "sm_80")])
def test_row_gather_and_scatter_vectorise_where_proven(dtype, n, tile, vector, backend_gpu):
    backend, gpu = backend_gpu
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, n)) * 8).astype(dtype)
    y = np.zeros_like(x)
    ptx = tc.compile_kernel(row_twice, (x, y, tile), gpu_name=gpu).ptx
    loads, stores = _accesses(ptx)
    assert any(loads) == vector and any(stores) == vector
    if vector:  # every access of the row is a vector
        assert all(loads) and all(stores)
    tc.launch((3,), row_twice, (x, y, tile), backend=backend, gpu_name=gpu)
    np.testing.assert_array_equal(y, x + x)


@ct.kernel
def rows_by_index(X, R, Y, TM: ct.Constant[int], TN: ct.Constant[int]):
    bm = ct.bid(0)
    rows = bm * TM + ct.arange(TM, dtype=ct.int32)
    r = ct.gather(R, rows, padding_value=0)
    cols = ct.arange(TN, dtype=ct.int32)
    x = ct.gather(X, (r[:, None], cols[None, :]), padding_value=0)
    ct.scatter(Y, (rows[:, None], cols[None, :]), x * 3)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_rows_at_random_indices_load_whole_vectors(dtype):
    """MoE's gather of token rows: each row's columns run contiguously, whatever the row."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 64)).astype(dtype)
    r = rng.permutation(64).astype(np.int32)
    y = np.zeros_like(x)
    args = (x, r, y, 32, 64)
    ptx = tc.compile_kernel(rows_by_index, args, gpu_name="sm_90").ptx
    assert re.search(r"ld\.global\.v4\.\w+ \{", ptx) and re.search(r"st\.global\.v4\.", ptx)
    tc.launch((2,), rows_by_index, args, backend="ptxsim", gpu_name="sm_90")
    np.testing.assert_array_equal(y, x[r] * 3)


@ct.kernel
def every_other(X, Y, T: ct.Constant[int]):
    cols = ct.arange(T, dtype=ct.int32) * 2
    x = ct.gather(X, (ct.bid(0), cols), padding_value=0)
    ct.scatter(Y, (ct.bid(0), ct.arange(T, dtype=ct.int32)), x)


def test_strided_indices_stay_one_access_an_element():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 512)).astype(np.float32)
    y = np.zeros((2, 256), np.float32)
    ptx = tc.compile_kernel(every_other, (x, y, 256), gpu_name="sm_90").ptx
    loads, stores = _accesses(ptx)
    assert not any(loads) and all(stores)  # the contiguous scatter still vectorises
    tc.launch((2,), every_other, (x, y, 256), backend="ptxsim", gpu_name="sm_90")
    np.testing.assert_array_equal(y, x[:, ::2])


def test_the_analysis_says_why():
    """The layout stage's record for each pointer access: its width and the limits behind it."""
    from tilegen.runtime.passes.layout_assignment import assign_layouts

    x = np.zeros((3, 1001), np.float16)
    c = tc.compile_kernel(
        row_twice, (x, np.zeros_like(x), 1024), gpu_name="sm_90", emit="nv_tileaa"
    )
    (a,) = assign_layouts(c.module)
    infos = [i for i in a.accesses if i.op.name in ("nv_tileaa.load", "nv_tileaa.store")]
    assert infos == []  # width 1 everywhere: not recorded, default layouts
    x = np.zeros((3, 1024), np.float16)
    c = tc.compile_kernel(
        row_twice, (x, np.zeros_like(x), 1024), gpu_name="sm_90", emit="nv_tileaa"
    )
    (a,) = assign_layouts(c.module)
    infos = [i for i in a.accesses if i.op.name in ("nv_tileaa.load", "nv_tileaa.store")]
    assert [i.vec for i in infos] == [8, 8]
    assert infos[0].limits["16 bytes"] == 8 and infos[0].limits["contiguity"] == 1024
