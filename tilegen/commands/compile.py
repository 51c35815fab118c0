"""``tilegen compile FILE --gpu-name=sm_XX [-O N] [--emit=STAGE] [-o OUT]``: compile a kernel.

FILE is ``.tileirbc`` bytecode or MLIR text. The pipeline is runtime/driver.py's stage table;
``--emit`` names the artifact to stop at (:data:`tilegen.runtime.driver.EMIT`: ``cuda_tile``
after the optimizer, ``nv_tileaa``, ``nv_tileas`` with layouts, ``ptx``, ``cubin``). Without
``--emit`` the ``-o`` extension decides (``.cubin`` cubin, ``.ptx`` ptx, ``.mlir`` nv_tileaa,
any other file cubin); on stdout the default is ptx. ``--print-ir-after-all`` dumps the IR after
every pass, ``--time-passes`` reports the time of every stage and pass (both on stderr).
Failures print the driver's diagnostics and exit with tileiras's class (1 usage, 2
configuration, 3 invalid input, 5 cannot compile).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tilegen.commands.options import (
    add_codegen_arguments,
    add_target_arguments,
    compile_options,
    report,
)

EMIT_CHOICES = ("cuda_tile", "nv_tileaa", "nv_tileas", "async-plan", "ptx", "cubin")
#: ``-o`` extension -> --emit, when --emit is not given (any other file: cubin)
EXTENSIONS = {".cubin": "cubin", ".ptx": "ptx", ".mlir": "nv_tileaa"}


def add_arguments(p) -> None:
    p.add_argument("file", help="kernel: .tileirbc bytecode or .mlir text ('-' = stdin)")
    add_target_arguments(p, "target GPU: a tileiras --gpu-name or its a/f variant (sm_90a)")
    p.add_argument(
        "--compute-capability", metavar="N", help="target as major*10+minor (90 = sm_90)"
    )
    p.add_argument(
        "--emit",
        choices=EMIT_CHOICES,
        help="the artifact to write (default: from the -o extension; ptx on stdout)",
    )
    p.add_argument(
        "-o", dest="output", default="-", metavar="OUT", help="output file ('-' = stdout)"
    )
    p.add_argument("--print-ir-after-all", action="store_true", help="dump the IR after each pass")
    p.add_argument("--time-passes", action="store_true", help="report the time of each pass")
    p.add_argument("--no-verify", action="store_true", help="skip the verifier between stages")
    add_codegen_arguments(p)


def emit_for(emit, output: str) -> str:
    """The artifact to write: ``--emit`` if given, else from ``output``'s extension."""
    if emit:
        return emit
    if output == "-":
        return "ptx"
    return EXTENSIONS.get(Path(output).suffix.lower(), "cubin")


def _gpu_name(args):
    """The target name of ``--gpu-name`` / ``--compute-capability`` (None when neither)."""
    if args.gpu_name is not None:
        return args.gpu_name
    cc = args.compute_capability
    if cc is not None:
        return f"sm_{cc}" if cc.isdigit() else cc
    return None


def run(args) -> int:
    from tilegen.runtime.diagnostics import EXIT_CONFIG, CompileError, Diagnostic, FileLoc
    from tilegen.runtime.driver import EMIT, compile_source, read_input

    emit = emit_for(args.emit, args.output)
    stage = EMIT[emit]

    def after_pass(name: str, root, seconds: float) -> None:
        if args.print_ir_after_all:
            from tilegen.runtime.asm import print_module

            print(f"// -----// IR Dump After {name} //----- //", file=sys.stderr)
            print(print_module(root), file=sys.stderr)

    try:
        options = compile_options(args, _gpu_name(args))
        data = read_input(args.file)
        name = "<stdin>" if args.file == "-" else args.file
        c = compile_source(data, options, name, stage, after_pass)
    except CompileError as e:
        return report(e)
    if args.time_passes:
        _report_times(c.timings)
    if emit == "cubin":
        payload = c.cubin
    elif emit == "ptx":
        payload = c.ptx.encode()
    elif emit == "async-plan":
        payload = c.artifact("async").encode()
    else:
        from tilegen.runtime.asm import print_module

        text = print_module(c.module)
        payload = (text if text.endswith("\n") else text + "\n").encode()
    if args.output == "-":
        sys.stdout.buffer.write(payload)
        sys.stdout.flush()
        return 0
    try:
        Path(args.output).write_bytes(payload)
    except OSError as e:
        why = f"cannot open output file: {e.strerror or e}"
        print(Diagnostic("error", why, FileLoc(args.output)).format(), file=sys.stderr)
        return EXIT_CONFIG
    return 0


def _report_times(timings: dict) -> None:
    out = sys.stderr
    total = sum(timings.values())
    print("===" + "-" * 73 + "===", file=out)
    print("... Execution time report ...".center(79), file=out)
    print("===" + "-" * 73 + "===", file=out)
    print(f"  Total Execution Time: {total:.4f} seconds\n", file=out)
    print("   ----Wall Time----  ----Name----", file=out)
    for name, seconds in timings.items():
        share = 100.0 * seconds / total if total else 0.0
        print(f"   {seconds:.4f} ({share:5.1f}%)  {name}", file=out)
    print(f"   {total:.4f} (100.0%)  Total", file=out)
