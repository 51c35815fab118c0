"""Op definitions: the in-memory form of one op's spec entry, consumed by every engine.

``generated/`` constructs one :class:`OpDef` per op from ``spec/ops`` and registers it here; the
parser, printer, verifier, bytecode reader/writer and interpreter look ops up by name and read
what they need from these records. Nothing in this module is specific to any one op.
"""

from __future__ import annotations

import importlib
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Optional

from tilegen.runtime.records import dataclass, field
from tilegen.runtime.types import (
    AsyncTokenType,
    MemTokenType,
    PipelineConsumerTokenType,
    PipelineProducerTokenType,
    TokenType,
    Type,
)

if TYPE_CHECKING:  # pragma: no cover - the IR sits above its op definitions
    from tilegen.runtime.ir import Operation, Value


def version_tuple(v: Optional[str]) -> tuple[int, ...]:
    """``'13.4'`` -> ``(13, 4)``; None -> ``(0,)``."""
    if not v:
        return (0,)
    return tuple(int(p) for p in str(v).split("."))


@dataclass(frozen=True)
class OperandDef:
    name: str
    type: str  # constraint name (spec/types/constraints.yaml)
    kind: str = "single"  # single | optional | variadic
    since: str = "13.1"

    @property
    def is_variadic(self) -> bool:
        return self.kind == "variadic"

    @property
    def is_optional(self) -> bool:
        return self.kind == "optional"


ResultDef = OperandDef


@dataclass(frozen=True)
class AttrDef:
    name: str
    kind: str  # enum | i32-enum | unit | bool | i32 | i64 | string | array | ...
    constraint: str = ""
    enum: Optional[str] = None
    attr_class: Optional[str] = None
    default: Any = None
    optional: bool = False
    since: str = "13.1"

    @property
    def is_unit(self) -> bool:
        return self.kind == "unit"


@dataclass(frozen=True)
class RegionDef:
    name: str
    constraint: str = "AnyRegion"


#: (traits, trait) -> has_trait's answer; the verifier asks ~100k times per corpus compile
_HAS_TRAIT: dict = {}


@dataclass(frozen=True)
class OpDef:
    dialect: str
    mnemonic: str
    opcode: Optional[int] = None
    since: str = "13.1"
    family: str = ""
    summary: str = ""
    traits: tuple[str, ...] = ()
    operands: tuple[OperandDef, ...] = ()
    attributes: tuple[AttrDef, ...] = ()
    results: tuple[ResultDef, ...] = ()
    regions: tuple[RegionDef, ...] = ()
    #: ODS-style declarative assembly format, or None when ``custom_format`` names a hook.
    format: Optional[str] = None
    custom_format: Optional[str] = None
    #: Declarative verifier rules (each a one-key dict, see spec/schema/op.schema.json).
    verify: tuple = ()
    bytecode: dict = field(default_factory=dict)
    semantics: dict = field(default_factory=dict)
    aliases: tuple = ()
    test_only: bool = False
    extra: dict = field(default_factory=dict)

    # ----- names
    @property
    def name(self) -> str:
        return f"{self.dialect}.{self.mnemonic}"

    def has_trait(self, trait: str) -> bool:
        key = (self.traits, trait)  # by value: OpDef is frozen but holds dicts (unhashable)
        hit = _HAS_TRAIT.get(key)
        if hit is None:
            prefix = trait + "("
            hit = _HAS_TRAIT[key] = any(t == trait or t.startswith(prefix) for t in self.traits)
        return hit

    def trait_arg(self, trait: str) -> Optional[str]:
        for t in self.traits:
            if t.startswith(trait + "("):
                return t[len(trait) + 1 : -1]
        return None

    # ----- fields
    def attr(self, name: str) -> Optional[AttrDef]:
        for a in self.attributes:
            if a.name == name:
                return a
        return None

    @property
    def attr_names(self) -> frozenset:
        return frozenset(a.name for a in self.attributes)

    @property
    def has_variadic_operands(self) -> bool:
        return any(o.kind != "single" for o in self.operands)

    @property
    def has_attr_sized_segments(self) -> bool:
        return self.has_trait("AttrSizedOperandSegments")

    @property
    def has_variadic_results(self) -> bool:
        return any(r.kind != "single" for r in self.results)

    # ----- operand / result groups
    @property
    def segmented_operands(self) -> tuple[OperandDef, ...]:
        """The operand groups ``operandSegmentSizes`` counts: all of them, except that with the
        ``TrailingTokenOperand`` trait (nv_tileaa memory ops) the last, optional group follows
        the segments uncounted (seed 000: 4 segments plus a token slot)."""
        if self.has_trait("TrailingTokenOperand"):
            return self.operands[:-1]
        return self.operands

    def operand_segments(self, op: Operation) -> tuple[tuple[int, int], ...]:
        """(start, length) of each declared operand group of ``op``; without a segment-size
        attribute they depend only on the operand count (memoised per count)."""
        key = ("o", len(op.operands))
        memo = self._segment_memo()
        hit = memo.get(key)
        if hit is not None and not self._sized(op, "operandSegmentSizes"):
            return hit
        if self.has_trait("TrailingTokenOperand"):
            head = _segments(self.operands[:-1], len(op.operands), op, "operandSegmentSizes")
            end = head[-1][0] + head[-1][1] if head else 0
            out = head + ((end, max(len(op.operands) - end, 0)),)
        else:
            out = _segments(self.operands, len(op.operands), op, "operandSegmentSizes")
        if not self._sized(op, "operandSegmentSizes"):
            memo[key] = out
        return out

    def result_segments(self, op: Operation) -> tuple[tuple[int, int], ...]:
        key = ("r", len(op.results))
        memo = self._segment_memo()
        hit = memo.get(key)
        if hit is not None and not self._sized(op, "resultSegmentSizes"):
            return hit
        out = _segments(self.results, len(op.results), op, "resultSegmentSizes")
        if not self._sized(op, "resultSegmentSizes"):
            memo[key] = out
        return out

    def _segment_memo(self) -> dict:
        memo = self.__dict__.get("_segments")
        if memo is None:  # OpDef is frozen: the memo is not a field
            memo = self.__dict__["_segments"] = {}
        return memo

    @staticmethod
    def _sized(op: Operation, seg_attr: str) -> bool:
        return seg_attr in op.attributes or seg_attr in op.properties

    def operand_group(self, op: Operation, name: str) -> list[Value]:
        for d, (start, n) in zip(self.operands, self.operand_segments(op)):
            if d.name == name:
                return op.operands[start : start + n]
        raise KeyError(name)

    def result_group(self, op: Operation, name: str) -> list[Value]:
        for d, (start, n) in zip(self.results, self.result_segments(op)):
            if d.name == name:
                return op.results[start : start + n]
        raise KeyError(name)


