"""Declarative assembly formats: ODS format strings compiled to directive programs and run.

A program is a tuple of directives (plain tuples, so the generator can emit them as literals
into ``generated/<dialect>/formats.py``):

``("lit", text)``  ``("space", " " | "")``  ``("operand", name)``  ``("attr", name)``
``("region", name)``  ``("type", ref)``  ``("ftype", ref, ref)``  ``("custom", name, args)``
``("attr_dict", with_keyword)``  ``("optional", anchor, then, else)``  ``("oilist", clauses)``

where ``ref`` is ``("operand", n)``, ``("result", n)``, ``("operands",)`` or ``("results",)``
and ``anchor`` is the ``(kind, name)`` of the ``^`` element. Printing follows ODS's spacing
rules exactly, including their compile-time nature (an absent optional group still changes the
spacing state), which is why ``addf %a, %b  : tile<f32>`` has two spaces.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

from tilegen.runtime.attributes import (
    Attribute,
    DenseArrayAttr,
    EnumAttr,
    IntegerAttr,
    OptimizationHintsAttr,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
)
from tilegen.runtime.ir import Region
from tilegen.runtime.opdef import attr_constraint, lookup_enum
from tilegen.runtime.opdef import buildable_type as spec_buildable
from tilegen.runtime.types import (
    I32,
    I64,
    TOKEN,
    FloatType,
    IntegerType,
    MemTokenType,
    TileType,
    Type,
)

if TYPE_CHECKING:  # pragma: no cover
    from tilegen.runtime.asm.parser import OpParser, OpState
    from tilegen.runtime.asm.printer import OpPrinter
    from tilegen.runtime.ir import Operation
    from tilegen.runtime.opdef import OpDef


class FormatError(ValueError):
    """A format string the compiler does not understand."""


# ============================================================================ compiler

_TOKEN = re.compile(
    r"\s*(?:(`[^`]*`)|(\$[A-Za-z_][A-Za-z_0-9]*)|(custom<[A-Za-z_0-9]+>)|"
    r"(attr-dict-with-keyword|attr-dict|functional-type|type|operands|results|regions|oilist)|"
    r"([()?^|,:]))"
)


def _tokenize(fmt: str) -> list[str]:
    out, pos = [], 0
    fmt = fmt.strip()
    while pos < len(fmt):
        m = _TOKEN.match(fmt, pos)
        if not m or m.end() == pos:
            raise FormatError(f"cannot tokenize format at {fmt[pos:pos + 20]!r}")
        out.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
        while pos < len(fmt) and fmt[pos].isspace():
            pos += 1
    return out


def compile_format(fmt: str, operands=(), results=(), attributes=(), regions=()) -> tuple:
    """Compile ODS format ``fmt`` given the op's operand/result/attribute/region names."""
    names = {}
    for n in operands:
        names[n] = "operand"
    for n in results:
        names[n] = "result"
    for n in attributes:
        names[n] = "attr"
    for n in regions:
        names[n] = "region"
    toks = _tokenize(fmt)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take(expected=None):
        nonlocal pos
        if pos >= len(toks):
            raise FormatError("unexpected end of format")
        t = toks[pos]
        if expected is not None and t != expected:
            raise FormatError(f"expected {expected!r}, got {t!r}")
        pos += 1
        return t

    def var(tok: str):
        name = tok[1:]
        kind = names.get(name)
        if kind is None:
            raise FormatError(f"unknown variable ${name}")
        return (kind, name)

    def ref():
        t = take()
        if t.startswith("$"):
            k, n = var(t)
            return (k, n)
        if t in ("operands", "results"):
            return (t,)
        raise FormatError(f"bad type reference {t!r}")

    def element(anchor_box):
        t = take()
        if t.startswith("`"):
            text = t[1:-1]
            if text in ("", " ", "\\n"):
                el = ("space", text)
            else:
                el = ("lit", text)
        elif t.startswith("$"):
            k, n = var(t)
            el = {
                "operand": ("operand", n),
                "attr": ("attr", n),
                "region": ("region", n),
                "result": ("result_var", n),
            }[k]
        elif t.startswith("custom<"):
            name = t[len("custom<") : -1]
            take("(")
            args = []
            while peek() != ")":
                a = take()
                if a == "type":
                    take("(")
                    args.append(("type", ref()))
                    take(")")
                elif a.startswith("$"):
                    args.append(var(a))
                elif a == "attr-dict":
                    args.append(("attr_dict", False))
                else:
                    raise FormatError(f"bad custom argument {a!r}")
                if peek() == ",":
                    take()
            take(")")
            el = ("custom", name, tuple(args))
        elif t == "type":
            take("(")
            el = ("type", ref())
            take(")")
        elif t == "functional-type":
            take("(")
            a = ref()
            take(",")
            b = ref()
            take(")")
            el = ("ftype", a, b)
        elif t in ("attr-dict", "attr-dict-with-keyword"):
            el = ("attr_dict", t == "attr-dict-with-keyword")
        elif t == "operands":
            el = ("operand", "*")
        elif t == "regions":
            el = ("region", "*")
        elif t == "oilist":
            take("(")
            clauses = []
            while True:
                clause = []
                while peek() not in ("|", ")"):
                    clause.append(element(None))
                clauses.append(tuple(clause))
                if peek() == "|":
                    take()
                    continue
                break
            take(")")
            el = ("oilist", tuple(clauses))
        elif t == "(":
            box = [None]
            then = []
            while peek() != ")":
                then.append(element(box))
            take(")")
            els = []
            if peek() == ":":
                take()
                take("(")
                while peek() != ")":
                    els.append(element(box))
                take(")")
            take("?")
            anchor = box[0]
            if anchor is None:
                raise FormatError("optional group without anchor")
            el = ("optional", anchor, tuple(then), tuple(els))
        else:
            raise FormatError(f"unexpected {t!r}")
        if peek() == "^":
            take()
            if anchor_box is None:
                raise FormatError("anchor outside an optional group")
            anchor_box[0] = _anchor_of(el)
        return el

    program = []
    while pos < len(toks):
        program.append(element(None))
    return tuple(program)


