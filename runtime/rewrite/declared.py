"""Load the declared pattern files (spec/lowerings/*.yaml of kind ``patterns``, rendered to
generated/lowerings/) as :class:`PatternSet` objects. Rows compile through the one row
language (:mod:`rows`); ``custom:`` rows resolve to functions of ``custom_patterns`` and
``fold:`` names to functions of ``folders``."""

from __future__ import annotations

import importlib
from typing import Optional

from tilegen.runtime.rewrite import custom_patterns, folders as folder_fns
from tilegen.runtime.rewrite.pattern import Pattern, PatternSet, RewriteFn
from tilegen.runtime.rewrite.row_check import RowError, RowScope
from tilegen.runtime.rewrite.rows import RowLanguage, compile_row

#: a declared row names something that does not exist (file and key in the message)
PatternSpecError = RowError


def custom_pattern(name: str) -> Optional[RewriteFn]:
    """The hand-written pattern ``custom: NAME`` of a pattern file (runtime/rewrite/
    custom_patterns.py), or None."""
    fn = getattr(custom_patterns, name, None)
    return fn if callable(fn) and not name.startswith("_") else None


def folder(name: str):
    """The folder ``fold: NAME`` of an op (runtime/rewrite/folders.py), or None."""
    fn = getattr(folder_fns, name, None)
    return fn if callable(fn) and not name.startswith("_") else None


def language(file: str, dialect: str) -> RowLanguage:
    """Pattern files rewrite within one dialect."""
    return RowLanguage(RowScope(file, dialect, dialect), custom_pattern)


def declared_pattern(row: dict, dialect: str) -> Pattern:
    """The pattern of one row built by hand (checked against the registered OpDefs)."""
    lang = language(f"pattern '{row.get('name') or row.get('custom')}'", dialect)
    return compile_row(row, lang, "")


def _module(module_name: str):
    try:
        return importlib.import_module(f"tilegen.generated.lowerings.{module_name}")
    except ImportError as e:
        raise PatternSpecError(
            f"generated/lowerings/{module_name}.py", "", f"no generated pattern file ({e})"
        ) from None


def _compile_group(mod, gi: int, rows) -> list[Pattern]:
    lang = language(getattr(mod, "FILE", mod.__name__), mod.DIALECT)
    out = []
    for ri, row in enumerate(rows):
        p = compile_row(row, lang, f"groups[{gi}].patterns[{ri}]")
        if p is not None:
            out.append(p)
    return out


def load_pattern_groups(module_name: str) -> list[tuple[str, PatternSet]]:
    """Each declared group of ``generated/lowerings/<module_name>.py`` as its own set, in the
    declared order (for drivers that run groups one after another; no folders)."""
    mod = _module(module_name)
    out = []
    for gi, (name, rows) in enumerate(mod.GROUPS):
        group = PatternSet()
        group.extend(_compile_group(mod, gi, rows))
        out.append((name, group))
    return out


def load_patterns(module_name: str) -> PatternSet:
    """The pattern set of ``generated/lowerings/<module_name>.py`` plus every declared folder."""
    mod = _module(module_name)
    out = PatternSet()
    for gi, (_group, rows) in enumerate(mod.GROUPS):
        out.extend(_compile_group(mod, gi, rows))
    out.folders.update(declared_folders())
    return out


def declared_folders() -> dict:
    from tilegen.generated.lowerings.folders import FOLDERS

    table = {}
    for op, name in FOLDERS.items():
        fn = folder(name)
        if fn is None:
            raise PatternSpecError(
                "spec/ops", f"{op}.fold", f"'{name}' is not defined in runtime/rewrite/folders.py"
            )
        table[op] = fn
    return table
