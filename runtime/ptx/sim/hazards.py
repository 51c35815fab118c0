"""The strict async mode's checks (`run_ptx(strict_async=True)`).

Happens-before is tracked with vector clocks at warp granularity: one clock per warp plus one
per mbarrier (an mbarrier's slot counts its completed phases). A warp's clock advances when it
releases (mbarrier arrive, `bar.sync`); an arrival joins the warp's clock into the mbarrier's
current phase, asynchronous signals (complete_tx, tcgen05.commit) join the issuing warp's clock
at issue; a completed phase publishes the join, and a successful `try_wait`/`test_wait` acquires
it; `bar.sync` joins the clocks of the warps it releases.

Per shared-memory byte the mode keeps the last generic write (warp, clock, line, fenced?), the
async-proxy write in flight or its completion (mbarrier slot and phase), async-proxy reads in
flight, and each warp's last read (clock, line); tensor memory keeps the tcgen05.mma writes in
flight or their completion. The four hazards, each an error naming both instructions:

* a read of a stage before its mbarrier phase completes (or by a warp that did not observe the
  completion): `ld.shared`/`ldmatrix`/wgmma/tcgen05.mma reading bytes an async copy writes;
  `tcgen05.ld` reading tensor memory an MMA writes before its commit's phase;
* an async-proxy read (wgmma, tcgen05.mma, TMA/bulk store) of bytes a generic write left
  without `fence.proxy.async` (or unordered by a barrier);
* an expected transaction count that differs from the bytes delivered (asyncproxy.Engine);
* an async write (TMA, bulk copy) into bytes some warp read that no barrier orders before the
  copy's issue, or that an async read in flight may still be reading (a stage overwritten while
  in use).

And, between warps, a generic read of bytes another warp wrote that no barrier (or mbarrier
phase) orders before the read: an exchange through shared memory without its `bar.sync`; and
a tcgen05.mma whose accumulator covers tensor memory some warp wrote by `tcgen05.st` (C
written before the loop, in its CTA or the pair's other one) that no barrier or mbarrier phase
orders before the MMA's issue; and a `tcgen05.dealloc` of columns another warp accessed by
`tcgen05.ld`/`st` with no barrier between, or that an MMA still writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tilegen.runtime.ptx.sim.asyncproxy import AsyncOp, MBarrier
    from tilegen.runtime.ptx.sim.cta import CtaState


def _bytes(entry) -> np.ndarray:
    """Byte offsets of an operation's read/write entry: a (start, stop) range or an array."""
    return np.arange(*entry) if isinstance(entry, tuple) else np.asarray(entry, np.int64)


#: no bytes (:meth:`Hazards._record_write`)
_NONE = np.zeros(0, np.int64)


def _err(msg: str) -> Exception:
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    return PtxSimError(msg)


