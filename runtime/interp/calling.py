"""cuTile's calling convention: kernel arguments -> the entry's flat parameter list, and back.

An array argument becomes ``(pointer, shape[0..n), stride[0..n))`` (strides in elements), a
scalar (0-d array) one parameter; constants are baked into the kernel. Arrays are copied into the
interpreter heap row-major; the index types come from the entry signature. bf16 and f8 arrays may
be given as their raw bits (``uint16`` / ``uint8``), as cuTile's corpus stores them.

A list of arrays (:class:`ArrayList`, cuTile's ``ListConstraint``) becomes two parameters: an
``i64`` pointer to a table of one row per item and the ``i32`` row count (:func:`list_table`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from tilegen.runtime import floats
from tilegen.runtime.interp.memory import Heap
from tilegen.runtime.interp.values import (
    InterpError,
    compute_dtype,
    element_of,
    from_bits,
    storage_bytes,
    wrap_int,
)
from tilegen.runtime.types import FloatType, IntegerType, PointerType, TileType, Type


class CallError(InterpError):
    """Arguments that do not fit the kernel's parameters."""


#: Element types a NumPy dtype may be passed for (value semantics unless ``raw``).
_COMPATIBLE = {
    "float16": ("f16",),
    "float32": ("f32", "tf32"),
    "float64": ("f64",),
    "bool": ("i1", "i8"),
    "int8": ("i8",),
    "uint8": ("i8", "f8E4M3FN", "f8E5M2", "f8E8M0FNU"),
    "int16": ("i16",),
    "uint16": ("i16", "bf16"),
    "int32": ("i32",),
    "uint32": ("i32",),
    "int64": ("i64",),
    "uint64": ("i64",),
}
#: (dtype, element) pairs where the array holds raw storage bits.
_RAW = {("uint16", "bf16"), ("uint8", "f8E4M3FN"), ("uint8", "f8E5M2"), ("uint8", "f8E8M0FNU")}


def _type_name(t: Type) -> str:
    if isinstance(t, (IntegerType, FloatType)):
        return t.name
    return str(t)


def _describe(t: Type) -> str:
    if isinstance(t, TileType):
        inner = t.element
        if isinstance(inner, PointerType):
            return f"tile<ptr<{_type_name(inner.pointee)}>>"
        dims = "x".join(str(d) for d in t.shape)
        return f"tile<{dims + 'x' if dims else ''}{_type_name(inner)}>"
    return str(t)


@dataclass
class ArrayBinding:
    name: str
    addr: int
    shape: tuple
    element: Type
    dtype: np.dtype
    raw: bool
    #: the item's index when it belongs to the list argument ``name``
    item: Optional[int] = None


@dataclass(frozen=True, eq=False)
class ArrayList:
    """A list-of-arrays kernel argument (cuTile's ``ListConstraint``). It takes two entry
    parameters: the address of a table (:func:`list_table`) and ``len(items)`` as an ``i32``.
    Every item is placed row-major, as an array argument is; all items have one rank."""

    items: tuple

    def __post_init__(self):
        items = tuple(np.asarray(a) for a in self.items)
        if len({a.ndim for a in items}) > 1 or any(a.ndim == 0 for a in items):
            raise ValueError("ArrayList items must be arrays of one rank (at least 1)")
        object.__setattr__(self, "items", items)


def list_table(addrs: list[int], items: tuple) -> np.ndarray:
    """The table a list argument points to: one dense row of ``1 + 2 * ndim`` int64 words per
    item, ``[data address, shape..., strides in elements...]`` (row-major items)."""
    rows = []
    for addr, a in zip(addrs, items):
        strides = [int(np.prod(a.shape[i + 1 :], dtype=np.int64)) for i in range(a.ndim)]
        rows.append([int(addr), *(int(n) for n in a.shape), *strides])
    width = 1 + 2 * items[0].ndim if items else 1
    return np.array(rows, dtype=np.int64).reshape(len(items), width)


