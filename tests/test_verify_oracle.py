"""A few differential checks against NVIDIA's tileiras (skipped where it or the corpus is
missing): the first diagnostic tilegen reports for a corrupted corpus kernel is NVIDIA's."""

from __future__ import annotations

import pytest

from tilegen.runtime.attributes import EnumAttr, UnitAttr
from tilegen.runtime.types import F16, TileType
from tilegen.runtime.verify import oracle

pytestmark = pytest.mark.skipif(
    not (oracle.TILEIRAS.exists() and oracle.CORPUS.is_dir()),
    reason="needs tileiras and the shared corpus",
)


def _first(diags):
    return diags[0] if diags else None


def test_divi_rounding_matches_tileiras():
    module, op = oracle.find_op("cuda_tile.divi")
    op.set_attr("rounding", EnumAttr("RoundingMode", 4))  # approx
    ours = _first(oracle.tilegen_diagnostics(module))
    assert ours == _first(oracle.tileiras_diagnostics(module))
    assert ours.endswith(
        "invalid rounding mode specified, expect one of [zero, negative_inf, positive_inf]"
    )


def test_flush_to_zero_on_f16_matches_tileiras():
    module, op = oracle.find_op("cuda_tile.addf")
    t = op.results[0].type
    f16 = TileType(t.shape, F16)
    for i in range(2):
        op.set_operand(i, oracle.scalar_constant(op, f16))
    op.results[0].type = f16
    op.set_attr("flush_to_zero", UnitAttr())
    ours = _first(oracle.tilegen_diagnostics(module))
    assert ours == _first(oracle.tileiras_diagnostics(module))
    assert "flush_to_zero modifier only supported for f32 data type, but got: 'f16'" in ours
