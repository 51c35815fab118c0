"""Atomics through ``tilegen.cutile``: ``atomic_add`` / ``atomic_xchg`` / ``atomic_cas`` on i32
and f32, tile sizes 16-128 over arrays whose length is and is not a multiple of 16 (cuTile's
launch specialises on divisibility by 16, which makes the index loads vectorized: the layout
stage once gave the atomic's result that vector layout and its value the default one, and the
verifier refused the module). Each kernel is assembled by ptxas and run by both backends
against NumPy, the old values the atomics return included.
"""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')")

import cuda.tile as ct  # noqa: E402

from tilegen.cutile import compile_kernel, launch  # noqa: E402
from tilegen.runtime.ptxas import find_ptxas  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

BACKENDS = ("interp", "ptxsim")
#: (array length, tile size, destination length): multiples of 16 and not, tails and not
SHAPES = [(256, 128, 64), (96, 32, 96), (48, 16, 50), (100, 64, 37), (40, 16, 40)]
DTYPES = (np.int32, np.float32)


def _positions(TILE):
    return ct.bid(0) * TILE + ct.arange(TILE, dtype=ct.int32)


@ct.kernel
def add_k(idx, dst, val, old, TILE: ct.Constant[int]):
    pos = _positions(TILE)
    i = ct.gather(idx, pos, padding_value=-1)  # lanes past the end: index -1, skipped
    o = ct.atomic_add(dst, i, ct.gather(val, pos))
    ct.scatter(old, pos, o)


@ct.kernel
def xchg_k(idx, dst, val, old, TILE: ct.Constant[int]):
    pos = _positions(TILE)
    i = ct.gather(idx, pos, padding_value=-1)
    ct.scatter(old, pos, ct.atomic_xchg(dst, i, ct.gather(val, pos)))


@ct.kernel
def cas_k(idx, dst, cmp, val, old, TILE: ct.Constant[int]):
    pos = _positions(TILE)
    i = ct.gather(idx, pos, padding_value=-1)
    o = ct.atomic_cas(dst, i, ct.gather(cmp, pos), ct.gather(val, pos))
    ct.scatter(old, pos, o)


@ct.kernel
def add_tiles_k(idx, dst, val, old, TILE: ct.Constant[int]):
    """Operands by tile loads (4-wide when the length is a multiple of 16)."""
    i = ct.load(idx, index=(ct.bid(0),), shape=(TILE,))
    o = ct.atomic_add(dst, i, ct.load(val, index=(ct.bid(0),), shape=(TILE,)))
    ct.store(old, index=(ct.bid(0),), tile=o)


@ct.kernel
def xchg_tiles_k(idx, dst, val, old, TILE: ct.Constant[int]):
    i = ct.load(idx, index=(ct.bid(0),), shape=(TILE,))
    o = ct.atomic_xchg(dst, i, ct.load(val, index=(ct.bid(0),), shape=(TILE,)))
    ct.store(old, index=(ct.bid(0),), tile=o)


@ct.kernel
def cas_tiles_k(idx, dst, cmp, val, old, TILE: ct.Constant[int]):
    b = ct.bid(0)
    i = ct.load(idx, index=(b,), shape=(TILE,))
    c = ct.load(cmp, index=(b,), shape=(TILE,))
    o = ct.atomic_cas(dst, i, c, ct.load(val, index=(b,), shape=(TILE,)))
    ct.store(old, index=(b,), tile=o)


@ct.kernel
def histogram_k(bins, hist, TILE: ct.Constant[int]):
    """The launch case of tests/cutile_kernels.py: a tile load (vectorized when the length is a
    multiple of 16) feeding atomic_add with a constant tile."""
    b = ct.load(bins, index=(ct.bid(0),), shape=(TILE,))
    ct.atomic_add(hist, b, ct.full((TILE,), 1, ct.int32))


def _case(op, dtype, n, m, rng):
    """(args without TILE, check(args, before) -> None)."""
    val = rng.integers(-50, 50, n).astype(dtype)
    old = np.zeros(n, dtype)
    if op == "add":  # repeated indices: the sum of every update lands
        idx = rng.integers(0, m, n).astype(np.int32)
        dst = rng.integers(-50, 50, m).astype(dtype)
        want = dst.copy()
        np.add.at(want, idx, val)

        before = dst.copy()

        def check(args):
            np.testing.assert_array_equal(args[1], want)
            # the updates of one element form a chain: each read the value the previous one
            # wrote, so {old + val} + {initial} == {old} + {final} as multisets
            got = args[3]
            for k in np.unique(idx):
                lanes = idx == k
                wrote = np.sort(np.append(got[lanes] + val[lanes], before[k]))
                read = np.sort(np.append(got[lanes], want[k]))
                np.testing.assert_array_equal(wrote, read)

        return (idx, dst, val, old), check
    size = max(n, m)
    idx = rng.permutation(size)[:n].astype(np.int32)  # distinct: the old values are exact
    dst = rng.integers(-50, 50, size).astype(dtype)
    before = dst.copy()
    if op == "xchg":
        want = dst.copy()
        want[idx] = val

        def check(args):
            np.testing.assert_array_equal(args[1], want)
            np.testing.assert_array_equal(args[3], before[idx])

        return (idx, dst, val, old), check
    cmp = np.where(rng.random(n) < 0.5, dst[idx], dst[idx] + 1).astype(dtype)
    want = dst.copy()
    hit = dst[idx] == cmp
    want[idx[hit]] = val[hit]
    assert hit.any() and not hit.all()

    def check(args):
        np.testing.assert_array_equal(args[1], want)
        np.testing.assert_array_equal(args[4], before[idx])

    return (idx, dst, cmp, val, old), check


