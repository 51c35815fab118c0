"""Diagnostics: located errors, warnings, notes and remarks, printed as MLIR prints them.

``FILE:LINE:COL: error: 'cuda_tile.addf' op <message>``. A :class:`DiagnosticEngine` collects
them; tools either print them or (``--verify-diagnostics``) match them against expectations.
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
from tilegen.runtime.limits import MAX_QUOTED, clip_words
from tilegen.runtime.records import dataclass, field


@dataclass
class Diagnostic:
    severity: str  # "error" | "warning" | "note" | "remark"
    message: str
    loc: Optional[Location] = None
    notes: list["Diagnostic"] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.message) > MAX_QUOTED:  # a 1 MB identifier is not quoted whole
            self.message = clip_words(self.message)

    def attach_note(self, message: str, loc: Optional[Location] = None) -> "Diagnostic":
        note = Diagnostic("note", message, loc)
        self.notes.append(note)
        return note

    def format(self) -> str:
        lines = [f"{format_location(self.loc)}: {self.severity}: {self.message}"]
        for n in self.notes:
            lines.append(f"{format_location(n.loc or self.loc)}: {n.severity}: {n.message}")
        return "\n".join(lines)


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
