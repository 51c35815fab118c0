"""Compile declared pattern rows (spec/lowerings/*.yaml, rendered to generated/lowerings/) into
:class:`Pattern` objects; ``custom:`` rows resolve to functions of ``custom_patterns``."""

from __future__ import annotations

import importlib
from typing import Optional

from tilegen.runtime.ir import Operation, Value
from tilegen.runtime.rewrite import custom_patterns, folders as folder_fns
from tilegen.runtime.rewrite import ir_utils as U
from tilegen.runtime.rewrite.pattern import Pattern, PatternSet
from tilegen.runtime.rewrite.rewriter import PatternRewriter


class PatternSpecError(Exception):
    """A declared row names something that does not exist."""


def _full(name: str, dialect: str) -> str:
    return name if "." in name else f"{dialect}.{name}"


def _operand(op: Operation, name: str) -> Optional[Value]:
    if op.opdef is None:
        return None
    group = op.opdef.operand_group(op, name)
    return group[0] if len(group) == 1 else None


def _resolve(root: Operation, ref: str) -> Optional[Value]:
    """``lhs`` -> root's operand; ``lhs.rhs`` -> operand ``rhs`` of the op defining ``lhs``."""
    head, _, tail = ref.partition(".")
    v = _operand(root, head)
    if v is None or not tail:
        return v
    d = U.defining_op(v)
    return _operand(d, tail) if d is not None else None


def _attr_or_default(op: Operation, name: str):
    if name in op.attributes:
        return op.attributes[name]
    a = op.opdef.attr(name) if op.opdef is not None else None
    return ("default", a.default) if a is not None else None


def _check(root: Operation, cond: dict, dialect: str) -> bool:
    v = _resolve(root, cond["operand"])
    if v is None:
        return False
    d = U.defining_op(v)
    if "defined_by" in cond and (d is None or d.name != _full(cond["defined_by"], dialect)):
        return False
    if (
        "not_defined_by" in cond
        and d is not None
        and d.name == _full(cond["not_defined_by"], dialect)
    ):
        return False
    if cond.get("one_use") and len(v.uses) != 1:
        return False
    for attr in cond.get("same_attributes", ()):
        if d is None or _attr_or_default(d, attr) != _attr_or_default(root, attr):
            return False
    if "const" in cond:
        c = cond["const"]
        ok = U.is_const_bool(v, c) if isinstance(c, bool) else U.is_const_int(v, c)
        if not ok:
            return False
    if "same_as" in cond and _resolve(root, cond["same_as"]) is not v:
        return False
    return True


def _build(root: Operation, spec: dict, rw: PatternRewriter, dialect: str, top: bool) -> Value:
    operands = []
    for item in spec["operands"]:
        v = (
            _build(root, item, rw, dialect, False)
            if isinstance(item, dict)
            else _resolve(root, item)
        )
        assert v is not None, item
        operands.append(v)
    attrs = spec.get("attributes", {})
    if attrs == "copy":
        attributes = dict(root.attributes)
    else:
        attributes = {
            new: root.attributes[old] for new, old in attrs.items() if old in root.attributes
        }
    rt = spec.get("result_type", "root" if top else None)
    if rt == "root":
        rtype = root.results[0].type
    else:
        rtype = (_resolve(root, rt) if rt else operands[0]).type
    op = rw.create(_full(spec["op"], dialect), operands, [rtype], attributes, root.loc)
    return op.results[0]


def _refs(spec: dict) -> list[str]:
    out = []
    for item in spec["operands"]:
        out.extend(_refs(item) if isinstance(item, dict) else [item])
    return out


def declared_pattern(row: dict, dialect: str) -> Pattern:
    """A pattern for one declared row: all ``where`` conditions hold -> build, replace root."""
    where = row.get("where", [])
    build = row["build"]
    refs = _refs(build)

    def rewrite(op: Operation, rw: PatternRewriter) -> bool:
        if len(op.results) != 1 or not all(_check(op, c, dialect) for c in where):
            return False
        if any(_resolve(op, r) is None for r in refs):
            return False
        rw.set_insertion_point(op)
        new = _build(op, build, rw, dialect, True)
        rw.replace_op(op, [new])
        return True

    return Pattern(row["name"], _full(row["root"], dialect), rewrite, row.get("benefit", 1))


def load_patterns(module_name: str) -> PatternSet:
    """The pattern set of ``generated/lowerings/<module_name>.py`` plus every declared folder."""
    try:
        mod = importlib.import_module(f"tilegen.generated.lowerings.{module_name}")
    except ImportError as e:
        raise PatternSpecError(f"no generated pattern file '{module_name}' ({e})") from None
    out = PatternSet()
    for _group, rows in mod.GROUPS:
        for row in rows:
            if "custom" in row:
                fn = getattr(custom_patterns, row["custom"], None)
                if fn is None:
                    raise PatternSpecError(
                        f"{module_name}: custom pattern '{row['custom']}' is not defined in "
                        "runtime/rewrite/custom_patterns.py"
                    )
                out.add(
                    Pattern(
                        row["custom"], _full(row["root"], mod.DIALECT), fn, row.get("benefit", 1)
                    )
                )
            else:
                out.add(declared_pattern(row, mod.DIALECT))
    out.folders.update(declared_folders())
    return out


def declared_folders() -> dict:
    from tilegen.generated.lowerings.folders import FOLDERS

    table = {}
    for op, name in FOLDERS.items():
        fn = getattr(folder_fns, name, None)
        if fn is None:
            raise PatternSpecError(
                f"{op}: folder '{name}' is not defined in runtime/rewrite/folders.py"
            )
        table[op] = fn
    return table
