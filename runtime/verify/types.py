"""The type text used in diagnostics (:func:`format_type`), and the dialect type verification
(types_attrs.md section 2) re-exported from runtime/asm/type_verify.py, where the parser calls
:func:`verify_type` right after building a type."""

from __future__ import annotations

from tilegen.runtime.types import (
    DYNAMIC,
    FloatType,
    FunctionType,
    GatherScatterViewType,
    IndexType,
    IntegerType,
    NoneType,
    OpaqueType,
    PartitionViewType,
    PointerType,
    StridedViewType,
    TensorViewType,
    TileType,
    TokenType,
    Type,
)

# The type invariants live beside the parser, which checks them as it builds each type.
from tilegen.runtime.asm.type_verify import (  # noqa: F401
    MAX_TILE_ELEMENTS,
    NUMBER_TYPE_LIST,
    is_number_type,
    is_tile_element_type,
    verify_tensor_view_shape as verify_tensor_view,
    verify_tile_shape,
    verify_type,
)

# --------------------------------------------------------------------------- type text


def format_type(t: Type) -> str:
    """The long (generic) form MLIR prints in diagnostics: ``!cuda_tile.tile<2xi32>``."""
    try:
        from tilegen.runtime.asm.type_syntax import format_type as asm_format_type

        return asm_format_type(t)
    except Exception:  # the parser/printer package is optional here
        return _long(t)


def _long(t: Type) -> str:
    if isinstance(
        t,
        (
            PointerType,
            TileType,
            TokenType,
            TensorViewType,
            PartitionViewType,
            StridedViewType,
            GatherScatterViewType,
        ),
    ):
        return "!cuda_tile." + _short(t)
    return _short(t)


def _short(t: Type) -> str:
    if isinstance(t, (IntegerType, FloatType)):
        return t.name
    if isinstance(t, IndexType):
        return "index"
    if isinstance(t, NoneType):
        return "none"
    if isinstance(t, PointerType):
        return f"ptr<{_short(t.pointee)}>"
    if isinstance(t, TileType):
        return "tile<" + "".join(f"{d}x" for d in t.shape) + _short(t.element) + ">"
    if isinstance(t, TokenType):
        return "token"
    if isinstance(t, TensorViewType):
        dims = "".join(("?" if d == DYNAMIC else str(d)) + "x" for d in t.shape)
        if not t.shape:
            return f"tensor_view<{_short(t.element)}>"
        strides = ",".join("?" if s == DYNAMIC else str(s) for s in t.strides)
        return f"tensor_view<{dims}{_short(t.element)}, strides=[{strides}]>"
    if isinstance(t, (PartitionViewType, StridedViewType, GatherScatterViewType)):
        parts = ["tile=(" + "x".join(str(d) for d in t.tile_shape) + ")"]
        if isinstance(t, StridedViewType):
            parts.append("traversal_strides=[" + ",".join(map(str, t.traversal_strides)) + "]")
        if t.padding_value is not None:
            parts.append(f"padding_value = {t.padding_value}")
        parts.append(_short(t.tensor_view))
        if isinstance(t, GatherScatterViewType):
            parts.append(f"sparse_dim={t.sparse_dim}")
        elif t.dim_map and list(t.dim_map) != list(range(len(t.dim_map))):
            parts.append("dim_map=[" + ", ".join(map(str, t.dim_map)) + "]")
        name = {PartitionViewType: "partition_view", StridedViewType: "strided_view"}.get(
            type(t), "gather_scatter_view"
        )
        return f"{name}<{', '.join(parts)}>"
    if isinstance(t, FunctionType):
        ins = ", ".join(_long(x) for x in t.inputs)
        outs = [_long(x) for x in t.results]
        res = (
            outs[0]
            if len(outs) == 1 and not isinstance(t.results[0], FunctionType)
            else ("(" + ", ".join(outs) + ")")
        )
        return f"({ins}) -> {res}"
    if isinstance(t, OpaqueType):
        return t.text
    return str(t)
