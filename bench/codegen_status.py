"""Per-kernel, per-arch status of tilegen's PTX backend on the cuTile corpus.

``python bench/codegen_status.py [KERNEL ...] [--arch sm_90 ...] [--no-sim] [--json OUT]``
prints, for every non-mma corpus kernel and target: does tilegen compile it to PTX (else the
diagnostic), does ptxas accept it (registers, spill bytes from ``ptxas -v``), and, for sm_90, does
the PTX run in the SIMT simulator (ptxsim) reproduce the expected outputs within the manifest's
tolerance. The last line is the ``SUPPORTED = {...}`` set for tests/test_codegen_corpus.py:
the kernels that pass every column on every requested arch.

tests/test_codegen_corpus.py imports :func:`measure` from here, so the table and the test agree.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import time
from contextlib import redirect_stdout
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from tilegen.runtime.paths import corpus_dir  # noqa: E402  (../shared or $TILEGEN_SHARED)

CORPUS = corpus_dir()
OUT = CORPUS / "out"
ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")
SIM_ARCH = "sm_90"
#: the issue's target set: every corpus kernel without tensor-core (mma) ops
TARGET_KERNELS = (
    "advanced_indexing atomics bit_ops casts cat_extract compare_select control_if for_loops "
    "gather_scatter int_ops iota layernorm math_f64 more_math newer_ops pack_bytes print_kernel "
    "raw_pointer reduce_cols_loop reduce_rows reshape_expand scan_cumsum softmax transpose2d "
    "unary_math vec_add"
).split()

#: the tensor-core kernels (outside the issue's target set, measured with --all)
MMA_KERNELS = (
    "batched_matmul flash_attention matmul_f16 matmul_f64 matmul_fp8 matmul_int8 matmul_tf32"
).split()
#: negative sample: a conforming compiler must refuse it (corpus README)
NEGATIVE_KERNELS = ("uint_floordiv_bug",)
ALL_KERNELS = tuple(TARGET_KERNELS) + tuple(MMA_KERNELS) + NEGATIVE_KERNELS

_LOCATED = re.compile(r"[^\s:][^:]*:\d+:\d+: error: ")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


@dataclass
class Status:
    kernel: str
    arch: str
    compiles: bool = False
    error: str = ""  # first diagnostic when it does not compile / assemble / match
    ptxas_ok: Optional[bool] = None
    regs: Optional[int] = None
    spill_stores: Optional[int] = None
    spill_loads: Optional[int] = None
    threads: Optional[int] = None
    sim_match: Optional[bool] = None  # None: not simulated
    compile_s: float = 0.0
    ptxas_s: float = 0.0
    sim_s: float = 0.0
    refused_by_tileiras: bool = False  # then "ok" means: refused with a located error

    @property
    def ok(self) -> bool:
        if self.refused_by_tileiras:
            return not self.compiles and bool(_LOCATED.match(self.error))
        return (
            self.compiles
            and bool(self.ptxas_ok)
            and self.spill_stores == 0
            and self.spill_loads == 0
            and self.sim_match is not False
        )


def tileiras_refuses(info: dict, arch: str) -> bool:
    """Whether NVIDIA's tileiras refuses the kernel for ``arch`` (manifest: the negative sample,
    or a recorded failed compile such as fp8 on sm_80): tilegen must refuse it too."""
    if info.get("expect_tileiras_fail"):
        return True
    return (
        info.get("variants", {}).get("default", {}).get("tileiras", {}).get(arch, {}).get("ok")
        is False
    )


def manifest() -> dict:
    data = json.loads((CORPUS / "manifest.json").read_text())
    return {k["name"]: k for k in data["kernels"]}


def parse_ptxas_v(text: str) -> tuple[Optional[int], Optional[int], Optional[int]]:
    """(registers, spill store bytes, spill load bytes) from ``ptxas -v`` output (None if absent;
    with several functions, the largest of each)."""
    regs = [int(x) for x in _PTXAS_REGS.findall(text)]
    spills = _PTXAS_SPILL.findall(text)
    return (
        max(regs) if regs else None,
        max(int(s) for s, _ in spills) if spills else None,
        max(int(ld) for _, ld in spills) if spills else None,
    )


def _first_error(diags) -> str:
    for d in diags:
        return d.format() if getattr(d, "loc", None) is not None else d.message
    return "failed without a diagnostic"


def compile_ptx(kernel: str, arch: str) -> str:
    """tilegen's PTX for a corpus kernel; raises RunError (with diagnostics)."""
    from tilegen.runtime.ptxsim import compile_to_ptx
    from tilegen.runtime.interp.api import load_module

    return compile_to_ptx(load_module(OUT / f"{kernel}.tileirbc"), arch)


