"""The ptx / cubin stages: PTX text from a laid-out module, and ptxas to assemble it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
    import shutil

    return shutil.which("ptxas")


class PtxasError(Exception):
    pass


def assemble(ptx: str, sm: int, verbose: bool = False) -> tuple[bytes, str]:
    """(cubin bytes, ptxas stderr) for ``ptx`` on ``sm_<sm>`` (``sm_<sm>a`` when the PTX says
    ``.target sm_<sm>a``: arch-specific instructions such as wgmma).

    Where ``/dev/stdin`` exists the PTX goes to ptxas through a pipe and the cubin comes back on
    its stdout (the same bytes as through files, checked on the corpus; no temporary directory,
    and no ``tempfile`` / ``shutil`` import, ~4 ms of a ``tilegen-tileiras`` run); ptxas then
    names its input ``/dev/stdin`` in messages."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise PtxasError("ptxas not found (set PTXAS or install nvidia-cuda-nvcc)")
    arch = f"sm_{sm}a" if re.search(rf"^\s*\.target\s+sm_{sm}a\b", ptx, re.M) else f"sm_{sm}"
    flags = ["-v"] if verbose else []
    if os.path.exists("/dev/stdin") and os.path.exists("/dev/stdout"):
        cmd = [ptxas, f"-arch={arch}", "/dev/stdin", "-o", "/dev/stdout"] + flags
        import locale  # what write_text / text=True use

        encoding = locale.getpreferredencoding(False)
        p = subprocess.run(cmd, input=ptx.encode(encoding), capture_output=True)
        stderr = p.stderr.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")
        if p.returncode != 0:
            raise PtxasError(f"ptxas failed:\n{stderr.strip()}")
        return p.stdout, stderr
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        cmd = [ptxas, f"-arch={arch}", str(src), "-o", str(out)] + flags
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise PtxasError(f"ptxas failed:\n{p.stderr.strip()}")
        return out.read_bytes(), p.stderr


__all__ = ["PtxasError", "assemble", "emit_ptx", "find_ptxas"]
