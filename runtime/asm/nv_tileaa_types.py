"""Textual forms of the nv_tileaa dialect types (always spelled long, ``!nv_tileaa.X``).

``!nv_tileaa.ptr<f32, 1>``, ``!nv_tileaa.memref<?x?xf32, 1[, strides=[?,1]]>``,
``!nv_tileaa.mem_token`` and ``!nv_tileaa.queue<T, ...>``. ``type_syntax`` calls
:func:`parse_nv_tileaa_type` for a ``!nv_tileaa.`` token and :func:`format_nv_tileaa_type` for the
classes in :data:`NV_TILEAA_TYPES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from tilegen.runtime.types import (
    DYNAMIC,
    MemTokenType,
    NvMemRefType,
    NvPointerType,
    NvQueueType,
    Type,
)

if TYPE_CHECKING:  # pragma: no cover
    from tilegen.runtime.asm.parser import OpParser

PREFIX = "!nv_tileaa."
NV_TILEAA_TYPES = (NvPointerType, NvMemRefType, MemTokenType, NvQueueType)


def parse_nv_tileaa_type(p: "OpParser") -> Type:
    """Parse the type whose ``!nv_tileaa.MNEMONIC`` token is current."""
    from tilegen.runtime.asm.type_syntax import _parse_dims, _parse_element, _parse_stride_entry

    tok = p._advance()
    loc = p.loc_at(tok)
    mnemonic = tok.text[len(PREFIX) :]
    if mnemonic == "mem_token":
        return MemTokenType()
    if mnemonic not in ("ptr", "memref", "queue"):
        p._fail(f"unknown nv_tileaa type: {mnemonic}", loc)
    p._expect("<")
    if mnemonic == "queue":
        payload = [p.parse_type()]
        while p.parse_optional_punct(","):
            payload.append(p.parse_type())
        p._expect(">")
        return NvQueueType(tuple(payload))
    dims = _parse_dims(p) if mnemonic == "memref" else []
    elem = _parse_element(p)
    p._expect(",")
    space = _parse_space(p)
    strides: list[int] = []
    if mnemonic == "memref" and p.parse_optional_punct(","):
        if p.parse_optional_keyword("strides") is None:
            p._fail("expected 'strides'")
        p._expect("=")
        p._expect("[")
        if not p.at_punct("]"):
            strides.append(_parse_stride_entry(p))
            while p.parse_optional_punct(","):
                strides.append(_parse_stride_entry(p))
        p._expect("]")
        if len(strides) != len(dims):
            p._fail(
                f"expected {len(dims)} strides for a rank-{len(dims)} memref, got {len(strides)}",
                loc,
            )
    p._expect(">")
    if mnemonic == "ptr":
        return NvPointerType(elem, space)
    if all(s == DYNAMIC for s in strides):
        strides = []
    return NvMemRefType(tuple(dims), elem, space, tuple(strides))


def _parse_space(p: "OpParser") -> int:
    at = p.loc()
    v = p.parse_optional_integer()
    if v is None or v < 0:
        p._fail("expected a non-negative address space", at)
    return v


def _dim(d: int) -> str:
    return "?" if d == DYNAMIC else str(d)


def format_nv_tileaa_type(t: Type, fmt) -> Optional[str]:
    """The spelling of an nv_tileaa type (``fmt`` formats nested types), else None."""
    if isinstance(t, MemTokenType):
        return PREFIX + "mem_token"
    if isinstance(t, NvPointerType):
        return f"{PREFIX}ptr<{fmt(t.pointee)}, {t.address_space}>"
    if isinstance(t, NvMemRefType):
        dims = "".join(f"{_dim(d)}x" for d in t.shape)
        strides = ""
        if t.strides:
            strides = ", strides=[" + ",".join(_dim(s) for s in t.strides) + "]"
        return f"{PREFIX}memref<{dims}{fmt(t.element)}, {t.address_space}{strides}>"
    if isinstance(t, NvQueueType):
        return f"{PREFIX}queue<{', '.join(fmt(x) for x in t.payload)}>"
    return None
