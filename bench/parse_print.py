"""Parse + verify + print timings (not a test). ``make bench`` or ``python bench/parse_print.py``.

Inputs: NVIDIA's test/Dialect/CudaTile/arith.mlir and the largest corpus ``.mlir`` (a bare
``entry`` as tileirdisasm prints it, wrapped in ``cuda_tile.module @kernels``). For each: the
median of N in-process runs of tilegen-opt's pipeline, the median wall time of the
``tilegen-opt`` process (Python start-up included), and, as a reference point, the median wall
time of NVIDIA's ``tileirdisasm`` on the matching ``.tileirbc`` (bytecode decode + print, C++).

On a shared, loaded machine wall times swing several-fold; CPU time (``time.process_time`` in
process, ``RUSAGE_CHILDREN`` for whole processes) is the steadier measure.  Parser/printer
tuning of 2026-11-21 (median of 5, CPU ms, before -> after): in-process arith.mlir 126 -> 109,
the largest corpus file (atomics.mlir, wrapped) 23 -> 19; ``import tilegen.tools.opt`` 78 -> 63
and ``tilegen-opt --help`` 79 -> 61 (pass modules load on first use); ``tilegen-opt`` on
arith.mlir 245 -> 216.  What remains is mostly float literal encode/decode (Fraction arithmetic
in runtime/asm/float_format.py, about a third of parse + print of arith.mlir), the verifier,
and dataclass creation at import (runtime/attributes.py, runtime/types.py).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tilegen.conformance import tests_root
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.tools import driver, opt

REPO = Path(__file__).resolve().parent.parent


def corpus_dir() -> Path | None:
    c = REPO.parent / "shared" / "corpus" / "cutile" / "out"
    return c if c.is_dir() else None


def write_bytecode(path: Path, tmpdir: Path, implicit_module: bool) -> Path | None:
    """The input as bytecode written by tilegen-translate (for a tileirdisasm reference time)."""
    translate = driver.find_tool("tilegen-translate")
    out = tmpdir / (path.stem + ".tileirbc")
    cmd = [translate or "tilegen-translate", "-mlir-to-cudatilebc", str(path), "-o", str(out)]
    if not implicit_module:
        cmd.insert(2, "-no-implicit-module")
    proc = subprocess.run(cmd, capture_output=True)
    return out if proc.returncode == 0 and out.exists() else None


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def in_process(text: str, name: str, no_implicit_module: bool) -> None:
    engine = DiagnosticEngine()
    out = opt.process_chunk(
        text, engine, opt.OptOptions(filename=name, no_implicit_module=no_implicit_module)
    )
    if out is None:
        msgs = "; ".join(d.message for d in engine.diagnostics[:2])
        raise RuntimeError(f"tilegen failed on {name}: {msgs}")


def run_proc(cmd: list[str]) -> None:
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--runs", type=int, default=5, help="runs per measurement (median)")
    args = ap.parse_args()

    cases: list[tuple[str, Path, bool, Path | None]] = []  # label, mlir, implicit module, bc
    root = tests_root()
    if root is not None:
        cases.append(
            ("arith.mlir (NVIDIA test)", root / "Dialect/CudaTile/arith.mlir", False, None)
        )
    corpus = corpus_dir()
    tmpdir = tempfile.mkdtemp()
    if corpus is not None:
        biggest = max(
            (p for p in corpus.glob("*.mlir") if ".v13_1" not in p.name),
            key=lambda p: p.stat().st_size,
        )
        wrapped = Path(tmpdir) / biggest.name
        body = "".join("  " + l for l in biggest.read_text().splitlines(True))
        wrapped.write_text("cuda_tile.module @kernels {\n" + body + "}\n")
        cases.append(
            (f"{biggest.name} (cuTile corpus)", wrapped, True, biggest.with_suffix(".tileirbc"))
        )
    if not cases:
        print("no inputs: ../shared is not on this machine")
        return 0

    opt_exe = driver.find_tool("tilegen-opt")
    disasm = driver.find_tool("tileirdisasm")
    print(f"median of {args.runs} runs; Python {sys.version.split()[0]}")
    header = f"{'input':<34} {'bytes':>7} {'in-process':>11} {'tilegen-opt':>12} {'tileirdisasm':>13} {'ratio':>7} {'(in-p)':>7}"
    print(header)
    print("-" * len(header))
    for label, path, no_implicit, bc in cases:
        text = path.read_text()
        try:
            in_process(text, str(path), no_implicit)
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"{label:<34} {len(text):>7}  not measurable: {e}")
            continue
        ms = median_ms(lambda: in_process(text, str(path), no_implicit), args.runs)
        flags = ["-no-implicit-module"] if no_implicit else []
        proc_ms = (
            median_ms(lambda: run_proc([opt_exe, str(path), *flags]), args.runs)
            if opt_exe
            else float("nan")
        )
        ref, ratio, ratio_in = "n/a", "", ""
        if bc is None:
            bc = write_bytecode(path, Path(tmpdir), not no_implicit)
        if disasm and bc is not None and bc.exists():
            ref_ms = median_ms(lambda: run_proc([disasm, str(bc)]), args.runs)
            ref = f"{ref_ms:.1f} ms"
            ratio, ratio_in = f"{proc_ms / ref_ms:.0f}x", f"{ms / ref_ms:.0f}x"
        print(
            f"{label:<34} {len(text):>7} {ms:>8.1f} ms {proc_ms:>9.1f} ms {ref:>13} "
            f"{ratio:>7} {ratio_in:>7}"
        )
    print("\nin-process: parse + verify + print inside one Python process (no start-up);")
    print(
        "tilegen-opt / tileirdisasm: whole-process wall time; ratio = tilegen-opt / tileirdisasm,"
    )
    print(
        "(in-p) = in-process / tileirdisasm. tileirdisasm reads NVIDIA's .tileirbc for corpus inputs"
    )
    print("and a tilegen-translate-written .tileirbc for the test file (it has none of its own).")
    shutil.rmtree(tmpdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
