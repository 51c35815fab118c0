"""Adding an elementwise op is a YAML-only change, from text to a simulated cubin.

The test copies spec/ and adds ``copysignf`` there, in YAML only: the cuda_tile op entry (with its
opcode in a new bytecode version row and its semantics), its nv_tileaa twin (the conversion's
default rule renames same-mnemonic ops, so no conversion row is needed) and one
spec/ptx/selection.yaml row. It regenerates into a temporary ``generated/`` and, in a fresh
interpreter whose ``tilegen.generated`` package points there, checks parse, print, generic print,
verify, bytecode write/read, version gating, interpretation, lowering to nv_tileaa (verified and
interpreted), PTX, ptxas and the PTX simulator, with no Python change; only the four YAML files
differ from the repository's spec/.
"""

from __future__ import annotations

import difflib
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

#: nv_tileaa's twin (the lowering target; same semantics, nv_tileaa's elementwise verifier)
NEW_NV_OP = """
- name: copysignf
  opcode: null
  since: '13.1'
  semantics: {kind: elementwise, expr: 'np.copysign(lhs, rhs)'}
  summary: Elementwise magnitude of lhs with the sign of rhs.
  traits: [Pure, Elementwise]
  operands:
  - {name: lhs, type: NvTileAA_FloatLike}
  - {name: rhs, type: NvTileAA_FloatLike}
  results:
  - {name: result, type: NvTileAA_FloatLike}
  format: $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  verify:
  - {custom: nv_tileaa_elementwise}
"""

#: PTX ``copysign.f32 d, a, b`` is ``b`` with the sign of ``a`` (spec/ptx/instructions.yaml)
NEW_SELECTION_ROW = (
    "- {op: nv_tileaa.copysignf, element: [f32, f64], ptx: 'copysign.{ft} {d}, {b}, {a}',\n"
    "   instruction: copysign}\n"
)

#: every file the op touches, and nothing else
TOUCHED = {
    "ops/cuda_tile/math.yaml",
    "ops/nv_tileaa/math.yaml",
    "types/bytecode.yaml",
    "ptx/selection.yaml",
}

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

# --- through the middle and back end: a kernel that loads a and b, stores copysignf(a, b)
import tilegen
from tilegen.runtime.ptxsim import run_ptxsim
from tilegen.runtime.conversion import convert_module
from tilegen.runtime.interp import run_module

vec = open(sys.argv[4]).read()
x = np.array([1.5, -2.0, 3.0, -4.0, 0.0, -0.0, np.inf, 7.0] * 2, np.float32)
y = np.array([-1.0, 1.0, -0.0, 0.0, -3.0, 2.0, -1.0, np.nan] * 2, np.float32)
out["want"] = [repr(float(v)) for v in np.copysign(x, y)]
args = lambda: [("a", x.copy()), ("b", y.copy()), ("o", np.zeros_like(x))]
lowered = convert_module(parse_module(vec, "v.mlir"), "sm_90")
ldiag = DiagnosticEngine()
out["lowered_verifies"] = verify_module(lowered, ldiag)
out["lowered_ops"] = sorted({op.name for op in lowered.walk() if "copysign" in op.name})
res = run_module(parse_module(vec, "v.mlir"), args(), (2, 1, 1), lower_to="nv_tileaa")
out["lowered_interp"] = [repr(float(v)) for v in res["o"]]
out["ptx"] = {}
for sm in ("sm_80", "sm_90"):
    r = tilegen.compile(vec, sm, cache=False)
    out["ptx"][sm] = {
        "copysign": [l.strip() for l in r.ptx.splitlines() if "copysign" in l],
        "elf": r.cubin[:4] == b"\x7fELF",
    }
