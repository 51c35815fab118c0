"""``tilegen compile FILE --gpu-name=sm_XX [--emit=STAGE] [-o OUT]``: lower a Tile IR kernel.

FILE is ``.tileirbc`` bytecode or MLIR text. The stages ``--emit`` may name are the rows of
:data:`tilegen.runtime.passes.pipelines.COMPILE_STAGES`; each row's pipeline runs after the
previous one. ``--print-ir-after-all`` dumps the IR after every pass, ``--time-passes`` reports
their wall time (both on stderr).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Optional

from tilegen.runtime.passes.pipelines import COMPILE_STAGES

BAD_TARGET = "invalid or missing --compute-capability option"


def add_arguments(p) -> None:
    p.add_argument("file", help="kernel: .tileirbc bytecode or .mlir text ('-' = stdin)")
    p.add_argument("--gpu-name", metavar="sm_XX", help="target GPU (sm_90, sm_100a, ...)")
    p.add_argument("--compute-capability", metavar="N", help="target as major*10+minor (90)")
    p.add_argument(
        "--emit",
        default="nv_tileaa",
        choices=[name for name, _ in COMPILE_STAGES],
        help="the stage to stop at and print (default: %(default)s)",
    )
    p.add_argument(
        "-o", dest="output", default="-", metavar="OUT", help="output file ('-' = stdout)"
    )
    p.add_argument("--print-ir-after-all", action="store_true", help="dump the IR after each pass")
    p.add_argument("--time-passes", action="store_true", help="report the time of each pass")
    p.add_argument("--no-verify", action="store_true", help="skip the verifier between stages")


def _load(path: str):
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    return load_source(data, path)


def load_source(data: bytes, path: str):
    """The cuda_tile module in ``data`` (bytecode or MLIR text) read from ``path``; raises
    :class:`_Fail` (unreadable bytecode) or ``DiagnosticError`` (MLIR text that does not parse)."""
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.bytecode import BytecodeError, read_bytecode

    if data[:4] == b"\x7fTil" or path.endswith(".tileirbc"):
        try:
            return read_bytecode(data, path)
        except BytecodeError as e:
            raise _Fail([_diag(f"{path}: {e}")]) from None
    from tilegen.runtime.diagnostics import DiagnosticError

    text = data.decode("utf-8", errors="replace")
    try:
        return parse_module(text, path)
    except DiagnosticError:
        if text.lstrip().startswith(("module", "cuda_tile.module")):
            raise
        try:  # tileirdisasm output: a module body without the wrapper
            return parse_module("cuda_tile.module @m {\n" + text + "\n}", path)
        except DiagnosticError:
            pass
        raise


class _Fail(Exception):
    def __init__(self, diags):
        super().__init__("")
        self.diags = diags


def _diag(message: str, loc=None):
    from tilegen.runtime.diagnostics import Diagnostic

    return Diagnostic("error", message, loc)


def _target(args) -> Optional[str]:
    from tilegen.runtime.conversion import parse_target

    text = args.gpu_name or args.compute_capability
    if text is None:
        return None
    if parse_target(text) is None:
        raise _Fail([_diag(BAD_TARGET)])
    return str(parse_target(text))


def _verify(module, stage: str) -> None:
    from tilegen.runtime.diagnostics import DiagnosticEngine
    from tilegen.runtime.verify import verify_module

    diag = DiagnosticEngine()
    if not verify_module(module, diag):
        errors = [d for d in diag.diagnostics if d.severity == "error"]
        raise _Fail(errors or [_diag(f"the {stage} module does not verify")])


def compile_module(
    module, emit: str, cc: Optional[str], verify=True, after_pass=None, opt_level=None
):
    """Run the stages up to ``emit`` on ``module``; returns the (builtin) module.

    ``opt_level`` (0-3, tileiras's ``-O``) first runs the ``tile-optimize-O<N>`` pipeline on the
    cuda_tile module; None (``tilegen compile``) runs no optimizer."""
    from tilegen.runtime.conversion.driver import wrap_module
    from tilegen.runtime.passes.pipeline import (
        PassRef,
        PipelineError,
        parse_pipeline,
        run_pipeline,
    )
    from tilegen.runtime.passes.registry import PassFailure

    root = wrap_module(module)
    stages = COMPILE_STAGES
    if opt_level is not None:
        stages = ((COMPILE_STAGES[0][0], f"tile-optimize-O{opt_level}"),) + COMPILE_STAGES[1:]
    for stage, text in stages:
        if text:
            if cc is None and "{cc}" in text:
                text = text.replace("{compute-capability={cc}}", "")
            for el in parse_pipeline(text.replace("{cc}", cc or "")):
                start = time.perf_counter()
                try:
                    run_pipeline(root, [el])
                except PassFailure as e:
                    raise _Fail(e.diagnostics) from None
                except PipelineError as e:
                    raise _Fail([_diag(str(e))]) from None
                if after_pass is not None:
                    name = el.name if isinstance(el, PassRef) else el.anchor
                    after_pass(name, root, time.perf_counter() - start)
        if verify:
            _verify(root, stage)
        if stage == emit:
            break
    return root


def run(args) -> int:
    from tilegen.runtime.asm import print_module
    from tilegen.runtime.attributes import UnknownLoc
    from tilegen.runtime.diagnostics import DiagnosticError

    timings: list[tuple[str, float]] = []

    def after_pass(name: str, root, seconds: float) -> None:
        timings.append((name, seconds))
        if args.print_ir_after_all:
            print(f"// -----// IR Dump After {name} //----- //", file=sys.stderr)
            print(print_module(root), file=sys.stderr)

    try:
        module = _load(args.file)
        if not args.no_verify:
            _verify(module, "input")
        cc = _target(args)
        start = time.perf_counter()
        root = compile_module(module, args.emit, cc, not args.no_verify, after_pass)
        total = time.perf_counter() - start
    except DiagnosticError as e:
        print(e.diag.format(), file=sys.stderr)
        return 1
    except (_Fail, OSError) as e:
        for d in getattr(e, "diags", None) or [_diag(f"{args.file}: {e}")]:
            located = d.loc is not None and not isinstance(d.loc, UnknownLoc)
            text = d.format() if located else f"tilegen compile: {d.severity}: {d.message}"
            print(text, file=sys.stderr)
        return 1
    if args.time_passes:
        _report_times(timings, total)
    if args.emit in ("ptx", "cubin"):
        return _emit_machine(args, root, cc)
    text = print_module(root)
    if args.output == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        Path(args.output).write_text(text if text.endswith("\n") else text + "\n")
    return 0


def _emit_machine(args, root, cc: Optional[str]) -> int:
    """--emit=ptx|cubin: runtime/codegen prints PTX; ptxas assembles the cubin."""
    from tilegen.api import machine_code
    from tilegen.runtime.codegen import CodegenError
    from tilegen.runtime.codegen.driver import PtxasError

    if cc is None:
        print(f"tilegen compile: error: --emit={args.emit} needs --gpu-name", file=sys.stderr)
        return 1
    try:
        ptx, cubin = machine_code(root, int(cc), cubin=args.emit == "cubin")
        data = cubin if args.emit == "cubin" else ptx.encode()
    except CodegenError as e:
        for d in e.diagnostics:
            print(d.format(), file=sys.stderr)
        return 1
    except PtxasError as e:
        print(f"tilegen compile: error: {e}", file=sys.stderr)
        return 1
    if args.output == "-":
        sys.stdout.buffer.write(data)
    else:
        Path(args.output).write_bytes(data)
    return 0


def _report_times(timings: list[tuple[str, float]], total: float) -> None:
    out = sys.stderr
    print("===" + "-" * 73 + "===", file=out)
    print("... Execution time report ...".center(79), file=out)
    print("===" + "-" * 73 + "===", file=out)
    print(f"  Total Execution Time: {total:.4f} seconds\n", file=out)
    print("   ----Wall Time----  ----Name----", file=out)
    for name, seconds in timings:
        share = 100.0 * seconds / total if total else 0.0
        print(f"   {seconds:.4f} ({share:5.1f}%)  {name}", file=out)
    print(f"   {total:.4f} (100.0%)  Total", file=out)
