"""``tilegen disasm`` prints what NVIDIA's ``tileirdisasm`` printed for every corpus file."""

import os

import pytest

from bytecode_helpers import CORPUS_FILES, NEGATIVE, nonblank, nvidia_tool, run_tool, stem
from tilegen.commands.disasm import disassemble

CASES = [p for p in CORPUS_FILES if os.path.exists(p[: -len(".tileirbc")] + ".mlir")]


@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
def test_disasm_matches_tileirdisasm(path):
    """Compared after stripping trailing whitespace and blank lines."""
    text, errors = disassemble(open(path, "rb").read(), path)
    assert errors == [] and text is not None
    expected = open(path[: -len(".tileirbc")] + ".mlir").read()
    assert nonblank(text) == nonblank(expected)


@pytest.mark.parametrize(
    "path", [p for p in CORPUS_FILES if stem(p) in NEGATIVE], ids=os.path.basename
)
def test_disasm_rejects_what_nvidia_rejects(path):
    text, errors = disassemble(open(path, "rb").read(), path)
    assert text is None
    assert any(
        "rounding mode 'negative_inf' is not allowed with 'unsigned' flag" in e for e in errors
    )
    assert errors[-1].endswith("error: failed to read provided Tile IR bytecode")


def test_disasm_of_non_bytecode():
    text, errors = disassemble(b"// not bytecode", "x.mlir")
    assert text is None and errors == [
        "x.mlir: error: input does not correspond to Tile IR bytecode"
    ]


TILEIRDISASM = nvidia_tool("tileirdisasm")


@pytest.mark.skipif(TILEIRDISASM is None, reason="tileirdisasm not installed")
def test_disasm_debug_info_matches_tileirdisasm_g():
    """``-g``: locations as aliases after the body, exactly as ``tileirdisasm -g`` prints them."""
    checked = 0
    for path in CASES:
        text, errors = disassemble(open(path, "rb").read(), path, debuginfo=True)
        expected = run_tool(TILEIRDISASM, "-g", path)
        assert nonblank(text) == nonblank(expected.stdout), path
        checked += 1
    assert checked == len(CASES) > 0
