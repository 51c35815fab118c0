"""Compile the conversion spec's rows into rewrite patterns.

A declared row renames its op: operand groups are taken in the listed order, attributes are
carried by name (or the row's ``attributes`` map), enum attributes are re-encoded by keyword into
the target's enum, result types go through the type converter. ``custom:`` rows resolve to
functions of :mod:`custom_patterns`; ``unsupported:`` rows match nothing (the op stays and the
conversion fails, naming it).
"""

from __future__ import annotations

from functools import partial
from typing import Optional, Sequence

from tilegen.runtime.attributes import (
    Attribute,
    DenseArrayAttr,
    EnumAttr,
    IntegerAttr,
    UnitAttr,
    fastmath_attr,
    fastmath_flags,
)
from tilegen.runtime.ir import Operation, Value
from tilegen.runtime.opdef import AttrDef, OpDef, lookup_enum, lookup_opdef
from tilegen.runtime.records import dataclass, field
from tilegen.runtime.rewrite import Pattern, PatternRewriter, PatternSet
from tilegen.runtime.conversion.types import convert_types
from tilegen.runtime.types import IntegerType, MemTokenType


class ConversionSpecError(Exception):
    """A conversion row names an op, operand, attribute or pattern that does not exist."""


@dataclass
class ConversionContext:
    """What every pattern may read: the spec, the target and per-run state."""

    spec: dict
    compute_capability: int
    #: unsupported op name -> reason (reported when the op is left over)
    unsupported: dict = field(default_factory=dict)
    #: id(block argument) -> the cuda_tile view type it had before its region was converted
    view_types: dict = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.spec["source"]

    @property
    def target(self) -> str:
        return self.spec["target"]

    def full(self, name: str, dialect: Optional[str] = None) -> str:
        return name if "." in name else f"{dialect or self.target}.{name}"


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
    """``attr`` (of source attribute ``src``) as the target attribute ``dst`` expects it."""
    if dst is not None and dst.kind in ("i32", "i64") and isinstance(attr, IntegerAttr):
        return IntegerAttr(attr.value, IntegerType(int(dst.kind[1:])))
    if dst is None or not dst.enum:
        return attr
    kw = enum_keyword(attr, src)
    if kw is None:
        return attr
    return enum_attr(dst.enum, (cases or {}).get(kw, kw))


def carried_attributes(op: Operation, tgt: OpDef, row: Optional[dict] = None) -> dict:
    """The target's attributes for a rename of ``op``: the row's map first, then same names."""
    row = row or {}
    src = op.opdef
    out: dict[str, Attribute] = {}
    mapped = row.get("attributes", {})
    used = set(row.get("drop", ()))
    for name, how in mapped.items():
        origin, cases = (how, None) if isinstance(how, str) else (how["from"], how.get("cases"))
        used.add(origin)
        if origin in op.attributes:
            src_def = src.attr(origin) if src else None
            value = convert_attr(op.attributes[origin], src_def, tgt.attr(name), cases)
            if value is not None:
                out[name] = value
    for name, value in op.attributes.items():
        if name in used or name in out or name == "operandSegmentSizes":
            continue
        if tgt.attr(name) is not None:
            converted = convert_attr(value, src.attr(name) if src else None, tgt.attr(name))
            if converted is not None:
                out[name] = converted
        elif name.startswith(("nv_tileaa.", "tt.", "nvvm.")):
            out[name] = value  # discardable attributes of the target contract travel unchanged
    for name, default in row.get("defaults", {}).items():
        if name not in out:
            adef = tgt.attr(name)
            if adef is not None and adef.enum:
                out[name] = enum_attr(adef.enum, default)
            elif isinstance(default, bool):
                if default:
                    out[name] = UnitAttr()
            else:
                out[name] = IntegerAttr(int(default), IntegerType(32))
    return out


# --------------------------------------------------------------------------- building


def segment_attr(tgt: Optional[OpDef], groups: Sequence[Sequence[Value]]) -> dict:
    """``operandSegmentSizes`` for a target with AttrSizedOperandSegments (the trailing token
    group of TrailingTokenOperand ops is not counted)."""
    if tgt is None or not tgt.has_attr_sized_segments:
        return {}
    sizes = [len(g) for g in groups[: len(tgt.segmented_operands)]]
    return {"operandSegmentSizes": DenseArrayAttr(IntegerType(32), tuple(sizes))}


