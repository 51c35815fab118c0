"""Textual forms of attributes and locations, and the alias table used when printing.

Builtin attributes (integers, floats, strings, arrays, dictionaries, ``array<..>``, ``dense<..>``,
symbol refs, types), cuda_tile attributes (enums, assume predicates, optimization hints, debug
info) and locations (``loc(...)``). Unknown dialect attributes stay :class:`OpaqueAttr` text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

from tilegen.runtime.asm import lexer as lx
from tilegen.runtime.attributes import (
    ArrayAttr,
    Attribute,
    BoolAttr,
    BoundedAttr,
    CallSiteLoc,
    DenseArrayAttr,
    DenseElementsAttr,
    DictAttr,
    DICompileUnitAttr,
    DIFileAttr,
    DILexicalBlockAttr,
    DILocAttr,
    DISubprogramAttr,
    DivByAttr,
    EnumAttr,
    FileLineColLoc,
    FloatAttr,
    FusedLoc,
    IntegerAttr,
    Location,
    NameLoc,
    OpaqueAttr,
    OpaqueLoc,
    OptimizationHintsAttr,
    SameElementsAttr,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
    UnknownLoc,
)
from tilegen.runtime.opdef import all_enums, lookup_enum
from tilegen.runtime.types import FloatType, IndexType, IntegerType, Type

if TYPE_CHECKING:  # pragma: no cover
    from tilegen.runtime.asm.parser import OpParser

I64 = IntegerType(64)
F64 = FloatType("f64")
_RE_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z_0-9$.]*$")
_RE_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z_0-9$.\-]*$")


def enum_by_mnemonic(mnemonic: str):
    """The EnumDef whose attribute mnemonic is ``mnemonic`` (``rounding`` -> RoundingMode)."""
    for e in all_enums():
        if e.mnemonic == mnemonic:
            return e
    return None


# ============================================================================ parsing


def parse_attribute(p: "OpParser", type: Optional[Type] = None) -> Attribute:
    p.nest()  # bounded nesting (runtime/limits.py)
    try:
        a = parse_optional_attribute(p, type)
    finally:
        p.depth -= 1
    if a is None:
        p._fail("expected attribute value")
    return a


def _parse_number(p: "OpParser", type: Optional[Type]) -> Attribute:
    neg = p.parse_optional_punct("-")
    tok = p._advance()
    if tok.kind not in (lx.INTEGER, lx.FLOAT):
        p._fail("expected integer or floating point literal", p.loc_at(tok))
    if type is None and p.parse_optional_punct(":"):
        type = p.parse_type()
    text = tok.text
    if tok.kind == lx.FLOAT or isinstance(type, FloatType):
        ftype = type if isinstance(type, FloatType) else F64
        if tok.kind == lx.INTEGER:  # MLIR's parseFloatFromIntegerLiteral
            from tilegen.runtime.asm.float_format import semantics_of

            at = p.loc_at(tok)
            if not text.startswith("0x"):
                p._fail(
                    "unexpected decimal integer literal for a floating point value",
                    at,
                    notes=[("add a trailing dot to make the literal a float", at)],
                )
            if neg:
                p._fail("hexadecimal float literal should not have a leading minus", at)
            bits = int(text, 16)
            sem = semantics_of(ftype)
            if bits.bit_length() > sem.bits:
                p._fail("hexadecimal float constant out of range for type", at)
            return FloatAttr(sem.to_float(bits), ftype, bits)
        v = float(text)
        return FloatAttr(-v if neg else v, ftype)
    v = int(text, 16) if text.startswith("0x") else int(text)
    v = -v if neg else v
    type = type if type is not None else I64
    width = 64 if isinstance(type, IndexType) else getattr(type, "width", None)
    if isinstance(type, (IntegerType, IndexType)) and width:
        if not -(1 << (width - 1)) <= v < (1 << width):
            # MLIR's buildAttributeAPInt: a signless value fits its width signed or unsigned
            p._fail("integer constant out of range for attribute", p.loc_at(tok))
        if width > 1 and v >= 1 << (width - 1):  # the same bits, read as MLIR does (signed)
            v -= 1 << width
    return IntegerAttr(v, type)


def parse_optional_attribute(p: "OpParser", type: Optional[Type] = None) -> Optional[Attribute]:
    tok = p.tok
    kind = tok.kind
    if kind in (lx.INTEGER, lx.FLOAT) or (kind == lx.PUNCT and tok.text == "-"):
        return _parse_number(p, type)
    if kind == lx.STRING:
        s = p.parse_optional_string()
        if p.parse_optional_punct(":"):
            p.parse_type()
        return StringAttr(s)
    if kind == lx.PUNCT:
        if tok.text == "[":
            p._advance()
            items = []
            if not p.parse_optional_punct("]"):
                while True:
                    items.append(parse_attribute(p))
                    if not p.parse_optional_punct(","):
                        break
                p._expect("]", "expected ']' to end attribute list")
            return ArrayAttr(tuple(items))
        if tok.text == "{":
            return DictAttr(tuple(parse_dict_entries(p)))
    if kind == lx.AT:
        root = p.parse_symbol_name()
        nested = []
        while p.parse_optional_punct("::"):
            nested.append(p.parse_symbol_name())
        return SymbolRefAttr(root, tuple(nested))
    if kind == lx.BARE:
        word = tok.text
        if word in ("true", "false"):
            p._advance()
            return BoolAttr(word == "true")
        if word == "unit":
            p._advance()
            return UnitAttr()
        if word == "array":
            return _parse_dense_array(p)
        if word == "dense":
            p._advance()
            from tilegen.runtime.asm import dense

            return dense.parse_dense_body(p, type)
        if word == "loc":
            return parse_location(p, allow_deferred=False)
    if kind == lx.HASH:
        return _parse_hash_attr(p)
    t = p.parse_optional_type()
    if t is not None:
        return TypeAttr(t)
    return None


def _parse_dense_array(p: "OpParser") -> DenseArrayAttr:
    p._advance()
    p._expect("<")
    elem = p.parse_type()
    values = []
    if p.parse_optional_punct(":"):
        while True:
            if isinstance(elem, IntegerType) and elem.width == 1 and p.at_keyword():
                values.append(p.parse_keyword() == "true")
            elif isinstance(elem, FloatType):
                values.append(p.parse_float())
            else:
                values.append(p.parse_integer())
            if not p.parse_optional_punct(","):
                break
    p._expect(">")
    return DenseArrayAttr(elem, tuple(values))


def parse_dict_entries(p: "OpParser") -> list[tuple[str, Attribute]]:
    """``{k = v, unit_k, "quoted" = v}`` -> entries in written order."""
    p._expect("{")
    out: list[tuple[str, Attribute]] = []
    seen = set()
    if p.parse_optional_punct("}"):
        return out
    while True:
        at = p.loc()
        if p.tok.kind == lx.BARE:
            name = p._advance().text
        elif p.tok.kind == lx.STRING:
            name = p.parse_optional_string()
            if not name:
                p._fail("expected valid attribute name", at)
        else:
            p.wrong_token_error("expected attribute name")
        if name in seen:
            p._fail(f"duplicate key '{name}' in dictionary attribute", at)
        seen.add(name)
        if p.parse_optional_punct("="):
            out.append((name, parse_attribute(p)))
        else:
            out.append((name, UnitAttr()))
        if not p.parse_optional_punct(","):
            break
    p._expect("}", "expected '}' in attribute dictionary")
    return out


def _parse_hash_attr(p: "OpParser") -> Attribute:
    tok = p.tok
    spelling = tok.text[1:]
    if spelling.startswith("cuda_tile."):
        p._advance()
        return parse_cuda_tile_attr(p, spelling[len("cuda_tile.") :], p.loc_at(tok))
    if "." not in spelling:
        a = p.attr_aliases.get(spelling)
        if a is None:
            p._fail(f"undefined symbol alias id '{spelling}'")
        p._advance()
        return a
    hook = dialect_attr_hook(spelling.split(".", 1)[0])
    if hook is not None:
        p._advance()
        return hook[0](p, spelling.split(".", 1)[1], p.loc_at(tok))
    from tilegen.runtime.asm.type_syntax import _raw_balanced, _seek

    end = tok.pos + len(tok.text)
    raw = tok.text
    if end < len(p.lexer.text) and p.lexer.text[end] == "<":
        raw += _raw_balanced(p, end)
    _seek(p, tok.pos + len(raw))
    if p.parse_optional_punct(":"):
        p.parse_type()
    return OpaqueAttr(raw)


#: dialect -> module with ``parse_<dialect>_attr(p, mnemonic, loc)`` and
#: ``format_<dialect>_attr(a) -> str | None``: the extension point for dialect attributes
DIALECT_ATTR_MODULES = {"nv_tileas": "tilegen.runtime.asm.nv_tileas_attrs"}


def dialect_attr_hook(dialect: str):
    """(parse, format) functions of ``dialect``'s attributes, or None (they stay opaque)."""
    mod = DIALECT_ATTR_MODULES.get(dialect)
    if mod is None:
        return None
    import importlib

    m = importlib.import_module(mod)
    return getattr(m, f"parse_{dialect}_attr"), getattr(m, f"format_{dialect}_attr")