def _anchor_of(el) -> tuple:
    kind = el[0]
    if kind in ("operand", "attr", "region"):
        return (kind, el[1])
    if kind == "type":
        return _ref_anchor(el[1])
    if kind == "custom":
        for a in el[2]:
            if a[0] == "type":
                return _ref_anchor(a[1])
            if a[0] in ("attr", "operand", "region"):
                return a
    raise FormatError(f"cannot anchor on {el!r}")


def _ref_anchor(ref) -> tuple:
    if ref[0] == "operand":
        return ("operand", ref[1])
    if ref[0] == "result":
        return ("result", ref[1])
    return (ref[0],)


def compile_opdef(opdef: "OpDef") -> tuple:
    return compile_format(
        opdef.format,
        [o.name for o in opdef.operands],
        [r.name for r in opdef.results],
        [a.name for a in opdef.attributes],
        [r.name for r in opdef.regions],
    )


_PROGRAMS: dict[str, tuple] = {}


def program_for(opdef: "OpDef") -> tuple:
    """The compiled program of ``opdef`` (from generated/<dialect>/formats.py when present)."""
    prog = _PROGRAMS.get(opdef.name)
    if prog is not None:
        return prog
    import importlib

    try:
        mod = importlib.import_module(f"tilegen.generated.{opdef.dialect}.formats")
    except ImportError:
        mod = None
    if mod is not None and mod.FORMAT_SOURCES.get(opdef.mnemonic) == opdef.format:
        prog = mod.FORMATS[opdef.mnemonic]
    else:  # generated table missing or stale: compile now
        prog = compile_opdef(opdef)
    _PROGRAMS[opdef.name] = prog
    return prog


# ============================================================================ helpers


def _walk(program):
    for el in program:
        yield el
        if el[0] == "optional":
            yield from _walk(el[2])
            yield from _walk(el[3])
        elif el[0] == "oilist":
            for c in program_clauses(el):
                yield from _walk(c)


def program_clauses(el):
    return el[1]


def format_attr_names(program) -> set[str]:
    """Attributes the format prints itself (elided from attr-dict)."""
    out = set()
    for el in _walk(program):
        if el[0] == "attr":
            out.add(el[1])
        elif el[0] == "custom":
            for a in el[2]:
                if a[0] == "attr":
                    out.add(a[1])
    return out


def _typed_refs(program) -> set:
    out = set()
    for el in _walk(program):
        refs = []
        if el[0] == "type":
            refs = [el[1]]
        elif el[0] == "ftype":
            refs = [el[1], el[2]]
        elif el[0] == "custom":
            refs = [a[1] for a in el[2] if a[0] == "type"]
        for r in refs:
            out.add(r)
    return out


# ============================================================================ parsing


class _ParseInfo:
    """What parsing needs of one op definition, worked out once per op kind (not per op)."""

    __slots__ = (
        "opdef",
        "program",
        "operand_defs",
        "operand_refs",
        "result_refs",
        "ref_kinds",
        "same",
        "elementwise",
        "steps",
        "segmented",
        "i1_same_shape",
    )

    def __init__(self, opdef: "OpDef") -> None:
        self.opdef = opdef
        self.program = program_for(opdef)
        operand_defs: dict = {}
        result_defs: dict = {}
        for o in opdef.operands:
            operand_defs.setdefault(o.name, o)  # (the first of a name, as _operand_def finds)
        for r in opdef.results:
            result_defs.setdefault(r.name, r)
        self.operand_defs = operand_defs
        #: per declared operand / result, in order: (def, its ref)
        self.operand_refs = tuple((o, ("operand", o.name)) for o in opdef.operands)
        self.result_refs = tuple((r, ("result", r.name)) for r in opdef.results)
        #: type ref -> the kind of what it names ("variadic", "optional", ...)
        ref_kinds: dict = {("operands",): "variadic", ("results",): "variadic"}
        for name, d in result_defs.items():
            ref_kinds[("result", name)] = d.kind
        for name, d in operand_defs.items():
            ref_kinds[("operand", name)] = d.kind
        self.ref_kinds = ref_kinds
        kinds = {o.name: "operand" for o in opdef.operands}
        kinds.update({r.name: "result" for r in opdef.results})
        #: same-type groups as (ref, kind, name) triples (kind None: not an operand or result)
        self.same = tuple(
            tuple(((kinds.get(n), n), kinds.get(n), n) for n in group)
            for group in _same_type_groups(opdef)
        )
        self.segmented = opdef.has_attr_sized_segments
        self.steps = _steps(self.program)
        #: single operands and results all of one type (one same-type group naming them all,
        #: no regions): the refs that may carry that type, else None (_finish's fast path)
        self.elementwise = None
        if (
            len(self.same) == 1
            and opdef.results
            and not opdef.regions
            and not self.segmented
            and all(d.kind == "single" for d in (*opdef.operands, *opdef.results))
            and len(operand_defs) == len(opdef.operands)
            and len(result_defs) == len(opdef.results)
            and {ref for ref, _kind, _n in self.same[0]}
            == {ref for _d, ref in (*self.operand_refs, *self.result_refs)}
        ):
            self.elementwise = frozenset(ref for ref, _kind, _n in self.same[0])
        #: TypesMatchWith(src->dst via ::getI1SameShape) traits as (src, dst), in order
        self.i1_same_shape = tuple(
            (m.group(1), m.group(2))
            for m in (_RE_I1_SAME_SHAPE.match(t) for t in opdef.traits)
            if m is not None
        )


