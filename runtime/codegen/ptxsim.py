"""``tilegen run --backend ptxsim``: compile a kernel to PTX with runtime/codegen and run that
PTX in the SIMT simulator (runtime/ptx/sim) with the cuTile calling convention."""

from __future__ import annotations

import numpy as np

from tilegen.runtime.diagnostics import Diagnostic


from tilegen.runtime.interp.api import RunError

#: failures are reported like the interpreter's (tilegen run prints their diagnostics)
PtxSimRunError = RunError


def compile_to_ptx(module, gpu_name: str, verify: bool = True) -> str:
    from tilegen.commands.compile import _Fail, compile_module
    from tilegen.runtime.codegen.emit import CodegenError, emit_ptx
    from tilegen.runtime.conversion import parse_target

    cc = parse_target(gpu_name)
    if cc is None:
        raise PtxSimRunError([Diagnostic("error", f"bad --gpu-name '{gpu_name}'")])
    try:
        root = compile_module(module, "ptx", str(cc), verify)
        return emit_ptx(root, cc)
    except _Fail as e:
        raise PtxSimRunError(e.diags) from None
    except CodegenError as e:
        raise PtxSimRunError(e.diagnostics) from None


def run_ptxsim(module, kernel_args, grid, gpu_name: str, verify: bool = True, stdout=None) -> dict:
    """Run ``module``'s kernel on ``kernel_args`` ((name, array) pairs) over ``grid``; returns
    name -> array after the run (scalars as passed); device printf text goes to ``stdout``."""
    from tilegen.runtime.ptx.launch import PtxSimError, run_ptx

    ptx = compile_to_ptx(module, gpu_name, verify)
    values = [np.asarray(a) for _, a in kernel_args]
    try:
        arrays = run_ptx(ptx, values, grid, file="<tilegen ptx>", stdout=stdout)
    except PtxSimError as e:
        raise PtxSimRunError([Diagnostic("error", f"ptxsim: {e}")]) from None
    it = iter(arrays)
    return {name: (next(it) if v.ndim else v) for (name, _), v in zip(kernel_args, values)}
