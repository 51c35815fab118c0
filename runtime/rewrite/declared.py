"""Compile declared pattern rows (spec/lowerings/*.yaml, rendered to generated/lowerings/) into
:class:`Pattern` objects; ``custom:`` rows resolve to functions of ``custom_patterns``."""

from __future__ import annotations

import importlib
from typing import Optional

from tilegen.runtime.attributes import DenseElementsAttr, EnumAttr
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


def _values(root: Operation, ref: str) -> Optional[list[Value]]:
    """Values a build operand ref stands for: ``*`` all root operands, a variadic group
    name its whole group, otherwise one value (see :func:`_resolve`)."""
    if ref == "*":
        return list(root.operands)
    if "." not in ref and root.opdef is not None:
        od = next((o for o in root.opdef.operands if o.name == ref), None)
        if od is not None and od.is_variadic:
            return list(root.opdef.operand_group(root, ref))
    v = _resolve(root, ref)
    return None if v is None else [v]


def _constant(root: Operation, spec: dict, rw: PatternRewriter) -> Value:
    like = _resolve(root, spec["type_of"])
    value = int(spec["constant"])
    attr = DenseElementsAttr(like.type, (value,))
    return rw.create(U.CONSTANT, [], [like.type], {"value": attr}, root.loc).results[0]


def _attributes(root: Operation, attrs) -> dict:
    if attrs == "copy":
        return dict(root.attributes)
    out = {}
    for new, old in (attrs or {}).items():
        if isinstance(old, dict):
            from tilegen.runtime.opdef import lookup_enum

            value = lookup_enum(old["enum"]).value(old["case"])
            out[new] = EnumAttr(old["enum"], value)
        elif old in root.attributes:
            out[new] = root.attributes[old]
    return out


def _build(
    root: Operation, spec: dict, rw: PatternRewriter, dialect: str, top: bool
) -> list[Value]:
    if "constant" in spec:
        return [_constant(root, spec, rw)]
    operands: list[Value] = []
    for item in spec["operands"]:
        vals = (
            _build(root, item, rw, dialect, False)
            if isinstance(item, dict)
            else _values(root, item)
        )
        assert vals is not None, item
        operands.extend(vals)
    rt = spec.get("result_type", "root" if top else None)
    if rt == "root":
        types = [r.type for r in root.results]
    else:
        types = [(_resolve(root, rt) if rt else operands[0]).type]
    attributes = _attributes(root, spec.get("attributes"))
    return rw.create(_full(spec["op"], dialect), operands, types, attributes, root.loc).results


def _refs(spec: dict) -> list[str]:
    if "constant" in spec:
        return [spec["type_of"]]
    out = []
    for item in spec["operands"]:
        out.extend(_refs(item) if isinstance(item, dict) else [item])
    return [r for r in out if r != "*"]


def _build_ops(spec: dict) -> list[str]:
    if "constant" in spec:
        return []
    out = [spec["op"]]
    for item in spec["operands"]:
        if isinstance(item, dict):
            out.extend(_build_ops(item))
    return out


def _check_enums(spec: dict, name: str) -> None:
    from tilegen.runtime.opdef import lookup_enum

    attrs = spec.get("attributes")
    for value in (attrs.values() if isinstance(attrs, dict) else ()):
        if isinstance(value, dict):
            enum = lookup_enum(value["enum"])
            if enum is None or enum.value(value["case"]) is None:
                raise PatternSpecError(f"pattern '{name}': no enum case {value}")
    for item in spec.get("operands", ()):
        if isinstance(item, dict):
            _check_enums(item, name)


def _check_row(row: dict, dialect: str) -> None:
    """Every op a declared row names must be registered; refs must name declared operands."""
    from tilegen.runtime.opdef import lookup_opdef

    root = lookup_opdef(_full(row["root"], dialect))
    if root is None:
        raise PatternSpecError(f"pattern '{row['name']}': unknown root op '{row['root']}'")
    for name in _build_ops(row["build"]):
        if lookup_opdef(_full(name, dialect)) is None:
            raise PatternSpecError(f"pattern '{row['name']}': unknown op '{name}' in build")
    _check_enums(row["build"], row["name"])
    operands = {o.name for o in root.operands}
    refs = _refs(row["build"]) + [c["operand"] for c in row.get("where", [])]
    for ref in refs:
        if ref.split(".")[0] not in operands:
            raise PatternSpecError(
                f"pattern '{row['name']}': '{ref}' is not an operand of '{row['root']}'"
            )


def declared_pattern(row: dict, dialect: str) -> Pattern:
    """A pattern for one declared row: all ``where`` conditions hold -> build, replace root."""
    _check_row(row, dialect)
    where = row.get("where", [])
    build = row["build"]
    refs = _refs(build)

    def rewrite(op: Operation, rw: PatternRewriter) -> bool:
        if not all(_check(op, c, dialect) for c in where):
            return False
        if any(_values(op, r) is None for r in refs):
            return False
        rw.set_insertion_point(op)
        rw.replace_op(op, _build(op, build, rw, dialect, True))
        return True

    return Pattern(row["name"], _full(row["root"], dialect), rewrite, row.get("benefit", 1))


def load_pattern_groups(module_name: str) -> list[tuple[str, PatternSet]]:
    """Each declared group of ``generated/lowerings/<module_name>.py`` as its own set, in the
    declared order (for drivers that run groups one after another; no folders)."""
    mod = _module(module_name)
    out = []
    for name, rows in mod.GROUPS:
        group = PatternSet()
        group.extend(_compile_rows(rows, mod.DIALECT, module_name))
        out.append((name, group))
    return out


def _module(module_name: str):
    try:
        return importlib.import_module(f"tilegen.generated.lowerings.{module_name}")
    except ImportError as e:
        raise PatternSpecError(f"no generated pattern file '{module_name}' ({e})") from None


def load_patterns(module_name: str) -> PatternSet:
    """The pattern set of ``generated/lowerings/<module_name>.py`` plus every declared folder."""
    mod = _module(module_name)
    out = PatternSet()
    for _group, rows in mod.GROUPS:
        out.extend(_compile_rows(rows, mod.DIALECT, module_name))
    out.folders.update(declared_folders())
    return out


def _compile_rows(rows, dialect: str, module_name: str) -> list[Pattern]:
    out = []
    for row in rows:
        if "custom" not in row:
            out.append(declared_pattern(row, dialect))
            continue
        fn = getattr(custom_patterns, row["custom"], None)
        if fn is None:
            raise PatternSpecError(
                f"{module_name}: custom pattern '{row['custom']}' is not defined in "
                "runtime/rewrite/custom_patterns.py"
            )
        out.append(Pattern(row["custom"], _full(row["root"], dialect), fn, row.get("benefit", 1)))
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
