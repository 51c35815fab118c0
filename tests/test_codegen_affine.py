"""Registers that are a base plus constants (runtime/codegen/affine.py): a gather / scatter of a
row through ``arange`` offsets addresses ``[base+c]`` off one 64-bit register, where it kept a
64-bit address per element (TileGym's RMSNorm gather of an 8192-wide row spilled 540 B); and
the facts never cross a sign extension of a value that may have wrapped."""

from __future__ import annotations

import re

import numpy as np
import pytest

ct = pytest.importorskip(
    "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
)
tc = pytest.importorskip("tilegen.cutile")


@ct.kernel
def row_scale(x, out, N: ct.Constant[int], TILE: ct.Constant[int]):
    row = ct.bid(0)
    offs = ct.arange(TILE, dtype=ct.int32)
    v = ct.gather(x, (row, offs), check_bounds=TILE != N)
    ct.scatter(out, (row, offs), (v.astype(ct.float32) * 2.0).astype(out.dtype))


@pytest.mark.parametrize("gpu_name", ["sm_80", "sm_90"])
@pytest.mark.parametrize("n,tile", [(1024, 1024), (200, 256)])
def test_gather_row_addresses_one_base_plus_constants(gpu_name, n, tile):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, n)).astype(np.float16)
    out = np.zeros_like(x)
    ptx = tc.compile_kernel(row_scale, (x, out, n, tile), gpu_name=gpu_name).ptx
    loads = re.findall(r"ld\.global[.\w]* (?:%\w+|\{[^}]*\}), \[(%rd\d+)(?:\+(\d+))?\]", ptx)
    stores = re.findall(r"st\.global[.\w]* \[(%rd\d+)(?:\+(\d+))?\]", ptx)
    # a row of a multiple of 16 elements runs contiguously in 16-byte vectors
    # (layouts/axis_info.py): one ld.global.v4.b32 a thread; else one access an element
    vec = 8 if n % 16 == 0 else 1
    step = 256 * vec if vec > 1 else 256
    count = tile // 128 // vec
    assert len(loads) == count and len(stores) == count
    assert (".v4.b32" in ptx) == (vec > 1)
    for accesses in (loads, stores):
        assert len({base for base, _ in accesses}) == 1  # one base register
        assert sorted(int(c or 0) for _, c in accesses) == [step * k for k in range(count)]
    tc.launch((4,), row_scale, (x, out, n, tile), backend="ptxsim", gpu_name=gpu_name)
    np.testing.assert_array_equal(out, (x.astype(np.float32) * 2.0).astype(np.float16))


@ct.kernel
def widen(out, base: int, TILE: ct.Constant[int]):
    offs = ct.arange(TILE, dtype=ct.int32) + base  # may wrap in 32 bits
    ct.store(out, index=(0,), tile=offs.astype(ct.int64) * 3 - 7)


@pytest.mark.parametrize("base", [5, 2**31 - 100, -(2**31)])
def test_a_sign_extension_after_a_wrap_is_not_taken_apart(base):
    """``exti(arange + base)`` is not ``exti(base') + c`` where the 32-bit sum may wrap: the
    simulator's result is the interpreter's, bit for bit."""
    outs = []
    for backend in ("interp", "ptxsim"):
        out = np.zeros(256, np.int64)
        tc.launch((1,), widen, (out, base, 256), backend=backend)
        outs.append(out)
    np.testing.assert_array_equal(outs[1], outs[0])
    want = ((np.arange(256, dtype=np.int64) + base + 2**31) % 2**32 - 2**31) * 3 - 7
    np.testing.assert_array_equal(outs[1], want)
