"""Custom syntax of function-like ops: ``entry`` and ``testing$func`` (signature, arg attributes
and locations, ``optimization_hints=<...>``, implicit ``return``)."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.asm import lexer as lx
from tilegen.runtime.attributes import (
    ArrayAttr,
    Attribute,
    DictAttr,
    IntegerAttr,
    OptimizationHintsAttr,
    StringAttr,
    TypeAttr,
    UnitAttr,
)
from tilegen.runtime.ir import Operation, Region
from tilegen.runtime.types import I64, FunctionType, Type
from tilegen.runtime.asm.custom_common import ensure_terminator, parse_tile_type, type_text

# ============================================================================ optimization hints


def parse_hints_body(p) -> Optional[OptimizationHintsAttr]:
    """``<KEY = {dict}, ...>`` (errors are ``custom op`` prefixed); None when empty."""
    p.expect_punct("<")
    entries: dict[str, Attribute] = {}
    if not p.parse_optional_punct(">"):
        while True:
            key = p.parse_optional_keyword_or_string()
            if key is None:
                p.error("expected valid keyword or string")
            if key in entries:
                p.error(f"duplicate optimization_hints key `{key}`")
            p.expect_punct("=")
            at = p.loc()
            value = p.parse_attribute()
            if not isinstance(value, DictAttr):
                p.error(
                    f"expected dictionary attribute for optimization_hints entry `{key}` got "
                    f"value={_typed_attr_text(value)}",
                    at,
                )
            entries[key] = value
            if not p.parse_optional_punct(","):
                break
        p.expect_punct(">")
    if not entries:
        return None
    return OptimizationHintsAttr(tuple(sorted(entries.items())))


def _typed_attr_text(a: Attribute) -> str:
    """An attribute as MLIR's diagnostics show it (integers keep their ``: i64``)."""
    from tilegen.runtime.asm.attr_syntax import format_attribute

    if isinstance(a, IntegerAttr) and not (a.type is not None and getattr(a.type, "width", 0) == 1):
        return f"{a.value} : {type_text(a.type or I64)}"
    return format_attribute(a)


def _first(pair: tuple) -> str:
    return pair[0]


def format_hints_body(attr: OptimizationHintsAttr, aliases=None) -> str:
    """``<sm_100 = {num_cta_in_cga = 2}>``: the attribute without ``#cuda_tile.optimization_hints``,
    hint values printed without their types as cuda_tile's printer does."""
    from tilegen.runtime.asm.attr_syntax import format_attribute, format_dict_entries

    def key(k: str) -> str:  # a bare identifier, or quoted
        return format_dict_entries([(k, UnitAttr())], aliases)

    def value(v: Attribute) -> str:
        if isinstance(v, UnitAttr):
            return ""
        return " = " + format_attribute(v, aliases, elide_type=True)

    def hint_dict(d: Attribute) -> str:
        if not isinstance(d, DictAttr):
            return format_attribute(d, aliases)
        return "{" + ", ".join(key(k) + value(v) for k, v in sorted(d.items, key=_first)) + "}"

    # the hints are a DictionaryAttr of DictionaryAttrs: both levels print sorted by key
    return (
        "<"
        + ", ".join(f"{key(k)} = {hint_dict(d)}" for k, d in sorted(attr.entries, key=_first))
        + ">"
    )


# ============================================================================ entry / testing$func


