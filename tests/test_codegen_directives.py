"""Kernel launch directives (seed 002): .reqntid, .minnctapersm, .maxnreg from the occupancy
hint (the ``default`` entry and a per-target entry that overrides it), and ptxas honouring them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.codegen.driver import find_ptxas
from tilegen.runtime.ptxsim import compile_to_ptx

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "vec_add.mlir"


def _ptx(hints: str, sm: str = "sm_90") -> str:
    text = EXAMPLE.read_text().replace("optimization_hints=<default = {}>", hints)
    return compile_to_ptx(parse_module(text, "vec_add.mlir"), sm)


def _directives(ptx: str) -> dict:
    # (a cap from the occupancy hint carries a comment: layouts/kernel.OCCUPANCY_CAP_MARK)
    return dict(re.findall(r"^\.(reqntid|minnctapersm|maxnreg) ([\d, ]*\d)(?: //.*)?$", ptx, re.M))


def test_defaults_match_tileiras():
    d = _directives(_ptx("optimization_hints=<default = {}>"))
    assert d == {"reqntid": "128, 1, 1", "minnctapersm": "1"}


@pytest.mark.parametrize(
    "hints,sm,want",
    [
        ("optimization_hints=<default = {occupancy = 4}>", "sm_90", "128"),
        ("optimization_hints=<default = {occupancy = 8}>", "sm_80", "64"),
        ("optimization_hints=<sm_90 = {occupancy = 4}>", "sm_90", "128"),
        ("optimization_hints=<default = {occupancy = 8}, sm_90 = {occupancy = 4}>", "sm_90", "128"),
    ],
)
def test_occupancy_caps_registers(hints, sm, want, tmp_path):
    ptx = _ptx(hints, sm)
    assert _directives(ptx).get("maxnreg") == want
    assert f".maxnreg {want} // occupancy hint" in ptx
    ptxas = find_ptxas()
    if ptxas is None:
        pytest.skip("ptxas not installed")
    f = tmp_path / "k.ptx"
    f.write_text(ptx)
    p = subprocess.run(
        [ptxas, "-v", f"-arch={sm}", str(f), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert int(re.search(r"Used (\d+) registers", p.stderr).group(1)) <= int(want)


def test_occupancy_for_another_target_is_ignored():
    assert "maxnreg" not in _directives(_ptx("optimization_hints=<sm_100 = {occupancy = 8}>"))
