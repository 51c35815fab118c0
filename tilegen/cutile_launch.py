"""``tilegen.cutile.launch``: run a cuTile Python kernel on the CPU.

``launch(grid, kernel, args, backend="interp", gpu_name="sm_90")`` takes what cuTile's
``ct.launch(stream, grid, kernel, args)`` takes, without the stream:

1. a :class:`~cuda.tile.compilation.KernelSignature` is derived from the arguments with the
   specialisation rules of cuTile's launcher (:func:`signature_for`);
2. cuTile's own compiler writes the Tile IR bytecode for it (``export_kernel(...,
   output_format="tileir_bytecode")``: no GPU, no driver, no tileiras);
3. ``backend="interp"`` runs the bytecode in tilegen's reference interpreter;
   ``backend="ptxsim"`` compiles it with tilegen's PTX backend for ``gpu_name`` and runs the PTX
   in the SIMT simulator;
4. every array argument is updated in place, as a device array would be.

The bytecode and the loaded module (interp) or PTX (ptxsim) are cached per signature: kernel,
dtypes, ranks, the divisibility class of shapes and strides, scalar types, constants, backend
and target (:func:`cache_info`, :func:`clear_cache`).

Arrays are NumPy arrays (bfloat16 / float8 through ``ml_dtypes``) or CPU ``torch`` tensors; a
Python list of them (one dtype and rank) is a list-of-arrays parameter (cuTile's
``ListConstraint``; the backends take it as an ``ArrayList``: runtime/interp/calling.py).
Scalars follow cuTile: a Python ``int`` is an ``int32`` parameter (``int64`` under
``ct.ScalarInt64``), a Python ``float`` a ``float32``; a NumPy scalar keeps its own dtype (an
extension: ``ct.launch`` refuses NumPy scalars). Parameters annotated ``ct.Constant`` take their
value from the argument, as with ``ct.launch``.

Errors: cuTile's own (``TileTypeError`` ...) propagate unchanged and carry the kernel's source
line; tilegen's diagnostics (verifier, PTX backend, interpreter, simulator) are raised as
:class:`LaunchError`, located at the kernel's source line through the bytecode's debug info.
"""

from __future__ import annotations

import io
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

BACKENDS = ("interp", "ptxsim")

#: bytes of alignment both backends give every array they place (interp heap: 256, ptxsim: 256)
_PLACED_ALIGNMENT = 16


class LaunchError(Exception):
    """tilegen could not compile or run the kernel. ``diagnostics``: tilegen ``Diagnostic``
    objects (``FILE:LINE:COL: error: ...`` where located); ``kernel``: the kernel's name."""

    def __init__(self, message: str, diagnostics: Sequence = (), kernel: str = ""):
        self.diagnostics = list(diagnostics)
        self.kernel = kernel
        super().__init__(message)


def _diag_error(diagnostics, kernel: str, what: str) -> LaunchError:
    from tilegen.runtime.diagnostics import file_line_col

    lines = []
    for d in diagnostics:
        lines.append(d.format() if file_line_col(d.loc) is not None else f"error: {d.message}")
    text = "\n".join(lines) or "error: (no diagnostic)"
    return LaunchError(f"kernel '{kernel}': {what}:\n{text}", diagnostics, kernel)


# ----------------------------------------------------------------------------- arguments


@dataclass
class _Array:
    """One array argument: ``host`` is a NumPy view of the caller's memory (written back after
    the run); ``bits`` the contiguous copy the backends read (bf16/fp8 as raw unsigned bits)."""

    host: np.ndarray
    bits: np.ndarray
    ct_dtype: Any


@dataclass
class _Prepared:
    constraints: list = field(default_factory=list)
    key: list = field(default_factory=list)
    #: (parameter name, value) for every non-constant parameter, in order: an array's bits, a
    #: 0-d scalar, or an ``ArrayList`` of a list's items' bits
    runtime: list = field(default_factory=list)
    #: every array (a list's items in its place), in order: what the backends give back
    arrays: list = field(default_factory=list)
    calling_convention: str = "cutile_python_v1"