_RE_I1_SAME_SHAPE = re.compile(r"TypesMatchWith\((\w+)->(\w+) via ::getI1SameShape")
#: op name -> its _ParseInfo
_PARSE_INFO: dict[str, _ParseInfo] = {}


def _parse_info(opdef: "OpDef") -> _ParseInfo:
    info = _PARSE_INFO.get(opdef.name)
    if info is None or info.opdef is not opdef:
        info = _PARSE_INFO[opdef.name] = _ParseInfo(opdef)
    return info


class _ParseCtx:
    __slots__ = (
        "p",
        "state",
        "opdef",
        "info",
        "operands",
        "types",
        "regions",
        "attrs",
        "operand_locs",
    )

    def __init__(self, p: "OpParser", state: "OpState", info: Optional[_ParseInfo] = None):
        self.p = p
        self.state = state
        self.opdef = state.opdef
        self.info = info if info is not None else _parse_info(state.opdef)
        self.operands: dict[str, list] = {}  # name -> list of UnresolvedOperand
        self.types: dict[tuple, list[Type]] = {}  # ref -> types
        self.regions: dict[str, object] = {}
        self.attrs: dict[str, Attribute] = {}
        self.operand_locs: dict[str, int] = {}  # operand group -> token offset


def parse_with_format(p: "OpParser", state: "OpState") -> None:
    """Parse the body of ``state.opdef``'s op (after its name) with its declarative format."""
    info = _parse_info(state.opdef)
    ctx = _ParseCtx(p, state, info)
    for step, arg in info.steps:
        step(ctx, arg)
    _finish(ctx)


def _steps(program) -> tuple:
    """``program`` as ``(function, argument)`` pairs, each called with the parse context: the
    common elements go straight to their parser, the others through :func:`_parse_element`."""
    steps = []
    for el in program:
        kind = el[0]
        if kind == "operand":
            steps.append((_parse_operand_var, el[1]))
        elif kind == "lit":
            steps.append((_parse_lit_step, el[1]))
        elif kind == "custom" and el[1] in CUSTOM_DIRECTIVES:
            steps.append((CUSTOM_DIRECTIVES[el[1]][0], el[2]))
        elif kind != "space":
            steps.append((_parse_element, el))
    return tuple(steps)


def _parse_lit_step(ctx: _ParseCtx, text: str) -> None:
    p = ctx.p
    # (a literal's spelling is only ever a token of its own kind: bare word or punctuation)
    if p.tok.text == text:
        p._advance()
    else:
        _parse_literal(p, text, optional=False)


def _parse_elements(ctx: _ParseCtx, elements) -> None:
    for el in elements:
        _parse_element(ctx, el)


def _operand_def(opdef, name):
    for o in opdef.operands:
        if o.name == name:
            return o
    return None


def _result_def(opdef, name):
    for r in opdef.results:
        if r.name == name:
            return r
    return None


def _parse_literal(p: "OpParser", text: str, optional: bool) -> bool:
    if text[0].isalpha() or text[0] == "_":
        if optional:
            return p.parse_optional_keyword(text) is not None
        p.parse_keyword(text)
        return True
    if optional:
        return p.parse_optional_punct(text)
    p.expect_punct(text)
    return True


def _parse_element(ctx: _ParseCtx, el) -> None:
    p = ctx.p
    kind = el[0]
    if kind == "operand":
        _parse_operand_var(ctx, el[1])
    elif kind == "lit":
        # (a literal's spelling is only ever a token of its own kind: bare word or punctuation)
        if p.tok.text == el[1]:
            p._advance()
        else:
            _parse_literal(p, el[1], optional=False)
    elif kind == "custom":
        directive = CUSTOM_DIRECTIVES.get(el[1])
        if directive is None:
            p.error(f"unsupported custom directive '{el[1]}'")
        directive[0](ctx, el[2])
    elif kind == "attr_dict":
        if el[1]:
            p.parse_optional_attr_dict_with_keyword(ctx.state.attributes)
        elif p.tok.text == "{":
            p.parse_optional_attr_dict(ctx.state.attributes)
    elif kind == "optional":
        then = el[2]
        first = then[0]
        if first[0] == "lit":
            present = p.tok.text == first[1]
            if present:
                p._advance()
        else:
            present = _parse_optional_first(ctx, first)
        if present:
            _parse_elements(ctx, then[1:])
            anchor = el[1]
            if anchor[0] == "attr" and _is_unit(ctx, anchor[1]) and anchor[1] not in ctx.attrs:
                ctx.attrs[anchor[1]] = UnitAttr()
        elif el[3]:
            _parse_elements(ctx, el[3])
    elif kind == "space":
        pass
    elif kind == "attr":
        ctx.attrs[el[1]] = _parse_attr_var(ctx, el[1])
    elif kind == "region":
        region = Region()
        p.parse_region(region)
        ctx.regions[el[1]] = region
    elif kind == "type":
        ctx.types[el[1]] = _parse_types_for(ctx, el[1])
    elif kind == "ftype":
        ins = _parse_paren_or_single(p, True)
        p.expect_punct("->")
        outs = p.parse_function_result_types()
        ctx.types[el[1]] = ins
        ctx.types[el[2]] = outs
    elif kind == "oilist":
        clauses = list(el[1])
        seen = set()
        while True:
            for i, clause in enumerate(clauses):
                first = clause[0]
                if first[0] == "lit" and _parse_literal(p, first[1], optional=True):
                    if i in seen:
                        p.error(
                            f"`{first[1]}` clause can appear at most once in the expansion of the oilist directive"
                        )
                    seen.add(i)
                    _parse_elements(ctx, clause[1:])
                    for sub in clause[1:]:
                        if sub[0] == "attr" and _is_unit(ctx, sub[1]):
                            ctx.attrs.setdefault(sub[1], UnitAttr())
                    break
            else:
                break
    else:
        p.error(f"unsupported format directive {kind}")


