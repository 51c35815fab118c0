"""Executes a ``cuda_tile`` kernel on the CPU: dispatch, SSA environment, control signals, grid.

Ops with ``semantics.expr`` in the spec go to :mod:`tilegen.runtime.interp.elementwise`; the ops
marked ``kind: interpreter`` have one handler each in ``ops_core`` (tokens, grid queries, print,
assert, globals, mma), ``ops_memory`` (views, loads/stores, atomics) and ``ops_regions`` (if,
for, loop, reduce, scan), registered in :data:`HANDLERS` with :func:`handler`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Optional, TextIO

import numpy as np

from tilegen.runtime.diagnostics import format_location
from tilegen.runtime.interp.elementwise import attr_value, evaluate, semantics_of
from tilegen.runtime.interp.memory import Heap
from tilegen.runtime.interp.values import InterpError
from tilegen.runtime.ir import Block, Operation, Region


@dataclass
class Signal:
    """How a block ended: ``yield``, ``continue``, ``break`` or ``return`` with its operands."""

    kind: str
    values: list


@dataclass
class Machine:
    """State shared by every tile block of one launch."""

    heap: Heap
    grid: tuple[int, int, int] = (1, 1, 1)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    globals: dict[str, int] = field(default_factory=dict)
    ops_executed: int = 0
    #: stop with an error after this many executed ops (None: no limit), e.g. for runaway loops
    max_ops: Optional[int] = None
    #: when set, one line per executed op (block id, location, op, result summaries)
    trace: Optional[TextIO] = None


HANDLERS: dict[str, Callable] = {}
#: Ops handled by the launch itself rather than executed: module, entry (run_kernel) and
#: global (allocate_globals).
STRUCTURAL = ("cuda_tile.module", "cuda_tile.entry", "cuda_tile.global")


def handler(*names: str):
    def deco(fn):
        for n in names:
            HANDLERS["cuda_tile." + n] = fn
        return fn

    return deco


class Frame:
    """Execution of one tile block: SSA environment plus its block id."""

    def __init__(self, machine: Machine, block_id: tuple[int, int, int]):
        self.m = machine
        self.block_id = block_id
        #: the CTA's rank in its cluster (nv_tileas.cluster_cta_rank)
        self.cluster_rank = 0
        self.env: dict = {}

    # ----- values
    def get(self, v):
        try:
            return self.env[v]
        except KeyError:
            raise InterpError(f"value used before it was defined ({v!r})") from None

    def run_block(self, block: Block, args: list) -> Signal:
        for a, v in zip(block.args, args):
            self.env[a] = v
        for op in block.ops:
            sig = self.run_op(op)
            if sig is not None:
                return sig
        return Signal("yield", [])  # implicit terminator of an empty block

    def run_region(self, region: Region, args: list) -> Signal:
        if not region.blocks:
            return Signal("yield", [])
        return self.run_block(region.blocks[0], args)

    def run_op(self, op: Operation) -> Optional[Signal]:
        self.m.ops_executed += 1
        if self.m.max_ops is not None and self.m.ops_executed > self.m.max_ops:
            raise InterpError(f"stopped after executing {self.m.max_ops} ops (--max-ops)", op)
        try:
            h = HANDLERS.get(op.name)
            if h is not None:
                res = h(self, op)
            else:
                sem = semantics_of(op.opdef)
                if sem is None or sem.expr is None:
                    raise InterpError(f"the interpreter has no semantics for '{op.name}'")
                res = evaluate(op, op.opdef, sem, [self.get(v) for v in op.operands])
        except InterpError as e:
            if e.op is None:
                e.op = op
            raise
        except (ArithmeticError, LookupError, TypeError, ValueError) as e:
            # an operand the op cannot take (ill-typed IR the verifier did not see, ...)
            raise InterpError(f"cannot execute: {type(e).__name__}: {e}", op) from e
        if self.m.trace is not None:
            self._trace(op, res.values if isinstance(res, Signal) else res)
        if isinstance(res, Signal):
            return res
        if res is not None:
            for r, v in zip(op.results, res):
                self.env[r] = v
        return None

    def _trace(self, op: Operation, res) -> None:
        parts = [_summary(v) for v in (res or [])]
        where = format_location(op.loc)
        self.m.trace.write(
            f"[{','.join(map(str, self.block_id))}] {where}: {op.name}"
            + (f" -> {'; '.join(parts)}" if parts else "")
            + "\n"
        )


# --------------------------------------------------------------------------- helpers


def _summary(v) -> str:
    """A short description of a value for --trace."""
    if isinstance(v, np.ndarray) or isinstance(v, np.generic):
        a = np.asarray(v)
        if a.size == 1:
            return f"{a.dtype}{list(a.shape)} {a.reshape(-1)[0].item()}"
        if a.dtype.kind in "fiub" and a.size:
            with np.errstate(all="ignore"):
                return f"{a.dtype}{list(a.shape)} min={a.min().item()} max={a.max().item()}"
        return f"{a.dtype}{list(a.shape)}"
    return type(v).__name__ if not isinstance(v, str) else v


def scalar(v) -> int:
    return int(np.asarray(v).reshape(()).astype(np.int64))


def group(op: Operation, name: str) -> list:
    return op.opdef.operand_group(op, name)


def attr(op: Operation, name: str):
    return attr_value(op.opdef, op, name)


# --------------------------------------------------------------------------- launch


def run_kernel(
    machine: Machine, entry: Operation, flat_args: list, max_blocks: Optional[int] = None
) -> None:
    """Run ``entry`` once per tile block of ``machine.grid`` (x fastest); a kernel whose tile
    block is a cluster of CTAs (``nv_tileas.pair_rows``) once per CTA of it."""
    body = entry.regions[0].blocks[0]
    gx, gy, gz = machine.grid
    from tilegen.runtime.layouts.kernel import PAIR_ROWS_ATTR

    ctas = 2 if PAIR_ROWS_ATTR in entry.attributes else 1
    count = 0
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                for rank in range(ctas):
                    frame = Frame(machine, (x, y, z))
                    frame.cluster_rank = rank
                    frame.run_block(body, flat_args)
                count += 1
                if max_blocks is not None and count >= max_blocks:
                    return


# Handlers live in ops_*.py; importing them registers them (they import this module's names).
from tilegen.runtime.interp import ops_core, ops_memory, ops_regions  # noqa: E402,F401
from tilegen.runtime.interp import ops_nv_tileaa, ops_std  # noqa: E402,F401
from tilegen.runtime.interp import ops_nv_tileas  # noqa: E402,F401
from tilegen.runtime.interp.ops_core import allocate_globals, format_printf  # noqa: E402,F401
