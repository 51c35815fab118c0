"""``tilegen-translate``: MLIR text <-> Tile IR bytecode, flag-compatible with ``cuda-tile-translate``.

Modes: ``-mlir-to-cudatilebc`` (text -> bytecode at ``--bytecode-version``),
``-cudatilebc-to-mlir`` (bytecode -> text), ``-test-cudatile-roundtrip`` (text -> bytecode -> text),
``--list-versions``. Shared plumbing (``-o``, ``-``, ``-split-input-file``,
``-verify-diagnostics``) comes from :mod:`tilegen.tools.driver`.
"""

from __future__ import annotations

import io
import re
import sys
from dataclasses import dataclass
from typing import Optional

from tilegen.runtime.attributes import UNKNOWN_LOC, FileLineColLoc
from tilegen.runtime.bytecode import layouts as L
from tilegen.runtime.bytecode.errors import BytecodeError, BytecodeWriteError
from tilegen.runtime.diagnostics import Diagnostic, DiagnosticEngine, DiagnosticError
from tilegen.tools import driver

PROG = "tilegen-translate"
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


def command_line() -> driver.CommandLine:
    cl = driver.CommandLine(
        PROG, "tilegen CUDA Tile IR translation driver (cuda-tile-translate compatible)"
    )
    cl.flag("mlir-to-cudatilebc", dest="to_bc", help="translate MLIR text to Tile IR bytecode")
    cl.flag("cudatilebc-to-mlir", dest="from_bc", help="translate Tile IR bytecode to MLIR text")
    cl.flag(
        "test-cudatile-roundtrip",
        dest="roundtrip",
        help="MLIR text -> bytecode -> MLIR text (tests the writer and reader together)",
    )
    cl.option(
        "bytecode-version",
        dest="bytecode_version",
        help=f"bytecode version to write (default {L.DEFAULT_WRITE_VERSION})",
        metavar="M.m",
    )
    cl.flag(
        "list-versions",
        dest="list_versions",
        help="print the bytecode versions the writer supports",
    )
    cl.option("o", dest="output", help="output filename", metavar="filename", default="-")
    cl.optional_value(
        "split-input-file",
        dest="split",
        help="split the input on '// -----' lines and process each chunk independently",
        implicit=driver.SPLIT_MARKER,
    )
    cl.flag("verify-diagnostics", dest="verify", help="check expected-* annotations in the input")
    cl.flag("allow-unregistered-dialect", dest="allow_unregistered", help="accept unknown ops")
    cl.flag("no-implicit-module", dest="no_implicit_module", help="do not wrap in builtin.module")
    cl.flag("mlir-print-debuginfo", dest="debuginfo", help="print source locations")
    cl.flag("mlir-print-op-generic", dest="generic", help="print every op in the generic form")
    cl.flag("no-verify", dest="no_verify", help="do not verify the IR read from bytecode")
    return cl


@dataclass
class TranslateOptions:
    filename: str
    version: str
    no_implicit_module: bool = False
    allow_unregistered: bool = False
    debuginfo: bool = False
    generic: bool = False
    verify: bool = True
    #: refuse entries with non-tile arguments (NVIDIA's 13.5 reader, ``tilegen disasm``); the
    #: open-source cuda-tile-translate this tool stands in for reads them
    entry_invariants: bool = False


def check_version(text: Optional[str]) -> str:
    """The requested writer version, or a UsageError worded as cuda-tile-translate's."""
    if text is None:
        return L.DEFAULT_WRITE_VERSION
    m = _VERSION_RE.match(text)
    if m is None:
        raise driver.UsageError(f"Invalid argument '{text}'")
    version = f"{int(m.group(1))}.{int(m.group(2))}"
    if version not in L.WRITE_VERSIONS or (m.group(3) and int(m.group(3))):
        lo, hi = L.PRODUCTION_WRITE_VERSIONS[0], L.PRODUCTION_WRITE_VERSIONS[-1]
        raise driver.UsageError(
            f"Invalid argument '{text}': the supported versions are [{lo} - {hi}]"
        )
    return version


# --------------------------------------------------------------------------- diagnostics


def bytecode_diagnostics(err: BytecodeError, filename: str) -> list[Diagnostic]:
    """NVIDIA prints a reader failure as one error per cascade message."""
    if isinstance(err, BytecodeWriteError):
        op = err.op
        loc = getattr(op, "loc", None) or UNKNOWN_LOC
        if err.message.startswith("type '") or err.message == "unsupported type in bytecode writer":
            loc = UNKNOWN_LOC  # NVIDIA reports type encoding failures without a location
        d = Diagnostic("error", err.message, loc)
        remark = getattr(err, "remark_op", None)
        out = [d]
        if remark is not None:
            out.append(Diagnostic("remark", f"invalid op: {remark.name}", remark.loc))
        return out
    return [Diagnostic("error", m, FileLineColLoc(filename, 0, 0)) for m in err.messages]


# --------------------------------------------------------------------------- stages


def parse_text(text: str, opts: TranslateOptions, engine: DiagnosticEngine):
    from tilegen.runtime.asm import parse_module

    try:
        return parse_module(
            text,
            opts.filename,
            no_implicit_module=opts.no_implicit_module,
            allow_unregistered=opts.allow_unregistered,
        )
    except DiagnosticError as e:
        engine.diagnostics.extend(e.preceding)
        engine.diagnostics.append(e.diag)
        return None


