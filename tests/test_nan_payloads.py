"""The NaN bits of conversions, as NVIDIA hardware writes them, in the interpreter and in the PTX
simulator alike.

* to f16 and bf16 (``cvt.rn.f16.f32``, ``cvt.rn.bf16.f32``, their ``x2`` forms, and 16-bit
  results of arithmetic): every NaN becomes 0x7FFF, the sign dropped. This is
  ``CUDART_NAN_FP16`` / ``CUDART_NAN_BF16`` ("canonical NaN"), and what cuda_fp16.hpp's and
  cuda_bf16.hpp's host emulation of ``__float2half`` / ``__float2bfloat16`` returns for every
  NaN input (NumPy and ml_dtypes keep the payload instead: 0x7E00 / 0x7FC0).
* to fp8 (``cvt.rn.satfinite.e4m3x2.f32`` / ``.e5m2x2``): 0x7F for every NaN, in both formats
  (cuda_fp8.hpp's emulation of those instructions first turns a NaN into 0x7FFFFFFF, which gives
  0x7F in e4m3 and 0x7E | 0b11 = 0x7F in e5m2).
* widening keeps what the widening gives (bf16 -> f32 is a shift; fp8 -> f16 gives 0x7FFF).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime import floats
from tilegen.runtime.ptx.launch import run_ptx
from tilegen.runtime.ptxas import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_codegen_families import STORE, _ftof_src, _pad, _run_both  # noqa: E402

#: NaNs of every kind: quiet and signalling, both signs, small and full payloads
NANS = {
    "f32": np.array(
        [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x7FA00000, 0xFFFFFFFF],
        np.uint32,
    ).view(np.float32),
    "f64": np.array(
        [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF],
        np.uint64,
    ).view(np.float64),
    "f16": np.array([0x7E00, 0xFE00, 0x7C01, 0x7FFF, 0xFFFF], np.uint16).view(np.float16),
    "bf16": np.array([0x7FC0, 0xFFC0, 0x7F81, 0x7FFF, 0xFFFF], np.uint16),
}
#: (destination, the NaN bits the GPU writes)
NARROWING = {"f16": 0x7FFF, "bf16": 0x7FFF, "f8E4M3FN": 0x7F, "f8E5M2": 0x7F}
#: every narrowing conversion to a format with a NaN (f64 -> bf16 too: it rounds to odd in
#: f32 first, spec/ptx/selection.yaml)
CASES = [(s, d) for s in NANS for d in NARROWING if s != d]


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


@pytest.mark.parametrize("src,dst", CASES, ids=[f"{s}-{d}" for s, d in CASES])
def test_ftof_nan_bits_interpreter_and_ptx(src, dst):
    """``ftof`` of every kind of NaN: the interpreter and tilegen's PTX in the simulator both
    write the hardware's NaN; ordinary values beside them convert as before."""
    tile = 16
    ones = {"f32": np.float32, "f64": np.float64, "f16": np.float16}.get(src)
    one = np.array([1.0], ones) if ones else np.array([0x3F80], np.uint16)  # bf16 1.0
    x = _pad(np.concatenate([NANS[src], one]), tile)
    n = len(NANS[src])
    interp, ptx = _run_both(
        _ftof_src(src, dst, tile), [("x", x), ("y", np.zeros(tile, STORE[dst]))], tile
    )
    for name, got in (("interpreter", interp["y"]), ("ptx", ptx["y"])):
        bits = _bits(got)
        assert [hex(b) for b in bits[:n]] == [hex(NARROWING[dst])] * n, (name, src, dst)
        assert not np.isnan(floats.decode(bits[n : n + 1], dst)).any(), (name, bits[n])


def test_interpreter_arithmetic_nan_in_16_bit_formats():
    """A 16-bit float op whose result is NaN (inf - inf) writes 0x7FFF in the interpreter and
    the simulator, not NumPy's 0xFE00 / 0xFFC0."""
    src = _ftof_src("f16", "f16", 16).replace(
        "%r = ftof %v : tile<16xf16> -> tile<16xf16>", "%r = subf %v, %v : tile<16xf16>"
    )
    x = np.full(16, np.inf, np.float16)
    x[1] = -np.inf
    interp, ptx = _run_both(src, [("x", x), ("y", np.zeros(16, np.float16))], 16)
    assert set(_bits(interp["y"]).tolist()) == {0x7FFF}
    assert set(_bits(ptx["y"]).tolist()) == {0x7FFF}


