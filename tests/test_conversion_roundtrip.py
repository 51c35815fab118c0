"""Every cuTile corpus kernel lowered to nv_tileaa round-trips through its text form:
``tilegen compile K --gpu-name=sm_90 --emit=nv_tileaa | tilegen-opt -`` parses, verifies and
prints to a fixpoint, with the upstream arith / scf ops in MLIR's custom syntax (no generic
``"scf.for"(...)`` / ``"arith.constant"() <{...}>`` left), and the re-parsed module of a kernel
with control flow still computes the expected outputs.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import CORPUS  # ../shared or $TILEGEN_SHARED

KERNELS = sorted(
    p for p in (CORPUS / "out").glob("*.tileirbc") if not p.name.startswith("uint_floordiv_bug")
)

pytestmark = pytest.mark.skipif(not KERNELS, reason="cuTile corpus not available")

#: an op of the std dialects printed in the generic form
GENERIC_STD = re.compile(r'"(arith|math|scf)\.[a-z_]+"\(')


def _tool(name: str) -> str:
    exe = Path(sys.executable).parent / name
    return str(exe) if exe.exists() else (shutil.which(name) or name)


def _run(argv: list[str], stdin: str | None = None) -> str:
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _lowered_text(path: Path) -> str:
    return _run([_tool("tilegen"), "compile", str(path), "--gpu-name=sm_90", "--emit=nv_tileaa"])


@pytest.mark.parametrize("path", KERNELS, ids=[p.name for p in KERNELS])
def test_lowered_ir_round_trips_in_custom_form(path: Path) -> None:
    lowered = _lowered_text(path)
    assert not GENERIC_STD.search(lowered), GENERIC_STD.search(lowered).group(0)
    once = _run([_tool("tilegen-opt"), "-"], lowered)
    twice = _run([_tool("tilegen-opt"), "-"], once)
    assert once == twice
    assert not GENERIC_STD.search(once)
    assert "cuda_tile." not in re.sub(r"!cuda_tile\.|#cuda_tile\.", "", once)


#: kernels whose lowering has scf.for (matmul, flash_attention, reduce_cols_loop), scf.if
#: (control_if, for_loops) and scf.while (print_kernel.v13_1: its spin lock)
_CONTROL_FLOW = [
    "for_loops",
    "control_if",
    "flash_attention",
    "matmul_f16",
    "reduce_cols_loop",
    "print_kernel.v13_1",
]


@pytest.mark.parametrize("name", _CONTROL_FLOW)
def test_reparsed_custom_form_runs_like_the_lowered_module(name: str) -> None:
    """scf.for / scf.if / scf.while / arith.constant parsed from their custom syntax keep their
    meaning: the re-parsed module computes what the in-memory lowering does, bit for bit."""
    import numpy as np

    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.interp.api import load_module, load_npz_args, run_module
    from tilegen.runtime.interp.lowered import lower_module

    path = CORPUS / "out" / (name + ".tileirbc")
    if not path.exists():
        pytest.skip(f"{path.name} not in the corpus")
    text = _lowered_text(path)
    assert re.search(r"= scf\.(for|if|while) |^\s*scf\.(for|if|while) ", text, re.M)
    args, grid = load_npz_args(CORPUS / "out" / (name.removesuffix(".v13_1") + ".npz"))
    direct = run_module(
        lower_module(load_module(path), "nv_tileaa", "sm_90"), args, grid, stdout=io.StringIO()
    )
    reparsed = run_module(parse_module(text), args, grid, stdout=io.StringIO())
    for key, value in direct.items():
        np.testing.assert_array_equal(reparsed[key], value, err_msg=key)
