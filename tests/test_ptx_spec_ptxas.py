"""spec/ptx minimum `ptx_isa`/`sm` per row, proved with the real assembler (ptxas).

For every row the base forms (each type; a hand-written row's base probe) are assembled in one
kernel: it must assemble at the row's minimum and be rejected one target below and one ISA version
below, wherever ptxas can express that step (see runtime/ptx/probe.py). The full per-form sweep,
modifier sub-forms included, is bench/ptx_spec_probe.py.
"""

from __future__ import annotations

import pytest

from tilegen.generated.ptx.instructions import INSTRUCTIONS
from tilegen.runtime.ptx.probe import HANDWRITTEN_PROBES, Ptxas, find_ptxas, probes, row_check

PTXAS = find_ptxas()
pytestmark = pytest.mark.skipif(
    PTXAS is None, reason="ptxas not installed (pip install nvidia-cuda-nvcc, or set $PTXAS)"
)
ROWS = list(INSTRUCTIONS.values())


@pytest.fixture(scope="module")
def px() -> Ptxas:
    return Ptxas(PTXAS)


@pytest.fixture(scope="module")
def checks(px: Ptxas) -> dict:
    return {c.name: c for c in px.map(lambda r: row_check(px, r), ROWS)}


def test_every_row_has_a_probe(px: Ptxas) -> None:
    missing = [
        r["name"] for r in ROWS if r.get("handwritten") and r["name"] not in HANDWRITTEN_PROBES
    ]
    assert not missing
    assert not set(HANDWRITTEN_PROBES) - {r["name"] for r in ROWS}


@pytest.mark.parametrize("name", [r["name"] for r in ROWS])
def test_row_minimum_matches_ptxas(checks: dict, name: str) -> None:
    chk = checks[name]
    assert chk.probed, f"{name}: no probe kernel could be built"
    assert chk.ok, f"{name} (stated {chk.stated}): " + "; ".join(chk.problems())


def test_wrong_minimums_are_caught(px: Ptxas) -> None:
    tanh = dict(INSTRUCTIONS["tanh.approx"])
    assert row_check(px, tanh).ok
    too_low_sm = row_check(px, {**tanh, "sm": 70})
    assert not too_low_sm.ok and "rejected at its minimum" in too_low_sm.problems()[0]
    too_high_isa = row_check(px, {**tanh, "ptx_isa": "7.1"})
    assert [p for p in too_high_isa.problems() if "one ISA below" in p]
    too_high_sm = row_check(px, {**INSTRUCTIONS["shfl.sync"], "sm": 70})
    assert [p for p in too_high_sm.problems() if "one target below" in p]


def test_generic_probe_uses_fewest_modifiers(px: Ptxas) -> None:
    texts = [p.body for p in probes(px, INSTRUCTIONS["div.float"])]
    assert texts == ["div.rn.f32 %r0, %r1, %r2;", "div.rn.f64 %rd0, %rd1, %rd2;"]
    wide = [p.body for p in probes(px, INSTRUCTIONS["mad.wide"])]
    assert "mad.wide.s32 %rd0, %r1, %r2, %rd3;" in wide
