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

#: DW_AT_producer of ``-g``'s compile unit
PRODUCER = "tilegen"


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
        self.strings: dict[str, str] = {}
        self.kernels: list[tuple[str, str, int, int]] = (
            []
        )  # -g: (symbol, name, file, line)  # .debug_str entries (inlined functions' names)

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

    def subprogram(self, func, symbol: str) -> int:
        """Record kernel ``symbol`` for ``-g``'s ``.debug_info``; its number N names the labels
        ``$L__func_beginN`` / ``$L__func_endN`` around its body."""
        entry = entry_source(func)
        name = symbol
        loc = func.loc
        if isinstance(loc, DILocAttr) and isinstance(loc.scope, DISubprogramAttr):
            name = loc.scope.name or symbol
        file = self.index(entry[0]) if entry is not None else 0
        self.kernels.append((symbol, name, file, entry[1] if entry is not None else 0))
        return len(self.kernels) - 1

    def debug_sections(self) -> list[str]:
        """``-g``: DWARF 2 ``.debug_abbrev`` and ``.debug_info`` (a compile unit with one
        subprogram per kernel; ptxas derives ``.debug_line`` from the ``.loc``s), the layout
        tileiras 13.5 emits, with ``decl_line`` as data4."""
        abbrev = [1, 0x11, 1, 0x25, 0x08, 0x13, 0x05, 0x03, 0x08, 0x10, 0x06, 0x11, 0x01, 0, 0]
        abbrev += [2, 0x2E, 0, 0x11, 0x01, 0x12, 0x01, 0x40, 0x0A, 0x87, 0x40, 0x08, 0x03, 0x08]
        abbrev += [0x3A, 0x0B, 0x3B, 0x06, 0x3F, 0x0C, 0, 0, 0]
        cu_name = next(iter(self.files), "<unknown>")
        items: list = []  # ints (bytes) and (".b32"/".b64", operand) pairs

        def text(s: str) -> None:
            items.extend(s.encode() + b"\0")

        items.append(1)
        text(PRODUCER)
        items += [2, 0]  # DW_LANG_C, as tileiras
        text(cu_name)
        items += [(".b32", ".debug_line"), (".b64", "0")]
        for n, (symbol, name, file, line) in enumerate(self.kernels):
            items += [2, (".b64", f"$L__func_begin{n}"), (".b64", f"$L__func_end{n}"), 1, 0x9C]
            text(symbol)
            text(name)
            items += [file & 0xFF, (".b32", str(line)), 1]
        items.append(0)
        size = 7 + sum(1 if isinstance(x, int) else int(x[0][2:]) // 8 for x in items)
        out = ["\t.section\t.debug_abbrev", "\t{"] + [f".b8 {b}" for b in abbrev] + ["\t}"]
        out += ["\t.section\t.debug_info", "\t{", f".b32 {size}", ".b8 2", ".b8 0"]
        out += [".b32 .debug_abbrev", ".b8 8"]
        out += [f".b8 {x}" if isinstance(x, int) else f"{x[0]} {x[1]}" for x in items]
        return out + ["\t}"]

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
