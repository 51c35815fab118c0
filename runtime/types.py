"""Type objects of the IR: builtin element types, cuda_tile dialect types, and opaque fallbacks.

Every type is an immutable, hashable dataclass; structural equality is type equality.
Textual forms live in ``tilegen.runtime.asm``; this module knows nothing about syntax.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.records import dataclass, field

#: Marker for a dynamic size or stride (``?``); NVIDIA stores ShapedType::kDynamic (INT64_MIN).
DYNAMIC = -(2**63)


class Type:
    """Base class of all types."""

    __slots__ = ()

    @property
    def is_tile(self) -> bool:
        return isinstance(self, TileType)


# --------------------------------------------------------------------------- element types


@dataclass(frozen=True)
class IntegerType(Type):
    """Signless integer ``iN``."""

    width: int

    @property
    def name(self) -> str:
        return f"i{self.width}"


@dataclass(frozen=True)
class FloatType(Type):
    """A floating-point element type, named as MLIR spells it (``f32``, ``bf16``, ``f8E4M3FN`` ...)."""

    name: str

    @property
    def width(self) -> int:
        return FLOAT_WIDTHS[self.name]


FLOAT_WIDTHS = {
    "f16": 16,
    "bf16": 16,
    "f32": 32,
    "tf32": 19,
    "f64": 64,
    "f8E4M3FN": 8,
    "f8E5M2": 8,
    "f8E8M0FNU": 8,
    "f4E2M1FN": 4,
    "fnv8E5M3FNU": 8,
}

#: Storage width in bits (tf32 is stored in 32 bits).
STORAGE_WIDTHS = {**FLOAT_WIDTHS, "tf32": 32}


@dataclass(frozen=True)
class IndexType(Type):
    """MLIR builtin ``index`` (only appears in unregistered/test IR)."""


@dataclass(frozen=True)
class NoneType(Type):
    """MLIR builtin ``none``."""


# --------------------------------------------------------------------------- dialect types


@dataclass(frozen=True)
class PointerType(Type):
    """``ptr<T>``: a pointer to a number element type; ``ptr<T, <none>>`` (13.4) carries a
    PtrAttr keyword in ``ptr_attr``."""

    pointee: Type
    ptr_attr: Optional[str] = None


@dataclass(frozen=True)
class TileType(Type):
    """``tile<d0x...xE>``: an immutable n-d array value."""

    shape: tuple[int, ...]
    element: Type
    #: nv_tileas layout attribute (runtime/layouts; docs/layouts.md); None above that stage
    encoding: Optional[object] = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class TokenType(Type):
    """``token``: orders memory operations."""


@dataclass(frozen=True)
class TensorViewType(Type):
    """``tensor_view<d0x...xE, strides=[...]>``; dynamic entries are :data:`DYNAMIC`.
    13.4 adds an optional trailing ``#cuda_tile.ptr_attr<KW>`` kept in ``ptr_attr``."""

    element: Type
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    ptr_attr: Optional[str] = None

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class PartitionViewType(Type):
    """``partition_view<tile=(...), [padding_value = P,] TENSOR_VIEW [, dim_map=[...]]>``."""

    tile_shape: tuple[int, ...]
    tensor_view: TensorViewType
    dim_map: tuple[int, ...] = ()
    padding_value: Optional[str] = None

    @property
    def tile_type(self) -> TileType:
        return TileType(self.tile_shape, self.tensor_view.element)


@dataclass(frozen=True)
class StridedViewType(Type):
    """``strided_view<tile=(...), traversal_strides=[...], [padding_value = P,] TV [, dim_map=[...]]>`` (13.3)."""

    tile_shape: tuple[int, ...]
    traversal_strides: tuple[int, ...]
    tensor_view: TensorViewType
    dim_map: tuple[int, ...] = ()
    padding_value: Optional[str] = None

    @property
    def tile_type(self) -> TileType:
        return TileType(self.tile_shape, self.tensor_view.element)


@dataclass(frozen=True)
class GatherScatterViewType(Type):
    """``gather_scatter_view<tile=(...), [padding_value = P,] TV, sparse_dim=N>`` (13.3)."""

    tile_shape: tuple[int, ...]
    tensor_view: TensorViewType
    sparse_dim: int
    padding_value: Optional[str] = None

    @property
    def tile_type(self) -> TileType:
        return TileType(self.tile_shape, self.tensor_view.element)


TILE_VIEW_TYPES = (PartitionViewType, StridedViewType, GatherScatterViewType)


@dataclass(frozen=True)
class FunctionType(Type):
    """``(inputs) -> results``."""

    inputs: tuple[Type, ...]
    results: tuple[Type, ...]


