"""Compile rewrite rows (the one row language of spec/lowerings/*.yaml; see :mod:`row_check`)
into :class:`Pattern` objects, for canonicalization and dialect conversion alike.

A :class:`RowLanguage` says what differs between the two: the dialects bare names belong to,
how result types are converted, which discardable attributes travel, how a ``custom:`` name
resolves and how the op that replaces the root is created.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence

from tilegen.runtime.attributes import (
    Attribute,
    DenseArrayAttr,
    DenseElementsAttr,
    EnumAttr,
    IntegerAttr,
    UnitAttr,
    fastmath_attr,
    fastmath_flags,
)
from tilegen.runtime.ir import Operation, Value
from tilegen.runtime.opdef import AttrDef, OpDef, all_ops, lookup_enum, lookup_opdef
from tilegen.runtime.records import dataclass
from tilegen.runtime.rewrite import ir_utils as U
from tilegen.runtime.rewrite.pattern import Pattern, RewriteFn
from tilegen.runtime.rewrite.row_check import (
    OpShape,
    RowError,
    RowScope,
    check_row,
    full,
    op_label,
)
from tilegen.runtime.rewrite.rewriter import PatternRewriter
from tilegen.runtime.types import IntegerType, Type

#: ``create(rw, root, name, groups, attributes, result_types) -> replacement values``
CreateFn = Callable[[PatternRewriter, Operation, str, list, dict, list], list]


@dataclass
class RowLanguage:
    """How one rows file compiles: its scope (file, source and target dialects) and hooks."""

    scope: RowScope
    #: ``custom:`` name -> pattern function (None: not defined)
    custom: Callable[[str], Optional[RewriteFn]]
    #: result types of the root -> result types of its replacement
    convert_types: Callable[[Iterable[Type]], list] = list
    #: discardable attributes (by prefix) that travel to the replacement unchanged
    carry_prefixes: tuple = ()
    #: creates the op that replaces the root (default: :func:`create_op`)
    create: Optional[CreateFn] = None


# --------------------------------------------------------------------------- the OpDef index


class RuntimeIndex:
    """:class:`row_check.OpIndex` over the registered OpDefs."""

    _dialects: Optional[set] = None

    def op(self, name: str) -> Optional[OpShape]:
        od = lookup_opdef(name)
        if od is None:
            return None
        return OpShape(
            od.name,
            tuple(o.name for o in od.operands),
            {a.name: a.enum for a in od.attributes},
            tuple(od.traits),
        )

    def dialects(self) -> set[str]:
        if self._dialects is None:
            self._dialects = {od.dialect for od in all_ops()}
        return self._dialects

    def enum_cases(self, enum: str) -> Optional[set[str]]:
        e = lookup_enum(enum)
        return None if e is None else {c.keyword for c in e.cases}


RUNTIME_INDEX = RuntimeIndex()


# --------------------------------------------------------------------------- attributes


def enum_keyword(attr: Attribute, adef: Optional[AttrDef]) -> Optional[str]:
    """The keyword of an enum attribute (EnumAttr, or an i32 IntegerAttr of ``adef``'s enum)."""
    if isinstance(attr, EnumAttr):
        enum = lookup_enum(attr.enum)
        return enum.keyword(attr.value) if enum else None
    if isinstance(attr, IntegerAttr) and adef is not None and adef.enum:
        enum = lookup_enum(adef.enum)
        return enum.keyword(attr.value) if enum else None
    return None


def enum_attr(enum_name: str, keyword: str) -> Optional[Attribute]:
    """``keyword`` of ``enum_name`` in that enum's storage (i32 IntegerAttr or EnumAttr)."""
    enum = lookup_enum(enum_name)
    value = enum.value(keyword) if enum else None
    if value is None:
        return None
    return (
        IntegerAttr(value, IntegerType(32)) if enum.storage == "i32" else EnumAttr(enum_name, value)
    )


def convert_attr(
    attr: Attribute, src: Optional[AttrDef], dst: Optional[AttrDef], cases: Optional[dict] = None
) -> Optional[Attribute]:
    """``attr`` (of source attribute ``src``) as the target attribute ``dst`` expects it: enums
    re-encoded by keyword (through ``cases``), integers retyped to ``dst``'s width."""
    if dst is not None and dst.kind in ("i32", "i64") and isinstance(attr, IntegerAttr):
        return IntegerAttr(attr.value, IntegerType(int(dst.kind[1:])))
    if dst is None or not dst.enum:
        return attr
    kw = enum_keyword(attr, src)
    if kw is None:
        return attr
    return enum_attr(dst.enum, (cases or {}).get(kw, kw))


def build_attributes(
    op: Operation,
    tgt: Optional[OpDef],
    mapping: Optional[dict] = None,
    spent: Iterable[str] = (),
    defaults: Optional[dict] = None,
    carry: bool = True,
    prefixes: tuple = (),
) -> dict:
    """The replacement's attributes: ``mapping`` (target name -> source name, ``{from, cases}``
    or ``{enum, case}``) first; with ``carry``, every other attribute of ``op`` the target
    declares by the same name (re-encoded), or whose name starts with one of ``prefixes``
    (everything, for a target without an OpDef); ``spent`` ones are not carried; then
    ``defaults`` for target attributes still missing."""
    src = op.opdef
    out: dict[str, Attribute] = {}
    used = set(spent)
    for name, how in (mapping or {}).items():
        if isinstance(how, dict) and "enum" in how:
            value = enum_attr(how["enum"], how["case"])
            if value is not None:
                out[name] = value
            continue
        origin, cases = (how, None) if isinstance(how, str) else (how["from"], how.get("cases"))
        used.add(origin)
        if origin in op.attributes:
            src_def = src.attr(origin) if src else None
            dst_def = tgt.attr(name) if tgt else None
            value = convert_attr(op.attributes[origin], src_def, dst_def, cases)
            if value is not None:
                out[name] = value
    if carry:
        for name, value in op.attributes.items():
            if name in used or name in out or name == "operandSegmentSizes":
                continue
            if tgt is None:
                out[name] = value
            elif tgt.attr(name) is not None:
                converted = convert_attr(value, src.attr(name) if src else None, tgt.attr(name))
                if converted is not None:
                    out[name] = converted
            elif name.startswith(prefixes):
                out[name] = value  # discardable attributes of the target contract travel as is
    for name, default in (defaults or {}).items():
        if name in out:
            continue
        adef = tgt.attr(name) if tgt else None
        if adef is not None and adef.enum:
            out[name] = enum_attr(adef.enum, default)
        elif isinstance(default, bool):
            if default:
                out[name] = UnitAttr()
        else:
            out[name] = IntegerAttr(int(default), IntegerType(32))
    return out


def fastmath_of(op: Operation, how: Optional[dict], attrs: dict) -> Optional[Attribute]:
    """``fastmath: {from: A, cases: {keyword: flags}}``: the flags the keyword of source
    attribute A (its default when absent) maps to, joined with any fastmath already carried.
    None when there is no such key."""
    if how is None:
        return None
    carried = fastmath_flags(attrs.get("fastmath") or op.attributes.get("fastmath"))
    src = op.opdef.attr(how["from"]) if op.opdef else None
    attr = op.attributes.get(how["from"])
    kw = None if attr is None else enum_keyword(attr, src)
    if kw is None and src is not None and src.default is not None:
        kw = str(src.default)
    extra = how["cases"].get(kw or "absent", "")
    return fastmath_attr(set(carried) | {f for f in extra.split(",") if f})


def segment_attr(tgt: Optional[OpDef], groups: Sequence[Sequence[Value]]) -> dict:
    """``operandSegmentSizes`` for a target with AttrSizedOperandSegments (the trailing token
    group of TrailingTokenOperand ops is not counted)."""
    if tgt is None or not tgt.has_attr_sized_segments:
        return {}
    sizes = [len(g) for g in groups[: len(tgt.segmented_operands)]]
    return {"operandSegmentSizes": DenseArrayAttr(IntegerType(32), tuple(sizes))}


def create_op(
    rw: PatternRewriter, root: Operation, name: str, groups: list, attrs: dict, types: list
) -> list[Value]:
    """Create op ``name`` at the insertion point from operand groups (segment sizes added)."""
    attrs = dict(attrs)
    attrs.update(segment_attr(lookup_opdef(name), groups))
    operands = [v for g in groups for v in g]
    return list(rw.create(name, operands, list(types), attrs, root.loc).results)


# --------------------------------------------------------------------------- matching


def _group(op: Operation, name: str) -> Optional[list[Value]]:
    od = op.opdef
    if od is None:
        return None
    decl = next((o for o in od.operands if o.name == name), None)
    if decl is None:
        return None
    group = list(od.operand_group(op, name))
    if decl.kind == "single" and len(group) != 1:
        return None
    return group


def resolve(op: Operation, ref: Optional[str]) -> Optional[list[Value]]:
    """The values an operand ref stands for: ``None`` an empty group, ``lhs`` the root's
    operand group, ``lhs.rhs`` operand ``rhs`` of the op defining ``lhs``."""
    if ref is None:
        return []
    head, _, tail = ref.partition(".")
    group = _group(op, head)
    if group is None or not tail:
        return group
    if len(group) != 1:
        return None
    d = U.defining_op(group[0])
    return _group(d, tail) if d is not None else None


def single(op: Operation, ref: str) -> Optional[Value]:
    vals = resolve(op, ref)
    return vals[0] if vals is not None and len(vals) == 1 else None


def _attr_or_default(op: Operation, name: str):
    if name in op.attributes:
        return op.attributes[name]
    a = op.opdef.attr(name) if op.opdef is not None else None
    return ("default", a.default) if a is not None else None


def holds(root: Operation, cond: dict, dialect: str) -> bool:
    """One ``where`` condition of a row."""
    v = single(root, cond["operand"])
    if v is None:
        return False
    d = U.defining_op(v)
    if "defined_by" in cond and (d is None or d.name != full(cond["defined_by"], dialect)):
        return False
    if "not_defined_by" in cond and d is not None:
        if d.name == full(cond["not_defined_by"], dialect):
            return False
    if cond.get("one_use") and v.num_uses != 1:
        return False
    for attr in cond.get("same_attributes", ()):
        if d is None or _attr_or_default(d, attr) != _attr_or_default(root, attr):
            return False
    if "const" in cond:
        c = cond["const"]
        ok = U.is_const_bool(v, c) if isinstance(c, bool) else U.is_const_int(v, c)
        if not ok:
            return False
    if "same_as" in cond and single(root, cond["same_as"]) is not v:
        return False
    return True


def select_op(op: Operation, spec, dialect: str) -> Optional[str]:
    """The op a build's ``op`` names for ``op``: a name, or the case of attribute ``by``'s
    keyword (``present``/``absent`` for a unit or missing attribute); None: no case."""
    if isinstance(spec, str):
        return full(spec, dialect)
    attr = op.attributes.get(spec["by"])
    if attr is None:
        key = "absent"
    elif isinstance(attr, UnitAttr):
        key = "present"
    else:
        key = enum_keyword(attr, op.opdef.attr(spec["by"]) if op.opdef else None) or "present"
    chosen = spec["cases"].get(key, spec.get("default"))
    return full(chosen, dialect) if chosen else None


def _ready(op: Operation, b: dict, dialect: str) -> bool:
    """Whether every ref of build ``b`` resolves and every ``by`` has a case (nothing built)."""
    if "constant" in b:
        return single(op, b["type_of"]) is not None
    if select_op(op, b["op"], dialect) is None:
        return False
    for item in b.get("operands") or ():
        if isinstance(item, dict):
            if not _ready(op, item, dialect):
                return False
        elif item != "*" and resolve(op, item) is None:
            return False
    rt = b.get("result_type")
    return rt in (None, "root") or single(op, rt) is not None


# --------------------------------------------------------------------------- building


def _groups(op: Operation, b: dict, rw: PatternRewriter, lang: RowLanguage) -> list[list[Value]]:
    items = b.get("operands")
    if items is None:
        od = op.opdef
        if od is None:
            return [[v] for v in op.operands]
        return [list(od.operand_group(op, o.name)) for o in od.operands]
    out: list[list[Value]] = []
    for item in items:
        if isinstance(item, dict):
            out.append(_emit(op, item, rw, lang, top=False))
        elif item == "*":
            out.extend([[v] for v in op.operands])
        else:
            out.append(resolve(op, item))
    return out


def _emit(op: Operation, b: dict, rw: PatternRewriter, lang: RowLanguage, top: bool, drop=()):
    scope = lang.scope
    if "constant" in b:
        like = single(op, b["type_of"])
        attr = DenseElementsAttr(like.type, (int(b["constant"]),))
        name = full("constant", scope.target)
        return list(rw.create(name, [], [like.type], {"value": attr}, op.loc).results)
    name = select_op(op, b["op"], scope.target)
    groups = _groups(op, b, rw, lang)
    tgt = lookup_opdef(name)
    if b.get("attributes") == "copy":
        attrs = dict(op.attributes)
    else:
        spent = set(drop) | ({b["op"]["by"]} if isinstance(b["op"], dict) else set())
        attrs = build_attributes(
            op, tgt, b.get("attributes"), spent, b.get("defaults"), top, lang.carry_prefixes
        )
        fm = fastmath_of(op, b.get("fastmath"), attrs)
        if fm is not None:
            attrs["fastmath"] = fm
    rt = b.get("result_type", "root" if top else None)
    if rt == "root":
        types = lang.convert_types(r.type for r in op.results)
    else:
        like = single(op, rt) if rt else (groups[0][0] if groups and groups[0] else None)
        types = lang.convert_types([like.type]) if like is not None else []
    make = lang.create if top and lang.create is not None else create_op
    return make(rw, op, name, groups, attrs, types)


def compile_row(row: dict, lang: RowLanguage, key: str, check: bool = True) -> Optional[Pattern]:
    """The pattern of one row (None for ``unsupported:``); ``check`` runs :func:`check_row`
    against the registered OpDefs first."""
    scope = lang.scope
    if check:
        check_row(row, scope, RUNTIME_INDEX, key)
    root = full(row["root"], scope.source)
    od = lookup_opdef(root)
    root = od.name if od is not None else root
    benefit = row.get("benefit", 1)
    if "unsupported" in row:
        return None
    if "custom" in row:
        fn = lang.custom(row["custom"])
        if fn is None:
            raise RowError(scope.file, f"{key}.custom", f"no pattern named '{row['custom']}'")
        return Pattern(row["custom"], root, fn, benefit)
    where, build, drop = row.get("where", ()), row["build"], tuple(row.get("drop", ()))

    def rewrite(op: Operation, rw: PatternRewriter) -> bool:
        if not all(holds(op, c, scope.source) for c in where):
            return False
        if not _ready(op, build, scope.target):
            return False
        rw.set_insertion_point(op)
        rw.replace_op(op, _emit(op, build, rw, lang, top=True, drop=drop))
        return True

    name = row.get("name") or f"{row['root']}->{op_label(build['op'])}"
    return Pattern(name, root, rewrite, benefit)
