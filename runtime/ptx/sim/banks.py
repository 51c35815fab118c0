"""Shared-memory bank conflicts of a simulated kernel (``run_ptx(bank_stats=...)``,
``bench/smem_banks.py``): per PTX line, how many shared-memory wavefronts its warps' accesses
take beside the fewest they could.

Shared memory has 32 banks of 4-byte words. A warp's access is served in *phases*: all 32
lanes for accesses of up to 4 bytes a lane, 16 lanes for 8 bytes, 8 lanes for 16 bytes, and
one phase per 8 x 8 matrix of ``ldmatrix`` / ``stmatrix`` (its 8 rows of 16 bytes). A phase
takes as many wavefronts as the most distinct words any one bank holds among its lanes' bytes
(lanes reading the same word share it). The ideal is one wavefront a phase, so ``wavefronts /
phases`` is the line's conflict degree: 1.0 conflict-free, 2.0 two-way.

This models the documented bank structure, not any one GPU's timing: what ncu calls
"shared memory bank conflicts" (``l1tex__data_bank_conflicts_pipe_lsu_mem_shared``) counts
the same excess wavefronts."""

from __future__ import annotations

import numpy as np

from tilegen.runtime.smem_banks import lanes_a_phase, phase_wavefronts  # noqa: F401


class BankStats:
    """Accumulates per PTX line: ``{"op", "count" (warp executions), "phases", "wavefronts"}``
    into ``lines`` (the dict ``run_ptx`` was given)."""

    def __init__(self, lines: dict) -> None:
        self.lines = lines

    def _add(self, ins, phases: int, waves: int) -> None:
        row = self.lines.setdefault(
            ins.line, {"op": ins.opcode, "count": 0, "phases": 0, "wavefronts": 0}
        )
        row["count"] += 1
        row["phases"] += phases
        row["wavefronts"] += waves

    def access(self, ins, lanes: np.ndarray, addrs: np.ndarray, size: int) -> None:
        """A ld/st.shared of ``size`` bytes a lane (all of a vector): ``addrs`` of ``lanes``."""
        per = lanes_a_phase(size)  # 32, 16 (8 B) or 8 (16 B)
        warps = lanes // 32
        for w in np.unique(warps):
            sel = warps == w
            lw, aw = lanes[sel] % 32, addrs[sel]
            phases = waves = 0
            for p in np.unique(lw // per):
                waves += phase_wavefronts(aw[lw // per == p], size)
                phases += 1
            self._add(ins, phases, waves)

    def matrices(self, ins, rows: np.ndarray, lanes: np.ndarray, count: int) -> None:
        """An ``ldmatrix`` / ``stmatrix`` of ``count`` 8 x 8 matrices: ``rows`` the row address
        every lane gives (lanes 8 m .. 8 m + 7 of a warp: matrix m's rows)."""
        for w in np.unique(lanes // 32):
            waves = 0
            for m in range(count):
                waves += phase_wavefronts(rows[w * 32 + 8 * m : w * 32 + 8 * m + 8], 16)
            self._add(ins, count, waves)


def report(lines: dict, ptx: str, top: int = 20) -> str:
    """The lines with the most excess wavefronts, as a markdown table, and the totals."""
    text = ptx.splitlines()
    rows = sorted(lines.items(), key=lambda kv: kv[1]["phases"] - kv[1]["wavefronts"])
    waves = sum(r["wavefronts"] for r in lines.values())
    phases = sum(r["phases"] for r in lines.values())
    out = [
        f"shared-memory wavefronts: {waves} for {phases} phases "
        f"({waves / max(phases, 1):.2f} a phase; {waves - phases} from bank conflicts)",
        "",
        "| line | instruction | warp executions | wavefronts a phase | excess wavefronts |",
        "|---:|---|---:|---:|---:|",
    ]
    for line, r in rows[:top]:
        if r["wavefronts"] == r["phases"]:
            break
        ins = text[line - 1].strip() if 0 < line <= len(text) else r["op"]
        out.append(
            f"| {line} | `{ins[:70]}` | {r['count']} | {r['wavefronts'] / r['phases']:.2f} | "
            f"{r['wavefronts'] - r['phases']} |"
        )
    return "\n".join(out)
