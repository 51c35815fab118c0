"""Every shared-corpus kernel lowers to nv_tileaa with no cuda_tile op left and verifies."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilegen.runtime.conversion import convert_module
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.verify import verify_module

from paths import CORPUS_OUT as CORPUS  # ../shared or $TILEGEN_SHARED

FILES = sorted(CORPUS.glob("*.tileirbc")) if CORPUS.is_dir() else []
#: the deliberate negative sample (the verifier rejects it before any lowering)
REJECTED = {"uint_floordiv_bug"}
#: known gaps (none at present; a kernel named here is expected to fail)
KNOWN_GAPS: set[str] = set()


def _params():
    for p in FILES:
        stem = p.name.split(".")[0]
        if stem in REJECTED:
            continue
        marks = [pytest.mark.xfail(strict=True, reason="known gap")] if stem in KNOWN_GAPS else []
        yield pytest.param(p, id=p.name, marks=marks)


@pytest.mark.skipif(not FILES, reason="shared corpus not on this machine")
@pytest.mark.parametrize("path", list(_params()))
def test_corpus_kernel_lowers(path: Path):
    from tilegen.runtime.bytecode.reader import read_bytecode

    module = convert_module(read_bytecode(path.read_bytes(), path.name), "sm_100")
    assert module.name == "builtin.module"
    assert not [op.name for op in module.walk() if op.name.startswith("cuda_tile.")]
    funcs = [op for op in module.walk() if op.name == "nv_tileaa.func"]
    assert funcs and all("nv_tileaa.kernel_spec" in f.attributes for f in funcs)
    diag = DiagnosticEngine()
    assert verify_module(module, diag), [d.format() for d in diag.diagnostics]