class Hazards:
    def __init__(self, st: "CtaState") -> None:
        self.st = st
        self.W = max(1, (st.n + 31) // 32)
        self.A = self.W + 8
        self.vc = np.zeros((self.W, self.A), np.int64)
        self.vc[np.arange(self.W), np.arange(self.W)] = 1
        size = st.shared.data.size
        self.gw_warp = np.full(size, -1, np.int32)
        self.gw_clock = np.zeros(size, np.int64)
        self.gw_line = np.zeros(size, np.int32)
        self.gw_fenced = np.ones(size, bool)
        self.aw_op = np.zeros(size, np.int32)  # async write in flight (op id)
        self.aw_agent = np.full(size, -1, np.int32)  # completed async write: mbarrier slot
        self.aw_clock = np.zeros(size, np.int64)  # ... and the phase that completes it
        self.aw_line = np.zeros(size, np.int32)
        self.ar_op = np.zeros(size, np.int32)  # async read in flight (op id)
        # a completed wgmma read (op id): a write by a warp that has not observed one of its
        # warp group's wait_groups retiring it is an error (AsyncOp.retired: warp -> clock)
        self.ard_op = np.zeros((size, (self.W + 3) // 4), np.int32)  # per warp group
        self.rd_clock = np.zeros((size, self.W), np.int64)
        # each warp's last generic read (ld.shared, ldmatrix: its own; a wgmma's collective
        # reads are ard_op's)
        self.grd_clock = np.zeros((size, self.W), np.int32)
        self.wr_clock = np.zeros((size, self.W), np.int32)  # each warp's write of the value
        self.rd_line = np.zeros((size, self.W), np.int32)
        # per CTA simulated side by side (a cluster's): TMEM lane r of CTA k is row 128 k + r
        ctas = st.n // st.threads
        self.tm_op = np.zeros((128 * ctas, 512), np.int32)  # tcgen05.mma in flight (op id)
        self.tm_writer = np.zeros((128 * ctas, 512), np.int32)  # last mma to write it (op id)
        self.tm_reader = np.zeros((128 * ctas, 512), np.int32)  # last mma to read it as A
        # each cell's last tcgen05.st not yet followed by an MMA: (warp, its clock, line)
        self.ts_warp = np.full((128 * ctas, 512), -1, np.int32)
        self.ts_clock = np.zeros((128 * ctas, 512), np.int64)
        self.ts_line = np.zeros((128 * ctas, 512), np.int32)
        # each warp's last tcgen05.ld / st of a column of its CTA: (its clock, line)
        self.tx_clock = np.zeros((ctas, 512, self.W), np.int64)
        self.tx_line = np.zeros((ctas, 512, self.W), np.int32)
        self.ops: dict[int, "AsyncOp"] = {}
        self.bvc: dict[int, list[np.ndarray]] = {}  # mbarrier -> [current phase, completed]
        self.nagents = self.W
        self.bar_pending: dict = {}  # named barrier (or cluster) -> clocks its arrivals released
        self.cluster_done: dict = {}  # cluster -> clocks its completed barrier phase published

    # -- clocks -------------------------------------------------------------------------------
    def _grow(self) -> None:
        extra = self.A
        self.vc = np.pad(self.vc, ((0, 0), (0, extra)))
        for pair in self.bvc.values():
            pair[0] = np.pad(pair[0], (0, extra))
            pair[1] = np.pad(pair[1], (0, extra))
        self.A += extra  # (pending barrier clocks stay shorter: joined over their own size)

    def new_barrier(self, bar: "MBarrier") -> None:
        if self.nagents == self.A:
            self._grow()
        bar.agent = self.nagents
        self.nagents += 1
        self.bvc[bar.addr] = [np.zeros(self.A, np.int64), np.zeros(self.A, np.int64)]

    def clock_of_lane(self, lane: int) -> np.ndarray:
        return self.vc[lane // 32].copy()

    def arrive(self, lane: int, bar: "MBarrier") -> None:
        w = lane // 32
        cur = self.bvc[bar.addr][0]
        np.maximum(cur, self.vc[w], out=cur)
        self.vc[w, w] += 1

    def join_barrier(self, bar: "MBarrier", vc: np.ndarray) -> None:
        cur = self.bvc[bar.addr][0]
        np.maximum(cur[: vc.size], vc, out=cur[: vc.size])

    def phase_complete(self, bar: "MBarrier") -> None:
        cur, done = self.bvc[bar.addr]
        np.maximum(done, cur, out=done)
        done[bar.agent] = bar.phase
        cur[:] = 0

    def acquire(self, lane: int, bar: "MBarrier") -> None:
        w = lane // 32
        np.maximum(self.vc[w], self.bvc[bar.addr][1], out=self.vc[w])

    def bar_sync(self, lanes: np.ndarray, key: int | None = None) -> None:
        """The warps of ``lanes`` leave a ``bar.sync`` (barrier ``key``) together: each has
        seen what all of them, and the warps that passed it by ``bar.arrive``, did before."""
        warps = np.unique(lanes // 32)
        joined = self.vc[warps].max(axis=0)
        passed = self.bar_pending.pop(key, None)
        if passed is not None:
            np.maximum(joined[: passed.size], passed, out=joined[: passed.size])
        self.vc[warps] = joined
        self.vc[warps, warps] += 1

    def bar_arrive(self, lanes: np.ndarray, key: int) -> None:
        """``bar.arrive`` at barrier ``key``: the warps release what they did before it to the
        warps the barrier completes for (:meth:`bar_sync`) and go on."""
        warps = np.unique(lanes // 32)
        joined = self.vc[warps].max(axis=0)
        held = self.bar_pending.get(key)
        if held is not None:
            np.maximum(joined[: held.size], held, out=joined[: held.size])
        self.bar_pending[key] = joined
        self.vc[warps, warps] += 1

    def cluster_arrive(self, lanes: np.ndarray, cluster: int) -> None:
        """``barrier.cluster.arrive``: as :meth:`bar_arrive`, for the cluster's barrier."""
        self.bar_arrive(lanes, ("cluster", cluster))

    def cluster_complete(self, cluster: int) -> None:
        """The cluster barrier's phase completed: what its arrivals released is published."""
        self.cluster_done[cluster] = self.bar_pending.pop(("cluster", cluster), None)

    def cluster_acquire(self, lanes: np.ndarray, cluster: int) -> None:
        """``barrier.cluster.wait`` returned for ``lanes``: they acquire the completed phase."""
        done = self.cluster_done.get(cluster)
        if done is None:
            return
        for w in np.unique(lanes // 32):
            np.maximum(self.vc[w, : done.size], done, out=self.vc[w, : done.size])

    # -- messages -------------------------------------------------------------------------------
    def _line(self) -> int:
        return self.st.cur_ins.line if self.st.cur_ins is not None else 0

    def _op(self, op_id: int) -> str:
        op = self.ops.get(int(op_id))
        return f"{op.kind} (line {op.line})" if op else "an async operation"

    # -- generic proxy ----------------------------------------------------------------------------
    def _by_warp(self, addrs: np.ndarray, width: int):
        """(warp, byte offsets) groups of a generic access by the current instruction's lanes."""
        mask = self.st.cur_mask
        lanes = np.nonzero(mask)[0] if mask is not None else np.zeros(0, np.int64)
        offs = addrs.astype(np.int64)[:, None] + np.arange(width)
        if len(lanes) and len(addrs) > len(lanes) and len(addrs) % len(lanes) == 0:
            # a vector access: its addresses come element-major (handwritten.do_st / do_ld),
            # so element k of every lane - each byte stays its own warp's
            lanes = np.tile(lanes, len(addrs) // len(lanes))
        if len(lanes) != len(addrs):
            w = int(lanes[0] // 32) if len(lanes) else 0
            yield w, np.unique(offs)
            return
        warps = lanes // 32
        for w in np.unique(warps):
            yield int(w), np.unique(offs[warps == w])

    def _rows_by_warp(self, addrs: np.ndarray):
        """(warp, row mask) groups of an access's rows (one an address), as :meth:`_by_warp`
        groups its bytes."""
        mask = self.st.cur_mask
        lanes = np.nonzero(mask)[0] if mask is not None else np.zeros(0, np.int64)
        if len(lanes) and len(addrs) > len(lanes) and len(addrs) % len(lanes) == 0:
            lanes = np.tile(lanes, len(addrs) // len(lanes))
        if len(lanes) != len(addrs):
            yield (int(lanes[0] // 32) if len(lanes) else 0), np.ones(len(addrs), bool)
            return
        warps = lanes // 32
        for w in np.unique(warps):
            yield int(w), warps == w

    def check_observed(self, w: int, b: np.ndarray, what: str) -> None:
        pend = self.aw_op[b] != 0
        if pend.any():
            i = int(b[np.argmax(pend)])
            raise _err(
                f"{what} shared byte 0x{i:x} while {self._op(self.aw_op[i])} is "
                "still writing it: the mbarrier phase that completes the copy has not completed "
                "(a read before the wait?)"
            )
        agent = self.aw_agent[b]
        has = agent >= 0
        if has.any():
            need = self.aw_clock[b]
            bad = has & (self.vc[w, np.where(has, agent, 0)] < need)
            if bad.any():
                i = int(b[np.argmax(bad)])
                raise _err(
                    f"{what} shared byte 0x{i:x}, written by the async copy at line "
                    f"{self.aw_line[i]}, without having waited for the mbarrier phase that "
                    "completes it"
                )

    def generic_load(self, addrs: np.ndarray, width: int) -> None:
        line = self.st.cur_ins.line if self.st.cur_ins is not None else 0
        for w, b in self._by_warp(addrs, width):
            self.check_observed(w, b, f"warp {w} reads")
            self.check_written(w, b, line)
            self.rd_clock[b, w] = self.vc[w, w]
            self.grd_clock[b, w] = self.vc[w, w]
            self.rd_line[b, w] = line

    def check_written(self, w: int, b: np.ndarray, line: int) -> None:
        """Warp ``w`` reads bytes ``b``: a write of each byte's value by some warp must be
        ordered before the read (the reader's own, or one behind a ``bar.sync`` both took part
        in or an mbarrier phase). Warps that wrote the same value count alike (copies of an
        element written by every warp that holds one)."""
        wr = self.wr_clock[b]  # (byte, warp): each warp's write of the current value
        written = wr > 0
        anyw = written.any(axis=1)
        if not anyw.any():
            return
        seen = self.vc[w, : self.W]
        ok = (written & (wr <= seen[None, :])).any(axis=1)
        bad = anyw & ~ok
        if bad.any():
            k = int(np.argmax(bad))
            i = int(b[k])
            u = int(np.argmax(wr[k]))
            at = f" at line {self.gw_line[i]}" if self.gw_warp[i] == u else ""
            raise _err(
                f"warp {w} reads shared byte 0x{i:x} (line {line}) that warp {u} wrote{at} "
                "with no barrier between them"
            )

    def generic_store(self, addrs: np.ndarray, width: int) -> None:
        """A store's checks, before it writes; :meth:`values_written` records it after."""
        for w, b in self._by_warp(addrs, width):
            self._check_write(w, b)
        self._stored = addrs

    def values_written(self, idx, old, new, mine) -> None:
        """The store of :meth:`generic_store` wrote bytes ``idx`` (a row of bytes an address):
        ``old`` / ``new`` their values before and after, ``mine`` each row's own bytes. The
        writes of a changed byte's earlier value no longer count; a warp counts as a writer of
        the value a byte now holds where one of its rows wrote that value."""
        line = self.st.cur_ins.line if self.st.cur_ins is not None else 0
        changed = new != old
        self.wr_clock[idx[changed]] = 0
        holds = mine == new
        for w, rows in self._rows_by_warp(self._stored):
            self._check_read_before(w, np.unique(idx[rows][changed[rows]]), line)
            held = np.unique(idx[rows][holds[rows]])
            self._record_write(w, np.unique(idx[rows]), line, _NONE, held=held)

    def _check_read_before(self, w: int, b: np.ndarray, line: int) -> None:
        """Warp ``w`` changed bytes ``b``: another warp's last read of each must be ordered
        before (a barrier both took part in, or an mbarrier phase)."""
        if not b.size:
            return
        late = self.grd_clock[b] > self.vc[w][None, : self.W]  # [bytes, warps]
        late[:, w] = False
        if late.any():
            k, u = np.argwhere(late)[0]
            raise _err(
                f"warp {w} overwrites shared byte 0x{int(b[k]):x} (line {line}), which warp "
                f"{u} read at line {self.rd_line[b[k], u]} with no barrier between them"
            )

    def generic_write(self, w: int, b: np.ndarray, line: int, clock: int | None = None) -> None:
        """Warp ``w`` writes shared bytes ``b`` through the generic proxy (a cp.async when the
        wait that retires it runs, an ``stmatrix``): new values, as far as the checks know;
        ``clock``: the warp's clock the write counts at (default: now)."""
        self._check_write(w, b)
        self._record_write(w, b, line, None, clock)

    def _check_write(self, w: int, b: np.ndarray) -> None:
        self._check_retired(w, b, f"warp {w} overwrites")
        if (self.aw_op[b] != 0).any():
            i = int(b[np.argmax(self.aw_op[b] != 0)])
            raise _err(
                f"warp {w} writes shared byte 0x{i:x} while "
                f"{self._op(self.aw_op[i])} is still writing it"
            )
        if (self.ar_op[b] != 0).any():
            i = int(b[np.argmax(self.ar_op[b] != 0)])
            raise _err(
                f"warp {w} overwrites shared byte 0x{i:x}, which "
                f"{self._op(self.ar_op[i])} may still be reading (wait for it first: "
                "cp.async.bulk.wait_group.read, wgmma.wait_group, or the tcgen05.commit "
                "mbarrier)"
            )

    def _check_retired(self, w: int, b: np.ndarray, what: str) -> None:
        """A write into bytes a wgmma read: a ``wgmma.wait_group`` that retired the read must
        happen before it (in the writing warp, or before a barrier it passed)."""
        ids = self.ard_op[b]  # [bytes, warp groups]
        held = ids != 0
        if not held.any():
            return
        for oid in np.unique(ids[held]):
            op = self.ops.get(int(oid))
            retired = getattr(op, "retired", {}) if op is not None else {}
            if not any(self.vc[w, u] >= c for u, c in retired.items()):
                i = int(b[np.argmax((ids == oid).any(axis=1))])
                name = f"{op.kind} (line {op.line})" if op is not None else "a wgmma"
                raise _err(
                    f"{what} shared byte 0x{i:x}, which {name} read, but no "
                    "wgmma.wait_group retiring it happens before this write (wait for it, "
                    "then a barrier)"
                )
        self.ard_op[b] = 0

    def wgmma_retired(self, w: int, op: "AsyncOp") -> None:
        """Warp ``w``'s ``wgmma.wait_group`` retired ``op`` (its warp group's wgmma)."""
        if not hasattr(op, "retired"):
            op.retired = {}
        op.retired.setdefault(w, int(self.vc[w, w]))

    def _record_write(self, w: int, b: np.ndarray, line: int, changed, clock=None, held=None):
        """``changed`` (None: all of ``b``): the bytes whose value the write changed - the
        writes of their earlier values no longer count (:meth:`check_written`)."""
        clock = self.vc[w, w] if clock is None else clock
        self.gw_warp[b] = w
        self.gw_clock[b] = clock
        self.gw_line[b] = line
        self.gw_fenced[b] = False
        self.aw_agent[b] = -1
        self.wr_clock[b if changed is None else changed] = 0
        self.wr_clock[b if held is None else held, w] = clock

    def fence_proxy_async(self, lanes: np.ndarray) -> None:
        for w in np.unique(lanes // 32):
            self.gw_fenced[self.gw_warp == w] = True

    # -- async proxy ------------------------------------------------------------------------------
    def async_read(self, w: int, b: np.ndarray, what: str, op_id: int = 0) -> None:
        """An async-proxy read by warp `w` (at issue): the bytes must be complete, observed,
        fenced after generic writes and ordered after them."""
        self.check_observed(w, b, what)
        written = self.gw_warp[b] >= 0
        unfenced = written & ~self.gw_fenced[b]
        if unfenced.any():
            i = int(b[np.argmax(unfenced)])
            raise _err(
                f"{what} shared byte 0x{i:x} through the async proxy, but the generic write "
                f"at line {self.gw_line[i]} (warp {self.gw_warp[i]}) was not followed by "
                "fence.proxy.async"
            )
        if written.any():
            owner = np.where(written, self.gw_warp[b], 0)
            bad = written & (self.vc[w, owner] < self.gw_clock[b])
            if bad.any():
                i = int(b[np.argmax(bad)])
                raise _err(
                    f"{what} shared byte 0x{i:x}, written at line {self.gw_line[i]} by warp "
                    f"{self.gw_warp[i]} with no barrier in between"
                )
        self.rd_clock[b, w] = self.vc[w, w]
        self.rd_line[b, w] = self.st.cur_ins.line if self.st.cur_ins is not None else 0
        if op_id:
            self.ar_op[b] = op_id

    def async_issue(self, op: "AsyncOp") -> None:
        self.ops[op.id] = op
        w = op.lane // 32
        what = f"warp {w} reads" if op.line == self._line() else f"{op.kind} (line {op.line})"
        what = what if what.endswith("reads") else what + " reads"
        for entry in op.reads:
            self.async_read(w, _bytes(entry), what, op.id)
        for entry in op.writes:
            b = _bytes(entry)
            if (self.aw_op[b] != 0).any():
                i = int(b[np.argmax(self.aw_op[b] != 0)])
                raise _err(
                    f"the copy writes shared byte 0x{i:x} while {self._op(self.aw_op[i])} is "
                    "still writing it"
                )
            if (self.ar_op[b] != 0).any():
                i = int(b[np.argmax(self.ar_op[b] != 0)])
                raise _err(
                    f"the copy overwrites shared byte 0x{i:x} while {self._op(self.ar_op[i])} "
                    "may still be reading it (a stage reused before its reader completed)"
                )
            self._check_retired(w, b, "the copy overwrites")
            last = self.rd_clock[b]  # [bytes, warps]
            late = last > self.vc[w][None, : self.W]
            if late.any():
                bi, u = np.argwhere(late)[0]
                raise _err(
                    f"the copy overwrites shared byte 0x{int(b[bi]):x}, which warp {u} read at "
                    f"line {self.rd_line[b[bi], u]}, but nothing orders that read before the "
                    "copy (a stage refilled before its consumers released it)"
                )
            self.aw_op[b] = op.id
            self.aw_line[b] = op.line

    def async_complete(self, op: "AsyncOp") -> None:
        via = op.barrier if op.barrier is not None else getattr(op, "via", None)
        bar = self.st.engine.barriers.get(via) if via is not None else None
        for entry in op.writes:
            b = _bytes(entry)
            mine = self.aw_op[b] == op.id
            b = b[mine]
            self.aw_op[b] = 0
            self.aw_agent[b] = bar.agent if bar is not None else -1
            self.aw_clock[b] = bar.phase + 1 if bar is not None else 0
        for entry in op.reads:
            b = _bytes(entry)
            b = b[self.ar_op[b] == op.id]
            self.ar_op[b] = 0
            if op.kind.startswith("wgmma"):  # (observed once a wait_group retires it)
                self.ard_op[b, int(op.lane) // 128] = op.id
        if op.tmem is not None:
            rows, c0, c1 = op.tmem
            region = self.tm_op[rows, c0:c1]
            region[region == op.id] = 0
            self.tm_op[rows, c0:c1] = region

    # -- tensor memory --------------------------------------------------------------------------
    def tmem_write_issue(self, op: "AsyncOp") -> None:
        rows, c0, c1 = op.tmem
        self._stores_ordered(op, rows, c0, c1)
        if op.tmem_reads is not None:  # A from tensor memory: its rows stored before the issue
            ar, a0, a1 = op.tmem_reads
            self._stores_ordered(op, ar, a0, a1, "reads, as its A operand, tensor memory")
            self.tm_reader[ar, a0:a1] = op.id
        old, counts = np.unique(self.tm_writer[rows, c0:c1], return_counts=True)
        for oid, c in zip(old, counts):
            if oid and int(oid) in self.ops:
                self.ops[int(oid)].owned -= int(c)
        self.tm_op[rows, c0:c1] = op.id
        self.tm_writer[rows, c0:c1] = op.id
        op.owned = len(rows) * (c1 - c0)
        op.observers = []

    def commit_observe(self, ops: list, bar: "MBarrier") -> None:
        """A tcgen05.commit's arrival: observing its phase shows every tracked op complete."""
        for op in ops:
            op.observers.append((bar.agent, bar.phase + 1))

    def _stores_ordered(
        self,
        op: "AsyncOp",
        rows: np.ndarray,
        c0: int,
        c1: int,
        what: str = "accumulates into tensor memory",
    ) -> None:
        """An MMA's accumulator (or A) cells some warp wrote by ``tcgen05.st`` (C written
        before the loop, in its own CTA or the pair's other one; A converted by the consumers):
        that store must happen before the MMA's issue (a ``bar.sync``, or an mbarrier phase
        the issuer waited for)."""
        w = int(op.lane) // 32
        tw = self.ts_warp[rows, c0:c1]
        written = tw >= 0
        if not written.any():
            return
        seen = self.vc[w][np.where(written, tw, 0)]
        bad = written & (seen < self.ts_clock[rows, c0:c1])
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise _err(
                f"{op.kind} (line {op.line}), issued by warp {w}, {what} "
                f"(lane {int(rows[i]) % 128}, column {c0 + int(j)}) that warp "
                f"{int(tw[i, j])} wrote by tcgen05.st at line {int(self.ts_line[rows[i], c0 + j])}, "
                "but nothing orders that store before the MMA's issue (a barrier, or an "
                "mbarrier phase the issuing thread waited for)"
            )
        self.ts_warp[rows, c0:c1] = -1

    def tmem_access(
        self, w: int, rows: np.ndarray, c0: int, c1: int, store: bool, line: int = 0
    ) -> None:
        pend = self.tm_op[rows, c0:c1]
        if (pend != 0).any():
            op = int(pend[pend != 0][0])
            raise _err(
                f"warp {w} {'writes' if store else 'reads'} tensor memory while "
                f"{self._op(op)} is still writing it (wait for its tcgen05.commit mbarrier "
                "phase first)"
            )
        cta = int(rows[0]) // 128
        self.tx_clock[cta, c0:c1, w] = self.vc[w, w]
        self.tx_line[cta, c0:c1, w] = line
        writers = self.tm_writer[rows, c0:c1]
        if store:
            self._a_reads_done(w, rows, c0, c1)
            for oid, c in zip(*np.unique(writers, return_counts=True)):
                if oid and int(oid) in self.ops:
                    self.ops[int(oid)].owned -= int(c)
            self.tm_writer[rows, c0:c1] = 0
            self.ts_warp[rows, c0:c1] = w
            self.ts_clock[rows, c0:c1] = self.vc[w, w]
            self.ts_line[rows, c0:c1] = line
            return
        for oid in np.unique(writers):
            op = self.ops.get(int(oid)) if oid else None
            if op is None:
                continue
            if not any(self.vc[w, agent] >= clock for agent, clock in op.observers):
                raise _err(
                    f"warp {w} reads tensor memory written by {op.kind} (line {op.line}) "
                    "without having waited for an mbarrier phase that a tcgen05.commit "
                    "tracking it completes"
                )

    def _a_reads_done(self, w: int, rows: np.ndarray, c0: int, c1: int) -> None:
        """Warp ``w`` stores into tensor memory an MMA read as its A operand: that MMA must be
        complete, and ``w`` must have waited for an mbarrier phase a commit tracking it
        completes (else the store may change A under the MMA)."""
        readers = self.tm_reader[rows, c0:c1]
        for oid in np.unique(readers[readers != 0]):
            op = self.ops.get(int(oid))
            if op is None:
                continue
            if not op.done or not any(self.vc[w, ag] >= clk for ag, clk in op.observers):
                raise _err(
                    f"warp {w} writes tensor memory that {op.kind} (line {op.line}) still reads "
                    "as its A operand (wait for an mbarrier phase that a tcgen05.commit "
                    "tracking it completes first)"
                )
        self.tm_reader[rows, c0:c1] = 0

    def tmem_dealloc(self, w: int, cta: int, c0: int, c1: int, line: int) -> None:
        """Warp ``w`` frees columns ``c0 .. c1`` of its CTA's tensor memory: every warp's last
        ``tcgen05.ld`` / ``st`` of them must happen before (a barrier), and no MMA may still be
        writing them."""
        rows = slice(128 * cta, 128 * cta + 128)
        if (self.tm_op[rows, c0:c1] != 0).any():
            raise _err(
                f"tcgen05.dealloc (line {line}) by warp {w} frees tensor memory an MMA is still "
                "writing (wait for its tcgen05.commit mbarrier phase first)"
            )
        last = self.tx_clock[cta, c0:c1]  # (columns, warps)
        bad = last > self.vc[w][None, : self.W]
        bad[:, w] = False
        if bad.any():
            j, v = np.argwhere(bad)[0]
            raise _err(
                f"tcgen05.dealloc (line {line}) by warp {w} frees tensor memory (column "
                f"{c0 + int(j)}) that warp {int(v)} accessed by tcgen05.ld/st at line "
                f"{int(self.tx_line[cta, c0 + j, v])}, but nothing orders that access before "
                "the dealloc (a barrier)"
            )
        self.tx_clock[cta, c0:c1] = 0
