"""Hand-written op syntax: the hooks named by the spec's ``format: {custom: NAME}``.

``PARSERS[NAME](p, state)`` fills an :class:`OpState` from the tokens after the op name;
``PRINTERS[NAME](pr, op)`` writes everything after the op name (starting with its space).
(``custom<NAME>`` directives inside declarative formats live in ``directives.py``.)

Syntax and diagnostics follow NVIDIA's cuda_tile parser/printer (reference/ops.md Table C,
tests.md section 5, the conformance tests and tileirdisasm output).
"""

from __future__ import annotations

from typing import Callable, Optional

from tilegen.runtime.asm import lexer as lx
from tilegen.runtime.attributes import (
    ArrayAttr,
    Attribute,
    DenseArrayAttr,
    DictAttr,
    EnumAttr,
    IntegerAttr,
    OptimizationHintsAttr,
    StringAttr,
    TypeAttr,
    UnitAttr,
)
from tilegen.runtime.ir import Block, Operation, Region
from tilegen.runtime.opdef import lookup_enum
from tilegen.runtime.types import (
    DYNAMIC,
    I1,
    I32,
    I64,
    TILE_VIEW_TYPES,
    FunctionType,
    GatherScatterViewType,
    PartitionViewType,
    PointerType,
    StridedViewType,
    TensorViewType,
    TileType,
    TokenType,
    Type,
)

ParseFn = Callable[..., None]
PrintFn = Callable[..., None]

SEGMENTS = "operandSegmentSizes"


# ============================================================================ small helpers


def _type_text(t: Type) -> str:
    from tilegen.runtime.asm.type_syntax import format_type

    return format_type(t)


def _parse_tile_type(p) -> Type:
    """A type in ``custom<CudaTileType>`` position: ``expected valid keyword`` when none starts."""
    t = p.parse_optional_type()
    if t is None:
        p.error("expected valid keyword")
    return t


def _parse_type_list(p) -> list[Type]:
    """``T (, T)*`` with at least one type."""
    out = [_parse_tile_type(p)]
    while p.parse_optional_punct(","):
        out.append(_parse_tile_type(p))
    return out


def _segments(*sizes: int) -> DenseArrayAttr:
    return DenseArrayAttr(I32, tuple(sizes))


def _enum_keyword(enum_name: str, attr: Optional[Attribute]) -> Optional[str]:
    if attr is None:
        return None
    e = lookup_enum(enum_name)
    return e.keyword(attr.value) if e is not None else str(attr.value)


def _i32_enum(enum_name: str, keyword: str) -> Optional[IntegerAttr]:
    e = lookup_enum(enum_name)
    v = e.value(keyword) if e is not None else None
    return None if v is None else IntegerAttr(v, I32)


def _keywords(enum_name: str) -> list[str]:
    e = lookup_enum(enum_name)
    return e.keywords if e is not None else []


def _ensure_terminator(region: Region, name: str, loc) -> None:
    """MLIR's SingleBlockImplicitTerminator: append ``name`` unless the block already ends in a
    terminator (an empty region gets one block)."""
    block = region.blocks[0] if region.blocks else region.append(Block())
    last = block.ops[-1] if block.ops else None
    if last is None or last.opdef is None or not last.opdef.has_trait("Terminator"):
        block.append(Operation(name, loc=loc))


def _elides_terminator(region: Region, name: str) -> bool:
    """True when the region's last op is an operand-free ``name`` (printed implicitly)."""
    if not region.blocks or not region.blocks[-1].ops:
        return False
    last = region.blocks[-1].ops[-1]
    return last.name == name and not last.operands and not last.attributes


def _print_attr_dict_plain(pr, op: Operation, elided) -> None:
    pr.print_optional_attr_dict(op, elided=tuple(elided) + (SEGMENTS,))


def _print_attr_dict_kw(pr, op: Operation, elided) -> None:
    pr.print_optional_attr_dict_with_keyword(op, elided=tuple(elided) + (SEGMENTS,))


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
        return f"{a.value} : {_type_text(a.type or I64)}"
    return format_attribute(a)