def _parse_paren_or_single(p: "OpParser", allow_paren: bool) -> list[Type]:
    if p.at_punct("("):
        from tilegen.runtime.asm.type_syntax import parse_paren_type_list

        return parse_paren_type_list(p)
    return [p.parse_type()]


def _is_unit(ctx: _ParseCtx, name: str) -> bool:
    a = ctx.opdef.attr(name)
    return a is not None and a.kind == "unit"


def _parse_optional_first(ctx: _ParseCtx, first) -> bool:
    """Parse the first element of an optional group if present; return presence."""
    p = ctx.p
    kind = first[0]
    if kind == "lit":
        return _parse_literal(p, first[1], optional=True)
    if kind == "operand":
        if p.tok.kind != "percent_identifier":
            return False
        _parse_operand_var(ctx, first[1])
        return True
    if kind == "attr":
        a = _parse_attr_var(ctx, first[1], optional=True)
        if a is None:
            return False
        ctx.attrs[first[1]] = a
        return True
    if kind in ("type", "custom"):
        state = p.save()
        t = p.parse_optional_type() if kind == "type" or first[1] == "CudaTileType" else None
        if t is None:
            p.restore(state)
            return False
        p.restore(state)
        _parse_element(ctx, first)
        return True
    if kind == "region":
        if not p.at_punct("{"):
            return False
        _parse_element(ctx, first)
        return True
    p.error(f"unsupported optional group start {kind}")


def _parse_operand_var(ctx: _ParseCtx, name: str) -> None:
    p = ctx.p
    ctx.operand_locs[name] = p.tok.pos  # a location only if a message needs it
    if name == "*":
        ctx.operands["*"] = p.parse_operand_list()
        return
    d = ctx.info.operand_defs.get(name)
    kind = d.kind if d is not None else None
    if kind == "variadic":
        ctx.operands[name] = p.parse_operand_list()
    elif kind == "optional":
        u = p.parse_optional_operand()
        ctx.operands[name] = [u] if u is not None else []
    else:
        ctx.operands[name] = [p.parse_operand()]


def _attr_type(adef) -> Optional[Type]:
    if adef is None:
        return None
    if adef.kind == "i32-enum" and _enum_width(adef) == 64:
        return I64
    if adef.kind in ("i32", "i32-enum"):
        return I32
    if adef.kind == "i64":
        return I64
    return None


def _enum_width(adef) -> int:
    """Storage width of an integer enum attribute: 64 when its constraint says so (arith)."""
    c = attr_constraint(adef.constraint) if adef.constraint else None
    return (c or {}).get("match", {}).get("width", 32)


def _parse_attr_var(ctx: _ParseCtx, name: str, optional: bool = False) -> Optional[Attribute]:
    """An attribute variable in ODS's stripped form (enums ``<kw>``, i32 enums ``kw``...)."""
    p = ctx.p
    adef = ctx.opdef.attr(name)
    kind = adef.kind if adef is not None else ""
    if kind == "i32-enum" or (kind == "enum" and adef.enum and _enum_storage(adef) == "i32"):
        enum = lookup_enum(adef.enum)
        at = p.loc()
        if optional:
            state = p.save()
            kw = p.parse_optional_keyword_or_string()
            if kw is None or enum.value(kw) is None:
                p.restore(state)
                return None
            return IntegerAttr(enum.value(kw), _attr_type(adef) if kind == "i32-enum" else I32)
        kw = p.parse_optional_keyword_or_string()
        if kw is None or enum.value(kw) is None:
            p.error(
                "expected string or keyword containing one of the following enum values for "
                f"attribute '{name}' [{', '.join(enum.keywords)}]",
                at,
            )
        return IntegerAttr(enum.value(kw), _attr_type(adef) if kind == "i32-enum" else I32)
    if kind == "enum" and adef.enum:
        enum = lookup_enum(adef.enum)
        if optional and not p.at_punct("<"):
            return None
        p.expect_punct("<")
        at = p.loc()
        kw = p.parse_optional_keyword()
        if kw is None or enum.value(kw) is None:
            p._fail(
                f"expected ::mlir::cuda_tile::{enum.name} to be one of: {', '.join(enum.keywords)}",
                at,
            )
        p.expect_punct(">")
        return EnumAttr(enum.name, enum.value(kw))
    if kind == "unit":
        return UnitAttr()
    if kind == "attrdef" and adef.attr_class == "OptimizationHints" or name == "optimization_hints":
        if optional and not p.at_punct("<"):
            return None
        from tilegen.runtime.asm.attr_syntax import parse_cuda_tile_attr

        return parse_cuda_tile_attr(p, "optimization_hints", p.loc())
    if kind == "dense-i32-array" or kind == "dense-bool-array":
        if optional and not p.at_punct("["):
            return None
        p.expect_punct("[")
        vals = []
        elem = I32 if kind == "dense-i32-array" else IntegerType(1)
        if not p.at_punct("]"):
            while True:
                if kind == "dense-bool-array":
                    kw = p.parse_keyword()
                    vals.append(kw == "true")
                else:
                    vals.append(p.parse_integer())
                if not p.parse_optional_punct(","):
                    break
        p.expect_punct("]")
        return DenseArrayAttr(elem, tuple(vals))
    if kind in ("symbol-name",):
        if optional and p.tok.kind != "at_identifier":
            return None
        return StringAttr(p.parse_symbol_name())
    if kind == "flat-symbol-ref":
        if optional and p.tok.kind != "at_identifier":
            return None
        return SymbolRefAttr(p.parse_symbol_name())
    if kind == "string":
        if optional:
            s = p.parse_optional_string()
            if s is None:
                return None
        else:
            at = p.loc()
            s = p.parse_optional_string()
            if s is None:
                p._fail("expected attribute value", at)
        return StringAttr(s)
    if kind == "type(function)":
        return TypeAttr(p.parse_type())
    if optional:
        return p.parse_optional_attribute(_attr_type(adef))
    return p.parse_attribute(_attr_type(adef))


