"""Float semantics and MLIR float printing (runtime/asm/float_format.py)."""

import math
import random
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.asm.dense import dense_from_bits
from tilegen.runtime.asm.result_names import constant_name
from tilegen.runtime.types import F32, F64, TileType
from tilegen.runtime.asm.float_format import SEMANTICS, apfloat_to_string, format_float

# (value or bits, type, MLIR text) -- from the conformance CHECK lines and tileirdisasm output.
PRINTED = [
    (1.0, "f32", "1.000000e+00"),
    (1.5, "f32", "1.500000e+00"),
    (3.14, "f32", "3.140000e+00"),
    (2.718, "f64", "2.718000e+00"),
    (math.e, "f64", "2.7182818284590451"),
    (math.pi, "f64", "3.1415926535897931"),
    (-math.sqrt(2), "f64", "-1.4142135623730951"),
    (1e-5, "f32", "9.99999974E-6"),
    (1.4426950408889634, "f32", "1.44269502"),
    (-3.14063, "f16", "-3.140630e+00"),
    (5.5, "bf16", "5.500000e+00"),
    (0.0, "f32", "0.000000e+00"),
    (-0.0, "f32", "-0.000000e+00"),
    (0.1, "f32", "1.000000e-01"),
    (10.0, "f32", "1.000000e+01"),
    (math.inf, "f32", "0x7F800000"),
    (-math.inf, "f32", "0xFF800000"),
    (math.nan, "f32", "0x7FC00000"),
    (math.inf, "f64", "0x7FF0000000000000"),
    (70000.0, "f16", "0x7C00"),
    (-70000.0, "f16", "0xFC00"),
    (6.0, "f4E2M1FN", "6.000000e+00"),
    (448.0, "f8E4M3FN", "4.480000e+02"),
    # six digits do not round-trip and APFloat's default form has no '.': hex
    (123456789.0, "f64", "0x419D6F3454000000"),
]


@pytest.mark.parametrize("value,type_name,text", PRINTED)
def test_format_float_matches_mlir(value, type_name, text):
    assert format_float(value, type_name) == text


def test_bits_win_over_value():
    # a NaN payload survives only through its bit pattern
    assert format_float(math.nan, "f32", bits=0x7FC00001) == "0x7FC00001"
    assert format_float(None, "f16", bits=0x3C00) == "1.000000e+00"


def test_apfloat_truncating_digit_generation():
    # APFloat drops whole decades before rounding: 1e-5f prints ...74, not ...75
    sem = SEMANTICS["f32"]
    kind, neg, mag = sem.decode(0x3727C5AC)
    assert apfloat_to_string(neg, mag, sem.precision) == "9.99999974E-6"


@pytest.mark.parametrize(
    "name,np_type,int_type", [("f32", np.float32, "<I"), ("f16", np.float16, "<H")]
)
def test_rounding_matches_numpy(name, np_type, int_type):
    sem = SEMANTICS[name]
    rng = np.random.default_rng(7)
    xs = rng.standard_normal(3000) * 10.0 ** rng.integers(-9, 9, 3000)
    if name == "f16":
        xs = xs[np.abs(xs) < 65000]
    for x in xs:
        want = int(np.array(x, dtype=np_type).view(np.uint32 if name == "f32" else np.uint16))
        assert sem.from_float(float(x)) == want, x


def test_f64_roundtrip_through_struct():
    sem = SEMANTICS["f64"]
    for x in (1.0, -2.5, 1e-310, 1.7976931348623157e308, 5e-324):
        bits = struct.unpack("<Q", struct.pack("<d", x))[0]
        assert sem.from_float(x) == bits
        assert sem.to_float(bits) == x


def test_small_formats_tables():
    f4 = SEMANTICS["f4E2M1FN"]
    assert [f4.to_float(b) for b in range(8)] == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert f4.from_float(100.0) == 0x7  # finite-only formats saturate
    e4m3 = SEMANTICS["f8E4M3FN"]
    assert e4m3.to_float(0x7E) == 448.0 and math.isnan(e4m3.to_float(0x7F))
    assert e4m3.from_float(460.0) == 0x7E and e4m3.from_float(1000.0) == 0x7F
    e8m0 = SEMANTICS["f8E8M0FNU"]
    assert e8m0.from_float(1.0) == 127 and e8m0.to_float(129) == 4.0
    assert math.isnan(e8m0.to_float(0xFF))
    e5m2 = SEMANTICS["f8E5M2"]
    assert e5m2.from_float(1e6) == 0x7C  # IEEE-like: overflow to +inf
    tf32 = SEMANTICS["tf32"]
    assert tf32.bits == 19 and format_float(1.0, "tf32") == "1.000000e+00"


# ---------------------------------------------------------------------------- differential check


DISASM = (
    Path(sys.executable).parent.parent / "lib/python3.11/site-packages/nvidia/cu13/bin/tileirdisasm"
)
from paths import CORPUS_OUT as CORPUS  # ../shared or $TILEGEN_SHARED


@pytest.mark.skipif(
    not DISASM.exists() or not CORPUS.is_dir(), reason="needs tileirdisasm + corpus"
)
@pytest.mark.parametrize(
    "kernel,type_,value,fmt",
    [("control_if", F32, 1.0, "<I"), ("math_f64", F64, 3.0, "<Q")],
)
def test_printing_and_names_match_tileirdisasm(kernel, type_, value, fmt, tmp_path):
    """Patch one constant of a real bytecode file and compare with NVIDIA's printer."""
    data = (CORPUS / f"{kernel}.tileirbc").read_bytes()
    ffmt = "<f" if fmt == "<I" else "<d"
    offset = data.find(struct.pack(ffmt, value))
    assert offset > 0
    width = struct.calcsize(fmt)
    rng = random.Random(11)
    patterns = [rng.getrandbits(8 * width) for _ in range(25)]
    patterns += [
        struct.unpack(fmt, struct.pack(ffmt, float(rng.randint(0, 10**8))))[0] for _ in range(10)
    ]
    patterns += [
        struct.unpack(fmt, struct.pack(ffmt, math.inf))[0],
        struct.unpack(fmt, struct.pack(ffmt, math.nan))[0],
    ]
    regex = re.compile(rf"%(\S+?)(?:_\d+)? = constant <{type_.name}: (\S+)> : tile<{type_.name}>")
    for bits in patterns:
        patched = tmp_path / "p.tileirbc"
        patched.write_bytes(data[:offset] + struct.pack(fmt, bits) + data[offset + width :])
        out = subprocess.run([str(DISASM), str(patched)], capture_output=True, text=True).stdout
        found = [m for m in map(regex.search, out.splitlines()) if m]
        ours = {
            (
                format_float(None, type_, bits),
                constant_name(dense_from_bits(TileType((), type_), [bits])),
            )
        }
        theirs = {(m.group(2), m.group(1)) for m in found}
        assert ours <= theirs, (hex(bits), theirs, ours)