def format_hints_body(attr: OptimizationHintsAttr, aliases=None) -> str:
    """``<sm_100 = {num_cta_in_cga = 2}>`` (the attribute without ``#cuda_tile.optimization_hints``)."""
    from tilegen.runtime.asm.attr_syntax import format_cuda_tile_attr_body

    return format_cuda_tile_attr_body(attr, aliases)[len("optimization_hints") :]


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
                t = _parse_tile_type(p)
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
                    results.append(_parse_tile_type(p))
                    attrs: dict = {}
                    p.parse_optional_attr_dict(attrs)
                    res_attrs.append(attrs)
                    if not p.parse_optional_punct(","):
                        break
                p.expect_punct(")")
        else:
            results.append(_parse_tile_type(p))
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
    p.parse_region(region, arguments=[a for a in args])
    _ensure_terminator(region, "cuda_tile.return", state.loc)


def _print_function(pr, op: Operation) -> None:
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
    elided = ("sym_name", "function_type", "arg_attrs", "res_attrs", "optimization_hints")
    pr.print_optional_attr_dict_with_keyword(op, elided=elided)
    pr.write(" ")
    pr.print_region(region, print_entry_block_args=False, print_block_terminators=True)


def _parse_entry(p, state) -> None:
    _parse_function(p, state, allow_hints=True)


def _parse_test_func(p, state) -> None:
    _parse_function(p, state, allow_hints=False)


# ============================================================================ for / loop


def _parse_iter_values(p) -> tuple[list, list]:
    """``iter_values(%a = %init, ...)`` after the keyword: (region args, init operands)."""
    p.expect_punct("(")
    args, inits = [], []
    if not p.parse_optional_punct(")"):
        while True:
            args.append(p.parse_operand(allow_result_number=False))
            p.expect_punct("=")
            inits.append(p.parse_operand())
            if not p.parse_optional_punct(","):
                break
        p.expect_punct(")")
    return args, inits


def _parse_for(p, state) -> None:
    if p.parse_optional_keyword("unsigned") is not None:
        state.attributes["unsignedCmp"] = UnitAttr()
    iv = p.parse_operand(allow_result_number=False)
    p.parse_keyword("in")
    p.expect_punct("(")
    lb = p.parse_operand()
    p.parse_keyword("to")
    ub = p.parse_operand()
    p.expect_punct(",")
    p.parse_keyword("step")
    step = p.parse_operand()
    p.expect_punct(")")
    p.expect_punct(":")
    iv_type = _parse_tile_type(p)
    args, inits, types = [], [], []
    if p.parse_optional_keyword("iter_values") is not None:
        args, inits = _parse_iter_values(p)
        p.expect_punct("->")
        if p.parse_optional_punct("("):
            types = _parse_type_list(p)
            p.expect_punct(")")
        else:
            types = [_parse_tile_type(p)]
        if len(types) != len(args):
            p.error("found different number of iter_values and types")
    state.result_types = list(types)
    region = state.add_region()
    p.parse_region(region, [(iv, iv_type, None)] + [(a, t, None) for a, t in zip(args, types)])
    _ensure_terminator(region, "cuda_tile.continue", state.loc)
    # Operands resolve after the body, so values defined only inside it are undeclared here.
    state.operands = p.resolve_operands([lb, ub, step], iv_type) + p.resolve_operands(inits, types)
    p.parse_optional_attr_dict(state.attributes)


def _print_for(pr, op: Operation) -> None:
    region = op.regions[0]
    block = region.blocks[0] if region.blocks else None
    if "unsignedCmp" in op.attributes:
        pr.write(" unsigned")
    lb, ub, step = op.operands[:3]
    iv = pr.value_name(block.args[0]) if block is not None and block.args else "%<<no iv>>"
    pr.write(f" {iv} in (")
    pr.print_operand(lb)
    pr.write(" to ")
    pr.print_operand(ub)
    pr.write(", step ")
    pr.print_operand(step)
    pr.write(") : ")
    pr.print_type(lb.type)
    inits = op.operands[3:]
    if inits:
        args = block.args[1:] if block is not None else []
        pairs = [f"{pr.value_name(a)} = {pr.value_name(v)}" for a, v in zip(args, inits)]
        pr.write(" iter_values(" + ", ".join(pairs) + ") -> (")
        pr.print_types([r.type for r in op.results])
        pr.write(")")
    pr.write(" ")
    pr.print_region(
        region,
        print_entry_block_args=False,
        print_block_terminators=not _elides_terminator(region, "cuda_tile.continue"),
    )
    _print_attr_dict_plain(pr, op, ("unsignedCmp",))


