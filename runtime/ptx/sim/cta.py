"""Run one CTA of a PTX entry: all threads as NumPy lanes, min-PC scheduling with active masks.

Each step picks the smallest PC among runnable threads and executes that instruction for all
threads at it, so divergent paths run one after the other and reconverge where their PCs meet
(the immediate post-dominator for the structured code compilers emit). `bar.sync` parks threads
until every non-exited thread of the CTA has arrived."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tilegen.runtime.ptx.parser import Entry, Instr, Reg, Sym, Imm
from tilegen.runtime.ptx.sim import handwritten
from tilegen.runtime.ptx.sim.declared import evaluate, match
from tilegen.runtime.ptx.sim.memory import Flat, Heap, MemoryFault, Shared
from tilegen.runtime.ptx.sim.values import from_bits, imm_values, to_bits


class PtxSimError(Exception):
    """A located simulation error (unsupported instruction, memory fault, trap, step budget)."""


@dataclass
class CtaState:
    entry: Entry
    heap: Heap
    params: dict[str, tuple[int, bytes]]  # name -> (param-space address, bytes)
    ntid: tuple[int, int, int]
    ctaid: tuple[int, int, int]
    nctaid: tuple[int, int, int]
    n: int = 0
    regs: dict[str, np.ndarray] = field(default_factory=dict)
    shared: Flat | None = None
    local: Flat | None = None
    symbols: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (space, addr)
    trace: list | None = None
    globals: dict[str, int] = field(default_factory=dict)  # module .global name -> heap address
    printed: list = field(default_factory=list)  # vprintf output, one string per lane call
    strict_async: bool = False  # the strict async mode (runtime/ptx/sim/hazards.py)
    stall: np.ndarray | None = None  # lanes a failed mbarrier wait parks for a retry
    barrier: tuple[int, int | None] = (0, None)  # (id, thread count) of the last bar.sync
    tmem: object = None  # tcgen05.Tmem, created on first use
    cur_ins: Instr | None = None  # the instruction executing (for the strict mode's messages)
    cur_mask: np.ndarray | None = None

    def __post_init__(self) -> None:
        nx, ny, nz = self.ntid
        self.n = nx * ny * nz
        lin = np.arange(self.n)
        self.tid = (lin % nx, (lin // nx) % ny, lin // (nx * ny))
        top = 0
        for var in self.entry.shared:
            top = (top + var.align - 1) // var.align * var.align
            self.symbols[var.name] = ("shared", top)
            top += var.size
        self.shared = Shared(top)
        ltop = 0
        for var in self.entry.local:
            ltop = (ltop + var.align - 1) // var.align * var.align
            self.symbols[var.name] = ("local", ltop)
            ltop += var.size
        self.local_size = max(ltop, 8)
        self.local = Flat(self.local_size * self.n, 0, "local")
        for name, (addr, _) in self.params.items():
            self.symbols[name] = ("param", addr)
        for name, addr in self.globals.items():
            self.symbols[name] = ("global", addr)
        from tilegen.runtime.ptx.sim.asyncproxy import Engine

        self.engine = Engine(self, self.strict_async)
        self.shared.hooks = self.engine.hazards

    # -- operands --------------------------------------------------------------------------------
    def special(self, name: str) -> np.ndarray | None:
        base, _, axis = name.partition(".")
        k = "xyz".index(axis) if axis in ("x", "y", "z") else 0
        full = lambda v: np.full(self.n, v, np.uint64)  # noqa: E731
        lane = np.arange(self.n) % 32
        table = {
            "%tid": lambda: self.tid[k].astype(np.uint64),
            "%ntid": lambda: full(self.ntid[k]),
            "%ctaid": lambda: full(self.ctaid[k]),
            "%clusterid": lambda: full(self.ctaid[k]),
            "%nctaid": lambda: full(self.nctaid[k]),
            "%nclusterid": lambda: full(self.nctaid[k]),
            "%cluster_ctaid": lambda: full(0),
            "%cluster_nctaid": lambda: full(1),
            "%cluster_ctarank": lambda: full(0),
            "%cluster_nctarank": lambda: full(1),
            "%laneid": lambda: lane.astype(np.uint64),
            "%warpid": lambda: (np.arange(self.n) // 32).astype(np.uint64),
            "%nwarpid": lambda: full((self.n + 31) // 32),
            "%lanemask_lt": lambda: ((1 << lane) - 1).astype(np.uint64),
            "%lanemask_le": lambda: ((2 << lane) - 1).astype(np.uint64),
            "%lanemask_eq": lambda: (1 << lane).astype(np.uint64),
        }
        fn = table.get(base)
        return fn() if fn else None

    def bits(self, op, t: str = "b64") -> np.ndarray:
        """Raw bits of a register, immediate or symbol address across all lanes."""
        if isinstance(op, Reg):
            if op.name in self.regs:
                return self.regs[op.name]
            sp = self.special(op.name)
            if sp is not None:
                return sp
            return np.zeros(self.n, np.uint64)  # never written: reads as 0
        if isinstance(op, Imm):
            return to_bits(self.read(op, t), t, self.n)
        if isinstance(op, Sym) and op.name in self.symbols:
            return np.full(self.n, self.symbols[op.name][1], np.uint64)
        raise PtxSimError(f"cannot read operand {op!r}")

    def read(self, op, t: str) -> np.ndarray:
        if isinstance(op, Imm):
            if op.bits is not None and t[0] in "bsu":
                return from_bits(np.full(self.n, op.bits, np.uint64), t)
            return imm_values(op.value, t, self.n)
        return from_bits(self.bits(op, t), t)

    def write_bits(self, op, bits: np.ndarray, mask: np.ndarray) -> None:
        if isinstance(op, Sym) and op.name == "_":  # the sink operand
            return
        if not isinstance(op, Reg):
            raise PtxSimError(f"destination {op!r} is not a register")
        old = self.regs.get(op.name)
        if old is None:
            old = np.zeros(self.n, np.uint64)
        self.regs[op.name] = np.where(mask, bits, old)

    def write(self, op, vals, t: str, mask: np.ndarray) -> None:
        self.write_bits(op, to_bits(vals, t, self.n), mask)


def _step(st: CtaState, ins: Instr, mask: np.ndarray, pc: np.ndarray, at: int) -> str | None:
    form = match(ins.opcode)
    if form is None:
        raise PtxSimError(f"unsupported instruction {ins.opcode!r}")
    if form.handwritten:
        return handwritten.execute(st, ins, mask, pc, at)
    if len(ins.operands) < len(form.row["operands"]):
        raise PtxSimError(f"{ins.opcode}: expected {len(form.row['operands'])} operands")
    args = [st.read(op, t) for op, t in zip(ins.operands[1:], form.operand_types[1:])]
    st.write(ins.operands[0], evaluate(form, args), form.operand_types[0], mask)
    return None


def run_cta(st: CtaState, max_steps: int = 2_000_000, file: str = "<ptx>") -> None:
    """Execute the CTA to completion; raises `PtxSimError` located at the failing line."""
    body = st.entry.body
    pc = np.zeros(st.n, np.int64)
    exited = np.zeros(st.n, bool)
    bar_of = np.full(st.n, -1)  # named barrier each lane waits at, -1 when none
    need: dict[int, int | None] = {}  # barrier id -> expected threads (None: all live ones)
    stalled = np.zeros(st.n, bool)
    progress = True

    eng = st.engine

    def release() -> None:
        for b, count in list(need.items()):
            arrived = bar_of == b
            if arrived.sum() >= (count or int((~exited).sum())):
                bar_of[arrived] = -1
                del need[b]
                if eng.hazards is not None:
                    eng.hazards.bar_sync(np.nonzero(arrived)[0])

    def finish() -> None:
        from tilegen.runtime.ptx.sim import tcgen05

        eng.flush()
        tcgen05.at_exit(st)

    for _ in range(max_steps):
        runnable = ~exited & (bar_of < 0) & ~stalled
        if not runnable.any():
            if stalled.any():
                if not progress:
                    if eng.flush():  # operations in flight may complete the waited phases
                        stalled[:] = False
                        continue
                    raise PtxSimError(
                        f"{file}: error: deadlock: mbarrier waits can never complete: "
                        + eng.stuck()
                    )
                stalled[:], progress = False, False
                continue
            if (bar_of >= 0).any():
                raise PtxSimError(f"{file}: error: deadlock: barrier {sorted(need)} never fills")
            try:
                finish()
            except (PtxSimError, MemoryFault) as e:
                raise PtxSimError(f"{file}: error: at exit: {e}") from None
            return
        at = int(pc[runnable].min())
        if at >= len(body):
            exited |= runnable & (pc >= len(body))
            release()
            continue
        here = runnable & (pc == at)
        ins = body[at]
        mask = here
        if ins.pred is not None:
            p = st.bits(Reg(ins.pred[0])) != 0
            mask = here & (~p if ins.pred[1] else p)
        pc[here] += 1
        st.cur_ins, st.cur_mask = ins, mask
        try:
            action = _step(st, ins, mask, pc, at) if mask.any() else None
            if action == "exit":
                eng.at_exit(np.nonzero(mask)[0])
        except (PtxSimError, MemoryFault) as e:
            raise PtxSimError(f"{file}:{ins.line}: error: {ins.opcode}: {e}") from None
        if action != "stall":
            progress = True
        if action == "exit":
            exited |= mask
            release()
        elif action == "barrier":
            bar_id, count = st.barrier
            bar_of[mask] = bar_id
            need[bar_id] = count
            release()
        elif action == "stall":
            pc[st.stall] = at
            stalled |= st.stall
            progress |= bool((mask & ~st.stall).any())
        elif action == "trap":
            shown = "".join(st.printed)  # this CTA's printf output so far (assert messages)
            raise PtxSimError(
                f"{file}:{ins.line}: error: trap executed"
                + (f"; printed: {shown}" if shown else "")
            )
    raise PtxSimError(f"{file}: error: step budget of {max_steps} exhausted (runaway loop?)")
