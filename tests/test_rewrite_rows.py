"""One row language for canonicalization and conversion (runtime/rewrite/row_check.py, rows.py):
conversion rows build op trees, canonicalization rows choose ops by attribute, and an attribute
a row neither maps nor drops is an error naming the file and key."""

from __future__ import annotations

import copy

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.conversion.declared import ConversionContext, compile_groups
from tilegen.runtime.conversion.driver import load_spec, wrap_module
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.rewrite import GreedyConfig, PatternSet, apply_pattern_groups
from tilegen.runtime.rewrite import apply_patterns_greedily
from tilegen.runtime.rewrite.declared import PatternSpecError, declared_pattern
from tilegen.runtime.rewrite.row_check import RowError
from tilegen.runtime.verify import verify_module

FILE = "spec/lowerings/cuda_tile_to_nv_tileaa.yaml"


def _spec_with(root: str, row: dict) -> dict:
    """The conversion spec with ``root``'s row replaced by ``row``."""
    spec = copy.deepcopy(load_spec())
    for group in spec["groups"]:
        for i, r in enumerate(group["patterns"]):
            if r["root"] == root:
                group["patterns"][i] = row
                return spec
    raise AssertionError(f"no row for {root}")


def _convert(spec: dict, body: str, args: str):
    text = f"cuda_tile.module @m {{\n entry @k({args}) {{\n{body}\n return\n }}\n}}"
    module = parse_module(text, "t.mlir")
    assert verify_module(module, DiagnosticEngine())
    root = wrap_module(module)
    apply_pattern_groups(
        root, compile_groups(ConversionContext(spec, 90)), GreedyConfig(fold=False)
    )
    return root


def _row(root: str) -> dict:
    return next(r for g in load_spec()["groups"] for r in g["patterns"] if r["root"] == root)


def test_conversion_rows_build_op_trees():
    """A conversion row in the tree language: fma -> addf(mulf(lhs, rhs), acc)."""
    row = {
        "root": "fma",
        "build": {
            "op": "addf",
            "operands": [{"op": "mulf", "operands": ["lhs", "rhs"]}, "acc"],
            "attributes": {"nv_tileaa.flush_to_zero": "flush_to_zero"},
        },
    }
    out = _convert(
        _spec_with("fma", row),
        "%r = fma %a, %b, %c rounding<zero> flush_to_zero : tile<f32>\n"
        'print_tko "%f", %r : tile<f32> -> token',
        "%a: tile<f32>, %b: tile<f32>, %c: tile<f32>",
    )
    (add,) = [op for op in out.walk() if op.name == "nv_tileaa.addf"]
    mul = add.operands[0].owner
    assert mul.name == "nv_tileaa.mulf" and add.operands[1] is not mul.results[0]
    assert "nv_tileaa.flush_to_zero" in add.attributes  # mapped onto the root's replacement
    assert "rounding_mode" in add.attributes  # carried: nv_tileaa.addf declares it
    assert not mul.attributes  # nested builds take only what they map
    assert add.results[0].type.name == "f32"  # result types converted: 0-d tiles are scalars
    assert not [op for op in out.walk() if op.dialect == "cuda_tile"]


def test_an_unmapped_attribute_is_an_error_naming_file_and_key():
    """The trial that lost ``flush_to_zero``: divf renamed without mapping it."""
    row = {"root": "divf", "build": {"op": "divf", "defaults": {"rounding_mode": "nearest_even"}}}
    with pytest.raises(RowError) as e:
        compile_groups(ConversionContext(_spec_with("divf", row), 90))
    msg = str(e.value)
    assert msg.startswith(f"{FILE}: groups[0].patterns[3].build: ")
    assert "'flush_to_zero' of 'cuda_tile.divf' is not carried to 'nv_tileaa.divf'" in msg
    # saying so is enough
    compile_groups(ConversionContext(_spec_with("divf", dict(row, drop=["flush_to_zero"])), 90))


