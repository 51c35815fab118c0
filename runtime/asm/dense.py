"""Dense constant literals: ``<E: literal> : tile<...>`` (constant, global) and ``dense<...>`` bodies.

Values live in :class:`DenseElementsAttr`: ``values`` is the flat row-major element tuple (a single
entry is a splat), integers stored sign-interpreted at their width (i1 as 0/1); float elements also
carry their exact ``bits`` (so NaN payloads, -0.0 and f8/f4 patterns survive). Build attributes with
:func:`make_dense` / :func:`dense_from_bits` so equal constants compare equal.

Parse errors follow cuda_tile's custom parser (elements are converted as they are read, then the
literal's shape is checked): ``inferred shape of elements literal ([2, 2]) does not match type
([4, 2])``, ``tensor literal is invalid; ranks are not consistent between elements``, ``integer
constant out of range for type``, ``unexpected decimal integer literal for a floating point value``.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

from tilegen.runtime.asm import lexer as lx
from tilegen.runtime.asm.float_format import format_float, is_float_type, semantics_of
from tilegen.runtime.attributes import DenseElementsAttr
from tilegen.runtime.diagnostics import Diagnostic, DiagnosticError
from tilegen.runtime.records import dataclass
from tilegen.runtime.types import FloatType, IntegerType, TileType, Type

__all__ = [
    "ALLOWED_ELEMENT_NAMES",
    "dense_from_bits",
    "element_bits",
    "expand",
    "format_dense_body",
    "format_dense_literal",
    "format_element",
    "format_float",
    "make_dense",
    "parse_dense_body",
    "parse_dense_literal",
]

#: Element types a cuda_tile dense literal may name, in the order its diagnostic lists them.
ALLOWED_ELEMENT_NAMES = (
    "i1 i8 i16 i32 i64 f16 bf16 f32 f64 tf32 f8E4M3FN f8E5M2 f8E8M0FNU f4E2M1FN".split()
)
_ALLOWED_TEXT = " or ".join(ALLOWED_ELEMENT_NAMES)

#: Literals with more elements than this print as a hex string (MLIR's dense printer and
#: tileirdisasm's ``<E: "0x...">`` alike).
HEX_THRESHOLD = 100


# --------------------------------------------------------------------------- values


def _wrap_int(v: int, width: int) -> int:
    """Truncate to ``width`` bits and read back signed (i1 reads back as 0/1)."""
    v &= (1 << width) - 1
    if width > 1 and v >> (width - 1):
        v -= 1 << width
    return v


def element_bits(value, elem: Type) -> int:
    """The storage bit pattern of one element value."""
    if isinstance(elem, IntegerType):
        return int(value) & ((1 << elem.width) - 1)
    return semantics_of(elem).from_float(float(value))


def dense_from_bits(type: Type, bits: Sequence[int]) -> DenseElementsAttr:
    """A dense attribute from raw element bit patterns (splats collapse to one entry)."""
    elem = type.element if isinstance(type, TileType) else type
    bits = tuple(bits)
    if bits and all(b == bits[0] for b in bits):
        bits = bits[:1]
    if isinstance(elem, IntegerType):
        return DenseElementsAttr(type, tuple(_wrap_int(b, elem.width) for b in bits))
    sem = semantics_of(elem)
    return DenseElementsAttr(type, tuple(sem.to_float(b) for b in bits), bits)


def make_dense(type: Type, values: Sequence) -> DenseElementsAttr:
    """A dense attribute from Python ints/floats (floats rounded to the element type)."""
    elem = type.element if isinstance(type, TileType) else type
    return dense_from_bits(type, [element_bits(v, elem) for v in values])


def expand(attr: DenseElementsAttr) -> list:
    """All elements, row-major (a splat repeated to the type's element count)."""
    if attr.is_splat and isinstance(attr.type, TileType):
        return list(attr.values) * attr.type.num_elements
    return list(attr.values)


# --------------------------------------------------------------------------- printing


def format_element(value, elem: Type, bits: Optional[int] = None) -> str:
    if isinstance(elem, IntegerType):
        if elem.width == 1:
            return "true" if value else "false"
        return str(_wrap_int(int(value), elem.width))
    return format_float(value, elem, bits)


def format_dense_body(attr: DenseElementsAttr, allow_hex: bool = True) -> str:
    """``42`` for a splat, nested ``[[1, 2], [3, 4]]``, or (more than 100 elements, as MLIR and
    tileirdisasm print them) the little-endian storage bytes ``"0x0100000002000000..."``."""
    elem = attr.type.element if isinstance(attr.type, TileType) else attr.type
    bits = attr.bits or (None,) * len(attr.values)
    if attr.is_splat:
        return format_element(attr.values[0], elem, bits[0])
    if allow_hex and len(attr.values) > HEX_THRESHOLD:
        return '"0x' + _hex_blob(attr, elem) + '"'
    items = [format_element(v, elem, b) for v, b in zip(attr.values, bits)]
    shape = attr.type.shape if isinstance(attr.type, TileType) else (len(items),)
    return _nest(items, list(shape))


def _nest(items: list[str], shape: list[int]) -> str:
    if len(shape) <= 1:
        return "[" + ", ".join(items) + "]"
    step = len(items) // shape[0]
    return (
        "["
        + ", ".join(_nest(items[i : i + step], shape[1:]) for i in range(0, len(items), step))
        + "]"
    )


def format_dense_literal(attr: DenseElementsAttr) -> str:
    """cuda_tile's ``<E: literal>`` (the ``: type`` suffix is printed by the caller)."""
    elem = attr.type.element if isinstance(attr.type, TileType) else attr.type
    return f"<{elem.name}: {format_dense_body(attr)}>"


def _storage_bytes(elem: Type) -> int:
    width = elem.width if isinstance(elem, IntegerType) else semantics_of(elem).bits
    return max(1, (width + 7) // 8)


def _hex_blob(attr: DenseElementsAttr, elem: Type) -> str:
    n = _storage_bytes(elem)
    bits = attr.bits if attr.bits is not None else [element_bits(v, elem) for v in attr.values]
    return "".join(int(b).to_bytes(n, "little").hex().upper() for b in bits)


# --------------------------------------------------------------------------- parsing


def _fail(p, msg: str, loc=None, notes=()) -> "NoReturn":  # noqa: F821
    """``p.error`` (located, ``custom op`` prefixed) with optional notes."""
    try:
        p.error(msg, loc)
    except DiagnosticError as e:
        for note_msg, note_loc in notes:
            e.diag.attach_note(note_msg, note_loc or e.diag.loc)
        raise
    raise AssertionError("OpParser.error returned")  # pragma: no cover


def _op_name(p) -> str:
    # TODO(B->A): a public OpParser accessor for the name of the op being parsed.
    stack = getattr(p, "_op_stack", None)
    return stack[-1].name if stack else "cuda_tile.constant"


@dataclass(frozen=True)
class _Raw:
    """One literal element as written: ``kind`` is bool / int / float / other (not a number)."""

    kind: str
    value: Union[int, float] = 0
    negative: bool = False
    hex: bool = False
    loc: object = None  # where the element starts (its ``-`` if any)
    num_loc: object = None  # where the number itself starts


def _read_element(p) -> _Raw:
    """Consume one element literal (``true``, ``-12``, ``0x7FC00000``, ``1.5``) without typing it."""
    loc = p.loc()
    if p.at_keyword("true") or p.at_keyword("false"):
        return _Raw("bool", 1 if p.parse_keyword() == "true" else 0, loc=loc, num_loc=loc)
    state = p.save()
    negative = p.parse_optional_punct("-")
    num_loc = p.loc()
    tok = p.tok
    if tok.kind == lx.FLOAT:
        return _Raw("float", p.parse_optional_float(), negative, False, loc, num_loc)
    if tok.kind == lx.INTEGER:
        is_hex = tok.text.startswith(("0x", "0X"))
        value = p.parse_optional_integer(allow_negative=False)
        return _Raw("int", value, negative, is_hex, loc, num_loc)
    p.restore(state)
    return _Raw("other", loc=loc, num_loc=loc)


def _int_bits(p, raw: _Raw, elem: IntegerType) -> int:
    if raw.kind == "bool" and elem.width == 1:
        return raw.value
    if raw.kind != "int":
        _fail(p, "expected integer value", raw.loc)
    v = -raw.value if raw.negative else raw.value
    w = elem.width
    if not -(1 << (w - 1)) <= v <= (1 << w) - 1:
        _fail(p, "integer constant out of range for type", raw.loc)
    return _wrap_int(v, w)


def _float_bits(p, raw: _Raw, elem: FloatType) -> int:
    sem = semantics_of(elem)
    if raw.kind == "float":  # Python's float() rounds like strtod; then APFloat::convert
        return sem.from_float(-raw.value if raw.negative else raw.value)
    if raw.kind != "int":
        _fail(p, "expected floating point literal", raw.num_loc)
    if not raw.hex:
        _fail(
            p,
            "unexpected decimal integer literal for a floating point value",
            raw.num_loc,
            notes=[("add a trailing dot to make the literal a float", raw.num_loc)],
        )
    if raw.negative:
        _fail(p, "hexadecimal float literal should not have a leading minus", raw.num_loc)
    if raw.value.bit_length() > sem.bits:
        _fail(p, "hexadecimal float constant out of range for type", raw.num_loc)
    return raw.value


def _element_bits(p, raw: _Raw, elem: Type) -> int:
    if isinstance(elem, IntegerType):
        return _int_bits(p, raw, elem)
    return _float_bits(p, raw, elem)


def _parse_list(p, parse_element, out: list) -> list[int]:
    """``[e, ...]`` nested (MLIR's TensorLiteralParser::parseList); returns the inferred shape."""
    p.expect_punct("[")
    dims: Optional[list[int]] = None
    size = 0
    if not p.at_punct("]"):
        while True:
            if p.at_punct("["):
                this = _parse_list(p, parse_element, out)
            else:
                out.append(parse_element())
                this = []
            size += 1
            if dims is None:
                dims = this
            elif this != dims:
                _fail(p, "tensor literal is invalid; ranks are not consistent between elements")
            if not p.parse_optional_punct(","):
                break
    p.expect_punct("]")
    return [size] + (dims or [])


def _parse_literal(p, elem: Type) -> tuple[list[int], Optional[list[int]]]:
    """Elements as bit patterns and the inferred shape (None for a bare scalar)."""
    if p.tok.kind == lx.STRING:
        loc = p.loc()
        return _hex_elements(p, p.parse_string(), elem, loc), None
    parse_element = lambda: _element_bits(p, _read_element(p), elem)  # noqa: E731
    if p.at_punct("["):
        out: list[int] = []
        shape = _parse_list(p, parse_element, out)
        return out, shape
    return [parse_element()], None


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _check_shape(p, shape: Optional[list[int]], type: Type, loc, nvalues: int) -> None:
    if shape is None:
        return
    if nvalues == 0:
        _fail(p, "dense attribute cannot be empty", loc)
    want = list(type.shape) if isinstance(type, TileType) else None
    if want is not None and shape != want:
        _fail(
            p,
            f"inferred shape of elements literal ({_shape_text(shape)}) "
            f"does not match type ({_shape_text(want)})",
            loc,
        )


def _type_text(t: Type) -> str:
    try:
        from tilegen.runtime.asm.type_syntax import format_type

        return format_type(t)
    except ImportError:  # pragma: no cover - A's module not present yet
        return getattr(t, "name", None) or getattr(t, "text", None) or repr(t)


def _parse_element_type(p) -> Type:
    loc = p.loc()
    name = p.tok.text if p.at_keyword() else None
    elem = p.parse_optional_type()
    unknown = None
    if elem is None:
        got = "<<NULL TYPE>>"
        if name is not None:  # MLIR reports the unknown name first, then the null type
            unknown = Diagnostic("error", f"'{_op_name(p)}' unknown type: {name}", loc)
    elif elem_ok(elem):
        return elem
    else:
        got = _type_text(elem)
    try:
        _fail(p, f"expect element type to be one of {_ALLOWED_TEXT} values, but got '{got}'", loc)
    except DiagnosticError as e:
        if unknown is not None:
            e.preceding.append(unknown)
        raise


def elem_ok(t: Type) -> bool:
    if isinstance(t, IntegerType):
        return t.width in (1, 8, 16, 32, 64)
    return is_float_type(t)


def parse_dense_literal(p, type: Optional[Type] = None) -> DenseElementsAttr:
    """``<E: literal> [: T]``; the ``: T`` part is parsed unless ``type`` is given."""
    p.expect_punct("<")
    elem = _parse_element_type(p)
    p.expect_punct(":")
    lit_loc = p.loc()
    hex_form = p.tok.kind == lx.STRING
    bits, shape = _parse_literal(p, elem)
    p.expect_punct(">")
    if type is None:
        p.expect_punct(":")
        tloc = p.loc()
        type = p.parse_type()
    else:
        tloc = lit_loc
    if isinstance(type, TileType):
        if type.element != elem:
            _fail(
                p,
                f"mismatch between the element type: '{elem.name}' and the tile element type "
                f"'{_type_text(type.element)}'",
                tloc,
            )
    else:
        _fail(
            p,
            f"result #0 must be tile of {' or '.join(ALLOWED_ELEMENT_NAMES)} values, "
            f"but got '{_type_text(type)}'",
            tloc,
        )
    if hex_form:
        _check_hex_count(p, bits, type, lit_loc)
    _check_shape(p, shape, type, lit_loc, len(bits))
    return dense_from_bits(type, bits)


def parse_dense_body(p, type: Optional[Type] = None) -> DenseElementsAttr:
    """The rest of a builtin ``dense<...> : T`` attribute, from its ``<``.

    ``type`` is the already-known attribute type; otherwise the trailing ``: T`` is parsed. As in
    MLIR, elements are read untyped, the shape is checked, then each element is converted.
    """
    p.expect_punct("<")
    lit_loc = p.loc()
    hex_text = None
    raws: list[_Raw] = []
    shape: Optional[list[int]] = None
    if p.tok.kind == lx.STRING:
        hex_text = p.parse_string()
    elif p.at_punct("["):
        shape = _parse_list(p, lambda: _read_element(p), raws)
    elif not p.at_punct(">"):
        raws.append(_read_element(p))
    p.expect_punct(">")
    if type is None:
        p.expect_punct(":")
        type = p.parse_type()
    if not isinstance(type, TileType) or not elem_ok(type.element):
        _fail(
            p,
            f"expected shaped type with integer or float element type, got '{_type_text(type)}'",
            lit_loc,
        )
    if hex_text is not None:
        bits = _hex_elements(p, hex_text, type.element, lit_loc)
        _check_hex_count(p, bits, type, lit_loc)
        return dense_from_bits(type, bits)
    if not raws:
        _fail(p, "dense attribute cannot be empty", lit_loc)
    _check_shape(p, shape, type, lit_loc, len(raws))
    return dense_from_bits(type, [_element_bits(p, r, type.element) for r in raws])


def _hex_elements(p, text: str, elem: Type, loc) -> list[int]:
    """``"0x..."``: little-endian element storage bytes (MLIR's hex form) -> bit patterns."""
    try:
        if not text.startswith("0x"):
            raise ValueError
        data = bytes.fromhex(text[2:])
    except ValueError:
        _fail(p, "expected string containing hex digits starting with `0x`", loc)
    n = _storage_bytes(elem)
    if len(data) % n or not data:
        _fail(p, f"elements hex data size is invalid for provided type: got {len(data)} bytes", loc)
    mask = (1 << (elem.width if isinstance(elem, IntegerType) else semantics_of(elem).bits)) - 1
    return [int.from_bytes(data[i : i + n], "little") & mask for i in range(0, len(data), n)]


def _check_hex_count(p, bits: list[int], type: Type, loc) -> None:
    want = type.num_elements if isinstance(type, TileType) else 1
    if len(bits) not in (1, want):
        n = _storage_bytes(type.element if isinstance(type, TileType) else type)
        _fail(
            p,
            f"elements hex data size is invalid for provided type: got {len(bits) * n} bytes",
            loc,
        )
