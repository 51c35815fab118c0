"""Textual forms of types: builtin element types, function types, cuda_tile types, opaque types.

cuda_tile types parse in short (``tile<4xf32>``) and long (``!cuda_tile.tile<4xf32>``) form, nested
too. They print short inside cuda_tile custom syntax and long elsewhere; types nested inside a
cuda_tile type always print short, as NVIDIA's printer does.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

from tilegen.runtime.asm import lexer as lx
from tilegen.runtime.limits import integer_literal_error
from tilegen.runtime.opdef import lookup_enum
from tilegen.runtime.types import (
    DYNAMIC,
    FunctionType,
    GatherScatterViewType,
    IndexType,
    NoneType,
    OpaqueType,
    PartitionViewType,
    PointerType,
    StridedViewType,
    TensorViewType,
    TestEvolvedType,
    TileType,
    TokenType,
    Type,
    element_type_from_name,
)

if TYPE_CHECKING:  # pragma: no cover
    from tilegen.runtime.asm.parser import OpParser

DIALECT_TYPES = (
    "tile",
    "ptr",
    "token",
    "tensor_view",
    "partition_view",
    "strided_view",
    "gather_scatter_view",
)
PADDING_VALUES = ("zero", "neg_zero", "nan", "pos_inf", "neg_inf")
_BUILTIN_SHAPED = ("tensor", "vector", "memref", "complex", "tuple")
_RE_DIMS = re.compile(r"[ \t\n]*((?:(?:[0-9]+|\?)[ \t\n]*x[ \t\n]*)*)")
#: ``<4x8xf32>`` right after ``tile``: the common spelling, memoized by its text
_RE_SIMPLE_TILE = re.compile(r"<(?:[0-9]+x)*[A-Za-z_][A-Za-z_0-9]*>")
#: simple tile spelling -> its (verified, immutable) TileType
_SIMPLE_TILES: dict[str, "TileType"] = {}
_RE_INT_TYPE = re.compile(r"[su]?i[0-9]+$")
_RE_OTHER_FLOAT = re.compile(r"(f80|f128|f[468]E[0-9A-Za-z]+)$")
_I32_MAX = 2**31 - 1


# ============================================================================ parsing


def _seek(p: "OpParser", pos: int) -> None:
    p.lexer.reset(pos)
    p.tok = p.lexer.next()
    p._check_lex_error()


def _raw_balanced(p: "OpParser", start: int) -> str:
    """Source text from ``start`` through the ``>`` closing the ``<`` right after it."""
    text = p.lexer.text
    i = start
    while i < len(text) and text[i] != "<":
        i += 1
    if i >= len(text):
        return text[start:i]
    depth = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            end = p.lexer._string_end(i)
            if end < 0:
                break
            i = end
            continue
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            if c == ">" and i > 0 and text[i - 1] == "-":
                i += 1
                continue
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
        i += 1
    p._fail("unbalanced '<' character in pretty dialect name", p.lexer.loc(start))


def parse_optional_type(p: "OpParser") -> Optional[Type]:
    tok = p.tok
    if tok.kind == lx.PUNCT and tok.text == "(":
        return _parse_function_type(p)
    if tok.kind == lx.BARE:
        name = tok.text
        t = element_type_from_name(name)
        if t is not None:
            p._advance()
            return t
        if name == "none":
            p._advance()
            return NoneType()
        if name in DIALECT_TYPES:
            return parse_dialect_type(p, long=False)
        if name in _BUILTIN_SHAPED:
            start = tok.pos
            text = _raw_balanced(p, start)
            _seek(p, start + len(text))
            return OpaqueType(text)
        if _RE_INT_TYPE.match(name):
            p._advance()
            return OpaqueType(name)
        if _RE_OTHER_FLOAT.match(name):
            p._advance()
            return OpaqueType(name)
        return None
    if tok.kind == lx.EXCL:
        spelling = tok.text[1:]
        if spelling.startswith("cuda_tile."):
            return parse_dialect_type(p, long=True)
        # --- nv_tileaa types (runtime/asm/nv_tileaa_types.py) ---
        if spelling.startswith("nv_tileaa."):
            from tilegen.runtime.asm.nv_tileaa_types import parse_nv_tileaa_type

            return parse_nv_tileaa_type(p)
        # --- end nv_tileaa ---
        if spelling.startswith("nv_tileas.async."):  # runtime/asm/nv_tileas_types.py
            from tilegen.runtime.asm.nv_tileas_types import parse_nv_tileas_type

            return parse_nv_tileas_type(p)
        if "." not in spelling:
            alias = p.type_aliases.get(spelling)
            if alias is None:
                p._fail(f"undefined symbol alias id '{spelling}'")
            p._advance()
            return alias
        start = tok.pos
        end = start + len(tok.text)
        text = p.lexer.text
        if end < len(text) and text[end] == "<":
            raw = tok.text + _raw_balanced(p, end)
        else:
            raw = tok.text
        _seek(p, start + len(raw))
        return OpaqueType(raw)
    return None


def parse_paren_type_list(p: "OpParser") -> list[Type]:
    p._expect("(")
    out: list[Type] = []
    if p.parse_optional_punct(")"):
        return out
    while True:
        out.append(p.parse_type())
        if not p.parse_optional_punct(","):
            break
    p._expect(")")
    return out


def _parse_function_type(p: "OpParser") -> FunctionType:
    inputs = parse_paren_type_list(p)
    p._expect("->")
    if p.at_punct("("):
        results = parse_paren_type_list(p)
    else:
        results = [p.parse_type()]
    return FunctionType(tuple(inputs), tuple(results))


def parse_dialect_type(p: "OpParser", long: bool) -> Type:
    """``tile<..>`` etc. (short) or ``!cuda_tile.tile<..>`` (long); the current token names it."""
    tok = p.tok
    mnemonic = tok.text[len("!cuda_tile.") :] if long else tok.text
    simple = None
    if mnemonic == "tile":
        # fast path: `tile<4x8xf32>` seen before parses to the same verified type
        m = _RE_SIMPLE_TILE.match(p.lexer.text, tok.pos + len(tok.text))
        if m is not None:
            simple = m.group(0)
            t = _SIMPLE_TILES.get(simple)
            if t is not None:
                _seek(p, m.end())
                return t
    tok = p._advance()
    loc = p.loc_at(tok)
    if mnemonic == "token":
        return TokenType()
    parser = _DIALECT_PARSERS.get(mnemonic)
    if parser is None:
        if mnemonic.startswith("testing$"):
            text = tok.text[len("!cuda_tile.") :] if long else tok.text
            if p.at_punct("<"):
                text += _raw_balanced(p, p.tok.pos)
                _seek(p, tok.pos + len(tok.text) + len(text) - len(mnemonic))
            return OpaqueType("!cuda_tile." + text)
        p._fail(f"unknown type: {mnemonic}", loc)
    p._expect("<")
    t = parser(p, loc)
    p._expect(">")
    p.verify_type(t, loc)
    if simple is not None and p.verify_types:
        _SIMPLE_TILES[simple] = t
    return t


def _parse_dims(p: "OpParser") -> list[int]:
    """``2x?x4x`` dimension prefix (each followed by ``x``); ``?`` is DYNAMIC."""
    text = p.lexer.text
    m = _RE_DIMS.match(text, p.tok.pos)
    dims = []
    for d in re.split(r"[ \t\n]*x[ \t\n]*", m.group(1))[:-1] if m.group(1) else []:
        _check_digits(p, d, m)
        dims.append(DYNAMIC if d.strip() == "?" else int(d))
    if m.group(1):
        _seek(p, m.end())
    return dims


def _check_digits(p: "OpParser", digits: str, m: "re.Match") -> None:
    """A shape dimension over the integer literal limit is a located error (runtime/limits.py)."""
    if len(digits) > 64:
        message = integer_literal_error(digits.strip())
        if message:
            p._fail(message, p.lexer.loc(m.string.index(digits, m.start())))


def _parse_tile(p: "OpParser", loc) -> TileType:
    start = p.loc()
    dims = _parse_dims(p)
    if DYNAMIC in dims:
        p._fail("expected static shape", start)
    elem = _parse_element(p)
    if p.parse_optional_punct(","):  # nv_tileas: `tile<4x8xf32, #nv_tileas.blocked<...>>`
        from tilegen.runtime.asm.attr_syntax import parse_attribute

        return TileType(tuple(dims), elem, parse_attribute(p))
    return TileType(tuple(dims), elem)


def _parse_element(p: "OpParser") -> Type:
    """An element/pointee type inside a cuda_tile type (cuda_tile's parser wants a keyword)."""
    t = p.parse_optional_type()
    if t is None:
        if p.tok.kind == lx.EXCL:
            p._fail("expected non-function type")
        p._fail("expected valid keyword")
    return t


def _parse_ptr_attr_keyword(p: "OpParser") -> str:
    enum = lookup_enum("PtrAttr")
    at = p.loc()
    kw = p.parse_optional_keyword()
    if kw is None or enum is None or enum.value(kw) is None:
        cases = ", ".join(enum.keywords) if enum is not None else ""
        p._fail(f"expected ::mlir::cuda_tile::PtrAttr to be one of: {cases}", at)
    return kw


def _parse_ptr(p: "OpParser", loc) -> PointerType:
    pointee = _parse_element(p)
    if p.parse_optional_punct(","):  # 13.4: ptr<T, <KW>>
        p._expect("<")
        kw = _parse_ptr_attr_keyword(p)
        p._expect(">")
        return PointerType(pointee, kw)
    return PointerType(pointee)


def _parse_optional_tv_ptr_attr(p: "OpParser") -> Optional[str]:
    """``, #cuda_tile.ptr_attr<KW>`` after a tensor_view's strides (13.4)."""
    if not p.at_punct(","):
        return None
    state = p.save()
    p._advance()
    if p.tok.kind == lx.HASH and p.tok.text == "#cuda_tile.ptr_attr":
        p._advance()
        p._expect("<")
        kw = _parse_ptr_attr_keyword(p)
        p._expect(">")
        return kw
    p.restore(state)
    return None


def _parse_stride_entry(p: "OpParser") -> int:
    if p.parse_optional_punct("?"):
        return DYNAMIC
    at = p.loc()
    v = p.parse_optional_integer()
    if v is None:
        p._fail("expected either 64-bit integer or question mark")
    if v <= 0:
        p._fail(f"expected strictly positive integer, got {v}", at)
    return v


def _parse_tensor_view(p: "OpParser", loc) -> TensorViewType:
    dims = _parse_dims(p)
    elem = _parse_element(p)
    strides: list[int] = []
    if not dims:
        ptr_attr = _parse_optional_tv_ptr_attr(p)  # ptr_attr (13.4): tensor_view<f32, #...<KW>>
        if ptr_attr is not None:
            return TensorViewType(elem, (), (), ptr_attr)
        if p.parse_optional_punct(","):
            if p.at_keyword("strides"):
                p._fail("strides must not be provided for 0-d tiles")
            p._fail("unexpected token after element type in 0-d tensor_view")
        if not p.at_punct(">"):
            p._fail("unexpected token after element type in 0-d tensor_view")
        return TensorViewType(elem, (), ())
    if not p.parse_optional_punct(",") or not p.parse_optional_keyword("strides"):
        p._fail("expected 'strides'")
    p._expect("=")
    p._expect("[")
    if not p.at_punct("]"):
        while True:
            strides.append(_parse_stride_entry(p))
            if not p.parse_optional_punct(","):
                break
    p._expect("]")
    return TensorViewType(elem, tuple(dims), tuple(strides), _parse_optional_tv_ptr_attr(p))


def _parse_tile_shape(p: "OpParser") -> tuple[int, ...]:
    _expect_kw(p, "tile")
    p._expect("=")
    p._expect("(")
    dims: list[int] = []
    if not p.at_punct(")"):
        text = p.lexer.text
        m = re.compile(r"[ \t\n]*([0-9?]+(?:[ \t\n]*x[ \t\n]*[0-9?]+)*)").match(text, p.tok.pos)
        if not m:
            p._fail("expected integer value")
        for i, d in enumerate(re.split(r"[ \t\n]*x[ \t\n]*", m.group(1))):
            if d == "?" or not d.isdigit():
                p._fail("expected static shape")
            _check_digits(p, d, m)
            v = int(d)
            if v < 1 or v > _I32_MAX:
                p._fail(
                    f"tile dimension {i} exceeds i32 limitations (got {v}, expected strictly "
                    f"positive and less than or equal to {_I32_MAX})"
                )
            dims.append(v)
        _seek(p, m.end())
    p._expect(")")
    return tuple(dims)


def _expect_kw(p: "OpParser", kw: str) -> None:
    if p.parse_optional_keyword(kw) is None:
        p._fail(f"expected '{kw}'")


def _parse_padding(p: "OpParser") -> Optional[str]:
    """``padding_value = KW ,`` if present."""
    if not p.at_keyword("padding_value"):
        return None
    p._advance()
    p._expect("=")
    at = p.loc()
    kw = p.parse_optional_keyword()
    if kw not in PADDING_VALUES:
        p._fail(
            f'invalid padding_value attribute specification. Got "{kw or p.tok.text}" but expect '
            f"one of: {', '.join(PADDING_VALUES)}",
            at,
        )
    p._expect(",")
    return kw


def _parse_tv_param(p: "OpParser") -> TensorViewType:
    at = p.loc()
    t = p.parse_type()
    if not isinstance(t, TensorViewType):
        p._fail(f"expected 'tensor_view' type, but got '{format_type(t)}'", at)
    return t


def _parse_int_list(p: "OpParser") -> tuple[int, ...]:
    p._expect("[")
    out: list[int] = []
    if not p.at_punct("]"):
        while True:
            out.append(p.parse_integer())
            if not p.parse_optional_punct(","):
                break
    p._expect("]")
    return tuple(out)


def _parse_dim_map(p: "OpParser", rank: int) -> tuple[int, ...]:
    if p.parse_optional_punct(","):
        _expect_kw(p, "dim_map")
        p._expect("=")
        return _parse_int_list(p)
    return tuple(range(rank))


def _parse_partition_view(p: "OpParser", loc) -> PartitionViewType:
    shape = _parse_tile_shape(p)
    p._expect(",")
    pad = _parse_padding(p)
    tv = _parse_tv_param(p)
    dim_map = _parse_dim_map(p, len(shape))
    return PartitionViewType(shape, tv, dim_map, pad)


def _parse_strided_view(p: "OpParser", loc) -> StridedViewType:
    shape = _parse_tile_shape(p)
    p._expect(",")
    _expect_kw(p, "traversal_strides")
    p._expect("=")
    strides = _parse_int_list(p)
    p._expect(",")
    pad = _parse_padding(p)
    tv = _parse_tv_param(p)
    dim_map = _parse_dim_map(p, len(shape))
    return StridedViewType(shape, strides, tv, dim_map, pad)


def _parse_gather_scatter_view(p: "OpParser", loc) -> GatherScatterViewType:
    shape = _parse_tile_shape(p)
    p._expect(",")
    pad = _parse_padding(p)
    tv = _parse_tv_param(p)
    p._expect(",")
    _expect_kw(p, "sparse_dim")
    p._expect("=")
    return GatherScatterViewType(shape, tv, p.parse_integer(), pad)


_DIALECT_PARSERS = {
    "tile": _parse_tile,
    "ptr": _parse_ptr,
    "tensor_view": _parse_tensor_view,
    "partition_view": _parse_partition_view,
    "strided_view": _parse_strided_view,
    "gather_scatter_view": _parse_gather_scatter_view,
}


# ============================================================================ printing


def _dim(d: int) -> str:
    return "?" if d == DYNAMIC else str(d)


def _body(t: Type) -> str:
    """The short (prefix-less) spelling of a cuda_tile type."""
    if isinstance(t, TileType):
        dims = "".join(f"{_dim(d)}x" for d in t.shape)
        enc = f", {t.encoding.format_asm()}" if t.encoding is not None else ""
        return f"tile<{dims}{format_type(t.element, short=True)}{enc}>"
    if isinstance(t, PointerType):
        pa = f", <{t.ptr_attr}>" if t.ptr_attr is not None else ""
        return f"ptr<{format_type(t.pointee, short=True)}{pa}>"
    if isinstance(t, TokenType):
        return "token"
    if isinstance(t, TensorViewType):
        dims = "".join(f"{_dim(d)}x" for d in t.shape)
        elem = format_type(t.element, short=True)
        pa = f", #cuda_tile.ptr_attr<{t.ptr_attr}>" if t.ptr_attr is not None else ""
        if not t.shape:
            return f"tensor_view<{elem}{pa}>"
        strides = ",".join(_dim(s) for s in t.strides)
        return f"tensor_view<{dims}{elem}, strides=[{strides}]{pa}>"
    tile = lambda shape: "tile=(" + "x".join(str(d) for d in shape) + ")"  # noqa: E731
    pad = lambda v: f"padding_value = {v}, " if v is not None else ""  # noqa: E731
    if isinstance(t, PartitionViewType):
        dm = ""
        if t.dim_map and tuple(t.dim_map) != tuple(range(len(t.dim_map))):
            dm = ", dim_map=[" + ", ".join(str(d) for d in t.dim_map) + "]"
        return f"partition_view<{tile(t.tile_shape)}, {pad(t.padding_value)}{_body(t.tensor_view)}{dm}>"
    if isinstance(t, StridedViewType):
        dm = ""
        if t.dim_map and tuple(t.dim_map) != tuple(range(len(t.dim_map))):
            dm = ", dim_map=[" + ", ".join(str(d) for d in t.dim_map) + "]"
        ts = "traversal_strides=[" + ",".join(str(s) for s in t.traversal_strides) + "]"
        return (
            f"strided_view<{tile(t.tile_shape)}, {ts}, {pad(t.padding_value)}"
            f"{_body(t.tensor_view)}{dm}>"
        )
    if isinstance(t, GatherScatterViewType):
        return (
            f"gather_scatter_view<{tile(t.tile_shape)}, {pad(t.padding_value)}"
            f"{_body(t.tensor_view)}, sparse_dim={t.sparse_dim}>"
        )
    raise TypeError(t)


_DIALECT_CLASSES = (
    TileType,
    PointerType,
    TokenType,
    TensorViewType,
    PartitionViewType,
    StridedViewType,
    GatherScatterViewType,
)


def format_type(t: Type, short: bool = False, aliases=None) -> str:
    """MLIR spelling of ``t``; ``short`` drops the ``!cuda_tile.`` prefix of dialect types."""
    if isinstance(t, _DIALECT_CLASSES):
        body = _body(t)
        return body if short else "!cuda_tile." + body
    name = getattr(t, "name", None)
    if isinstance(name, str):
        return name
    # --- nv_tileaa types (runtime/asm/nv_tileaa_types.py) ---
    from tilegen.runtime.asm.nv_tileaa_types import format_nv_tileaa_type

    nv = format_nv_tileaa_type(t, lambda x: format_type(x, short=True, aliases=aliases))
    if nv is not None:
        return nv
    # --- end nv_tileaa ---
    from tilegen.runtime.asm.nv_tileas_types import format_nv_tileas_type

    nv = format_nv_tileas_type(t, lambda x: format_type(x, short=True, aliases=aliases))
    if nv is not None:
        return nv
    if isinstance(t, IndexType):
        return "index"
    if isinstance(t, NoneType):
        return "none"
    if isinstance(t, FunctionType):
        return format_function_type(list(t.inputs), list(t.results), short)
    if isinstance(t, OpaqueType):
        return t.text
    if isinstance(t, TestEvolvedType):
        return "!cuda_tile.testing$bytecode_test_evolved"
    return f"<<{type(t).__name__}>>"


def format_function_type(inputs: list[Type], results: list[Type], short: bool = False) -> str:
    ins = "(" + ", ".join(format_type(t, short) for t in inputs) + ")"
    if len(results) == 1 and not isinstance(results[0], FunctionType):
        outs = format_type(results[0], short)
    else:
        outs = "(" + ", ".join(format_type(t, short) for t in results) + ")"
    return f"{ins} -> {outs}"
