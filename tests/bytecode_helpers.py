"""Shared helpers for the test_bytecode_* tests (corpus paths, NVIDIA tools, IR fingerprints)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from paths import SHARED_ROOT as SHARED  # ../shared or $TILEGEN_SHARED

CORPUS = SHARED / "corpus" / "cutile" / "out"
BYTECODE_TESTS = SHARED / "conformance" / "cuda-tile" / "test" / "Bytecode"
CORPUS_FILES = sorted(glob.glob(str(CORPUS / "*.tileirbc")))
#: cuTile samples NVIDIA's verifier rejects on purpose (no .mlir printout exists for them)
NEGATIVE = {"uint_floordiv_bug"}


def nvidia_tool(name: str):
    """Path of an NVIDIA tool installed in the venv (nvidia-cuda-tileiras wheel), or None."""
    here = Path(sys.executable).parent.parent
    for cand in here.glob(f"lib/python3*/site-packages/nvidia/cu13/bin/{name}"):
        return str(cand)
    return shutil.which(name)


def run_tool(*cmd: str, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)


def nonblank(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def stem(path: str) -> str:
    return os.path.basename(path).split(".")[0]


def fingerprint(module) -> list:
    """A structural dump of an op tree: names, types, attributes, value numbering, locations."""
    ids: dict = {}

    def vid(v) -> int:
        return ids.setdefault(id(v), len(ids))

    out = []
    for op in module.walk():
        for r in op.regions:
            for b in r.blocks:
                for a in b.args:
                    vid(a)
        out.append(
            (
                op.name,
                tuple(vid(v) for v in op.operands),
                tuple(str(r.type) for r in op.results),
                tuple(sorted((k, repr(v)) for k, v in op.attributes.items())),
                repr(op.loc),
                tuple(len(r.blocks) for r in op.regions),
            )
        )
        for r in op.results:
            vid(r)
    return out