@dataclass(frozen=True)
class OpaqueType(Type):
    """A type tilegen does not model (``tensor<2xi16>``, ``!foo.bar<...>``, test types).

    ``text`` is the exact spelling (with its ``!`` for dialect types) so it prints back unchanged.
    """

    text: str


@dataclass(frozen=True)
class TestEvolvedType(Type):
    """``testing$bytecode_test_evolved`` (test builds only)."""

    params: tuple = field(default=())


# --------------------------------------------------------------------------- helpers

I1 = IntegerType(1)
I8 = IntegerType(8)
I16 = IntegerType(16)
I32 = IntegerType(32)
I64 = IntegerType(64)
F16 = FloatType("f16")
BF16 = FloatType("bf16")
F32 = FloatType("f32")
F64 = FloatType("f64")
TOKEN = TokenType()


def element_type_from_name(name: str) -> Optional[Type]:
    """Return the builtin element type spelled ``name`` (``i32``, ``f16`` ...), or None."""
    if name in FLOAT_WIDTHS:
        return FloatType(name)
    if len(name) > 1 and name[0] == "i" and name[1:].isdigit():
        return IntegerType(int(name[1:]))
    if name == "index":
        return IndexType()
    return None


def element_name(t: Type) -> str:
    """Short name of an element type (``i32``, ``f16``, ``ptr``), used by constraint groups."""
    if isinstance(t, (IntegerType, FloatType)):
        return t.name
    if isinstance(t, PointerType):
        return "ptr"
    return type(t).__name__


def tile_element(t: Type) -> Optional[Type]:
    """The element type of a tile type, else None."""
    return t.element if isinstance(t, TileType) else None


# --------------------------------------------------------------------------- nv_tileaa types
# (the alias-aware dialect below cuda_tile; syntax in runtime/asm/nv_tileaa_types.py)


@dataclass(frozen=True)
class NvPointerType(Type):
    """``!nv_tileaa.ptr<E, SPACE>``: a typed pointer into address space ``SPACE``."""

    pointee: Type
    address_space: int = 0


@dataclass(frozen=True)
class NvMemRefType(Type):
    """``!nv_tileaa.memref<d0x...xE, SPACE[, strides=[...]]>``; dynamic entries are DYNAMIC.

    ``strides`` is empty when every stride is dynamic (the spelling without ``strides=``).
    """

    shape: tuple[int, ...]
    element: Type
    address_space: int = 0
    strides: tuple[int, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def stride_values(self) -> tuple[int, ...]:
        """One stride per dimension (all DYNAMIC when the type spells none)."""
        return self.strides or (DYNAMIC,) * len(self.shape)


@dataclass(frozen=True)
class MemTokenType(Type):
    """``!nv_tileaa.mem_token``: an SSA memory-ordering edge."""


@dataclass(frozen=True)
class NvQueueType(Type):
    """``!nv_tileaa.queue<T, ...>``: a producer/consumer queue carrying values of types T."""

    payload: tuple[Type, ...]


# --------------------------------------------------------------------------- nv_tileas types
# (seed 001's async pipeline types; syntax in runtime/asm/nv_tileas_types.py, verifier in
# runtime/verify/hooks/nv_tileas.py, docs/pipelines.md)


@dataclass(frozen=True)
class PipelineType(Type):
    """``!nv_tileas.async.pipeline<stages = S, SPACE, T0, T1, ...>``: a ring of ``stages`` stage
    buffers in memory space ``space`` (``shared``, ``tensor`` or ``register``), each holding one
    value of every payload type T."""

    stages: int
    space: str
    payload: tuple[Type, ...]


@dataclass(frozen=True)
class PipelineIteratorType(Type):
    """``!nv_tileas.async.pipeline.iterator<KIND, stages = S[, stride = K], SPACE, T0, ...>``: a
    rotating stage position of a pipeline, for the ``producer`` or the ``consumer`` side. Seed
    001's four fields: ``payload`` (the element type), ``count`` (stages), ``stride`` (the
    advance of ``inc_iter``, 1 in current TileAS) and ``space``."""

    kind: str
    count: int
    space: str
    payload: tuple[Type, ...]
    stride: int = 1


@dataclass(frozen=True)
class PipelineProducerTokenType(Type):
    """``!nv_tileas.async.pipeline.producer_token``: a stage acquired for writing, consumed by
    ``producer_commit``."""


@dataclass(frozen=True)
class PipelineConsumerTokenType(Type):
    """``!nv_tileas.async.pipeline.consumer_token``: a stage waited for, consumed by
    ``consumer_release``."""


@dataclass(frozen=True)
class AsyncTokenType(Type):
    """``!nv_tileas.async.token``: completion of asynchronous work (async copies, async dots)."""
