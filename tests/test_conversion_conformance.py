"""Every positive module of NVIDIA's cuda-tile dialect tests lowers to nv_tileaa and verifies
(what the conversion refuses is left out: ``alloca`` lines - their results are unused there -
and chunks with test-only ops)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilegen.runtime.conversion import convert_module
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.verify import verify_module

from paths import CONFORMANCE as ROOT  # ../shared or $TILEGEN_SHARED

FILES = sorted(p for p in ROOT.rglob("*.mlir") if "invalid" not in p.name) if ROOT.is_dir() else []
REFUSED = ("bytecode_test_",)


def _modules(path: Path):
    from tilegen.runtime.asm import parse_module

    text = "\n".join(line for line in path.read_text().splitlines() if " alloca " not in line)
    for chunk in text.split("// -----"):
        if any(r in chunk for r in REFUSED):
            continue
        try:
            module = parse_module(chunk, path.name)
        except Exception:  # noqa: BLE001 - chunks meant for other tools
            continue
        if not any(op.name == "cuda_tile.module" for op in module.walk()):
            continue
        if verify_module(module, DiagnosticEngine()):
            yield module


@pytest.mark.skipif(not FILES, reason="cuda-tile conformance tests not on this machine")
def test_positive_conformance_modules_lower():
    lowered, failures = 0, []
    seen: set[str] = set()
    for path in FILES:
        for module in _modules(path):
            seen |= {op.name for op in module.walk() if op.dialect == "cuda_tile"}
            out = convert_module(module, "sm_100")
            diag = DiagnosticEngine()
            if not verify_module(out, diag):
                failures.append((path.name, [d.format() for d in diag.diagnostics][:1]))
            lowered += 1
    assert not failures
    assert lowered > 100
    assert len(seen) >= 90  # most of the roster goes through