def parse_cuda_tile_attr(p: "OpParser", mnemonic: str, loc) -> Attribute:
    """The rest of ``#cuda_tile.MNEMONIC<...>`` (the mnemonic was consumed)."""
    parser = _CUDA_TILE_ATTRS.get(mnemonic)
    if parser is not None:
        return parser(p)
    enum = enum_by_mnemonic(mnemonic)
    if enum is not None:
        p._expect("<")
        at = p.loc()
        kw = p.parse_optional_keyword()
        v = enum.value(kw) if kw is not None else None
        if v is None:
            p._fail(
                f"expected {_enum_what(enum)} to be one of: " + ", ".join(enum.keywords),
                at,
            )
        p._expect(">")
        return EnumAttr(enum.name, v)
    p._fail(f"unknown attribute `{mnemonic}` in dialect `cuda_tile`", loc)


def _enum_what(enum) -> str:
    return f"::mlir::cuda_tile::{enum.name}"


def _parse_div_by(p: "OpParser") -> DivByAttr:
    p._expect("<")
    d = p.parse_optional_integer()
    if d is None:
        p._fail("failed to parse parameter 'divisor' which is expected to be an integer")
    every = along = None
    if p.parse_optional_punct(","):
        if p.parse_optional_keyword("every") is None:
            p._fail("expected 'every'")
        every = p.parse_integer()
        if p.parse_optional_keyword("along") is None:
            p._fail("expected 'along'")
        along = p.parse_integer()
    p._expect(">")
    return DivByAttr(d, every, along)