def _parse_loop(p, state) -> None:
    args, inits, init_types, result_types = [], [], [], []
    if p.parse_optional_keyword("iter_values") is not None:
        args, inits = _parse_iter_values(p)
        p.expect_punct(":")
        init_types = _parse_type_list(p)
        if len(init_types) != len(args):
            p.error("found different number of iter_values and types")
        if p.parse_optional_punct("->"):
            result_types = _parse_type_list(p)
    elif p.parse_optional_punct(":"):
        result_types = _parse_type_list(p)
    state.result_types = result_types
    region = state.add_region()
    p.parse_region(region, [(a, t, None) for a, t in zip(args, init_types)])
    _ensure_terminator(region, "cuda_tile.continue", state.loc)
    state.operands = p.resolve_operands(inits, init_types)
    p.parse_optional_attr_dict(state.attributes)


def _print_loop(pr, op: Operation) -> None:
    region = op.regions[0]
    block = region.blocks[0] if region.blocks else None
    if op.operands:
        args = block.args if block is not None else []
        pairs = [f"{pr.value_name(a)} = {pr.value_name(v)}" for a, v in zip(args, op.operands)]
        pr.write(" iter_values(" + ", ".join(pairs) + ") : ")
        pr.print_types([v.type for v in op.operands])
        if op.results:
            pr.write(" -> ")
            pr.print_types([r.type for r in op.results])
    elif op.results:
        pr.write(" : ")
        pr.print_types([r.type for r in op.results])
    pr.write(" ")
    pr.print_region(
        region,
        print_entry_block_args=False,
        print_block_terminators=not _elides_terminator(region, "cuda_tile.continue"),
    )
    _print_attr_dict_plain(pr, op, ())


# ============================================================================ shape queries


def _view_index_rank(t: Type) -> Optional[int]:
    if isinstance(t, TILE_VIEW_TYPES):
        return len(t.tile_shape)
    return None


def _parse_shape_query(p, state, *, want_tensor_view: bool) -> None:
    src = p.parse_operand()
    p.expect_punct(":")
    tloc = p.loc()
    src_type = _parse_tile_type(p)
    if want_tensor_view:
        if not isinstance(src_type, TensorViewType):
            p.error(f"'{state.name}' expected tensor_view, got '{_type_text(src_type)}'", tloc)
        n = src_type.rank
    else:
        n = _view_index_rank(src_type)
        if n is None:
            p.error(f"'{state.name}' expected tile view, got '{_type_text(src_type)}'", tloc)
    p.expect_punct("->")
    elem = _parse_tile_type(p)
    p.parse_optional_attr_dict(state.attributes)
    state.operands = p.resolve_operands([src], [src_type])
    state.result_types = [elem] * n


def _print_shape_query(pr, op: Operation) -> None:
    pr.write(" ")
    pr.print_operand(op.operands[0])
    _print_attr_dict_plain(pr, op, ())
    pr.write(" : ")
    pr.print_type(op.operands[0].type)
    if op.results:
        pr.write(" -> ")
        pr.print_type(op.results[0].type)


# ============================================================================ make_*_view


def _parse_make_view(kind: type, kind_name: str):
    def parse(p, state) -> None:
        tv = p.parse_operand()
        p.parse_optional_attr_dict(state.attributes)
        p.expect_punct(":")
        tloc = p.loc()
        t = _parse_tile_type(p)
        if not isinstance(t, kind):
            p.error(f"'{state.name}' expected '{kind_name}' type, but got '{_type_text(t)}'", tloc)
        state.operands = p.resolve_operands([tv], [t.tensor_view])
        state.result_types = [t]

    return parse


def _print_make_view(pr, op: Operation) -> None:
    pr.write(" ")
    pr.print_operand(op.operands[0])
    _print_attr_dict_plain(pr, op, ())
    pr.write(" : ")
    pr.print_type(op.results[0].type)