def _enum_storage(adef) -> str:
    e = lookup_enum(adef.enum)
    return e.storage if e is not None else "enum"


def _parse_types_for(ctx: _ParseCtx, ref, cuda_tile: bool = False) -> list[Type]:
    """Types for ``ref``: a list for variadic groups, zero or one for optional ones."""
    p = ctx.p
    kind = ctx.info.ref_kinds.get(ref, "")
    if kind == "":  # a ref naming no operand or result
        if _ref_is_variadic(ctx.opdef, ref):
            kind = "variadic"
        elif _ref_is_optional(ctx.opdef, ref):
            kind = "optional"
    if kind == "variadic":
        if cuda_tile and _group_size(ctx, ref) > 0:
            return p.parse_cuda_tile_type_list()
        return p.parse_type_list()
    if kind == "optional":
        t = p.parse_optional_type()
        return [t] if t is not None else []
    return [p.parse_cuda_tile_type() if cuda_tile else p.parse_type()]


def _group_size(ctx: _ParseCtx, ref) -> int:
    if ref[0] == "operand":
        return len(ctx.operands.get(ref[1], ()))
    if ref[0] == "operands":
        return sum(len(v) for v in ctx.operands.values())
    return 1


def _ref_is_variadic(opdef, ref) -> bool:
    if ref[0] in ("operands", "results"):
        return True
    d = _operand_def(opdef, ref[1]) if ref[0] == "operand" else _result_def(opdef, ref[1])
    return d is not None and d.kind == "variadic"


def _ref_is_optional(opdef, ref) -> bool:
    if ref[0] in ("operands", "results"):
        return False
    d = _operand_def(opdef, ref[1]) if ref[0] == "operand" else _result_def(opdef, ref[1])
    return d is not None and d.kind == "optional"


_NO_OPERANDS: tuple = ()


def _finish_elementwise(ctx: _ParseCtx) -> bool:
    """:func:`_finish` for ops whose operands and results are single and share one type (as
    ``addi``): that type written once, each operand once. False (nothing done) otherwise."""
    ((ref, ts),) = ctx.types.items()
    if len(ts) != 1 or ref not in ctx.info.elementwise:
        return False
    parsed = ctx.operands
    operands = []
    for o, _ref in ctx.info.operand_refs:
        us = parsed.get(o.name)
        if us is None or len(us) != 1:
            return False
        operands.append(us[0])
    t = ts[0]
    resolve = ctx.p.resolve_operand
    ctx.state.operands = [resolve(u, t) for u in operands]
    ctx.state.result_types = [t] * len(ctx.info.result_refs)
    return True


def _finish(ctx: _ParseCtx) -> None:
    """Infer missing types, resolve operands, fill the OpState."""
    p, state, opdef, info = ctx.p, ctx.state, ctx.opdef, ctx.info
    if ctx.attrs:
        attributes = state.attributes
        for k, v in ctx.attrs.items():
            # cuda_tile keeps inherent attributes in properties: MLIR's generated parser stores
            # what the format parsed there, and Operation::create then applies the attr-dict on
            # top (setAttrs -> setInherentAttr), so an attr-dict entry naming an attribute the
            # format already set wins, with no "occurs more than once" error (that check only
            # sees duplicates among discardable attributes).
            attributes.setdefault(k, v)
    parsed = ctx.operands
    if info.elementwise is not None and len(ctx.types) == 1 and _finish_elementwise(ctx):
        return
    # operand groups in declaration order
    if "*" in parsed:
        groups = {o.name: [] for o in opdef.operands}
        if len(opdef.operands) == 1:
            groups[opdef.operands[0].name] = parsed["*"]
        else:
            # all-operands form: split as declared singles (no segments known)
            us = parsed["*"]
            i = 0
            for o in opdef.operands:
                groups[o.name] = us[i : i + 1] if o.kind != "variadic" else us[i:]
                i += len(groups[o.name])
    else:
        groups = {o.name: parsed.get(o.name, _NO_OPERANDS) for o in opdef.operands}
    types = _infer_types(ctx, groups)
    operands: list = []
    resolve = p.resolve_operand
    for o, ref in info.operand_refs:
        us = groups[o.name]
        ts = types.get(ref)
        if ts is None:
            if not us:
                continue
            p.error(f"failed to infer the type of operand '{o.name}'", state.loc)
        if len(ts) != len(us):
            pos = ctx.operand_locs.get(o.name, ctx.operand_locs.get("*"))
            loc = state.loc if pos is None else p.lexer.loc(pos)
            p.error(
                f"number of operands and types do not match: got {len(us)} operands and "
                f"{len(ts)} types",
                loc,
            )
        for u, t in zip(us, ts):
            operands.append(resolve(u, t))
    state.operands = operands
    results: list = []
    for r, ref in info.result_refs:
        ts = types.get(ref)
        if ts is None and r.kind != "single":
            ts = []
        if ts is None:
            p.error(f"failed to infer the type of result '{r.name}'", state.loc)
        results.extend(ts)
    state.result_types = results
    if info.segmented:
        state.attributes["operandSegmentSizes"] = DenseArrayAttr(
            I32, tuple(len(groups[o.name]) for o in opdef.segmented_operands)
        )
    if opdef.regions:
        for r in opdef.regions:
            region = ctx.regions.get(r.name)
            if region is None:
                region = Region()
            state.regions.append(region)