@pytest.mark.parametrize("op", ["negf", "absf"])
@pytest.mark.parametrize("ty", ["f16", "bf16"])
def test_sign_ops_keep_the_nan_payload(op, ty):
    """``negf`` / ``absf`` on f16 / bf16 are bit operations on the GPU (tilegen emits
    ``xor.b16`` / ``and.b16``): a NaN keeps its payload and only the sign changes, in the
    interpreter (``semantics: nan: keep``) as in the PTX."""
    src = _ftof_src(ty, ty, 16).replace(
        f"%r = ftof %v : tile<16x{ty}> -> tile<16x{ty}>", f"%r = {op} %v : tile<16x{ty}>"
    )
    x = _pad(NANS[ty], 16)
    interp, ptx = _run_both(src, [("x", x), ("y", np.zeros(16, STORE[ty]))], 16)
    n = len(NANS[ty])
    want = _bits(x)[:n] ^ 0x8000 if op == "negf" else _bits(x)[:n] & 0x7FFF
    assert _bits(interp["y"])[:n].tolist() == want.tolist()
    assert _bits(ptx["y"])[:n].tolist() == want.tolist()


def test_floats_canonical_nan():
    """``floats.canonical_nan``: any float dtype holding f16 / bf16 values; other types and
    non-NaN values untouched."""
    h = np.array([np.nan, -np.nan, 1.5], np.float16)
    assert _bits(floats.canonical_nan(h, "f16")).tolist() == [0x7FFF, 0x7FFF, 0x3E00]
    b = np.array([np.nan, -np.nan, 1.5], np.float32)  # bf16 values in their compute dtype
    assert (_bits(floats.canonical_nan(b, "bf16")) >> 16).tolist() == [0x7FFF, 0x7FFF, 0x3FC0]
    assert floats.encode(floats.canonical_nan(b, "bf16"), "bf16").tolist()[:2] == [0x7FFF] * 2
    d = np.array([np.nan], np.float64)
    assert floats.encode(floats.canonical_nan(d, "f16"), "f16").tolist() == [0x7FFF]
    f = np.array([-np.nan], np.float32)
    assert _bits(floats.canonical_nan(f, "f32")).tolist() == _bits(f).tolist()
    assert floats.nan_code("f8E4M3FN") == floats.nan_code("f8E5M2") == 0x7F


CVT = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(
    .param .u64 k_x, .param .u32 k_xn, .param .u32 k_xs,
    .param .u64 k_y, .param .u32 k_yn, .param .u32 k_ys
)
.reqntid 32
{{
    .reg .b16 %h<4>;
    .reg .b32 %r<8>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_x];
    ld.param.u64 %rd2, [k_y];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
{body}
    add.s64 %rd5, %rd2, %rd3;
    st.global.b32 [%rd5], %r2;
    ret;
}}
"""

#: instruction -> the bits it leaves in %r2 for a NaN in %f1 (ptxas assembles each)
INSTRUCTIONS = {
    "cvt.rn.bf16.f32": ("cvt.rn.bf16.f32 %h1, %f1;\n    cvt.u32.u16 %r2, %h1;", 0x7FFF),
    "cvt.rn.f16.f32": ("cvt.rn.f16.f32 %h1, %f1;\n    cvt.u32.u16 %r2, %h1;", 0x7FFF),
    "cvt.rn.bf16x2.f32": ("cvt.rn.bf16x2.f32 %r2, %f1, %f1;", 0x7FFF7FFF),
    "cvt.rn.f16x2.f32": ("cvt.rn.f16x2.f32 %r2, %f1, %f1;", 0x7FFF7FFF),
    "cvt.rn.satfinite.e4m3x2.f32": (
        "cvt.rn.satfinite.e4m3x2.f32 %h1, %f1, %f1;\n    cvt.u32.u16 %r2, %h1;",
        0x7F7F,
    ),
    "cvt.rn.satfinite.e5m2x2.f32": (
        "cvt.rn.satfinite.e5m2x2.f32 %h1, %f1, %f1;\n    cvt.u32.u16 %r2, %h1;",
        0x7F7F,
    ),
}


@pytest.mark.parametrize("name", list(INSTRUCTIONS))
def test_simulated_cvt_writes_the_hardware_nan(name):
    """The simulator's ``cvt`` to f16 / bf16 / fp8 on hand-written PTX (assembled by ptxas where
    installed): every NaN input gives the hardware's NaN, 1.0 its ordinary bits."""
    body, nan_bits = INSTRUCTIONS[name]
    x = np.ones(32, np.float32)
    x[: len(NANS["f32"])] = NANS["f32"]
    n = len(NANS["f32"])
    y = run_ptx(
        CVT.format(body=body),
        [x, np.zeros(32, np.uint32)],
        (1, 1, 1),
        assemble=find_ptxas() is not None,
    )[1]
    assert [hex(v) for v in y[:n]] == [hex(nan_bits)] * n
    assert len(set(y[n:].tolist())) == 1 and y[n] != nan_bits