def _check_list_params(name: str, params: list[Type], p: int) -> None:
    ok = p + 2 <= len(params)
    if ok:
        ptr, length = params[p], params[p + 1]
        pel = ptr.element if isinstance(ptr, TileType) else None
        lel = length.element if isinstance(length, TileType) else None
        ok = (
            isinstance(pel, PointerType)
            and ptr.shape == ()
            and _type_name(pel.pointee) == "i64"
            and isinstance(lel, IntegerType)
            and length.shape == ()
        )
    if not ok:
        have = ", ".join(_describe(t) for t in params[p : p + 2]) or "none"
        raise CallError(
            f"argument '{name}' is a list of arrays; it takes entry parameters #{p} and #{p + 1}: "
            f"a tile<ptr<i64>> table and a rank-0 integer length (got {have})"
        )


def _place_list(name: str, value: ArrayList, heap: Heap) -> tuple[int, list[ArrayBinding]]:
    """Copy every item (its raw bytes) and then the item table into ``heap``."""
    bindings, addrs = [], []
    for i, item in enumerate(value.items):
        arr = np.ascontiguousarray(item)
        addr = heap.alloc(arr.nbytes, name=f"{name}[{i}]")
        _write_raw(heap, addr, arr)
        addrs.append(addr)
        bits = IntegerType(8 * arr.itemsize)
        bindings.append(ArrayBinding(name, addr, arr.shape, bits, arr.dtype, True, item=i))
    table = list_table(addrs, value.items)
    addr = heap.alloc(table.nbytes, name=f"{name} table")
    _write_raw(heap, addr, table)
    return addr, bindings


def _write_raw(heap: Heap, addr: int, arr: np.ndarray) -> None:
    n = arr.itemsize
    addrs = np.uint64(addr) + np.arange(arr.size, dtype=np.uint64) * np.uint64(n)
    heap.write_bits(addrs, arr.reshape(-1).view(f"u{n}"), n)


def _scalar_value(name: str, value: np.ndarray, t: Type, index: int) -> np.ndarray:
    el = t.element if isinstance(t, TileType) else t
    if not isinstance(t, TileType) or t.shape != () or isinstance(el, PointerType):
        raise CallError(
            f"argument '{name}' is a scalar but entry parameter #{index} has type {_describe(t)}"
        )
    kind = value.dtype.kind
    if isinstance(el, IntegerType):
        if kind not in "biu":
            raise CallError(
                f"argument '{name}' has dtype {value.dtype} but entry parameter #{index} is "
                f"{_describe(t)}"
            )
        return wrap_int(value.astype(np.int64) if kind != "u" else value.astype(np.uint64), el)
    if (value.dtype.name, _type_name(el)) in _RAW:  # bf16 / f8 scalars given as raw bits
        return from_bits(value.astype(np.uint64), el).reshape(())
    if kind != "f":
        raise CallError(
            f"argument '{name}' has dtype {value.dtype} but entry parameter #{index} is {_describe(t)}"
        )
    return floats.to_compute(value.astype(np.float64), el.name).reshape(())


