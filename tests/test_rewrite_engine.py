"""Unit tests of the rewrite engine: driver, rewriter, declared patterns, folders."""

from __future__ import annotations

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.rewrite import (
    GreedyConfig,
    Pattern,
    PatternSet,
    apply_patterns_greedily,
)
from tilegen.runtime.rewrite.declared import declared_pattern, load_patterns


def _module(body: str, args: str = "", results: str = "tile<i32>"):
    text = (
        "cuda_tile.module @m {\n" f"  testing$func @f({args}) -> {results} {{\n{body}\n  }}\n}}\n"
    )
    return parse_module(text, "t.mlir")


def _ops(module) -> list[str]:
    return [op.name.split(".", 1)[1] for op in module.walk() if op.name.startswith("cuda_tile.")]


def test_dead_pure_ops_are_erased_and_constants_uniqued():
    m = _module("""    %a = constant <i32: 1> : tile<i32>
    %b = constant <i32: 1> : tile<i32>
    %unused = addi %a, %a : tile<i32>
    %r = addi %a, %b : tile<i32>
    return %r : tile<i32>""")
    res = apply_patterns_greedily(m, PatternSet())
    assert res.converged and res.changed
    assert _ops(m) == ["module", "testing$func", "constant", "addi", "return"]
    add = [op for op in m.walk() if op.name == "cuda_tile.addi"][0]
    assert add.operands[0] is add.operands[1]


def test_constants_are_hoisted_to_the_function_entry():
    m = _module("""    %c = constant <i1: true> : tile<i1>
    %r = if %c -> (tile<i32>) {
      %x = constant <i32: 7> : tile<i32>
      yield %x : tile<i32>
    } else {
      %y = constant <i32: 8> : tile<i32>
      yield %y : tile<i32>
    }
    return %r : tile<i32>""")
    apply_patterns_greedily(m, PatternSet())
    fn = [op for op in m.walk() if op.name == "cuda_tile.testing$func"][0]
    names = [op.name for op in fn.regions[0].blocks[0].ops]
    assert names[:3] == ["cuda_tile.constant"] * 3


def test_custom_pattern_runs_to_fixpoint_and_respects_iteration_cap():
    m = _module("""    %a = constant <i32: 1> : tile<i32>
    %r = addi %a, %a : tile<i32>
    return %r : tile<i32>""")
    calls = []

    def swap_forever(op, rw):
        calls.append(op)
        rw.set_insertion_point(op)
        rw.replace_op_with_new(op, "cuda_tile.addi", list(reversed(op.operands)))
        return True

    ps = PatternSet()
    ps.add(Pattern("swap", "cuda_tile.addi", swap_forever))
    res = apply_patterns_greedily(
        m, ps, GreedyConfig(max_iterations=3, max_rewrites_per_iteration=5)
    )
    assert not res.converged and res.iterations == 3
    assert len(calls) == 15


def test_declared_row_builds_and_replaces():
    row = {
        "name": "Swap",
        "root": "addf",
        "where": [
            {"operand": "rhs", "defined_by": "mulf"},
            {"operand": "lhs", "not_defined_by": "mulf"},
        ],
        "build": {"op": "addf", "operands": ["rhs", "lhs"], "attributes": "copy"},
    }
    m = _module(
        """    %a = constant <f32: 1.0> : tile<f32>
    %b = constant <f32: 2.0> : tile<f32>
    %m = mulf %a, %b : tile<f32>
    %r = addf %b, %m rounding<zero> : tile<f32>
    return %r : tile<f32>""",
        results="tile<f32>",
    )
    ps = PatternSet()
    ps.add(declared_pattern(row, "cuda_tile"))
    apply_patterns_greedily(m, ps)
    add = [op for op in m.walk() if op.name == "cuda_tile.addf"][0]
    assert add.operands[0].op.name == "cuda_tile.mulf"
    assert "rounding<zero>" in print_module(m)


def test_select_folders():
    m = _module(
        """    %a = constant <i32: 1> : tile<i32>
    %b = constant <i32: 2> : tile<i32>
    %c = cmpi not_equal %arg0, %a, signed : tile<i32> -> tile<i1>
    %s = select %c, %arg0, %a : tile<i1>, tile<i32>
    %t = select %c, %b, %b : tile<i1>, tile<i32>
    %r = addi %s, %t : tile<i32>
    return %r : tile<i32>""",
        args="%arg0: tile<i32>",
    )
    apply_patterns_greedily(m, load_patterns("canonicalize"))
    text = print_module(m)
    assert "select" not in text and "cmpi" not in text
    assert "addi %arg0, %cst_2_i32" in text


def test_fuse_fma_pattern_set_is_declared():
    ps = load_patterns("fuse_fma")
    assert [p.name for p in ps.for_op("cuda_tile.addf")] == ["AddFMulToLHS", "MulAdd"]
    assert [p.name for p in ps.for_op("cuda_tile.subf")] == ["MulSub"]


def _canonicalize(text: str) -> str:
    m = parse_module(text, "t.mlir")
    apply_patterns_greedily(m, load_patterns("canonicalize"))
    return print_module(m)


