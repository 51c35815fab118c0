"""Compile the conversion spec's rows into rewrite patterns.

Conversion rows are rewrite rows (runtime/rewrite/row_check.py, spec/schema/rows.schema.json):
``root`` in the source dialect, a ``build`` tree whose bare op names are in the target dialect,
result types through the type converter, enum attributes re-encoded by keyword into the target's
enum, the target contract's discardable attributes (``nv_tileaa.*``, ``tt.*``, ``nvvm.*``)
carried as they are. ``custom:`` rows resolve to functions of :mod:`custom_patterns` (called with
the :class:`ConversionContext`); ``unsupported:`` rows match nothing (the op stays and the
conversion fails, naming it). An op with no row is renamed by ``default_rule`` when its mnemonic
exists in the target dialect.
"""

from __future__ import annotations

from functools import partial
from typing import Optional, Sequence

from tilegen.runtime.attributes import Attribute
from tilegen.runtime.conversion.types import convert_types
from tilegen.runtime.ir import Operation, Value
from tilegen.runtime.opdef import OpDef, all_ops, lookup_opdef
from tilegen.runtime.records import dataclass, field
from tilegen.runtime.rewrite import Pattern, PatternRewriter, PatternSet
from tilegen.runtime.rewrite.row_check import RowError, RowScope, check_row, default_rows, full
from tilegen.runtime.rewrite.rows import (  # noqa: F401  (re-exported for custom_patterns)
    RUNTIME_INDEX,
    RowLanguage,
    build_attributes,
    compile_row,
    convert_attr,
    enum_attr,
    enum_keyword,
    segment_attr,
)
from tilegen.runtime.types import MemTokenType

#: a conversion row names an op, operand, attribute or pattern that does not exist
ConversionSpecError = RowError
#: discardable attributes of the target contract that travel unchanged
CARRIED_PREFIXES = ("nv_tileaa.", "tt.", "nvvm.")


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

    @property
    def file(self) -> str:
        return f"spec/lowerings/{self.spec['name']}.yaml"

    def full(self, name: str, dialect: Optional[str] = None) -> str:
        return full(name, dialect or self.target)


# --------------------------------------------------------------------------- building


def carried_attributes(op: Operation, tgt: OpDef, row: Optional[dict] = None) -> dict:
    """The target's attributes for ``op`` under ``row`` (``attributes`` map, ``drop`` and
    ``defaults`` keys, as in a build): mapped ones, then same-named and contract ones."""
    row = row or {}
    return build_attributes(
        op,
        tgt,
        row.get("attributes"),
        row.get("drop", ()),
        row.get("defaults"),
        prefixes=CARRIED_PREFIXES,
    )


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
    return rw.create(name, operands, list(types), attrs, op.loc, regions)


def _replace(
    rw: PatternRewriter, op: Operation, name: str, groups: list, attrs: dict, types: list
) -> list[Value]:
    """The op replacing a converted root: name hints kept; a TrailingTokenOperand target given
    no token operand has no result token either, so a fresh token stands in for the root's."""
    tgt = lookup_opdef(name)
    unmirrored = tgt is not None and tgt.has_trait("TrailingTokenOperand") and not groups[-1]
    if unmirrored:
        types = [t for t in types if not isinstance(t, MemTokenType)]
    new = build(rw, op, name, groups, attrs, types)
    values = list(new.results)
    if unmirrored and len(values) < len(op.results):
        rw.set_insertion_point_after(new)
        token = rw.create("nv_tileaa.create_mem_token", [], [MemTokenType()], {}, op.loc)
        values.append(token.results[0])
    return values


def language(ctx: ConversionContext) -> RowLanguage:
    from tilegen.runtime.conversion import custom_patterns

    def custom(name: str):
        fn = getattr(custom_patterns, name, None)
        return partial(fn, ctx=ctx) if callable(fn) and not name.startswith("_") else None

    return RowLanguage(
        RowScope(ctx.file, ctx.source, ctx.target),
        custom,
        convert_types=lambda types: list(convert_types(types)),
        carry_prefixes=CARRIED_PREFIXES,
        create=_replace,
    )


# --------------------------------------------------------------------------- checking


def _check_row(row: dict, ctx: ConversionContext, key: str = "row") -> None:
    """Check one row against the registered OpDefs (:class:`ConversionSpecError`)."""
    check_row(row, RowScope(ctx.file, ctx.source, ctx.target), RUNTIME_INDEX, key)


#: spec documents whose rows were checked already (the generator checks them too)
_CHECKED: list = []


def compile_groups(ctx: ConversionContext) -> list[tuple[str, PatternSet]]:
    """One pattern set per declared group, in order; the default rule joins its group."""
    lang = language(ctx)
    check = not any(spec is ctx.spec for spec in _CHECKED)
    out: list[tuple[str, PatternSet]] = []
    covered: set[str] = set()
    for gi, group in enumerate(ctx.spec["groups"]):
        ps = PatternSet()
        for ri, row in enumerate(group["patterns"]):
            pattern = compile_row(row, lang, f"groups[{gi}].patterns[{ri}]", check)
            root = _canonical(ctx.full(row["root"], ctx.source))
            covered.add(root)
            if "unsupported" in row:
                ctx.unsupported[root] = row["unsupported"]
            elif pattern is not None:
                ps.add(pattern)
        out.append((group["name"], ps))
    rule = ctx.spec.get("default_rule", {})
    if rule.get("same_mnemonic"):
        target = dict(out)[rule.get("group", out[0][0])]
        for root, row in _default_rows(ctx, covered).items():
            target.add(compile_row(row, lang, f"default_rule({root})", check))
    if check:
        _CHECKED.append(ctx.spec)
    return out


def _canonical(name: str) -> str:
    od = lookup_opdef(name)
    return od.name if od is not None else name


def _source_ops(ctx: ConversionContext) -> list[str]:
    return [od.name for od in all_ops() if od.dialect == ctx.source]


def _default_rows(ctx: ConversionContext, covered: set) -> dict[str, dict]:
    scope = RowScope(ctx.file, ctx.source, ctx.target)
    rule = ctx.spec.get("default_rule", {})
    return default_rows(rule, scope, RUNTIME_INDEX, _source_ops(ctx), covered)


def default_renames(ctx: ConversionContext, covered: set) -> dict[str, str]:
    """Source op -> same-mnemonic target op, for every source op without a row."""
    rule = {"same_mnemonic": True}
    scope = RowScope(ctx.file, ctx.source, ctx.target)
    rows = default_rows(rule, scope, RUNTIME_INDEX, _source_ops(ctx), covered)
    return {root: row["build"]["op"] for root, row in rows.items()}


def coverage(ctx: ConversionContext) -> tuple[set[str], set[str]]:
    """(source ops with a row or the default rule, source ops with neither)."""
    rows = {
        _canonical(ctx.full(r["root"], ctx.source))
        for g in ctx.spec["groups"]
        for r in g["patterns"]
    }
    rows |= set(default_renames(ctx, rows))
    every = set(_source_ops(ctx))
    return rows & every, every - rows


__all__ = [
    "Attribute",
    "ConversionContext",
    "ConversionSpecError",
    "build",
    "carried_attributes",
    "compile_groups",
    "convert_attr",
    "coverage",
    "default_renames",
    "enum_attr",
    "enum_keyword",
]