def flatten_args(
    params: list[Type], args: list[tuple[str, np.ndarray]], heap: Heap
) -> tuple[list, list[ArrayBinding]]:
    """Flat entry arguments for ``args`` (name, value) and the heap bindings of the arrays."""
    flat: list = []
    bindings: list[ArrayBinding] = []
    p = 0
    for name, value in args:
        if isinstance(value, ArrayList):
            _check_list_params(name, params, p)
            addr, items = _place_list(name, value, heap)
            flat.append(np.array(addr, dtype=np.uint64))
            flat.append(np.array(len(value.items), dtype=compute_dtype(params[p + 1].element)))
            bindings += items
            p += 2
            continue
        value = np.asarray(value)
        if p >= len(params):
            raise CallError(
                f"too many arguments: '{name}' has no entry parameter left "
                f"(the entry takes {len(params)} flat parameters)"
            )
        if value.ndim == 0:
            flat.append(_scalar_value(name, value, params[p], p))
            p += 1
            continue
        t = params[p]
        el = t.element if isinstance(t, TileType) else None
        if not isinstance(el, PointerType):
            raise CallError(
                f"argument '{name}' is an array but entry parameter #{p} has type {_describe(t)} "
                "(an array takes a pointer, then one size and one stride per dimension)"
            )
        pointee = el.pointee
        allowed = _COMPATIBLE.get(value.dtype.name, ())
        if _type_name(pointee) not in allowed:
            raise CallError(
                f"argument '{name}' has dtype {value.dtype} but entry parameter #{p} points to "
                f"{_type_name(pointee)}"
            )
        nd = value.ndim
        if p + 1 + 2 * nd > len(params):
            raise CallError(
                f"argument '{name}' needs {1 + 2 * nd} parameters (pointer, {nd} sizes, {nd} "
                f"strides) but the entry has only {len(params) - p} left"
            )
        raw = (value.dtype.name, _type_name(pointee)) in _RAW
        arr = np.ascontiguousarray(value)
        if raw:
            nbytes = storage_bytes(pointee)
            addr = heap.alloc(arr.size * nbytes, name=name)
            addrs = np.uint64(addr) + np.arange(arr.size, dtype=np.uint64) * np.uint64(nbytes)
            heap.write_bits(addrs, arr.reshape(-1).astype(np.uint64), nbytes)
        else:
            addr = heap.alloc_array(_as_element(arr, pointee), pointee, name=name)
        flat.append(np.array(addr, dtype=np.uint64))
        strides = [int(np.prod(arr.shape[i + 1 :])) for i in range(nd)]
        for k, n in enumerate(list(arr.shape) + strides):
            it = params[p + 1 + k]
            iel = it.element if isinstance(it, TileType) else None
            if not isinstance(iel, IntegerType) or it.shape != ():
                raise CallError(
                    f"argument '{name}': entry parameter #{p + 1 + k} should be a rank-0 integer "
                    f"tile for its {'shape' if k < nd else 'stride'}, got {_describe(it)}"
                )
            flat.append(np.array(n, dtype=compute_dtype(iel)))
        bindings.append(ArrayBinding(name, addr, arr.shape, pointee, value.dtype, raw))
        p += 1 + 2 * nd
    if p != len(params):
        raise CallError(
            f"too few arguments: the entry takes {len(params)} flat parameters, the "
            f"{len(args)} argument(s) given fill {p}"
        )
    return flat, bindings


def _as_element(arr: np.ndarray, t: Type) -> np.ndarray:
    if isinstance(t, FloatType):
        return floats.to_compute(arr.astype(np.float64), t.name)
    if isinstance(t, IntegerType):
        return wrap_int(arr.astype(np.uint64) if arr.dtype.kind == "u" else arr.astype(np.int64), t)
    return arr


def read_back(heap: Heap, b: ArrayBinding) -> np.ndarray:
    """An array argument's contents after the run, in the dtype it was passed in."""
    n = storage_bytes(b.element)
    count = int(np.prod(b.shape))
    addrs = np.uint64(b.addr) + np.arange(count, dtype=np.uint64) * np.uint64(n)
    bits = heap.read_bits(addrs, n)
    if b.raw:
        if b.dtype.kind not in "biu":  # a list item's bytes (any dtype)
            return bits.astype(f"u{n}").view(b.dtype).reshape(b.shape)
        return bits.astype(b.dtype).reshape(b.shape)
    vals = from_bits(bits, b.element)
    if b.dtype.kind == "u":
        return vals.astype(np.int64).astype(b.dtype).reshape(b.shape)
    return vals.astype(b.dtype).reshape(b.shape)


def param_types(entry) -> list[Type]:
    """The entry's flat parameter types, nv_tileaa ones (scalars, ``!nv_tileaa.ptr``, ``index``)
    seen as the rank-0 cuda_tile tiles they were converted from."""
    ft = entry.attributes.get("function_type")
    ft = getattr(ft, "value", ft)
    if ft is not None and hasattr(ft, "inputs"):
        types = list(ft.inputs)
    else:
        types = [a.type for a in entry.regions[0].blocks[0].args]
    return [t if isinstance(t, TileType) else TileType((), element_of(t)) for t in types]


def entry_name(entry) -> Optional[str]:
    a = entry.attributes.get("sym_name")
    return getattr(a, "value", None)