def test_combine_ifs_on_negated_condition_swaps_branches():
    text = _canonicalize("""cuda_tile.module @m {
  testing$func @f(%a: tile<i32>, %c: tile<i1>) -> tile<i32> {
    %t = constant <i1: true> : tile<i1>
    %n = xori %c, %t : tile<i1>
    %x = if %c -> (tile<i32>) {
      %p = addi %a, %a : tile<i32>
      yield %p : tile<i32>
    } else {
      %q = muli %a, %a : tile<i32>
      yield %q : tile<i32>
    }
    %y = if %n -> (tile<i32>) {
      %p2 = subi %x, %a : tile<i32>
      yield %p2 : tile<i32>
    } else {
      %q2 = divi %x, %a signed : tile<i32>
      yield %q2 : tile<i32>
    }
    %r = addi %x, %y : tile<i32>
    return %r : tile<i32>
  }
}
""")
    assert text.count(" if ") == 1 and "xori" not in text
    then, other = text.split("} else {")
    assert "addi %arg0, %arg0" in then and "divi" in then
    assert "muli" in other and "subi" in other


def test_static_false_if_without_else_is_erased():
    text = _canonicalize("""cuda_tile.module @m {
  testing$func @f() {
    %f = constant <i1: false> : tile<i1>
    if %f {
      %t = print_tko "dead" -> token
    }
    return
  }
}
""")
    assert " if " not in text and "print_tko" not in text and "constant" not in text


def test_declared_rows_are_checked_against_the_registry():
    import pytest

    from tilegen.runtime.rewrite.declared import PatternSpecError

    base = {"name": "R", "root": "addf", "build": {"op": "addf", "operands": ["lhs", "rhs"]}}
    with pytest.raises(PatternSpecError, match="unknown root op"):
        declared_pattern({**base, "root": "nope"}, "cuda_tile")
    with pytest.raises(PatternSpecError, match="unknown op 'nope'"):
        declared_pattern({**base, "build": {"op": "nope", "operands": []}}, "cuda_tile")
    with pytest.raises(PatternSpecError, match="not an operand"):
        declared_pattern({**base, "where": [{"operand": "acc", "one_use": True}]}, "cuda_tile")


def test_pattern_groups_run_in_declared_order():
    from tilegen.runtime.rewrite import apply_pattern_groups
    from tilegen.runtime.rewrite.declared import load_pattern_groups

    groups = load_pattern_groups("fuse_fma")
    assert [name for name, _ in groups] == ["addf", "subf"]
    m = _module(
        """    %a = constant <f32: 1.0> : tile<f32>
    %m = mulf %arg0, %a : tile<f32>
    %s = addf %a, %m : tile<f32>
    return %s : tile<f32>""",
        args="%arg0: tile<f32>",
        results="tile<f32>",
    )
    results = apply_pattern_groups(m, groups)
    assert [r.changed for _, r in results] == [True, False]
    assert "fma %arg0" in print_module(m)


def test_patterns_schema_rejects_malformed_rows(tmp_path):
    import shutil

    import pytest

    from tilegen.generator.spec_loader import SpecError, load_spec

    repo = __import__("pathlib").Path(__file__).resolve().parent.parent
    (tmp_path / "spec" / "schema").mkdir(parents=True)
    for name in ("patterns", "rows"):  # rows.schema.json: the row language patterns use
        shutil.copy(repo / f"spec/schema/{name}.schema.json", tmp_path / "spec" / "schema")
    bad = tmp_path / "spec" / "bad.yaml"
    bad.write_text(
        "kind: patterns\nname: bad\ndialect: cuda_tile\n"
        "groups:\n- name: g\n  patterns:\n  - {name: X, root: addf, build: {operands: [lhs]}}\n"
    )
    with pytest.raises(SpecError, match=r"spec/bad.yaml: groups\[0\].patterns\[0\]"):
        load_spec(tmp_path / "spec")


def test_declared_rename_row_keeps_all_operands_results_and_attributes():
    """A one-to-one rename (``*`` operands, root result types, copied attributes)."""
    row = {
        "name": "Rename",
        "root": "addi",
        "build": {"op": "subi", "operands": ["*"], "attributes": "copy"},
    }
    m = _module(
        """    %r = addi %arg0, %arg0 overflow<no_signed_wrap> : tile<i32>
    return %r : tile<i32>""",
        args="%arg0: tile<i32>",
    )
    ps = PatternSet()
    ps.add(declared_pattern(row, "cuda_tile"))
    apply_patterns_greedily(m, ps)
    assert "subi %arg0, %arg0 overflow<no_signed_wrap> : tile<i32>" in print_module(m)


def test_declared_constants_and_enum_cases():
    m = _module(
        """    %z = constant <i32: 0> : tile<i32>
    %o = constant <i32: 1> : tile<i32>
    %s = select %arg0, %z, %o : tile<i1>, tile<i32>
    return %s : tile<i32>""",
        args="%arg0: tile<i1>",
    )
    apply_patterns_greedily(m, load_patterns("canonicalize"))
    text = print_module(m)
    assert "constant <i1: true>" in text and "xori %arg0" in text and "unsigned" in text
    assert "select" not in text


def test_constant_uniquing_keeps_negative_zero_apart():
    m = _module(
        """    %p = constant <f32: 0.0> : tile<f32>
    %n = constant <f32: -0.0> : tile<f32>
    %r = addf %p, %n : tile<f32>
    return %r : tile<f32>""",
        results="tile<f32>",
    )
    apply_patterns_greedily(m, PatternSet())
    from tilegen.runtime.passes.pipeline import parse_pipeline, run_pipeline

    run_pipeline(m, parse_pipeline("cse"))
    text = print_module(m)
    assert "<f32: 0.0" in text and "<f32: -0.0" in text
