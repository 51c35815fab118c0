"""The ptx / cubin stages: PTX text from a laid-out module, and ptxas to assemble it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from tilegen.runtime.codegen.emit import emit_ptx


def find_ptxas() -> Optional[str]:
    """``$PTXAS``, else the NVIDIA cu13 wheel next to this interpreter, else ``ptxas`` on PATH."""
    env = os.environ.get("PTXAS")
    if env and Path(env).is_file():
        return env
    for base in {sys.prefix, sys.exec_prefix}:
        for cand in Path(base).glob("lib/python3*/site-packages/nvidia/cu13/bin/ptxas"):
            return str(cand)
    return shutil.which("ptxas")


class PtxasError(Exception):
    pass


def assemble(ptx: str, sm: int, verbose: bool = False) -> tuple[bytes, str]:
    """(cubin bytes, ptxas stderr) for ``ptx`` on ``sm_<sm>`` (``sm_<sm>a`` when the PTX says
    ``.target sm_<sm>a``: arch-specific instructions such as wgmma)."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise PtxasError("ptxas not found (set PTXAS or install nvidia-cuda-nvcc)")
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        arch = f"sm_{sm}a" if re.search(rf"^\s*\.target\s+sm_{sm}a\b", ptx, re.M) else f"sm_{sm}"
        cmd = [ptxas, f"-arch={arch}", str(src), "-o", str(out)] + (["-v"] if verbose else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise PtxasError(f"ptxas failed:\n{p.stderr.strip()}")
        return out.read_bytes(), p.stderr


__all__ = ["PtxasError", "assemble", "emit_ptx", "find_ptxas"]
