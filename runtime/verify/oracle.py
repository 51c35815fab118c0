"""Ask NVIDIA's verifier: make one op of a real cuTile kernel invalid, write it as bytecode and
read back ``tileiras``'s diagnostic. This is how unquoted diagnostic texts were confirmed.

    from tilegen.runtime.verify.oracle import find_op, scalar_constant, tileiras_diagnostics
    module, op = find_op("cuda_tile.divi")
    op.attributes["rounding"] = EnumAttr("RoundingMode", 4)
    tileiras_diagnostics(module)
    # ["error: 'cuda_tile.divi' op invalid rounding mode specified, expect one of [zero, ...]"]

Needs the shared corpus and the ``tileiras`` of the venv (nvidia/cu13/bin); tileiras is 13.5,
so texts that changed after 13.3 (cuda-tile's tests) must be checked against the tests.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional

from tilegen.runtime.attributes import DenseElementsAttr
from tilegen.runtime.ir import Operation, Value
from tilegen.runtime.types import IntegerType, TileType

CORPUS = Path("/work/shared/corpus/cutile/out")
TILEIRAS = Path(sys.prefix) / "lib/python3.11/site-packages/nvidia/cu13/bin/tileiras"
#: kernels NVIDIA rejects as they are (see the corpus README)
_SKIP = ("uint_floordiv_bug",)


def find_op(
    name: str, pred: Callable[[Operation], bool] = lambda op: True
) -> tuple[Operation, Operation]:
    """The first corpus module holding an op ``name`` satisfying ``pred``, and that op."""
    from tilegen.runtime.bytecode.reader import read_bytecode

    for path in sorted(CORPUS.glob("*.tileirbc")):
        if ".v13" in path.name or path.name.startswith(_SKIP):
            continue
        module = read_bytecode(path.read_bytes(), path.name)
        for op in module.walk():
            if op.name == name and pred(op):
                return module, op
    raise LookupError(f"no {name} in the corpus")


def scalar_constant(before: Operation, t: TileType, value=0) -> Value:
    """Insert ``cuda_tile.constant`` of type ``t`` (a splat of ``value``) right before an op."""
    if not isinstance(t.element, IntegerType):
        value = float(value)
    c = Operation("cuda_tile.constant", [], [t], {"value": DenseElementsAttr(t, (value,))})
    block = before.parent
    block.insert(block.ops.index(before), c)
    return c.results[0]


def tileiras_diagnostics(module: Operation, version: Optional[str] = None) -> list[str]:
    """tileiras's diagnostic lines for ``module`` (empty when it compiles cleanly)."""
    from tilegen.runtime.bytecode.writer import write_bytecode

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.tileirbc"
        src.write_bytes(write_bytecode(module, version))
        r = subprocess.run(
            [str(TILEIRAS), "--gpu-name=sm_100", str(src), "-o", str(Path(tmp) / "probe.cubin")],
            capture_output=True,
            text=True,
            timeout=300,
        )
    lines = (r.stdout + r.stderr).splitlines()
    return [
        ln
        for ln in lines
        if not ln.startswith(("error: verification failed", "error: input does not correspond"))
    ]
