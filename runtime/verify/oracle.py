"""Ask NVIDIA's verifier: make one op of a real cuTile kernel invalid, write it as bytecode and
read back ``tileiras``'s diagnostic. This is how unquoted diagnostic texts were confirmed.

    from tilegen.runtime.verify.oracle import find_op, scalar_constant, tileiras_diagnostics
    module, op = find_op("cuda_tile.divi")
    op.set_attr("rounding", EnumAttr("RoundingMode", 4))
    tileiras_diagnostics(module)
    # ["error: 'cuda_tile.divi' op invalid rounding mode specified, expect one of [zero, ...]"]

``python -m tilegen.runtime.verify.oracle cuda_tile.addf,cuda_tile.exti`` runs a differential sweep
(every tile operand/result retyped; first diagnostic of tilegen vs tileiras).

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
from tilegen.runtime.paths import corpus_out
from tilegen.runtime.types import IntegerType, TileType

CORPUS = corpus_out()  # ../shared or $TILEGEN_SHARED
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


# --------------------------------------------------------------------------- differential sweep


def tilegen_diagnostics(module: Operation) -> list[str]:
    """tilegen's diagnostics for ``module``, formatted as tileiras prints them (no location)."""
    from tilegen.runtime.diagnostics import DiagnosticEngine
    from tilegen.runtime.verify import verify_module

    diag = DiagnosticEngine()
    verify_module(module, diag)
    return [f"{d.severity}: {d.message}" for d in diag.diagnostics]


def _mutations(name: str):
    """(label, mutate(op)) pairs: every tile operand/result retyped to other elements/shapes."""
    from tilegen.runtime.types import FloatType, IntegerType

    elements = [IntegerType(w) for w in (1, 4, 8, 16, 32, 64)] + [
        FloatType(n) for n in ("f16", "bf16", "f32", "f64", "tf32", "f8E4M3FN", "f8E5M2")
    ]
    _, probe = find_op(name)
    slots = [("operand", i) for i in range(len(probe.operands))]
    slots += [("result", i) for i in range(len(probe.results))]
    for kind, i in slots:
        for make_type, tag in [
            ((lambda t, e=e: TileType(t.shape, e)), e.name) for e in elements
        ] + [
            (
                lambda t: TileType((t.shape[0] * 2,) + t.shape[1:] if t.shape else (2,), t.element),
                "grow",
            ),
            (lambda t: TileType((), t.element), "rank0"),
        ]:

            def mutate(op, kind=kind, i=i, make_type=make_type):
                old = op.operands[i].type if kind == "operand" else op.results[i].type
                if not isinstance(old, TileType) or make_type(old) == old:
                    return False
                if kind == "operand":
                    op.set_operand(i, scalar_constant(op, make_type(old)))
                else:
                    op.results[i].type = make_type(old)
                return True

            yield f"{name} {kind} #{i} -> {tag}", mutate


def _as_13_3(text: Optional[str]) -> Optional[str]:
    """Undo what tileiras 13.5 changed since 13.3: the fnv8E5M3FNU element, pow's name."""
    if text is None:
        return None
    return text.replace(" or fnv8E5M3FNU", "").replace("'cuda_tile.fpowf'", "'cuda_tile.pow'")


def sweep(names: list[str], out=sys.stdout) -> tuple[int, int]:
    """Compare tilegen's first diagnostic with tileiras's for every mutation; (agree, differ)."""
    agree = differ = 0
    for name in names:
        for label, mutate in _mutations(name):
            module, op = find_op(name)
            try:
                if not mutate(op):
                    continue
                ours, theirs = tilegen_diagnostics(module), tileiras_diagnostics(module)
            except Exception as e:  # e.g. constants the bytecode writer cannot encode
                print(f"SKIP  {label}: {type(e).__name__}", file=out)
                continue
            a, b = (ours or [None])[0], _as_13_3((theirs or [None])[0])
            if a == b:
                agree += 1
            else:
                differ += 1
                print(f"DIFF  {label}\n  tilegen:  {a}\n  tileiras: {b}", file=out)
    print(f"{agree} agree, {differ} differ", file=out)
    return agree, differ


if __name__ == "__main__":
    sweep(sys.argv[1].split(",") if len(sys.argv) > 1 else ["cuda_tile.addf"])
