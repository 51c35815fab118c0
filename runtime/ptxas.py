"""The ``ptxas`` stage of runtime/driver.py: find ptxas, name its version (a compile cache key
input), and assemble PTX into a cubin. Stdlib only, so a compile-cache hit can ask for the
ptxas version without importing the code generator."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional


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


def ptx_target(ptx: str, sm: int) -> str:
    """The ptxas ``-arch`` for ``ptx``: its ``.target`` (``sm_90a``, ``sm_100f``) when that
    names ``sm``, else ``sm_<sm>``."""
    m = re.search(rf"^\s*\.target\s+(sm_{sm}[af]?)\b", ptx, re.M)
    return m.group(1) if m else f"sm_{sm}"


def options_flags(options) -> list[str]:
    """The ptxas flags tileiras 13.5 adds for a compile's options (captured from its ptxas
    call): ``-sanitize=memcheck -g-tmem-access-check`` for ``--sanitize=memcheck``, ``--opt-level
    0`` for ``-g`` (docs/debugging.md)."""
    flags = []
    if getattr(options, "device_debug", False):
        flags += ["--opt-level", "0"]
    if getattr(options, "sanitize", None) == "memcheck":
        flags += ["-sanitize=memcheck", "-g-tmem-access-check"]
    return flags


def assemble(ptx: str, sm: int, verbose: bool = False, extra=()) -> tuple[bytes, str]:
    """(cubin bytes, ptxas stderr) for ``ptx`` on ``sm_<sm>`` (the PTX's ``.target`` variant,
    e.g. ``sm_90a`` for wgmma or when asked for, :func:`ptx_target`).

    Where ``/dev/stdin`` exists the PTX goes to ptxas through a pipe and the cubin comes back on
    its stdout (the same bytes as through files, checked on the corpus; no temporary directory,
    and no ``tempfile`` / ``shutil`` import, ~4 ms of a ``tilegen-tileiras`` run); ptxas then
    names its input ``/dev/stdin`` in messages."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise PtxasError("ptxas not found (set PTXAS or install nvidia-cuda-nvcc)")
    arch = ptx_target(ptx, sm)
    flags = (["-v"] if verbose else []) + list(extra)
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


def ptxas_version() -> str:
    """What ``ptxas --version`` says (``Cuda compilation tools, release 13.5, V13.5.37; Build
    cuda_13.5.r13.5/compiler.39125733_0``) and the binary's path, size and mtime; "none"
    without ptxas. Memoised per process."""
    global _PTXAS_VERSION
    if _PTXAS_VERSION is None:
        path = find_ptxas()
        if path is None:
            _PTXAS_VERSION = "none"
        else:
            st = os.stat(path)
            try:
                p = subprocess.run([path, "--version"], capture_output=True, text=True)
                lines = [x.strip() for x in p.stdout.splitlines()]
                lines = [x for x in lines if x.startswith(("Cuda compilation tools", "Build "))]
                text = "; ".join(lines) or f"exit {p.returncode}"
            except OSError as e:
                text = f"unrunnable: {e.strerror}"
            _PTXAS_VERSION = f"{text} ({path}, {st.st_size}, {st.st_mtime_ns})"
    return _PTXAS_VERSION


_PTXAS_VERSION = None


__all__ = ["PtxasError", "assemble", "find_ptxas", "options_flags", "ptx_target", "ptxas_version"]
