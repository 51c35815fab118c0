"""Debug-info passes: ``synthesize-debug-info-scopes`` and NVIDIA's test pass
``test-debuginfo-update-symbol-name`` (reference/canonicalization.md 3.3, 3.4)."""

from __future__ import annotations

import os
from typing import Callable, Optional

from tilegen.runtime import records
from tilegen.runtime.attributes import (
    Attribute,
    CallSiteLoc,
    DICompileUnitAttr,
    DIFileAttr,
    DILexicalBlockAttr,
    DILocAttr,
    DISubprogramAttr,
    FileLineColLoc,
    FusedLoc,
    NameLoc,
    OpaqueLoc,
    StringAttr,
    SymbolRefAttr,
    UnknownLoc,
)
from tilegen.runtime.diagnostics import Diagnostic, op_error_prefix
from tilegen.runtime.ir import Operation
from tilegen.runtime.passes.registry import FUNCTIONS, PassFailure, parse_bool, register


def map_attr(attr, fn: Callable[[Attribute], Optional[Attribute]]):
    """Rebuild ``attr`` bottom-up through locations and debug-info scopes; ``fn`` returns a
    replacement for a node or None to keep it (children are rebuilt first)."""
    if isinstance(attr, DILocAttr):
        attr = DILocAttr(map_attr(attr.source, fn), map_attr(attr.scope, fn))
    elif isinstance(attr, DILexicalBlockAttr):
        attr = records.replace(attr, scope=map_attr(attr.scope, fn))
    elif isinstance(attr, FusedLoc):
        attr = FusedLoc(tuple(map_attr(a, fn) for a in attr.locations), attr.metadata)
    elif isinstance(attr, NameLoc) and attr.child is not None:
        attr = NameLoc(attr.name, map_attr(attr.child, fn))
    elif isinstance(attr, CallSiteLoc):
        attr = CallSiteLoc(map_attr(attr.callee, fn), map_attr(attr.caller, fn))
    new = fn(attr)
    return attr if new is None else new


def map_locations(root: Operation, fn) -> None:
    """Apply :func:`map_attr` to the location of every op (and block argument) under ``root``."""
    for op in root.walk():
        op.loc = map_attr(op.loc, fn)
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    if arg.loc is not None:
                        arg.loc = map_attr(arg.loc, fn)


# --------------------------------------------------------------------------- symbol renaming


def _sym(op: Operation) -> Optional[str]:
    a = op.attributes.get("sym_name")
    return a.value if isinstance(a, StringAttr) else None


def lookup_path(root: Operation, path: str) -> Optional[Operation]:
    """``kernels::test_func`` -> the op found by symbol names, one nesting level each."""
    cur: Optional[Operation] = root
    for part in path.split("::"):
        part = part.lstrip("@")
        nxt = None
        for region in cur.regions:
            for block in region.blocks:
                for child in block.ops:
                    if _sym(child) == part:
                        nxt = child
                    elif child.name == "builtin.module" and nxt is None and _sym(child) is None:
                        pass
        if nxt is None and cur is root:  # descend through an implicit builtin.module
            for region in cur.regions:
                for block in region.blocks:
                    for child in block.ops:
                        if child.name == "builtin.module":
                            found = lookup_path(child, part)
                            nxt = nxt or found
        if nxt is None:
            return None
        cur = nxt
    return cur


def _encloses(scope: Operation, op: Operation) -> bool:
    cur: Optional[Operation] = op
    while cur is not None:
        if cur is scope:
            return True
        cur = cur.parent_op
    return False