def _parse_same_elements(p: "OpParser") -> SameElementsAttr:
    p._expect("<")
    p._expect("[")
    vals = []
    if not p.at_punct("]"):
        while True:
            vals.append(p.parse_integer())
            if not p.parse_optional_punct(","):
                break
    p._expect("]")
    p._expect(">")
    return SameElementsAttr(tuple(vals))


def _parse_bounded(p: "OpParser") -> BoundedAttr:
    p._expect("<")

    def bound():
        if p.parse_optional_punct("?"):
            return None
        return p.parse_integer()

    lb = bound()
    p._expect(",")
    ub = bound()
    p._expect(">")
    return BoundedAttr(lb, ub)


def _parse_opt_hints(p: "OpParser") -> OptimizationHintsAttr:
    p._expect("<")
    entries = []
    seen = set()
    if not p.parse_optional_punct(">"):
        while True:
            key = p.parse_optional_keyword_or_string()
            if key is None:
                p._fail("expected valid keyword or string")
            if key in seen:
                p._fail(f"duplicate optimization_hints key `{key}`")
            seen.add(key)
            p._expect("=")
            at = p.loc()
            value = parse_attribute(p)
            if not isinstance(value, DictAttr):
                p._fail(
                    f"expected dictionary attribute for optimization_hints entry `{key}` got "
                    f"value={format_attribute(value)}",
                    at,
                )
            entries.append((key, value))
            if not p.parse_optional_punct(","):
                break
        p._expect(">")
    return OptimizationHintsAttr(tuple(entries))