def _same_type_groups(opdef) -> list[list[str]]:
    """Groups of operand/result names that share one type (verify rules and traits)."""
    groups = []
    for rule in opdef.verify:
        if isinstance(rule, dict):
            for key in ("same_type", "all_types_match"):
                if key in rule and isinstance(rule[key], (list, tuple)):
                    groups.append(list(rule[key]))
    if opdef.has_trait("SameOperandsAndResultType"):
        groups.append([o.name for o in opdef.operands] + [r.name for r in opdef.results])
    return groups


def _infer_types(ctx: _ParseCtx, groups) -> dict:
    opdef, info = ctx.opdef, ctx.info
    known: dict[tuple, list[Type]] = {}
    for ref, ts in ctx.types.items():
        if ref[0] == "operands":
            flat = list(ts)
            for o in opdef.operands:
                n = len(groups[o.name])
                known[("operand", o.name)] = flat[:n]
                flat = flat[n:]
        elif ref[0] == "results":
            if len(opdef.results) == 1:
                known[("result", opdef.results[0].name)] = list(ts)
            else:
                for r, t in zip(opdef.results, ts):
                    known[("result", r.name)] = [t]
        else:
            known[ref] = list(ts)
    same = info.same
    changed = bool(same)
    while changed:
        changed = False
        for group in same:
            source = None
            for ref, _kind, _n in group:
                ts = known.get(ref)
                if ts:
                    source = ts[0]
                    break
            if source is None:
                continue
            for ref, kind, n in group:
                if kind is not None and ref not in known:
                    count = len(groups.get(n, _ONE)) if kind == "operand" else 1
                    known[ref] = [source] * count
                    changed = True
        if len(same) == 1:  # (a second pass over one group finds nothing new)
            break
    for o, ref in info.operand_refs:
        if ref not in known:
            t = _buildable(o.type)
            if t is not None:
                known[ref] = [t] * len(groups.get(o.name, ()))
    # operands that stay untyped and are absent need nothing; results of single kind default
    for r, ref in info.result_refs:
        if ref not in known:
            t = _infer_result(ctx, r, known)
            if t is not None:
                known[ref] = t
    return known


_ONE = (None,)
#: constraint -> buildable_type(constraint) (types are immutable values: one per constraint)
_BUILDABLE: dict[str, Optional[Type]] = {}


def _buildable(constraint: str) -> Optional[Type]:
    try:
        return _BUILDABLE[constraint]
    except KeyError:
        t = _BUILDABLE[constraint] = buildable_type(constraint)
        return t


_RE_SCALAR_OF = re.compile(r"CudaTile_ScalarTileOf<CudaTile_(Int|Float)(\d+)>$")


def buildable_type(constraint: str) -> Optional[Type]:
    """The one type a constraint admits (ODS's buildable types), e.g. token, ``tile<i1>``."""
    if constraint in ("CudaTile_TokenType", "Token"):
        return TOKEN
    if constraint == "Scf_I1":  # scf.if / scf.condition (MLIR's I1)
        return IntegerType(1)
    if constraint == "NvTileAA_MemToken":
        return MemTokenType()
    m = _RE_SCALAR_OF.match(constraint)
    if m:
        width = m.group(2)
        elem = IntegerType(int(width)) if m.group(1) == "Int" else FloatType("f" + width)
        return TileType((), elem)
    return spec_buildable(constraint)  # parameterless spec kinds (nv_tileas tokens)


def _infer_result(ctx: _ParseCtx, rdef, known) -> Optional[list[Type]]:
    """Results with fixed (buildable) types or derived by TypesMatchWith traits."""
    t = _buildable(rdef.type)
    if t is not None and rdef.kind != "optional":
        return [t]
    for src_name, dst_name in ctx.info.i1_same_shape:
        if dst_name == rdef.name:
            src = known.get(("operand", src_name))
            if src and isinstance(src[0], TileType):
                # like MLIR's getI1SameShape, the (nv_tileas layout) encoding is kept
                return [TileType(src[0].shape, IntegerType(1), src[0].encoding)]
            if src:  # a scalar (nv_tileaa / arith): getI1SameShape gives i1
                return [IntegerType(1)]
    if rdef.kind == "optional":
        return []
    return None


# ============================================================================ printing


class _PrintState:
    """ODS's spacing state while laying out a format (``shouldEmitSpace`` /
    ``lastWasPunctuation``). It evolves the same way whatever the op holds (an absent optional
    group still moves it), so :func:`_compile_printer` runs it once per OpDef."""

    def __init__(self):
        self.should_emit_space = True
        self.last_was_punct = False


#: op name -> (OpDef, steps, attributes never in attr-dict, attributes with a default)
_COMPILED: dict[str, tuple] = {}


def print_with_format(pr: "OpPrinter", op: "Operation") -> None:
    """Print ``op``'s body (after its name) with its declarative format."""
    opdef = op.opdef
    entry = _COMPILED.get(opdef.name)
    if entry is None or entry[0] is not opdef:
        entry = _COMPILED[opdef.name] = _compile_printer(opdef)
    _, steps, elided, defaults = entry
    attrs = op.attributes
    if defaults and attrs:
        extra = [a.name for a in defaults if a.name in attrs and _equals_default(attrs[a.name], a)]
        if extra:
            elided = elided.union(extra)
    _run_steps(pr, op, steps, elided)


def _run_steps(pr, op, steps, elided) -> None:
    """Run compiled steps: a str is written as is, anything else is ``step(pr, op, elided)``."""
    out = pr._out
    for step in steps:
        if step.__class__ is str:
            out.append(step)
        else:
            step(pr, op, elided)


