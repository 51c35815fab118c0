"""mbarrier objects, `elect.sync` and bulk async copies (`cp.async.bulk`, non-tensor).

Copies complete at issue (their transaction bytes are credited to the mbarrier at once). A
`try_wait`/`test_wait` that would return false instead parks the lane to retry the instruction
later (`stall`), which is what the spin loops compilers emit around it would do anyway."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tilegen.runtime.ptx.parser import Instr, Reg
from tilegen.runtime.ptx.sim import tensormap

if TYPE_CHECKING:
    from tilegen.runtime.ptx.sim.cta import CtaState


@dataclass
class MBarrier:
    count: int
    pending: int
    tx: int = 0
    phase: int = 0
    queue: list = field(default_factory=list)  # tensor copies waiting to learn their box size

    def expect(self, nbytes: int) -> None:
        """Add expected transaction bytes; queued 1-D tensor copies take equal shares."""
        self.tx += nbytes
        if self.queue and self.tx > 0:
            share = self.tx // len(self.queue)
            for copy in self.queue:
                copy(share)
                self.tx -= share
            self.queue.clear()

    def settle(self) -> None:
        if self.pending <= 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count


def _err(msg: str) -> Exception:
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    return PtxSimError(msg)


def _addrs(st: "CtaState", op, mask: np.ndarray) -> np.ndarray:
    base = np.zeros(st.n, np.int64) if op.base is None else st.bits(op.base).astype(np.int64)
    return (base + op.offset)[mask]


def _barrier(st: "CtaState", addr: int) -> MBarrier:
    bar = st.mbarriers.get(int(addr))
    if bar is None:
        raise _err(f"mbarrier at shared address 0x{int(addr):x} was never initialised")
    return bar


def do_mbarrier(st: "CtaState", ins: Instr, mask: np.ndarray) -> str | None:
    kind = ins.parts[1]
    lanes = np.nonzero(mask)[0]
    if kind == "init":
        counts = st.read(ins.operands[1], "u32")
        for lane, a in zip(lanes, _addrs(st, ins.operands[0], mask)):
            st.mbarriers[int(a)] = MBarrier(int(counts[lane]), int(counts[lane]))
        return None
    if kind == "arrive":
        dest, addr, rest = ins.operands[0], ins.operands[1], ins.operands[2:]
        expect = "expect_tx" in ins.parts
        tx = st.read(rest[0], "u32") if expect else None
        rest = rest[1:] if expect else rest
        counts = st.read(rest[0], "u32") if rest else np.ones(st.n, np.uint32)
        tokens = np.zeros(st.n, np.uint64)
        for lane, a in zip(lanes, _addrs(st, addr, mask)):
            bar = _barrier(st, a)
            tokens[lane] = bar.phase
            if expect:
                bar.expect(int(tx[lane]))
            bar.pending -= int(counts[lane])
            bar.settle()
        if isinstance(dest, Reg):
            st.write_bits(dest, tokens, mask)
        return None
    if kind in ("try_wait", "test_wait"):
        pred, addr, arg = ins.operands[0], ins.operands[1], ins.operands[2]
        want = st.read(arg, "u64").astype(np.int64)
        done = np.zeros(st.n, bool)
        for lane, a in zip(lanes, _addrs(st, addr, mask)):
            bar = _barrier(st, a)
            if "parity" in ins.parts:
                done[lane] = (bar.phase & 1) != (want[lane] & 1)
            else:
                done[lane] = bar.phase != want[lane]
        st.write_bits(pred, done.astype(np.uint64), mask)
        st.stall = mask & ~done
        return "stall" if st.stall.any() else None
    raise _err(f"unsupported mbarrier operation {ins.opcode!r}")


def do_elect(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """elect.sync d|p, membermask: the lowest active lane of each warp is the leader."""
    lane = np.arange(st.n) % 32
    leader = np.zeros(st.n, np.uint64)
    is_leader = np.zeros(st.n, bool)
    warps = np.arange(st.n) // 32
    for w in np.unique(warps[mask]):
        first = int(np.nonzero((warps == w) & mask)[0][0])
        leader[warps == w] = lane[first]
        is_leader[first] = True
    st.write_bits(ins.operands[0], leader, mask)
    if len(ins.operands) > 2:
        st.write_bits(ins.operands[1], is_leader.astype(np.uint64), mask)


def do_cp_async(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    if "tensor" in ins.parts:
        _tensor_copy(st, ins, mask)
        return
    if "bulk" not in ins.parts or not ins.parts[3].startswith("shared"):
        raise _err(f"unsupported async copy {ins.opcode!r}")
    dst, src, size = ins.operands[:3]
    sizes = st.read(size, "u32")
    mbar = ins.operands[3] if len(ins.operands) > 3 else None
    for lane, d, s in zip(np.nonzero(mask)[0], _addrs(st, dst, mask), _addrs(st, src, mask)):
        n = int(sizes[lane])
        raw = st.heap.load(np.arange(s, s + n), 1)
        st.shared.store(np.arange(d, d + n), 1, raw)
        if mbar is not None:
            bar = _barrier(st, _addrs(st, mbar, mask)[0])
            bar.tx -= n
            bar.settle()


def _tensor_copy(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """cp.async.bulk.tensor.1d global -> shared through the launcher's tensor map. The box size
    is the mbarrier's expected transaction bytes (the map carries no box here); elements outside
    the tensor are filled with zeros, as in tile mode without OOB NaN fill."""
    if "1d" not in ins.parts or not ins.parts[5].startswith("shared"):
        raise _err(
            "only 1-D global->shared tensor copies are simulated; 2-D+ need the "
            "box shape and swizzle mode that only the host-encoded CUtensorMap holds"
        )
    dst, src, mbar = ins.operands[:3]
    maps = {addr: raw for addr, raw in st.params.values()}
    lanes = np.nonzero(mask)[0]
    coords = st.read(src.extra[0].items[0], "s32")
    for lane, d, m, b in zip(
        lanes, _addrs(st, dst, mask), _addrs(st, src, mask), _addrs(st, mbar, mask)
    ):
        tmap = tensormap.decode(maps.get(int(m), b""))
        if tmap is None:
            raise _err(f"no tensor map at param address 0x{int(m):x}")
        bar = _barrier(st, b)
        c0 = int(coords[lane])

        def copy(nbytes: int, d=int(d), tmap=tmap, c0=c0) -> None:
            n = nbytes // tmap.elem_size
            idx = c0 + np.arange(n)
            ok = (idx >= 0) & (idx < tmap.dims[0])
            data = np.zeros(n, np.uint64)
            data[ok] = st.heap.load(tmap.address + idx[ok] * tmap.strides[0], tmap.elem_size)
            st.shared.store(d + np.arange(n) * tmap.elem_size, tmap.elem_size, data)

        if bar.tx > 0:
            copy(bar.tx)
            bar.tx = 0
            bar.settle()
        else:
            bar.queue.append(copy)