@pytest.mark.parametrize(
    "row,key,message",
    [
        ({"root": "addff", "build": {"op": "addf"}}, "root", "unknown root op 'addff'"),
        ({"root": "negf", "build": {"op": "arith.negff"}}, "build.op", "unknown op 'arith.negff'"),
        (
            {"root": "negf", "build": {"op": "arith.negf", "operands": ["src"]}},
            "build.operands[0]",
            "'src' is not an operand of 'cuda_tile.negf'",
        ),
        (
            {"root": "negf", "build": {"op": "arith.addi"}},
            "build.operands",
            "1 operand group(s) for 'arith.addi'",
        ),
        (
            {"root": "addi", "drop": ["overflw"], "build": {"op": "arith.addi"}},
            "drop[0]",
            "'overflw' is not an attribute of 'cuda_tile.addi'",
        ),
        (
            {
                "root": "shri",
                "build": {"op": {"by": "signedness", "cases": {"signd": "arith.shrsi"}}},
            },
            "build.op.cases.signd",
            "'signd' is not a case of enum Signedness",
        ),
        (
            {"root": "addf", "build": {"op": "addf", "attributes": {"flush": "flush_to_zero"}}},
            "build.attributes.flush",
            "'flush' is not an attribute of 'nv_tileaa.addf'",
        ),
    ],
)
def test_row_mistakes_are_located(row, key, message):
    spec = _spec_with(row["root"] if row["root"] != "addff" else "addf", row)
    where = next(
        f"groups[{gi}].patterns[{ri}]"
        for gi, g in enumerate(spec["groups"])
        for ri, r in enumerate(g["patterns"])
        if r is row
    )
    with pytest.raises(RowError) as e:
        compile_groups(ConversionContext(spec, 90))
    assert str(e.value) == f"{FILE}: {where}.{key}: {message}" or (
        str(e.value).startswith(f"{FILE}: {where}.{key}: {message}")
    ), str(e.value)


def test_canonicalization_rows_choose_ops_by_attribute():
    """The conversion's ``op: {by: ...}`` works in a canonicalization row too."""
    row = {
        "name": "ShriToMaxi",
        "root": "shri",
        "build": {
            "op": {"by": "signedness", "cases": {"signed": "maxi"}},
            "attributes": "copy",
        },
    }
    ps = PatternSet()
    ps.add(declared_pattern(row, "cuda_tile"))
    text = (
        "cuda_tile.module @m {\n entry @k(%a: tile<i32>, %b: tile<i32>) {\n"
        "  %s = shri %a, %b signed : tile<i32>\n  %u = shri %a, %b unsigned : tile<i32>\n"
        '  print_tko "%d %d", %s, %u : tile<i32>, tile<i32> -> token\n  return\n }\n}'
    )
    m = parse_module(text, "t.mlir")
    apply_patterns_greedily(m, ps, GreedyConfig(fold=False))
    printed = print_module(m)
    assert "maxi %arg0, %arg1 signed" in printed  # the signed one was rewritten
    assert "shri %arg0, %arg1 unsigned" in printed  # no case for unsigned: left alone


def test_canonicalization_rows_account_for_attributes_too():
    row = {"name": "AddiToSubi", "root": "addi", "build": {"op": "ori"}}
    with pytest.raises(PatternSpecError, match="'overflow' of 'cuda_tile.addi' is not carried"):
        declared_pattern(row, "cuda_tile")
    declared_pattern(dict(row, drop=["overflow"]), "cuda_tile")


def test_every_shipped_row_still_compiles():
    assert compile_groups(ConversionContext(load_spec(), 90))
    assert _row("load_ptr_tko")["drop"] == ["optimization_hints"]


def test_the_default_rule_never_drops_an_attribute():
    """Without part_b's rows, cuda_tile.global would fall to the same-mnemonic rule, but
    nv_tileaa.global has no ``value``: the rule leaves it (the pass then names it) instead."""
    from tilegen.runtime.conversion.declared import default_renames

    ctx = ConversionContext(load_spec(), 90)
    covered = {
        ctx.full(r["root"], "cuda_tile")
        for g in ctx.spec["groups"]
        if g["name"] != "part_b"
        for r in g["patterns"]
    }
    renames = default_renames(ctx, covered)
    assert "cuda_tile.global" not in renames
    assert renames["cuda_tile.cat"] == "nv_tileaa.cat"