def _equals_default(attr: Attribute, adef) -> bool:
    d = adef.default
    if isinstance(attr, EnumAttr):
        e = lookup_enum(attr.enum)
        return e is not None and e.keyword(attr.value) == str(d)
    if isinstance(attr, IntegerAttr):
        if adef.enum:
            e = lookup_enum(adef.enum)
            return e is not None and e.keyword(attr.value) == str(d)
        try:
            return attr.value == int(d)
        except (TypeError, ValueError):
            return False
    return False


# ---------------------------------------------------------------------------- compiled printers
#
# A format program is turned, once per OpDef, into a tuple of steps: constant text (literals and
# the spaces ODS's spacing rules put between elements, merged into one string where adjacent)
# and small functions for what depends on the op (operands, attributes, types, regions, custom
# directives, optional groups). The spacing decisions are made at compile time by running
# _PrintState over the program exactly as printing used to (both branches of an optional group,
# every oilist clause, in order), so the text is the same as interpreting the program per op.


def _compile_printer(opdef: "OpDef") -> tuple:
    program = program_for(opdef)
    elided = frozenset(format_attr_names(program) | {"operandSegmentSizes", "resultSegmentSizes"})
    defaults = tuple(a for a in opdef.attributes if a.default is not None)
    steps = _compile_elements(opdef, program, _PrintState())
    return (opdef, steps, elided, defaults)


def _compile_elements(opdef, elements, st: _PrintState, skip=None) -> tuple:
    steps: list = []
    for el in elements:
        if el is skip:
            continue
        _compile_element(opdef, el, st, steps)
    return _merge_steps(steps)


def _merge_steps(steps: list) -> tuple:
    out: list = []
    for s in steps:
        if s.__class__ is str:
            if not s:
                continue
            if out and out[-1].__class__ is str:
                out[-1] += s
                continue
        out.append(s)
    return tuple(out)


def _def_attr_kind(opdef, name) -> str:
    a = opdef.attr(name)
    return a.kind if a is not None else ""


def _compile_element(opdef, el, st: _PrintState, steps: list) -> None:
    kind = el[0]
    if kind == "lit":
        value = el[1]
        if st.should_emit_space and _space_before(value, st.last_was_punct):
            steps.append(" ")
        steps.append(value)
        st.should_emit_space = len(value) != 1 or value[0] not in "<({["
        st.last_was_punct = not (value[0] == "_" or value[0].isalpha())
        return
    if kind == "space":
        if el[1] == " ":
            steps.append(" ")
            st.last_was_punct = False
        elif el[1] == "\\n":
            steps.append(_newline_step)
            st.last_was_punct = False
        else:
            st.last_was_punct = True
        st.should_emit_space = False
        return
    if kind == "optional":
        anchor = el[1]
        then = el[2]
        skip = None
        if anchor[0] == "attr" and _def_attr_kind(opdef, anchor[1]) == "unit":
            first = then[0]
            if not (first[0] == "attr" and first[1] == anchor[1]):
                skip = next((e for e in then if e[0] == "attr" and e[1] == anchor[1]), None)
        then_steps = _compile_elements(opdef, then, st, skip)
        else_steps = _compile_elements(opdef, el[3], st) if el[3] else ()
        steps.append(_optional_step(_presence_test(opdef, anchor), then_steps, else_steps))
        return
    if kind == "oilist":
        for clause in el[1]:
            names = tuple(sub[1] for sub in clause if sub[0] == "attr")
            sub_steps: list = []
            for sub in clause:
                if sub[0] == "attr" and _def_attr_kind(opdef, sub[1]) == "unit":
                    continue
                _compile_element(opdef, sub, st, sub_steps)
            steps.append(_clause_step(names, _merge_steps(sub_steps)))
        return
    if kind == "attr_dict":
        steps.append(_attr_dict_keyword_step if el[1] else _attr_dict_step)
        st.last_was_punct = False
        return
    if st.should_emit_space or not st.last_was_punct:
        steps.append(" ")
    st.last_was_punct = False
    st.should_emit_space = True
    step = _value_step(opdef, el)
    if step is not None:
        steps.append(step)


def _newline_step(pr, op, elided) -> None:
    pr.newline()


def _attr_dict_step(pr, op, elided) -> None:
    pr.print_optional_attr_dict(op, elided)


def _attr_dict_keyword_step(pr, op, elided) -> None:
    pr.print_optional_attr_dict_with_keyword(op, elided)


def _optional_step(present, then_steps: tuple, else_steps: tuple):
    def step(pr, op, elided) -> None:
        chosen = then_steps if present(op) else else_steps
        if chosen:
            _run_steps(pr, op, chosen, elided)

    return step


def _clause_step(names: tuple, sub_steps: tuple):
    def step(pr, op, elided) -> None:
        attrs = op.attributes
        if any(n in attrs for n in names):
            _run_steps(pr, op, sub_steps, elided)

    return step


def _value_step(opdef, el):
    kind = el[0]
    if kind == "operand":
        if el[1] == "*":
            return lambda pr, op, elided: pr.print_operands(op.operands)
        group = _group_getter(opdef, "operand", el[1])
        return lambda pr, op, elided: pr.print_operands(group(op))
    if kind == "attr":
        name = el[1]
        return lambda pr, op, elided: _print_attr_var(pr, op, name)
    if kind == "region":
        indices = tuple(i for i, r in enumerate(opdef.regions) if r.name == el[1])

        def region_step(pr, op, elided) -> None:
            for i in indices:
                pr.print_region(op.regions[i])

        return region_step
    if kind == "type":
        types = _types_getter(opdef, el[1])
        return lambda pr, op, elided: pr.print_types(types(op))
    if kind == "ftype":
        inputs, results = _types_getter(opdef, el[1]), _types_getter(opdef, el[2])
        return lambda pr, op, elided: pr.print_function_type(inputs(op), results(op))
    if kind == "custom":
        name, args = el[1], el[2]
        return lambda pr, op, elided: CUSTOM_DIRECTIVES.get(name)[1](pr, op, args)
    if kind == "result_var":
        group = _group_getter(opdef, "result", el[1])
        return lambda pr, op, elided: pr.print_operands(group(op))
    return None