def _parse_shape_entries(p) -> list:
    """``[ (INT | %v),* ]`` -> list of ints / UnresolvedOperands."""
    p.expect_punct("[")
    out: list = []
    if not p.parse_optional_punct("]"):
        while True:
            u = p.parse_optional_operand()
            if u is not None:
                out.append(u)
            else:
                v = p.parse_optional_integer()
                if v is None:
                    p.error("expected either integer or SSA value")
                out.append(v)
            if not p.parse_optional_punct(","):
                break
        p.expect_punct("]")
    return out


def _check_entries(p, what: str, entries: list, expected: tuple, loc) -> None:
    if len(entries) != len(expected):
        p.error(
            f"expected {what} declaration to contain {len(expected)} elements due to tensor_view "
            f"type, but {len(entries)} were provided",
            loc,
        )
    for i, (got, want) in enumerate(zip(entries, expected)):
        got_dyn = not isinstance(got, int)
        want_dyn = want == DYNAMIC
        if got_dyn == want_dyn and (got_dyn or got == want):
            continue
        g = "dynamic" if got_dyn else str(got)
        w = "dynamic" if want_dyn else str(want)
        p.error(
            f"input {what} dimension {i} does not match tensor_view type (expected {w}, got {g})",
            loc,
        )


def _parse_make_tensor_view(p, state) -> None:
    base = p.parse_operand()
    p.expect_punct(",")
    p.parse_keyword("shape")
    p.expect_punct("=")
    shape = _parse_shape_entries(p)
    p.expect_punct(",")
    p.parse_keyword("strides")
    p.expect_punct("=")
    strides = _parse_shape_entries(p)
    p.parse_optional_attr_dict(state.attributes)
    loc = p.loc()
    p.expect_punct(":")
    first_loc = p.loc()
    t = _parse_tile_type(p)
    dyn_type = None
    if p.parse_optional_punct("->"):
        dyn_type = t
        first_loc = p.loc()
        t = _parse_tile_type(p)
    if not isinstance(t, TensorViewType):
        p.error("invalid kind of type specified", first_loc)
    _check_entries(p, "shape", shape, t.shape, loc)
    _check_entries(p, "stride", strides, t.strides, loc)
    dyn_shape = [u for u in shape if not isinstance(u, int)]
    dyn_strides = [u for u in strides if not isinstance(u, int)]
    if (dyn_shape or dyn_strides) and dyn_type is None:
        p.error("expected type of the dynamic shape/stride operands before '->'", first_loc)
    base_type = TileType((), PointerType(t.element))
    operands = p.resolve_operands([base], [base_type])
    operands += p.resolve_operands(dyn_shape + dyn_strides, dyn_type) if dyn_type else []
    state.operands = operands
    state.result_types = [t]
    state.attributes[SEGMENTS] = _segments(1, len(dyn_shape), len(dyn_strides))


def _print_make_tensor_view(pr, op: Operation) -> None:
    t = op.results[0].type
    dyn = iter(op.operands[1:])

    def entries(values) -> str:
        return ", ".join(pr.value_name(next(dyn)) if v == DYNAMIC else str(v) for v in values)

    pr.write(" ")
    pr.print_operand(op.operands[0])
    shape = list(t.shape) if isinstance(t, TensorViewType) else []
    strides = list(t.strides) if isinstance(t, TensorViewType) else []
    pr.write(f", shape = [{entries(shape)}], strides = [{entries(strides)}]")
    _print_attr_dict_plain(pr, op, ())
    pr.write(" : ")
    if len(op.operands) > 1:
        pr.print_type(op.operands[1].type)
        pr.write(" -> ")
    pr.print_type(t)


# ============================================================================ view memory ops


_WEAK = "weak"