def update_symbol_name(
    symbol: Operation, new_name: str, update_uses: bool, scope: Operation
) -> None:
    """Rename ``symbol`` (and its uses under ``scope``) and the linkage name of its
    di_subprogram everywhere under ``scope``."""
    if not _encloses(scope, symbol):
        diag = Diagnostic(
            "error",
            op_error_prefix(symbol.name)
            + "attempted to update symbol names in a scope that did not enclose the symbol itself",
            symbol.loc,
        )
        diag.attach_note("scope defined here", scope.loc)
        raise PassFailure([diag])
    old = _sym(symbol)
    symbol.set_attr("sym_name", StringAttr(new_name))
    if update_uses and old is not None:
        for op in scope.walk():
            for key, value in list(op.attributes.items()):
                if isinstance(value, SymbolRefAttr) and old in (value.root, *value.nested):
                    if value.nested and value.nested[-1] == old:
                        value = SymbolRefAttr(value.root, value.nested[:-1] + (new_name,))
                    elif value.root == old and not value.nested:
                        value = SymbolRefAttr(new_name)
                    op.set_attr(key, value)
    loc = symbol.loc
    if isinstance(loc, DILocAttr) and isinstance(loc.scope, DISubprogramAttr):
        old_sp = loc.scope
        new_sp = records.replace(old_sp, linkage_name=new_name)
        map_locations(scope, lambda a: new_sp if a == old_sp else None)


@register(
    "test-debuginfo-update-symbol-name",
    options={
        "symbol-to-rename": (str, ""),
        "new-name": (str, ""),
        "update-uses": (parse_bool, False),
        "scope": (str, ""),
    },
    summary="test pass: rename a symbol and the linkage name of its di_subprogram",
)
def test_update_symbol_name(root: Operation, options: dict) -> None:
    def fail(message: str) -> None:
        raise PassFailure([Diagnostic("error", message, root.loc)])

    symbol = lookup_path(root, options["symbol-to-rename"])
    if symbol is None:
        fail(f"could not find symbol '{options['symbol-to-rename']}'")
    scope = root
    if options["scope"]:
        scope = lookup_path(root, options["scope"])
        if scope is None:
            fail(f"could not find scope '{options['scope']}'")
    update_symbol_name(symbol, options["new-name"], options["update-uses"], scope)


# --------------------------------------------------------------------------- synthesize scopes


def file_loc(loc) -> Optional[FileLineColLoc]:
    """The FileLineColLoc inside ``loc``, looking through name, fused and call-site (caller)."""
    if isinstance(loc, FileLineColLoc):
        return loc
    if isinstance(loc, NameLoc):
        return file_loc(loc.child)
    if isinstance(loc, CallSiteLoc):
        return file_loc(loc.caller)
    if isinstance(loc, FusedLoc):
        for inner in loc.locations:
            found = file_loc(inner)
            if found is not None:
                return found
    if isinstance(loc, DILocAttr):
        return loc.source
    return None


def _has_di_loc(loc) -> bool:
    if isinstance(loc, DILocAttr):
        return True
    if isinstance(loc, FusedLoc):
        return any(_has_di_loc(x) for x in loc.locations)
    if isinstance(loc, NameLoc):
        return _has_di_loc(loc.child)
    if isinstance(loc, CallSiteLoc):
        return _has_di_loc(loc.callee) or _has_di_loc(loc.caller)
    return False


def di_file(loc: Optional[FileLineColLoc]) -> DIFileAttr:
    if loc is None:
        return DIFileAttr("<unknown>", "")
    return DIFileAttr(os.path.basename(loc.file), os.path.dirname(loc.file))


@register(
    "synthesize-debug-info-scopes",
    anchors=("cuda_tile.module",),
    summary="give functions with only file locations a di_subprogram scope",
)
def synthesize_debug_info_scopes(module: Operation, options: dict) -> None:
    cu_file = di_file(file_loc(module.loc))
    cu = DICompileUnitAttr(cu_file)
    for region in module.regions:
        for block in region.blocks:
            for fn in block.ops:
                if fn.name in FUNCTIONS and not _has_di_loc(fn.loc):
                    _synthesize(fn, cu)


def _synthesize(fn: Operation, cu: DICompileUnitAttr) -> None:
    fn_loc = file_loc(fn.loc)
    line = fn_loc.line if fn_loc is not None else 1
    name = _sym(fn) or ""
    sp = DISubprogramAttr(
        file=di_file(fn_loc) if fn_loc is not None else cu.file,
        line=line,
        name=name,
        linkage_name=name,
        compile_unit=cu,
        scope_line=line,
    )
    default = fn_loc or FileLineColLoc(cu.file.name, line, 0)
    for op in fn.walk():
        op.loc = DILocAttr(file_loc(op.loc) or default, sp)
