"""Adding an elementwise op is a YAML-only change.

The test copies spec/, appends one op entry (``copysignf``, a new opcode in a new bytecode version
row), regenerates into a temporary ``generated/`` and, in a fresh interpreter whose
``tilegen.generated`` package points there, checks that parse, print, generic print, verify,
bytecode write/read, version gating and interpretation all follow with no Python change.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

NEW_OP = """
- name: copysignf
  opcode: 0x7E
  since: '13.6'
  summary: Elementwise magnitude of lhs with the sign of rhs.
  semantics: {kind: elementwise, expr: 'np.copysign(lhs, rhs)'}
  traits: [Pure]
  operands:
  - {name: lhs, type: CudaTile_BaseFloatTileType}
  - {name: rhs, type: CudaTile_BaseFloatTileType}
  results:
  - {name: result, type: CudaTile_BaseFloatTileType}
  format: $lhs `,` $rhs attr-dict `:` custom<CudaTileType>(type($result))
  verify:
  - {same_type: [lhs, rhs, result]}
  bytecode: {result_count: false, operands: fixed}
"""

NEW_VERSION_ROW = "- {version: '13.6', opcode_ceiling: 0x7E}\n"

KERNEL = """\
cuda_tile.module @m {
  entry @k() {
    %a = constant <f32: [1.0, -2.0, 3.0, -4.0]> : tile<4xf32>
    %b = constant <f32: [-1.0, 1.0, -0.0, 0.0]> : tile<4xf32>
    %c = copysignf %a, %b : tile<4xf32>
  }
}
"""

BAD_KERNEL = """\
cuda_tile.module @m {
  entry @k() {
    %a = constant <i32: [1, 2]> : tile<2xi32>
    %c = copysignf %a, %a : tile<2xi32>
  }
}
"""

CHECKER = r"""
import json, sys
import numpy as np
import tilegen.generated as g
g.__path__[:] = [sys.argv[1]]
from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.bytecode import BytecodeError, read_bytecode, write_bytecode
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.interp.elementwise import evaluate_op
from tilegen.runtime.opdef import lookup_opdef
from tilegen.runtime.verify import verify_module

kernel, bad = open(sys.argv[2]).read(), open(sys.argv[3]).read()
out = {"opdef": lookup_opdef("cuda_tile.copysignf") is not None}
m = parse_module(kernel, "k.mlir")
diag = DiagnosticEngine()
out["verifies"] = verify_module(m, diag)
out["printed"] = print_module(m)
out["reparsed_same"] = print_module(parse_module(out["printed"], "p.mlir")) == out["printed"]
generic = print_module(m, generic=True)
out["generic_has_op"] = '"cuda_tile.copysignf"' in generic
out["generic_reparsed_same"] = print_module(parse_module(generic, "g.mlir")) == out["printed"]
data = write_bytecode(m, "13.6")
back = read_bytecode(data, "k.tileirbc")
out["bytecode_roundtrip"] = print_module(back, body_only=False) .count("copysignf") == 1
try:
    write_bytecode(m, "13.4")
    out["old_version_error"] = None
except BytecodeError as e:
    out["old_version_error"] = str(e)
ops = [op for op in m.walk() if op.name == "cuda_tile.copysignf"]
a = np.array([1.0, -2.0, 3.0, -4.0], np.float32)
b = np.array([-1.0, 1.0, -0.0, 0.0], np.float32)
res = evaluate_op(ops[0], [a, b])
out["interp"] = [float(x) for x in np.asarray(res[0]).ravel()]
bad_m = parse_module(bad, "bad.mlir")
bdiag = DiagnosticEngine()
out["bad_verifies"] = verify_module(bad_m, bdiag)
out["bad_messages"] = [d.format() for d in bdiag.diagnostics]
print(json.dumps(out))
"""


def test_new_elementwise_op_needs_only_yaml(tmp_path):
    spec = tmp_path / "spec"
    shutil.copytree(REPO / "spec", spec)
    with open(spec / "ops" / "cuda_tile" / "math.yaml", "a") as f:
        f.write(NEW_OP)
    bc = spec / "types" / "bytecode.yaml"
    text = bc.read_text()
    anchor = "- {version: '250.0'"
    assert anchor in text
    bc.write_text(text.replace(anchor, NEW_VERSION_ROW + anchor, 1))
    gen = tmp_path / "generated"
    r = subprocess.run(
        [sys.executable, "-m", "tilegen.generator", "--spec", str(spec), "--out", str(gen)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    # the regenerated tree differs from the committed one only by the new op
    assert "copysignf" in (gen / "cuda_tile" / "ops.py").read_text()
    assert "copysignf" not in (REPO / "generated" / "cuda_tile" / "ops.py").read_text()
    assert "copysignf" in (gen / "docs" / "cuda_tile.md").read_text()

    (tmp_path / "k.mlir").write_text(KERNEL)
    (tmp_path / "bad.mlir").write_text(BAD_KERNEL)
    (tmp_path / "check.py").write_text(textwrap.dedent(CHECKER))
    r = subprocess.run(
        [
            sys.executable,
            str(tmp_path / "check.py"),
            str(gen),
            str(tmp_path / "k.mlir"),
            str(tmp_path / "bad.mlir"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["opdef"]
    assert out["verifies"]
    assert "%0 = copysignf %cst_f32, %cst_f32_0 : tile<4xf32>" in out["printed"]
    assert out["reparsed_same"]
    assert out["generic_has_op"] and out["generic_reparsed_same"]
    assert out["bytecode_roundtrip"]
    assert out["old_version_error"] and "13.4" in out["old_version_error"]
    assert out["interp"] == [-1.0, 2.0, -3.0, 4.0]
    assert not out["bad_verifies"]
    assert any(
        "'cuda_tile.copysignf' op operand #0 must be tile of f16 or bf16 or f32 or f64 values" in m
        for m in out["bad_messages"]
    ), out["bad_messages"]