def _parse_function(p, state, *, allow_hints: bool) -> None:
    state.attributes["sym_name"] = StringAttr(p.parse_symbol_name())
    p.expect_punct("(")
    args: list[tuple] = []
    arg_attrs: list[dict] = []
    named: Optional[bool] = None
    if not p.parse_optional_punct(")"):
        while True:
            if p.tok.kind == lx.PERCENT:
                if named is False:
                    p.error("expected type instead of SSA identifier")
                named = True
                u, t, attrs, loc = p.parse_argument(allow_type=True, allow_attrs=True)
            else:
                if named:
                    p.error("expected SSA identifier")
                named = False
                u, loc = None, None
                t = parse_tile_type(p)
                attrs = {}
                p.parse_optional_attr_dict(attrs)
            args.append((u, t, loc))
            arg_attrs.append(attrs or {})
            if not p.parse_optional_punct(","):
                break
        p.expect_punct(")")
    results: list[Type] = []
    res_attrs: list[dict] = []
    if p.parse_optional_punct("->"):
        if p.parse_optional_punct("("):
            if not p.parse_optional_punct(")"):
                while True:
                    results.append(parse_tile_type(p))
                    attrs: dict = {}
                    p.parse_optional_attr_dict(attrs)
                    res_attrs.append(attrs)
                    if not p.parse_optional_punct(","):
                        break
                p.expect_punct(")")
        else:
            results.append(parse_tile_type(p))
            res_attrs.append({})
    if allow_hints and p.parse_optional_keyword("optimization_hints") is not None:
        p.expect_punct("=")
        hints = parse_hints_body(p)
        if hints is not None:
            state.attributes["optimization_hints"] = hints
    p.parse_optional_attr_dict_with_keyword(state.attributes)
    state.attributes["function_type"] = TypeAttr(
        FunctionType(tuple(a[1] for a in args), tuple(results))
    )
    if any(arg_attrs):
        state.attributes["arg_attrs"] = ArrayAttr(
            tuple(DictAttr(tuple(sorted(d.items()))) for d in arg_attrs)
        )
    if any(res_attrs):
        state.attributes["res_attrs"] = ArrayAttr(
            tuple(DictAttr(tuple(sorted(d.items()))) for d in res_attrs)
        )
    region = state.add_region()
    if named is False:
        p.error("expected SSA identifier")
    p.parse_region(region, arguments=args)
    ensure_terminator(region, "cuda_tile.return", state.loc)
    p.parse_optional_attr_dict(state.attributes)  # `} {cuda_tile.loop_split = 0}`


def print_function(pr, op: Operation) -> None:
    pr.write(" ")
    pr.print_symbol_name(op.attributes["sym_name"].value)
    ftype = op.attributes.get("function_type")
    ftype = ftype.value if isinstance(ftype, TypeAttr) else FunctionType((), ())
    region = op.regions[0] if op.regions else Region()
    block_args = region.blocks[0].args if region.blocks else []
    arg_attrs = op.attributes.get("arg_attrs")
    parts = []
    for i, t in enumerate(ftype.inputs):
        text = ""
        if i < len(block_args):
            text = pr.value_name(block_args[i]) + ": "
        text += pr.format_type(t)
        if isinstance(arg_attrs, ArrayAttr) and i < len(arg_attrs.values):
            d = arg_attrs.values[i]
            if isinstance(d, DictAttr) and d.items:
                text += " " + pr.format_attribute(d)
        if pr.debuginfo and i < len(block_args) and block_args[i].loc is not None:
            text += " " + pr.format_location(block_args[i].loc)
        parts.append(text)
    pr.write("(" + ", ".join(parts) + ")")
    res_attrs = op.attributes.get("res_attrs")
    if ftype.results:
        texts = []
        any_attrs = False
        for i, t in enumerate(ftype.results):
            text = pr.format_type(t)
            if isinstance(res_attrs, ArrayAttr) and i < len(res_attrs.values):
                d = res_attrs.values[i]
                if isinstance(d, DictAttr) and d.items:
                    text += " " + pr.format_attribute(d)
                    any_attrs = True
            texts.append(text)
        if len(texts) == 1 and not any_attrs and not isinstance(ftype.results[0], FunctionType):
            pr.write(" -> " + texts[0])
        else:
            pr.write(" -> (" + ", ".join(texts) + ")")
    hints = op.attributes.get("optimization_hints")
    if isinstance(hints, OptimizationHintsAttr) and hints.entries:
        pr.write(" optimization_hints=" + format_hints_body(hints, pr.aliases))
    pr.write(" ")
    pr.print_region(region, print_entry_block_args=False, print_block_terminators=True)
    elided = ("sym_name", "function_type", "arg_attrs", "res_attrs", "optimization_hints")
    pr.print_optional_attr_dict(op, elided=elided)


def parse_entry(p, state) -> None:
    _parse_function(p, state, allow_hints=True)


def parse_test_func(p, state) -> None:
    _parse_function(p, state, allow_hints=False)
