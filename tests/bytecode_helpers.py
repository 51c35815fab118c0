"""Shared helpers for the test_bytecode_* tests (corpus paths, NVIDIA tools, IR fingerprints)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from paths import REPO  # noqa: F401 - the repository root
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


def nvidia_first_error(data: bytes, tmp_path) -> tuple[int, str]:
    """(exit code, first ``error:`` line without the ``error: `` prefix) of NVIDIA's
    ``tileirdisasm`` on ``data``; ``tmp_path`` is a directory for the file."""
    path = Path(tmp_path) / "input.tileirbc"
    path.write_bytes(data)
    proc = subprocess.run(
        [nvidia_tool("tileirdisasm"), str(path)], capture_output=True, text=True, errors="replace"
    )
    lines = [ln for ln in proc.stderr.splitlines() if "error: " in ln]
    first = lines[0].split("error: ", 1)[1] if lines else ""
    return proc.returncode, first


def module_with_arg_type(arg_type, version: str = "13.4") -> bytes:
    """Bytecode (written by tilegen, unverified) of ``entry @k(%arg0: ARG_TYPE) { return }``:
    how the tests build files whose types NVIDIA's reader must refuse."""
    from tilegen.runtime import types as ty
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.attributes import TypeAttr
    from tilegen.runtime.bytecode import write_bytecode

    module = parse_module(
        "cuda_tile.module @kernels {\n  entry @k(%arg0: tile<i32>) {\n    return\n  }\n}\n",
        "k.mlir",
        no_implicit_module=True,
    )
    entry = module.regions[0].block.ops[0]
    entry.set_attr("function_type", TypeAttr(ty.FunctionType((arg_type,), ())))
    entry.regions[0].block.args[0].type = arg_type
    return write_bytecode(module, version)