def _segments(defs, total: int, op: Operation, seg_attr: str) -> tuple[tuple[int, int], ...]:
    sizes_attr = op.attributes.get(seg_attr) or op.properties.get(seg_attr)
    if sizes_attr is not None and len(getattr(sizes_attr, "values", ())) == len(defs):
        sizes = list(sizes_attr.values)
    else:
        n_var = sum(1 for d in defs if d.kind != "single")
        fixed = sum(1 for d in defs if d.kind == "single")
        rest = max(total - fixed, 0)
        sizes = []
        for d in defs:
            if d.kind == "single":
                sizes.append(1)
            elif n_var == 1:
                sizes.append(rest)
            else:  # ambiguous without segment sizes: give everything to the first group
                sizes.append(rest)
                rest = 0
    out, start = [], 0
    for n in sizes:
        out.append((start, n))
        start += n
    return tuple(out)


@dataclass(frozen=True)
class EnumCase:
    keyword: str
    value: int
    since: str = "13.1"


@dataclass(frozen=True)
class EnumDef:
    name: str
    mnemonic: str
    storage: str  # "enum" (#dialect.mnemonic<kw>) or "i32" (plain i32 IntegerAttr)
    cases: tuple[EnumCase, ...]
    since: str = "13.1"
    test_only: bool = False

    def keyword(self, value: int) -> Optional[str]:
        for c in self.cases:
            if c.value == value:
                return c.keyword
        return None

    def value(self, keyword: str) -> Optional[int]:
        for c in self.cases:
            if c.keyword == keyword:
                return c.value
        return None

    @property
    def keywords(self) -> list[str]:
        return [c.keyword for c in self.cases]


# --------------------------------------------------------------------------- registry

_OPS: dict[str, OpDef] = {}
_ALIASES: dict[str, OpDef] = {}
_ENUMS: dict[str, EnumDef] = {}
_LOADED = False