def _parse_ordering(p, state, *, scope_required: bool = False, atomic_texts: bool = False) -> str:
    """``SEM [SCOPE]`` with cuda_tile's custom-parser diagnostics; returns the SEM keyword."""
    loc = p.loc()
    sems = _keywords("MemoryOrderingSemantics")
    scopes = _keywords("MemoryScope")
    kw = p.parse_optional_keyword() or ""
    if kw not in sems:
        if atomic_texts:
            p.error(
                f"invalid memory_ordering_semantics: '{kw}'; expected one of: {', '.join(sems)}",
                loc,
            )
        p.error(
            f'invalid memory_ordering_semantics attribute specification. Got "{kw}" but expect '
            f"one of: {', '.join(sems)}",
            loc,
        )
    state.attributes["memory_ordering_semantics"] = _i32_enum("MemoryOrderingSemantics", kw)
    if p.at_keyword():
        sloc = p.loc()
        scope = p.parse_keyword()
        if kw == _WEAK and not atomic_texts:
            p.error(
                f'operation specifies weak memory ordering semantics, but then provides "{scope}" '
                "scope, expected no memory scope.",
                sloc,
            )
        if scope not in scopes:
            if atomic_texts:
                p.error(
                    f"invalid memory_scope: '{scope}'; expected one of: {', '.join(scopes)}", sloc
                )
            p.error(
                f'invalid memory_scope attribute specification. Got "{scope}" but expect one of: '
                f"{', '.join(scopes)}",
                sloc,
            )
        state.attributes["memory_scope"] = _i32_enum("MemoryScope", scope)
    return kw


def _print_ordering(pr, op: Operation) -> None:
    pr.write(
        " "
        + (
            _enum_keyword("MemoryOrderingSemantics", op.attributes.get("memory_ordering_semantics"))
            or "weak"
        )
    )
    scope = _enum_keyword("MemoryScope", op.attributes.get("memory_scope"))
    if scope is not None:
        pr.write(" " + scope)


def _parse_tail_clauses(p, state, *, hints: bool) -> Optional[object]:
    """``[token = %t] [optimization_hints = <..>] [inbounds = [..]] [attributes {..}]``."""
    token = None
    if p.parse_optional_keyword("token") is not None:
        p.expect_punct("=")
        token = p.parse_operand()
    if hints and p.parse_optional_keyword("optimization_hints") is not None:
        p.expect_punct("=")
        h = parse_hints_body(p)
        if h is not None:
            state.attributes["optimization_hints"] = h
    if p.parse_optional_keyword("inbounds") is not None:
        p.expect_punct("=")
        p.expect_punct("[")
        flags = []
        if not p.parse_optional_punct("]"):
            while True:
                kw = p.parse_optional_keyword()
                if kw not in ("true", "false"):
                    p.error("expected 'true' or 'false'")
                flags.append(kw == "true")
                if not p.parse_optional_punct(","):
                    break
            p.expect_punct("]")
        state.attributes["inbounds"] = DenseArrayAttr(I1, tuple(flags))
    p.parse_optional_attr_dict_with_keyword(state.attributes)
    return token


def _print_tail_clauses(pr, op: Operation, token, elided=()) -> None:
    if token is not None:
        pr.write(" token = ")
        pr.print_operand(token)
    hints = op.attributes.get("optimization_hints")
    if isinstance(hints, OptimizationHintsAttr) and hints.entries:
        pr.write(" optimization_hints = " + format_hints_body(hints, pr.aliases))
    inbounds = op.attributes.get("inbounds")
    if isinstance(inbounds, DenseArrayAttr) and any(inbounds.values):
        pr.write(
            " inbounds = [" + ", ".join("true" if v else "false" for v in inbounds.values) + "]"
        )
    _print_attr_dict_kw(
        pr,
        op,
        ("memory_ordering_semantics", "memory_scope", "optimization_hints", "inbounds")
        + tuple(elided),
    )


def _parse_index_types(p, n: int, types: list[Type]) -> list[Type]:
    """The index-type list after the view type: one type for all indices, or one per index."""
    if len(types) == 1 and n != 1:
        return types * n
    if len(types) != n and not (n == 0 and len(types) <= 1):
        p.error(f"{n} operands present, but expected {len(types)}")
    return types[:n]


def _print_index_types(pr, indices) -> None:
    types = [v.type for v in indices]
    if not types:
        return
    if all(t == types[0] for t in types):
        types = types[:1]
    pr.write(", ")
    pr.print_types(types)


