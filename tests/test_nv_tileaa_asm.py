"""nv_tileaa parses and prints through the generated OpDefs: every op in custom and generic form,
the nv_tileaa types, and the dialect's registration (``tilegen ops --json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.diagnostics import DiagnosticEngine, DiagnosticError
from tilegen.runtime.opdef import all_ops, lookup_opdef
from tilegen.runtime.types import (
    DYNAMIC,
    F32,
    MemTokenType,
    NvMemRefType,
    NvPointerType,
    NvQueueType,
    TileType,
)
from tilegen.runtime.verify.engine import verify_module

from spec_facts import spec_op_names

ALL_OPS = (Path(__file__).parent / "data" / "nv_tileaa" / "all_ops.mlir").read_text()


def _parse(text: str):
    return parse_module(text, allow_unregistered=True)


def _nv_ops(module) -> list:
    return [op for op in module.walk() if op.name.startswith("nv_tileaa.")]


def test_every_op_appears_in_the_corpus() -> None:
    spec = {op.name for op in all_ops() if op.dialect == "nv_tileaa"}
    used = {op.name for op in _nv_ops(_parse(ALL_OPS))}
    assert spec == spec_op_names("nv_tileaa", include_test_only=True)
    assert spec == used


def test_corpus_verifies() -> None:
    diag = DiagnosticEngine()
    assert verify_module(_parse(ALL_OPS), diag), [d.message for d in diag.diagnostics]


def test_custom_form_round_trips() -> None:
    text = print_module(_parse(ALL_OPS))
    assert print_module(_parse(text)) == text
    assert "nv_tileaa.tiled_load %12[%arg3, %arg3] token %11" in text
    assert '"nv_tileaa.' not in text  # every op printed in its custom form


def test_generic_form_round_trips() -> None:
    custom = print_module(_parse(ALL_OPS))
    generic = print_module(_parse(ALL_OPS), generic=True)
    assert print_module(_parse(generic)) == custom
    assert print_module(_parse(generic), generic=True) == generic
    assert "operandSegmentSizes = array<i32: 1, 2, 0, 0>" in generic  # tiled_load: token uncounted


@pytest.fixture(scope="module")
def reparsed() -> dict:
    """The corpus and its re-parse from the custom and the generic print."""
    module = _parse(ALL_OPS)
    return {
        "original": module,
        "custom": _parse(print_module(module)),
        "generic": _parse(print_module(module, generic=True)),
    }


@pytest.mark.parametrize("form", ["custom", "generic"])
@pytest.mark.parametrize("op_name", sorted(o.name for o in all_ops() if o.dialect == "nv_tileaa"))
def test_each_op_round_trips(reparsed: dict, op_name: str, form: str) -> None:
    """Each op, printed in ``form`` and parsed back, keeps its types and attributes."""
    ops = [op for op in _nv_ops(reparsed["original"]) if op.name == op_name]
    again = [op for op in _nv_ops(reparsed[form]) if op.name == op_name]
    assert ops and len(again) == len(ops)
    for a, b in zip(ops, again):
        assert [v.type for v in a.operands] == [v.type for v in b.operands]
        assert [v.type for v in a.results] == [v.type for v in b.results]
        assert {**a.attributes, **a.properties} == {**b.attributes, **b.properties}
        assert [len(r.blocks) for r in a.regions] == [len(r.blocks) for r in b.regions]
    assert lookup_opdef(op_name).opcode is None  # nv_tileaa has no bytecode


@pytest.mark.parametrize(
    "spelling,expected",
    [
        ("!nv_tileaa.ptr<f32, 1>", NvPointerType(F32, 1)),
        ("!nv_tileaa.memref<?x?xf32, 1>", NvMemRefType((DYNAMIC, DYNAMIC), F32, 1)),
        (
            "!nv_tileaa.memref<4x?xf32, 3, strides=[?,1]>",
            NvMemRefType((4, DYNAMIC), F32, 3, (DYNAMIC, 1)),
        ),
        ("!nv_tileaa.mem_token", MemTokenType()),
        ("!nv_tileaa.queue<f32, index>", None),
        ("!cuda_tile.tile<8x!nv_tileaa.ptr<f16, 1>>", None),
    ],
)
def test_types_parse_and_print(spelling: str, expected) -> None:
    module = _parse(f'%0 = "test.src"() : () -> {spelling}')
    t = module.regions[0].blocks[0].ops[0].results[0].type
    if expected is not None:
        assert t == expected
    assert isinstance(t, (NvPointerType, NvMemRefType, MemTokenType, NvQueueType, TileType))
    assert f"-> {spelling}" in print_module(module)


def test_all_dynamic_strides_print_without_strides() -> None:
    module = _parse('%0 = "test.src"() : () -> !nv_tileaa.memref<?xf32, 1, strides=[?]>')
    assert "!nv_tileaa.memref<?xf32, 1>" in print_module(module)


@pytest.mark.parametrize(
    "spelling,message",
    [
        ("!nv_tileaa.frob", "unknown nv_tileaa type: frob"),
        ("!nv_tileaa.ptr<f32, -1>", "expected a non-negative address space"),
        (
            "!nv_tileaa.memref<?x?xf32, 1, strides=[1]>",
            "expected 2 strides for a rank-2 memref, got 1",
        ),
    ],
)
def test_bad_types_are_located_diagnostics(spelling: str, message: str) -> None:
    with pytest.raises(DiagnosticError) as e:
        _parse(f'%0 = "test.src"() : () -> {spelling}')
    assert e.value.diag.message == message
    assert e.value.diag.loc.line == 1


def test_ops_json_lists_nv_tileaa(capsys) -> None:
    from tilegen.cli import main

    assert main(["ops", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    nv = [r for r in rows if r["dialect"] == "nv_tileaa"]
    assert {f"nv_tileaa.{r['mnemonic']}" for r in nv} == spec_op_names("nv_tileaa")
    assert len(nv) == len(spec_op_names("nv_tileaa"))
    assert all(set(r) == {"dialect", "mnemonic", "opcode", "since"} for r in rows)
    assert {"dialect": "nv_tileaa", "mnemonic": "queue.get", "opcode": None, "since": "13.1"} in nv
