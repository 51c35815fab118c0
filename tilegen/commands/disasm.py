"""``tilegen disasm FILE``: print Tile IR bytecode as NVIDIA's ``tileirdisasm`` does.

The module is read (:func:`tilegen.runtime.bytecode.read_bytecode`), verified, and its entries and
globals are printed at top level without the ``cuda_tile.`` prefix (the printer's ``body_only`` +
``default_dialect`` options). ``-g`` prints locations as ``tileirdisasm -g`` does.
"""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    p.add_argument("file", help="a .tileirbc file ('-' for stdin)")
    p.add_argument(
        "-g",
        "--print-debug-info",
        dest="debuginfo",
        action="store_true",
        help="annotate the disassembly with debug locations",
    )
    p.add_argument("--no-verify", action="store_true", help="skip IR verification")


def disassemble(data: bytes, filename: str, debuginfo: bool = False, verify: bool = True):
    """(text, diagnostics): the tileirdisasm printout, or None and the error lines."""
    from tilegen.runtime.asm import print_module
    from tilegen.runtime.bytecode import layouts as L
    from tilegen.runtime.diagnostics import DiagnosticEngine
    from tilegen.tools import driver
    from tilegen.tools.translate import TranslateOptions, decode

    if not data.startswith(L.MAGIC[:4]):
        return None, [f"{filename}:0:0: error: input does not correspond to Tile IR bytecode"]
    engine = DiagnosticEngine()
    opts = TranslateOptions(
        filename=filename, version=L.DEFAULT_WRITE_VERSION, verify=verify, entry_invariants=True
    )
    module = decode(data, opts, engine)
    errors = [driver.render(d, None) for d in engine.diagnostics]
    if module is None:
        errors.append(f"{filename}:0:0: error: failed to read provided Tile IR bytecode")
        return None, errors
    text = print_module(
        module,
        debuginfo=debuginfo,
        body_only=True,
        default_dialect="cuda_tile",
        alias_mnemonics=True,
    )
    return text, errors


def run(args) -> int:
    from tilegen.tools import driver

    try:
        data = driver.read_input_bytes(args.file)
    except driver.UsageError as e:
        print(f"tilegen disasm: {e}", file=sys.stderr)
        return 1
    name = driver.display_name(args.file)
    try:
        text, errors = disassemble(data, name, args.debuginfo, not args.no_verify)
    except Exception as e:  # noqa: BLE001 - never show a traceback
        text, errors = None, [driver.render(driver.internal_error(e, name, 0), None)]
    for line in errors:
        print(line, file=sys.stderr)
    if text is None:
        return 3
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
