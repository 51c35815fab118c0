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
from tilegen.runtime.ptx.sim.values import (
    from_bits,
    from_bits_fn,
    imm_values,
    to_bits,
    to_bits_fn,
)


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
    bank_stats: object = None  # banks.BankStats: shared-memory wavefronts per line, when asked
    stall: np.ndarray | None = None  # lanes a failed mbarrier wait parks for a retry
    barrier: tuple[int, int | None] = (0, None)  # (id, thread count) of the last bar.sync
    tmem: object = None  # tcgen05.Tmem, created on first use
    cur_ins: Instr | None = None  # the instruction executing (for the strict mode's messages)
    cur_mask: np.ndarray | None = None
    cur_full: bool = False  # cur_mask covers every lane
    # the strict mode's registers an in-flight wgmma reads or writes (its A fragment, its
    # accumulator): name -> {token: (lanes, line)}, until a wait_group retires it
    held: dict = field(default_factory=dict)
    # further CTAs simulated side by side with `ctaid` (launch.run_ptx batches independent
    # CTAs: lanes [k T, (k + 1) T) are CTA k's; each has its own slice of shared memory)
    more_ctas: tuple = ()
    # the cluster shape (.reqnctapercluster): a batch holds whole clusters, each cluster's CTAs
    # consecutive in rank order (launch._ctas), so CTA k's rank is k % csize
    cluster: tuple = (1, 1, 1)
    # %gridid: the launch's number in its context (launch.Context), unique to each launch
    gridid: int = 1

    def __post_init__(self) -> None:
        nx, ny, nz = self.ntid
        self.threads = nx * ny * nz
        ctas = (tuple(self.ctaid),) + tuple(tuple(c) for c in self.more_ctas)
        self.n = self.threads * len(ctas)
        lin = np.arange(self.n) % self.threads
        self.cta_of = np.arange(self.n) // self.threads
        self.tid = (lin % nx, (lin // nx) % ny, lin // (nx * ny))
        self.ctaid_lanes = tuple(
            np.array([c[k] for c in ctas], np.uint64)[self.cta_of] for k in range(3)
        )
        top = 0
        for var in self.entry.shared:
            top = (top + var.align - 1) // var.align * var.align
            self.symbols[var.name] = ("shared", top)
            top += var.size
        # one slice of shared memory per CTA at 256 KiB steps: matrix descriptors (wgmma,
        # tcgen05) hold 18-bit shared addresses, relative to the issuing CTA's slice
        self.shared_stride = (top + (1 << 18) - 1) >> 18 << 18 if len(ctas) > 1 else top
        self.csize = self.cluster[0] * self.cluster[1] * self.cluster[2]
        if self.csize > 1:
            # as on the hardware, a shared::cluster address holds the CTA's rank from bit 24
            # (tileiras clears bit 24 to name the even CTA of a pair); untouched pages of the
            # sparse slices cost nothing (NumPy's zeroed allocation)
            self.shared_stride = 1 << 24
        self.shared_base = (self.cta_of * self.shared_stride).astype(np.uint64)
        if len(ctas) % self.csize:
            raise PtxSimError(f"{len(ctas)} CTAs side by side do not form whole clusters")
        self.rank = self.cta_of % self.csize  # %cluster_ctarank per lane
        self.shared = Shared(self.shared_stride * len(ctas))
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
        """A special register's value per lane (constant within the CTA; cached)."""
        cache = self.__dict__.setdefault("_specials", {})
        if name in cache:
            return cache[name]
        val = cache[name] = self._special(name)
        return val

    def _special(self, name: str) -> np.ndarray | None:
        base, _, axis = name.partition(".")
        k = "xyz".index(axis) if axis in ("x", "y", "z") else 0
        full = lambda v: np.full(self.n, v, np.uint64)  # noqa: E731
        lane = np.arange(self.n) % 32
        warp = (np.arange(self.n) % self.threads) // 32
        table = {
            "%tid": lambda: self.tid[k].astype(np.uint64),
            "%ntid": lambda: full(self.ntid[k]),
            "%ctaid": lambda: self.ctaid_lanes[k],
            "%clusterid": lambda: self.ctaid_lanes[k] // np.uint64(self.cluster[k]),
            "%nctaid": lambda: full(self.nctaid[k]),
            "%nclusterid": lambda: full(self.nctaid[k] // self.cluster[k]),
            "%cluster_ctaid": lambda: self.ctaid_lanes[k] % np.uint64(self.cluster[k]),
            "%cluster_nctaid": lambda: full(self.cluster[k]),
            "%cluster_ctarank": lambda: self.rank.astype(np.uint64),
            "%cluster_nctarank": lambda: full(self.csize),
            "%laneid": lambda: lane.astype(np.uint64),
            "%warpid": lambda: warp.astype(np.uint64),
            "%nwarpid": lambda: full((self.threads + 31) // 32),
            # each CTA simulated side by side runs on an SM of its own
            "%smid": lambda: (np.arange(self.n) // self.threads).astype(np.uint64),
            "%gridid": lambda: full(self.gridid),
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
            cache = self.__dict__.setdefault("_symbol_bits", {})
            if op.name not in cache:
                space, addr = self.symbols[op.name]
                bits = np.full(self.n, addr, np.uint64)
                if space == "shared":  # each CTA's own slice
                    bits = bits + self.shared_base
                cache[op.name] = bits
            return cache[op.name]
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
        if self.held and op.name in self.held:
            for lanes, line in self.held[op.name].values():
                if (lanes & mask).any():
                    raise PtxSimError(
                        f"{op.name} is written while the wgmma.mma_async at line {line} still "
                        "uses it (no wgmma.wait_group has retired that wgmma)"
                    )
        if mask is self.cur_mask and self.cur_full:
            self.regs[op.name] = np.ascontiguousarray(bits, np.uint64)
            return
        old = self.regs.get(op.name)
        if old is None:
            old = np.zeros(self.n, np.uint64)
        self.regs[op.name] = np.where(mask, bits, old)

    def write(self, op, vals, t: str, mask: np.ndarray) -> None:
        self.write_bits(op, to_bits(vals, t, self.n), mask)


_HANDWRITTEN = object()
_MOV = object()
_DECLARED = object()


def _plan(ins: Instr, n: int):
    """How to execute `ins` for `n` lanes, built once: hand-written, or a declared row's
    function with its source readers (immediates converted once) and destination type."""
    form = match(ins.opcode)
    if form is None:
        raise PtxSimError(f"unsupported instruction {ins.opcode!r}")
    parts = ins.parts
    if parts[0] == "mov" and len(ins.operands) == 2 and isinstance(ins.operands[0], Reg):
        src = ins.operands[1]
        if isinstance(src, Imm):  # the immediate's bits, converted once
            t = parts[-1]
            if src.bits is not None and t[0] in "bsu":
                val = from_bits(np.full(n, src.bits, np.uint64), t)
            else:
                val = imm_values(src.value, t, n)
            return (_MOV, ins.operands[0], to_bits(val, t, n))
        if isinstance(src, (Reg, Sym)):
            return (_MOV, ins.operands[0], src)
    if form.handwritten:
        return (_HANDWRITTEN, handwritten.handler(ins))
    if len(ins.operands) < len(form.row["operands"]):
        raise PtxSimError(f"{ins.opcode}: expected {len(form.row['operands'])} operands")
    srcs = []
    for op, t in zip(ins.operands[1:], form.operand_types[1:]):
        if isinstance(op, Imm):
            const = imm_values(op.value, t, n) if op.bits is None or t[0] not in "bsu" else None
            if const is None:
                const = from_bits(np.full(n, op.bits, np.uint64), t)
            srcs.append((None, const, None, op))
        elif isinstance(op, Reg):
            srcs.append((op.name, None, from_bits_fn(t), op))
        else:
            srcs.append((None, None, from_bits_fn(t), op))
    fn = form.fn if form.fn is not None else (lambda *args, form=form: evaluate(form, list(args)))
    dest = ins.operands[0]
    to = to_bits_fn(form.operand_types[0], n)
    return (_DECLARED, fn, srcs, dest, to)


def _step(st: CtaState, ins: Instr, mask: np.ndarray, pc: np.ndarray, at: int) -> str | None:
    try:
        plans = ins._plans
    except AttributeError:
        plans = ins._plans = {}
    plan = plans.get(st.n)
    if plan is None:
        plan = plans[st.n] = _plan(ins, st.n)
    kind = plan[0]
    if kind is _DECLARED:
        _, fn, srcs, dest, to = plan
        regs = st.regs
        args = []
        for name, const, conv, op in srcs:
            if const is not None:
                args.append(const)
                continue
            b = regs.get(name) if name is not None else None
            args.append(conv(st.bits(op) if b is None else b))
        st.write_bits(dest, to(fn(*args)), mask)
        return None
    if kind is _HANDWRITTEN:
        return plan[1](st, ins, mask, pc, at)
    src = plan[2]  # _MOV: register copies, raw bits
    st.write_bits(plan[1], src if isinstance(src, np.ndarray) else st.bits(src), mask)
    return None


def run_cta(st: CtaState, max_steps: int = 2_000_000, file: str = "<ptx>") -> None:
    """Execute the CTA to completion; raises `PtxSimError` located at the failing line.

    Runnable lanes are kept in groups by PC (usually one or two), so a step costs one
    instruction over one lane mask instead of a scan of every lane's PC."""
    body = st.entry.body
    nbody = len(body)
    pc = np.zeros(st.n, np.int64)
    exited = np.zeros(st.n, bool)
    bar_of = np.full(st.n, -1)  # named barrier each lane waits at, -1 when none
    need: dict[int, int | None] = {}  # barrier id -> expected threads (None: all live ones)
    stalled = np.zeros(st.n, bool)
    full = np.ones(st.n, bool)  # the all-lanes mask: `is full` spares a reduction per step
    st.full_mask = full
    st.exited = exited  # barrier.cluster counts the cluster's live threads
    groups: dict[int, np.ndarray] = {0: full}  # pc -> runnable lanes there
    progress = True
    eng = st.engine

    def add(lanes: np.ndarray) -> None:
        """Regroup `lanes` (runnable) by their PCs."""
        sel = np.nonzero(lanes)[0]
        if not sel.size:
            return
        pcs = pc[sel]
        first = int(pcs[0])
        targets = (first,) if (pcs == first).all() else np.unique(pcs)
        for t in targets:
            t = int(t)
            m = lanes if len(targets) == 1 else lanes & (pc == t)
            g = groups.get(t)
            m = m if g is None else (g | m)
            groups[t] = full if m is not full and m.all() else m

    arrivals = st.bar_arrivals = {}  # barrier key -> threads that passed it by bar.arrive

    def release() -> None:
        for b, count in list(need.items()):  # keys: cta * 65536 + barrier id
            arrived = bar_of == b
            live = count or int((~exited & (st.cta_of == b // 65536)).sum())
            passed = arrivals.get(b, 0)
            if arrived.sum() + passed >= live:
                bar_of[arrived] = -1
                # the barrier completed: arrivals beyond its count open its next phase
                left = passed - max(0, live - int(arrived.sum()))
                if left > 0:
                    arrivals[b] = left
                else:
                    arrivals.pop(b, None)
                    del need[b]
                if eng.hazards is not None and arrived.any():
                    eng.hazards.bar_sync(np.nonzero(arrived)[0], b)
                add(arrived)

    def finish() -> None:
        from tilegen.runtime.ptx.sim import tcgen05

        eng.flush()
        tcgen05.at_exit(st)

    with np.errstate(all="ignore"):
        _loop(
            st,
            body,
            pc,
            exited,
            bar_of,
            need,
            stalled,
            groups,
            add,
            release,
            finish,
            eng,
            max_steps,
            file,
        )


def _stuck(st: CtaState, stalled: np.ndarray) -> str:
    """What the parked lanes wait for that can never come: a cluster barrier's missing
    threads, else the mbarriers' pending phases."""
    phase = st.__dict__.get("cluster_phase")
    if phase is not None and (stalled & (phase >= 0)).any():
        cl = st.cta_of // st.csize
        c = int(cl[np.nonzero(stalled & (phase >= 0))[0][0]])
        arrived = st.cluster_bar.get(c, [0, 0])[0]
        live = int((~st.exited & (cl == c)).sum())
        return (
            f"barrier.cluster.wait can never complete: {arrived} of the cluster's {live} live "
            "threads arrived"
        )
    return "mbarrier waits can never complete: " + st.engine.stuck()


def _meta(entry: Entry) -> list:
    """Per instruction: (is a branch, guard register or None, guard negated), built once."""
    meta = getattr(entry, "_meta", None)
    if meta is None:
        meta = entry._meta = [
            (
                ins.opcode.split(".")[0] == "bra",
                Reg(ins.pred[0]) if ins.pred is not None else None,
                bool(ins.pred and ins.pred[1]),
            )
            for ins in entry.body
        ]
    return meta


def _loop(
    st, body, pc, exited, bar_of, need, stalled, groups, add, release, finish, eng, max_steps, file
) -> None:
    nbody = len(body)
    meta = _meta(st.entry)
    progress = True
    for _ in range(max_steps):
        if not groups:
            if stalled.any():
                if not progress:
                    if not eng.flush():  # operations in flight may complete the waited phases
                        raise PtxSimError(f"{file}: error: deadlock: " + _stuck(st, stalled))
                retry = stalled.copy()
                stalled[:], progress = False, False
                add(retry)
                continue
            if (bar_of >= 0).any():
                ids = sorted({b % 65536 for b in need})
                raise PtxSimError(f"{file}: error: deadlock: barrier {ids} never fills")
            try:
                finish()
            except (PtxSimError, MemoryFault) as e:
                raise PtxSimError(f"{file}: error: at exit: {e}") from None
            return
        at = min(groups)
        here = groups.pop(at)
        if at >= nbody:
            exited |= here
            release()
            continue
        ins = body[at]
        branch, guard, negated = meta[at]
        mask = here
        if guard is not None:
            p = st.bits(guard) != 0
            mask = here & (~p if negated else p)
        if branch:
            pc[here] = at + 1
        st.cur_ins, st.cur_mask = ins, mask
        st.cur_full = mask is st.full_mask
        try:
            action = (
                _step(st, ins, mask, pc, at) if st.cur_full or guard is None or mask.any() else None
            )
            if action == "exit":
                eng.at_exit(np.nonzero(mask)[0])
        except (PtxSimError, MemoryFault) as e:
            raise PtxSimError(f"{file}:{ins.line}: error: {ins.opcode}: {e}") from None
        if action is None:
            if branch:
                add(here)
            else:
                g = groups.get(at + 1)
                if g is not None:
                    here = g | here
                    if here.all():
                        here = st.full_mask
                groups[at + 1] = here
            progress = True
            continue
        pc[here] = at + 1  # lanes in groups carry stale PCs until they are regrouped
        if action == "exit":
            exited |= mask
            add(here & ~mask)
            release()
            progress = True
        elif action == "arrive":  # bar.arrive: counted at the barrier, the lanes go on
            bar_id, count = st.barrier
            key = st.cta_of * 65536 + bar_id
            for k in np.unique(key[mask]):
                k = int(k)
                st.bar_arrivals[k] = st.bar_arrivals.get(k, 0) + int((key[mask] == k).sum())
                need[k] = count
                if eng.hazards is not None:  # (the waiters acquire what the arrivals release)
                    eng.hazards.bar_arrive(np.nonzero(mask & (key == k))[0], k)
            add(here)
            release()
            progress = True
        elif action == "barrier":
            bar_id, count = st.barrier
            key = st.cta_of * 65536 + bar_id
            bar_of[mask] = key[mask]
            for k in np.unique(key[mask]):
                need[int(k)] = count
            add(here & ~mask)
            release()
            progress = True
        elif action == "stall":
            pc[st.stall] = at
            stalled |= st.stall
            rest = here & ~st.stall
            progress |= bool((mask & ~st.stall).any())
            add(rest)
        elif action == "trap":
            shown = "".join(st.printed)  # this CTA's printf output so far (assert messages)
            raise PtxSimError(
                f"{file}:{ins.line}: error: trap executed"
                + (f"; printed: {shown}" if shown else "")
            )
    raise PtxSimError(f"{file}: error: step budget of {max_steps} exhausted (runaway loop?)")
