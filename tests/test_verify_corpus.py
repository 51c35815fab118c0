"""The verifier accepts every real cuTile kernel in the shared corpus and rejects the one
deliberate negative sample exactly as NVIDIA's tileiras does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.verify import verify_module

from paths import CORPUS_OUT as CORPUS  # ../shared or $TILEGEN_SHARED

FILES = sorted(CORPUS.glob("*.tileirbc")) if CORPUS.is_dir() else []
#: tileiras: "error: 'cuda_tile.divi' op rounding mode 'negative_inf' is not allowed with
#: 'unsigned' flag" (corpus README: a conforming compiler must refuse the kernel).
REJECTED = {"uint_floordiv_bug"}


@pytest.mark.skipif(not FILES, reason="shared corpus not on this machine")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_kernel(path: Path):
    from tilegen.runtime.bytecode.reader import read_bytecode

    module = read_bytecode(path.read_bytes(), path.name)
    diag = DiagnosticEngine()
    ok = verify_module(module, diag)
    errors = [d.format() for d in diag.diagnostics if d.severity == "error"]
    if path.name.split(".")[0] in REJECTED:
        assert not ok
        assert errors == [
            "kernels.py:321:35: error: 'cuda_tile.divi' op rounding mode 'negative_inf' is not "
            "allowed with 'unsigned' flag"
        ]
    else:
        assert ok, errors
