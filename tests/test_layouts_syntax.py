"""Text syntax of nv_tileas layouts: attributes, tile encodings and nv_tileas.convert_layout."""

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.diagnostics import DiagnosticEngine, DiagnosticError
from tilegen.runtime.layouts import BlockedLayout, SharedLayout, SliceLayout
from tilegen.runtime.types import TileType
from tilegen.runtime.verify.engine import verify_module

B1 = "#nv_tileas.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [1, 1], order = [1, 0]}>"
B2 = "#nv_tileas.blocked<{sizePerThread = [1, 1], threadsPerWarp = [32, 1], warpsPerCTA = [1, 1], order = [0, 1]}>"
S1 = "#nv_tileas.slice<{dim = 1, parent = " + B1 + "}>"
SH = "#nv_tileas.shared<{vec = 8, perPhase = 1, maxPhase = 8, order = [1, 0]}>"


def _func(body: str, arg: str = f"tile<4x8xf32, {B1}>") -> str:
    return (
        f"nv_tileaa.func @k : ({arg}) -> () {{\n^bb0(%a: {arg}):\n{body}\n"
        "  nv_tileaa.return\n}\n"
    )


def _verify(text: str) -> list[str]:
    m = parse_module(text)
    de = DiagnosticEngine()
    verify_module(m, de)
    return [d.message for d in de.diagnostics if d.severity == "error"]


def test_attributes_parse_to_layouts_and_print_back():
    text = _func(
        f"  %0 = nv_tileas.convert_layout %a : (tile<4x8xf32, {B1}>) -> tile<4x8xf32, {B2}>"
    )
    m = parse_module(text)
    func = m.regions[0].blocks[0].ops[0]
    conv = func.regions[0].blocks[0].ops[0]
    assert conv.operands[0].type == TileType(
        (4, 8), conv.operands[0].type.element, BlockedLayout((1, 4), (4, 8), (1, 1), (1, 0))
    )
    assert conv.results[0].type.encoding == BlockedLayout((1, 1), (32, 1), (1, 1), (0, 1))
    out = print_module(m)
    assert B1 in out and B2 in out
    assert print_module(parse_module(out)) == out
    assert _verify(text) == []


def test_slice_and_shared_attributes_roundtrip():
    text = _func(f'  %0 = "test.use"() {{s = {S1}, sh = {SH}}} : () -> tile<4xf32, {S1}>')
    m = parse_module(text, allow_unregistered=True)
    op = m.regions[0].blocks[0].ops[0].regions[0].blocks[0].ops[0]
    assert op.attributes["s"] == SliceLayout(1, BlockedLayout((1, 4), (4, 8), (1, 1), (1, 0)))
    assert op.attributes["sh"] == SharedLayout(8, 1, 8, (1, 0))
    assert op.results[0].type.encoding == op.attributes["s"]
    out = print_module(m)
    assert S1 in out and SH in out
    assert print_module(parse_module(out, allow_unregistered=True)) == out


def test_encoding_is_part_of_type_identity():
    a = BlockedLayout((1,), (32,), (4,), (0,))
    from tilegen.runtime.types import FloatType

    f32 = FloatType("f32")
    assert TileType((128,), f32) != TileType((128,), f32, a)
    assert TileType((128,), f32, a) == TileType((128,), f32, BlockedLayout((1,), (32,), (4,), (0,)))
    assert hash(TileType((128,), f32, a)) == hash(TileType((128,), f32, a))


@pytest.mark.parametrize(
    "attr, line, col, msg",
    [
        (
            "#nv_tileas.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 4], warpsPerCTA = [1, 1], order = [1, 0]}>",
            1,
            None,
            "must multiply to 32",
        ),
        (
            "#nv_tileas.blocked<{sizePerThread = [1, 4], warpsPerCTA = [1, 1], order = [1, 0]}>",
            1,
            None,
            "missing 'threadsPerWarp'",
        ),
        (
            "#nv_tileas.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [1, 1], order = [1, 0], x = 1}>",
            1,
            None,
            "unknown key 'x'",
        ),
        ("#nv_tileas.slice<{dim = 2, parent = " + B1 + "}>", 1, None, "out of range"),
        ("#nv_tileas.slice<{dim = 0, parent = 3}>", 1, None, "'parent' must be"),
        (
            "#nv_tileas.shared<{vec = 3, perPhase = 1, maxPhase = 8, order = [1, 0]}>",
            1,
            None,
            "power of two",
        ),
        ("#nv_tileas.bogus<{}>", 1, None, "unknown nv_tileas attribute 'bogus'"),
        (
            "#nv_tileas.blocked<{sizePerThread = 1, threadsPerWarp = [32], warpsPerCTA = [1], order = [0]}>",
            1,
            None,
            "array of integers",
        ),
    ],
)
def test_bad_layout_attributes_are_located_errors(attr, line, col, msg):
    text = f'"test.op"() {{l = {attr}}} : () -> ()\n'
    with pytest.raises(DiagnosticError) as e:
        parse_module(text, allow_unregistered=True)
    d = e.value.diag
    assert msg in d.message
    start = text.index("#nv_tileas")  # located inside the attribute
    assert d.loc.line == line and start < d.loc.col <= start + len(attr), d.loc


@pytest.mark.parametrize(
    "body, arg, msg",
    [
        (
            f"  %0 = nv_tileas.convert_layout %a : (tile<4x8xf32, {B1}>) -> tile<4x8xf32>",
            None,
            "result tile type must carry a layout encoding",
        ),
        (
            f"  %0 = nv_tileas.convert_layout %a : (tile<4x8xf32, {B1}>) -> tile<8x4xf32, {B2}>",
            None,
            "must preserve the shape",
        ),
        (
            f"  %0 = nv_tileas.convert_layout %a : (tile<4x8xf32, {B1}>) -> tile<4x8xf16, {B2}>",
            None,
            "element type",
        ),
        (
            f"  %0 = nv_tileas.convert_layout %a : (tile<4x8xf32, {B1}>) -> tile<4x8xf32, {S1}>",
            None,
            "rank 1 does not apply to a rank-2 tile",
        ),
        (
            f"  %0 = nv_tileas.convert_layout %a : (tile<4x8xf32, {B1}>) -> tile<4x8xf32, {SH}>",
            None,
            "distributed",
        ),
    ],
)
def test_convert_layout_verifier(body, arg, msg):
    errs = _verify(_func(body))
    assert any(msg in e for e in errs), errs
