"""``tilegen run --backend ptxsim``: compile a kernel to PTX with the driver (runtime/driver.py)
and run that PTX in the SIMT simulator (runtime/ptx/sim) with the cuTile calling convention."""

from __future__ import annotations

from typing import Optional

import numpy as np

from tilegen.runtime.diagnostics import CompileError, Diagnostic
from tilegen.runtime.interp.api import RunError
from tilegen.runtime.options import CompileOptions

#: failures are reported like the interpreter's (tilegen run prints their diagnostics)
PtxSimRunError = RunError


def compile_to_ptx(
    module, gpu_name: str, verify: bool = True, options: Optional[CompileOptions] = None
) -> str:
    """PTX for a read ``cuda_tile`` module (rewritten in place) on ``gpu_name``: the driver's
    stages ``optimize`` through ``ptx``. ``options`` (default: CompileOptions()) supplies
    everything but the target and ``verify``. Failures are :class:`PtxSimRunError`."""
    from tilegen.runtime.driver import compile_module
    from tilegen.runtime.options import parse_target
    from tilegen.runtime.records import replace

    try:
        target = parse_target(gpu_name)
        options = replace(options or CompileOptions(), target=target, verify=verify)
        return compile_module(module, options, "ptx").ptx
    except CompileError as e:
        raise PtxSimRunError(e.diagnostics, e.exit_code, e.stage) from None


def run_ptxsim(
    module,
    kernel_args,
    grid,
    gpu_name: str,
    verify: bool = True,
    stdout=None,
    options: Optional[CompileOptions] = None,
) -> dict:
    """Run ``module``'s kernel on ``kernel_args`` ((name, array) pairs) over ``grid``; returns
    name -> array after the run (scalars as passed); device printf text goes to ``stdout``."""
    from tilegen.runtime.ptx.launch import PtxSimError, run_ptx

    ptx = compile_to_ptx(module, gpu_name, verify, options)
    values = [np.asarray(a) for _, a in kernel_args]
    try:
        arrays = run_ptx(ptx, values, grid, file="<tilegen ptx>", stdout=stdout)
    except PtxSimError as e:
        raise PtxSimRunError([Diagnostic("error", f"ptxsim: {e}")]) from None
    it = iter(arrays)
    return {name: (next(it) if v.ndim else v) for (name, _), v in zip(kernel_args, values)}
