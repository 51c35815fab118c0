"""The ``ptx`` and ``ptxas`` stages of runtime/driver.py: :func:`emit_ptx` (PTX text from a
laid-out module; it takes the compile's options) and ptxas (runtime/ptxas.py) to assemble it."""

from __future__ import annotations

from tilegen.runtime.codegen.emit import emit_ptx
from tilegen.runtime.ptxas import PtxasError, assemble, find_ptxas, ptx_target, ptxas_version

#: the ``CompileOptions.sanitize`` values the emitter instruments (the driver refuses others)
EMITTED_SANITIZERS: tuple[str, ...] = ("memcheck",)  # runtime/codegen/sanitize.py

__all__ = [
    "EMITTED_SANITIZERS",
    "PtxasError",
    "assemble",
    "emit_ptx",
    "find_ptxas",
    "ptx_target",
    "ptxas_version",
]