def _group_getter(opdef, kind: str, name: str):
    """``op -> values of group name`` for ops of ``opdef`` (``OpDef.operand_group`` /
    ``result_group``, without computing segments when every group is a single value and the op
    has no segment-size attribute)."""
    if kind == "operand":
        defs, seg_attr = opdef.operands, "operandSegmentSizes"
        slow = opdef.operand_group
        simple = not opdef.has_trait("TrailingTokenOperand")
    else:
        defs, seg_attr = opdef.results, "resultSegmentSizes"
        slow = opdef.result_group
        simple = True
    index = next((i for i, d in enumerate(defs) if d.name == name), None)
    if index is None or not simple or any(d.kind != "single" for d in defs):
        return lambda op: slow(op, name)
    end = index + 1

    if kind == "operand":

        def operand_group(op):
            if seg_attr in op.attributes or seg_attr in op.properties:
                return slow(op, name)
            return op.operands[index:end]

        return operand_group

    def result_group(op):
        if seg_attr in op.attributes or seg_attr in op.properties:
            return slow(op, name)
        return op.results[index:end]

    return result_group


def _types_getter(opdef, ref):
    """``op -> types of ref`` for ops of ``opdef`` (see :func:`_ref_types`)."""
    if ref[0] == "operands":
        return lambda op: [v.type for v in op.operands]
    if ref[0] == "results":
        return lambda op: [v.type for v in op.results]
    group = _group_getter(opdef, "operand" if ref[0] == "operand" else "result", ref[1])
    return lambda op: [v.type for v in group(op)]


def _presence_test(opdef, anchor):
    """``op -> bool``: whether the optional group anchored on ``anchor`` prints."""
    kind = anchor[0]
    if kind in ("operand", "result"):
        group = _group_getter(opdef, kind, anchor[1])
        return lambda op: bool(group(op))
    if kind == "operands":
        return lambda op: bool(op.operands)
    if kind == "results":
        return lambda op: bool(op.results)
    if kind == "attr":
        name = anchor[1]
        adef = opdef.attr(name)
        if adef is not None and adef.default is not None and not adef.optional:

            def non_default(op) -> bool:
                a = op.attributes.get(name)
                return a is not None and not _equals_default(a, adef)

            return non_default
        return lambda op: op.attributes.get(name) is not None
    if kind == "region":
        index = next((i for i, r in enumerate(opdef.regions) if r.name == anchor[1]), None)
        if index is None:
            return lambda op: False
        return lambda op: bool(op.regions[index].blocks)
    return lambda op: False


def _space_before(value: str, last_was_punct: bool) -> bool:
    if len(value) != 1 and value != "->":
        return True
    if last_was_punct:
        return value[0] not in ">)}],"
    return value[0] not in "<>(){}[],"


#: (id(OpDef), ref) -> (OpDef, types getter)
_TYPES_GETTERS: dict = {}


def _ref_types(op, ref) -> list[Type]:
    opdef = op.opdef
    key = (id(opdef), ref)
    hit = _TYPES_GETTERS.get(key)
    if hit is None or hit[0] is not opdef:
        hit = _TYPES_GETTERS[key] = (opdef, _types_getter(opdef, ref))
    return hit[1](op)


def _print_attr_var(pr, op, name) -> None:
    a = op.attributes.get(name)
    if a is None:
        return
    adef = op.opdef.attr(name)
    if isinstance(a, EnumAttr):
        e = lookup_enum(a.enum)
        pr.write(f"<{e.keyword(a.value)}>")
    elif isinstance(a, IntegerAttr) and adef is not None and adef.enum:
        e = lookup_enum(adef.enum)
        kw = e.keyword(a.value) if e is not None else None
        pr.write(kw if kw is not None else str(a.value))
    elif isinstance(a, StringAttr) and adef is not None and adef.kind == "i32-enum" and adef.enum:
        e = lookup_enum(adef.enum)  # an enum case given as its keyword string (arith predicates)
        if e is not None and e.value(a.value) is not None:
            pr.write(a.value)
        else:
            pr.print_attribute_without_type(a)
    elif isinstance(a, OptimizationHintsAttr):
        from tilegen.runtime.asm.attr_syntax import format_cuda_tile_attr_body

        pr.write(format_cuda_tile_attr_body(a, pr.aliases)[len("optimization_hints") :])
    elif isinstance(a, DenseArrayAttr) and adef is not None and adef.kind.startswith("dense-"):
        if isinstance(a.element, IntegerType) and a.element.width == 1:
            pr.write("[" + ", ".join("true" if v else "false" for v in a.values) + "]")
        else:
            pr.write("[" + ", ".join(str(v) for v in a.values) + "]")
    elif isinstance(a, StringAttr) and adef is not None and adef.kind == "symbol-name":
        pr.print_symbol_name(a.value)
    elif isinstance(a, SymbolRefAttr) and not a.nested:
        pr.print_symbol_name(a.root)
    else:
        (
            pr.print_attribute_without_type(a)
            if _attr_type(adef) is not None
            else pr.print_attribute(a)
        )


from tilegen.runtime.asm.directives import CUSTOM_DIRECTIVES  # noqa: E402
