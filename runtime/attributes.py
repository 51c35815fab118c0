"""Attribute objects of the IR (builtin, cuda_tile, locations, debug info).

Every attribute is an immutable, hashable dataclass. Locations are attributes too, as in MLIR.
Textual forms live in ``tilegen.runtime.asm``.
"""

from __future__ import annotations

from typing import Optional, Union

from tilegen.runtime.records import dataclass
from tilegen.runtime.types import Type


class Attribute:
    """Base class of all attributes."""

    __slots__ = ()


# --------------------------------------------------------------------------- builtin


@dataclass(frozen=True)
class UnitAttr(Attribute):
    pass


@dataclass(frozen=True)
class BoolAttr(Attribute):
    value: bool


@dataclass(frozen=True)
class IntegerAttr(Attribute):
    """``42 : i64``; ``type`` None means the default (i64) when printed without a type."""

    value: int
    type: Optional[Type] = None


@dataclass(frozen=True)
class FloatAttr(Attribute):
    """``1.0 : f32``. ``bits`` keeps the exact bit pattern when known (NaN payloads, hex literals)."""

    value: float
    type: Optional[Type] = None
    bits: Optional[int] = None


@dataclass(frozen=True)
class StringAttr(Attribute):
    value: str


@dataclass(frozen=True)
class TypeAttr(Attribute):
    value: Type


@dataclass(frozen=True)
class ArrayAttr(Attribute):
    values: tuple[Attribute, ...]


@dataclass(frozen=True)
class DictAttr(Attribute):
    """An ordered dictionary attribute (MLIR sorts by name when printing)."""

    items: tuple[tuple[str, Attribute], ...]

    def get(self, key: str, default=None):
        for k, v in self.items:
            if k == key:
                return v
        return default

    def as_dict(self) -> dict:
        return dict(self.items)


@dataclass(frozen=True)
class DenseArrayAttr(Attribute):
    """``array<i32: 1, 0>`` (DenseI32ArrayAttr, DenseI64ArrayAttr, DenseBoolArrayAttr ...)."""

    element: Type
    values: tuple


@dataclass(frozen=True)
class DenseElementsAttr(Attribute):
    """``dense<...> : tile<...>`` / cuda_tile's ``<E: literal>``.

    ``values`` is a flat row-major tuple of Python ints/floats; a single value means a splat.
    ``bits`` optionally holds exact bit patterns parallel to ``values`` (for floats).
    """

    type: Type
    values: tuple
    bits: Optional[tuple] = None

    @property
    def is_splat(self) -> bool:
        return len(self.values) == 1


@dataclass(frozen=True)
class SymbolRefAttr(Attribute):
    """``@root::@nested``."""

    root: str
    nested: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpaqueAttr(Attribute):
    """An attribute tilegen does not model, kept as its exact text (``#foo.bar<...>``)."""

    text: str


#: ``#arith.fastmath<...>`` flag keywords (spec/types/arith_enums.yaml Arith_FastMathFlags)
FASTMATH_FLAGS = ("reassoc", "nnan", "ninf", "nsz", "arcp", "contract", "afn")
#: discardable attribute carrying cuda_tile's ``flush_to_zero`` past the conversion (nv_tileaa,
#: arith and math ops have no flush_to_zero of their own; see docs/conversion.md)
FLUSH_TO_ZERO = "nv_tileaa.flush_to_zero"


def fastmath_flags(attr: Optional[Attribute]) -> frozenset:
    """The flags of a ``fastmath`` attribute (``#arith.fastmath<afn,contract>``, kept as an
    OpaqueAttr, or a bare string such as seed 003's ``"contract"``); ``fast`` expands to all."""
    if attr is None:
        return frozenset()
    text = getattr(attr, "text", None) or getattr(attr, "value", None)
    if not isinstance(text, str):
        return frozenset()
    if text.startswith("#arith.fastmath<") and text.endswith(">"):
        text = text[len("#arith.fastmath<") : -1]
    flags = {f.strip() for f in text.split(",") if f.strip() and f.strip() != "none"}
    if "fast" in flags:
        flags = (flags - {"fast"}) | set(FASTMATH_FLAGS)
    return frozenset(flags)


def fastmath_attr(flags) -> Optional[OpaqueAttr]:
    """``#arith.fastmath<...>`` for ``flags`` in MLIR's order (``fast`` when all are set);
    None for no flags."""
    flags = set(flags)
    if not flags:
        return None
    if set(FASTMATH_FLAGS) <= flags:
        return OpaqueAttr("#arith.fastmath<fast>")
    return OpaqueAttr("#arith.fastmath<" + ",".join(f for f in FASTMATH_FLAGS if f in flags) + ">")


# --------------------------------------------------------------------------- cuda_tile


@dataclass(frozen=True)
class EnumAttr(Attribute):
    """A cuda_tile enum case: ``enum`` is the spec enum name (``RoundingMode``), ``value`` its integer."""

    enum: str
    value: int


@dataclass(frozen=True)
class DivByAttr(Attribute):
    divisor: int
    every: Optional[int] = None
    along: Optional[int] = None


@dataclass(frozen=True)
class SameElementsAttr(Attribute):
    values: tuple[int, ...]


@dataclass(frozen=True)
class BoundedAttr(Attribute):
    lb: Optional[int] = None
    ub: Optional[int] = None


@dataclass(frozen=True)
class OptimizationHintsAttr(Attribute):
    """``#cuda_tile.optimization_hints<sm_100 = {num_cta_in_cga = 2}>``: arch key -> DictAttr."""

    entries: tuple[tuple[str, Attribute], ...]


# --------------------------------------------------------------------------- debug info


@dataclass(frozen=True)
class DIFileAttr(Attribute):
    name: str
    directory: str


@dataclass(frozen=True)
class DICompileUnitAttr(Attribute):
    file: DIFileAttr


@dataclass(frozen=True)
class DISubprogramAttr(Attribute):
    file: DIFileAttr
    line: int
    name: str
    linkage_name: str
    compile_unit: DICompileUnitAttr
    scope_line: Optional[int] = None
    flags: int = 0


@dataclass(frozen=True)
class DILexicalBlockAttr(Attribute):
    scope: Attribute  # DISubprogramAttr | DILexicalBlockAttr
    file: DIFileAttr
    line: int
    column: Optional[int] = None


# --------------------------------------------------------------------------- locations


class Location(Attribute):
    __slots__ = ()


@dataclass(frozen=True)
class UnknownLoc(Location):
    pass


@dataclass(frozen=True, slots=True)
class FileLineColLoc(Location):
    """``loc("file":line:col)``: one per parsed op, so slotted (56 bytes, not ~120)."""

    file: str
    line: int
    col: int


@dataclass(frozen=True)
class NameLoc(Location):
    name: str
    child: Optional[Location] = None


@dataclass(frozen=True)
class CallSiteLoc(Location):
    callee: Location
    caller: Location


@dataclass(frozen=True)
class FusedLoc(Location):
    locations: tuple[Location, ...]
    metadata: Optional[Attribute] = None


@dataclass(frozen=True)
class OpaqueLoc(Location):
    text: str


@dataclass(frozen=True)
class DILocAttr(Location):
    """``#cuda_tile.di_loc<loc("f.py":8:3) in #di_subprogram>``."""

    source: FileLineColLoc
    scope: Attribute


UNKNOWN_LOC = UnknownLoc()

AnyAttr = Union[Attribute, Location]
