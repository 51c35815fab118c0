"""Textual forms of the nv_tileas async types (seed 001; docs/pipelines.md).

```
!nv_tileas.async.pipeline<stages = 3, shared, tile<64x32xf16>, tile<32x64xf16>>
!nv_tileas.async.pipeline.iterator<producer, stages = 3, shared, tile<64x32xf16>, ...>
!nv_tileas.async.pipeline.iterator<consumer, stages = 4, stride = 2, register, tile<...>>
!nv_tileas.async.pipeline.producer_token
!nv_tileas.async.pipeline.consumer_token
!nv_tileas.async.token
```

The memory-space and iterator-kind keywords are the cases of the spec enums
``NvTileAS_MemorySpace`` and ``NvTileAS_IteratorKind`` (spec/types/nv_tileas_enums.yaml);
``stride`` is printed only when it is not 1. ``type_syntax`` calls :func:`parse_nv_tileas_type`
for a ``!nv_tileas.`` token and :func:`format_nv_tileas_type` for the classes in
:data:`NV_TILEAS_TYPES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from tilegen.runtime.types import (
    AsyncTokenType,
    PipelineConsumerTokenType,
    PipelineIteratorType,
    PipelineProducerTokenType,
    PipelineType,
    Type,
)

if TYPE_CHECKING:  # pragma: no cover
    from tilegen.runtime.asm.parser import OpParser

PREFIX = "!nv_tileas."
NV_TILEAS_TYPES = (
    PipelineType,
    PipelineIteratorType,
    PipelineProducerTokenType,
    PipelineConsumerTokenType,
    AsyncTokenType,
)
#: parameterless types by mnemonic
_SINGLETONS = {
    "async.pipeline.producer_token": PipelineProducerTokenType(),
    "async.pipeline.consumer_token": PipelineConsumerTokenType(),
    "async.token": AsyncTokenType(),
}


def _keywords(enum: str) -> list[str]:
    from tilegen.runtime.opdef import lookup_enum

    e = lookup_enum(enum)
    return e.keywords if e is not None else []


def _parse_keyword(p: "OpParser", enum: str, what: str) -> str:
    at = p.loc()
    allowed = _keywords(enum)
    for kw in allowed:
        if p.parse_optional_keyword(kw) is not None:
            return kw
    p._fail(f"expected {what} ({', '.join(allowed)})", at)


def _parse_count(p: "OpParser", key: str, required: bool) -> Optional[int]:
    if p.parse_optional_keyword(key) is None:
        if required:
            p._fail(f"expected '{key} = N'")
        return None
    p._expect("=")
    at = p.loc()
    v = p.parse_optional_integer()
    if v is None:
        p._fail(f"expected an integer {key}", at)
    p._expect(",")
    return v


def parse_nv_tileas_type(p: "OpParser") -> Type:
    """Parse the type whose ``!nv_tileas.MNEMONIC`` token is current."""
    tok = p._advance()
    loc = p.loc_at(tok)
    mnemonic = tok.text[len(PREFIX) :]
    if mnemonic in _SINGLETONS:
        return _SINGLETONS[mnemonic]
    if mnemonic not in ("async.pipeline", "async.pipeline.iterator"):
        p._fail(f"unknown nv_tileas type: {mnemonic}", loc)
    p._expect("<")
    kind = None
    if mnemonic == "async.pipeline.iterator":
        kind = _parse_keyword(p, "NvTileAS_IteratorKind", "an iterator kind")
        p._expect(",")
    stages = _parse_count(p, "stages", True)
    stride = _parse_count(p, "stride", False) if kind is not None else None
    space = _parse_keyword(p, "NvTileAS_MemorySpace", "a memory space")
    payload = []
    while p.parse_optional_punct(","):
        payload.append(p.parse_type())
    p._expect(">")
    if kind is None:
        return PipelineType(stages, space, tuple(payload))
    return PipelineIteratorType(
        kind, stages, space, tuple(payload), 1 if stride is None else stride
    )


def format_nv_tileas_type(t: Type, fmt) -> Optional[str]:
    """The spelling of an nv_tileas type (``fmt`` formats nested types), else None."""
    for mnemonic, single in _SINGLETONS.items():
        if t == single:
            return PREFIX + mnemonic
    if isinstance(t, PipelineType):
        rest = "".join(", " + fmt(x) for x in t.payload)
        return f"{PREFIX}async.pipeline<stages = {t.stages}, {t.space}{rest}>"
    if isinstance(t, PipelineIteratorType):
        rest = "".join(", " + fmt(x) for x in t.payload)
        stride = f"stride = {t.stride}, " if t.stride != 1 else ""
        return (
            f"{PREFIX}async.pipeline.iterator<{t.kind}, stages = {t.count}, {stride}{t.space}"
            f"{rest}>"
        )
    return None
