"""A bad spec file fails `make generate` with the file and key path, never a traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ADDF_FORMAT = "format: $lhs `,` $rhs custom<IEEERoundingMode>"

CASES = {
    "schema": (
        "spec/ops/cuda_tile/arith_float.yaml",
        "kind: unit, constraint: UnitAttr, optional: true}",
        "kind: unitt, constraint: UnitAttr, optional: true}",
        "spec/ops/cuda_tile/arith_float.yaml: ops[1].attributes[1].kind: 'unitt' is not one of",
    ),
    "format": (
        "spec/ops/cuda_tile/arith_float.yaml",
        ADDF_FORMAT,
        "format: $lhs `,` $rhz custom<IEEERoundingMode>",
        "spec/ops/cuda_tile/arith_float.yaml: ops[addf].format: unknown variable $rhz",
    ),
    "constraint": (
        "spec/ops/cuda_tile/arith_float.yaml",
        "- {name: lhs, type: CudaTile_BaseFloatTileType}",
        "- {name: lhs, type: CudaTile_BaseFloatTileTyp}",
        "ops[addf].operands[0].type: unknown type constraint 'CudaTile_BaseFloatTileTyp'",
    ),
    "bytecode": (
        "spec/ops/cuda_tile/arith_float.yaml",
        "operands: fixed",
        "operands: counted",
        "spec/ops/cuda_tile/arith_float.yaml: ops[absf].bytecode.operands: 'counted', derived 'fixed'",
    ),
    "yaml": (
        "spec/types/enums.yaml",
        "kind: enums",
        "kind: [enums",
        "spec/types/enums.yaml:",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_spec_is_a_located_error(tmp_path, case):
    rel, old, new, expected = CASES[case]
    shutil.copytree(REPO / "spec", tmp_path / "spec")
    path = tmp_path / rel
    text = path.read_text()
    assert old in text, f"fixture anchor {old!r} vanished from {rel}"
    path.write_text(text.replace(old, new, 1))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tilegen.generator",
            "--spec",
            str(tmp_path / "spec"),
            "--out",
            str(tmp_path / "gen"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("error: ") and expected in r.stderr, r.stderr