def _ml_dtypes():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes


def _ct_dtype(dtype: np.dtype, what: str):
    """The cuTile dtype of a NumPy dtype, and the unsigned dtype carrying its raw bits."""
    import cuda.tile as ct

    plain = {
        "bool": ct.bool_,
        "int8": ct.int8,
        "int16": ct.int16,
        "int32": ct.int32,
        "int64": ct.int64,
        "uint8": ct.uint8,
        "uint16": ct.uint16,
        "uint32": ct.uint32,
        "uint64": ct.uint64,
        "float16": ct.float16,
        "float32": ct.float32,
        "float64": ct.float64,
    }
    if dtype.name in plain:
        return plain[dtype.name], None
    extended = {
        "bfloat16": (ct.bfloat16, np.uint16),
        "float8_e4m3fn": (ct.float8_e4m3fn, np.uint8),
        "float8_e5m2": (ct.float8_e5m2, np.uint8),
    }
    if dtype.name in extended and _ml_dtypes() is not None:
        return extended[dtype.name]
    raise LaunchError(f"{what}: dtype {dtype} has no cuTile equivalent")


def _torch_view(t, what: str) -> np.ndarray:
    """A NumPy view sharing memory with the CPU tensor ``t`` (bf16/fp8 through ml_dtypes)."""
    import torch

    if t.device.type != "cpu":
        raise LaunchError(
            f"{what}: tensor is on {t.device}; tilegen.cutile.launch runs on the CPU "
            "(use ct.launch for device tensors)"
        )
    t = t.detach()
    special = {
        torch.bfloat16: (torch.int16, "bfloat16"),
        getattr(torch, "float8_e4m3fn", None): (torch.uint8, "float8_e4m3fn"),
        getattr(torch, "float8_e5m2", None): (torch.uint8, "float8_e5m2"),
    }
    if t.dtype in special:
        md = _ml_dtypes()
        if md is None:
            raise LaunchError(f"{what}: {t.dtype} tensors need ml_dtypes (pip install ml-dtypes)")
        carrier, name = special[t.dtype]
        return t.view(carrier).numpy().view(getattr(md, name))
    return t.numpy()


