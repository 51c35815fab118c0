"""Run a kernel: load a module (.mlir text or .tileirbc bytecode), verify it, launch its grid.

``run_module(module, args, grid)`` works on in-memory NumPy arrays; ``run_npz`` implements
``tilegen run`` (IN.npz with ``arg__<name>`` keys in parameter order, OUT.npz with every
``arg__<name>`` after the run). Errors are :class:`RunError` carrying located diagnostics.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Sequence, TextIO, Union

import numpy as np

from tilegen.runtime.diagnostics import CompileError, Diagnostic, op_error_prefix
from tilegen.runtime.interp.calling import (
    ArrayList,
    entry_name,
    flatten_args,
    param_types,
    read_back,
)
from tilegen.runtime.interp.executor import Machine, allocate_globals, run_kernel
from tilegen.runtime.interp.memory import Heap
from tilegen.runtime.interp.values import InterpError
from tilegen.runtime.ir import Operation

ArgList = Union[dict, Sequence[tuple]]


class RunError(CompileError):
    """A kernel could not be loaded, verified, compiled or run; ``diagnostics`` say where and
    why. The driver's :class:`CompileError`, with exit class 1 (and stage ``run``) for failures
    while running."""

    def __init__(self, diagnostics: list[Diagnostic], exit_code: int = 1, stage: str = "run"):
        super().__init__(diagnostics, exit_code, stage)


def load_module(path: Union[str, Path], verify: bool = True) -> Operation:
    """Read ``.tileirbc`` bytecode or MLIR text (``tileirdisasm`` output included) with the
    driver's ``read`` (and ``verify``) stages; failures are :class:`RunError`."""
    from tilegen.runtime.driver import load

    try:
        return load(Path(path), verify_input=verify)
    except CompileError as e:
        raise RunError(e.diagnostics, e.exit_code, e.stage) from None


def verify_or_raise(module: Operation) -> None:
    from tilegen.runtime.driver import verify

    try:
        verify(module, "<module>")
    except CompileError as e:
        raise RunError(e.diagnostics, e.exit_code, e.stage) from None


def find_entries(module: Operation) -> list[Operation]:
    """cuda_tile entries, or the kernel functions of a module lowered to nv_tileaa."""
    out = []
    for op in module.walk():
        if op.name == "cuda_tile.entry":
            out.append(op)
        elif op.name == "nv_tileaa.func" and "kernel" in op.attributes:
            out.append(op)
    return out


def find_entry(module: Operation, name: Optional[str] = None) -> Operation:
    entries = find_entries(module)
    if name is not None:
        for e in entries:
            if entry_name(e) == name:
                return e
        have = ", ".join(f"@{entry_name(e)}" for e in entries) or "none"
        raise RunError([Diagnostic("error", f"no entry named @{name} (entries: {have})")])
    if len(entries) != 1:
        have = ", ".join(f"@{entry_name(e)}" for e in entries) or "none"
        raise RunError(
            [
                Diagnostic(
                    "error",
                    f"the module has {len(entries)} entries ({have}); choose one with --entry",
                )
            ]
        )
    return entries[0]


def module_of(op: Operation) -> Operation:
    """The module an entry sits in (the entry itself when it has no parent)."""
    cur = op
    while cur.parent_op is not None and cur.name not in ("cuda_tile.module", "builtin.module"):
        cur = cur.parent_op
    return cur


def _interp_diag(e: InterpError) -> Diagnostic:
    op = e.op
    msg = str(e)
    if op is not None:
        msg = op_error_prefix(op.name) + msg
    return Diagnostic("error", msg, op.loc if op is not None else None)


