"""Check spec/ptx rows' minimum `ptx_isa`/`sm` against the real assembler (ptxas).

For each row a minimal kernel is built that exercises the row's forms: for rows with `types:` it
is generated from the row itself (opcode, the fewest modifier groups ptxas needs, the type and one
register per operand, typed by `operand_types:`/`result:`); hand-written rows have no syntax in the
spec, so `HANDWRITTEN_PROBES` gives one base instruction (the row's minimum) plus sub-forms whose
own minimum is only reported. `row_check` does the suite's check (assembles at the stated minimum,
rejected one ISA step / one target below); `sweep` searches each form's real minimum.

ptxas only compiles for sm_75+, but it validates PTX written for any older `.target` (compiled
with `-arch=sm_75`), so targets from sm_20 and ISA versions from 2.0 can be probed. Below that
floor (sm_1x, PTX 1.x) a stated minimum is only checked for consistency.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from pathlib import Path

from tilegen.runtime.ptx.assemble import find_ptxas

# .target values probed, lowest first (all accepted by ptxas 13.x as PTX targets).
SM_LADDER = [20, 30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90]
SM_LADDER += [100, 103, 110, 120]
# PTX ISA versions that exist, lowest first (9.x capped by what the installed ptxas accepts).
ISA_LADDER = ["2.0", "2.1", "2.2", "2.3", "3.0", "3.1", "3.2", "4.0", "4.1", "4.2", "4.3", "5.0"]
ISA_LADDER += [f"6.{i}" for i in range(6)] + [f"7.{i}" for i in range(9)]
ISA_LADDER += [f"8.{i}" for i in range(9)] + [f"9.{i}" for i in range(10)]
TOP_SM = 100  # sweep searches below this target (newest with every probed feature)
ARCH_SPECIFIC = ["90a", "100a"]  # tried when a form fails on every plain target

_BITS = {"pred": 1, "b8": 8, "u8": 8, "s8": 8}
_BITS.update({t: 16 for t in ("b16", "u16", "s16", "f16", "bf16")})
_BITS.update({t: 32 for t in ("b32", "u32", "s32", "f32", "f16x2", "bf16x2")})
_BITS.update({t: 64 for t in ("b64", "u64", "s64", "f64", "f32x2")})
_REG = {1: "%p", 8: "%h", 16: "%h", 32: "%r", 64: "%rd"}
_WIDE = {16: "b32", 32: "b64"}

_SHARED = ".shared .align 16 .b8 smem[256];"
_VPRINTF = (
    ".extern .func (.param .b32 func_retval0) vprintf (.param .b64 format, .param .b64 valist);"
)
# Hand-written rows: (base instruction, sub-forms...); an entry may be (module prelude, body).
HANDWRITTEN_PROBES: dict[str, tuple] = {
    "mov": ("mov.b32 %r0, %r1;", "mov.pred %p0, %p1;", "mov.f64 %rd0, %rd1;"),
    "ld": ("ld.global.u32 %r0, [%rd1];", "ld.shared.v4.u32 {%r0, %r1, %r2, %r3}, [smem];"),
    "st": ("st.global.u32 [%rd1], %r0;", "st.shared.v2.u32 [smem], {%r0, %r1};"),
    "cvt": (
        "cvt.rn.f32.s32 %r0, %r1;",
        "cvt.rn.f16.f32 %h0, %r1;",
        "cvt.rn.bf16.f32 %h0, %r1;",
        "cvt.rn.f16x2.f32 %r0, %r1, %r2;",
        "cvt.rn.bf16x2.f32 %r0, %r1, %r2;",
    ),
    "cvta": ("cvta.global.u64 %rd0, %rd1;", "cvta.to.global.u64 %rd0, %rd1;"),
    "mapa": ("mapa.shared::cluster.u32 %r0, %r1, 1;", "mapa.u64 %rd0, %rd1, %r1;"),
    "bra": ("bra $L_end;", "bra.uni $L_end;"),
    "ret": ("ret;",),
    "exit": ("exit;",),
    "trap": ("trap;",),
    "bar.sync": ("bar.sync 0;",),
    "barrier.sync": ("barrier.sync 0;", "barrier.sync.aligned 0;"),
    "shfl.sync": (
        "shfl.sync.idx.b32 %r0, %r1, %r2, 31, -1;",
        "shfl.sync.bfly.b32 %r0|%p0, %r1, 1, 31, -1;",
    ),
    "vote.sync": ("vote.sync.all.pred %p0, %p1, -1;", "vote.sync.ballot.b32 %r0, %p1, -1;"),
    "atom": (
        "atom.global.add.u32 %r0, [%rd1], %r2;",
        "atom.shared.add.u32 %r0, [smem], %r2;",
        "atom.global.cas.b64 %rd0, [%rd1], %rd2, %rd3;",
        "atom.global.add.f32 %r0, [%rd1], %r2;",
    ),
    "fence": ("fence.sc.cta;", "fence.acq_rel.gpu;"),
    "ldmatrix": (
        "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r0}, [smem];",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r0, %r1, %r2, %r3}, [smem];",
    ),
    "stmatrix": (
        "stmatrix.sync.aligned.m8n8.x1.shared.b16 [smem], {%r0};",
        "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [smem], {%r0, %r1, %r2, %r3};",
    ),
    "griddepcontrol": ("griddepcontrol.wait;", "griddepcontrol.launch_dependents;"),
    "prefetch": ("prefetch.global.L1 [%rd1];",),
    "redux.sync": (
        "redux.sync.add.u32 %r0, %r1, -1;",
        "redux.sync.and.b32 %r0, %r1, -1;",
        "redux.sync.min.abs.NaN.f32 %r0, %r1, -1;",
    ),
    "mbarrier": (
        "mbarrier.init.shared.b64 [smem], %r1;",
        "mbarrier.arrive.shared.b64 %rd0, [smem];",
        "mbarrier.test_wait.shared.b64 %p0, [smem], %rd1;",
        "mbarrier.test_wait.parity.shared.b64 %p0, [smem], %r1;",
        "mbarrier.try_wait.shared.b64 %p0, [smem], %rd1;",
        "mbarrier.arrive.expect_tx.shared.b64 %rd0, [smem], %r1;",
    ),
    "elect.sync": ("elect.sync %r0|%p0, -1;",),
    "cp.async.bulk": (
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [smem], [%rd1], 16, [smem+128];",
    ),
    "setmaxnreg": ("setmaxnreg.inc.sync.aligned.u32 64;",),
    "tensormap": (
        "tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [smem], 0, 32;",
        "tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [smem], 0, %rd1;",
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
        " [%rd1], [smem], 128;",
    ),
    "membar": ("membar.gl;", "membar.cta;"),
    "nanosleep": ("nanosleep.u32 256;",),
    "cp.async.mbarrier.arrive": (
        "cp.async.mbarrier.arrive.shared.b64 [smem];",
        "cp.async.mbarrier.arrive.noinc.shared.b64 [smem];",
    ),
    "tcgen05.alloc": ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [smem], 32;",),
    "tcgen05.dealloc": ("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r1, 32;",),
    "tcgen05.relinquish_alloc_permit": (
        "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;",
    ),
    "tcgen05.mma": (
        "tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1;",
        "tcgen05.mma.cta_group::1.kind::tf32 [%r1], [%r3], %rd2, %r2, {%r4, %r4, %r4, %r4}, %p1;",
    ),
    "tcgen05.commit": (
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [smem];",
    ),
    "tcgen05.ld": (
        "tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r0}, [%r1];",
        "tcgen05.ld.sync.aligned.16x32bx2.x1.b32 {%r0}, [%r1], 16;",
    ),
    "tcgen05.st": ("tcgen05.st.sync.aligned.32x32b.x1.b32 [%r1], {%r0};",),
    "tcgen05.wait": ("tcgen05.wait::ld.sync.aligned;", "tcgen05.wait::st.sync.aligned;"),
    "tcgen05.fence": (
        "tcgen05.fence::before_thread_sync;",
        "tcgen05.fence::after_thread_sync;",
    ),
    "mma.sync": (
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"
        " {%r0, %r1, %r2, %r3}, {%r4, %r5}, {%r6}, {%r0, %r1, %r2, %r3};",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
        " {%r0, %r1, %r2, %r3}, {%r4, %r5, %r6, %r7}, {%r8, %r9}, {%r0, %r1, %r2, %r3};",
        "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%rd0, %rd1}, {%rd2}, {%rd3}, {%rd0, %rd1};",
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
        " {%r0, %r1, %r2, %r3}, {%r4, %r5, %r6, %r7}, {%r8, %r9}, {%r0, %r1, %r2, %r3};",
    ),
    "wgmma": (
        "wgmma.fence.sync.aligned;",
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"
        " {%r0, %r1, %r2, %r3}, %rd1, %rd2, 1, 1, 1, 0, 0;",
    ),
    "cp.async": (
        "cp.async.ca.shared.global [smem], [%rd1], 16;",
        "cp.async.cg.shared.global [smem], [%rd1], 16, %r1;",
        "cp.async.wait_group 0;",
    ),
    "prmt": ("prmt.b32 %r0, %r1, %r2, %r3;", "prmt.b32.f4e %r0, %r1, %r2, %r3;"),
    "bfi": ("bfi.b32 %r0, %r1, %r2, %r3, %r4;",),
    "call.vprintf": (
        (
            _VPRINTF,
            "{ .param .b64 p0; .param .b64 p1; .param .b32 rv;"
            " st.param.b64 [p0], %rd1; st.param.b64 [p1], %rd2;"
            " call.uni (rv), vprintf, (p0, p1); ld.param.b32 %r0, [rv]; }",
        ),
    ),
}


def isa_key(v: str) -> tuple[int, int]:
    major, minor = v.split(".")
    return int(major), int(minor)


def _sm_num(sm: int | str) -> int:
    return int(str(sm).rstrip("af"))


def kernel(isa: str, sm: int | str, body: str, prelude: str = "") -> str:
    addr = ".address_size 64\n" if isa_key(isa) >= (2, 3) else ""
    return (
        f".version {isa}\n.target sm_{sm}\n{addr}{prelude}\n{_SHARED}\n"
        ".visible .entry probe()\n{\n"
        "  .reg .pred %p<8>;\n  .reg .b16 %h<8>;\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<8>;\n"
        f"  {body}\n$L_end:\n  ret;\n}}\n"
    )


class Ptxas:
    """Runs ptxas on kernels; results memoised per (isa, sm, body) within the process."""

    def __init__(self, path: str | None = None, jobs: int | None = None) -> None:
        self.path = path or find_ptxas()
        if self.path is None:
            raise FileNotFoundError("ptxas not found")
        self.jobs = jobs or max(2, min(4, os.cpu_count() or 2))
        self._tmp = tempfile.TemporaryDirectory(prefix="ptxprobe-")
        self._memo: dict[tuple, tuple[bool, str]] = {}
        self._n = 0
        self.max_isa = self._max_isa()

    def _max_isa(self) -> str:
        ok = [v for v in ISA_LADDER if isa_key(v) >= (8, 0)]
        best = "8.0"
        for v in ok:  # ptxas says "Unsupported .version" past its newest; stop at the first gap
            if self.assemble(v, 90, "")[0]:
                best = v
            elif isa_key(v) > isa_key("8.8"):
                break
        return best

    def isa_ladder(self) -> list[str]:
        return [v for v in ISA_LADDER if isa_key(v) <= isa_key(self.max_isa)]

    def assemble(self, isa: str, sm: int | str, body: str, prelude: str = "") -> tuple[bool, str]:
        key = (isa, str(sm), body, prelude)
        if key in self._memo:
            return self._memo[key]
        self._n += 1
        src = Path(self._tmp.name) / f"k{self._n}_{os.getpid()}_{id(key)}.ptx"
        src.write_text(kernel(isa, sm, body, prelude))
        arch = f"sm_{sm}" if _sm_num(sm) >= 75 else "sm_75"
        r = subprocess.run(
            [self.path, f"-arch={arch}", str(src), "-o", os.devnull],
            capture_output=True,
            text=True,
        )
        src.unlink(missing_ok=True)
        msg = " ".join(r.stderr.split())
        out = (r.returncode == 0, msg)
        self._memo[key] = out
        return out

    @lru_cache(maxsize=None)
    def isa_floor(self, sm: int | str) -> str | None:
        """Lowest ISA version that accepts `.target sm_XX` at all."""
        isas = self.isa_ladder()  # acceptance is monotone in the version: binary search
        if not self.assemble(isas[-1], sm, "")[0]:
            return None
        lo, hi = 0, len(isas) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.assemble(isas[mid], sm, "")[0]:
                hi = mid
            else:
                lo = mid + 1
        return isas[hi]

    def map(self, fn, items):
        with ThreadPoolExecutor(self.jobs) as ex:
            return list(ex.map(fn, items))

    @property
    def calls(self) -> int:
        return self._n


@dataclass
class Probe:
    """One instruction form to assemble: body text (and module prelude) plus a label."""

    label: str
    body: str
    prelude: str = ""
    base: bool = True  # base forms define the row's minimum; others are reported only


def _reg(ptype: str, idx: int) -> str:
    return f"{_REG[_BITS[ptype]]}{idx}"


def generic_instruction(row: dict, ptype: str, mods: list[str]) -> str:
    """`opcode.mods.type d, a, b...` with one register per operand of the right width."""
    otypes = dict(row.get("operand_types") or {})
    if row.get("result") == "wide":
        otypes.setdefault("d", _WIDE[_BITS[ptype]])
    for k, v in list(otypes.items()):
        if v == "wide":
            otypes[k] = _WIDE[_BITS[ptype]]
    regs = [_reg(otypes.get(op, ptype), i) for i, op in enumerate(row["operands"])]
    return f"{'.'.join([row['opcode'], *mods, ptype])} {', '.join(regs)};"


def _base_mods(px: Ptxas, row: dict, ptype: str) -> list[str] | None:
    """The fewest modifier groups (first value each) with which ptxas accepts the form."""
    groups = list((row.get("modifiers") or {}).items())
    for n in range(len(groups) + 1):
        for combo in combinations(groups, n):
            mods = [vals[0] for _, vals in combo]
            if px.assemble(px.max_isa, TOP_SM, generic_instruction(row, ptype, mods))[0]:
                return mods
    return None


def probes(px: Ptxas, row: dict, modifiers: bool = False) -> list[Probe]:
    """Base forms of `row` (one per type) and, with `modifiers`, one sub-form per modifier value."""
    if row.get("handwritten"):
        out = []
        for i, p in enumerate(HANDWRITTEN_PROBES.get(row["name"], ())):
            prelude, body = p if isinstance(p, tuple) else ("", p)
            out.append(Probe(body.split(" ")[0], body, prelude, base=i == 0))
        return out
    out = []
    for ptype in row.get("types") or []:
        mods = _base_mods(px, row, ptype)
        if mods is None:
            out.append(Probe(f"{row['opcode']}.{ptype} (no accepted modifier set)", "", base=True))
            continue
        out.append(
            Probe(".".join([row["opcode"], *mods, ptype]), generic_instruction(row, ptype, mods))
        )
        if not modifiers:
            continue
        for group, vals in (row.get("modifiers") or {}).items():
            for v in vals:
                if v in mods:
                    continue
                sub = [m for m in mods if m not in vals]
                groups = list((row.get("modifiers") or {}).keys())
                order = {g: i for i, g in enumerate(groups)}
                chosen = {g: m for g in groups for m in sub if m in row["modifiers"][g]}
                chosen[group] = v
                ordered = [chosen[g] for g in sorted(chosen, key=order.get)]
                text = generic_instruction(row, ptype, ordered)
                out.append(Probe(".".join([row["opcode"], *ordered, ptype]), text, base=False))
    return out


def combined(ps: list[Probe]) -> Probe:
    """All base forms of a row in one kernel (a row-level check is one ptxas call)."""
    base = [p for p in ps if p.base]
    preludes = sorted({p.prelude for p in base if p.prelude})
    return Probe(
        "+".join(p.label for p in base), "\n  ".join(p.body for p in base), "\n".join(preludes)
    )


def _prev(ladder: list, value) -> object | None:
    lower = [
        x
        for x in ladder
        if (isa_key(x) if isinstance(x, str) else x)
        < (isa_key(value) if isinstance(value, str) else value)
    ]
    return lower[-1] if lower else None


def arch_target(row: dict) -> str:
    """`sm` as a .target suffix; rows whose notes say they need `sm_XXa` probe that target."""
    sm = int(row["sm"])
    return f"{sm}a" if f"sm_{sm}a" in (row.get("notes") or "") else str(sm)


@dataclass
class RowCheck:
    name: str
    stated: tuple[str, int]
    probed: str  # combined probe label, or "" when the row has no probe
    at_min: tuple[bool, str] | None = None  # (ok, ptxas message) at sm, ISA max(stated, floor)
    sm_below: tuple[int, bool, str] | None = None  # None: no lower target to try
    isa_target: str | None = None  # lowest target >= sm accepting the stated ISA (None: none)
    isa_at: tuple[bool, str] | None = None  # (ok, message) at (stated ISA, isa_target)
    isa_below: tuple[str, bool, str] | None = None  # None: no lower ISA valid for isa_target

    @property
    def ok(self) -> bool:
        if not self.probed:
            return True
        bad = [self.at_min and not self.at_min[0], self.isa_at and not self.isa_at[0]]
        bad += [self.sm_below and self.sm_below[1], self.isa_below and self.isa_below[1]]
        return not any(bad)

    def problems(self) -> list[str]:
        out = []
        if self.at_min and not self.at_min[0]:
            out.append(f"rejected at its minimum sm_{self.stated[1]}: {self.at_min[1][:300]}")
        if self.isa_at and not self.isa_at[0]:
            out.append(
                f"rejected at .version {self.stated[0]} sm_{self.isa_target}: "
                f"{self.isa_at[1][:300]}"
            )
        if self.sm_below and self.sm_below[1]:
            out.append(f"accepted one target below: sm_{self.sm_below[0]}")
        if self.isa_below and self.isa_below[1]:
            out.append(f"accepted one ISA below: {self.isa_below[0]} (sm_{self.isa_target})")
        return out


def row_check(px: Ptxas, row: dict) -> RowCheck:
    """(a) the row's base forms assemble at its minimum; (b) rejected one target / ISA below.

    The target check runs at ISA max(stated, the target's own floor); the ISA check runs on the
    lowest target >= sm that accepts the stated ISA (sm_32 needs PTX 4.0 but sm_35 takes 3.1).
    """
    isa, sm = row["ptx_isa"], int(row["sm"])
    out = RowCheck(row["name"], (isa, sm), "")
    ps = [p for p in probes(px, row) if p.base and p.body]
    if not ps:
        return out
    p = combined(ps)
    out.probed = p.label
    tgt = arch_target(row)
    floor = px.isa_floor(tgt)
    tisa = isa if floor is None or isa_key(isa) >= isa_key(floor) else floor
    out.at_min = px.assemble(tisa, tgt, p.body, p.prelude)
    prev_sm = _prev(SM_LADDER, sm)
    if prev_sm is not None and isa_key(tisa) >= isa_key(px.isa_floor(prev_sm) or "99.0"):
        out.sm_below = (prev_sm, *px.assemble(tisa, prev_sm, p.body, p.prelude))
    targets = [tgt] + [str(s) for s in SM_LADDER if s > sm]
    t = next((t for t in targets if isa_key(px.isa_floor(t) or "99.0") <= isa_key(isa)), None)
    if t is None:
        return out
    out.isa_target = t
    out.isa_at = px.assemble(isa, t, p.body, p.prelude)
    prev_isa = _prev(px.isa_ladder(), isa)
    if prev_isa is not None and isa_key(px.isa_floor(t)) <= isa_key(prev_isa):
        out.isa_below = (prev_isa, *px.assemble(prev_isa, t, p.body, p.prelude))
    return out


@dataclass
class FormMin:
    label: str
    isa: str | None  # None: never accepted
    sm: str | None
    isa_at_floor: bool = False  # the ISA found is just the lowest one the target allows
    message: str = ""
    base: bool = True  # a base form (defines the row minimum) or a reported sub-form


def form_minimum(px: Ptxas, p: Probe) -> FormMin:
    """Lowest target (at the newest ISA), then lowest ISA at that target, by binary search."""
    ladder = [s for s in SM_LADDER if s <= TOP_SM]
    ok, msg = px.assemble(px.max_isa, TOP_SM, p.body, p.prelude)
    if not ok:
        for a in ARCH_SPECIFIC:
            if px.assemble(px.max_isa, a, p.body, p.prelude)[0]:
                ladder = [a]
                break
        else:
            return FormMin(p.label, None, None, message=msg)
    lo, hi = 0, len(ladder) - 1  # ladder[hi] accepts
    while lo < hi:
        mid = (lo + hi) // 2
        if px.assemble(px.max_isa, ladder[mid], p.body, p.prelude)[0]:
            hi = mid
        else:
            lo = mid + 1
    sm = ladder[hi]
    best: tuple[str, str, bool] | None = None  # (isa, target, at the target's floor)
    above = [sm] + [s for s in SM_LADDER if isinstance(sm, int) and s > sm]
    for t in above:  # a higher target can have a lower floor (sm_35: 3.1, sm_32: 4.0)
        floor = px.isa_floor(t)
        if floor is None or (best and isa_key(floor) >= isa_key(best[0])):
            continue
        isas = [v for v in px.isa_ladder() if isa_key(v) >= isa_key(floor)]
        if best:
            isas = [v for v in isas if isa_key(v) < isa_key(best[0])]
        if not isas or not px.assemble(isas[-1], t, p.body, p.prelude)[0]:
            continue
        lo, hi = 0, len(isas) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if px.assemble(isas[mid], t, p.body, p.prelude)[0]:
                hi = mid
            else:
                lo = mid + 1
        best = (isas[hi], str(t), hi == 0 and isas[0] == floor)
    isa, _, at_floor = best
    return FormMin(p.label, isa, str(sm), isa_at_floor=at_floor)


def sweep(px: Ptxas, rows: list[dict], modifiers: bool = True) -> dict[str, list[FormMin]]:
    """Every probe-able form of every row with its real minimum (isa, sm)."""
    row_probes = px.map(lambda r: probes(px, r, modifiers), rows)
    flat = [(r["name"], p) for r, ps in zip(rows, row_probes) for p in ps if p.body]
    mins = px.map(lambda rp: form_minimum(px, rp[1]), flat)
    out: dict[str, list[FormMin]] = {r["name"]: [] for r in rows}
    for (name, p), m in zip(flat, mins):
        m.base = p.base
        out[name].append(m)
    return out


def row_minimum(forms: list[FormMin]) -> FormMin | None:
    """The row's minimum: the highest base-form minimum (every base form assembles there)."""
    base = [f for f in forms if f.base and f.isa is not None]
    if not base:
        return None
    sm = max(base, key=lambda f: _sm_num(f.sm)).sm
    isa = max(base, key=lambda f: isa_key(f.isa))
    return FormMin("row", isa.isa, sm, isa.isa_at_floor)
