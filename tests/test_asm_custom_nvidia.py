"""Differential check against NVIDIA's printer: our text for a module must equal what
``tileirdisasm`` prints for the same module written as bytecode (by tilegen's writer)."""

import subprocess
import sys
from pathlib import Path

import pytest

from tilegen.runtime.asm import parse_module, print_module

DATA = Path(__file__).parent / "data" / "asm_custom"
DISASM = (
    Path(sys.executable).parent.parent / "lib/python3.11/site-packages/nvidia/cu13/bin/tileirdisasm"
)


def _body(module) -> str:
    tile_module = next(op for op in module.walk() if op.name == "cuda_tile.module")
    return print_module(tile_module, body_only=True, default_dialect="cuda_tile")


@pytest.mark.skipif(not DISASM.exists(), reason="tileirdisasm not installed")
@pytest.mark.parametrize(
    "name",
    [
        "nvidia_views_loops_constants",
        "nvidia_large_constants",
        "nvidia_reduce_scan",
        "nvidia_assume_names",
    ],
)
def test_printout_matches_tileirdisasm(name, tmp_path):
    from tilegen.runtime.bytecode import write_bytecode

    module = parse_module((DATA / f"{name}.mlir").read_text(), f"{name}.mlir")
    bc = tmp_path / f"{name}.tileirbc"
    bc.write_bytes(write_bytecode(module, version="13.4"))
    nv = subprocess.run([str(DISASM), str(bc)], capture_output=True, text=True, timeout=60)
    assert nv.returncode == 0, nv.stderr
    assert _body(module).strip() == nv.stdout.strip()
    # and NVIDIA's text reads back and prints unchanged
    again = parse_module(nv.stdout, "nvidia.mlir")
    assert (
        print_module(again, body_only=True, default_dialect="cuda_tile").strip()
        == nv.stdout.strip()
    )


from paths import CONFORMANCE  # ../shared or $TILEGEN_SHARED


@pytest.mark.skipif(
    not DISASM.exists() or not CONFORMANCE.is_dir(),
    reason="needs tileirdisasm and the conformance suite",
)
def test_conformance_modules_print_like_tileirdisasm(tmp_path):
    """Every conformance positive our writer can encode prints as NVIDIA prints it (modulo
    tileirdisasm's producer comment and its 13.5 spelling ``fpowf`` of ``pow``)."""
    import re

    from tilegen.runtime.bytecode import write_bytecode

    files = sorted(CONFORMANCE.glob("Bytecode/*.mlir")) + sorted(
        CONFORMANCE.glob("Dialect/CudaTile/*.mlir")
    )
    compared = 0
    for path in files:
        if "invalid" in path.name:
            continue
        for i, chunk in enumerate(re.split(r"^// -----\s*$", path.read_text(), flags=re.M)):
            try:
                module = parse_module(chunk, path.name)
                data = write_bytecode(module, version="13.4")
            except Exception:  # test-only ops, unregistered ops, ... cannot be encoded
                continue
            bc = tmp_path / "m.tileirbc"
            bc.write_bytes(data)
            nv = subprocess.run([str(DISASM), str(bc)], capture_output=True, text=True, timeout=60)
            if nv.returncode != 0:
                continue
            theirs = [
                ln.replace(" = fpowf ", " = pow ")
                for ln in nv.stdout.strip().splitlines()
                if not ln.startswith("// Producer:")
            ]
            ours = [ln.replace(" = fpowf ", " = pow ") for ln in _body(module).strip().splitlines()]
            assert ours == theirs, f"{path.name} chunk {i}"
            compared += 1
    assert compared >= 50
