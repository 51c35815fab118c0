"""``tilegen run --lower-to nv_tileaa``: a verified cuda_tile module through the driver's
``optimize`` and ``convert`` stages (runtime/driver.py), verified; failures come back as
:class:`RunError` with their locations and exit class.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.diagnostics import EXIT_USAGE, CompileError, Diagnostic
from tilegen.runtime.interp.api import RunError
from tilegen.runtime.ir import Operation
from tilegen.runtime.options import CompileOptions

#: dialects ``--lower-to`` accepts
LOWER_TARGETS = ("nv_tileaa",)


def lower_module(
    module: Operation,
    to: str = "nv_tileaa",
    gpu_name: str = "sm_90",
    options: Optional[CompileOptions] = None,
) -> Operation:
    """``module`` taken through the driver's stages up to ``to`` (``optimize`` at the options'
    opt level, then ``convert``) for ``gpu_name`` (e.g. ``sm_90``), verified.

    The module is rewritten in place; returns the enclosing ``builtin.module``.
    """
    from tilegen.runtime.driver import compile_module
    from tilegen.runtime.options import parse_target
    from tilegen.runtime.records import replace

    if to not in LOWER_TARGETS:
        raise RunError(
            [Diagnostic("error", f"cannot lower to '{to}' (expected one of {LOWER_TARGETS})")],
            EXIT_USAGE,
            "options",
        )
    try:
        options = replace(options or CompileOptions(), target=parse_target(gpu_name), verify=True)
        return compile_module(module, options, "convert").module
    except CompileError as e:
        raise RunError(e.diagnostics, e.exit_code, e.stage) from None
