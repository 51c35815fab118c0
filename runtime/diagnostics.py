"""Diagnostics: located errors, warnings, notes and remarks, and the one error type of a compile.

One format for every tool (:meth:`Diagnostic.format`):

* text input: ``FILE:LINE:COL: error: MESSAGE`` (MLIR's form; op diagnostics are prefixed
  ``'cuda_tile.addf' op``);
* bytecode input: ``FILE: error: MESSAGE (at byte offset N)`` (:class:`ByteOffsetLoc`, the
  offsets NVIDIA's ``tileiras`` / ``tileirdisasm`` report);
* a whole file (unreadable, empty, not bytecode): ``FILE: error: MESSAGE`` (:class:`FileLoc`);
* no input involved (a bad option or target): ``error: MESSAGE``.

A :class:`DiagnosticEngine` collects diagnostics; tools either print them or
(``--verify-diagnostics``) match them against expectations. :class:`CompileError` carries the
diagnostics of a failed compile with tileiras's exit class and the stage that failed.
"""

from __future__ import annotations

import sys
from typing import Callable, Optional

from tilegen.runtime.attributes import (
    CallSiteLoc,
    DILocAttr,
    FileLineColLoc,
    FusedLoc,
    Location,
    NameLoc,
    UnknownLoc,
)
from tilegen.runtime.records import dataclass, field


@dataclass
class Diagnostic:
    severity: str  # "error" | "warning" | "note" | "remark"
    message: str
    loc: Optional[Location] = None
    notes: list["Diagnostic"] = field(default_factory=list)

    def attach_note(self, message: str, loc: Optional[Location] = None) -> "Diagnostic":
        note = Diagnostic("note", message, loc)
        self.notes.append(note)
        return note

    def format(self) -> str:
        lines = [format_head(self.loc, self.severity, self.message)]
        for n in self.notes:
            lines.append(format_head(n.loc or self.loc, n.severity, n.message))
        return "\n".join(lines)


class FileLoc:
    """A diagnostic about a whole input file (no line or byte position)."""

    __slots__ = ("file",)

    def __init__(self, file: str):
        self.file = file

    def __repr__(self) -> str:
        return f"FileLoc({self.file!r})"


class ByteOffsetLoc:
    """A position in a bytecode file: the byte offset NVIDIA's reader reports."""

    __slots__ = ("file", "offset")

    def __init__(self, file: str, offset: int):
        self.file, self.offset = file, offset

    def __repr__(self) -> str:
        return f"ByteOffsetLoc({self.file!r}, {self.offset})"


def format_head(loc, severity: str, message: str) -> str:
    """One diagnostic line in the format of the module docstring."""
    if isinstance(loc, ByteOffsetLoc):
        return f"{loc.file}: {severity}: {message} (at byte offset {loc.offset})"
    if isinstance(loc, FileLoc):
        return f"{loc.file}: {severity}: {message}"
    flc = file_line_col(loc)
    if flc is None:
        return f"{severity}: {message}"
    return f"{flc.file}:{flc.line}:{flc.col}: {severity}: {message}"


def file_line_col(loc: Optional[Location]) -> Optional[FileLineColLoc]:
    """The first file:line:col inside a (possibly nested) location."""
    if loc is None:
        return None
    if isinstance(loc, FileLineColLoc):
        return loc
    if isinstance(loc, NameLoc):
        return file_line_col(loc.child)
    if isinstance(loc, CallSiteLoc):
        return file_line_col(loc.callee)
    if isinstance(loc, FusedLoc):
        for sub in loc.locations:
            found = file_line_col(sub)
            if found is not None:
                return found
        return None
    if isinstance(loc, DILocAttr):
        return loc.source
    return None


def format_location(loc: Optional[Location]) -> str:
    flc = file_line_col(loc)
    if flc is None:
        return "loc(unknown)" if isinstance(loc, UnknownLoc) or loc is None else "<unknown>"
    return f"{flc.file}:{flc.line}:{flc.col}"


#: tileiras's exit codes, the exit class of every :class:`CompileError` (docs/tileiras_shim.md)
EXIT_USAGE = 1  # bad command line or arguments, unreadable input file
EXIT_CONFIG = 2  # missing/unsupported target, invalid option value, unwritable output
EXIT_INPUT = 3  # not Tile IR (bad bytecode, unparsable text) or fails verification
EXIT_COMPILE = 5  # a valid module the compiler cannot compile


class CompileError(Exception):
    """A compile failed. ``diagnostics``: the errors (``.format()`` each); ``exit_code``: one of
    the ``EXIT_*`` classes; ``stage``: the driver stage that failed (``options``, ``target``,
    ``read``, ``verify``, a pass stage, ``ptx``, ``ptxas``, ``internal``)."""

    def __init__(self, diagnostics, exit_code: int = EXIT_COMPILE, stage: str = "internal"):
        self.diagnostics = list(diagnostics)
        self.exit_code = exit_code
        self.stage = stage
        super().__init__("\n".join(d.format() for d in self.diagnostics))


class DiagnosticError(Exception):
    """Raised to abort parsing/verification after a diagnostic was emitted."""

    def __init__(self, diag: Diagnostic):
        super().__init__(diag.message)
        self.diag = diag
        #: Errors reported before ``diag`` by the same failing step (reported first).
        self.preceding: list[Diagnostic] = []


class DiagnosticEngine:
    """Collects diagnostics; an optional handler sees each one as it is emitted."""

    def __init__(self, handler: Optional[Callable[[Diagnostic], None]] = None):
        self.diagnostics: list[Diagnostic] = []
        self.handler = handler

    def emit(self, severity: str, message: str, loc: Optional[Location] = None) -> Diagnostic:
        d = Diagnostic(severity, message, loc)
        self.diagnostics.append(d)
        if self.handler is not None:
            self.handler(d)
        return d

    def error(self, message: str, loc: Optional[Location] = None) -> Diagnostic:
        return self.emit("error", message, loc)

    def warning(self, message: str, loc: Optional[Location] = None) -> Diagnostic:
        return self.emit("warning", message, loc)

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    def print_all(self, stream=None) -> None:
        stream = stream or sys.stderr
        for d in self.diagnostics:
            print(d.format(), file=stream)


def op_error_prefix(op_name: str) -> str:
    """MLIR's prefix for an op diagnostic: ``'cuda_tile.addf' op ``."""
    return f"'{op_name}' op "