def build(
    rw: PatternRewriter,
    op: Operation,
    name: str,
    groups: Sequence[Sequence[Value]],
    attributes: Optional[dict] = None,
    result_types: Optional[Sequence] = None,
    regions: int = 0,
) -> Operation:
    """Create op ``name`` before ``op`` from operand groups (segment sizes filled in)."""
    tgt = lookup_opdef(name)
    attrs = dict(attributes or {})
    attrs.update(segment_attr(tgt, groups))
    operands = [v for g in groups for v in g]
    types = convert_types(r.type for r in op.results) if result_types is None else result_types
    rw.set_insertion_point(op)
    new = rw.create(name, operands, list(types), attrs, op.loc, regions)
    for old, res in zip(op.results, new.results):
        res.name_hint = old.name_hint
    return new


def source_groups(op: Operation, names: Optional[list]) -> list[list[Value]]:
    """The operand groups ``names`` of ``op`` (None -> an empty group); default: every operand
    group in order."""
    opdef = op.opdef
    if names is None:
        if opdef is None:
            return [[v] for v in op.operands]
        return [list(opdef.operand_group(op, o.name)) for o in opdef.operands]
    return [[] if n is None else list(opdef.operand_group(op, n)) for n in names]


def target_name(op: Operation, row: dict, ctx: ConversionContext) -> Optional[str]:
    to = row["to"]
    if isinstance(to, str):
        return ctx.full(to)
    attr = op.attributes.get(to["by"])
    if attr is None:
        key = "absent"
    elif isinstance(attr, UnitAttr):
        key = "present"
    else:
        key = enum_keyword(attr, op.opdef.attr(to["by"]) if op.opdef else None) or "present"
    chosen = to["cases"].get(key, to.get("default"))
    return ctx.full(chosen) if chosen else None


def rename(op: Operation, rw: PatternRewriter, row: dict, ctx: ConversionContext) -> bool:
    name = target_name(op, row, ctx)
    if name is None:
        return False
    tgt = lookup_opdef(name)
    groups = source_groups(op, row.get("operands"))
    if tgt is not None:
        attrs = carried_attributes(op, tgt, row)
    else:
        attrs = _foreign_attrs(op, row)
        if isinstance(row["to"], dict):  # the attribute that chose the op is spent
            attrs.pop(row["to"]["by"], None)
    fm = row_fastmath(op, row, attrs)
    if fm is not None:
        attrs["fastmath"] = fm
    types = convert_types(r.type for r in op.results)
    unmirrored = tgt is not None and tgt.has_trait("TrailingTokenOperand") and not groups[-1]
    if unmirrored:  # no token operand: no result token either; a fresh token stands in
        types = [t for t in types if not isinstance(t, MemTokenType)]
    new = build(rw, op, name, groups, attrs, types)
    values = list(new.results)
    if unmirrored and len(values) < len(op.results):
        rw.set_insertion_point_after(new)
        token = rw.create("nv_tileaa.create_mem_token", [], [MemTokenType()], {}, op.loc)
        values.append(token.results[0])
    rw.replace_op(op, values)
    return True


def row_fastmath(op: Operation, row: dict, attrs: dict) -> Optional[Attribute]:
    """The target's ``fastmath`` for a row with ``fastmath: {from: A, cases: {kw: flags}}``: the
    flags the keyword of source attribute A maps to (e.g. rounding_mode approx -> afn), joined
    with any fastmath the op already carries (seed 003: fastmath travels verbatim). None when
    the row has no such key and nothing is carried."""
    how = row.get("fastmath")
    carried = fastmath_flags(attrs.get("fastmath") or op.attributes.get("fastmath"))
    if how is None:
        return None
    src = op.opdef.attr(how["from"]) if op.opdef else None
    attr = op.attributes.get(how["from"])
    kw = None if attr is None else enum_keyword(attr, src)
    if kw is None and src is not None and src.default is not None:
        kw = str(src.default)
    extra = how["cases"].get(kw or "absent", "")
    flags = set(carried) | {f for f in extra.split(",") if f}
    return fastmath_attr(flags)


