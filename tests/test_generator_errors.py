"""A bad spec file fails `make generate` with the file and key path, never a traceback."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilegen.generator.checks import check_spec
from tilegen.generator.spec_loader import SpecError, load_spec, replace_file

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
    "selection-upstream-list": (  # the former list of undefined upstream ops is gone
        "spec/ptx/selection.yaml",
        "\nrows:\n",
        "\nupstream_ops: [arith.addf]\nrows:\n",
        "spec/ptx/selection.yaml: <root>: Additional properties are not allowed ('upstream_ops'",
    ),
    "yaml": (
        "spec/types/enums.yaml",
        "kind: enums",
        "kind: [enums",
        "spec/types/enums.yaml:",
    ),
}


#: a name the spec mentions that resolves to nothing: (file, anchor, replacement, regex the
#: message must match from its start: file and key, then what is wrong)
NAMES = {
    "selection-op": (
        "spec/ptx/selection.yaml",
        "- {op: nv_tileaa.addf, element: [f32, f64]",
        "- {op: nv_tileaa.addff, element: [f32, f64]",
        r"spec/ptx/selection\.yaml: rows\[\d+\]\.op: unknown op 'nv_tileaa\.addff'",
    ),
    "selection-upstream-op": (  # no escape hatch: an op spec/ops does not define is refused
        "spec/ptx/selection.yaml",
        "- {op: nv_tileaa.addf, element: [f32, f64]",
        "- {op: [nv_tileaa.addf, arith.addf], element: [f32, f64]",
        r"spec/ptx/selection\.yaml: rows\[\d+\]\.op\[1\]: unknown op 'arith\.addf' "
        r"\(not in spec/ops\)",
    ),
    "selection-when": (
        "spec/ptx/selection.yaml",
        'when: {predicate: ["false"]}',
        'when: {predicat: ["false"]}',
        r"spec/ptx/selection\.yaml: rows\[\d+\]\.when\.predicat: not an attribute of "
        r"'arith\.cmpf'",
    ),
    "selection-sequence": (
        "spec/ptx/selection.yaml",
        "sequence: maximumf}",
        "sequence: maximumff}",
        r"spec/ptx/selection\.yaml: rows\[\d+\]\.sequence: no sequence 'maximumff' in "
        r"runtime/codegen/mathlib\.py",
    ),
    "conversion-op": (
        "spec/lowerings/cuda_tile_to_nv_tileaa.yaml",
        "{root: negf, build: {op: arith.negf}}",
        "{root: negf, build: {op: arith.negff}}",
        r"spec/lowerings/cuda_tile_to_nv_tileaa\.yaml: groups\[0\]\.patterns\[\d+\]\.build\.op: "
        r"unknown op 'arith\.negff'",
    ),
    "conversion-unmapped-attribute": (
        "spec/lowerings/cuda_tile_to_nv_tileaa.yaml",
        "{root: rsqrt, build: {op: rsqrt, attributes: {nv_tileaa.flush_to_zero: flush_to_zero}}}",
        "{root: rsqrt, build: {op: rsqrt}}",
        r"spec/lowerings/cuda_tile_to_nv_tileaa\.yaml: groups\[0\]\.patterns\[\d+\]\.build: "
        r"attribute 'flush_to_zero' of 'cuda_tile\.rsqrt' is not carried to 'nv_tileaa\.rsqrt'",
    ),
    "conversion-custom": (
        "spec/lowerings/cuda_tile_to_nv_tileaa.yaml",
        "custom: negi_to_sub}",
        "custom: negi_to_subb}",
        r"spec/lowerings/cuda_tile_to_nv_tileaa\.yaml: groups\[0\]\.patterns\[\d+\]\.custom: "
        r"no pattern 'negi_to_subb' in runtime/conversion/custom_patterns\.py",
    ),
    "canonicalize-operand": (
        "spec/lowerings/canonicalize.yaml",
        "build: {op: xori, operands: [cond, val_if_false]}",
        "build: {op: xori, operands: [cond, val_if_fals]}",
        r"spec/lowerings/canonicalize\.yaml: groups\[\d+\]\.patterns\[\d+\]\.build\."
        r"operands\[1\]: 'val_if_fals' is not an operand of 'cuda_tile\.select'",
    ),
    "canonicalize-custom": (
        "spec/lowerings/canonicalize.yaml",
        "{custom: select_consts, root: select}",
        "{custom: select_const, root: select}",
        r"spec/lowerings/canonicalize\.yaml: groups\[\d+\]\.patterns\[\d+\]\.custom: "
        r"no pattern 'select_const' in runtime/rewrite/custom_patterns\.py",
    ),
    "verify-hook": (
        "spec/ops/cuda_tile/memory.yaml",
        "- {custom: get_tensor_shape}",
        "- {custom: get_tensor_shap}",
        r"spec/ops/cuda_tile/memory\.yaml: ops\[get_tensor_shape\]\.verify\[\d+\]\.custom: "
        r"no verifier hook 'get_tensor_shap'",
    ),
    "format-hook": (
        "spec/ops/cuda_tile/structure.yaml",
        "format: {custom: entry,",
        "format: {custom: entryy,",
        r"spec/ops/cuda_tile/structure\.yaml: ops\[entry\]\.format\.custom: no custom syntax "
        r"'entryy'",
    ),
    "format-directive": (
        "spec/ops/cuda_tile/arith_float.yaml",
        ADDF_FORMAT,
        "format: $lhs `,` $rhs custom<IEEERoundingMod>",
        r"spec/ops/cuda_tile/arith_float\.yaml: ops\[addf\]\.format: unknown directive "
        r"'custom<IEEERoundingMod>'",
    ),
    "folder": (
        "spec/ops/cuda_tile/debug.yaml",
        "fold: assume",
        "fold: asume",
        r"spec/ops/cuda_tile/debug\.yaml: ops\[assume\]\.fold: no folder 'asume'",
    ),
    "interpreter-op": (
        "spec/ops/cuda_tile/math.yaml",
        "semantics: {kind: elementwise, expr: np.ceil(source)}",
        "semantics: {kind: interpreter}",
        r"spec/ops/cuda_tile/math\.yaml: ops\[ceil\]\.semantics\.kind: 'interpreter', but "
        r"runtime/interp registers no handler for 'cuda_tile\.ceil'",
    ),
}


def _generate(tmp_path, rel: str, old: str, new: str) -> subprocess.CompletedProcess:
    shutil.copytree(REPO / "spec", tmp_path / "spec")
    path = tmp_path / rel
    text = path.read_text()
    assert old in text, f"fixture anchor {old!r} vanished from {rel}"
    path.write_text(text.replace(old, new, 1))
    return subprocess.run(
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


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_spec_is_a_located_error(tmp_path, case):
    rel, old, new, expected = CASES[case]
    r = _generate(tmp_path, rel, old, new)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("error: ") and expected in r.stderr, r.stderr


@pytest.fixture(scope="module")
def spec():
    return load_spec(REPO / "spec")


@pytest.mark.parametrize("case", sorted(NAMES))
def test_a_name_that_resolves_to_nothing_fails_generation(spec, case):
    """Each kind of dangling name (generator/checks.py) names its file and key. In process: the
    repository's spec with one file replaced, through the checks ``main`` runs before rendering
    (test_a_dangling_name_fails_the_generator_command runs the command itself)."""
    rel, old, new, expected = NAMES[case]
    text = (REPO / rel).read_text()
    assert old in text, f"fixture anchor {old!r} vanished from {rel}"
    with pytest.raises(SpecError) as e:
        check_spec(replace_file(spec, rel, text.replace(old, new, 1)))
    assert re.match(expected, str(e.value)), str(e.value)


def test_a_dangling_name_fails_the_generator_command(tmp_path):
    rel, old, new, expected = NAMES["selection-op"]
    r = _generate(tmp_path, rel, old, new)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert re.match("error: " + expected, r.stderr), r.stderr


def test_the_repository_spec_passes_every_check(spec):
    check_spec(spec)
