"""``tilegen run FILE --args IN.npz --out OUT.npz [--grid X,Y,Z] [--entry NAME]``: run a kernel.

``--lower-to nv_tileaa [--gpu-name sm_XX]`` converts it to nv_tileaa first and runs that.

FILE is Tile IR bytecode (``.tileirbc``) or MLIR text (``.mlir``, ``tileirdisasm`` output
included). IN.npz holds ``arg__<name>`` per kernel parameter, in order (0-d arrays are scalars),
and may hold ``grid``; OUT.npz receives every ``arg__<name>`` after the run.
"""

from __future__ import annotations

import re
import sys
import time

from tilegen.commands.options import (
    add_codegen_arguments,
    add_target_arguments,
    compile_options,
    report,
)


def _grid(text: str) -> tuple[int, ...]:
    parts = re.split(r"[,x]", text.strip())
    if not 1 <= len(parts) <= 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError("expected 1 to 3 positive sizes separated by ','")
    return tuple(int(p) for p in parts)


def add_arguments(p) -> None:
    p.add_argument("file", help="kernel: .tileirbc bytecode or .mlir text")
    p.add_argument("--args", required=True, metavar="IN.npz", help="arguments (arg__<name> keys)")
    p.add_argument("--out", metavar="OUT.npz", help="where to write every argument after the run")
    p.add_argument("--grid", metavar="X,Y,Z", help="grid size (default: IN.npz 'grid', else 1,1,1)")
    p.add_argument("--entry", metavar="NAME", help="entry to run when the module has several")
    p.add_argument(
        "--backend",
        default="interp",
        choices=["interp", "ptxsim", "cuda"],
        help="execution backend (cuda: the cubin on a real GPU via cuda-python)",
    )
    p.add_argument(
        "--lower-to",
        choices=["nv_tileaa"],
        help="lower the kernel to this dialect first (verified), then interpret that",
    )
    add_target_arguments(
        p, "target of --lower-to / ptxsim (default sm_90) / cuda (default: the device's)"
    )
    p.add_argument("--no-verify", action="store_true", help="skip the verifier")
    p.add_argument("--time", action="store_true", help="report the run time on stderr")
    p.add_argument("--max-ops", type=int, metavar="N", help="stop after N executed ops")
    p.add_argument("--trace", action="store_true", help="print every executed op on stderr")
    p.add_argument(
        "--check",
        nargs="?",
        const="",
        metavar="EXPECTED.npz",
        help="compare the results with expected__<name> arrays (default: those in IN.npz)",
    )
    p.add_argument("--rtol", type=float, default=0.0, help="relative tolerance for --check")
    p.add_argument("--atol", type=float, default=0.0, help="absolute tolerance for --check")
    add_codegen_arguments(p)


def run(args) -> int:
    import numpy as np

    from tilegen.runtime.diagnostics import CompileError, Diagnostic, FileLoc
    from tilegen.runtime.interp.api import RunError, load_module, load_npz_args, run_module

    def fail(diags, exit_code: int = 1) -> int:
        return report(RunError(diags, exit_code))

    try:
        grid = _grid(args.grid) if args.grid else None
    except ValueError as e:
        return fail([Diagnostic("error", f"bad --grid '{args.grid}': {e}")])
    try:
        # the target rule and the options are checked before anything is read
        default = None if args.backend == "cuda" else "sm_90"
        options = compile_options(args, args.gpu_name or default)
        module = load_module(args.file, verify=not args.no_verify)
    except CompileError as e:
        return report(e)
    try:
        kernel_args, npz_grid = load_npz_args(args.args)
    except Exception as e:  # not an npz, pickled objects, a bad zip ...: say so, no traceback
        return fail([Diagnostic("error", f"cannot read arguments: {e}", FileLoc(args.args))])
    t0 = time.perf_counter()
    try:
        if args.backend == "ptxsim":  # runtime/codegen's PTX in the SIMT simulator
            from tilegen.runtime.ptxsim import run_ptxsim

            result = run_ptxsim(
                module,
                kernel_args,
                grid or npz_grid or (1, 1, 1),
                options.target.name,
                options.verify,
                options=options,
            )
        elif args.backend == "cuda":  # the cubin on a real GPU (tilegen/cuda_backend.py)
            from tilegen.cuda_backend import run_cuda

            result = run_cuda(
                module,
                kernel_args,
                grid or npz_grid or (1, 1, 1),
                args.gpu_name,
                options.verify,
                options=options,
            )
        else:
            result = run_module(
                module,
                kernel_args,
                grid or npz_grid or (1, 1, 1),
                args.entry,
                max_ops=args.max_ops,
                trace=sys.stderr if args.trace else None,
                lower_to=args.lower_to,
                gpu_name=options.target.name,
                options=options,
            )
    except CompileError as e:
        return report(e)
    if args.time:
        print(f"run time: {time.perf_counter() - t0:.3f}s", file=sys.stderr)
    if args.out:
        np.savez(args.out, **{f"arg__{k}": v for k, v in result.items()})
    if args.check is not None:
        from tilegen.runtime.interp.api import compare_expected, load_npz_expected

        source = args.check or args.args
        try:
            expected = load_npz_expected(source)
        except Exception as e:
            return fail([Diagnostic("error", f"cannot read expected arrays: {e}", FileLoc(source))])
        if not expected:
            return fail([Diagnostic("error", "holds no expected__<name> arrays", FileLoc(source))])
        problems = compare_expected(result, expected, args.rtol, args.atol)
        for p in problems:
            print(
                Diagnostic("error", f"mismatch: {p}", FileLoc(args.file)).format(), file=sys.stderr
            )
        if problems:
            return 1
        print(f"{len(expected)} expected array(s) match")
    return 0