def _format_hint_dict(v, aliases) -> str:
    """A hints dictionary as cuda_tile prints it: integer values without their type
    (``{occupancy = 2}`` whether the value is i32 or i64), everything else as usual."""
    if not isinstance(v, DictAttr):
        return format_attribute(v, aliases)
    parts = [
        f"{_format_key(k)} = "
        + (str(x.value) if type(x) is IntegerAttr else format_attribute(x, aliases))
        for k, x in v.items
    ]
    return "{" + ", ".join(parts) + "}"


_U32_MAX = 2**32 - 1
#: struct parameters that are C++ ``unsigned`` (line and column numbers)
_UNSIGNED_PARAMS = frozenset({"line", "column", "scopeLine"})


def _parse_struct(p: "OpParser", required: list[str], optional: list[str]) -> dict:
    """MLIR ``struct(params)`` syntax: ``<k = v, ...>`` in any order, each at most once."""
    p._expect("<")
    vals: dict = {}
    allowed = required + optional
    if p.at_punct(">"):
        p._fail("expected a parameter name in struct")
    if not p.at_punct(">"):
        while True:
            at = p.loc()
            key = p.parse_optional_keyword()
            if key is None or key not in allowed or key in vals:
                p._fail(f"duplicate or unknown struct parameter name: {key or p.tok.text}", at)
            p._expect("=")
            at = p.loc()
            if key in _UNSIGNED_PARAMS and (p.tok.kind == lx.INTEGER or p.at_punct("-")):
                v = p.parse_integer()  # MLIR's parseInteger<unsigned>, not an attribute
                if not 0 <= v <= _U32_MAX:
                    p._fail("integer value too large", at)
                vals[key] = IntegerAttr(v, I64)
            else:
                vals[key] = parse_attribute(p)
            if not p.parse_optional_punct(","):
                break
    end = p.loc()
    p._expect(">")
    for name in required:
        if name not in vals:
            p._fail(f"struct is missing required parameter: {name}", end)
    return vals


def _int(a) -> int:
    return a.value if isinstance(a, IntegerAttr) else int(getattr(a, "value", 0))


def _str(a) -> str:
    return a.value if isinstance(a, StringAttr) else str(a)


def _parse_di_file(p: "OpParser") -> DIFileAttr:
    p._expect("<")
    name = p.parse_string()
    if p.parse_optional_keyword("in") is None:
        p._fail("expected 'in'")
    directory = p.parse_string()
    p._expect(">")
    return DIFileAttr(name, directory)


def _parse_di_cu(p: "OpParser") -> DICompileUnitAttr:
    v = _parse_struct(p, ["file"], [])
    return DICompileUnitAttr(v["file"])


def _parse_di_sp(p: "OpParser") -> DISubprogramAttr:
    v = _parse_struct(p, ["file", "line", "name", "linkageName", "compileUnit"], ["scopeLine"])
    return DISubprogramAttr(
        v["file"],
        _int(v["line"]),
        _str(v["name"]),
        _str(v["linkageName"]),
        v["compileUnit"],
        _int(v["scopeLine"]) if "scopeLine" in v else None,
    )


def _parse_di_lb(p: "OpParser") -> DILexicalBlockAttr:
    v = _parse_struct(p, ["scope", "file", "line"], ["column"])
    return DILexicalBlockAttr(
        v["scope"], v["file"], _int(v["line"]), _int(v["column"]) if "column" in v else None
    )


def _parse_di_loc(p: "OpParser") -> DILocAttr:
    p._expect("<")
    at = p.loc()
    if p.at_keyword("loc"):
        src = parse_location(p, allow_deferred=False)
    else:
        src = parse_attribute(p)
    if not isinstance(src, FileLineColLoc):
        p._fail("expected a FileLineColLoc source location", at)
    if p.parse_optional_keyword("in") is None:
        p._fail("expected 'in'")
    scope = parse_attribute(p)
    p._expect(">")
    return DILocAttr(src, scope)