def _is_torch_tensor(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _divisible_16(n: int) -> bool:
    return n % 16 == 0


def _array_constraint(arrs: Sequence[np.ndarray], ct_dtype, annotation, what: str):
    """cuTile's launch-time specialisation of an array (cext/tile_kernel.cpp,
    compute_array_specialization_bits): base address 16-byte aligned, elements disjoint,
    per dimension stride == 1, stride divisible by 16 bytes, shape divisible by 16. The
    backends place a row-major copy, so the strides are the copy's.

    ``arrs`` holds one array, or every item of a list argument (one dtype and rank): the
    constraint then holds for all of them (a property only where every item has it; annotated
    static shapes and strides must agree, as cuTile's launcher requires)."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    index = getattr(annotation, "index_dtype", ct.int32) if annotation is not None else ct.int32
    limit = 2**31 - 1 if index == ct.int32 else 2**63 - 1
    nd = arrs[0].ndim
    itemsize = arrs[0].dtype.itemsize
    shapes, strides = [], []
    for i, arr in enumerate(arrs):
        shape = tuple(int(n) for n in arr.shape)
        stride = tuple(int(np.prod(shape[d + 1 :], dtype=np.int64)) for d in range(nd))
        if any(n > limit for n in shape + stride):
            item = f", item #{i}" if len(arrs) > 1 else ""
            raise LaunchError(
                f"{what}{item}: shape {shape} does not fit the array's {index} index type "
                "(annotate the parameter ct.IndexedWithInt64)"
            )
        shapes.append(shape)
        strides.append(stride)

    def static(values: list[tuple], dims, kind: str) -> tuple:
        """Per dimension: the annotated dims' (common) values, None elsewhere."""
        wanted = {d % nd for d in dims}
        out = []
        for d in range(nd):
            column = {v[d] for v in values}
            if d in wanted and len(column) > 1:
                a, b = sorted(column)[:2]
                raise LaunchError(
                    f"{what}: arrays in the list vary in static {kind} at axis {d}: {a} vs {b}"
                )
            out.append(column.pop() if d in wanted else None)
        return tuple(out)

    static_strides = tuple(getattr(annotation, "static_stride_dims", ()) or ())
    static_shapes = tuple(getattr(annotation, "static_shape_dims", ()) or ())
    if static_strides:
        stride_constant = static(strides, static_strides, "stride")
    else:
        stride_constant = tuple(1 if all(s[d] == 1 for s in strides) else None for d in range(nd))
    shape_constant = static(shapes, static_shapes, "shape") if static_shapes else None
    elements_16 = max(1, 16 // itemsize)
    stride_div = tuple(
        elements_16 if all((s[d] * itemsize) % 16 == 0 and s[d] != 0 for s in strides) else 1
        for d in range(nd)
    )
    shape_div = tuple(
        16 if all(_divisible_16(n[d]) and n[d] != 0 for n in shapes) else 1 for d in range(nd)
    )
    return ArrayConstraint(
        ct_dtype,
        nd,
        index_dtype=index,
        stride_lower_bound_incl=0,
        alias_groups=(),
        may_alias_internally=False,
        stride_constant=stride_constant,
        shape_constant=shape_constant,
        stride_divisible_by=stride_div,
        shape_divisible_by=shape_div,
        base_addr_divisible_by=_PLACED_ALIGNMENT,
    )


def _scalar(value, annotation, what: str):
    """(ScalarConstraint, 0-d NumPy value) for a runtime scalar argument."""
    import cuda.tile as ct
    from cuda.tile.compilation import ScalarConstraint

    wanted = getattr(annotation, "dtype", None) if annotation is not None else None
    if isinstance(value, np.generic) and not isinstance(value, (float, int)):
        arr = np.asarray(value)
        ct_dtype, carrier = _ct_dtype(arr.dtype, what)
        bits = arr.view(carrier) if carrier is not None else arr
        return ScalarConstraint(ct_dtype), bits.reshape(())
    if isinstance(value, (bool, int, np.integer)):
        dtype = wanted if wanted is not None else ct.int32
        np_dtype = np.int64 if dtype == ct.int64 else np.int32
        info = np.iinfo(np_dtype)
        if not info.min <= int(value) <= info.max:
            raise LaunchError(
                f"{what}: {int(value)} does not fit a {np_dtype.__name__} scalar parameter"
                + ("" if dtype == ct.int64 else " (annotate the parameter ct.ScalarInt64)")
            )
        return ScalarConstraint(dtype), np.asarray(int(value), np_dtype)
    if isinstance(value, float):
        return ScalarConstraint(ct.float32), np.asarray(value, np.float32)
    raise LaunchError(f"{what}: unsupported argument type {type(value).__name__}")


def _leaf(annotation_node):
    return annotation_node if getattr(annotation_node, "KIND", "leaf") == "leaf" else None


def _host_array(value, what: str) -> Optional[np.ndarray]:
    """``value`` as a NumPy array of at least one dimension, or None when it is no array."""
    if _is_torch_tensor(value):
        value = _torch_view(value, what)
    if not isinstance(value, np.ndarray):
        return None
    if value.ndim == 0:
        raise LaunchError(f"{what}: a 0-d array; pass a Python or NumPy scalar instead")
    return value


def _bits(value: np.ndarray, carrier) -> np.ndarray:
    return np.ascontiguousarray(value.view(carrier) if carrier is not None else value)


def _check_alias(seen: list, name: str, value: np.ndarray, what: str) -> None:
    for other, arr in seen:
        if np.may_share_memory(arr, value) and np.shares_memory(arr, value):
            raise LaunchError(
                f"{what}: shares memory with argument '{other}'; cuTile assumes array "
                "arguments do not alias (pass each array once)"
            )
    seen.append((name, value))


def _array_key(constraint) -> tuple:
    index = constraint.index_dtype
    return (
        str(constraint.dtype),
        constraint.ndim,
        index.name if hasattr(index, "name") else "",
        constraint.stride_constant,
        constraint.shape_constant,
        constraint.stride_divisible_by,
        constraint.shape_divisible_by,
    )


def _list_arg(out: _Prepared, seen: list, pname: str, value, leaf, what: str):
    """The ``ListConstraint`` of a list-of-arrays argument; adds its items to ``out``."""
    from cuda.tile.compilation import ListConstraint

    from tilegen.runtime.interp.calling import ArrayList

    if not isinstance(value, list):
        raise LaunchError(f"{what}: the parameter is annotated as a list; pass a list of arrays")
    if not value:
        raise LaunchError(
            f"{what}: empty lists are not supported as kernel arguments (as in cuTile)"
        )
    items, first = [], None
    for i, item in enumerate(value):
        item_what = f"{what}, list item #{i}"
        arr = _host_array(item, item_what)
        if arr is None:
            raise LaunchError(
                f"{what}: unsupported argument type list: item #{i} is a "
                f"{type(item).__name__}, not an array (a list parameter takes arrays)"
            )
        ct_dtype, carrier = _ct_dtype(arr.dtype, item_what)
        if first is None:
            first = arr
        elif arr.dtype != first.dtype:
            raise LaunchError(
                f"{item_what}: arrays in the list vary in dtype ({arr.dtype}, item #0 is "
                f"{first.dtype})"
            )
        elif arr.ndim != first.ndim:
            raise LaunchError(
                f"{item_what}: arrays in the list vary in rank ({arr.ndim}, item #0 has "
                f"{first.ndim})"
            )
        _check_alias(seen, f"{pname}[{i}]", arr, item_what)
        items.append((arr, _bits(arr, carrier)))
    if len(items) > 2**31 - 1:
        raise LaunchError(f"{what}: the list is too long")
    element = leaf.list.element if leaf.list is not None else None
    constraint = _array_constraint([a for a, _ in items], ct_dtype, element, what)
    if any(n is not None for n in constraint.shape_constant):
        out.calling_convention = "cutile_python_v2"
    out.arrays += [_Array(a, bits, ct_dtype) for a, bits in items]
    out.runtime.append((pname, ArrayList(tuple(bits for _, bits in items))))
    out.key.append(("list", *_array_key(constraint)))
    return ListConstraint(constraint, alias_groups=(), elements_may_alias=False)


def _prepare(kernel, args: Sequence) -> _Prepared:
    """Constraints, cache key and runtime values for ``args``."""
    from cuda.tile.compilation import ConstantConstraint

    name = _kernel_name(kernel)
    ann = kernel._annotated_function
    params = list(ann.pysig.parameters)
    if len(args) != len(params):
        raise LaunchError(
            f"kernel '{name}' takes {len(params)} argument(s) ({', '.join(params)}), "
            f"{len(args)} given",
            kernel=name,
        )
    out = _Prepared()
    seen: list[tuple[str, np.ndarray]] = []
    for pname, node, value in zip(params, ann.parameter_annotations, args):
        what = f"kernel '{name}', argument '{pname}'"
        leaf = _leaf(node)
        if leaf is None or (isinstance(value, tuple) and not leaf.constant):
            raise LaunchError(f"{what}: tuple parameters are not supported yet")
        if leaf.constant:
            constraint = value if isinstance(value, ConstantConstraint) else None
            try:
                constraint = constraint or ConstantConstraint(value)
            except TypeError as e:
                raise LaunchError(f"{what}: {e}") from None
            out.constraints.append(constraint)
            out.key.append(("const", type(constraint.value).__name__, repr(constraint.value)))
            continue
        if leaf.list is not None or isinstance(value, list):
            out.constraints.append(_list_arg(out, seen, pname, value, leaf, what))
            continue
        arr = _host_array(value, what)
        if arr is not None:
            ct_dtype, carrier = _ct_dtype(arr.dtype, what)
            _check_alias(seen, pname, arr, what)
            bits = _bits(arr, carrier)
            constraint = _array_constraint([arr], ct_dtype, leaf.array, what)
            if any(n is not None for n in constraint.shape_constant):
                out.calling_convention = "cutile_python_v2"
            out.arrays.append(_Array(arr, bits, ct_dtype))
            out.runtime.append((pname, bits))
            out.key.append(("array", *_array_key(constraint)))
        else:
            constraint, scalar = _scalar(value, leaf.scalar, what)
            out.runtime.append((pname, scalar))
            out.key.append(("scalar", str(constraint.dtype)))
        out.constraints.append(constraint)
    return out


def signature_for(kernel, args: Sequence):
    """The ``KernelSignature`` :func:`launch` compiles ``kernel`` for, given ``args``."""
    from cuda.tile.compilation import CallingConvention, KernelSignature

    prepared = _prepare(kernel, args)
    return KernelSignature(
        prepared.constraints, getattr(CallingConvention, prepared.calling_convention)()
    )


# ----------------------------------------------------------------------------- compilation


@dataclass
class _Compiled:
    bytecode: bytes
    symbol: str
    #: the driver's Compilation: its module (after ``verify``; interp) or PTX (ptxsim)
    compilation: Any = None
    seconds: dict = field(default_factory=dict)

    @property
    def module(self):
        return self.compilation.module

    @property
    def ptx(self) -> Optional[str]:
        return self.compilation.ptx


_CACHE: dict = {}
_STATS = {"hits": 0, "misses": 0}


def cache_info() -> dict:
    """``{"hits", "misses", "entries"}`` of the per-signature cache."""
    return {**_STATS, "entries": len(_CACHE)}


def clear_cache() -> None:
    _CACHE.clear()
    _STATS.update(hits=0, misses=0)


def _kernel_name(kernel) -> str:
    fn = getattr(getattr(kernel, "_annotated_function", None), "pyfunc", None)
    return getattr(fn, "__name__", type(kernel).__name__)


def _bytecode_version() -> str:
    """The newest bytecode version both cuTile and tilegen support (no tileiras probe)."""
    from cuda.tile._compile import parse_bytecode_version

    from tilegen.api import readable_bytecode_versions

    for version in reversed(readable_bytecode_versions()):
        try:
            parse_bytecode_version(version)
        except ValueError:
            continue
        return version
    raise LaunchError("cuTile and tilegen share no Tile IR bytecode version")


def _export(kernel, signature, gpu_name: str) -> bytes:
    from cuda.tile.compilation import export_kernel

    buf = io.BytesIO()
    export_kernel(
        kernel,
        [signature],
        buf,
        gpu_code=gpu_name,
        output_format="tileir_bytecode",
        bytecode_version=_bytecode_version(),
    )
    return buf.getvalue()


def _compile_options(gpu_name: str, options):
    """The driver's ``CompileOptions`` for a launch: ``options`` (default: ``CompileOptions()``,
    as ``tilegen compile``) with ``gpu_name`` as the target."""
    from tilegen.runtime.diagnostics import CompileError
    from tilegen.runtime.options import CompileOptions, parse_target
    from tilegen.runtime.records import replace
    from tilegen.targets import TARGET_NAMES

    if gpu_name not in TARGET_NAMES:
        raise LaunchError(f"gpu_name must be one of {', '.join(TARGET_NAMES)}, got {gpu_name!r}")
    if options is not None and not isinstance(options, CompileOptions):
        raise LaunchError(f"options must be CompileOptions, got {type(options).__name__}")
    try:
        return replace(options or CompileOptions(), target=parse_target(gpu_name))
    except CompileError as e:
        raise _diag_error(e.diagnostics, "", "bad compile options") from None


#: driver stage that failed -> how a LaunchError words it
_FAILED_STAGE = {"read": "tilegen cannot read", "verify": "tilegen's verifier refuses"}


def _run_stages(c, until: str, start: str, name: str) -> None:
    """The driver's stages ``start``..``until`` on ``c``; a failure is a :class:`LaunchError`
    with the driver's diagnostics (as ``tilegen compile`` prints them)."""
    from tilegen.runtime.diagnostics import CompileError
    from tilegen.runtime.driver import run_stages

    try:
        run_stages(c, until, start)
    except CompileError as e:
        sm = c.options.target.name if c.options.target is not None else "?"
        what = _FAILED_STAGE.get(e.stage, f"tilegen cannot compile for {sm}")
        raise _diag_error(e.diagnostics, name, what) from None


def _build(kernel, prepared: _Prepared, options, until: str) -> _Compiled:
    """cuTile's bytecode for the signature, then the driver's stages ``read`` through ``until``
    (runtime/driver.py) on it."""
    from cuda.tile.compilation import CallingConvention, KernelSignature

    from tilegen.runtime.driver import Compilation

    name = _kernel_name(kernel)
    sig = KernelSignature(
        prepared.constraints, getattr(CallingConvention, prepared.calling_convention)()
    )
    sig = sig.with_mangled_symbol(name)
    seconds = {}
    t = time.perf_counter()
    bytecode = _export(kernel, sig, f"sm_{options.target.sm}")
    seconds["export"] = time.perf_counter() - t
    c = Compilation(options, f"<{name} bytecode>", bytecode)
    t = time.perf_counter()
    _run_stages(c, "verify", "read", name)
    seconds["load"] = time.perf_counter() - t
    if until != "verify":
        t = time.perf_counter()
        _run_stages(c, until, "optimize", name)
        seconds["ptx" if until == "ptx" else until] = time.perf_counter() - t
    return _Compiled(bytecode, sig.symbol, c, seconds=seconds)


def _compiled(kernel, prepared: _Prepared, backend: str, options, until: str = "") -> _Compiled:
    """:func:`_build` through ``until`` (interp: ``verify``, ptxsim: ``ptx``), cached per
    signature, backend and every ``CompileOptions`` field; a cached entry compiled less far
    goes on from where it stopped."""
    from tilegen.runtime.driver import STAGE_NAMES

    until = until or ("verify" if backend == "interp" else "ptx")
    key = (kernel, backend, options.fingerprint(), prepared.calling_convention)
    key += tuple(prepared.key)
    hit = _CACHE.get(key)
    if hit is None:
        _STATS["misses"] += 1
        hit = _CACHE[key] = _build(kernel, prepared, options, until)
        return hit
    _STATS["hits"] += 1
    done = hit.compilation.stages
    if until not in done:
        t = time.perf_counter()
        _run_stages(hit.compilation, until, STAGE_NAMES[len(done)], _kernel_name(kernel))
        hit.seconds[until] = time.perf_counter() - t
    return hit


def compile_kernel(
    kernel, args: Sequence, *, gpu_name: str = "sm_90", options=None, emit: str = "ptx"
):
    """Compile ``kernel`` for ``args`` as :func:`launch` with ``backend="ptxsim"`` does, through
    the driver's stage that gives ``emit`` (as ``tilegen compile --emit``: ``cuda_tile``,
    ``nv_tileaa``, ``nv_tileas``, ``ptx``, ``cubin``); returns the driver's ``Compilation``
    (``.module``, ``.ptx``, ``.cubin``, ``.ptxas_log``, ``.timings``). ``ptx`` and ``cubin`` share
    :func:`launch`'s cache; an IR ``emit`` compiles afresh (later stages rewrite the IR)."""
    from tilegen.runtime.driver import EMIT

    if emit not in EMIT:
        raise LaunchError(f"emit must be one of {', '.join(EMIT)}, got {emit!r}")
    options = _compile_options(gpu_name, options)
    prepared = _prepare(kernel, args)
    if emit in ("ptx", "cubin"):
        return _compiled(kernel, prepared, "ptxsim", options, EMIT[emit]).compilation
    return _build(kernel, prepared, options, EMIT[emit]).compilation


# ----------------------------------------------------------------------------- launch


def _grid(grid) -> tuple[int, int, int]:
    dims = (grid,) if isinstance(grid, (int, np.integer)) else tuple(grid)
    if not 1 <= len(dims) <= 3 or any(
        isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in dims
    ):
        raise LaunchError(f"grid must be 1 to 3 positive integers, got {grid!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def _run(entry: _Compiled, prepared: _Prepared, grid, backend: str, name: str, stdout):
    from tilegen.runtime.interp.api import RunError

    if backend == "interp":
        from tilegen.runtime.interp.api import run_module

        try:
            out = run_module(entry.module, prepared.runtime, grid, stdout=stdout)
        except RunError as e:
            raise _diag_error(e.diagnostics, name, "the interpreter stopped") from None
        results = [out[pname] for pname, v in prepared.runtime if not _is_scalar(v)]
        return _flat_results(results)
    from tilegen.runtime.ptx.launch import PtxSimError, run_ptx

    values = [v for _, v in prepared.runtime]
    try:
        return _flat_results(run_ptx(entry.ptx, values, grid, file=f"<{name} ptx>", stdout=stdout))
    except PtxSimError as e:
        from tilegen.runtime.diagnostics import Diagnostic

        raise _diag_error(
            [Diagnostic("error", f"ptxsim: {e}")], name, "the PTX simulator stopped"
        ) from None


def _is_scalar(value) -> bool:
    return isinstance(value, np.ndarray) and value.ndim == 0


def _flat_results(results: list) -> list[np.ndarray]:
    """Every array's contents in argument order, a list argument's items in its place."""
    flat = []
    for r in results:
        flat += r if isinstance(r, list) else [r]
    return flat


def _write_back(arrays: list[_Array], results: list[np.ndarray]) -> None:
    for a, got in zip(arrays, results):
        got = np.asarray(got).reshape(a.bits.shape)
        if got.dtype != a.bits.dtype:
            got = got.view(a.bits.dtype) if got.itemsize == a.bits.itemsize else got
        if np.array_equal(got.view(np.uint8), a.bits.view(np.uint8)):
            continue  # untouched (read-only inputs stay read-only)
        a.host[...] = got.view(a.host.dtype) if got.dtype != a.host.dtype else got


def launch(
    grid,
    kernel,
    args: Sequence,
    *,
    backend: str = "interp",
    gpu_name: str = "sm_90",
    stdout=None,
    options=None,
) -> None:
    """Run ``kernel`` (a ``@ct.kernel``) over ``grid`` on ``args`` on the CPU, updating the
    array arguments in place. ``backend``: ``"interp"`` (tilegen's reference interpreter) or
    ``"ptxsim"`` (tilegen's PTX for ``gpu_name`` in the SIMT simulator); ``stdout``: where
    ``ct.printf`` / ``ct.print`` text goes (default ``sys.stdout``); ``options``: the driver's
    ``CompileOptions`` (``tilegen compile``'s defaults when None; the target is ``gpu_name``)."""
    if backend not in BACKENDS:
        raise LaunchError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    compile_options = _compile_options(gpu_name, options)
    if not hasattr(kernel, "_annotated_function"):
        raise LaunchError(f"expected a @ct.kernel, got {type(kernel).__name__}")
    if not isinstance(args, (tuple, list)):
        raise LaunchError(f"args must be a tuple of kernel arguments, got {type(args).__name__}")
    g = _grid(grid)
    prepared = _prepare(kernel, args)
    entry = _compiled(kernel, prepared, backend, compile_options)
    results = _run(entry, prepared, g, backend, _kernel_name(kernel), stdout)
    _write_back(prepared.arrays, results)


__all__ = [
    "BACKENDS",
    "LaunchError",
    "cache_info",
    "clear_cache",
    "compile_kernel",
    "launch",
    "signature_for",
]
