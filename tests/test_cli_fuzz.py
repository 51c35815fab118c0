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


# --------------------------------------------------------------------------- bench/fuzz_text.py

import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location("fuzz_text", REPO / "bench" / "fuzz_text.py")
fuzz_text = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz_text)


def test_text_campaign_has_no_crash_or_hang():
    """A short, seeded run of the text campaign (the long one is ``bench/fuzz_text.py``):
    every mutant is accepted or refused with located diagnostics, also through the bytecode
    round trip and the canonicalizer."""
    stats = fuzz_text.run_campaign(seconds=60.0, seed=11, max_inputs=400)
    assert stats["inputs"] >= 100
    assert stats["crash"] == 0 and stats["hang"] == 0, stats["failures"][:3]
    assert stats["ok"] > 0 and stats["rejected"] > 0


#: inputs the text campaign found (fixed here): (text, line, column, message)
FOUND = [
    (  # an i64 attribute of 2^64 was accepted, then wrapped to 0 by the bytecode round trip
        "cuda_tile.module @kernels {\n  entry @k() {\n"
        "    %0 = alloca num_elem = 64, alignment = 18446744073709551616 : tile<ptr<f32>>\n"
        "    return\n  }\n}\n",
        3,
        44,
        "integer constant out of range for attribute",
    ),
    (  # a 2^64 scopeLine reached the bytecode writer (ValueError: an internal error)
        '#f = #cuda_tile.di_file<"a.py" in "/">\n#cu = #cuda_tile.di_compile_unit<file = #f>\n'
        '#sp = #cuda_tile.di_subprogram<file = #f, line = 1, name = "k", linkageName = "k", '
        "compileUnit = #cu, scopeLine = 18446744073709551616>\n",
        3,
        115,
        "integer value too large",
    ),
]


FOUND += [
    (  # 2^64-1 is -1 as an i64 (MLIR's reading): refused as text, as after a bytecode round trip
        "cuda_tile.module @kernels {\n  entry @k() {\n"
        "    %0 = alloca num_elem = 64, alignment = 18446744073709551615 : tile<ptr<f32>>\n"
        "    return\n  }\n}\n",
        3,
        10,
        "'cuda_tile.alloca' op attribute 'alignment' failed to satisfy constraint: 64-bit "
        "signless integer attribute whose minimum value is 0",
    ),
    (  # a negative line number reached the bytecode writer
        '#f = #cuda_tile.di_file<"a.py" in "/">\n#cu = #cuda_tile.di_compile_unit<file = #f>\n'
        '#sp = #cuda_tile.di_subprogram<file = #f, line = -1, name = "k", linkageName = "k", '
        "compileUnit = #cu>\n",
        3,
        50,
        "integer value too large",
    ),
]


@pytest.mark.parametrize("text, line, col, message", FOUND)
def test_found_inputs_are_located_errors(text, line, col, message):
    assert fuzz_text.check(text) == "rejected"
    source = driver.Source("m.mlir", text)
    chunk = driver.Chunk(text, 1, text.count("\n") + 1)
    options = opt.OptOptions(filename="m.mlir")
    result = driver.run_chunk(
        source, chunk, lambda t, e: opt.process_chunk(t, e, options), verify=False
    )
    d = result.diagnostics[0]
    assert (d.loc.line, d.loc.col, d.message) == (line, col, message)