_CUDA_TILE_ATTRS = {
    "div_by": _parse_div_by,
    "same_elements": _parse_same_elements,
    "bounded": _parse_bounded,
    "optimization_hints": _parse_opt_hints,
    "di_file": _parse_di_file,
    "di_compile_unit": _parse_di_cu,
    "di_subprogram": _parse_di_sp,
    "di_lexical_block": _parse_di_lb,
    "di_loc": _parse_di_loc,
}


# ---------------------------------------------------------------------------- locations


def parse_location(p: "OpParser", allow_deferred: bool = True):
    """``loc(...)``; with ``allow_deferred`` a not-yet-defined ``loc(#alias)`` gives a placeholder."""
    p._advance()  # 'loc'
    p._expect("(", "expected '(' in location")
    if p.tok.kind == lx.HASH and "." not in p.tok.text:
        tok = p._advance()
        name = tok.text[1:]
        p._expect(")", "expected ')' in location")
        a = p.attr_aliases.get(name)
        if a is None:
            if allow_deferred:
                return p.defer_location(name, p.loc_at(tok))
            p._fail(f"undefined symbol alias id '{name}'", p.loc_at(tok))
        if not isinstance(a, Location):
            p._fail(f"expected location, but found '{format_attribute(a)}'", p.loc_at(tok))
        return a
    loc = _parse_loc_instance(p)
    p._expect(")", "expected ')' in location")
    return loc


def _parse_loc_instance(p: "OpParser") -> Location:
    p.nest()  # callsite/name/fused locations nest: bounded (runtime/limits.py)
    try:
        return _parse_loc_instance_in(p)
    finally:
        p.depth -= 1


def _parse_loc_instance_in(p: "OpParser") -> Location:
    tok = p.tok
    if tok.kind == lx.HASH:
        a = parse_attribute(p)
        if not isinstance(a, Location):
            p._fail("expected location attribute", p.loc_at(tok))
        return a
    if tok.kind == lx.STRING:
        s = p.parse_optional_string()
        if p.parse_optional_punct(":"):
            line = p.parse_optional_integer(allow_negative=False)
            if line is None or line > _U32_MAX:  # an `unsigned` in MLIR
                p._fail("expected integer line number in FileLineColLoc")
            col = 0
            if p.parse_optional_punct(":"):
                col = p.parse_optional_integer(allow_negative=False)
                if col is None or col > _U32_MAX:
                    p._fail("expected integer column number in FileLineColLoc")
            return FileLineColLoc(s, line, col)
        if p.parse_optional_punct("("):
            child = _parse_loc_instance(p)
            p._expect(")", "expected ')' after child location of NameLoc")
            return NameLoc(s, child)
        return NameLoc(s, None)
    if tok.kind == lx.BARE:
        word = tok.text
        if word == "unknown":
            p._advance()
            return UnknownLoc()
        if word == "callsite":
            p._advance()
            p._expect("(", "expected '(' in callsite location")
            callee = _parse_loc_instance(p)
            if p.parse_optional_keyword("at") is None:
                p._fail("expected 'at' in callsite location")
            caller = _parse_loc_instance(p)
            p._expect(")", "expected ')' in callsite location")
            return CallSiteLoc(callee, caller)
        if word == "fused":
            p._advance()
            meta = None
            if p.parse_optional_punct("<"):
                meta = parse_attribute(p)
                p._expect(">", "expected '>' after fused location metadata")
            p._expect("[", "expected '[' in fused location")
            locs = []
            if not p.at_punct("]"):
                while True:
                    locs.append(_parse_loc_instance(p))
                    if not p.parse_optional_punct(","):
                        break
            p._expect("]", "expected ']' in fused location")
            return FusedLoc(tuple(locs), meta)
    p._fail("expected location instance")


# ============================================================================ printing


def format_symbol(s: str) -> str:
    return "@" + s if _RE_SYMBOL.match(s) else "@" + lx.encode_string(s)


def _format_key(k: str) -> str:
    return k if _RE_BARE_ID.match(k) else lx.encode_string(k)


def format_dict_entries(items, aliases=None) -> str:
    """``a = 1, b`` sorted by name as MLIR's DictionaryAttr stores them."""
    out = []
    for k, v in sorted(items, key=lambda kv: kv[0]):
        if isinstance(v, UnitAttr):
            out.append(_format_key(k))
        else:
            out.append(f"{_format_key(k)} = {format_attribute(v, aliases, full_type=True)}")
    return ", ".join(out)