def run_module(
    module: Union[Operation, str, Path],
    args: ArgList,
    grid: Sequence[int] = (1, 1, 1),
    entry: Optional[str] = None,
    stdout: Optional[TextIO] = None,
    max_ops: Optional[int] = None,
    trace: Optional[TextIO] = None,
    lower_to: Optional[str] = None,
    gpu_name: str = "sm_90",
    options=None,
) -> dict[str, np.ndarray]:
    """Run ``module``'s entry over ``grid`` on ``args`` (name -> array, in parameter order; a
    list-of-arrays parameter takes an :class:`ArrayList`).

    ``module`` may also be a path (``.mlir`` or ``.tileirbc``), loaded and verified first.
    ``lower_to="nv_tileaa"`` converts it (in place) for ``gpu_name`` first, with ``options``
    (runtime/options.CompileOptions; the opt level chiefly), and runs the nv_tileaa module
    (:func:`tilegen.runtime.interp.lowered.lower_module`).
    Returns every argument's value after the run (scalars unchanged; a list of arrays for an
    :class:`ArrayList`).
    """
    if not isinstance(module, Operation):
        module = load_module(module)
    if lower_to is not None:
        from tilegen.runtime.interp.lowered import lower_module

        module = lower_module(module, lower_to, gpu_name, options)
    ent = find_entry(module, entry) if module.name != "cuda_tile.entry" else module
    items = list(args.items()) if isinstance(args, dict) else list(args)
    g = tuple(int(x) for x in grid) + (1,) * (3 - len(grid))
    if any(n < 1 for n in g):
        raise RunError([Diagnostic("error", f"grid dimensions must be positive, got {g}")])
    heap = Heap()
    machine = Machine(heap=heap, grid=g, stdout=stdout or sys.stdout, max_ops=max_ops, trace=trace)
    try:
        allocate_globals(machine, module_of(ent))
        flat, bindings = flatten_args(param_types(ent), items, heap)
        run_kernel(machine, ent, flat)
    except InterpError as e:
        raise RunError([_interp_diag(e)]) from None
    out = {name: list(v.items) if isinstance(v, ArrayList) else np.asarray(v) for name, v in items}
    for b in bindings:
        if b.item is None:
            out[b.name] = read_back(heap, b)
        else:
            out[b.name][b.item] = read_back(heap, b)
    return out


def load_npz_expected(path: Union[str, Path]) -> dict[str, np.ndarray]:
    """The ``expected__<name>`` arrays of an npz (as the cuTile corpus stores them)."""
    with np.load(path) as d:
        return {k[len("expected__") :]: d[k] for k in d.files if k.startswith("expected__")}


def compare_expected(
    result: dict[str, np.ndarray],
    expected: dict[str, np.ndarray],
    rtol: float = 0.0,
    atol: float = 0.0,
) -> list[str]:
    """Mismatches between run results and expected arrays (empty when everything matches).

    Floats compare with ``|got - exp| <= atol + rtol * |exp|`` (NaN equals NaN); everything else
    exactly. Each entry names the argument, how many elements differ and the worst one.
    """
    problems = []
    for name, exp in expected.items():
        if name not in result:
            problems.append(f"{name}: no such argument")
            continue
        got = np.asarray(result[name])
        if got.shape != exp.shape:
            problems.append(f"{name}: shape {got.shape} != expected {exp.shape}")
            continue
        if exp.dtype.kind == "f" or got.dtype.kind == "f":
            g, e = got.astype(np.float64), exp.astype(np.float64)
            with np.errstate(all="ignore"):
                err = np.abs(g - e)
                bad = ~((err <= atol + rtol * np.abs(e)) | (np.isnan(g) & np.isnan(e)) | (g == e))
        else:
            bad = got != exp
            err = np.abs(got.astype(np.float64) - exp.astype(np.float64))
        if bad.any():
            idx = (
                np.unravel_index(
                    int(np.argmax(np.where(bad, np.nan_to_num(err, nan=np.inf), -1))), exp.shape
                )
                if exp.ndim
                else ()
            )
            problems.append(
                f"{name}: {int(bad.sum())} of {exp.size} elements differ; worst at "
                f"{[int(i) for i in idx]}: got {got[idx]!s}, expected {exp[idx]!s}"
            )
    return problems


def load_npz_args(path: Union[str, Path]) -> tuple[list[tuple[str, np.ndarray]], Optional[tuple]]:
    with np.load(path) as d:
        args = [(k[len("arg__") :], d[k]) for k in d.files if k.startswith("arg__")]
        grid = tuple(int(x) for x in d["grid"].reshape(-1)) if "grid" in d.files else None
    return args, grid


def run_npz(
    kernel: Union[str, Path],
    in_npz: Union[str, Path],
    out_npz: Union[str, Path],
    grid: Optional[Sequence[int]] = None,
    entry: Optional[str] = None,
    stdout: Optional[TextIO] = None,
    max_ops: Optional[int] = None,
    lower_to: Optional[str] = None,
    gpu_name: str = "sm_90",
) -> dict[str, np.ndarray]:
    module = load_module(kernel)
    args, npz_grid = load_npz_args(in_npz)
    g = grid or npz_grid or (1, 1, 1)
    result = run_module(
        module, args, g, entry, stdout, max_ops, lower_to=lower_to, gpu_name=gpu_name
    )
    np.savez(out_npz, **{f"arg__{k}": v for k, v in result.items()})
    return result