def verify(module, engine: DiagnosticEngine) -> bool:
    try:
        from tilegen.runtime.verify import VerifyOptions, verify_module
    except ImportError:  # pragma: no cover - verifier not installed
        return True
    verify_module(module, engine, VerifyOptions())
    return not engine.has_errors


def encode(module, opts: TranslateOptions, engine: DiagnosticEngine) -> Optional[bytes]:
    from tilegen.runtime.bytecode import write_bytecode

    try:
        return write_bytecode(module, opts.version)
    except BytecodeError as e:
        engine.diagnostics.extend(bytecode_diagnostics(e, opts.filename))
        return None


def read_module(data: bytes, opts: TranslateOptions, engine: DiagnosticEngine):
    """The module in ``data`` (not verified), or None with the reader's diagnostics."""
    from tilegen.runtime.bytecode import read_bytecode

    try:
        return read_bytecode(data, opts.filename, opts.entry_invariants)
    except BytecodeError as e:
        engine.diagnostics.extend(bytecode_diagnostics(e, opts.filename))
        return None


def verified(module, opts: TranslateOptions, engine: DiagnosticEngine):
    """``module`` once it verifies (unless ``opts.verify`` is off), else None."""
    if module is not None and opts.verify and not verify(module, engine):
        engine.error("verification failed for deserialized cuda_tile::ModuleOp", UNKNOWN_LOC)
        return None
    return module


def decode(data: bytes, opts: TranslateOptions, engine: DiagnosticEngine):
    """:func:`read_module`, then :func:`verified`."""
    return verified(read_module(data, opts, engine), opts, engine)


def print_text(module, opts: TranslateOptions) -> str:
    return "".join(print_text_pieces(module, opts))


def print_text_pieces(module, opts: TranslateOptions):
    """The module's text, ending in a newline, as pieces to write one by one (held
    compressed while the module is printed: ``printer.print_spooled``)."""
    from tilegen.runtime.asm.printer import print_spooled

    text = print_spooled(module, generic=opts.generic, debuginfo=opts.debuginfo)
    if text.last_char != "\n":
        text.append("\n")
    return text


def text_to_bytecode(text: str, engine: DiagnosticEngine, opts: TranslateOptions):
    module = parse_text(text, opts, engine)
    if module is None or not verify(module, engine):
        return None
    return encode(module, opts, engine)


def roundtrip(text: str, engine: DiagnosticEngine, opts: TranslateOptions) -> Optional[str]:
    data = text_to_bytecode(text, engine, opts)
    if data is None:
        return None
    module = decode(data, opts, engine)
    return None if module is None else print_text(module, opts)


# --------------------------------------------------------------------------- main


def _body(o: dict) -> int:
    if o["list_versions"]:
        print("\n".join(L.WRITE_VERSIONS))
        return 0
    modes = [m for m in ("to_bc", "from_bc", "roundtrip") if o[m]]
    if len(modes) != 1:
        raise driver.UsageError(
            "exactly one of -mlir-to-cudatilebc, -cudatilebc-to-mlir, -test-cudatile-roundtrip "
            "is required"
        )
    name = driver.display_name(o["input"])
    opts = TranslateOptions(
        filename=name,
        version=check_version(o["bytecode_version"]),
        no_implicit_module=o["no_implicit_module"],
        allow_unregistered=o["allow_unregistered"],
        debuginfo=o["debuginfo"],
        generic=o["generic"],
        verify=not o["no_verify"],
    )
    data = driver.read_input_bytes(o["input"])
    if o["from_bc"]:
        engine = DiagnosticEngine()
        try:
            module = read_module(data, opts, engine)
            data = None  # the file's bytes go before the module is verified and printed
            module = verified(module, opts, engine)
            out = print_text_pieces(module, opts) if module is not None else None
            del module  # the IR goes before the text is written
        except Exception as e:  # noqa: BLE001 - never a traceback
            engine.diagnostics.append(driver.internal_error(e, name, 0))
            out = None
        for d in engine.diagnostics:
            print(driver.render(d, None), file=sys.stderr)
        if out is None:
            return 1
        driver.write_output(o["output"], out)
        return 0
    try:
        source = driver.decode_source(name, data)
    except DiagnosticError as e:
        print(driver.render(e.diag, None), file=sys.stderr)
        return 1
    del data  # the text modes need only the decoded text: not a second copy of the input
    if o["roundtrip"]:
        results = driver.run_buffer(
            source, lambda t, e: roundtrip(t, e, opts), split=o["split"], verify=o["verify"]
        )
        buf = io.StringIO()
        status = driver.report(source, results, buf, sys.stderr, split=o["split"])
        if status == 0 or o["output"] in (None, "-"):
            driver.write_output(o["output"], buf.getvalue())
        return status
    blobs: list[bytes] = []

    def process(text: str, engine: DiagnosticEngine) -> Optional[str]:
        blob = text_to_bytecode(text, engine, opts)
        if blob is None:
            return None
        blobs.append(blob)
        return ""

    results = driver.run_buffer(source, process, split=o["split"], verify=o["verify"])
    status = driver.report(source, results, io.StringIO(), sys.stderr, split=o["split"])
    if status == 0 and not o["verify"]:
        _write_binary(o["output"], blobs[0] if len(blobs) == 1 else b"".join(blobs))
    return status


def _write_binary(path: Optional[str], data: bytes) -> None:
    if path is None or path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise driver.UsageError(f"could not open output file '{path}': {e.strerror}") from None


def main(argv: Optional[list[str]] = None) -> int:
    return driver.run_tool(PROG, command_line(), argv, _body)


if __name__ == "__main__":
    sys.exit(main())
