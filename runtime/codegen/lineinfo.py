"""PTX line information (``--lineinfo``, ``-g``): ``.loc`` directives from the ops' Tile IR
locations and the module's ``.file`` table.

Each op's location (a ``FileLineColLoc``, inside a ``DILocAttr``, ``NameLoc``, ``CallSiteLoc``
(the callee) or ``FusedLoc``; cuTile's bytecode gives one for every op) becomes ``.loc FILE LINE
COL`` before the op's instructions, when it differs from the previous one. The kernel's first
``.loc`` is its subprogram's line (``DISubprogramAttr.line``, the ``def`` line, as tileiras
emits it) where the entry carries one. The ``.file`` table follows the kernels, as in
tileiras's PTX; a file's name is ``DIFileAttr`` directory + name where the debug scope gives one,
else the location's file string.
"""

from __future__ import annotations

import os
from typing import Optional

from tilegen.runtime.attributes import CallSiteLoc, DILocAttr, DISubprogramAttr, NameLoc
from tilegen.runtime.diagnostics import file_line_col


def _quote(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def source_of(loc) -> Optional[tuple]:
    """(file, line, col, inlined) of a location, or None where it names no source position;
    ``inlined`` is None, or for a call site (cuTile inlines its ``_stub.py`` helpers) the
    callee's name and the caller's (file, line, col): PTX's ``function_name`` / ``inlined_at``."""
    if isinstance(loc, NameLoc) and loc.child is not None:
        return source_of(loc.child)
    if isinstance(loc, CallSiteLoc):
        callee, caller = _position(loc.callee), source_of(loc.caller)
        if callee is None:
            return caller
        if caller is None:
            return callee + (None,)
        scope = getattr(_di_loc(loc.callee), "scope", None)
        name = getattr(scope, "name", None) or "inlined"
        return callee + ((name,) + caller[:3],)
    pos = _position(loc)
    return None if pos is None else pos + (None,)


def _di_loc(loc):
    while isinstance(loc, (NameLoc, CallSiteLoc)):
        loc = loc.child if isinstance(loc, NameLoc) else loc.callee
    return loc if isinstance(loc, DILocAttr) else None


def _position(loc) -> Optional[tuple[str, int, int]]:
    flc = file_line_col(loc)
    if flc is None or not flc.file:
        return None
    name = flc.file
    scope = getattr(_di_loc(loc), "scope", None)
    difile = getattr(scope, "file", None)
    directory = getattr(difile, "directory", "") or ""
    if directory and getattr(difile, "name", None) == name and not os.path.isabs(name):
        name = directory.rstrip("/") + "/" + name
    return name, max(int(flc.line), 0), max(int(flc.col), 0)


def entry_source(func) -> Optional[tuple]:
    """The kernel's first position: its subprogram's ``def`` line, else its own location."""
    src = source_of(func.loc)
    if src is None:
        return None
    loc = func.loc
    if isinstance(loc, DILocAttr) and isinstance(loc.scope, DISubprogramAttr):
        return src[0], int(loc.scope.line), 0, None
    return src


class LineTable:
    """The ``.file`` numbering of one PTX module (shared by its kernels)."""

    def __init__(self) -> None:
        self.files: dict[str, int] = {}
        self.seen: set[tuple[int, int, int]] = set()  # positions a .loc has named
        self.strings: dict[str, str] = {}  # .debug_str entries (inlined functions' names)

    def index(self, name: str) -> int:
        if name not in self.files:
            self.files[name] = len(self.files) + 1
        return self.files[name]

    def directive(self, src: tuple) -> str:
        """The ``.loc`` line(s) for ``src``; an ``inlined_at`` position ptxas has not seen yet is
        given its own ``.loc`` first (ptxas requires it to precede)."""
        name, line, col, inlined = src
        text = f".loc\t{self.index(name)} {line} {col}"
        self.seen.add((self.index(name), line, col))
        if inlined is not None:
            fname, cfile, cline, ccol = inlined
            label = self.strings.setdefault(fname, f"$L__info_string{len(self.strings)}")
            at = (self.index(cfile), cline, ccol)
            text += f", function_name {label}, inlined_at {at[0]} {at[1]} {at[2]}"
            if at not in self.seen:
                self.seen.add(at)
                text = f".loc\t{at[0]} {at[1]} {at[2]}\n\t" + text
        return text

    def file_directives(self) -> list[str]:
        """The ``.file`` table and the ``.debug_str`` section the ``function_name``s point to."""
        out = [f"\t.file\t{i} {_quote(name)}" for name, i in self.files.items()]
        if self.strings:
            out += ["\t.section\t.debug_str", "\t{"]
            for text, label in self.strings.items():
                out.append(f"{label}:")
                out += [f".b8 {b}" for b in text.encode() + b"\0"]
            out.append("\t}")
        return out


__all__ = ["LineTable", "entry_source", "source_of"]
