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
    """(text, error lines): the tileirdisasm printout, or None and the diagnostics (the
    driver's read and verify stages, in the one diagnostic format)."""
    from tilegen.runtime import driver
    from tilegen.runtime.asm import print_module
    from tilegen.runtime.diagnostics import CompileError, Diagnostic, FileLoc

    def failed(diags) -> tuple[None, list[str]]:
        trailer = Diagnostic("error", "failed to read provided Tile IR bytecode", FileLoc(filename))
        return None, [d.format() for d in diags] + [trailer.format()]

    if not data.startswith(driver.BYTECODE_MAGIC[:4]):
        return None, [Diagnostic("error", driver.NOT_BYTECODE, FileLoc(filename)).format()]
    try:
        module = driver.read_module(data, filename)
        if verify:
            driver.verify(module, filename)
    except CompileError as e:
        return failed(e.diagnostics)
    text = print_module(
        module,
        debuginfo=debuginfo,
        body_only=True,
        default_dialect="cuda_tile",
        alias_mnemonics=True,
    )
    return text, []


def run(args) -> int:
    from tilegen.runtime.diagnostics import CompileError, FileLoc
    from tilegen.runtime.driver import read_input
    from tilegen.tools import driver as tool

    name = "<stdin>" if args.file == "-" else args.file
    try:
        data = read_input(args.file)
        text, errors = disassemble(data, name, args.debuginfo, not args.no_verify)
    except CompileError as e:
        text, errors = None, [d.format() for d in e.diagnostics]
        if e.exit_code == 1:
            print("\n".join(errors), file=sys.stderr)
            return 1
    except Exception as e:  # noqa: BLE001 - never show a traceback
        d = tool.internal_error(e, name, 0)
        d.loc = FileLoc(name)
        text, errors = None, [d.format()]
    for line in errors:
        print(line, file=sys.stderr)
    if text is None:
        return 3
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
