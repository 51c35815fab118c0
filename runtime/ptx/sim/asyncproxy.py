"""Asynchronous operations: mbarriers, bulk and tensor (TMA) copies, bulk groups, the async
proxy, and the completion engine they share with tcgen05 (runtime/ptx/sim/tcgen05.py).

Completion model. Hardware may complete an async operation at any time between its issue and
the synchronisation that observes it. By default every operation completes at issue (its data
lands, its transaction bytes reach the mbarrier): one valid execution, and the fastest to
simulate. In the strict async mode (`run_ptx(strict_async=True)`) operations stay in flight for
as long as nothing forces them (a wait on their mbarrier, `cp.async.bulk.wait_group`, the end of
the CTA), the latest legal moment, and runtime/ptx/sim/hazards.py checks every shared-memory and
tensor-memory access against them. A failed `try_wait`/`test_wait` parks the lane to retry the
instruction later, which is what the spin loops compilers emit around it do anyway.

mbarrier (PTX ISA "Parallel synchronization and communication: mbarrier"): a phase completes
when its pending arrivals reach zero and its transaction count is zero; the count then resets to
the init count for the next phase. `expect_tx` adds bytes, `complete_tx` (copies) subtracts
them; the count may dip below zero while copies land before their expect."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from tilegen.runtime.ptx.parser import Addr, Instr, Reg, Sym, Vec
from tilegen.runtime.ptx.sim import tensor_ops, tensormap

if TYPE_CHECKING:
    from tilegen.runtime.ptx.sim.cta import CtaState


def _err(msg: str) -> Exception:
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    return PtxSimError(msg)


# -- mbarrier objects ---------------------------------------------------------------------------
@dataclass
class MBarrier:
    addr: int
    count: int
    line: int  # of its init
    pending: int = 0
    tx: int = 0
    phase: int = 0  # completed phases
    agent: int = -1  # vector-clock slot in the strict mode
    expected: list = field(default_factory=list)  # (bytes, line) expect_tx of this phase
    delivered: list = field(default_factory=list)  # (bytes, line) complete_tx of this phase

    def __post_init__(self) -> None:
        self.pending = self.count

    def describe(self) -> str:
        exp = sum(b for b, _ in self.expected)
        got = sum(b for b, _ in self.delivered)
        lines = sorted({ln for _, ln in self.expected})
        dl = sorted({ln for _, ln in self.delivered})
        out = (
            f"mbarrier at shared 0x{self.addr:x} (init at line {self.line}, count {self.count}) "
            f"in phase {self.phase}: {self.pending} of {self.count} arrivals pending"
        )
        if self.expected or self.delivered:
            out += f", expect-tx {exp} bytes"
            out += f" (line {', '.join(map(str, lines))})" if lines else ""
            out += f" but {got} delivered" if got != exp else f", {got} delivered"
            out += f" (line {', '.join(map(str, dl))})" if dl else ""
        return out


@dataclass
class AsyncOp:
    """One operation in flight: `land()` performs its effect; then it signals `barrier`
    (complete_tx of `tx` bytes, or one arrival when `arrive`)."""

    kind: str
    line: int
    lane: int
    land: Callable[[], None]
    barrier: int | None = None
    tx: int = 0
    arrive: bool = False
    deps: list = field(default_factory=list)  # ops that must complete first (tcgen05.commit)
    vc: np.ndarray | None = None  # issuing warp's vector clock (strict mode)
    writes: list = field(default_factory=list)  # (start, stop) shared ranges it writes
    reads: list = field(default_factory=list)  # (start, stop) shared ranges it reads
    tmem: tuple | None = None  # (lanes, col0, col1) tensor memory it writes
    tmem_reads: tuple | None = None  # (lanes, col0, col1) tensor memory it reads (MMA's A)
    id: int = 0
    done: bool = False


class Engine:
    """Per-CTA async state: mbarriers, operations in flight, bulk groups, the strict mode."""

    def __init__(self, st: "CtaState", strict: bool) -> None:
        self.st, self.strict = st, strict
        self.barriers: dict[int, MBarrier] = {}
        self.pending: list[AsyncOp] = []
        self.bulk_groups: dict[int, list[list[AsyncOp]]] = {}  # lane -> [open, committed...]
        self.tc_ops: dict[int, list[AsyncOp]] = {}  # lane -> tcgen05 ops not yet committed
        self.nops = 0
        self.hazards = None
        if strict:
            from tilegen.runtime.ptx.sim.hazards import Hazards

            self.hazards = Hazards(st)

    # -- barriers -----------------------------------------------------------------------------
    def barrier(self, addr: int) -> MBarrier:
        bar = self.barriers.get(int(addr))
        if bar is None:
            raise _err(f"mbarrier at shared address 0x{int(addr):x} was never initialised")
        return bar

    def alive(self, addrs: np.ndarray, lanes: np.ndarray) -> None:
        """A cluster's CTA must outlive every access the others make to its shared memory: a
        thread's arrival on the barrier of another CTA whose threads have all exited is an
        error (on the hardware the memory may belong to another CTA by then). (Asynchronous
        completions are not judged: the simulator completes them lazily, so their order
        against an exit is not the hardware's.)"""
        st = self.st
        exited = getattr(st, "exited", None)
        if st.csize == 1 or exited is None:
            return
        for a, lane in zip(addrs, lanes):
            k = int(a) // st.shared_stride
            if k != st.cta_of[lane] and exited[k * st.threads : (k + 1) * st.threads].all():
                raise _err(
                    f"{self.barrier(a).describe()}: an arrival from CTA {st.cta_of[lane]} "
                    f"after every thread of its own CTA (rank {k % st.csize} of the cluster) "
                    "exited; a CTA must outlive the accesses its cluster's other CTAs make to "
                    "its shared memory (wait for their last arrivals before exiting)"
                )

    def settle(self, bar: MBarrier) -> None:
        if bar.pending < 0:
            raise _err(f"{bar.describe()}: more arrivals than its count")
        if bar.pending == 0 and bar.tx == 0:
            bar.phase += 1
            bar.pending = bar.count
            bar.expected, bar.delivered = [], []
            if self.hazards is not None:
                self.hazards.phase_complete(bar)
        elif self.strict and bar.pending == 0 and bar.tx < 0:
            if not any(op.barrier == bar.addr and not op.done for op in self.pending):
                raise _err(f"{bar.describe()}: the copies deliver more bytes than expected")

    def complete_tx(self, bar: MBarrier, nbytes: int, line: int) -> None:
        bar.tx -= nbytes
        bar.delivered.append((nbytes, line))
        self.settle(bar)

    # -- operations -----------------------------------------------------------------------------
    def issue(self, op: AsyncOp) -> AsyncOp:
        self.nops += 1
        op.id = self.nops
        if self.hazards is not None:
            op.vc = self.hazards.clock_of_lane(op.lane)
            self.hazards.async_issue(op)
        if self.strict:
            self.pending.append(op)
        else:
            self.finish(op)
        return op

    def finish(self, op: AsyncOp) -> None:
        if op.done:
            return
        for dep in op.deps:
            self.finish(dep)
        op.done = True
        op.land()
        if self.hazards is not None:
            self.hazards.async_complete(op)
        if op.barrier is not None:
            bar = self.barrier(op.barrier)
            if self.hazards is not None and op.vc is not None:
                self.hazards.join_barrier(bar, op.vc)
            if self.hazards is not None and op.kind == "tcgen05.commit":
                self.hazards.commit_observe(op.deps, bar)
            if op.arrive:
                bar.pending -= 1
                self.settle(bar)
            else:
                self.complete_tx(bar, op.tx, op.line)

    def flush(self, pred: Callable[[AsyncOp], bool] | None = None) -> bool:
        """Complete the pending operations matching `pred` (all without), in issue order;
        whether any completed."""
        todo = [op for op in self.pending if not op.done and (pred is None or pred(op))]
        for op in todo:
            self.finish(op)
        self.pending = [op for op in self.pending if not op.done]
        return bool(todo)

    def flush_barrier(self, addr: int) -> bool:
        """Complete what can advance the mbarrier at `addr`: operations that signal it, and
        everything they depend on."""
        return self.flush(lambda op: op.barrier == addr)

    def stuck(self) -> str:
        """Why a deadlock happened: the mbarriers whose phase cannot complete."""
        live = [b.describe() for b in self.barriers.values() if b.pending < b.count or b.tx]
        return "; ".join(live) if live else "no mbarrier has arrivals or transactions pending"

    def at_exit(self, lanes: np.ndarray) -> None:
        """Exiting lanes: their bulk copies must have finished reading shared memory."""
        for lane in lanes:
            for group in self.bulk_groups.get(int(lane), []):
                for op in group:
                    if not op.done and op.reads:
                        if self.strict:
                            raise _err(
                                f"a bulk copy from shared memory (line {op.line}) is still "
                                "reading when its thread exits (missing cp.async.bulk.wait_group)"
                            )
                        self.finish(op)


def engine(st: "CtaState") -> Engine:
    return st.engine


# -- helpers ------------------------------------------------------------------------------------
def addrs(st: "CtaState", op, mask: np.ndarray) -> np.ndarray:
    """Per active lane address of an address operand."""
    if isinstance(op.base, Sym):
        base = st.bits(op.base).astype(np.int64)
    elif op.base is None:
        base = np.zeros(st.n, np.int64)
    else:
        base = st.bits(op.base).astype(np.int64)
    return (base + op.offset)[mask]


def shared_addrs(st: "CtaState", op, mask: np.ndarray) -> np.ndarray:
    """Shared-window offsets of a `.shared` (or generic) address operand."""
    from tilegen.runtime.ptx.sim.memory import SHARED_WINDOW

    a = addrs(st, op, mask)
    return np.where(a >= SHARED_WINDOW, a - SHARED_WINDOW, a)


# -- mbarrier instructions ----------------------------------------------------------------------
def do_mbarrier(st: "CtaState", ins: Instr, mask: np.ndarray, line: int) -> str | None:
    eng = st.engine
    kind = ins.parts[1]
    lanes = np.nonzero(mask)[0]
    hz = eng.hazards
    if kind == "init":
        counts = st.read(ins.operands[1], "u32")
        for lane, a in zip(lanes, shared_addrs(st, ins.operands[0], mask)):
            n = int(counts[lane])
            if not 1 <= n <= (1 << 20) - 1:
                raise _err(f"mbarrier count {n} is outside [1, 2^20 - 1]")
            bar = MBarrier(int(a), n, line)
            eng.barriers[int(a)] = bar
            if hz is not None:
                hz.new_barrier(bar)
        return None
    if kind in ("arrive", "arrive_drop", "expect_tx", "complete_tx"):
        if kind in ("expect_tx", "complete_tx"):
            addr, rest, dest = ins.operands[0], ins.operands[1:], None
        else:
            dest, addr, rest = ins.operands[0], ins.operands[1], ins.operands[2:]
        expect = "expect_tx" in ins.parts
        tx = st.read(rest[0], "u32") if (expect or kind == "complete_tx") else None
        rest = rest[1:] if tx is not None else rest
        counts = st.read(rest[0], "u32") if rest else None
        tokens = np.zeros(st.n, np.uint64)
        addrs_ = shared_addrs(st, addr, mask)
        if kind in ("arrive", "arrive_drop"):
            eng.alive(addrs_, lanes)
            tensor_ops.released(st, lanes)
        if kind == "arrive" and not expect and counts is None:  # plain arrivals, vectorised
            for a in np.unique(addrs_):
                bar = eng.barrier(a)
                todo = lanes[addrs_ == a]
                while todo.size:
                    k = max(1, min(bar.pending, todo.size))
                    now, todo = todo[:k], todo[k:]
                    tokens[now] = bar.phase
                    if hz is not None:
                        for lane in now:
                            hz.arrive(int(lane), bar)
                    bar.pending -= k
                    eng.settle(bar)
            if isinstance(dest, Reg):
                st.write_bits(dest, tokens, mask)
            return None
        if counts is None:
            counts = np.ones(st.n, np.uint32)
        for lane, a in zip(lanes, addrs_):
            bar = eng.barrier(a)
            tokens[lane] = bar.phase
            if kind == "complete_tx":
                eng.complete_tx(bar, int(tx[lane]), line)
                continue
            if expect:
                bar.tx += int(tx[lane])
                bar.expected.append((int(tx[lane]), line))
                expect_unboxed(st, bar.addr)
            if kind == "expect_tx":
                eng.settle(bar)
                continue
            if hz is not None:
                hz.arrive(int(lane), bar)
            if kind == "arrive_drop":
                bar.count -= int(counts[lane])
            bar.pending -= int(counts[lane])
            eng.settle(bar)
        if isinstance(dest, Reg):
            st.write_bits(dest, tokens, mask)
        return None
    if kind in ("try_wait", "test_wait"):
        pred, addr, arg = ins.operands[0], ins.operands[1], ins.operands[2]
        parity = "parity" in ins.parts
        want = st.read(arg, "u32" if parity else "u64").astype(np.int64)[lanes]
        addrs_ = shared_addrs(st, addr, mask)
        done = np.zeros(st.n, bool)
        for a in np.unique(addrs_):
            sel = addrs_ == a
            bar = eng.barrier(a)
            ok = _phases_done(bar, want[sel], parity)
            if not ok.all() and eng.strict and eng.flush_barrier(bar.addr):
                ok = _phases_done(bar, want[sel], parity)
            got = lanes[sel][ok]
            done[got] = True
            if hz is not None:
                for w in np.unique(got // 32):
                    hz.acquire(int(w) * 32, bar)
        st.write_bits(pred, done.astype(np.uint64), mask)
        st.stall = mask & ~done
        return "stall" if st.stall.any() else None
    if kind == "inval":
        for a in shared_addrs(st, ins.operands[0], mask):
            eng.barriers.pop(int(a), None)
        return None
    raise _err(f"unsupported mbarrier operation {ins.opcode!r}")


def _phases_done(bar: MBarrier, want: np.ndarray, parity: bool) -> np.ndarray:
    if parity:  # the phase of parity `want` completed: the current phase has the other parity
        return (bar.phase & 1) != (want & 1)
    return bar.phase != want


def do_cp_async_mbarrier_arrive(st: "CtaState", ins: Instr, mask: np.ndarray, line: int) -> None:
    """cp.async.mbarrier.arrive[.noinc].shared.b64 [mbar]: arrive once every prior cp.async of
    the thread has completed. Without .noinc the pending count is first raised by one, so the
    arrival does not count towards the init count."""
    from tilegen.runtime.ptx.sim import tensor_ops

    eng = st.engine
    noinc = "noinc" in ins.parts
    for lane, a in zip(np.nonzero(mask)[0], shared_addrs(st, ins.operands[0], mask)):
        bar = eng.barrier(a)
        if not noinc:
            bar.pending += 1

        op = AsyncOp("cp.async.mbarrier.arrive", line, int(lane), lambda: None, int(a), arrive=True)

        def land(lane=int(lane), op=op) -> None:  # (written at the issuing warp's clock then)
            tensor_ops.retire_cp_async(st, lane, None if op.vc is None else int(op.vc[lane // 32]))

        op.land = land
        eng.issue(op)


# -- bulk and tensor copies ---------------------------------------------------------------------
def _tensor_maps(st: "CtaState") -> dict:
    return {addr: raw for addr, raw in st.params.values()}


def _tmap(st: "CtaState", m: int, lane: int) -> tensormap.TensorMap:
    """The map a copy issued by ``lane`` reads at ``m``: a kernel parameter, or a map in global
    memory, which the strict mode requires the lane to have acquired
    (``fence.proxy.tensormap::generic.acquire``) since its bytes were last written."""
    from tilegen.runtime.ptx.sim.memory import HEAP_BASE, LOCAL_WINDOW

    tmap = tensormap.decode(_tensor_maps(st).get(int(m), b""))
    if tmap is None and HEAP_BASE <= int(m) < LOCAL_WINDOW:  # a map in global memory
        try:
            raw = st.heap.read(int(m), 128)
            tmap = tensormap.decode(raw)
        except (IndexError, ValueError):
            tmap = None
        if tmap is not None and st.engine.strict:
            seen = getattr(st, "tmaps_acquired", {}).get((int(lane), int(m)))
            if seen != raw:
                raise _err(
                    f"a copy reads the tensor map at 0x{int(m):x} in global memory, which its "
                    "thread has not acquired (fence.proxy.tensormap::generic.acquire) since "
                    "the map was " + ("last written" if seen is not None else "written")
                )
    if tmap is None:
        raise _err(f"no tensor map at address 0x{int(m):x}")
    return tmap


def acquire_tmaps(st: "CtaState", ins, mask: np.ndarray) -> None:
    """``fence.proxy.tensormap::generic.acquire [addr], 128``: each lane has acquired the map's
    bytes as they are now (what :func:`_tmap` checks in the strict mode)."""
    if not st.engine.strict:
        return
    acquired = st.__dict__.setdefault("tmaps_acquired", {})
    for lane, a in zip(np.nonzero(mask)[0].tolist(), addrs(st, ins.operands[0], mask).tolist()):
        try:
            acquired[lane, int(a)] = st.heap.read(int(a), 128)
        except (IndexError, ValueError):
            pass


def _box_elements(tmap: tensormap.TensorMap, coords: list[int]):
    """(global element addresses, in-bounds mask) of the box at `coords`, row-major with the
    innermost dimension fastest (the shared-memory order)."""
    rank = len(tmap.dims)
    box = tmap.box
    idx = np.indices(box[::-1]).reshape(rank, -1)[::-1]
    glob = idx + np.array(coords)[:, None]
    ok = np.all((glob >= 0) & (glob < np.array(tmap.dims)[:, None]), axis=0)
    gaddr = tmap.address + (glob * np.array(tmap.strides)[:, None]).sum(axis=0)
    return gaddr, ok


def _check_box(tmap: tensormap.TensorMap, ins: Instr, ncoords: int) -> None:
    rank = len(tmap.dims)
    if ncoords != rank:
        raise _err(f"{ncoords} coordinates for a rank-{rank} tensor map")
    if not tmap.box:
        raise _err(
            f"{ins.opcode}: the tensor map carries no box shape/swizzle (they live in the "
            "host-encoded CUtensorMap): pass run_ptx(tensor_maps=[{array, box, swizzle}])"
        )
    row = tmap.box[0] * tmap.elem_size
    if row % 16:
        raise _err(f"box row of {row} bytes is not a multiple of 16")
    if tmap.swizzle and row > tmap.swizzle:
        raise _err(f"box row of {row} bytes exceeds the {tmap.swizzle}-byte swizzle")


def _tensor_operand(st: "CtaState", op: Addr, mask: np.ndarray):
    """(map addresses per lane, coordinate arrays) of `[map, {c0, ...}]`."""
    maps = addrs(st, op, mask)
    if not op.extra or not isinstance(op.extra[0], Vec):
        raise _err("expected [tensorMap, {coordinates}]")
    coords = [st.read(c, "s32").astype(np.int64) for c in op.extra[0].items]
    return maps, coords


def do_bulk(st: "CtaState", ins: Instr, mask: np.ndarray, line: int) -> None:
    """cp.async.bulk[.tensor] copies, their commit_group / wait_group, and prefetches."""
    from tilegen.runtime.ptx.sim.tensor_ops import swizzle

    eng = st.engine
    parts = ins.parts
    lanes = np.nonzero(mask)[0]
    if "prefetch" in parts:
        return
    if parts[3] == "commit_group":
        for lane in lanes:
            groups = eng.bulk_groups.setdefault(int(lane), [[]])
            groups.append(groups[0])
            groups[0] = []
        return
    if parts[3] == "wait_group":
        keep = int(st.read(ins.operands[0], "u32")[lanes[0]]) if len(lanes) else 0
        for lane in lanes:
            groups = eng.bulk_groups.get(int(lane))
            if not groups:
                continue
            committed = groups[1:]
            done = committed[: max(len(committed) - keep, 0)]
            for group in done:
                for op in group:
                    eng.finish(op)
            eng.bulk_groups[int(lane)] = [groups[0]] + committed[len(done) :]
        eng.pending = [op for op in eng.pending if not op.done]
        return
    if "multicast::cluster" in parts and "tensor" not in parts:
        raise _err(f"{ins.opcode}: multicast bulk copies (not tensor) are not simulated")
    if "im2col" in parts or any(p.startswith("im2col") for p in parts):
        raise _err(f"{ins.opcode}: im2col tensor copies are not simulated")
    tensor = "tensor" in parts
    to_shared = parts[5 if tensor else 3].startswith("shared")
    if tensor and to_shared:
        _tma_load(st, ins, mask, line, swizzle)
    elif tensor:
        _tma_store(st, ins, mask, line, swizzle)
    elif to_shared:
        _bulk_load(st, ins, mask, line)
    else:
        _bulk_store(st, ins, mask, line)


def _tma_load(st, ins, mask, line, swizzle) -> None:
    """A tensor copy into shared memory; ``.multicast::cluster`` copies the box to the same
    offset in every CTA of its 16-bit CTA mask, each completing on its own barrier at the
    barrier's offset."""
    eng = st.engine
    dst, src, mbar = ins.operands[:3]
    maps, coords = _tensor_operand(st, src, mask)
    lanes = np.nonzero(mask)[0]
    dsts, bars = shared_addrs(st, dst, mask), shared_addrs(st, mbar, mask)
    cmask = st.read(ins.operands[3], "u16") if "multicast::cluster" in ins.parts else None
    for k, (lane, d, m, b) in enumerate(zip(lanes, dsts, maps, bars)):
        deltas = [0]
        if cmask is not None:
            bits, own = int(cmask[lane]), int(st.rank[lane])
            if not bits or bits >> st.csize:
                raise _err(f"multicast CTA mask 0x{bits:x} for a cluster of {st.csize} CTAs")
            step = int(st.shared_stride)
            deltas = [(r - own) * step for r in range(st.csize) if bits >> r & 1]
        tmap = _tmap(st, m, lane)
        if not tmap.box and "1d" in ins.parts and not eng.strict:
            _tma_load_1d_unboxed(st, ins, int(lane), int(d), tmap, int(coords[0][lane]), b, line)
            continue
        _check_box(tmap, ins, len(coords))
        stride = int(st.shared_stride)
        if stride and int(d) // stride != int(b) // stride and "cta_group::2" not in ins.parts:
            raise _err(
                "the mbarrier of a tensor copy is in another CTA than its destination "
                "(only .cta_group::2 may signal the peer CTA's barrier)"
            )
        if int(d) % 128:
            raise _err(f"tensor copy destination 0x{int(d):x} is not 128-byte aligned")
        gaddr, ok = _box_elements(tmap, [int(c[lane]) for c in coords])
        es = tmap.elem_size
        n = gaddr.size
        saddr = swizzle(int(d) + np.arange(n) * es, tmap.swizzle, tmap.swizzle_atom)

        for delta in deltas:

            def land(gaddr=gaddr, ok=ok, saddr=saddr + delta, es=es, tmap=tmap) -> None:
                data = np.zeros(gaddr.size, np.uint64)
                if ok.any():
                    data[ok] = st.heap.load(gaddr[ok], es)
                if tmap.oob_nan and not ok.all():
                    data[~ok] = {2: 0x7FFF, 4: 0x7FFFFFFF, 8: 0x7FFFFFFFFFFFFFFF}.get(es, 0)
                st.shared.raw_store(saddr, es, data)

            bd = int(b) + delta
            eng.barrier(bd)  # must exist at issue
            span = (int(d) + delta, int(d) + delta + n * es)
            eng.issue(
                AsyncOp("cp.async.bulk.tensor", line, int(lane), land, bd, tx=n * es, writes=[span])
            )


def _tma_load_1d_unboxed(st, ins, lane, d, tmap, c0, b, line) -> None:
    """A 1-D map without a box (run_ptx inferred it): the box is the mbarrier's expected bytes.
    Only in the default mode (the strict mode needs the real box)."""
    eng = st.engine
    bar = eng.barrier(b)

    def copy(nbytes: int) -> None:
        n = nbytes // tmap.elem_size
        idx = c0 + np.arange(n)
        ok = (idx >= 0) & (idx < tmap.dims[0])
        data = np.zeros(n, np.uint64)
        data[ok] = st.heap.load(tmap.address + idx[ok] * tmap.strides[0], tmap.elem_size)
        st.shared.raw_store(d + np.arange(n) * tmap.elem_size, tmap.elem_size, data)
        eng.complete_tx(bar, nbytes, line)

    if bar.tx > 0:
        copy(bar.tx)
    else:
        st.unboxed = getattr(st, "unboxed", {})
        st.unboxed.setdefault(int(b), []).append(copy)


def expect_unboxed(st: "CtaState", addr: int) -> None:
    """Hand the expected bytes of a phase to 1-D copies that waited to learn their size."""
    queue = getattr(st, "unboxed", {}).pop(int(addr), None)
    if not queue:
        return
    bar = st.engine.barrier(addr)
    share = bar.tx // len(queue)
    for copy in queue:
        copy(share)


def _tma_store(st, ins, mask, line, swizzle) -> None:
    eng = st.engine
    dst, src = ins.operands[:2]
    maps, coords = _tensor_operand(st, dst, mask)
    lanes = np.nonzero(mask)[0]
    op_kind = next((p for p in ins.parts if p in ("add", "min", "max", "inc", "dec")), None)
    for lane, m, s in zip(lanes, maps, shared_addrs(st, src, mask)):
        tmap = _tmap(st, m, lane)
        _check_box(tmap, ins, len(coords))
        gaddr, ok = _box_elements(tmap, [int(c[lane]) for c in coords])
        es = tmap.elem_size
        saddr = swizzle(int(s) + np.arange(gaddr.size) * es, tmap.swizzle, tmap.swizzle_atom)
        data = st.shared.raw_load(saddr, es)  # read at issue; written at completion

        def land(gaddr=gaddr, ok=ok, data=data, es=es) -> None:
            if not ok.any():
                return
            if op_kind is None:
                st.heap.store(gaddr[ok], es, data[ok])
            else:
                raise _err(f"{ins.opcode}: reduction tensor stores are not simulated")

        op = AsyncOp(
            "cp.async.bulk.tensor (store)",
            line,
            int(lane),
            land,
            reads=[(int(s), int(s) + gaddr.size * es)],
        )
        eng.bulk_groups.setdefault(int(lane), [[]])[0].append(op)
        eng.issue(op)


def _bulk_load(st, ins, mask, line) -> None:
    eng = st.engine
    dst, src, size, mbar = ins.operands[:4]
    sizes = st.read(size, "u32")
    lanes = np.nonzero(mask)[0]
    from_shared = "shared::cta" in ins.parts[4:] or ins.parts[4].startswith("shared")
    for lane, d, s, b in zip(
        lanes, shared_addrs(st, dst, mask), addrs(st, src, mask), shared_addrs(st, mbar, mask)
    ):
        n = int(sizes[lane])
        if n % 16 or int(d) % 16 or int(s) % 16:
            raise _err(f"bulk copy of {n} bytes from 0x{int(s):x} to 0x{int(d):x}: 16-byte units")

        def land(d=int(d), s=int(s), n=n) -> None:
            if from_shared:
                raw = st.shared.raw_load(np.arange(s, s + n), 1)
            else:
                raw = st.heap.load(np.arange(s, s + n), 1)
            st.shared.raw_store(np.arange(d, d + n), 1, raw)

        eng.barrier(b)
        eng.issue(
            AsyncOp(
                "cp.async.bulk", line, int(lane), land, int(b), tx=n, writes=[(int(d), int(d) + n)]
            )
        )


def _bulk_store(st, ins, mask, line) -> None:
    eng = st.engine
    dst, src, size = ins.operands[:3]
    sizes = st.read(size, "u32")
    lanes = np.nonzero(mask)[0]
    for lane, d, s in zip(lanes, addrs(st, dst, mask), shared_addrs(st, src, mask)):
        n = int(sizes[lane])
        if n % 16 or int(d) % 16 or int(s) % 16:
            raise _err(f"bulk copy of {n} bytes from 0x{int(s):x} to 0x{int(d):x}: 16-byte units")
        raw = st.shared.raw_load(np.arange(int(s), int(s) + n), 1)

        def land(d=int(d), raw=raw, n=n) -> None:
            st.heap.store(np.arange(d, d + n), 1, raw)

        op = AsyncOp("cp.async.bulk (store)", line, int(lane), land, reads=[(int(s), int(s) + n)])
        eng.bulk_groups.setdefault(int(lane), [[]])[0].append(op)
        eng.issue(op)