def _parse_load_view(p, state) -> None:
    _parse_ordering(p, state)
    view = p.parse_operand()
    idx = p.parse_operand_list("square")
    token = _parse_tail_clauses(p, state, hints=True)
    p.expect_punct(":")
    view_type = _parse_tile_type(p)
    idx_types = []
    while p.parse_optional_punct(","):
        idx_types.append(_parse_tile_type(p))
    idx_types = _parse_index_types(p, len(idx), idx_types)
    p.expect_punct("->")
    tile_type = _parse_tile_type(p)
    p.expect_punct(",")
    tok_type = _parse_tile_type(p)
    state.operands = p.resolve_operands([view], [view_type]) + p.resolve_operands(idx, idx_types)
    if token is not None:
        state.operands += p.resolve_operands([token], [TokenType()])
    state.result_types = [tile_type, tok_type]
    state.attributes[SEGMENTS] = _segments(1, len(idx), 1 if token is not None else 0)


def _groups(op: Operation) -> dict:
    return {d.name: op.opdef.operand_group(op, d.name) for d in op.opdef.operands}


def _single(groups: dict, name: str):
    g = groups.get(name) or []
    return g[0] if g else None


def _print_load_view(pr, op: Operation) -> None:
    g = _groups(op)
    _print_ordering(pr, op)
    pr.write(" ")
    pr.print_operand(g["view"][0])
    pr.write("[")
    pr.print_operands(g["index"])
    pr.write("]")
    _print_tail_clauses(pr, op, _single(g, "token"))
    pr.write(" : ")
    pr.print_type(g["view"][0].type)
    _print_index_types(pr, g["index"])
    pr.write(" -> ")
    pr.print_types([r.type for r in op.results])


def _parse_store_view(p, state) -> None:
    _parse_ordering(p, state)
    tile = p.parse_operand()
    p.expect_punct(",")
    view = p.parse_operand()
    idx = p.parse_operand_list("square")
    token = _parse_tail_clauses(p, state, hints=True)
    p.expect_punct(":")
    tile_type = _parse_tile_type(p)
    p.expect_punct(",")
    view_type = _parse_tile_type(p)
    idx_types = []
    while p.parse_optional_punct(","):
        idx_types.append(_parse_tile_type(p))
    idx_types = _parse_index_types(p, len(idx), idx_types)
    p.expect_punct("->")
    tok_type = _parse_tile_type(p)
    state.operands = p.resolve_operands([tile, view], [tile_type, view_type])
    state.operands += p.resolve_operands(idx, idx_types)
    if token is not None:
        state.operands += p.resolve_operands([token], [TokenType()])
    state.result_types = [tok_type]
    state.attributes[SEGMENTS] = _segments(1, 1, len(idx), 1 if token is not None else 0)


def _print_store_view(pr, op: Operation) -> None:
    g = _groups(op)
    _print_ordering(pr, op)
    pr.write(" ")
    pr.print_operand(g["tile"][0])
    pr.write(", ")
    pr.print_operand(g["view"][0])
    pr.write("[")
    pr.print_operands(g["index"])
    pr.write("]")
    _print_tail_clauses(pr, op, _single(g, "token"))
    pr.write(" : ")
    pr.print_type(g["tile"][0].type)
    pr.write(", ")
    pr.print_type(g["view"][0].type)
    _print_index_types(pr, g["index"])
    pr.write(" -> ")
    pr.print_type(op.results[0].type)


#: The RMW modes atomic_red_view_tko accepts (the spec's spec_only_variants: all but xchg).
def _red_modes() -> list[str]:
    return [k for k in _keywords("AtomicRMWMode") if k != "xchg"]


def _parse_atomic_red_view(p, state) -> None:
    _parse_ordering(p, state, atomic_texts=True)
    view = p.parse_operand()
    idx = p.parse_operand_list("square")
    p.expect_punct(",")
    mloc = p.loc()
    mode = p.parse_optional_keyword() or p.tok.text
    if mode not in _keywords("AtomicRMWMode"):  # xchg parses; the verifier rejects it
        p.error(f"unknown atomic RMW mode: '{mode}'; expected one of: {', '.join(_red_modes())}", mloc)
    state.attributes["mode"] = _i32_enum("AtomicRMWMode", mode)
    p.expect_punct(",")
    value = p.parse_operand()
    token = _parse_tail_clauses(p, state, hints=False)
    p.expect_punct(":")
    value_type = _parse_tile_type(p)
    p.expect_punct(",")
    view_type = _parse_tile_type(p)
    idx_types = []
    while p.parse_optional_punct(","):
        idx_types.append(_parse_tile_type(p))
    idx_types = _parse_index_types(p, len(idx), idx_types)
    p.expect_punct("->")
    tok_type = _parse_tile_type(p)
    state.operands = p.resolve_operands([view], [view_type]) + p.resolve_operands(idx, idx_types)
    state.operands += p.resolve_operands([value], [value_type])
    if token is not None:
        state.operands += p.resolve_operands([token], [TokenType()])
    state.result_types = [tok_type]
    state.attributes[SEGMENTS] = _segments(1, len(idx), 1, 1 if token is not None else 0)