def _type_text(t: Type) -> str:
    from tilegen.runtime.asm.type_syntax import format_type

    return format_type(t)


def _format_float(a: FloatAttr) -> str:
    from tilegen.runtime.asm.float_format import format_float

    t = a.type or F64
    return format_float(a.value, t, a.bits)


def format_attribute(
    a: Attribute, aliases=None, elide_type: bool = False, full_type: bool = False
) -> str:
    """MLIR spelling of ``a``; ``aliases`` (an AliasTable) substitutes ``#alias`` names.

    ``full_type``: the attribute is a dictionary value (an attr-dict or properties entry, or a
    DictionaryAttr member), where MLIR's printer never elides the type, so ``i64`` integers and
    ``f64`` floats print ``5 : i64`` / ``1.0 : f64``; elsewhere (array elements, directive
    operands) those default types are elided as MLIR's ``AttrTypeElision::May`` does."""
    if aliases is not None:
        name = aliases.name_of(a)
        if name is not None:
            return name
    if isinstance(a, BoolAttr):
        return "true" if a.value else "false"
    if isinstance(a, IntegerAttr):
        t = a.type
        if isinstance(t, IntegerType) and t.width == 1:
            return "true" if a.value else "false"
        if elide_type or (not full_type and (t is None or t == I64)):
            return str(a.value)
        return f"{a.value} : {_type_text(t)}"
    if isinstance(a, FloatAttr):
        text = _format_float(a)
        if elide_type or (not full_type and (a.type is None or a.type == F64)):
            return text
        return f"{text} : {_type_text(a.type)}"
    if isinstance(a, StringAttr):
        return lx.encode_string(a.value)
    if isinstance(a, UnitAttr):
        return "unit"
    if isinstance(a, ArrayAttr):
        return "[" + ", ".join(format_attribute(v, aliases) for v in a.values) + "]"
    if isinstance(a, DictAttr):
        return "{" + format_dict_entries(a.items, aliases) + "}"
    if isinstance(a, TypeAttr):
        return _type_text(a.value)
    if isinstance(a, SymbolRefAttr):
        return format_symbol(a.root) + "".join("::" + format_symbol(n) for n in a.nested)
    if isinstance(a, DenseArrayAttr):
        et = _type_text(a.element)
        if not a.values:
            return f"array<{et}>"
        if isinstance(a.element, IntegerType) and a.element.width == 1:
            vals = ["true" if v else "false" for v in a.values]
        elif isinstance(a.element, FloatType):
            from tilegen.runtime.asm.float_format import format_float

            vals = [format_float(v, a.element) for v in a.values]
        else:
            vals = [str(v) for v in a.values]
        return f"array<{et}: {', '.join(vals)}>"
    if isinstance(a, DenseElementsAttr):
        from tilegen.runtime.asm import dense

        body = dense.format_dense_body(a, allow_hex=True)
        text = f"dense<{body}>"
        return text if elide_type else f"{text} : {_type_text(a.type)}"
    if isinstance(a, OpaqueAttr):
        return a.text
    if isinstance(a, Location):
        return "loc(" + _format_loc_inner(a, aliases) + ")"
    if hasattr(a, "format_asm"):  # dialect attributes (DIALECT_ATTR_MODULES)
        return a.format_asm()
    body = format_cuda_tile_attr_body(a, aliases)
    if body is not None:
        return "#cuda_tile." + body
    return f"<<{type(a).__name__}>>"


