"""runtime/codegen/debug.py: print through vprintf (text compared with the reference interpreter
through the PTX simulator) and assert (message like tileiras, then trap)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from kernelgen import PTXAS, inputs, kernel, ptx_of, ptxas, run_both, ty
from tilegen.cli import main
from tilegen.runtime.asm import parse_module
from tilegen.runtime.ptxsim import run_ptxsim
from tilegen.runtime.interp.api import RunError, run_module

from paths import CORPUS_OUT as OUT  # ../shared or $TILEGEN_SHARED

needs_corpus = pytest.mark.skipif(not OUT.exists(), reason="cuTile corpus not present")


def _printing(shape, fmt, e, extra=(), warps=4):
    """Print ``%t`` (and ``extra`` (name, type) values) with ``fmt``; store ``%t`` back."""
    args = ", ".join(["%t"] + [n for n, _ in extra])
    types = ", ".join([ty(shape, e)] + [t for _, t in extra])
    body = [
        f'%p = print_tko "{fmt}", {args} : {types} -> token',
        "%r = addi %t, %t : " + ty(shape, e),
    ]
    if e.startswith("f"):
        body[-1] = "%r = addf %t, %t : " + ty(shape, e)
    return kernel(shape, shape, body, e=e, warps=warps)


PRINTS = {
    "f32_4x8": ((4, 8), "v=%f\\0A", "f32"),
    "f32_g_1": ((1,), "one %g!\\0A", "f32"),
    "i32_hex_16": ((16,), "h=%x d=%5d\\0A", "i32"),
    "i64_64": ((64,), "%d;", "i64"),
    "i16_2x4": ((2, 4), "%d %u\\0A", "i16"),
    "i8_8": ((8,), "[%i] 100%% done\\0A", "i8"),
    "f64_2x2x2": ((2, 2, 2), "%.3e\\0A", "f64"),
    "f16_8": ((8,), "%f\\0A", "f16"),
}


@pytest.mark.parametrize("name", sorted(PRINTS))
def test_print_tile_text_matches_interpreter(name):
    shape, fmt, e = PRINTS[name]
    if fmt.count("%") - 2 * fmt.count("%%") == 2:  # two conversions: print the tile twice
        text = _printing(shape, fmt, e, extra=[("%t", ty(shape, e))])
    else:
        text = _printing(shape, fmt, e)
    x = inputs(shape, e)
    if e in ("i8", "i16"):
        x = (x % 100 - 50).astype(x.dtype)  # negative values too
    ref, got, out_i, out_p = run_both(text, x, shape, e)
    np.testing.assert_array_equal(got, ref)
    assert out_i and out_p == out_i


def test_print_i1_tile_and_scalar():
    """An i1 tile prints like the interpreter (true as -1 with %d), next to a scalar."""
    body = [
        "%z = constant <i32: 0> : tile<4xi32>",
        "%b = cmpi greater_than %t, %z, signed : tile<4xi32> -> tile<4xi1>",
        "%s = constant <i32: 7> : tile<i32>",
        '%p = print_tko "b=%d s=%d u=%u\\0A", %b, %s, %b : tile<4xi1>, tile<i32>, tile<4xi1> -> token',
        "%r = addi %t, %t : tile<4xi32>",
    ]
    text = kernel((4,), (4,), body, e="i32", warps=2)
    x = np.array([3, -1, 0, 9], np.int32)
    ref, got, out_i, out_p = run_both(text, x, (4,), "i32")
    assert out_i == "b=[-1, 0, 0, -1] s=7 u=[1, 0, 0, 1]\n"
    assert out_p == out_i


def test_long_tile_prints_in_one_line_per_thread_zero():
    """More elements than one vprintf takes: several calls, one line, printed once per CTA."""
    text = _printing((128,), "%d\\0A", "i32", warps=1)
    x = np.arange(128, dtype=np.int32) - 64
    ptx = ptx_of(text)
    assert ptx.count("call.uni") == 4
    _, _, out_i, out_p = run_both(text, x, (128,), "i32")
    assert out_p == out_i and out_p.count("\n") == 1


@needs_corpus
def test_print_kernel_corpus_output_matches(capsys):
    outs = []
    for backend in ("interp", "ptxsim"):
        rc = main(
            [
                "run",
                str(OUT / "print_kernel.tileirbc"),
                "--args",
                str(OUT / "print_kernel.npz"),
                "--backend",
                backend,
                "--gpu-name",
                "sm_90",
                "--check",
            ]
        )
        out = capsys.readouterr().out
        assert rc == 0 and "1 expected array(s) match" in out
        outs.append(out)
    assert "sum=" in outs[0] and outs[0] == outs[1]


def _asserting(thresh: int):
    body = [
        f"%z = constant <i32: {thresh}> : tile<4x8xi32>",
        "%b = cmpi less_than %t, %z, signed : tile<4x8xi32> -> tile<4x8xi1>",
        'assert %b, "too big" : tile<4x8xi1>',
        "%r = addi %t, %t : tile<4x8xi32>",
    ]
    return kernel((4, 8), (4, 8), body, e="i32", warps=4)


def test_assert_tile_fails_with_position_and_traps():
    x = np.zeros((4, 8), np.int32)
    x[2, 5] = 50
    args = [("x", x), ("y", np.zeros((4, 8), np.int32))]
    with pytest.raises(RunError, match="assertion failed: too big"):
        run_module(parse_module(_asserting(10), "k.mlir"), args, (1, 1, 1), stdout=io.StringIO())
    with pytest.raises(RunError) as e:
        run_ptxsim(parse_module(_asserting(10), "k.mlir"), args, (1, 1, 1), "sm_90")
    msg = str(e.value.diagnostics[0].message)
    assert "trap executed" in msg
    assert "k.mlir:" in msg and "tile block: [0, 0, 0], position: [2, 5]: too big" in msg


def test_assert_that_holds_is_silent():
    x = np.arange(32, dtype=np.int32).reshape(4, 8)
    out = io.StringIO()
    args = [("x", x), ("y", np.zeros((4, 8), np.int32))]
    got = run_ptxsim(parse_module(_asserting(1000), "k.mlir"), args, (1, 1, 1), "sm_90", stdout=out)
    np.testing.assert_array_equal(got["y"], 2 * x)
    assert out.getvalue() == ""


def test_scalar_assert_message_like_tileiras():
    ptx = ptx_of(_asserting(5))
    strings = re.findall(r"\.global \.align 1 \.b8 (\$str_\w+)\[\d+\] = \{([\d, ]+)\}", ptx)
    texts = [bytes(int(b) for b in data.split(",")).decode() for _, data in strings]
    assert any(
        re.fullmatch(
            r"k\.mlir:\d+: tile block: \[%d, %d, %d\], position: \[%d, %d\]: too big\n\0", t
        )
        for t in texts
    ), texts
    assert "trap;" in ptx and ".extern .func (.param .b32 func_retval0) vprintf" in ptx


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
@pytest.mark.parametrize("sm", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_debug_kernels_ptxas_clean(sm):
    for text in (
        _printing((4, 8), "v=%f\\0A", "f32"),
        _printing((64,), "%d;", "i64"),
        _asserting(3),
    ):
        err = ptxas(ptx_of(text, sm), sm)
        assert "0 bytes spill stores, 0 bytes spill loads" in err, err
