"""Type, attribute and region constraints: predicates from spec/types/constraints.yaml.

The generator renders the YAML into ``tilegen.generated.<dialect>.constraints`` (``TYPES``,
``ATTRIBUTES``, ``REGIONS``, ``ELEMENT_GROUPS``); this module evaluates those records. The
predicate language (documented in spec/schema/constraints.schema.json) is:

* ``kind``: tile | ptr | token | tensor_view | partition_view | strided_view |
  gather_scatter_view | tile_view | number | cuda_tile | function | any; for nv_tileaa also
  nv_ptr | nv_memref | mem_token | nv_queue | index | scalar (a builtin int/float/index scalar,
  which is its own ``element``); for nv_tileas nv_pipeline | nv_pipeline_iterator |
  nv_producer_token | nv_consumer_token | nv_async_token
* ``element``: element names or group names (``BaseFloat``, ``ptr`` for any pointer)
* ``rank`` / ``min_rank``: rank bounds of a tile
* ``any_of``: a list of predicates, one of which must hold

A constraint name the spec does not define accepts every type (and is reported by
``tests/test_verify_constraints.py``).
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import (
    ArrayAttr,
    Attribute,
    BoolAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    DictAttr,
    EnumAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
)
from tilegen.runtime.ir import Region
from tilegen.runtime.opdef import (  # noqa: F401 (buildable_type: API)
    AttrDef,
    attr_constraint,
    buildable_type,
    constraint_tables,
    lookup_enum,
)
from tilegen.runtime.types import (
    FloatType,
    FunctionType,
    IndexType,
    MemTokenType,
    NvMemRefType,
    NvPointerType,
    NvQueueType,
    AsyncTokenType,
    PipelineConsumerTokenType,
    PipelineIteratorType,
    PipelineProducerTokenType,
    PipelineType,
    GatherScatterViewType,
    IntegerType,
    PartitionViewType,
    PointerType,
    StridedViewType,
    TensorViewType,
    TileType,
    TokenType,
    Type,
    element_name,
)
from tilegen.runtime.verify.types import is_number_type

_tables = constraint_tables


def type_constraint(name: str) -> Optional[dict]:
    return _tables()[0].get(name)


def known_type_constraints() -> set[str]:
    return set(_tables()[0])


# --------------------------------------------------------------------------- types


def summary(name: str) -> str:
    """The ODS summary of a type constraint (the text after ``must be``)."""
    c = type_constraint(name)
    return c["summary"] if c else name


#: (constraint name, id(type)) -> (type, constraint tables, verdict): the type is kept so that
#: its id cannot be reused while the entry exists; cleared when it grows past _MAX_VERDICTS.
_VERDICTS: dict = {}
_MAX_VERDICTS = 4096


def check_type(name: str, t: Type) -> bool:
    tables = _tables()
    key = (name, id(t))
    hit = _VERDICTS.get(key)
    if hit is not None and hit[0] is t and hit[1] is tables:
        return hit[2]
    c = tables[0].get(name)
    ok = True if c is None else matches(c["match"], t)
    if len(_VERDICTS) >= _MAX_VERDICTS:
        _VERDICTS.clear()
    _VERDICTS[key] = (t, tables, ok)
    return ok


_KINDS = {
    "tile": TileType,
    "ptr": PointerType,
    "token": TokenType,
    "tensor_view": TensorViewType,
    "partition_view": PartitionViewType,
    "strided_view": StridedViewType,
    "gather_scatter_view": GatherScatterViewType,
    "tile_view": (PartitionViewType, StridedViewType, GatherScatterViewType),
    "function": FunctionType,
    # --- nv_tileaa kinds ---
    "nv_ptr": NvPointerType,
    "nv_memref": NvMemRefType,
    "mem_token": MemTokenType,
    "nv_queue": NvQueueType,
    "index": IndexType,
    "scalar": (IntegerType, FloatType, IndexType),
    # --- end nv_tileaa ---
    "nv_pipeline": PipelineType,
    "nv_pipeline_iterator": PipelineIteratorType,
    "nv_producer_token": PipelineProducerTokenType,
    "nv_consumer_token": PipelineConsumerTokenType,
    "nv_async_token": AsyncTokenType,
}
_DIALECT_TYPES = (
    TileType,
    PointerType,
    TokenType,
    TensorViewType,
    PartitionViewType,
    StridedViewType,
    GatherScatterViewType,
)


def matches(pred: dict, t: Type) -> bool:
    """Evaluate one predicate of the constraint language against ``t``."""
    if "any_of" in pred and not any(matches(p, t) for p in pred["any_of"]):
        return False
    kind = pred.get("kind", "any")
    if kind == "number":
        if not is_number_type(t):
            return False
    elif kind == "cuda_tile":
        if not (is_number_type(t) or isinstance(t, _DIALECT_TYPES)):
            return False
    elif kind != "any" and not isinstance(t, _KINDS[kind]):
        return False
    if "element" in pred:
        elem = getattr(t, "element", None) if not isinstance(t, PointerType) else t.pointee
        if kind == "scalar":  # nv_tileaa: a builtin scalar is its own element
            elem = t
        if elem is None or not element_in(elem, pred["element"]):
            return False
    if "rank" in pred and getattr(t, "rank", None) != pred["rank"]:
        return False
    if "min_rank" in pred and getattr(t, "rank", -1) < pred["min_rank"]:
        return False
    return True


def element_in(elem: Type, names) -> bool:
    """Whether element type ``elem`` is one of ``names`` (element names or group names)."""
    groups = _tables()[3]
    if isinstance(names, str):
        names = [names]
    own = element_name(elem)
    for n in names:
        if n in groups:
            if own in groups[n]:
                return True
        elif n == own:
            return True
    return False


# --------------------------------------------------------------------------- attributes


def check_attribute(a: AttrDef, value: Attribute) -> Optional[str]:
    """None when ``value`` satisfies ``a``'s constraint, else the constraint's summary."""
    c = attr_constraint(a.constraint) if a.constraint else None
    pred = c["match"] if c else _default_attr_match(a)
    if pred is None or attr_matches(pred, value):
        return None
    return c["summary"] if c else a.constraint or a.kind


def _default_attr_match(a: AttrDef) -> Optional[dict]:
    if a.kind == "enum" and a.enum:
        return {"attr": "enum", "enum": a.enum}
    if a.kind == "i32-enum" and a.enum:
        return {"attr": "i32_enum", "enum": a.enum}
    if a.kind == "unit":
        return {"attr": "unit"}
    return None


def attr_matches(pred: dict, value: Attribute) -> bool:
    kind = pred["attr"]
    if kind == "any":
        return True
    if kind == "enum":
        if not isinstance(value, EnumAttr) or value.enum != pred["enum"]:
            return False
        enum = lookup_enum(pred["enum"])
        return enum is None or enum.keyword(value.value) is not None
    if kind == "i32_enum":
        want = IntegerType(pred.get("width", 32))  # arith predicates are i64 enums
        enum = lookup_enum(pred["enum"])
        if not isinstance(value, IntegerAttr) or value.type not in (None, want):
            return False
        return enum is None or enum.keyword(value.value) is not None
    if kind == "integer":
        if not isinstance(value, IntegerAttr):
            return False
        want = IntegerType(pred.get("width", 64))
        if (value.type or IntegerType(64)) != want:  # an untyped literal is i64, as in MLIR
            return False
        return "min" not in pred or value.value >= pred["min"]
    if kind == "float":
        return isinstance(value, FloatAttr)
    simple = {
        "unit": UnitAttr,
        "bool": BoolAttr,
        "string": StringAttr,
        "symbol_ref": SymbolRefAttr,
        "array": ArrayAttr,
        "dict": DictAttr,
        "dense_elements": DenseElementsAttr,
        "type": TypeAttr,
    }
    if kind in simple:
        if not isinstance(value, simple[kind]):
            return False
        if kind == "symbol_ref" and pred.get("flat") and value.nested:
            return False
        if kind == "type" and pred.get("of") == "function":
            return isinstance(value.value, FunctionType)
        if kind == "array" and pred.get("of") == "dict":
            return all(isinstance(v, DictAttr) for v in value.values)
        return True
    if kind == "dense_array":
        if not isinstance(value, DenseArrayAttr):
            return False
        return "element" not in pred or element_name(value.element) == pred["element"]
    raise ValueError(f"unknown attribute predicate kind {kind!r}")


# --------------------------------------------------------------------------- regions


def check_region(constraint: str, region: Region) -> Optional[str]:
    """None when ``region`` satisfies the region constraint, else its summary."""
    c = _tables()[2].get(constraint)
    if c is None:
        return None
    n = len(region.blocks)
    if "blocks" in c and n != c["blocks"]:
        return c["summary"]
    if "max_blocks" in c and n > c["max_blocks"]:
        return c["summary"]
    return None


__all__ = [
    "check_attribute",
    "check_region",
    "check_type",
    "element_in",
    "matches",
    "summary",
]