def measure(kernel: str, arch: str, sim: bool = True, info: Optional[dict] = None) -> Status:
    """Compile, assemble and (sm_90, ``sim``) simulate one kernel; never raises for a kernel
    failure (the status says what failed)."""
    from tilegen.runtime.codegen.driver import PtxasError, assemble
    from tilegen.runtime.interp.api import (
        RunError,
        compare_expected,
        load_npz_args,
        load_module,
        load_npz_expected,
    )

    info = info or manifest().get(kernel, {})
    st = Status(kernel, arch, refused_by_tileiras=tileiras_refuses(info, arch))
    t0 = time.perf_counter()
    try:
        ptx = compile_ptx(kernel, arch)
    except RunError as e:
        st.compile_s = time.perf_counter() - t0
        st.error = _first_error(e.diagnostics)
        return st
    except Exception as e:  # a crash (a traceback on the command line), not a diagnostic
        st.compile_s = time.perf_counter() - t0
        st.error = f"internal error: {type(e).__name__}: {e}"
        return st
    st.compile_s = time.perf_counter() - t0
    st.compiles = True
    m = re.search(r"\.(?:reqntid|maxntid)\s+(\d+)", ptx)
    st.threads = int(m.group(1)) if m else None
    t0 = time.perf_counter()
    try:
        _cubin, log = assemble(ptx, int(arch[3:]), verbose=True)
        st.ptxas_ok = True
        st.regs, st.spill_stores, st.spill_loads = parse_ptxas_v(log)
    except PtxasError as e:
        st.ptxas_ok = False
        st.error = str(e).splitlines()[-1] if str(e) else "ptxas failed"
    st.ptxas_s = time.perf_counter() - t0
    if not (sim and arch == SIM_ARCH and st.ptxas_ok):
        return st
    from tilegen.runtime.ptxsim import run_ptxsim

    rtol, atol = info.get("tolerance_rtol_atol") or (1e-5, 1e-6)
    args, grid = load_npz_args(OUT / f"{kernel}.npz")
    t0 = time.perf_counter()
    try:
        printed = io.StringIO()
        with redirect_stdout(printed):  # print_kernel's printf output
            result = run_ptxsim(
                load_module(OUT / f"{kernel}.tileirbc"), args, grid or (1, 1, 1), arch
            )
        expected = load_npz_expected(OUT / f"{kernel}.npz")
        problems = compare_expected(result, expected, rtol, atol)
        if not expected:
            problems.append("the npz holds no expected__<name> arrays")
        want_stdout = info.get("expected_stdout")
        if want_stdout is not None and printed.getvalue() != want_stdout:
            problems.append(f"stdout {printed.getvalue()!r} != expected {want_stdout!r}")
        st.sim_match = not problems
        if problems:
            st.error = f"ptxsim mismatch: {problems[0]}"
    except RunError as e:
        st.sim_match = False
        st.error = "ptxsim: " + _first_error(e.diagnostics)
    except Exception as e:  # a simulator crash is a failed run, reported, not raised
        st.sim_match = False
        st.error = f"ptxsim crashed: {type(e).__name__}: {e}"
    st.sim_s = time.perf_counter() - t0
    return st


def _cell(st: Status) -> str:
    if st.refused_by_tileiras:
        return "refused (ok)" if st.ok else "refused: NOT by tilegen"
    if not st.compiles:
        return "no-compile"
    if not st.ptxas_ok:
        return "ptxas-FAIL"
    text = f"r{st.regs} s{st.spill_stores}/{st.spill_loads}"
    if st.sim_match is not None:
        text += " sim:" + ("ok" if st.sim_match else "FAIL")
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernels", nargs="*", help=f"default: the {len(TARGET_KERNELS)} target kernels")
    p.add_argument(
        "--all", action="store_true", help="also the mma kernels and the negative sample"
    )
    p.add_argument("--arch", action="append", choices=ARCHS, help="default: all four")
    p.add_argument("--no-sim", action="store_true", help="skip the sm_90 ptxsim run")
    p.add_argument("--json", metavar="OUT", help="also write every status as JSON")
    args = p.parse_args(argv)
    kernels = args.kernels or (ALL_KERNELS if args.all else TARGET_KERNELS)
    archs = args.arch or list(ARCHS)
    info = manifest()
    rows: list[Status] = []
    print(f"{'kernel':20s} " + " ".join(f"{a:24s}" for a in archs) + " first problem")
    for k in kernels:
        sts = [measure(k, a, not args.no_sim, info.get(k)) for a in archs]
        rows += sts
        problem = next((f"[{s.arch}] {s.error}" for s in sts if s.error), "")
        print(f"{k:20s} " + " ".join(f"{_cell(s):24s}" for s in sts) + " " + problem[:150])
        sys.stdout.flush()
    supported = sorted(
        k
        for k in kernels
        if k not in NEGATIVE_KERNELS
        and all(s.ok for s in rows if s.kernel == k and s.arch in archs)
    )
    sim_times = [s.sim_s for s in rows if s.sim_match is not None]
    print(
        f"\ncompile {sum(s.compile_s for s in rows):.1f}s, ptxas {sum(s.ptxas_s for s in rows):.1f}s,"
        f" ptxsim {sum(sim_times):.1f}s over {len(sim_times)} kernel(s)"
    )
    print(f"{len(supported)}/{len(kernels)} pass on {','.join(archs)}")
    print("SUPPORTED = {" + ", ".join(repr(k) for k in supported) + "}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(s) for s in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