KERNELS = {"add": add_k, "xchg": xchg_k, "cas": cas_k}
TILE_KERNELS = {"add": add_tiles_k, "xchg": xchg_tiles_k, "cas": cas_tiles_k}
CASES = [(op, dt, shape) for op in KERNELS for dt in DTYPES for shape in SHAPES]
#: whole tiles only (a tile load past the end would feed undetermined indices to the atomic)
TILE_CASES = [c for c in CASES if c[2][0] % c[2][1] == 0]


def _id(case):
    op, dt, (n, tile, m) = case
    return f"{op}-{np.dtype(dt).name}-n{n}-t{tile}-m{m}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_atomics_match_numpy(case, backend):
    op, dtype, (n, tile, m) = case
    rng = np.random.default_rng(n * 7 + tile + m)
    args, check = _case(op, dtype, n, m, rng)
    grid = ((n + tile - 1) // tile,)
    launch(grid, KERNELS[op], (*args, tile), backend=backend)
    check(args)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", TILE_CASES, ids=_id)
def test_atomics_on_loaded_tiles_match_numpy(case, backend):
    """Pointers, values and compare values from (vectorized) tile loads: the atomic takes their
    layout, its result is stored by a tile store."""
    op, dtype, (n, tile, m) = case
    args, check = _case(op, dtype, n, m, np.random.default_rng(n + tile + m))
    launch((n // tile,), TILE_KERNELS[op], (*args, tile), backend=backend)
    check(args)
    if backend == "ptxsim" and find_ptxas() is not None:
        c = compile_kernel(TILE_KERNELS[op], (*args, tile), emit="cubin")
        assert c.cubin[:4] == b"\x7fELF"


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed (nvidia-cuda-nvcc)")
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_atomics_assemble(case):
    """ptxas accepts the PTX of every atomics kernel, which holds the atomic instruction."""
    op, dtype, (n, tile, m) = case
    args, _ = _case(op, dtype, n, m, np.random.default_rng(0))
    c = compile_kernel(KERNELS[op], (*args, tile), emit="cubin")
    assert c.cubin[:4] == b"\x7fELF"
    want = {"add": r"atom\.\S*global\.add\.[uf]32", "xchg": r"atom\.\S*global\.exch\.b32"}
    want["cas"] = r"atom\.\S*global\.cas\.b32"
    assert re.search(want[op], c.ptx), c.ptx


@pytest.mark.parametrize("n", [256, 96, 100])
def test_histogram_vectorized_load_feeds_atomic(n):
    """The shape that failed: with n a multiple of 16 the bins load is 4-wide; the atomic's
    pointers, value and result share one layout and the module verifies, assembles and runs."""
    bins = np.random.default_rng(n).integers(0, 64, n).astype(np.int32)
    tile = 64
    grid = ((n + tile - 1) // tile,)
    if n % tile == 0:
        for backend in BACKENDS:
            hist = np.zeros(64, np.int32)
            launch(grid, histogram_k, (bins, hist, tile), backend=backend)
            np.testing.assert_array_equal(hist, np.bincount(bins, minlength=64))
    c = compile_kernel(histogram_k, (bins, np.zeros(64, np.int32), tile), emit="nv_tileas")
    [rmw] = [op for op in c.module.walk() if op.name == "nv_tileaa.atomic_rmw"]
    value = rmw.opdef.operand_group(rmw, "value")[0]
    assert rmw.results[0].type == value.type
    ptrs = rmw.opdef.operand_group(rmw, "base")[0]
    assert ptrs.type.encoding == value.type.encoding
    if n % 16 == 0:  # the vectorized load's layout is kept: the pointers need no conversion
        assert value.type.encoding.size_per_thread == (4,), value.type
    if find_ptxas() is not None:
        cubin = compile_kernel(histogram_k, (bins, np.zeros(64, np.int32), tile), emit="cubin")
        assert cubin.cubin[:4] == b"\x7fELF"