def format_cuda_tile_attr_body(a: Attribute, aliases=None) -> Optional[str]:
    """``div_by<32>``, ``rounding<zero>``... (no ``#cuda_tile.`` prefix); None if not cuda_tile."""
    if isinstance(a, EnumAttr):
        e = lookup_enum(a.enum)
        kw = e.keyword(a.value) if e is not None else None
        mnemonic = e.mnemonic if e is not None else a.enum
        return f"{mnemonic}<{kw if kw is not None else a.value}>"
    if isinstance(a, DivByAttr):
        extra = f", every {a.every} along {a.along}" if a.every is not None else ""
        return f"div_by<{a.divisor}{extra}>"
    if isinstance(a, SameElementsAttr):
        return "same_elements<[" + ", ".join(str(v) for v in a.values) + "]>"
    if isinstance(a, BoundedAttr):
        b = lambda v: "?" if v is None else str(v)  # noqa: E731
        return f"bounded<{b(a.lb)}, {b(a.ub)}>"
    if isinstance(a, OptimizationHintsAttr):
        items = ", ".join(
            f"{_format_key(k)} = {_format_hint_dict(v, aliases)}" for k, v in a.entries
        )
        return f"optimization_hints<{items}>"
    f = lambda x: format_attribute(x, aliases)  # noqa: E731
    if isinstance(a, DIFileAttr):
        return f"di_file<{lx.encode_string(a.name)} in {lx.encode_string(a.directory)}>"
    if isinstance(a, DICompileUnitAttr):
        return f"di_compile_unit<file = {f(a.file)}>"
    if isinstance(a, DISubprogramAttr):
        sl = f", scopeLine = {a.scope_line}" if a.scope_line is not None else ""
        return (
            f"di_subprogram<file = {f(a.file)}, line = {a.line}, name = "
            f"{lx.encode_string(a.name)}, linkageName = {lx.encode_string(a.linkage_name)}, "
            f"compileUnit = {f(a.compile_unit)}{sl}>"
        )
    if isinstance(a, DILexicalBlockAttr):
        col = f", column = {a.column}" if a.column is not None else ""
        return f"di_lexical_block<scope = {f(a.scope)}, file = {f(a.file)}, line = {a.line}{col}>"
    if isinstance(a, DILocAttr):
        return f"di_loc<{f(a.source)} in {f(a.scope)}>"
    return None


def _format_loc_inner(loc: Location, aliases=None, top: bool = True) -> str:
    """Location text without the ``loc(...)`` wrapper; nested locations may use aliases."""
    if not top and aliases is not None:
        name = aliases.name_of(loc)
        if name is not None:
            return name
    if isinstance(loc, UnknownLoc):
        return "unknown"
    if isinstance(loc, FileLineColLoc):
        return f"{lx.encode_string(loc.file)}:{loc.line}:{loc.col}"
    if isinstance(loc, NameLoc):
        text = lx.encode_string(loc.name)
        if loc.child is not None and not isinstance(loc.child, UnknownLoc):
            text += "(" + _format_loc_inner(loc.child, aliases, False) + ")"
        return text
    if isinstance(loc, CallSiteLoc):
        return (
            f"callsite({_format_loc_inner(loc.callee, aliases, False)} at "
            f"{_format_loc_inner(loc.caller, aliases, False)})"
        )
    if isinstance(loc, FusedLoc):
        meta = f"<{format_attribute(loc.metadata, aliases)}>" if loc.metadata is not None else ""
        inner = ", ".join(_format_loc_inner(x, aliases, False) for x in loc.locations)
        return f"fused{meta}[{inner}]"
    if isinstance(loc, OpaqueLoc):
        return loc.text
    if isinstance(loc, DILocAttr):
        return "#cuda_tile." + format_cuda_tile_attr_body(loc, aliases)
    return "unknown"


def format_location_ref(loc: Location, aliases=None) -> str:
    """A trailing location: ``loc(#loc3)`` with aliases, else ``loc("f":1:2)``."""
    if aliases is not None:
        if aliases.collecting:
            aliases.visit_location(loc)  # registers everything the location reaches
            return "loc()"
        name = aliases.name_of(loc)
        if name is not None:
            return f"loc({name})"
    return "loc(" + _format_loc_inner(loc, aliases) + ")"


# ============================================================================ aliases

_DI_ALIAS = {
    DIFileAttr: "di_file",
    DICompileUnitAttr: "di_compile_unit",
    DISubprogramAttr: "di_subprogram",
    DILexicalBlockAttr: "di_lexical_block",
}