def _print_atomic_red_view(pr, op: Operation) -> None:
    g = _groups(op)
    _print_ordering(pr, op)
    pr.write(" ")
    pr.print_operand(g["view"][0])
    pr.write("[")
    pr.print_operands(g["index"])
    pr.write("], " + (_enum_keyword("AtomicRMWMode", op.attributes.get("mode")) or "add") + ", ")
    pr.print_operand(g["value"][0])
    _print_tail_clauses(pr, op, _single(g, "token"), elided=("mode",))
    pr.write(" : ")
    pr.print_type(g["value"][0].type)
    pr.write(", ")
    pr.print_type(g["view"][0].type)
    _print_index_types(pr, g["index"])
    pr.write(" -> ")
    pr.print_type(op.results[0].type)


# ----------------------------------------------------------------------------- multimem (13.5)

_REDUCTION = "reduction"
_REDUCTION_ENUM = "MultimemReductionKind"


def _default_reduction() -> Optional[EnumAttr]:
    e = lookup_enum(_REDUCTION_ENUM)
    v = e.value("add") if e is not None else None
    return None if v is None else EnumAttr(_REDUCTION_ENUM, v)


def _split_trailing_token(types: list[Type], has_token: bool) -> list[Type]:
    if has_token and types and isinstance(types[-1], TokenType):
        return types[:-1]
    return types


def _parse_multimem(*, has_tile: bool, has_reduction: bool, results: int):
    """``SEM [SCOPE] %view[, %tile][%idx] [token = %t] [inbounds = [..]] [attributes {..}]
    : VIEW_T[, TILE_T], IDX_T [, token] -> (TILE_T, token | token)``."""

    def parse(p, state) -> None:
        _parse_ordering(p, state)
        view = p.parse_operand()
        tile = None
        if has_tile:
            p.expect_punct(",")
            tile = p.parse_operand()
        idx = p.parse_operand_list("square")
        token = _parse_tail_clauses(p, state, hints=False)
        if has_reduction and _REDUCTION not in state.attributes:
            default = _default_reduction()
            if default is not None:
                state.attributes[_REDUCTION] = default
        p.expect_punct(":")
        view_type = _parse_tile_type(p)
        tile_type = None
        if has_tile:
            p.expect_punct(",")
            tile_type = _parse_tile_type(p)
        rest = []
        while p.parse_optional_punct(","):
            rest.append(_parse_tile_type(p))
        idx_types = _parse_index_types(p, len(idx), _split_trailing_token(rest, token is not None))
        p.expect_punct("->")
        result_types = [_parse_tile_type(p)]
        while len(result_types) < results:
            p.expect_punct(",")
            result_types.append(_parse_tile_type(p))
        ops = p.resolve_operands([view], [view_type])
        if has_tile:
            ops += p.resolve_operands([tile], [tile_type])
        ops += p.resolve_operands(idx, idx_types)
        if token is not None:
            ops += p.resolve_operands([token], [TokenType()])
        state.operands = ops
        state.result_types = result_types
        sizes = [1] + ([1] if has_tile else []) + [len(idx), 1 if token is not None else 0]
        state.attributes[SEGMENTS] = _segments(*sizes)

    return parse


def _print_multimem(pr, op: Operation) -> None:
    g = _groups(op)
    _print_ordering(pr, op)
    pr.write(" ")
    pr.print_operand(g["view"][0])
    if g.get("tile"):
        pr.write(", ")
        pr.print_operand(g["tile"][0])
    pr.write("[")
    pr.print_operands(g["index"])
    pr.write("]")
    token = _single(g, "token")
    elided = ()
    if op.attributes.get(_REDUCTION) == _default_reduction():
        elided = (_REDUCTION,)
    _print_tail_clauses(pr, op, token, elided=elided)
    pr.write(" : ")
    pr.print_type(g["view"][0].type)
    if g.get("tile"):
        pr.write(", ")
        pr.print_type(g["tile"][0].type)
    _print_index_types(pr, g["index"])
    if token is not None:
        pr.write(", ")
        pr.print_type(token.type)
    pr.write(" -> ")
    pr.print_types([r.type for r in op.results])