def _foreign_attrs(op: Operation, row: dict) -> dict:
    """Attributes of an arith/math op (no spec here): everything the row does not drop."""
    drop = set(row.get("drop", ())) | {"operandSegmentSizes"}
    return {k: v for k, v in op.attributes.items() if k not in drop}


# --------------------------------------------------------------------------- checking


def _check_row(row: dict, ctx: ConversionContext) -> None:
    where = f"{ctx.spec['name']}: row '{row['op']}'"
    src = lookup_opdef(ctx.full(row["op"], ctx.source))
    if src is None:
        raise ConversionSpecError(f"{where}: unknown {ctx.source} op")
    if "to" not in row:
        return
    to = row["to"]
    names = [to] if isinstance(to, str) else list(to["cases"].values())
    from tilegen.runtime.opdef import all_ops

    registered = {od.dialect for od in all_ops()}
    for n in names:
        full = ctx.full(n)
        if full.split(".", 1)[0] in registered and lookup_opdef(full) is None:
            raise ConversionSpecError(f"{where}: unknown target op '{full}'")
    operands = {o.name for o in src.operands}
    for n in row.get("operands") or ():
        if n is not None and n not in operands:
            raise ConversionSpecError(f"{where}: '{n}' is not an operand of '{src.name}'")
    attrs = src.attr_names
    origins = [
        how if isinstance(how, str) else how["from"] for how in row.get("attributes", {}).values()
    ]
    if "fastmath" in row:
        origins.append(row["fastmath"]["from"])
        from tilegen.runtime.attributes import FASTMATH_FLAGS

        for flags in row["fastmath"]["cases"].values():
            bad = [f for f in flags.split(",") if f and f not in FASTMATH_FLAGS + ("fast",)]
            if bad:
                raise ConversionSpecError(f"{where}: unknown fastmath flag(s) {bad}")
    for origin in origins:
        if origin not in attrs:
            raise ConversionSpecError(f"{where}: '{origin}' is not an attribute of '{src.name}'")


def compile_groups(ctx: ConversionContext) -> list[tuple[str, PatternSet]]:
    """One pattern set per declared group, in order; the default rule joins its group."""
    from tilegen.runtime.conversion import custom_patterns

    out: list[tuple[str, PatternSet]] = []
    covered: set[str] = set()
    for group in ctx.spec["groups"]:
        ps = PatternSet()
        for row in group["patterns"]:
            _check_row(row, ctx)
            root = ctx.full(row["op"], ctx.source)
            covered.add(root)
            if "unsupported" in row:
                ctx.unsupported[root] = row["unsupported"]
                continue
            if "custom" in row:
                fn = getattr(custom_patterns, row["custom"], None)
                if fn is None:
                    raise ConversionSpecError(
                        f"{ctx.spec['name']}: custom pattern '{row['custom']}' is not defined in "
                        "runtime/conversion/custom_patterns.py"
                    )
                ps.add(Pattern(row["custom"], root, partial(fn, ctx=ctx)))
            else:
                fn = partial(rename, row=row, ctx=ctx)
                ps.add(Pattern(f"{row['op']}->{row['to']}", root, fn))
        out.append((group["name"], ps))
    rule = ctx.spec.get("default_rule", {})
    if rule.get("same_mnemonic"):
        target = dict(out)[rule.get("group", out[0][0])]
        for root, tgt in default_renames(ctx, covered).items():
            target.add(Pattern(f"default:{root}", root, partial(rename, row={"to": tgt}, ctx=ctx)))
    return out


def default_renames(ctx: ConversionContext, covered: set) -> dict[str, str]:
    """Source op -> same-mnemonic target op, for every source op without a row."""
    from tilegen.runtime.opdef import all_ops

    out = {}
    for od in all_ops():
        if od.dialect != ctx.source or od.name in covered:
            continue
        tgt = lookup_opdef(f"{ctx.target}.{od.mnemonic}")
        if tgt is not None:
            out[od.name] = tgt.name
    return out


def coverage(ctx: ConversionContext) -> tuple[set[str], set[str]]:
    """(source ops with a row or the default rule, source ops with neither)."""
    from tilegen.runtime.opdef import all_ops

    rows = {ctx.full(r["op"], ctx.source) for g in ctx.spec["groups"] for r in g["patterns"]}
    rows |= set(default_renames(ctx, rows))
    every = {od.name for od in all_ops() if od.dialect == ctx.source}
    return rows & every, every - rows