res = run_ptxsim(parse_module(vec, "v.mlir"), args(), (2, 1, 1), "sm_90")
out["ptxsim"] = [repr(float(v)) for v in res["o"]]
print(json.dumps(out))
"""

#: one 8-wide tile per block: o = copysignf(a, b)
VEC_KERNEL = """\
cuda_tile.module @m {
 entry @k(%pa: tile<ptr<f32>>, %sa: tile<i32>, %ta: tile<i32>, %pb: tile<ptr<f32>>,
          %sb: tile<i32>, %tb: tile<i32>, %po: tile<ptr<f32>>, %so: tile<i32>, %to: tile<i32>) {
  %tok = make_token : token
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %va = make_tensor_view %pa, shape = [%sa], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %wa = make_partition_view %va : partition_view<tile=(8), tensor_view<?xf32, strides=[1]>>
  %vb = make_tensor_view %pb, shape = [%sb], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %wb = make_partition_view %vb : partition_view<tile=(8), tensor_view<?xf32, strides=[1]>>
  %vo = make_tensor_view %po, shape = [%so], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %wo = make_partition_view %vo : partition_view<tile=(8), tensor_view<?xf32, strides=[1]>>
  %a, %t1 = load_view_tko weak %wa[%bx] token = %tok : partition_view<tile=(8), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<8xf32>, token
  %b, %t2 = load_view_tko weak %wb[%bx] token = %tok : partition_view<tile=(8), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<8xf32>, token
  %c = copysignf %a, %b : tile<8xf32>
  %t3 = store_view_tko weak %c, %wo[%bx] token = %tok : tile<8xf32>, partition_view<tile=(8), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
  return
 }
}
"""


def _added_lines(spec: Path) -> dict[str, list[str]]:
    """Relative path -> lines added, for every spec file that differs from the repository's."""
    out = {}
    for path in sorted(spec.rglob("*")):
        if not path.is_file():
            continue
        rel = str(path.relative_to(spec))
        orig = REPO / "spec" / rel
        old = orig.read_text().splitlines() if orig.exists() else []
        new = path.read_text().splitlines()
        if old != new:
            diff = difflib.unified_diff(old, new, lineterm="", n=0)
            out[rel] = [l[1:] for l in diff if l.startswith("+") and not l.startswith("+++")]
    return out


def test_new_elementwise_op_needs_only_yaml(tmp_path):
    spec = tmp_path / "spec"
    shutil.copytree(REPO / "spec", spec)
    with open(spec / "ops" / "cuda_tile" / "math.yaml", "a") as f:
        f.write(NEW_OP)
    with open(spec / "ops" / "nv_tileaa" / "math.yaml", "a") as f:
        f.write(NEW_NV_OP)
    with open(spec / "ptx" / "selection.yaml", "a") as f:
        f.write(NEW_SELECTION_ROW)
    bc = spec / "types" / "bytecode.yaml"
    text = bc.read_text()
    anchor = "- {version: '250.0'"
    assert anchor in text
    bc.write_text(text.replace(anchor, NEW_VERSION_ROW + anchor, 1))
    added = _added_lines(spec)
    assert set(added) == TOUCHED  # YAML only, and only these four files
    print("lines added per file:", {k: len(v) for k, v in added.items()})
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
    (tmp_path / "vec.mlir").write_text(VEC_KERNEL)
    (tmp_path / "check.py").write_text(textwrap.dedent(CHECKER))
    r = subprocess.run(
        [
            sys.executable,
            str(tmp_path / "check.py"),
            str(gen),
            str(tmp_path / "k.mlir"),
            str(tmp_path / "bad.mlir"),
            str(tmp_path / "vec.mlir"),
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
    # lowering: the default rule renames it to the nv_tileaa twin, which verifies and interprets
    assert out["lowered_verifies"]
    assert out["lowered_ops"] == ["nv_tileaa.copysignf"]
    assert out["lowered_interp"] == out["want"]
    # PTX from the selection row, assembled by ptxas, run in the simulator
    for sm, got in out["ptx"].items():
        assert got["copysign"] and all(l.startswith("copysign.f32") for l in got["copysign"]), got
        assert got["elf"], sm
    assert out["ptxsim"] == out["want"]