# ============================================================================ testing ops


def _parse_test_evolution(p, state) -> None:
    p.expect_punct("(")
    inputs, types = [], []
    if not p.parse_optional_punct(")"):
        inputs = p.parse_operand_list()
        p.expect_punct(":")
        types = _parse_type_list(p)
        p.expect_punct(")")
    token = token_type = None
    if p.parse_optional_keyword("token") is not None:
        p.expect_punct("=")
        token = p.parse_operand()
        p.expect_punct(":")
        token_type = _parse_tile_type(p)
    p.parse_optional_attr_dict(state.attributes)
    if p.parse_optional_punct("->"):
        state.result_types = [_parse_tile_type(p)]
    state.operands = p.resolve_operands(inputs, types)
    if token is not None:
        state.operands += p.resolve_operands([token], [token_type])
    state.attributes[SEGMENTS] = _segments(len(inputs), 1 if token is not None else 0)


def _print_test_evolution(pr, op: Operation) -> None:
    g = _groups(op)
    inputs = g.get("inputs") or []
    saved = pr.short_types
    pr.short_types = False
    pr.write("(")
    pr.print_operands(inputs)
    if inputs:
        pr.write(" : ")
        pr.print_types([v.type for v in inputs])
    pr.write(")")
    pr.short_types = saved
    token = _single(g, "optional_token")
    if token is not None:
        pr.write(" token = ")
        pr.print_operand(token)
        pr.write(" : ")
        pr.print_type(token.type)
    _print_attr_dict_plain(pr, op, ())
    if op.results:
        pr.write(" -> ")
        pr.print_type(op.results[0].type)


# ============================================================================ tables


PARSERS: dict[str, ParseFn] = {
    "entry": _parse_entry,
    "testing$func": _parse_test_func,
    "for": _parse_for,
    "loop": _parse_loop,
    "get_index_space_shape": lambda p, s: _parse_shape_query(p, s, want_tensor_view=False),
    "get_tensor_shape": lambda p, s: _parse_shape_query(p, s, want_tensor_view=True),
    "make_partition_view": _parse_make_view(PartitionViewType, "partition_view"),
    "make_strided_view": _parse_make_view(StridedViewType, "strided_view"),
    "make_gather_scatter_view": _parse_make_view(GatherScatterViewType, "gather_scatter_view"),
    "make_tensor_view": _parse_make_tensor_view,
    "load_view_tko": _parse_load_view,
    "store_view_tko": _parse_store_view,
    "atomic_red_view_tko": _parse_atomic_red_view,
    "multimem_load_reduce_view_tko": _parse_multimem(has_tile=False, has_reduction=True, results=2),
    "multimem_reduce_view_tko": _parse_multimem(has_tile=True, has_reduction=True, results=1),
    "multimem_store_view_tko": _parse_multimem(has_tile=True, has_reduction=False, results=1),
    "testing$bytecode_test_evolution": _parse_test_evolution,
}

PRINTERS: dict[str, PrintFn] = {
    "entry": _print_function,
    "testing$func": _print_function,
    "for": _print_for,
    "loop": _print_loop,
    "get_index_space_shape": _print_shape_query,
    "get_tensor_shape": _print_shape_query,
    "make_partition_view": _print_make_view,
    "make_strided_view": _print_make_view,
    "make_gather_scatter_view": _print_make_view,
    "make_tensor_view": _print_make_tensor_view,
    "load_view_tko": _print_load_view,
    "store_view_tko": _print_store_view,
    "atomic_red_view_tko": _print_atomic_red_view,
    "multimem_load_reduce_view_tko": _print_multimem,
    "multimem_reduce_view_tko": _print_multimem,
    "multimem_store_view_tko": _print_multimem,
    "testing$bytecode_test_evolution": _print_test_evolution,
}
