"""``tilegen run --lower-to nv_tileaa``: convert a verified cuda_tile module, verify the result.

The conversion is :mod:`tilegen.runtime.conversion` (its spec-driven pipeline); its diagnostics
and the nv_tileaa verifier's come back as :class:`RunError` with their locations.
"""

from __future__ import annotations

from tilegen.runtime.diagnostics import Diagnostic
from tilegen.runtime.interp.api import RunError, verify_or_raise
from tilegen.runtime.ir import Operation

#: dialects ``--lower-to`` accepts
LOWER_TARGETS = ("nv_tileaa",)


def lower_module(module: Operation, to: str = "nv_tileaa", gpu_name: str = "sm_90") -> Operation:
    """``module`` converted to ``to`` for ``gpu_name`` (e.g. ``sm_90``), verified.

    The conversion rewrites ``module`` in place and returns the enclosing ``builtin.module``.
    """
    if to not in LOWER_TARGETS:
        raise RunError(
            [Diagnostic("error", f"cannot lower to '{to}' (expected one of {LOWER_TARGETS})")]
        )
    try:
        from tilegen.runtime.conversion import ConversionError, convert_module, parse_target
    except ImportError as e:
        raise RunError(
            [Diagnostic("error", f"the cuda_tile -> nv_tileaa conversion is not available: {e}")]
        ) from None
    try:
        lowered = convert_module(module, parse_target(gpu_name))
    except ConversionError as e:
        raise RunError(list(getattr(e, "diagnostics", None) or [Diagnostic("error", str(e))]))
    verify_or_raise(lowered if lowered is not None else module)
    return lowered if lowered is not None else module
