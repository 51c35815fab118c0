"""Instruction selection for elementwise ops: (op name, element type) -> a row of
spec/ptx/instructions.yaml (generated/ptx/instructions.py) plus the full PTX spelling.

TODO: move this table into spec/ptx/selection.yaml (+ schema + generator hook); it is a Python
table for now. Every row name is checked against the generated instruction table at import.
"""

from __future__ import annotations

from tilegen.generated.ptx.instructions import INSTRUCTIONS

#: (op, element) -> (instruction row, PTX opcode with modifiers and type, register class)
SELECTION: dict[tuple[str, str], tuple[str, str, str]] = {
    ("nv_tileaa.addf", "f32"): ("add.float", "add.rn.f32", "f32"),
    ("nv_tileaa.subf", "f32"): ("sub.float", "sub.rn.f32", "f32"),
    ("nv_tileaa.mulf", "f32"): ("mul.float", "mul.rn.f32", "f32"),
    ("arith.addf", "f32"): ("add.float", "add.rn.f32", "f32"),
    ("arith.subf", "f32"): ("sub.float", "sub.rn.f32", "f32"),
    ("arith.mulf", "f32"): ("mul.float", "mul.rn.f32", "f32"),
    ("arith.addi", "i32"): ("add.int", "add.s32", "b32"),
    ("arith.subi", "i32"): ("sub.int", "sub.s32", "b32"),
    ("arith.muli", "i32"): ("mul.lo", "mul.lo.s32", "b32"),
}

#: rounding_mode attribute values accepted for float rows (0 = nearest_even -> .rn)
ROUND_NEAREST_EVEN = 0

for _row, _text, _ in SELECTION.values():
    assert _row in INSTRUCTIONS, f"selection names unknown PTX instruction row {_row!r}"
    assert _text.split(".")[-1] in INSTRUCTIONS[_row]["types"], _text


def select(op_name: str, element: str):
    return SELECTION.get((op_name, element))
