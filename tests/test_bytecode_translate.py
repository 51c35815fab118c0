"""``tilegen-translate`` end to end (in-process ``main``): flags, outputs, diagnostics."""

import pytest

from bytecode_helpers import BYTECODE_TESTS, CORPUS_FILES
from tilegen.runtime.bytecode import read_bytecode, read_version
from tilegen.tools.translate import main

SIMPLE = """cuda_tile.module @kernels {
  entry @basic() {
    %c = constant <i32: [1, 2]> : tile<2xi32>
    %r = negi %c overflow<no_signed_wrap> : tile<2xi32>
    return
  }
}
"""


def test_list_versions(capsys):
    assert main(["--list-versions"]) == 0
    assert capsys.readouterr().out.split() == ["13.1", "13.2", "13.3", "13.4", "250.0", "250.1"]


@pytest.mark.parametrize(
    "arg,message",
    [
        ("12.0", "Invalid argument '12.0': the supported versions are [13.1 - 13.4]"),
        ("13", "Invalid argument '13'"),
        ("13.5", "the supported versions are [13.1 - 13.4]"),
    ],
)
def test_bad_bytecode_version(tmp_path, capsys, arg, message):
    src = tmp_path / "a.mlir"
    src.write_text(SIMPLE)
    assert main(["-mlir-to-cudatilebc", f"--bytecode-version={arg}", str(src)]) == 1
    assert message in capsys.readouterr().err


def test_text_to_bytecode_to_text(tmp_path, capsys):
    src, bc = tmp_path / "a.mlir", tmp_path / "a.tileirbc"
    src.write_text(SIMPLE)
    assert (
        main(
            [
                "-mlir-to-cudatilebc",
                "-no-implicit-module",
                "--bytecode-version=13.2",
                str(src),
                "-o",
                str(bc),
            ]
        )
        == 0
    )
    data = bc.read_bytes()
    assert read_version(data) == "13.2"
    assert [op.name for op in read_bytecode(data).walk()][-2:] == [
        "cuda_tile.negi",
        "cuda_tile.return",
    ]
    assert main(["-cudatilebc-to-mlir", str(bc)]) == 0
    out = capsys.readouterr().out
    assert "cuda_tile.module @kernels" in out and "overflow<no_signed_wrap>" in out


def test_newer_attribute_refused_at_13_1(tmp_path, capsys):
    src = tmp_path / "a.mlir"
    src.write_text(SIMPLE)
    assert (
        main(
            [
                "-mlir-to-cudatilebc",
                "-no-implicit-module",
                "-bytecode-version=13.1",
                str(src),
                "-o",
                str(tmp_path / "o"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "error: attribute 'overflow' requires bytecode version 13.2+, but targeting 13.1" in err
    assert not (tmp_path / "o").exists()


def test_roundtrip_mode(tmp_path, capsys):
    src = tmp_path / "a.mlir"
    src.write_text(SIMPLE)
    assert main(["-test-cudatile-roundtrip", "-no-implicit-module", str(src)]) == 0
    assert "negi %cst_i32 overflow<no_signed_wrap>" in capsys.readouterr().out.replace(
        "%c ", "%cst_i32 "
    )


def test_reader_errors_are_located_lines(capsys):
    path = BYTECODE_TESTS / "invalid" / "invalid_section_id.tileirbc"
    if not path.exists():
        pytest.skip("fixtures not available")
    assert main(["-cudatilebc-to-mlir", str(path)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == f"{path}:0:0: error: error at offset 13: unknown section ID: 127"
    assert "Traceback" not in "\n".join(lines)


@pytest.mark.skipif(not CORPUS_FILES, reason="corpus not available")
def test_stdout_bytecode_output(tmp_path, capsysbinary):
    src = tmp_path / "a.mlir"
    src.write_text(SIMPLE)
    assert main(["-mlir-to-cudatilebc", "-no-implicit-module", str(src)]) == 0
    assert capsysbinary.readouterr().out.startswith(b"\x7fTileIR\x00\x0d\x04")
