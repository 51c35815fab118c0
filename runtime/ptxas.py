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


def drop_occupancy_caps(ptx: str, log: str) -> str | None:
    """``ptx`` without the ``.maxnreg`` directives only the ``occupancy`` hint asked for
    (layouts/kernel.OCCUPANCY_CAP_MARK), when ptxas's ``log`` says an instruction does not fit
    under one (C7602 "Insufficient registers"); None when that is not the failure or there is
    no such cap. tileiras compiles those kernels at 255 registers."""
    from tilegen.runtime.layouts.kernel import OCCUPANCY_CAP_MARK

    if "C7602" not in log or OCCUPANCY_CAP_MARK not in ptx:
        return None
    cap = re.compile(r"^\s*\.maxnreg \d+ " + re.escape(OCCUPANCY_CAP_MARK) + r"\n", re.M)
    return cap.sub("", ptx)


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


def _pipe_cmd(ptxas: str, arch: str, flags) -> list[str]:
    from tilegen.runtime.targets import EXTENDED_SMEM_FLAG

    return [ptxas, f"-arch={arch}", "/dev/stdin", "-o", "/dev/stdout", EXTENDED_SMEM_FLAG] + list(
        flags
    )


def _pipes() -> bool:
    return os.path.exists("/dev/stdin") and os.path.exists("/dev/stdout")


class Prestarted:
    """A ptxas process started before its PTX exists: it loads and initialises (~10-15 ms of
    the ~25 ms an empty kernel costs) while the compiler works, then blocks on its stdin until
    :func:`assemble` writes the PTX. Output, messages and exit codes are those of the same
    command started later; one for another ``-arch`` or other flags is killed unused."""

    def __init__(self, arch: str, flags=()):
        self.arch, self.flags = arch, list(flags)
        self.proc = subprocess.Popen(
            _pipe_cmd(find_ptxas(), arch, self.flags),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def take(self, arch: str, flags) -> "subprocess.Popen | None":
        """The process when it was started for ``arch`` and ``flags`` (then it is the caller's),
        else None (it is closed)."""
        proc, self.proc = self.proc, None
        if proc is not None and (arch, list(flags)) == (self.arch, self.flags):
            return proc
        _kill(proc)
        return None

    def close(self) -> None:
        """Stop the process if nobody took it (a compile that ended before ptxas)."""
        proc, self.proc = self.proc, None
        _kill(proc)


def _kill(proc) -> None:
    if proc is None:
        return
    proc.kill()
    proc.communicate()


def prestart(arch: str, flags=()) -> "Prestarted | None":
    """A :class:`Prestarted` ptxas for ``arch``; None without ptxas or pipes (or when the
    process cannot start: :func:`assemble` then reports that itself)."""
    if find_ptxas() is None or not _pipes():
        return None
    try:
        return Prestarted(arch, flags)
    except OSError:
        return None


def assemble(
    ptx: str, sm: int, verbose: bool = False, extra=(), pre: "Prestarted | None" = None
) -> tuple[bytes, str]:
    """(cubin bytes, ptxas stderr) for ``ptx`` on ``sm_<sm>`` (the PTX's ``.target`` variant,
    e.g. ``sm_90a`` for wgmma or when asked for, :func:`ptx_target`).

    Where ``/dev/stdin`` exists the PTX goes to ptxas through a pipe and the cubin comes back on
    its stdout (the same bytes as through files, checked on the corpus; no temporary directory,
    and no ``tempfile`` / ``shutil`` import, ~4 ms of a ``tilegen-tileiras`` run); ptxas then
    names its input ``/dev/stdin`` in messages. ``pre``: a :func:`prestart` ptxas, used when
    it was started for the same ``-arch`` and flags (else closed)."""
    ptxas = find_ptxas()
    if ptxas is None:
        if pre is not None:
            pre.close()
        raise PtxasError("ptxas not found (set PTXAS or install nvidia-cuda-nvcc)")
    arch = ptx_target(ptx, sm)
    flags = (["-v"] if verbose else []) + list(extra)
    proc = pre.take(arch, flags) if pre is not None else None
    if proc is not None or _pipes():
        import locale  # what write_text / text=True use

        encoding = locale.getpreferredencoding(False)
        if proc is None:
            proc = subprocess.Popen(
                _pipe_cmd(ptxas, arch, flags),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        with proc:
            try:
                out, err = proc.communicate(ptx.encode(encoding))
            except BaseException:
                proc.kill()
                raise
        stderr = err.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")
        if proc.returncode != 0:
            raise PtxasError(f"ptxas failed:\n{stderr.strip()}")
        return out, stderr
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        from tilegen.runtime.targets import EXTENDED_SMEM_FLAG

        cmd = [ptxas, f"-arch={arch}", str(src), "-o", str(out), EXTENDED_SMEM_FLAG] + flags
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


__all__ = [
    "PtxasError",
    "Prestarted",
    "assemble",
    "find_ptxas",
    "options_flags",
    "prestart",
    "ptx_target",
    "ptxas_version",
]
