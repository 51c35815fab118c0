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
    p.add_argument(
        "--gpu-name",
        metavar="sm_XX",
        help="target of --lower-to / ptxsim (default sm_90) / cuda (default: the device's)",
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


def run(args) -> int:
    import numpy as np

    from tilegen.runtime.diagnostics import Diagnostic
    from tilegen.runtime.interp.api import RunError, load_module, load_npz_args, run_module

    def fail(diags) -> int:
        for d in diags:
            text = d.format()
            if d.loc is None:  # not located in the kernel: name the file the run was about
                text = f"{args.file}: {d.severity}: {d.message}"
            print(text, file=sys.stderr)
        return 1

    try:
        grid = _grid(args.grid) if args.grid else None
    except ValueError as e:
        return fail([Diagnostic("error", f"bad --grid '{args.grid}': {e}")])
    try:
        module = load_module(args.file, verify=not args.no_verify)
    except OSError as e:
        return fail([Diagnostic("error", f"cannot read '{args.file}': {e.strerror}")])
    except RunError as e:
        return fail(e.diagnostics)
    try:
        kernel_args, npz_grid = load_npz_args(args.args)
    except Exception as e:  # not an npz, pickled objects, a bad zip ...: say so, no traceback
        return fail([Diagnostic("error", f"cannot read arguments '{args.args}': {e}")])
    t0 = time.perf_counter()
    try:
        if args.backend == "ptxsim":  # runtime/codegen's PTX in the SIMT simulator
            from tilegen.runtime.codegen.ptxsim import run_ptxsim

            result = run_ptxsim(
                module,
                kernel_args,
                grid or npz_grid or (1, 1, 1),
                args.gpu_name or "sm_90",
                not args.no_verify,
            )
        elif args.backend == "cuda":  # the cubin on a real GPU (tilegen/cuda_backend.py)
            from tilegen.cuda_backend import run_cuda

            result = run_cuda(
                module,
                kernel_args,
                grid or npz_grid or (1, 1, 1),
                args.gpu_name,
                not args.no_verify,
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
                gpu_name=args.gpu_name or "sm_90",
            )
    except RunError as e:
        return fail(e.diagnostics)
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
            return fail([Diagnostic("error", f"cannot read expected arrays '{source}': {e}")])
        if not expected:
            return fail([Diagnostic("error", f"'{source}' holds no expected__<name> arrays")])
        problems = compare_expected(result, expected, args.rtol, args.atol)
        for p in problems:
            print(f"{args.file}: mismatch: {p}", file=sys.stderr)
        if problems:
            return 1
        print(f"{len(expected)} expected array(s) match")
    return 0
