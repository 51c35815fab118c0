"""Custom syntax against NVIDIA's conformance positives and the cuTile corpus printouts.

* every chunk of the parse/print conformance files prints to a fixpoint and the printed text
  satisfies the file's FileCheck lines (also through the generic form where the RUN line does);
* every line of a custom-syntax op (and constant/global/assume) in tileirdisasm's corpus output
  is reproduced byte for byte, and every corpus file prints to a fixpoint;
* the parser-level diagnostics of dense_attr_invalid.mlir are all produced (verify-diagnostics).
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilegen.runtime.asm import parse_module, print_module

from paths import SHARED_ROOT as SHARED  # ../shared or $TILEGEN_SHARED

DIALECT = SHARED / "conformance/cuda-tile/test/Dialect/CudaTile"
CORPUS = SHARED / "corpus/cutile/out"
BIN = Path(sys.executable).parent
FILECHECK = BIN / "filecheck"

POSITIVES = [
    "ops",
    "memory_consistency_ops",
    "syntax_omit_dialect_prefix",
    "types",
    "dense_attr",
    "opt_hints",
    "entry_opt_hints_default_silent",
]

needs_shared = pytest.mark.skipif(not DIALECT.is_dir(), reason="shared conformance tests absent")


def _chunks(text: str) -> list[str]:
    return re.split(r"^// -----\s*$", text, flags=re.M)


def _print_chunks(path: Path, generic_first: bool) -> str:
    outs = []
    for i, chunk in enumerate(_chunks(path.read_text())):
        module = parse_module(chunk, f"{path.name}#{i}")
        if generic_first:
            module = parse_module(print_module(module, generic=True), f"{path.name}#{i}.generic")
        out = print_module(module)
        again = print_module(parse_module(out, f"{path.name}#{i}.printed"))
        assert again == out, f"chunk {i} of {path.name} does not print to a fixpoint"
        outs.append(out)
    return "// -----\n".join(outs)


@needs_shared
@pytest.mark.parametrize("name", POSITIVES)
@pytest.mark.parametrize("generic", [False, True])
def test_positive_files_fixpoint_and_filecheck(name, generic, tmp_path):
    path = DIALECT / f"{name}.mlir"
    if generic and "-mlir-print-op-generic" not in path.read_text():
        pytest.skip("no generic RUN line")
    printed = _print_chunks(path, generic)
    if not FILECHECK.exists() and shutil.which("filecheck") is None:
        pytest.skip("filecheck not installed")
    exe = str(FILECHECK) if FILECHECK.exists() else "filecheck"
    res = subprocess.run([exe, str(path)], input=printed, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


_MINE = re.compile(
    r"^\s*(%[^=]+= )?(entry|for|loop|load_view_tko|store_view_tko|make_partition_view|"
    r"make_strided_view|make_gather_scatter_view|make_tensor_view|get_index_space_shape|"
    r"get_tensor_shape|atomic_red_view_tko|constant|global|assume)\b"
)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus absent")
def test_corpus_custom_lines_match_tileirdisasm():
    files = sorted(CORPUS.glob("*.mlir"))
    assert files
    checked = 0
    for path in files:
        text = path.read_text()
        out = print_module(
            parse_module(text, path.name), body_only=True, default_dialect="cuda_tile"
        )
        again = print_module(
            parse_module(out, path.name + ".printed"), body_only=True, default_dialect="cuda_tile"
        )
        assert again == out, f"{path.name} does not print to a fixpoint"
        printed = set(out.splitlines())
        for line in text.splitlines():
            if _MINE.match(line):
                checked += 1
                assert line in printed, f"{path.name}: {line.strip()}"
    assert checked > 1000


@needs_shared
def test_dense_attr_invalid_diagnostics(tmp_path):
    opt = BIN / "tilegen-opt"
    if not opt.exists():
        pytest.skip("tilegen-opt not installed")
    res = subprocess.run(
        [
            str(opt),
            str(DIALECT / "dense_attr_invalid.mlir"),
            "-split-input-file",
            "-verify-diagnostics",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-3000:]