def _children(a: Attribute) -> list[Attribute]:
    if isinstance(a, NameLoc):
        return [a.child] if a.child is not None else []
    if isinstance(a, CallSiteLoc):
        return [a.callee, a.caller]
    if isinstance(a, FusedLoc):
        return list(a.locations) + ([a.metadata] if a.metadata is not None else [])
    if isinstance(a, DILocAttr):
        return [a.source, a.scope]
    if isinstance(a, DICompileUnitAttr):
        return [a.file]
    if isinstance(a, DISubprogramAttr):
        return [a.file, a.compile_unit]
    if isinstance(a, DILexicalBlockAttr):
        return [a.scope, a.file]
    if isinstance(a, ArrayAttr):
        return list(a.values)
    if isinstance(a, DictAttr):
        return [v for _, v in a.items]
    return []


class AliasTable:
    """MLIR's alias state: ``#loc``/``#locN`` for locations and ``#di_file``... for debug-info
    attributes, numbered by nesting depth, then first use.  As in MLIR's AliasInitializer, an
    alias reached only from locations is *deferrable* and printed after the module; one that
    an op attribute or type uses (and everything it contains) is printed before it."""

    def __init__(self) -> None:
        #: attr -> [prefix, depth, order, deferrable]
        self._info: dict[Attribute, list] = {}
        self._names: dict[Attribute, str] = {}
        #: While True, :meth:`name_of` registers what the printer is about to print (MLIR's
        #: dummy printing pass) instead of answering; :meth:`assign` ends the pass.
        self.collecting = False

    def _visit(self, a: Attribute, defer: bool) -> int:
        """Register ``a`` (and what it contains); return its alias depth."""
        info = self._info.get(a)
        if info is not None:
            if not defer and info[3]:
                self._undefer(a)
            return info[1]
        prefix = "loc" if isinstance(a, Location) else _DI_ALIAS.get(type(a))
        depth = 0
        for c in _children(a):
            d = self._visit(c, defer)
            if c in self._info:
                depth = max(depth, d + 1)
        if prefix is not None:
            self._info[a] = [prefix, depth, len(self._info), defer]
        return depth

    def _undefer(self, a: Attribute) -> None:
        """Mark ``a`` and the aliases it reaches non-deferrable (MLIR's markAliasNonDeferrable)."""
        info = self._info.get(a)
        if info is not None:
            if not info[3]:
                return
            info[3] = False
        for c in _children(a):
            self._undefer(c)

    def visit_location(self, loc: Attribute) -> None:
        """Register a location printed after an op or block argument (deferrable)."""
        try:
            self._visit(loc, True)
        except TypeError:  # unhashable content
            pass

    def assign(self) -> None:
        """Name everything registered so far (ends a collecting pass)."""
        self.collecting = False
        self._assign()

    def _assign(self) -> None:
        order = sorted(self._info.items(), key=lambda kv: (kv[1][1], kv[1][0], kv[1][2]))
        counts: dict[str, int] = {}
        for a, (prefix, _d, _o, _defer) in order:
            n = counts.get(prefix, 0)
            counts[prefix] = n + 1
            self._names[a] = "#" + prefix + (str(n) if n else "")

    def name_of(self, a: Attribute) -> Optional[str]:
        try:
            if self.collecting:
                self._visit(a, False)  # an op attribute or type
                return None
            return self._names.get(a)
        except TypeError:  # unhashable content
            return None

    def render(self, printer=None, all_after: bool = False) -> tuple[str, str]:
        """(definitions before the module, deferred definitions after it); ``all_after`` puts
        every definition after the body, as MLIR does for a printout without a top-level op
        (``tileirdisasm -g``)."""
        order = sorted(self._names.items(), key=lambda kv: self._sort_key(kv[0]))
        head, tail = [], []
        for a, name in order:
            if isinstance(a, DILocAttr) or not isinstance(a, Location):
                text = "#cuda_tile." + format_cuda_tile_attr_body(a, self)
            else:
                text = "loc(" + _format_loc_inner(a, self, top=True) + ")"
            after = all_after or self._info[a][3]
            (tail if after else head).append(f"{name} = {text}\n")
        return "".join(head), "".join(tail)

    def _sort_key(self, a):
        prefix, depth, order, _defer = self._info[a]
        return (depth, prefix, order)
