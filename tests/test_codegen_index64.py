"""Scalar parameters and 64-bit index math through the PTX backend (issue 12).

The kernels of tests/data/index64/ (see its README) compute view indices, pointer offsets, loop
bounds and array bounds in i64 from the block id, mixed with i32 thread coordinates and sizes.
Each must assemble with ptxas on sm_80/90/100/120 with 0 bytes of spills, type every index
instruction consistently (no b32 register beside a b64 one), and produce NumPy's result in the
reference interpreter and in the PTX simulator.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.codegen.driver import find_ptxas

DATA = Path(__file__).resolve().parent / "data" / "index64"
ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")


def _scale_ptr():
    rs = np.random.RandomState(1)
    x = rs.randn(1000).astype(np.float32)
    alpha = np.float32(-1.5)
    args = [("alpha", np.asarray(alpha)), ("x", x), ("y", np.zeros(1000, np.float32))]
    return args, (8, 1, 1), {"y": x * alpha}


def _scale_view():
    rs = np.random.RandomState(2)
    x = rs.randn(900).astype(np.float32)
    alpha, off = np.float32(2.5), 1
    y = np.zeros(1000, np.float32)
    want = np.zeros(1000, np.float32)
    padded = np.concatenate([x, np.zeros(2048, np.float32)])
    for t in range(8):  # 4 blocks x 2 tiles; y's last tile is partial (1000 elements)
        hi = min(1000, (t + 1) * 128)
        src = padded[(t + off) * 128 : (t + off) * 128 + (hi - t * 128)]
        want[t * 128 : hi] = src * alpha
    args = [
        ("alpha", np.asarray(alpha)),
        ("x", x),
        ("off", np.asarray(np.int64(off))),
        ("y", y),
    ]
    return args, (4, 1, 1), {"y": want}


def _axpy2d():
    rs = np.random.RandomState(3)
    x = rs.randn(37, 200).astype(np.float32)  # partial tiles on both dims
    alpha, off = np.float32(0.75), 1
    y = np.zeros((37, 200), np.float32)
    want = np.zeros_like(y)
    for bx in range(3):
        r0 = (2 * bx + off) * 8
        if r0 < 37:
            want[r0 : r0 + 8] = x[r0 : r0 + 8] * alpha
    args = [
        ("x", x),
        ("alpha", np.asarray(alpha)),
        ("y", y),
        ("off", np.asarray(np.int64(off))),
    ]
    return args, (3, 4, 1), {"y": want}


def _tilesum():
    rs = np.random.RandomState(4)
    nt = 3
    x = rs.randint(-1000, 1000, 128 * 7 + 50).astype(np.int32)  # 3 blocks, last one partial
    padded = np.concatenate([x, np.zeros(128 * 9 - x.size, np.int32)]).reshape(9, 128)
    want = np.stack([padded[b * nt : (b + 1) * nt].sum(0) for b in range(3)]).reshape(-1)
    args = [("nt", np.asarray(np.int64(nt))), ("x", x), ("y", np.zeros(384, np.int32))]
    return args, (3, 1, 1), {"y": want.astype(np.int32)}


KERNELS = {
    "scale_ptr_i64": _scale_ptr,
    "scale_view_i64": _scale_view,
    "axpy2d_i64": _axpy2d,
    "tilesum_loop_i64": _tilesum,
}


def _module(name: str):
    return parse_module((DATA / f"{name}.mlir").read_text(), f"{name}.mlir")


def _ptx(name: str, sm: str) -> str:
    from tilegen.runtime.ptxsim import compile_to_ptx

    return compile_to_ptx(_module(name), sm)


_REG = re.compile(r"%(rd|r)\d+\b")


def _mixed_widths(ptx: str) -> list[str]:
    """Integer instructions of one width (``.s32``/``.u32``/``.b32`` or 64) that name a register
    of the other width -- what ptxas calls an arguments mismatch."""
    bad = []
    for line in ptx.splitlines():
        m = re.match(r"\s*(?:@%p\d+ )?([a-z]+(?:\.[a-z0-9]+)*)\s+(.*);", line)
        if not m or m.group(1).startswith(("cvt", "mov", "ld", "st", "cvta", "mul.wide")):
            continue
        width = re.search(r"\.[sub](32|64)$", m.group(1))
        if width is None:
            continue
        kinds = {k for k in _REG.findall(m.group(2))}
        if (width.group(1) == "32" and "rd" in kinds) or (width.group(1) == "64" and "r" in kinds):
            bad.append(line.strip())
    return bad


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_index64_kernels_use_64_bit_index_math(name):
    ptx = _ptx(name, "sm_90")
    assert _mixed_widths(ptx) == []
    assert re.search(r"\b(add|mul\.lo|mad\.lo)\.s64\b", ptx), "no 64-bit index arithmetic"


def test_mixed_width_check_sees_the_old_bug():
    """The checker above flags what the backend used to emit (issue 12's two instructions)."""
    old = "\tadd.s32 %r2, %r1, %rd20;\n\tsetp.lt.u32 %p0, %r2, %rd3;\n\tadd.s64 %rd4, %rd3, %rd2;"
    assert _mixed_widths(old) == ["add.s32 %r2, %r1, %rd20;", "setp.lt.u32 %p0, %r2, %rd3;"]


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed")
@pytest.mark.parametrize("sm", ARCHS)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_index64_kernels_assemble_without_spills(name, sm):
    from tilegen.runtime.codegen.driver import assemble

    _, log = assemble(_ptx(name, sm), int(sm[3:]), verbose=True)
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log


@pytest.mark.parametrize("backend", ["interp", "ptxsim"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_index64_kernels_match_numpy(name, backend):
    args, grid, want = KERNELS[name]()
    if backend == "interp":
        from tilegen.runtime.interp.api import run_module

        out = run_module(_module(name), args, grid)
    else:
        from tilegen.runtime.ptxsim import run_ptxsim

        out = run_ptxsim(_module(name), args, grid, "sm_90")
    for k, v in want.items():
        np.testing.assert_array_equal(np.asarray(out[k]), v, err_msg=f"{name} {backend} {k}")
