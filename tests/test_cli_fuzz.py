"""Mutated inputs (truncations, deletions, duplications, stray punctuation) must give located
diagnostics from tilegen-opt's pipeline, never an internal error (a Python exception)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tilegen import conformance
from tilegen.tools import driver, opt

REPO = Path(__file__).resolve().parent.parent
SEEDS = [REPO / "examples" / "vec_add.mlir"]
_root = conformance.tests_root()
if _root is not None:
    SEEDS += [
        _root / "Dialect/CudaTile" / name
        for name in ("ops.mlir", "types.mlir", "debuginfo_attr.mlir", "memory_consistency_ops.mlir")
    ]


def _mutations(text: str, rng: random.Random, count: int) -> list[str]:
    out = []
    for _ in range(count):
        i = rng.randrange(len(text))
        kind = rng.choice(["truncate", "delete", "duplicate", "insert"])
        if kind == "truncate":
            out.append(text[:i])
        elif kind == "delete":
            out.append(text[:i] + text[i + rng.randint(1, 12) :])
        elif kind == "duplicate":
            out.append(text[:i] + text[i : i + 16] + text[i:])
        else:
            out.append(text[:i] + rng.choice('<>{}()[],:=%@#!"^-x0') + text[i:])
    return out


@pytest.mark.parametrize("seed_file", SEEDS, ids=lambda p: p.name)
def test_mutants_give_located_diagnostics(seed_file):
    rng = random.Random(seed_file.name)
    options = opt.OptOptions(filename="m.mlir", allow_unregistered=True)
    for text in _mutations(seed_file.read_text(), rng, 25):
        source = driver.Source("m.mlir", text)
        chunk = driver.Chunk(text, 1, text.count("\n") + 1)
        result = driver.run_chunk(
            source, chunk, lambda t, e: opt.process_chunk(t, e, options), verify=False
        )
        for d in result.diagnostics:
            assert not d.message.startswith("internal error"), (d.message, text)
            if d.severity == "error":
                assert driver.file_line_col(d.loc) is not None, (d.message, text)
        if result.output is None:
            assert any(d.severity == "error" for d in result.diagnostics), text
