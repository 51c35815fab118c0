"""13.4 element type fnv8E5M3FNU in the verifier: constraint lists and the mmaf_scaled widening.

Diagnostic texts were read back from NVIDIA's tileiras 13.5 (runtime/verify/oracle.py); its
only complaint about the valid kernels is the sm_100 architecture check, after verification.
"""

from __future__ import annotations

import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.bytecode.reader import read_bytecode
from tilegen.runtime.bytecode.writer import write_bytecode
from tilegen.runtime.verify.oracle import tilegen_diagnostics


def _module(body: str):
    return parse_module(f"cuda_tile.module @k {{\n  entry @f() {{\n{body}\n    return\n  }}\n}}")


def _scaled(data: str, scale: str, k: int, sk: int) -> str:
    return f"""    %a = constant <{data}: 0.0> : tile<64x{k}x{data}>
    %b = constant <{data}: 0.0> : tile<{k}x64x{data}>
    %c = constant <f32: 0.0> : tile<64x64xf32>
    %sa = constant <{scale}: 1.0> : tile<64x{sk}x{scale}>
    %sb = constant <{scale}: 1.0> : tile<{sk}x64x{scale}>
    %r = mmaf_scaled %a, %b, %c, %sa, %sb : tile<64x{k}x{data}>, tile<{k}x64x{data}>, \
tile<64x64xf32>, tile<64x{sk}x{scale}>, tile<{sk}x64x{scale}>"""


@pytest.mark.parametrize("sk", [2, 4])  # block scale factor 32 and 16
def test_fnv8_scales_with_f4_data_verify(sk):
    m = _module(_scaled("f4E2M1FN", "fnv8E5M3FNU", 64, sk))
    assert tilegen_diagnostics(m) == []
    # and through bytecode (what disasm/translate verify): tag 130 survives a 13.4 round trip
    back = read_bytecode(write_bytecode(m, "13.4"), "t")
    assert tilegen_diagnostics(back) == []


def test_fnv8_constant_is_a_number_tile():
    m = _module("    %a = constant <fnv8E5M3FNU: 1.0> : tile<4xfnv8E5M3FNU>")
    assert tilegen_diagnostics(m) == []


@pytest.mark.parametrize(
    "data,sk,message",
    [
        (
            "f8E4M3FN",
            2,
            "unsupported combination of element types. Scale type 'fnv8E5M3FNU' expects lhs and "
            "rhs element types to be 'f4E2M1FN', but got 'f8E4M3FN'",
        ),
        (
            "f4E2M1FN",
            8,
            "shape error: f4E2M1FN element type with fnv8E5M3FNU scales requires block scale "
            "factor of lhs_scale and rhs_scale to be 16 or 32, but got 8",
        ),
    ],
)
def test_fnv8_scale_rules_match_tileiras(data, sk, message):
    m = _module(_scaled(data, "fnv8E5M3FNU", 64, sk))
    assert tilegen_diagnostics(m) == [f"error: 'cuda_tile.mmaf_scaled' op {message}"]


def test_fnv8_still_rejected_where_tileiras_rejects_it():
    m = _module(
        "    %a = constant <fnv8E5M3FNU: 1.0> : tile<4xfnv8E5M3FNU>\n"
        "    %r = addf %a, %a : tile<4xfnv8E5M3FNU>"
    )
    assert tilegen_diagnostics(m) == [
        "error: 'cuda_tile.addf' op operand #0 must be tile of f16 or bf16 or f32 or f64 values, "
        "but got '!cuda_tile.tile<4xfnv8E5M3FNU>'"
    ]