#: Dialect modules generated from spec/ (each registers its definitions when imported).
DIALECT_MODULES = (
    "tilegen.generated.cuda_tile",
    "tilegen.generated.nv_tileaa",
    "tilegen.generated.nv_tileas",
    # the upstream dialects the cuda_tile -> nv_tileaa conversion emits (spec/ops/{arith,math,scf})
    "tilegen.generated.arith",
    "tilegen.generated.math",
    "tilegen.generated.scf",
)


def register_op(opdef: OpDef) -> OpDef:
    _OPS[opdef.name] = opdef
    for alias in opdef.aliases:
        _ALIASES[f"{opdef.dialect}.{alias['mnemonic']}"] = opdef
    return opdef


def register_enum(enum: EnumDef) -> EnumDef:
    _ENUMS[enum.name] = enum
    return enum


def load_dialects() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for mod in DIALECT_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:  # a dialect not generated yet
            if e.name is None or not e.name.startswith("tilegen.generated"):
                raise


def lookup_opdef(name: str) -> Optional[OpDef]:
    """The definition of op ``name`` (``cuda_tile.addf``), following text aliases (``fpowf``)."""
    if not _LOADED:
        load_dialects()
    return _OPS.get(name) or _ALIASES.get(name)


def lookup_enum(name: str) -> Optional[EnumDef]:
    if not _LOADED:
        load_dialects()
    return _ENUMS.get(name)


def all_ops() -> list[OpDef]:
    load_dialects()
    return list(_OPS.values())


def all_enums() -> list[EnumDef]:
    load_dialects()
    return list(_ENUMS.values())


# --------------------------------------------------------------------------- constraint records

_WRAPPERS = re.compile(
    r"^(?:DefaultValuedAttr|OptionalAttr|DefaultValuedOptionalAttr)<(.*?)(?:,.*)?>$"
)


@lru_cache(maxsize=None)
def constraint_tables() -> tuple[dict, dict, dict, dict]:
    """(type, attribute, region constraints, element groups) of spec/types/constraints.yaml, from
    each dialect's generated ``constraints`` module (runtime/verify/constraints.py evaluates
    them)."""
    types: dict = {}
    attrs: dict = {}
    regions: dict = {}
    groups: dict = {}
    for mod_name in DIALECT_MODULES:
        try:
            mod = importlib.import_module(mod_name + ".constraints")
        except ModuleNotFoundError:
            continue
        types.update(getattr(mod, "TYPES", {}))
        attrs.update(getattr(mod, "ATTRIBUTES", {}))
        regions.update(getattr(mod, "REGIONS", {}))
        groups.update(getattr(mod, "ELEMENT_GROUPS", {}))
    return types, attrs, regions, groups


def attr_constraint(constraint: str) -> Optional[dict]:
    """The record of attribute constraint ``constraint`` (ODS wrappers such as
    ``DefaultValuedAttr<X, ..>`` looked through), or None."""
    table = constraint_tables()[1]
    if constraint in table:
        return table[constraint]
    m = _WRAPPERS.match(constraint)
    if m:
        return attr_constraint(m.group(1).strip())
    return None


class OpView:
    """Base of generated op classes: typed accessors over a generic :class:`Operation`."""

    OPDEF: OpDef

    __slots__ = ("op",)

    def __init__(self, op: Operation):
        self.op = op

    def _operand_group(self, name: str) -> list[Value]:
        return self.OPDEF.operand_group(self.op, name)

    def _single_operand(self, name: str) -> Optional[Value]:
        group = self.OPDEF.operand_group(self.op, name)
        return group[0] if group else None

    def _result_group(self, name: str) -> list[Value]:
        return self.OPDEF.result_group(self.op, name)

    def _single_result(self, name: str) -> Optional[Value]:
        group = self.OPDEF.result_group(self.op, name)
        return group[0] if group else None

    def _attr(self, name: str):
        return self.op.attributes.get(name)


#: kinds with exactly one type: a constraint ``{kind: K}`` of one of these is buildable (the
#: parser infers the type, as ODS does for buildable types)
_PARAMETERLESS = {
    "token": TokenType,
    "mem_token": MemTokenType,
    "nv_producer_token": PipelineProducerTokenType,
    "nv_consumer_token": PipelineConsumerTokenType,
    "nv_async_token": AsyncTokenType,
}


def buildable_type(name: str) -> Optional[Type]:
    """The single type constraint ``name`` admits when its predicate is just a parameterless
    ``kind`` (token types), else None."""
    c = constraint_tables()[0].get(name)
    if c is None or set(c["match"]) != {"kind"}:
        return None
    cls = _PARAMETERLESS.get(c["match"]["kind"])
    return cls() if cls is not None else None
